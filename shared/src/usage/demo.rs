//! The demo fleet's metrics: what dcgm-exporter, Kueue (with
//! `metrics.enableClusterQueueResources`) and vLLM would report for an inventory at an instant,
//! as a pure function of the instant, so the live demo exporter and the seeded history agree.
//!
//! The mix, by pool: a pool whose flavor name says `train` runs the first team's training;
//! one that says `inference` serves the other teams' models; any other pool is shared:
//! inference by day (KEDA scaling with traffic), training backlog borrowing it at night. What
//! each team asks for is admitted as Kueue would under the quotas approved for it that day
//! (nominal first, then borrowing its cohort's unused quota, through `kueue::quota`, the
//! arithmetic the planner's week admits by), so a team without quota runs nothing and Kueue's
//! figures agree with the console's quotas. Under `./dev run --cluster` a real Kueue admits
//! the demo teams' Jobs and the recorder writes their history instead of [`workloads`].
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

pub mod workloads;

use crate::{
    common::{
        day::Day,
        utc::{DAY_MS, MINUTE_MS},
    },
    kueue::quota::{Quotas, Usage},
    quota::{QuotaLine, QuotaSpec},
};

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

/// A team: its namespace, ClusterQueue and the quotas approved for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoTeam {
    pub namespace: String,
    pub cluster_queue: String,
    /// `None`: its queue is in no cohort, so it neither borrows nor lends.
    pub cohort: Option<String>,
    /// Its approved quotas in the order approved: on a day the last that holds is in force,
    /// as `QuotaWorld::effective_on` reads them.
    pub approved: Vec<QuotaSpec>,
}

impl DemoTeam {
    /// Its quota in force at `at_ms` of `flavor` and `resource`, if it has one.
    fn quota(&self, at_ms: i64, flavor: &str, resource: &str) -> Option<&QuotaLine> {
        let day = Day::of_unix_seconds(at_ms.div_euclid(1000));
        let spec = self.approved.iter().rev().find(|s| s.holds(day))?;
        spec.line(flavor, resource)
    }
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
    /// The sandbox's notebook: busy as training is.
    Notebook,
}

/// A queue's quota in use, or its nominal quota, of one flavor and resource.
struct QueueCount {
    cluster_queue: String,
    /// Empty for a queue in no cohort, as Kueue labels it.
    cohort: String,
    flavor: String,
    resource: String,
    count: i64,
}

/// Every sample of the demo fleet at `at_ms`.
pub fn samples(pools: &[DemoPool], teams: &[DemoTeam], at_ms: i64) -> Vec<DemoSample> {
    let mut out = Vec::new();
    let Some(trainer) = teams.first() else {
        return out;
    };
    let roles = Roles::of(trainer, teams);
    let servers = roles.servers;
    let mut kueue = Kueue::default();
    let mut serving = 0i64;
    let mut sandbox_placed = false;
    for (p, pool) in pools.iter().enumerate() {
        if pool.mig_layout.is_empty() {
            let (inference, sandbox) = whole_gpu_pool(
                (p, pool),
                &roles,
                at_ms,
                !sandbox_placed,
                &mut out,
                &mut kueue,
            );
            serving += inference;
            sandbox_placed |= sandbox;
        } else {
            mig_samples((p, pool), &roles, at_ms, &mut out, &mut kueue);
        }
    }
    let small_model_held = kueue.usage.iter().any(|u| {
        u.count > 0
            && u.resource.starts_with("nvidia.com/mig-")
            && u.cluster_queue == servers[0].cluster_queue
    });
    kueue_samples(kueue, at_ms, &mut out);
    if serving > 0 {
        served_models(servers, at_ms, &mut out);
    }
    if small_model_held {
        small_model(&servers[0], at_ms, &mut out);
    }
    out
}

/// Who does what: the first team trains, the others serve (a lone team does both).
struct Roles<'a> {
    trainer: &'a DemoTeam,
    servers: &'a [DemoTeam],
}

impl<'a> Roles<'a> {
    /// The first of `teams` trains, the others serve (a lone team does both).
    fn of(trainer: &'a DemoTeam, teams: &'a [DemoTeam]) -> Self {
        let servers = if teams.len() > 1 { &teams[1..] } else { teams };
        Roles { trainer, servers }
    }

