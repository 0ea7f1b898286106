//! gpufleet's server and CLI as a library, so tests drive the same router the binary serves.

pub mod accounts;
pub mod app;
pub mod auth;
pub mod config;
pub mod error;
pub mod fleet;
pub mod health;
pub mod json;
pub mod packing;
pub mod plan;

use std::time::Duration;

use sqlx::{PgPool, migrate::Migrator, postgres::PgPoolOptions};

pub use app::{AppState, app, serve};

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// Opens a pool without connecting, so the server starts (and reports 503) while the
/// database is down.
pub fn connect_lazy(args: &config::DbArgs) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(args.db_max_connections)
        .acquire_timeout(Duration::from_secs(args.db_acquire_timeout_s))
        .connect_lazy(&args.database_url)
}
