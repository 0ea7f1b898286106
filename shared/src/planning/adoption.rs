//! The adoption plan: how to get from today's fleet to the recommended architecture, in the
//! order practitioners advise (`docs/planning-rules.md`, "Where to start"): measure real
//! utilisation first (DCGM, not requests), split the workloads by isolation need, choose the
//! sharing mechanism per class, then quotas and queues per team, then packing. Each step names
//! the manifests or settings it needs, by the export's file names.

use serde::{Deserialize, Serialize};

use crate::{
    common::label::Labelled,
    fleet::sharing::Mechanism,
    planning::isolation::{FlavorMig, IsolationPlan},
    planning::scenario::{Scenario, UtilisationSource},
    planning::terms::Architecture,
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub title: String,
    pub why: String,
    /// Files of the export, or settings, this step needs.
    pub needs: Vec<String>,
}

/// The steps for `architecture` (the recommendation), from what the evaluation found.
pub fn plan(
    scenario: &Scenario,
    architecture: Architecture,
    isolation: &IsolationPlan,
    mig: &[FlavorMig],
) -> Vec<Step> {
    let mut steps = vec![measure(scenario)];
    match architecture {
        Architecture::D => steps.push(Step {
            title: "Move the work to a managed API".to_owned(),
            why: if scenario.constraints.runs_own_models {
                "Your own models' work is too small here to keep a fleet for: serve them on a managed service that hosts your own weights, and pay per token or per job for the rest; compare its price per million tokens with your measured cost."
            } else {
                "With no model of your own, pay per token or per job and keep no fleet; compare the provider's price per million tokens with your measured cost."
            }
            .to_owned(),
            needs: vec!["the measured cost per million tokens (step 1)".to_owned()],
        }),
        Architecture::A => steps.push(Step {
            title: "Keep separate pools, sized from the measurements".to_owned(),
            why: "At this size sharing gains less than it costs to run; right-size each pool to its measured peak and look again when the fleet passes 40 cards.".to_owned(),
            needs: vec!["one node pool per team, sized to its measured peak".to_owned()],
        }),
        Architecture::B | Architecture::C => {
            steps.push(split(scenario, isolation));
            steps.push(mechanisms(architecture, isolation, mig));
            steps.push(queues(scenario, architecture));
            steps.push(Step {
                title: "Pack fractional work".to_owned(),
                why: "Place work smaller than a GPU where it strands the fewest free fractions (fragmentation-aware placement), and re-check the MIG layouts as demand moves.".to_owned(),
                needs: vec!["gpufleet packing (the placement policy and its stranding figures)".to_owned()],
            });
        }
    }
    steps
}

fn measure(scenario: &Scenario) -> Step {
    let why = match scenario.constraints.utilisation_measured_by {
        UtilisationSource::Requests => {
            "Today's figures come from pod requests, which count a GPU that is downloading weights as fully used: the baseline is unproven. Measure DCGM_FI_DEV_GPU_UTIL per team and class for two weeks first."
        }
        UtilisationSource::Dcgm => {
            "The plan rests on measured busy time (DCGM_FI_DEV_GPU_UTIL): keep two weeks of it per team and class as the baseline the change is judged against."
        }
    };
    Step {
        title: "Measure real utilisation (DCGM, not requests)".to_owned(),
        why: why.to_owned(),
        needs: vec![
            "dcgm-exporter on every GPU node, scraped by Prometheus".to_owned(),
            "DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED per pod".to_owned(),
        ],
    }
}

