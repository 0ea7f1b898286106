//! `GET /api/health`: build facts, whether PostgreSQL answers, the cluster reconciler's last
//! run and the usage ingest's state. 200 when it does, 503 (with
//! the same body shape) when it does not; the server itself keeps running either way.

mod db;

use std::time::{Duration, Instant};

use axum::{
    Json,
    extract::State,
    http::{Method, StatusCode},
};
use shared::health::{BuildInfo, DatabaseHealth, DatabaseStatus, Health, Status};

use crate::{
    access::Access,
    app::{Api, AppState},
};

/// How long the health check waits for the database before calling it down.
const DB_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

pub fn api() -> Api {
    Api::default().route(Method::GET, "/health", Access::Public, get_health)
}

/// The facts compiled into this binary.
pub fn build_info() -> BuildInfo {
    BuildInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        git_sha: env!("GPUFLEET_GIT_SHA").to_owned(),
        profile: env!("GPUFLEET_BUILD_PROFILE").to_owned(),
    }
}

async fn get_health(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    let started = Instant::now();
    let database =
        match tokio::time::timeout(DB_CHECK_TIMEOUT, db::schema_version(&state.pool)).await {
            Ok(Ok(schema_version)) => DatabaseHealth {
                status: DatabaseStatus::Up,
                latency_ms: Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)),
                message: None,
                schema_version,
            },
            Ok(Err(err)) => {
                tracing::warn!(%err, "health: database check failed");
                down("the database does not answer")
            }
            Err(_) => {
                tracing::warn!(
                    timeout_s = DB_CHECK_TIMEOUT.as_secs(),
                    "health: database check timed out"
                );
                down("the database did not answer in time")
            }
        };
    let (status, code) = match database.status {
        DatabaseStatus::Up => (Status::Ok, StatusCode::OK),
        DatabaseStatus::Down => (Status::Degraded, StatusCode::SERVICE_UNAVAILABLE),
    };
    let (cluster, usage) = match database.status {
        DatabaseStatus::Up => (
            crate::cluster::health(&state).await.ok(),
            crate::usage::health(&state.pool, &state.usage).await.ok(),
        ),
        DatabaseStatus::Down => (None, None),
    };
    (
        code,
        Json(Health {
            status,
            build: build_info(),
            database,
            cluster,
            usage,
        }),
    )
}

fn down(message: &str) -> DatabaseHealth {
    DatabaseHealth {
        status: DatabaseStatus::Down,
        latency_ms: None,
        message: Some(message.to_owned()),
        schema_version: None,
    }
}
