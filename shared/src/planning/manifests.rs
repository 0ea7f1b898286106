//! Manifest export: the scenario's quota set-up as Kueue objects (rendered by `kueue`, the one
//! renderer; v1beta2 by default, v1beta1 on request) and KEDA ScaledObjects for inference, as
//! YAML. Pure: objects in, text out.
//!
//! Invariants: every object validates against the real CRD schemas (tested).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use crate::kueue::{KueueVersion, priority_class};
use crate::{
    common::yaml::to_yaml,
    fleet::{catalogue::HamiResources, sharing::Mechanism},
    kueue::{
        FlavorObject, ManagerConfig, PodRequest, Queue, Quota, Setup, Transformation, Trial,
        Verdict,
    },
    planning::isolation::{self, IsolationPlan},
    planning::scenario::{Accelerator, Scenario, Team, WorkloadKind},
};

/// The cohort every team's ClusterQueue joins.
pub const COHORT: &str = "gpufleet";
/// Where the ScaledObjects' prometheus trigger asks.
pub const PROMETHEUS: &str = "http://prometheus.monitoring.svc:9090";

/// One file of the export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestFile {
    pub name: String,
    pub objects: Vec<Value>,
    pub yaml: String,
}

/// The node label that tells apart the flavors of one GPU model (the platform team labels
/// each node with its flavor's name).
pub const FLAVOR_LABEL: &str = "gpufleet.io/flavor";

/// The scenario's quota set-up under its isolation `plan`: one flavor per accelerator, pinned
/// to its model's nodes by the product label they carry (GPU Feature Discovery's, `-SHARED`
/// where every class on it shares cards by MPS or time-slicing) and, where a model has
/// several flavors, to that flavor's: Kueue adds the admitted flavor's node labels to the
/// pods, which select only the model, so any flavor of it may admit them. One queue per team
/// (the team's name as ClusterQueue, LocalQueue and namespace), covering every resource the
/// plan's pods ask for (each class's `limits` in the plan): the model's cards; on a flavor with HAMi
/// classes, vGPUs (`per_card` a card) and the total memory and cores Kueue counts them by;
/// the MIG profiles the plan's MIG classes take, as many as each team's classes hold at peak.
pub fn kueue_setup(scenario: &Scenario, plan: &IsolationPlan) -> Setup {
    let cohort = scenario.quota.cohort.then(|| COHORT.to_owned());
    let flavors = scenario
        .fleet
        .iter()
        .map(|acc| flavor_object(scenario, plan, acc))
        .collect();
    let resources = scenario
        .fleet
        .iter()
        .map(|acc| {
            let offered = flavor_quotas(scenario, plan, acc, None)
                .into_iter()
                .map(|(r, ..)| r);
            (acc.flavor.clone(), offered.collect())
        })
        .collect();
    let queues = scenario
        .teams
        .iter()
        .map(|team| Queue {
            cluster_queue: team.name.clone(),
            namespace: team.name.clone(),
            local_queue: team.name.clone(),
            cohort: cohort.clone(),
            held: false,
            queueing: scenario.quota.queueing,
            reclaim: scenario.quota.reclaim_within_cohort,
            within: scenario.quota.within_cluster_queue,
            borrow: scenario.quota.borrow_within_cohort,
            quotas: scenario
                .fleet
                .iter()
                .flat_map(|acc| {
                    flavor_quotas(scenario, plan, acc, Some(team))
                        .into_iter()
                        .map(
                            |(resource, nominal, borrowing_limit, lending_limit)| Quota {
                                flavor: acc.flavor.clone(),
                                resource,
                                nominal,
                                borrowing_limit,
                                lending_limit,
                            },
                        )
                })
                .collect(),
        })
        .collect();
    let priorities = scenario
        .teams
        .iter()
        .flat_map(|t| &t.workloads)
        .map(|w| w.priority)
        .collect();
    Setup {
        flavors,
        resources,
        queues,
        priorities,
    }
}

/// The labels a node that runs `mechanism` on `acc`'s model carries.
fn node_labels(acc: &Accelerator, mechanism: Option<Mechanism>) -> BTreeMap<String, String> {
    let product = acc
        .model()
        .map_or_else(|| acc.gpu_model.clone(), |m| m.product_under(mechanism));
    BTreeMap::from([(acc.vendor().product_label().to_owned(), product)])
}

