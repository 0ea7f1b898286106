//! The one Kueue renderer: a quota set-up (flavors, cohorts, one queue per team, priorities) to
//! Kueue objects — ResourceFlavor, Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass.
//! The planner's export (`manifests`) and the approved quota (`quota`) both come here.
//!
//! Invariants: every object is written from typed structs (Kueue's field names in one place)
//! and validates against the real CRD schemas (tested in `shared/tests`); borrowing and
//! lending limits appear only with a cohort, as Kueue's CEL rule demands; each resource group's
//! flavors list the same covered resources, in the same order, and a resource is covered by one
//! group only (Kueue's validation).

pub mod quota;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::common::label::Labelled;

/// A ClusterQueue's `queueingStrategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Queueing {
    StrictFifo,
    BestEffortFifo,
}

impl Labelled for Queueing {
    fn label(self) -> &'static str {
        // Kueue's own words for its queueing strategies.
        match self {
            Queueing::StrictFifo => "StrictFIFO",
            Queueing::BestEffortFifo => "BestEffortFIFO",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Queueing::StrictFifo => "The head of the queue blocks everything behind it.",
            Queueing::BestEffortFifo => "Workloads that do not fit let smaller ones pass.",
        }
    }
}

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

/// Resource-name prefixes these objects leave out of Kueue's quota: they cover accelerators
/// only, yet every pod also requests cpu and memory, and Kueue admits a workload only when its
/// ClusterQueue covers every resource its pods request ("resource cpu unavailable in
/// ClusterQueue"). The Kueue manager must exclude these (its configuration's
/// `resources.excludeResourcePrefixes`); [`ManagerConfig::note`] says so in the export.
pub const EXCLUDED_PREFIXES: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

/// One of the Kueue manager's `resources.transformations`: what a pod's `input` resource
/// counts as for quota (Kueue's `ResourceTransformation`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transformation {
    pub input: String,
    /// The input's quantity is first multiplied by this resource's quantity in the same pod
    /// (HAMi's per-vGPU memory × the vGPUs it asks for).
    pub multiply_by: Option<String>,
    /// Output resource and the factor the (multiplied) input is scaled by.
    pub outputs: Vec<(String, i64)>,
    /// `strategy: Replace` (the input is dropped); `false` is Kueue's default, `Retain`.
    pub replace: bool,
}

/// What the Kueue manager's configuration (ConfigMap `kueue-manager-config`) must hold for the
/// exported objects to admit real pods: the resources it leaves out of quota and the
/// transformations it applies.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ManagerConfig {
    pub excluded_prefixes: Vec<String>,
    pub transformations: Vec<Transformation>,
}

impl ManagerConfig {
    /// cpu, memory and ephemeral storage excluded; no transformations.
    pub fn accelerators_only() -> Self {
        Self {
            excluded_prefixes: EXCLUDED_PREFIXES.map(str::to_owned).to_vec(),
            transformations: Vec::new(),
        }
    }

    /// A pod's requests as Kueue counts them for quota: excluded prefixes dropped, then each
    /// transformation applied, its outputs summed with what remains (Kueue's
    /// `pkg/workload/workload.go`, `dropExcludedResources` then `applyResourceTransformations`;
    /// negative totals are floored at 0 there, and cannot arise from positive factors here).
    pub fn quota_requests(&self, requests: &[(String, i64)]) -> Vec<(String, i64)> {
        let mut out: Vec<(String, i64)> = Vec::new();
        let mut add =
            |resource: &str, amount: i64| match out.iter_mut().find(|(r, _)| r == resource) {
                Some((_, total)) => *total = total.saturating_add(amount),
                None => out.push((resource.to_owned(), amount)),
            };
        let excluded = |r: &str| {
            self.excluded_prefixes
                .iter()
                .any(|p| r.starts_with(p.as_str()))
        };
        for (resource, amount) in requests.iter().filter(|(r, _)| !excluded(r)) {
            let Some(t) = self.transformations.iter().find(|t| t.input == *resource) else {
                add(resource, *amount);
                continue;
            };
            let by = t
                .multiply_by
                .as_ref()
                .and_then(|m| requests.iter().find(|(r, _)| r == m))
                .map_or(1, |(_, n)| *n);
            for (output, factor) in &t.outputs {
                add(output, amount.saturating_mul(by).saturating_mul(*factor));
            }
            if !t.replace {
                add(resource, *amount);
            }
        }
        out
    }

