//! `gpufleet chargeback statement | neighbours | close | set-rate`.

use shared::{
    chargeback::{Format, StatementQuery},
    common::day::Day,
};

use clap::{Args, Subcommand};

use crate::{audit::Actor, config::DbArgs, error::CliError, migrated_pool};

pub async fn run(command: ChargebackCommand) -> Result<(), CliError> {
    match command {
        ChargebackCommand::Statement {
            db,
            days,
            by_day,
            idle_share,
            lend_credit_pct,
            format,
            basis,
        } => {
            let query = StatementQuery {
                from: Some(days.from),
                to: Some(days.to),
                by: by_day.then(|| "day".to_owned()),
                idle: Some(idle_share),
                lend_credit: Some(lend_credit_pct),
                format: Some(format),
                basis,
            };
            statement(db, query).await
        }
        ChargebackCommand::Neighbours { db, days } => neighbours(db, days).await,
        ChargebackCommand::Close {
            db,
            month,
            accept_unobserved_gpu_hours,
        } => close(db, month, accept_unobserved_gpu_hours).await,
        ChargebackCommand::SetRate {
            db,
            flavor,
            from,
            cents_per_gpu_hour,
            confirm,
        } => set_rate(db, flavor, from, cents_per_gpu_hour, confirm).await,
        ChargebackCommand::Budgets { db, month } => budgets(db, month).await,
        ChargebackCommand::SetBudget {
            db,
            team,
            month,
            cents,
            gpu_hours,
            basis,
            thresholds_pct,
        } => {
            let new = shared::chargeback::budget::NewBudget {
                limit_cents: cents,
                limit_gpu_hours: gpu_hours,
                basis,
                thresholds_pct: (!thresholds_pct.is_empty()).then_some(thresholds_pct),
            };
            set_budget(db, team, month, new).await
        }
    }
}

/// `gpufleet chargeback budgets`: the month's budgets with their burn, forecast and alerts,
/// as JSON.
async fn budgets(db: DbArgs, month: String) -> Result<(), CliError> {
    let first = month_flag(&month)?;
    let pool = migrated_pool(&db).await?;
    let budgets = super::budget::read(&pool, first, crate::clock::now_ms()).await?;
    let text =
        serde_json::to_string_pretty(&budgets).map_err(|err| CliError::Failed(err.to_string()))?;
    #[allow(clippy::print_stdout)]
    {
        println!("{text}");
    }
    Ok(())
}

/// `gpufleet chargeback set-budget`: a team's budget for a month, audited.
async fn set_budget(
    db: DbArgs,
    team: String,
    month: String,
    new: shared::chargeback::budget::NewBudget,
) -> Result<(), CliError> {
    let first = month_flag(&month)?;
    let budget = new
        .checked()
        .map_err(|errors| CliError::Input(flags(&errors)))?;
    let pool = migrated_pool(&db).await?;
    super::budget::put(&pool, &team, first, &budget, Actor::Console)
        .await
        .map_err(|err| match err {
            crate::error::Error::NotFound => CliError::Input(format!("no team named {team:?}")),
            other => CliError::from(other),
        })?;
    eprintln!(
        "{team}: {} for {month}",
        shared::chargeback::budget::limit_key(&budget)
    );
    Ok(())
}

fn month_flag(month: &str) -> Result<Day, CliError> {
    shared::chargeback::parse_month(month)
        .ok_or_else(|| CliError::Input(format!("--month {month:?} is not a month written YYYY-MM")))
}

/// `gpufleet chargeback statement`: JSON, CSV or FOCUS CSV on stdout (the CSVs as the API
/// streams them).
async fn statement(db: DbArgs, query: StatementQuery) -> Result<(), CliError> {
    let period = checked(&query)?;
    let pool = migrated_pool(&db).await?;
    let text = if period.format == Format::Json {
        let statement = super::build(&pool, &period).await?;
        serde_json::to_string_pretty(&statement).map_err(|err| CliError::Failed(err.to_string()))?
            + "\n"
    } else {
        String::from_utf8(super::written(&pool, &period).await?)
            .map_err(|err| CliError::Failed(err.to_string()))?
    };
    #[allow(clippy::print_stdout)]
    {
        print!("{text}");
    }
    Ok(())
}

/// `gpufleet chargeback neighbours`: latency beside co-tenants, as JSON.
async fn neighbours(db: DbArgs, days: DaysArgs) -> Result<(), CliError> {
    let period = checked(&StatementQuery {
        from: Some(days.from),
        to: Some(days.to),
        ..StatementQuery::default()
    })?;
    let pool = migrated_pool(&db).await?;
    let report = super::neighbour_report(&pool, &period, None)
        .await
        .map_err(|err| match err {
            crate::error::Error::Invalid(errors) => CliError::Input(flags(&errors)),
            other => CliError::from(other),
        })?;
    let text =
        serde_json::to_string_pretty(&report).map_err(|err| CliError::Failed(err.to_string()))?;
    #[allow(clippy::print_stdout)]
    {
        println!("{text}");
    }
    Ok(())
}

/// `gpufleet chargeback close`: freezes a month that has ended.
async fn close(db: DbArgs, month: String, accepted: Option<String>) -> Result<(), CliError> {
    let first = shared::chargeback::parse_month(&month)
        .ok_or_else(|| CliError::Input(format!("{month:?} is not a month written YYYY-MM")))?;
    let accepted = shared::chargeback::CloseMonth {
        accept_unobserved_gpu_hours: accepted
            .map(|text| shared::chargeback::Hours::try_from(text).map_err(CliError::Input))
            .transpose()?,
    };
    let pool = migrated_pool(&db).await?;
    super::close(&pool, first, &accepted, Actor::Console)
        .await
        .map_err(|err| match err {
            crate::error::Error::Conflict(why) | crate::error::Error::Unconfirmed(why) => {
                CliError::Failed(why)
            }
            other => CliError::from(other),
        })?;
    eprintln!("{month} is closed: its figures are frozen");
    Ok(())
}