/// Whether every class on the flavor shares cards through the device plugin (MPS or
/// time-slicing): then its nodes are the shared ones.
fn shared_nodes(scenario: &Scenario, plan: &IsolationPlan, flavor: &str) -> Option<Mechanism> {
    let mut mechanisms = isolation::classes_on(scenario, plan, flavor).map(|(.., c)| c.mechanism);
    let first = mechanisms.next()?;
    let shared = |m: Mechanism| matches!(m, Mechanism::Mps | Mechanism::TimeSlicing);
    (shared(first) && mechanisms.all(shared)).then_some(first)
}

fn flavor_object(scenario: &Scenario, plan: &IsolationPlan, acc: &Accelerator) -> FlavorObject {
    let mut node_labels = node_labels(acc, shared_nodes(scenario, plan, &acc.flavor));
    let alike = scenario
        .fleet
        .iter()
        .filter(|a| a.gpu_model == acc.gpu_model);
    if alike.count() > 1 {
        node_labels.insert(FLAVOR_LABEL.to_owned(), acc.flavor.clone());
    }
    FlavorObject {
        name: acc.flavor.clone(),
        node_labels,
        ..FlavorObject::default()
    }
}

/// A flavor's resources and, for `team`, each one's nominal quota, borrowing and lending limit
/// (for no team: the resources, in order, with zeros).
fn flavor_quotas(
    scenario: &Scenario,
    plan: &IsolationPlan,
    acc: &Accelerator,
    team: Option<&Team>,
) -> Vec<(String, i64, Option<i64>, Option<i64>)> {
    let gpus = |map: Option<&BTreeMap<String, u32>>| {
        map.and_then(|m| m.get(&acc.flavor)).map(|&g| i64::from(g))
    };
    let nominal = gpus(team.map(|t| &t.nominal_gpus)).unwrap_or(0);
    let borrowing = gpus(team.map(|t| &t.borrowing_limit_gpus));
    let lending = gpus(team.map(|t| &t.lending_limit_gpus));
    let scaled = |per_card: i64| {
        let limit = |l: Option<i64>| l.map(|l| l.saturating_mul(per_card));
        (
            nominal.saturating_mul(per_card),
            limit(borrowing),
            limit(lending),
        )
    };
    let model = acc.model();
    let hami = model
        .and_then(HamiResources::of)
        .filter(|_| isolation::flavor_runs(scenario, plan, &acc.flavor, Mechanism::HamiFractions));
    let mut out = Vec::new();
    let per_card = hami.as_ref().map_or(1, |h| h.per_card);
    let (n, b, l) = scaled(per_card);
    out.push((acc.resource().to_owned(), n, b, l));
    if let (Some(hami), Some(card)) = (&hami, model) {
        let (n, b, l) = scaled(i64::from(card.mem_mib));
        out.push((HamiResources::total(&hami.memory), n, b, l));
        if let Some(cores) = &hami.cores {
            let (n, b, l) = scaled(100);
            out.push((HamiResources::total(cores), n, b, l));
        }
    }
    // Each MIG profile the flavor's classes take, with this team's peak instances of it.
    let mut profiles: Vec<(String, i64)> = Vec::new();
    for (name, _, class) in isolation::classes_on(scenario, plan, &acc.flavor) {
        let mine = team.is_some_and(|t| t.name == name);
        let peak = if mine { i64::from(class.peak_pods) } else { 0 };
        let mig = class
            .limits
            .iter()
            .filter(|(r, _)| r.starts_with("nvidia.com/mig-"));
        for (resource, _) in mig {
            match profiles.iter_mut().find(|(r, _)| r == resource) {
                Some((_, n)) => *n += peak,
                None => profiles.push((resource.clone(), peak)),
            }
        }
    }
    out.extend(profiles.into_iter().map(|(r, n)| (r, n, None, None)));
    out
}

/// What the Kueue manager must hold for the export's pods: cpu, memory and ephemeral storage
/// excluded, and Kueue's HAMi transformations for each model a HAMi class runs on.
pub fn manager_config(scenario: &Scenario, plan: &IsolationPlan) -> ManagerConfig {
    let mut config = ManagerConfig::accelerators_only();
    for acc in &scenario.fleet {
        if !isolation::flavor_runs(scenario, plan, &acc.flavor, Mechanism::HamiFractions) {
            continue;
        }
        let Some(hami) = acc.model().and_then(HamiResources::of) else {
            continue;
        };
        // Each per-vGPU resource, multiplied by the vGPUs, counts as its total and is
        // replaced by it (Kueue's "Using HAMi").
        let transformations = hami.per_vgpu().map(|r| Transformation {
            input: r.clone(),
            multiply_by: Some(hami.count.clone()),
            outputs: vec![(HamiResources::total(r), 1)],
            replace: true,
        });
        for t in transformations {
            if !config.transformations.contains(&t) {
                config.transformations.push(t);
            }
        }
    }
    config
}

