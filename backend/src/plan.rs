//! Planning: `POST /api/plan/evaluate`; the `gpufleet plan evaluate | export | bench` commands
//! are in `cli.rs`. The math is `shared::plan`; the browser runs the same code in WASM.

pub mod cli;

use axum::{Json, http::Method};
use shared::{
    auth::PLANNERS,
    plan::{self, Evaluation},
    scenario::Scenario,
};

use crate::{
    access::Access,
    app::Api,
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
async fn evaluate(ApiJson(scenario): ApiJson<Scenario>) -> Result<Json<Evaluation>> {
    let evaluation = tokio::task::spawn_blocking(move || plan::evaluate(&scenario))
        .await
        .map_err(|err| Error::Internal(format!("the evaluation panicked: {err}")))?
        .map_err(Error::Invalid)?;
    Ok(Json(evaluation))
}
