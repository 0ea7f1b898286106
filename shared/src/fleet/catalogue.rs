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

use crate::{common::label::Labelled, fleet::sharing::Mechanism};

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
    /// The start slots were not published: `mig_profiles.csv` holds them inferred from the
    /// geometry (its `placement` column says `inferred`; `shared/data/README.md` says how).
    #[serde(default)]
    pub placement_inferred: bool,
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
    /// The extended resource its device plugin advertises for a whole card, which pods and
    /// quotas request (`nvidia.com/gpu`, `huawei.com/Ascend910B`).
    pub resource: String,
    /// The device name NVML reports (`nvidia-smi`'s "Product Name", dcgm-exporter's
    /// `modelName`), e.g. `NVIDIA H200`; `None` outside NVIDIA.
    pub device_name: Option<String>,
}

impl AcceleratorModel {
    pub fn supports_mig(&self) -> bool {
        self.mig.is_some()
    }

    /// The value of [`Vendor::product_label`] on a node of this model whose cards the device
    /// plugin offers whole (or, under the mixed MIG strategy, as `nvidia.com/mig-*`
    /// resources): GPU Feature Discovery's name for the card, the NVML device name with
    /// characters outside `[A-Za-z0-9-_. ]` dropped and runs of spaces made one dash
    /// (`NVIDIA H100 80GB HBM3` → `NVIDIA-H100-80GB-HBM3`; NVIDIA/k8s-device-plugin
    /// `internal/lm/resource.go`, `getProductName` and `sanitise`). Elsewhere our own label,
    /// whose value the platform team sets to the catalogue's name.
    pub fn product(&self) -> String {
        match &self.device_name {
            Some(name) => gfd_sanitise(name),
            None => self.name.clone(),
        }
    }

    /// The product label GFD writes on a node whose cards are offered by `sharing`: where the
    /// NVIDIA device plugin shares each card (time-slicing or MPS, the resource not renamed)
    /// it appends `-SHARED` (`resource.go`, `getProductName`; `NVIDIA-L4-SHARED` on a
    /// time-sliced L4); whole cards, MIG (mixed strategy) and HAMi's own device plugin leave
    /// the name as it is.
    pub fn product_under(&self, sharing: Option<Mechanism>) -> String {
        self.product_under_name(&self.product(), sharing)
    }

    /// [`AcceleratorModel::product_under`] for nodes whose whole-card label is `product`.
    pub fn product_under_name(&self, product: &str, sharing: Option<Mechanism>) -> String {
        let shared = matches!(sharing, Some(Mechanism::Mps | Mechanism::TimeSlicing));
        match &self.device_name {
            Some(_) if shared => format!("{product}-SHARED"),
            _ => product.to_owned(),
        }
    }
}

/// GFD's `sanitise`: keep `[A-Za-z0-9-_. ]`, then join the words with dashes.
fn gfd_sanitise(name: &str) -> String {
    let kept: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ' '))
        .collect();
    kept.split_whitespace().collect::<Vec<_>>().join("-")
}

/// Every whole-card resource the catalogue's device plugins advertise, each once.
pub fn device_resources() -> impl Iterator<Item = &'static str> {
    let mut seen: Vec<&'static str> = Vec::new();
    models().iter().filter_map(move |m| {
        let r = m.resource.as_str();
        (!seen.contains(&r)).then(|| {
            seen.push(r);
            r
        })
    })
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
    // (model, profile, total compute slices, total memory slices, placement inferred)
    let mut profiles: Vec<(String, MigProfile, u8, u8, bool)> = Vec::new();
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
            f.get(11) == Some(&"inferred"),
        ));
    }
    let models: Vec<AcceleratorModel> = ACCELERATORS_CSV
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            let name = (*f.first()?).to_owned();
            let vendor = Vendor::parse(f.get(1)?)?;
            let nominal_gb: u32 = f.get(2)?.parse().ok()?;
            let measured = f.get(3).and_then(|v| v.parse::<u32>().ok());
            let resource = (*f.get(4).filter(|r| !r.is_empty())?).to_owned();
            let device_name = f.get(5).filter(|d| !d.is_empty()).map(|d| (*d).to_owned());
            let own: Vec<&(String, MigProfile, u8, u8, bool)> =
                profiles.iter().filter(|(m, ..)| *m == name).collect();
            let mig = own.first().map(|(_, _, total_c, total_m, _)| MigGeometry {
                total_compute_slices: *total_c,
                total_memory_slices: *total_m,
                max_instances: own
                    .iter()
                    .map(|(_, p, ..)| p.max_instances)
                    .max()
                    .unwrap_or(0),
                profiles: own.iter().map(|(_, p, ..)| p.clone()).collect(),
                placement_inferred: own.iter().any(|p| p.4),
            });
            Some(AcceleratorModel {
                name,
                vendor,
                mem_mib: measured.unwrap_or(nominal_gb * 1024),
                mem_measured: measured.is_some(),
                mig,
                resource,
                device_name,
            })
        })
        .collect();
    // accelerators.csv lists the models by name (a test holds it), so they need no sort here.
    models
}

