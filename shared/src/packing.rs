//! Fractional-GPU placement: replay a pod list onto a node list with a policy, and measure
//! allocation and fragmentation exactly as the FGD paper defines them (USENIX ATC '23; the
//! definitions are restated in `docs/packing.md`, "What is measured").
//!
//! Invariants: a GPU holds at most 1000 milli-GPU; per node, allocated + free = capacity for
//! CPU, memory and every GPU; a whole-GPU pod only takes fully free GPUs; a sharing pod takes
//! room on exactly one GPU. Replays are deterministic for a given seed.

pub mod csv;
pub mod mig;
mod policy;
pub mod protocol;

use serde::{Deserialize, Serialize};

pub use policy::Policy;

/// The most GPUs a node may have (openb nodes have 0-8).
pub const MAX_GPUS_PER_NODE: u8 = 8;
/// One whole GPU in milli-GPU.
pub const GPU_MILLI: u16 = 1000;

/// A node as the input lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSpec {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub gpus: u8,
    /// GPU model, e.g. `V100M32`; empty for CPU-only nodes.
    pub model: String,
}

/// A pod as the input lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodSpec {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    /// Whole GPUs wanted (0-8); 1 with `gpu_milli < 1000` is a sharing pod.
    pub num_gpu: u8,
    /// Milli-GPU wanted on each of its GPUs (0-1000).
    pub gpu_milli: u16,
    /// Allowed GPU models; empty means any.
    pub gpu_spec: Vec<String>,
}

impl PodSpec {
    pub fn gpu_milli_total(&self) -> i64 {
        i64::from(self.num_gpu) * i64::from(self.gpu_milli)
    }
}

/// A pod reduced to what placement needs. `spec` is a bit set over the cluster's model ids;
/// 0 allows every model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Task {
    pub cpu: i64,
    pub mem: i64,
    pub k: u8,
    pub d: u16,
    pub spec: u64,
}

impl Task {
    pub fn is_sharing(&self) -> bool {
        self.k == 1 && self.d < GPU_MILLI
    }

    pub fn gpu_total(&self) -> i64 {
        i64::from(self.k) * i64::from(self.d)
    }
}

/// One node's free resources.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeState {
    pub cpu_free: i64,
    pub mem_free: i64,
    pub gpus: u8,
    pub gpu_free: [u16; MAX_GPUS_PER_NODE as usize],
    /// Bit of the node's model (0 for CPU-only nodes).
    pub model_bit: u64,
    /// Pods placed here.
    pub pods: u32,
    /// F_n(M) for the current state, kept up to date.
    pub frag: f64,
}

impl NodeState {
    pub fn free(&self) -> &[u16] {
        &self.gpu_free[..usize::from(self.gpus)]
    }

    pub fn gpu_free_total(&self) -> i64 {
        self.free().iter().map(|&r| i64::from(r)).sum()
    }

    /// Whether `task` fits: CPU, memory, model, and GPU room.
    pub fn fits(&self, task: &Task) -> bool {
        if task.cpu > self.cpu_free || task.mem > self.mem_free {
            return false;
        }
        if task.k == 0 {
            return true;
        }
        if task.spec != 0 && task.spec & self.model_bit == 0 {
            return false;
        }
        let roomy = self.free().iter().filter(|&&r| r >= task.d).count();
        roomy >= usize::from(task.k)
    }
}

/// A task class of the target workload M, with its weight p_m.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Class {
    pub task: Task,
    pub weight: f64,
}

