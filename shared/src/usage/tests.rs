//! Every expected figure below is worked out by hand in its comment.

use proptest::prelude::*;

use super::*;

const T0: i64 = 1_796_000_400_000; // 2026-11-30T00:00:00Z, a whole hour
const SEC: i64 = 1_000;
const MIN: i64 = 60_000;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

pub(crate) fn series(pairs: &[(&str, &str)], samples: &[(i64, &str)]) -> Series {
    Series {
        labels: labels(pairs),
        samples: samples
            .iter()
            .map(|(at_ms, v)| Sample {
                at_ms: *at_ms,
                micro: parse_micro(v).expect("a value"),
            })
            .collect(),
    }
}

fn flavors() -> Vec<FlavorFacts> {
    vec![
        FlavorFacts {
            name: "h100-shared".into(),
            gpu_model: "H100-SXM5-80GB".into(),
            mig: false,
            sharing: None,
        },
        FlavorFacts {
            name: "h200-mig".into(),
            gpu_model: "H200-SXM-141GB".into(),
            mig: true,
            sharing: None,
        },
    ]
}

fn h100(gpu: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut l = vec![
        ("gpu".to_owned(), gpu.to_owned()),
        ("UUID".to_owned(), format!("GPU-h100-{gpu}")),
        ("modelName".to_owned(), "NVIDIA H100 80GB HBM3".to_owned()),
        ("Hostname".to_owned(), "node-a".to_owned()),
    ];
    l.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    l
}

fn s(l: &[(String, String)], samples: &[(i64, &str)]) -> Series {
    let pairs: Vec<(&str, &str)> = l.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    series(&pairs, samples)
}

fn window(minutes: i64) -> Window {
    Window::new(T0, T0 + minutes * MIN).expect("a window")
}

fn key(minute: i64, ns: &str, flavor: &str) -> UsageKey {
    UsageKey {
        minute_ms: T0 + minute * MIN,
        namespace: ns.into(),
        cluster_queue: String::new(),
        flavor: flavor.into(),
    }
}

#[test]
fn values_are_read_exactly_from_their_decimal_text() {
    assert_eq!(parse_micro("87"), Some(87_000_000));
    assert_eq!(parse_micro("0.913305"), Some(913_305));
    assert_eq!(parse_micro("302.206000"), Some(302_206_000));
    assert_eq!(parse_micro("1e+06"), Some(1_000_000_000_000));
    assert_eq!(parse_micro("2.5E-3"), Some(2_500));
    // half away from zero past the sixth decimal
    assert_eq!(parse_micro("0.0000005"), Some(1));
    assert_eq!(parse_micro("0.00000049"), Some(0));
    assert_eq!(parse_micro("-0.0000005"), Some(-1));
    // 0.1 + 0.2 as Go prints it
    assert_eq!(parse_micro("0.30000000000000004"), Some(300_000));
    for bad in ["", ".", "NaN", "+Inf", "-Inf", "1.2.3", "0x10", "1e", "--1"] {
        assert_eq!(parse_micro(bad), None, "{bad:?}");
    }
}

#[test]
fn a_whole_gpu_minute_is_its_mean_busy_ratio() {
    let util = [s(
        &h100("0", &[("namespace", "team-a")]),
        &[(T0, "80"), (T0 + 30 * SEC, "90")],
    )];
    let rows = device_minutes(&util, &[], &[], window(1), &DeviceFlavors::new(flavors()));
    // (80% + 90%) / 2 = 85% of one GPU-minute: 0.85 × 60,000,000 µs
    assert_eq!(
        rows,
        BTreeMap::from([(
            key(0, "team-a", "h100-shared"),
            DeviceMinute {
                busy_gpu_us: 51_000_000,
                observed_gpu_us: 60_000_000,
                fb_used_mib: 0
            }
        )])
    );
}

