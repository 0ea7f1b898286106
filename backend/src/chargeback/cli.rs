//! `gpufleet chargeback statement | neighbours | close | set-rate`.

use shared::{chargeback::StatementQuery, common::day::Day};

use crate::{audit::Actor, config::ChargebackCommand, error::CliError, migrated_pool};

pub async fn run(command: ChargebackCommand) -> Result<(), CliError> {
    match command {
        ChargebackCommand::Statement {
            db,
            days,
            by_day,
            idle_share,
            lend_credit_pct,
            format,
        } => {
            let query = StatementQuery {
                from: Some(days.from),
                to: Some(days.to),
                by: by_day.then(|| "day".to_owned()),
                idle: Some(idle_share),
                lend_credit: Some(lend_credit_pct),
                format: Some(format),
            };
            let period = checked(&query)?;
            let pool = migrated_pool(&db).await?;
            let statement = super::build(&pool, &period).await?;
            let text = if period.csv {
                shared::chargeback::csv(&statement)
            } else {
                serde_json::to_string_pretty(&statement)
                    .map_err(|err| CliError::Failed(err.to_string()))?
                    + "\n"
            };
            #[allow(clippy::print_stdout)]
            {
                print!("{text}");
            }
            Ok(())
        }
        ChargebackCommand::Neighbours { db, days } => {
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
            let text = serde_json::to_string_pretty(&report)
                .map_err(|err| CliError::Failed(err.to_string()))?;
            #[allow(clippy::print_stdout)]
            {
                println!("{text}");
            }
            Ok(())
        }
        ChargebackCommand::Close { db, month } => {
            let first = shared::chargeback::parse_month(&month).ok_or_else(|| {
                CliError::Input(format!("{month:?} is not a month written YYYY-MM"))
            })?;
            let pool = migrated_pool(&db).await?;
            super::close(&pool, first, Actor::Console)
                .await
                .map_err(|err| match err {
                    crate::error::Error::Conflict(why) => CliError::Failed(why),
                    other => CliError::from(other),
                })?;
            eprintln!("{month} is closed: its figures are frozen");
            Ok(())
        }
        ChargebackCommand::SetRate {
            db,
            flavor,
            from,
            cents_per_gpu_hour,
        } => {
            let day = Day::parse(&from).ok_or_else(|| {
                CliError::Input(format!("--from {from:?} is not a date written YYYY-MM-DD"))
            })?;
            let pool = migrated_pool(&db).await?;
            let mut tx = pool.begin().await.map_err(crate::error::Error::from)?;
            super::db::set_rate(&mut *tx, &flavor, day, cents_per_gpu_hour, None)
                .await
                .map_err(crate::error::Error::from)?
                .ok_or_else(|| CliError::Input(format!("no flavor named {flavor:?}")))?;
            crate::audit::record(
                &mut *tx,
                Actor::Console,
                shared::audit::Kind::Flavor,
                "set rate",
                &format!("flavor {flavor}"),
                None,
                None,
                Some(&serde_json::json!({"effective_from": day, "cents_per_gpu_hour": cents_per_gpu_hour})),
            )
            .await?;
            tx.commit().await.map_err(crate::error::Error::from)?;
            eprintln!("{flavor}: {cents_per_gpu_hour} cents per GPU-hour from {day}");
            Ok(())
        }
    }
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
        other => other,
    }
}
