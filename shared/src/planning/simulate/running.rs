//! One ClusterQueue's admitted workloads on one flavor, kept in the order Kueue takes
//! preemption victims (pkg/scheduler/preemption/common/ordering.go, `CandidatesOrdering`):
//! lowest priority first, then the most recently admitted first. Kept in that order as they
//! start and stop, so a preemption reads only the few candidates it needs.

use super::job::Job;

/// A workload as a candidate: (priority, admission number, job), the most recent admission
/// having the highest number.
pub(super) type Admitted = (i32, u64, usize);

/// A removed workload's place until the group is next compacted.
const GONE: usize = usize::MAX;

#[derive(Debug, Clone, Default)]
pub(super) struct Running {
    /// By priority, ascending: each group's workloads in admission order, and how many of its
    /// places are [`GONE`]. A workload that stops leaves its place marked, and the group is
    /// compacted once half of it is gone, so a stop costs a binary search, not a shift of the
    /// rest.
    groups: Vec<Group>,
}

/// One priority's workloads: (admission number, job) in admission order.
#[derive(Debug, Clone)]
struct Group {
    priority: i32,
    workloads: Vec<(u64, usize)>,
    gone: usize,
}

impl Running {
    /// Adds a workload admitted after every other in the queue.
    pub fn push(&mut self, (priority, admission, job): Admitted) {
        match self.groups.binary_search_by_key(&priority, |g| g.priority) {
            Ok(g) => self.groups[g].workloads.push((admission, job)),
            Err(g) => self.groups.insert(
                g,
                Group {
                    priority,
                    workloads: vec![(admission, job)],
                    gone: 0,
                },
            ),
        }
    }

    pub fn remove(&mut self, (priority, admission, _): Admitted) {
        let Ok(g) = self.groups.binary_search_by_key(&priority, |g| g.priority) else {
            return;
        };
        let Group {
            workloads: group,
            gone,
            ..
        } = &mut self.groups[g];
        if let Ok(at) = group.binary_search_by_key(&admission, |(a, _)| *a)
            && group[at].1 != GONE
        {
            group[at].1 = GONE;
            *gone += 1;
            if *gone * 2 > group.len() {
                group.retain(|(_, job)| *job != GONE);
                *gone = 0;
            }
        }
    }

    /// The first workloads below `priority` (all, with `None`) in Kueue's victim order whose
    /// slices add up to `slices` (the last one crossing it); all of them if they do not.
    pub fn first(&self, below: Option<i32>, slices: u64, jobs: &[Job]) -> Vec<Admitted> {
        let mut taken = 0;
        let mut first = Vec::new();
        for group in &self.groups {
            if below.is_some_and(|b| group.priority >= b) {
                break;
            }
            let live = group.workloads.iter().rev().filter(|(_, job)| *job != GONE);
            for &(admission, job) in live {
                if taken >= slices {
                    return first;
                }
                taken += jobs[job].slices;
                first.push((group.priority, admission, job));
            }
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn victims_come_lowest_priority_then_newest_first() {
        let jobs: Vec<Job> = (0..14)
            .map(|j| {
                let kind = super::super::job::Kind::Replica {
                    cold_start_min: 0,
                    storage_cold_start_min: 0,
                    ready_at: None,
                };
                let part = super::super::job::Part::Replica;
                Job::queued(0, 0, 1 + j % 2, kind, 0, part, 0)
            })
            .collect();
        let mut r = Running::default();
        for (priority, admission, job) in [(5, 1, 10), (0, 2, 11), (5, 3, 12), (0, 4, 13)] {
            r.push((priority, admission, job));
        }
        let first = |r: &Running, below, slices| {
            r.first(below, slices, &jobs)
                .into_iter()
                .map(|(_, _, j)| j)
                .collect::<Vec<_>>()
        };
        assert_eq!(first(&r, None, u64::MAX), vec![13, 11, 12, 10]);
        assert_eq!(first(&r, Some(5), u64::MAX), vec![13, 11]);
        // Jobs 13 and 11 hold 2 slices each: the first already covers 2, the second crosses 3.
        assert_eq!(first(&r, None, 2), vec![13]);
        assert_eq!(first(&r, None, 3), vec![13, 11]);
        r.remove((0, 4, 13));
        r.remove((5, 1, 10));
        assert_eq!(first(&r, None, u64::MAX), vec![11, 12]);
    }
}
