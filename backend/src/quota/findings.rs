//! Re-plan findings for approvers (`GET /api/quota/findings`, `gpufleet quota findings`): the
//! last weeks' measured use (the usage rollups), Kueue's queue metrics and recorded Workloads
//! (the workload history) read against the quotas in force by `shared::planning::findings`. It reads; nothing changes
//! without the normal approval of a request.

use axum::{
    Json,
    extract::{Query, State},
};
use shared::planning::findings::{FindingRules, Findings, FindingsQuery, Inputs, Review};

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
