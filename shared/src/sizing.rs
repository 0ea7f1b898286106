//! Fleet sizing: separate pools, each sized to its own peak (the sum of the peaks), against one
//! shared pool with quotas and borrowing (the peak of the sum); and the three readings of a
//! utilisation gain that people confuse.
//!
//! Invariant: for the same demand the shared pool never needs more GPUs than separate pools
//! (the peak of a sum is at most the sum of the peaks).

use serde::{Deserialize, Serialize};

use crate::scenario::{HOURS_PER_WEEK, Scenario, WorkloadKind};

pub const HOURS_PER_YEAR: i64 = 8_760;

/// The three readings of "utilisation went from `u0` to `u1`" on `gpus` cards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UtilisationGain {
    pub from_pct: f64,
    pub to_pct: f64,
    pub gpus: u64,
    /// Work per fixed cost: u1 / u0 (35% → 60% is 1.71x).
    pub work_per_cost_factor: f64,
    /// Extra busy-GPU equivalents: N·(u1 − u0) (2,500 on 10,000 cards).
    pub extra_busy_gpus: f64,
    /// GPUs that could be retired for the same work: N·(1 − u0/u1).
    pub retirable_gpus: f64,
}

pub fn utilisation_gain(from_pct: f64, to_pct: f64, gpus: u64) -> UtilisationGain {
    let (u0, u1, n) = (from_pct / 100.0, to_pct / 100.0, gpus as f64);
    UtilisationGain {
        from_pct,
        to_pct,
        gpus,
        work_per_cost_factor: if u0 > 0.0 { u1 / u0 } else { 0.0 },
        extra_busy_gpus: n * (u1 - u0),
        retirable_gpus: if u1 > 0.0 { n * (1.0 - u0 / u1) } else { 0.0 },
    }
}

