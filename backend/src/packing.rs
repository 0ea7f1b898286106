//! Packing: `POST /api/packing/replay` (uploaded openb CSVs → the replay's figures) and
//! `POST /api/packing/mig` (a MIG layout). The math is `shared::packing`; the `gpufleet packing
//! replay | mig | protocol` commands are in `cli.rs`, the results document in `report.rs`.

pub mod cli;
mod report;

use axum::{
    Json,
    extract::{Multipart, State, multipart::MultipartError},
    http::Method,
};
use shared::{
    FieldError,
    accounts::PLANNERS,
    common::rng::DEFAULT_SEED,
    packing::{
        Policy, csv, mig,
        protocol::{self, PackReport},
    },
};

use crate::{
    access::Access,
    app::{Api, AppState},
    error::{Error, Result},
    json::ApiJson,
};

pub fn api() -> Api {
    Api::default()
        .route(
            Method::POST,
            "/packing/replay",
            Access::Roles(PLANNERS),
            pack,
        )
        .route(
            Method::POST,
            "/packing/mig",
            Access::Roles(PLANNERS),
            mig_layout,
        )
}

/// `POST /api/packing/mig`: `{gpu_model, groups: [{name, mem_mib, replicas}]}` → the layout.
async fn mig_layout(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<mig::MigRequest>,
) -> Result<Json<mig::MigPlan>> {
    state
        .work
        .compute
        .run(move |stop| request.plan_until(stop))
        .await?
        .map(Json)
        .map_err(Error::Invalid)
}

/// Multipart fields: `nodes` and `pods` (openb CSV files), `policy` (default `fgd`), `seed`
/// (default 42), `inflate` (default 1.3).
async fn pack(State(state): State<AppState>, mut form: Multipart) -> Result<Json<PackReport>> {
    let (mut nodes, mut pods, mut policy, mut seed, mut inflate) = (
        None,
        None,
        Policy::Fgd,
        DEFAULT_SEED,
        protocol::PAPER_INFLATE,
    );
    let mut errors = Vec::new();
    while let Some(field) = form.next_field().await.map_err(bad_multipart)? {
        let name = field.name().unwrap_or_default().to_owned();
        let text = field.text().await.map_err(bad_multipart)?;
        let mut invalid = |message: String| {
            errors.push(FieldError {
                path: name.clone(),
                message,
            })
        };
        match name.as_str() {
            "nodes" => match csv::parse_nodes(&text) {
                Ok(n) => nodes = Some(n),
                Err(e) => invalid(e.to_string()),
            },
            "pods" => match csv::parse_pods(&text) {
                Ok(p) => pods = Some(p),
                Err(e) => invalid(e.to_string()),
            },
            "policy" => match Policy::parse(text.trim()) {
                Some(p) => policy = p,
                None => invalid(format!(
                    "unknown policy {:?}; use one of {}",
                    text.trim(),
                    Policy::names()
                )),
            },
            "seed" => match text.trim().parse() {
                Ok(s) => seed = s,
                Err(_) => invalid("must be a whole number".to_owned()),
            },
            "inflate" => match text.trim().parse() {
                Ok(i) => inflate = i,
                Err(_) => invalid("must be a number, e.g. 1.3".to_owned()),
            },
            _ => invalid("unknown field; send nodes, pods, policy, seed, inflate".to_owned()),
        }
    }
    for (present, path) in [(nodes.is_some(), "nodes"), (pods.is_some(), "pods")] {
        if !present && !errors.iter().any(|e| e.path == path) {
            errors.push(FieldError {
                path: path.to_owned(),
                message: "missing file".to_owned(),
            });
        }
    }
    let (Some(nodes), Some(pods), true) = (nodes, pods, errors.is_empty()) else {
        return Err(Error::Invalid(errors));
    };
    let report = state
        .work
        .compute
        .run(move |stop| protocol::replay_until(&nodes, &pods, policy, seed, inflate, stop))
        .await?
        .map_err(|err| match err {
            protocol::PackError::Interrupted => Error::Unavailable,
            err => Error::Invalid(vec![FieldError {
                path: err.field().to_owned(),
                message: err.to_string(),
            }]),
        })?;
    Ok(Json(report))
}

fn bad_multipart(err: MultipartError) -> Error {
    Error::Invalid(vec![FieldError {
        path: "-".to_owned(),
        message: format!("unreadable upload: {}", err.body_text()),
    }])
}
