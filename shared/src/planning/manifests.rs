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
    kueue::{FlavorObject, Queue, Quota, Reclaim, Setup, WithinQueue},
    planning::scenario::{Scenario, WorkloadKind},
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

/// The scenario's quota set-up: one flavor per accelerator, pinned to its model's nodes (and,
/// where a model has several flavors, to that flavor's: Kueue adds the admitted flavor's node
/// labels to the pods, which select only the model, so any flavor of it may admit them); one
/// queue per team (the team's name as ClusterQueue, LocalQueue and namespace).
pub fn kueue_setup(scenario: &Scenario) -> Setup {
    let cohort = scenario.quota.cohort.then(|| COHORT.to_owned());
    let flavors = scenario
        .fleet
        .iter()
        .map(|acc| {
            let mut node_labels = BTreeMap::from([(
                acc.vendor().product_label().to_owned(),
                acc.gpu_model.clone(),
            )]);
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
        })
        .collect();
    let resources = scenario
        .fleet
        .iter()
        .map(|acc| {
            (
                acc.flavor.clone(),
                vec![acc.vendor().resource_name().to_owned()],
            )
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
            queueing: scenario.quota.queueing,
            reclaim: if scenario.quota.reclaim_within_cohort {
                Reclaim::Any
            } else {
                Reclaim::Never
            },
            within: if scenario.quota.preempt_lower_priority {
                WithinQueue::LowerPriority
            } else {
                WithinQueue::Never
            },
            quotas: scenario
                .fleet
                .iter()
                .map(|acc| Quota {
                    flavor: acc.flavor.clone(),
                    resource: acc.vendor().resource_name().to_owned(),
                    nominal: i64::from(team.nominal_gpus.get(&acc.flavor).copied().unwrap_or(0)),
                    borrowing_limit: team
                        .borrowing_limit_gpus
                        .get(&acc.flavor)
                        .map(|&b| i64::from(b)),
                    lending_limit: team
                        .lending_limit_gpus
                        .get(&acc.flavor)
                        .map(|&l| i64::from(l)),
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

/// Objects per file: `kueue.yaml` (flavors, cohort, queues, priorities) and `keda.yaml`.
pub fn export(scenario: &Scenario, version: KueueVersion) -> Vec<ManifestFile> {
    let kueue = kueue_setup(scenario).objects(version);
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
    files[0].yaml = format!("{}{}", crate::kueue::manager_config_note(), files[0].yaml);
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
