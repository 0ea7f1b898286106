//! `GET /api/health`: what the server is and whether its database answers.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// The server runs but a dependency does not answer; the response status is 503.
    Degraded,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatabaseStatus {
    Up,
    Down,
}

/// Build facts, fixed at compile time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildInfo {
    /// The crate version, e.g. `0.1.0`.
    pub version: String,
    /// The git commit the binary was built from, or `unknown` outside a checkout.
    pub git_sha: String,
    /// `debug` or `release`.
    pub profile: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseHealth {
    pub status: DatabaseStatus,
    /// Round-trip time of `select 1`, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// Why it is down, in words safe to show anyone (no host names, no credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Number of the latest applied migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub status: Status,
    pub build: BuildInfo,
    pub database: DatabaseHealth,
    /// Absent when the database does not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<crate::cluster::ClusterHealth>,
    /// Usage ingest from Prometheus; absent when the database does not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::usage::UsageHealth>,
}
