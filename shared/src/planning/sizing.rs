//! Fleet sizing: separate pools, each class sized to its own peak (the sum of the peaks),
//! against one shared pool per flavor with quotas and borrowing (the peak of the sum); a
//! class's standing backlog fills whatever its pool leaves idle; the fleet the scenario has,
//! held against what each option needs; and the three readings of a utilisation gain.
//!
//! Inference is sized as KEDA allocates it: replicas = ⌈traffic ÷ (GPUs per replica ×
//! threshold)⌉ within min/max replicas, each holding its GPUs; it serves at most what they
//! carry. Batch classes hold their demand profile. A backlog (queued work beyond the
//! profile) buys no cards: in separate pools it runs only in its own class's troughs; in a
//! shared pool it runs in anyone's.
//!
//! Invariant: for the same demand the shared pool never needs more GPUs than separate pools
//! (the peak of a sum is at most the sum of the peaks).

use serde::{Deserialize, Serialize};

use crate::{
    common::label::Labelled,
    planning::scenario::{HOURS_PER_WEEK, Scenario, Workload, WorkloadKind},
};

pub const HOURS_PER_YEAR: i64 = 8_760;

/// The three readings of "utilisation went from `u0` to `u1`", all on the same `gpus`: the
/// fleet where `u0` was measured (separate pools, as it runs today).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UtilisationGain {
    pub from_pct: f64,
    pub to_pct: f64,
    /// The baseline: the GPUs of separate pools.
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
    /// Mean GPUs held (demand, inference replicas, backlog that found room) ÷ GPUs, in %.
    pub mean_allocated_pct: f64,
    /// Mean GPUs really busy ÷ GPUs, in %.
    pub mean_busy_pct: f64,
    /// Capacity no job held, in GPU-hours a week ("unallocated", never "idle": idle is
    /// allocated and not busy; `shared::common::label::GLOSSARY`).
    pub unallocated_gpu_hours_per_week: f64,
    /// GPU-hours a week of backlog work that found room.
    pub backlog_gpu_hours_per_week: f64,
    pub cost_cents_per_year: i64,
    /// Inference's share of the cost (by GPU-hours held, idle shared the same way) per
    /// million tokens served; None without inference.
    pub cost_cents_per_million_tokens: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sizing {
    pub separate_pools: PoolSizing,
    pub shared_pool: PoolSizing,
    /// The fleet the scenario has, one shared pool per flavor, as the week runs it: work
    /// reaches only the cards within some team's nominal quota (Kueue lends only unused
    /// nominal quota), and the utilisation is of every card. The figure the simulated week's
    /// is held against.
    pub fleet_pool: PoolSizing,
    /// From separate to shared, on the separate pools' GPUs.
    pub gain: UtilisationGain,
    pub by_flavor: Vec<FlavorSizing>,
}

/// The scenario's fleet of one flavor against what each option needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlavorSizing {
    pub flavor: String,
    pub fleet_gpus: u64,
    pub separate_gpus: u64,
    pub shared_gpus: u64,
    pub separate_fit: Fit,
    pub shared_fit: Fit,
    /// GPUs in no team's nominal quota: no ClusterQueue reaches them (Kueue lends only the
    /// unused nominal quota of other ClusterQueues) unless a Cohort holds quota for them.
    pub outside_quota_gpus: u64,
    /// Nominal quota beyond the cards: Kueue admits on quota, not on nodes, so admitted pods
    /// wait Pending for a node when the teams use it all.
    #[serde(default)]
    pub overbooked_gpus: u64,
}

/// How a fleet compares with what an option needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fit {
    /// Fewer cards than the peak needs: work waits or traffic goes unserved.
    Short,
    Fits,
    /// More than a quarter above the need.
    Oversized,
}

impl Labelled for Fit {
    fn label(self) -> &'static str {
        match self {
            Fit::Short => "short",
            Fit::Fits => "fits",
            Fit::Oversized => "oversized",
        }
    }
}

impl Fit {
    pub fn of(fleet: u64, need: u64) -> Fit {
        if fleet < need {
            Fit::Short
        } else if (fleet - need) * 4 > need {
            Fit::Oversized
        } else {
            Fit::Fits
        }
    }
}

