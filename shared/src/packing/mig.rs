//! MIG layouts: pack inference replicas, by the memory each needs, into MIG instances and GPUs,
//! using as few GPUs as the heuristic finds, and respecting each model's profile table and
//! placement rules.
//!
//! Invariants of every layout: on each GPU, instances occupy disjoint memory-slice ranges that
//! start at one of their profile's start slots and end within the GPU; no profile exceeds its
//! per-GPU maximum; compute slices add up to at most the GPU's total. Memory is matched against
//! the usable memory the driver reports where a reading exists (an H200 `1g.18gb` gives 16 GiB),
//! otherwise against the nominal size, and the layout says which.

use serde::{Deserialize, Serialize};

use crate::{
    common::error::FieldError,
    common::interrupt::{Interrupt, Never},
    fleet::catalogue::{self, MigGeometry, MigProfile},
};

/// `POST /api/packing/mig` and `gpufleet packing mig`: lay out replica groups on one GPU model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigRequest {
    /// A catalogue model with MIG, e.g. `H200-SXM-141GB`.
    pub gpu_model: String,
    pub groups: Vec<ReplicaGroup>,
}

/// Most replicas one MIG layout request may place. First-fit tries each replica on the GPUs
/// laid out so far, so the work grows with replicas × GPUs: 10,000 replicas (over a thousand
/// GPUs' worth) lay out in well under a second.
pub const MAX_MIG_REPLICAS: u64 = 10_000;

impl MigRequest {
    /// Checks the request and lays it out; every error names its field.
    pub fn plan(&self) -> Result<MigPlan, Vec<FieldError>> {
        self.plan_until(&Never)
    }

    /// [`MigRequest::plan`], stopping when `stop` fires.
    pub fn plan_until(&self, stop: &dyn Interrupt) -> Result<MigPlan, Vec<FieldError>> {
        let replicas: u64 = self.groups.iter().map(|g| u64::from(g.replicas)).sum();
        let message = if self.groups.is_empty() || replicas == 0 {
            Some("give at least one replica".to_owned())
        } else if replicas > MAX_MIG_REPLICAS {
            Some(format!("at most {MAX_MIG_REPLICAS} replicas"))
        } else {
            None
        };
        if let Some(message) = message {
            return Err(vec![FieldError {
                path: "groups".to_owned(),
                message,
            }]);
        }
        plan_until(&self.gpu_model, &self.groups, stop).map_err(|err| {
            let path = match &err {
                MigError::UnknownModel(_) | MigError::NoMig(..) | MigError::NoPlacement(_) => {
                    "gpu_model".to_owned()
                }
                MigError::Interrupted => "-".to_owned(),
                MigError::TooBig { group, .. } | MigError::Empty(group) => {
                    let i = self
                        .groups
                        .iter()
                        .position(|g| g.name == *group)
                        .unwrap_or_default();
                    format!("groups[{i}].mem_mib")
                }
            };
            vec![FieldError {
                path,
                message: err.to_string(),
            }]
        })
    }
}

/// A replica group that is not written `name:memory:replicas`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?}: give a replica group as name:memory:replicas with the memory in GiB or MiB, e.g. llama:20GiB:4"
)]
pub struct BadReplicaGroup(pub String);

/// Reads a replica group written `name:MEMORY:replicas`, memory with its unit (`20GiB`,
/// `20480MiB`), as `gpufleet packing mig --replicas` takes it.
pub fn parse_replica_group(text: &str) -> Result<ReplicaGroup, BadReplicaGroup> {
    let bad = || BadReplicaGroup(text.to_owned());
    let mut parts = text.split(':');
    let name = parts.next().filter(|n| !n.is_empty()).ok_or_else(bad)?;
    let memory = parts.next().ok_or_else(bad)?;
    let mem_mib = if let Some(gib) = memory.strip_suffix("GiB") {
        gib.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0 && *v < 4_000_000.0)
            .map(|v| (v * 1024.0).ceil() as u32)
    } else if let Some(mib) = memory.strip_suffix("MiB") {
        mib.parse::<u32>().ok().filter(|v| *v > 0)
    } else {
        None
    }
    .ok_or_else(bad)?;
    let replicas: u32 = parts.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(ReplicaGroup {
        name: name.to_owned(),
        mem_mib,
        replicas,
    })
}

