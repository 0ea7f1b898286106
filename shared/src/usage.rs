//! Usage from metrics: what the raw samples of a window of DCGM, Kueue and vLLM series say
//! each namespace used, minute by minute (UTC), exactly.
//!
//! The backend reads raw samples (range selectors, never instant-style evaluation) and hands
//! them here; this module turns them into minute rows. Invariants:
//! - a minute is `[m, m + 60 s)`; a sample counts in the one minute holding its timestamp, and
//!   only when that minute lies inside the window, so windows that tile a span give the rows
//!   of the whole span, and a sample on a window's edge is counted once;
//! - a minute without a sample adds nothing: no value is carried forward or interpolated, so a
//!   device that vanished (with or without a staleness marker) stops counting at its last
//!   sample's minute;
//! - each sample stands for `1/n` of its device's minute (`n` samples of that device in that
//!   minute), so a GPU that changed pods within a minute is split between them, never counted
//!   twice;
//! - values are read from Prometheus's decimal text, not through floating point; time is kept
//!   in integer GPU-microseconds, each row's total rounded once (half up) from an exact sum kept
//!   to 10⁻⁶ µs;
//! - counters: a sample reports what was counted up to its timestamp, so the increase between
//!   consecutive samples belongs to the minute holding the instant just before the later one
//!   (`(m, m + 60 s]`): the increase over the 23:59 sample of one stamped 00:00 is the earlier
//!   day's, as Prometheus's `increase(x[1d])` evaluated at the day's end counts it, and a window
//!   `[from, to)` holds the increases of the samples in `(from, to]`. A fall is a reset (the
//!   restarted counter's value is the increase), never a negative.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::{common::utc::MINUTE_MS, fleet::catalogue};

pub mod demo;
pub mod neighbours;
pub mod queues;
pub mod reported;

/// Busy time of whole GPUs, in percent (dcgm-exporter's default counters).
pub const GPU_UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
/// Busy time of MIG instances, a ratio 0-1 (GPU_UTIL is not reported per instance).
pub const GR_ENGINE_ACTIVE: &str = "DCGM_FI_PROF_GR_ENGINE_ACTIVE";
/// Framebuffer used, in MiB.
pub const FB_USED: &str = "DCGM_FI_DEV_FB_USED";
/// Kueue's quota in use per ClusterQueue, flavor and resource (needs
/// `metrics.enableClusterQueueResources` in Kueue's configuration).
pub const KUEUE_USAGE: &str = "kueue_cluster_queue_resource_usage";
/// A ClusterQueue's nominal quota of one resource in one flavor (same labels as the usage).
pub const KUEUE_NOMINAL: &str = "kueue_cluster_queue_nominal_quota";
pub const PROMPT_TOKENS: &str = "vllm:prompt_tokens_total";
pub const GENERATION_TOKENS: &str = "vllm:generation_tokens_total";
pub const PREFILL_SECONDS: &str = "vllm:request_prefill_time_seconds_sum";
pub const DECODE_SECONDS: &str = "vllm:request_decode_time_seconds_sum";

/// GPU-microseconds in one GPU-minute.
pub const GPU_US_PER_GPU_MINUTE: i64 = 60_000_000;
/// Compute slices of a MIG GPU when its model is not known (every 7-slice NVIDIA GPU).
const DEFAULT_COMPUTE_SLICES: i64 = 7;
/// Sums are kept to 10⁻⁶ of their unit and rounded once per row.
const SCALE: i128 = 1_000_000;

pub type Labels = BTreeMap<String, String>;

/// One sample: its time in Unix milliseconds and its value in millionths, exactly as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub at_ms: i64,
    pub micro: i64,
}

/// One series' raw samples, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    pub labels: Labels,
    pub samples: Vec<Sample>,
}

/// Minutes `[from_ms, to_ms)`, both on a minute boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from_ms: i64,
    pub to_ms: i64,
}

impl Window {
    pub fn new(from_ms: i64, to_ms: i64) -> Result<Window, String> {
        if from_ms % MINUTE_MS != 0 || to_ms % MINUTE_MS != 0 {
            return Err("a window starts and ends on a whole minute (UTC)".to_owned());
        }
        if to_ms <= from_ms {
            return Err("a window ends after it starts".to_owned());
        }
        Ok(Window { from_ms, to_ms })
    }

    pub fn holds(self, at_ms: i64) -> bool {
        (self.from_ms..self.to_ms).contains(&at_ms)
    }