impl FlavorSizing {
    /// In words: the fleet short or oversized for either option, and quota beyond the cards.
    pub fn verdicts(&self) -> Vec<String> {
        let overbooked = (self.overbooked_gpus > 0).then(|| {
            format!(
                "{}: the teams' nominal quotas add up to {} GPUs on {} cards ({} more than the cards): Kueue admits on quota, not on nodes, so when the teams use their quota, admitted pods wait Pending for a node.",
                self.flavor,
                self.fleet_gpus + self.overbooked_gpus,
                self.fleet_gpus,
                self.overbooked_gpus
            )
        });
        self.verdict().into_iter().chain(overbooked).collect()
    }

    /// In words, when the fleet is short or oversized for either option.
    fn verdict(&self) -> Option<String> {
        let (f, have) = (&self.flavor, self.fleet_gpus);
        match (self.separate_fit, self.shared_fit) {
            (Fit::Short, Fit::Short) => Some(format!(
                "{f}: {have} cards are short for either option: separate pools need {}, a shared pool {} ({} more).",
                self.separate_gpus,
                self.shared_gpus,
                self.shared_gpus - have
            )),
            (Fit::Short, _) => Some(format!(
                "{f}: {have} cards are short for separate pools ({} needed) but enough for a shared pool ({}).",
                self.separate_gpus, self.shared_gpus
            )),
            (_, Fit::Oversized) => Some(format!(
                "{f}: {have} cards are oversized: a shared pool needs {} ({} spare), separate pools {}.",
                self.shared_gpus,
                have - self.shared_gpus,
                self.separate_gpus
            )),
            _ => None,
        }
    }
}

/// One class's week, hourly, in GPUs.
struct Series {
    flavor: String,
    /// GPUs held.
    held: Vec<f64>,
    /// GPUs' worth of work done (inference: traffic served).
    work: Vec<f64>,
    busy_share: f64,
    tokens_per_gpu_hour: Option<f64>,
    backlog_gpus: f64,
    /// Jobs per card in a shared pool, where work smaller than a GPU is packed (separate
    /// pools hand out whole cards).
    pack: f64,
}

/// How many jobs smaller than a GPU one card takes: as many as its memory holds, and no more
/// than its time allows (each keeps it busy `busy_share` of the time).
pub fn jobs_per_card(card_mib: u32, job_mib: u32, busy_share: f64) -> u32 {
    let by_memory = card_mib / job_mib.max(1);
    let by_time = if busy_share > 0.0 {
        (1.0 / busy_share + 1e-9).floor() as u32
    } else {
        by_memory
    };
    by_memory.min(by_time).max(1)
}

impl Series {
    fn of(scenario: &Scenario, w: &Workload) -> Self {
        let pack = match (
            w.mem_mib_per_job,
            scenario.accelerator(&w.flavor).and_then(|a| a.model()),
        ) {
            (Some(job), Some(card)) if w.gpus_per_job == 1 && job < card.mem_mib => f64::from(
                jobs_per_card(card.mem_mib, job, f64::from(w.busy_pct) / 100.0),
            ),
            _ => 1.0,
        };
        let demand = w.demand.hourly();
        let busy_share = f64::from(w.busy_pct) / 100.0;
        match (&w.kind, &w.inference) {
            (WorkloadKind::Inference, Some(inf)) => {
                let held: Vec<f64> = demand
                    .iter()
                    .map(|&traffic| {
                        let replicas = inf.replicas_held(traffic, w.gpus_per_job);
                        f64::from(replicas) * f64::from(w.gpus_per_job)
                    })
                    .collect();
                let work = demand.iter().zip(&held).map(|(t, h)| t.min(*h)).collect();
                Series {
                    flavor: w.flavor.clone(),
                    held,
                    work,
                    busy_share,
                    tokens_per_gpu_hour: Some(f64::from(inf.tokens_per_s_per_gpu) * 3600.0),
                    backlog_gpus: 0.0,
                    pack,
                }
            }
            _ => Series {
                flavor: w.flavor.clone(),
                work: demand.clone(),
                held: demand,
                busy_share,
                tokens_per_gpu_hour: None,
                backlog_gpus: w.backlog_gpus,
                pack,
            },
        }
    }
}