#[test]
fn a_gpu_that_changes_pods_within_a_minute_is_split_never_doubled() {
    let util = [
        s(
            &h100("0", &[("namespace", "team-a"), ("pod", "p1")]),
            &[(T0, "100")],
        ),
        s(
            &h100("0", &[("namespace", "team-b"), ("pod", "p2")]),
            &[
                (T0 + 15 * SEC, "0"),
                (T0 + 30 * SEC, "0"),
                (T0 + 45 * SEC, "0"),
            ],
        ),
    ];
    let fb = [
        s(
            &h100("0", &[("namespace", "team-a"), ("pod", "p1")]),
            &[(T0, "4000")],
        ),
        s(
            &h100("0", &[("namespace", "team-b"), ("pod", "p2")]),
            &[
                (T0 + 15 * SEC, "1000"),
                (T0 + 30 * SEC, "1000"),
                (T0 + 45 * SEC, "2000"),
            ],
        ),
    ];
    let rows = device_minutes(&util, &[], &fb, window(1), &DeviceFlavors::new(flavors()));
    // 4 samples: each is a quarter of the minute. team-a: 100% × 1/4 = 15 s busy, 15 s observed;
    // team-b: 0 busy, 45 s observed. Framebuffer: mean over 4 samples, split the same way:
    // team-a 4000/4 = 1000 MiB, team-b (1000 + 1000 + 2000)/4 = 1000 MiB.
    assert_eq!(
        rows[&key(0, "team-a", "h100-shared")],
        DeviceMinute {
            busy_gpu_us: 15_000_000,
            observed_gpu_us: 15_000_000,
            fb_used_mib: 1_000
        }
    );
    assert_eq!(
        rows[&key(0, "team-b", "h100-shared")],
        DeviceMinute {
            busy_gpu_us: 0,
            observed_gpu_us: 45_000_000,
            fb_used_mib: 1_000
        }
    );
}

#[test]
fn a_mig_instance_counts_at_its_compute_share_of_the_gpu() {
    let mig = [
        ("gpu", "0"),
        ("UUID", "GPU-h200"),
        ("modelName", "NVIDIA H200"),
        ("Hostname", "node-b"),
        ("GPU_I_PROFILE", "1g.18gb"),
        ("GPU_I_ID", "9"),
        ("namespace", "team-b"),
    ];
    let engine = [series(&mig, &[(T0, "0.700000")])];
    // GPU_UTIL of a MIG instance is ignored (not reported per instance by DCGM)
    let util = [series(&mig, &[(T0, "100")])];
    let rows = device_minutes(
        &util,
        &engine,
        &[],
        window(1),
        &DeviceFlavors::new(flavors()),
    );
    // H200: 7 compute slices; 1g → 1/7 GPU. busy 0.7 × 1/7 × 60 s = 6 s exactly;
    // observed 60 s / 7 = 8,571,428.57 µs → 8,571,429 (half up).
    assert_eq!(
        rows,
        BTreeMap::from([(
            key(0, "team-b", "h200-mig"),
            DeviceMinute {
                busy_gpu_us: 6_000_000,
                observed_gpu_us: 8_571_429,
                fb_used_mib: 0
            }
        )])
    );
}

#[test]
fn samples_on_the_windows_edges_count_once_and_vanished_devices_stop() {
    let util = [s(
        &h100(
            "1",
            &[
                ("exported_namespace", "team-a"),
                ("namespace", "gpu-operator"),
            ],
        ),
        &[
            (T0 - 1, "100"),       // before the window
            (T0, "50"),            // first instant: in minute 0
            (T0 + MIN - 1, "50"),  // last millisecond of minute 0
            (T0 + MIN, "20"),      // minute 1
            (T0 + 2 * MIN, "100"), // the window's end: not in it
        ],
    )];
    let rows = device_minutes(&util, &[], &[], window(2), &DeviceFlavors::new(flavors()));
    // exported_namespace wins over the scrape target's namespace; the device's series ends at
    // minute 1 and nothing is carried into later minutes.
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[&key(0, "team-a", "h100-shared")].busy_gpu_us,
        30_000_000
    );
    assert_eq!(
        rows[&key(1, "team-a", "h100-shared")].busy_gpu_us,
        12_000_000
    );
}

