//! Noisy neighbours: vLLM's latency histograms per serving pod and minute, who shares that
//! pod's GPUs (DCGM's pod mapping) and how busy they are, and per service the verdict of a
//! period: does its latency degrade while its co-tenants' load rises?
//!
//! - Histograms follow Prometheus: `_bucket` series are cumulative counters per upper bound
//!   `le`; a minute holds each bucket's increase (a fall is a reset, as for every counter
//!   here), histograms add by `le` (`sum by (le)`), and quantiles are `histogram_quantile`'s:
//!   linear within the bucket holding the rank, the highest finite bound when the rank falls
//!   in `+Inf`, none without observations or without a `+Inf` bucket. Computed exactly, in
//!   integer microseconds, rounded half up.
//! - Co-tenancy comes from the DCGM series: pods on the same physical GPU (host and UUID) in
//!   the same minute share it. A MIG instance's co-tenants are the other instances' pods
//!   (hardware-isolated; their load is their own `GR_ENGINE_ACTIVE`); pods on one card or one
//!   instance share it in software (time-slicing, MPS, HAMi: the flavor says which) and DCGM
//!   reports only the device's busy time, own load included.
//! - The verdict ranks a service's minutes with requests by its co-tenants' load and compares
//!   the quieter half with the busier half (the middle minute of an odd count is left out).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{
    DeviceFlavors, GPU_US_PER_GPU_MINUTE, Labels, SCALE, Series, Window, div_round, hostname,
    mig_share, namespace, unscale,
};
use crate::{
    common::utc::floor_minute,
    fleet::sharing::{Mechanism, sharing_name},
};

/// vLLM's time to first token, a histogram in seconds.
pub const TTFT_BUCKET: &str = "vllm:time_to_first_token_seconds_bucket";
/// vLLM's time requests waited to be scheduled, a histogram in seconds.
pub const QUEUE_BUCKET: &str = "vllm:request_queue_time_seconds_bucket";

/// Both halves need this many requests before latency is compared.
pub const MIN_REQUESTS: i64 = 20;
/// The co-tenants' load must be this many percentage points higher in the busier half.
pub const LOAD_RISE_PCT: i64 = 20;
/// Latency (p95 of time to first token or of queue time) degraded: this many times the quieter
/// half's, in tenths (15 = ×1.5).
pub const DEGRADED_TENTHS: i64 = 15;
/// The service's own requests per minute may be at most this many tenths of the quieter half's
/// in the busier one (12 = ×1.2); above, its own load explains its latency.
pub const OWN_LOAD_TENTHS: i64 = 12;
/// The longest period a report covers, in days.
pub const MAX_DAYS: i32 = 7;

/// Which latency a histogram measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Latency {
    /// Time to first token.
    Ttft,
    /// Queue time.
    Queue,
}

impl Latency {
    pub fn metric(self) -> &'static str {
        match self {
            Latency::Ttft => TTFT_BUCKET,
            Latency::Queue => QUEUE_BUCKET,
        }
    }
}

/// A histogram: cumulative counts per finite upper bound (microseconds), and the `+Inf`
/// bucket's (every observation), `None` when no `+Inf` series was seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    pub buckets: BTreeMap<i64, i64>,
    pub count: Option<i64>,
}

impl Histogram {
    /// `sum by (le)`.
    pub fn add(&mut self, other: &Histogram) {
        for (le, n) in &other.buckets {
            *self.buckets.entry(*le).or_default() += n;
        }
        if let Some(n) = other.count {
            self.count = Some(self.count.unwrap_or(0) + n);
        }
    }

    /// Observations (the `+Inf` bucket), 0 without one.
    pub fn observations(&self) -> i64 {
        self.count.unwrap_or(0)
    }

