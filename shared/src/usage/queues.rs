//! Kueue's queue metrics per ClusterQueue and minute: how long Workloads waited for admission
//! (`kueue_admission_wait_time_seconds`, a histogram), how many were pending
//! (`kueue_pending_workloads`, a gauge by `status`: `active`, `inadmissible`) and how many were
//! evicted and why (`kueue_evicted_workloads_total`, a counter by `reason`). Names, labels and
//! buckets from kubernetes-sigs/kueue `pkg/metrics/metrics.go` (quoted in
//! docs/usage-and-chargeback.md). They exist with or without a cluster the console reads, so in
//! GitOps mode they are the only record of how the queues fared.
//!
//! The rules are the usage ingest's (the parent module): a counter's or bucket's increase
//! belongs to the later sample's minute, a fall is a reset; a gauge's minute is its last
//! sample in that minute (what an instant query at the minute's end returns when the series is
//! scraped within it); nothing is carried into a minute without a sample.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Series, Window, neighbours::Histogram, unscale};

pub const ADMISSION_WAIT_BUCKET: &str = "kueue_admission_wait_time_seconds_bucket";
pub const PENDING: &str = "kueue_pending_workloads";
pub const EVICTED: &str = "kueue_evicted_workloads_total";

/// A ClusterQueue in one minute.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueKey {
    pub minute_ms: i64,
    pub cluster_queue: String,
}

/// What a ClusterQueue's series say of one minute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueMinute {
    /// The admissions of the minute by how long they waited (microseconds): each bucket's
    /// increase.
    pub wait: Histogram,
    /// Pending Workloads, active and inadmissible, at the minute's last samples; `None` when
    /// the minute has none.
    pub pending: Option<i64>,
    /// Evictions in the minute by reason.
    pub evicted: BTreeMap<String, i64>,
}

/// The row of `s`'s ClusterQueue in the minute, made when missing.
fn row<'a>(
    rows: &'a mut BTreeMap<QueueKey, QueueMinute>,
    minute_ms: i64,
    s: &Series,
) -> &'a mut QueueMinute {
    let cluster_queue = s.labels.get("cluster_queue").cloned().unwrap_or_default();
    rows.entry(QueueKey {
        minute_ms,
        cluster_queue,
    })
    .or_default()
}

/// The window's minutes of every ClusterQueue the series name. The counters and buckets must
/// reach back before the window (the backend asks for a lookback), as every counter here.
pub fn queue_minutes(
    wait_buckets: &[Series],
    pending: &[Series],
    evicted: &[Series],
    window: Window,
) -> BTreeMap<QueueKey, QueueMinute> {
    let mut rows: BTreeMap<QueueKey, QueueMinute> = BTreeMap::new();
    for s in wait_buckets {
        let Some(Ok(le)) = s.labels.get("le").map(|le| super::neighbours::bound(le)) else {
            continue;
        };
        for (minute_ms, micro) in super::increases(&s.samples, window) {
            let wait = &mut row(&mut rows, minute_ms, s).wait;
            let n = unscale(i128::from(micro));
            match le {
                Some(le) => *wait.buckets.entry(le).or_default() += n,
                None => wait.count = Some(wait.count.unwrap_or(0) + n),
            }
        }
    }
    for s in pending {
        let mut last: BTreeMap<i64, i64> = BTreeMap::new();
        for sample in s.samples.iter().filter(|p| window.holds(p.at_ms)) {
            last.insert(crate::common::utc::floor_minute(sample.at_ms), sample.micro);
        }
        for (minute_ms, micro) in last {
            let pending = &mut row(&mut rows, minute_ms, s).pending;
            *pending = Some(pending.unwrap_or(0) + unscale(i128::from(micro)));
        }
    }
    for s in evicted {
        let reason = s.labels.get("reason").cloned().unwrap_or_default();
        for (minute_ms, micro) in super::increases(&s.samples, window) {
            let n = unscale(i128::from(micro));
            if n == 0 {
                continue;
            }
            *row(&mut rows, minute_ms, s)
                .evicted
                .entry(reason.clone())
                .or_default() += n;
        }
    }
    rows
}

/// A ClusterQueue over a window of days, from its minutes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueFigures {
    pub cluster_queue: String,
    /// The team whose ClusterQueue it is, if any.
    pub team: Option<String>,
    /// Admissions (the histogram's `+Inf` bucket).
    pub admitted: i64,
    /// `histogram_quantile(0.5 | 0.95, sum by (le) (…))` over the window, in microseconds;
    /// `None` without admissions.
    pub wait_p50_microseconds: Option<i64>,
    pub wait_p95_microseconds: Option<i64>,
    /// The most Workloads pending in one minute's last samples.
    pub pending_peak: Option<i64>,
    /// Evictions by reason (`Preempted`, `PodsReadyTimeout`, …).
    pub evicted: BTreeMap<String, i64>,
}

