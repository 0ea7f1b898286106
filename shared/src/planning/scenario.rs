//! The planning input: one versioned `Scenario` (JSON in and out) — the fleet, the teams and
//! their workload classes with weekly demand, the Kueue-style quota set-up, and the
//! organisation's constraints. [`Scenario::validate`] names every bad field by its path.
//!
//! Units are in the names: GPUs, minutes, seconds, cents; a week is 168 hourly points.

use serde::{Deserialize, Serialize};

use crate::{
    common::error::FieldError,
    common::label::Labelled,
    common::validate::{DNS_LABEL_RULE, dns_label_from, free_name, is_dns_label},
    fleet::Fleet,
    fleet::catalogue::{self, AcceleratorModel, Vendor},
    kueue::{BorrowPolicy, BorrowWithinCohort, Queueing, Reclaim, WithinQueue},
};

/// The scenario format this build reads. Version 2 names accelerators by the catalogue and
/// takes their memory, vendor and MIG from it (version 1 carried `mem_gib`, `vendor`, `mig`);
/// version 3 states the quota's preemption policies by Kueue's values (version 2 had a switch
/// each: `reclaim_within_cohort` for `Any`, `preempt_lower_priority` for `LowerPriority`).
pub const SCENARIO_VERSION: u32 = 3;
pub const HOURS_PER_WEEK: usize = 168;

/// What one evaluation may cost, checked before it starts. For scale (docs/performance.md):
/// the 10,000-GPU benchmark (4 flavors, 50 teams, 150 classes, ~100,000 jobs) simulates in
/// about 0.1 s on one core, ten times it (~950,000 jobs) in about 2 s, 10,000 cards of one-hour
/// jobs (1,690,000) in about 1 s, and 20,000,000 jobs in under 2 minutes; the week holds the
/// jobs queued or running at once (12 bytes for each job not yet arrived), not every job.
pub const MAX_FLAVORS: usize = 32;
pub const MAX_TEAMS: usize = 500;
pub const MAX_WORKLOADS: usize = 2_000;
/// Batch jobs the week's demand implies, at most.
pub const MAX_JOBS: u64 = 20_000_000;
/// Σ `max_replicas` over the inference classes, at most.
pub const MAX_REPLICAS: u64 = 200_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub version: u32,
    pub name: String,
    /// Seed of the simulation's job arrivals: the same seed gives the same result.
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub fleet: Vec<Accelerator>,
    pub teams: Vec<Team>,
    #[serde(default)]
    pub quota: QuotaPolicy,
    pub constraints: Constraints,
    /// Decision-matrix weights; absent criteria weigh 1.
    #[serde(default)]
    pub weights: Weights,
}

fn default_seed() -> u64 {
    crate::common::rng::DEFAULT_SEED
}

/// One accelerator type of the fleet: a Kueue ResourceFlavor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accelerator {
    /// The flavor name (a DNS label), e.g. `h100`.
    pub flavor: String,
    /// A model of the catalogue (`shared::catalogue`), e.g. `H100-SXM5-80GB`: its vendor,
    /// memory and MIG come from there.
    pub gpu_model: String,
    pub count: u32,
    pub gpus_per_node: u32,
    pub price_cents_per_gpu_hour: i64,
}

impl Accelerator {
    /// The catalogue's facts; `None` only for a scenario that failed validation.
    pub fn model(&self) -> Option<&'static AcceleratorModel> {
        catalogue::find(&self.gpu_model).ok()
    }

    pub fn has_mig(&self) -> bool {
        self.model().is_some_and(AcceleratorModel::supports_mig)
    }

    /// The vendor; NVIDIA when the model is unknown (validation refuses those).
    pub fn vendor(&self) -> Vendor {
        self.model().map_or(Vendor::Nvidia, |m| m.vendor)
    }

    /// The whole-card resource its pods and quotas name (the catalogue's).
    pub fn resource(&self) -> &'static str {
        self.model()
            .map_or("nvidia.com/gpu", |m| m.resource.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Team {
    /// DNS label; also the ClusterQueue's name and the namespace stem.
    pub name: String,
    /// Nominal quota per flavor, in GPUs.
    pub nominal_gpus: std::collections::BTreeMap<String, u32>,
    /// Most GPUs per flavor it may borrow from the cohort; absent: no limit.
    #[serde(default)]
    pub borrowing_limit_gpus: std::collections::BTreeMap<String, u32>,
    /// Most GPUs per flavor it lends; absent: all its unused quota.
    #[serde(default)]
    pub lending_limit_gpus: std::collections::BTreeMap<String, u32>,
    /// The p95 queue wait of the team's batch jobs it accepts, in minutes: what the quota
    /// suggestion sizes its quota for.
    #[serde(
        default = "default_wait_target",
        skip_serializing_if = "is_default_wait_target"
    )]
    pub queue_wait_target_min: u32,
    pub workloads: Vec<Workload>,
}

/// An hour: long enough for a training queue, short enough that nobody waits a day.
pub const DEFAULT_QUEUE_WAIT_TARGET_MIN: u32 = 60;