    /// `histogram_quantile(num / den, …)` in microseconds, rounded half up; `None` where
    /// Prometheus answers NaN (no `+Inf` bucket, no other bucket, no observations).
    pub fn quantile(&self, num: i64, den: i64) -> Option<i64> {
        let total = i128::from(self.count?);
        if self.buckets.is_empty() || total <= 0 || !(0..=den).contains(&num) || den <= 0 {
            return None;
        }
        // cumulative counts made monotonic, as Prometheus does before interpolating
        let mut bounds: Vec<(i64, i128)> = Vec::with_capacity(self.buckets.len());
        let mut high = i128::MIN;
        for (le, n) in &self.buckets {
            high = high.max(i128::from(*n));
            bounds.push((*le, high));
        }
        let total = total.max(high);
        let (num, den) = (i128::from(num), i128::from(den));
        // the first bucket whose count reaches the rank q × total
        let Some(b) = bounds.iter().position(|(_, n)| n * den >= num * total) else {
            return bounds.last().map(|(le, _)| *le);
        };
        let (end, count) = bounds[b];
        if b == 0 && end <= 0 {
            return Some(end);
        }
        let (start, before) = if b == 0 { (0, 0) } else { bounds[b - 1] };
        let inside = count - before;
        if inside == 0 {
            return Some(end);
        }
        // start + (end − start) × (rank − before) / inside, rank = num × total / den
        let offset = div_round(
            i128::from(end - start) * (num * total - den * before),
            den * inside,
        );
        i64::try_from(i128::from(start) + offset).ok()
    }
}

/// An inference service (a namespace and vLLM's `model_name`) in one minute.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LatencyKey {
    pub minute_ms: i64,
    pub namespace: String,
    pub model: String,
}

/// A service's latency in one minute: its pods' histograms added by `le`, and the pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceMinute {
    pub pods: BTreeSet<String>,
    pub ttft: Histogram,
    pub queue: Histogram,
}

/// The pod a series belongs to: `exported_pod` when Prometheus renamed a clashing label, else
/// `pod` (`pod_name` with dcgm-exporter's `--use-old-namespace`).
pub fn pod(labels: &Labels) -> &str {
    super::first_label(labels, &["exported_pod", "pod", "pod_name"])
}

/// A bucket bound as Prometheus writes `le` (`0.25`, `+Inf`), in microseconds; `None` for
/// `+Inf`, `Err` for anything unreadable.
pub(super) fn bound(le: &str) -> Result<Option<i64>, ()> {
    match le {
        "+Inf" | "Inf" | "inf" | "+inf" => Ok(None),
        text => super::parse_micro(text).map(Some).ok_or(()),
    }
}

/// Each minute's increase of every bucket of the histograms' `_bucket` series (one slice per
/// [`Latency`]), per service, its pods' added; series reach back before the window like every
/// counter here.
pub fn latency_minutes(
    buckets: &[(Latency, &[Series])],
    window: Window,
) -> BTreeMap<LatencyKey, ServiceMinute> {
    let mut rows: BTreeMap<LatencyKey, ServiceMinute> = BTreeMap::new();
    for (latency, series) in buckets {
        for s in *series {
            let Some(Ok(le)) = s.labels.get("le").map(|le| bound(le)) else {
                continue;
            };
            let ns = namespace(&s.labels).to_owned();
            let model = s.labels.get("model_name").cloned().unwrap_or_default();
            let pod = pod(&s.labels).to_owned();
            let mut by_minute: BTreeMap<i64, i64> = BTreeMap::new();
            for (minute_ms, increase) in super::increases(&s.samples, window) {
                *by_minute.entry(minute_ms).or_default() += increase;
            }
            for (minute_ms, micro) in by_minute {
                let service = rows
                    .entry(LatencyKey {
                        minute_ms,
                        namespace: ns.clone(),
                        model: model.clone(),
                    })
                    .or_default();
                if !service.pods.contains(&pod) {
                    service.pods.insert(pod.clone());
                }
                let row = match latency {
                    Latency::Ttft => &mut service.ttft,
                    Latency::Queue => &mut service.queue,
                };
                // counts in millionths → whole observations
                let n = unscale(i128::from(micro));
                match le {
                    Some(le) => *row.buckets.entry(le).or_default() += n,
                    None => row.count = Some(row.count.unwrap_or(0) + n),
                }
            }
        }
    }
    rows
}