/// The target workload: the most frequent task classes of the original pod list covering at
/// least 95% of its pods, their frequencies renormalised to sum to 1.
pub(crate) fn target_workload(tasks: &[Task]) -> Vec<Class> {
    let mut counts: Vec<(Task, usize)> = Vec::new();
    for task in tasks {
        // Memory is not part of a class.
        let key = Task { mem: 0, ..*task };
        match counts.iter_mut().find(|(t, _)| *t == key) {
            Some((_, n)) => *n += 1,
            None => counts.push((key, 1)),
        }
    }
    // Highest count first; ties in a fixed order so the result does not depend on input order.
    counts.sort_by(|(a, n), (b, m)| {
        m.cmp(n)
            .then((a.cpu, a.d, a.k, a.spec).cmp(&(b.cpu, b.d, b.k, b.spec)))
    });
    let needed = (tasks.len() * 95).div_ceil(100);
    let mut covered = 0;
    let mut kept = Vec::new();
    for (task, n) in counts {
        if covered >= needed {
            break;
        }
        covered += n;
        kept.push((task, n));
    }
    let total: usize = kept.iter().map(|(_, n)| n).sum();
    // Sorted by per-GPU demand so `node_fragmentation` counts each distinct d once.
    kept.sort_by_key(|(t, _)| (t.d, t.k, t.cpu, t.spec));
    kept.into_iter()
        .map(|(task, n)| Class {
            task,
            weight: n as f64 / total as f64,
        })
        .collect()
}

/// F_n(M): the GPU milli of a node that the target workload could not use, weighted by class
/// frequency (the paper's definition, section 4 of the eval README).
pub(crate) fn node_fragmentation(
    classes: &[Class],
    model_bit: u64,
    cpu_free: i64,
    free: &[u16],
) -> f64 {
    let total: u32 = free.iter().map(|&r| u32::from(r)).sum();
    if total == 0 {
        return 0.0;
    }
    let mut frag = 0.0;
    // Classes come sorted by d (see `target_workload`): count once per distinct d.
    let (mut last_d, mut roomy, mut small) = (0u16, 0u8, 0u32);
    for class in classes {
        let t = &class.task;
        let unusable = if t.d == 0 || (t.spec != 0 && t.spec & model_bit == 0) {
            total
        } else {
            if t.d != last_d {
                (last_d, roomy, small) = (t.d, 0, 0);
                for &r in free {
                    if r >= t.d {
                        roomy += 1;
                    } else {
                        small += u32::from(r);
                    }
                }
            }
            if roomy < t.k || cpu_free < t.cpu {
                total
            } else {
                small
            }
        };
        frag += class.weight * f64::from(unusable);
    }
    frag
}

/// Where a pod goes: a node and, for GPU pods, which GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    pub node: usize,
    pub gpus: Vec<u8>,
}

/// The cluster during a replay.
pub(crate) struct Cluster {
    pub nodes: Vec<NodeState>,
    pub classes: Vec<Class>,
    /// Total GPU capacity in milli-GPU.
    pub capacity_milli: i64,
    pub allocated_milli: i64,
    /// F(M) = Σ_n F_n(M).
    pub frag: f64,
}

impl Cluster {
    pub fn new(nodes: &[NodeSpec], models: &[String], classes: Vec<Class>) -> Self {
        let nodes: Vec<NodeState> = nodes
            .iter()
            .map(|n| {
                let model_bit = models
                    .iter()
                    .position(|m| *m == n.model)
                    .map_or(0, |i| 1u64 << i);
                let mut gpu_free = [0; MAX_GPUS_PER_NODE as usize];
                gpu_free[..usize::from(n.gpus)].fill(GPU_MILLI);
                let free = &gpu_free[..usize::from(n.gpus)];
                NodeState {
                    cpu_free: n.cpu_milli,
                    mem_free: n.memory_mib,
                    gpus: n.gpus,
                    gpu_free,
                    model_bit,
                    pods: 0,
                    frag: node_fragmentation(&classes, model_bit, n.cpu_milli, free),
                }
            })
            .collect();
        let capacity_milli = nodes
            .iter()
            .map(|n| i64::from(n.gpus) * i64::from(GPU_MILLI))
            .sum();
        let frag = nodes.iter().map(|n| n.frag).sum();
        Self {
            nodes,
            classes,
            capacity_milli,
            allocated_milli: 0,
            frag,
        }
    }