fn default_wait_target() -> u32 {
    DEFAULT_QUEUE_WAIT_TARGET_MIN
}
fn is_default_wait_target(v: &u32) -> bool {
    *v == DEFAULT_QUEUE_WAIT_TARGET_MIN
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    PreTraining,
    /// LoRA and other fine-tuning.
    FineTuning,
    /// Batch inference and evaluation.
    Batch,
    /// Online inference with a traffic curve.
    Inference,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    pub kind: WorkloadKind,
    /// The flavor it runs on.
    pub flavor: String,
    pub demand: Demand,
    /// GPUs one job (or one inference replica) holds.
    pub gpus_per_job: u32,
    /// GPU memory one job needs when it is smaller than one GPU (with `gpus_per_job` 1), in
    /// MiB; absent: each job needs whole cards. Only such work is a candidate for MIG or
    /// fractions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_mib_per_job: Option<u32>,
    /// One trusted team's work that wants throughput over isolation (MPS), when it is smaller
    /// than a GPU.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub throughput: bool,
    /// Mean job length (batch kinds); ignored for inference.
    #[serde(default = "default_job_minutes")]
    pub job_minutes: u32,
    /// Minutes between checkpoints; 0 means no checkpoints.
    #[serde(default)]
    pub checkpoint_minutes: u32,
    /// Batch kinds: minutes an evicted job spends, once admitted again, before it works again
    /// (pulling its image, loading its last checkpoint): rework on top of the work lost since
    /// that checkpoint. Default 2: fetching ~30 GB from object storage keeps a GPU allocated
    /// at 0% for about two minutes (docs/planning-rules.md, "Checkpoints and restarts").
    #[serde(default = "default_restart_minutes")]
    pub restart_minutes: u32,
    /// Higher runs first and may preempt lower inside the team's queue.
    #[serde(default)]
    pub priority: i32,
    /// The class expects to be evicted (it borrows, or yields to higher priority) and is
    /// checked for checkpoints. Kueue itself protects no workload: the simulation reclaims
    /// borrowed quota and preempts lower priority whatever this says.
    #[serde(default)]
    pub preemptible: bool,
    /// Share of allocated time the GPU is really busy (DCGM_FI_DEV_GPU_UTIL), in %.
    #[serde(default = "default_busy_pct")]
    pub busy_pct: u32,
    /// Distinct business tenants whose work shares this class's GPUs (1: one tenant).
    #[serde(default = "one")]
    pub tenants: u32,
    /// Whether the class has a latency SLO.
    #[serde(default)]
    pub slo: bool,
    /// Batch kinds: queued work beyond the profile, always waiting, in GPUs: up to this many
    /// GPUs more whenever quota and the fleet leave room. It runs last in its queue and may be
    /// evicted by the owners of what it borrowed (a backlog is elastic demand: research and
    /// training queues that never run dry). It buys no cards in the sizing.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub backlog_gpus: f64,
    /// Inference only.
    #[serde(default)]
    pub inference: Option<Inference>,
    /// How the class is isolated today, if known (checked for anti-patterns).
    #[serde(default)]
    pub current_isolation: Option<crate::fleet::sharing::Mechanism>,
}

fn default_job_minutes() -> u32 {
    240
}
fn default_restart_minutes() -> u32 {
    2
}
fn default_busy_pct() -> u32 {
    90
}
fn one() -> u32 {
    1
}
fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// GPUs wanted per hour over a week: given, or generated from a preset. Written as either of
/// its variants' fields alone (`{"hourly_gpus": [...]}` or `{"preset": …, "peak_gpus": …}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Demand {
    Hourly { hourly_gpus: Vec<f64> },
    Preset { preset: Preset, peak_gpus: f64 },
}

/// A demand as written: read as one record and then told apart, rather than as serde's
/// untagged enum, which buffers the value to try each variant (and took the planner's worker
/// ~5 KB gzip of buffering code).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DemandFields {
    hourly_gpus: Option<Vec<f64>>,
    preset: Option<Preset>,
    peak_gpus: Option<f64>,
}

