//! The isolation plan (whole GPU, MIG, MPS, time-slicing or HAMi fractions per workload
//! class, with the reasons), the anti-pattern warnings, and where spot capacity fits.
//!
//! Invariants: never time-slicing or MPS between distinct business tenants; MIG only on GPUs
//! that have it; only HAMi fractions on non-NVIDIA accelerators.

use serde::{Deserialize, Serialize};

use crate::{
    common::label::Labelled,
    fleet::{
        catalogue::{HamiResources, Vendor},
        sharing::Mechanism,
    },
    kueue::Reclaim,
    packing::mig::{MigPlan, MigRequest, ReplicaGroup},
    planning::scenario::{
        Accelerator, Inference, Scenario, Team, UtilisationSource, Workload, WorkloadKind,
    },
    planning::terms::Architecture,
};

/// How pods get their devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocationBase {
    /// Dynamic Resource Allocation, GA from Kubernetes 1.34.
    Dra,
    DevicePlugin,
}

/// DRA is generally available from this Kubernetes version.
pub const DRA_FROM: (u32, u32) = (1, 34);

impl Labelled for AllocationBase {
    fn label(self) -> &'static str {
        match self {
            AllocationBase::Dra => "DRA",
            AllocationBase::DevicePlugin => "Device plugin",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassIsolation {
    pub team: String,
    pub workload: String,
    pub mechanism: Mechanism,
    /// DRA on Kubernetes 1.34+, else the device plugin.
    pub allocation_base: AllocationBase,
    pub reasons: Vec<String>,
    /// The device resources each of its containers asks for ([`class_limits`]), in order.
    #[serde(default)]
    pub limits: Vec<(String, i64)>,
    /// The pods it holds at its peak ([`peak_replicas`]).
    #[serde(default)]
    pub peak_pods: u32,
    /// How many of its jobs (or replicas) share one card under its mechanism
    /// ([`jobs_per_card`]); 1 for whole cards. The week packs them so.
    #[serde(default = "one")]
    pub jobs_per_card: u32,
}

fn one() -> u32 {
    1
}

/// An anti-pattern found in the scenario. The JSON value is stable; clients may match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningCode {
    QuotaAboveCapacity,
    PreemptionWithoutCheckpoint,
    #[serde(rename = "rework_over_15_min")]
    ReworkOver15Min,
    KedaCooldownInSeconds,
    KedaActivationZero,
    TimeSlicingAcrossTenants,
    MigWithoutMig,
    UtilisationFromRequests,
    InferenceOnBorrowedQuota,
    OutsideNominalQuota,
}

impl Labelled for WarningCode {
    fn label(self) -> &'static str {
        match self {
            WarningCode::QuotaAboveCapacity => "Quota above the cards",
            WarningCode::PreemptionWithoutCheckpoint => "Preemption without checkpoints",
            WarningCode::ReworkOver15Min => "Over 15 minutes of rework per preemption",
            WarningCode::KedaCooldownInSeconds => "KEDA cooldown in seconds",
            WarningCode::KedaActivationZero => "KEDA activation threshold 0",
            WarningCode::TimeSlicingAcrossTenants => "Time-slicing across tenants",
            WarningCode::MigWithoutMig => "MIG on a GPU without MIG",
            WarningCode::UtilisationFromRequests => "Utilisation from requests",
            WarningCode::InferenceOnBorrowedQuota => "Inference on borrowed quota",
            WarningCode::OutsideNominalQuota => "Capacity outside every quota",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    pub code: WarningCode,
    /// Whom it is about, in words: `team/workload`, `flavor h100`, or the whole fleet.
    pub subject: String,
    pub path: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpotAdvice {
    pub team: String,
    pub workload: String,
    pub fits_spot: bool,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IsolationPlan {
    pub classes: Vec<ClassIsolation>,
    pub warnings: Vec<Warning>,
    pub spot: Vec<SpotAdvice>,
}

/// Classes that get the same mechanism for the same reasons, read once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IsolationGroup {
    pub mechanism: Mechanism,
    pub allocation_base: AllocationBase,
    pub reasons: Vec<String>,
    /// `team/workload`, in the plan's order.
    pub classes: Vec<String>,
    /// Each class's jobs that share a card ([`ClassIsolation::jobs_per_card`]), in the order of
    /// `classes`.
    pub jobs_per_card: Vec<u32>,
}

impl IsolationGroup {
    /// The fewest and the most of its classes' jobs that share a card.
    pub fn jobs_per_card_range(&self) -> (u32, u32) {
        let fewest = self.jobs_per_card.iter().copied().min().unwrap_or(1);
        let most = self.jobs_per_card.iter().copied().max().unwrap_or(1);
        (fewest, most)
    }
}

impl IsolationPlan {
    /// The plan for one class.
    pub fn class(&self, team: &str, workload: &str) -> Option<&ClassIsolation> {
        self.classes
            .iter()
            .find(|c| c.team == team && c.workload == workload)
    }

    /// The classes grouped by mechanism, allocation base and reasons; groups in the order of
    /// their first class, so the plan reads as it was written.
    pub fn groups(&self) -> Vec<IsolationGroup> {
        let mut groups: Vec<IsolationGroup> = Vec::new();
        for c in &self.classes {
            let name = format!("{}/{}", c.team, c.workload);
            let same = groups.iter_mut().find(|g| {
                g.mechanism == c.mechanism
                    && g.allocation_base == c.allocation_base
                    && g.reasons == c.reasons
            });
            match same {
                Some(group) => {
                    group.classes.push(name);
                    group.jobs_per_card.push(c.jobs_per_card);
                }
                None => groups.push(IsolationGroup {
                    mechanism: c.mechanism,
                    allocation_base: c.allocation_base,
                    reasons: c.reasons.clone(),
                    classes: vec![name],
                    jobs_per_card: vec![c.jobs_per_card],
                }),
            }
        }
        groups
    }
}

/// One flavor's MIG classes laid out on its GPUs at their peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlavorMig {
    pub flavor: String,
    /// The layout, or why there is none (a profile too small, too many replicas to lay out).
    pub layout: Result<MigPlan, String>,
}

/// The MIG layout of each flavor whose classes the plan puts on MIG: one replica group per
/// class (`team/workload`), each replica the memory one job needs, as many as the class holds
/// at its peak (inference: KEDA's replicas at the peak traffic; batch: one job per GPU of peak
/// demand), laid out by `packing::mig`.
pub fn mig_layouts(scenario: &Scenario, plan: &IsolationPlan) -> Vec<FlavorMig> {
    let mut by_flavor: Vec<(String, Vec<ReplicaGroup>)> = Vec::new();
    for (team, w) in scenario
        .teams
        .iter()
        .flat_map(|t| t.workloads.iter().map(move |w| (t, w)))
    {
        let on_mig = plan
            .classes
            .iter()
            .any(|c| c.team == team.name && c.workload == w.name && c.mechanism == Mechanism::Mig);
        let Some(mem_mib) = w.mem_mib_per_job.filter(|_| on_mig) else {
            continue;
        };
        let group = ReplicaGroup {
            name: format!("{}/{}", team.name, w.name),
            mem_mib,
            replicas: peak_replicas(w),
        };
        match by_flavor.iter_mut().find(|(f, _)| *f == w.flavor) {
            Some((_, groups)) => groups.push(group),
            None => by_flavor.push((w.flavor.clone(), vec![group])),
        }
    }
    by_flavor
        .into_iter()
        .filter_map(|(flavor, groups)| {
            let model = scenario.accelerator(&flavor)?.gpu_model.clone();
            let request = MigRequest {
                gpu_model: model,
                groups,
            };
            let layout = request.plan().map_err(|errors| {
                errors
                    .into_iter()
                    .map(|e| e.message)
                    .collect::<Vec<_>>()
                    .join("; ")
            });
            Some(FlavorMig { flavor, layout })
        })
        .collect()
}

/// The pods a class holds at its peak: KEDA's replicas at the peak traffic for inference, one
/// job per GPU of peak demand for batch.
pub fn peak_replicas(w: &Workload) -> u32 {
    let peak = w.demand.hourly().into_iter().fold(0.0, f64::max);
    match &w.inference {
        Some(inf) => inf.replicas_held(peak, w.gpus_per_job),
        None => (peak - 1e-9).ceil().max(0.0) as u32,
    }
}

/// The device resources one class's container asks for in `resources.limits`, in order, and a
/// comment where the plan cannot hold what the sizing assumed. By its mechanism:
/// - whole cards (and MPS, time-slicing): the model's resource, one per GPU of a job; on a
///   flavor that also runs HAMi classes each card also states all its memory and cores, so
///   Kueue counts it against the same totals as the fractions;
/// - MIG: one `nvidia.com/mig-<profile>` of the smallest profile that holds the job;
/// - HAMi fractions ([`HamiResources`]' names): one vGPU, the memory one job needs and the
///   card's compute shared as the sizing packs it (100 ÷ jobs per card). The Ascend 910B's hard
///   slicing cuts a card into 1/4 or 1/2 (vNPU templates) and aligns the memory asked up to the
///   nearest; compute follows the memory share, so no core limit is set, and a job over half a
///   card gets a whole NPU. Intel has no HAMi: whole cards.
pub fn class_limits(
    scenario: &Scenario,
    plan: &IsolationPlan,
    team: &str,
    w: &Workload,
) -> (Vec<(String, i64)>, Option<String>) {
    let name = format!("{team}/{}", w.name);
    let mechanism = mechanism_of(plan, team, &w.name);
    let acc = scenario.accelerator(&w.flavor);
    let model = acc.and_then(Accelerator::model);
    let hami = model.and_then(HamiResources::of);
    let whole = |note: Option<String>| {
        let resource = acc.map_or("nvidia.com/gpu", Accelerator::resource);
        let gpus = i64::from(w.gpus_per_job);
        let mut limits = vec![(resource.to_owned(), gpus)];
        if let (Some(hami), Some(card)) = (&hami, model)
            && on_hami_flavor(scenario, plan, &w.flavor)
        {
            limits.push((hami.memory.clone(), i64::from(card.mem_mib)));
            limits.extend(hami.cores.iter().map(|c| (c.clone(), 100)));
        }
        (limits, note)
    };
    match (mechanism, w.mem_mib_per_job, model) {
        (Mechanism::Mig, Some(job_mib), _) => match mig_profile(acc, job_mib) {
            Some(profile) => (vec![(format!("nvidia.com/mig-{profile}"), 1)], None),
            None => whole(None),
        },
        (Mechanism::HamiFractions, Some(job_mib), Some(card)) => {
            let Some(hami) = hami else {
                return whole(Some(format!(
                    "# {name} on {}: HAMi does not share {} accelerators; give each job a whole card.\n",
                    w.flavor,
                    card.vendor.label()
                )));
            };
            let Some(cores) = &hami.cores else {
                let per_card = crate::planning::sizing::jobs_per_card(
                    card.mem_mib,
                    job_mib,
                    f64::from(w.busy_pct) / 100.0,
                );
                return vnpu(&name, &hami, card.mem_mib, job_mib, per_card);
            };
            let per_card = jobs_per_card(scenario, mechanism, w);
            (
                vec![
                    (hami.count.clone(), 1),
                    (hami.memory.clone(), i64::from(job_mib)),
                    (cores.clone(), i64::from(100 / per_card.max(1))),
                ],
                None,
            )
        }
        _ => whole(None),
    }
}

/// An Ascend job's vNPU: the smallest template (a quarter or a half card) that holds it, or a
/// whole NPU.
fn vnpu(
    name: &str,
    hami: &HamiResources,
    card_mib: u32,
    job_mib: u32,
    per_card: u32,
) -> (Vec<(String, i64)>, Option<String>) {
    match vnpu_parts(card_mib, job_mib) {
        Some(parts) => {
            let mib = card_mib / parts;
            (
            vec![(hami.count.clone(), 1), (hami.memory.clone(), i64::from(mib))],
            (per_card > parts).then(|| format!(
                "# {name}: {job_mib} MiB aligns up to the 1/{parts} vNPU template ({mib} MiB): {parts} jobs per card, not the {per_card} the sizing packs.\n"
            )),
            )
        }
        None => (
            vec![(hami.count.clone(), 1)],
            Some(format!(
                "# {name}: {job_mib} MiB is more than half a card, the largest vNPU template: a whole NPU each.\n"
            )),
        ),
    }
}

/// The Ascend vNPU template that holds `job_mib`: a card cut in 4 or in 2 (the smallest that
/// holds it); `None` past half a card.
fn vnpu_parts(card_mib: u32, job_mib: u32) -> Option<u32> {
    [4, 2].into_iter().find(|parts| card_mib / parts >= job_mib)
}

/// How many of `w`'s jobs (or replicas) one card holds under `mechanism`: as many as the sizing
/// packs ([`crate::planning::sizing::jobs_per_card`]: by memory, and no more than their busy
/// time allows), within what the mechanism offers a card: MIG the instances of the job's
/// profile (`max_instances`, e.g. seven `1g.10gb` on an H100); HAMi its vGPUs per card
/// (`devicePlugin.deviceSplitCount`, 10 by default) or, on the 910B, its vNPU template (a
/// quarter or half card); MPS and time-slicing the device plugin's replicas, set to what the
/// sizing packs. 1 for whole cards, a job of several GPUs, or one as large as a card.
pub fn jobs_per_card(scenario: &Scenario, mechanism: Mechanism, w: &Workload) -> u32 {
    let acc = scenario.accelerator(&w.flavor);
    let (Some(card), Some(job_mib)) = (acc.and_then(Accelerator::model), w.mem_mib_per_job) else {
        return 1;
    };
    if w.gpus_per_job != 1 || job_mib >= card.mem_mib {
        return 1;
    }
    let packed = crate::planning::sizing::jobs_per_card(
        card.mem_mib,
        job_mib,
        f64::from(w.busy_pct) / 100.0,
    );
    let offered = match mechanism {
        Mechanism::WholeGpu => 1,
        Mechanism::Mig => card.mig.as_ref().map_or(1, |geometry| {
            let profile = mig_profile(acc, job_mib);
            geometry
                .profiles
                .iter()
                .find(|p| Some(p.name.as_str()) == profile)
                .map_or(1, |p| u32::from(p.max_instances))
        }),
        Mechanism::HamiFractions => match HamiResources::of(card) {
            Some(hami) if hami.cores.is_some() => u32::try_from(hami.per_card).unwrap_or(1),
            Some(_) => vnpu_parts(card.mem_mib, job_mib).unwrap_or(1),
            None => 1,
        },
        Mechanism::Mps | Mechanism::TimeSlicing => packed,
    };
    packed.min(offered).max(1)
}

/// The class's mechanism in the plan; whole cards for a class the plan does not name.
pub fn mechanism_of(plan: &IsolationPlan, team: &str, workload: &str) -> Mechanism {
    plan.class(team, workload)
        .map_or(Mechanism::WholeGpu, |c| c.mechanism)
}

/// Whether any class of the scenario runs on `flavor` by `mechanism`.
pub fn flavor_runs(
    scenario: &Scenario,
    plan: &IsolationPlan,
    flavor: &str,
    mechanism: Mechanism,
) -> bool {
    classes_on(scenario, plan, flavor).any(|(_, _, c)| c.mechanism == mechanism)
}

fn on_hami_flavor(scenario: &Scenario, plan: &IsolationPlan, flavor: &str) -> bool {
    flavor_runs(scenario, plan, flavor, Mechanism::HamiFractions)
}

/// The classes on `flavor` (team name, workload, its plan): the plan lists them in the
/// scenario's order, so one pass pairs them (a pair that does not match, from a plan of
/// another scenario, is left out).
pub fn classes_on<'a>(
    scenario: &'a Scenario,
    plan: &'a IsolationPlan,
    flavor: &'a str,
) -> impl Iterator<Item = (&'a str, &'a Workload, &'a ClassIsolation)> {
    scenario
        .teams
        .iter()
        .flat_map(|t| t.workloads.iter().map(move |w| (t.name.as_str(), w)))
        .zip(&plan.classes)
        .filter(move |((team, w), c)| w.flavor == flavor && c.team == *team && c.workload == w.name)
        .map(|((team, w), c)| (team, w, c))
}

/// What the containers of the classes on a flavor with HAMi classes set in `resources.limits`
/// ([`class_limits`]): YAML, one entry per class; `None` when no class is on HAMi.
pub fn hami_limits(scenario: &Scenario, plan: &IsolationPlan) -> Option<String> {
    let mut yaml = String::from(
        "# HAMi fractions: the resources.limits of each container of these classes.\n",
    );
    let mut any = false;
    for team in &scenario.teams {
        for w in &team.workloads {
            let hami = mechanism_of(plan, &team.name, &w.name) == Mechanism::HamiFractions;
            if w.mem_mib_per_job.is_none() || !(hami || on_hami_flavor(scenario, plan, &w.flavor)) {
                continue;
            }
            let (limits, note) = class_limits(scenario, plan, &team.name, w);
            any |= hami;
            yaml.push_str(&note.unwrap_or_default());
            yaml.push_str(&format!(
                "\"{}/{}\":\n  flavor: \"{}\"\n  limits:\n",
                team.name, w.name, w.flavor
            ));
            for (resource, amount) in limits {
                yaml.push_str(&format!("    {resource}: {amount}\n"));
            }
        }
    }
    any.then_some(yaml)
}

/// The plan for each class under `architecture`: managed governance (C) offers fractions
/// through MIG only, so there classes that would share a card in software get a MIG slice or
/// whole cards, and the reason says so.
pub fn plan(scenario: &Scenario, architecture: Architecture) -> IsolationPlan {
    let dra = scenario.kubernetes_at_least(DRA_FROM.0, DRA_FROM.1);
    let managed = architecture == Architecture::C;
    let mut classes = Vec::new();
    let mut spot = Vec::new();
    for team in &scenario.teams {
        for w in &team.workloads {
            let (mechanism, reasons) = choose(scenario, w, managed);
            classes.push(ClassIsolation {
                team: team.name.clone(),
                workload: w.name.clone(),
                mechanism,
                allocation_base: if dra {
                    AllocationBase::Dra
                } else {
                    AllocationBase::DevicePlugin
                },
                reasons,
                limits: Vec::new(),
                peak_pods: peak_replicas(w),
                jobs_per_card: jobs_per_card(scenario, mechanism, w),
            });
            let (fits_spot, reason) = spot_fit(w);
            spot.push(SpotAdvice {
                team: team.name.clone(),
                workload: w.name.clone(),
                fits_spot,
                reason,
            });
        }
    }
    if dra {
        for c in &mut classes {
            c.reasons.push("Kubernetes 1.34+: allocate through DRA (topology-aware); fractioning stays a separate choice.".to_owned());
        }
    }
    let mut plan = IsolationPlan {
        classes,
        warnings: warnings(scenario),
        spot,
    };
    // What each class's pods ask for follows from every class's mechanism (a whole-card class
    // on a flavor with HAMi classes states its memory and cores too).
    let workloads = scenario
        .teams
        .iter()
        .flat_map(|t| t.workloads.iter().map(move |w| (t, w)));
    let limits: Vec<_> = workloads
        .map(|(t, w)| class_limits(scenario, &plan, &t.name, w).0)
        .collect();
    for (c, l) in plan.classes.iter_mut().zip(limits) {
        c.limits = l;
    }
    plan
}

/// The first class (`team/workload`) that can only share its cards in software: work smaller
/// than a GPU on an accelerator without MIG, where HAMi, MPS or time-slicing is the only way to
/// pack it. Such a class rules out managed governance (C).
pub fn needs_software_sharing(scenario: &Scenario) -> Option<String> {
    scenario.teams.iter().find_map(|team| {
        team.workloads.iter().find_map(|w| {
            let (mechanism, _) = choose(scenario, w, false);
            let has_mig = scenario
                .accelerator(&w.flavor)
                .is_some_and(Accelerator::has_mig);
            (mechanism.is_software() && !has_mig).then(|| {
                format!(
                    "{}/{} ({}, {} on a GPU without MIG)",
                    team.name,
                    w.name,
                    w.flavor,
                    mechanism.label()
                )
            })
        })
    })
}

/// The smallest plain MIG profile of the class's GPU that holds `mem_mib`.
pub fn mig_profile(acc: Option<&Accelerator>, mem_mib: u32) -> Option<&'static str> {
    let geometry = acc?.model()?.mig.as_ref()?;
    geometry
        .profiles
        .iter()
        .filter(|p| p.is_plain() && p.mem_mib >= mem_mib)
        .min_by_key(|p| (p.mem_mib, p.compute_slices))
        .map(|p| p.name.as_str())
}