impl Series {
    /// The class in a shared pool: jobs smaller than a GPU share cards, so it holds fewer
    /// (the same work, and the backlog in cards' worth).
    fn packed(&self) -> Series {
        Series {
            flavor: self.flavor.clone(),
            held: self.held.iter().map(|h| h / self.pack).collect(),
            work: self.work.clone(),
            busy_share: self.busy_share,
            tokens_per_gpu_hour: self.tokens_per_gpu_hour,
            backlog_gpus: self.backlog_gpus / self.pack,
            pack: self.pack,
        }
    }
}

/// What one pool (or one flavor's set of pools) did in the week.
#[derive(Default)]
struct Week {
    gpus: u64,
    held_gpu_hours: f64,
    busy_gpu_hours: f64,
    backlog_gpu_hours: f64,
    cost_cents_per_year: i64,
    inference_cost_cents_per_year: f64,
    tokens: f64,
}

impl Week {
    fn add(&mut self, other: Week) {
        self.gpus += other.gpus;
        self.held_gpu_hours += other.held_gpu_hours;
        self.busy_gpu_hours += other.busy_gpu_hours;
        self.backlog_gpu_hours += other.backlog_gpu_hours;
        self.cost_cents_per_year += other.cost_cents_per_year;
        self.inference_cost_cents_per_year += other.inference_cost_cents_per_year;
        self.tokens += other.tokens;
    }

    fn sizing(&self) -> PoolSizing {
        let capacity = self.gpus as f64 * HOURS_PER_WEEK as f64;
        let tokens_per_year = self.tokens * HOURS_PER_YEAR as f64 / HOURS_PER_WEEK as f64;
        PoolSizing {
            gpus: self.gpus,
            mean_allocated_pct: pct(self.held_gpu_hours, capacity),
            mean_busy_pct: pct(self.busy_gpu_hours, capacity),
            unallocated_gpu_hours_per_week: (capacity - self.held_gpu_hours).max(0.0),
            backlog_gpu_hours_per_week: self.backlog_gpu_hours,
            cost_cents_per_year: self.cost_cents_per_year,
            cost_cents_per_million_tokens: (tokens_per_year > 0.0)
                .then(|| self.inference_cost_cents_per_year / (tokens_per_year / 1e6)),
        }
    }
}

/// One pool of `gpus` at `price` running `classes`, whose backlogs fill its idle hours (in
/// proportion to their backlogs). Inference pays its share of the pool by GPU-hours held.
fn run_pool(gpus: u64, price: i64, classes: &[&Series]) -> Week {
    let cost = gpus as i64 * price * HOURS_PER_YEAR;
    let backlog: f64 = classes.iter().map(|s| s.backlog_gpus).sum();
    let mut week = Week {
        gpus,
        cost_cents_per_year: cost,
        ..Week::default()
    };
    let mut held_by = vec![0.0; classes.len()];
    for h in 0..HOURS_PER_WEEK {
        let at = |v: &Vec<f64>| v.get(h).copied().unwrap_or(0.0);
        let wanted: f64 = classes.iter().map(|s| at(&s.held)).sum();
        // A pool smaller than the hour's demand (the fleet as it is) runs that share of it.
        let share = if wanted > gpus as f64 + 1e-6 {
            gpus as f64 / wanted
        } else {
            1.0
        };
        let held = wanted * share;
        let fill = backlog.min((gpus as f64 - held).max(0.0));
        for (i, s) in classes.iter().enumerate() {
            let mine = if backlog > 0.0 {
                fill * s.backlog_gpus / backlog
            } else {
                0.0
            };
            held_by[i] += at(&s.held) * share + mine;
            // Work is in jobs (one GPU each unpacked); a card of backlog runs `pack` jobs.
            week.busy_gpu_hours += (at(&s.work) * share + mine * s.pack) * s.busy_share;
            week.backlog_gpu_hours += mine;
            if let Some(tokens) = s.tokens_per_gpu_hour {
                week.tokens += at(&s.work) * share * tokens;
            }
        }
        week.held_gpu_hours += held + fill;
    }
    for (s, held) in classes.iter().zip(held_by) {
        if s.tokens_per_gpu_hour.is_some() && week.held_gpu_hours > 0.0 {
            week.inference_cost_cents_per_year += cost as f64 * held / week.held_gpu_hours;
        }
    }
    week
}