    /// Every team once, in the order the demo's Kueue admits them: the servers first (serving
    /// preempts training), then the trainer.
    fn admission_order(&self) -> Vec<&'a DemoTeam> {
        let mut order: Vec<&DemoTeam> = self.servers.iter().collect();
        if !order
            .iter()
            .any(|t| t.cluster_queue == self.trainer.cluster_queue)
        {
            order.push(self.trainer);
        }
        order
    }

    /// What `team` asks for of a pool where training wants `training` and serving `inference`
    /// (split evenly among the servers): (inference, training).
    fn demand(&self, team: &DemoTeam, training: i64, inference: i64) -> (i64, i64) {
        let serves = split(self.servers, inference)
            .into_iter()
            .find(|(s, _)| s.cluster_queue == team.cluster_queue)
            .map_or(0, |(_, n)| n);
        let trains = if team.cluster_queue == self.trainer.cluster_queue {
            training
        } else {
            0
        };
        (serves, trains)
    }
}

/// What Kueue reports: each queue's quota in use and its nominal quota, by flavor and resource.
#[derive(Default)]
struct Kueue {
    usage: Vec<QueueCount>,
    nominal: Vec<QueueCount>,
}

impl Kueue {
    /// Each team's nominal quota in force of `flavor` and `resource` (0 where it asks for
    /// none: the console's ClusterQueues list every flavor), and what Kueue admits of what
    /// they ask, in [`Roles::admission_order`].
    fn admit(
        &mut self,
        (flavor, resource): (&str, &str),
        asks: &[(&DemoTeam, i64)],
        capacity: i64,
        at_ms: i64,
    ) -> Vec<i64> {
        let quotas: Vec<Quota> = asks
            .iter()
            .map(|(team, demand)| Quota::of(team, at_ms, (flavor, resource), *demand))
            .collect();
        let admitted = admit(&quotas, capacity);
        for ((team, _), (quota, n)) in asks.iter().zip(quotas.iter().zip(&admitted)) {
            let key = |count| QueueCount {
                cluster_queue: team.cluster_queue.clone(),
                cohort: team.cohort.clone().unwrap_or_default(),
                flavor: flavor.to_owned(),
                resource: resource.to_owned(),
                count,
            };
            self.nominal.push(key(quota.nominal));
            self.usage.push(key(*n));
        }
        admitted
    }
}

/// One team's ask in one flavor and resource, with its quota there.
struct Quota<'a> {
    cohort: Option<&'a str>,
    demand: i64,
    nominal: i64,
    borrowing_limit: Option<i64>,
    lending_limit: Option<i64>,
}

impl<'a> Quota<'a> {
    fn of(team: &'a DemoTeam, at_ms: i64, (flavor, resource): (&str, &str), demand: i64) -> Self {
        let line = team.quota(at_ms, flavor, resource);
        Quota {
            cohort: team.cohort.as_deref(),
            demand,
            nominal: line.map_or(0, |l| l.nominal),
            borrowing_limit: line.and_then(|l| l.borrowing_limit),
            lending_limit: line.and_then(|l| l.lending_limit),
        }
    }
}

/// Kueue's admission of one flavor and resource at an instant, for asks in priority order:
/// each team is first admitted within its nominal quota, then borrows what the other queues of
/// its cohort leave unused, in the same order, by Kueue's quota arithmetic
/// ([`crate::kueue::quota`], the planner's week's too): a queue in no cohort neither borrows
/// nor lends; one may borrow up to its `borrowingLimit` (none: no limit) and lend at most its
/// `lendingLimit` of its unused nominal quota. Never more than the pool's `capacity` in all.
fn admit(asks: &[Quota], capacity: i64) -> Vec<i64> {
    let whole = |n: i64| n.max(0).unsigned_abs();
    // One model per cohort; a queue in no cohort is alone in one, lending and borrowing none.
    let mut cohorts: Vec<(Option<&str>, Vec<usize>)> = Vec::new();
    for (i, ask) in asks.iter().enumerate() {
        match cohorts
            .iter_mut()
            .find(|(c, _)| c.is_some() && *c == ask.cohort)
        {
            Some((_, members)) => members.push(i),
            None => cohorts.push((ask.cohort, vec![i])),
        }
    }
    let mut models: Vec<(Quotas, Usage)> = vec![];
    let mut place = vec![(0, 0); asks.len()];
    for (m, (cohort, members)) in cohorts.iter().enumerate() {
        let limit = |l: Option<i64>| {
            if cohort.is_some() {
                l.map(whole)
            } else {
                Some(0)
            }
        };
        let quotas = Quotas::new(
            vec![whole(capacity)],
            members
                .iter()
                .map(|&i| vec![whole(asks[i].nominal)])
                .collect(),
            members
                .iter()
                .map(|&i| vec![limit(asks[i].borrowing_limit)])
                .collect(),
            members
                .iter()
                .map(|&i| vec![limit(asks[i].lending_limit)])
                .collect(),
        );
        models.push((quotas, Usage::new(members.len(), 1)));
        for (t, &i) in members.iter().enumerate() {
            place[i] = (m, t);
        }
    }
    let mut free = whole(capacity);
    let mut admitted = vec![0; asks.len()];
    // Within nominal quota first, then borrowing, each pass in the asks' order.
    for borrowing in [false, true] {
        for (i, ask) in asks.iter().enumerate() {
            let (m, t) = place[i];
            let (quotas, usage) = &mut models[m];
            let wanted = whole(ask.demand) - usage.held(t, 0);
            let room = if borrowing {
                usage.room(quotas, t, 0)
            } else {
                quotas.nominal(t, 0).saturating_sub(usage.held(t, 0))
            };
            let take = wanted.min(room).min(free);
            usage.change(quotas, t, 0, take, true);
            free -= take;
            admitted[i] = i64::try_from(usage.held(t, 0)).unwrap_or(i64::MAX);
        }
    }
    admitted
}