fn choose(scenario: &Scenario, w: &Workload, managed: bool) -> (Mechanism, Vec<String>) {
    let acc = scenario.accelerator(&w.flavor);
    let nvidia = acc.is_none_or(|a| a.vendor() == Vendor::Nvidia);
    let card_mib = acc.and_then(Accelerator::model).map(|m| m.mem_mib);
    let mem = match smaller_than_a_card(w, card_mib) {
        Ok(mem) => mem,
        Err(why) => return (Mechanism::WholeGpu, vec![why]),
    };
    let mig = mig_profile(acc, mem);
    let mig_or_whole = |reasons: &mut Vec<String>| match mig {
        Some(profile) => {
            reasons.push(format!(
                "{} MiB per job fits MIG profile {profile}.",
                crate::common::money::thousands(i64::from(mem))
            ));
            Mechanism::Mig
        }
        None => {
            reasons.push(
                "This GPU has no MIG: whole cards give the hardware boundary instead.".to_owned(),
            );
            Mechanism::WholeGpu
        }
    };
    let compliance = scenario.constraints.hardware_isolation_between_tenants && w.tenants > 1;
    let mut reasons = Vec::new();
    let mechanism = by_kind(w, compliance, &mut reasons, mig_or_whole);
    if !nvidia && (mechanism.is_software() || mechanism == Mechanism::Mig) {
        reasons.push(
            "Not an NVIDIA accelerator: HAMi is the sharing layer that speaks to it.".to_owned(),
        );
        return (Mechanism::HamiFractions, reasons);
    }
    if managed && mechanism.is_software() {
        reasons.push(format!(
            "Managed governance (C) offers fractions through MIG only, not {}:",
            mechanism.label()
        ));
        let fallback = mig_or_whole(&mut reasons);
        return (fallback, reasons);
    }
    (mechanism, reasons)
}