    /// Applies a placement (which must fit) and keeps the totals exact.
    pub fn place(&mut self, task: &Task, placement: &Placement) {
        let node = &mut self.nodes[placement.node];
        node.cpu_free -= task.cpu;
        node.mem_free -= task.mem;
        for &g in &placement.gpus {
            node.gpu_free[usize::from(g)] -= task.d;
        }
        node.pods += 1;
        let frag = node_fragmentation(&self.classes, node.model_bit, node.cpu_free, node.free());
        self.frag += frag - node.frag;
        node.frag = frag;
        self.allocated_milli += task.gpu_total();
    }

    pub fn idle_milli(&self) -> i64 {
        self.capacity_milli - self.allocated_milli
    }
}

/// Which GPUs of `node` a task takes when the policy only chooses the node: whole-GPU tasks
/// take the first fully free GPUs; a sharing task takes the fullest GPU it fits on (best fit).
pub(crate) fn best_fit_gpus(node: &NodeState, task: &Task) -> Vec<u8> {
    if task.k == 0 {
        return Vec::new();
    }
    if task.is_sharing() {
        let best = node
            .free()
            .iter()
            .enumerate()
            .filter(|(_, r)| **r >= task.d)
            .min_by_key(|(i, r)| (**r, *i))
            .map(|(i, _)| i as u8);
        return best.into_iter().collect();
    }
    node.free()
        .iter()
        .enumerate()
        .filter(|(_, r)| **r == GPU_MILLI)
        .take(usize::from(task.k))
        .map(|(i, _)| i as u8)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(cpu: i64, k: u8, d: u16) -> Task {
        Task {
            cpu,
            mem: 0,
            k,
            d,
            spec: 0,
        }
    }

    fn classes(list: &[(Task, f64)]) -> Vec<Class> {
        list.iter()
            .map(|&(task, weight)| Class { task, weight })
            .collect()
    }

    /// Hand-computed: free GPUs [1000, 500, 200, 0], CPU 8000 free.
    #[test]
    fn fragmentation_formula_by_hand() {
        let free = [1000, 500, 200, 0];
        let one = |t: Task| node_fragmentation(&classes(&[(t, 1.0)]), 1, 8000, &free);
        // A CPU-only task cannot use any GPU: all 1700 idle milli are fragment.
        assert_eq!(one(task(1000, 0, 0)), 1700.0);
        // A 300-milli task fits on 1000 and 500; only the 200 is too small.
        assert_eq!(one(task(1000, 1, 300)), 200.0);
        // A 600-milli task fits only on the 1000: 500 + 200 are fragment.
        assert_eq!(one(task(1000, 1, 600)), 700.0);
        // Two whole GPUs do not fit (one free GPU): everything is fragment.
        assert_eq!(one(task(1000, 2, 1000)), 1700.0);
        // One whole GPU fits: the partial GPUs are fragment.
        assert_eq!(one(task(1000, 1, 1000)), 700.0);
        // Not enough CPU: nothing fits.
        assert_eq!(one(task(9000, 1, 100)), 1700.0);
        // A model the task may not use.
        assert_eq!(
            one(Task {
                spec: 2,
                ..task(1000, 1, 100)
            }),
            1700.0
        );
        // Weighted sum over classes: 0.25·200 + 0.75·700.
        let mixed = classes(&[(task(1000, 1, 300), 0.25), (task(1000, 1, 600), 0.75)]);
        assert_eq!(node_fragmentation(&mixed, 1, 8000, &free), 575.0);
        // A full node has no fragment.
        assert_eq!(node_fragmentation(&mixed, 1, 8000, &[0, 0]), 0.0);
    }

    #[test]
    fn the_target_workload_keeps_the_top_classes_to_95_percent() {
        let mut tasks = vec![task(1000, 1, 500); 90];
        tasks.extend(vec![task(2000, 1, 1000); 6]);
        tasks.extend(vec![task(500, 0, 0); 4]);
        let m = target_workload(&tasks);
        // 90 + 6 = 96 ≥ 95: the CPU-only class is dropped; weights renormalised over 96.
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].task, task(1000, 1, 500));
        assert!((m[0].weight - 90.0 / 96.0).abs() < 1e-12);
        assert!((m[1].weight - 6.0 / 96.0).abs() < 1e-12);
    }

    #[test]
    fn placement_keeps_totals_exact() {
        let specs = [NodeSpec {
            name: "n".into(),
            cpu_milli: 8000,
            memory_mib: 100,
            gpus: 2,
            model: "A".into(),
        }];
        let m = classes(&[(task(1000, 1, 300), 1.0)]);
        let mut cluster = Cluster::new(&specs, &["A".to_owned()], m);
        assert_eq!(cluster.frag, 0.0);
        let t = Task {
            mem: 10,
            ..task(1000, 1, 800)
        };
        let gpus = best_fit_gpus(&cluster.nodes[0], &t);
        cluster.place(&t, &Placement { node: 0, gpus });
        assert_eq!(cluster.nodes[0].free(), &[200, 1000]);
        assert_eq!(cluster.allocated_milli, 800);
        assert_eq!(cluster.idle_milli(), 1200);
        // The 200 left on GPU 0 cannot hold a 300 task.
        assert_eq!(cluster.frag, 200.0);
        // Best fit puts the next small task on the fuller GPU that still fits.
        let small = task(0, 1, 150);
        assert_eq!(best_fit_gpus(&cluster.nodes[0], &small), vec![0]);
        let whole = task(0, 1, 1000);
        assert_eq!(best_fit_gpus(&cluster.nodes[0], &whole), vec![1]);
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::{policy::Chooser, *};
    use crate::common::rng::Rng;

    fn arb_nodes() -> impl Strategy<Value = Vec<NodeSpec>> {
        prop::collection::vec((1i64..64, 1i64..512, 0u8..=8, 0usize..3), 1..12).prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (cpu, mem, gpus, model))| NodeSpec {
                    name: format!("n{i}"),
                    cpu_milli: cpu * 1000,
                    memory_mib: mem * 1024,
                    gpus,
                    model: ["A", "B", "C"][model].to_owned(),
                })
                .collect()
        })
    }

    fn arb_tasks() -> impl Strategy<Value = Vec<Task>> {
        let task = (
            0i64..16,
            0i64..64,
            prop_oneof![
                Just((0u8, 0u16)),
                (1u16..1000).prop_map(|d| (1, d)),
                (1u8..=4).prop_map(|k| (k, 1000))
            ],
            0u64..8,
        )
            .prop_map(|(cpu, mem, (k, d), spec)| Task {
                cpu: cpu * 1000,
                mem: mem * 1024,
                k,
                d,
                spec: if k == 0 { 0 } else { spec },
            });
        prop::collection::vec(task, 1..80)
    }

    proptest! {
        /// No GPU is ever over-allocated, and for every node and GPU, allocated + free =
        /// capacity; the cluster's running totals match a recount.
        #[test]
        fn placements_conserve_capacity(nodes in arb_nodes(), tasks in arb_tasks(), policy in 0usize..Policy::ALL.len(), seed in 0u64..1000) {
            let policy = Policy::ALL[policy];
            let models = vec!["A".to_owned(), "B".to_owned(), "C".to_owned()];
            let mut cluster = Cluster::new(&nodes, &models, target_workload(&tasks));
            let rank: Vec<u32> = (0..nodes.len() as u32).collect();
            let mut chooser = Chooser::new(&cluster, rank, Rng::new(seed));
            let mut allocated = vec![[0u16; 8]; nodes.len()];
            let mut cpu_used = vec![0i64; nodes.len()];
            for task in &tasks {
                let fits_somewhere = cluster.nodes.iter().any(|n| n.fits(task));
                let Some(placement) = chooser.choose(policy, &cluster, task) else {
                    prop_assert!(!fits_somewhere, "{policy:?} dropped a pod that fits");
                    continue;
                };
                prop_assert!(cluster.nodes[placement.node].fits(task));
                prop_assert_eq!(placement.gpus.len(), usize::from(task.k));
                for &g in &placement.gpus {
                    prop_assert!(cluster.nodes[placement.node].gpu_free[usize::from(g)] >= task.d);
                    if !task.is_sharing() {
                        prop_assert_eq!(cluster.nodes[placement.node].gpu_free[usize::from(g)], GPU_MILLI);
                    }
                    allocated[placement.node][usize::from(g)] += task.d;
                }
                cpu_used[placement.node] += task.cpu;
                cluster.place(task, &placement);
                chooser.placed(placement.node);
            }
            let mut total = 0i64;
            for (i, node) in cluster.nodes.iter().enumerate() {
                for (&used, &free) in allocated[i].iter().zip(node.free()) {
                    prop_assert!(used <= GPU_MILLI);
                    prop_assert_eq!(used + free, GPU_MILLI);
                    total += i64::from(used);
                }
                prop_assert_eq!(cpu_used[i] + node.cpu_free, nodes[i].cpu_milli);
                prop_assert!(node.cpu_free >= 0 && node.mem_free >= 0);
            }
            prop_assert_eq!(cluster.allocated_milli, total);
            prop_assert_eq!(cluster.allocated_milli + cluster.idle_milli(), cluster.capacity_milli);
            let recount: f64 = cluster.nodes.iter().map(|n| node_fragmentation(&cluster.classes, n.model_bit, n.cpu_free, n.free())).sum();
            prop_assert!((recount - cluster.frag).abs() < 1e-6 * (1.0 + recount.abs()));
        }

        /// Every MIG layout is valid under the placement rules and holds every replica.
        #[test]
        fn mig_layouts_are_valid(groups in prop::collection::vec((1u32..150_000, 1u32..6), 1..6), model in 0usize..4) {
            let model = ["H200-SXM-141GB", "A100-SXM4-40GB", "A30-24GB", "H100-SXM5-80GB"][model];
            let groups: Vec<mig::ReplicaGroup> = groups.into_iter().enumerate()
                .map(|(i, (mem_mib, replicas))| mig::ReplicaGroup { name: format!("g{i}"), mem_mib, replicas })
                .collect();
            let geometry = crate::fleet::catalogue::find(model).expect("catalogue model").mig.clone().expect("MIG model");
            match mig::plan(model, &groups) {
                Err(mig::MigError::TooBig { need_mib, max_mib, .. }) => prop_assert!(need_mib > max_mib),
                Err(other) => prop_assert!(false, "unexpected {other}"),
                Ok(plan) => {
                    let wanted: u32 = groups.iter().map(|g| g.replicas).sum();
                    let placed: usize = plan.gpus.iter().map(|g| g.instances.len()).sum();
                    prop_assert_eq!(placed as u32, wanted);
                    prop_assert!(plan.gpus.len() as u32 >= plan.lower_bound_gpus);
                    for gpu in &plan.gpus {
                        let mut compute = 0u8;
                        for (i, a) in gpu.instances.iter().enumerate() {
                            let p = geometry.profiles.iter().find(|p| p.name == a.profile).expect("known profile");
                            prop_assert!(p.start_slots.contains(&a.start_slice));
                            prop_assert!(a.start_slice + a.size_slices <= geometry.total_memory_slices);
                            let need = groups.iter().find(|g| g.name == a.replica).map(|g| g.mem_mib).unwrap_or(u32::MAX);
                            prop_assert!(a.mem_mib >= need);
                            let same = gpu.instances.iter().filter(|b| b.profile == a.profile).count();
                            prop_assert!(same <= usize::from(p.max_instances));
                            for b in &gpu.instances[i + 1..] {
                                prop_assert!(a.start_slice + a.size_slices <= b.start_slice || b.start_slice + b.size_slices <= a.start_slice);
                            }
                            compute += a.compute_slices;
                            prop_assert!(compute <= geometry.total_compute_slices);
                        }
                    }
                }
            }
        }
    }
}