pub fn size(scenario: &Scenario) -> Sizing {
    let all: Vec<Series> = scenario
        .teams
        .iter()
        .flat_map(|t| &t.workloads)
        .map(|w| Series::of(scenario, w))
        .collect();
    let (mut separate, mut shared, mut fleet) = (Week::default(), Week::default(), Week::default());
    let mut by_flavor = Vec::new();
    for acc in &scenario.fleet {
        let mine: Vec<&Series> = all.iter().filter(|s| s.flavor == acc.flavor).collect();
        let price = acc.price_cents_per_gpu_hour;
        let mut separate_gpus = 0;
        for s in &mine {
            let pool = run_pool(peak(&s.held), price, std::slice::from_ref(s));
            separate_gpus += pool.gpus;
            separate.add(pool);
        }
        let packed: Vec<Series> = mine.iter().map(|s| s.packed()).collect();
        let packed: Vec<&Series> = packed.iter().collect();
        let sum: Vec<f64> = (0..HOURS_PER_WEEK)
            .map(|h| {
                packed
                    .iter()
                    .map(|s| s.held.get(h).copied().unwrap_or(0.0))
                    .sum()
            })
            .collect();
        let pool = run_pool(peak(&sum), price, &packed);
        let (fleet_gpus, shared_gpus) = (u64::from(acc.count), pool.gpus);
        let nominal: u64 = scenario
            .teams
            .iter()
            .map(|t| u64::from(t.nominal_gpus.get(&acc.flavor).copied().unwrap_or(0)))
            .sum();
        shared.add(pool);
        let mut as_it_is = run_pool(fleet_gpus.min(nominal), price, &packed);
        as_it_is.gpus = fleet_gpus;
        as_it_is.cost_cents_per_year = fleet_gpus as i64 * price * HOURS_PER_YEAR;
        fleet.add(as_it_is);
        by_flavor.push(FlavorSizing {
            flavor: acc.flavor.clone(),
            fleet_gpus,
            separate_gpus,
            shared_gpus,
            separate_fit: Fit::of(fleet_gpus, separate_gpus),
            shared_fit: Fit::of(fleet_gpus, shared_gpus),
            outside_quota_gpus: fleet_gpus.saturating_sub(nominal),
            overbooked_gpus: nominal.saturating_sub(fleet_gpus),
        });
    }
    let (separate_pools, shared_pool) = (separate.sizing(), shared.sizing());
    let gain = utilisation_gain(
        separate_pools.mean_busy_pct,
        shared_pool.mean_busy_pct,
        separate_pools.gpus,
    );
    Sizing {
        separate_pools,
        shared_pool,
        fleet_pool: fleet.sizing(),
        gain,
        by_flavor,
    }
}