/// Replicas of one service that need the same memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaGroup {
    pub name: String,
    /// Memory one replica needs (weights, KV cache, activations), in MiB.
    pub mem_mib: u32,
    pub replicas: u32,
}

/// One MIG instance on a GPU: which slices it occupies and which replica it serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    pub profile: String,
    /// First memory slice.
    pub start_slice: u8,
    /// Memory slices occupied (the placement size).
    pub size_slices: u8,
    pub compute_slices: u8,
    pub mem_mib: u32,
    pub replica: String,
}

/// One GPU's picture: its instances by slice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuLayout {
    pub index: u32,
    pub instances: Vec<Instance>,
    pub free_memory_slices: u8,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MigPlan {
    pub gpu_model: String,
    pub total_memory_slices: u8,
    pub gpus: Vec<GpuLayout>,
    /// No layout can use fewer GPUs than this (by memory and compute slices).
    pub lower_bound_gpus: u32,
    /// Whether the memory figures are driver readings for every profile used.
    pub usable_memory_measured: bool,
    /// NVIDIA mig-parted configuration: one named config per distinct GPU layout.
    pub mig_parted_yaml: String,
}

impl MigPlan {
    /// Whether its placement is inferred from the geometry, not read from a published table
    /// ([`catalogue::MigGeometry::placement_inferred`]).
    pub fn placement_inferred(&self) -> bool {
        catalogue::find(&self.gpu_model)
            .ok()
            .and_then(|m| m.mig.as_ref())
            .is_some_and(|g| g.placement_inferred)
    }
}

/// GPU models with MIG, as the catalogue names them.
pub fn mig_models() -> Vec<String> {
    catalogue::models()
        .iter()
        .filter(|m| m.supports_mig())
        .map(|m| m.name.clone())
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigError {
    #[error(transparent)]
    UnknownModel(catalogue::UnknownModel),
    #[error("{0} has no MIG (MIG models: {1})")]
    NoMig(String, String),
    #[error("{0}: the placement rules of this GPU are not published, so no layout can be checked")]
    NoPlacement(String),
    #[error(
        "{group}: a replica needs {need_mib} MiB but the largest {model} profile offers {max_mib} MiB"
    )]
    TooBig {
        group: String,
        model: String,
        need_mib: u32,
        max_mib: u32,
    },
    #[error("{0}: a replica must need more than 0 MiB")]
    Empty(String),
    #[error("the layout was stopped before it finished")]
    Interrupted,
}

/// Lays out `groups` on GPUs of `gpu_model`. Each replica gets the smallest plain profile
/// (no media extensions) whose memory holds it; instances are placed largest first, each at the
/// first GPU and start slot where it is valid (first-fit decreasing).
pub fn plan(gpu_model: &str, groups: &[ReplicaGroup]) -> Result<MigPlan, MigError> {
    plan_until(gpu_model, groups, &Never)
}

