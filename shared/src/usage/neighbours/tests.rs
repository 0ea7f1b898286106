//! Every expected figure below is worked out by hand in its comment.

use proptest::prelude::*;

use super::*;
use crate::{
    fleet::sharing::parse_sharing,
    usage::{DeviceFlavors, FlavorFacts, tests::series},
};

const T0: i64 = 1_796_000_400_000; // 2026-11-30T00:00:00Z
const SEC: i64 = 1_000;
const MIN: i64 = 60_000;

/// Cumulative counts per bound in seconds' millionths (µs), and the +Inf count.
fn histogram(buckets: &[(i64, i64)], count: Option<i64>) -> Histogram {
    Histogram {
        buckets: buckets.iter().copied().collect(),
        count,
    }
}

#[test]
fn quantiles_interpolate_within_the_bucket_like_histogram_quantile() {
    // 100 requests: 50 ≤ 0.1 s, 90 ≤ 0.25 s, 98 ≤ 0.5 s, 100 ≤ 1 s.
    let h = histogram(
        &[
            (100_000, 50),
            (250_000, 90),
            (500_000, 98),
            (1_000_000, 100),
        ],
        Some(100),
    );
    // p95: rank 95 lies in (0.25, 0.5] holding 8; 0.25 + 0.25 × (95 − 90) / 8 = 0.40625 s
    assert_eq!(h.quantile(95, 100), Some(406_250));
    // p99: rank 99 in (0.5, 1] holding 2; 0.5 + 0.5 × (99 − 98) / 2 = 0.75 s
    assert_eq!(h.quantile(99, 100), Some(750_000));
    // p50: rank 50 in the first bucket, from 0: 0.1 × 50 / 50 = 0.1 s
    assert_eq!(h.quantile(50, 100), Some(100_000));
    // a rank in +Inf gives the highest finite bound
    let tail = histogram(&[(100_000, 10)], Some(100));
    assert_eq!(tail.quantile(95, 100), Some(100_000));
    // no +Inf bucket, no observations, no finite bucket: NaN in Prometheus, none here
    assert_eq!(histogram(&[(100_000, 10)], None).quantile(95, 100), None);
    assert_eq!(histogram(&[(100_000, 0)], Some(0)).quantile(95, 100), None);
    assert_eq!(histogram(&[], Some(5)).quantile(95, 100), None);
    // non-monotonic counts are raised to the running maximum first: 0.1 → 60, 0.25 → 60;
    // p50: rank 50 in the first bucket: 0.1 × 50 / 60 = 0.0833… s → 83,333 µs
    let bumpy = histogram(&[(100_000, 60), (250_000, 50)], Some(100));
    assert_eq!(bumpy.quantile(50, 100), Some(83_333));
    // a first bound at or below zero is returned as it is
    assert_eq!(
        histogram(&[(0, 80), (100_000, 100)], Some(100)).quantile(50, 100),
        Some(0)
    );
}

#[test]
fn histograms_add_by_bound() {
    let mut a = histogram(&[(100_000, 3), (250_000, 5)], Some(6));
    a.add(&histogram(&[(100_000, 1), (500_000, 2)], Some(2)));
    assert_eq!(
        a,
        histogram(&[(100_000, 4), (250_000, 5), (500_000, 2)], Some(8))
    );
}

#[test]
fn bucket_increases_land_in_their_minutes_and_pods_add_up() {
    let labels = |pod: &'static str, le: &'static str| {
        vec![
            ("namespace", "chat"),
            ("pod", pod),
            ("model_name", "llama"),
            ("le", le),
        ]
    };
    let small = series(
        &labels("vllm-0", "0.1"),
        // before the window 10; +4 and +6 in the first minute; a reset to 3 then +2 in the
        // second
        &[
            (T0 - 30 * SEC, "10"),
            (T0 + 15 * SEC, "14"),
            (T0 + 45 * SEC, "20"),
            (T0 + 75 * SEC, "3"),
            (T0 + 105 * SEC, "5"),
        ],
    );
    let inf = series(
        &labels("vllm-0", "+Inf"),
        &[(T0 - 30 * SEC, "12"), (T0 + 45 * SEC, "25")],
    );
    // a second replica: +3 within 0.1 s in the first minute
    let other = series(
        &labels("vllm-1", "0.1"),
        &[(T0 - 30 * SEC, "0"), (T0 + 30 * SEC, "3")],
    );
    let unreadable = series(&labels("vllm-0", "soon"), &[(T0, "1"), (T0 + SEC, "2")]);
    let window = Window::new(T0, T0 + 2 * MIN).expect("window");
    let ttft = [small.clone(), inf, other, unreadable];
    let queue = [small];
    let rows = latency_minutes(
        &[(Latency::Ttft, &ttft[..]), (Latency::Queue, &queue[..])],
        window,
    );
    let key = |minute_ms: i64| LatencyKey {
        minute_ms,
        namespace: "chat".into(),
        model: "llama".into(),
    };
    let pods = |names: &[&str]| names.iter().map(|p| (*p).to_owned()).collect();
    assert_eq!(
        rows[&key(T0)],
        ServiceMinute {
            pods: pods(&["vllm-0", "vllm-1"]),
            // 4 + 6 of vllm-0 and 3 of vllm-1 within 0.1 s; 13 in +Inf (vllm-0's)
            ttft: histogram(&[(100_000, 13)], Some(13)),
            queue: histogram(&[(100_000, 10)], None),
        }
    );
    assert_eq!(
        rows[&key(T0 + MIN)],
        ServiceMinute {
            pods: pods(&["vllm-0"]),
            // the restart's 3 and then 2 more
            ttft: histogram(&[(100_000, 5)], None),
            queue: histogram(&[(100_000, 5)], None),
        }
    );
    assert_eq!(rows.len(), 2);
}

