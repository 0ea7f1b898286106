//! `gpufleet`: wires config → logging → pool → migrations → serve, and the admin CLI.
//! Everything else is library code.
#![allow(clippy::print_stdout)] // a CLI prints

use std::io::BufRead;

use anyhow::Context;
use backend::{
    MIGRATOR, accounts, app,
    auth::password,
    config::{self, Cli, Command, HttpSettings, PlanCommand, UserCommand},
    fleet::{self, DemoLoad},
    packing,
};
use clap::Parser;
use shared::{
    auth::{NewUser, Role},
    packing::Policy,
};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn,tower_http=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            let auth = args.auth.settings().map_err(anyhow::Error::msg)?;
            let pool = migrated_pool(&args.db).await?;
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
            let router = app(app::AppState::with_auth(pool.clone(), auth), &settings);
            app::serve(listener, router, app::shutdown_signal()).await?;
            pool.close().await;
            tracing::info!("stopped");
        }
        Command::Migrate(args) => {
            migrated_pool(&args).await?.close().await;
        }
        Command::Demo(args) => {
            let pool = migrated_pool(&args.db).await?;
            match fleet::load_demo(&pool)
                .await
                .context("loading the demo fleet")?
            {
                DemoLoad::Loaded { gpus } => tracing::info!(gpus, "loaded the demo fleet"),
                DemoLoad::AlreadyHasFleet => {
                    tracing::info!("a fleet exists; demo fleet not loaded")
                }
            }
            match accounts::load_demo(&pool)
                .await
                .context("creating the demo users")?
            {
                Some(credentials) => {
                    let text: String = credentials
                        .iter()
                        .map(|(who, password)| format!("{who:<20} {password}\n"))
                        .collect();
                    println!(
                        "Demo users (shown once; reset with `gpufleet user reset-password NAME`):\n{text}"
                    );
                    if let Some(path) = &args.credentials_file {
                        write_private(path, &text)?;
                    }
                }
                None => tracing::info!("users exist; demo users not created"),
            }
            pool.close().await;
        }
        Command::User(command) => user(command).await?,
        Command::Plan(command) => {
            if let Err(err) = plan(command) {
                // Bad input exits with 2, naming the file, line, column and problem.
                let code = if err.is::<packing::InputError>() {
                    2
                } else {
                    1
                };
                eprintln!("error: {err:#}");
                std::process::exit(code);
            }
        }
    }
    Ok(())
}