impl<'de> Deserialize<'de> for Demand {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match DemandFields::deserialize(d)? {
            DemandFields {
                hourly_gpus: Some(hourly_gpus),
                preset: None,
                peak_gpus: None,
            } => Ok(Demand::Hourly { hourly_gpus }),
            DemandFields {
                hourly_gpus: None,
                preset: Some(preset),
                peak_gpus: Some(peak_gpus),
            } => Ok(Demand::Preset { preset, peak_gpus }),
            _ => Err(serde::de::Error::custom(
                "a demand is either hourly_gpus (168 values) or a preset with its peak_gpus",
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// The peak all week.
    Flat,
    /// Office hours (8-20 on weekdays) at the peak, 25% at night and 15% on weekends.
    BusinessHoursDiurnal,
    /// Ramps through the week to the peak on Friday night, low on Monday.
    WeeklyBatch,
}

impl Demand {
    /// The 168 hourly values, in GPUs.
    pub fn hourly(&self) -> Vec<f64> {
        match self {
            Demand::Hourly { hourly_gpus } => hourly_gpus.clone(),
            Demand::Preset { preset, peak_gpus } => (0..HOURS_PER_WEEK)
                .map(|h| peak_gpus * preset.shape(h))
                .collect(),
        }
    }
}

impl Preset {
    /// The share of the peak at hour `h` of the week (hour 0 is Monday 00:00 UTC).
    pub fn shape(self, h: usize) -> f64 {
        let (day, hour) = (h / 24, h % 24);
        match self {
            Preset::Flat => 1.0,
            Preset::BusinessHoursDiurnal => {
                if day >= 5 {
                    0.15
                } else if (8..20).contains(&hour) {
                    1.0
                } else {
                    0.25
                }
            }
            Preset::WeeklyBatch => 0.2 + 0.8 * (h as f64 / (HOURS_PER_WEEK - 1) as f64),
        }
    }
}

/// Inference: demand is GPUs' worth of traffic; replicas scale like KEDA.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inference {
    pub tokens_per_s_per_gpu: u32,
    pub cold_start_s: u32,
    #[serde(default)]
    pub warm_cache_cold_start_s: Option<u32>,
    #[serde(default)]
    pub min_replicas: u32,
    pub max_replicas: u32,
    /// KEDA `threshold`: target load per replica, in % of its capacity.
    #[serde(default = "default_threshold")]
    pub threshold_pct: u32,
    /// KEDA `activationThreshold`, in % of one replica's capacity (0 wakes on any noise).
    #[serde(default = "default_activation")]
    pub activation_threshold_pct: u32,
    /// KEDA `cooldownPeriod`, in seconds.
    #[serde(default = "default_cooldown")]
    pub cooldown_s: u32,
}

fn default_threshold() -> u32 {
    70
}
fn default_activation() -> u32 {
    5
}
fn default_cooldown() -> u32 {
    300
}

impl Inference {
    /// KEDA's desired replicas for `traffic_gpus` of traffic: ⌈traffic ÷ (GPUs per replica ×
    /// threshold)⌉, before min/max replicas (a hair over a whole number is float noise).
    pub fn replicas_for(&self, traffic_gpus: f64, gpus_per_replica: u32) -> u32 {
        let per_replica = f64::from(gpus_per_replica) * f64::from(self.threshold_pct) / 100.0;
        (traffic_gpus / per_replica - 1e-9).ceil().max(0.0) as u32
    }

    /// The replicas KEDA keeps for `traffic_gpus`: [`Inference::replicas_for`] within
    /// min/max replicas.
    pub fn replicas_held(&self, traffic_gpus: f64, gpus_per_replica: u32) -> u32 {
        self.replicas_for(traffic_gpus, gpus_per_replica)
            .clamp(self.min_replicas, self.max_replicas.max(self.min_replicas))
    }

    /// Cold start in minutes: from a warm node-local cache when there is one and it holds the
    /// weights, else from object storage.
    pub fn cold_start_min(&self, cache_warm: bool) -> u32 {
        match self.warm_cache_cold_start_s {
            Some(warm) if cache_warm => warm,
            _ => self.cold_start_s,
        }
        .div_ceil(60)
    }
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; 4] = [
        WorkloadKind::PreTraining,
        WorkloadKind::FineTuning,
        WorkloadKind::Batch,
        WorkloadKind::Inference,
    ];
}

impl Labelled for WorkloadKind {
    fn label(self) -> &'static str {
        match self {
            WorkloadKind::PreTraining => "Pre-training",
            WorkloadKind::FineTuning => "Fine-tuning",
            WorkloadKind::Batch => "Batch inference and evaluation",
            WorkloadKind::Inference => "Online inference",
        }
    }
}

