//! The paper's replay protocol: shuffle the pod list with the seed, inflate it to 130% of the
//! cluster's GPU capacity by sampling with replacement (or trim it), submit the pods one at a
//! time with no departures, and record allocation and fragmentation after every pod, read at
//! each whole arrived-workload percentage.

use serde::{Deserialize, Serialize};

use super::{Cluster, NodeSpec, PodSpec, Policy, Task, policy::Chooser, target_workload};
use crate::common::interrupt::{Interrupt, Never};
use crate::common::rng::Rng;

/// Inflation of the paper: arrivals up to 130% of capacity.
pub const PAPER_INFLATE: f64 = 1.3;
/// A model bit no node carries (models take bits 0-62).
const NO_MODEL: u64 = 1 << 63;
/// The highest arrival level reported.
pub const MAX_ARRIVED_PCT: u32 = 130;

/// The figures at one arrived-workload percentage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Arrived GPU request (failed pods included) as a whole % of GPU capacity.
    pub arrived_pct: u32,
    /// Σ allocated milli-GPU / capacity, in %.
    pub allocation_pct: f64,
    /// 100 − allocation.
    pub unallocated_pct: f64,
    /// F(M) / capacity, in %.
    pub frag_amount_pct: f64,
    /// F(M) / idle GPU, in %.
    pub frag_ratio_pct: f64,
}

/// The result of one replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackReport {
    pub policy: Policy,
    pub seed: u64,
    pub inflate: f64,
    pub nodes: usize,
    pub gpus: i64,
    /// Pods submitted (after inflation or trimming).
    pub pods_submitted: usize,
    /// Pods that fitted nowhere and were dropped.
    pub pods_failed: usize,
    /// Of those, pods that asked for GPUs.
    pub gpu_pods_failed: usize,
    /// The headline: unallocated GPU % at 100% arrival (None when arrivals never reach it).
    pub unallocated_pct_at_100: Option<f64>,
    pub frag_amount_pct_at_100: Option<f64>,
    /// One point per whole arrived percentage from 0 to the last reached.
    pub points: Vec<Point>,
}

impl PackReport {
    pub fn at(&self, arrived_pct: u32) -> Option<&Point> {
        self.points.iter().find(|p| p.arrived_pct == arrived_pct)
    }
}

/// Input problems: what the user must change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackError {
    #[error("the node list has no GPUs")]
    NoGpus,
    #[error("the node list has more than 63 GPU models")]
    TooManyModels,
    #[error("no pod in the list asks for a GPU")]
    NoGpuPods,
    #[error("inflate must be between 0.1 and 10, got {0}")]
    BadInflate(String),
    #[error(
        "this replay would place about {arrivals} pods on {nodes} nodes; at most {MAX_ARRIVALS} pods and {MAX_PLACEMENT_WORK} pod × node placements (lower inflate, or send fewer nodes or larger pods)"
    )]
    TooMuchWork { arrivals: u64, nodes: usize },
    #[error("the replay was stopped before it finished")]
    Interrupted,
}

impl PackError {
    /// The request field the error is about.
    pub fn field(&self) -> &'static str {
        match self {
            PackError::NoGpus | PackError::TooManyModels => "nodes",
            PackError::NoGpuPods => "pods",
            PackError::BadInflate(_) | PackError::TooMuchWork { .. } => "inflate",
            PackError::Interrupted => "-",
        }
    }
}

/// The most pods one replay may place, and pods × nodes (each placement scores every node).
/// For scale: the paper's `default` list at 130% (10,824 pods on 1,213 nodes, 13 million) takes
/// ~60 ms on one core.
pub const MAX_ARRIVALS: u64 = 1_000_000;
pub const MAX_PLACEMENT_WORK: u64 = 500_000_000;

/// How many pods [`replay`] will submit: `inflate` × capacity ÷ the mean GPU request.
fn estimated_arrivals(tasks: &[Task], inflate: f64, capacity_milli: i64) -> Option<u64> {
    let total: i64 = tasks.iter().map(Task::gpu_total).sum();
    if total <= 0 {
        return None;
    }
    let mean = total as f64 / tasks.len() as f64;
    let wanted = inflate * capacity_milli as f64 / mean;
    Some(wanted.max(tasks.len() as f64).min(u64::MAX as f64) as u64)
}

