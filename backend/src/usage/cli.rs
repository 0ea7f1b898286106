//! `gpufleet usage ingest | status`.

use std::{io::IsTerminal, io::Write, path::PathBuf, time::Instant};

use shared::common::utc::{MINUTE_MS, format_rfc3339, parse_rfc3339};

use clap::Subcommand;

use crate::{
    config::{DbArgs, UsageArgs},
    error::CliError,
    migrated_pool,
};

use super::{IngestError, Source, Usage, windows};

pub async fn run(command: UsageCommand) -> Result<(), CliError> {
    match command {
        UsageCommand::Ingest {
            db,
            usage,
            from,
            to,
            sources,
        } => ingest(db, usage, from, to, sources).await,
        UsageCommand::DemoHistory {
            db,
            hours,
            end,
            step_seconds,
            out,
        } => demo_history(db, (hours, end), step_seconds, out).await,
        UsageCommand::Status { db, format } => status(db, format).await,
    }
}

/// `gpufleet usage ingest`: a window of the chosen sources, read and stored.
async fn ingest(
    db: DbArgs,
    usage: Box<UsageArgs>,
    from: String,
    to: String,
    sources: Vec<String>,
) -> Result<(), CliError> {
    let from_ms = instant("--from", &from)?;
    let to_ms = instant("--to", &to)?;
    if to_ms <= from_ms {
        return Err(CliError::Input(format!(
            "--to ({to}) must be after --from ({from})"
        )));
    }
    let sources = parse_sources(&sources)?;
    let usage = Usage::from_args(&usage)?;
    let Some(prom) = usage.prometheus() else {
        return Err(CliError::Input(
            "no Prometheus to read: set GPUFLEET_PROMETHEUS_URL (or --prometheus-url)".to_owned(),
        ));
    };
    let pool = migrated_pool(&db).await?;
    let started = Instant::now();
    let windows = windows(from_ms, to_ms);
    let total = windows.len() * sources.len();
    let Ingested {
        rows,
        samples,
        failed,
        notes,
    } = ingest_each(&pool, prom, &usage, &sources, &windows).await?;
    for note in &notes {
        eprintln!("note: {note}");
    }
    let summary = format!(
        "ingested {} to {} ({} minutes) from {}: {} windows, {} samples, {} rows, {} failed, in {:.1} s",
        format_rfc3339(from_ms),
        format_rfc3339(to_ms),
        (to_ms - from_ms) / MINUTE_MS,
        sources
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", "),
        total,
        samples,
        rows,
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    #[allow(clippy::print_stdout)]
    {
        println!("{summary}");
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "{} windows failed and are recorded as gaps (gpufleet usage status):\n  {}",
            failed.len(),
            failed.join("\n  ")
        )))
    }
}

/// What the windows gave: rows and samples stored, the windows that failed, the notes.
struct Ingested {
    rows: usize,
    samples: usize,
    failed: Vec<String>,
    notes: Vec<String>,
}

/// Each source over each window, with a progress bar on a terminal; a database error stops it.
async fn ingest_each(
    pool: &sqlx::PgPool,
    prom: &super::prom::Prometheus,
    usage: &Usage,
    sources: &[Source],
    windows: &[shared::usage::Window],
) -> Result<Ingested, CliError> {
    let total = windows.len() * sources.len();
    let progress = std::io::stderr().is_terminal();
    let (mut done, mut rows, mut samples, mut failed) = (0, 0, 0, Vec::new());
    let mut notes = Vec::new();
    for source in sources {
        for window in windows {
            match super::ingest(pool, prom, &usage.settings, *source, *window).await {
                Ok(landed) => {
                    rows += landed.rows;
                    samples += landed.samples;
                    if let Some(note) = landed.note
                        && !notes.contains(&note)
                    {
                        notes.push(note);
                    }
                }
                Err(IngestError::Database(err)) => {
                    return Err(CliError::Failed(format!("database: {err}")));
                }
                Err(err) => failed.push(format!(
                    "{} {}: {err}",
                    source.name(),
                    format_rfc3339(window.from_ms)
                )),
            }
            done += 1;
            if progress {
                let filled = done * 30 / total.max(1);
                eprint!(
                    "\r[{}{}] {done}/{total} windows",
                    "#".repeat(filled),
                    ".".repeat(30 - filled)
                );
                let _ = std::io::stderr().flush();
            }
        }
    }
    if progress {
        eprintln!();
    }
    Ok(Ingested {
        rows,
        samples,
        failed,
        notes,
    })
}

/// `gpufleet usage demo-history`: the demo fleet's metrics as OpenMetrics, for promtool.
async fn demo_history(
    db: DbArgs,
    (hours, end): (u32, Option<String>),
    step_seconds: u32,
    out: PathBuf,
) -> Result<(), CliError> {
    if !(1..=60).contains(&step_seconds) {
        return Err(CliError::Input(
            "--step-seconds is 1 to 60: a minute without a sample counts nothing".to_owned(),
        ));
    }
    let to = match end {
        Some(end) => instant("--end", &end)?,
        None => shared::common::utc::floor_minute(crate::clock::now_ms()),
    };
    let from = to - i64::from(hours) * shared::common::utc::HOUR_MS;
    let pool = migrated_pool(&db).await?;
    let (pools, teams) = super::demo::fleet(&pool)
        .await
        .map_err(|err| CliError::Failed(format!("database: {err}")))?;
    let file = std::fs::File::create(&out)
        .map_err(|err| CliError::Failed(format!("cannot write {}: {err}", out.display())))?;
    let mut writer = std::io::BufWriter::new(file);
    let written = super::demo::write_history(
        &mut writer,
        &pools,
        &teams,
        from,
        to,
        i64::from(step_seconds) * 1000,
    )
    .and_then(|n| writer.flush().map(|()| n))
    .map_err(|err| CliError::Failed(format!("cannot write {}: {err}", out.display())))?;
    eprintln!(
        "wrote {written} demo samples ({} to {}) to {}",
        format_rfc3339(from),
        format_rfc3339(to),
        out.display()
    );
    Ok(())
}

