//! Kueue's Workload objects as the console records them: who asked (the LocalQueue, and the
//! ClusterQueue that reserved quota), for what (each pod set's pods and the extended resources
//! they hold, and the flavor of each once admitted), and when (created, quota reserved,
//! admitted, evicted, finished). Read from the object as the API server returns it, v1beta1 or
//! v1beta2: the fields and the condition types and reasons are Kueue's
//! (`apis/kueue/v1beta2/workload_types.go`, quoted in `docs/quota-and-cluster.md`).
//!
//! Invariants: nothing is guessed. What the object does not say stays empty and, where the
//! planner would miss it (no queue, a quantity that is not a whole number), is named in
//! `problems`; an object without identity (uid, name, namespace, creation time) is refused.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    FieldError,
    common::{
        day::Day,
        utc::parse_rfc3339,
        validate::{day_window, required_day},
    },
};

/// One Workload as last seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedWorkload {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `spec.queueName`: the LocalQueue it was submitted to ("" when it names none).
    pub local_queue: String,
    /// `status.admission.clusterQueue`: where quota is reserved, while it is.
    pub cluster_queue: Option<String>,
    /// `spec.priority` (Kueue fills it from the priority class; 0 when unset).
    pub priority: i32,
    /// `spec.priorityClassRef.name` (v1beta2) or `spec.priorityClassName` (v1beta1).
    pub priority_class: Option<String>,
    pub pod_sets: Vec<PodSet>,
    pub created_at_ms: i64,
    /// When the conditions `QuotaReserved` and `Admitted` last turned True.
    pub quota_reserved_at_ms: Option<i64>,
    pub admitted_at_ms: Option<i64>,
    /// The condition `Evicted` while True: the latest eviction.
    pub evicted: Option<Transition>,
    /// The condition `Finished` once True (reason `Succeeded` or `Failed`).
    pub finished: Option<Transition>,
    /// `status.schedulingStats.evictions`: every eviction so far, by reason.
    pub evictions: Vec<EvictionCount>,
    /// What the planner cannot read from this object, in words.
    pub problems: Vec<String>,
}

/// A set of identical pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodSet {
    pub name: String,
    /// Pods: as admitted (`podSetAssignments[].count`), else as asked (`spec.podSets[].count`).
    pub count: u32,
    /// Extended resources (`vendor/name`, such as `nvidia.com/gpu` or
    /// `nvidia.com/mig-1g.10gb`) the whole pod set holds: Kubernetes allows them only in
    /// whole numbers. As admitted (`resourceUsage`), else as last considered
    /// (`status.resourceRequests`), else the pod template's requests times the count.
    pub resources: BTreeMap<String, u64>,
    /// The ResourceFlavor of each resource, once quota is reserved.
    pub flavors: BTreeMap<String, String>,
}

/// A condition's last turn to True.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    pub at_ms: i64,
    /// `Preempted`, `PodsReadyTimeout`, … (Evicted); `Succeeded`, `Failed` (Finished).
    pub reason: String,
    /// For a preemption, the `Preempted` condition's reason: `InClusterQueue`,
    /// `InCohortReclamation`, `InCohortFairSharing`, `InCohortReclaimWhileBorrowing`.
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvictionCount {
    pub reason: String,
    pub underlying_cause: String,
    pub count: u32,
}

impl RecordedWorkload {
    /// Every extended resource the workload holds, summed over its pod sets.
    pub fn resources(&self) -> BTreeMap<&str, u64> {
        let mut total = BTreeMap::new();
        for set in &self.pod_sets {
            for (name, n) in &set.resources {
                *total.entry(name.as_str()).or_insert(0) += n;
            }
        }
        total
    }
}

