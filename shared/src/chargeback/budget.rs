//! Budgets: what a team may spend in a month, in cents or in GPU-hours, on one basis; what it
//! has burnt up to now, a forecast to the month's end from its measured rate, and which of its
//! thresholds (80% and 100% unless set) the burn and the forecast have crossed.
//!
//! Basis `allocation`: the statement's cost by allocation, or the GPU-hours Kueue allocated;
//! basis `use`: the statement's charge (use + idle share + lending fee − lending credit, with
//! idle shared by allocation and no lending credit, as a team's own statement reads), or the
//! GPU-hours DCGM saw busy. The forecast is the burn × the month's length ÷ the part of the
//! month elapsed (the statement prices capacity up to now), rounded half up; a month that has
//! ended forecasts what it burnt.
//!
//! A burn that reaches the whole limit proposes a [`Hold`] of the team's ClusterQueue (Kueue's
//! `spec.stopPolicy: Hold`): never applied until an approver confirms it, released the same way.

use serde::{Deserialize, Serialize};

use super::{GPU_US_PER_GPU_HOUR, Hours, TeamLine, div_round};
use crate::{FieldError, common::day::Day};

/// Thresholds when a budget names none.
pub const DEFAULT_THRESHOLDS_PCT: [u16; 2] = [80, 100];
/// The largest budget: a billion dollars, or a billion GPU-hours.
pub const MAX_LIMIT: i64 = 100_000_000_000;

/// What a budget counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    #[default]
    Allocation,
    Use,
}

impl Basis {
    pub fn name(self) -> &'static str {
        match self {
            Basis::Allocation => "allocation",
            Basis::Use => "use",
        }
    }

    pub fn parse(text: &str) -> Option<Basis> {
        match text {
            "allocation" => Some(Basis::Allocation),
            "use" => Some(Basis::Use),
            _ => None,
        }
    }
}

/// A budget as it is set (`PUT /api/chargeback/budgets/{team}/{month}`): exactly one of the
/// limits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewBudget {
    pub limit_cents: Option<i64>,
    /// Whole GPU-hours.
    pub limit_gpu_hours: Option<i64>,
    /// `allocation` (default) or `use`.
    pub basis: Option<String>,
    /// Percentages of the limit that raise an alert, 1-1,000; `[80, 100]` when left out.
    pub thresholds_pct: Option<Vec<i64>>,
}

/// A budget's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    Cents(i64),
    GpuHours(i64),
}

impl Limit {
    /// `(limit_cents, limit_gpu_hours)`, one of them set, as the API and the database hold it.
    pub fn split(self) -> (Option<i64>, Option<i64>) {
        match self {
            Limit::Cents(c) => (Some(c), None),
            Limit::GpuHours(h) => (None, Some(h)),
        }
    }
}

/// A checked budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub limit: Limit,
    pub basis: Basis,
    /// Ascending, without repeats.
    pub thresholds_pct: Vec<u16>,
}

impl NewBudget {
    pub fn checked(&self) -> Result<Budget, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut bad = |path: &str, message: String| {
            errors.push(FieldError {
                path: path.into(),
                message,
            })
        };
        let in_range = |v: i64| (1..=MAX_LIMIT).contains(&v);
        let limit = match (self.limit_cents, self.limit_gpu_hours) {
            (Some(c), None) if in_range(c) => Some(Limit::Cents(c)),
            (None, Some(h)) if in_range(h) => Some(Limit::GpuHours(h)),
            (Some(_), None) => {
                bad("limit_cents", format!("whole cents, 1 to {MAX_LIMIT}"));
                None
            }
            (None, Some(_)) => {
                bad(
                    "limit_gpu_hours",
                    format!("whole GPU-hours, 1 to {MAX_LIMIT}"),
                );
                None
            }
            _ => {
                bad(
                    "limit_cents",
                    "give limit_cents or limit_gpu_hours, one of them".to_owned(),
                );
                None
            }
        };
        let basis = match self.basis.as_deref() {
            None | Some("") => Basis::default(),
            Some(text) => Basis::parse(text).unwrap_or_else(|| {
                bad("basis", format!("{text:?}: allocation or use"));
                Basis::default()
            }),
        };
        let thresholds_pct = match &self.thresholds_pct {
            None => DEFAULT_THRESHOLDS_PCT.to_vec(),
            Some(list) => {
                let mut pct: Vec<u16> = list
                    .iter()
                    .filter_map(|p| u16::try_from(*p).ok().filter(|p| (1..=1000).contains(p)))
                    .collect();
                if list.is_empty() || list.len() > 10 || pct.len() != list.len() {
                    bad(
                        "thresholds_pct",
                        "1 to 10 whole percentages of the limit, each 1 to 1000".to_owned(),
                    );
                }
                pct.sort_unstable();
                pct.dedup();
                pct
            }
        };
        match (limit, errors.is_empty()) {
            (Some(limit), true) => Ok(Budget {
                limit,
                basis,
                thresholds_pct,
            }),
            _ => Err(errors),
        }
    }
}

