//! One ClusterQueue's admitted workloads on one flavor, kept in the order Kueue takes
//! preemption victims (pkg/scheduler/preemption/common/ordering.go, `CandidatesOrdering`):
//! lowest priority first, then the most recently admitted first. Kept in that order as they
//! start and stop, so a preemption reads only the few candidates it needs; each workload
//! knows its place, so a stop finds it without a search.

/// A workload as a candidate: (priority, admission number, job), the most recent admission
/// having the highest number.
pub(super) type Admitted = (i32, u64, usize);

/// A removed workload's place until the group is next compacted.
const GONE: usize = usize::MAX;

#[derive(Debug, Clone, Default)]
pub(super) struct Running {
    /// By priority, ascending: each group's workloads in admission order, and how many of its
    /// places are [`GONE`]. A workload that stops leaves its place marked, and the group is
    /// compacted once half of it is gone, so a stop costs neither a search nor a shift of the
    /// rest.
    groups: Vec<Group>,
}

/// One priority's workloads: (admission number, job, slices) in admission order, the slices
/// kept beside the job so that reading candidates never reads the jobs.
#[derive(Debug, Clone)]
struct Group {
    priority: i32,
    workloads: Vec<(u64, usize, u64)>,
    gone: usize,
}

impl Running {
    /// Adds a workload holding `slices`, admitted after every other in the queue; returns its
    /// place.
    pub fn push(&mut self, (priority, admission, job): Admitted, slices: u64) -> usize {
        let g = match self.groups.binary_search_by_key(&priority, |g| g.priority) {
            Ok(g) => g,
            Err(g) => {
                let workloads = Vec::new();
                self.groups.insert(
                    g,
                    Group {
                        priority,
                        workloads,
                        gone: 0,
                    },
                );
                g
            }
        };
        let workloads = &mut self.groups[g].workloads;
        workloads.push((admission, job, slices));
        workloads.len() - 1
    }

    /// Removes the workload of `priority` at `place`; `moved(job, place)` tells each workload
    /// whose place changed.
    pub fn remove(&mut self, priority: i32, place: usize, mut moved: impl FnMut(usize, usize)) {
        let Ok(g) = self.groups.binary_search_by_key(&priority, |g| g.priority) else {
            return;
        };
        let Group {
            workloads: group,
            gone,
            ..
        } = &mut self.groups[g];
        debug_assert_ne!(group[place].1, GONE, "a workload stops once");
        group[place].1 = GONE;
        *gone += 1;
        if *gone * 2 > group.len() {
            let mut kept = 0;
            for at in 0..group.len() {
                let workload = group[at];
                if workload.1 != GONE {
                    group[kept] = workload;
                    moved(workload.1, kept);
                    kept += 1;
                }
            }
            group.truncate(kept);
            *gone = 0;
        }
    }

    /// Appends to `first` the first workloads a preemptor of priority `of` may evict, in
    /// Kueue's victim order, whose slices add up to `slices` (the last one crossing it); all of
    /// them if they do not. Those of lower priority may be; of `of`'s own priority, with
    /// `equal`, those for which it holds; with `of` `None`, every one. (Into the caller's list:
    /// a week asks this millions of times, and reads no group it cannot take from.)
    pub fn first(
        &self,
        of: Option<i32>,
        equal: Option<&dyn Fn(usize) -> bool>,
        slices: u64,
        first: &mut Vec<Admitted>,
    ) {
        let mut taken = 0;
        for group in &self.groups {
            let same = of == Some(group.priority);
            if of.is_some_and(|p| group.priority > p) || (same && equal.is_none()) {
                break;
            }
            let live =
                group.workloads.iter().rev().filter(|&&(_, job, _)| {
                    job != GONE && (!same || equal.is_some_and(|e| e(job)))
                });
            for &(admission, job, held) in live {
                if taken >= slices {
                    return;
                }
                taken += held;
                first.push((group.priority, admission, job));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn victims_come_lowest_priority_then_newest_first() {
        let mut r = Running::default();
        let mut places = [0; 15];
        for (priority, admission, job) in [(5, 1, 10), (0, 2, 11), (5, 3, 12), (0, 4, 13)] {
            // Odd jobs hold 2 slices, even ones 1.
            places[job] = r.push((priority, admission, job), 1 + job as u64 % 2);
        }
        let first = |r: &Running, below, slices| {
            let mut first = vec![(0, 0, 99)];
            r.first(below, None, slices, &mut first);
            first
                .into_iter()
                .skip(1)
                .map(|(_, _, j)| j)
                .collect::<Vec<_>>()
        };
        assert_eq!(first(&r, None, u64::MAX), vec![13, 11, 12, 10]);
        assert_eq!(first(&r, Some(5), u64::MAX), vec![13, 11]);
        // Of the preemptor's own priority, only those `equal` lets through, newest first.
        let mut some = Vec::new();
        r.first(Some(5), Some(&|job| job == 10), u64::MAX, &mut some);
        assert_eq!(
            some.iter().map(|v| v.2).collect::<Vec<_>>(),
            vec![13, 11, 10]
        );
        // Jobs 13 and 11 hold 2 slices each: the first already covers 2, the second crosses 3.
        assert_eq!(first(&r, None, 2), vec![13]);
        assert_eq!(first(&r, None, 3), vec![13, 11]);
        let stop = |r: &mut Running, places: &mut [usize; 15], priority, job: usize| {
            r.remove(priority, places[job], |moved, to| places[moved] = to);
        };
        stop(&mut r, &mut places, 0, 13);
        stop(&mut r, &mut places, 5, 10);
        assert_eq!(first(&r, None, u64::MAX), vec![11, 12]);
        // Two of priority 5's three gone: its group is compacted, job 12 taking its first place.
        places[14] = r.push((5, 5, 14), 1);
        stop(&mut r, &mut places, 5, 14);
        assert_eq!(places[12], 0);
        assert_eq!(first(&r, None, u64::MAX), vec![11, 12]);
        stop(&mut r, &mut places, 5, 12);
        assert_eq!(first(&r, None, u64::MAX), vec![11]);
    }
}
