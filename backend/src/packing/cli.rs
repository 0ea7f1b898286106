//! `gpufleet packing replay`, `packing mig` and `packing protocol`: packing from files. Bad input is
//! a [`CliError::Input`] naming the file, line, column and problem (exit status 2).
#![allow(clippy::print_stdout)] // a CLI prints

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use shared::packing::{
    NodeSpec, PodSpec, Policy, csv, mig,
    protocol::{self, PackReport, Published, Summary},
};

use clap::Subcommand;

use crate::error::CliError;

/// Runs one packing command, printing its result.
pub fn run(command: PackingCommand) -> Result<(), CliError> {
    match command {
        PackingCommand::Replay {
            nodes,
            pods,
            policy,
            seed,
            inflate,
        } => {
            let report = pack_files(&nodes, &pods, &policy, seed, inflate)?;
            println!("{}", pretty(&report)?);
        }
        PackingCommand::Mig {
            gpu_model,
            groups,
            mig_parted_out,
        } => {
            let plan = mig_command(&gpu_model, &groups)?;
            println!("{}", pretty(&plan)?);
            if let Some(path) = mig_parted_out {
                write(&path, &plan.mig_parted_yaml)?;
            }
        }
        PackingCommand::Protocol {
            trace_dir,
            published,
            seeds,
            policies,
            lists,
            out,
        } => {
            let seeds = parse_seeds(&seeds)?;
            let policies = match policies {
                Some(list) => list
                    .split(',')
                    .map(|p| parse_policy(p.trim()))
                    .collect::<Result<Vec<_>, _>>()?,
                None => Policy::ALL.to_vec(),
            };
            let lists: Vec<String> = match lists {
                Some(list) => list.split(',').map(|l| l.trim().to_owned()).collect(),
                None => PUBLISHED_LISTS.iter().map(|l| (*l).to_owned()).collect(),
            };
            let published_path = published.unwrap_or_else(|| published_beside(&trace_dir));
            let published = read_published(&published_path)?;
            let run = run_protocol(&trace_dir, &lists, &policies, &seeds)?;
            let command = std::env::args().collect::<Vec<_>>().join(" ");
            let markdown = super::report::results_markdown(&run, &published, &seeds, &command);
            println!("{markdown}");
            eprintln!("{} replays in {:.1} s", run.runs, run.seconds);
            if let Some(path) = out {
                write(&path, &markdown)?;
            }
        }
    }
    Ok(())
}

/// Pretty JSON for the terminal.
pub fn pretty(value: &impl serde::Serialize) -> Result<String, CliError> {
    serde_json::to_string_pretty(value).map_err(|err| CliError::Failed(format!("JSON: {err}")))
}

pub fn write(path: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(path, text)
        .map_err(|err| CliError::Failed(format!("writing {}: {err}", path.display())))
}

pub fn parse_policy(name: &str) -> Result<Policy, CliError> {
    Policy::parse(name).ok_or_else(|| {
        CliError::Input(format!(
            "unknown policy {name:?}; use one of {}",
            Policy::names()
        ))
    })
}