#[test]
fn unassigned_devices_and_unknown_flavors_are_kept() {
    let util = [series(
        &[
            ("gpu", "0"),
            ("UUID", "GPU-x"),
            ("modelName", "Some Future GPU"),
            ("Hostname", "n"),
        ],
        &[(T0, "10")],
    )];
    let rows = device_minutes(&util, &[], &[], window(1), &DeviceFlavors::new(flavors()));
    assert_eq!(rows[&key(0, "", "")].busy_gpu_us, 6_000_000);
}

#[test]
fn kueue_allocation_counts_gpus_and_mig_shares_per_team() {
    let owners = Owners {
        cluster_queues: BTreeMap::from([("research".into(), "team-research".into())]),
        flavors: flavors(),
    };
    let usage = [
        series(
            &[
                ("cluster_queue", "research"),
                ("flavor", "h100-shared"),
                ("resource", "nvidia.com/gpu"),
            ],
            &[(T0, "8"), (T0 + 30 * SEC, "9"), (T0 + MIN, "8")],
        ),
        series(
            &[
                ("cluster_queue", "research"),
                ("flavor", "h200-mig"),
                ("resource", "nvidia.com/mig-1g.18gb"),
            ],
            &[(T0, "7")],
        ),
        series(
            &[
                ("cluster_queue", "research"),
                ("flavor", "h100-shared"),
                ("resource", "cpu"),
            ],
            &[(T0 + 2 * MIN, "64")],
        ),
        series(
            &[
                ("cluster_queue", "ghost"),
                ("flavor", "h100-shared"),
                ("resource", "nvidia.com/gpu"),
            ],
            &[(T0, "2")],
        ),
    ];
    let (rows, known) = allocation_minutes(&usage, window(3), &owners);
    let cq_key = |minute: i64, ns: &str, cq: &str, flavor: &str| UsageKey {
        minute_ms: T0 + minute * MIN,
        namespace: ns.into(),
        cluster_queue: cq.into(),
        flavor: flavor.into(),
    };
    // minute 0: (8 + 9) / 2 = 8.5 GPUs → 510 GPU-s; minute 1: 8 GPUs → 480 GPU-s;
    // 7 × 1g.18gb on a 7-slice H200 = 1 GPU → 60 GPU-s; the ghost queue: 2 GPUs → 120 GPU-s.
    assert_eq!(
        rows,
        BTreeMap::from([
            (cq_key(0, "", "ghost", "h100-shared"), 120_000_000),
            (cq_key(0, "team-research", "", "h100-shared"), 510_000_000),
            (cq_key(0, "team-research", "", "h200-mig"), 60_000_000),
            (cq_key(1, "team-research", "", "h100-shared"), 480_000_000),
        ])
    );
    // cpu is no GPU, but it shows Kueue reported in minute 2
    assert_eq!(known, BTreeSet::from([T0, T0 + MIN, T0 + 2 * MIN]));
}

