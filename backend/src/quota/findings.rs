//! Re-plan findings for approvers (`GET /api/quota/findings`, `gpufleet quota findings`): the
//! last weeks' measured use (the usage rollups), Kueue's queue metrics and recorded Workloads
//! (the workload history) read against the quotas in force by `shared::planning::findings`. It reads; nothing changes
//! without the normal approval of a request. A team's own standing (`GET
//! /api/quota/teams/{team}/standing`) reads the same sources for its members.

use axum::{
    Json,
    extract::{Path, Query, State},
};
use serde::Serialize;
use shared::{
    chargeback::worth::InUse,
    common::day::Day,
    planning::findings::{FindingRules, Findings, FindingsQuery, Inputs, Review, WaitFigures},
};

use crate::{app::AppState, clock, cluster, error::Error, error::Result, usage};

/// `GET /api/quota/findings`.
pub async fn get(
    State(state): State<AppState>,
    Query(query): Query<FindingsQuery>,
) -> Result<Json<Findings>> {
    let rules = query.checked().map_err(Error::Invalid)?;
    Ok(Json(findings(&state, rules).await?))
}

/// The findings of the `rules.weeks` whole weeks before today (UTC).
pub async fn findings(state: &AppState, rules: FindingRules) -> Result<Findings> {
    let today = clock::today();
    let world = {
        let mut conn = state.pool.acquire().await?;
        super::world(&mut conn).await?
    };
    let from = rules.first_day(today);
    let usage = usage::db::week_use(&state.pool, from, today).await?;
    let queues = usage::db::queue_window(&state.pool, from, today).await?;
    let inputs = Inputs {
        world: &world,
        usage: &usage,
        queues: &queues,
        rules,
        today,
    };
    let mut review = Review::new(&inputs);
    let most = crate::planning::MAX_DERIVED_WORKLOADS;
    let truncated =
        cluster::history::each_in_window(state, from, today, most, |entry| review.add(entry))
            .await?;
    let mut found = review.finish();
    if truncated {
        found.problems.push(format!(
            "the window held more than {most} Workloads: only the oldest are read; ask for fewer weeks"
        ));
    }
    found.unrecorded = cluster::history::unrecorded(state.cluster.mode());
    Ok(found)
}

/// A team's standing, as its members see it on the Quotas page: what it used of its quota over
/// the last 24 whole hours, and its queue's admission wait over the last 7 days.
#[derive(Debug, Serialize)]
pub struct Standing {
    pub in_use: Vec<InUse>,
    /// `None` when nothing of the team's was admitted or recorded in the window.
    pub wait: Option<WaitFigures>,
    pub wait_from: Day,
    /// The last day, included.
    pub wait_to: Day,
    /// Why no workload history is recorded (GitOps mode, no cluster), when none is.
    pub unrecorded: Option<String>,
}

/// `GET /api/quota/teams/{team}/standing`.
pub async fn standing(
    State(state): State<AppState>,
    Path(team): Path<String>,
) -> Result<Json<Standing>> {
    let today = clock::today();
    let world = {
        let mut conn = state.pool.acquire().await?;
        super::world(&mut conn).await?
    };
    world.team(&team).ok_or(Error::NotFound)?;
    let rules = FindingRules {
        weeks: 1,
        ..FindingRules::default()
    };
    let from = rules.first_day(today);
    let this_hour = clock::now_ms() / super::HOUR_MS * super::HOUR_MS;
    let in_use = usage::db::in_use(&state.pool, &team, this_hour, super::IN_USE_HOURS).await?;
    let queues = usage::db::queue_window(&state.pool, from, today).await?;
    let inputs = Inputs {
        world: &world,
        usage: &[],
        queues: &queues,
        rules,
        today,
    };
    let mut review = Review::new(&inputs);
    let most = crate::planning::MAX_DERIVED_WORKLOADS;
    cluster::history::each_in_window(&state, from, today, most, |entry| {
        if entry.team.as_deref() == Some(team.as_str()) {
            review.add(entry);
        }
    })
    .await?;
    Ok(Json(Standing {
        in_use,
        wait: review.wait_of(&team),
        wait_from: from,
        wait_to: today.plus(-1),
        unrecorded: cluster::history::unrecorded(state.cluster.mode()),
    }))
}
