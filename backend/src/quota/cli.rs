//! `gpufleet quota findings`.

use clap::Subcommand;
use shared::planning::findings::{
    DEFAULT_IDLE_PERCENT, DEFAULT_WAIT_P95_TARGET_MINUTES, DEFAULT_WEEKS, FindingsQuery,
};

use crate::{config::DbArgs, error::CliError};

#[derive(Debug, Subcommand)]
pub enum QuotaCommand {
    /// Re-plan findings as JSON: teams holding quota they do not use, teams whose work waits,
    /// small jobs that would pack; each with its evidence and a drafted request or a scenario.
    Findings {
        /// Whole weeks before today (UTC) to read, 1-13.
        #[arg(long, default_value_t = DEFAULT_WEEKS)]
        weeks: u32,
        /// Used (or busy) at most this percent of what is held, every week: idle.
        #[arg(long, default_value_t = DEFAULT_IDLE_PERCENT)]
        idle_percent: u32,
        /// Admission wait p95 above this many minutes: waiting.
        #[arg(long, default_value_t = DEFAULT_WAIT_P95_TARGET_MINUTES)]
        wait_p95_target_minutes: u32,
        #[command(flatten)]
        db: DbArgs,
    },
}

pub async fn run(command: QuotaCommand) -> Result<(), CliError> {
    let QuotaCommand::Findings {
        weeks,
        idle_percent,
        wait_p95_target_minutes,
        db,
    } = command;
    let query = FindingsQuery {
        weeks: Some(weeks.to_string()),
        idle_percent: Some(idle_percent.to_string()),
        wait_p95_target_minutes: Some(wait_p95_target_minutes.to_string()),
    };
    let rules = query.checked().map_err(|errors| {
        let said: Vec<String> = errors
            .iter()
            .map(|e| format!("--{}: {}", e.path.replace('_', "-"), e.message))
            .collect();
        CliError::Input(said.join("; "))
    })?;
    let state = crate::AppState::new(crate::migrated_pool(&db).await?);
    let found = super::findings::findings(&state, rules)
        .await
        .map_err(|err| CliError::Failed(err.to_string()))?;
    let text =
        serde_json::to_string_pretty(&found).map_err(|err| CliError::Failed(err.to_string()))?;
    #[allow(clippy::print_stdout)]
    {
        println!("{text}");
    }
    Ok(())
}