/// Three queues in cohort `gpufleet` on h100-shared (research 8 nominal, search 4, eval 4) and
/// one in no cohort (solo, 2 nominal, using 3), one reading a minute:
/// - minute 0: research uses 11 (3 over its 8: borrowed), search 1 (3 unused), eval 2 (2
///   unused): 3 GPU-minutes borrowed from 5 unused → lent 3 × 3/5 = 1.8 and 3 × 2/5 = 1.2
///   GPU-minutes (108 and 72 GPU-s); solo borrows nothing (no cohort), lends nothing;
/// - minute 1: research uses 18 (10 over), search 0 (4 unused), eval 0 (4 unused): only 8 of
///   the 10 borrowed GPUs are the queues' unused quota (a Cohort's own quota holds the rest),
///   so each lends 4 (240 GPU-s);
/// - minute 2: a third each way: 1 GPU borrowed from three lenders with 1 unused each: 20 GPU-s
///   each, exactly 60 in all.
#[test]
fn borrowing_and_lending_follow_quota_and_use_within_a_cohort() {
    let owners = Owners {
        cluster_queues: BTreeMap::from([
            ("research".to_owned(), "team-research".to_owned()),
            ("search".to_owned(), "team-search".to_owned()),
        ]),
        flavors: flavors(),
    };
    let kueue = |cq: &str, cohort: &str, values: [&str; 3]| {
        series(
            &[
                ("cluster_queue", cq),
                ("cohort", cohort),
                ("flavor", "h100-shared"),
                ("resource", "nvidia.com/gpu"),
            ],
            &[
                (T0, values[0]),
                (T0 + MIN, values[1]),
                (T0 + 2 * MIN, values[2]),
            ],
        )
    };
    let usage = [
        kueue("research", "gpufleet", ["11", "18", "4"]),
        kueue("search", "gpufleet", ["1", "0", "0"]),
        kueue("eval", "gpufleet", ["2", "0", "0"]),
        kueue("d", "gpufleet", ["0", "0", "0"]),
        kueue("solo", "", ["3", "3", "3"]),
    ];
    let nominal = [
        kueue("research", "gpufleet", ["8", "8", "3"]),
        kueue("search", "gpufleet", ["4", "4", "1"]),
        kueue("eval", "gpufleet", ["4", "4", "1"]),
        kueue("d", "gpufleet", ["0", "0", "1"]),
        kueue("solo", "", ["2", "2", "2"]),
        // a quota (of 0) and no usage series at all: it uses none of it
        kueue("e", "gpufleet", ["0", "0", "0"]),
    ];
    let (mut allocated, _) = allocation_minutes(&usage, window(3), &owners);
    let lending = lending_minutes(&usage, &nominal, window(3), &owners, &mut allocated);
    let row = |minute: i64, ns: &str, cq: &str| {
        let k = UsageKey {
            minute_ms: T0 + minute * MIN,
            namespace: ns.into(),
            cluster_queue: cq.into(),
            flavor: "h100-shared".into(),
        };
        let l = lending.get(&k).copied().unwrap_or_else(|| panic!("{k:?}"));
        (
            l.nominal_gpu_us / GPU_US_PER_GPU_MINUTE,
            l.borrowed_gpu_us,
            l.lent_gpu_us,
        )
    };
    const G: i64 = GPU_US_PER_GPU_MINUTE;
    assert_eq!(row(0, "team-research", ""), (8, 3 * G, 0));
    assert_eq!(row(0, "team-search", ""), (4, 0, 108_000_000));
    assert_eq!(row(0, "", "eval"), (4, 0, 72_000_000));
    assert_eq!(row(0, "", "d"), (0, 0, 0));
    assert_eq!(row(0, "", "solo"), (2, 0, 0));
    assert_eq!(row(1, "team-research", ""), (8, 10 * G, 0));
    assert_eq!(row(1, "team-search", ""), (4, 0, 4 * G));
    assert_eq!(row(1, "", "eval"), (4, 0, 4 * G));
    assert_eq!(row(2, "team-research", ""), (3, G, 0));
    assert_eq!(
        [
            row(2, "team-search", "").2,
            row(2, "", "eval").2,
            row(2, "", "d").2
        ],
        [20_000_000; 3]
    );
    // A queue with quota and no usage series is using none of it (0, not unknown).
    let e = UsageKey {
        minute_ms: T0,
        namespace: String::new(),
        cluster_queue: "e".into(),
        flavor: "h100-shared".into(),
    };
    assert_eq!(allocated.get(&e), Some(&0));
    // Without nominal quota series, lending is unknown: no figures rather than zeros.
    let before = allocated.clone();
    assert!(lending_minutes(&usage, &[], window(3), &owners, &mut allocated).is_empty());
    assert_eq!(allocated, before);
}

/// Largest remainder: 10 in proportion to 1:1:1 is 4, 3, 3 (the first takes the extra unit);
/// to 2:1 it is 7 and 3 (6.67 → 7, 3.33 → 3).
#[test]
fn apportioning_adds_up_exactly() {
    assert_eq!(apportion(10, &[1, 1, 1]), [4, 3, 3]);
    assert_eq!(apportion(10, &[2, 1]), [7, 3]);
    assert_eq!(apportion(5, &[0, 0]), [0, 0]);
}