/// A pod in one minute.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodKey {
    pub minute_ms: i64,
    pub namespace: String,
    pub pod: String,
}

/// How a pod's GPUs were shared in one minute, and how busy its co-tenants were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodMinute {
    /// MIG when its devices are MIG instances it holds alone; the flavor's software sharing
    /// (time-slicing, MPS, HAMi) when it shares a device with other pods; `None` when it shares
    /// one and the flavor does not say how.
    pub sharing: Option<Mechanism>,
    /// Other pods on its physical GPUs.
    pub neighbours: i32,
    /// Σ over the devices its co-tenants hold: mean busy ratio × share of a GPU × a minute.
    pub neighbour_busy_gpu_us: i64,
    /// Σ over those devices: share of a GPU × a minute.
    pub neighbour_observed_gpu_us: i64,
}

/// A pod: its namespace and name.
type Who<'a> = (&'a str, &'a str);

/// One device (a whole card or a MIG instance) in one minute.
#[derive(Default)]
struct Device<'a> {
    share: (i64, i64),
    mig: bool,
    sharing: Option<Mechanism>,
    /// busy ratios in 10⁻⁸
    busy: Vec<i64>,
    pods: BTreeSet<Who<'a>>,
}

/// Co-tenancy per pod and minute from the DCGM busy series ([`super::GPU_UTIL`] for whole
/// cards, [`super::GR_ENGINE_ACTIVE`] for MIG instances). Only pods on MIG instances or on devices
/// shared with other pods have a row: a pod alone on whole cards has no co-tenant. Each
/// physical GPU must lie wholly in the series given (the backend's shards split by UUID).
pub fn cotenancy(
    util: &[Series],
    engine: &[Series],
    window: Window,
    flavors: &DeviceFlavors,
) -> BTreeMap<PodKey, PodMinute> {
    let shared = shared_gpus(util, engine);
    let gpus = devices(util, engine, (window, flavors), &shared);
    tally(&gpus)
        .into_iter()
        .map(|(key, (sharing, others, busy, observed))| {
            (
                key,
                PodMinute {
                    sharing,
                    neighbours: i32::try_from(others.len()).unwrap_or(i32::MAX),
                    neighbour_busy_gpu_us: unscale(busy),
                    neighbour_observed_gpu_us: unscale(observed),
                },
            )
        })
        .collect()
}

/// A physical GPU's identity: its host and UUID (dcgm-exporter writes `UUID`, some
/// relabellings `uuid`).
fn gpu_uuid(labels: &Labels) -> (&str, &str) {
    let get = |k: &str| labels.get(k).map_or("", String::as_str);
    let uuid = if get("UUID").is_empty() {
        get("uuid")
    } else {
        get("UUID")
    };
    (hostname(labels), uuid)
}

/// The GPUs that can have co-tenants: split into MIG instances, or seen with more than one
/// pod. One pass over the series' labels finds them, so a fleet of whole cards costs no more.
fn shared_gpus<'a>(util: &'a [Series], engine: &'a [Series]) -> BTreeSet<(&'a str, &'a str)> {
    let mut seen: BTreeMap<(&str, &str), (bool, BTreeSet<Who>)> = BTreeMap::new();
    for s in util.iter().chain(engine) {
        let gpu = seen.entry(gpu_uuid(&s.labels)).or_default();
        gpu.0 |= s.labels.contains_key("GPU_I_PROFILE");
        let who = (namespace(&s.labels), pod(&s.labels));
        if !who.1.is_empty() {
            gpu.1.insert(who);
        }
    }
    seen.into_iter()
        .filter(|(_, (mig, pods))| *mig || pods.len() > 1)
        .map(|(gpu, _)| gpu)
        .collect()
}

/// (host, uuid, minute) → instance id ("" for the whole card) → device
type Devices<'a> = BTreeMap<(&'a str, &'a str, i64), BTreeMap<&'a str, Device<'a>>>;

