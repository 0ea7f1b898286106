//! Approved quota on the cluster: which objects gpufleet owns there, how what is live differs
//! from what was approved (field by field), and the GitOps files of the same objects. The
//! objects come from the one renderer (`kueue`); the backend applies them and reports here.
//!
//! Invariants: an object is named by kind, namespace and name, never by its API version; drift
//! is read only on the fields gpufleet writes (defaults the API server adds and fields other
//! managers own are not drift), while a dry run's diff covers every field but the server's own
//! metadata; GitOps output is the same bytes for the same objects. `workload` reads what Kueue
//! ran: its Workload objects, as the history the planner learns from.

pub mod workload;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::{quantity, yaml::to_yaml};

/// One object by identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectRef {
    pub kind: String,
    /// Empty for cluster-scoped kinds.
    #[serde(default)]
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    pub fn of(object: &Value) -> Self {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        Self {
            kind: text(&object["kind"]),
            namespace: text(&object["metadata"]["namespace"]),
            name: text(&object["metadata"]["name"]),
        }
    }

    /// The resource's plural name (`clusterqueues`, `workloadpriorityclasses`).
    pub fn plural(&self) -> String {
        plural(&self.kind)
    }

    pub fn namespaced(&self) -> bool {
        !self.namespace.is_empty()
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// The kinds gpufleet writes, in the order they are applied.
pub const KINDS: [&str; 5] = [
    "ResourceFlavor",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "WorkloadPriorityClass",
];

pub fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s') {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

/// One field that differs: its path (`spec.resourceGroups[0].flavors[0].resources[0].nominalQuota`)
/// and its value on each side (`None`: absent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    pub path: String,
    pub live: Option<Value>,
    pub desired: Option<Value>,
}

impl FieldChange {
    /// One side as a person reads it: `(absent)`; a quantity as Kubernetes writes it (`0`,
    /// `500m`), whether the server holds it as a number or, as Kueue's webhook stores it, a
    /// string; anything else as JSON.
    pub fn shown(value: Option<&Value>) -> String {
        match value {
            None => "(absent)".to_owned(),
            Some(value @ Value::String(text)) if quantity::milli(value).is_some() => text.clone(),
            Some(other) => other.to_string(),
        }
    }
}

/// Drift: the fields of `desired` whose live value differs (or that are missing). Lists of a
/// different length count as one change of the whole list.
pub fn drift(desired: &Value, live: Option<&Value>) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    if let Some(map) = desired.as_object() {
        for (key, value) in map {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata" | "status") {
                continue;
            }
            let live = live.and_then(|l| l.get(key));
            one_sided(value, live, key, &mut changes);
        }
    }
    changes
}

fn one_sided(desired: &Value, live: Option<&Value>, path: &str, out: &mut Vec<FieldChange>) {
    match (desired, live) {
        (Value::Object(want), Some(Value::Object(have))) => {
            for (key, value) in want {
                one_sided(value, have.get(key), &format!("{path}.{key}"), out);
            }
        }
        (Value::Array(want), Some(Value::Array(have))) if want.len() == have.len() => {
            for (i, (w, h)) in want.iter().zip(have).enumerate() {
                one_sided(w, Some(h), &format!("{path}[{i}]"), out);
            }
        }
        // A quantity the server rewrote (`0` applied, `"0"` stored) is the same quantity.
        (want, Some(have)) if quantity::same(want, have) => {}
        (want, have) if have != Some(want) => out.push(FieldChange {
            path: path.to_owned(),
            live: have.cloned(),
            desired: Some(want.clone()),
        }),
        _ => {}
    }
}

/// An object without what the server keeps for itself (`uid`, `resourceVersion`,
/// `generation`, `creationTimestamp`, `managedFields`) and without status: what a person
/// compares with what was approved.
pub fn without_server_fields(object: &Value) -> Value {
    let mut v = object.clone();
    if let Some(map) = v.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.retain(|k, _| {
                matches!(k.as_str(), "name" | "namespace" | "labels" | "annotations")
            });
        }
    }
    v
}

/// A dry run's diff: every field of either side that differs, except the server's metadata
/// (`resourceVersion`, `managedFields`, `generation`, …), identity and status.
pub fn changes(live: Option<&Value>, would_be: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    let strip = |v: &Value| {
        let mut v = without_server_fields(v);
        if let Some(map) = v.as_object_mut() {
            map.remove("apiVersion");
            if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.retain(|k, _| matches!(k.as_str(), "labels" | "annotations"));
            }
        }
        v
    };
    two_sided(
        live.map(strip).as_ref(),
        Some(&strip(would_be)),
        "",
        &mut out,
    );
    out
}

