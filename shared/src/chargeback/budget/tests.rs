//! Budgets worked out by hand.

use super::*;
use crate::chargeback::GPU_US_PER_GPU_HOUR as H;

fn day(s: &str) -> Day {
    Day::parse(s).unwrap_or_else(|| panic!("{s}"))
}

/// research on 2026-12-10 at 00:00, 9 of December's 31 days gone: $2,700.00 by allocation
/// (270 GPU-hours at $10.00), charged $1,800.00 (90 busy GPU-hours at $10.00 and $900.00 of
/// idle share).
fn line() -> TeamLine {
    TeamLine {
        team: "research".into(),
        cost_centre: "CC-1001".into(),
        allocated_gpu_hours: Hours(i128::from(270 * H)),
        busy_gpu_hours: Hours(i128::from(90 * H)),
        idle_gpu_hours: Hours(i128::from(180 * H)),
        unobserved_allocated_gpu_hours: Hours(0),
        utilisation_pct: Some("33.33".into()),
        prompt_tokens: 0,
        generation_tokens: 0,
        cost_by_allocation_cents: 270_000,
        cost_by_use_cents: 90_000,
        idle_cost_cents: 180_000,
        idle_share_cents: 90_000,
        borrowed_gpu_hours: Hours(0),
        lent_gpu_hours: Hours(0),
        lending_fee_cents: 0,
        lending_credit_cents: 0,
        charge_cents: 180_000,
    }
}

fn now() -> i64 {
    i64::from(day("2026-12-10").days_since_epoch()) * crate::common::utc::DAY_MS
}

#[test]
fn a_budget_in_cents_burns_and_forecasts_on_its_basis() {
    let budget = NewBudget {
        limit_cents: Some(1_000_000),
        ..NewBudget::default()
    }
    .checked()
    .expect("a budget");
    assert_eq!(budget.thresholds_pct, [80, 100]);
    let b = burn(day("2026-12-01"), now(), &line(), &budget);
    // 9 days of 31: $2,700.00 × 31 / 9 = $9,300.00; $1,800.00 × 31 / 9 = $6,200.00
    assert_eq!(b.forecast_cost_by_allocation_cents, 930_000);
    assert_eq!(b.forecast_charge_cents, 620_000);
    // 270 × 31 / 9 = 930 allocated GPU-hours, 90 × 31 / 9 = 310 busy
    assert_eq!(b.forecast_allocated_gpu_hours, Hours(i128::from(930 * H)));
    assert_eq!(b.forecast_busy_gpu_hours, Hours(i128::from(310 * H)));
    // by allocation against $10,000.00: 27% spent, 93% forecast → the forecast crossed 80%
    assert_eq!(
        (b.spent_pct.as_str(), b.forecast_pct.as_str()),
        ("27.00", "93.00")
    );
    assert_eq!(b.crossed_pct, Vec::<u16>::new());
    assert_eq!(b.forecast_crossed_pct, [80]);
    // by use: 18% and 62%, nothing crossed
    let by_use = Budget {
        basis: Basis::Use,
        ..budget
    };
    let b = burn(day("2026-12-01"), now(), &line(), &by_use);
    assert_eq!(
        (b.spent_pct.as_str(), b.forecast_pct.as_str()),
        ("18.00", "62.00")
    );
    assert!(b.forecast_crossed_pct.is_empty());
}