fn h200(
    gi: Option<(&'static str, &'static str)>,
    who: Option<(&'static str, &'static str)>,
) -> Vec<(&'static str, &'static str)> {
    let mut l = vec![
        ("gpu", "0"),
        ("UUID", "GPU-h200-0"),
        ("modelName", "NVIDIA H200"),
        ("Hostname", "node-m"),
    ];
    if let Some((profile, id)) = gi {
        l.extend([("GPU_I_PROFILE", profile), ("GPU_I_ID", id)]);
    }
    if let Some((ns, pod)) = who {
        l.extend([("namespace", ns), ("pod", pod), ("container", "main")]);
    }
    l
}

fn h100(gpu: &'static str, who: (&'static str, &'static str)) -> Vec<(&'static str, &'static str)> {
    vec![
        ("gpu", gpu),
        (
            "UUID",
            if gpu == "0" {
                "GPU-h100-0"
            } else {
                "GPU-h100-1"
            },
        ),
        ("modelName", "NVIDIA H100 80GB HBM3"),
        ("Hostname", "node-a"),
        ("namespace", who.0),
        ("pod", who.1),
    ]
}

fn flavors() -> Vec<FlavorFacts> {
    vec![
        FlavorFacts {
            name: "h100-sliced".into(),
            gpu_model: "H100-SXM5-80GB".into(),
            mig: false,
            sharing: Some(Mechanism::TimeSlicing),
        },
        FlavorFacts {
            name: "h200-mig".into(),
            gpu_model: "H200-SXM-141GB".into(),
            mig: true,
            sharing: None,
        },
    ]
}

#[test]
fn cotenants_are_the_other_pods_on_the_same_gpu() {
    let at = |s: i64| T0 + s * SEC;
    let engine = [
        // one H200 in MIG: 1g (1/7) for chat/vllm-0 at 0.2, 3g (3/7) for train/job-0 at 0.7,
        // another 1g with no pod at 0.5 (no tenant, so nobody's neighbour)
        series(
            &h200(Some(("1g.18gb", "1")), Some(("chat", "vllm-0"))),
            &[(at(10), "0.2")],
        ),
        series(
            &h200(Some(("3g.71gb", "2")), Some(("train", "job-0"))),
            &[(at(10), "0.7")],
        ),
        series(&h200(Some(("1g.18gb", "3")), None), &[(at(10), "0.5")]),
    ];
    let util = [
        // H100 0 time-sliced between chat/vllm-1 and batch/etl-0: the card's 80 % on both
        // pods' series, twice in the minute
        series(
            &h100("0", ("chat", "vllm-1")),
            &[(at(10), "80"), (at(40), "80")],
        ),
        series(
            &h100("0", ("batch", "etl-0")),
            &[(at(10), "80"), (at(40), "80")],
        ),
        // H100 1 whole to chat/vllm-2: no co-tenant, no row
        series(&h100("1", ("chat", "vllm-2")), &[(at(10), "90")]),
    ];
    let window = Window::new(T0, T0 + MIN).expect("window");
    let rows = cotenancy(&util, &engine, window, &DeviceFlavors::new(flavors()));
    let key = |ns: &str, pod: &str| PodKey {
        minute_ms: T0,
        namespace: ns.into(),
        pod: pod.into(),
    };
    assert_eq!(
        rows[&key("chat", "vllm-0")],
        PodMinute {
            sharing: Some(Mechanism::Mig),
            neighbours: 1,
            // train's 3g at 0.7: 0.7 × 3/7 × 60 s = 18 s; observed 3/7 × 60 s = 25.714286 s
            neighbour_busy_gpu_us: 18_000_000,
            neighbour_observed_gpu_us: 25_714_286,
        }
    );
    assert_eq!(
        rows[&key("train", "job-0")],
        PodMinute {
            sharing: Some(Mechanism::Mig),
            neighbours: 1,
            // chat's 1g at 0.2: 0.2 × 1/7 × 60 s = 1.714286 s; observed 8.571429 s
            neighbour_busy_gpu_us: 1_714_286,
            neighbour_observed_gpu_us: 8_571_429,
        }
    );
    let sliced = PodMinute {
        sharing: Some(Mechanism::TimeSlicing),
        neighbours: 1,
        // the card's busy, own load included (DCGM cannot split it): 0.8 × 60 s
        neighbour_busy_gpu_us: 48_000_000,
        neighbour_observed_gpu_us: 60_000_000,
    };
    assert_eq!(rows[&key("chat", "vllm-1")], sliced);
    assert_eq!(rows[&key("batch", "etl-0")], sliced);
    assert_eq!(rows.len(), 4, "{rows:#?}");
}

