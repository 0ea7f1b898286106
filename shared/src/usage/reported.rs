//! Whether the cluster holds an approved quota, in Kueue's own words: its
//! `kueue_cluster_queue_nominal_quota`, read by the usage ingest into each row's nominal
//! GPU-microseconds ([`super::lending_minutes`]). Under GitOps gpufleet only writes files, so
//! this is how it learns that Argo CD or Flux applied them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{GPU_US_PER_GPU_MINUTE, SCALE, div_round, share_of_gpu, unscale};
use crate::quota::{Flavor, QuotaSpec};

/// The nominal quota Kueue reported for a team's ClusterQueue on one flavor, in the newest
/// minute the usage ingest read: GPU-microseconds in that minute, a MIG instance at its share of
/// a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedNominal {
    pub flavor: String,
    pub minute_ms: i64,
    pub nominal_gpu_us: i64,
}

/// What Kueue's nominal quota of these lines of one flavor, `(resource, count)`, reads as in a
/// usage row's minute, converted as the ingest converts Kueue's series: GPU-microseconds, a MIG
/// instance at its share of the flavor's GPU, resources that are not GPUs nothing.
pub fn nominal_gpu_us_per_minute<'a>(
    lines: impl IntoIterator<Item = (&'a str, i64)>,
    gpu_model: Option<&str>,
) -> i64 {
    let exact: i128 = lines
        .into_iter()
        .filter_map(|(resource, count)| {
            let (num, den) = share_of_gpu(resource, gpu_model)?;
            Some(div_round(
                i128::from(count) * SCALE * i128::from(num) * i128::from(GPU_US_PER_GPU_MINUTE),
                i128::from(den),
            ))
        })
        .sum();
    unscale(exact)
}

/// The minute from which Kueue's reports show `spec` on every flavor it names, and nothing on
/// any other: the oldest of the flavors' newest minutes. `None` while any flavor's report is
/// missing or differs (the files not yet applied, or the old quota still in place). A report
/// may differ from the spec's by a microsecond a line (rounding a MIG instance's share).
pub fn seen_from(
    spec: &QuotaSpec,
    flavors: &[Flavor],
    reported: &[ReportedNominal],
) -> Option<i64> {
    let mut lines: BTreeMap<&str, Vec<(&str, i64)>> = BTreeMap::new();
    for line in &spec.lines {
        lines
            .entry(line.flavor.as_str())
            .or_default()
            .push((line.resource.as_str(), line.nominal));
    }
    let mut seen: Option<i64> = None;
    for (flavor, lines) in &lines {
        let model = flavors
            .iter()
            .find(|f| f.name == *flavor)
            .map(|f| f.gpu_model.as_str());
        let expected = nominal_gpu_us_per_minute(lines.iter().copied(), model);
        let report = reported.iter().find(|r| r.flavor == *flavor);
        match report {
            None if expected == 0 => {}
            None => return None,
            Some(r) if r.nominal_gpu_us.abs_diff(expected) > lines.len() as u64 => return None,
            Some(r) => seen = Some(seen.map_or(r.minute_ms, |s| s.min(r.minute_ms))),
        }
    }
    let elsewhere = reported
        .iter()
        .any(|r| r.nominal_gpu_us > 0 && !lines.contains_key(r.flavor.as_str()));
    if elsewhere {
        return None;
    }
    seen.or_else(|| reported.iter().map(|r| r.minute_ms).min())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn flavors() -> Vec<Flavor> {
        serde_json::from_value(json!([
            {"name": "h200-train", "gpu_model": "H200-SXM-141GB", "pools": ["p1"], "gpus": 48, "settings": {}},
            {"name": "a100-mig", "gpu_model": "A100-SXM4-80GB", "pools": ["p2"], "gpus": 8, "settings": {}}
        ]))
        .expect("flavors")
    }

    fn spec(lines: serde_json::Value) -> QuotaSpec {
        serde_json::from_value(json!({
            "lines": lines, "checkpoint_interval_min": 30, "justification": "x",
            "starts_on": "2026-12-01"
        }))
        .expect("a spec")
    }

    fn report(flavor: &str, minute_ms: i64, nominal_gpu_us: i64) -> ReportedNominal {
        ReportedNominal {
            flavor: flavor.into(),
            minute_ms,
            nominal_gpu_us,
        }
    }

    const MINUTE_US: i64 = 60_000_000;

    #[test]
    fn a_quota_is_seen_when_kueue_reports_each_flavor_as_approved() {
        // 48 H200s and 14 MIG 1g.10gb instances of A100s (7 compute slices: 2 GPUs' worth)
        let spec = spec(json!([
            {"flavor": "h200-train", "resource": "nvidia.com/gpu", "nominal": 48},
            {"flavor": "a100-mig", "resource": "nvidia.com/mig-1g.10gb", "nominal": 14}
        ]));
        let both = [
            report("h200-train", 2_000, 48 * MINUTE_US),
            report("a100-mig", 1_000, 2 * MINUTE_US),
        ];
        assert_eq!(seen_from(&spec, &flavors(), &both), Some(1_000));
        // the old quota still in place on one flavor (Kueue's 47.9 against 48: not yet applied)
        let old = [both[0].clone(), report("a100-mig", 1_000, MINUTE_US)];
        assert_eq!(seen_from(&spec, &flavors(), &old), None);
        // one flavor not reported at all
        assert_eq!(seen_from(&spec, &flavors(), &both[..1]), None);
        assert_eq!(seen_from(&spec, &flavors(), &[]), None);
    }

    #[test]
    fn quota_left_on_a_flavor_the_spec_drops_is_not_the_spec() {
        let spec =
            spec(json!([{"flavor": "h200-train", "resource": "nvidia.com/gpu", "nominal": 48}]));
        let reported = [
            report("h200-train", 1_000, 48 * MINUTE_US),
            report("a100-mig", 1_000, MINUTE_US),
        ];
        assert_eq!(seen_from(&spec, &flavors(), &reported), None);
        // Kueue reporting zero there is the spec
        let reported = [reported[0].clone(), report("a100-mig", 500, 0)];
        assert_eq!(seen_from(&spec, &flavors(), &reported), Some(1_000));
    }

    #[test]
    fn a_zero_quota_is_seen_once_kueue_reports_anything() {
        let spec =
            spec(json!([{"flavor": "h200-train", "resource": "nvidia.com/gpu", "nominal": 0}]));
        assert_eq!(seen_from(&spec, &flavors(), &[]), None);
        let zero = [report("h200-train", 3_000, 0)];
        assert_eq!(seen_from(&spec, &flavors(), &zero), Some(3_000));
    }
}
