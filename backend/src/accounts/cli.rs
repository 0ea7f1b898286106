//! `gpufleet user create | reset-password | list` and `gpufleet demo`: accounts from the
//! command line. Passwords are read from standard input or generated and shown once.
#![allow(clippy::print_stdout)] // a CLI prints

use std::io::BufRead;

use clap::Subcommand;

use shared::accounts::{NewUser, Role};

use crate::{
    config::{DbArgs, DemoArgs},
    error::CliError,
    fleet::{self, DemoLoad},
    migrated_pool, password, work,
};

pub async fn run(command: UserCommand) -> Result<(), CliError> {
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
                    Role::parse(r).ok_or_else(|| {
                        CliError::Input(format!(
                            "{r:?} is not a role (requester, approver, finance, admin)"
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
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
            let user = super::insert_user(&pool, &hashing(), &new).await?;
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
            super::set_password(&pool, &hashing(), &username, &password).await?;
            println!("password of {username} reset; their sessions ended");
            if generated {
                println!("password (shown once): {password}");
            }
        }
        UserCommand::List { db } => {
            let pool = migrated_pool(&db).await?;
            let users = super::db::users(&pool, None).await?;
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

/// `gpufleet demo`: the demo fleet, teams and one user per role, into an empty database.
pub async fn demo(args: DemoArgs) -> Result<(), CliError> {
    let pool = migrated_pool(&args.db).await?;
    match fleet::load_demo(&pool).await? {
        DemoLoad::Loaded { gpus } => tracing::info!(gpus, "loaded the demo fleet"),
        DemoLoad::AlreadyHasFleet => tracing::info!("a fleet exists; demo fleet not loaded"),
    }
    match super::load_demo(&pool, &hashing()).await? {
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
    if crate::quota::load_demo(&pool).await? {
        tracing::info!("loaded the demo quota requests (two approved, one waiting)");
    }
    if args.without_workload_history {
        tracing::info!("demo workload history not loaded: a cluster's Kueue records it");
    } else if let Some(workloads) = crate::cluster::history::load_demo(&pool).await? {
        tracing::info!(workloads, "loaded the demo's workload history (four weeks)");
    }
    pool.close().await;
    Ok(())
}

/// A command hashes one password at a time.
fn hashing() -> work::Pool {
    work::Work::new(1, 0, 1, 4).hashing
}

/// The password from stdin's first line, or a generated one (`true`).
fn password_from(stdin: bool) -> Result<(String, bool), CliError> {
    if !stdin {
        return Ok((password::generate(), true));
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|err| CliError::Failed(format!("reading the password from stdin: {err}")))?;
    Ok((line.trim_end_matches(['\n', '\r']).to_owned(), false))
}

fn write_private(path: &std::path::Path, text: &str) -> Result<(), CliError> {
    use std::{io::Write, os::unix::fs::OpenOptionsExt};
    let cannot =
        |err: std::io::Error| CliError::Failed(format!("cannot write {}: {err}", path.display()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(cannot)?;
    file.write_all(text.as_bytes()).map_err(cannot)
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user. Without --password-stdin a random password is generated and printed once.
    Create {
        #[command(flatten)]
        db: DbArgs,
        username: String,
        /// Give the admin role (for the first admin of a new install).
        #[arg(long)]
        admin: bool,
        /// Roles to give: requester, approver, finance, admin (repeat the flag).
        #[arg(long = "role")]
        roles: Vec<String>,
        /// Teams to join (repeat the flag).
        #[arg(long = "team")]
        teams: Vec<String>,
        #[arg(long, default_value = "")]
        display_name: String,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Set a new password (random unless --password-stdin) and end the user's sessions.
    ResetPassword {
        #[command(flatten)]
        db: DbArgs,
        username: String,
        #[arg(long)]
        password_stdin: bool,
    },
    /// List users with their roles and teams.
    List {
        #[command(flatten)]
        db: DbArgs,
    },
}
