//! A quota request and its life cycle: the team's Kueue identity, the quota lines asked for,
//! the states and the actions between them, and the API's request types.

use serde::{Deserialize, Serialize};

use crate::{
    common::day::Day,
    common::error::FieldError,
    common::validate::validate_dns_label,
    kueue::{Queueing, Reclaim, WithinQueue},
};

use super::*;

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

impl QuotaLine {
    /// `nominal` whole NVIDIA GPUs of `flavor`, no limits.
    pub fn nvidia_gpus(flavor: &str, nominal: i64) -> QuotaLine {
        QuotaLine {
            flavor: flavor.to_owned(),
            resource: "nvidia.com/gpu".to_owned(),
            nominal,
            borrowing_limit: None,
            lending_limit: None,
        }
    }
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
    /// What the quota is for, in the team's words (a project, a model); optional.
    #[serde(default)]
    pub project: Option<String>,
    /// The most GPUs one of the team's jobs asks for at once; optional. Kueue admits a job
    /// whole or not at all, so it is held against what the queue may ever hold.
    #[serde(default)]
    pub largest_job_gpus: Option<u32>,
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
            project: None,
            largest_job_gpus: None,
            starts_on: today,
            ends_on: None,
        }
    }

    /// Whether it is in force on `day` (from its first day to its last, both included).
    pub fn holds(&self, day: Day) -> bool {
        self.starts_on <= day && self.ends_on.is_none_or(|end| day <= end)
    }

    /// Its line of `flavor` and `resource`, if it asks for one.
    pub fn line(&self, flavor: &str, resource: &str) -> Option<&QuotaLine> {
        self.lines
            .iter()
            .find(|l| l.flavor == flavor && l.resource == resource)
    }

    pub(super) fn nominal(&self, flavor: &str, resource: &str) -> i64 {
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
    /// The team takes a submitted request back to a draft, out of the approvers' inbox.
    Withdraw,
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
    /// submitted → approved | rejected; a submitted request withdrawn is a draft again;
    /// approved → superseded | revoked; only drafts are edited.
    pub fn after(self, action: Action) -> Option<State> {
        match (self, action) {
            (State::Draft, Action::Edit) => Some(State::Draft),
            (State::Draft, Action::Submit) => Some(State::Submitted),
            (State::Submitted, Action::Withdraw) => Some(State::Draft),
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
            Action::Withdraw => "withdraw",
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
    /// Where they landed, in words: "applied to the cluster", or the GitOps files they were
    /// written to.
    #[serde(default)]
    pub applied_to: Option<String>,
    /// For an approved request in force that landed: whether Kueue's own metrics show it.
    #[serde(default)]
    pub on_cluster: Option<OnCluster>,
}

/// Whether Kueue holds an approved quota, in its own metrics (its nominal quota per flavor, read
/// by the usage ingest): under GitOps the files are written, and only this says that Argo CD or
/// Flux applied them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum OnCluster {
    /// Kueue's nominal quota equals the approved one on every flavor, in the newest minute read
    /// (RFC 3339 UTC).
    Reported { as_of: String },
    /// Written as GitOps files, and Kueue's metrics do not show it yet: approved, not yet in
    /// force on the cluster.
    WrittenNotSeen,
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
        let mut errors = Vec::new();
        let chars = self.comment.trim().chars().count();
        if chars == 0 || chars > MAX_JUSTIFICATION_CHARS {
            errors.push(field(
                "comment",
                format!("say why, in 1-{MAX_JUSTIFICATION_CHARS} characters"),
            ));
        }
        crate::common::validate::validate_visible_lines("comment", &self.comment, &mut errors);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
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
/// the team's ClusterQueue as it is and as the approval would make it (YAML). The review adds
/// what it is worth and what the team uses (`chargeback::worth::Review`).
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