#[test]
fn requests_of_running_pods_stand_in_for_kueue() {
    let requests = [
        series(
            &[
                ("namespace", "team-search"),
                ("pod", "serve-1"),
                ("resource", "nvidia_com_gpu"),
                ("unit", "integer"),
            ],
            &[(T0, "2"), (T0 + 30 * SEC, "2"), (T0 + MIN, "2")],
        ),
        series(
            &[
                ("namespace", "team-search"),
                ("pod", "serve-1"),
                ("resource", "nvidia_com_mig_1g_18gb"),
            ],
            &[(T0, "7")],
        ),
        series(
            &[
                ("namespace", "team-search"),
                ("pod", "serve-1"),
                ("resource", "cpu"),
            ],
            &[(T0, "8")],
        ),
        series(
            &[
                ("namespace", "team-research"),
                ("pod", "done-0"),
                ("resource", "nvidia_com_gpu"),
            ],
            &[(T0, "1"), (T0 + MIN, "1")],
        ),
    ];
    let phases = [
        series(
            &[
                ("namespace", "team-search"),
                ("pod", "serve-1"),
                ("phase", "Running"),
            ],
            &[(T0, "1")],
        ),
        // done-0 finished: its Running series reads 0, its requests stay exported
        series(
            &[
                ("namespace", "team-research"),
                ("pod", "done-0"),
                ("phase", "Running"),
            ],
            &[(T0, "0"), (T0 + MIN, "0")],
        ),
        series(
            &[
                ("namespace", "team-research"),
                ("pod", "done-0"),
                ("phase", "Succeeded"),
            ],
            &[(T0, "1")],
        ),
    ];
    let rows = requested_minutes(&requests, &phases, window(2));
    // minute 0: serve-1 runs with 2 GPUs and 7 × 1g (1 GPU on a 7-slice GPU) = 180 GPU-s;
    // minute 1: no Running sample for serve-1, so nothing; done-0 never counts
    assert_eq!(
        rows,
        BTreeMap::from([(key(0, "team-search", ""), 180_000_000)])
    );
}

#[test]
fn token_counters_survive_resets_and_count_increases_in_the_minute_they_were_counted_in() {
    let l = [
        ("namespace", "team-search"),
        ("model_name", "llama-8b"),
        ("pod", "vllm-0"),
    ];
    let prompt = [series(
        &l,
        &[
            (T0 - 30 * SEC, "70"),    // before the window: only the baseline
            (T0, "100"),              // counted up to the window's start: +30 before it
            (T0 + 10 * SEC, "150"),   // +50 in minute 0
            (T0 + 40 * SEC, "30"),    // restarted: +30 in minute 0
            (T0 + 70 * SEC, "50"),    // +20 in minute 1
            (T0 + 2 * MIN, "90"),     // counted up to the window's end: +40 in minute 1
            (T0 + 2 * MIN + 1, "95"), // after it: not in the window
        ],
    )];
    let generation = [series(&l, &[(T0 - 1, "0"), (T0 + 5 * SEC, "1000")])];
    // prefill seconds: 1.5 s then 0.25 s more; decode 12.000001 s in minute 1
    let prefill = [series(
        &l,
        &[
            (T0 - 1, "10"),
            (T0 + 10 * SEC, "11.5"),
            (T0 + 70 * SEC, "11.75"),
        ],
    )];
    let decode = [series(
        &l,
        &[(T0 + 50 * SEC, "100"), (T0 + 70 * SEC, "112.000001")],
    )];
    let served = Served {
        prompt: &prompt,
        generation: &generation,
        prefill_seconds: &prefill,
        decode_seconds: &decode,
    };
    let rows = token_minutes(&served, window(2));
    let k = |minute: i64| TokenKey {
        minute_ms: T0 + minute * MIN,
        namespace: "team-search".into(),
        model: "llama-8b".into(),
    };
    assert_eq!(
        rows,
        BTreeMap::from([
            (
                k(0),
                Tokens {
                    prompt: 80,
                    generation: 1000,
                    prefill_us: 1_500_000,
                    decode_us: 0,
                }
            ),
            (
                k(1),
                Tokens {
                    prompt: 60,
                    generation: 0,
                    prefill_us: 250_000,
                    decode_us: 12_000_001,
                }
            ),
        ])
    );
}

