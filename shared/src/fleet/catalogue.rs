//! The one catalogue of accelerator models: name, vendor, memory, and — for models with MIG —
//! the slice geometry and every MIG profile. The fleet inventory, the planning scenario and the
//! MIG planner all name models as this catalogue does, so the same accelerator joins
//! everywhere; a name that is not here is refused with the list of known names.
//!
//! Invariants: names are unique; memory is in MiB (the driver's reading where one exists,
//! otherwise the nominal GB × 1024, and [`AcceleratorModel::mem_measured`] says which); a model
//! has MIG exactly when `shared/data/mig_profiles.csv` lists profiles for it.
//! The data and its sources: `shared/data/README.md`.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::common::label::Labelled;

const ACCELERATORS_CSV: &str = include_str!("../../data/accelerators.csv");
const MIG_PROFILES_CSV: &str = include_str!("../../data/mig_profiles.csv");

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Vendor {
    #[serde(rename = "NVIDIA")]
    Nvidia,
    #[serde(rename = "AMD")]
    Amd,
    Huawei,
    Intel,
}

impl Vendor {
    pub const ALL: [Vendor; 4] = [Vendor::Nvidia, Vendor::Amd, Vendor::Huawei, Vendor::Intel];

    pub fn parse(s: &str) -> Option<Vendor> {
        Vendor::ALL.into_iter().find(|v| v.label() == s)
    }

    /// The extended resource its device plugin advertises, which pods and quotas request.
    pub fn resource_name(self) -> &'static str {
        match self {
            Vendor::Nvidia => "nvidia.com/gpu",
            Vendor::Amd => "amd.com/gpu",
            Vendor::Huawei => "huawei.com/Ascend910",
            Vendor::Intel => "gpu.intel.com/i915",
        }
    }

    /// The node label that names the model: GPU feature discovery's for NVIDIA, ours elsewhere.
    pub fn product_label(self) -> &'static str {
        match self {
            Vendor::Nvidia => "nvidia.com/gpu.product",
            _ => "gpufleet.io/accelerator",
        }
    }
}

impl Labelled for Vendor {
    fn label(self) -> &'static str {
        match self {
            Vendor::Nvidia => "NVIDIA",
            Vendor::Amd => "AMD",
            Vendor::Huawei => "Huawei",
            Vendor::Intel => "Intel",
        }
    }
}

/// A MIG GPU-instance profile of one model (a row of `shared/data/mig_profiles.csv`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigProfile {
    /// e.g. `1g.18gb`; the Kubernetes resource is `nvidia.com/mig-<name>`.
    pub name: String,
    pub compute_slices: u8,
    pub memory_slices: u8,
    /// Most instances of this profile on one GPU.
    pub max_instances: u8,
    /// Valid first memory slices (`nvidia-smi mig -lgipp`); empty when not published.
    pub start_slots: Vec<u8>,
    /// Memory slices an instance occupies; 0 when not published.
    pub placement_slices: u8,
    /// Memory the instance offers, in MiB.
    pub mem_mib: u32,
    /// `true` when `mem_mib` is a driver reading, `false` when it is the nominal size.
    pub mem_measured: bool,
}

impl MigProfile {
    /// Media-extension variants (`+me`, `-me`, `+gfx`) are for video work, not for packing.
    pub fn is_plain(&self) -> bool {
        !self.name.contains(['+', '-'])
    }
}

/// How a MIG-capable model divides into slices, and its profiles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigGeometry {
    pub total_compute_slices: u8,
    pub total_memory_slices: u8,
    /// Most MIG instances one GPU can hold.
    pub max_instances: u8,
    pub profiles: Vec<MigProfile>,
}

/// One accelerator model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceleratorModel {
    /// e.g. `H200-SXM-141GB`.
    pub name: String,
    pub vendor: Vendor,
    /// Device memory, in MiB.
    pub mem_mib: u32,
    /// `true` when `mem_mib` is what the driver reports, `false` when it is the nominal size.
    pub mem_measured: bool,
    /// `None` when the model has no MIG.
    pub mig: Option<MigGeometry>,
}

impl AcceleratorModel {
    pub fn supports_mig(&self) -> bool {
        self.mig.is_some()
    }
}

/// A model name the catalogue does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no accelerator model named {name:?}; known models: {known}")]
pub struct UnknownModel {
    pub name: String,
    pub known: String,
}

/// Every model, sorted by name.
pub fn models() -> &'static [AcceleratorModel] {
    static MODELS: OnceLock<Vec<AcceleratorModel>> = OnceLock::new();
    MODELS.get_or_init(parse)
}

/// The model called `name`, or an error naming every known model.
pub fn find(name: &str) -> Result<&'static AcceleratorModel, UnknownModel> {
    models()
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| UnknownModel {
            name: name.to_owned(),
            known: known_names(),
        })
}