    /// Whether a counter sample stamped `at_ms` reports time inside: `(from, to]`.
    pub fn holds_counted_up_to(self, at_ms: i64) -> bool {
        self.holds(at_ms - 1)
    }

    pub fn minutes(self) -> i64 {
        (self.to_ms - self.from_ms) / MINUTE_MS
    }
}

/// A value as Prometheus writes it (`87`, `0.913305`, `1e+06`), in millionths, rounded half
/// away from zero past the sixth decimal; `None` for NaN, infinities and anything else.
pub fn parse_micro(text: &str) -> Option<i64> {
    let (negative, body) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], body[i + 1..].parse::<i32>().ok()?),
        None => (body, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let digits: String = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return None;
    }
    let mut value: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    // value × 10^(exponent - fraction digits) × 10^6
    let shift = exponent - i32::try_from(fraction.len()).ok()? + 6;
    if shift >= 0 {
        value = value.checked_mul(10i128.checked_pow(u32::try_from(shift).ok()?)?)?;
    } else {
        let divisor = 10i128
            .checked_pow(u32::try_from(-shift).ok()?)
            .unwrap_or(i128::MAX);
        value = div_round(value, divisor);
    }
    let value = i64::try_from(value).ok()?;
    Some(if negative { -value } else { value })
}

/// `num / den`, rounded half away from zero (`den > 0`).
fn div_round(num: i128, den: i128) -> i128 {
    let half = den / 2;
    if num >= 0 {
        (num + half) / den
    } else {
        -((-num + half) / den)
    }
}

/// The namespace a series belongs to: `exported_namespace` when Prometheus renamed a clashing
/// label (the scrape target's own namespace then sits in `namespace`), else `namespace`; `""`
/// for a device no pod holds.
pub fn namespace(labels: &Labels) -> &str {
    first_label(labels, &["exported_namespace", "namespace"])
}

/// dcgm-exporter writes `Hostname`; its NVLink series and older set-ups write `hostname`.
pub fn hostname(labels: &Labels) -> &str {
    first_label(labels, &["Hostname", "hostname", "instance"])
}

/// The value of the first of `keys` the labels hold, not empty; `""` when none.
fn first_label<'a>(labels: &'a Labels, keys: &[&str]) -> &'a str {
    keys.iter()
        .filter_map(|key| labels.get(*key))
        .find(|value| !value.is_empty())
        .map_or("", String::as_str)
}

/// A flavor as usage attribution needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlavorFacts {
    pub name: String,
    /// A catalogue model name, e.g. `H200-SXM-141GB`.
    pub gpu_model: String,
    /// `true` when the flavor's GPUs are split into MIG instances.
    pub mig: bool,
    /// How pods share one of its devices, when admins said ([`crate::quota::FlavorSettings`]).
    pub sharing: Option<crate::fleet::sharing::Mechanism>,
}

/// Who owns what: teams' namespaces and ClusterQueues, and the flavors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owners {
    /// ClusterQueue name → the owning team's namespace.
    pub cluster_queues: BTreeMap<String, String>,
    pub flavors: Vec<FlavorFacts>,
}

impl Owners {
    /// The row a ClusterQueue's figures land in: `(its team's namespace, "")`, or `("", the
    /// queue)` when no team owns it.
    pub fn queue_row(&self, cluster_queue: &str) -> (String, String) {
        match self.cluster_queues.get(cluster_queue) {
            Some(ns) => (ns.clone(), String::new()),
            None => (String::new(), cluster_queue.to_owned()),
        }
    }
}

/// The row a minute's usage lands in. Allocation of a ClusterQueue no team owns keeps the
/// queue's name (and no namespace); everything else is keyed by namespace (`""` for a device
/// no pod holds). `flavor` is `""` when a device's flavor cannot be told.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UsageKey {
    pub minute_ms: i64,
    pub namespace: String,
    pub cluster_queue: String,
    pub flavor: String,
}

/// What the DCGM series say of one row's minute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceMinute {
    /// Σ over devices: busy ratio × the device's share of a GPU × the part of the minute its
    /// samples stand for.
    pub busy_gpu_us: i64,
    /// Σ over devices with a sample: share of a GPU × the part of the minute.
    pub observed_gpu_us: i64,
    /// Σ over devices: mean framebuffer used in the minute.
    pub fb_used_mib: i64,
}