/// The Workload `object` as recorded; an error in words when it lacks identity.
pub fn read(object: &Value) -> Result<RecordedWorkload, String> {
    let meta = &object["metadata"];
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
    let (Some(uid), Some(name), Some(namespace)) = (
        text(&meta["uid"]),
        text(&meta["name"]),
        text(&meta["namespace"]),
    ) else {
        return Err("a Workload without uid, name or namespace".to_owned());
    };
    let Some(created_at_ms) = meta["creationTimestamp"].as_str().and_then(parse_rfc3339) else {
        return Err(format!(
            "Workload {namespace}/{name} has no creationTimestamp"
        ));
    };
    let (spec, status) = (&object["spec"], &object["status"]);
    let mut problems = Vec::new();
    let local_queue = text(&spec["queueName"]).unwrap_or_default();
    if local_queue.is_empty() {
        problems.push("no spec.queueName: Kueue queues it nowhere".to_owned());
    }
    let admission = &status["admission"];
    let pod_sets = spec["podSets"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|set| pod_set(set, status, &mut problems))
        .collect();
    let condition = |kind: &str| true_condition(status, kind);
    let evicted = condition("Evicted").map(|(at_ms, reason)| Transition {
        detail: (reason == "Preempted")
            .then(|| condition("Preempted").map(|(_, why)| why))
            .flatten(),
        at_ms,
        reason,
    });
    Ok(RecordedWorkload {
        uid,
        namespace,
        name,
        local_queue,
        cluster_queue: text(&admission["clusterQueue"]),
        priority: spec["priority"]
            .as_i64()
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or(0),
        priority_class: text(&spec["priorityClassRef"]["name"])
            .or_else(|| text(&spec["priorityClassName"])),
        pod_sets,
        created_at_ms,
        quota_reserved_at_ms: condition("QuotaReserved").map(|(at, _)| at),
        admitted_at_ms: condition("Admitted").map(|(at, _)| at),
        evicted,
        finished: condition("Finished").map(|(at_ms, reason)| Transition {
            at_ms,
            reason,
            detail: None,
        }),
        evictions: eviction_counts(status),
        problems,
    })
}

/// The condition `kind` when its status is True: when it last turned so, and why.
fn true_condition(status: &Value, kind: &str) -> Option<(i64, String)> {
    let c = status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind && c["status"] == "True")?;
    let at = parse_rfc3339(c["lastTransitionTime"].as_str()?)?;
    Some((at, c["reason"].as_str().unwrap_or_default().to_owned()))
}

fn eviction_counts(status: &Value) -> Vec<EvictionCount> {
    status["schedulingStats"]["evictions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|e| EvictionCount {
            reason: e["reason"].as_str().unwrap_or_default().to_owned(),
            underlying_cause: e["underlyingCause"].as_str().unwrap_or_default().to_owned(),
            count: e["count"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0),
        })
        .collect()
}