fn plan(command: PlanCommand) -> anyhow::Result<()> {
    match command {
        PlanCommand::Evaluate { scenario } => {
            let evaluation = backend::plan::evaluate_file(&scenario)?;
            println!("{}", serde_json::to_string_pretty(&evaluation)?);
        }
        PlanCommand::Export {
            scenario,
            out,
            kueue_version,
        } => {
            for file in backend::plan::export_file(&scenario, &out, &kueue_version)? {
                println!("wrote {file}");
            }
        }
        PlanCommand::Bench { runs } => {
            let (mut seconds, gpus, jobs) = backend::plan::bench(runs);
            seconds.sort_by(f64::total_cmp);
            let median = seconds[seconds.len() / 2];
            println!(
                "simulate: one week at 1-minute steps, {gpus} GPUs, 50 teams, 4 flavors, {jobs} jobs: median {:.3} s, min {:.3} s, max {:.3} s over {} runs (one core)",
                median,
                seconds[0],
                seconds[seconds.len() - 1],
                seconds.len()
            );
        }
        PlanCommand::Pack {
            nodes,
            pods,
            policy,
            seed,
            inflate,
        } => {
            let report = packing::pack_files(&nodes, &pods, &policy, seed, inflate)?;
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
        PlanCommand::Mig {
            gpu_model,
            groups,
            mig_parted_out,
        } => {
            let plan = packing::mig_command(&gpu_model, &groups)?;
            println!("{}", serde_json::to_string_pretty(&plan)?);
            if let Some(path) = mig_parted_out {
                std::fs::write(&path, &plan.mig_parted_yaml)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        PlanCommand::PackProtocol {
            trace_dir,
            published,
            seeds,
            policies,
            lists,
            out,
        } => {
            let seeds = packing::parse_seeds(&seeds)?;
            let policies = match policies {
                Some(list) => list
                    .split(',')
                    .map(|p| packing::parse_policy(p.trim()))
                    .collect::<Result<Vec<_>, _>>()?,
                None => Policy::ALL.to_vec(),
            };
            let lists: Vec<String> = match lists {
                Some(list) => list.split(',').map(|l| l.trim().to_owned()).collect(),
                None => packing::PUBLISHED_LISTS
                    .iter()
                    .map(|l| (*l).to_owned())
                    .collect(),
            };
            let published_path = published.unwrap_or_else(|| packing::published_beside(&trace_dir));
            let published = packing::read_published(&published_path)?;
            let run = packing::run_protocol(&trace_dir, &lists, &policies, &seeds)?;
            let command = std::env::args().collect::<Vec<_>>().join(" ");
            let markdown = packing::results_markdown(&run, &published, &seeds, &command);
            println!("{markdown}");
            eprintln!("{} replays in {:.1} s", run.runs, run.seconds);
            if let Some(path) = out {
                std::fs::write(&path, &markdown)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
    }
    Ok(())
}

async fn user(command: UserCommand) -> anyhow::Result<()> {
    match command {
        UserCommand::Create {
            db,
            username,
            admin,
            roles,
            teams,
            display_name,
            password_stdin,
        } => {
            let mut parsed = roles
                .iter()
                .map(|r| {
                    Role::parse(r).with_context(|| {
                        format!("{r:?} is not a role (requester, approver, finance, admin)")
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            if admin {
                parsed.push(Role::Admin);
            }
            let (password, generated) = password_from(password_stdin)?;
            let pool = migrated_pool(&db).await?;
            let new = NewUser {
                username,
                display_name,
                password: password.clone(),
                roles: parsed,
                teams,
            };
            let user = accounts::insert_user(&pool, &new).await.map_err(explain)?;
            let roles: Vec<&str> = user.roles.iter().map(|r| r.as_str()).collect();
            println!(
                "created {} with roles [{}]",
                user.username,
                roles.join(", ")
            );
            if generated {
                println!("password (shown once): {password}");
            }
        }
        UserCommand::ResetPassword {
            db,
            username,
            password_stdin,
        } => {
            let (password, generated) = password_from(password_stdin)?;
            let pool = migrated_pool(&db).await?;
            accounts::set_password(&pool, &username, &password)
                .await
                .map_err(explain)?;
            println!("password of {username} reset; their sessions ended");
            if generated {
                println!("password (shown once): {password}");
            }
        }
        UserCommand::List { db } => {
            let pool = migrated_pool(&db).await?;
            let users = accounts::db::users(&pool, None).await?;
            println!("{:<24} {:<32} {:<24} status", "username", "roles", "teams");
            for user in users {
                println!(
                    "{:<24} {:<32} {:<24} {}",
                    user.username,
                    user.roles.join(","),
                    user.teams.join(","),
                    if user.disabled { "disabled" } else { "active" }
                );
            }
        }
    }
    Ok(())
}

/// The password from stdin's first line, or a generated one (`true`).
fn password_from(stdin: bool) -> anyhow::Result<(String, bool)> {
    if !stdin {
        return Ok((password::generate(), true));
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the password from stdin")?;
    Ok((line.trim_end_matches(['\n', '\r']).to_owned(), false))
}

/// Turns API errors into CLI messages that name the field and the problem.
fn explain(err: backend::error::Error) -> anyhow::Error {
    match err {
        backend::error::Error::Invalid(fields) => {
            let lines: Vec<String> = fields
                .iter()
                .map(|f| format!("{}: {}", f.path, f.message))
                .collect();
            anyhow::anyhow!("invalid input: {}", lines.join("; "))
        }
        other => anyhow::anyhow!("{other}"),
    }
}

fn write_private(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::{io::Write, os::unix::fs::OpenOptionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(text.as_bytes())?;
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
    tracing::debug!(database = %redacted, "migrations applied");
    Ok(pool)
}