/// A model name as NVML prints it (`NVIDIA H100 80GB HBM3`, `NVIDIA H200`) → the catalogue
/// model sharing most name parts with it (ties: none).
pub fn catalogue_model(product_name: &str) -> Option<&'static catalogue::AcceleratorModel> {
    let parts = |s: &str| -> BTreeSet<String> {
        s.split([' ', '-', '_'])
            .map(str::to_ascii_lowercase)
            .filter(|p| !p.is_empty() && p != "nvidia")
            .collect()
    };
    let wanted = parts(product_name);
    let mut scored: Vec<(usize, &catalogue::AcceleratorModel)> = catalogue::models()
        .iter()
        .map(|m| (parts(&m.name).intersection(&wanted).count(), m))
        .filter(|(score, _)| *score > 0)
        .collect();
    scored.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
    match scored.as_slice() {
        [(best, model), rest @ ..] if rest.first().is_none_or(|(next, _)| next < best) => {
            Some(model)
        }
        _ => None,
    }
}

/// What tells a DCGM series' flavor ([`DeviceFlavors::of`]): the flavors, and what Kueue
/// reported each namespace holding in the window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceFlavors {
    pub flavors: Vec<FlavorFacts>,
    /// (namespace, resource) → the flavors its ClusterQueue held that resource on.
    pub held: BTreeMap<(String, String), BTreeSet<String>>,
}

impl DeviceFlavors {
    pub fn new(flavors: Vec<FlavorFacts>) -> DeviceFlavors {
        DeviceFlavors {
            flavors,
            held: BTreeMap::new(),
        }
    }

    /// Adds what Kueue's usage series ([`KUEUE_USAGE`]) say each team's namespace held in the
    /// window (a sample above zero).
    pub fn held_by_kueue(mut self, usage: &[Series], window: Window, owners: &Owners) -> Self {
        for s in usage {
            let get = |k: &str| s.labels.get(k).map_or("", String::as_str);
            let (namespace, _) = owners.queue_row(get("cluster_queue"));
            let held = s
                .samples
                .iter()
                .any(|x| window.holds(x.at_ms) && x.micro > 0);
            if held && !namespace.is_empty() {
                self.held
                    .entry((namespace, get("resource").to_owned()))
                    .or_default()
                    .insert(get("flavor").to_owned());
            }
        }
        self
    }

    /// The flavor of a DCGM series: the first of these that names exactly one —
    /// 1. its `flavor` label, when a relabelling set one;
    /// 2. of its model's flavors, those Kueue reported the series' namespace holding the
    ///    device's resource on (`nvidia.com/mig-<profile>` for a MIG instance, a whole-GPU
    ///    resource for a card): one flavor may hold whole GPUs and MIG instances at once (nodes
    ///    under the mixed MIG strategy, a GPU re-partitioned during the day);
    /// 3. of its model's flavors, those split into MIG instances like the series (or not);
    /// 4. its model's only flavor.
    pub fn of(&self, labels: &Labels) -> Option<&FlavorFacts> {
        if let Some(name) = labels.get("flavor") {
            return self.flavors.iter().find(|f| &f.name == name);
        }
        let model = catalogue_model(labels.get("modelName")?)?;
        let of_model = || self.flavors.iter().filter(|f| f.gpu_model == model.name);
        let profile = labels.get("GPU_I_PROFILE");
        let ns = namespace(labels);
        let held_on = |f: &FlavorFacts| {
            let holds = |resource: &str| {
                self.held
                    .get(&(ns.to_owned(), resource.to_owned()))
                    .is_some_and(|flavors| flavors.contains(&f.name))
            };
            match profile {
                Some(p) => holds(&format!("nvidia.com/mig-{p}")),
                None => catalogue::device_resources().any(holds),
            }
        };
        let mig = profile.is_some();
        only(of_model().filter(|f| held_on(f)))
            .or_else(|| only(of_model().filter(|f| f.mig == mig)))
            .or_else(|| only(of_model()))
    }
}

