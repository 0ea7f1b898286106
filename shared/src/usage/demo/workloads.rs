//! The demo's workload history: the Workloads Kueue would have recorded for the demo's training
//! over the last weeks, doing the work the demo's metrics show ([`super::training`]), so that
//! the history, the DCGM figures and everything derived from both tell one story on a fresh
//! machine. Shown as demo data wherever it appears (`HistoryEntry::demo`).
//!
//! Each minute, for each queue, as Kueue would run it (BestEffortFIFO, `withinClusterQueue:
//! LowerPriority`):
//! - jobs whose work is done finish;
//! - every weekday at 11:00 UTC an evaluation job arrives (one node, 8 GPUs, priority 100, 45
//!   minutes of work);
//! - the team keeps at least as much training waiting as the metrics show waiting, plus what
//!   they show held and it does not run yet: jobs of one node (8 GPUs, or all that is held
//!   when that is less), each with 2 to 6 hours of work, created when the demand appears;
//! - when the metrics show fewer GPUs held than the team runs (a reclaim in its cohort), its
//!   most recently admitted lowest-priority jobs are evicted (`Preempted`,
//!   `InCohortReclamation`) and wait again, their work so far kept (checkpointed);
//! - waiting jobs are admitted in the queue's order (higher priority, then earlier creation)
//!   while they fit in what the metrics show held; one that does not fit may preempt the
//!   team's own lower-priority jobs, most recently admitted first (`Preempted`,
//!   `InClusterQueue`), else the next one is tried.
//!
//! So the GPUs the history runs at each minute are the GPUs the metrics show held, to within
//! one node's worth where what is held is not a whole number of nodes.
//!
//! Invariants: the same queues, window, metrics and seed give the same Workloads; nothing is
//! admitted, evicted or finished after `now_ms`.

use std::cmp::Reverse;

use crate::{
    cluster::workload::{EvictionCount, PodSet, RecordedWorkload, Transition},
    common::rng::Rng,
};

use super::Training;

const MINUTE_MS: i64 = 60_000;
const NODE_GPUS: i64 = 8;
const EVAL_PRIORITY: i32 = 100;
const EVAL_MINUTES: i64 = 45;

/// One demo team's queue and the flavor its training runs on.
#[derive(Debug, Clone)]
pub struct DemoQueue {
    pub namespace: String,
    pub local_queue: String,
    pub cluster_queue: String,
    pub flavor: String,
    /// The flavor's whole-GPU resource, e.g. `nvidia.com/gpu`.
    pub resource: String,
}

/// What a recorder following the demo's Workloads would have seen: each evicted one as it was
/// while evicted, once per eviction (so each eviction is recorded), then every one as it is at
/// `now_ms`.
#[derive(Debug, Clone, Default)]
pub struct DemoHistory {
    pub while_evicted: Vec<RecordedWorkload>,
    pub now: Vec<RecordedWorkload>,
}

/// The Workloads of `queues` from `from_ms` for `days` days, up to `now_ms`, each queue's
/// training following `metrics(queue, at_ms)`.
pub fn history(
    queues: &[DemoQueue],
    metrics: &dyn Fn(&DemoQueue, i64) -> Training,
    (from_ms, days): (i64, u32),
    now_ms: i64,
    seed: u64,
) -> DemoHistory {
    let mut rng = Rng::new(seed);
    let end_ms = (from_ms + i64::from(days) * 1_440 * MINUTE_MS).min(now_ms);
    let mut out = DemoHistory::default();
    for q in queues {
        let mut queue = Queue::default();
        let mut at = from_ms;
        while at < end_ms {
            queue.minute(at, metrics(q, at), &mut rng);
            at += MINUTE_MS;
        }
        for (n, job) in queue.jobs.iter().enumerate() {
            job.record(q, n, now_ms, &mut out);
        }
    }
    out
}

/// One job of a queue.
#[derive(Debug, Clone)]
struct Job {
    gpus: i64,
    priority: i32,
    created: i64,
    /// Minutes of work left when it was last admitted.
    work_min: i64,
    /// Each admission, and each eviction (at, detail).
    admissions: Vec<i64>,
    evictions: Vec<(i64, &'static str)>,
    finished: Option<i64>,
}

impl Job {
    fn running(&self) -> bool {
        self.finished.is_none() && self.admissions.len() > self.evictions.len()
    }

    fn ends_at(&self) -> i64 {
        self.admissions.last().copied().unwrap_or(i64::MAX) + self.work_min * MINUTE_MS
    }

    fn evict(&mut self, at: i64, detail: &'static str) {
        let admitted = self.admissions.last().copied().unwrap_or(at);
        self.work_min -= (at - admitted) / MINUTE_MS;
        self.evictions.push((at, detail));
    }

