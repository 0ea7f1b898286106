//! The isolation plan (whole GPU, MIG, MPS, time-slicing or HAMi fractions per workload
//! class, with the reasons), the anti-pattern warnings, and where spot capacity fits.
//!
//! Invariants: never time-slicing or MPS between distinct business tenants; MIG only on GPUs
//! that have it; only HAMi fractions on non-NVIDIA accelerators.

use serde::{Deserialize, Serialize};

use crate::{
    catalogue::Vendor,
    label::Labelled,
    scenario::{Accelerator, Scenario, UtilisationSource, Workload, WorkloadKind},
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    WholeGpu,
    Mig,
    Mps,
    TimeSlicing,
    HamiFractions,
}

impl Mechanism {
    pub const ALL: [Mechanism; 5] = [
        Mechanism::WholeGpu,
        Mechanism::Mig,
        Mechanism::Mps,
        Mechanism::TimeSlicing,
        Mechanism::HamiFractions,
    ];
}

impl Labelled for Mechanism {
    fn label(self) -> &'static str {
        match self {
            Mechanism::WholeGpu => "Whole GPU",
            Mechanism::Mig => "MIG",
            Mechanism::Mps => "MPS",
            Mechanism::TimeSlicing => "Time-slicing",
            Mechanism::HamiFractions => "HAMi fractions",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Mechanism::WholeGpu => "One pod per card: full isolation and bandwidth.",
            Mechanism::Mig => "Hardware partitions with their own memory, compute and bandwidth.",
            Mechanism::Mps => {
                "Concurrent kernels of trusted pods on one card; no memory isolation."
            }
            Mechanism::TimeSlicing => "Pods take turns on a card; no memory isolation.",
            Mechanism::HamiFractions => "Software limits on GPU memory and cores per pod.",
        }
    }
}

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
}

/// An anti-pattern found in the scenario. The JSON value is stable; clients may match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningCode {
    NothingToLend,
    PreemptionWithoutCheckpoint,
    #[serde(rename = "rework_over_15_min")]
    ReworkOver15Min,
    KedaCooldownInSeconds,
    KedaActivationZero,
    TimeSlicingAcrossTenants,
    MigWithoutMig,
    UtilisationFromRequests,
}