/// A class's memory per job when it is smaller than one card, else why it takes whole cards.
fn smaller_than_a_card(w: &Workload, card_mib: Option<u32>) -> Result<u32, String> {
    if w.kind == WorkloadKind::PreTraining {
        return Err(
            "Pre-training wants whole cards (and whole nodes): maximum isolation and bandwidth."
                .to_owned(),
        );
    }
    if w.gpus_per_job > 1 {
        return Err(format!(
            "Each {} spans {} GPUs: whole cards; MIG and fractions are for work smaller than one GPU.",
            if w.kind == WorkloadKind::Inference {
                "replica"
            } else {
                "job"
            },
            w.gpus_per_job
        ));
    }
    (w.mem_mib_per_job)
        .filter(|&m| card_mib.is_none_or(|card| m < card))
        .ok_or_else(|| "Each job needs a whole card (no mem_mib_per_job below the card's memory): MIG and fractions are for work smaller than one GPU.".to_owned())
}

/// The mechanism for sub-GPU work by its kind, tenants and SLO (MIG or whole cards where
/// hardware isolation is needed, through `mig_or_whole`), its reason pushed to `reasons`.
fn by_kind(
    w: &Workload,
    compliance: bool,
    reasons: &mut Vec<String>,
    mig_or_whole: impl Fn(&mut Vec<String>) -> Mechanism,
) -> Mechanism {
    match w.kind {
        _ if compliance => {
            reasons.push("Compliance needs hardware isolation between tenants: MIG is the only hardware-partitioned option an auditor accepts.".to_owned());
            mig_or_whole(reasons)
        }
        WorkloadKind::Inference if w.tenants > 1 && w.slo => {
            reasons.push("Multi-tenant inference with an SLO: MIG gives each tenant dedicated memory, compute and bandwidth.".to_owned());
            mig_or_whole(reasons)
        }
        WorkloadKind::Inference | WorkloadKind::Batch | WorkloadKind::FineTuning
            if w.tenants > 1 =>
        {
            reasons.push("Several business tenants: software limits per pod (HAMi); never time-slicing or MPS across tenants.".to_owned());
            Mechanism::HamiFractions
        }
        WorkloadKind::Inference => {
            reasons.push(
                "Trusted workloads of one team: MPS runs them concurrently for throughput."
                    .to_owned(),
            );
            Mechanism::Mps
        }
        WorkloadKind::FineTuning => {
            reasons.push("LoRA fine-tuning smaller than a card: HAMi fractions (gpumem/gpucores) pack several runs per card with memory limits.".to_owned());
            Mechanism::HamiFractions
        }
        _ if w.throughput => {
            reasons.push(
                "One trusted team's batch work that wants throughput: MPS runs it concurrently."
                    .to_owned(),
            );
            Mechanism::Mps
        }
        _ => {
            reasons.push("Experiments and evaluation of one tenant: time-slicing is enough (no memory isolation needed).".to_owned());
            Mechanism::TimeSlicing
        }
    }
}