/// `gpufleet chargeback set-rate`: a flavor's rate from a day on, audited.
async fn set_rate(
    db: DbArgs,
    flavor: String,
    from: String,
    cents_per_gpu_hour: i64,
    confirm: bool,
) -> Result<(), CliError> {
    let day = Day::parse(&from).ok_or_else(|| {
        CliError::Input(format!("--from {from:?} is not a date written YYYY-MM-DD"))
    })?;
    let pool = migrated_pool(&db).await?;
    let rate = shared::chargeback::NewRate {
        effective_from: day,
        cents_per_gpu_hour,
        confirm,
    };
    super::put_rate(&pool, &flavor, &rate, Actor::Console)
        .await
        .map_err(|err| match err {
            crate::error::Error::NotFound => CliError::Input(format!("no flavor named {flavor:?}")),
            crate::error::Error::Unconfirmed(why) => CliError::Input(format!("{why} (--confirm)")),
            other => CliError::from(other),
        })?;
    eprintln!("{flavor}: {cents_per_gpu_hour} cents per GPU-hour from {day}");
    Ok(())
}

fn checked(query: &StatementQuery) -> Result<shared::chargeback::Period, CliError> {
    query
        .checked()
        .map_err(|errors| CliError::Input(flags(&errors)))
}

fn flags(errors: &[shared::FieldError]) -> String {
    let lines: Vec<String> = errors
        .iter()
        .map(|e| format!("--{}: {}", flag(&e.path), e.message))
        .collect();
    lines.join("; ")
}

fn flag(path: &str) -> &str {
    match path {
        "idle" => "idle-share",
        "by" => "by-day",
        "lend_credit" => "lend-credit-pct",
        "limit_cents" => "cents",
        "limit_gpu_hours" => "gpu-hours",
        "thresholds_pct" => "thresholds-pct",
        other => other,
    }
}

#[derive(Debug, Subcommand)]
pub enum ChargebackCommand {
    /// Print a statement for whole UTC days (JSON, CSV, or FinOps FOCUS 1.2 CSV).
    Statement {
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        days: DaysArgs,
        /// Each day as well as the period.
        #[arg(long)]
        by_day: bool,
        /// How the idle pool is shared: allocation, use, even or separate.
        #[arg(long, default_value = "allocation")]
        idle_share: String,
        /// Lending credit: the percentage of the rate (0-100) borrowing teams pay lending ones
        /// per GPU-hour lent.
        #[arg(long, default_value = "0")]
        lend_credit_pct: String,
        /// json, csv or focus.
        #[arg(long, default_value = "json")]
        format: String,
        /// With --format focus: use (a team's rows add up to its charge) or allocation (its
        /// cost by allocation).
        #[arg(long)]
        basis: Option<String>,
    },
    /// Print each inference service's latency (vLLM's TTFT and queue time, p95/p99) beside
    /// how its GPUs are shared and its co-tenants' load, flagged when latency degrades while a
    /// neighbour's load rises (JSON; at most 7 days).
    Neighbours {
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        days: DaysArgs,
    },
    /// Close a month that has ended (freezes its figures; audited). Reopening is an admin's,
    /// in the console or through the API, with a reason.
    Close {
        #[command(flatten)]
        db: DbArgs,
        /// YYYY-MM
        month: String,
        /// Close it although some of its capacity had no DCGM sample: those GPU-hours, as the
        /// refusal (or the statement's fleet line) gives them.
        #[arg(long, value_name = "GPU_HOURS")]
        accept_unobserved_gpu_hours: Option<String>,
    },
    /// Set a flavor's rate from a day on (audited).
    SetRate {
        #[command(flatten)]
        db: DbArgs,
        flavor: String,
        /// The first day it applies, YYYY-MM-DD (UTC).
        #[arg(long)]
        from: String,
        /// Whole cents per GPU-hour.
        #[arg(long)]
        cents_per_gpu_hour: i64,
        /// Set it although it is more than 3× (or under a third of) the rate it follows or the
        /// catalogue's price of its model.
        #[arg(long)]
        confirm: bool,
    },
    /// Print the month's budgets: each team's burn, forecast to the month's end and alerts
    /// (JSON).
    Budgets {
        #[command(flatten)]
        db: DbArgs,
        /// YYYY-MM
        #[arg(long)]
        month: String,
    },
    /// Set a team's budget for a month, in cents or whole GPU-hours (audited).
    SetBudget {
        #[command(flatten)]
        db: DbArgs,
        team: String,
        /// YYYY-MM
        #[arg(long)]
        month: String,
        #[arg(long, conflicts_with = "gpu_hours")]
        cents: Option<i64>,
        #[arg(long)]
        gpu_hours: Option<i64>,
        /// allocation (default: cost by allocation, or allocated GPU-hours) or use (the
        /// charge, or busy GPU-hours).
        #[arg(long)]
        basis: Option<String>,
        /// Percentages of the limit that raise an alert (default 80,100).
        #[arg(long, value_delimiter = ',')]
        thresholds_pct: Vec<i64>,
    },
}

#[derive(Debug, Args)]
pub struct DaysArgs {
    /// The first day, YYYY-MM-DD (UTC).
    #[arg(long)]
    pub from: String,
    /// The last day, included.
    #[arg(long)]
    pub to: String,
}
