//! gpufleet's server and CLI as a library, so tests drive the same router the binary serves.

pub mod access;
pub mod accounts;
pub mod app;
pub mod audit;
pub mod auth;
pub mod chargeback;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod error;
pub mod fleet;
pub mod health;
pub mod json;
pub mod packing;
pub mod password;
pub mod planning;
pub mod quota;
pub mod retry;
pub mod server;
pub mod tally;
pub mod usage;
pub mod work;

use std::time::Duration;

use sqlx::{
    ConnectOptions, PgPool,
    migrate::Migrator,
    postgres::{PgConnectOptions, PgPoolOptions},
};

pub use app::{AppState, app};
pub use server::{Connections, serve};

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("../migrations");

/// Connects and applies the migrations (the CLI's commands start here).
pub async fn migrated_pool(args: &config::DbArgs) -> Result<PgPool, error::CliError> {
    let redacted = config::redact_url(&args.database_url);
    let pool = connect_lazy(args)
        .map_err(|err| error::CliError::Failed(format!("bad DATABASE_URL {redacted}: {err}")))?;
    MIGRATOR.run(&pool).await.map_err(|err| {
        error::CliError::Failed(format!("cannot apply migrations to {redacted}: {err}"))
    })?;
    tracing::debug!(database = %redacted, "migrations applied");
    Ok(pool)
}

/// Opens a pool without connecting, so the server starts (and reports 503) while the
/// database is down.
pub fn connect_lazy(args: &config::DbArgs) -> Result<PgPool, sqlx::Error> {
    // A streamed statement lasts as long as its reader: the workload history's window of
    // 400,000 Workloads streams for ~1.3 s by design, so sqlx's default of warning at 1 s
    // would warn of every large read; a statement still warns at 5 s.
    let options = args
        .database_url
        .parse::<PgConnectOptions>()?
        .log_slow_statements(log::LevelFilter::Warn, Duration::from_secs(5));
    Ok(PgPoolOptions::new()
        .max_connections(args.db_max_connections)
        .acquire_timeout(Duration::from_secs(args.db_acquire_timeout_s))
        .connect_lazy_with(options))
}
