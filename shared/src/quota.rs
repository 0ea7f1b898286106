//! GPU quota as a system of record: the flavors quota is granted on, each team's Kueue
//! identity, quota requests and their life cycle, the rules a request must meet against the
//! fleet, the cohort impact an approver sees, and the Kueue objects the effective quota
//! renders to. Pure: the request form (in the browser) and the server run the same checks.
//!
//! Invariants:
//! - a team's **effective quota** on a day is its latest-approved request whose window
//!   (`starts_on ..= ends_on`, UTC days) holds that day; a team with none has nominal quota 0
//!   and, in a cohort, borrowing limit 0: its queue stays and admits nothing new;
//! - per flavor and resource, the effective nominal quotas never add up to more than the
//!   flavor's capacity on any day (checked at every day the sum can change);
//! - borrowing and lending limits only with a cohort; a lending limit is at most the nominal.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    common::day::Day,
    common::error::FieldError,
    common::validate::{is_dns_label, validate_dns_label},
    common::yaml::to_yaml,
    fleet::catalogue::{self, Vendor},
    kueue::Queueing,
    kueue::{
        FlavorObject, KueueVersion, Queue, Quota, Reclaim, Setup, Taint, TaintEffect, Toleration,
        TolerationOperator, WithinQueue,
    },
};

/// Longest justification, in characters.
pub const MAX_JUSTIFICATION_CHARS: usize = 2000;
/// Above this checkpoint interval the mean rework after a reclaim (half the interval) exceeds
/// 15 minutes.
pub const CHECKPOINT_WARN_MIN: u32 = 30;

/// A resource flavor: the pools it is made of, its capacity and where Kueue puts its pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flavor {
    pub name: String,
    pub gpu_model: String,
    /// The node pools that make it up.
    pub pools: Vec<String>,
    /// Whole GPUs in those pools.
    pub gpus: i64,
    pub settings: FlavorSettings,
    /// Bumped by every change to the settings; an edit naming an older one is refused (409).
    #[serde(default)]
    pub version: i32,
}

/// What admins set on a flavor.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlavorSettings {
    #[serde(default)]
    pub node_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub node_taints: Vec<Taint>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// MIG instances per GPU by profile (`"1g.18gb": 7`); empty for whole GPUs.
    #[serde(default)]
    pub mig_layout: BTreeMap<String, u32>,
    /// How several pods share one of its devices (a card or a MIG instance) when the device
    /// plugin lets them: time-slicing, MPS or HAMi fractions. What the noisy-neighbour view
    /// reports; `None` when pods do not share or admins did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<crate::fleet::sharing::Mechanism>,
}

/// One resource a flavor offers and how much of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capacity {
    pub resource: String,
    pub amount: i64,
}

impl Flavor {
    fn vendor(&self) -> Vendor {
        catalogue::find(&self.gpu_model).map_or(Vendor::Nvidia, |m| m.vendor)
    }

    /// Whole GPUs as the vendor's resource, or, when MIG-partitioned, each profile's
    /// `nvidia.com/mig-<profile>` at instances per GPU × GPUs.
    pub fn resources(&self) -> Vec<Capacity> {
        if self.settings.mig_layout.is_empty() {
            return vec![Capacity {
                resource: self.vendor().resource_name().to_owned(),
                amount: self.gpus,
            }];
        }
        self.settings
            .mig_layout
            .iter()
            .map(|(profile, per_gpu)| Capacity {
                resource: format!("nvidia.com/mig-{profile}"),
                amount: self.gpus * i64::from(*per_gpu),
            })
            .collect()
    }

    pub fn capacity(&self, resource: &str) -> Option<i64> {
        self.resources()
            .into_iter()
            .find(|c| c.resource == resource)
            .map(|c| c.amount)
    }

    /// The node label that pins the flavor to its model, unless admins set their own labels.
    pub fn object(&self) -> FlavorObject {
        let node_labels = if self.settings.node_labels.is_empty() {
            BTreeMap::from([(
                self.vendor().product_label().to_owned(),
                self.gpu_model.clone(),
            )])
        } else {
            self.settings.node_labels.clone()
        };
        FlavorObject {
            name: self.name.clone(),
            node_labels,
            node_taints: self.settings.node_taints.clone(),
            tolerations: self.settings.tolerations.clone(),
        }
    }
}

impl FlavorSettings {
    /// Kubernetes' rules for labels, taints and tolerations (at most 8 of each, as the
    /// ResourceFlavor CRD says) and a MIG layout that fits one GPU of `gpu_model`.
    pub fn validate(&self, gpu_model: &str) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut error = |path: String, message: String| errors.push(FieldError { path, message });
        for (what, count) in [
            ("node_labels", self.node_labels.len()),
            ("node_taints", self.node_taints.len()),
            ("tolerations", self.tolerations.len()),
        ] {
            if count > 8 {
                error(
                    what.into(),
                    format!("at most 8 (Kueue's limit); {count} given"),
                );
            }
        }
        for (key, value) in &self.node_labels {
            let path = format!("node_labels.{key}");
            if let Err(problem) = label_key(key) {
                error(path.clone(), problem);
            }
            if !value.is_empty() && !label_name(value) {
                error(path, LABEL_VALUE_RULE.into());
            }
        }
        for (i, taint) in self.node_taints.iter().enumerate() {
            if let Err(problem) = label_key(&taint.key) {
                error(format!("node_taints[{i}].key"), problem);
            }
            if !taint.value.is_empty() && !label_name(&taint.value) {
                error(format!("node_taints[{i}].value"), LABEL_VALUE_RULE.into());
            }
        }
        for (i, t) in self.tolerations.iter().enumerate() {
            if t.key.is_empty() && t.operator != TolerationOperator::Exists {
                error(
                    format!("tolerations[{i}].operator"),
                    "must be Exists when the key is empty (it then tolerates every taint)".into(),
                );
            }
            if !t.key.is_empty()
                && let Err(problem) = label_key(&t.key)
            {
                error(format!("tolerations[{i}].key"), problem);
            }
            if t.operator == TolerationOperator::Exists && !t.value.is_empty() {
                error(
                    format!("tolerations[{i}].value"),
                    "must be empty with Exists".into(),
                );
            }
        }
        if !self.mig_layout.is_empty() {
            let layout: Vec<(String, u32)> = self
                .mig_layout
                .iter()
                .map(|(p, n)| (p.clone(), *n))
                .collect();
            if let Err(problem) = crate::packing::mig::fits_one_gpu(gpu_model, &layout) {
                error("mig_layout".into(), problem);
            }
        }
        if let Some(m) = self.sharing
            && !SOFTWARE_SHARING.contains(&m)
        {
            error(
                "sharing".into(),
                "pods share a device by time_slicing, mps or hami_fractions (MIG is the MIG layout; leave it out for whole GPUs)".into(),
            );
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// The ways several pods share one device.
pub const SOFTWARE_SHARING: [crate::fleet::sharing::Mechanism; 3] = [
    crate::fleet::sharing::Mechanism::TimeSlicing,
    crate::fleet::sharing::Mechanism::Mps,
    crate::fleet::sharing::Mechanism::HamiFractions,
];

/// A flavor's settings as lines a person types, one entry per line: node labels `key=value`;
/// taints `key=value:Effect` or `key:Effect`; tolerations `key=value:Effect` (Equal),
/// `key:Effect` or `key` (Exists), `*` (every taint); the MIG layout `profile=instances`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SettingsText {
    pub node_labels: String,
    pub node_taints: String,
    pub tolerations: String,
    pub mig_layout: String,
    /// `time_slicing`, `mps`, `hami_fractions`, or empty.
    #[serde(default)]
    pub sharing: String,
}

fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty())
}