#[test]
fn a_shared_device_on_an_undeclared_flavor_says_shared() {
    let at = |s: i64| T0 + s * SEC;
    let mut unsaid = flavors();
    unsaid[0].sharing = None;
    let util = [
        series(&h100("0", ("a", "p")), &[(at(5), "50")]),
        series(&h100("0", ("b", "q")), &[(at(5), "50")]),
    ];
    let window = Window::new(T0, T0 + MIN).expect("window");
    let rows = cotenancy(&util, &[], window, &DeviceFlavors::new(unsaid));
    assert!(rows.values().all(|r| r.sharing.is_none()));
    assert_eq!(sharing_name(None), "shared");
    for m in Mechanism::ALL {
        assert_eq!(parse_sharing(sharing_name(Some(m))), Some(Some(m)));
    }
}

/// One minute of a service's only pod: `requests` first tokens, `fast` of them within
/// 0.1 s, `medium` more within 0.25 s, the rest within 0.5 s; queue time always within 10 ms;
/// co-tenants' load `load_pct` % of a whole GPU (none: no co-tenant).
fn minute(
    service: (&str, &str),
    at: i64,
    requests: i64,
    (fast, medium): (i64, i64),
    load_pct: Option<i64>,
) -> ServedMinute {
    ServedMinute {
        minute_ms: T0 + at * MIN,
        namespace: service.0.into(),
        model: service.1.into(),
        pods: vec![format!("{}-0", service.0)],
        ttft: histogram(
            &[
                (100_000, fast),
                (250_000, fast + medium),
                (500_000, requests),
            ],
            Some(requests),
        ),
        queue: histogram(&[(10_000, requests)], Some(requests)),
        cotenancy: load_pct
            .map(|pct| PodMinute {
                sharing: Some(Mechanism::Mig),
                neighbours: 2,
                neighbour_busy_gpu_us: pct * 600_000,
                neighbour_observed_gpu_us: 60_000_000,
            })
            .into_iter()
            .collect(),
    }
}