    /// Its Workload as at `now_ms` into `out.now`, and as it was while evicted, once per
    /// eviction, into `out.while_evicted`.
    fn record(&self, q: &DemoQueue, n: usize, now_ms: i64, out: &mut DemoHistory) {
        let admitted = self.admissions.last().copied();
        let first = self.admissions.first().copied();
        let mut now = RecordedWorkload {
            uid: format!("demo-{}-{n}", q.namespace),
            namespace: q.namespace.clone(),
            name: format!("demo-{}-{n}", self.kind()),
            local_queue: q.local_queue.clone(),
            cluster_queue: first.map(|_| q.cluster_queue.clone()),
            priority: self.priority,
            priority_class: (self.priority == EVAL_PRIORITY).then(|| "eval".to_owned()),
            pod_sets: vec![PodSet {
                name: "main".to_owned(),
                count: u32::try_from(self.gpus).unwrap_or(u32::MAX),
                resources: [(q.resource.clone(), self.gpus.unsigned_abs())].into(),
                flavors: first
                    .map(|_| [(q.resource.clone(), q.flavor.clone())].into())
                    .unwrap_or_default(),
            }],
            created_at_ms: self.created,
            quota_reserved_at_ms: first,
            admitted_at_ms: first,
            evicted: None,
            finished: self.finished.map(|at_ms| Transition {
                at_ms,
                reason: "Succeeded".to_owned(),
                detail: None,
            }),
            evictions: Vec::new(),
            problems: Vec::new(),
        };
        for (i, &(at_ms, detail)) in self.evictions.iter().enumerate() {
            now.evictions = vec![EvictionCount {
                reason: "Preempted".to_owned(),
                underlying_cause: String::new(),
                count: i as u32 + 1,
            }];
            let mut evicted = now.clone();
            evicted.finished = None;
            evicted.evicted = Some(Transition {
                at_ms,
                reason: "Preempted".to_owned(),
                detail: Some(detail.to_owned()),
            });
            out.while_evicted.push(evicted);
        }
        // Still evicted at the end: so it is now; else as last admitted (Kueue's conditions
        // keep the last admission; the recorder, which saw the first, keeps that).
        if !self.running() && self.finished.is_none() && !self.evictions.is_empty() {
            now = out.while_evicted.last().cloned().unwrap_or(now);
        } else if let Some(last) = admitted.filter(|a| *a <= now_ms) {
            now.admitted_at_ms = Some(last);
        }
        out.now.push(now);
    }

    fn kind(&self) -> &'static str {
        if self.priority == EVAL_PRIORITY {
            "eval"
        } else {
            "train"
        }
    }
}

/// A queue's jobs and who runs.
#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
}

impl Queue {
    fn minute(&mut self, at: i64, metrics: Training, rng: &mut Rng) {
        for job in self.jobs.iter_mut().filter(|j| j.running()) {
            if job.ends_at() <= at {
                job.finished = Some(job.ends_at());
            }
        }
        let held = metrics.held.max(0);
        let how = (at.div_euclid(60 * MINUTE_MS) + 72).rem_euclid(168);
        if how < 120 && how % 24 == 11 && at.rem_euclid(60 * MINUTE_MS) == 0 && held > 0 {
            self.create(at, NODE_GPUS.min(held), EVAL_PRIORITY, EVAL_MINUTES);
        }
        let wanted = metrics.waiting.max(0) + (held - self.running_gpus()).max(0);
        let node = if held > 0 {
            NODE_GPUS.min(held)
        } else {
            NODE_GPUS
        };
        while self.waiting_gpus() < wanted {
            self.create(at, node, 0, 120 + rng.below(241) as i64);
        }
        while self.running_gpus() > held {
            let victim = self.victim(i32::MAX).expect("a running job");
            self.jobs[victim].evict(at, "InCohortReclamation");
        }
        self.admit(at, held);
    }

    fn create(&mut self, at: i64, gpus: i64, priority: i32, work_min: i64) {
        self.jobs.push(Job {
            gpus,
            priority,
            created: at,
            work_min,
            admissions: Vec::new(),
            evictions: Vec::new(),
            finished: None,
        });
    }

    fn running_gpus(&self) -> i64 {
        self.jobs
            .iter()
            .filter(|j| j.running())
            .map(|j| j.gpus)
            .sum()
    }

    fn waiting_gpus(&self) -> i64 {
        self.waiting().map(|j| self.jobs[j].gpus).sum()
    }