/// The known names, comma-separated, for error messages.
pub fn known_names() -> String {
    models()
        .iter()
        .map(|m| m.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse() -> Vec<AcceleratorModel> {
    let mut profiles: Vec<(String, MigProfile, u8, u8)> = Vec::new();
    for line in MIG_PROFILES_CSV.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u8>().ok());
        let (Some(model), Some(name), Some(nominal_gb)) = (
            f.first(),
            f.get(1),
            f.get(4).and_then(|v| v.parse::<u32>().ok()),
        ) else {
            continue;
        };
        let measured = f.get(10).and_then(|v| v.parse::<u32>().ok());
        let (Some(compute), Some(memory), Some(max), Some(total_c), Some(total_m)) =
            (num(2), num(3), num(5), num(8), num(9))
        else {
            continue;
        };
        profiles.push((
            (*model).to_owned(),
            MigProfile {
                name: (*name).to_owned(),
                compute_slices: compute,
                memory_slices: memory,
                max_instances: max,
                start_slots: f
                    .get(6)
                    .map(|s| s.split(';').filter_map(|s| s.parse().ok()).collect())
                    .unwrap_or_default(),
                placement_slices: num(7).unwrap_or(0),
                mem_mib: measured.unwrap_or(nominal_gb * 1024),
                mem_measured: measured.is_some(),
            },
            total_c,
            total_m,
        ));
    }
    let mut models: Vec<AcceleratorModel> = ACCELERATORS_CSV
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            let name = (*f.first()?).to_owned();
            let vendor = Vendor::parse(f.get(1)?)?;
            let nominal_gb: u32 = f.get(2)?.parse().ok()?;
            let measured = f.get(3).and_then(|v| v.parse::<u32>().ok());
            let own: Vec<&(String, MigProfile, u8, u8)> =
                profiles.iter().filter(|(m, ..)| *m == name).collect();
            let mig = own.first().map(|(_, _, total_c, total_m)| MigGeometry {
                total_compute_slices: *total_c,
                total_memory_slices: *total_m,
                max_instances: own
                    .iter()
                    .map(|(_, p, ..)| p.max_instances)
                    .max()
                    .unwrap_or(0),
                profiles: own.iter().map(|(_, p, ..)| p.clone()).collect(),
            });
            Some(AcceleratorModel {
                name,
                vendor,
                mem_mib: measured.unwrap_or(nominal_gb * 1024),
                mem_measured: measured.is_some(),
                mig,
            })
        })
        .collect();
    models.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    models
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_of_both_files_is_read() {
        // 16 models in accelerators.csv; 72 MIG profiles over 10 MIG models in
        // mig_profiles.csv (counted in the files, not by this code).
        assert_eq!(models().len(), 16);
        let mig: Vec<&AcceleratorModel> = models().iter().filter(|m| m.supports_mig()).collect();
        assert_eq!(mig.len(), 10);
        let profiles: usize = mig
            .iter()
            .map(|m| m.mig.as_ref().map_or(0, |g| g.profiles.len()))
            .sum();
        assert_eq!(profiles, 72);
    }

    #[test]
    fn the_h200_matches_the_real_card() {
        // the real H200's readings in shared/data/README.md: 143,771 MiB total, 7 instances, 7
        // compute and 8 memory slices, and the seven profiles of `nvidia-smi mig -lgip`.
        let h200 = find("H200-SXM-141GB").expect("known");
        assert_eq!(h200.vendor, Vendor::Nvidia);
        assert_eq!(h200.mem_mib, 143_771);
        assert!(h200.mem_measured);
        let mig = h200.mig.as_ref().expect("has MIG");
        assert_eq!(
            (
                mig.total_compute_slices,
                mig.total_memory_slices,
                mig.max_instances
            ),
            (7, 8, 7)
        );
        let names: Vec<&str> = mig.profiles.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "1g.18gb",
                "1g.18gb+me",
                "1g.35gb",
                "2g.35gb",
                "3g.71gb",
                "4g.71gb",
                "7g.141gb"
            ]
        );
        // 16.00 GiB reported for 1g.18gb.
        assert_eq!(mig.profiles[0].mem_mib, 16 * 1024);
    }

    #[test]
    fn models_without_mig_and_other_vendors() {
        let l4 = find("L4-24GB").expect("known");
        assert!(!l4.supports_mig());
        assert_eq!(l4.mem_mib, 24 * 1024);
        assert!(!l4.mem_measured);
        assert_eq!(
            find("Ascend-910B-64GB").expect("known").vendor,
            Vendor::Huawei
        );
        // The A30 divides into 4 + 4 slices, not 7 + 8.
        let a30 = find("A30-24GB").expect("known").mig.as_ref().expect("MIG");
        assert_eq!((a30.total_compute_slices, a30.total_memory_slices), (4, 4));
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let err = find("H200-141GB").expect_err("not a catalogue name");
        let text = err.to_string();
        assert!(text.starts_with("no accelerator model named \"H200-141GB\"; known models: "));
        assert!(text.contains("H200-SXM-141GB"), "{text}");
        assert!(text.contains("L4-24GB"), "{text}");
    }
}
