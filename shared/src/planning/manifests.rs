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
    kueue::{FlavorObject, Queue, Quota, Reclaim, Setup, WithinQueue},
    scenario::{Scenario, WorkloadKind},
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

/// The scenario's quota set-up: one flavor per accelerator, pinned to its model's nodes; one
/// queue per team (the team's name as ClusterQueue, LocalQueue and namespace).
pub fn kueue_setup(scenario: &Scenario) -> Setup {
    let cohort = scenario.quota.cohort.then(|| COHORT.to_owned());
    let flavors = scenario
        .fleet
        .iter()
        .map(|acc| FlavorObject {
            name: acc.flavor.clone(),
            node_labels: BTreeMap::from([(
                acc.vendor().product_label().to_owned(),
                acc.gpu_model.clone(),
            )]),
            ..FlavorObject::default()
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

/// Block-style YAML for a JSON value (maps and lists indented by two spaces; strings quoted
/// whenever plain YAML could read them as something else).
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    write_yaml(value, 0, &mut out);
    out
}

fn write_yaml(value: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                out.push_str(&format!("{pad}{}:", scalar_key(k)));
                write_child(v, indent, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                out.push_str(&format!("{pad}-"));
                match item {
                    Value::Object(m) if !m.is_empty() => {
                        // The first key on the dash's line, the rest aligned under it.
                        let mut first = true;
                        for (k, v) in m {
                            if first {
                                out.push_str(&format!(" {}:", scalar_key(k)));
                                first = false;
                            } else {
                                out.push_str(&format!("{pad}  {}:", scalar_key(k)));
                            }
                            write_child(v, indent + 2, out);
                        }
                    }
                    other => write_child(other, indent, out),
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
}

fn write_child(v: &Value, indent: usize, out: &mut String) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            write_yaml(v, indent + 2, out);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            write_yaml(v, indent + 2, out);
        }
        other => out.push_str(&format!(" {}\n", scalar(other))),
    }
}

fn scalar_key(k: &str) -> String {
    if k.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !k.is_empty()
    {
        k.to_owned()
    } else {
        quote(k)
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote(s),
        Value::Array(_) => "[]".to_owned(),
        Value::Object(_) => "{}".to_owned(),
    }
}

/// Double-quoted YAML string (JSON escaping is valid YAML).
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_rendering() {
        let v = json!({"a": 1, "b": {"c": "x y", "d": []}, "e": [{"f": true, "g": [1, 2]}, "h"], "i": {}});
        assert_eq!(
            to_yaml(&v),
            "a: 1\nb:\n  c: \"x y\"\n  d: []\ne:\n  - f: true\n    g:\n      - 1\n      - 2\n  - \"h\"\ni: {}\n"
        );
    }
}