/// Replays `pods` onto `nodes` with `policy`, under the paper's protocol with `seed`.
pub fn replay(
    nodes: &[NodeSpec],
    pods: &[PodSpec],
    policy: Policy,
    seed: u64,
    inflate: f64,
) -> Result<PackReport, PackError> {
    replay_until(nodes, pods, policy, seed, inflate, &Never)
}

/// [`replay`], refusing work over the limits before it starts and stopping when `stop` fires.
pub fn replay_until(
    nodes: &[NodeSpec],
    pods: &[PodSpec],
    policy: Policy,
    seed: u64,
    inflate: f64,
    stop: &dyn Interrupt,
) -> Result<PackReport, PackError> {
    let (tasks, mut cluster) = bounded_start(nodes, pods, inflate)?;
    let order = arrivals(pods, &tasks, seed, inflate, cluster.capacity_milli);
    let ranks = node_ranks(nodes.len(), seed);
    let mut chooser = Chooser::new(&cluster, ranks, Rng::new(seed ^ 0x0A11_CA7E));
    let mut samples: Vec<(f64, Sample)> = Vec::with_capacity(order.len());
    let (mut arrived, mut failed, mut gpu_failed) = (0i64, 0usize, 0usize);
    for (n, &i) in order.iter().enumerate() {
        if n % 256 == 0 && stop.fired() {
            return Err(PackError::Interrupted);
        }
        let task = tasks[i];
        arrived += task.gpu_total();
        match chooser.choose(policy, &cluster, &task) {
            Some(placement) => {
                cluster.place(&task, &placement);
                chooser.placed(placement.node);
            }
            None => {
                failed += 1;
                gpu_failed += usize::from(task.k > 0);
            }
        }
        samples.push(sample(&cluster, arrived));
    }
    let points = discretize(&samples);
    let at_100 = points.iter().find(|p| p.arrived_pct == 100);
    Ok(PackReport {
        policy,
        seed,
        inflate,
        nodes: nodes.len(),
        gpus: cluster.capacity_milli / 1000,
        pods_submitted: order.len(),
        pods_failed: failed,
        gpu_pods_failed: gpu_failed,
        unallocated_pct_at_100: at_100.map(|p| p.unallocated_pct),
        frag_amount_pct_at_100: at_100.map(|p| p.frag_amount_pct),
        points,
    })
}

/// The replay's tasks and empty cluster, once the inputs are known to be within the limits:
/// an inflation in 0.1-10, at most 63 GPU models, some GPUs, some GPU pods, and an estimated
/// amount of work under [`MAX_ARRIVALS`] and [`MAX_PLACEMENT_WORK`].
fn bounded_start(
    nodes: &[NodeSpec],
    pods: &[PodSpec],
    inflate: f64,
) -> Result<(Vec<Task>, Cluster), PackError> {
    if !(0.1..=10.0).contains(&inflate) {
        return Err(PackError::BadInflate(inflate.to_string()));
    }
    let mut models: Vec<String> = nodes
        .iter()
        .filter(|n| n.gpus > 0)
        .map(|n| n.model.clone())
        .collect();
    models.sort();
    models.dedup();
    if models.len() > 63 {
        return Err(PackError::TooManyModels);
    }
    let tasks: Vec<Task> = pods.iter().map(|p| task_of(p, &models)).collect();
    let cluster = Cluster::new(nodes, &models, target_workload(&tasks));
    if cluster.capacity_milli == 0 {
        return Err(PackError::NoGpus);
    }
    let arrivals_estimate =
        estimated_arrivals(&tasks, inflate, cluster.capacity_milli).ok_or(PackError::NoGpuPods)?;
    if arrivals_estimate > MAX_ARRIVALS
        || arrivals_estimate.saturating_mul(nodes.len() as u64) > MAX_PLACEMENT_WORK
    {
        return Err(PackError::TooMuchWork {
            arrivals: arrivals_estimate,
            nodes: nodes.len(),
        });
    }
    Ok((tasks, cluster))
}

/// Each node's place in the seed's random order, the order ties between nodes are broken in
/// (as the paper's patched scheduler does).
fn node_ranks(nodes: usize, seed: u64) -> Vec<u32> {
    let mut rank_rng = Rng::new(seed ^ 0x005E_ED0F_0DE5);
    let mut perm: Vec<usize> = (0..nodes).collect();
    rank_rng.shuffle(&mut perm);
    let mut rank = vec![0u32; nodes];
    for (position, &node) in perm.iter().enumerate() {
        rank[node] = position as u32;
    }
    rank
}

