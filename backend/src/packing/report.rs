//! The packing results document: our medians beside the FGD artifact's published ones.

use std::fmt::Write as _;

use shared::packing::{
    Policy,
    protocol::{self, Published},
};

use super::cli::ProtocolRun;

/// The artifact's name for each of our policies that has a published counterpart.
fn published_name(policy: Policy) -> Option<&'static str> {
    match policy {
        Policy::Random => Some("Random"),
        Policy::BestFit => Some("BestFit"),
        Policy::DotProduct => Some("DotProd"),
        Policy::GpuPacking => Some("GpuPacking"),
        Policy::Fgd => Some("FGD"),
        Policy::FirstFit | Policy::FgdStranding => None,
    }
}

/// The results document: ours beside the published medians.
pub fn results_markdown(
    run: &ProtocolRun,
    published: &[Published],
    seeds: &[u64],
    command: &str,
) -> String {
    let mut md = String::new();
    preamble(&mut md, run, seeds, command);
    summary_table(&mut md, run, published);
    paired(&mut md, run);
    md
}

/// The document's title, protocol, how to regenerate it, and what to read into it.
fn preamble(md: &mut String, run: &ProtocolRun, seeds: &[u64], command: &str) {
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
         already-shared GPUs) moved the medians by ±0.1 points, so they are not offered. \
         `fgd_stranding` is ours: FGD's score plus what a placement strands that fragmentation does not \
         count: per target class that may run on the node's GPU model, the growth of the free GPU milli \
         that the node's remaining CPU could no longer serve at that class's CPU per milli-GPU (weighted \
         by class frequency); and, for a pod that may run on any model, the GPU milli it takes from a \
         model that pinned pods need, times that model's share of the pinned GPU demand over its share \
         of the capacity. Same online protocol, same score shape and tie-break. It is compared with \
         `fgd` seed by seed below. The random sequence differs \
         from the artifact's (Go's generator), so only the statistics compare.\n"
    );
}

/// Each list and policy: ours at 100% and 130% arrival beside the published medians.
fn summary_table(md: &mut String, run: &ProtocolRun, published: &[Published]) {
    let fmt = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.2}"));
    let find = |list: &str, policy: Policy| {
        published_name(policy).and_then(|name| {
            published
                .iter()
                .find(|p| p.list == list && p.policy == name)
        })
    };
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
}

/// `fgd_stranding` against `fgd`, seed by seed, per list.
fn paired(md: &mut String, run: &ProtocolRun) {
    let of = |list: &str, policy: Policy| {
        run.summaries
            .iter()
            .find(|s| s.list == list && s.policy == policy)
    };
    let lists: Vec<&str> = run
        .summaries
        .iter()
        .filter(|s| s.policy == Policy::Fgd)
        .map(|s| s.list.as_str())
        .collect();
    let rows: Vec<String> = lists
        .iter()
        .filter_map(|list| {
            let (ours, fgd) = (of(list, Policy::FgdStranding)?, of(list, Policy::Fgd)?);
            let diffs = protocol::paired_differences(ours, fgd);
            let better = diffs.iter().filter(|d| **d < 0.0).count();
            let median = protocol::median_of(&diffs)?;
            let (lo, hi) = diffs
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), d| {
                    (a.min(*d), b.max(*d))
                });
            Some(format!(
                "| {list} | {median:+.2} | {lo:+.2} … {hi:+.2} | {better} of {} |",
                diffs.len()
            ))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n## `fgd_stranding` − `fgd`, paired by seed\n\nUnallocated GPU % at 100% arrival, the \
         difference on the same seed (negative: fewer GPUs left unallocated).\n\n\
         | list | median difference | range | seeds better |\n|---|---|---|---|"
    );
    for row in rows {
        let _ = writeln!(md, "{row}");
    }
}