    /// The header of `kueue.yaml`: this configuration as the YAML to put in the manager's
    /// ConfigMap, with why.
    pub fn note(&self) -> String {
        let list = self
            .excluded_prefixes
            .iter()
            .map(|p| format!("\"{p}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let mut note = format!(
            "# These ClusterQueues govern accelerators only. Every pod also requests cpu and memory, and\n\
             # Kueue admits a workload only when its ClusterQueue covers every resource it requests, so\n\
             # the Kueue manager's configuration (ConfigMap kueue-manager-config) must exclude them:\n\
             #   apiVersion: config.kueue.x-k8s.io/v1beta1\n\
             #   kind: Configuration\n\
             #   resources:\n\
             #     excludeResourcePrefixes: [{list}]\n"
        );
        if self.transformations.is_empty() {
            return note;
        }
        note.push_str(
            "# HAMi's per-vGPU memory and cores count for quota multiplied by the vGPUs a pod asks for\n\
             # (Kueue's \"Using HAMi\" task and its resource transformations), so it must also hold:\n\
             #     transformations:\n",
        );
        for t in &self.transformations {
            note.push_str(&format!("#     - input: {}\n", t.input));
            note.push_str(&format!(
                "#       strategy: {}\n",
                if t.replace { "Replace" } else { "Retain" }
            ));
            if let Some(by) = &t.multiply_by {
                note.push_str(&format!("#       multiplyBy: {by}\n"));
            }
            note.push_str("#       outputs:\n");
            for (output, factor) in &t.outputs {
                note.push_str(&format!("#         {output}: \"{factor}\"\n"));
            }
        }
        note
    }
}

/// What Kueue sees of a workload's pod: where it runs from, what it asks for and where it may
/// go (the pod template's namespace, `kueue.x-k8s.io/queue-name` label, resource requests,
/// node selector and tolerations).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodRequest {
    pub namespace: String,
    pub queue_name: Option<String>,
    /// Per resource, in its units (GPUs, CPU milli, bytes), each resource once.
    pub requests: Vec<(String, i64)>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
}

/// The flavors of the resource group that covers every resource `wanted` (Kueue takes one
/// group per pod set), or why none does.
fn covering_flavors<'g>(
    groups: &'g [(Vec<String>, Vec<String>)],
    wanted: &[(&String, i64)],
    cluster_queue: &str,
) -> Result<&'g [String], String> {
    let mut group: Option<&(Vec<String>, Vec<String>)> = None;
    for (resource, _) in wanted {
        match groups
            .iter()
            .find(|(covered, _)| covered.contains(resource))
        {
            Some(g) => group = Some(g),
            None => {
                return Err(format!(
                    "resource {resource} unavailable in ClusterQueue {cluster_queue}"
                ));
            }
        }
    }
    group
        .map(|(_, flavors)| flavors.as_slice())
        .ok_or_else(|| "the pod requests nothing the ClusterQueue governs".to_owned())
}

/// Why `flavor` cannot take `pod` (its node labels, its taints, or the queue's quota of it),
/// or `None` when it can.
fn flavor_refusal(
    flavor: &FlavorObject,
    pod: &PodRequest,
    (queue, queues): (&Queue, &[Queue]),
    wanted: &[(&String, i64)],
) -> Option<String> {
    if let Some((key, value)) = flavor
        .node_labels
        .iter()
        .find(|(k, v)| pod.node_selector.get(*k).is_some_and(|want| want != *v))
    {
        return Some(format!(
            "its nodes carry {key}={value}, the pod selects another"
        ));
    }
    let untolerated = flavor.node_taints.iter().find(|taint| {
        !pod.tolerations
            .iter()
            .chain(&flavor.tolerations)
            .any(|t| tolerates(t, taint))
    });
    if let Some(taint) = untolerated {
        return Some(format!("untolerated taint {}", taint.key));
    }
    let short = wanted.iter().find(|(resource, amount)| {
        let quota = queue
            .quotas
            .iter()
            .find(|q| q.flavor == flavor.name && q.resource == **resource);
        // Kueue's maximum capacity on an idle cohort: the nominal quota and what the rest of the
        // cohort may lend (each its lending limit, or all its nominal quota), up to the
        // borrowing limit; in no cohort, the nominal quota.
        let lent: i64 = queues
            .iter()
            .filter(|q| q.cohort.is_some() && q.cohort == queue.cohort)
            .filter(|q| q.cluster_queue != queue.cluster_queue)
            .flat_map(|q| &q.quotas)
            .filter(|q| q.flavor == flavor.name && q.resource == **resource)
            .map(|q| q.lending_limit.unwrap_or(q.nominal).min(q.nominal))
            .sum();
        let borrow = quota.and_then(|q| q.borrowing_limit).unwrap_or(lent);
        *amount > quota.map_or(0, |q| q.nominal) + borrow.min(lent)
    });
    short.map(|(resource, amount)| {
        format!(
            "{amount} {resource} is more than the ClusterQueue may hold, its nominal quota and what it may borrow"
        )
    })
}