/// What a team's training on one pool of whole GPUs is at an instant, as the demo's metrics
/// show it ([`workloads`] records Workloads that do the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Training {
    /// GPUs its admitted training holds.
    pub held: i64,
    /// GPUs more its training asks for and Kueue does not admit: waiting.
    pub waiting: i64,
}

/// `cluster_queue`'s training on the pool of whole GPUs of `flavor` at `at_ms` (none where no
/// such pool or team is).
pub fn training(
    pools: &[DemoPool],
    teams: &[DemoTeam],
    (cluster_queue, flavor): (&str, &str),
    at_ms: i64,
) -> Training {
    let none = Training {
        held: 0,
        waiting: 0,
    };
    let (Some(trainer), Some(pool)) = (
        teams.first(),
        pools
            .iter()
            .find(|p| p.flavor == flavor && p.mig_layout.is_empty()),
    ) else {
        return none;
    };
    let roles = Roles::of(trainer, teams);
    let admitted = pool_admission(pool, &roles, at_ms, &mut Kueue::default());
    admitted
        .into_iter()
        .find(|(team, _, _)| team.cluster_queue == cluster_queue)
        .map_or(none, |(_, (serves, trains), n)| {
            let held = n - n.min(serves);
            Training {
                held,
                waiting: trains - held,
            }
        })
}

/// What the teams ask of one pool of whole GPUs at an instant, and what Kueue admits of it:
/// per team in [`Roles::admission_order`], (team, (serving, training) asked, admitted). A
/// training pool runs the trainer's backlog (95% of its GPUs, 80% at the traffic peak), an
/// inference pool the servers' models (20% + 70% × traffic), a shared pool both (serving
/// 15% plus 60% × traffic, training 70% − 60% × traffic: it borrows the servers' idle quota
/// at night). Kueue admits it under the quotas in force ([`admit`]).
fn pool_admission<'t>(
    pool: &DemoPool,
    roles: &Roles<'t>,
    at_ms: i64,
    kueue: &mut Kueue,
) -> Vec<(&'t DemoTeam, (i64, i64), i64)> {
    let d = traffic(at_ms);
    let gpus = pool.nodes * pool.gpus_per_node;
    let share = |f: f64| (f * gpus as f64).round() as i64;
    let (training, inference) = match (
        pool.flavor.contains("train"),
        pool.flavor.contains("inference"),
    ) {
        (true, _) => (share(0.95 - 0.15 * d), 0),
        (_, true) => (0, share(0.2 + 0.7 * d)),
        _ => (share(0.7 - 0.6 * d), share(0.15 + 0.6 * d)),
    };
    let asks: Vec<(&DemoTeam, (i64, i64))> = roles
        .admission_order()
        .into_iter()
        .map(|t| (t, roles.demand(t, training, inference)))
        .collect();
    let totals: Vec<(&DemoTeam, i64)> = asks.iter().map(|(t, (s, r))| (*t, s + r)).collect();
    let admitted = kueue.admit((&pool.flavor, "nvidia.com/gpu"), &totals, gpus, at_ms);
    asks.into_iter()
        .zip(admitted)
        .map(|((team, asked), n)| (team, asked, n))
        .collect()
}