/// The one item, or `None` for none or several.
fn only<T>(mut items: impl Iterator<Item = T>) -> Option<T> {
    match (items.next(), items.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// Compute slices of a MIG profile name (`1g.18gb` → 1, `3g.71gb+me` → 3).
fn profile_slices(profile: &str) -> Option<i64> {
    let (count, _) = profile.split_once('g')?;
    count.parse().ok().filter(|n| *n > 0)
}

/// Total compute slices of a model, when it has MIG.
fn total_slices(model: &str) -> Option<i64> {
    catalogue::find(model)
        .ok()?
        .mig
        .as_ref()
        .map(|g| i64::from(g.total_compute_slices))
}

/// A MIG instance's share of its GPU, `(numerator, denominator)`: its compute slices over the
/// GPU's (a `1g` profile on a 7-slice GPU is 1/7).
fn mig_share(profile: &str, model: Option<&str>) -> (i64, i64) {
    let slices = profile_slices(profile).unwrap_or(1);
    let total = model
        .and_then(total_slices)
        .unwrap_or(DEFAULT_COMPUTE_SLICES);
    (slices.min(total), total)
}

/// One device's samples within one minute.
#[derive(Default)]
struct DeviceSamples<'a> {
    flavor: &'a str,
    share: (i64, i64),
    /// (namespace, busy ratio in 10⁻⁸)
    busy: Vec<(&'a str, i64)>,
    /// (namespace, MiB in 10⁻⁶)
    fb: Vec<(&'a str, i64)>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Exact {
    busy: i128,
    observed: i128,
    fb: i128,
}

/// What the DCGM series of a window say, per row. `util` holds [`GPU_UTIL`] series (whole
/// GPUs; percent), `engine` [`GR_ENGINE_ACTIVE`] (MIG instances; ratio), `fb` [`FB_USED`].
pub fn device_minutes(
    util: &[Series],
    engine: &[Series],
    fb: &[Series],
    window: Window,
    flavors: &DeviceFlavors,
) -> BTreeMap<UsageKey, DeviceMinute> {
    device_sums(util, engine, fb, window, flavors).rows()
}

/// The exact sums behind [`device_minutes`], for callers that read the series in parts (each
/// device wholly in one part) and add the parts before rounding.
pub fn device_sums(
    util: &[Series],
    engine: &[Series],
    fb: &[Series],
    window: Window,
    flavors: &DeviceFlavors,
) -> DeviceSums {
    let mut devices: BTreeMap<(String, i64), DeviceSamples> = BTreeMap::new();
    for (series, kind) in [(util, Kind::Util), (engine, Kind::Engine), (fb, Kind::Fb)] {
        for s in series {
            let mig_profile = s.labels.get("GPU_I_PROFILE");
            match kind {
                Kind::Util if mig_profile.is_some() => continue,
                Kind::Engine if mig_profile.is_none() => continue,
                _ => {}
            }
            let flavor = flavors.of(&s.labels);
            let share = match mig_profile {
                None => (1, 1),
                Some(profile) => {
                    let model = flavor.map(|f| f.gpu_model.as_str()).or_else(|| {
                        s.labels
                            .get("modelName")
                            .and_then(|m| catalogue_model(m))
                            .map(|m| m.name.as_str())
                    });
                    mig_share(profile, model)
                }
            };
            let device = device_key(&s.labels);
            let ns = namespace(&s.labels);
            for sample in s.samples.iter().filter(|x| window.holds(x.at_ms)) {
                let entry = devices
                    .entry((
                        device.clone(),
                        crate::common::utc::floor_minute(sample.at_ms),
                    ))
                    .or_default();
                entry.flavor = flavor.map_or("", |f| f.name.as_str());
                entry.share = share;
                match kind {
                    Kind::Util => entry.busy.push((ns, sample.micro)),
                    Kind::Engine => entry.busy.push((ns, sample.micro * 100)),
                    Kind::Fb => entry.fb.push((ns, sample.micro)),
                }
            }
        }
    }

    let mut exact: BTreeMap<UsageKey, Exact> = BTreeMap::new();
    let key = |minute_ms: i64, ns: &str, flavor: &str| UsageKey {
        minute_ms,
        namespace: ns.to_owned(),
        cluster_queue: String::new(),
        flavor: flavor.to_owned(),
    };
    for ((_, minute_ms), d) in &devices {
        let (num, den) = (i128::from(d.share.0), i128::from(d.share.1));
        let minute_us = i128::from(GPU_US_PER_GPU_MINUTE);
        let n = i128::try_from(d.busy.len()).unwrap_or(i128::MAX);
        for (ns, ratio_e8) in &d.busy {
            let row = exact.entry(key(*minute_ms, ns, d.flavor)).or_default();
            row.busy += div_round(
                i128::from(*ratio_e8) * num * minute_us * SCALE,
                100_000_000 * den * n,
            );
            row.observed += div_round(num * minute_us * SCALE, den * n);
        }
        let n = i128::try_from(d.fb.len()).unwrap_or(i128::MAX);
        for (ns, mib_micro) in &d.fb {
            let row = exact.entry(key(*minute_ms, ns, d.flavor)).or_default();
            row.fb += div_round(i128::from(*mib_micro), n);
        }
    }
    DeviceSums(exact)
}

/// Per-row sums kept to 10⁻⁶ of their unit.
#[derive(Default)]
pub struct DeviceSums(BTreeMap<UsageKey, Exact>);

impl DeviceSums {
    pub fn add(&mut self, other: DeviceSums) {
        for (key, e) in other.0 {
            let row = self.0.entry(key).or_default();
            row.busy += e.busy;
            row.observed += e.observed;
            row.fb += e.fb;
        }
    }

    /// Each row rounded once, half up.
    pub fn rows(self) -> BTreeMap<UsageKey, DeviceMinute> {
        self.0
            .into_iter()
            .map(|(k, e)| {
                (
                    k,
                    DeviceMinute {
                        busy_gpu_us: unscale(e.busy),
                        observed_gpu_us: unscale(e.observed),
                        fb_used_mib: unscale(e.fb),
                    },
                )
            })
            .collect()
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Util,
    Engine,
    Fb,
}

fn unscale(value: i128) -> i64 {
    i64::try_from(div_round(value, SCALE)).unwrap_or(i64::MAX)
}

/// A device: its node, its GPU and, for a MIG instance, the instance. Pod labels are not part
/// of it: a GPU that changes pods is still one device.
fn device_key(labels: &Labels) -> String {
    let get = |k: &str| labels.get(k).map_or("", String::as_str);
    let uuid = if get("UUID").is_empty() {
        get("uuid")
    } else {
        get("UUID")
    };
    format!(
        "{}\u{0}{}\u{0}{}\u{0}{}",
        hostname(labels),
        uuid,
        get("gpu"),
        get("GPU_I_ID")
    )
}

/// A resource's worth in GPUs, `(numerator, denominator)`: a vendor's whole-GPU resource is one
/// GPU, `nvidia.com/mig-<profile>` its profile's share of the flavor's GPU; `None` for
/// resources that are not GPUs (cpu, memory, …).
pub fn resource_share(resource: &str, flavor: Option<&FlavorFacts>) -> Option<(i64, i64)> {
    share_of_gpu(resource, flavor.map(|f| f.gpu_model.as_str()))
}

/// [`resource_share`] on a GPU model (a catalogue name), when it is known.
fn share_of_gpu(resource: &str, gpu_model: Option<&str>) -> Option<(i64, i64)> {
    if catalogue::device_resources().any(|r| r == resource) {
        return Some((1, 1));
    }
    let profile = resource.strip_prefix("nvidia.com/mig-")?;
    Some(mig_share(profile, gpu_model))
}

/// Kueue's allocation per row, and the minutes in which Kueue reported anything at all (in the
/// others its allocation is not known, which is not zero).
pub fn allocation_minutes(
    usage: &[Series],
    window: Window,
    owners: &Owners,
) -> (BTreeMap<UsageKey, i64>, BTreeSet<i64>) {
    let mut exact: BTreeMap<UsageKey, i128> = BTreeMap::new();
    let mut known = BTreeSet::new();
    for s in usage {
        let get = |k: &str| s.labels.get(k).map_or("", String::as_str);
        let flavor_name = get("flavor");
        let flavor = owners.flavors.iter().find(|f| f.name == flavor_name);
        let share = resource_share(get("resource"), flavor);
        let (namespace, cluster_queue) = owners.queue_row(get("cluster_queue"));
        let mut by_minute: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for sample in s.samples.iter().filter(|x| window.holds(x.at_ms)) {
            let minute = crate::common::utc::floor_minute(sample.at_ms);
            known.insert(minute);
            by_minute.entry(minute).or_default().push(sample.micro);
        }
        let Some((num, den)) = share else { continue };
        for (minute_ms, values) in by_minute {
            let n = i128::try_from(values.len()).unwrap_or(i128::MAX);
            let sum: i128 = values.iter().map(|v| i128::from(*v)).sum();
            // mean (in 10⁻⁶ units) × share × µs per minute, kept to 10⁻⁶ µs
            let gpu_us = div_round(
                sum * i128::from(num) * i128::from(GPU_US_PER_GPU_MINUTE),
                i128::from(den) * n,
            );
            *exact
                .entry(UsageKey {
                    minute_ms,
                    namespace: namespace.clone(),
                    cluster_queue: cluster_queue.clone(),
                    flavor: flavor_name.to_owned(),
                })
                .or_default() += gpu_us;
        }
    }
    let rows = exact.into_iter().map(|(k, v)| (k, unscale(v))).collect();
    (rows, known)
}

/// A row's nominal quota in one minute, and what it borrowed from its cohort and lent to it,
/// in GPU-microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lending {
    pub nominal_gpu_us: i64,
    pub borrowed_gpu_us: i64,
    pub lent_gpu_us: i64,
}

/// Who borrowed and who lent, minute by minute, from Kueue's usage (`allocated`, the rows
/// [`allocation_minutes`] made of it) and nominal quota series ([`KUEUE_NOMINAL`]), per cohort
/// and flavor (the series' `cohort` and `flavor` labels):
/// - a queue borrowed what it used above its nominal quota, `max(0, used − nominal)`;
/// - its unused quota, `max(0, nominal − used)`, is what it could lend; Kueue does not say whose
///   unused quota a borrower ran on, so the minute's borrowing (at most the cohort's unused
///   quota; a Cohort's own quota covers any rest) is attributed to the lenders in proportion to
///   their unused quota, largest remainder, so the lent figures add up to it exactly;
/// - a queue in no cohort neither borrows nor lends;
/// - a queue Kueue reports quota for and no usage of uses none of it: its row in `allocated`
///   is set to 0 (Kueue's usage and quota series come and go together, with
///   `metrics.enableClusterQueueResources`).
///
/// Empty when Kueue reported no nominal quota at all (lending unknown, not zero).
pub fn lending_minutes(
    usage: &[Series],
    nominal: &[Series],
    window: Window,
    owners: &Owners,
    allocated: &mut BTreeMap<UsageKey, i64>,
) -> BTreeMap<UsageKey, Lending> {
    let (quota, _) = allocation_minutes(nominal, window, owners);
    if quota.is_empty() {
        return BTreeMap::new();
    }
    for key in quota.keys() {
        allocated.entry(key.clone()).or_insert(0);
    }
    let allocated = &*allocated;
    let mut cohort_of: BTreeMap<(String, String), String> = BTreeMap::new();
    for s in usage.iter().chain(nominal) {
        let get = |k: &str| s.labels.get(k).map_or("", String::as_str);
        cohort_of.insert(
            owners.queue_row(get("cluster_queue")),
            get("cohort").to_owned(),
        );
    }
    let mut groups: BTreeMap<(i64, &str, &str), Vec<&UsageKey>> = BTreeMap::new();
    for key in quota.keys().chain(allocated.keys()) {
        let cohort = cohort_of
            .get(&(key.namespace.clone(), key.cluster_queue.clone()))
            .map_or("", String::as_str);
        let group = groups
            .entry((key.minute_ms, cohort, key.flavor.as_str()))
            .or_default();
        if !group.contains(&key) {
            group.push(key);
        }
    }
    let mut out = BTreeMap::new();
    for ((_, cohort, _), keys) in groups {
        let figures: Vec<(i64, i64)> = keys
            .iter()
            .map(|k| {
                let used = allocated.get(*k).copied().unwrap_or(0);
                (quota.get(*k).copied().unwrap_or(0), used)
            })
            .collect();
        // (borrowed, unused): in no cohort, neither
        let (borrowed, unused): (Vec<i64>, Vec<i64>) = figures
            .iter()
            .map(|(n, used)| {
                if cohort.is_empty() {
                    (0, 0)
                } else {
                    ((used - n).max(0), (n - used).max(0))
                }
            })
            .unzip();
        let lendable: i64 = unused.iter().sum();
        let lent_total = borrowed.iter().sum::<i64>().min(lendable);
        let lent = apportion(lent_total, &unused);
        for (i, key) in keys.into_iter().enumerate() {
            out.insert(
                key.clone(),
                Lending {
                    nominal_gpu_us: figures[i].0,
                    borrowed_gpu_us: borrowed[i],
                    lent_gpu_us: lent[i],
                },
            );
        }
    }
    out
}

/// `total` split in proportion to `weights` in whole units, largest remainder (ties to the
/// first), so the parts add up to `total`; all zero when the weights are.
fn apportion(total: i64, weights: &[i64]) -> Vec<i64> {
    let sum: i128 = weights.iter().map(|w| i128::from(*w)).sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let exact: Vec<(i64, i128)> = weights
        .iter()
        .map(|w| {
            let num = i128::from(total) * i128::from(*w);
            (i64::try_from(num / sum).unwrap_or(i64::MAX), num % sum)
        })
        .collect();
    let mut parts: Vec<i64> = exact.iter().map(|(q, _)| *q).collect();
    let mut left = total - parts.iter().sum::<i64>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|a, b| exact[*b].1.cmp(&exact[*a].1).then(a.cmp(b)));
    for i in order {
        if left == 0 {
            break;
        }
        parts[i] += 1;
        left -= 1;
    }
    parts
}

/// kube-state-metrics' requests of running pods, for when Kueue's series are absent: GPU
/// requests (`kube_pod_container_resource_requests`, resource `nvidia_com_gpu`,
/// `nvidia_com_mig_1g_18gb`, …) of pods whose `kube_pod_status_phase{phase="Running"}` was 1 in
/// that minute, by namespace. The flavor is not known from these series (`""`), so MIG counts
/// at a 7-slice GPU's share.
pub fn requested_minutes(
    requests: &[Series],
    phases: &[Series],
    window: Window,
) -> BTreeMap<UsageKey, i64> {
    let mut running: BTreeSet<(String, String, i64)> = BTreeSet::new();
    for s in phases {
        if s.labels.get("phase").map(String::as_str) != Some("Running") {
            continue;
        }
        let pod = s.labels.get("pod").cloned().unwrap_or_default();
        for sample in s
            .samples
            .iter()
            .filter(|x| window.holds(x.at_ms) && x.micro > 0)
        {
            running.insert((
                namespace(&s.labels).to_owned(),
                pod.clone(),
                crate::common::utc::floor_minute(sample.at_ms),
            ));
        }
    }
    let mut exact: BTreeMap<UsageKey, i128> = BTreeMap::new();
    for s in requests {
        let resource = s.labels.get("resource").map_or("", String::as_str);
        let Some((num, den)) = sanitized_resource_share(resource) else {
            continue;
        };
        let ns = namespace(&s.labels).to_owned();
        let pod = s.labels.get("pod").cloned().unwrap_or_default();
        let mut by_minute: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for sample in s.samples.iter().filter(|x| window.holds(x.at_ms)) {
            let minute = crate::common::utc::floor_minute(sample.at_ms);
            if running.contains(&(ns.clone(), pod.clone(), minute)) {
                by_minute.entry(minute).or_default().push(sample.micro);
            }
        }
        for (minute_ms, values) in by_minute {
            let n = i128::try_from(values.len()).unwrap_or(i128::MAX);
            let sum: i128 = values.iter().map(|v| i128::from(*v)).sum();
            *exact
                .entry(UsageKey {
                    minute_ms,
                    namespace: ns.clone(),
                    cluster_queue: String::new(),
                    flavor: String::new(),
                })
                .or_default() += div_round(
                sum * i128::from(num) * i128::from(GPU_US_PER_GPU_MINUTE),
                i128::from(den) * n,
            );
        }
    }
    exact.into_iter().map(|(k, v)| (k, unscale(v))).collect()
}

/// A resource name as kube-state-metrics writes it (`nvidia_com_gpu`,
/// `nvidia_com_mig_1g_18gb`) in GPUs.
fn sanitized_resource_share(resource: &str) -> Option<(i64, i64)> {
    if catalogue::device_resources().any(|r| r.replace(['.', '/'], "_") == resource) {
        return Some((1, 1));
    }
    let profile = resource.strip_prefix("nvidia_com_mig_")?;
    Some(mig_share(&profile.replacen('_', ".", 1), None))
}

/// Tokens a model served for a namespace in one minute.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenKey {
    pub minute_ms: i64,
    pub namespace: String,
    pub model: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub prompt: i64,
    pub generation: i64,
    /// Time requests spent in prefill and in decode (vLLM's
    /// `request_prefill_time_seconds_sum`, `request_decode_time_seconds_sum`), in
    /// microseconds: what splits a model's cost between input and output.
    pub prefill_us: i64,
    pub decode_us: i64,
}

/// vLLM's counters of one window (each series reaching back before the window).
#[derive(Debug, Clone, Copy, Default)]
pub struct Served<'a> {
    pub prompt: &'a [Series],
    pub generation: &'a [Series],
    pub prefill_seconds: &'a [Series],
    pub decode_seconds: &'a [Series],
}