/// One way of sizing the fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolSizing {
    pub gpus: u64,
    /// Mean GPUs wanted ÷ GPUs, in %.
    pub mean_allocated_pct: f64,
    /// Mean GPUs really busy ÷ GPUs, in %.
    pub mean_busy_pct: f64,
    pub idle_gpu_hours_per_week: f64,
    pub cost_cents_per_year: i64,
    /// Inference's share of the cost per million tokens served (allocation basis); None
    /// without inference.
    pub cost_cents_per_million_tokens: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sizing {
    pub separate_pools: PoolSizing,
    pub shared_pool: PoolSizing,
    /// From separate to shared, on the shared pool's GPUs.
    pub gain: UtilisationGain,
    /// Per flavor: (flavor, separate GPUs, shared GPUs, GPUs in the fleet).
    pub by_flavor: Vec<FlavorSizing>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlavorSizing {
    pub flavor: String,
    pub fleet_gpus: u64,
    pub separate_gpus: u64,
    pub shared_gpus: u64,
}

/// Demand series per (team, workload), hourly.
struct Series {
    flavor: String,
    hourly: Vec<f64>,
    busy: f64,
    tokens_per_gpu_hour: Option<f64>,
}

fn series(scenario: &Scenario) -> Vec<Series> {
    scenario
        .teams
        .iter()
        .flat_map(|t| &t.workloads)
        .map(|w| Series {
            flavor: w.flavor.clone(),
            hourly: w.demand.hourly(),
            busy: f64::from(w.busy_pct) / 100.0,
            tokens_per_gpu_hour: (w.kind == WorkloadKind::Inference)
                .then(|| {
                    w.inference
                        .as_ref()
                        .map(|i| f64::from(i.tokens_per_s_per_gpu) * 3600.0)
                })
                .flatten(),
        })
        .collect()
}

pub fn size(scenario: &Scenario) -> Sizing {
    let all = series(scenario);
    let mut by_flavor = Vec::new();
    let (mut sep_gpus, mut shared_gpus) = (0u64, 0u64);
    let (mut sep_cost, mut shared_cost) = (0i64, 0i64);
    let (mut inference_sep_cost, mut inference_gpu_hours_cost) = (0.0, 0.0);
    let (mut wanted_gpu_hours, mut busy_gpu_hours, mut tokens) = (0.0, 0.0, 0.0);
    for acc in &scenario.fleet {
        let mine: Vec<&Series> = all.iter().filter(|s| s.flavor == acc.flavor).collect();
        let separate: u64 = mine.iter().map(|s| peak(&s.hourly)).sum();
        let sum: Vec<f64> = (0..HOURS_PER_WEEK)
            .map(|h| {
                mine.iter()
                    .map(|s| s.hourly.get(h).copied().unwrap_or(0.0))
                    .sum()
            })
            .collect();
        let shared = peak(&sum);
        let price = acc.price_cents_per_gpu_hour;
        sep_gpus += separate;
        shared_gpus += shared;
        sep_cost += separate as i64 * price * HOURS_PER_YEAR;
        shared_cost += shared as i64 * price * HOURS_PER_YEAR;
        let flavor_wanted: f64 = sum.iter().sum();
        for s in &mine {
            let hours: f64 = s.hourly.iter().sum();
            wanted_gpu_hours += hours;
            busy_gpu_hours += hours * s.busy;
            if let Some(t) = s.tokens_per_gpu_hour {
                tokens += hours * t * s.busy;
                // Separate: the inference pool's own GPUs. Shared: inference's share of the
                // flavor's GPU-hours, at the shared pool's cost.
                inference_sep_cost += (peak(&s.hourly) as i64 * price * HOURS_PER_YEAR) as f64;
                if flavor_wanted > 0.0 {
                    inference_gpu_hours_cost +=
                        (shared as i64 * price * HOURS_PER_YEAR) as f64 * hours / flavor_wanted;
                }
            }
        }
        by_flavor.push(FlavorSizing {
            flavor: acc.flavor.clone(),
            fleet_gpus: u64::from(acc.count),
            separate_gpus: separate,
            shared_gpus: shared,
        });
    }
    let weeks_per_year = HOURS_PER_YEAR as f64 / HOURS_PER_WEEK as f64;
    let tokens_per_year = tokens * weeks_per_year;
    let pool = |gpus: u64, cost: i64, inference_cost: f64| {
        let capacity = gpus as f64 * HOURS_PER_WEEK as f64;
        PoolSizing {
            gpus,
            mean_allocated_pct: pct(wanted_gpu_hours, capacity),
            mean_busy_pct: pct(busy_gpu_hours, capacity),
            idle_gpu_hours_per_week: (capacity - wanted_gpu_hours).max(0.0),
            cost_cents_per_year: cost,
            cost_cents_per_million_tokens: (tokens_per_year > 0.0)
                .then(|| inference_cost / (tokens_per_year / 1e6)),
        }
    };
    let separate_pools = pool(sep_gpus, sep_cost, inference_sep_cost);
    let shared_pool = pool(shared_gpus, shared_cost, inference_gpu_hours_cost);
    let gain = utilisation_gain(
        separate_pools.mean_busy_pct,
        shared_pool.mean_busy_pct,
        shared_gpus,
    );
    Sizing {
        separate_pools,
        shared_pool,
        gain,
        by_flavor,
    }
}

/// The GPUs that cover a series' peak.
fn peak(hourly: &[f64]) -> u64 {
    hourly.iter().copied().fold(0.0, f64::max).ceil() as u64
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole * 100.0
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_readings_of_35_to_60_percent() {
        let big = utilisation_gain(35.0, 60.0, 10_000);
        assert_eq!(format!("{:.2}", big.work_per_cost_factor), "1.71");
        assert!((big.extra_busy_gpus - 2_500.0).abs() < 1e-9);
        assert!((big.retirable_gpus - 4_166.666_666_666_667).abs() < 1e-6);
        let small = utilisation_gain(35.0, 60.0, 200);
        assert!((small.extra_busy_gpus - 50.0).abs() < 1e-9);
        assert_eq!(utilisation_gain(0.0, 60.0, 10).work_per_cost_factor, 0.0);
    }

    #[test]
    fn peaks_round_up() {
        assert_eq!(peak(&[0.0, 2.1, 1.0]), 3);
        assert_eq!(peak(&[]), 0);
    }
}
