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

/// A MIG profile of one GPU model (a row of `shared/data/mig_profiles.csv`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub gpu_model: String,
    pub name: String,
    pub compute_slices: u8,
    pub memory_slices: u8,
    pub max_instances: u8,
    pub start_slots: Vec<u8>,
    pub placement_slices: u8,
    pub total_compute_slices: u8,
    pub total_memory_slices: u8,
    /// Memory the instance offers, in MiB.
    pub mem_mib: u32,
    /// `true` when `mem_mib` is a driver reading, `false` when it is the nominal size.
    pub mem_measured: bool,
}

const PROFILES_CSV: &str = include_str!("../../data/mig_profiles.csv");

/// Every profile in the table, in file order.
pub fn profiles() -> Vec<Profile> {
    PROFILES_CSV
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<u8>().ok());
            let nominal_gb: f64 = f.get(4)?.parse().ok()?;
            let measured = f.get(10).and_then(|v| v.parse::<u32>().ok());
            Some(Profile {
                gpu_model: f.first()?.to_string(),
                name: f.get(1)?.to_string(),
                compute_slices: num(2)?,
                memory_slices: num(3)?,
                max_instances: num(5)?,
                start_slots: f
                    .get(6)?
                    .split(';')
                    .filter_map(|s| s.parse().ok())
                    .collect(),
                placement_slices: num(7).unwrap_or(0),
                total_compute_slices: num(8)?,
                total_memory_slices: num(9)?,
                mem_mib: measured.unwrap_or((nominal_gb * 1024.0).round() as u32),
                mem_measured: measured.is_some(),
            })
        })
        .collect()
}

/// GPU models with a MIG profile table.
pub fn mig_models() -> Vec<String> {
    let mut models: Vec<String> = profiles().into_iter().map(|p| p.gpu_model).collect();
    models.dedup();
    models
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum MigError {
    #[error("{0} has no MIG profile table here (MIG models: {1})")]
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
}

/// Lays out `groups` on GPUs of `gpu_model`. Each replica gets the smallest plain profile
/// (no media extensions) whose memory holds it; instances are placed largest first, each at the
/// first GPU and start slot where it is valid (first-fit decreasing).
pub fn plan(gpu_model: &str, groups: &[ReplicaGroup]) -> Result<MigPlan, MigError> {
    let table: Vec<Profile> = profiles()
        .into_iter()
        .filter(|p| p.gpu_model == gpu_model && !p.name.contains(['+', '-']))
        .collect();
    if table.is_empty() {
        return Err(MigError::NoMig(
            gpu_model.to_owned(),
            mig_models().join(", "),
        ));
    }
    if table
        .iter()
        .any(|p| p.start_slots.is_empty() || p.placement_slices == 0)
    {
        return Err(MigError::NoPlacement(gpu_model.to_owned()));
    }
    let mut wanted: Vec<(&Profile, &str)> = Vec::new();
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
            (profile, group.name.as_str()),
            group.replicas as usize,
        ));
    }
    // Largest first; equal sizes by name so the layout is deterministic.
    wanted.sort_by(|(a, an), (b, bn)| {
        (b.placement_slices, b.compute_slices)
            .cmp(&(a.placement_slices, a.compute_slices))
            .then(a.name.cmp(&b.name))
            .then(an.cmp(bn))
    });
    let first = &table[0];
    let mut gpus: Vec<GpuLayout> = Vec::new();
    for (profile, replica) in wanted {
        let placed = gpus.iter_mut().any(|gpu| try_place(gpu, profile, replica));
        if !placed {
            let mut gpu = GpuLayout {
                index: gpus.len() as u32,
                instances: Vec::new(),
                free_memory_slices: first.total_memory_slices,
            };
            if !try_place(&mut gpu, profile, replica) {
                return Err(MigError::NoPlacement(gpu_model.to_owned()));
            }
            gpus.push(gpu);
        }
    }
    let used: Vec<&Profile> = gpus
        .iter()
        .flat_map(|g| &g.instances)
        .filter_map(|i| table.iter().find(|p| p.name == i.profile))
        .collect();
    let memory_slices: u32 = used.iter().map(|p| u32::from(p.placement_slices)).sum();
    let compute_slices: u32 = used.iter().map(|p| u32::from(p.compute_slices)).sum();
    let lower_bound_gpus = memory_slices
        .div_ceil(u32::from(first.total_memory_slices))
        .max(compute_slices.div_ceil(u32::from(first.total_compute_slices)));
    Ok(MigPlan {
        gpu_model: gpu_model.to_owned(),
        total_memory_slices: first.total_memory_slices,
        mig_parted_yaml: mig_parted(&gpus),
        usable_memory_measured: used.iter().all(|p| p.mem_measured),
        lower_bound_gpus,
        gpus,
    })
}

/// Places one instance on `gpu` at the first valid start slot; `false` if none is valid.
fn try_place(gpu: &mut GpuLayout, profile: &Profile, replica: &str) -> bool {
    let same = gpu
        .instances
        .iter()
        .filter(|i| i.profile == profile.name)
        .count();
    if same >= usize::from(profile.max_instances) {
        return false;
    }
    let compute: u8 = gpu.instances.iter().map(|i| i.compute_slices).sum();
    if compute + profile.compute_slices > profile.total_compute_slices {
        return false;
    }
    for &start in &profile.start_slots {
        let end = start + profile.placement_slices;
        let overlaps = gpu
            .instances
            .iter()
            .any(|i| start < i.start_slice + i.size_slices && i.start_slice < end);
        if end <= profile.total_memory_slices && !overlaps {
            gpu.instances.push(Instance {
                profile: profile.name.clone(),
                start_slice: start,
                size_slices: profile.placement_slices,
                compute_slices: profile.compute_slices,
                mem_mib: profile.mem_mib,
                replica: replica.to_owned(),
            });
            gpu.instances.sort_by_key(|i| i.start_slice);
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
        counts.sort();
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
        let plan = plan("H200-141GB", &[group("llm", 17.0, 1)]).expect("plan");
        assert_eq!(plan.gpus[0].instances[0].profile, "1g.35gb");
        assert!(plan.usable_memory_measured);
        let plan = super::plan("H200-141GB", &[group("small", 16.0, 7)]).expect("plan");
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
            "H200-141GB",
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
        let too_big = plan("H200-141GB", &[group("huge", 200.0, 1)]).expect_err("too big");
        assert_eq!(
            too_big.to_string(),
            "huge: a replica needs 204800 MiB but the largest H200-141GB profile offers 143360 MiB"
        );
        assert!(matches!(
            plan("L40S", &[group("x", 1.0, 1)]),
            Err(MigError::NoMig(..))
        ));
        assert!(matches!(
            plan("RTX-PRO-6000-96GB", &[group("x", 1.0, 1)]),
            Err(MigError::NoPlacement(_))
        ));
        assert!(matches!(
            plan("H200-141GB", &[group("x", 0.0, 1)]),
            Err(MigError::Empty(_))
        ));
    }

    #[test]
    fn the_table_is_complete() {
        let all = profiles();
        assert_eq!(all.len(), 72);
        let h200: Vec<&Profile> = all.iter().filter(|p| p.gpu_model == "H200-141GB").collect();
        assert_eq!(h200.len(), 7);
        assert!(h200.iter().all(|p| p.mem_measured));
    }
}