/// Whether a toleration tolerates a taint (Kubernetes' rule).
fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    let key = t.key.is_empty() || t.key == taint.key;
    let value = match t.operator {
        TolerationOperator::Exists => true,
        TolerationOperator::Equal => t.value == taint.value,
    };
    let effect = t.effect.is_none_or(|e| e == taint.effect);
    key && value && effect
}

/// A node taint a flavor's nodes carry (Kubernetes' `Taint`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    pub key: String,
    #[serde(default)]
    pub value: String,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

/// A toleration Kueue adds to the pods it admits on a flavor (Kubernetes' `Toleration`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Toleration {
    pub key: String,
    pub operator: TolerationOperator,
    /// Empty with `Exists`.
    #[serde(default)]
    pub value: String,
    /// `None` tolerates every effect.
    #[serde(default)]
    pub effect: Option<TaintEffect>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TolerationOperator {
    Equal,
    Exists,
}

/// `preemption.reclaimWithinCohort`: whom a queue may evict to take back its lent quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Reclaim {
    Never,
    LowerPriority,
    #[default]
    Any,
}

/// `preemption.withinClusterQueue`: whom a workload may evict inside its own queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum WithinQueue {
    Never,
    #[default]
    LowerPriority,
    LowerOrNewerEqualPriority,
}

/// `preemption.borrowWithinCohort`: whether a queue may evict other queues' borrowed work to
/// admit a job that will itself borrow (Kueue's CRD: `policy` `Never` or `LowerPriority`, and
/// `maxPriorityThreshold`). Kueue rejects it with `reclaimWithinCohort: Never`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BorrowWithinCohort {
    pub policy: BorrowPolicy,
    /// Only workloads of at most this priority are evicted so; `None`: any of lower priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_priority_threshold: Option<i32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum BorrowPolicy {
    #[default]
    Never,
    LowerPriority,
}

impl BorrowWithinCohort {
    /// Whom a job of `priority` may evict in other queues while it borrows, as `Running::first`
    /// takes it (priorities below the bound); `None`: no one (`policy: Never`). Kueue's
    /// `isAboveBorrowingThreshold` (pkg/scheduler/preemption/classical/
    /// hierarchical_preemption.go): a candidate of the preemptor's priority or above, or above
    /// the threshold, is evicted only without borrowing.
    pub fn below(self, priority: i32) -> Option<i32> {
        match self.policy {
            BorrowPolicy::Never => None,
            BorrowPolicy::LowerPriority => Some(
                self.max_priority_threshold
                    .map_or(priority, |t| priority.min(t.saturating_add(1))),
            ),
        }
    }
}

impl Labelled for BorrowPolicy {
    fn label(self) -> &'static str {
        match self {
            BorrowPolicy::Never => "Never",
            BorrowPolicy::LowerPriority => "LowerPriority",
        }
    }

    fn description(self) -> &'static str {
        match self {
            BorrowPolicy::Never => {
                "A job that must borrow evicts no other team's work: it waits for idle quota."
            }
            BorrowPolicy::LowerPriority => {
                "A job that must borrow may evict other teams' borrowed jobs of lower priority."
            }
        }
    }
}

impl Labelled for Reclaim {
    fn label(self) -> &'static str {
        match self {
            Reclaim::Never => "Never",
            Reclaim::LowerPriority => "LowerPriority",
            Reclaim::Any => "Any",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Reclaim::Never => "Lent quota comes back only as the borrowers' jobs end.",
            Reclaim::LowerPriority => {
                "The lender evicts borrowers' jobs of lower priority than its own."
            }
            Reclaim::Any => "The lender evicts borrowers' jobs whatever their priority.",
        }
    }
}

impl Labelled for WithinQueue {
    fn label(self) -> &'static str {
        match self {
            WithinQueue::Never => "Never",
            WithinQueue::LowerPriority => "LowerPriority",
            WithinQueue::LowerOrNewerEqualPriority => "LowerOrNewerEqualPriority",
        }
    }

    fn description(self) -> &'static str {
        match self {
            WithinQueue::Never => "A job never evicts its own queue's jobs.",
            WithinQueue::LowerPriority => "A job evicts its queue's jobs of lower priority.",
            WithinQueue::LowerOrNewerEqualPriority => {
                "A job evicts its queue's jobs of lower priority, and those of its own priority created after it."
            }
        }
    }
}