/// The file the export shows the check's verdicts in.
pub const CHECK_FILE: &str = "admission-check.txt";

/// The check: each class's typical pod (its device limits by the plan, 8 CPUs and 64 GiB,
/// its team's queue-name label, in its team's namespace, selecting its model by the product
/// label its flavor names — without it Kueue may admit it on any flavor of the group, another
/// model's) under the export's Kueue objects and manager configuration, and the node its
/// mechanism needs.
pub fn admission(scenario: &Scenario, plan: &IsolationPlan) -> Vec<Verdict> {
    let setup = kueue_setup(scenario, plan);
    let config = manager_config(scenario, plan);
    let mut trials = Vec::new();
    for team in &scenario.teams {
        for w in &team.workloads {
            let Some(acc) = scenario.accelerator(&w.flavor) else {
                continue;
            };
            let mut requests = plan
                .class(&team.name, &w.name)
                .map(|c| c.limits.clone())
                .unwrap_or_default();
            requests.push(("cpu".to_owned(), 8_000));
            requests.push(("memory".to_owned(), 64 << 30));
            let mechanism = isolation::mechanism_of(plan, &team.name, &w.name);
            let needs = node_labels(acc, Some(mechanism));
            let shares = matches!(mechanism, Mechanism::Mps | Mechanism::TimeSlicing);
            // Its pods select their model as their flavor's nodes are labelled.
            let product = acc.vendor().product_label();
            let mut node_selector = BTreeMap::new();
            let flavor = setup.flavors.iter().find(|f| f.name == w.flavor);
            if let Some(value) = flavor.and_then(|f| f.node_labels.get(product)) {
                node_selector.insert(product.to_owned(), value.clone());
            }
            trials.push(Trial {
                subject: format!("{}/{}", team.name, w.name),
                pod: PodRequest {
                    namespace: team.name.clone(),
                    queue_name: Some(team.name.clone()),
                    requests,
                    node_selector,
                    tolerations: Vec::new(),
                },
                node_labels: needs,
                unshared: shares.then(|| node_labels(acc, None)),
            });
        }
    }
    setup.check_all(&trials, &config)
}

/// Objects per file: `kueue.yaml` (flavors, cohort, queues, priorities) and `keda.yaml`.
pub fn export(
    scenario: &Scenario,
    plan: &IsolationPlan,
    version: KueueVersion,
) -> Vec<ManifestFile> {
    let kueue = kueue_setup(scenario, plan).objects(version);
    let mut keda = Vec::new();
    for team in &scenario.teams {
        for w in team
            .workloads
            .iter()
            .filter(|w| w.kind == WorkloadKind::Inference)
        {
            let Some(inf) = &w.inference else { continue };
            let per_replica = f64::from(inf.tokens_per_s_per_gpu) * f64::from(w.gpus_per_job);
            let threshold = (per_replica * f64::from(inf.threshold_pct) / 100.0).round();
            let activation =
                (per_replica * f64::from(inf.activation_threshold_pct) / 100.0).round();
            let query = format!(
                "sum(rate(vllm:prompt_tokens_total{{namespace=\"{ns}\",service=\"{svc}\"}}[1m])) + sum(rate(vllm:generation_tokens_total{{namespace=\"{ns}\",service=\"{svc}\"}}[1m]))",
                ns = team.name,
                svc = w.name
            );
            keda.push(json!({
                "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                "metadata": {"name": w.name, "namespace": team.name},
                "spec": {
                    "scaleTargetRef": {"name": w.name},
                    "minReplicaCount": inf.min_replicas,
                    "maxReplicaCount": inf.max_replicas,
                    "pollingInterval": 30,
                    "cooldownPeriod": inf.cooldown_s,
                    "triggers": [{
                        "type": "prometheus",
                        "metadata": {
                            "serverAddress": PROMETHEUS,
                            "query": query,
                            "threshold": format!("{threshold}"),
                            "activationThreshold": format!("{activation}"),
                        },
                    }],
                },
            }));
        }
    }
    let mut files = vec![file("kueue.yaml", kueue)];
    files[0].yaml = format!("{}{}", manager_config(scenario, plan).note(), files[0].yaml);
    if !keda.is_empty() {
        files.push(file("keda-scaledobjects.yaml", keda));
    }
    files
}

fn file(name: &str, objects: Vec<Value>) -> ManifestFile {
    let yaml = objects
        .iter()
        .map(|o| format!("---\n{}", to_yaml(o)))
        .collect();
    ManifestFile {
        name: name.to_owned(),
        objects,
        yaml,
    }
}