/// One `spec.podSets[]` entry, with what the status says of it.
fn pod_set(set: &Value, status: &Value, problems: &mut Vec<String>) -> PodSet {
    let name = set["name"].as_str().unwrap_or("main").to_owned();
    let named = |list: &Value| {
        list.as_array()
            .and_then(|l| l.iter().find(|a| a["name"] == name.as_str()))
            .cloned()
    };
    let assignment = named(&status["admission"]["podSetAssignments"]);
    let asked = set["count"].as_u64().unwrap_or(1);
    let count = assignment
        .as_ref()
        .and_then(|a| a["count"].as_u64())
        .unwrap_or(asked);
    let mut resources = BTreeMap::new();
    let mut whole = |resource: &str, quantity: &Value| match whole_quantity(quantity) {
        Some(n) => {
            resources.insert(resource.to_owned(), n);
        }
        None => problems.push(format!(
            "pod set {name}: {resource} is {quantity}, not a whole number"
        )),
    };
    let totals = assignment
        .as_ref()
        .map(|a| a["resourceUsage"].clone())
        .or_else(|| named(&status["resourceRequests"]).map(|r| r["resources"].clone()));
    match totals {
        Some(Value::Object(totals)) => {
            for (resource, quantity) in totals.iter().filter(|(r, _)| is_extended(r)) {
                whole(resource, quantity);
            }
        }
        _ => {
            for (resource, per_pod) in pod_requests(&set["template"]["spec"]) {
                whole(&resource, &Value::from(per_pod.saturating_mul(count)));
            }
        }
    }
    let flavors = assignment
        .as_ref()
        .and_then(|a| a["flavors"].as_object())
        .map(|f| {
            f.iter()
                .filter_map(|(r, flavor)| Some((r.clone(), flavor.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    PodSet {
        name,
        count: u32::try_from(count).unwrap_or(u32::MAX),
        resources,
        flavors,
    }
}

/// A pod's extended-resource requests, as the scheduler counts them: the containers' sum,
/// or the largest init container's where that is more (Kubernetes' effective request).
fn pod_requests(pod: &Value) -> BTreeMap<String, u64> {
    let requests = |list: &Value| -> Vec<BTreeMap<String, u64>> {
        list.as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|c| {
                c["resources"]["requests"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(r, _)| is_extended(r))
                    .filter_map(|(r, q)| Some((r.clone(), whole_quantity(q)?)))
                    .collect()
            })
            .collect()
    };
    let mut effective = BTreeMap::new();
    for container in requests(&pod["containers"]) {
        for (r, n) in container {
            *effective.entry(r).or_insert(0u64) += n;
        }
    }
    for init in requests(&pod["initContainers"]) {
        for (r, n) in init {
            let at = effective.entry(r).or_insert(0);
            *at = (*at).max(n);
        }
    }
    effective
}

/// Extended resources are named `domain/name` outside `kubernetes.io` (and `requests.` /
/// `hugepages-` are not extended).
fn is_extended(resource: &str) -> bool {
    resource.contains('/') && !resource.contains("kubernetes.io/")
}

/// A quantity that is a whole number (`8`, `"8"`, `"8000m"`); None otherwise.
fn whole_quantity(quantity: &Value) -> Option<u64> {
    let milli = crate::common::quantity::milli(quantity)?;
    if milli % 1000 == 0 {
        u64::try_from(milli / 1000).ok()
    } else {
        None
    }
}

/// `GET /api/cluster/workloads?from=DAY&to=DAY`: the Workloads created in a window of whole
/// UTC days (`/api/cluster/teams/{team}/workloads` for one team's).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HistoryQuery {
    pub from: Option<String>,
    /// The last day, included.
    pub to: Option<String>,
}

/// The longest window one answer covers, in days (a quarter: the planner reads 4 weeks).
pub const MAX_HISTORY_DAYS: i32 = 92;
/// The most Workloads one answer holds; `truncated` says when the window held more.
pub const MAX_HISTORY_WORKLOADS: u32 = 20_000;

impl HistoryQuery {
    /// The window: its first day and the day after its last.
    pub fn checked(&self) -> Result<(Day, Day), Vec<FieldError>> {
        let mut errors = Vec::new();
        let from = required_day("from", self.from.as_deref(), &mut errors);
        let to = required_day("to", self.to.as_deref(), &mut errors);
        let end = match (from, to) {
            (Some(from), Some(to)) => {
                day_window(from, to, MAX_HISTORY_DAYS, "a history", &mut errors)
            }
            _ => None,
        };
        match (from, end) {
            (Some(from), Some(end)) => Ok((from, end)),
            _ => Err(errors),
        }
    }
}

/// The recorded Workloads of a window, and how far the record can be trusted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadHistory {
    /// Where the history comes from, in words, when no cluster is read (GitOps mode or no
    /// target): then nothing is recorded and the list is empty.
    pub unrecorded: Option<String>,
    pub recorder: RecorderStatus,
    pub from: Day,
    /// The last day, included.
    pub to: Day,
    /// By creation time, oldest first.
    pub workloads: Vec<HistoryEntry>,
    /// More than [`MAX_HISTORY_WORKLOADS`] were created in the window: ask for fewer days.
    pub truncated: bool,
}

/// The recorder's state: its last complete listing of the cluster's Workloads, the watch that
/// follows it, and its last failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecorderStatus {
    /// When the last complete listing ended, and how many Workloads it held.
    pub listed_at_ms: Option<i64>,
    pub listed: Option<u32>,
    /// When the watch that follows each listing last delivered a change or a bookmark: the
    /// history is current to then (None while no watch is open).
    pub watched_at_ms: Option<i64>,
    /// The last failed listing or watch (cleared by a complete listing or a watch that
    /// delivers): the cluster's own words.
    pub last_error: Option<String>,
    pub last_error_at_ms: Option<i64>,
}

/// One recorded Workload, with what only the record knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    #[serde(flatten)]
    pub workload: RecordedWorkload,
    /// The team whose namespace it ran in (None: a namespace no team owns).
    pub team: Option<String>,
    /// Every eviction the recorder saw, oldest first (`evictions` counts those it missed
    /// between two listings too).
    pub evictions_seen: Vec<Transition>,
    /// Its latest admission (`workload.admitted_at_ms` is its first): after an eviction, when
    /// its last run began.
    #[serde(default)]
    pub last_admitted_at_ms: Option<i64>,
    /// When a complete listing first no longer held it (Kueue deleted it).
    pub gone_at_ms: Option<i64>,
    /// The demo's (`cluster::demo`), not a cluster's.
    #[serde(default)]
    pub demo: bool,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A v1beta2 Workload of a two-pod-set job (a launcher without GPUs and 4 workers of 8
    /// H100s each), admitted, then preempted by reclamation in its cohort; shaped as Kueue
    /// writes it (`workload_types.go`).
    fn preempted() -> Value {
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "job-train-7f2c", "namespace": "team-research",
                "uid": "5b1d0e6a-0000-4000-8000-000000000001",
                "creationTimestamp": "2026-11-30T08:00:00Z"},
            "spec": {"queueName": "research", "priority": 100,
                "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "training"},
                "podSets": [
                    {"name": "launcher", "count": 1, "template": {"spec": {"containers": [
                        {"name": "l", "resources": {"requests": {"cpu": "1"}}}]}}},
                    {"name": "worker", "count": 4, "template": {"spec": {"containers": [
                        {"name": "w", "resources": {"requests": {"cpu": "32", "nvidia.com/gpu": "8"}}}]}}}]},
            "status": {
                "admission": {"clusterQueue": "research", "podSetAssignments": [
                    {"name": "launcher", "count": 1, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}},
                    {"name": "worker", "count": 4, "flavors": {"cpu": "default", "nvidia.com/gpu": "h100-shared"},
                     "resourceUsage": {"cpu": "128", "nvidia.com/gpu": "32"}}]},
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                     "lastTransitionTime": "2026-11-30T08:04:00Z"},
                    {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                     "lastTransitionTime": "2026-11-30T08:04:00Z"},
                    {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "",
                     "lastTransitionTime": "2026-11-30T10:30:00Z"},
                    {"type": "Preempted", "status": "True", "reason": "InCohortReclamation", "message": "",
                     "lastTransitionTime": "2026-11-30T10:30:00Z"}],
                "schedulingStats": {"evictions": [
                    {"reason": "Preempted", "underlyingCause": "", "count": 2}]}}
        })
    }

    #[test]
    fn an_admitted_then_preempted_job_reads_as_kueue_wrote_it() {
        let w = read(&preempted()).expect("reads");
        assert_eq!(
            (
                w.local_queue.as_str(),
                w.cluster_queue.as_deref(),
                w.priority
            ),
            ("research", Some("research"), 100)
        );
        assert_eq!(w.priority_class.as_deref(), Some("training"));
        // 2026-11-30T08:00:00Z is 1,796,025,600 s after the epoch.
        assert_eq!(w.created_at_ms, 1_796_025_600_000);
        assert_eq!(w.admitted_at_ms, Some(1_796_025_600_000 + 4 * 60_000));
        assert_eq!(
            w.evicted,
            Some(Transition {
                at_ms: 1_796_025_600_000 + 150 * 60_000,
                reason: "Preempted".into(),
                detail: Some("InCohortReclamation".into()),
            })
        );
        assert_eq!(w.evictions[0].count, 2);
        assert_eq!(w.finished, None);
        let worker = &w.pod_sets[1];
        assert_eq!(worker.count, 4);
        assert_eq!(worker.resources, [("nvidia.com/gpu".into(), 32)].into());
        assert_eq!(worker.flavors["nvidia.com/gpu"], "h100-shared");
        assert!(w.pod_sets[0].resources.is_empty(), "cpu is not extended");
        assert_eq!(w.resources(), [("nvidia.com/gpu", 32)].into());
        assert!(w.problems.is_empty());
    }

    #[test]
    fn a_pending_job_counts_its_template_times_its_pods() {
        let mut o = preempted();
        o["status"] = json!({});
        let w = read(&o).expect("reads");
        assert_eq!(
            (w.cluster_queue, w.admitted_at_ms, w.evicted),
            (None, None, None)
        );
        assert_eq!(w.pod_sets[1].resources["nvidia.com/gpu"], 4 * 8);
        assert!(w.pod_sets[1].flavors.is_empty());
        // status.resourceRequests (what Kueue last considered) wins over the template.
        o["status"] = json!({"resourceRequests": [{"name": "worker", "resources": {"nvidia.com/gpu": "16"}}]});
        assert_eq!(
            read(&o).expect("reads").pod_sets[1].resources["nvidia.com/gpu"],
            16
        );
    }

    #[test]
    fn an_init_container_larger_than_the_containers_sets_the_pods_request() {
        let pod = json!({"containers": [
                {"resources": {"requests": {"nvidia.com/gpu": "1"}}},
                {"resources": {"requests": {"nvidia.com/gpu": 1}}}],
            "initContainers": [{"resources": {"requests": {"nvidia.com/gpu": "3", "cpu": "2"}}}]});
        assert_eq!(
            pod_requests(&pod),
            [("nvidia.com/gpu".to_owned(), 3)].into()
        );
    }

    #[test]
    fn what_the_planner_cannot_read_is_named_and_identity_is_required() {
        let mut o = preempted();
        o["spec"]["queueName"] = Value::Null;
        o["status"]["admission"]["podSetAssignments"][1]["resourceUsage"]["nvidia.com/gpu"] =
            json!("1500m");
        let w = read(&o).expect("reads");
        assert_eq!(
            w.problems,
            [
                "no spec.queueName: Kueue queues it nowhere",
                "pod set worker: nvidia.com/gpu is \"1500m\", not a whole number"
            ]
        );
        assert!(w.pod_sets[1].resources.is_empty());
        o["metadata"]["uid"] = Value::Null;
        assert!(read(&o).is_err());
    }

    #[test]
    fn a_history_window_is_whole_days_and_at_most_a_quarter() {
        let q = |from: &str, to: &str| HistoryQuery {
            from: Some(from.into()),
            to: Some(to.into()),
        };
        let (from, end) = q("2026-11-01", "2026-11-28").checked().expect("4 weeks");
        assert_eq!(from.days_until(end), 28);
        let errors = q("2026-01-01", "2026-04-03")
            .checked()
            .expect_err("31 + 28 + 31 + 3 days");
        assert_eq!(errors[0].message, "93 days: a history covers at most 92");
        let errors = HistoryQuery::default().checked().expect_err("no days");
        assert_eq!(errors.len(), 2);
    }

    #[test]
    fn a_finished_v1beta1_workload_reads_its_priority_class_name() {
        let mut o = preempted();
        o["spec"]["priorityClassRef"] = Value::Null;
        o["spec"]["priorityClassName"] = json!("batch-low");
        o["status"]["conditions"] = json!([{"type": "Finished", "status": "True",
            "reason": "Succeeded", "message": "", "lastTransitionTime": "2026-11-30T12:00:00Z"},
            {"type": "Evicted", "status": "False", "reason": "Preempted", "message": "",
             "lastTransitionTime": "2026-11-30T10:30:00Z"}]);
        let w = read(&o).expect("reads");
        assert_eq!(w.priority_class.as_deref(), Some("batch-low"));
        assert_eq!(w.finished.map(|f| f.reason).as_deref(), Some("Succeeded"));
        assert_eq!(w.evicted, None, "an Evicted condition that is False");
    }
}