/// A counter series' increases inside `window`, each with the minute it was counted in (the one
/// holding the instant before the later sample): the difference of consecutive samples, or after
/// a fall (a restart) the new value.
fn increases(samples: &[Sample], window: Window) -> impl Iterator<Item = (i64, i64)> + '_ {
    samples
        .windows(2)
        .filter(move |pair| window.holds_counted_up_to(pair[1].at_ms))
        .map(|pair| {
            let (before, after) = (pair[0], pair[1]);
            let increase = if after.micro >= before.micro {
                after.micro - before.micro
            } else {
                after.micro
            };
            (crate::common::utc::floor_minute(after.at_ms - 1), increase)
        })
}

/// The increase of each counter series per minute of the window. The series must reach back
/// before the window (the backend asks for a lookback) so the first increase inside it has the
/// sample before it, and up to its end inclusive (the sample stamped `to` closes its last minute).
pub fn token_minutes(served: &Served, window: Window) -> BTreeMap<TokenKey, Tokens> {
    let mut rows: BTreeMap<TokenKey, [i128; 4]> = BTreeMap::new();
    let counters = [
        served.prompt,
        served.generation,
        served.prefill_seconds,
        served.decode_seconds,
    ];
    for (which, series) in counters.into_iter().enumerate() {
        for s in series {
            let ns = namespace(&s.labels).to_owned();
            let model = s.labels.get("model_name").cloned().unwrap_or_default();
            for (minute_ms, increase) in increases(&s.samples, window) {
                rows.entry(TokenKey {
                    minute_ms,
                    namespace: ns.clone(),
                    model: model.clone(),
                })
                .or_default()[which] += i128::from(increase);
            }
        }
    }
    let whole = |v: i128| i64::try_from(v).unwrap_or(i64::MAX);
    rows.into_iter()
        .map(|(k, [p, g, prefill, decode])| {
            (
                k,
                Tokens {
                    prompt: unscale(p),
                    generation: unscale(g),
                    // seconds in millionths are microseconds
                    prefill_us: whole(prefill),
                    decode_us: whole(decode),
                },
            )
        })
        .collect()
}