/// [`plan`], stopping when `stop` fires.
pub fn plan_until(
    gpu_model: &str,
    groups: &[ReplicaGroup],
    stop: &dyn Interrupt,
) -> Result<MigPlan, MigError> {
    let model = catalogue::find(gpu_model).map_err(MigError::UnknownModel)?;
    let Some(geometry) = &model.mig else {
        return Err(MigError::NoMig(
            gpu_model.to_owned(),
            mig_models().join(", "),
        ));
    };
    let table: Vec<&MigProfile> = geometry.profiles.iter().filter(|p| p.is_plain()).collect();
    if table
        .iter()
        .any(|p| p.start_slots.is_empty() || p.placement_slices == 0)
    {
        return Err(MigError::NoPlacement(gpu_model.to_owned()));
    }
    let wanted = instances(gpu_model, &table, groups)?;
    let gpus = first_fit(gpu_model, geometry, wanted, stop)?;
    let used: Vec<&MigProfile> = gpus
        .iter()
        .flat_map(|g| &g.instances)
        .filter_map(|i| table.iter().copied().find(|p| p.name == i.profile))
        .collect();
    let memory_slices: u32 = used.iter().map(|p| u32::from(p.placement_slices)).sum();
    let compute_slices: u32 = used.iter().map(|p| u32::from(p.compute_slices)).sum();
    let lower_bound_gpus = memory_slices
        .div_ceil(u32::from(geometry.total_memory_slices))
        .max(compute_slices.div_ceil(u32::from(geometry.total_compute_slices)));
    Ok(MigPlan {
        gpu_model: gpu_model.to_owned(),
        total_memory_slices: geometry.total_memory_slices,
        mig_parted_yaml: mig_parted(&gpus),
        usable_memory_measured: used.iter().all(|p| p.mem_measured),
        lower_bound_gpus,
        gpus,
    })
}

/// Every replica's instance (the smallest plain profile of `table` whose memory holds it),
/// largest first, equal sizes by name so the layout is deterministic.
fn instances<'a>(
    gpu_model: &str,
    table: &[&'a MigProfile],
    groups: &'a [ReplicaGroup],
) -> Result<Vec<(&'a MigProfile, &'a str)>, MigError> {
    let mut wanted: Vec<(&MigProfile, &str)> = Vec::new();
    for group in groups {
        if group.mem_mib == 0 {
            return Err(MigError::Empty(group.name.clone()));
        }
        let profile = table
            .iter()
            .filter(|p| p.mem_mib >= group.mem_mib)
            .min_by_key(|p| (p.memory_slices, p.compute_slices, p.mem_mib))
            .ok_or_else(|| MigError::TooBig {
                group: group.name.clone(),
                model: gpu_model.to_owned(),
                need_mib: group.mem_mib,
                max_mib: table.iter().map(|p| p.mem_mib).max().unwrap_or(0),
            })?;
        wanted.extend(std::iter::repeat_n(
            (*profile, group.name.as_str()),
            group.replicas as usize,
        ));
    }
    wanted.sort_unstable_by(|(a, an), (b, bn)| {
        (b.placement_slices, b.compute_slices)
            .cmp(&(a.placement_slices, a.compute_slices))
            .then(a.name.cmp(&b.name))
            .then(an.cmp(bn))
    });
    Ok(wanted)
}

/// The instances placed in order, each at the first GPU and start slot where it is valid, a
/// new GPU when none has room (first-fit decreasing).
fn first_fit(
    gpu_model: &str,
    geometry: &MigGeometry,
    wanted: Vec<(&MigProfile, &str)>,
    stop: &dyn Interrupt,
) -> Result<Vec<GpuLayout>, MigError> {
    let mut gpus: Vec<GpuLayout> = Vec::new();
    for (n, (profile, replica)) in wanted.into_iter().enumerate() {
        if n % 64 == 0 && stop.fired() {
            return Err(MigError::Interrupted);
        }
        let placed = gpus
            .iter_mut()
            .any(|gpu| try_place(gpu, geometry, profile, replica));
        if !placed {
            let mut gpu = GpuLayout {
                index: gpus.len() as u32,
                instances: Vec::new(),
                free_memory_slices: geometry.total_memory_slices,
            };
            if !try_place(&mut gpu, geometry, profile, replica) {
                return Err(MigError::NoPlacement(gpu_model.to_owned()));
            }
            gpus.push(gpu);
        }
    }
    Ok(gpus)
}

