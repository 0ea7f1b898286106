//! `gpufleet`: wires config → logging → pool → migrations → serve. Everything else is library.

use anyhow::Context;
use backend::{
    MIGRATOR, app, config,
    config::{Cli, Command, HttpSettings},
    fleet::{self, DemoLoad},
};
use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn,tower_http=info".into()),
        )
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            let pool = migrated_pool(&args.db).await?;
            let listener = tokio::net::TcpListener::bind(args.listen)
                .await
                .with_context(|| format!("cannot listen on {}", args.listen))?;
            let settings = HttpSettings::from(&args);
            tracing::info!(
                url = %format!("http://{}", listener.local_addr()?),
                public_dir = %settings.public_dir.display(),
                "serving the console"
            );
            let router = app(app::AppState::new(pool.clone()), &settings);
            app::serve(listener, router, app::shutdown_signal()).await?;
            pool.close().await;
            tracing::info!("stopped");
        }
        Command::Migrate(args) => {
            migrated_pool(&args).await?.close().await;
        }
        Command::Demo(args) => {
            let pool = migrated_pool(&args).await?;
            match fleet::load_demo(&pool)
                .await
                .context("loading the demo fleet")?
            {
                DemoLoad::Loaded { gpus } => tracing::info!(gpus, "loaded the demo fleet"),
                DemoLoad::AlreadyHasFleet => tracing::info!("a fleet exists; demo not loaded"),
            }
            pool.close().await;
        }
    }
    Ok(())
}

async fn migrated_pool(args: &config::DbArgs) -> anyhow::Result<sqlx::PgPool> {
    let redacted = config::redact_url(&args.database_url);
    let pool =
        backend::connect_lazy(args).with_context(|| format!("bad DATABASE_URL {redacted}"))?;
    MIGRATOR
        .run(&pool)
        .await
        .with_context(|| format!("cannot apply migrations to {redacted}"))?;
    tracing::info!(database = %redacted, "migrations applied");
    Ok(pool)
}
