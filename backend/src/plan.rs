//! Planning: `POST /api/plan/evaluate` and the `gpufleet plan evaluate|export|bench` commands.
//! The math is `shared::plan`; the browser runs the same code in WASM.

use std::{path::Path, time::Instant};

use axum::{Json, http::Method};
use shared::{
    auth::PLANNERS,
    manifests::{self, KueueVersion},
    plan::{self, Evaluation},
    scenario::Scenario,
};

use crate::{
    app::Api,
    auth::Access,
    error::{Error, Result},
    json::ApiJson,
    packing::InputError,
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
        .map_err(|err| anyhow::anyhow!("the evaluation panicked: {err}"))?
        .map_err(Error::Invalid)?;
    Ok(Json(evaluation))
}

/// Reads and validates a scenario file; problems become an [`InputError`] (exit status 2).
pub fn read_scenario(path: &Path) -> std::result::Result<Scenario, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| InputError(format!("{}: {err}", path.display())))?;
    let explain = |errors: Vec<shared::FieldError>| {
        let lines: Vec<String> = errors
            .iter()
            .map(|e| format!("  {}: {}", e.path, e.message))
            .collect();
        InputError(format!(
            "{}: invalid scenario\n{}",
            path.display(),
            lines.join("\n")
        ))
    };
    let scenario = plan::parse_scenario(&text).map_err(explain)?;
    scenario.validate().map_err(explain)?;
    Ok(scenario)
}

/// `gpufleet plan evaluate`.
pub fn evaluate_file(path: &Path) -> anyhow::Result<Evaluation> {
    let scenario = read_scenario(path)?;
    Ok(plan::evaluate(&scenario).map_err(|_| InputError("invalid scenario".to_owned()))?)
}

/// `gpufleet plan export`: writes the manifests into `out`, returns the files written.
pub fn export_file(path: &Path, out: &Path, version: &str) -> anyhow::Result<Vec<String>> {
    let version = KueueVersion::parse(version).ok_or_else(|| {
        InputError(format!(
            "unknown Kueue version {version:?}; use v1beta2 or v1beta1"
        ))
    })?;
    let scenario = read_scenario(path)?;
    std::fs::create_dir_all(out).map_err(|err| anyhow::anyhow!("{}: {err}", out.display()))?;
    let mut written = Vec::new();
    for file in manifests::export(&scenario, version) {
        let target = out.join(&file.name);
        std::fs::write(&target, &file.yaml)
            .map_err(|err| anyhow::anyhow!("{}: {err}", target.display()))?;
        written.push(target.display().to_string());
    }
    Ok(written)
}

/// `gpufleet plan bench`: times the evaluation of the benchmark scenario.
pub fn bench(runs: usize) -> (Vec<f64>, u64, u64) {
    let scenario = shared::scenario::bench_scenario();
    let mut seconds = Vec::new();
    let mut jobs = 0;
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        let sim = shared::simulate::simulate(&scenario);
        seconds.push(started.elapsed().as_secs_f64());
        jobs = sim.total.jobs_submitted;
    }
    (seconds, scenario.total_gpus(), jobs)
}