impl Labelled for WarningCode {
    fn label(self) -> &'static str {
        match self {
            WarningCode::NothingToLend => "Nothing to lend",
            WarningCode::PreemptionWithoutCheckpoint => "Preemption without checkpoints",
            WarningCode::ReworkOver15Min => "Over 15 minutes of rework per preemption",
            WarningCode::KedaCooldownInSeconds => "KEDA cooldown in seconds",
            WarningCode::KedaActivationZero => "KEDA activation threshold 0",
            WarningCode::TimeSlicingAcrossTenants => "Time-slicing across tenants",
            WarningCode::MigWithoutMig => "MIG on a GPU without MIG",
            WarningCode::UtilisationFromRequests => "Utilisation from requests",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    pub code: WarningCode,
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

pub fn plan(scenario: &Scenario) -> IsolationPlan {
    let dra = scenario.kubernetes_at_least(DRA_FROM.0, DRA_FROM.1);
    let mut classes = Vec::new();
    let mut spot = Vec::new();
    for team in &scenario.teams {
        for w in &team.workloads {
            let (mechanism, reasons) = choose(scenario, w);
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
    IsolationPlan {
        classes,
        warnings: warnings(scenario),
        spot,
    }
}

fn choose(scenario: &Scenario, w: &Workload) -> (Mechanism, Vec<String>) {
    let acc = scenario.accelerator(&w.flavor);
    let nvidia = acc.is_none_or(|a| a.vendor() == Vendor::Nvidia);
    let has_mig = acc.is_some_and(Accelerator::has_mig);
    let compliance = scenario.constraints.hardware_isolation_between_tenants && w.tenants > 1;
    let mut reasons = Vec::new();
    let mig_or_whole = |reasons: &mut Vec<String>| {
        if has_mig {
            Mechanism::Mig
        } else {
            reasons.push(
                "This GPU has no MIG: whole cards give the hardware boundary instead.".to_owned(),
            );
            Mechanism::WholeGpu
        }
    };
    let mechanism = match w.kind {
        WorkloadKind::PreTraining => {
            reasons.push("Pre-training wants whole cards (and whole nodes): maximum isolation and bandwidth.".to_owned());
            Mechanism::WholeGpu
        }
        _ if compliance => {
            reasons.push("Compliance needs hardware isolation between tenants: MIG is the only hardware-partitioned option an auditor accepts.".to_owned());
            mig_or_whole(&mut reasons)
        }
        WorkloadKind::Inference if w.tenants > 1 && w.slo => {
            reasons.push("Multi-tenant inference with an SLO: MIG gives each tenant dedicated memory, compute and bandwidth.".to_owned());
            mig_or_whole(&mut reasons)
        }
        WorkloadKind::Inference if w.tenants > 1 => {
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
            reasons.push("LoRA fine-tuning: HAMi fractions (gpumem/gpucores) pack several runs per card with memory limits.".to_owned());
            Mechanism::HamiFractions
        }
        WorkloadKind::Batch if w.tenants > 1 => {
            reasons.push("Evaluation for several tenants: HAMi memory limits; never time-slicing between tenants.".to_owned());
            Mechanism::HamiFractions
        }
        WorkloadKind::Batch => {
            reasons.push("Experiments and evaluation of one tenant: time-slicing is enough (no memory isolation needed).".to_owned());
            Mechanism::TimeSlicing
        }
    };
    if !nvidia
        && matches!(
            mechanism,
            Mechanism::Mig | Mechanism::Mps | Mechanism::TimeSlicing
        )
    {
        reasons.push(
            "Not an NVIDIA accelerator: HAMi is the sharing layer that speaks to it.".to_owned(),
        );
        return (Mechanism::HamiFractions, reasons);
    }
    (mechanism, reasons)
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
    let mut warn = |code: WarningCode, path: String, message: String| {
        out.push(Warning {
            code,
            path,
            message,
        })
    };
    if scenario.quota.cohort {
        for (f, acc) in scenario.fleet.iter().enumerate() {
            let nominal: u64 = scenario
                .teams
                .iter()
                .map(|t| u64::from(t.nominal_gpus.get(&acc.flavor).copied().unwrap_or(0)))
                .sum();
            if nominal >= u64::from(acc.count) && scenario.teams.len() > 1 {
                warn(
                    WarningCode::NothingToLend,
                    format!("fleet[{f}]"),
                    format!(
                        "Nominal quotas on {} add up to {nominal} of {} GPUs: nothing is left unassigned, so borrowing only happens when an owner idles; keep some capacity outside nominal quota or lower quotas.",
                        acc.flavor, acc.count
                    ),
                );
            }
        }
    }
    for (t, team) in scenario.teams.iter().enumerate() {
        for (i, w) in team.workloads.iter().enumerate() {
            let path = |f: &str| format!("teams[{t}].workloads[{i}].{f}");
            if w.preemptible && w.kind != WorkloadKind::Inference {
                if w.checkpoint_minutes == 0 {
                    warn(WarningCode::PreemptionWithoutCheckpoint, path("checkpoint_minutes"), "Preemptible without checkpoints: every preemption loses the whole run, and the first lost run gets preemption switched off.".to_owned());
                } else if w.checkpoint_minutes / 2 > 15 {
                    warn(
                        WarningCode::ReworkOver15Min,
                        path("checkpoint_minutes"),
                        format!(
                            "Checkpoints every {} min lose {} min of work per preemption on average; checkpoint at least every 30 min.",
                            w.checkpoint_minutes,
                            w.checkpoint_minutes / 2
                        ),
                    );
                }
            }
            if let Some(inf) = &w.inference {
                if inf.cooldown_s < 60 {
                    warn(
                        WarningCode::KedaCooldownInSeconds,
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
                        path("inference.activation_threshold_pct"),
                        "activationThreshold 0 lets any noise wake replicas from zero.".to_owned(),
                    );
                }
            }
            if w.tenants > 1
                && matches!(
                    w.current_isolation,
                    Some(Mechanism::TimeSlicing | Mechanism::Mps)
                )
            {
                warn(
                    WarningCode::TimeSlicingAcrossTenants,
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
                    path("current_isolation"),
                    format!("{} has no MIG.", w.flavor),
                );
            }
        }
    }
    if scenario.constraints.utilisation_measured_by == UtilisationSource::Requests {
        warn(WarningCode::UtilisationFromRequests, "constraints.utilisation_measured_by".to_owned(), "Utilisation from pod requests counts a GPU that downloads weights as 100% used; measure DCGM_FI_DEV_GPU_UTIL.".to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Demand, Preset, bench_scenario};

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
            job_minutes: 60,
            checkpoint_minutes: 0,
            priority: 0,
            preemptible: false,
            busy_pct: 80,
            tenants,
            slo,
            inference: None,
            current_isolation: None,
        }
    }

    #[test]
    fn the_rules_per_class() {
        let mut s = bench_scenario();
        let pick = |s: &Scenario, w: Workload| choose(s, &w).0;
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
    fn dra_from_kubernetes_1_34() {
        let mut s = bench_scenario();
        assert!(
            plan(&s)
                .classes
                .iter()
                .all(|c| c.allocation_base == AllocationBase::Dra)
        );
        s.constraints.kubernetes_version = "1.33".into();
        assert!(
            plan(&s)
                .classes
                .iter()
                .all(|c| c.allocation_base == AllocationBase::DevicePlugin)
        );
    }
}
