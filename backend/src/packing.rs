//! Packing: `POST /api/plan/pack` (uploaded openb CSVs → the replay's figures) and the
//! `gpufleet plan pack` / `plan pack-protocol` commands. The math is `shared::packing`.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    time::Instant,
};

use axum::{
    Json,
    extract::{Multipart, multipart::MultipartError},
    http::Method,
};
use shared::{
    FieldError,
    auth::PLANNERS,
    packing::{
        NodeSpec, PodSpec, Policy, csv, mig,
        protocol::{self, PackReport, Published, Summary},
    },
};

use crate::{
    app::Api,
    auth::Access,
    error::{Error, Result},
    json::ApiJson,
};

pub fn api() -> Api {
    Api::default()
        .route(Method::POST, "/plan/pack", Access::Roles(PLANNERS), pack)
        .route(
            Method::POST,
            "/plan/mig",
            Access::Roles(PLANNERS),
            mig_layout,
        )
}

/// `POST /api/plan/mig`: `{gpu_model, groups: [{name, mem_mib, replicas}]}` → the layout.
async fn mig_layout(ApiJson(request): ApiJson<mig::MigRequest>) -> Result<Json<mig::MigPlan>> {
    request.plan().map(Json).map_err(Error::Invalid)
}

/// `gpufleet plan mig`: groups given as `name:memory:replicas` (`llama:20GiB:4`).
pub fn mig_command(gpu_model: &str, groups: &[String]) -> anyhow::Result<mig::MigPlan> {
    let groups = groups
        .iter()
        .map(|g| mig::parse_replica_group(g).map_err(InputError))
        .collect::<std::result::Result<Vec<_>, InputError>>()?;
    let request = mig::MigRequest {
        gpu_model: gpu_model.to_owned(),
        groups,
    };
    Ok(request.plan().map_err(|errors| {
        InputError(
            errors
                .iter()
                .map(|e| e.message.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        )
    })?)
}

/// Bad input: the message names the file, the line, the column and the problem. The CLI exits
/// with status 2 on it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// Multipart fields: `nodes` and `pods` (openb CSV files), `policy` (default `fgd`), `seed`
/// (default 42), `inflate` (default 1.3).
async fn pack(mut form: Multipart) -> Result<Json<PackReport>> {
    let (mut nodes, mut pods, mut policy, mut seed, mut inflate) =
        (None, None, Policy::Fgd, 42, protocol::PAPER_INFLATE);
    let mut errors = Vec::new();
    while let Some(field) = form.next_field().await.map_err(bad_multipart)? {
        let name = field.name().unwrap_or_default().to_owned();
        let text = field.text().await.map_err(bad_multipart)?;
        let mut invalid = |message: String| {
            errors.push(FieldError {
                path: name.clone(),
                message,
            })
        };
        match name.as_str() {
            "nodes" => match csv::parse_nodes(&text) {
                Ok(n) => nodes = Some(n),
                Err(e) => invalid(e.to_string()),
            },
            "pods" => match csv::parse_pods(&text) {
                Ok(p) => pods = Some(p),
                Err(e) => invalid(e.to_string()),
            },
            "policy" => match Policy::parse(text.trim()) {
                Some(p) => policy = p,
                None => invalid(format!(
                    "unknown policy {:?}; use one of {}",
                    text.trim(),
                    policy_names()
                )),
            },
            "seed" => match text.trim().parse() {
                Ok(s) => seed = s,
                Err(_) => invalid("must be a whole number".to_owned()),
            },
            "inflate" => match text.trim().parse() {
                Ok(i) => inflate = i,
                Err(_) => invalid("must be a number, e.g. 1.3".to_owned()),
            },
            _ => invalid("unknown field; send nodes, pods, policy, seed, inflate".to_owned()),
        }
    }
    for (present, path) in [(nodes.is_some(), "nodes"), (pods.is_some(), "pods")] {
        if !present && !errors.iter().any(|e| e.path == path) {
            errors.push(FieldError {
                path: path.to_owned(),
                message: "missing file".to_owned(),
            });
        }
    }
    let (Some(nodes), Some(pods), true) = (nodes, pods, errors.is_empty()) else {
        return Err(Error::Invalid(errors));
    };
    let report =
        tokio::task::spawn_blocking(move || protocol::replay(&nodes, &pods, policy, seed, inflate))
            .await
            .map_err(|err| anyhow::anyhow!("the replay panicked: {err}"))?
            .map_err(|err| {
                Error::Invalid(vec![FieldError {
                    path: "inflate".to_owned(),
                    message: err.to_string(),
                }])
            })?;
    Ok(Json(report))
}

fn bad_multipart(err: MultipartError) -> Error {
    Error::Invalid(vec![FieldError {
        path: "-".to_owned(),
        message: format!("unreadable upload: {}", err.body_text()),
    }])
}

fn policy_names() -> String {
    Policy::ALL
        .iter()
        .map(|p| p.name())
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn parse_policy(name: &str) -> std::result::Result<Policy, InputError> {
    Policy::parse(name).ok_or_else(|| {
        InputError(format!(
            "unknown policy {name:?}; use one of {}",
            policy_names()
        ))
    })
}

fn read(path: &Path) -> std::result::Result<String, InputError> {
    std::fs::read_to_string(path).map_err(|err| InputError(format!("{}: {err}", path.display())))
}

pub fn read_nodes(path: &Path) -> std::result::Result<Vec<NodeSpec>, InputError> {
    csv::parse_nodes(&read(path)?).map_err(|e| InputError(format!("{}: {e}", path.display())))
}

pub fn read_pods(path: &Path) -> std::result::Result<Vec<PodSpec>, InputError> {
    csv::parse_pods(&read(path)?).map_err(|e| InputError(format!("{}: {e}", path.display())))
}

/// `gpufleet plan pack`: one replay.
pub fn pack_files(
    nodes: &Path,
    pods: &Path,
    policy: &str,
    seed: u64,
    inflate: f64,
) -> anyhow::Result<PackReport> {
    let policy = parse_policy(policy)?;
    let (nodes, pods) = (read_nodes(nodes)?, read_pods(pods)?);
    Ok(protocol::replay(&nodes, &pods, policy, seed, inflate)
        .map_err(|e| InputError(e.to_string()))?)
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

/// The artifact's name for each of our policies that has a published counterpart.
fn published_name(policy: Policy) -> Option<&'static str> {
    match policy {
        Policy::Random => Some("Random"),
        Policy::BestFit => Some("BestFit"),
        Policy::DotProduct => Some("DotProd"),
        Policy::GpuPacking => Some("GpuPacking"),
        Policy::Fgd => Some("FGD"),
        Policy::FirstFit => None,
    }
}

pub struct ProtocolRun {
    pub summaries: Vec<Summary>,
    pub seconds: f64,
    pub runs: usize,
}

/// `gpufleet plan pack-protocol`: every list × policy × seed, on all cores; returns the medians.
pub fn run_protocol(
    trace_dir: &Path,
    lists: &[String],
    policies: &[Policy],
    seeds: &[u64],
) -> anyhow::Result<ProtocolRun> {
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
        .map_err(|_| anyhow::anyhow!("a replay thread panicked"))?;
    let mut summaries = Vec::new();
    for list in lists {
        for &policy in policies {
            let reports = results
                .iter()
                .filter(|(l, p, _)| l == list && *p == policy)
                .map(|(_, _, r)| {
                    r.clone()
                        .map_err(|e| anyhow::anyhow!("{list} {}: {e}", policy.name()))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            summaries.push(protocol::summarize(list, policy, &reports));
        }
    }
    Ok(ProtocolRun {
        summaries,
        seconds: started.elapsed().as_secs_f64(),
        runs,
    })
}

/// The results document: ours beside the published medians.
pub fn results_markdown(
    run: &ProtocolRun,
    published: &[Published],
    seeds: &[u64],
    command: &str,
) -> String {
    let fmt = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.2}"));
    let find = |list: &str, policy: Policy| {
        published_name(policy).and_then(|name| {
            published
                .iter()
                .find(|p| p.list == list && p.policy == name)
        })
    };
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Packing on the Alibaba openb trace: gpufleet vs. the published results\n"
    );
    let _ = writeln!(
        md,
        "Unallocated GPU % at 100% and 130% arrival (lower is better), median over seeds {}..={} ({} seeds), \
         all 1,213 GPU nodes (6,212 GPUs), arrivals inflated to 130%, no departures. `published` is the FGD \
         artifact's median for the same list and policy (`reference_results/summary_by_workload_policy.csv`); {} replays took {:.1} s on {} threads.\n",
        seeds.first().copied().unwrap_or_default(),
        seeds.last().copied().unwrap_or_default(),
        seeds.len(),
        run.runs,
        run.seconds,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    let _ = writeln!(md, "Regenerate: `{command}`\n");
    let _ = writeln!(
        md,
        "Notes: Random and BestFit are the calibration (within 0.5 points of the published medians on \
         `default` before any other comparison counts). `dot_product` and `gpu_packing` are our readings of \
         the artifact's one-line descriptions; `gpu_packing` lands well below its published figure, so \
         read it as a different policy. `first_fit` (the node order, first feasible) has no published \
         counterpart. FGD is scored as the artifact does, int(100·sigmoid(−ΔF/1000)) with ties to a fixed \
         seed-dependent node order; ranking by the exact ΔF instead is markedly worse (about 7.0% on \
         `default`), and two refinements we tried inside the tied bucket (prefer used nodes; prefer \
         already-shared GPUs) moved the medians by ±0.1 points, so they are not offered. The random \
         sequence differs from the artifact's (Go's generator), so only the statistics compare.\n"
    );
    let _ = writeln!(
        md,
        "| list | policy | ours @100 (IQR) | published @100 | Δ | ours @130 | published @130 | frag amount @100 | failed pods |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
    for s in &run.summaries {
        let p = find(&s.list, s.policy);
        let delta = match (s.unallocated_pct_at_100_median, p) {
            (Some(o), Some(p)) => format!("{:+.2}", o - p.unallocated_pct_at_100_median),
            _ => "–".to_owned(),
        };
        let iqr = s
            .unallocated_pct_at_100_iqr
            .map_or(String::new(), |(a, b)| format!(" ({a:.2}–{b:.2})"));
        let _ = writeln!(
            md,
            "| {} | {} | {}{iqr} | {} | {delta} | {} | {} | {} | {} |",
            s.list,
            s.policy.name(),
            fmt(s.unallocated_pct_at_100_median),
            fmt(p.map(|p| p.unallocated_pct_at_100_median)),
            fmt(s.unallocated_pct_at_130_median),
            fmt(p.map(|p| p.unallocated_pct_at_130_median)),
            fmt(s.frag_amount_pct_at_100_median),
            fmt(s.pods_failed_median),
        );
    }
    md
}

/// Parses `42-51` or `42,43` into seeds.
pub fn parse_seeds(text: &str) -> std::result::Result<Vec<u64>, InputError> {
    let bad = || {
        InputError(format!(
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

pub fn read_published(path: &Path) -> anyhow::Result<Vec<Published>> {
    let text = read(path)?;
    protocol::parse_published(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}