/// A ResourceFlavor: which nodes a flavor's quota lands on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FlavorObject {
    pub name: String,
    pub node_labels: BTreeMap<String, String>,
    pub node_taints: Vec<Taint>,
    pub tolerations: Vec<Toleration>,
}

/// One resource of one flavor in a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quota {
    pub flavor: String,
    pub resource: String,
    pub nominal: i64,
    pub borrowing_limit: Option<i64>,
    pub lending_limit: Option<i64>,
}

/// A team's ClusterQueue and LocalQueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    pub cluster_queue: String,
    pub namespace: String,
    pub local_queue: String,
    pub cohort: Option<String>,
    pub queueing: Queueing,
    pub reclaim: Reclaim,
    pub within: WithinQueue,
    pub borrow: BorrowWithinCohort,
    /// Flavors and resources the queue does not list here are covered with nominal quota 0.
    pub quotas: Vec<Quota>,
    /// Held on an approver's word: `spec.stopPolicy: Hold` (the CRD's enum is `None`, `Hold`,
    /// `HoldAndDrain`): Kueue reserves quota for no new workload and lets admitted ones run to
    /// completion.
    pub held: bool,
}

/// Everything rendered into one `kueue.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Setup {
    pub flavors: Vec<FlavorObject>,
    /// The resources each flavor offers, in order (`nvidia.com/gpu`, MIG resources, …), by
    /// flavor name, each flavor once.
    pub resources: Vec<(String, Vec<String>)>,
    pub queues: Vec<Queue>,
    pub priorities: Vec<i32>,
}

impl Setup {
    /// The cohorts the queues name, each once, in order of first use.
    pub fn cohorts(&self) -> Vec<&str> {
        let mut cohorts: Vec<&str> = Vec::new();
        for name in self.queues.iter().filter_map(|q| q.cohort.as_deref()) {
            if !cohorts.contains(&name) {
                cohorts.push(name);
            }
        }
        cohorts
    }

    /// Flavors grouped as Kueue's resource groups: flavors whose resources overlap share a
    /// group, which covers the union of their resources.
    fn resource_groups(&self) -> Vec<(Vec<String>, Vec<String>)> {
        let mut groups: Vec<(Vec<String>, Vec<String>)> = Vec::new();
        for flavor in &self.flavors {
            let offers = self
                .resources
                .iter()
                .find(|(f, _)| *f == flavor.name)
                .map(|(_, offers)| offers.clone())
                .unwrap_or_default();
            let mut merged = (offers, vec![flavor.name.clone()]);
            groups.retain(|(covered, flavors)| {
                if covered.iter().any(|r| merged.0.contains(r)) {
                    for r in covered {
                        if !merged.0.contains(r) {
                            merged.0.push(r.clone());
                        }
                    }
                    merged.1.splice(0..0, flavors.iter().cloned());
                    false
                } else {
                    true
                }
            });
            groups.push(merged);
        }
        groups.retain(|(covered, _)| !covered.is_empty());
        groups
    }

    /// The objects in the order Kueue needs them created: flavors, cohorts, queues, priorities.
    pub fn objects(&self, version: KueueVersion) -> Vec<Value> {
        let api_version = version.api_version();
        let mut objects = Vec::new();
        for flavor in &self.flavors {
            objects.push(to_value(&Object {
                api_version,
                kind: "ResourceFlavor",
                metadata: Metadata::named(&flavor.name),
                spec: FlavorSpec {
                    node_labels: &flavor.node_labels,
                    node_taints: &flavor.node_taints,
                    tolerations: flavor.tolerations.iter().map(TolerationSpec::of).collect(),
                },
            }));
        }
        for cohort in self.cohorts() {
            objects.push(to_value(&Object {
                api_version,
                kind: "Cohort",
                metadata: Metadata::named(cohort),
                spec: Empty {},
            }));
        }
        let groups = self.resource_groups();
        for queue in &self.queues {
            objects.push(self.cluster_queue(queue, &groups, version));
            objects.push(to_value(&Object {
                api_version,
                kind: "LocalQueue",
                metadata: Metadata {
                    name: &queue.local_queue,
                    namespace: Some(&queue.namespace),
                },
                spec: LocalQueueSpec {
                    cluster_queue: &queue.cluster_queue,
                },
            }));
        }
        // Each value once, in order; kept sorted as it is built (no sort's code in the wasm).
        let mut priorities: Vec<i32> = Vec::new();
        for &value in &self.priorities {
            if let Err(at) = priorities.binary_search(&value) {
                priorities.insert(at, value);
            }
        }
        for value in priorities {
            let name = priority_class(value);
            objects.push(to_value(&PriorityClass {
                api_version,
                kind: "WorkloadPriorityClass",
                metadata: Metadata::named(&name),
                value,
                description: format!("gpufleet workload priority {value}"),
            }));
        }
        objects
    }

