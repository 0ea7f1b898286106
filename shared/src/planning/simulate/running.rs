//! One ClusterQueue's admitted workloads on one flavor, kept in the order Kueue takes
//! preemption victims (pkg/scheduler/preemption/common/ordering.go, `CandidatesOrdering`):
//! lowest priority first, then the most recently admitted first. Kept in that order as they
//! start and stop, so a preemption reads only the few candidates it needs.

/// A workload as a candidate: (priority, admission number, job), the most recent admission
/// having the highest number.
pub(super) type Admitted = (i32, u64, usize);

#[derive(Debug, Clone, Default)]
pub(super) struct Running {
    /// By priority, ascending; each group's workloads in admission order.
    groups: Vec<(i32, Vec<(u64, usize)>)>,
}

impl Running {
    /// Adds a workload admitted after every other in the queue.
    pub fn push(&mut self, (priority, admission, job): Admitted) {
        match self.groups.binary_search_by_key(&priority, |(p, _)| *p) {
            Ok(g) => self.groups[g].1.push((admission, job)),
            Err(g) => self.groups.insert(g, (priority, vec![(admission, job)])),
        }
    }

    pub fn remove(&mut self, (priority, admission, _): Admitted) {
        if let Ok(g) = self.groups.binary_search_by_key(&priority, |(p, _)| *p) {
            let group = &mut self.groups[g].1;
            if let Ok(at) = group.binary_search_by_key(&admission, |(a, _)| *a) {
                group.remove(at);
            }
        }
    }

    /// The workloads below `priority` (all, with `None`) in Kueue's victim order.
    pub fn in_order(&self, below: Option<i32>) -> impl Iterator<Item = Admitted> + '_ {
        self.groups
            .iter()
            .take_while(move |(p, _)| below.is_none_or(|b| *p < b))
            .flat_map(|(p, group)| group.iter().rev().map(move |&(a, j)| (*p, a, j)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn victims_come_lowest_priority_then_newest_first() {
        let mut r = Running::default();
        for (priority, admission, job) in [(5, 1, 10), (0, 2, 11), (5, 3, 12), (0, 4, 13)] {
            r.push((priority, admission, job));
        }
        let jobs = |r: &Running, below| r.in_order(below).map(|(_, _, j)| j).collect::<Vec<_>>();
        assert_eq!(jobs(&r, None), vec![13, 11, 12, 10]);
        assert_eq!(jobs(&r, Some(5)), vec![13, 11]);
        r.remove((0, 4, 13));
        r.remove((5, 1, 10));
        assert_eq!(jobs(&r, None), vec![11, 12]);
    }
}
