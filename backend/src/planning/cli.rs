//! `gpufleet plan evaluate`, `plan suggest-quotas`, `plan export` and `plan bench`: planning from
//! files; `plan from-history`: a scenario from the database's record of what the fleet did.
#![allow(clippy::print_stdout)] // a CLI prints

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use shared::{
    cluster::workload::HistoryQuery,
    planning::manifests::{self, KueueVersion},
    planning::replay::ReplayQuery,
    planning::scenario::Scenario,
    planning::{self, Evaluation},
};

use clap::Subcommand;

use crate::{config::DbArgs, error::CliError, packing::cli::pretty};

/// Runs one planning command, printing its result.
pub async fn run(command: PlanCommand) -> Result<(), CliError> {
    match command {
        PlanCommand::FromHistory { from, to, db } => {
            let query = HistoryQuery {
                from: Some(from),
                to: Some(to),
            };
            let (from, end) = query.checked().map_err(flags)?;
            let state = crate::AppState::new(crate::migrated_pool(&db).await?);
            let derived = super::measured(&state, from, end)
                .await
                .map_err(|err| CliError::Failed(err.to_string()))?;
            println!("{}", pretty(&derived)?);
        }
        PlanCommand::Replay { from, db } => {
            let from = ReplayQuery { from }
                .checked(crate::clock::today())
                .map_err(flags)?;
            let state = crate::AppState::new(crate::migrated_pool(&db).await?);
            let replay = super::replayed(&state, from)
                .await
                .map_err(|err| CliError::Failed(err.to_string()))?;
            println!("{}", pretty(&replay)?);
        }
        PlanCommand::Evaluate { scenario } => {
            println!("{}", pretty(&evaluate_file(&scenario)?)?);
        }
        PlanCommand::SuggestQuotas { scenario } => {
            let scenario = read_scenario(&scenario)?;
            let suggestion = planning::suggest_quotas(&scenario)
                .map_err(|_| CliError::Input("invalid scenario".to_owned()))?;
            println!("{}", pretty(&suggestion)?);
        }
        PlanCommand::Export {
            scenario,
            out,
            kueue_version,
        } => {
            for file in export_file(&scenario, &out, &kueue_version)? {
                println!("wrote {file}");
            }
        }
        PlanCommand::Bench { runs } => {
            let (mut seconds, gpus, jobs) = bench(runs);
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
    }
    Ok(())
}

/// Bad flags, each named as typed (exit status 2).
fn flags(errors: Vec<shared::FieldError>) -> CliError {
    let said: Vec<String> = errors
        .iter()
        .map(|e| format!("--{}: {}", e.path, e.message))
        .collect();
    CliError::Input(said.join("; "))
}

/// Reads and validates a scenario file; problems become an [`CliError::Input`] (exit status 2).
pub fn read_scenario(path: &Path) -> Result<Scenario, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| CliError::Input(format!("{}: {err}", path.display())))?;
    let explain = |errors: Vec<shared::FieldError>| {
        let lines: Vec<String> = errors
            .iter()
            .map(|e| format!("  {}: {}", e.path, e.message))
            .collect();
        CliError::Input(format!(
            "{}: invalid scenario\n{}",
            path.display(),
            lines.join("\n")
        ))
    };
    let scenario = planning::parse_scenario(&text).map_err(explain)?;
    scenario.validate().map_err(explain)?;
    Ok(scenario)
}

/// `gpufleet plan evaluate`.
pub fn evaluate_file(path: &Path) -> Result<Evaluation, CliError> {
    let scenario = read_scenario(path)?;
    planning::evaluate(&scenario).map_err(|_| CliError::Input("invalid scenario".to_owned()))
}

/// `gpufleet plan export`: writes the manifests into `out`, returns the files written.
pub fn export_file(path: &Path, out: &Path, version: &str) -> Result<Vec<String>, CliError> {
    let version = KueueVersion::parse(version).ok_or_else(|| {
        CliError::Input(format!(
            "unknown Kueue version {version:?}; use v1beta2 or v1beta1"
        ))
    })?;
    let scenario = read_scenario(path)?;
    std::fs::create_dir_all(out)
        .map_err(|err| CliError::Failed(format!("{}: {err}", out.display())))?;
    let mut written = Vec::new();
    let plan = shared::planning::isolation_plan(&scenario);
    let check = shared::kueue::report(&manifests::admission(&scenario, &plan));
    let files = manifests::export(&scenario, &plan, version)
        .into_iter()
        .map(|f| (f.name, f.yaml))
        .chain([(manifests::CHECK_FILE.to_owned(), check)]);
    for (name, yaml) in files {
        let target = out.join(&name);
        crate::packing::cli::write(&target, &yaml)?;
        written.push(target.display().to_string());
    }
    Ok(written)
}

/// `gpufleet plan bench`: times the evaluation of the benchmark scenario.
pub fn bench(runs: usize) -> (Vec<f64>, u64, u64) {
    let scenario = shared::planning::scenario::bench_scenario();
    let plan = shared::planning::isolation_plan(&scenario);
    let mut seconds = Vec::new();
    let mut jobs = 0;
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        let sim = shared::planning::simulate::simulate(&scenario, &plan);
        seconds.push(started.elapsed().as_secs_f64());
        jobs = sim.total.jobs_submitted;
    }
    (seconds, scenario.total_gpus(), jobs)
}

#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Evaluate a scenario (sizing, a week's simulation, decision, isolation) and print JSON.
    Evaluate { scenario: PathBuf },
    /// Suggest nominal quotas, borrowing and lending limits per team from the simulated week
    /// (each team's queue-wait target) and print JSON with the week before and after.
    SuggestQuotas { scenario: PathBuf },
    /// Write the scenario's Kueue and KEDA manifests as YAML into a folder.
    Export {
        scenario: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// Kueue API version: v1beta2 (default) or v1beta1.
        #[arg(long, default_value = "v1beta2")]
        kueue_version: String,
    },
    /// A scenario from what the fleet did (the inventory, the quotas in force on the last day,
    /// the Workloads recorded in the window) and where each figure came from, as JSON.
    FromHistory {
        /// The first day, YYYY-MM-DD (UTC).
        #[arg(long)]
        from: String,
        /// The last day, included.
        #[arg(long)]
        to: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Planned vs measured: the recorded week from `--from` (default: the last 7 whole days)
    /// replayed through the week engine under the quotas in force, beside what was measured, per
    /// team, as JSON.
    Replay {
        /// The week's first day, YYYY-MM-DD (UTC); the week must have ended.
        #[arg(long)]
        from: Option<String>,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Time the week-long simulation of 10,000 GPUs, 50 teams, 4 flavors, ~100,000 jobs.
    Bench {
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
}