    /// The flavor Kueue would admit `pod` on, following its rules: the pod's LocalQueue (by the
    /// queue-name label, in its namespace) leads to a ClusterQueue; every resource it requests,
    /// as the manager's `config` counts it for quota, must be covered there; then the
    /// first flavor of the covering group whose node labels agree with the pod's node
    /// selector, whose taints the pod (with the flavor's own tolerations, which Kueue adds)
    /// tolerates, and whose quota holds the request (nominal, or borrowing in a cohort). The
    /// reason, in Kueue's words where it has them, when none does.
    pub fn admits(&self, pod: &PodRequest, config: &ManagerConfig) -> Result<String, String> {
        self.admits_in(&self.resource_groups(), pod, config)
    }

    /// [`Setup::admits`] with the resource groups already formed (once for many pods).
    fn admits_in(
        &self,
        groups: &[(Vec<String>, Vec<String>)],
        pod: &PodRequest,
        config: &ManagerConfig,
    ) -> Result<String, String> {
        let queue_name = pod
            .queue_name
            .as_deref()
            .ok_or("no kueue.x-k8s.io/queue-name label: Kueue does not manage the pod")?;
        let queue = self
            .queues
            .iter()
            .find(|q| q.local_queue == queue_name && q.namespace == pod.namespace)
            .ok_or_else(|| format!("LocalQueue {queue_name} doesn't exist in {}", pod.namespace))?;
        let counted = config.quota_requests(&pod.requests);
        let wanted: Vec<(&String, i64)> = counted.iter().map(|(r, n)| (r, *n)).collect();
        let flavors = covering_flavors(groups, &wanted, &queue.cluster_queue)?;
        let mut reasons = Vec::new();
        for name in flavors {
            let Some(flavor) = self.flavors.iter().find(|f| f.name == *name) else {
                continue;
            };
            match flavor_refusal(flavor, pod, (queue, &self.queues), &wanted) {
                Some(reason) => reasons.push(format!("flavor {name}: {reason}")),
                None => return Ok(name.clone()),
            }
        }
        Err(reasons.join("; "))
    }

    /// One team's ClusterQueue.
    pub fn cluster_queue_of(&self, cluster_queue: &str, version: KueueVersion) -> Option<Value> {
        let queue = self
            .queues
            .iter()
            .find(|q| q.cluster_queue == cluster_queue)?;
        Some(self.cluster_queue(queue, &self.resource_groups(), version))
    }