/// A team's month against its budget (`GET /api/chargeback/budgets`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetLine {
    pub team: String,
    /// `YYYY-MM`.
    pub month: String,
    pub budget: Budget,
    /// Burnt up to now, on both bases.
    pub cost_by_allocation_cents: i64,
    pub charge_cents: i64,
    pub allocated_gpu_hours: Hours,
    pub busy_gpu_hours: Hours,
    /// The same at the month's end, at the rate measured so far.
    pub forecast_cost_by_allocation_cents: i64,
    pub forecast_charge_cents: i64,
    pub forecast_allocated_gpu_hours: Hours,
    pub forecast_busy_gpu_hours: Hours,
    /// Burn and forecast in percent of the limit (on the budget's basis and unit), two
    /// decimals.
    pub spent_pct: String,
    pub forecast_pct: String,
    /// The thresholds the burn has reached, and those the forecast has.
    pub crossed_pct: Vec<u16>,
    pub forecast_crossed_pct: Vec<u16>,
    /// The burn has reached the whole limit: a hold of the team's ClusterQueue is proposed.
    pub over_limit: bool,
}

/// Which way a threshold was crossed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Crossing {
    /// The month's burn so far.
    Actual,
    /// The forecast to its end.
    Forecast,
}

impl Crossing {
    pub fn name(self) -> &'static str {
        match self {
            Crossing::Actual => "actual",
            Crossing::Forecast => "forecast",
        }
    }
}

/// The month's budgets (`GET /api/chargeback/budgets`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budgets {
    /// `YYYY-MM`.
    pub month: String,
    pub lines: Vec<BudgetLine>,
    pub alerts: Vec<Alert>,
    /// The month's holds, and every hold still proposed or in force.
    pub holds: Vec<Hold>,
}

/// Where a hold stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldState {
    /// Raised by the budget loop, waiting for an approver.
    Proposed,
    /// Confirmed: the ClusterQueue carries `stopPolicy: Hold`.
    Held,
    /// Held, then released by an approver.
    Released,
    /// Never held: an approver dismissed the proposal.
    Dismissed,
}

impl HoldState {
    pub fn name(self) -> &'static str {
        match self {
            HoldState::Proposed => "proposed",
            HoldState::Held => "held",
            HoldState::Released => "released",
            HoldState::Dismissed => "dismissed",
        }
    }

    pub fn parse(text: &str) -> Option<HoldState> {
        [
            HoldState::Proposed,
            HoldState::Held,
            HoldState::Released,
            HoldState::Dismissed,
        ]
        .into_iter()
        .find(|s| s.name() == text)
    }
}

/// What an approver does to a hold (`POST /api/chargeback/holds/{id}/{action}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldAction {
    Confirm,
    Dismiss,
    Release,
}

impl HoldAction {
    pub fn parse(text: &str) -> Option<HoldAction> {
        match text {
            "confirm" => Some(HoldAction::Confirm),
            "dismiss" => Some(HoldAction::Dismiss),
            "release" => Some(HoldAction::Release),
            _ => None,
        }
    }

    /// The state a hold must be in for the action, and the state it leaves it in.
    pub fn moves(self) -> (HoldState, HoldState) {
        match self {
            HoldAction::Confirm => (HoldState::Proposed, HoldState::Held),
            HoldAction::Dismiss => (HoldState::Proposed, HoldState::Dismissed),
            HoldAction::Release => (HoldState::Held, HoldState::Released),
        }
    }

    /// The audit log's words for it.
    pub fn audited(self) -> &'static str {
        match self {
            HoldAction::Confirm => "hold ClusterQueue",
            HoldAction::Dismiss => "dismiss hold",
            HoldAction::Release => "release ClusterQueue",
        }
    }
}

/// A proposal to hold a team's ClusterQueue once its month's burn reached its budget: at most
/// one proposed or in force per team, one per budget as set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub id: i64,
    pub team: String,
    /// The budget's month, `YYYY-MM`.
    pub month: String,
    pub state: HoldState,
    /// Why it was proposed, in words.
    pub reason: String,
    /// RFC 3339, UTC.
    pub proposed_at: String,
    /// Who confirmed or dismissed it, and when.
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    /// Who released it, and when.
    pub released_by: Option<String>,
    pub released_at: Option<String>,
}

/// Why a hold of `line`'s ClusterQueue is proposed, in words.
pub fn hold_reason(line: &BudgetLine) -> String {
    format!(
        "{} has used {}% of its {} budget of {} (by {}). Holding its ClusterQueue (stopPolicy: Hold) stops new admissions; admitted work runs to completion.",
        line.team,
        line.spent_pct,
        line.month,
        limit_text(line.budget.limit),
        line.budget.basis.name()
    )
}

fn limit_text(limit: Limit) -> String {
    match limit {
        Limit::Cents(c) => crate::common::money::dollars(c),
        Limit::GpuHours(h) => format!("{} GPU-hours", crate::common::money::thousands(h)),
    }
}