/// Whether one GPU of `gpu_model` holds `layout` (profile, instances) under the placement
/// rules, largest profiles placed first; the reason when it does not.
pub fn fits_one_gpu(gpu_model: &str, layout: &[(String, u32)]) -> Result<(), String> {
    let model = catalogue::find(gpu_model).map_err(|e| e.to_string())?;
    let Some(geometry) = &model.mig else {
        return Err(format!("{gpu_model} has no MIG"));
    };
    let mut wanted: Vec<&MigProfile> = Vec::new();
    for (name, count) in layout {
        let profile = geometry
            .profiles
            .iter()
            .find(|p| p.name == *name)
            .ok_or_else(|| {
                let known: Vec<&str> = geometry.profiles.iter().map(|p| p.name.as_str()).collect();
                format!(
                    "{gpu_model} has no MIG profile {name}; it has {}",
                    known.join(", ")
                )
            })?;
        if profile.start_slots.is_empty() || profile.placement_slices == 0 {
            return Err(MigError::NoPlacement(gpu_model.to_owned()).to_string());
        }
        wanted.extend(std::iter::repeat_n(profile, *count as usize));
    }
    if wanted.is_empty() {
        return Err("a MIG layout needs at least one instance".to_owned());
    }
    wanted.sort_unstable_by(|a, b| {
        b.placement_slices
            .cmp(&a.placement_slices)
            .then(a.name.cmp(&b.name))
    });
    let mut gpu = GpuLayout {
        index: 0,
        instances: Vec::new(),
        free_memory_slices: geometry.total_memory_slices,
    };
    for profile in wanted {
        if !try_place(&mut gpu, geometry, profile, "") {
            return Err(format!(
                "one {gpu_model} cannot hold this layout: no room left for a {} instance",
                profile.name
            ));
        }
    }
    Ok(())
}

/// Places one instance on `gpu` at the first valid start slot; `false` if none is valid.
fn try_place(
    gpu: &mut GpuLayout,
    geometry: &MigGeometry,
    profile: &MigProfile,
    replica: &str,
) -> bool {
    let same = gpu
        .instances
        .iter()
        .filter(|i| i.profile == profile.name)
        .count();
    if same >= usize::from(profile.max_instances) {
        return false;
    }
    let compute: u8 = gpu.instances.iter().map(|i| i.compute_slices).sum();
    if compute + profile.compute_slices > geometry.total_compute_slices {
        return false;
    }
    for &start in &profile.start_slots {
        let end = start + profile.placement_slices;
        let overlaps = gpu
            .instances
            .iter()
            .any(|i| start < i.start_slice + i.size_slices && i.start_slice < end);
        if end <= geometry.total_memory_slices && !overlaps {
            gpu.instances.push(Instance {
                profile: profile.name.clone(),
                start_slice: start,
                size_slices: profile.placement_slices,
                compute_slices: profile.compute_slices,
                mem_mib: profile.mem_mib,
                replica: replica.to_owned(),
            });
            gpu.instances.sort_unstable_by_key(|i| i.start_slice);
            gpu.free_memory_slices -= profile.placement_slices;
            return true;
        }
    }
    false
}