/// The cluster after `arrived` milli-GPUs of pods have arrived: (arrived % of capacity,
/// allocation and fragmentation %).
fn sample(cluster: &Cluster, arrived: i64) -> (f64, Sample) {
    let capacity = cluster.capacity_milli as f64;
    let frag_ratio = if cluster.idle_milli() > 0 {
        cluster.frag / cluster.idle_milli() as f64 * 100.0
    } else {
        0.0
    };
    let sample = Sample {
        allocated: cluster.allocated_milli as f64 / capacity * 100.0,
        frag_amount: cluster.frag / capacity * 100.0,
        frag_ratio,
    };
    (arrived as f64 / capacity * 100.0, sample)
}

fn task_of(pod: &PodSpec, models: &[String]) -> Task {
    let spec = if pod.gpu_spec.is_empty() {
        0
    } else {
        let mask = pod
            .gpu_spec
            .iter()
            .filter_map(|m| models.iter().position(|x| x == m))
            .fold(0u64, |mask, i| mask | (1 << i));
        // A spec naming only absent models can never be met: a bit no node has.
        if mask == 0 { NO_MODEL } else { mask }
    };
    Task {
        cpu: pod.cpu_milli,
        mem: pod.memory_mib,
        k: pod.num_gpu,
        d: pod.gpu_milli,
        spec,
    }
}

/// The submission order: the pods sorted by name and shuffled, then extra pods drawn with
/// replacement until the next would pass `inflate` × capacity, or random pods removed until the
/// total is within it.
fn arrivals(
    pods: &[PodSpec],
    tasks: &[Task],
    seed: u64,
    inflate: f64,
    capacity_milli: i64,
) -> Vec<usize> {
    let mut rng = Rng::new(seed);
    let mut order: Vec<usize> = (0..pods.len()).collect();
    order.sort_by(|&a, &b| pods[a].name.cmp(&pods[b].name));
    rng.shuffle(&mut order);
    let target = (inflate * capacity_milli as f64).floor() as i64;
    let mut total: i64 = order.iter().map(|&i| tasks[i].gpu_total()).sum();
    if total <= target {
        loop {
            let i = rng.below(pods.len());
            if total + tasks[i].gpu_total() > target {
                break;
            }
            total += tasks[i].gpu_total();
            order.push(i);
        }
    } else {
        while total > target {
            let gone = order.swap_remove(rng.below(order.len()));
            total -= tasks[gone].gpu_total();
        }
    }
    order
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    allocated: f64,
    frag_amount: f64,
    frag_ratio: f64,
}

/// At each whole percentage x: the mean of the samples whose arrived % rounds to x, or, with
/// none, of those within x ± 1.
fn discretize(samples: &[(f64, Sample)]) -> Vec<Point> {
    let top = samples
        .last()
        .map_or(0, |(a, _)| a.round() as u32)
        .min(MAX_ARRIVED_PCT);
    let mut sums = vec![(0usize, 0.0, 0.0, 0.0); top as usize + 2];
    for (arrived, s) in samples {
        let x = arrived.round() as usize;
        if x < sums.len() {
            let e = &mut sums[x];
            *e = (
                e.0 + 1,
                e.1 + s.allocated,
                e.2 + s.frag_amount,
                e.3 + s.frag_ratio,
            );
        }
    }
    let mut points = Vec::new();
    for x in 0..=top as usize {
        let window = if sums[x].0 > 0 {
            x..=x
        } else {
            x.saturating_sub(1)..=(x + 1).min(sums.len() - 1)
        };
        let (n, a, fa, fr) = window.map(|i| sums[i]).fold((0, 0.0, 0.0, 0.0), |t, e| {
            (t.0 + e.0, t.1 + e.1, t.2 + e.2, t.3 + e.3)
        });
        if n == 0 {
            continue;
        }
        let n = n as f64;
        points.push(Point {
            arrived_pct: x as u32,
            allocation_pct: a / n,
            unallocated_pct: 100.0 - a / n,
            frag_amount_pct: fa / n,
            frag_ratio_pct: fr / n,
        });
    }
    points
}

/// Median of a list (the mean of the two middle values for an even count).
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// One row of the results table: a pod list × policy over its seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub list: String,
    pub policy: Policy,
    pub seeds: usize,
    pub unallocated_pct_at_100_median: Option<f64>,
    pub unallocated_pct_at_100_iqr: Option<(f64, f64)>,
    pub unallocated_pct_at_130_median: Option<f64>,
    pub frag_amount_pct_at_100_median: Option<f64>,
    pub pods_failed_median: Option<f64>,
    /// `(seed, unallocated GPU % at 100%)` per replay, by seed: for comparisons paired by seed.
    pub unallocated_pct_at_100_by_seed: Vec<(u64, f64)>,
}