impl QueueFigures {
    /// The figures of `wait` (the window's histogram, summed by `le`).
    pub fn new(
        cluster_queue: String,
        team: Option<String>,
        wait: &Histogram,
        pending_peak: Option<i64>,
        evicted: BTreeMap<String, i64>,
    ) -> QueueFigures {
        QueueFigures {
            cluster_queue,
            team,
            admitted: wait.observations(),
            wait_p50_microseconds: wait.quantile(50, 100),
            wait_p95_microseconds: wait.quantile(95, 100),
            pending_peak,
            evicted,
        }
    }
}

/// `GET /api/usage/queues`: every ClusterQueue Prometheus reported in the window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueReport {
    pub from: crate::common::day::Day,
    /// The last day, included.
    pub to: crate::common::day::Day,
    pub queues: Vec<QueueFigures>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::{Labels, Sample};

    const T0: i64 = 1_795_996_800_000;
    const MIN: i64 = 60_000;

    fn series(metric_labels: &[(&str, &str)], points: &[(i64, &str)]) -> Series {
        let labels: Labels = metric_labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Series {
            labels,
            samples: points
                .iter()
                .map(|(at, v)| Sample {
                    at_ms: *at,
                    micro: crate::usage::parse_micro(v).expect("a value"),
                })
                .collect(),
        }
    }

    #[test]
    fn buckets_pending_and_evictions_land_in_their_minutes() {
        let window = Window::new(T0, T0 + 2 * MIN).expect("window");
        let bucket = |le: &str, values: [&str; 3]| {
            series(
                &[("cluster_queue", "search"), ("le", le)],
                &[
                    (T0 - 30_000, values[0]),
                    (T0 + 30_000, values[1]),
                    (T0 + 90_000, values[2]),
                ],
            )
        };
        // Before the window 10 admissions; minute 0 brings 3 (1 within 10 s, 2 within 40 s),
        // minute 1 brings 1 that waited more than 10,240 s (only +Inf grows).
        let wait = [
            bucket("10", ["6", "7", "7"]),
            bucket("40", ["9", "11", "11"]),
            bucket("10240", ["10", "13", "13"]),
            bucket("+Inf", ["10", "13", "14"]),
        ];
        let pending = [
            series(
                &[("cluster_queue", "search"), ("status", "active")],
                &[(T0 + 10_000, "4"), (T0 + 40_000, "5"), (T0 + 70_000, "2")],
            ),
            series(
                &[("cluster_queue", "search"), ("status", "inadmissible")],
                &[(T0 + 40_000, "1")],
            ),
        ];
        // A restart in minute 1: the counter fell from 3 to 1, so 1 eviction.
        let evicted = [series(
            &[("cluster_queue", "search"), ("reason", "Preempted")],
            &[(T0 - 30_000, "2"), (T0 + 30_000, "3"), (T0 + 90_000, "1")],
        )];
        let rows = queue_minutes(&wait, &pending, &evicted, window);
        let key = |m: i64| QueueKey {
            minute_ms: T0 + m * MIN,
            cluster_queue: "search".to_owned(),
        };
        let first = &rows[&key(0)];
        assert_eq!(
            first.wait.buckets,
            BTreeMap::from([(10_000_000, 1), (40_000_000, 2), (10_240_000_000, 3)])
        );
        assert_eq!(first.wait.count, Some(3));
        assert_eq!(
            first.pending,
            Some(6),
            "active 5 (the last sample) + inadmissible 1"
        );
        assert_eq!(first.evicted, BTreeMap::from([("Preempted".to_owned(), 1)]));
        let second = &rows[&key(1)];
        assert_eq!(second.wait.count, Some(1));
        assert_eq!(second.wait.buckets.values().sum::<i64>(), 0);
        assert_eq!(second.pending, Some(2));
        assert_eq!(second.evicted["Preempted"], 1);
        // Over both minutes: 4 admissions, cumulative 1, 2, 3 within 10, 40, 10,240 s. p50:
        // rank 0.5 × 4 = 2 is reached in (10 s, 40 s], which holds one: 10 + 30 × (2 − 1) / 1
        // = 40 s; p95: rank 3.8 is past every finite bucket, so histogram_quantile answers the
        // highest finite bound, 10,240 s.
        let mut all = first.wait.clone();
        all.add(&second.wait);
        let figures = QueueFigures::new("search".into(), None, &all, Some(6), BTreeMap::new());
        assert_eq!(figures.admitted, 4);
        assert_eq!(figures.wait_p50_microseconds, Some(40_000_000));
        assert_eq!(figures.wait_p95_microseconds, Some(10_240_000_000));
    }
}