/// HAMi's resource names for one model's cards — the one set the isolation plan's container
/// limits, the exported ClusterQueues and the Kueue manager's transformations all use.
/// HAMi v2.10.0 (`charts/hami/values.yaml`; the docs' `userguide/nvidia-device/
/// specify-device-memory-usage.md`, `amd-device/enable-amd-gpu-sharing.md`,
/// `ascend-device/enable-ascend-sharing.md`): NVIDIA and AMD `<domain>/gpu` (vGPUs),
/// `<domain>/gpumem` (MiB per vGPU), `<domain>/gpucores` (% of the card per vGPU); the Ascend
/// 910B `huawei.com/Ascend910B` and `huawei.com/Ascend910B-memory` (MiB), compute following
/// the memory's vNPU template. Intel has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HamiResources {
    pub count: String,
    pub memory: String,
    pub cores: Option<String>,
    /// Most vGPUs one card offers: HAMi's `devicePlugin.deviceSplitCount` default (10), or the
    /// 910B's smallest vNPU template (a quarter card).
    pub per_card: i64,
}

impl HamiResources {
    pub fn of(model: &AcceleratorModel) -> Option<Self> {
        let count = model.resource.clone();
        match model.vendor {
            Vendor::Nvidia | Vendor::Amd => {
                let domain = count.trim_end_matches("/gpu");
                Some(Self {
                    memory: format!("{domain}/gpumem"),
                    cores: Some(format!("{domain}/gpucores")),
                    count,
                    per_card: 10,
                })
            }
            Vendor::Huawei => Some(Self {
                memory: format!("{count}-memory"),
                cores: None,
                count,
                per_card: 4,
            }),
            Vendor::Intel => None,
        }
    }

    /// What Kueue counts a per-vGPU resource as, once multiplied by the vGPUs: Kueue's
    /// "Using HAMi" names, `nvidia.com/total-gpumem` for `nvidia.com/gpumem`.
    pub fn total(resource: &str) -> String {
        match resource.split_once('/') {
            Some((domain, name)) => format!("{domain}/total-{name}"),
            None => format!("total-{resource}"),
        }
    }

    /// The per-vGPU resources (memory, then cores where there are any).
    pub fn per_vgpu(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.memory).chain(&self.cores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_of_both_files_is_read() {
        // 16 models in accelerators.csv; 72 MIG profiles over 10 MIG models in
        // mig_profiles.csv (counted in the files, not by this code).
        assert_eq!(models().len(), 16);
        // Sorted by name, each once, as `models` promises without sorting them.
        assert!(models().windows(2).all(|w| w[0].name < w[1].name));
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
    fn product_labels_are_what_gpu_feature_discovery_writes() {
        // The real H200's NVML name (`nvidia_smi_q.txt`: "Product Name: NVIDIA H200") and the
        // labels GFD writes, as published node listings show them: `NVIDIA-H200`,
        // `NVIDIA-H100-80GB-HBM3`, `NVIDIA-A100-SXM4-80GB`, `NVIDIA-L4-SHARED` when
        // time-sliced, `NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition`.
        let product = |name: &str| find(name).expect("known").product();
        assert_eq!(product("H200-SXM-141GB"), "NVIDIA-H200");
        assert_eq!(product("H100-SXM5-80GB"), "NVIDIA-H100-80GB-HBM3");
        assert_eq!(product("A100-SXM4-80GB"), "NVIDIA-A100-SXM4-80GB");
        assert_eq!(
            product("RTX-PRO-6000-96GB"),
            "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"
        );
        assert_eq!(
            find("L4-24GB")
                .expect("known")
                .product_under(Some(Mechanism::TimeSlicing)),
            "NVIDIA-L4-SHARED"
        );
        // GFD drops what a label value may not hold and joins the words with one dash.
        assert_eq!(
            gfd_sanitise("NVIDIA  A100 (PCIe) 40GB"),
            "NVIDIA-A100-PCIe-40GB"
        );
        // Outside NVIDIA the label is ours, valued by the catalogue's name.
        assert_eq!(product("Ascend-910B-64GB"), "Ascend-910B-64GB");
        assert_eq!(
            find("Ascend-910B-64GB").expect("known").resource,
            "huawei.com/Ascend910B"
        );
        assert_eq!(
            device_resources().collect::<Vec<_>>(),
            ["nvidia.com/gpu", "huawei.com/Ascend910B", "amd.com/gpu"]
        );
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