fn spot_fit(w: &Workload) -> (bool, String) {
    match (w.kind, &w.inference) {
        (WorkloadKind::Inference, Some(inf)) => {
            let short = inf.warm_cache_cold_start_s.unwrap_or(inf.cold_start_s) <= 60;
            if inf.min_replicas >= 3 && short {
                (
                    true,
                    "Enough replicas and a short cold start: losing a spot node costs little."
                        .to_owned(),
                )
            } else {
                (
                    false,
                    format!(
                        "Spot needs ≥ 3 replicas and a cold start ≤ 60 s (has {} replicas, {} s).",
                        inf.min_replicas,
                        inf.warm_cache_cold_start_s.unwrap_or(inf.cold_start_s)
                    ),
                )
            }
        }
        (WorkloadKind::Batch, _) => (
            true,
            "Evaluation and batch inference restart cheaply: spot fits.".to_owned(),
        ),
        _ if w.checkpoint_minutes > 0 && w.checkpoint_minutes <= 30 => (
            true,
            "Checkpoints every 30 minutes or less keep an interruption's rework short: spot fits."
                .to_owned(),
        ),
        _ => (
            false,
            "Without frequent checkpoints a spot interruption loses hours of work.".to_owned(),
        ),
    }
}

fn warnings(scenario: &Scenario) -> Vec<Warning> {
    let mut out = Vec::new();
    let mut warn = |code: WarningCode, subject: &str, path: String, message: String| {
        out.push(Warning {
            code,
            subject: subject.to_owned(),
            path,
            message,
        })
    };
    for (f, acc) in scenario.fleet.iter().enumerate() {
        quota_warnings(scenario, (f, acc), &mut warn);
    }
    for (t, team) in scenario.teams.iter().enumerate() {
        for (i, w) in team.workloads.iter().enumerate() {
            let path = |f: &str| format!("teams[{t}].workloads[{i}].{f}");
            let subject = format!("{}/{}", team.name, w.name);
            checkpoint_warnings(w, (&subject, &path), &mut warn);
            if let Some(inf) = &w.inference {
                inference_warnings(scenario, (team, w, inf), (&subject, &path), &mut warn);
            }
            sharing_warnings(scenario, w, (&subject, &path), &mut warn);
        }
    }
    if scenario.constraints.utilisation_measured_by == UtilisationSource::Requests {
        warn(WarningCode::UtilisationFromRequests, "the whole fleet", "constraints.utilisation_measured_by".to_owned(), "Utilisation from pod requests counts a GPU that downloads weights as 100% used; measure DCGM_FI_DEV_GPU_UTIL.".to_owned());
    }
    out
}

