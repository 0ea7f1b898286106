//! The demo's workload history: what Kueue would have recorded for the demo teams over the
//! last weeks, so the history and everything derived from it show something on a fresh
//! machine. Shown as demo data wherever it appears (`HistoryEntry::demo`).
//!
//! Invariants: the same queues, window and seed give the same Workloads; nothing is admitted,
//! evicted or finished after `now_ms`.

use crate::common::rng::Rng;

use super::workload::{EvictionCount, PodSet, RecordedWorkload, Transition};

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;

/// One demo team's queue and the flavor its jobs run on.
#[derive(Debug, Clone)]
pub struct DemoQueue {
    pub namespace: String,
    pub local_queue: String,
    pub cluster_queue: String,
    pub flavor: String,
    /// The flavor's whole-GPU resource, e.g. `nvidia.com/gpu`.
    pub resource: String,
    /// The team's nominal quota there: no job asks for more.
    pub nominal: u32,
}

/// What a recorder listing every 30 s would have seen of the demo's Workloads: each
/// preempted one as it was while evicted (so its eviction is recorded), then every one as it
/// is at `now_ms`.
#[derive(Debug, Clone, Default)]
pub struct DemoHistory {
    pub while_evicted: Vec<RecordedWorkload>,
    pub now: Vec<RecordedWorkload>,
}

/// The Workloads of `queues` created in the `days` days from `from_ms` up to `now_ms`.
///
/// Jobs arrive at a random minute of every weekday hour from 08:00 to 20:00 UTC and of one
/// hour in four otherwise; each asks 1, 2, 4 or 8 GPUs (at most the team's nominal quota),
/// waits 0 to 19 minutes for admission (30 to 119 on weekday afternoons, 13:00-17:00 UTC, when
/// the cohort is full: the re-plan findings' waiting team) and runs 30 to 240 minutes; one in
/// twenty is preempted by a reclaim in its cohort halfway through and admitted again 10
/// minutes later.
pub fn history(
    queues: &[DemoQueue],
    from_ms: i64,
    days: u32,
    now_ms: i64,
    seed: u64,
) -> DemoHistory {
    let mut rng = Rng::new(seed);
    let mut out = DemoHistory::default();
    let end_ms = (from_ms + i64::from(days) * 24 * HOUR_MS).min(now_ms);
    for q in queues.iter().filter(|q| q.nominal > 0) {
        let mut hour = from_ms;
        while hour < end_ms {
            let how = (hour.div_euclid(HOUR_MS) + 72).rem_euclid(168);
            let busy = how < 120 && (8..20).contains(&(how % 24));
            if busy || rng.below(4) == 0 {
                let created = hour + rng.below(60) as i64 * MINUTE_MS;
                if created < end_ms {
                    let full = busy && (13..17).contains(&(how % 24));
                    let (now, evicted) = job(q, out.now.len(), created, full, now_ms, &mut rng);
                    out.now.push(now);
                    out.while_evicted.extend(evicted);
                }
            }
            hour += HOUR_MS;
        }
    }
    out
}

/// One job as it is at `now_ms`, and as it was while evicted if it was.
fn job(
    q: &DemoQueue,
    n: usize,
    created: i64,
    full: bool,
    now_ms: i64,
    rng: &mut Rng,
) -> (RecordedWorkload, Option<RecordedWorkload>) {
    let sizes: Vec<u32> = [1, 2, 4, 8]
        .into_iter()
        .filter(|s| *s <= q.nominal)
        .collect();
    let gpus = sizes[rng.below(sizes.len())];
    let wait = if full {
        30 + rng.below(90)
    } else {
        rng.below(20)
    };
    let admitted = created + wait as i64 * MINUTE_MS;
    let run = (30 + rng.below(211) as i64) * MINUTE_MS;
    let preempted = rng.below(20) == 0;
    let at = |t: i64| (t <= now_ms).then_some(t);
    let readmitted = admitted + run / 2 + 10 * MINUTE_MS;
    let finished_at = admitted + run + if preempted { 10 * MINUTE_MS } else { 0 };
    let mut now = RecordedWorkload {
        uid: format!("demo-{}-{n}", q.namespace),
        namespace: q.namespace.clone(),
        name: format!("demo-job-{n}"),
        local_queue: q.local_queue.clone(),
        cluster_queue: at(admitted).map(|_| q.cluster_queue.clone()),
        priority: 0,
        priority_class: None,
        pod_sets: vec![PodSet {
            name: "main".to_owned(),
            count: gpus,
            resources: [(q.resource.clone(), u64::from(gpus))].into(),
            flavors: at(admitted)
                .map(|_| [(q.resource.clone(), q.flavor.clone())].into())
                .unwrap_or_default(),
        }],
        created_at_ms: created,
        quota_reserved_at_ms: at(admitted),
        admitted_at_ms: at(admitted),
        evicted: None,
        finished: at(finished_at).map(|at_ms| Transition {
            at_ms,
            reason: "Succeeded".to_owned(),
            detail: None,
        }),
        evictions: Vec::new(),
        problems: Vec::new(),
    };
    let Some(evicted_at) = at(admitted + run / 2).filter(|_| preempted) else {
        return (now, None);
    };
    now.evictions.push(EvictionCount {
        reason: "Preempted".to_owned(),
        underlying_cause: String::new(),
        count: 1,
    });
    let mut evicted = now.clone();
    evicted.finished = None;
    evicted.evicted = Some(Transition {
        at_ms: evicted_at,
        reason: "Preempted".to_owned(),
        detail: Some("InCohortReclamation".to_owned()),
    });
    if at(readmitted).is_none() {
        now = evicted.clone();
    }
    (now, Some(evicted))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-30, a Monday, 00:00 UTC.
    const MONDAY_MS: i64 = 1_795_996_800_000;

    fn queue(nominal: u32) -> DemoQueue {
        DemoQueue {
            namespace: "team-research".into(),
            local_queue: "research".into(),
            cluster_queue: "research".into(),
            flavor: "h200-train".into(),
            resource: "nvidia.com/gpu".into(),
            nominal,
        }
    }

    #[test]
    fn the_demo_history_is_the_same_each_time_and_nothing_happens_after_now() {
        let now = MONDAY_MS + 3 * 24 * HOUR_MS + 9 * HOUR_MS;
        let a = history(&[queue(4)], MONDAY_MS, 7, now, 7);
        let b = history(&[queue(4)], MONDAY_MS, 7, now, 7);
        assert_eq!(a.now, b.now);
        // Of the 81 hours to Thursday 09:00, Monday to Wednesday's 12 business hours each
        // bring a job, Thursday's 08:00 too (37); the 44 others one in four, about 11.
        assert!((37 + 5..=37 + 20).contains(&a.now.len()), "{}", a.now.len());
        for w in &a.now {
            assert!(w.created_at_ms < now);
            assert!(w.admitted_at_ms.is_none_or(|t| t <= now));
            assert!(w.finished.as_ref().is_none_or(|f| f.at_ms <= now));
            assert!(
                w.resources()["nvidia.com/gpu"] <= 4,
                "no job above the quota"
            );
        }
        for w in &a.while_evicted {
            let evicted = w.evicted.as_ref().expect("evicted");
            assert!(evicted.at_ms <= now && w.finished.is_none());
        }
        assert!(history(&[queue(0)], MONDAY_MS, 7, now, 7).now.is_empty());
    }
}