#[test]
fn nvml_model_names_find_their_catalogue_model() {
    let name = |s| catalogue_model(s).map(|m| m.name.as_str());
    assert_eq!(name("NVIDIA H200"), Some("H200-SXM-141GB"));
    assert_eq!(name("NVIDIA H100 80GB HBM3"), Some("H100-SXM5-80GB"));
    assert_eq!(name("NVIDIA A100-SXM4-80GB"), Some("A100-SXM4-80GB"));
    assert_eq!(
        name("NVIDIA RTX PRO 6000 Blackwell Server Edition"),
        Some("RTX-PRO-6000-96GB")
    );
    assert_eq!(name("NVIDIA GeForce GTX 1080"), None);
}

#[test]
fn windows_must_be_whole_minutes() {
    assert!(Window::new(T0, T0 + MIN).is_ok());
    assert!(Window::new(T0 + 1, T0 + MIN).is_err());
    assert!(Window::new(T0, T0).is_err());
}

fn merged<K: Ord + Clone, V: Copy>(a: BTreeMap<K, V>, b: BTreeMap<K, V>) -> BTreeMap<K, V> {
    a.into_iter().chain(b).collect()
}

proptest! {
    /// Tiling a span with two windows gives the rows of the whole span: no sample is counted
    /// twice or lost at the seam, whatever the samples and wherever the seam.
    #[test]
    fn windows_that_tile_a_span_give_its_rows(
        samples in proptest::collection::vec((0i64..10 * 60, 0u8..=100, 0usize..3, 0usize..2), 0..80),
        seam in 1i64..10,
    ) {
        let namespaces = ["team-a", "team-b", ""];
        let mut by_series: BTreeMap<(usize, usize), Vec<Sample>> = BTreeMap::new();
        for (second, value, ns, gpu) in samples {
            by_series.entry((ns, gpu)).or_default().push(Sample {
                at_ms: T0 + second * SEC,
                micro: i64::from(value) * 1_000_000,
            });
        }
        let util: Vec<Series> = by_series
            .into_iter()
            .map(|((ns, gpu), mut samples)| {
                samples.sort_by_key(|x| x.at_ms);
                samples.dedup_by_key(|x| x.at_ms);
                let gpu = gpu.to_string();
                let pairs = h100(&gpu, &[("namespace", namespaces[ns])]);
                let mut one = s(&pairs, &[]);
                one.samples = samples;
                one
            })
            .collect();
        let whole = device_minutes(&util, &[], &util, window(10), &DeviceFlavors::new(flavors()));
        let first = device_minutes(&util, &[], &util, Window::new(T0, T0 + seam * MIN).expect("w"), &DeviceFlavors::new(flavors()));
        let second = device_minutes(&util, &[], &util, Window::new(T0 + seam * MIN, T0 + 10 * MIN).expect("w"), &DeviceFlavors::new(flavors()));
        prop_assert_eq!(&whole, &merged(first, second));
        let served = Served { prompt: &util, decode_seconds: &util, ..Served::default() };
        let tokens = token_minutes(&served, window(10));
        let t1 = token_minutes(&served, Window::new(T0, T0 + seam * MIN).expect("w"));
        let t2 = token_minutes(&served, Window::new(T0 + seam * MIN, T0 + 10 * MIN).expect("w"));
        prop_assert_eq!(tokens, merged(t1, t2));
        // no device-minute is observed for more than one GPU-minute per device
        for (key, row) in &whole {
            prop_assert!(row.observed_gpu_us <= 2 * GPU_US_PER_GPU_MINUTE, "{key:?}");
            prop_assert!(row.busy_gpu_us <= row.observed_gpu_us, "{key:?}");
        }
    }

    /// A minute of constant utilisation is that utilisation × one GPU-minute, however many
    /// samples it has.
    #[test]
    fn constant_utilisation_is_exact_whatever_the_sample_count(util in 0u8..=100, n in 1i64..=60) {
        let samples: Vec<(i64, String)> = (0..n).map(|i| (T0 + i * (MIN / n), util.to_string())).collect();
        let samples: Vec<(i64, &str)> = samples.iter().map(|(t, v)| (*t, v.as_str())).collect();
        let rows = device_minutes(&[s(&h100("0", &[("namespace", "team-a")]), &samples)], &[], &[], window(1), &DeviceFlavors::new(flavors()));
        prop_assert_eq!(rows[&key(0, "team-a", "h100-shared")].busy_gpu_us, i64::from(util) * 600_000);
    }
}