/// Flavor `acc` (the fleet's `f`th): cards outside every nominal quota, or quotas above its cards.
fn quota_warnings(
    scenario: &Scenario,
    (f, acc): (usize, &Accelerator),
    warn: &mut impl FnMut(WarningCode, &str, String, String),
) {
    let subject = format!("flavor {}", acc.flavor);
    let nominal: u64 = scenario
        .teams
        .iter()
        .map(|t| u64::from(t.nominal_gpus.get(&acc.flavor).copied().unwrap_or(0)))
        .sum();
    let count = u64::from(acc.count);
    // Kueue lends only the unused nominal quota of other ClusterQueues (cluster_queue.md,
    // borrowingLimit); a Cohort's own nominalQuota is the pool beyond it (cohort.md).
    if nominal < count {
        let outside = count - nominal;
        warn(
            WarningCode::OutsideNominalQuota,
            &subject,
            format!("fleet[{f}].count"),
            format!(
                "{outside} of {count} GPUs on {} are in no team's nominal quota: Kueue lends only the unused nominal quota of other ClusterQueues, so no one runs on them. A Cohort with a nominalQuota of {outside} for {} (its spec.resourceGroups) would make them a pool every queue in it may borrow.",
                acc.flavor, acc.flavor,
            ),
        );
    }
    // Kueue admits on quota, not on nodes.
    if nominal > count {
        warn(
            WarningCode::QuotaAboveCapacity,
            &subject,
            format!("fleet[{f}].count"),
            format!(
                "Nominal quotas on {} add up to {nominal} of {count} GPUs: Kueue admits on quota, so admitted pods wait Pending for nodes and no preemption frees them; lower the quotas by {} or add cards.",
                acc.flavor,
                nominal - count
            ),
        );
    }
}