/// A threshold crossed, as raised (once per budget as set) and sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alert {
    pub team: String,
    pub threshold_pct: u16,
    pub crossing: Crossing,
    /// What it says, in words.
    pub text: String,
    /// RFC 3339, UTC.
    pub raised_at: String,
    /// When the webhook took it; `None` while it is not sent (or no webhook is configured).
    pub delivered_at: Option<String>,
    pub attempts: i32,
    pub last_error: Option<String>,
}

/// Names a budget's limit and basis: an alert is raised once per threshold for each.
pub fn limit_key(budget: &Budget) -> String {
    let limit = match budget.limit {
        Limit::Cents(c) => format!("{c} cents"),
        Limit::GpuHours(h) => format!("{h} GPU-hours"),
    };
    format!("{limit} by {}", budget.basis.name())
}

/// The JSON an alert is POSTed as: `text` for Slack- and Teams-style incoming webhooks, and
/// the figures for anything that reads them.
pub fn alert_body(line: &BudgetLine, pct: u16, crossing: Crossing) -> serde_json::Value {
    let limit = limit_text(line.budget.limit);
    let (what, now) = match crossing {
        Crossing::Actual => ("has used", &line.spent_pct),
        Crossing::Forecast => ("is forecast to use", &line.forecast_pct),
    };
    let hold = if crossing == Crossing::Actual && line.over_limit {
        " A hold of its ClusterQueue is proposed for an approver to confirm."
    } else {
        ""
    };
    serde_json::json!({
        "text": format!(
            "gpufleet: {} {what} {now}% of its {} budget of {limit} (by {}), past {pct}%.{hold}",
            line.team, line.month, line.budget.basis.name()
        ),
        "team": line.team,
        "month": line.month,
        "threshold_pct": pct,
        "crossing": crossing.name(),
        "basis": line.budget.basis.name(),
        "limit": limit_key(&line.budget),
        "spent_pct": line.spent_pct,
        "forecast_pct": line.forecast_pct,
    })
}

/// `line`'s team burnt in `month` up to `now_ms` (the month-to-date statement's line) against
/// `budget`.
pub fn burn(month: Day, now_ms: i64, line: &TeamLine, budget: &Budget) -> BudgetLine {
    let start = ms(month);
    let end = ms(month.next_month());
    let elapsed = now_ms.clamp(start, end) - start;
    let forecast = |spent: i128| -> i128 {
        if elapsed == 0 {
            spent
        } else {
            div_round(spent * i128::from(end - start), i128::from(elapsed))
        }
    };
    let whole = |v: i128| i64::try_from(v).unwrap_or(i64::MAX);
    let by_allocation = i128::from(line.cost_by_allocation_cents);
    let charge = i128::from(line.charge_cents);
    let (allocated, busy) = (line.allocated_gpu_hours.0, line.busy_gpu_hours.0);
    // the budget's own figure, and its limit, in one unit (cents, or GPU-µs)
    let (spent, limit) = match (budget.limit, budget.basis) {
        (Limit::Cents(c), Basis::Allocation) => (by_allocation, i128::from(c)),
        (Limit::Cents(c), Basis::Use) => (charge, i128::from(c)),
        (Limit::GpuHours(h), basis) => (
            if basis == Basis::Allocation {
                allocated
            } else {
                busy
            },
            i128::from(h) * i128::from(GPU_US_PER_GPU_HOUR),
        ),
    };
    let crossed = |value: i128| -> Vec<u16> {
        budget
            .thresholds_pct
            .iter()
            .copied()
            .filter(|pct| value * 100 >= limit * i128::from(*pct))
            .collect()
    };
    BudgetLine {
        team: line.team.clone(),
        month: month.month_name(),
        budget: budget.clone(),
        cost_by_allocation_cents: line.cost_by_allocation_cents,
        charge_cents: line.charge_cents,
        allocated_gpu_hours: line.allocated_gpu_hours,
        busy_gpu_hours: line.busy_gpu_hours,
        forecast_cost_by_allocation_cents: whole(forecast(by_allocation)),
        forecast_charge_cents: whole(forecast(charge)),
        forecast_allocated_gpu_hours: Hours(forecast(allocated)),
        forecast_busy_gpu_hours: Hours(forecast(busy)),
        spent_pct: percent(spent, limit),
        forecast_pct: percent(forecast(spent), limit),
        crossed_pct: crossed(spent),
        forecast_crossed_pct: crossed(forecast(spent)),
        over_limit: spent >= limit,
    }
}

/// `value` in percent of `limit`, two decimals, rounded half up.
fn percent(value: i128, limit: i128) -> String {
    crate::common::money::hundredths(div_round(value * 10_000, limit.max(1)))
}

fn ms(day: Day) -> i64 {
    i64::from(day.days_since_epoch()) * crate::common::utc::DAY_MS
}

#[cfg(test)]
mod tests;