/// The `shared` GPUs' devices by minute: each one's share of its GPU, busy samples and pods.
fn devices<'a>(
    util: &'a [Series],
    engine: &'a [Series],
    (window, flavors): (Window, &DeviceFlavors),
    shared: &BTreeSet<(&str, &str)>,
) -> Devices<'a> {
    let mut gpus = Devices::new();
    for (series, is_engine) in [(util, false), (engine, true)] {
        for s in series {
            let profile = s.labels.get("GPU_I_PROFILE");
            let (host, uuid) = gpu_uuid(&s.labels);
            if profile.is_some() != is_engine || !shared.contains(&(host, uuid)) {
                continue;
            }
            let flavor = flavors.of(&s.labels);
            let share = match profile {
                None => (1, 1),
                Some(p) => mig_share(p, flavor.map(|f| f.gpu_model.as_str())),
            };
            let instance = s.labels.get("GPU_I_ID").map_or("", String::as_str);
            let who = (namespace(&s.labels), pod(&s.labels));
            for sample in s.samples.iter().filter(|x| window.holds(x.at_ms)) {
                let device = gpus
                    .entry((host, uuid, floor_minute(sample.at_ms)))
                    .or_default()
                    .entry(instance)
                    .or_default();
                device.share = share;
                device.mig = profile.is_some();
                device.sharing = flavor.and_then(|f| f.sharing);
                device.busy.push(if is_engine {
                    sample.micro * 100
                } else {
                    sample.micro
                });
                if !who.1.is_empty() {
                    device.pods.insert(who);
                }
            }
        }
    }
    gpus
}

/// A pod's minute while it is summed: sharing, co-tenants, busy and observed to 10⁻⁶ µs.
type Tally<'a> = (Option<Mechanism>, BTreeSet<Who<'a>>, i128, i128);

/// Each pod's minute on a shared GPU or MIG instance: its sharing, its co-tenants, and their
/// devices' busy and observed time at each device's share of its GPU.
fn tally<'a>(gpus: &Devices<'a>) -> BTreeMap<PodKey, Tally<'a>> {
    let mut exact: BTreeMap<PodKey, Tally> = BTreeMap::new();
    for ((_, _, minute_ms), devices) in gpus {
        let on_gpu: BTreeSet<Who> = devices
            .values()
            .flat_map(|d| d.pods.iter().copied())
            .collect();
        for me in &on_gpu {
            let mine: Vec<&Device> = devices.values().filter(|d| d.pods.contains(me)).collect();
            let shared = mine.iter().find(|d| d.pods.len() > 1);
            if shared.is_none() && !mine.iter().any(|d| d.mig) {
                continue;
            }
            let sharing = match shared {
                Some(d) => d.sharing,
                None => Some(Mechanism::Mig),
            };
            let entry = exact
                .entry(PodKey {
                    minute_ms: *minute_ms,
                    namespace: me.0.to_owned(),
                    pod: me.1.to_owned(),
                })
                .or_insert((sharing, BTreeSet::new(), 0, 0));
            if shared.is_some() {
                entry.0 = sharing;
            }
            entry.1.extend(on_gpu.iter().filter(|p| *p != me).copied());
            for d in devices.values().filter(|d| d.pods.iter().any(|p| p != me)) {
                let (num, den) = (i128::from(d.share.0), i128::from(d.share.1));
                let n = i128::try_from(d.busy.len()).unwrap_or(i128::MAX);
                let sum: i128 = d.busy.iter().map(|b| i128::from(*b)).sum();
                let minute_us = i128::from(GPU_US_PER_GPU_MINUTE);
                entry.2 += div_round(sum * num * minute_us * SCALE, 100_000_000 * den * n);
                entry.3 += div_round(num * minute_us * SCALE, den);
            }
        }
    }
    exact
}

/// One service's minute, as the report reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedMinute {
    pub minute_ms: i64,
    pub namespace: String,
    pub model: String,
    pub pods: Vec<String>,
    pub ttft: Histogram,
    pub queue: Histogram,
    /// Its pods' co-tenancy that minute; none for pods alone on whole cards (or not seen).
    pub cotenancy: Vec<PodMinute>,
}