/// `gpufleet packing mig`: groups given as `name:memory:replicas` (`llama:20GiB:4`).
pub fn mig_command(gpu_model: &str, groups: &[String]) -> Result<mig::MigPlan, CliError> {
    let groups = groups
        .iter()
        .map(|g| mig::parse_replica_group(g).map_err(|e| CliError::Input(e.to_string())))
        .collect::<Result<Vec<_>, CliError>>()?;
    let request = mig::MigRequest {
        gpu_model: gpu_model.to_owned(),
        groups,
    };
    request.plan().map_err(|errors| {
        CliError::Input(
            errors
                .iter()
                .map(|e| e.message.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        )
    })
}

fn read(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .map_err(|err| CliError::Input(format!("{}: {err}", path.display())))
}

pub fn read_nodes(path: &Path) -> Result<Vec<NodeSpec>, CliError> {
    csv::parse_nodes(&read(path)?).map_err(|e| CliError::Input(format!("{}: {e}", path.display())))
}

pub fn read_pods(path: &Path) -> Result<Vec<PodSpec>, CliError> {
    csv::parse_pods(&read(path)?).map_err(|e| CliError::Input(format!("{}: {e}", path.display())))
}

/// `gpufleet packing replay`: one replay.
pub fn pack_files(
    nodes: &Path,
    pods: &Path,
    policy: &str,
    seed: u64,
    inflate: f64,
) -> Result<PackReport, CliError> {
    let policy = parse_policy(policy)?;
    let (nodes, pods) = (read_nodes(nodes)?, read_pods(pods)?);
    protocol::replay(&nodes, &pods, policy, seed, inflate)
        .map_err(|e| CliError::Input(e.to_string()))
}

/// The pod lists with published results, in the README's order.
pub const PUBLISHED_LISTS: [&str; 17] = [
    "default",
    "cpu050",
    "cpu100",
    "cpu200",
    "cpu250",
    "gpushare40",
    "gpushare60",
    "gpushare80",
    "gpushare100",
    "gpuspec10",
    "gpuspec20",
    "gpuspec25",
    "gpuspec33",
    "multigpu20",
    "multigpu30",
    "multigpu40",
    "multigpu50",
];

pub struct ProtocolRun {
    pub summaries: Vec<Summary>,
    pub seconds: f64,
    pub runs: usize,
}

/// `gpufleet packing protocol`: every list × policy × seed, on all cores; returns the medians.
pub fn run_protocol(
    trace_dir: &Path,
    lists: &[String],
    policies: &[Policy],
    seeds: &[u64],
) -> Result<ProtocolRun, CliError> {
    let started = Instant::now();
    let nodes = read_nodes(&trace_dir.join("openb_node_list_gpu_node.csv"))?;
    let mut jobs = Vec::new();
    for list in lists {
        let pods = read_pods(&trace_dir.join(format!("openb_pod_list_{list}.csv")))?;
        let pods = std::sync::Arc::new(pods);
        for &policy in policies {
            for &seed in seeds {
                jobs.push((list.clone(), policy, seed, std::sync::Arc::clone(&pods)));
            }
        }
    }
    let runs = jobs.len();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(runs.max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::with_capacity(runs));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((list, policy, seed, pods)) = jobs.get(i) else {
                        break;
                    };
                    let report =
                        protocol::replay(&nodes, pods, *policy, *seed, protocol::PAPER_INFLATE);
                    if let Ok(mut r) = results.lock() {
                        r.push((list.clone(), *policy, report));
                    }
                }
            });
        }
    });
    let results = results
        .into_inner()
        .map_err(|_| CliError::Failed("a replay thread panicked".to_owned()))?;
    let mut summaries = Vec::new();
    for list in lists {
        for &policy in policies {
            let reports = results
                .iter()
                .filter(|(l, p, _)| l == list && *p == policy)
                .map(|(_, _, r)| {
                    r.clone()
                        .map_err(|e| CliError::Input(format!("{list} {}: {e}", policy.name())))
                })
                .collect::<Result<Vec<_>, CliError>>()?;
            summaries.push(protocol::summarize(list, policy, &reports));
        }
    }
    Ok(ProtocolRun {
        summaries,
        seconds: started.elapsed().as_secs_f64(),
        runs,
    })
}

/// Parses `42-51` or `42,43` into seeds.
pub fn parse_seeds(text: &str) -> Result<Vec<u64>, CliError> {
    let bad = || {
        CliError::Input(format!(
            "seeds {text:?}: use a range like 42-51 or a list like 42,43"
        ))
    };
    if let Some((a, b)) = text.split_once('-') {
        let (a, b): (u64, u64) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        return if a <= b {
            Ok((a..=b).collect())
        } else {
            Err(bad())
        };
    }
    text.split(',')
        .map(|s| s.trim().parse().map_err(|_| bad()))
        .collect()
}

/// Where the artifact's summary lives relative to a trace folder (`../reference_results/`).
pub fn published_beside(trace_dir: &Path) -> PathBuf {
    trace_dir.join("../reference_results/summary_by_workload_policy.csv")
}

pub fn read_published(path: &Path) -> Result<Vec<Published>, CliError> {
    let text = read(path)?;
    protocol::parse_published(&text)
        .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))
}

#[derive(Debug, Subcommand)]
pub enum PackingCommand {
    /// Replay a pod list onto a node list (openb CSVs) and print the figures as JSON.
    Replay {
        #[arg(long)]
        nodes: PathBuf,
        #[arg(long)]
        pods: PathBuf,
        /// random, first_fit, best_fit, dot_product, gpu_packing, fgd
        #[arg(long, default_value = "fgd")]
        policy: String,
        #[arg(long, default_value_t = shared::common::rng::DEFAULT_SEED)]
        seed: u64,
        /// Arrivals as a multiple of GPU capacity (the paper: 1.3).
        #[arg(long, default_value_t = 1.3)]
        inflate: f64,
    },
    /// Lay inference replicas out in MIG instances (JSON with a mig-parted config).
    Mig {
        /// A catalogue model with MIG, e.g. H200-SXM-141GB, H100-SXM5-80GB, A100-SXM4-40GB.
        #[arg(long)]
        gpu_model: String,
        /// Replica groups as name:memory:replicas with the memory in GiB or MiB (repeat), e.g. --replicas llama-8b:20GiB:6
        #[arg(long = "replicas", required = true)]
        groups: Vec<String>,
        /// Also write the mig-parted configuration here.
        #[arg(long)]
        mig_parted_out: Option<PathBuf>,
    },
    /// The paper's full protocol: every list × policy × seed, written as a results document.
    Protocol {
        /// The openb trace folder: alibaba/clusterdata's cluster-trace-gpu-v2023/csv/.
        #[arg(long)]
        trace_dir: PathBuf,
        /// The artifact's summary CSV; default: ../reference_results/ beside the trace folder.
        #[arg(long)]
        published: Option<PathBuf>,
        #[arg(long, default_value = "42-51")]
        seeds: String,
        /// Comma-separated policies; default: all.
        #[arg(long)]
        policies: Option<String>,
        /// Comma-separated pod lists; default: the 17 with published results.
        #[arg(long)]
        lists: Option<String>,
        /// Write the Markdown table here (also printed).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}