fn split(scenario: &Scenario, isolation: &IsolationPlan) -> Step {
    let classes = isolation.classes.len();
    let shared_by_tenants = scenario
        .teams
        .iter()
        .flat_map(|t| &t.workloads)
        .filter(|w| w.tenants > 1)
        .count();
    let hardware = if scenario.constraints.hardware_isolation_between_tenants {
        " Compliance asks for hardware isolation between tenants: those classes get MIG or whole cards."
    } else {
        ""
    };
    Step {
        title: "Split the workloads by isolation need".to_owned(),
        why: format!(
            "{shared_by_tenants} of {classes} workload classes serve several business tenants and need isolation that holds against a neighbour; the other {} are one team's own work, where software sharing is safe.{hardware}",
            classes - shared_by_tenants
        ),
        needs: vec![
            "a tenants count and an SLO flag per workload class (this scenario)".to_owned(),
        ],
    }
}

fn mechanisms(architecture: Architecture, isolation: &IsolationPlan, mig: &[FlavorMig]) -> Step {
    let mut counts: Vec<(Mechanism, usize)> = Vec::new();
    for c in &isolation.classes {
        match counts.iter_mut().find(|(m, _)| *m == c.mechanism) {
            Some((_, n)) => *n += 1,
            None => counts.push((c.mechanism, 1)),
        }
    }
    // Most classes first, then by name: at most five mechanisms, put in place one by one
    // (a sort would be one more copy of its code in the planner's wasm).
    let before =
        |a: &(Mechanism, usize), b: &(Mechanism, usize)| (a.1, b.0.label()) > (b.1, a.0.label());
    for i in 1..counts.len() {
        let mut j = i;
        while j > 0 && before(&counts[j], &counts[j - 1]) {
            counts.swap(j, j - 1);
            j -= 1;
        }
    }
    let words: Vec<String> = counts
        .iter()
        .map(|(m, n)| format!("{} for {n}", m.label()))
        .collect();
    let mut needs: Vec<String> = mig
        .iter()
        .filter(|m| m.layout.is_ok())
        .map(|m| {
            format!(
                "mig-parted-{}.yaml (nodes labelled nvidia.com/mig.config)",
                m.flavor
            )
        })
        .collect();
    if counts.iter().any(|(m, _)| *m == Mechanism::HamiFractions) {
        needs.push("HAMi's device plugin and scheduler; hami-limits.yaml (each class's memory and compute limits in its vendor's HAMi names)".to_owned());
    }
    if counts.iter().any(|(m, _)| *m == Mechanism::Mps) {
        needs.push(
            "the NVIDIA device plugin's MPS sharing on the nodes of one team's trusted work"
                .to_owned(),
        );
    }
    let managed = if architecture == Architecture::C {
        " Managed governance offers fractions through MIG only."
    } else {
        ""
    };
    Step {
        title: "Choose the sharing mechanism per class".to_owned(),
        why: format!("{} (the isolation plan above).{managed}", words.join(", ")),
        needs,
    }
}

fn queues(scenario: &Scenario, architecture: Architecture) -> Step {
    let each = match scenario.teams.len() {
        1 => "the team".to_owned(),
        teams => format!("each of the {teams} teams"),
    };
    let cohort = if scenario.quota.cohort {
        "in one cohort, so idle quota is lent and reclaimed"
    } else {
        "without a cohort (no lending: consider one, it is where the gain comes from)"
    };
    let inference = scenario
        .teams
        .iter()
        .flat_map(|t| &t.workloads)
        .any(|w| w.inference.is_some());
    let mut needs = vec![
        "kueue.yaml (ResourceFlavors, Cohort, ClusterQueues, LocalQueues, WorkloadPriorityClasses)"
            .to_owned(),
    ];
    if inference {
        needs.push("keda.yaml (a ScaledObject per inference class)".to_owned());
    }
    let how = if architecture == Architecture::C {
        "the managed service's task governance (compute quotas per team, the same figures)"
    } else {
        "Kueue"
    };
    Step {
        title: "Quotas and queues per team".to_owned(),
        why: format!(
            "A queue with a nominal quota per flavor for {each}, {cohort}, through {how}; inference above training in priority, training checkpointing so reclaims cost minutes."
        ),
        needs,
    }
}
