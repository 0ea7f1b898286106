//! `gpufleet quota findings` and `gpufleet quota what-if`.

use clap::Subcommand;
use shared::planning::{
    findings::{
        DEFAULT_IDLE_PERCENT, DEFAULT_WAIT_P95_TARGET_MINUTES, DEFAULT_WEEKS, FindingsQuery,
    },
    replay::{DEFAULT_WHAT_IF_WEEKS, WhatIfQuery},
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
    /// What a quota request would have done: the last whole weeks' recorded Workloads replayed
    /// under the quotas in force today and again with the request approved, per team of its
    /// cohort (JSON, as the approver's review reads it).
    WhatIf {
        /// The team whose request it is.
        #[arg(long)]
        team: String,
        /// The request's id.
        #[arg(long)]
        request: i64,
        /// Whole weeks before today (UTC) to replay, 1-8.
        #[arg(long, default_value_t = DEFAULT_WHAT_IF_WEEKS)]
        weeks: u32,
        #[command(flatten)]
        db: DbArgs,
    },
}

pub async fn run(command: QuotaCommand) -> Result<(), CliError> {
    match command {
        QuotaCommand::Findings {
            weeks,
            idle_percent,
            wait_p95_target_minutes,
            db,
        } => findings(weeks, idle_percent, wait_p95_target_minutes, db).await,
        QuotaCommand::WhatIf {
            team,
            request,
            weeks,
            db,
        } => what_if(&team, request, weeks, db).await,
    }
}

/// `gpufleet quota what-if`.
async fn what_if(team: &str, request: i64, weeks: u32, db: DbArgs) -> Result<(), CliError> {
    let weeks = WhatIfQuery {
        weeks: Some(weeks.to_string()),
    }
    .checked()
    .map_err(|errors| flags(&errors))?;
    let state = crate::AppState::new(crate::migrated_pool(&db).await?);
    let spec = {
        let mut conn = state
            .pool
            .acquire()
            .await
            .map_err(crate::error::Error::from)?;
        super::stored_spec(&mut conn, team, request)
            .await
            .map_err(|err| match err {
                crate::error::Error::NotFound => {
                    CliError::Input(format!("--request: team {team} has no request {request}"))
                }
                other => CliError::from(other),
            })?
    };
    let what_if = crate::planning::what_if(&state, (request, team, spec), weeks)
        .await
        .map_err(|err| CliError::Failed(err.to_string()))?;
    print_json(&what_if)
}

/// `gpufleet quota findings`.
async fn findings(
    weeks: u32,
    idle_percent: u32,
    wait_p95_target_minutes: u32,
    db: DbArgs,
) -> Result<(), CliError> {
    let query = FindingsQuery {
        weeks: Some(weeks.to_string()),
        idle_percent: Some(idle_percent.to_string()),
        wait_p95_target_minutes: Some(wait_p95_target_minutes.to_string()),
    };
    let rules = query.checked().map_err(|errors| flags(&errors))?;
    let state = crate::AppState::new(crate::migrated_pool(&db).await?);
    let found = super::findings::findings(&state, rules)
        .await
        .map_err(|err| CliError::Failed(err.to_string()))?;
    print_json(&found)
}

/// Field errors as the flags that carry them.
fn flags(errors: &[shared::FieldError]) -> CliError {
    let said: Vec<String> = errors
        .iter()
        .map(|e| format!("--{}: {}", e.path.replace('_', "-"), e.message))
        .collect();
    CliError::Input(said.join("; "))
}

fn print_json(value: &impl serde::Serialize) -> Result<(), CliError> {
    let text =
        serde_json::to_string_pretty(value).map_err(|err| CliError::Failed(err.to_string()))?;
    #[allow(clippy::print_stdout)]
    {
        println!("{text}");
    }
    Ok(())
}
