//! The planner's shared terms: what the decision, the isolation plan and the adoption steps
//! all speak of, kept apart so that none of them imports another for a word.

use serde::{Deserialize, Serialize};

use crate::common::label::Labelled;

/// The four ways to share a fleet (docs/planning-rules.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Architecture {
    /// Separate pools: nobody arbitrates; fixed at provisioning.
    A,
    /// Kubernetes with Kueue, KEDA, HAMi and Fluid, run by your own platform team.
    B,
    /// Managed Kueue-based governance (HyperPod task governance style).
    C,
    /// Fully managed per-token or per-job services.
    D,
}

impl Architecture {
    pub const ALL: [Architecture; 4] = [
        Architecture::A,
        Architecture::B,
        Architecture::C,
        Architecture::D,
    ];
}

impl Labelled for Architecture {
    fn label(self) -> &'static str {
        match self {
            Architecture::A => "Separate pools",
            Architecture::B => "Kueue + KEDA + HAMi + Fluid",
            Architecture::C => "Managed governance (HyperPod-style)",
            Architecture::D => "Fully managed API",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Architecture::A => "Each workload class keeps its own pool; nobody arbitrates.",
            Architecture::B => {
                "Kubernetes with Kueue, KEDA, HAMi and Fluid, run by your own platform team."
            }
            Architecture::C => "Managed Kueue-based task governance (HyperPod-style) on AWS.",
            Architecture::D => "Fully managed per-token or per-job services.",
        }
    }
}
