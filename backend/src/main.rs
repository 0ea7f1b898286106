//! `gpufleet`: wires config → logging → pool → migrations → serve, and hands every other
//! command to its domain (`planning::cli`, `packing::cli`, `accounts::cli`, `fleet::cli`,
//! `usage::cli`).

use anyhow::Context;
use backend::{
    accounts, app,
    config::{Cli, Command, HttpSettings},
    fleet, migrated_pool, packing, planning,
};
use clap::Parser;

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let outcome = runtime.block_on(run());
    // Blocking jobs see their interrupt at shutdown; do not wait on one that has not yet.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    outcome
}

async fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn,tower_http=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let outcome = match Cli::parse().command {
        Command::Serve(args) => return serve(*args).await,
        Command::Migrate(args) => migrated_pool(&args).await.map(|_| ()),
        Command::Demo(args) => accounts::cli::demo(args).await,
        Command::User(command) => accounts::cli::run(command).await,
        Command::Fleet(command) => fleet::cli::run(command).await,
        Command::Plan(command) => planning::cli::run(command).await,
        Command::Packing(command) => packing::cli::run(command),
        Command::Usage(command) => backend::usage::cli::run(command).await,
        Command::Chargeback(command) => backend::chargeback::cli::run(command).await,
        Command::Quota(command) => backend::quota::cli::run(command).await,
    };
    if let Err(err) = outcome {
        // Bad input exits with 2, naming the file, line, column or field and the problem.
        eprintln!("error: {err}");
        std::process::exit(err.exit_code());
    }
    Ok(())
}

async fn serve(args: backend::config::ServeArgs) -> anyhow::Result<()> {
    let mut auth = args.auth.settings()?;
    let pool = migrated_pool(&args.db).await?;
    if auth.proxy.is_some() && args.auth.csrf_secret.is_none() {
        // every replica over this database derives the same CSRF tokens
        auth.csrf_secret =
            backend::auth::db::shared_secret(&pool, "proxy-csrf", &auth.csrf_secret).await?;
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let settings = HttpSettings::from(&args);
    tracing::info!(
        url = %format!("http://{}", listener.local_addr()?),
        public_dir = %settings.public_dir.display(),
        auth_proxy = auth.proxy.is_some(),
        "serving the console"
    );
    let cluster = backend::cluster::from_args(&args.cluster).await?;
    let usage = std::sync::Arc::new(backend::usage::Usage::from_args(&args.usage)?);
    anyhow::ensure!(
        args.max_connections > 0
            && args.max_connections_per_address > 0
            && args.write_timeout_s > 0,
        "--max-connections, --max-connections-per-address and --write-timeout-s must be at least 1"
    );
    let connections = backend::Connections {
        per_address: args.max_connections_per_address,
        shared_addresses: auth.trusted_proxies.clone(),
        write_timeout: std::time::Duration::from_secs(args.write_timeout_s),
        ..backend::Connections::within(
            args.max_connections,
            backend::server::raise_open_file_limit(),
        )
    };
    let state = app::AppState::with_auth(pool.clone(), auth)
        .with_cluster(cluster)
        .with_usage(usage.clone());
    let reconciler = backend::cluster::spawn(state.clone());
    let recorder = backend::cluster::history::spawn(state.clone());
    let exporter = match args.usage.demo_exporter_listen {
        Some(addr) => Some(backend::usage::demo::serve(pool.clone(), addr).await?),
        None => None,
    };
    let ingest = backend::usage::spawn(pool.clone(), usage);
    let live = backend::usage::live::spawn(pool.clone(), state.live.clone());
    let webhook = args
        .budget_webhook_url
        .as_deref()
        .map(|url| {
            backend::chargeback::budget::Webhook::new(url, std::time::Duration::from_secs(10))
        })
        .transpose()?;
    let budgets = backend::chargeback::budget::spawn(
        pool.clone(),
        webhook,
        std::time::Duration::from_secs(60),
    );
    let work = state.work.clone();
    let router = app(state, &settings);
    backend::serve(
        listener,
        router,
        backend::server::shutdown_signal(),
        work,
        connections,
    )
    .await?;
    reconciler.abort();
    live.abort();
    budgets.abort();
    for task in [ingest, exporter, recorder].into_iter().flatten() {
        task.abort();
    }
    pool.close().await;
    tracing::info!("stopped");
    Ok(())
}