#[test]
fn a_budget_in_gpu_hours_counts_hours() {
    let budget = NewBudget {
        limit_gpu_hours: Some(300),
        basis: Some("allocation".into()),
        thresholds_pct: Some(vec![100, 50, 90, 50]),
        ..NewBudget::default()
    }
    .checked()
    .expect("a budget");
    assert_eq!(budget.thresholds_pct, [50, 90, 100]);
    let b = burn(day("2026-12-01"), now(), &line(), &budget);
    // 270 of 300 GPU-hours: 90%; forecast 930: 310%
    assert_eq!(
        (b.spent_pct.as_str(), b.forecast_pct.as_str()),
        ("90.00", "310.00")
    );
    assert_eq!(b.crossed_pct, [50, 90]);
    assert_eq!(b.forecast_crossed_pct, [50, 90, 100]);
    assert!(!b.over_limit, "a forecast past the limit proposes no hold");
    // a month that has ended forecasts what it burnt; one not begun forecasts nothing more
    let ended = burn(day("2026-11-01"), now(), &line(), &budget);
    assert_eq!(
        ended.forecast_allocated_gpu_hours,
        line().allocated_gpu_hours
    );
    let ahead = burn(day("2027-01-01"), now(), &line(), &budget);
    assert_eq!(ahead.forecast_pct, ahead.spent_pct);
}

/// A burn of exactly its limit (270 of 270 GPU-hours) proposes a hold; one GPU-µs short of it
/// does not.
#[test]
fn a_burn_that_reaches_its_limit_proposes_a_hold() {
    let budget = NewBudget {
        limit_gpu_hours: Some(270),
        ..NewBudget::default()
    }
    .checked()
    .expect("a budget");
    let b = burn(day("2026-12-01"), now(), &line(), &budget);
    assert_eq!(b.spent_pct, "100.00");
    assert_eq!(b.crossed_pct, [80, 100]);
    assert!(b.over_limit);
    assert_eq!(
        hold_reason(&b),
        "research has used 100.00% of its 2026-12 budget of 270 GPU-hours (by allocation). Holding its ClusterQueue (stopPolicy: Hold) stops new admissions; admitted work runs to completion."
    );
    assert_eq!(
        alert_body(&b, 100, Crossing::Actual)["text"],
        "gpufleet: research has used 100.00% of its 2026-12 budget of 270 GPU-hours (by allocation), past 100%. A hold of its ClusterQueue is proposed for an approver to confirm."
    );
    assert_eq!(
        alert_body(&b, 80, Crossing::Forecast)["text"],
        "gpufleet: research is forecast to use 344.44% of its 2026-12 budget of 270 GPU-hours (by allocation), past 80%."
    );
    let short = TeamLine {
        allocated_gpu_hours: Hours(i128::from(270 * H) - 1),
        ..line()
    };
    assert!(!burn(day("2026-12-01"), now(), &short, &budget).over_limit);
}

#[test]
fn holds_move_only_from_the_state_each_action_needs() {
    use HoldState::*;
    let moves: Vec<_> = ["confirm", "dismiss", "release"]
        .into_iter()
        .map(|a| HoldAction::parse(a).expect("an action").moves())
        .collect();
    assert_eq!(
        moves,
        [(Proposed, Held), (Proposed, Dismissed), (Held, Released)]
    );
    assert_eq!(HoldAction::parse("hold"), None);
    for state in [Proposed, Held, Released, Dismissed] {
        assert_eq!(HoldState::parse(state.name()), Some(state));
    }
}

#[test]
fn bad_budgets_name_their_field() {
    let paths = |b: NewBudget| -> Vec<String> {
        b.checked()
            .expect_err("refused")
            .into_iter()
            .map(|e| e.path)
            .collect()
    };
    assert_eq!(paths(NewBudget::default()), ["limit_cents"]);
    assert_eq!(
        paths(NewBudget {
            limit_cents: Some(1),
            limit_gpu_hours: Some(1),
            ..NewBudget::default()
        }),
        ["limit_cents"]
    );
    assert_eq!(
        paths(NewBudget {
            limit_gpu_hours: Some(0),
            basis: Some("charge".into()),
            thresholds_pct: Some(vec![0, 80]),
            ..NewBudget::default()
        }),
        ["limit_gpu_hours", "basis", "thresholds_pct"]
    );
    assert_eq!(
        paths(NewBudget {
            limit_cents: Some(MAX_LIMIT + 1),
            thresholds_pct: Some(Vec::new()),
            ..NewBudget::default()
        }),
        ["limit_cents", "thresholds_pct"]
    );
}