    fn waiting(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.jobs.len()).filter(|&j| !self.jobs[j].running() && self.jobs[j].finished.is_none())
    }

    /// The running job Kueue would evict first among those below `priority`: the lowest
    /// priority, then the most recently admitted.
    fn victim(&self, priority: i32) -> Option<usize> {
        (0..self.jobs.len())
            .filter(|&j| self.jobs[j].running() && self.jobs[j].priority < priority)
            .min_by_key(|&j| {
                (
                    self.jobs[j].priority,
                    Reverse(self.jobs[j].admissions.last().copied()),
                )
            })
    }

    /// Admits waiting jobs in the queue's order while they fit in `held`, a job that does not
    /// fit preempting the team's lower-priority ones when that makes room.
    fn admit(&mut self, at: i64, held: i64) {
        let mut order: Vec<usize> = self.waiting().collect();
        order.sort_by_key(|&j| (Reverse(self.jobs[j].priority), self.jobs[j].created, j));
        for j in order {
            let gpus = self.jobs[j].gpus;
            let priority = self.jobs[j].priority;
            let below: i64 = (0..self.jobs.len())
                .filter(|&o| self.jobs[o].running() && self.jobs[o].priority < priority)
                .map(|o| self.jobs[o].gpus)
                .sum();
            if self.running_gpus() + gpus > held + below || gpus > held {
                continue;
            }
            while self.running_gpus() + gpus > held {
                let victim = self.victim(priority).expect("a lower-priority job");
                self.jobs[victim].evict(at, "InClusterQueue");
            }
            self.jobs[j].admissions.push(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-30, a Monday, 00:00 UTC.
    const MONDAY_MS: i64 = 1_795_996_800_000;
    const HOUR_MS: i64 = 60 * MINUTE_MS;

    fn queue() -> DemoQueue {
        DemoQueue {
            namespace: "team-research".into(),
            local_queue: "research".into(),
            cluster_queue: "research".into(),
            flavor: "h200-train".into(),
            resource: "nvidia.com/gpu".into(),
        }
    }

    /// Metrics holding 16 GPUs with 8 waiting until Tuesday 00:00, then 8 held (a reclaim).
    fn metrics(_: &DemoQueue, at: i64) -> Training {
        Training {
            held: if at < MONDAY_MS + 24 * HOUR_MS { 16 } else { 8 },
            waiting: 8,
        }
    }

    /// At every minute the queue runs what the metrics hold: two 8-GPU jobs, then one.
    #[test]
    fn the_queue_runs_what_the_metrics_hold() {
        let (mut q, mut rng) = (Queue::default(), Rng::new(7));
        for minute in 0..36 * 60 {
            let at = MONDAY_MS + minute * MINUTE_MS;
            q.minute(at, metrics(&queue(), at), &mut rng);
            assert_eq!(
                q.running_gpus(),
                metrics(&queue(), at).held,
                "minute {minute}"
            );
            assert!(
                q.waiting_gpus() >= 8,
                "minute {minute}: the waiting training"
            );
        }
    }

    /// By hand: Monday's 11:00 evaluation job preempts the training job admitted last (Kueue's
    /// `withinClusterQueue: LowerPriority`, victims newest first) and finishes at 11:45; Tuesday
    /// 00:00's reclaim evicts one training job; Tuesday 11:00 brings the second evaluation.
    /// Each eviction is seen once; nothing happens after now; the same seed, the same history.
    #[test]
    fn evaluations_preempt_training_and_reclaims_evict_it() {
        let now = MONDAY_MS + 36 * HOUR_MS;
        let h = history(&[queue()], &metrics, (MONDAY_MS, 7), now, 7);
        let eval: Vec<&RecordedWorkload> = h.now.iter().filter(|w| w.priority == 100).collect();
        assert_eq!(eval.len(), 2, "Monday's and Tuesday's at 11:00");
        assert_eq!(eval[0].created_at_ms, MONDAY_MS + 11 * HOUR_MS);
        assert_eq!(eval[0].admitted_at_ms, Some(MONDAY_MS + 11 * HOUR_MS));
        assert_eq!(
            eval[0].finished.as_ref().map(|f| f.at_ms),
            Some(MONDAY_MS + 11 * HOUR_MS + 45 * MINUTE_MS)
        );
        let seen: Vec<(&str, i64)> = h
            .while_evicted
            .iter()
            .filter_map(|w| w.evicted.as_ref())
            .map(|t| (t.detail.as_deref().unwrap_or(""), t.at_ms))
            .collect();
        assert!(
            seen.contains(&("InClusterQueue", MONDAY_MS + 11 * HOUR_MS)),
            "{seen:?}"
        );
        assert!(
            seen.contains(&("InCohortReclamation", MONDAY_MS + 24 * HOUR_MS)),
            "{seen:?}"
        );
        let counted: u32 = h
            .now
            .iter()
            .flat_map(|w| &w.evictions)
            .map(|e| e.count)
            .sum();
        assert_eq!(counted as usize, seen.len());
        for w in h.now.iter().chain(&h.while_evicted) {
            assert!(w.created_at_ms < now);
            assert!(w.admitted_at_ms.is_none_or(|t| t <= now));
            assert!(w.finished.as_ref().is_none_or(|f| f.at_ms <= now));
        }
        let again = history(&[queue()], &metrics, (MONDAY_MS, 7), now, 7);
        assert_eq!((again.now, again.while_evicted), (h.now, h.while_evicted));
    }
}