/// Where the shared pool's busy utilisation comes from: from separate pools, one mechanism at a
/// time, each bar in points. The sizing's bars add up to the shared pool as sized; the week's
/// bars (cold starts, warm caches, preemption rework) take it on to `to_pct`, exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waterfall {
    /// Separate pools' mean busy utilisation, in %.
    pub from_pct: f64,
    pub bars: Vec<Bar>,
    /// The shared pool's as sized (after the sizing's bars), in %.
    pub sized_pct: f64,
    /// After the week's bars too, in %.
    pub to_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bar {
    pub lever: Lever,
    /// What it adds (or, below zero, takes away), in points of busy utilisation.
    pub points: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lever {
    /// The demand profiles in one pool: it needs the peak of the sum, not the sum of the peaks.
    PoolingPeaks,
    /// Backlogs run in anyone's troughs (borrowing idle quota), not only their own class's.
    BacklogBorrowing,
    /// Work smaller than a GPU shares cards (MIG, HAMi, MPS), so the pool needs fewer.
    Fractions,
    /// The week's replicas loading their weights from object storage: cards held, not working.
    ColdStarts,
    /// Warm node-local caches: what they cut from those cold starts.
    WarmCaches,
    /// The week's evicted work: restarts and work lost since the last checkpoint, done again.
    Rework,
}

impl Lever {
    /// Measured in the simulated week, not in the sizing.
    pub fn in_week(self) -> bool {
        matches!(self, Lever::ColdStarts | Lever::WarmCaches | Lever::Rework)
    }
}

impl Labelled for Lever {
    fn label(self) -> &'static str {
        match self {
            Lever::PoolingPeaks => "Pooling peaks",
            Lever::BacklogBorrowing => "Backlog borrowing idle quota",
            Lever::Fractions => "Fractions packing small work",
            Lever::ColdStarts => "Minus cold starts from storage",
            Lever::WarmCaches => "Warm caches cutting cold-start idle",
            Lever::Rework => "Minus preemption rework",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Lever::PoolingPeaks => {
                "Teams rarely peak at the same hour: one shared pool is bought for the busiest hour of all the work together, not each team's pool for its own busiest hour, so fewer cards sit idle (work that can wait is left out of this bar)."
            }
            Lever::BacklogBorrowing => {
                "Work that can wait (training queued behind the urgent jobs) runs on any team's idle cards, not only its own team's; below zero when the shared pool has fewer quiet hours left to fill than the separate pools had."
            }
            Lever::Fractions => {
                "Jobs that need less than a whole GPU share a card (MIG slices, HAMi fractions, MPS) instead of each holding one, so the same work needs fewer cards."
            }
            Lever::ColdStarts => {
                "In the simulated week, each new inference replica holds its cards while it loads the model before it serves: were every load from object storage, the pool would hold those cards on top of its work."
            }
            Lever::WarmCaches => {
                "A node that ran the model before keeps its weights on local disk, so a replica starting there loads in the warm-cache time instead (the first start on each replica slot still loads from storage)."
            }
            Lever::Rework => {
                "In the simulated week, evicted jobs restart (image pull, checkpoint load) and redo the work since their last checkpoint: cards held for work already done once."
            }
        }
    }
}

/// The [`Waterfall`] of `scenario`: sizing run with one lever switched on at a time, so each bar
/// is the difference between two sizings and the bars telescope from the separate pools' busy
/// utilisation to the shared pool's; the week's bars follow ([`Waterfall::with_week`]).
pub fn waterfall(scenario: &Scenario, actual: &Sizing) -> Waterfall {
    let variant = |backlog: bool, fractions: bool| {
        let mut s = scenario.clone();
        for w in s.teams.iter_mut().flat_map(|t| &mut t.workloads) {
            if !backlog {
                w.backlog_gpus = 0.0;
            }
            if !fractions {
                w.mem_mib_per_job = None;
            }
        }
        size(&s)
    };
    let dry = variant(false, false);
    let whole_cards = variant(true, false);
    let (from, to) = (
        actual.separate_pools.mean_busy_pct,
        actual.shared_pool.mean_busy_pct,
    );
    // Separate pools hand out whole cards, so the fractions change nothing there.
    let pooling = dry.shared_pool.mean_busy_pct - dry.separate_pools.mean_busy_pct;
    let pooled_with_backlog = whole_cards.shared_pool.mean_busy_pct - from;
    Waterfall {
        from_pct: from,
        bars: vec![
            Bar {
                lever: Lever::PoolingPeaks,
                points: pooling,
            },
            Bar {
                lever: Lever::BacklogBorrowing,
                points: pooled_with_backlog - pooling,
            },
            Bar {
                lever: Lever::Fractions,
                points: to - whole_cards.shared_pool.mean_busy_pct,
            },
        ],
        sized_pct: to,
        to_pct: to,
    }
}

/// What the simulated week held on top of its work, and the fleet it ran on, in GPU-minutes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeldOnTop {
    /// Replicas loading their models (placed, not yet serving).
    pub loading: f64,
    /// What warm node caches cut from that loading.
    pub cut_by_cache: f64,
    /// Evicted work held again: restarts and work since the last checkpoint.
    pub rework: f64,
    pub fleet: f64,
}