fn two_sided(live: Option<&Value>, want: Option<&Value>, path: &str, out: &mut Vec<FieldChange>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match (live, want) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                two_sided(a.get(key), b.get(key), &join(key), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                two_sided(Some(x), Some(y), &format!("{path}[{i}]"), out);
            }
        }
        (Some(a), Some(b)) if quantity::same(a, b) => {}
        (a, b) if a != b => out.push(FieldChange {
            path: path.to_owned(),
            live: a.cloned(),
            desired: b.cloned(),
        }),
        _ => {}
    }
}

/// Where an object stands on the cluster, as the last reconcile saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectState {
    /// Live as approved.
    InSync,
    /// Approved, not yet on the cluster (the cluster could not be reached, or it failed in a
    /// way that is retried).
    Pending,
    /// Someone changed or deleted it on the cluster.
    Drifted,
    /// Another field manager owns fields gpufleet would set: taking them is an approver's call.
    Conflict,
    /// The cluster refused it (403, 404, 422, …): the error says why.
    Failed,
    /// On the cluster, of a kind gpufleet writes, yet nobody approved it (reported, never
    /// deleted).
    Unapproved,
}

impl ObjectState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InSync => "in_sync",
            Self::Pending => "pending",
            Self::Drifted => "drifted",
            Self::Conflict => "conflict",
            Self::Failed => "failed",
            Self::Unapproved => "unapproved",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::InSync,
            Self::Pending,
            Self::Drifted,
            Self::Conflict,
            Self::Failed,
            Self::Unapproved,
        ]
        .into_iter()
        .find(|state| state.as_str() == s)
    }
}

/// One object on the Cluster page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectStatus {
    pub object: ObjectRef,
    /// The team whose queue this is, for ClusterQueues and LocalQueues.
    pub team: Option<String>,
    pub state: ObjectState,
    /// What differs live against approved (drift), or why it is pending.
    pub changes: Vec<FieldChange>,
    /// The cluster's own words for the last failure.
    pub error: Option<String>,
    /// For conflicts: who owns what (`kubectl-edit: .spec.cohortName`).
    pub conflicts: Vec<String>,
    /// RFC 3339 UTC.
    pub applied_at: Option<String>,
    pub checked_at: Option<String>,
    /// The object as approved, and as the cluster last showed it, as YAML (empty: none).
    pub desired_yaml: String,
    pub live_yaml: String,
}

/// Where approved quota goes (JSON: `{"cluster": {…}}`, `{"gitops": {…}}` or `"off"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Applied to a cluster by server-side apply.
    Cluster {
        server: String,
        /// The kubeconfig context, or `in-cluster`.
        context: String,
        /// Whom the console authenticates as.
        identity: String,
    },
    /// Written as files into a directory for Argo CD or Flux.
    Gitops { dir: String },
    /// Neither configured: nothing leaves the console.
    Off,
}

/// The reconciler's last run, for the Cluster page and `/api/health`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcilerStatus {
    pub last_run_at: Option<String>,
    pub last_ok_at: Option<String>,
    pub last_error: Option<String>,
    pub drift_count: i64,
    pub failed_count: i64,
    pub pending_count: i64,
}

/// `/api/health`'s part on the cluster: where quota goes and the reconciler's last run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterHealth {
    /// `cluster`, `gitops` or `off`.
    pub mode: String,
    pub reconciler: ReconcilerStatus,
}

/// The Cluster page: the target, the Kueue version, the reconciler and every object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterView {
    pub target: Target,
    /// `kueue.x-k8s.io/v1beta2` or `…/v1beta1`.
    pub api_version: String,
    /// Said when the version in use is deprecated.
    pub version_warning: Option<String>,
    pub reconciler: ReconcilerStatus,
    pub objects: Vec<ObjectStatus>,
    /// Whether each team's pods start under the quota in force today
    /// ([`crate::quota::QuotaWorld::admission`]).
    #[serde(default)]
    pub admission: Vec<crate::kueue::Verdict>,
}

/// What an approval would change on the cluster, object by object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DryRun {
    /// `server` when the cluster answered a `dryRun=All` apply; `files` when compared with the
    /// approved objects (GitOps, or no cluster).
    pub against: String,
    pub objects: Vec<ObjectDiff>,
    /// Why the server could not be asked, if it could not.
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectDiff {
    pub object: ObjectRef,
    /// `create`, `update` or `unchanged`.
    pub action: String,
    pub changes: Vec<FieldChange>,
}

/// A request to apply again: some objects or all, taking fields from other managers or not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reapply {
    /// None: every object gpufleet owns.
    #[serde(default)]
    pub objects: Option<Vec<ObjectRef>>,
    /// Take ownership of fields another manager holds (an approver's explicit action).
    #[serde(default)]
    pub force: bool,
}

