//! One ClusterQueue's pending workloads, in its order: higher priority first, then earlier
//! arrival, then creation (Kueue's BestEffortFIFO and StrictFIFO queues order the same way).

use std::cmp::Reverse;

/// A pending workload as its queue orders it and a scheduling cycle reads it: what it asks
/// of which queue's quota, so that walking a queue, ordering heads and trying flavors and
/// victims never read the jobs themselves.
#[derive(Debug, Clone, Copy)]
pub(super) struct Queued {
    pub team: usize,
    pub priority: i32,
    pub arrival: u32,
    pub seq: u64,
    pub slices: u64,
    /// Its model, by the model's first flavor.
    pub model: usize,
    pub job: usize,
}

impl Queued {
    /// Its place in its queue.
    fn order(&self) -> (Reverse<i32>, u32, u64) {
        (Reverse(self.priority), self.arrival, self.seq)
    }
}

/// Admission takes a queue's workloads mostly from the front, so the front is an offset into
/// the list rather than a shift of the rest (a 10,000-card queue of one-hour jobs holds
/// thousands); the places before it are given back once they are half the list.
#[derive(Debug, Clone, Default)]
pub(super) struct Pending {
    entries: Vec<Queued>,
    front: usize,
}

impl Pending {
    /// (`inline(always)`: read millions of times a week; the size-optimised wasm would call it.)
    #[inline(always)]
    fn queued(&self) -> &[Queued] {
        &self.entries[self.front..]
    }

    pub fn is_empty(&self) -> bool {
        self.front == self.entries.len()
    }

    /// The workload `at` places from the front.
    pub fn get(&self, at: usize) -> Option<&Queued> {
        self.queued().get(at)
    }

    /// The workloads from `at` places from the front on.
    pub fn rest(&self, at: usize) -> &[Queued] {
        self.queued().get(at..).unwrap_or(&[])
    }

    /// Where `job` is in the queue.
    pub fn position(&self, job: usize) -> Option<usize> {
        self.queued().iter().position(|q| q.job == job)
    }

    pub fn remove(&mut self, at: usize) {
        if at > 0 {
            self.entries.remove(self.front + at);
            return;
        }
        self.front += 1;
        if self.front * 2 > self.entries.len() {
            self.entries.drain(..self.front);
            self.front = 0;
        }
    }

    /// Queues `queued` in its place: after every workload that comes before it. Where that is
    /// nearer the front and there is a free place before it, the workloads ahead move up one
    /// instead of the rest moving back (an evicted workload rejoins near the front).
    pub fn insert(&mut self, queued: Queued) {
        let at = self
            .queued()
            .partition_point(|other| other.order() < queued.order());
        let behind = self.entries.len() - self.front - at;
        if self.front > 0 && at < behind {
            self.front -= 1;
            self.entries[self.front..=self.front + at].rotate_left(1);
            self.entries[self.front + at] = queued;
        } else {
            self.entries.insert(self.front + at, queued);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_keeps_its_order_as_workloads_join_and_leave_at_either_end() {
        let queued = |job: usize, priority, arrival| Queued {
            team: 0,
            priority,
            arrival,
            seq: job as u64,
            slices: 1,
            model: 0,
            job,
        };
        let jobs = |p: &Pending| p.queued().iter().map(|q| q.job).collect::<Vec<_>>();
        let mut p = Pending::default();
        for (job, priority, arrival) in [(0, 0, 5), (1, 0, 3), (2, 9, 7), (3, 0, 3), (4, 0, 9)] {
            p.insert(queued(job, priority, arrival));
        }
        // Priority 9 first; then arrival 3 (created 1, then 3), 5, 9.
        assert_eq!(jobs(&p), vec![2, 1, 3, 0, 4]);
        p.remove(0);
        p.remove(0);
        assert_eq!((p.front, jobs(&p)), (2, vec![3, 0, 4]));
        // Three of five gone from the front: the places before it are given back.
        p.remove(0);
        assert_eq!((p.front, jobs(&p)), (0, vec![0, 4]));
        p.insert(queued(5, 0, 1));
        assert_eq!(p.position(0), Some(1));
        p.insert(queued(7, 0, 10));
        p.insert(queued(8, 0, 12));
        p.remove(0);
        assert_eq!((p.front, jobs(&p)), (1, vec![0, 4, 7, 8]));
        // Nearer the front, with a free place before it: the one ahead moves up.
        p.insert(queued(6, 0, 6));
        assert_eq!((p.front, jobs(&p)), (0, vec![0, 6, 4, 7, 8]));
        p.remove(1);
        assert_eq!(jobs(&p), vec![0, 4, 7, 8]);
        for _ in 0..4 {
            p.remove(0);
        }
        assert!(p.is_empty());
        assert_eq!(p.get(0).map(|q| q.job), None);
    }
}