impl Waterfall {
    /// Adds the week's bars: the cards its replicas held loading weights (from object storage,
    /// then what warm caches cut) and its evicted work held again are cards the shared pool
    /// holds on top of its work. As shares of the week's fleet time (`k`), the pool sized at
    /// `sized_pct` busy holds `1 + k` times its cards for the same work: `sized_pct ÷ (1 + k)`.
    pub fn with_week(mut self, week: HeldOnTop) -> Waterfall {
        if week.fleet <= 0.0 {
            return self;
        }
        let share = |gpu_minutes: f64| gpu_minutes / week.fleet;
        let (loading, cut, rework) = (
            share(week.loading),
            share(week.cut_by_cache),
            share(week.rework),
        );
        let mut level = self.sized_pct;
        for (lever, extra_held) in [
            (Lever::ColdStarts, loading + cut),
            (Lever::WarmCaches, loading),
            (Lever::Rework, loading + rework),
        ] {
            let next = self.sized_pct / (1.0 + extra_held);
            self.bars.push(Bar {
                lever,
                points: next - level,
            });
            level = next;
        }
        self.to_pct = level;
        self
    }
}

/// The GPUs that cover a series' peak (a hair over a whole number is float noise, not a card).
fn peak(hourly: &[f64]) -> u64 {
    (hourly.iter().copied().fold(0.0, f64::max) - 1e-9)
        .ceil()
        .max(0.0) as u64
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
    use crate::planning::scenario::{Demand, Inference, Preset, bench_scenario};

    /// One flavor of 100 H100s and one team running `workloads`.
    fn one_team(workloads: Vec<Workload>) -> Scenario {
        let mut s = bench_scenario();
        s.fleet.truncate(1);
        s.fleet[0].count = 100;
        s.fleet[0].price_cents_per_gpu_hour = 100;
        s.teams.truncate(1);
        s.teams[0].nominal_gpus = [("f0".to_owned(), 100)].into_iter().collect();
        s.teams[0].workloads = workloads;
        s
    }

    fn batch(name: &str, hourly_gpus: Vec<f64>, busy_pct: u32) -> Workload {
        let mut w = bench_scenario().teams[0].workloads[0].clone();
        w.name = name.to_owned();
        w.kind = WorkloadKind::Batch;
        w.demand = Demand::Hourly { hourly_gpus };
        w.gpus_per_job = 1;
        w.busy_pct = busy_pct;
        w
    }

    /// 10 GPUs for the first half of the week, none after.
    fn half_week() -> Vec<f64> {
        (0..HOURS_PER_WEEK)
            .map(|h| if h < 84 { 10.0 } else { 0.0 })
            .collect()
    }

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
        assert_eq!(peak(&[10.000_000_000_000_002]), 10);
        assert_eq!(peak(&[]), 0);
    }

    #[test]
    fn inference_is_sized_as_keda_allocates_it() {
        // 7 GPUs' worth of traffic all week at threshold 70%: ⌈7 ÷ 0.7⌉ = 10 replicas of one
        // GPU, serving 7 GPUs' worth at busy 50%: 3.5 busy GPUs of 10.
        let mut serve = bench_scenario().teams[0].workloads[2].clone();
        serve.demand = Demand::Preset {
            preset: Preset::Flat,
            peak_gpus: 7.0,
        };
        serve.busy_pct = 50;
        serve.inference = Some(Inference {
            min_replicas: 0,
            max_replicas: 100,
            threshold_pct: 70,
            ..serve.inference.clone().expect("inference")
        });
        let sizing = size(&one_team(vec![serve]));
        assert_eq!(sizing.separate_pools.gpus, 10);
        assert!((sizing.separate_pools.mean_allocated_pct - 100.0).abs() < 1e-9);
        assert!((sizing.separate_pools.mean_busy_pct - 35.0).abs() < 1e-9);
    }

    #[test]
    fn a_backlog_fills_the_troughs_of_a_shared_pool_only() {
        // Work on 10 GPUs for half the week (busy 100%), and a research queue with no cards of
        // its own and 4 GPUs of work always waiting (busy 100%).
        let mut research = batch("research", vec![0.0; HOURS_PER_WEEK], 100);
        research.backlog_gpus = 4.0;
        let s = one_team(vec![batch("work", half_week(), 100), research]);
        let sizing = size(&s);
        // Separate: 10 + 0 cards; 840 busy GPU-hours of 1,680: 50%.
        assert_eq!(sizing.separate_pools.gpus, 10);
        assert!((sizing.separate_pools.mean_busy_pct - 50.0).abs() < 1e-9);
        assert_eq!(sizing.separate_pools.backlog_gpu_hours_per_week, 0.0);
        // Shared: the same 10 cards, the research queue runs 4 GPUs in the 84 idle hours.
        assert_eq!(sizing.shared_pool.gpus, 10);
        assert!((sizing.shared_pool.backlog_gpu_hours_per_week - 336.0).abs() < 1e-9);
        assert!((sizing.shared_pool.mean_busy_pct - 70.0).abs() < 1e-9);
        // The gain is counted on the separate pools' 10 cards: 10 × (1 − 50/70) to retire.
        assert_eq!(sizing.gain.gpus, 10);
        assert!((sizing.gain.retirable_gpus - 10.0 * (1.0 - 50.0 / 70.0)).abs() < 1e-9);
    }

    #[test]
    fn work_smaller_than_a_gpu_packs_in_a_shared_pool() {
        // As many as memory holds, no more than time allows.
        assert_eq!(jobs_per_card(81_920, 20_480, 0.25), 4);
        assert_eq!(jobs_per_card(81_920, 20_480, 0.30), 3);
        assert_eq!(jobs_per_card(81_920, 20_480, 0.90), 1);
        assert_eq!(jobs_per_card(81_920, 50_000, 0.10), 1);
        // 12 jobs of 20 GiB at busy 25% on H100s: 12 whole cards apart, 3 shared.
        let mut small = batch("small", vec![12.0; HOURS_PER_WEEK], 25);
        small.mem_mib_per_job = Some(20_480);
        let card = crate::fleet::catalogue::find("H100-SXM5-80GB")
            .expect("catalogue")
            .mem_mib;
        let per_card = jobs_per_card(card, 20_480, 0.25);
        assert_eq!(per_card, 4, "an H100 holds four 20 GiB jobs");
        let sizing = size(&one_team(vec![small]));
        assert_eq!(sizing.separate_pools.gpus, 12);
        assert_eq!(sizing.shared_pool.gpus, 3);
        // Each flavor, separated: the packing gain shows without any pooling across classes.
        assert!(sizing.shared_pool.mean_busy_pct > sizing.separate_pools.mean_busy_pct);
    }

    #[test]
    fn the_fleet_is_held_against_each_option() {
        assert_eq!(Fit::of(184, 264), Fit::Short);
        assert_eq!(Fit::of(264, 264), Fit::Fits);
        assert_eq!(Fit::of(330, 264), Fit::Fits);
        assert_eq!(Fit::of(331, 264), Fit::Oversized);
        let mut s = one_team(vec![batch("work", half_week(), 100)]);
        s.fleet[0].count = 8;
        let f = &size(&s).by_flavor[0];
        assert_eq!((f.separate_fit, f.shared_fit), (Fit::Short, Fit::Short));
        // one_team's quota of 100 GPUs now sits on 8 cards: said too.
        assert_eq!(
            f.verdicts(),
            [
                "f0: 8 cards are short for either option: separate pools need 10, a shared pool 10 (2 more).",
                "f0: the teams' nominal quotas add up to 100 GPUs on 8 cards (92 more than the cards): Kueue admits on quota, not on nodes, so when the teams use their quota, admitted pods wait Pending for a node."
            ]
        );
    }

    /// The walk-through's fleet: 3,000 cards, 3,800 GPUs of nominal quota. Nothing is outside
    /// every quota, and 800 GPUs of quota have no card: said, since Kueue admits on quota.
    #[test]
    fn quota_beyond_the_cards_is_said() {
        let mut s = one_team(vec![batch("work", half_week(), 100)]);
        s.fleet[0].count = 3_000;
        s.teams[0].nominal_gpus.insert("f0".into(), 3_800);
        let f = &size(&s).by_flavor[0];
        assert_eq!((f.outside_quota_gpus, f.overbooked_gpus), (0, 800));
        assert!(
            f.verdicts().iter().any(|v| v.starts_with(
                "f0: the teams' nominal quotas add up to 3800 GPUs on 3000 cards (800 more than the cards)"
            )),
            "{:?}",
            f.verdicts()
        );
    }
    /// Two classes whose demand never overlaps (10 GPUs the first half of the week, 10 the
    /// second), fully busy: separate pools 20 cards at 50%, one pool 10 cards at 100%. A backlog
    /// of 5 GPUs on the first fills its own pool's idle half: that pool goes to (840 + 420) ÷
    /// 1,680 = 75%, separate pools to (1,260 + 840) ÷ 3,360 = 62.5%; the shared pool has no
    /// trough left, so the backlog is worth 100 − 62.5 − 50 = −12.5 points there.
    fn waterfall_of(s: &Scenario) -> Waterfall {
        waterfall(s, &size(s))
    }

    #[test]
    fn the_waterfall_telescopes_by_hand() {
        let half = |first: bool| -> Vec<f64> {
            (0..HOURS_PER_WEEK)
                .map(|h| {
                    if (h < HOURS_PER_WEEK / 2) == first {
                        10.0
                    } else {
                        0.0
                    }
                })
                .collect()
        };
        let mut a = batch("a", half(true), 100);
        let b = batch("b", half(false), 100);
        let w = waterfall_of(&one_team(vec![a.clone(), b.clone()]));
        assert_eq!((w.from_pct, w.to_pct), (50.0, 100.0));
        let points: Vec<f64> = w.bars.iter().map(|b| b.points).collect();
        assert_eq!(points, vec![50.0, 0.0, 0.0]);
        a.backlog_gpus = 5.0;
        let w = waterfall_of(&one_team(vec![a, b]));
        assert_eq!((w.from_pct, w.to_pct), (62.5, 100.0));
        let points: Vec<f64> = w.bars.iter().map(|b| b.points).collect();
        assert_eq!(points, vec![50.0, -12.5, 0.0]);
    }

    /// Eight jobs of 10 GiB on 80 GB cards, busy 25% each: four to a card by time (1 ÷ 0.25),
    /// seven by memory (81,559 MiB ÷ 10,240), so four. Separate pools: 8 cards at 25%; shared: 2 cards at 100%.
    #[test]
    fn fractions_are_their_own_bar() {
        let mut small = batch("small", vec![8.0; HOURS_PER_WEEK], 25);
        small.mem_mib_per_job = Some(10_240);
        let w = waterfall_of(&one_team(vec![small]));
        assert_eq!((w.from_pct, w.to_pct), (25.0, 100.0));
        let points: Vec<f64> = w.bars.iter().map(|b| b.points).collect();
        assert_eq!(points, vec![0.0, 0.0, 75.0]);
    }

    /// A pool sized at 50% busy, on a fleet of 100 cards for the week's 10,080 minutes
    /// (1,008,000 GPU-minutes): replicas loaded for 1% of that (10,080 GPU-minutes), warm caches
    /// cut as much again, rework held 1% (168 GPU-hours). With every load from storage the pool
    /// holds 1.02 times its cards: 50 ÷ 1.02 = 49.0196%; with the caches 50 ÷ 1.01 = 49.5050%;
    /// with rework 50 ÷ 1.02 again.
    #[test]
    fn the_weeks_bars_are_cards_held_on_top_of_the_work() {
        let week = HeldOnTop {
            loading: 10_080.0,
            cut_by_cache: 10_080.0,
            rework: 168.0 * 60.0,
            fleet: 100.0 * 10_080.0,
        };
        let sized = Waterfall {
            from_pct: 30.0,
            bars: vec![],
            sized_pct: 50.0,
            to_pct: 50.0,
        };
        let w = sized.with_week(week);
        let levers: Vec<Lever> = w.bars.iter().map(|b| b.lever).collect();
        assert_eq!(
            levers,
            [Lever::ColdStarts, Lever::WarmCaches, Lever::Rework]
        );
        let points: Vec<f64> = w.bars.iter().map(|b| b.points).collect();
        let (storage, cached) = (50.0 / 1.02, 50.0 / 1.01);
        assert_eq!(points, [storage - 50.0, cached - storage, storage - cached]);
        assert!((storage - 49.0196).abs() < 1e-4 && (cached - 49.5050).abs() < 1e-4);
        assert_eq!((w.sized_pct, w.to_pct), (50.0, storage));
    }
}