/// The file an object is written to in GitOps mode: `clusterqueue-research.yaml`, or with its
/// namespace, `localqueue-team-research-research.yaml`.
pub fn gitops_file(id: &ObjectRef) -> String {
    let kind = id.kind.to_ascii_lowercase();
    if id.namespace.is_empty() {
        format!("{kind}-{}.yaml", id.name)
    } else {
        format!("{kind}-{}-{}.yaml", id.namespace, id.name)
    }
}

/// The GitOps directory: one file per object, named by kind, namespace and name, and a
/// `kustomization.yaml` listing them in apply order, so Argo CD and Flux read it as it is.
pub fn gitops_files(objects: &[Value]) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = objects
        .iter()
        .map(|object| (gitops_file(&ObjectRef::of(object)), to_yaml(object)))
        .collect();
    let mut kustomization = String::from(
        "# Written by gpufleet from the approved quota; edits here are overwritten.\n\
         apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
    );
    for (name, _) in &files {
        kustomization.push_str(&format!("- {name}\n"));
    }
    files.push(("kustomization.yaml".to_owned(), kustomization));
    files
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn queue(nominal: i64) -> Value {
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "research"},
            "spec": {"cohortName": "gpufleet", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "h200", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]}]}]}
        })
    }

    #[test]
    fn a_change_reads_as_a_person_writes_it() {
        let shown = |v: Option<Value>| FieldChange::shown(v.as_ref());
        assert_eq!(shown(Some(json!("0"))), "0");
        assert_eq!(shown(Some(json!(32))), "32");
        assert_eq!(shown(Some(json!("500m"))), "500m");
        assert_eq!(shown(Some(json!("Hold"))), "\"Hold\"");
        assert_eq!(shown(None), "(absent)");
    }

    #[test]
    fn drift_reads_only_the_fields_we_write() {
        let desired = queue(48);
        let mut live = queue(48);
        // The API server's defaults and another manager's fields are not drift.
        live["spec"]["queueingStrategy"] = json!("BestEffortFIFO");
        live["metadata"]["resourceVersion"] = json!("1042");
        assert_eq!(drift(&desired, Some(&live)), []);
        // Kueue's webhook stores the quantity as a string on create: the same quantity.
        live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] =
            json!("48");
        assert_eq!(drift(&desired, Some(&live)), []);
        live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = json!(64);
        assert_eq!(
            drift(&desired, Some(&live)),
            [FieldChange {
                path: "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota".into(),
                live: Some(json!(64)),
                desired: Some(json!(48)),
            }]
        );
        live["spec"]["resourceGroups"] = json!([]);
        assert_eq!(drift(&desired, Some(&live))[0].path, "spec.resourceGroups");
        assert_eq!(drift(&desired, None)[0].path, "spec");
    }

    #[test]
    fn a_dry_run_diff_covers_both_sides_but_not_server_metadata() {
        let mut live = queue(32);
        live["metadata"]["resourceVersion"] = json!("7");
        // as Kueue's webhook stored it: the same quantity as the 32 the server would keep
        live["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] =
            json!("32");
        assert_eq!(changes(Some(&live), &queue(32)), []);
        live["spec"]["stopPolicy"] = json!("Hold");
        let would_be = queue(48);
        let paths: Vec<String> = changes(Some(&live), &would_be)
            .into_iter()
            .map(|c| c.path)
            .collect();
        assert_eq!(
            paths,
            [
                "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
                "spec.stopPolicy"
            ]
        );
        // A new object: everything is a change from nothing.
        let created = changes(None, &would_be);
        assert_eq!(created.len(), 1);
        assert_eq!(created[0].live, None);
    }

    #[test]
    fn gitops_files_are_stable_and_listed() {
        let lq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": "research", "namespace": "team-research"}, "spec": {"clusterQueue": "research"}});
        let files = gitops_files(&[queue(48), lq.clone()]);
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "clusterqueue-research.yaml",
                "localqueue-team-research-research.yaml",
                "kustomization.yaml"
            ]
        );
        assert!(files[2].1.ends_with(
            "resources:\n- clusterqueue-research.yaml\n- localqueue-team-research-research.yaml\n"
        ));
        assert_eq!(files, gitops_files(&[queue(48), lq]));
    }

    #[test]
    fn plurals_and_states_round_trip() {
        assert_eq!(plural("WorkloadPriorityClass"), "workloadpriorityclasses");
        assert_eq!(plural("ClusterQueue"), "clusterqueues");
        for state in [
            "in_sync",
            "pending",
            "drifted",
            "conflict",
            "failed",
            "unapproved",
        ] {
            assert_eq!(
                ObjectState::parse(state).map(ObjectState::as_str),
                Some(state)
            );
        }
    }
}