#[test]
fn a_service_is_flagged_when_latency_rises_with_its_neighbours_load_alone() {
    let day = crate::common::day::Day::parse("2026-11-30").expect("day");
    let chat = ("chat", "llama");
    let busy_self = ("busyself", "llama");
    let alone = ("alone", "llama");
    let few = ("few", "llama");
    let mut minutes = vec![
        // chat: quiet minutes (loads 10 %, 20 %) 15 requests, 14 fast, 1 medium; busy minutes
        // (80 %, 90 %) 15 requests, 5 fast, 5 medium, 5 slow
        minute(chat, 0, 15, (14, 1), Some(10)),
        minute(chat, 1, 15, (5, 5), Some(80)),
        minute(chat, 2, 15, (14, 1), Some(20)),
        minute(chat, 3, 15, (5, 5), Some(90)),
        // the same, but its own requests double when its neighbours are busy
        minute(busy_self, 0, 15, (14, 1), Some(10)),
        minute(busy_self, 1, 30, (10, 10), Some(80)),
        minute(busy_self, 2, 15, (14, 1), Some(20)),
        minute(busy_self, 3, 30, (10, 10), Some(90)),
        // whole GPUs
        minute(alone, 0, 15, (14, 1), None),
        minute(alone, 1, 15, (5, 5), None),
        // too few requests
        minute(few, 0, 5, (5, 0), Some(0)),
        minute(few, 1, 5, (0, 0), Some(100)),
    ];
    // a minute without requests is left out of the halves
    minutes.push(minute(chat, 4, 0, (0, 0), Some(100)));
    let teams = BTreeMap::from([("chat".to_owned(), "chat-team".to_owned())]);
    let report = report(day, day, &minutes, &teams);
    let by = |ns: &str| {
        report
            .services
            .iter()
            .find(|s| s.namespace == ns)
            .expect("service")
    };

    let chat = by("chat");
    assert_eq!(chat.team.as_deref(), Some("chat-team"));
    assert_eq!(chat.sharing, ["mig"]);
    assert_eq!((chat.pods, chat.max_neighbours), (1, 2));
    // quiet half: minutes at 10 % and 20 %: 30 requests, 28 ≤ 0.1 s, 30 ≤ 0.25 s;
    // p95 rank 28.5 in (0.1, 0.25] holding 2: 0.1 + 0.15 × 0.5 / 2 = 0.1375 s
    assert_eq!(chat.quiet.requests, 30);
    assert_eq!(chat.quiet.ttft_p95_microseconds, Some(137_500));
    // load (6 + 12) / 120 s = 15 %
    assert_eq!(chat.quiet.neighbour_load_pct(), 15);
    // busy half: 10 ≤ 0.1, 20 ≤ 0.25, 30 ≤ 0.5; rank 28.5 in (0.25, 0.5] holding 10:
    // 0.25 + 0.25 × 8.5 / 10 = 0.4625 s; p99 rank 29.7: 0.25 + 0.25 × 9.7 / 10 = 0.4925 s
    assert_eq!(chat.busy.ttft_p95_microseconds, Some(462_500));
    assert_eq!(chat.busy.ttft_p99_microseconds, Some(492_500));
    // load (48 + 54) / 120 s = 85 %
    assert_eq!(chat.busy.neighbour_load_pct(), 85);
    // queue time within 10 ms everywhere: p95 = 0.01 × 0.95 = 9.5 ms
    assert_eq!(chat.busy.queue_p95_microseconds, Some(9_500));
    // overall: all five minutes, 60 requests
    assert_eq!((chat.overall.minutes, chat.overall.requests), (5, 60));
    assert!(chat.flagged, "{}", chat.verdict);
    assert!(
        chat.verdict
            .contains("time to first token p95 137.5 ms → 462.5 ms"),
        "{}",
        chat.verdict
    );
    assert!(chat.verdict.contains("15% → 85%"), "{}", chat.verdict);

    let busy_self = by("busyself");
    assert!(!busy_self.flagged);
    // 30 requests in 2 minutes against 60 in 2: 15.00 → 30.00 per minute
    assert!(
        busy_self
            .verdict
            .contains("its own requests rose too (15.00 → 30.00 per minute)"),
        "{}",
        busy_self.verdict
    );

    let alone = by("alone");
    assert_eq!(alone.sharing, ["whole_gpu"]);
    assert!(!alone.flagged);
    assert!(
        alone.verdict.starts_with("no co-tenant"),
        "{}",
        alone.verdict
    );

    let few = by("few");
    assert!(!few.flagged);
    assert!(
        few.verdict.starts_with("too few requests"),
        "{}",
        few.verdict
    );
}

#[test]
fn steady_neighbours_or_steady_latency_raise_no_flag() {
    let day = crate::common::day::Day::parse("2026-11-30").expect("day");
    let s = ("steady", "m");
    // latency rises but the co-tenants' load only moves 40 % → 50 %
    let minutes = [
        minute(s, 0, 30, (29, 1), Some(40)),
        minute(s, 1, 30, (5, 5), Some(50)),
    ];
    let r = report(day, day, &minutes, &BTreeMap::new());
    assert!(!r.services[0].flagged);
    assert!(
        r.services[0].verdict.contains("40% → 50%"),
        "{}",
        r.services[0].verdict
    );
    // the load rises 0 % → 100 % and latency holds
    let minutes = [
        minute(s, 0, 30, (20, 5), Some(0)),
        minute(s, 1, 30, (20, 5), Some(100)),
    ];
    let r = report(day, day, &minutes, &BTreeMap::new());
    assert!(!r.services[0].flagged);
    assert!(
        r.services[0].verdict.starts_with("latency held"),
        "{}",
        r.services[0].verdict
    );
}

proptest! {
    #[test]
    fn quantiles_grow_with_q_and_stay_within_the_bounds(
        counts in prop::collection::vec(0i64..50, 1..8),
        extra in 0i64..20,
        q1 in 1i64..100,
        q2 in 1i64..100,
    ) {
        let mut cumulative = 0;
        let buckets: Vec<(i64, i64)> = counts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                cumulative += c;
                ((i as i64 + 1) * 100_000, cumulative)
            })
            .collect();
        let h = histogram(&buckets, Some(cumulative + extra));
        let (lo, hi) = (q1.min(q2), q1.max(q2));
        match (h.quantile(lo, 100), h.quantile(hi, 100)) {
            (Some(a), Some(b)) => {
                prop_assert!(a <= b);
                prop_assert!(b <= buckets.last().map(|(le, _)| *le).unwrap_or(0));
                prop_assert!(a >= 0);
            }
            (None, None) => prop_assert_eq!(cumulative + extra, 0),
            other => prop_assert!(false, "{other:?}"),
        }
    }
}