/// Medians (and the inter-quartile range) over the seeds of one list × policy.
pub fn summarize(list: &str, policy: Policy, reports: &[PackReport]) -> Summary {
    let pick = |f: &dyn Fn(&PackReport) -> Option<f64>| -> Vec<f64> {
        reports.iter().filter_map(f).collect()
    };
    let mut at_100 = pick(&|r| r.unallocated_pct_at_100);
    let iqr = quartiles(&mut at_100.clone());
    Summary {
        list: list.to_owned(),
        policy,
        seeds: reports.len(),
        unallocated_pct_at_100_median: median(&mut at_100),
        unallocated_pct_at_100_iqr: iqr,
        unallocated_pct_at_130_median: median(&mut pick(&|r| r.at(130).map(|p| p.unallocated_pct))),
        frag_amount_pct_at_100_median: median(&mut pick(&|r| r.frag_amount_pct_at_100)),
        pods_failed_median: median(&mut pick(&|r| Some(r.pods_failed as f64))),
        unallocated_pct_at_100_by_seed: {
            let mut by_seed: Vec<(u64, f64)> = reports
                .iter()
                .filter_map(|r| r.unallocated_pct_at_100.map(|u| (r.seed, u)))
                .collect();
            by_seed.sort_by_key(|(seed, _)| *seed);
            by_seed
        },
    }
}

/// `ours − theirs` for each seed both replayed, by seed.
pub fn paired_differences(ours: &Summary, theirs: &Summary) -> Vec<f64> {
    ours.unallocated_pct_at_100_by_seed
        .iter()
        .filter_map(|(seed, o)| {
            theirs
                .unallocated_pct_at_100_by_seed
                .iter()
                .find(|(s, _)| s == seed)
                .map(|(_, t)| o - t)
        })
        .collect()
}

/// The median of `values` (`None` when empty).
pub fn median_of(values: &[f64]) -> Option<f64> {
    median(&mut values.to_vec())
}

/// The 25th and 75th percentiles (linear interpolation).
fn quartiles(values: &mut [f64]) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let pos = q * (values.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        values[lo] + (values[hi] - values[lo]) * (pos - lo as f64)
    };
    Some((at(0.25), at(0.75)))
}

/// A published figure from the artifact's `summary_by_workload_policy.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Published {
    /// The pod list, e.g. `default`.
    pub list: String,
    /// The artifact's policy name, e.g. `FGD`.
    pub policy: String,
    pub unallocated_pct_at_100_mean: f64,
    pub unallocated_pct_at_100_median: f64,
    pub unallocated_pct_at_130_median: f64,
}

