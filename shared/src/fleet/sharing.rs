//! How pods share one device: whole GPUs, MIG partitions, MPS, time-slicing or HAMi fractions.
//! The isolation advisor chooses one per workload class, quota flavors record the one their
//! nodes use, and the usage ingest reports co-tenants by it.

use serde::{Deserialize, Serialize};

use crate::common::label::Labelled;

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

impl Mechanism {
    /// Sharing done in software (no hardware partition).
    pub fn is_software(self) -> bool {
        matches!(
            self,
            Mechanism::HamiFractions | Mechanism::Mps | Mechanism::TimeSlicing
        )
    }
}

/// A sharing mechanism as stored and reported: [`Mechanism`]'s names, `shared` when pods share
/// a device and the flavor does not say how.
pub fn sharing_name(sharing: Option<Mechanism>) -> &'static str {
    match sharing {
        Some(Mechanism::WholeGpu) => "whole_gpu",
        Some(Mechanism::Mig) => "mig",
        Some(Mechanism::Mps) => "mps",
        Some(Mechanism::TimeSlicing) => "time_slicing",
        Some(Mechanism::HamiFractions) => "hami_fractions",
        None => "shared",
    }
}

/// The inverse of [`sharing_name`].
pub fn parse_sharing(text: &str) -> Option<Option<Mechanism>> {
    if text == "shared" {
        return Some(None);
    }
    Mechanism::ALL
        .into_iter()
        .find(|m| sharing_name(Some(*m)) == text)
        .map(Some)
}