/// Latency over a set of minutes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyFigures {
    pub minutes: i64,
    /// Requests with a first token (the TTFT histogram's observations).
    pub requests: i64,
    pub ttft_p95_microseconds: Option<i64>,
    pub ttft_p99_microseconds: Option<i64>,
    pub queue_p95_microseconds: Option<i64>,
    pub queue_p99_microseconds: Option<i64>,
    pub neighbour_busy_gpu_microseconds: i64,
    pub neighbour_observed_gpu_microseconds: i64,
}

impl LatencyFigures {
    /// The co-tenants' busy time over their observed time, in whole percent (half up); 0
    /// without co-tenants.
    pub fn neighbour_load_pct(&self) -> i64 {
        hundredfold(
            self.neighbour_busy_gpu_microseconds,
            self.neighbour_observed_gpu_microseconds,
        )
    }

    /// Requests per minute in hundredths (half up).
    pub fn requests_per_minute_centi(&self) -> i64 {
        hundredfold(self.requests, self.minutes)
    }
}

/// `100 × num / den`, rounded half up; 0 when `den` is.
fn hundredfold(num: i64, den: i64) -> i64 {
    if den == 0 {
        return 0;
    }
    i64::try_from(div_round(i128::from(num) * 100, i128::from(den))).unwrap_or(0)
}

/// One inference service (a namespace and served model) over a period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceLatency {
    pub team: Option<String>,
    pub namespace: String,
    pub model: String,
    pub pods: i64,
    /// How its GPUs were shared: `whole_gpu` when no minute showed a co-tenant, else the
    /// mechanisms seen ([`sharing_name`]).
    pub sharing: Vec<String>,
    /// The most co-tenants any of its minutes had.
    pub max_neighbours: i32,
    pub overall: LatencyFigures,
    /// Its minutes with requests, ranked by co-tenants' load: the quieter half…
    pub quiet: LatencyFigures,
    /// … and the busier half.
    pub busy: LatencyFigures,
    /// Latency degraded while the co-tenants' load rose and its own did not.
    pub flagged: bool,
    pub verdict: String,
}

/// The report over a period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeighbourReport {
    pub from: crate::common::day::Day,
    /// The last day included.
    pub to_inclusive: crate::common::day::Day,
    pub services: Vec<ServiceLatency>,
    /// The rule the flags follow, for the reader.
    pub rule: String,
}

/// The rule, in words.
pub fn rule() -> String {
    format!(
        "A service's minutes with requests are ranked by its co-tenants' load (busy over observed GPU time of the devices sharing its GPUs) and split in halves. It is flagged when both halves hold at least {MIN_REQUESTS} requests, the co-tenants' load is at least {LOAD_RISE_PCT} points higher in the busier half, the p95 time to first token or queue time there is at least ×{}.{} the quieter half's, and its own requests per minute are at most ×{}.{} the quieter half's. Percentiles follow Prometheus's histogram_quantile.",
        DEGRADED_TENTHS / 10,
        DEGRADED_TENTHS % 10,
        OWN_LOAD_TENTHS / 10,
        OWN_LOAD_TENTHS % 10
    )
}

#[derive(Default)]
struct Acc {
    minutes: i64,
    ttft: Histogram,
    queue: Histogram,
    busy: i64,
    observed: i64,
}

impl Acc {
    fn add(&mut self, other: &Acc) {
        self.minutes += other.minutes;
        self.ttft.add(&other.ttft);
        self.queue.add(&other.queue);
        self.busy += other.busy;
        self.observed += other.observed;
    }

    fn figures(&self) -> LatencyFigures {
        LatencyFigures {
            minutes: self.minutes,
            requests: self.ttft.observations(),
            ttft_p95_microseconds: self.ttft.quantile(95, 100),
            ttft_p99_microseconds: self.ttft.quantile(99, 100),
            queue_p95_microseconds: self.queue.quantile(95, 100),
            queue_p99_microseconds: self.queue.quantile(99, 100),
            neighbour_busy_gpu_microseconds: self.busy,
            neighbour_observed_gpu_microseconds: self.observed,
        }
    }
}