impl Labelled for Preset {
    fn label(self) -> &'static str {
        match self {
            Preset::Flat => "Flat",
            Preset::BusinessHoursDiurnal => "Business hours",
            Preset::WeeklyBatch => "Weekly batch ramp",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Preset::Flat => "The peak all week.",
            Preset::BusinessHoursDiurnal => {
                "The peak 8-20 on weekdays, 25% at night, 15% on weekends."
            }
            Preset::WeeklyBatch => "Ramps from 20% on Monday to the peak on Friday night.",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaPolicy {
    /// ClusterQueues share one cohort (lend and borrow unused quota).
    pub cohort: bool,
    pub queueing: Queueing,
    /// Every ClusterQueue's `preemption.reclaimWithinCohort`.
    pub reclaim_within_cohort: Reclaim,
    /// Every ClusterQueue's `preemption.withinClusterQueue`.
    pub within_cluster_queue: WithinQueue,
    /// Every ClusterQueue's `preemption.borrowWithinCohort` (absent: `Never`).
    #[serde(default)]
    pub borrow_within_cohort: BorrowWithinCohort,
}

impl Default for QuotaPolicy {
    fn default() -> Self {
        Self {
            cohort: true,
            queueing: Queueing::BestEffortFifo,
            reclaim_within_cohort: Reclaim::Any,
            within_cluster_queue: WithinQueue::LowerPriority,
            borrow_within_cohort: BorrowWithinCohort::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UtilisationSource {
    Dcgm,
    Requests,
}

impl Labelled for UtilisationSource {
    fn label(self) -> &'static str {
        match self {
            UtilisationSource::Dcgm => "Measured (DCGM)",
            UtilisationSource::Requests => "Pod requests",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constraints {
    /// Compliance (e.g. PCI-DSS) that needs hardware isolation between tenants.
    #[serde(default)]
    pub hardware_isolation_between_tenants: bool,
    #[serde(default)]
    pub aws_only: bool,
    /// A heterogeneous or on-prem fleet (several vendors or generations).
    #[serde(default)]
    pub heterogeneous: bool,
    /// e.g. "1.33"; DRA needs 1.34 or later.
    pub kubernetes_version: String,
    pub platform_team_size: u32,
    pub platform_engineer_cost_cents_per_year: i64,
    pub runs_own_models: bool,
    /// Software GPU fractions (HAMi gpumem/gpucores) are required.
    #[serde(default)]
    pub needs_software_fractions: bool,
    #[serde(default = "default_source")]
    pub utilisation_measured_by: UtilisationSource,
}

fn default_source() -> UtilisationSource {
    UtilisationSource::Dcgm
}

/// Weights of the decision criteria (0-10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Weights {
    pub arbitration: f64,
    pub granularity: f64,
    pub isolation: f64,
    pub cost_to_maintain: f64,
    pub utilisation: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            arbitration: 1.0,
            granularity: 1.0,
            isolation: 1.0,
            cost_to_maintain: 1.0,
            utilisation: 1.0,
        }
    }
}

impl Scenario {
    pub fn total_gpus(&self) -> u64 {
        self.fleet.iter().map(|a| u64::from(a.count)).sum()
    }

    pub fn accelerator(&self, flavor: &str) -> Option<&Accelerator> {
        self.fleet.iter().find(|a| a.flavor == flavor)
    }

    /// The DRA allocation base needs Kubernetes 1.34 or later.
    pub fn kubernetes_at_least(&self, major: u32, minor: u32) -> bool {
        let mut parts = self
            .constraints
            .kubernetes_version
            .trim_start_matches('v')
            .split('.');
        let a: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let b: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        (a, b) >= (major, minor)
    }

    /// Every problem, each named by its field path.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut bad = |path: String, message: &str| {
            errors.push(FieldError {
                path,
                message: message.to_owned(),
            })
        };
        if self.version != SCENARIO_VERSION {
            bad(
                "version".into(),
                &format!("unsupported version; this build reads version {SCENARIO_VERSION}"),
            );
        }
        self.check_fleet(&mut bad);
        if self.teams.is_empty() {
            bad("teams".into(), "give at least one team");
        }
        // Counted once, so checking uniqueness stays linear in the number of entries.
        let team_names = occurrences(self.teams.iter().map(|t| t.name.as_str()));
        for (t, team) in self.teams.iter().enumerate() {
            self.check_team(t, team, &team_names, &mut bad);
            for (w, work) in team.workloads.iter().enumerate() {
                let p = |f: &str| format!("teams[{t}].workloads[{w}].{f}");
                self.check_workload(work, &p, &mut bad);
                check_inference(work, &p, &mut bad);
            }
        }
        self.check_cost(&mut bad);
        let q = &self.quota;
        if q.borrow_within_cohort.policy != BorrowPolicy::Never
            && (!q.cohort || q.reclaim_within_cohort == Reclaim::Never)
        {
            bad(
                "quota.borrow_within_cohort.policy".into(),
                "needs quota.cohort and a reclaim_within_cohort other than Never (Kueue rejects it otherwise)",
            );
        }
        if !is_version(&self.constraints.kubernetes_version) {
            bad(
                "constraints.kubernetes_version".into(),
                "write it as MAJOR.MINOR, e.g. 1.34",
            );
        }
        if self.constraints.platform_engineer_cost_cents_per_year < 0 {
            bad(
                "constraints.platform_engineer_cost_cents_per_year".into(),
                "must not be negative",
            );
        }
        let w = &self.weights;
        for (name, v) in [
            ("arbitration", w.arbitration),
            ("granularity", w.granularity),
            ("isolation", w.isolation),
            ("cost_to_maintain", w.cost_to_maintain),
            ("utilisation", w.utilisation),
        ] {
            if !(0.0..=10.0).contains(&v) {
                bad(format!("weights.{name}"), "must be between 0 and 10");
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// The fleet's accelerator types: named, unique, known, counted and priced within bounds.
    fn check_fleet(&self, bad: &mut impl FnMut(String, &str)) {
        if self.fleet.is_empty() {
            bad("fleet".into(), "give at least one accelerator type");
        }
        // Counted once, so checking uniqueness stays linear in the number of entries.
        let flavors = occurrences(self.fleet.iter().map(|a| a.flavor.as_str()));
        for (i, a) in self.fleet.iter().enumerate() {
            let p = |f: &str| format!("fleet[{i}].{f}");
            if !is_dns_label(&a.flavor) {
                bad(p("flavor"), DNS_LABEL_RULE);
            }
            if flavors.get(a.flavor.as_str()).copied().unwrap_or(0) > 1 {
                bad(p("flavor"), "flavors must be unique");
            }
            if let Err(unknown) = catalogue::find(&a.gpu_model) {
                bad(p("gpu_model"), &unknown.to_string());
            }
            if a.count == 0 || a.count > 1_000_000 {
                bad(p("count"), "must be between 1 and 1,000,000");
            }
            if a.gpus_per_node == 0 || a.gpus_per_node > 64 {
                bad(p("gpus_per_node"), "must be between 1 and 64");
            }
            if a.price_cents_per_gpu_hour < 0 || a.price_cents_per_gpu_hour > 1_000_000 {
                bad(
                    p("price_cents_per_gpu_hour"),
                    "must be between 0 and 1,000,000",
                );
            }
        }
    }

    /// Team `t`: named and unique, its quota on flavors of the fleet, limits only with a
    /// cohort, a wait target and at least one class.
    fn check_team(
        &self,
        t: usize,
        team: &Team,
        team_names: &std::collections::BTreeMap<&str, usize>,
        bad: &mut impl FnMut(String, &str),
    ) {
        let p = |f: &str| format!("teams[{t}].{f}");
        if !is_dns_label(&team.name) {
            bad(p("name"), DNS_LABEL_RULE);
        }
        if team_names.get(team.name.as_str()).copied().unwrap_or(0) > 1 {
            bad(p("name"), "team names must be unique");
        }
        for (field, map) in [
            ("nominal_gpus", &team.nominal_gpus),
            ("borrowing_limit_gpus", &team.borrowing_limit_gpus),
            ("lending_limit_gpus", &team.lending_limit_gpus),
        ] {
            for flavor in map.keys() {
                if self.accelerator(flavor).is_none() {
                    bad(
                        format!("teams[{t}].{field}.{flavor}"),
                        "no such flavor in fleet",
                    );
                }
            }
        }
        let has_limits =
            !team.borrowing_limit_gpus.is_empty() || !team.lending_limit_gpus.is_empty();
        if !self.quota.cohort && has_limits {
            bad(
                p("borrowing_limit_gpus"),
                "borrowing and lending limits need quota.cohort (Kueue rejects them without one)",
            );
        }
        if team.queue_wait_target_min == 0 || team.queue_wait_target_min > 60 * 24 * 7 {
            bad(
                p("queue_wait_target_min"),
                "must be between 1 and 10,080 minutes (a week)",
            );
        }
        if team.workloads.is_empty() {
            bad(p("workloads"), "give at least one workload class");
        }
    }

    /// One class's own figures (`p` names its fields).
    fn check_workload(
        &self,
        work: &Workload,
        p: &impl Fn(&str) -> String,
        bad: &mut impl FnMut(String, &str),
    ) {
        if work.name.trim().is_empty() {
            bad(p("name"), "must not be empty");
        }
        if self.accelerator(&work.flavor).is_none() {
            bad(p("flavor"), "no such flavor in fleet");
        }
        if work.gpus_per_job == 0 || work.gpus_per_job > 4096 {
            bad(p("gpus_per_job"), "must be between 1 and 4096");
        }
        if let Some(mem) = work.mem_mib_per_job {
            let card = self
                .accelerator(&work.flavor)
                .and_then(Accelerator::model)
                .map(|m| m.mem_mib);
            if work.gpus_per_job > 1 {
                bad(
                    p("mem_mib_per_job"),
                    "a job that spans GPUs holds whole cards; give mem_mib_per_job only for work smaller than one GPU",
                );
            } else if let Some(card) = card.filter(|&card| mem == 0 || mem >= card) {
                bad(
                    p("mem_mib_per_job"),
                    &format!(
                        "must be between 1 and the card's {} MiB; leave it out for whole cards",
                        crate::common::money::thousands(i64::from(card))
                    ),
                );
            }
        }
        if work.job_minutes == 0 || work.job_minutes > 60 * 24 * 30 {
            bad(p("job_minutes"), "must be between 1 and 43,200");
        }
        if work.restart_minutes > 24 * 60 {
            bad(p("restart_minutes"), "must be between 0 and 1,440");
        }
        if work.busy_pct > 100 {
            bad(p("busy_pct"), "is a percentage (0-100)");
        }
        if work.tenants == 0 {
            bad(p("tenants"), "must be at least 1");
        }
        let hourly = work.demand.hourly();
        if hourly.len() != HOURS_PER_WEEK {
            bad(
                p("demand.hourly_gpus"),
                "give exactly 168 hourly values (one week)",
            );
        }
        if hourly
            .iter()
            .any(|v| !v.is_finite() || *v < 0.0 || *v > 1e7)
        {
            bad(p("demand"), "GPUs wanted must be between 0 and 10,000,000");
        }
        if !work.backlog_gpus.is_finite() || !(0.0..=1e7).contains(&work.backlog_gpus) {
            bad(p("backlog_gpus"), "must be between 0 and 10,000,000");
        } else if work.backlog_gpus > 0.0 && work.kind == WorkloadKind::Inference {
            bad(
                p("backlog_gpus"),
                "only batch kinds have a backlog; inference follows its traffic",
            );
        }
    }
}

/// Inference settings: present exactly on inference classes, and within bounds.
fn check_inference(
    work: &Workload,
    p: &impl Fn(&str) -> String,
    bad: &mut impl FnMut(String, &str),
) {
    match (&work.kind, &work.inference) {
        (WorkloadKind::Inference, None) => bad(
            p("inference"),
            "inference needs tokens_per_s_per_gpu, cold_start_s, max_replicas",
        ),
        (WorkloadKind::Inference, Some(inf)) => {
            if inf.max_replicas == 0 || inf.min_replicas > inf.max_replicas {
                bad(
                    p("inference.max_replicas"),
                    "must be at least 1 and at least min_replicas",
                );
            }
            if inf.threshold_pct == 0 || inf.threshold_pct > 100 {
                bad(p("inference.threshold_pct"), "must be between 1 and 100");
            }
            if inf.tokens_per_s_per_gpu == 0 {
                bad(p("inference.tokens_per_s_per_gpu"), "must be positive");
            }
        }
        (_, Some(_)) => bad(
            p("inference"),
            "only inference classes take inference settings",
        ),
        (_, None) => {}
    }
}

impl Scenario {
    /// Batch jobs the week's demand implies: the work running at the start plus the hourly
    /// arrivals (demand ÷ the GPU-hours of one job), as the simulation generates them.
    pub fn estimated_jobs(&self) -> u64 {
        let mut jobs = 0.0;
        for w in self.teams.iter().flat_map(|t| &t.workloads) {
            if w.kind == WorkloadKind::Inference || w.gpus_per_job == 0 || w.job_minutes == 0 {
                continue;
            }
            let hourly = w.demand.hourly();
            let job_gpu_hours = f64::from(w.gpus_per_job) * f64::from(w.job_minutes) / 60.0;
            let initial = hourly.first().copied().unwrap_or(0.0) / f64::from(w.gpus_per_job);
            jobs += initial + hourly.iter().map(|g| g.max(0.0)).sum::<f64>() / job_gpu_hours;
            // The backlog is kept full: its GPUs' worth of jobs, renewed every job length.
            let backlog_jobs = w.backlog_gpus.max(0.0) / f64::from(w.gpus_per_job);
            jobs += backlog_jobs * (1.0 + HOURS_PER_WEEK as f64 * 60.0 / f64::from(w.job_minutes));
        }
        jobs.min(u64::MAX as f64) as u64
    }

    fn check_cost(&self, bad: &mut impl FnMut(String, &str)) {
        if self.fleet.len() > MAX_FLAVORS {
            bad(
                "fleet".into(),
                &format!("at most {MAX_FLAVORS} accelerator types"),
            );
        }
        if self.teams.len() > MAX_TEAMS {
            bad("teams".into(), &format!("at most {MAX_TEAMS} teams"));
        }
        let classes: usize = self.teams.iter().map(|t| t.workloads.len()).sum();
        if classes > MAX_WORKLOADS {
            bad(
                "teams".into(),
                &format!("at most {MAX_WORKLOADS} workload classes in all (has {classes})"),
            );
        }
        let jobs = self.estimated_jobs();
        if jobs > MAX_JOBS {
            bad(
                "teams".into(),
                &format!(
                    "the demand implies about {} batch jobs in the week; at most {}: make jobs larger or longer (gpus_per_job, job_minutes) or lower the demand",
                    crate::common::money::thousands(jobs.min(i64::MAX as u64) as i64),
                    crate::common::money::thousands(MAX_JOBS as i64)
                ),
            );
        }
        let replicas: u64 = self
            .teams
            .iter()
            .flat_map(|t| &t.workloads)
            .filter_map(|w| w.inference.as_ref())
            .map(|i| u64::from(i.max_replicas))
            .sum();
        if replicas > MAX_REPLICAS {
            bad(
                "teams".into(),
                &format!("at most {MAX_REPLICAS} inference replicas (max_replicas) in all"),
            );
        }
    }
}

fn occurrences<'a>(
    names: impl Iterator<Item = &'a str>,
) -> std::collections::BTreeMap<&'a str, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for name in names {
        *counts.entry(name).or_insert(0) += 1;
    }
    counts
}

fn is_version(s: &str) -> bool {
    let mut parts = s.trim_start_matches('v').split('.');
    parts.next().is_some_and(|a| a.parse::<u32>().is_ok())
        && parts.next().is_some_and(|b| b.parse::<u32>().is_ok())
}

/// Starting points for a new scenario, and the defaults of each entry a person adds.
impl Scenario {
    /// `fleet` with one team holding it all as nominal quota and one fine-tuning class, so
    /// that it evaluates at once; a person renames and adds from there.
    pub fn starting_from(name: &str, fleet: Vec<Accelerator>) -> Scenario {
        let mut team = Team::new("team-a");
        if let Some(first) = fleet.first() {
            for acc in &fleet {
                team.nominal_gpus.insert(acc.flavor.clone(), acc.count);
            }
            let mut work = Workload::new("tuning", WorkloadKind::FineTuning, &first.flavor);
            work.demand = Demand::Preset {
                preset: Preset::BusinessHoursDiurnal,
                peak_gpus: f64::from(first.count) / 2.0,
            };
            team.workloads.push(work);
        }
        Scenario {
            version: SCENARIO_VERSION,
            name: name.to_owned(),
            seed: default_seed(),
            fleet,
            teams: vec![team],
            quota: QuotaPolicy::default(),
            constraints: Constraints {
                hardware_isolation_between_tenants: false,
                aws_only: false,
                heterogeneous: false,
                kubernetes_version: "1.34".to_owned(),
                platform_team_size: 2,
                platform_engineer_cost_cents_per_year: 20_000_000,
                runs_own_models: true,
                needs_software_fractions: false,
                utilisation_measured_by: UtilisationSource::Dcgm,
            },
            weights: Weights::default(),
        }
    }

    /// One node of eight H100s at a round $4.00 a GPU-hour, to be replaced with your own.
    pub fn blank() -> Scenario {
        let h100 = Accelerator::new("h100", "H100-SXM5-80GB", 400);
        Self::starting_from("new scenario", vec![h100])
    }

    /// A flavor name not yet in the fleet, from `stem`.
    pub fn free_flavor(&self, stem: &str) -> String {
        free_name(stem, |n| self.accelerator(n).is_some())
    }

    /// Renames flavor `old` to `new` everywhere: the fleet, every team's quota and limits on
    /// it, and every class that runs on it. A name another accelerator type has is refused
    /// (merging the two would lose one's quotas).
    pub fn rename_flavor(&mut self, old: &str, new: &str) -> Result<(), String> {
        if old == new {
            return Ok(());
        }
        if self.accelerator(new).is_some() {
            return Err(format!("another accelerator type is called {new}"));
        }
        for acc in self.fleet.iter_mut().filter(|a| a.flavor == old) {
            new.clone_into(&mut acc.flavor);
        }
        for team in &mut self.teams {
            for map in [
                &mut team.nominal_gpus,
                &mut team.borrowing_limit_gpus,
                &mut team.lending_limit_gpus,
            ] {
                if let Some(v) = map.remove(old) {
                    map.insert(new.to_owned(), v);
                }
            }
            for w in team.workloads.iter_mut().filter(|w| w.flavor == old) {
                new.clone_into(&mut w.flavor);
            }
        }
        Ok(())
    }

    /// Removes the accelerator type at `index` and every quota on it. Classes that ran on it
    /// stay, and validation names them, so no work disappears unseen.
    pub fn remove_flavor(&mut self, index: usize) {
        if index >= self.fleet.len() {
            return;
        }
        let gone = self.fleet.remove(index).flavor;
        for team in &mut self.teams {
            team.nominal_gpus.remove(&gone);
            team.borrowing_limit_gpus.remove(&gone);
            team.lending_limit_gpus.remove(&gone);
        }
    }

    /// A team name not yet taken, from `stem`.
    pub fn free_team(&self, stem: &str) -> String {
        free_name(stem, |n| self.teams.iter().any(|t| t.name == n))
    }
}

impl Accelerator {
    /// One node of eight cards.
    pub fn new(flavor: &str, gpu_model: &str, price_cents_per_gpu_hour: i64) -> Accelerator {
        Accelerator {
            flavor: flavor.to_owned(),
            gpu_model: gpu_model.to_owned(),
            count: 8,
            gpus_per_node: 8,
            price_cents_per_gpu_hour,
        }
    }
}

impl Team {
    /// A team with no quota and no work yet.
    pub fn new(name: &str) -> Team {
        Team {
            name: name.to_owned(),
            nominal_gpus: Default::default(),
            borrowing_limit_gpus: Default::default(),
            lending_limit_gpus: Default::default(),
            queue_wait_target_min: DEFAULT_QUEUE_WAIT_TARGET_MIN,
            workloads: Vec::new(),
        }
    }
}

impl Workload {
    /// A class with the format's defaults: a flat demand of one job's GPUs; inference gets
    /// KEDA's usual settings and the top priority, training is preemptible and checkpoints.
    pub fn new(name: &str, kind: WorkloadKind, flavor: &str) -> Workload {
        let inference = kind == WorkloadKind::Inference;
        Workload {
            name: name.to_owned(),
            kind,
            flavor: flavor.to_owned(),
            demand: Demand::Preset {
                preset: if inference {
                    Preset::BusinessHoursDiurnal
                } else {
                    Preset::Flat
                },
                peak_gpus: 1.0,
            },
            gpus_per_job: 1,
            mem_mib_per_job: None,
            throughput: false,
            job_minutes: default_job_minutes(),
            checkpoint_minutes: if inference { 0 } else { 30 },
            restart_minutes: default_restart_minutes(),
            priority: if inference {
                crate::kueue::INFERENCE_PRIORITY
            } else {
                crate::kueue::TRAINING_PRIORITY
            },
            preemptible: !inference,
            busy_pct: default_busy_pct(),
            tenants: one(),
            slo: inference,
            backlog_gpus: 0.0,
            inference: inference.then(Inference::typical),
            current_isolation: None,
        }
    }
}

impl Inference {
    /// A replica per GPU serving 2,000 tokens/s, two minutes from object storage, and KEDA's
    /// defaults for the rest.
    pub fn typical() -> Inference {
        Inference {
            tokens_per_s_per_gpu: 2_000,
            cold_start_s: 120,
            warm_cache_cold_start_s: None,
            min_replicas: 1,
            max_replicas: 8,
            threshold_pct: default_threshold(),
            activation_threshold_pct: default_activation(),
            cooldown_s: default_cooldown(),
        }
    }
}

/// The benchmark scenario: 10,000 GPUs in 4 flavors, 50 teams, about 100,000 batch jobs in a
/// week, plus inference on every team. Shared by `gpufleet plan bench` and the criterion bench.
pub fn bench_scenario() -> Scenario {
    // Four models, so four pools: flavors of one model would be one pool to Kueue.
    let flavors = [
        ("f0", 4_000u32, "H100-SXM5-80GB"),
        ("f1", 3_000, "H200-SXM-141GB"),
        ("f2", 2_000, "A100-SXM4-80GB"),
        ("f3", 1_000, "H100-NVL-94GB"),
    ];
    let fleet = flavors
        .iter()
        .map(|(name, count, model)| Accelerator {
            flavor: (*name).to_owned(),
            gpu_model: (*model).to_owned(),
            count: *count,
            gpus_per_node: 8,
            price_cents_per_gpu_hour: 400,
        })
        .collect::<Vec<_>>();
    let teams = (0..50)
        .map(|t| {
            let (flavor, count, _) = flavors[t % 4];
            // The flavor's cards shared among the teams on it.
            bench_team(t, flavor, count / (50 / 4 + u32::from(t % 4 < 50 % 4)))
        })
        .collect();
    let mut s = Scenario::starting_from("benchmark: 10,000 GPUs, 50 teams, 4 flavors", fleet);
    s.teams = teams;
    s.constraints.platform_team_size = 10;
    s.constraints.platform_engineer_cost_cents_per_year = 25_000_000;
    s
}

/// Benchmark team `t` on `flavor` with `share` of its cards: 90% of them its nominal quota,
/// pre-training (8-GPU, 4-hour jobs) and fine-tuning (2-GPU, 2-hour) batch work peaking at 60%
/// and 30% of them, and a model served on up to all of them, a quarter at its peak.
fn bench_team(t: usize, flavor: &str, share: u32) -> Team {
    let nominal = [(flavor.to_owned(), share * 9 / 10)].into_iter().collect();
    let batch = |name: &str, kind, peak: f64, gpus, minutes| Workload {
        name: name.to_owned(),
        kind,
        flavor: flavor.to_owned(),
        demand: Demand::Preset {
            preset: Preset::WeeklyBatch,
            peak_gpus: peak,
        },
        gpus_per_job: gpus,
        job_minutes: minutes,
        checkpoint_minutes: 30,
        restart_minutes: default_restart_minutes(),
        priority: 10,
        preemptible: true,
        busy_pct: 90,
        tenants: 1,
        slo: false,
        inference: None,
        backlog_gpus: 0.0,
        mem_mib_per_job: None,
        throughput: false,
        current_isolation: None,
    };
    let serving = Workload {
        name: "serve".to_owned(),
        kind: WorkloadKind::Inference,
        demand: Demand::Preset {
            preset: Preset::BusinessHoursDiurnal,
            peak_gpus: f64::from(share) * 0.25,
        },
        gpus_per_job: 1,
        priority: 1000,
        preemptible: false,
        inference: Some(Inference {
            tokens_per_s_per_gpu: 2000,
            cold_start_s: 120,
            warm_cache_cold_start_s: Some(20),
            min_replicas: 1,
            max_replicas: share,
            threshold_pct: 70,
            activation_threshold_pct: 5,
            cooldown_s: 300,
        }),
        ..batch("serve", WorkloadKind::Inference, 0.0, 1, 60)
    };
    Team {
        name: format!("team-{t:02}"),
        nominal_gpus: nominal,
        borrowing_limit_gpus: Default::default(),
        lending_limit_gpus: Default::default(),
        queue_wait_target_min: DEFAULT_QUEUE_WAIT_TARGET_MIN,
        workloads: vec![
            batch(
                "train",
                WorkloadKind::PreTraining,
                f64::from(share) * 0.6,
                8,
                240,
            ),
            batch(
                "tune",
                WorkloadKind::FineTuning,
                f64::from(share) * 0.3,
                2,
                120,
            ),
            serving,
        ],
    }
}

/// The inventory as a planning scenario's fleet: one flavor per pool with nodes (its name
/// made a DNS label, unique), its model's price.
pub fn inventory_fleet(inventory: &Fleet) -> Vec<Accelerator> {
    let mut fleet: Vec<Accelerator> = Vec::new();
    for pool in inventory.pools.iter().filter(|p| p.gpus() > 0) {
        let stem = dns_label_from(&pool.name).unwrap_or_else(|| "pool".to_owned());
        let flavor = free_name(&stem, |name| fleet.iter().any(|a| a.flavor == name));
        let price = inventory
            .models
            .iter()
            .find(|m| m.name == pool.gpu_model)
            .map_or(0, |m| m.price_cents_per_gpu_hour);
        fleet.push(Accelerator {
            flavor,
            gpu_model: pool.gpu_model.clone(),
            count: u32::try_from(pool.gpus()).unwrap_or(u32::MAX),
            gpus_per_node: u32::try_from(pool.gpus_per_node).unwrap_or(0),
            price_cents_per_gpu_hour: price,
        });
    }
    fleet
}