/// A preemptible batch class without checkpoints, or with rework over 15 minutes a preemption.
fn checkpoint_warnings(
    w: &Workload,
    (subject, path): (&str, &dyn Fn(&str) -> String),
    warn: &mut impl FnMut(WarningCode, &str, String, String),
) {
    if w.preemptible && w.kind != WorkloadKind::Inference {
        if w.checkpoint_minutes == 0 {
            warn(WarningCode::PreemptionWithoutCheckpoint, subject, path("checkpoint_minutes"), "Preemptible without checkpoints: every preemption loses the whole run, and the first lost run gets preemption switched off.".to_owned());
        } else if w.checkpoint_minutes / 2 > 15 {
            warn(
                WarningCode::ReworkOver15Min,
                subject,
                path("checkpoint_minutes"),
                format!(
                    "Checkpoints every {} min lose {} min of work per preemption on average; checkpoint at least every 30 min.",
                    w.checkpoint_minutes,
                    w.checkpoint_minutes / 2
                ),
            );
        }
    }
}

/// An inference class: scaling onto borrowed quota that reclaim evicts, or KEDA settings that
/// wake or drop replicas on noise.
fn inference_warnings(
    scenario: &Scenario,
    (team, w, inf): (&Team, &Workload, &Inference),
    (subject, path): (&str, &dyn Fn(&str) -> String),
    warn: &mut impl FnMut(WarningCode, &str, String, String),
) {
    let peak = w.demand.hourly().into_iter().fold(0.0, f64::max);
    let replicas = inf.replicas_held(peak, w.gpus_per_job);
    let held = u64::from(replicas) * u64::from(w.gpus_per_job);
    let nominal = u64::from(team.nominal_gpus.get(&w.flavor).copied().unwrap_or(0));
    let evicts = match scenario.quota.reclaim_within_cohort {
        Reclaim::Never => None,
        Reclaim::LowerPriority => {
            Some("LowerPriority evicts them for any lender's job of higher priority")
        }
        Reclaim::Any => Some("Any evicts them whatever their priority"),
    };
    if let Some(evicts) = evicts.filter(|_| scenario.quota.cohort && held > nominal) {
        warn(
            WarningCode::InferenceOnBorrowedQuota,
            subject,
            path("inference.max_replicas"),
            format!(
                "{subject} scales to {held} GPUs on {} against the team's nominal quota of {nominal}: the {} above it are borrowed, and reclaimWithinCohort: {evicts}. Protect it with nominal quota at its peak ({held}), or let it not borrow (a ClusterQueue of its own with borrowingLimit 0).",
                w.flavor,
                held - nominal
            ),
        );
    }
    if inf.cooldown_s < 60 {
        warn(
            WarningCode::KedaCooldownInSeconds,
            subject,
            path("inference.cooldown_s"),
            format!(
                "A {} s cooldown scales to zero between bursts: each cycle costs a cold start; use minutes.",
                inf.cooldown_s
            ),
        );
    }
    if inf.activation_threshold_pct == 0 {
        warn(
            WarningCode::KedaActivationZero,
            subject,
            path("inference.activation_threshold_pct"),
            "activationThreshold 0 lets any noise wake replicas from zero.".to_owned(),
        );
    }
}

