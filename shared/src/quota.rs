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

use crate::common::error::FieldError;

mod flavor;
mod request;
mod rules;
mod setup;
#[cfg(test)]
pub(crate) mod tests;

pub use flavor::{
    Capacity, Flavor, FlavorSettings, LABEL_VALUE_RULE, SOFTWARE_SHARING, SettingsText,
    is_label_value,
};
pub use request::{
    Action, Approved, DEFAULT_COHORT, Decision, EditRequest, FlavorEdit, NewRequest, OnCluster,
    QueueNames, QuotaLine, QuotaRequest, QuotaSpec, RequestView, State, Submit, TeamQueue,
};
pub use rules::{Allocation, Checked, Impact, QuotaWorld, Side, TeamSide};

/// Longest justification, in characters.
pub const MAX_JUSTIFICATION_CHARS: usize = 2000;
/// The longest project name a request carries.
pub const MAX_PROJECT_CHARS: usize = 120;
/// Above this checkpoint interval the mean rework after a reclaim (half the interval) exceeds
/// 15 minutes.
pub const CHECKPOINT_WARN_MIN: u32 = 30;

fn field(path: &str, message: String) -> FieldError {
    FieldError {
        path: path.to_owned(),
        message,
    }
}