fn effect(text: &str) -> Option<TaintEffect> {
    match text {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

const EFFECTS: &str = "NoSchedule, PreferNoSchedule or NoExecute";

impl SettingsText {
    pub fn of(settings: &FlavorSettings) -> SettingsText {
        let join = |items: Vec<String>| items.join("\n");
        let kv = |k: &str, v: &str| {
            if v.is_empty() {
                k.to_owned()
            } else {
                format!("{k}={v}")
            }
        };
        SettingsText {
            node_labels: join(
                settings
                    .node_labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect(),
            ),
            node_taints: join(
                settings
                    .node_taints
                    .iter()
                    .map(|t| format!("{}:{:?}", kv(&t.key, &t.value), t.effect))
                    .collect(),
            ),
            tolerations: join(
                settings
                    .tolerations
                    .iter()
                    .map(|t| {
                        let head = if t.key.is_empty() {
                            "*".to_owned()
                        } else {
                            kv(&t.key, &t.value)
                        };
                        match t.effect {
                            Some(e) => format!("{head}:{e:?}"),
                            None => head,
                        }
                    })
                    .collect(),
            ),
            mig_layout: join(
                settings
                    .mig_layout
                    .iter()
                    .map(|(p, n)| format!("{p}={n}"))
                    .collect(),
            ),
            sharing: settings
                .sharing
                .map(|m| crate::fleet::sharing::sharing_name(Some(m)).to_owned())
                .unwrap_or_default(),
        }
    }

    /// The settings the lines say; each unreadable line named by field and line number. The
    /// settings' own rules (`FlavorSettings::validate`) apply afterwards.
    pub fn parse(&self) -> Result<FlavorSettings, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut settings = FlavorSettings::default();
        for (n, line) in lines(&self.node_labels) {
            match line.split_once('=') {
                Some((k, v)) => {
                    settings
                        .node_labels
                        .insert(k.trim().to_owned(), v.trim().to_owned());
                }
                None => errors.push(field(
                    "node_labels",
                    format!("line {n}: write key=value, not {line:?}"),
                )),
            }
        }
        for (n, line) in lines(&self.node_taints) {
            let parsed = line.rsplit_once(':').and_then(|(head, e)| {
                let effect = effect(e.trim())?;
                let (key, value) = head.split_once('=').unwrap_or((head, ""));
                Some(Taint {
                    key: key.trim().to_owned(),
                    value: value.trim().to_owned(),
                    effect,
                })
            });
            match parsed {
                Some(t) => settings.node_taints.push(t),
                None => errors.push(field(
                    "node_taints",
                    format!("line {n}: write key=value:Effect or key:Effect (Effect: {EFFECTS}), not {line:?}"),
                )),
            }
        }
        for (n, line) in lines(&self.tolerations) {
            let (head, effect_text) = match line.rsplit_once(':') {
                Some((h, e)) => (h.trim(), Some(e.trim())),
                None => (line, None),
            };
            let effect_of = effect_text.map(effect);
            if effect_of == Some(None) {
                errors.push(field(
                    "tolerations",
                    format!(
                        "line {n}: the effect must be {EFFECTS}, not {:?}",
                        effect_text.unwrap_or_default()
                    ),
                ));
                continue;
            }
            let (key, value, operator) = match head.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim(), TolerationOperator::Equal),
                None if head == "*" => ("", "", TolerationOperator::Exists),
                None => (head, "", TolerationOperator::Exists),
            };
            settings.tolerations.push(Toleration {
                key: key.to_owned(),
                operator,
                value: value.to_owned(),
                effect: effect_of.flatten(),
            });
        }
        for (n, line) in lines(&self.mig_layout) {
            match line
                .split_once('=')
                .map(|(p, c)| (p.trim(), c.trim().parse::<u32>()))
            {
                Some((profile, Ok(count))) if count > 0 => {
                    settings.mig_layout.insert(profile.to_owned(), count);
                }
                _ => errors.push(field(
                    "mig_layout",
                    format!("line {n}: write profile=instances per GPU (1g.10gb=7), not {line:?}"),
                )),
            }
        }
        match self.sharing.trim() {
            "" => {}
            text => match crate::fleet::sharing::parse_sharing(text) {
                Some(Some(m)) if SOFTWARE_SHARING.contains(&m) => settings.sharing = Some(m),
                _ => errors.push(field(
                    "sharing",
                    format!("time_slicing, mps, hami_fractions or empty, not {text:?}"),
                )),
            },
        }
        if errors.is_empty() {
            Ok(settings)
        } else {
            Err(errors)
        }
    }
}

const LABEL_VALUE_RULE: &str = "must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";

/// A label value or a key's name part.
fn label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !s.is_empty()
        && s.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// `[prefix/]name`, the prefix a DNS subdomain.
fn label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && (prefix.len() > 253 || !prefix.split('.').all(is_dns_label))
    {
        return Err("the prefix before '/' must be a DNS subdomain (e.g. nvidia.com)".into());
    }
    if label_name(name) {
        Ok(())
    } else {
        Err(format!("the name part {LABEL_VALUE_RULE}"))
    }
}

/// A team's Kueue identity: defaults from its name and namespace; admins may set the names an
/// existing cluster already uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamQueue {
    pub team: String,
    pub namespace: String,
    pub cluster_queue: String,
    pub local_queue: String,
    /// `None`: the queue is in no cohort and its quota is hard.
    pub cohort: Option<String>,
}

/// What admins change on a team's queue identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueNames {
    pub cluster_queue: String,
    pub local_queue: String,
    pub cohort: Option<String>,
}

impl QueueNames {
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        validate_dns_label("cluster_queue", &self.cluster_queue, &mut errors);
        validate_dns_label("local_queue", &self.local_queue, &mut errors);
        if let Some(cohort) = &self.cohort {
            validate_dns_label("cohort", cohort, &mut errors);
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// The cohort new teams join.
pub const DEFAULT_COHORT: &str = "gpufleet";

/// One flavor's resource in a request, in the resource's units (GPUs or MIG instances).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaLine {
    pub flavor: String,
    pub resource: String,
    pub nominal: i64,
    /// `None`: no limit (with a cohort, the team may borrow all the cohort lends).
    #[serde(default)]
    pub borrowing_limit: Option<i64>,
    /// `None`: all of its unused nominal quota may be lent.
    #[serde(default)]
    pub lending_limit: Option<i64>,
}

/// What a team asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaSpec {
    pub lines: Vec<QuotaLine>,
    #[serde(default)]
    pub reclaim_within_cohort: Reclaim,
    #[serde(default)]
    pub within_cluster_queue: WithinQueue,
    #[serde(default = "best_effort")]
    pub queueing: Queueing,
    /// How often preemptible training saves a checkpoint, in minutes.
    #[serde(default)]
    pub checkpoint_interval_min: Option<u32>,
    pub justification: String,
    pub starts_on: Day,
    /// Inclusive; `None`: open-ended.
    #[serde(default)]
    pub ends_on: Option<Day>,
}