/// Issue 32, point 2: one H100 of a node of whole GPUs split into `1g.10gb` instances, Kueue
/// reporting `nvidia.com/gpu` and `nvidia.com/mig-1g.10gb` on the one flavor `h100-shared`
/// (Kueue lets one ResourceFlavor cover both in a resource group), beside an `h100-mig` flavor
/// of the same model. The instance is `h100-shared`'s, as Kueue says, not the MIG flavor's.
#[test]
fn a_mig_instance_lands_in_the_flavor_kueue_admitted_it_on() {
    let mut both = flavors();
    both.push(FlavorFacts {
        name: "h100-mig".into(),
        gpu_model: "H100-SXM5-80GB".into(),
        mig: true,
        sharing: None,
    });
    let owners = Owners {
        cluster_queues: BTreeMap::from([("search".into(), "team-search".into())]),
        flavors: both.clone(),
    };
    let kueue = |resource: &str, flavor: &str, value: &str| {
        series(
            &[
                ("cluster_queue", "search"),
                ("flavor", flavor),
                ("resource", resource),
            ],
            &[(T0 + 10 * SEC, value)],
        )
    };
    let instance = s(
        &h100(
            "3",
            &[
                ("namespace", "team-search"),
                ("GPU_I_PROFILE", "1g.10gb"),
                ("GPU_I_ID", "9"),
            ],
        ),
        &[(T0 + 15 * SEC, "0.7")],
    );
    let usage = [
        kueue("nvidia.com/gpu", "h100-shared", "2"),
        kueue("nvidia.com/mig-1g.10gb", "h100-shared", "1"),
        // quota reported on the MIG flavor, none of it held: no evidence
        kueue("nvidia.com/mig-1g.10gb", "h100-mig", "0"),
    ];
    let told = DeviceFlavors::new(both.clone()).held_by_kueue(&usage, window(1), &owners);
    let rows = device_minutes(&[], std::slice::from_ref(&instance), &[], window(1), &told);
    // 0.7 × 1/7 of an H100's minute = 6 s busy of 8,571,428.57 µs observed
    assert_eq!(
        rows,
        BTreeMap::from([(
            key(0, "team-search", "h100-shared"),
            DeviceMinute {
                busy_gpu_us: 6_000_000,
                observed_gpu_us: 8_571_429,
                fb_used_mib: 0,
            }
        )])
    );
    // whole cards of the namespace follow Kueue's nvidia.com/gpu the same way
    let card = h100("0", &[("namespace", "team-search")])
        .into_iter()
        .collect();
    assert_eq!(told.of(&card).map(|f| f.name.as_str()), Some("h100-shared"));

    // without Kueue's word: the flavor split like the device; with one flavor of the model,
    // that one whatever its split; a relabelled `flavor` wins
    let untold = DeviceFlavors::new(both);
    assert_eq!(
        untold.of(&instance.labels).map(|f| f.name.as_str()),
        Some("h100-mig")
    );
    let one = DeviceFlavors::new(flavors());
    assert_eq!(
        one.of(&instance.labels).map(|f| f.name.as_str()),
        Some("h100-shared")
    );
    let mut relabelled = instance.labels.clone();
    relabelled.insert("flavor".into(), "h200-mig".into());
    assert_eq!(
        one.of(&relabelled).map(|f| f.name.as_str()),
        Some("h200-mig")
    );
}