/// The report of the services' minutes; `teams` maps namespaces to team names.
pub fn report(
    from: crate::common::day::Day,
    to_inclusive: crate::common::day::Day,
    minutes: &[ServedMinute],
    teams: &BTreeMap<String, String>,
) -> NeighbourReport {
    let services = services(minutes)
        .into_iter()
        .map(|((namespace, model), s)| {
            let (overall, quiet, busy) = s.halves();
            let (flagged, verdict) = verdict(&s.sharing, &quiet, &busy);
            let sharing = if s.sharing.is_empty() {
                vec![sharing_name(Some(Mechanism::WholeGpu)).to_owned()]
            } else {
                s.sharing.iter().map(|x| (*x).to_owned()).collect()
            };
            ServiceLatency {
                team: teams.get(&namespace).cloned(),
                namespace,
                model,
                pods: i64::try_from(s.pods.len()).unwrap_or(i64::MAX),
                sharing,
                max_neighbours: s.max_neighbours,
                overall,
                quiet,
                busy,
                flagged,
                verdict,
            }
        })
        .collect();
    NeighbourReport {
        from,
        to_inclusive,
        services,
        rule: rule(),
    }
}

/// One served model of one namespace, summed from its minutes.
#[derive(Default)]
struct Service {
    pods: BTreeSet<String>,
    sharing: BTreeSet<&'static str>,
    max_neighbours: i32,
    by_minute: BTreeMap<i64, Acc>,
}

/// The minutes summed per (namespace, model).
fn services(minutes: &[ServedMinute]) -> BTreeMap<(String, String), Service> {
    let mut services: BTreeMap<(String, String), Service> = BTreeMap::new();
    for m in minutes {
        let service = services
            .entry((m.namespace.clone(), m.model.clone()))
            .or_default();
        service.pods.extend(m.pods.iter().cloned());
        let acc = service.by_minute.entry(m.minute_ms).or_default();
        acc.minutes = 1;
        acc.ttft.add(&m.ttft);
        acc.queue.add(&m.queue);
        for c in &m.cotenancy {
            service.sharing.insert(sharing_name(c.sharing));
            service.max_neighbours = service.max_neighbours.max(c.neighbours);
            acc.busy += c.neighbour_busy_gpu_us;
            acc.observed += c.neighbour_observed_gpu_us;
        }
    }
    services
}

impl Service {
    /// Its figures over every minute, and over the half of its minutes with requests whose
    /// co-tenants were least loaded (busy over observed, compared exactly; then by time) and
    /// the half most loaded.
    fn halves(&self) -> (LatencyFigures, LatencyFigures, LatencyFigures) {
        let mut ranked: Vec<(i64, &Acc)> = (self.by_minute.iter())
            .filter(|(_, a)| a.ttft.observations() > 0)
            .map(|(minute, a)| (*minute, a))
            .collect();
        let load = |a: &Acc| match a.observed {
            0 => (0, 1),
            observed => (i128::from(a.busy), i128::from(observed)),
        };
        ranked.sort_by(|(ma, a), (mb, b)| {
            let ((na, da), (nb, db)) = (load(a), load(b));
            (na * db).cmp(&(nb * da)).then(ma.cmp(mb))
        });
        let half = ranked.len() / 2;
        let (mut overall, mut quiet, mut busy) = (Acc::default(), Acc::default(), Acc::default());
        for a in self.by_minute.values() {
            overall.add(a);
        }
        for (_, a) in &ranked[..half] {
            quiet.add(a);
        }
        for (_, a) in &ranked[ranked.len() - half..] {
            busy.add(a);
        }
        (overall.figures(), quiet.figures(), busy.figures())
    }
}

/// `µs` as milliseconds for people: `412.5 ms`.
pub fn format_ms(us: Option<i64>) -> String {
    match us {
        None => "–".to_owned(),
        Some(us) => {
            let tenths = div_round(i128::from(us), 100);
            format!("{}.{} ms", tenths / 10, tenths % 10)
        }
    }
}