fn best_effort() -> Queueing {
    Queueing::BestEffortFifo
}

impl QuotaSpec {
    /// A request for `team` starting `today`, its lines one per flavor resource at 0.
    pub fn blank(flavors: &[Flavor], today: Day) -> QuotaSpec {
        QuotaSpec {
            lines: flavors
                .iter()
                .flat_map(|f| {
                    f.resources().into_iter().map(|c| QuotaLine {
                        flavor: f.name.clone(),
                        resource: c.resource,
                        nominal: 0,
                        borrowing_limit: None,
                        lending_limit: None,
                    })
                })
                .collect(),
            reclaim_within_cohort: Reclaim::default(),
            within_cluster_queue: WithinQueue::default(),
            queueing: Queueing::BestEffortFifo,
            checkpoint_interval_min: Some(30),
            justification: String::new(),
            starts_on: today,
            ends_on: None,
        }
    }

    fn holds(&self, day: Day) -> bool {
        self.starts_on <= day && self.ends_on.is_none_or(|end| day <= end)
    }

    fn line(&self, flavor: &str, resource: &str) -> Option<&QuotaLine> {
        self.lines
            .iter()
            .find(|l| l.flavor == flavor && l.resource == resource)
    }

    fn nominal(&self, flavor: &str, resource: &str) -> i64 {
        self.line(flavor, resource).map_or(0, |l| l.nominal)
    }

    /// Whether the queue's workloads can be preempted: it may borrow (what it borrows is
    /// reclaimed when its owner wants it back) or it preempts inside itself.
    pub fn preemptible(&self, in_cohort: bool) -> bool {
        let borrows = in_cohort && self.lines.iter().any(|l| l.borrowing_limit != Some(0));
        borrows || self.within_cluster_queue != WithinQueue::Never
    }
}

/// Where a request is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Draft,
    Submitted,
    Approved,
    Rejected,
    /// A later approval replaced it for every day it could still count.
    Superseded,
    Revoked,
}

/// What a person (or a later approval) does to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Edit,
    Submit,
    Approve,
    Reject,
    Revoke,
    Supersede,
}

impl State {
    pub const ALL: [State; 6] = [
        State::Draft,
        State::Submitted,
        State::Approved,
        State::Rejected,
        State::Superseded,
        State::Revoked,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Draft => "draft",
            State::Submitted => "submitted",
            State::Approved => "approved",
            State::Rejected => "rejected",
            State::Superseded => "superseded",
            State::Revoked => "revoked",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|state| state.as_str() == s)
    }

    /// The state `action` leads to, or `None` when it is not allowed from here: draft →
    /// submitted → approved | rejected; approved → superseded | revoked; only drafts are edited.
    pub fn after(self, action: Action) -> Option<State> {
        match (self, action) {
            (State::Draft, Action::Edit) => Some(State::Draft),
            (State::Draft, Action::Submit) => Some(State::Submitted),
            (State::Submitted, Action::Approve) => Some(State::Approved),
            (State::Submitted, Action::Reject) => Some(State::Rejected),
            (State::Approved, Action::Supersede) => Some(State::Superseded),
            (State::Approved, Action::Revoke) => Some(State::Revoked),
            _ => None,
        }
    }
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Edit => "edit",
            Action::Submit => "submit",
            Action::Approve => "approve",
            Action::Reject => "reject",
            Action::Revoke => "revoke",
            Action::Supersede => "supersede",
        }
    }
}

/// A request as the API shows it. Times are RFC 3339 in UTC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaRequest {
    pub id: i64,
    pub team: String,
    pub state: State,
    /// Bumped by every change; an edit or decision that names an older one is refused (409).
    pub version: i32,
    pub spec: QuotaSpec,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    pub submitted_at: Option<String>,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub comment: Option<String>,
    /// Approved and its window holds today.
    #[serde(default)]
    pub in_force: bool,
    /// When its ClusterQueue and LocalQueue reached the cluster as approved (RFC 3339 UTC).
    #[serde(default)]
    pub applied_at: Option<String>,
    /// Why they have not yet, in the cluster's words.
    #[serde(default)]
    pub apply_error: Option<String>,
}

/// `POST /api/quota/teams/{team}/requests`: a new draft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewRequest {
    pub spec: QuotaSpec,
}

/// `PUT …/requests/{id}`: a draft's new spec, from the version it was read at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditRequest {
    pub version: i32,
    pub spec: QuotaSpec,
}

/// `POST …/submit`: the version the requester saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submit {
    pub version: i32,
}

/// `POST …/approve | reject | revoke`: the version decided on, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    pub version: i32,
    pub comment: String,
}

impl Decision {
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let chars = self.comment.trim().chars().count();
        if chars == 0 || chars > MAX_JUSTIFICATION_CHARS {
            return Err(vec![field(
                "comment",
                format!("say why, in 1-{MAX_JUSTIFICATION_CHARS} characters"),
            )]);
        }
        Ok(())
    }
}

/// `PUT /api/quota/flavors/{flavor}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlavorEdit {
    pub version: i32,
    pub settings: FlavorSettings,
}

/// A request with what the approver weighs: the rules' verdict today, the cohort impact, and
/// the team's ClusterQueue as it is and as the approval would make it (YAML).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestView {
    pub request: QuotaRequest,
    pub checked: Checked,
    pub impact: Vec<Impact>,
    pub queue_now_yaml: String,
    pub queue_after_yaml: String,
}

/// An approved request as the rules see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approved {
    pub id: i64,
    pub team: String,
    /// Approval order: a larger one was approved later.
    pub order: i64,
    pub spec: QuotaSpec,
}

/// Everything the rules read: the flavors, the teams' queues and the approved requests.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QuotaWorld {
    pub flavors: Vec<Flavor>,
    pub teams: Vec<TeamQueue>,
    pub approved: Vec<Approved>,
}

/// The outcome of checking a request: errors block it, warnings inform the approver.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Checked {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<FieldError>,
}

/// One flavor resource of the fleet on a day: capacity, each team's approved nominal quota,
/// and what is left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub flavor: String,
    pub resource: String,
    pub capacity: i64,
    /// Teams with nominal quota here, in name order.
    pub teams: Vec<(String, i64)>,
    pub nominal_total: i64,
    /// Capacity no queue holds.
    pub unassigned: i64,
    /// What queues in a cohort lend (lending limit, or all their nominal quota when idle).
    pub lendable: i64,
}