    fn cluster_queue(
        &self,
        queue: &Queue,
        groups: &[(Vec<String>, Vec<String>)],
        version: KueueVersion,
    ) -> Value {
        let resource_groups = groups
            .iter()
            .map(|(covered, flavors)| ResourceGroup {
                covered_resources: covered,
                flavors: flavors
                    .iter()
                    .map(|flavor| FlavorQuotas {
                        name: flavor,
                        resources: covered
                            .iter()
                            .map(|resource| {
                                let quota = queue
                                    .quotas
                                    .iter()
                                    .find(|q| q.flavor == *flavor && q.resource == *resource);
                                // Kueue's CEL rule: no limits without a cohort.
                                let limit = |f: fn(&Quota) -> Option<i64>| {
                                    queue.cohort.as_ref().and(quota.and_then(f))
                                };
                                ResourceQuota {
                                    name: resource,
                                    nominal_quota: quota.map_or(0, |q| q.nominal),
                                    borrowing_limit: limit(|q| q.borrowing_limit),
                                    lending_limit: limit(|q| q.lending_limit),
                                }
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect();
        let cohort = queue.cohort.as_deref();
        let v1beta1 = version == KueueVersion::V1beta1;
        to_value(&Object {
            api_version: version.api_version(),
            kind: "ClusterQueue",
            metadata: Metadata::named(&queue.cluster_queue),
            spec: ClusterQueueSpec {
                cohort: cohort.filter(|_| v1beta1),
                cohort_name: cohort.filter(|_| !v1beta1),
                namespace_selector: NamespaceSelector {
                    match_labels: BTreeMap::from([(
                        "kubernetes.io/metadata.name",
                        queue.namespace.as_str(),
                    )]),
                },
                queueing_strategy: match queue.queueing {
                    Queueing::StrictFifo => "StrictFIFO",
                    Queueing::BestEffortFifo => "BestEffortFIFO",
                },
                preemption: Preemption {
                    reclaim_within_cohort: if cohort.is_some() {
                        queue.reclaim
                    } else {
                        Reclaim::Never
                    },
                    within_cluster_queue: queue.within,
                    // Kueue's CEL rule: none with `reclaimWithinCohort: Never`.
                    borrow_within_cohort: (cohort.is_some()
                        && queue.reclaim != Reclaim::Never
                        && queue.borrow.policy != BorrowPolicy::Never)
                        .then_some(queue.borrow),
                },
                resource_groups,
                stop_policy: queue.held.then_some("Hold"),
            },
        })
    }
}

/// Whether a pod would start: Kueue admits it and a node carries what the flavor selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Admissible {
    Yes,
    /// It starts, but not as planned (on unshared cards where the plan shares them).
    Unlike,
    /// It never starts: Kueue refuses it, or no node matches its flavor's labels.
    Never,
}

/// The check's answer for one pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Whose pod: `team/workload`, or a team and the resource of its quota.
    pub subject: String,
    pub admissible: Admissible,
    /// The flavor Kueue admits it on; `None` when it refuses.
    pub flavor: Option<String>,
    /// In words: where it lands, or why it does not.
    pub message: String,
}

impl Admissible {
    pub fn word(self) -> &'static str {
        match self {
            Admissible::Yes => "starts",
            Admissible::Unlike => "starts unlike the plan",
            Admissible::Never => "never starts",
        }
    }
}

/// The check's verdicts as text, one line each, then the count of each kind.
pub fn report(verdicts: &[Verdict]) -> String {
    let mut text: String = verdicts
        .iter()
        .map(|v| format!("{} {}: {}\n", v.subject, v.admissible.word(), v.message))
        .collect();
    for kind in [Admissible::Yes, Admissible::Unlike, Admissible::Never] {
        let n = verdicts.iter().filter(|v| v.admissible == kind).count();
        text.push_str(&format!("# {n} {}\n", kind.word()));
    }
    text
}

/// A pod and the node it needs.
pub struct Trial {
    pub subject: String,
    pub pod: PodRequest,
    /// Labels a node that can run it carries, by the keys their owner (GPU Feature Discovery
    /// for `nvidia.com/gpu.product`) writes; a flavor label under another key is the platform
    /// team's to set and is taken as set.
    pub node_labels: BTreeMap<String, String>,
    /// The node labels of the same model whose cards are not shared, where the pod is planned
    /// on shared ones: a flavor selecting them admits it, unlike the plan.
    pub unshared: Option<BTreeMap<String, String>>,
}

impl Setup {
    /// The check of each trial ([`Setup::check`]), the resource groups formed once.
    pub fn check_all(&self, trials: &[Trial], config: &ManagerConfig) -> Vec<Verdict> {
        let groups = self.resource_groups();
        trials
            .iter()
            .map(|t| self.check_in(&groups, t, config))
            .collect()
    }

    /// The check: whether Kueue admits the trial's pod under `config` and whether the flavor
    /// it admits on selects the node it needs.
    pub fn check(&self, trial: &Trial, config: &ManagerConfig) -> Verdict {
        self.check_in(&self.resource_groups(), trial, config)
    }

    fn check_in(
        &self,
        groups: &[(Vec<String>, Vec<String>)],
        trial: &Trial,
        config: &ManagerConfig,
    ) -> Verdict {
        let verdict = |admissible, flavor: Option<&str>, message: String| Verdict {
            subject: trial.subject.clone(),
            admissible,
            flavor: flavor.map(str::to_owned),
            message,
        };
        let flavor = match self.admits_in(groups, &trial.pod, config) {
            Ok(flavor) => flavor,
            Err(reason) => {
                return verdict(
                    Admissible::Never,
                    None,
                    format!("Kueue refuses it: {reason}"),
                );
            }
        };
        let selects = |node: &BTreeMap<String, String>| {
            self.flavors
                .iter()
                .find(|f| f.name == flavor)
                .and_then(|f| {
                    f.node_labels
                        .iter()
                        .find(|(k, v)| node.get(*k).is_some_and(|n| n != *v))
                })
                .map(|(k, v)| format!("{k}={v}"))
        };
        let Some(wrong) = selects(&trial.node_labels) else {
            return verdict(
                Admissible::Yes,
                Some(&flavor),
                format!("admitted on flavor {flavor}"),
            );
        };
        let carried = trial
            .node_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        match trial
            .unshared
            .as_ref()
            .filter(|node| selects(node).is_none())
        {
            Some(_) => verdict(
                Admissible::Unlike,
                Some(&flavor),
                format!(
                    "admitted on flavor {flavor}, whose {wrong} selects unshared cards: each pod holds a whole card; the nodes that share carry {carried}"
                ),
            ),
            None => verdict(
                Admissible::Never,
                Some(&flavor),
                format!(
                    "admitted on flavor {flavor}, but no node carries {wrong}: the nodes it needs carry {carried}, so the pod stays Pending"
                ),
            ),
        }
    }
}

// The objects as Kueue's API spells them: typed, so a misspelt field cannot be written.

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Object<'a, S> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata<'a>,
    spec: S,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PriorityClass<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata<'a>,
    value: i32,
    description: String,
}

#[derive(Serialize)]
struct Metadata<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
}

impl<'a> Metadata<'a> {
    fn named(name: &'a str) -> Self {
        Self {
            name,
            namespace: None,
        }
    }
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FlavorSpec<'a> {
    node_labels: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "<[Taint]>::is_empty")]
    node_taints: &'a [Taint],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tolerations: Vec<TolerationSpec<'a>>,
}

