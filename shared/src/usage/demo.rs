//! The demo fleet's metrics: what dcgm-exporter, Kueue (with
//! `metrics.enableClusterQueueResources`) and vLLM would report for an inventory at an instant,
//! as a pure function of the instant, so the live demo exporter and the seeded history agree.
//!
//! The mix, by pool: a pool whose flavor name says `train` runs the first team's training;
//! one that says `inference` serves the other teams' models; any other pool is shared:
//! inference by day (KEDA scaling with traffic), training backlog borrowing it at night.
//! Traffic follows a day curve peaking at 16:00 UTC. Training GPUs run ~90% busy with a
//! checkpoint dip every tenth minute; inference GPUs run 20-80% with traffic; free GPUs idle.
//! Two GPUs of the first shared pool are held by `ml-sandbox`, a namespace no team owns, so
//! the console shows unattributed use. A pool whose flavor has a MIG layout serves small
//! models from MIG instances (the other teams, with traffic, GPU by GPU), reported per
//! instance as dcgm-exporter does (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`, no `GPU_UTIL`) and to
//! Kueue as `nvidia.com/mig-<profile>`. vLLM's latency histograms: the served models' steady
//! ones, and a small model on the MIG pool's first instance at a steady request rate whose time
//! to first token degrades as the other instances of its GPU get busy with traffic (the
//! noisy-neighbour view's flagged example; it serves tokens at that rate too, so the cost per
//! million tokens shows it). Kueue's queue metrics for every ClusterQueue with
//! quota: admissions at a steady rate whose waits grow as traffic fills the cohort, pending
//! Workloads following traffic, a preemption per half hour of full traffic. Every figure is
//! labelled demo data where shown.

use std::f64::consts::PI;

use crate::common::utc::{DAY_MS, MINUTE_MS};

/// A pool of the inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoPool {
    pub flavor: String,
    /// A catalogue model name, e.g. `H100-SXM5-80GB`.
    pub gpu_model: String,
    pub mem_mib: i64,
    pub nodes: i64,
    pub gpus_per_node: i64,
    /// MIG instances per GPU by profile (the flavor's layout); empty for whole GPUs.
    pub mig_layout: Vec<(String, u32)>,
}

/// A team: its namespace and ClusterQueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoTeam {
    pub namespace: String,
    pub cluster_queue: String,
}

/// One sample: metric name, labels, value as exposition text.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoSample {
    pub metric: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: String,
}

/// Served models' token rates at full traffic, prompt and generation per second.
const PROMPT_PER_S: f64 = 1_800.0;
const GENERATION_PER_S: f64 = 450.0;
/// Request-seconds spent in prefill and in decode per second at full traffic.
const PREFILL_S_PER_S: f64 = 6.0;
const DECODE_S_PER_S: f64 = 40.0;
/// Histogram bounds (vLLM's defaults, the low end) and the share of requests within each:
/// time to first token and queue time, with idle co-tenants and with fully busy ones.
const TTFT_LE: [&str; 10] = [
    "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1", "2.5",
];
const TTFT_QUIET: [f64; 10] = [0.30, 0.70, 0.90, 0.96, 0.98, 1.0, 1.0, 1.0, 1.0, 1.0];
const TTFT_BUSY: [f64; 10] = [0.02, 0.10, 0.25, 0.40, 0.55, 0.80, 0.92, 0.97, 0.99, 1.0];
/// The big models' steady time to first token.
const TTFT_STEADY: [f64; 10] = [0.05, 0.20, 0.45, 0.65, 0.80, 0.95, 0.99, 1.0, 1.0, 1.0];
const QUEUE_LE: [&str; 5] = ["0.3", "0.5", "0.8", "1", "1.5"];
const QUEUE_QUIET: [f64; 5] = [0.99, 1.0, 1.0, 1.0, 1.0];
const QUEUE_BUSY: [f64; 5] = [0.80, 0.90, 0.95, 0.97, 1.0];
/// Requests per second: the small MIG model's, steady; the big models' at full traffic.
const SMALL_RPS: f64 = 2.0;
const BIG_RPS: f64 = 5.0;
const SMALL_MODEL: &str = "llama-3.2-1b-instruct";
/// What one of the small model's requests holds: prompt and generated tokens, seconds in
/// prefill and in decode.
const SMALL_PROMPT_PER_REQUEST: f64 = 250.0;
const SMALL_GENERATION_PER_REQUEST: f64 = 80.0;
const SMALL_PREFILL_S_PER_REQUEST: f64 = 0.02;
const SMALL_DECODE_S_PER_REQUEST: f64 = 0.6;
/// Counters count from here (2026-01-01T00:00:00Z), so history and live values agree.
const COUNTER_EPOCH_MS: i64 = 1_767_225_600_000;
const SANDBOX: &str = "ml-sandbox";
/// Kueue's admission-wait buckets (1 s, then 2.5 s doubling: `pkg/metrics/metrics.go`) and the
/// share of admissions within each when the cohort is quiet and when it is full.
const WAIT_LE: [&str; 14] = [
    "1", "2.5", "5", "10", "20", "40", "80", "160", "320", "640", "1280", "2560", "5120", "10240",
];
const WAIT_QUIET: [f64; 14] = [
    0.05, 0.15, 0.30, 0.50, 0.65, 0.78, 0.88, 0.94, 0.97, 0.99, 1.0, 1.0, 1.0, 1.0,
];
const WAIT_FULL: [f64; 14] = [
    0.0, 0.02, 0.05, 0.10, 0.15, 0.25, 0.35, 0.50, 0.65, 0.80, 0.90, 0.97, 1.0, 1.0,
];
/// Admissions per second of a ClusterQueue (the first; the n-th admits 1/n of it).
const ADMISSIONS_PER_S: f64 = 1.0 / 60.0;