/// Reads the artifact's summary CSV (columns by name).
pub fn parse_published(text: &str) -> Result<Vec<Published>, super::csv::CsvError> {
    let mut lines = text.lines().enumerate();
    let header: Vec<&str> = lines
        .next()
        .map(|(_, l)| l.split(',').collect())
        .unwrap_or_default();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| super::csv::CsvError {
                line: 1,
                column: name.to_owned(),
                message: "missing column".to_owned(),
            })
    };
    let (w, p) = (col("workload")?, col("sc_policy")?);
    let (mean, med, med130) = (
        col("unalloc_gpu_pct_at_100_mean")?,
        col("unalloc_gpu_pct_at_100_median")?,
        col("unalloc_gpu_pct_at_130_median")?,
    );
    let mut out = Vec::new();
    for (i, line) in lines {
        let f: Vec<&str> = line.split(',').collect();
        let num = |c: usize, name: &str| {
            f.get(c)
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| super::csv::CsvError {
                    line: i + 1,
                    column: name.to_owned(),
                    message: "not a number".to_owned(),
                })
        };
        out.push(Published {
            list: f
                .get(w)
                .copied()
                .unwrap_or_default()
                .trim_start_matches("openb_pod_list_")
                .to_owned(),
            policy: f
                .get(p)
                .copied()
                .unwrap_or_default()
                .split_once('-')
                .map_or("", |(_, n)| n)
                .to_owned(),
            unallocated_pct_at_100_mean: num(mean, "unalloc_gpu_pct_at_100_mean")?,
            unallocated_pct_at_100_median: num(med, "unalloc_gpu_pct_at_100_median")?,
            unallocated_pct_at_130_median: num(med130, "unalloc_gpu_pct_at_130_median")?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, gpus: u8) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            cpu_milli: 64_000,
            memory_mib: 1 << 20,
            gpus,
            model: "A".into(),
        }
    }

    fn pod(name: &str, k: u8, d: u16) -> PodSpec {
        PodSpec {
            name: name.into(),
            cpu_milli: 1000,
            memory_mib: 1024,
            num_gpu: k,
            gpu_milli: d,
            gpu_spec: vec![],
        }
    }

    #[test]
    fn inflation_reaches_the_target_without_passing_it() {
        let nodes = [node("n0", 4)];
        let pods: Vec<PodSpec> = (0..4).map(|i| pod(&format!("p{i}"), 1, 500)).collect();
        let r = replay(&nodes, &pods, Policy::BestFit, 1, 1.3).expect("runs");
        // 4,000 capacity × 1.3 = 5,200: 10 pods of 500 = 5,000, an 11th would pass.
        assert_eq!(r.pods_submitted, 10);
        assert_eq!(r.pods_failed, 2);
        assert_eq!(r.unallocated_pct_at_100, Some(0.0));
        assert_eq!(r.points.last().map(|p| p.arrived_pct), Some(125));
        // Trimming: 0.5 × 4,000 = 2,000 → 4 pods.
        assert_eq!(
            replay(&nodes, &pods, Policy::BestFit, 1, 0.5)
                .expect("runs")
                .pods_submitted,
            4
        );
    }

    #[test]
    fn work_over_the_limits_is_refused_before_it_starts() {
        // The probe that exhausted memory: 10,000 eight-GPU nodes, one tiny pod, 10× arrivals:
        // 80,000,000 milli-GPU × 10 ÷ 1 milli per pod = 800 million pods.
        let nodes: Vec<NodeSpec> = (0..10_000).map(|i| node(&format!("n{i}"), 8)).collect();
        let err = replay(&nodes, &[pod("tiny", 1, 1)], Policy::Fgd, 1, 10.0).expect_err("refused");
        assert_eq!(
            err,
            PackError::TooMuchWork {
                arrivals: 800_000_000,
                nodes: 10_000
            }
        );
        assert_eq!(err.field(), "inflate");
        // Few pods but many nodes: 10,000 nodes × 80,000 whole-GPU pods is too many placements.
        let err = replay(&nodes, &[pod("one", 1, 1000)], Policy::Fgd, 1, 1.0).expect_err("refused");
        assert!(
            matches!(
                err,
                PackError::TooMuchWork {
                    arrivals: 80_000,
                    ..
                }
            ),
            "{err:?}"
        );
        // A list without GPU pods could never reach the target.
        let err =
            replay(&nodes[..1], &[pod("cpu", 0, 0)], Policy::Fgd, 1, 1.0).expect_err("no GPU");
        assert_eq!((err.field(), err), ("pods", PackError::NoGpuPods));
    }

    #[test]
    fn a_fired_interrupt_stops_the_replay() {
        let nodes = [node("n0", 4)];
        let pods: Vec<PodSpec> = (0..4).map(|i| pod(&format!("p{i}"), 1, 500)).collect();
        let stop = std::sync::atomic::AtomicBool::new(true);
        assert_eq!(
            replay_until(&nodes, &pods, Policy::BestFit, 1, 1.3, &stop),
            Err(PackError::Interrupted)
        );
    }

    #[test]
    fn whole_gpu_pods_need_fully_free_gpus() {
        let nodes = [node("n0", 2)];
        let pods = vec![pod("a", 1, 300), pod("b", 2, 1000)];
        let r = replay(&nodes, &pods, Policy::FirstFit, 3, 1.2).expect("runs");
        // Whatever the order, the 2-GPU pod cannot share a GPU with the 300 one.
        assert_eq!(r.gpu_pods_failed, 1);
    }

    #[test]
    fn bad_inputs_are_refused() {
        let pods = vec![pod("a", 1, 300)];
        assert_eq!(
            replay(&[node("n", 0)], &pods, Policy::Fgd, 1, 1.3),
            Err(PackError::NoGpus)
        );
        assert!(matches!(
            replay(&[node("n", 1)], &pods, Policy::Fgd, 1, 0.0),
            Err(PackError::BadInflate(_))
        ));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }
}