/// One mig-parted config per distinct layout (`gpufleet-1`, ...), for all devices of the nodes
/// labelled with it (`nvidia.com/mig.config=gpufleet-1`).
fn mig_parted(gpus: &[GpuLayout]) -> String {
    let mut layouts: Vec<(Vec<(String, usize)>, usize)> = Vec::new();
    for gpu in gpus {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for instance in &gpu.instances {
            match counts.iter_mut().find(|(p, _)| *p == instance.profile) {
                Some((_, n)) => *n += 1,
                None => counts.push((instance.profile.clone(), 1)),
            }
        }
        counts.sort_unstable();
        match layouts.iter_mut().find(|(c, _)| *c == counts) {
            Some((_, n)) => *n += 1,
            None => layouts.push((counts, 1)),
        }
    }
    let mut yaml = String::from("version: v1\nmig-configs:\n");
    for (i, (counts, gpus)) in layouts.iter().enumerate() {
        yaml.push_str(&format!(
            "  # {gpus} GPU(s) with this layout\n  gpufleet-{}:\n",
            i + 1
        ));
        yaml.push_str("    - devices: all\n      mig-enabled: true\n      mig-devices:\n");
        for (profile, n) in counts {
            yaml.push_str(&format!("        \"{profile}\": {n}\n"));
        }
    }
    yaml
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(name: &str, gib: f64, replicas: u32) -> ReplicaGroup {
        ReplicaGroup {
            name: name.into(),
            mem_mib: (gib * 1024.0) as u32,
            replicas,
        }
    }

    #[test]
    fn the_h200_uses_what_the_driver_reports() {
        // 17 GiB does not fit the 16 GiB a 1g.18gb really offers: it takes a 1g.35gb.
        let plan = plan("H200-SXM-141GB", &[group("llm", 17.0, 1)]).expect("plan");
        assert_eq!(plan.gpus[0].instances[0].profile, "1g.35gb");
        assert!(plan.usable_memory_measured);
        let plan = super::plan("H200-SXM-141GB", &[group("small", 16.0, 7)]).expect("plan");
        assert_eq!(plan.gpus.len(), 1);
        assert!(
            plan.gpus[0]
                .instances
                .iter()
                .all(|i| i.profile == "1g.18gb")
        );
    }

    #[test]
    fn first_fit_decreasing_fills_gpus_within_the_rules() {
        // 2 × 3g (70 GiB) + 3 × 1g: 3g at slots 0 and 4 fill a GPU; the 1g go to a second.
        let plan = plan(
            "H200-SXM-141GB",
            &[group("big", 60.0, 2), group("small", 10.0, 3)],
        )
        .expect("plan");
        assert_eq!(plan.gpus.len(), 2);
        assert_eq!(plan.lower_bound_gpus, 2);
        let starts: Vec<(String, u8)> = plan.gpus[0]
            .instances
            .iter()
            .map(|i| (i.profile.clone(), i.start_slice))
            .collect();
        assert_eq!(
            starts,
            [("3g.71gb".to_owned(), 0), ("3g.71gb".to_owned(), 4)]
        );
        assert!(plan.mig_parted_yaml.contains("\"3g.71gb\": 2"));
        assert!(plan.mig_parted_yaml.contains("\"1g.18gb\": 3"));
    }

    #[test]
    fn impossible_requests_are_refused_with_a_reason() {
        let too_big = plan("H200-SXM-141GB", &[group("huge", 200.0, 1)]).expect_err("too big");
        assert_eq!(
            too_big.to_string(),
            "huge: a replica needs 204800 MiB but the largest H200-SXM-141GB profile offers 143360 MiB"
        );
        assert!(matches!(
            plan("L40S-48GB", &[group("x", 1.0, 1)]),
            Err(MigError::NoMig(..))
        ));
        assert!(matches!(
            plan("H200-SXM-141GB", &[group("x", 0.0, 1)]),
            Err(MigError::Empty(_))
        ));
    }

    #[test]
    fn replica_groups_carry_their_unit() {
        let g = parse_replica_group("llama:20GiB:4").expect("GiB");
        assert_eq!(
            (g.name.as_str(), g.mem_mib, g.replicas),
            ("llama", 20 * 1024, 4)
        );
        assert_eq!(
            parse_replica_group("e:1.5GiB:1").expect("GiB").mem_mib,
            1536
        );
        assert_eq!(parse_replica_group("e:700MiB:2").expect("MiB").mem_mib, 700);
        for bad in [
            "llama:20:4",
            "llama:20GB:4",
            ":1GiB:1",
            "x:0MiB:1",
            "x:1GiB",
            "x:1GiB:1:2",
        ] {
            assert!(parse_replica_group(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn requests_name_the_bad_field() {
        let request = |gpu_model: &str, groups| MigRequest {
            gpu_model: gpu_model.into(),
            groups,
        };
        let err = request("H200-SXM-141GB", vec![]).plan().expect_err("empty");
        assert_eq!(err[0].path, "groups");
        let err = request("nope", vec![group("a", 1.0, 1)])
            .plan()
            .expect_err("unknown");
        assert_eq!(err[0].path, "gpu_model");
        let err = request(
            "H200-SXM-141GB",
            vec![group("a", 1.0, 1), group("b", 500.0, 1)],
        )
        .plan()
        .expect_err("too big");
        assert_eq!(err[0].path, "groups[1].mem_mib");
        let err = request("H200-SXM-141GB", vec![group("a", 1.0, 10_001)])
            .plan()
            .expect_err("too many");
        assert_eq!(err[0].message, "at most 10000 replicas");
    }

    /// NVIDIA publishes only the RTX PRO 6000's slice counts (`mig_profiles.csv`: 1g ×4, 2g
    /// ×2, 4g ×1 of four slices); the one consistent placement is the A30's published table
    /// (the same geometry), and a layout on it says it is inferred.
    #[test]
    fn the_rtx_pro_6000_is_laid_out_as_its_geometry_allows() {
        let slots = |model: &str| -> Vec<(String, Vec<u8>, u8)> {
            let model = catalogue::find(model).expect("model");
            let geometry = model.mig.as_ref().expect("MIG");
            geometry
                .profiles
                .iter()
                .filter(|p| p.is_plain())
                .map(|p| {
                    let size = p.name.split('.').next().unwrap_or_default().to_owned();
                    (size, p.start_slots.clone(), p.placement_slices)
                })
                .collect()
        };
        assert_eq!(slots("RTX-PRO-6000-96GB"), slots("A30-24GB"));
        // the inference the file holds: every profile starts at each multiple of its size and
        // so fits as many instances as its maximum says, the one consistent placement
        let rtx = catalogue::find("RTX-PRO-6000-96GB").expect("model");
        let geometry = rtx.mig.as_ref().expect("MIG");
        for p in &geometry.profiles {
            let aligned: Vec<u8> = (0..geometry.total_memory_slices)
                .step_by(usize::from(p.memory_slices))
                .collect();
            assert_eq!(
                (&p.start_slots, p.placement_slices),
                (&aligned, p.memory_slices),
                "{}",
                p.name
            );
            assert!(aligned.len() >= usize::from(p.max_instances), "{}", p.name);
        }
        let inferred = |model: &str| {
            let model = catalogue::find(model).expect("model");
            model.mig.as_ref().is_some_and(|g| g.placement_inferred)
        };
        assert!(inferred("RTX-PRO-6000-96GB") && !inferred("A30-24GB"));
        // two 40 GiB replicas take 2g.48gb at slices 0 and 2, three 20 GiB replicas 1g.24gb on
        // a second GPU at 0, 1 and 2
        let layout = plan(
            "RTX-PRO-6000-96GB",
            &[group("big", 40.0, 2), group("small", 20.0, 3)],
        )
        .expect("a layout");
        assert!(layout.placement_inferred());
        let placed: Vec<Vec<(String, u8)>> = layout
            .gpus
            .iter()
            .map(|g| {
                g.instances
                    .iter()
                    .map(|i| (i.profile.clone(), i.start_slice))
                    .collect()
            })
            .collect();
        assert_eq!(
            placed,
            [
                vec![("2g.48gb".to_owned(), 0), ("2g.48gb".to_owned(), 2)],
                vec![
                    ("1g.24gb".to_owned(), 0),
                    ("1g.24gb".to_owned(), 1),
                    ("1g.24gb".to_owned(), 2)
                ],
            ]
        );
    }

    #[test]
    fn unknown_and_non_mig_models_are_told_apart() {
        assert!(matches!(
            plan("H200-141GB", &[group("x", 1.0, 1)]),
            Err(MigError::UnknownModel(_))
        ));
        let err = plan("L40S-48GB", &[group("x", 1.0, 1)]).expect_err("no MIG");
        assert!(
            err.to_string()
                .starts_with("L40S-48GB has no MIG (MIG models: ")
        );
    }
}