/// Traffic in [0, 1] at an instant: 0 at 04:00 UTC, 1 at 16:00 UTC.
fn traffic(at_ms: i64) -> f64 {
    let hours = (at_ms.rem_euclid(DAY_MS)) as f64 / 3_600_000.0;
    0.5 - 0.5 * (2.0 * PI * (hours - 4.0) / 24.0).cos()
}

/// ∫ traffic dt from the counter epoch to `at_ms`, in seconds.
fn traffic_integral_s(at_ms: i64) -> f64 {
    let f = |ms: i64| {
        let t = ms as f64 / 1000.0;
        let w = 2.0 * PI / 86_400.0;
        0.5 * t - 0.5 / w * (w * (t - 4.0 * 3600.0)).sin()
    };
    f(at_ms) - f(COUNTER_EPOCH_MS)
}

/// A deterministic number in [0, 1) for a key (splitmix64).
fn noise(key: u64) -> f64 {
    let mut z = key.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[derive(Clone, Copy, PartialEq)]
enum Work {
    Training,
    Inference,
}

/// (ClusterQueue, flavor, resource, count): a queue's quota in use, or its nominal quota.
type QueueCount = (String, String, String, i64);

/// Every sample of the demo fleet at `at_ms`.
pub fn samples(pools: &[DemoPool], teams: &[DemoTeam], at_ms: i64) -> Vec<DemoSample> {
    let mut out = Vec::new();
    let Some(trainer) = teams.first() else {
        return out;
    };
    let servers: &[DemoTeam] = if teams.len() > 1 { &teams[1..] } else { teams };
    let mut kueue: Vec<QueueCount> = Vec::new();
    let mut nominal: Vec<QueueCount> = Vec::new();
    let mut inference_gpus = 0i64;
    let mut sandbox_placed = false;
    for (p, pool) in pools.iter().enumerate() {
        if pool.mig_layout.is_empty() {
            let (inference, sandbox) = whole_gpu_pool(
                (p, pool),
                (trainer, servers),
                at_ms,
                !sandbox_placed,
                &mut out,
                (&mut kueue, &mut nominal),
            );
            inference_gpus += inference;
            sandbox_placed |= sandbox;
        } else {
            mig_samples(p, pool, servers, at_ms, &mut out, &mut kueue, &mut nominal);
        }
    }
    kueue_samples(kueue, nominal, at_ms, &mut out);
    if inference_gpus > 0 {
        served_models(servers, at_ms, &mut out);
    }
    if let Some(server) = servers.first()
        && pools.iter().any(|p| !p.mig_layout.is_empty())
    {
        small_model(server, at_ms, &mut out);
    }
    out
}

/// One pool of whole GPUs: its nominal quota (a training pool is the trainer's, an inference
/// pool the servers', a shared pool half each, so the night's training backlog borrows the
/// servers' idle half), its GPUs' work and DCGM samples, and two GPUs of the first shared pool
/// held by the sandbox when `sandbox_free`. Returns the GPUs serving, and whether the sandbox
/// was placed here.
fn whole_gpu_pool(
    (p, pool): (usize, &DemoPool),
    (trainer, servers): (&DemoTeam, &[DemoTeam]),
    at_ms: i64,
    sandbox_free: bool,
    out: &mut Vec<DemoSample>,
    (kueue, nominal): (&mut Vec<QueueCount>, &mut Vec<QueueCount>),
) -> (i64, bool) {
    let d = traffic(at_ms);
    let gpus = pool.nodes * pool.gpus_per_node;
    let gpu = "nvidia.com/gpu".to_owned();
    let trainer_quota = if pool.flavor.contains("train") {
        gpus
    } else if pool.flavor.contains("inference") {
        0
    } else {
        gpus / 2
    };
    nominal.push((
        trainer.cluster_queue.clone(),
        pool.flavor.clone(),
        gpu.clone(),
        trainer_quota,
    ));
    for (server, n) in split(servers, gpus - trainer_quota) {
        nominal.push((
            server.cluster_queue.clone(),
            pool.flavor.clone(),
            gpu.clone(),
            n,
        ));
    }
    let (training, inference) = if pool.flavor.contains("train") {
        (((0.95 - 0.15 * d) * gpus as f64).round() as i64, 0)
    } else if pool.flavor.contains("inference") {
        (0, ((0.2 + 0.7 * d) * gpus as f64).round() as i64)
    } else {
        let inf = ((0.15 + 0.6 * d) * gpus as f64).round() as i64;
        let train = ((0.7 - 0.6 * d) * gpus as f64).round() as i64;
        (train.min(gpus - inf), inf)
    };
    let sandbox = if sandbox_free
        && !pool.flavor.contains("train")
        && !pool.flavor.contains("inference")
        && gpus - training - inference >= 2
    {
        2
    } else {
        0
    };
    if training > 0 {
        let (cq, flavor) = (trainer.cluster_queue.clone(), pool.flavor.clone());
        kueue.push((cq, flavor, gpu.clone(), training));
    }
    for (i, server) in servers.iter().enumerate() {
        let share = inference / servers.len() as i64
            + i64::from((i as i64) < inference % servers.len() as i64);
        if share > 0 {
            let (cq, flavor) = (server.cluster_queue.clone(), pool.flavor.clone());
            kueue.push((cq, flavor, gpu.clone(), share));
        }
    }
    let held = Held {
        training,
        inference,
        sandbox,
    };
    gpu_samples((p, pool), (trainer, servers), held, at_ms, out);
    (inference, sandbox > 0)
}

/// How a pool's GPUs are held, in order from its first: training, serving, the sandbox.
struct Held {
    training: i64,
    inference: i64,
    sandbox: i64,
}

/// Each GPU of a pool of whole GPUs as dcgm-exporter reports it: busy and framebuffer, with the
/// pod that holds it.
fn gpu_samples(
    (p, pool): (usize, &DemoPool),
    (trainer, servers): (&DemoTeam, &[DemoTeam]),
    held: Held,
    at_ms: i64,
    out: &mut Vec<DemoSample>,
) {
    let Held {
        training,
        inference,
        sandbox,
    } = held;
    let d = traffic(at_ms);
    let minute = at_ms.div_euclid(MINUTE_MS);
    let gpus = pool.nodes * pool.gpus_per_node;
    for g in 0..gpus {
        let key = ((p as u64) << 40) ^ (g as u64);
        let mut labels = gpu_labels(p, pool, g);
        let work = if g < training {
            Some((
                Work::Training,
                trainer.namespace.clone(),
                format!("train-{}", g / 8),
            ))
        } else if g < training + inference {
            let k = (g - training) as usize % servers.len();
            Some((
                Work::Inference,
                servers[k].namespace.clone(),
                format!("vllm-{}", g - training),
            ))
        } else if g < training + inference + sandbox {
            Some((Work::Training, SANDBOX.to_owned(), "notebook-0".to_owned()))
        } else {
            None
        };
        let wobble = noise(key ^ ((minute as u64) << 20));
        let (util, fb_share) = match &work {
            Some((Work::Training, _, _)) if minute % 10 == 0 => (30.0 + 10.0 * wobble, 0.72),
            Some((Work::Training, _, _)) => (88.0 + 8.0 * wobble, 0.72),
            Some((Work::Inference, _, _)) => (20.0 + 60.0 * d + 8.0 * wobble - 4.0, 0.45),
            None => (0.0, 0.0),
        };
        if let Some((_, namespace, pod)) = work {
            labels.push(("container", "main".to_owned()));
            labels.push(("namespace", namespace));
            labels.push(("pod", pod));
        }
        let fb = if fb_share > 0.0 {
            (fb_share * pool.mem_mib as f64) as i64
        } else {
            512
        };
        out.push(DemoSample {
            metric: super::GPU_UTIL,
            labels: labels.clone(),
            value: (util.clamp(0.0, 100.0).round() as i64).to_string(),
        });
        out.push(DemoSample {
            metric: super::FB_USED,
            labels,
            value: fb.to_string(),
        });
    }
}

/// Kueue's usage (0 for a flavor and resource a queue holds quota of and does not use) and
/// nominal quota of each queue, and its queue metrics.
fn kueue_samples(
    mut kueue: Vec<QueueCount>,
    nominal: Vec<QueueCount>,
    at_ms: i64,
    out: &mut Vec<DemoSample>,
) {
    for (cq, flavor, resource, _) in &nominal {
        if !kueue
            .iter()
            .any(|(c, f, r, _)| c == cq && f == flavor && r == resource)
        {
            kueue.push((cq.clone(), flavor.clone(), resource.clone(), 0));
        }
    }
    queue_samples(&nominal, at_ms, out);
    let usage = kueue.into_iter().map(|k| (super::KUEUE_USAGE, k));
    let quota = nominal.into_iter().map(|k| (super::KUEUE_NOMINAL, k));
    for (metric, (cluster_queue, flavor, resource, count)) in usage.chain(quota) {
        out.push(DemoSample {
            metric,
            labels: vec![
                ("cluster_queue", cluster_queue),
                ("cohort", "gpufleet".to_owned()),
                ("flavor", flavor),
                ("resource", resource),
            ],
            value: count.to_string(),
        });
    }
}

/// The big models' vLLM counters and latency, each server's at its share of the traffic.
fn served_models(servers: &[DemoTeam], at_ms: i64, out: &mut Vec<DemoSample>) {
    let integral = traffic_integral_s(at_ms);
    for (i, server) in servers.iter().enumerate() {
        let scale = 1.0 / (i as f64 + 1.0);
        let labels = vec![
            ("namespace", server.namespace.clone()),
            ("model_name", "llama-3.1-8b-instruct".to_owned()),
            ("engine", "0".to_owned()),
        ];
        let per_second = [
            PROMPT_PER_S,
            GENERATION_PER_S,
            PREFILL_S_PER_S,
            DECODE_S_PER_S,
        ];
        serving_counters(out, &labels, per_second.map(|r| r * scale), integral);
        // requests follow traffic; each bucket holds a fixed share of them
        let requests = BIG_RPS * scale * integral;
        for (metric, bounds, shares) in [
            (
                super::neighbours::TTFT_BUCKET,
                &TTFT_LE[..],
                &TTFT_STEADY[..],
            ),
            (
                super::neighbours::QUEUE_BUCKET,
                &QUEUE_LE[..],
                &QUEUE_QUIET[..],
            ),
        ] {
            histogram(out, metric, &labels, bounds, |k| {
                shares.get(k).map_or(requests, |f| requests * f)
            });
        }
    }
}

/// The small model on the MIG pool's first instance, always held by the first server.
fn small_model(server: &DemoTeam, at_ms: i64, out: &mut Vec<DemoSample>) {
    let labels = vec![
        ("namespace", server.namespace.clone()),
        ("pod", "vllm-small-0".to_owned()),
        ("model_name", SMALL_MODEL.to_owned()),
        ("engine", "0".to_owned()),
    ];
    // ∫ R × (quiet + (busy − quiet) × traffic) dt: the share within a bound falls as the
    // co-tenants (the GPU's other instances, busy with traffic) load it
    let seconds = (at_ms - COUNTER_EPOCH_MS) as f64 / 1000.0;
    let integral = traffic_integral_s(at_ms);
    for (metric, bounds, quiet, busy) in [
        (
            super::neighbours::TTFT_BUCKET,
            &TTFT_LE[..],
            &TTFT_QUIET[..],
            &TTFT_BUSY[..],
        ),
        (
            super::neighbours::QUEUE_BUCKET,
            &QUEUE_LE[..],
            &QUEUE_QUIET[..],
            &QUEUE_BUSY[..],
        ),
    ] {
        histogram(out, metric, &labels, bounds, |k| {
            match (quiet.get(k), busy.get(k)) {
                (Some(q), Some(b)) => SMALL_RPS * (q * seconds + (b - q) * integral),
                _ => SMALL_RPS * seconds,
            }
        });
    }
    // what it serves, at its steady request rate
    let per_request = [
        SMALL_PROMPT_PER_REQUEST,
        SMALL_GENERATION_PER_REQUEST,
        SMALL_PREFILL_S_PER_REQUEST,
        SMALL_DECODE_S_PER_REQUEST,
    ];
    serving_counters(out, &labels, per_request.map(|r| SMALL_RPS * r), seconds);
}

/// A served model's vLLM counters (prompt and generated tokens, prefill and decode seconds):
/// `each` of them per second of `units` (the counter epoch's seconds, or its traffic-seconds).
fn serving_counters(
    out: &mut Vec<DemoSample>,
    labels: &[(&'static str, String)],
    each: [f64; 4],
    units: f64,
) {
    let metrics = [
        super::PROMPT_TOKENS,
        super::GENERATION_TOKENS,
        super::PREFILL_SECONDS,
        super::DECODE_SECONDS,
    ];
    for (metric, per) in metrics.into_iter().zip(each) {
        out.push(DemoSample {
            metric,
            labels: labels.to_vec(),
            value: counted(metric, per * units),
        });
    }
}

/// A counter's value as vLLM exposes it: whole tokens, or seconds with millisecond digits as a
/// histogram's sum reads.
fn counted(metric: &str, total: f64) -> String {
    if metric.ends_with("_seconds_sum") {
        format!("{:.3}", (total * 1000.0).floor() / 1000.0)
    } else {
        (total.floor() as i64).to_string()
    }
}

/// A histogram's `_bucket` series: `cumulative(k)` observations within `bounds[k]`, and
/// `cumulative(bounds.len())` in `+Inf`, as whole counts.
/// Kueue's queue metrics of every ClusterQueue with quota: admissions at a steady rate, their
/// waits longer as traffic fills the cohort; pending Workloads rising with traffic (one
/// inadmissible at the peak); a preemption per half hour of full traffic.
fn queue_samples(nominal: &[(String, String, String, i64)], at_ms: i64, out: &mut Vec<DemoSample>) {
    let mut queues: Vec<&str> = nominal.iter().map(|(cq, ..)| cq.as_str()).collect();
    queues.sort_unstable();
    queues.dedup();
    let seconds = (at_ms - COUNTER_EPOCH_MS) as f64 / 1000.0;
    let (full, integral) = (traffic(at_ms), traffic_integral_s(at_ms));
    for (i, cq) in queues.into_iter().enumerate() {
        let labels = vec![("cluster_queue", cq.to_owned())];
        let rate = ADMISSIONS_PER_S / (i as f64 + 1.0);
        histogram(
            out,
            super::queues::ADMISSION_WAIT_BUCKET,
            &labels,
            &WAIT_LE,
            |k| match (WAIT_QUIET.get(k), WAIT_FULL.get(k)) {
                (Some(q), Some(f)) => rate * (q * seconds + (f - q) * integral),
                _ => rate * seconds,
            },
        );
        for (status, n) in [
            ("active", (6.0 * full).round() as i64),
            ("inadmissible", i64::from(full > 0.8)),
        ] {
            let mut labels = labels.clone();
            labels.push(("status", status.to_owned()));
            out.push(DemoSample {
                metric: super::queues::PENDING,
                labels,
                value: n.to_string(),
            });
        }
        let mut labels = labels;
        labels.push(("reason", "Preempted".to_owned()));
        out.push(DemoSample {
            metric: super::queues::EVICTED,
            labels,
            value: ((integral / 1800.0).floor() as i64).to_string(),
        });
    }
}

fn histogram(
    out: &mut Vec<DemoSample>,
    metric: &'static str,
    labels: &[(&'static str, String)],
    bounds: &[&str],
    cumulative: impl Fn(usize) -> f64,
) {
    for (k, le) in bounds.iter().copied().chain(["+Inf"]).enumerate() {
        let mut labels = labels.to_vec();
        labels.push(("le", le.to_owned()));
        out.push(DemoSample {
            metric,
            labels,
            value: (cumulative(k).max(0.0).floor() as i64).to_string(),
        });
    }
}

/// `n` split evenly among `teams`, the first ones taking one more where it does not divide.
fn split(teams: &[DemoTeam], n: i64) -> Vec<(&DemoTeam, i64)> {
    let count = teams.len().max(1) as i64;
    teams
        .iter()
        .enumerate()
        .map(|(i, t)| (t, n / count + i64::from((i as i64) < n % count)))
        .collect()
}

/// dcgm-exporter's fixed labels of GPU `g` of pool `p`, in its order.
fn gpu_labels(p: usize, pool: &DemoPool, g: i64) -> Vec<(&'static str, String)> {
    let (node, index) = (g / pool.gpus_per_node, g % pool.gpus_per_node);
    let key = ((p as u64) << 40) ^ (g as u64);
    vec![
        ("gpu", index.to_string()),
        (
            "UUID",
            format!(
                "GPU-{:08x}-{:04x}-4000-8000-{:012x}",
                (noise(key) * 4_294_967_296.0) as u64,
                p,
                g
            ),
        ),
        ("device", format!("nvidia{index}")),
        (
            "modelName",
            format!("NVIDIA {}", pool.gpu_model.replace('-', " ")),
        ),
        ("Hostname", format!("{}-node-{node:02}", pool.flavor)),
    ]
}

/// A MIG pool's instances at `at_ms`: the serving teams hold `25% + 60% × traffic` of them,
/// GPU by GPU (one instance each in turn), busy 11-79% with traffic; the rest idle.
fn mig_samples(
    p: usize,
    pool: &DemoPool,
    servers: &[DemoTeam],
    at_ms: i64,
    out: &mut Vec<DemoSample>,
    kueue: &mut Vec<(String, String, String, i64)>,
    nominal: &mut Vec<(String, String, String, i64)>,
) {
    let slots: Vec<&str> = pool
        .mig_layout
        .iter()
        .flat_map(|(profile, n)| std::iter::repeat_n(profile.as_str(), *n as usize))
        .collect();
    let gpus = pool.nodes * pool.gpus_per_node;
    let instances = gpus * slots.len() as i64;
    let d = traffic(at_ms);
    let minute = at_ms.div_euclid(MINUTE_MS);
    let held = ((0.25 + 0.6 * d) * instances as f64).round() as i64;
    let model = crate::fleet::catalogue::find(&pool.gpu_model).ok();
    let mut counts: Vec<(usize, &str, i64)> = Vec::new();
    for j in 0..instances {
        let (g, s) = (j / slots.len() as i64, (j % slots.len() as i64) as usize);
        let profile = slots[s];
        let mut labels = gpu_labels(p, pool, g);
        let hostname = labels.pop().expect("the labels end with Hostname");
        labels.push(("GPU_I_PROFILE", profile.to_owned()));
        labels.push(("GPU_I_ID", (s + 1).to_string()));
        labels.push(hostname);
        let profile_mib = model
            .and_then(|m| m.mig.as_ref())
            .and_then(|g| g.profiles.iter().find(|x| x.name == profile))
            .map_or(9_856, |x| i64::from(x.mem_mib));
        let (busy, fb) = if j < held && !servers.is_empty() {
            let k = j as usize % servers.len();
            match counts.iter_mut().find(|(t, x, _)| *t == k && *x == profile) {
                Some(c) => c.2 += 1,
                None => counts.push((k, profile, 1)),
            }
            labels.push(("container", "main".to_owned()));
            labels.push(("namespace", servers[k].namespace.clone()));
            labels.push(("pod", format!("vllm-small-{j}")));
            let wobble = noise((((p as u64) << 40) ^ (j as u64)) ^ ((minute as u64) << 20));
            let busy = (0.15 + 0.6 * d + 0.08 * wobble - 0.04).clamp(0.0, 1.0);
            (busy, profile_mib * 6 / 10)
        } else {
            (0.0, 12)
        };
        out.push(DemoSample {
            metric: super::GR_ENGINE_ACTIVE,
            labels: labels.clone(),
            value: format!("{busy:.6}"),
        });
        out.push(DemoSample {
            metric: super::FB_USED,
            labels,
            value: fb.to_string(),
        });
    }
    for (profile, per_gpu) in &pool.mig_layout {
        let resource = format!("nvidia.com/mig-{profile}");
        for (server, n) in split(servers, gpus * i64::from(*per_gpu)) {
            nominal.push((
                server.cluster_queue.clone(),
                pool.flavor.clone(),
                resource.clone(),
                n,
            ));
        }
    }
    for (k, profile, count) in counts {
        kueue.push((
            servers[k].cluster_queue.clone(),
            pool.flavor.clone(),
            format!("nvidia.com/mig-{profile}"),
            count,
        ));
    }
}

/// The samples in the Prometheus text format (one family per metric).
pub fn exposition(samples: &[DemoSample]) -> String {
    let mut metrics: Vec<&str> = samples.iter().map(|s| s.metric).collect();
    metrics.sort_unstable();
    metrics.dedup();
    let mut out = String::new();
    for metric in metrics {
        let kind = if metric.ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        out.push_str(&format!("# TYPE {metric} {kind}\n"));
        for s in samples.iter().filter(|s| s.metric == metric) {
            out.push_str(&line(s));
            out.push('\n');
        }
    }
    out
}

/// One sample's line without a timestamp.
pub fn line(sample: &DemoSample) -> String {
    let labels: Vec<String> = sample
        .labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{v}\""))
        .collect();
    format!("{}{{{}}} {}", sample.metric, labels.join(","), sample.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet() -> (Vec<DemoPool>, Vec<DemoTeam>) {
        let pool = |flavor: &str, model: &str, mem_mib, nodes| DemoPool {
            flavor: flavor.into(),
            gpu_model: model.into(),
            mem_mib,
            nodes,
            gpus_per_node: 8,
            mig_layout: vec![],
        };
        (
            vec![
                pool("h100-shared", "H100-SXM5-80GB", 81_559, 8),
                pool("h200-train", "H200-SXM-141GB", 143_771, 12),
                pool("rtx-inference", "RTX-PRO-6000-96GB", 97_887, 4),
                DemoPool {
                    mig_layout: vec![("1g.10gb".into(), 7)],
                    ..pool("h100-mig", "H100-SXM5-80GB", 81_559, 1)
                },
            ],
            vec![
                DemoTeam {
                    namespace: "team-research".into(),
                    cluster_queue: "research".into(),
                },
                DemoTeam {
                    namespace: "team-search".into(),
                    cluster_queue: "search".into(),
                },
            ],
        )
    }

    fn sum(samples: &[DemoSample], metric: &str, ns: Option<&str>) -> i64 {
        samples
            .iter()
            .filter(|s| s.metric == metric)
            .filter(|s| {
                ns.is_none_or(|ns| s.labels.iter().any(|(k, v)| *k == "namespace" && v == ns))
            })
            .map(|s| s.value.parse::<i64>().expect("an integer"))
            .sum()
    }

    #[test]
    fn kueue_allocation_matches_the_gpus_its_teams_hold() {
        let (pools, teams) = fleet();
        let day = 1_796_000_400_000 - 1_796_000_400_000 % DAY_MS;
        for hour in [4, 10, 16, 22] {
            let at = day + hour * 3_600_000;
            let samples = samples(&pools, &teams, at);
            let held = |ns: &str| {
                samples
                    .iter()
                    .filter(|s| s.metric == super::super::GPU_UTIL)
                    .filter(|s| s.labels.iter().any(|(k, v)| *k == "namespace" && v == ns))
                    .count() as i64
            };
            // Kueue's figures of one metric for the labels given ("" matches any value)
            let kueue = |metric: &str, cq: &str, flavor: &str, resource: &str| -> i64 {
                samples
                    .iter()
                    .filter(|s| s.metric == metric)
                    .filter(|s| {
                        [
                            ("cluster_queue", cq),
                            ("flavor", flavor),
                            ("resource", resource),
                        ]
                        .iter()
                        .all(|(key, value)| {
                            value.is_empty() || s.labels.iter().any(|(k, v)| k == key && v == value)
                        })
                    })
                    .map(|s| s.value.parse::<i64>().expect("count"))
                    .sum()
            };
            let allocated =
                |cq: &str, resource: &str| kueue(super::super::KUEUE_USAGE, cq, "", resource);
            let gpu = "nvidia.com/gpu";
            assert_eq!(
                held("team-research"),
                allocated("research", gpu),
                "{hour}:00"
            );
            assert_eq!(held("team-search"), allocated("search", gpu), "{hour}:00");
            assert_eq!(held("ml-sandbox"), 2);
            // the MIG node's 56 instances: the serving team holds 25% + 60% × traffic of them,
            // each reported once with its profile and never as GPU_UTIL
            let instances: Vec<&DemoSample> = samples
                .iter()
                .filter(|s| s.metric == super::super::GR_ENGINE_ACTIVE)
                .collect();
            assert_eq!(instances.len(), 56);
            assert!(instances.iter().all(|s| {
                s.labels
                    .iter()
                    .any(|(k, v)| *k == "GPU_I_PROFILE" && v == "1g.10gb")
            }));
            let searching = instances
                .iter()
                .filter(|s| {
                    s.labels
                        .iter()
                        .any(|(k, v)| *k == "namespace" && v == "team-search")
                })
                .count() as i64;
            assert_eq!(searching, allocated("search", "nvidia.com/mig-1g.10gb"));
            assert_eq!(allocated("research", "nvidia.com/mig-1g.10gb"), 0);
            // every GPU (MIG instance) of every pool is in some queue's nominal quota; the
            // shared pool half the trainer's
            let quota = |cq: &str, flavor: &str| kueue(super::super::KUEUE_NOMINAL, cq, flavor, "");
            for (flavor, capacity) in [
                ("h100-shared", 64),
                ("h200-train", 96),
                ("rtx-inference", 32),
                ("h100-mig", 56),
            ] {
                assert_eq!(quota("", flavor), capacity, "{flavor}");
            }
            assert_eq!(quota("research", "h100-shared"), 32);
            // traffic 0 at 04:00 (0.25 × 56 = 14), 1 at 16:00 (0.85 × 56 = 47.6 → 48)
            match hour {
                4 => assert_eq!(searching, 14),
                16 => assert_eq!(searching, 48),
                _ => assert!((14..=48).contains(&searching)),
            }
            // 192 GPUs, each reported once per metric
            assert_eq!(
                samples
                    .iter()
                    .filter(|s| s.metric == super::super::GPU_UTIL)
                    .count(),
                192
            );
        }
    }

    #[test]
    fn traffic_peaks_in_the_afternoon_and_counters_only_grow() {
        let (pools, teams) = fleet();
        let day = 1_796_000_400_000 - 1_796_000_400_000 % DAY_MS;
        // the mean busy % of the inference team's GPUs, and how many it holds
        let search = |hour: i64| {
            let s = samples(&pools, &teams, day + hour * 3_600_000);
            let held = s
                .iter()
                .filter(|x| x.metric == super::super::GPU_UTIL)
                .filter(|x| {
                    x.labels
                        .iter()
                        .any(|(k, v)| *k == "namespace" && v == "team-search")
                })
                .count() as i64;
            (
                sum(&s, super::super::GPU_UTIL, Some("team-search")) / held.max(1),
                held,
            )
        };
        let (night, day_peak) = (search(4), search(16));
        assert!(day_peak.0 > night.0 + 30, "{night:?} {day_peak:?}");
        assert!(day_peak.1 > 2 * night.1, "{night:?} {day_peak:?}");
        let mut last = 0;
        for minute in 0..(3 * 24 * 60) {
            let s = samples(&pools, &teams, day + minute * MINUTE_MS);
            let tokens = sum(&s, super::super::PROMPT_TOKENS, Some("team-search"));
            assert!(tokens >= last, "minute {minute}");
            last = tokens;
        }
    }

    /// The samples of `metric` at each instant as series, grouped by labels.
    fn series(at: &[i64], metric: &str) -> Vec<super::super::Series> {
        let (pools, teams) = fleet();
        let mut by: std::collections::BTreeMap<Vec<(&str, String)>, Vec<super::super::Sample>> =
            std::collections::BTreeMap::new();
        for t in at {
            for s in samples(&pools, &teams, *t) {
                if s.metric == metric {
                    by.entry(s.labels.clone())
                        .or_default()
                        .push(super::super::Sample {
                            at_ms: *t,
                            micro: super::super::parse_micro(&s.value).expect("a value"),
                        });
                }
            }
        }
        by.into_iter()
            .map(|(labels, samples)| super::super::Series {
                labels: labels.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
                samples,
            })
            .collect()
    }

    #[test]
    fn the_small_mig_model_slows_as_its_gpus_other_instances_get_busy() {
        use super::super::{Window, neighbours};
        let day = 1_796_000_400_000 - 1_796_000_400_000 % DAY_MS;
        let p95 = |hour: i64| {
            let minute = day + hour * 3_600_000;
            let at = [minute - 30_000, minute + 30_000];
            let ttft = series(&at, neighbours::TTFT_BUCKET);
            let window = Window::new(minute, minute + MINUTE_MS).expect("window");
            let rows =
                neighbours::latency_minutes(&[(neighbours::Latency::Ttft, &ttft[..])], window);
            let small = rows
                .iter()
                .find(|(k, _)| k.model == SMALL_MODEL)
                .map(|(_, m)| m.ttft.clone())
                .expect("the small model's minute");
            // a steady 2 requests per second
            assert!((119..=121).contains(&small.observations()), "{small:?}");
            small.quantile(95, 100).expect("a p95")
        };
        // traffic 0 at 04:00: the quiet shares, p95 between 0.06 s (90%) and 0.08 s (96%):
        // 0.06 + 0.02 × 5 / 6 ≈ 0.0767 s; traffic 1 at 16:00: the busy shares, between 0.5 s
        // (92%) and 0.75 s (97%): 0.5 + 0.25 × 3 / 5 = 0.65 s (whole counts move these a little)
        let (quiet, busy) = (p95(4), p95(16));
        assert!((70_000..=85_000).contains(&quiet), "{quiet}");
        assert!((600_000..=700_000).contains(&busy), "{busy}");
        // its co-tenants: the six other instances of its GPU, busy with traffic
        let minute = day + 16 * 3_600_000;
        let engine = series(&[minute + 10_000], super::super::GR_ENGINE_ACTIVE);
        let (pools, _) = fleet();
        let flavors: Vec<super::super::FlavorFacts> = pools
            .iter()
            .map(|p| super::super::FlavorFacts {
                name: p.flavor.clone(),
                gpu_model: p.gpu_model.clone(),
                mig: !p.mig_layout.is_empty(),
                sharing: None,
            })
            .collect();
        let window = Window::new(minute, minute + MINUTE_MS).expect("window");
        let pods = neighbours::cotenancy(
            &[],
            &engine,
            window,
            &super::super::DeviceFlavors::new(flavors),
        );
        let small = pods
            .iter()
            .find(|(k, _)| k.pod == "vllm-small-0")
            .map(|(_, p)| *p)
            .expect("its co-tenancy");
        assert_eq!(small.neighbours, 6);
        assert_eq!(small.sharing, Some(crate::fleet::sharing::Mechanism::Mig));
        // six 1g instances of seven slices each: 6/7 of a GPU-minute observed
        assert_eq!(small.neighbour_observed_gpu_us, 51_428_571);
    }

    #[test]
    fn histogram_buckets_never_fall_across_bounds_or_time() {
        let (pools, teams) = fleet();
        let day = 1_796_000_400_000 - 1_796_000_400_000 % DAY_MS;
        let counts = |at: i64| -> Vec<(Vec<(&'static str, String)>, i64)> {
            samples(&pools, &teams, at)
                .into_iter()
                .filter(|s| s.metric.ends_with("_bucket"))
                .map(|s| {
                    let mut labels = s.labels;
                    labels.push(("__name__", s.metric.to_owned()));
                    (labels, s.value.parse::<i64>().expect("a count"))
                })
                .collect()
        };
        let mut before = counts(day);
        assert!(!before.is_empty());
        // Kueue's admission waits are among them, for every ClusterQueue with quota
        let kueue = |c: &[(Vec<(&'static str, String)>, i64)]| {
            c.iter()
                .filter(|(l, _)| {
                    l.iter()
                        .any(|(_, v)| v == super::super::queues::ADMISSION_WAIT_BUCKET)
                })
                .count()
        };
        assert_eq!(kueue(&before), teams.len() * (WAIT_LE.len() + 1));
        for minute in (1..1440).step_by(37) {
            let now = counts(day + minute * MINUTE_MS);
            for ((labels, was), (_, is)) in before.iter().zip(&now) {
                assert!(is >= was, "{labels:?} fell at minute {minute}");
            }
            // within one series' buckets, counts grow with the bound (+Inf last)
            for pair in now.windows(2) {
                let same = |l: &Vec<(&'static str, String)>| -> Vec<(&'static str, String)> {
                    l.iter().filter(|(k, _)| *k != "le").cloned().collect()
                };
                if same(&pair[0].0) == same(&pair[1].0) {
                    assert!(pair[1].1 >= pair[0].1, "{pair:?}");
                }
            }
            before = now;
        }
    }
}