/// One pool of whole GPUs at an instant, admitted as [`pool_admission`] says; the GPUs' DCGM
/// samples follow, and two GPUs of the first shared pool are held by the sandbox when
/// `sandbox_free` and two are left. Returns the GPUs serving, and whether the sandbox was
/// placed here.
fn whole_gpu_pool(
    (p, pool): (usize, &DemoPool),
    roles: &Roles,
    at_ms: i64,
    sandbox_free: bool,
    out: &mut Vec<DemoSample>,
    kueue: &mut Kueue,
) -> (i64, bool) {
    // each team's admitted GPUs serve first, then train; training blocks first in the pool
    let mut blocks: Vec<Block> = Vec::new();
    let mut serving = Vec::new();
    for (team, (serves, _), n) in pool_admission(pool, roles, at_ms, kueue) {
        let inference = n.min(serves);
        blocks.push(Block::new(Work::Training, &team.namespace, n - inference));
        serving.push(Block::new(Work::Inference, &team.namespace, inference));
    }
    blocks.extend(serving);
    let held: i64 = blocks.iter().map(|b| b.gpus).sum();
    let shared_pool = !pool.flavor.contains("train") && !pool.flavor.contains("inference");
    let gpus = pool.nodes * pool.gpus_per_node;
    let sandbox = sandbox_free && shared_pool && gpus - held >= 2;
    if sandbox {
        blocks.push(Block::new(Work::Notebook, SANDBOX, 2));
    }
    let inference_gpus = blocks
        .iter()
        .filter(|b| b.work == Work::Inference)
        .map(|b| b.gpus)
        .sum();
    gpu_samples((p, pool), &blocks, at_ms, out);
    (inference_gpus, sandbox)
}

/// A run of a pool's GPUs held by one namespace for one kind of work.
struct Block<'a> {
    work: Work,
    namespace: &'a str,
    gpus: i64,
}

impl<'a> Block<'a> {
    fn new(work: Work, namespace: &'a str, gpus: i64) -> Self {
        Block {
            work,
            namespace,
            gpus,
        }
    }

    /// The pod holding its `i`-th GPU: a training job per node of eight, a vLLM replica per
    /// GPU, one notebook.
    fn pod(&self, i: i64) -> String {
        match self.work {
            Work::Training => format!("train-{}", i / 8),
            Work::Inference => format!("vllm-{i}"),
            Work::Notebook => "notebook-0".to_owned(),
        }
    }
}