/// Whether the service's latency degraded because its co-tenants' load rose, and why (or why
/// it cannot be told), read top to bottom as the rules are applied.
fn verdict(
    sharing: &BTreeSet<&'static str>,
    quiet: &LatencyFigures,
    busy: &LatencyFigures,
) -> (bool, String) {
    if let Some(why) = nothing_to_compare(sharing, quiet, busy) {
        return (false, why);
    }
    let (load_quiet, load_busy) = (quiet.neighbour_load_pct(), busy.neighbour_load_pct());
    let load_rose = format!("co-tenants' load rose {load_quiet}% → {load_busy}%");
    let latency = latency_changes(quiet, busy);
    let worse: Vec<&str> = latency
        .iter()
        .filter(|(degraded, _)| *degraded)
        .map(|(_, change)| change.as_str())
        .collect();
    if worse.is_empty() {
        let all = latency.map(|(_, change)| change).join(", ");
        return (false, format!("latency held while {load_rose} ({all})"));
    }
    let worse = worse.join(", ");
    let (rate_quiet, rate_busy) = (requests_per_minute(quiet), requests_per_minute(busy));
    if own_load_rose(quiet, busy) {
        let own = format!("its own requests rose too ({rate_quiet} → {rate_busy} per minute)");
        return (false, format!("{worse} as {load_rose}, but {own}"));
    }
    let own = format!("its own requests held ({rate_quiet} → {rate_busy} per minute)");
    (true, format!("{worse} while {load_rose} and {own}"))
}

/// Why the two halves cannot be compared, if they cannot: no co-tenant, too few requests, or
/// co-tenants' load that did not rise.
fn nothing_to_compare(
    sharing: &BTreeSet<&'static str>,
    quiet: &LatencyFigures,
    busy: &LatencyFigures,
) -> Option<String> {
    if sharing.is_empty() {
        return Some("no co-tenant: its GPUs were not shared in this period".to_owned());
    }
    if quiet.requests < MIN_REQUESTS || busy.requests < MIN_REQUESTS {
        return Some(format!(
            "too few requests to tell ({} and {}; at least {MIN_REQUESTS} in each half)",
            quiet.requests, busy.requests
        ));
    }
    let (load_quiet, load_busy) = (quiet.neighbour_load_pct(), busy.neighbour_load_pct());
    (load_busy - load_quiet < LOAD_RISE_PCT).then(|| {
        format!("co-tenants' load steady ({load_quiet}% → {load_busy}%): nothing to compare")
    })
}

/// Time to first token and queue time, quiet half → busy half: whether each degraded, and the
/// change in words.
fn latency_changes(quiet: &LatencyFigures, busy: &LatencyFigures) -> [(bool, String); 2] {
    let change = |what: &str, q: Option<i64>, b: Option<i64>| {
        let degraded = match (q, b) {
            (Some(q), Some(b)) => i128::from(b) * 10 >= i128::from(q) * i128::from(DEGRADED_TENTHS),
            _ => false,
        };
        let words = format!("{what} p95 {} → {}", format_ms(q), format_ms(b));
        (degraded, words)
    };
    [
        change(
            "time to first token",
            quiet.ttft_p95_microseconds,
            busy.ttft_p95_microseconds,
        ),
        change(
            "queue time",
            quiet.queue_p95_microseconds,
            busy.queue_p95_microseconds,
        ),
    ]
}

/// Whether the service's own request rate rose by [`OWN_LOAD_TENTHS`] or more.
fn own_load_rose(quiet: &LatencyFigures, busy: &LatencyFigures) -> bool {
    i128::from(busy.requests) * i128::from(quiet.minutes) * 10
        > i128::from(quiet.requests) * i128::from(busy.minutes) * i128::from(OWN_LOAD_TENTHS)
}

fn requests_per_minute(f: &LatencyFigures) -> String {
    crate::common::money::hundredths(f.requests_per_minute_centi().into())
}

#[cfg(test)]
mod tests;