/// Tenants sharing cards without memory isolation, or MIG asked of cards without it.
fn sharing_warnings(
    scenario: &Scenario,
    w: &Workload,
    (subject, path): (&str, &dyn Fn(&str) -> String),
    warn: &mut impl FnMut(WarningCode, &str, String, String),
) {
    if w.tenants > 1
        && matches!(
            w.current_isolation,
            Some(Mechanism::TimeSlicing | Mechanism::Mps)
        )
    {
        warn(
            WarningCode::TimeSlicingAcrossTenants,
            subject,
            path("current_isolation"),
            format!(
                "{} business tenants share cards by time-slicing or MPS: one tenant's leak is the neighbour's out-of-memory; use MIG or HAMi.",
                w.tenants
            ),
        );
    }
    let has_mig = scenario
        .accelerator(&w.flavor)
        .is_some_and(Accelerator::has_mig);
    if w.current_isolation == Some(Mechanism::Mig) && !has_mig {
        warn(
            WarningCode::MigWithoutMig,
            subject,
            path("current_isolation"),
            format!("{} has no MIG.", w.flavor),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planning::scenario::{Demand, Preset, bench_scenario};

    /// A class whose jobs need 20 GiB of one card: smaller than a GPU.
    fn class(kind: WorkloadKind, tenants: u32, slo: bool) -> Workload {
        Workload {
            name: "w".into(),
            kind,
            flavor: "f0".into(),
            demand: Demand::Preset {
                preset: Preset::Flat,
                peak_gpus: 1.0,
            },
            gpus_per_job: 1,
            mem_mib_per_job: Some(20 * 1024),
            throughput: false,
            job_minutes: 60,
            checkpoint_minutes: 0,
            restart_minutes: 2,
            priority: 0,
            preemptible: false,
            busy_pct: 80,
            tenants,
            slo,
            backlog_gpus: 0.0,
            inference: None,
            current_isolation: None,
        }
    }

    fn pick(s: &Scenario, w: Workload) -> Mechanism {
        choose(s, &w, false).0
    }

    #[test]
    fn the_rules_per_class() {
        let mut s = bench_scenario();
        assert_eq!(
            pick(&s, class(WorkloadKind::PreTraining, 3, true)),
            Mechanism::WholeGpu
        );
        assert_eq!(
            pick(&s, class(WorkloadKind::Inference, 3, true)),
            Mechanism::Mig
        );
        assert_eq!(
            pick(&s, class(WorkloadKind::Inference, 3, false)),
            Mechanism::HamiFractions
        );
        assert_eq!(
            pick(&s, class(WorkloadKind::Inference, 1, true)),
            Mechanism::Mps
        );
        assert_eq!(
            pick(&s, class(WorkloadKind::FineTuning, 1, false)),
            Mechanism::HamiFractions
        );
        assert_eq!(
            pick(&s, class(WorkloadKind::Batch, 1, false)),
            Mechanism::TimeSlicing
        );
        // Never time-slicing between distinct business tenants.
        assert_eq!(
            pick(&s, class(WorkloadKind::Batch, 2, false)),
            Mechanism::HamiFractions
        );
        // Compliance: hardware isolation, MIG where the GPU has it, whole cards where not.
        s.constraints.hardware_isolation_between_tenants = true;
        assert_eq!(
            pick(&s, class(WorkloadKind::FineTuning, 2, false)),
            Mechanism::Mig
        );
        s.fleet[0].gpu_model = "L40S-48GB".into();
        assert_eq!(
            pick(&s, class(WorkloadKind::FineTuning, 2, false)),
            Mechanism::WholeGpu
        );
        // Non-NVIDIA accelerators speak only HAMi.
        s.constraints.hardware_isolation_between_tenants = false;
        s.fleet[0].gpu_model = "Ascend-910B-64GB".into();
        assert_eq!(
            pick(&s, class(WorkloadKind::Batch, 1, false)),
            Mechanism::HamiFractions
        );
        assert_eq!(
            pick(&s, class(WorkloadKind::Inference, 1, false)),
            Mechanism::HamiFractions
        );
    }

    #[test]
    fn fractions_and_mig_only_for_work_smaller_than_a_gpu() {
        let s = bench_scenario();
        // A full fine-tune on 8 GPUs per job: whole cards, and the reason says why.
        let full = Workload {
            gpus_per_job: 8,
            mem_mib_per_job: None,
            ..class(WorkloadKind::FineTuning, 1, false)
        };
        let (mechanism, reasons) = choose(&s, &full, false);
        assert_eq!(mechanism, Mechanism::WholeGpu);
        assert!(reasons[0].contains("spans 8 GPUs"), "{reasons:?}");
        // A multi-tenant SLO replica spanning 2 GPUs cannot sit in MIG slices.
        let wide = Workload {
            gpus_per_job: 2,
            mem_mib_per_job: None,
            ..class(WorkloadKind::Inference, 3, true)
        };
        assert_eq!(pick(&s, wide), Mechanism::WholeGpu);
        // One GPU, but no memory below the card's: a whole card.
        let one = Workload {
            mem_mib_per_job: None,
            ..class(WorkloadKind::Batch, 1, false)
        };
        assert_eq!(pick(&s, one), Mechanism::WholeGpu);
        // MIG names the smallest profile that holds the job: 20 GiB on an H100 is 1g.20gb.
        let (_, reasons) = choose(&s, &class(WorkloadKind::Inference, 3, true), false);
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("fits MIG profile 1g.20gb")),
            "{reasons:?}"
        );
    }

    /// Three 20 GiB fine-tuning jobs share an H100 (81,559 MiB holds three; at 30% busy each,
    /// three fit in its time): 20,480 MiB and 100 ÷ 3 = 33% of the cores each.
    #[test]
    fn hami_classes_get_their_limits() {
        let mut s = bench_scenario();
        s.teams.truncate(1);
        s.teams[0].workloads = vec![Workload {
            busy_pct: 30,
            ..class(WorkloadKind::FineTuning, 1, false)
        }];
        let p = plan(&s, Architecture::B);
        assert_eq!(p.classes[0].mechanism, Mechanism::HamiFractions);
        let yaml = hami_limits(&s, &p).expect("one HAMi class");
        assert!(
            yaml.contains("\"team-00/w\":\n  flavor: \"f0\"\n  limits:\n    nvidia.com/gpu: 1\n    nvidia.com/gpumem: 20480\n    nvidia.com/gpucores: 33\n"),
            "{yaml}"
        );
        s.teams[0].workloads[0].mem_mib_per_job = None;
        assert_eq!(hami_limits(&s, &plan(&s, Architecture::B)), None);
    }

    /// Other vendors in HAMi's own names. An MI300X (192 GB = 196,608 MiB) holds nine 20 GiB
    /// jobs, three by time at 30% busy: amd.com/gpumem 20480, gpucores 33. An Ascend 910B
    /// (64 GB = 65,536 MiB) is cut in quarters (16,384 MiB) or halves (32,768): 10 GiB → a
    /// quarter; 20 GiB → a half, so two jobs per card where the sizing packs three; 40 GiB →
    /// a whole NPU.
    #[test]
    fn hami_limits_in_each_vendors_names() {
        let mut s = bench_scenario();
        s.constraints.hardware_isolation_between_tenants = false;
        s.teams.truncate(1);
        s.teams[0].workloads = vec![Workload {
            busy_pct: 30,
            ..class(WorkloadKind::FineTuning, 1, false)
        }];
        let limits = |s: &Scenario| {
            let p = plan(s, Architecture::B);
            assert_eq!(p.classes[0].mechanism, Mechanism::HamiFractions);
            hami_limits(s, &p).expect("one HAMi class")
        };
        s.fleet[0].gpu_model = "MI300X-192GB".into();
        assert!(
            limits(&s).ends_with("\"team-00/w\":\n  flavor: \"f0\"\n  limits:\n    amd.com/gpu: 1\n    amd.com/gpumem: 20480\n    amd.com/gpucores: 33\n"),
            "{}",
            limits(&s)
        );
        s.fleet[0].gpu_model = "Ascend-910B-64GB".into();
        let npu = |mib: &str| {
            format!(
                "\"team-00/w\":\n  flavor: \"f0\"\n  limits:\n    huawei.com/Ascend910B: 1\n{mib}"
            )
        };
        s.teams[0].workloads[0].mem_mib_per_job = Some(10_240);
        let yaml = limits(&s);
        assert!(
            yaml.ends_with(&npu("    huawei.com/Ascend910B-memory: 16384\n")),
            "{yaml}"
        );
        assert!(!yaml.contains("jobs per card"), "{yaml}");
        s.teams[0].workloads[0].mem_mib_per_job = Some(20_480);
        let yaml = limits(&s);
        assert!(
            yaml.ends_with(&npu("    huawei.com/Ascend910B-memory: 32768\n")),
            "{yaml}"
        );
        assert!(
            yaml.contains("# team-00/w: 20480 MiB aligns up to the 1/2 vNPU template (32768 MiB): 2 jobs per card, not the 3 the sizing packs."),
            "{yaml}"
        );
        s.teams[0].workloads[0].mem_mib_per_job = Some(40_960);
        let yaml = limits(&s);
        assert!(yaml.ends_with(&npu("")), "{yaml}");
        assert!(yaml.contains("more than half a card"), "{yaml}");
    }

    #[test]
    fn batch_of_one_trusted_team_can_ask_for_throughput() {
        let s = bench_scenario();
        let fast = Workload {
            throughput: true,
            ..class(WorkloadKind::Batch, 1, false)
        };
        assert_eq!(pick(&s, fast.clone()), Mechanism::Mps);
        // Never MPS across tenants, whatever the class asks.
        let shared = Workload { tenants: 2, ..fast };
        assert_eq!(pick(&s, shared), Mechanism::HamiFractions);
    }

    #[test]
    fn under_managed_governance_software_sharing_becomes_mig_or_whole_cards() {
        let mut s = bench_scenario();
        let (mechanism, reasons) = choose(&s, &class(WorkloadKind::FineTuning, 1, false), true);
        assert_eq!(mechanism, Mechanism::Mig);
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("fractions through MIG only")),
            "{reasons:?}"
        );
        // On a GPU without MIG the class can share only in software: it names itself.
        assert_eq!(needs_software_sharing(&s), None);
        s.fleet[0].gpu_model = "L40S-48GB".into();
        s.teams[0].workloads[1].mem_mib_per_job = Some(20 * 1024);
        s.teams[0].workloads[1].gpus_per_job = 1;
        assert_eq!(
            needs_software_sharing(&s).as_deref(),
            Some("team-00/tune (f0, HAMi fractions on a GPU without MIG)")
        );
        let (mechanism, _) = choose(&s, &s.teams[0].workloads[1], true);
        assert_eq!(mechanism, Mechanism::WholeGpu);
    }

    #[test]
    fn dra_from_kubernetes_1_34() {
        let mut s = bench_scenario();
        assert!(
            plan(&s, Architecture::B)
                .classes
                .iter()
                .all(|c| c.allocation_base == AllocationBase::Dra)
        );
        s.constraints.kubernetes_version = "1.33".into();
        assert!(
            plan(&s, Architecture::B)
                .classes
                .iter()
                .all(|c| c.allocation_base == AllocationBase::DevicePlugin)
        );
    }
}