/// One minute of the fleet as the live view streams it (`GET /api/usage/stream`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveMinute {
    /// RFC 3339, UTC; also the event id (its Unix milliseconds) for `Last-Event-ID`.
    pub minute: String,
    pub minute_ms: i64,
    /// GPUs the inventory holds.
    pub capacity_gpus: i64,
    pub teams: Vec<LiveTeam>,
}

/// One team's minute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveTeam {
    pub team: String,
    /// `None` when Kueue's allocation is not known for the minute.
    pub allocated_gpu_microseconds: Option<i64>,
    pub busy_gpu_microseconds: i64,
    pub observed_gpu_microseconds: i64,
}

/// One metrics source's ingest state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceStatus {
    /// `kueue`, `dcgm` or `vllm`.
    pub source: String,
    /// Everything before it is ingested (RFC 3339 UTC); `None` before the first window.
    pub watermark: Option<String>,
    /// Seconds from the watermark to now.
    pub lag_seconds: Option<i64>,
    pub last_success_at: Option<String>,
    pub last_error: Option<String>,
    pub last_error_at: Option<String>,
    /// What the last window showed that a person must know (e.g. Kueue's series are absent).
    pub note: Option<String>,
}

/// A window that could not be ingested yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    pub source: String,
    pub from: String,
    pub to: String,
    pub error: String,
    pub attempts: i32,
    pub first_failed_at: String,
    pub last_failed_at: String,
}

/// The ingest as `/api/health` and `gpufleet usage status` report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageHealth {
    /// The Prometheus URL (no credentials: those come from files), or `None` when usage
    /// ingest is off.
    pub prometheus: Option<String>,
    /// The metrics come from gpufleet's demo exporter: every figure is demo data.
    #[serde(default)]
    pub demo: bool,
    pub sources: Vec<SourceStatus>,
    pub open_gaps: Vec<Gap>,
    /// Namespaces (and ClusterQueues, written `clusterqueue/<name>`) with usage in the last
    /// 7 days that no team owns: kept, charged to nobody until a team claims them.
    pub unattributed: Vec<String>,
}

#[cfg(test)]
mod tests;
