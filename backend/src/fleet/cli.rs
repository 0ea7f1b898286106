//! `gpufleet fleet export | import`: the inventory as a file platform teams keep in git.
#![allow(clippy::print_stdout)] // a CLI prints

use std::path::PathBuf;

use shared::inventory::Inventory;

use clap::Subcommand;

use crate::{audit::Actor, config::DbArgs, error::CliError, migrated_pool};

pub async fn run(command: FleetCommand) -> Result<(), CliError> {
    match command {
        FleetCommand::Export { db, format } => {
            let pool = migrated_pool(&db).await?;
            let mut tx = pool.begin().await?;
            let inventory = super::db::read_inventory(&mut tx).await?;
            tx.commit().await?;
            print!("{}", render(&inventory, &format)?);
        }
        FleetCommand::Import { db, file, dry_run } => {
            let name = file.display().to_string();
            let text = std::fs::read_to_string(&file)
                .map_err(|err| CliError::Input(format!("{name}: {err}")))?;
            let wanted = super::inventory::parse(&name, &text).map_err(CliError::Input)?;
            let pool = migrated_pool(&db).await?;
            let applied = super::inventory::apply(&pool, &wanted, Actor::Console, dry_run)
                .await
                .map_err(|err| match CliError::from(err) {
                    CliError::Input(message) => CliError::Input(format!("{name}: {message}")),
                    other => other,
                })?;
            let real: Vec<&String> = applied
                .changes
                .iter()
                .filter(|c| !c.starts_with("keep "))
                .collect();
            for change in &applied.changes {
                println!("{change}");
            }
            println!(
                "{}",
                match (real.is_empty(), dry_run) {
                    (true, _) =>
                        "the inventory already matches the file: nothing changed".to_owned(),
                    (false, true) => format!("dry run: {} changes, none applied", real.len()),
                    (false, false) => format!("applied {} changes", real.len()),
                }
            );
        }
    }
    Ok(())
}

fn render(inventory: &Inventory, format: &str) -> Result<String, CliError> {
    match format {
        "yaml" => serde_yaml::to_string(inventory).map_err(|e| CliError::Failed(e.to_string())),
        "json" => serde_json::to_string_pretty(inventory)
            .map(|s| s + "\n")
            .map_err(|e| CliError::Failed(e.to_string())),
        other => Err(CliError::Input(format!("--format {other:?}: yaml or json"))),
    }
}

#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Print the inventory (GPU models and prices, flavors, pools, teams with their queues).
    Export {
        #[command(flatten)]
        db: DbArgs,
        /// yaml (default) or json.
        #[arg(long, default_value = "yaml")]
        format: String,
    },
    /// Apply an inventory file (YAML or JSON) as the whole inventory, in one transaction.
    Import {
        #[command(flatten)]
        db: DbArgs,
        file: PathBuf,
        /// Print what would change; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}