/// `gpufleet usage status`: each source's watermark and lag, open gaps, unattributed namespaces.
async fn status(db: DbArgs, format: String) -> Result<(), CliError> {
    let pool = migrated_pool(&db).await?;
    let health = super::health(&pool, &Usage::off())
        .await
        .map_err(|err| CliError::Failed(format!("database: {err}")))?;
    let text = match format.as_str() {
        "json" => serde_json::to_string_pretty(&health)
            .map_err(|err| CliError::Failed(err.to_string()))?,
        "text" => status_text(&health),
        other => {
            return Err(CliError::Input(format!("--format {other:?}: text or json")));
        }
    };
    #[allow(clippy::print_stdout)]
    {
        println!("{text}");
    }
    Ok(())
}

fn instant(flag: &str, text: &str) -> Result<i64, CliError> {
    let ms = parse_rfc3339(text).ok_or_else(|| {
        CliError::Input(format!(
            "{flag} {text:?} is not an RFC 3339 time, e.g. 2026-12-01T00:00:00Z"
        ))
    })?;
    if ms % MINUTE_MS != 0 {
        return Err(CliError::Input(format!(
            "{flag} {text:?} is not on a whole minute: usage is kept per minute"
        )));
    }
    Ok(ms)
}

fn parse_sources(names: &[String]) -> Result<Vec<Source>, CliError> {
    if names.is_empty() {
        return Ok(Source::ALL.to_vec());
    }
    names
        .iter()
        .map(|name| {
            Source::ALL
                .into_iter()
                .find(|s| s.name() == name)
                .ok_or_else(|| CliError::Input(format!("--source {name:?}: kueue, dcgm or vllm")))
        })
        .collect()
}

fn status_text(health: &shared::usage::UsageHealth) -> String {
    let mut out =
        String::from("source  watermark             lag      last success          error / note\n");
    for s in &health.sources {
        let lag = s
            .lag_seconds
            .map_or("-".to_owned(), |l| format!("{}m{:02}s", l / 60, l % 60));
        out.push_str(&format!(
            "{:<7} {:<21} {:<8} {:<21} {}\n",
            s.source,
            s.watermark.as_deref().unwrap_or("(none yet)"),
            lag,
            s.last_success_at.as_deref().unwrap_or("-"),
            s.last_error.as_deref().or(s.note.as_deref()).unwrap_or("")
        ));
    }
    if health.open_gaps.is_empty() {
        out.push_str("open gaps: none\n");
    } else {
        out.push_str("open gaps:\n");
        for g in &health.open_gaps {
            out.push_str(&format!(
                "  {} {} to {} ({} attempts, last {}): {}\n",
                g.source, g.from, g.to, g.attempts, g.last_failed_at, g.error
            ));
        }
    }
    if health.unattributed.is_empty() {
        out.push_str("unattributed (last 7 days): none");
    } else {
        out.push_str(&format!(
            "unattributed (last 7 days; no team owns them): {}",
            health.unattributed.join(", ")
        ));
    }
    out
}

#[derive(Debug, Subcommand)]
pub enum UsageCommand {
    /// Read a window (RFC 3339, UTC, whole minutes) from Prometheus into the minute rows,
    /// replacing what it held: backfills and audits.
    Ingest {
        #[command(flatten)]
        db: DbArgs,
        #[command(flatten)]
        usage: Box<UsageArgs>,
        /// e.g. 2026-12-01T00:00:00Z
        #[arg(long)]
        from: String,
        /// e.g. 2026-12-02T00:00:00Z (not included)
        #[arg(long)]
        to: String,
        /// Only these sources (kueue, dcgm, vllm; repeat); default: all.
        #[arg(long = "source")]
        sources: Vec<String>,
    },
    /// Write the demo fleet's metrics of the last hours as OpenMetrics, for
    /// `promtool tsdb create-blocks-from openmetrics` (what `./dev run` seeds its Prometheus with).
    DemoHistory {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long, default_value_t = 24)]
        hours: u32,
        /// Where it ends, on a whole minute, e.g. 2026-12-01T00:00:00Z (default: now); a week
        /// is written a day at a time by giving each day's end.
        #[arg(long)]
        end: Option<String>,
        /// Seconds between samples (at most 60: a minute without a sample counts nothing).
        #[arg(long, default_value_t = 60)]
        step_seconds: u32,
        #[arg(long)]
        out: PathBuf,
    },
    /// Print each source's watermark and lag, the open gaps and the unattributed namespaces.
    Status {
        #[command(flatten)]
        db: DbArgs,
        /// text (default) or json.
        #[arg(long, default_value = "text")]
        format: String,
    },
}