/// Kubernetes leaves out empty optional fields: `value` with `Exists`, a missing `effect`.
#[derive(Serialize)]
struct TolerationSpec<'a> {
    key: &'a str,
    operator: TolerationOperator,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    effect: Option<TaintEffect>,
}

impl<'a> TolerationSpec<'a> {
    fn of(t: &'a Toleration) -> Self {
        Self {
            key: &t.key,
            operator: t.operator,
            value: Some(t.value.as_str()).filter(|v| !v.is_empty()),
            effect: t.effect,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LocalQueueSpec<'a> {
    cluster_queue: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterQueueSpec<'a> {
    /// v1beta1's name for the cohort field.
    #[serde(skip_serializing_if = "Option::is_none")]
    cohort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cohort_name: Option<&'a str>,
    namespace_selector: NamespaceSelector<'a>,
    queueing_strategy: &'static str,
    preemption: Preemption,
    resource_groups: Vec<ResourceGroup<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_policy: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NamespaceSelector<'a> {
    match_labels: BTreeMap<&'static str, &'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Preemption {
    reclaim_within_cohort: Reclaim,
    within_cluster_queue: WithinQueue,
    #[serde(skip_serializing_if = "Option::is_none")]
    borrow_within_cohort: Option<BorrowWithinCohort>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceGroup<'a> {
    covered_resources: &'a [String],
    flavors: Vec<FlavorQuotas<'a>>,
}

#[derive(Serialize)]
struct FlavorQuotas<'a> {
    name: &'a str,
    resources: Vec<ResourceQuota<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceQuota<'a> {
    name: &'a str,
    nominal_quota: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    borrowing_limit: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lending_limit: Option<i64>,
}

/// Our own types always serialise; a failure would be a bug, shown as null, never a panic.
fn to_value(object: &impl Serialize) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// The WorkloadPriorityClass values a new workload class starts with and approved quota
/// publishes: inference above training, so serving preempts a borrowing training job and
/// never the reverse.
pub const INFERENCE_PRIORITY: i32 = 100;
pub const TRAINING_PRIORITY: i32 = 10;

pub fn priority_class(value: i32) -> String {
    if value < 0 {
        format!("priority-minus-{}", value.unsigned_abs())
    } else {
        format!("priority-{value}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn flavor(name: &str) -> FlavorObject {
        FlavorObject {
            name: name.into(),
            ..FlavorObject::default()
        }
    }

    #[test]
    fn flavors_sharing_a_resource_share_a_group_and_list_every_covered_resource() {
        // A whole-GPU flavor and two MIG flavors, one of which also offers a second profile.
        let setup = Setup {
            flavors: vec![flavor("h100"), flavor("mig-a"), flavor("mig-b")],
            resources: Vec::from([
                ("h100".into(), vec!["nvidia.com/gpu".into()]),
                ("mig-a".into(), vec!["nvidia.com/mig-1g.18gb".into()]),
                (
                    "mig-b".into(),
                    vec![
                        "nvidia.com/mig-3g.71gb".into(),
                        "nvidia.com/mig-1g.18gb".into(),
                    ],
                ),
            ]),
            ..Setup::default()
        };
        let groups = setup.resource_groups();
        assert_eq!(
            groups,
            vec![
                (vec!["nvidia.com/gpu".to_owned()], vec!["h100".to_owned()]),
                (
                    vec![
                        "nvidia.com/mig-3g.71gb".to_owned(),
                        "nvidia.com/mig-1g.18gb".to_owned()
                    ],
                    vec!["mig-a".to_owned(), "mig-b".to_owned()]
                ),
            ]
        );
    }

    #[test]
    fn a_queue_without_a_cohort_carries_no_limits_and_reclaims_nothing() {
        let setup = Setup {
            flavors: vec![flavor("h100")],
            resources: vec![("h100".into(), vec!["nvidia.com/gpu".into()])],
            queues: vec![Queue {
                cluster_queue: "cq".into(),
                namespace: "ns".into(),
                local_queue: "lq".into(),
                cohort: None,
                queueing: Queueing::StrictFifo,
                reclaim: Reclaim::Any,
                within: WithinQueue::Never,
                borrow: BorrowWithinCohort::default(),
                quotas: vec![Quota {
                    flavor: "h100".into(),
                    resource: "nvidia.com/gpu".into(),
                    nominal: 8,
                    borrowing_limit: Some(4),
                    lending_limit: Some(2),
                }],
                held: false,
            }],
            priorities: vec![],
        };
        let cq = setup
            .cluster_queue_of("cq", KueueVersion::V1beta2)
            .expect("cq");
        assert_eq!(
            cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0],
            json!({"name": "nvidia.com/gpu", "nominalQuota": 8})
        );
        assert_eq!(cq["spec"]["preemption"]["reclaimWithinCohort"], "Never");
        assert!(cq["spec"].get("cohortName").is_none());
        assert_eq!(setup.cohorts(), Vec::<&str>::new());
        assert!(
            cq["spec"].get("stopPolicy").is_none(),
            "Kueue's default, None"
        );
        let mut held = setup.clone();
        held.queues[0].held = true;
        let cq = held
            .cluster_queue_of("cq", KueueVersion::V1beta2)
            .expect("cq");
        assert_eq!(cq["spec"]["stopPolicy"], "Hold");
    }

    #[test]
    fn borrow_within_cohort_is_written_only_where_kueue_accepts_it() {
        let mut setup = Setup {
            flavors: vec![flavor("h100")],
            resources: vec![("h100".into(), vec!["nvidia.com/gpu".into()])],
            queues: vec![Queue {
                cluster_queue: "cq".into(),
                namespace: "ns".into(),
                local_queue: "lq".into(),
                cohort: Some("all".into()),
                queueing: Queueing::BestEffortFifo,
                reclaim: Reclaim::Any,
                within: WithinQueue::LowerPriority,
                borrow: BorrowWithinCohort {
                    policy: BorrowPolicy::LowerPriority,
                    max_priority_threshold: Some(10),
                },
                quotas: vec![],
                held: false,
            }],
            priorities: vec![],
        };
        let preemption = |setup: &Setup| {
            setup
                .cluster_queue_of("cq", KueueVersion::V1beta2)
                .expect("cq")["spec"]["preemption"]
                .clone()
        };
        assert_eq!(
            preemption(&setup)["borrowWithinCohort"],
            json!({"policy": "LowerPriority", "maxPriorityThreshold": 10})
        );
        // The CRD's rule: not with reclaimWithinCohort Never (nor, so, without a cohort).
        setup.queues[0].reclaim = Reclaim::Never;
        assert!(preemption(&setup).get("borrowWithinCohort").is_none());
        setup.queues[0].reclaim = Reclaim::Any;
        setup.queues[0].cohort = None;
        assert!(preemption(&setup).get("borrowWithinCohort").is_none());
        // Kueue's default, Never, is left to Kueue.
        setup.queues[0].cohort = Some("all".into());
        setup.queues[0].borrow = BorrowWithinCohort::default();
        assert!(preemption(&setup).get("borrowWithinCohort").is_none());
        // The threshold reads as Kueue's isAboveBorrowingThreshold decides.
        let lower = |t| BorrowWithinCohort {
            policy: BorrowPolicy::LowerPriority,
            max_priority_threshold: t,
        };
        assert_eq!(lower(None).below(100), Some(100));
        assert_eq!(lower(Some(10)).below(100), Some(11), "10 evicted, 11 not");
        assert_eq!(lower(Some(500)).below(100), Some(100));
        assert_eq!(BorrowWithinCohort::default().below(100), None);
    }

    #[test]
    fn priority_classes_are_named_for_their_value() {
        assert_eq!(priority_class(-5), "priority-minus-5");
        assert_eq!(priority_class(100), "priority-100");
    }
}
