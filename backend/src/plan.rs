//! Planning: `POST /api/plan/evaluate`; the `gpufleet plan evaluate | export | bench` commands
//! are in `cli.rs`. The math is `shared::plan`; the browser runs the same code in WASM.

pub mod cli;

use axum::{Json, extract::State, http::Method};
use shared::{
    auth::PLANNERS,
    plan::{self, EvaluateError, Evaluation},
    scenario::Scenario,
};

use crate::{
    access::Access,
    app::{Api, AppState},
    error::{Error, Result},
    json::ApiJson,
};

pub fn api() -> Api {
    Api::default().route(
        Method::POST,
        "/plan/evaluate",
        Access::Roles(PLANNERS),
        evaluate,
    )
}

/// A bad scenario is answered with its field paths (422), as the CLI does.
/// The cost limits are checked before the work takes a slot of the compute pool.
async fn evaluate(
    State(state): State<AppState>,
    ApiJson(scenario): ApiJson<Scenario>,
) -> Result<Json<Evaluation>> {
    scenario.validate().map_err(Error::Invalid)?;
    let evaluation = state
        .work
        .compute
        .run(move |stop| plan::evaluate_until(&scenario, stop))
        .await?
        .map_err(|err| match err {
            EvaluateError::Invalid(fields) => Error::Invalid(fields),
            EvaluateError::Interrupted => Error::Unavailable,
        })?;
    Ok(Json(evaluation))
}