/// Each GPU of a pool of whole GPUs as dcgm-exporter reports it: busy and framebuffer, with the
/// pod that holds it (the blocks in order from its first GPU; the rest idle).
fn gpu_samples(
    (p, pool): (usize, &DemoPool),
    blocks: &[Block],
    at_ms: i64,
    out: &mut Vec<DemoSample>,
) {
    let d = traffic(at_ms);
    let minute = at_ms.div_euclid(MINUTE_MS);
    let gpus = pool.nodes * pool.gpus_per_node;
    let mut holders = blocks.iter().flat_map(|b| (0..b.gpus).map(move |i| (b, i)));
    for g in 0..gpus {
        let key = ((p as u64) << 40) ^ (g as u64);
        let mut labels = gpu_labels(p, pool, g);
        let holder = holders.next();
        let wobble = noise(key ^ ((minute as u64) << 20));
        let (util, fb_share) = match holder.map(|(b, _)| b.work) {
            Some(Work::Training | Work::Notebook) if minute % 10 == 0 => {
                (30.0 + 10.0 * wobble, 0.72)
            }
            Some(Work::Training | Work::Notebook) => (88.0 + 8.0 * wobble, 0.72),
            Some(Work::Inference) => (20.0 + 60.0 * d + 8.0 * wobble - 4.0, 0.45),
            None => (0.0, 0.0),
        };
        if let Some((block, i)) = holder {
            labels.push(("container", "main".to_owned()));
            labels.push(("namespace", block.namespace.to_owned()));
            labels.push(("pod", block.pod(i)));
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

/// Kueue's usage and nominal quota of each queue, by flavor and resource, and the queue
/// metrics of each queue with quota.
fn kueue_samples(kueue: Kueue, at_ms: i64, out: &mut Vec<DemoSample>) {
    let mut queues: Vec<&str> = kueue
        .nominal
        .iter()
        .filter(|n| n.count > 0)
        .map(|n| n.cluster_queue.as_str())
        .collect();
    queues.sort_unstable();
    queues.dedup();
    queue_samples(&queues, at_ms, out);
    let usage = kueue.usage.into_iter().map(|k| (super::KUEUE_USAGE, k));
    let quota = kueue.nominal.into_iter().map(|k| (super::KUEUE_NOMINAL, k));
    for (metric, k) in usage.chain(quota) {
        out.push(DemoSample {
            metric,
            labels: vec![
                ("cluster_queue", k.cluster_queue),
                ("cohort", k.cohort),
                ("flavor", k.flavor),
                ("resource", k.resource),
            ],
            value: k.count.to_string(),
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
fn queue_samples(queues: &[&str], at_ms: i64, out: &mut Vec<DemoSample>) {
    let seconds = (at_ms - COUNTER_EPOCH_MS) as f64 / 1000.0;
    let (full, integral) = (traffic(at_ms), traffic_integral_s(at_ms));
    for (i, cq) in queues.iter().enumerate() {
        let labels = vec![("cluster_queue", (*cq).to_owned())];
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

/// A MIG GPU's instances, each by its profile, in the layout's order.
fn mig_slots(pool: &DemoPool) -> Vec<&str> {
    pool.mig_layout
        .iter()
        .flat_map(|(profile, n)| std::iter::repeat_n(profile.as_str(), *n as usize))
        .collect()
}

/// What the servers ask of a MIG pool's instances (25% + 60% × traffic of them, by profile in
/// the layout's order) and Kueue admits: per profile, the instances each team may hold, in
/// admission order.
fn mig_admission<'t>(
    pool: &'t DemoPool,
    roles: &Roles<'t>,
    at_ms: i64,
    kueue: &mut Kueue,
) -> Vec<(&'t str, Vec<(&'t DemoTeam, i64)>)> {
    let slots = mig_slots(pool);
    let gpus = pool.nodes * pool.gpus_per_node;
    let instances = gpus * slots.len() as i64;
    let wanted = ((0.25 + 0.6 * traffic(at_ms)) * instances as f64).round() as i64;
    let profile_of = |j: i64| slots[(j % slots.len() as i64) as usize];
    let order = roles.admission_order();
    let mut allowed = Vec::new();
    for (profile, per_gpu) in &pool.mig_layout {
        let asked = (0..wanted).filter(|j| profile_of(*j) == profile).count() as i64;
        let asks: Vec<(&DemoTeam, i64)> = order
            .iter()
            .map(|t| (*t, roles.demand(t, 0, asked).0))
            .collect();
        let resource = format!("nvidia.com/mig-{profile}");
        let admitted = kueue.admit(
            (&pool.flavor, &resource),
            &asks,
            gpus * i64::from(*per_gpu),
            at_ms,
        );
        let teams = asks.iter().map(|(t, _)| *t).zip(admitted).collect();
        allowed.push((profile.as_str(), teams));
    }
    allowed
}

/// A MIG pool's instances at `at_ms`: the serving teams ask for `25% + 60% × traffic` of them,
/// GPU by GPU, and Kueue admits them per profile under the quotas in force ([`admit`]); each
/// admitted instance is busy 11-79% with traffic, the rest idle.
fn mig_samples(
    (p, pool): (usize, &DemoPool),
    roles: &Roles,
    at_ms: i64,
    out: &mut Vec<DemoSample>,
    kueue: &mut Kueue,
) {
    let slots = mig_slots(pool);
    let instances = pool.nodes * pool.gpus_per_node * slots.len() as i64;
    let d = traffic(at_ms);
    let minute = at_ms.div_euclid(MINUTE_MS);
    let mut allowed = mig_admission(pool, roles, at_ms, kueue);
    let model = crate::fleet::catalogue::find(&pool.gpu_model).ok();
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
        // the instance goes to the first team in admission order with room left for it
        let holder = allowed
            .iter_mut()
            .find(|(x, _)| *x == profile)
            .and_then(|(_, teams)| teams.iter_mut().find(|(_, n)| *n > 0))
            .map(|(team, n)| {
                *n -= 1;
                *team
            });
        let (busy, fb) = if let Some(team) = holder {
            labels.push(("container", "main".to_owned()));
            labels.push(("namespace", team.namespace.clone()));
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
                team(
                    "research",
                    &[("h200-train", GPU, 96), ("h100-shared", GPU, 32)],
                ),
                team(
                    "search",
                    &[
                        ("h100-shared", GPU, 32),
                        ("rtx-inference", GPU, 32),
                        ("h100-mig", "nvidia.com/mig-1g.10gb", 56),
                    ],
                ),
            ],
        )
    }

    const GPU: &str = "nvidia.com/gpu";

    /// A team of the `gpufleet` cohort with one quota, in force from 2020 on.
    fn team(name: &str, lines: &[(&str, &str, i64)]) -> DemoTeam {
        let lines = lines
            .iter()
            .map(|(flavor, resource, nominal)| QuotaLine {
                resource: (*resource).to_owned(),
                ..QuotaLine::nvidia_gpus(flavor, *nominal)
            })
            .collect();
        DemoTeam {
            namespace: format!("team-{name}"),
            cluster_queue: name.to_owned(),
            cohort: Some("gpufleet".to_owned()),
            approved: vec![QuotaSpec {
                lines,
                ..QuotaSpec::blank(&[], Day::parse("2020-01-01").expect("a day"))
            }],
        }
    }

    /// Kueue's rules by hand (the ClusterQueue CRD's `borrowingLimit` and `lendingLimit`, a
    /// queue in no cohort): A asks 15 on a nominal 10, B asks 2 on a nominal 10.
    #[test]
    fn admission_borrows_only_unused_quota_of_the_cohort_within_the_limits() {
        let quota = |cohort, demand, borrowing_limit, lending_limit| Quota {
            cohort,
            demand,
            nominal: 10,
            borrowing_limit,
            lending_limit,
        };
        let cohort = Some("c");
        // B lends its 8 unused; A borrows the 5 it lacks
        let free = [quota(cohort, 15, None, None), quota(cohort, 2, None, None)];
        assert_eq!(admit(&free, 100), vec![15, 2]);
        // B lends at most 3 of them
        let lending = [
            quota(cohort, 15, None, None),
            quota(cohort, 2, None, Some(3)),
        ];
        assert_eq!(admit(&lending, 100), vec![13, 2]);
        // A borrows at most 2
        let borrowing = [
            quota(cohort, 15, Some(2), None),
            quota(cohort, 2, None, None),
        ];
        assert_eq!(admit(&borrowing, 100), vec![12, 2]);
        // in no cohort, nobody borrows or lends
        let alone = [quota(None, 15, None, None), quota(None, 2, None, None)];
        assert_eq!(admit(&alone, 100), vec![10, 2]);
        // a pool of 11 GPUs: what is admitted first keeps them
        assert_eq!(admit(&free, 11), vec![10, 1]);
        // a queue of another cohort lends nothing to A
        let apart = [
            quota(cohort, 15, None, None),
            quota(Some("d"), 2, None, None),
        ];
        assert_eq!(admit(&apart, 100), vec![10, 2]);
    }

    /// A team runs nothing until its quota is in force: search's serving quota starts on a day,
    /// and before it neither its GPUs nor Kueue's figures show it; research, alone in the
    /// cohort with quota, trains on its 96 H200s and borrows nothing.
    #[test]
    fn a_team_runs_nothing_before_its_quota_holds() {
        let (pools, mut teams) = fleet();
        let day = 1_796_000_400_000 - 1_796_000_400_000 % DAY_MS;
        let starts = Day::of_unix_seconds(day / 1000);
        teams[1].approved[0].starts_on = starts;
        teams[0].approved[0]
            .lines
            .retain(|l| l.flavor == "h200-train");
        let held = |at: i64, ns: &str| {
            samples(&pools, &teams, at)
                .iter()
                .filter(|s| {
                    s.metric == super::super::GPU_UTIL || s.metric == super::super::GR_ENGINE_ACTIVE
                })
                .filter(|s| s.labels.iter().any(|(k, v)| *k == "namespace" && v == ns))
                .count()
        };
        // 16:00 the day before: nothing of search's; research's training at the peak is
        // round(0.8 × 96) = 77 H200s, none of the shared pool (nobody holds quota there)
        let before = day - 8 * 3_600_000;
        assert_eq!(held(before, "team-search"), 0);
        assert_eq!(held(before, "team-research"), 77);
        let tokens = sum(
            &samples(&pools, &teams, before),
            super::super::PROMPT_TOKENS,
            None,
        );
        assert_eq!(tokens, 0, "nothing served, no vLLM counters");
        // 16:00 that day: search serves round(0.9 × 32) = 29 RTX, 32 of the shared H100s
        // (its nominal; nobody lends it more), and round(0.85 × 56) = 48 MIG instances
        assert_eq!(held(day + 16 * 3_600_000, "team-search"), 29 + 32 + 48);
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