/// One flavor resource before and after a request, as the approver sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Impact {
    pub flavor: String,
    pub resource: String,
    pub capacity: i64,
    pub on: Day,
    pub before: Side,
    pub after: Side,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Side {
    pub nominal_total: i64,
    /// Capacity no queue holds.
    pub unassigned: i64,
    /// What the requesting team's cohort can lend: each member's lending limit, or its whole
    /// nominal quota when it has none (Kueue lends unused nominal quota).
    pub cohort_lendable: i64,
    pub teams: Vec<TeamSide>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamSide {
    pub team: String,
    pub nominal: i64,
    /// The most it can borrow: its borrowing limit or, when lower, what the rest of its
    /// cohort lends; 0 outside a cohort.
    pub most_borrowable: i64,
}

impl QuotaWorld {
    pub fn team(&self, name: &str) -> Option<&TeamQueue> {
        self.teams.iter().find(|t| t.team == name)
    }

    fn flavor(&self, name: &str) -> Option<&Flavor> {
        self.flavors.iter().find(|f| f.name == name)
    }

    /// Each team's effective request on `day`: its latest-approved one whose window holds it.
    pub fn effective_on(&self, day: Day) -> BTreeMap<&str, &Approved> {
        let mut effective: BTreeMap<&str, &Approved> = BTreeMap::new();
        for a in self.approved.iter().filter(|a| a.spec.holds(day)) {
            let slot = effective.entry(a.team.as_str()).or_insert(a);
            if a.order > slot.order {
                *slot = a;
            }
        }
        effective
    }

    /// The world as it would be with `spec` approved for `team` now (approved last).
    pub fn with(&self, team: &str, spec: &QuotaSpec) -> QuotaWorld {
        let mut world = self.clone();
        let order = self.approved.iter().map(|a| a.order).max().unwrap_or(0) + 1;
        world.approved.push(Approved {
            id: 0,
            team: team.to_owned(),
            order,
            spec: spec.clone(),
        });
        world
    }

    /// Ids of `team`'s approved requests that a new approval of `spec` leaves nothing to count
    /// for: from today on, their window lies inside the new one.
    pub fn superseded_by(&self, team: &str, spec: &QuotaSpec, today: Day) -> Vec<i64> {
        self.approved
            .iter()
            .filter(|a| a.team == team)
            .filter(|a| {
                let from = a.spec.starts_on.max(today);
                let ends_inside = match (a.spec.ends_on, spec.ends_on) {
                    (_, None) => true,
                    (Some(old), Some(new)) => old <= new,
                    (None, Some(_)) => false,
                };
                from >= spec.starts_on && ends_inside
            })
            .map(|a| a.id)
            .collect()
    }

    /// Sum of effective nominal quota per flavor resource on `day`.
    fn nominal_totals(&self, day: Day) -> BTreeMap<(String, String), i64> {
        let mut totals = BTreeMap::new();
        for a in self.effective_on(day).values() {
            for line in &a.spec.lines {
                *totals
                    .entry((line.flavor.clone(), line.resource.clone()))
                    .or_insert(0) += line.nominal;
            }
        }
        totals
    }

    /// Days from `from` to `until` (inclusive; `None`: open) on which the effective set can
    /// change: `from` itself, each approved window's start, and the day after each end.
    fn change_days(&self, from: Day, until: Option<Day>) -> Vec<Day> {
        let mut days = vec![from];
        for a in &self.approved {
            days.push(a.spec.starts_on);
            if let Some(end) = a.spec.ends_on {
                days.push(end.plus(1));
            }
        }
        days.retain(|d| *d >= from && until.is_none_or(|u| *d <= u));
        days.sort_unstable();
        days.dedup();
        days
    }

    /// Flavor resources whose approved nominal quotas add up to more than their capacity on
    /// some day from `from` on (after a flavor shrinks or changes its MIG layout), in words.
    pub fn overcommitted(&self, from: Day) -> Vec<String> {
        let mut problems = Vec::new();
        for day in self.change_days(from, None) {
            for ((flavor, resource), total) in self.nominal_totals(day) {
                let capacity = self
                    .flavor(&flavor)
                    .and_then(|f| f.capacity(&resource))
                    .unwrap_or(0);
                let problem = format!(
                    "flavor {flavor} {resource}: approved nominal quotas add up to {total} on {day}, over its capacity of {capacity}"
                );
                if total > capacity
                    && !problems
                        .iter()
                        .any(|p: &String| p.starts_with(&format!("flavor {flavor} {resource}:")))
                {
                    problems.push(problem);
                }
            }
        }
        problems
    }

    /// Every rule for `team` asking for `spec` on `today`; see the module's invariants.
    pub fn check(&self, team: &str, spec: &QuotaSpec, today: Day) -> Checked {
        let mut checked = Checked::default();
        let Some(queue) = self.team(team) else {
            checked
                .errors
                .push(field("team", format!("no team is named {team:?}")));
            return checked;
        };
        self.check_lines(queue, spec, &mut checked);
        // Capacity needs well-formed lines and dates, not a justification: the form shows it
        // while the rest is still being written.
        let well_formed = checked.errors.is_empty();
        check_terms(spec, queue.cohort.is_some(), today, &mut checked);
        if well_formed && !checked.errors.iter().any(|e| e.path == "ends_on") {
            self.check_capacity(team, spec, today, &mut checked);
            self.check_borrowing(team, spec, today, &mut checked);
        }
        checked
    }

    fn check_lines(&self, queue: &TeamQueue, spec: &QuotaSpec, checked: &mut Checked) {
        for (i, line) in spec.lines.iter().enumerate() {
            let at = |what: &str| format!("lines[{i}].{what}");
            let Some(flavor) = self.flavor(&line.flavor) else {
                let known: Vec<&str> = self.flavors.iter().map(|f| f.name.as_str()).collect();
                checked.errors.push(field(
                    &at("flavor"),
                    format!(
                        "no flavor is named {:?}; the fleet has {}",
                        line.flavor,
                        known.join(", ")
                    ),
                ));
                continue;
            };
            if flavor.capacity(&line.resource).is_none() {
                let offers: Vec<String> =
                    flavor.resources().into_iter().map(|c| c.resource).collect();
                checked.errors.push(field(
                    &at("resource"),
                    format!(
                        "flavor {} offers {}, not {}",
                        flavor.name,
                        offers.join(", "),
                        line.resource
                    ),
                ));
            }
            if spec.lines[..i]
                .iter()
                .any(|l| l.flavor == line.flavor && l.resource == line.resource)
            {
                checked.errors.push(field(
                    &at("resource"),
                    format!("{} of {} is listed twice", line.resource, line.flavor),
                ));
            }
            for (what, value) in [
                ("nominal", Some(line.nominal)),
                ("borrowing_limit", line.borrowing_limit),
                ("lending_limit", line.lending_limit),
            ] {
                if value.is_some_and(|v| v < 0) {
                    checked
                        .errors
                        .push(field(&at(what), "must not be negative".into()));
                }
            }
            if queue.cohort.is_none() {
                for (what, value) in [
                    ("borrowing_limit", line.borrowing_limit),
                    ("lending_limit", line.lending_limit),
                ] {
                    if value.is_some() {
                        checked.errors.push(field(
                            &at(what),
                            format!(
                                "only with a cohort: {}'s queue is in none, so its quota is hard",
                                queue.team
                            ),
                        ));
                    }
                }
            }
            if let Some(lend) = line.lending_limit
                && lend > line.nominal
            {
                checked.errors.push(field(
                    &at("lending_limit"),
                    format!(
                        "{lend} is more than the nominal quota of {}: a queue lends only its own",
                        line.nominal
                    ),
                ));
            }
        }
    }

    fn check_capacity(&self, team: &str, spec: &QuotaSpec, today: Day, checked: &mut Checked) {
        let would_be = self.with(team, spec);
        let from = spec.starts_on.max(today);
        let mut warned = Vec::new();
        for day in would_be.change_days(from, spec.ends_on) {
            let totals = would_be.nominal_totals(day);
            for (i, line) in spec.lines.iter().enumerate() {
                let Some(capacity) = self
                    .flavor(&line.flavor)
                    .and_then(|f| f.capacity(&line.resource))
                else {
                    continue;
                };
                let key = (line.flavor.clone(), line.resource.clone());
                let total = totals.get(&key).copied().unwrap_or(0);
                let path = format!("lines[{i}].nominal");
                if total > capacity && !checked.errors.iter().any(|e| e.path == path) {
                    checked.errors.push(field(
                        &path,
                        format!(
                            "flavor {} {}: the nominal quotas would add up to {total} on {day}, over its capacity of {capacity}",
                            line.flavor, line.resource
                        ),
                    ));
                } else if total == capacity
                    && line.nominal > 0
                    && self.team(team).is_some_and(|t| t.cohort.is_some())
                    && !warned.contains(&key)
                {
                    warned.push(key);
                    checked.warnings.push(field(
                        &path,
                        format!(
                            "flavor {} {}: the nominal quotas add up to its whole capacity of {capacity} on {day}; nothing is left unassigned, so the cohort only moves idle quota its owners reclaim on demand",
                            line.flavor, line.resource
                        ),
                    ));
                }
            }
        }
    }

    fn check_borrowing(&self, team: &str, spec: &QuotaSpec, today: Day, checked: &mut Checked) {
        let would_be = self.with(team, spec);
        let day = spec.starts_on.max(today);
        for (i, line) in spec.lines.iter().enumerate() {
            let Some(limit) = line.borrowing_limit else {
                continue;
            };
            let lendable = would_be.lendable_to(team, &line.flavor, &line.resource, day);
            if limit > lendable {
                checked.warnings.push(field(
                    &format!("lines[{i}].borrowing_limit"),
                    format!(
                        "{limit} is more than the rest of the cohort can lend of {} {} ({lendable} on {day})",
                        line.flavor, line.resource
                    ),
                ));
            }
        }
    }

    /// What the other members of `team`'s cohort can lend it of one flavor resource on `day`.
    fn lendable_to(&self, team: &str, flavor: &str, resource: &str, day: Day) -> i64 {
        let Some(cohort) = self.team(team).and_then(|t| t.cohort.as_deref()) else {
            return 0;
        };
        self.effective_on(day)
            .values()
            .filter(|a| a.team != team)
            .filter(|a| self.team(&a.team).and_then(|t| t.cohort.as_deref()) == Some(cohort))
            .filter_map(|a| a.spec.line(flavor, resource))
            .map(|l| l.lending_limit.unwrap_or(l.nominal).min(l.nominal))
            .sum()
    }

    fn side(&self, team: &str, flavor: &Flavor, resource: &str, day: Day) -> Side {
        let capacity = flavor.capacity(resource).unwrap_or(0);
        let effective = self.effective_on(day);
        let nominal_of = |t: &str| {
            effective
                .get(t)
                .map_or(0, |a| a.spec.nominal(&flavor.name, resource))
        };
        let nominal_total: i64 = self.teams.iter().map(|t| nominal_of(&t.team)).sum();
        let cohort = self.team(team).and_then(|t| t.cohort.clone());
        let cohort_lendable = self
            .teams
            .iter()
            .filter(|t| cohort.is_some() && t.cohort == cohort)
            .filter_map(|t| effective.get(t.team.as_str()))
            .filter_map(|a| a.spec.line(&flavor.name, resource))
            .map(|l| l.lending_limit.unwrap_or(l.nominal).min(l.nominal))
            .sum();
        let teams = self
            .teams
            .iter()
            .map(|t| {
                let lendable = self.lendable_to(&t.team, &flavor.name, resource, day);
                let limit = effective
                    .get(t.team.as_str())
                    .and_then(|a| a.spec.line(&flavor.name, resource))
                    .and_then(|l| l.borrowing_limit);
                TeamSide {
                    team: t.team.clone(),
                    nominal: nominal_of(&t.team),
                    most_borrowable: limit.map_or(lendable, |l| l.min(lendable)),
                }
            })
            .collect();
        Side {
            nominal_total,
            unassigned: capacity - nominal_total,
            cohort_lendable,
            teams,
        }
    }

    /// Per flavor resource, the approved quota in force on `day` (the Fleet page's bars).
    pub fn allocation(&self, day: Day) -> Vec<Allocation> {
        let effective = self.effective_on(day);
        self.flavors
            .iter()
            .flat_map(|flavor| {
                let effective = &effective;
                flavor.resources().into_iter().map(move |c| {
                    let lines: Vec<(&TeamQueue, &QuotaLine)> = self
                        .teams
                        .iter()
                        .filter_map(|t| {
                            let line = effective
                                .get(t.team.as_str())?
                                .spec
                                .line(&flavor.name, &c.resource)?;
                            Some((t, line))
                        })
                        .collect();
                    let teams: Vec<(String, i64)> = lines
                        .iter()
                        .filter(|(_, l)| l.nominal > 0)
                        .map(|(t, l)| (t.team.clone(), l.nominal))
                        .collect();
                    let nominal_total = teams.iter().map(|(_, n)| n).sum();
                    Allocation {
                        flavor: flavor.name.clone(),
                        resource: c.resource.clone(),
                        capacity: c.amount,
                        lendable: lines
                            .iter()
                            .filter(|(t, _)| t.cohort.is_some())
                            .map(|(_, l)| l.lending_limit.unwrap_or(l.nominal).min(l.nominal))
                            .sum(),
                        unassigned: c.amount - nominal_total,
                        nominal_total,
                        teams,
                    }
                })
            })
            .collect()
    }

    /// Per flavor resource, the fleet before and after approving `spec` for `team`, on the
    /// first day it would count.
    pub fn impact(&self, team: &str, spec: &QuotaSpec, today: Day) -> Vec<Impact> {
        let on = spec.starts_on.max(today);
        let after = self.with(team, spec);
        self.flavors
            .iter()
            .flat_map(|flavor| {
                flavor.resources().into_iter().map(|c| Impact {
                    flavor: flavor.name.clone(),
                    resource: c.resource.clone(),
                    capacity: c.amount,
                    on,
                    before: self.side(team, flavor, &c.resource, on),
                    after: after.side(team, flavor, &c.resource, on),
                })
            })
            .collect()
    }

    /// `request` as the approver weighs it on `today`: the rules and the impact against every
    /// other approval, and the team's ClusterQueue now and after, on the first day it counts.
    pub fn review(&self, request: QuotaRequest, today: Day, version: KueueVersion) -> RequestView {
        let others = QuotaWorld {
            approved: self
                .approved
                .iter()
                .filter(|a| a.id != request.id)
                .cloned()
                .collect(),
            ..self.clone()
        };
        let on = request.spec.starts_on.max(today);
        let queue_yaml = |world: &QuotaWorld| {
            self.team(&request.team)
                .and_then(|t| {
                    world
                        .kueue_setup(on)
                        .cluster_queue_of(&t.cluster_queue, version)
                })
                .map(|cq| to_yaml(&cq))
                .unwrap_or_default()
        };
        RequestView {
            checked: others.check(&request.team, &request.spec, today),
            impact: others.impact(&request.team, &request.spec, today),
            queue_now_yaml: queue_yaml(self),
            queue_after_yaml: queue_yaml(&others.with(&request.team, &request.spec)),
            request,
        }
    }

    /// The Kueue objects of the quota in force on `day`.
    pub fn kueue_setup(&self, day: Day) -> Setup {
        let effective = self.effective_on(day);
        let queues = self
            .teams
            .iter()
            .map(|t| {
                let (terms, quotas) = match effective.get(t.team.as_str()) {
                    Some(a) => (
                        Some(&a.spec),
                        a.spec
                            .lines
                            .iter()
                            .map(|l| Quota {
                                flavor: l.flavor.clone(),
                                resource: l.resource.clone(),
                                nominal: l.nominal,
                                borrowing_limit: l.borrowing_limit,
                                lending_limit: l.lending_limit,
                            })
                            .collect(),
                    ),
                    // No quota in force: nothing of its own and nothing borrowed.
                    None => (
                        None,
                        self.flavors
                            .iter()
                            .flat_map(|f| {
                                f.resources().into_iter().map(|c| Quota {
                                    flavor: f.name.clone(),
                                    resource: c.resource,
                                    nominal: 0,
                                    borrowing_limit: Some(0),
                                    lending_limit: None,
                                })
                            })
                            .collect(),
                    ),
                };
                Queue {
                    cluster_queue: t.cluster_queue.clone(),
                    namespace: t.namespace.clone(),
                    local_queue: t.local_queue.clone(),
                    cohort: t.cohort.clone(),
                    queueing: terms.map_or(Queueing::BestEffortFifo, |s| s.queueing),
                    reclaim: terms.map_or(Reclaim::default(), |s| s.reclaim_within_cohort),
                    within: terms.map_or(WithinQueue::default(), |s| s.within_cluster_queue),
                    quotas,
                }
            })
            .collect();
        Setup {
            flavors: self.flavors.iter().map(Flavor::object).collect(),
            resources: self
                .flavors
                .iter()
                .map(|f| {
                    (
                        f.name.clone(),
                        f.resources().into_iter().map(|c| c.resource).collect(),
                    )
                })
                .collect(),
            queues,
            priorities: vec![
                crate::kueue::TRAINING_PRIORITY,
                crate::kueue::INFERENCE_PRIORITY,
            ],
        }
    }
}

/// Dates, justification and checkpoints.
fn check_terms(spec: &QuotaSpec, in_cohort: bool, today: Day, checked: &mut Checked) {
    let chars = spec.justification.trim().chars().count();
    if chars == 0 {
        checked.errors.push(field(
            "justification",
            "say why the team needs this quota".into(),
        ));
    } else if chars > MAX_JUSTIFICATION_CHARS {
        checked.errors.push(field(
            "justification",
            format!("at most {MAX_JUSTIFICATION_CHARS} characters; {chars} given"),
        ));
    }
    if let Some(end) = spec.ends_on {
        if end < spec.starts_on {
            checked.errors.push(field(
                "ends_on",
                format!("{end} is before the start, {}", spec.starts_on),
            ));
        } else if end < today {
            checked.errors.push(field(
                "ends_on",
                format!("{end} has passed (today is {today})"),
            ));
        }
    }
    if spec.preemptible(in_cohort) {
        match spec.checkpoint_interval_min {
            None | Some(0) => checked.errors.push(field(
                "checkpoint_interval_min",
                "a preemptible queue needs a checkpoint interval: its work may be evicted when it borrows or when higher-priority work arrives".into(),
            )),
            Some(m) if m > CHECKPOINT_WARN_MIN => checked.warnings.push(field(
                "checkpoint_interval_min",
                format!(
                    "every {m} minutes: after a reclaim a job redoes {} minutes on average, more than 15",
                    f64::from(m) / 2.0
                ),
            )),
            Some(_) => {}
        }
    }
}

fn field(path: &str, message: String) -> FieldError {
    FieldError {
        path: path.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::sharing::Mechanism;

    fn day(s: &str) -> Day {
        Day::parse(s).expect("a date")
    }

    fn flavor(name: &str, gpus: i64) -> Flavor {
        Flavor {
            name: name.into(),
            gpu_model: "H100-SXM5-80GB".into(),
            pools: vec![name.into()],
            gpus,
            settings: FlavorSettings::default(),
            version: 1,
        }
    }

    fn team(name: &str, cohort: Option<&str>) -> TeamQueue {
        TeamQueue {
            team: name.into(),
            namespace: format!("team-{name}"),
            cluster_queue: name.into(),
            local_queue: name.into(),
            cohort: cohort.map(str::to_owned),
        }
    }

    fn spec(lines: &[(&str, i64, Option<i64>, Option<i64>)], from: &str) -> QuotaSpec {
        QuotaSpec {
            lines: lines
                .iter()
                .map(|&(f, n, b, l)| QuotaLine {
                    flavor: f.into(),
                    resource: "nvidia.com/gpu".into(),
                    nominal: n,
                    borrowing_limit: b,
                    lending_limit: l,
                })
                .collect(),
            checkpoint_interval_min: Some(20),
            justification: "pre-training run".into(),
            starts_on: day(from),
            ..QuotaSpec::blank(&[], day(from))
        }
    }

    fn approved(id: i64, team: &str, spec: QuotaSpec) -> Approved {
        Approved {
            id,
            team: team.into(),
            order: id,
            spec,
        }
    }

    fn world() -> QuotaWorld {
        QuotaWorld {
            flavors: vec![flavor("h100", 64)],
            teams: vec![
                team("research", Some("gpufleet")),
                team("search", Some("gpufleet")),
                team("solo", None),
            ],
            approved: vec![approved(
                1,
                "search",
                spec(&[("h100", 24, None, Some(8))], "2026-11-01"),
            )],
        }
    }

    const TODAY: &str = "2026-12-01";

    fn paths(fields: &[FieldError]) -> Vec<&str> {
        fields.iter().map(|f| f.path.as_str()).collect()
    }

    #[test]
    fn the_life_cycle_allows_only_its_transitions() {
        use Action::*;
        use State::*;
        let allowed: Vec<(State, Action, State)> = State::ALL
            .into_iter()
            .flat_map(|s| {
                [Edit, Submit, Approve, Reject, Revoke, Supersede]
                    .into_iter()
                    .filter_map(move |a| s.after(a).map(|t| (s, a, t)))
            })
            .collect();
        assert_eq!(
            allowed,
            vec![
                (Draft, Edit, Draft),
                (Draft, Submit, Submitted),
                (Submitted, Approve, Approved),
                (Submitted, Reject, Rejected),
                (Approved, Revoke, Revoked),
                (Approved, Supersede, Superseded),
            ]
        );
        for state in State::ALL {
            assert_eq!(State::parse(state.as_str()), Some(state));
        }
    }

    #[test]
    fn nominal_quota_over_capacity_is_an_error_naming_the_figures() {
        // 64 GPUs, search holds 24: research may have 40, not 41.
        let w = world();
        let ok = w.check(
            "research",
            &spec(&[("h100", 40, None, None)], TODAY),
            day(TODAY),
        );
        assert_eq!(ok.errors, vec![]);
        assert_eq!(paths(&ok.warnings), ["lines[0].nominal"], "{ok:?}");
        assert!(ok.warnings[0].message.contains("whole capacity of 64"));
        let over = w.check(
            "research",
            &spec(&[("h100", 41, None, None)], TODAY),
            day(TODAY),
        );
        assert_eq!(paths(&over.errors), ["lines[0].nominal"]);
        assert_eq!(
            over.errors[0].message,
            "flavor h100 nvidia.com/gpu: the nominal quotas would add up to 65 on 2026-12-01, over its capacity of 64"
        );
    }

    #[test]
    fn capacity_shows_while_the_justification_is_still_empty() {
        let mut s = spec(&[("h100", 41, None, None)], TODAY);
        s.justification.clear();
        let checked = world().check("research", &s, day(TODAY));
        assert_eq!(
            paths(&checked.errors),
            ["justification", "lines[0].nominal"]
        );
    }

    #[test]
    fn capacity_is_checked_on_every_day_the_sum_can_change() {
        // search holds 24 from November and, approved later, only 8 during December: research
        // may ask 50 for December (8 + 50 = 58) but not from January on, when search's 24
        // count again (24 + 50 = 74 > 64).
        let mut w = world();
        let mut december = spec(&[("h100", 8, None, None)], "2026-12-01");
        december.ends_on = Some(day("2026-12-31"));
        w.approved.push(approved(2, "search", december));
        let mut ask = spec(&[("h100", 50, None, None)], TODAY);
        ask.ends_on = Some(day("2026-12-31"));
        assert_eq!(w.check("research", &ask, day(TODAY)).errors, vec![]);
        ask.ends_on = None;
        let errors = w.check("research", &ask, day(TODAY)).errors;
        assert_eq!(paths(&errors), ["lines[0].nominal"]);
        assert!(
            errors[0].message.contains("74 on 2027-01-01"),
            "{}",
            errors[0].message
        );
    }

    #[test]
    fn the_latest_approval_in_its_window_is_what_counts() {
        let mut w = world();
        let mut december = spec(&[("h100", 8, None, None)], "2026-12-10");
        december.ends_on = Some(day("2026-12-20"));
        // The December request does not cover the November one's future: nothing superseded.
        assert_eq!(
            w.superseded_by("search", &december, day(TODAY)),
            Vec::<i64>::new()
        );
        w.approved.push(approved(2, "search", december));
        let nominal = |d: &str| {
            w.effective_on(day(d))["search"]
                .spec
                .nominal("h100", "nvidia.com/gpu")
        };
        assert_eq!(nominal("2026-12-09"), 24);
        assert_eq!(nominal("2026-12-10"), 8);
        assert_eq!(nominal("2026-12-20"), 8);
        assert_eq!(nominal("2026-12-21"), 24);
        assert!(w.effective_on(day("2026-10-31")).is_empty());
        // An open-ended one from today covers it: superseded.
        let open = spec(&[("h100", 16, None, None)], TODAY);
        assert_eq!(w.superseded_by("search", &open, day(TODAY)), vec![1, 2]);
        assert_eq!(
            w.superseded_by("research", &open, day(TODAY)),
            Vec::<i64>::new()
        );
    }

    #[test]
    fn limits_need_a_cohort_and_lending_stays_within_nominal() {
        let w = world();
        let checked = w.check(
            "solo",
            &spec(&[("h100", 8, Some(4), Some(2))], TODAY),
            day(TODAY),
        );
        assert_eq!(
            paths(&checked.errors),
            ["lines[0].borrowing_limit", "lines[0].lending_limit"]
        );
        assert!(checked.errors[0].message.contains("only with a cohort"));
        let checked = w.check(
            "research",
            &spec(&[("h100", 8, None, Some(9))], TODAY),
            day(TODAY),
        );
        assert_eq!(paths(&checked.errors), ["lines[0].lending_limit"]);
        let checked = w.check(
            "research",
            &spec(&[("h100", -1, Some(-2), None)], TODAY),
            day(TODAY),
        );
        assert_eq!(
            paths(&checked.errors),
            ["lines[0].nominal", "lines[0].borrowing_limit"]
        );
        let checked = w.check(
            "research",
            &spec(&[("a100", 1, None, None), ("h100", 1, None, None)], TODAY),
            day(TODAY),
        );
        assert_eq!(paths(&checked.errors), ["lines[0].flavor"]);
        assert!(checked.errors[0].message.contains("the fleet has h100"));
    }

    #[test]
    fn borrowing_more_than_the_cohort_lends_is_a_warning() {
        // search lends at most 8 of its 24: research may borrow 8 without a warning, not 9.
        let w = world();
        let ok = w.check(
            "research",
            &spec(&[("h100", 8, Some(8), None)], TODAY),
            day(TODAY),
        );
        assert_eq!((ok.errors.len(), ok.warnings.len()), (0, 0), "{ok:?}");
        let over = w.check(
            "research",
            &spec(&[("h100", 8, Some(9), None)], TODAY),
            day(TODAY),
        );
        assert_eq!(paths(&over.warnings), ["lines[0].borrowing_limit"]);
        assert!(over.warnings[0].message.contains("(8 on 2026-12-01)"));
    }

    #[test]
    fn preemptible_queues_need_a_checkpoint_interval() {
        let w = world();
        let mut s = spec(&[("h100", 8, None, None)], TODAY);
        s.checkpoint_interval_min = None;
        let checked = w.check("research", &s, day(TODAY));
        assert_eq!(paths(&checked.errors), ["checkpoint_interval_min"]);
        s.checkpoint_interval_min = Some(45);
        let checked = w.check("research", &s, day(TODAY));
        assert_eq!(paths(&checked.warnings), ["checkpoint_interval_min"]);
        assert!(checked.warnings[0].message.contains("22.5 minutes"));
        // Hard quota, no preemption inside the queue: nothing can evict its work.
        s.checkpoint_interval_min = None;
        s.within_cluster_queue = WithinQueue::Never;
        assert_eq!(w.check("solo", &s, day(TODAY)).errors, vec![]);
    }

    #[test]
    fn dates_and_justification_are_checked() {
        let w = world();
        let mut s = spec(&[("h100", 8, None, None)], TODAY);
        s.justification = "  ".into();
        s.ends_on = Some(day("2026-11-30"));
        let checked = w.check("research", &s, day(TODAY));
        assert_eq!(paths(&checked.errors), ["justification", "ends_on"]);
        let wrong: Result<QuotaSpec, _> = serde_json::from_str(
            r#"{"lines": [], "justification": "x", "starts_on": "2026-02-30"}"#,
        );
        assert!(wrong.is_err());
    }

    #[test]
    fn the_impact_shows_the_cohort_before_and_after() {
        // 64 GPUs; search holds 24 lending 8. research asks 16, lending 4, borrowing up to 6.
        let w = world();
        let impact = w.impact(
            "research",
            &spec(&[("h100", 16, Some(6), Some(4))], TODAY),
            day(TODAY),
        );
        assert_eq!(impact.len(), 1);
        let i = &impact[0];
        assert_eq!(
            (i.capacity, i.before.nominal_total, i.before.unassigned),
            (64, 24, 40)
        );
        assert_eq!((i.after.nominal_total, i.after.unassigned), (40, 24));
        assert_eq!((i.before.cohort_lendable, i.after.cohort_lendable), (8, 12));
        let side = |s: &Side, t: &str| {
            s.teams
                .iter()
                .find(|x| x.team == t)
                .map(|x| (x.nominal, x.most_borrowable))
                .expect("team")
        };
        // Before, research holds nothing and may borrow what search lends (8).
        assert_eq!(side(&i.before, "research"), (0, 8));
        // After: its own limit of 6 binds; search may borrow research's 4; solo nothing.
        assert_eq!(side(&i.after, "research"), (16, 6));
        assert_eq!(side(&i.after, "search"), (24, 4));
        assert_eq!(side(&i.after, "solo"), (0, 0));
    }

    #[test]
    fn the_allocation_shows_each_team_and_what_is_left() {
        // search holds 24 of 64 and lends 8; solo (no cohort) holds 10, which it cannot lend.
        let mut w = world();
        w.approved.push(approved(
            2,
            "solo",
            spec(&[("h100", 10, None, None)], TODAY),
        ));
        let a = &w.allocation(day(TODAY))[0];
        assert_eq!(
            a.teams,
            vec![("search".to_owned(), 24), ("solo".to_owned(), 10)]
        );
        assert_eq!(
            (a.capacity, a.nominal_total, a.unassigned, a.lendable),
            (64, 34, 30, 8)
        );
    }

    #[test]
    fn mig_flavors_offer_each_profile_at_instances_per_gpu() {
        let mut f = flavor("h100-mig", 16);
        f.settings.mig_layout = BTreeMap::from([("1g.10gb".into(), 7)]);
        assert_eq!(
            f.resources(),
            vec![Capacity {
                resource: "nvidia.com/mig-1g.10gb".into(),
                amount: 112
            }]
        );
        assert_eq!(f.settings.validate("H100-SXM5-80GB"), Ok(()));
        f.settings.mig_layout = BTreeMap::from([("1g.10gb".into(), 8)]);
        let errors = f.settings.validate("H100-SXM5-80GB").expect_err("8 × 1g");
        assert_eq!(paths(&errors), ["mig_layout"]);
    }

    #[test]
    fn settings_read_from_lines_and_back() {
        let text = SettingsText {
            node_labels: "nvidia.com/gpu.product=H100-SXM5-80GB\n\n gpufleet.io/pool = a ".into(),
            node_taints: "nvidia.com/gpu:NoSchedule\ndedicated=ml:NoExecute".into(),
            tolerations: "nvidia.com/gpu:NoSchedule\ndedicated=ml\n*".into(),
            mig_layout: "1g.10gb=7".into(),
            sharing: "time_slicing".into(),
        };
        let settings = text.parse().expect("reads");
        assert_eq!(settings.node_labels["gpufleet.io/pool"], "a");
        assert_eq!(settings.node_taints[1].value, "ml");
        assert_eq!(settings.tolerations[0].operator, TolerationOperator::Exists);
        assert_eq!(settings.tolerations[1].operator, TolerationOperator::Equal);
        assert_eq!(settings.tolerations[1].effect, None);
        assert_eq!(settings.tolerations[2].key, "");
        assert_eq!(settings.mig_layout["1g.10gb"], 7);
        assert_eq!(settings.sharing, Some(Mechanism::TimeSlicing));
        assert_eq!(settings.validate("H100-SXM5-80GB"), Ok(()));
        // Printed and read again, the same settings.
        assert_eq!(SettingsText::of(&settings).parse(), Ok(settings));
        let bad = SettingsText {
            node_labels: "just-a-key".into(),
            node_taints: "k:Sometimes".into(),
            tolerations: "k:Never".into(),
            mig_layout: "1g.10gb=0".into(),
            sharing: "mig".into(),
        };
        let paths: Vec<String> = bad
            .parse()
            .expect_err("bad")
            .into_iter()
            .map(|e| e.path)
            .collect();
        assert_eq!(
            paths,
            [
                "node_labels",
                "node_taints",
                "tolerations",
                "mig_layout",
                "sharing"
            ]
        );
    }

    #[test]
    fn labels_taints_and_tolerations_follow_kubernetes_rules() {
        use crate::kueue::TaintEffect;
        let settings = FlavorSettings {
            node_labels: BTreeMap::from([
                ("nvidia.com/gpu.product".into(), "H100-SXM5-80GB".into()),
                ("Bad Key".into(), "x".into()),
                ("pool".into(), "-bad".into()),
            ]),
            node_taints: vec![Taint {
                key: "nvidia.com/gpu".into(),
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            }],
            tolerations: vec![
                Toleration {
                    key: String::new(),
                    operator: TolerationOperator::Equal,
                    value: "x".into(),
                    effect: None,
                },
                Toleration {
                    key: "nvidia.com/gpu".into(),
                    operator: TolerationOperator::Exists,
                    value: "x".into(),
                    effect: Some(TaintEffect::NoSchedule),
                },
            ],
            mig_layout: BTreeMap::new(),
            sharing: Some(Mechanism::Mig),
        };
        let errors = settings.validate("H100-SXM5-80GB").expect_err("bad");
        assert_eq!(
            paths(&errors),
            [
                "node_labels.Bad Key",
                "node_labels.pool",
                "tolerations[0].operator",
                "tolerations[1].value",
                "sharing"
            ]
        );
    }

    #[test]
    fn a_team_without_quota_in_force_keeps_its_queue_and_admits_nothing() {
        let setup = world().kueue_setup(day(TODAY));
        let research = setup
            .queues
            .iter()
            .find(|q| q.cluster_queue == "research")
            .expect("queue");
        assert_eq!(
            research.quotas,
            vec![Quota {
                flavor: "h100".into(),
                resource: "nvidia.com/gpu".into(),
                nominal: 0,
                borrowing_limit: Some(0),
                lending_limit: None
            }]
        );
        let search = setup
            .queues
            .iter()
            .find(|q| q.cluster_queue == "search")
            .expect("queue");
        assert_eq!(search.quotas[0].nominal, 24);
        assert_eq!(
            setup.flavors[0].node_labels["nvidia.com/gpu.product"],
            "H100-SXM5-80GB"
        );
    }
}
