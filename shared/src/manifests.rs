//! Manifest export: the scenario's quota set-up as Kueue objects (ResourceFlavors, Cohort,
//! ClusterQueues, LocalQueues, WorkloadPriorityClasses; v1beta2 by default, v1beta1 on request)
//! and KEDA ScaledObjects for inference, rendered as YAML. Pure: objects in, text out.
//!
//! Invariants: every object validates against the real CRD schemas (tested); borrowing and
//! lending limits appear only with a cohort, as Kueue's CEL rule demands.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::scenario::{Queueing, Scenario, WorkloadKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum KueueVersion {
    V1beta1,
    #[default]
    V1beta2,
}

impl KueueVersion {
    pub fn api_version(self) -> &'static str {
        match self {
            KueueVersion::V1beta1 => "kueue.x-k8s.io/v1beta1",
            KueueVersion::V1beta2 => "kueue.x-k8s.io/v1beta2",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "v1beta1" => Some(Self::V1beta1),
            "v1beta2" => Some(Self::V1beta2),
            _ => None,
        }
    }
}

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

/// Objects per file: `kueue.yaml` (flavors, cohort, queues, priorities) and `keda.yaml`.
pub fn export(scenario: &Scenario, version: KueueVersion) -> Vec<ManifestFile> {
    let mut kueue = Vec::new();
    let api = version.api_version();
    for acc in &scenario.fleet {
        let label = acc.vendor().product_label();
        kueue.push(json!({
            "apiVersion": api, "kind": "ResourceFlavor",
            "metadata": {"name": acc.flavor},
            "spec": {"nodeLabels": {label: acc.gpu_model}},
        }));
    }
    if scenario.quota.cohort {
        kueue.push(
            json!({"apiVersion": api, "kind": "Cohort", "metadata": {"name": COHORT}, "spec": {}}),
        );
    }
    for team in &scenario.teams {
        // One resource group per accelerator resource (flavors of one group cover the same one).
        let mut groups: Vec<(String, Vec<Value>)> = Vec::new();
        for acc in &scenario.fleet {
            let resource = acc.vendor().resource_name();
            let mut quota = Map::new();
            quota.insert("name".into(), json!(resource));
            quota.insert(
                "nominalQuota".into(),
                json!(team.nominal_gpus.get(&acc.flavor).copied().unwrap_or(0)),
            );
            if scenario.quota.cohort {
                if let Some(b) = team.borrowing_limit_gpus.get(&acc.flavor) {
                    quota.insert("borrowingLimit".into(), json!(b));
                }
                if let Some(l) = team.lending_limit_gpus.get(&acc.flavor) {
                    quota.insert("lendingLimit".into(), json!(l));
                }
            }
            let flavor = json!({"name": acc.flavor, "resources": [Value::Object(quota)]});
            match groups.iter_mut().find(|(r, _)| *r == resource) {
                Some((_, flavors)) => flavors.push(flavor),
                None => groups.push((resource.to_owned(), vec![flavor])),
            }
        }
        let resource_groups: Vec<Value> = groups
            .into_iter()
            .map(|(r, flavors)| json!({"coveredResources": [r], "flavors": flavors}))
            .collect();
        let mut spec = Map::new();
        if scenario.quota.cohort {
            let key = if version == KueueVersion::V1beta1 {
                "cohort"
            } else {
                "cohortName"
            };
            spec.insert(key.into(), json!(COHORT));
        }
        spec.insert(
            "namespaceSelector".into(),
            json!({"matchLabels": {"kubernetes.io/metadata.name": team.name}}),
        );
        let strategy = match scenario.quota.queueing {
            Queueing::StrictFifo => "StrictFIFO",
            Queueing::BestEffortFifo => "BestEffortFIFO",
        };
        spec.insert("queueingStrategy".into(), json!(strategy));
        spec.insert(
            "preemption".into(),
            json!({
                "reclaimWithinCohort": if scenario.quota.cohort && scenario.quota.reclaim_within_cohort { "Any" } else { "Never" },
                "withinClusterQueue": if scenario.quota.preempt_lower_priority { "LowerPriority" } else { "Never" },
            }),
        );
        spec.insert("resourceGroups".into(), Value::Array(resource_groups));
        kueue.push(json!({"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": team.name}, "spec": spec}));
        kueue.push(json!({
            "apiVersion": api, "kind": "LocalQueue",
            "metadata": {"name": team.name, "namespace": team.name},
            "spec": {"clusterQueue": team.name},
        }));
    }
    let mut priorities: Vec<i32> = scenario
        .teams
        .iter()
        .flat_map(|t| &t.workloads)
        .map(|w| w.priority)
        .collect();
    priorities.sort_unstable();
    priorities.dedup();
    for p in priorities {
        kueue.push(json!({
            "apiVersion": api, "kind": "WorkloadPriorityClass",
            "metadata": {"name": priority_class(p)},
            "value": p,
            "description": format!("gpufleet workload priority {p}"),
        }));
    }
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

pub fn priority_class(value: i32) -> String {
    if value < 0 {
        format!("priority-minus-{}", value.unsigned_abs())
    } else {
        format!("priority-{value}")
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
        assert_eq!(priority_class(-5), "priority-minus-5");
    }
}
