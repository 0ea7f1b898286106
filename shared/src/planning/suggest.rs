//! Quota suggestion: nominal quotas, borrowing and lending limits per team and flavor,
//! proposed from the week's demand so that each team's queue-wait target holds and the cohort
//! still has quota to lend, then checked on the simulated week and adjusted.
//!
//! The first proposal follows the rules a platform team applies by hand:
//! - **All of each flavor is somebody's nominal quota**: Kueue admits nothing on capacity no
//!   ClusterQueue names, so unassigned cards are lost.
//! - **Online inference owns its peak**: a team's nominal covers the replicas KEDA holds at its
//!   peak traffic, so a scale-up reclaims what was lent instead of queueing behind training
//!   (inference tolerates neither waiting nor preemption).
//! - **The rest follows batch use**: what is left is shared in proportion to each team's mean
//!   batch demand over the week (largest remainder, so the quotas add up to the flavor exactly);
//!   backlogs get no nominal quota: they borrow what is idle.
//! - **Borrowing up to the team's own peak** (its peak demand plus backlog, at least one of its
//!   largest jobs), so one backlog cannot drain the cohort's lendable quota.
//! - **Lending**: with `reclaimWithinCohort` a lender takes lent quota back by preemption, so
//!   all unused quota is lent (no limit); without it an inference team keeps its peak unlent.
//!
//! Then the week is simulated under the proposal. A team that misses its target (p95 queue wait
//! of its batch jobs over `queue_wait_target_min`, or more than 5% of its jobs never started)
//! gets quota on its flavors from teams that meet theirs, most over-provisioned first, never
//! below their inference peak; the week is simulated again, up to [`MAX_WEEKS`] weeks in all.
//! The best week seen wins: fewest teams missing, then the smallest excess over the targets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    common::day::Day,
    common::interrupt::{Interrupt, Interrupted, Never},
    kueue::Reclaim,
    planning::isolation::IsolationPlan,
    planning::scenario::{Scenario, WorkloadKind},
    planning::simulate::{self, Simulation, TeamStats},
    quota::{NewRequest, QuotaLine, QuotaSpec},
};

/// Weeks simulated at most for one suggestion (the first proposal included).
pub const MAX_WEEKS: u32 = 6;

/// Share of a team's jobs that may still wait at the week's end for its target to count as met.
const UNSTARTED_ALLOWED_PCT: f64 = 5.0;

/// One team's quota on one flavor, in GPUs; `None` limits mean Kueue's default (no limit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub nominal_gpus: u32,
    pub borrowing_limit_gpus: Option<u32>,
    pub lending_limit_gpus: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlavorLine {
    pub flavor: String,
    pub today: Limits,
    pub suggested: Limits,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamSuggestion {
    pub team: String,
    pub queue_wait_target_min: u32,
    /// The flavors the team has quota or work on.
    pub lines: Vec<FlavorLine>,
    /// The team's week under today's quotas and under the suggestion.
    pub today: TeamStats,
    pub suggested: TeamStats,
    pub met_today: bool,
    pub met_suggested: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlavorTotals {
    pub flavor: String,
    pub capacity_gpus: u32,
    pub nominal_today_gpus: u32,
    pub nominal_suggested_gpus: u32,
    /// Nominal quota the suggestion lets the cohort lend (Σ nominal − unlent).
    pub lendable_suggested_gpus: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaSuggestion {
    pub teams: Vec<TeamSuggestion>,
    pub flavors: Vec<FlavorTotals>,
    /// The whole fleet's week under today's quotas and under the suggestion.
    pub today: TeamStats,
    pub suggested: TeamStats,
    pub weeks_simulated: u32,
    /// What the suggestion changed beyond the quotas, and what it could not do.
    pub notes: Vec<String>,
}

impl QuotaSuggestion {
    /// Writes the suggested quotas into `scenario` (the teams by name), in a cohort.
    pub fn apply(&self, scenario: &mut Scenario) {
        scenario.quota.cohort = true;
        for team in &mut scenario.teams {
            let Some(s) = self.teams.iter().find(|s| s.team == team.name) else {
                continue;
            };
            team.nominal_gpus.clear();
            team.borrowing_limit_gpus.clear();
            team.lending_limit_gpus.clear();
            for line in &s.lines {
                let q = &line.suggested;
                team.nominal_gpus
                    .insert(line.flavor.clone(), q.nominal_gpus);
                if let Some(b) = q.borrowing_limit_gpus {
                    team.borrowing_limit_gpus.insert(line.flavor.clone(), b);
                }
                if let Some(l) = q.lending_limit_gpus {
                    team.lending_limit_gpus.insert(line.flavor.clone(), l);
                }
            }
        }
    }

    /// The suggestion as one draft quota request per team (`POST
    /// /api/quota/teams/{team}/requests`), open-ended from `starts_on`: whole GPUs of each
    /// flavor's vendor resource or, where the cluster splits the flavor of that name into MIG
    /// instances (`mig_layouts`: flavor → instances per GPU by profile, the flavors' settings),
    /// the instances those GPUs hold, profile by profile (7 `nvidia.com/mig-1g.10gb` per H100
    /// under `1g.10gb: 7`); and the scenario's Kueue policy.
    pub fn draft_requests(
        &self,
        scenario: &Scenario,
        starts_on: Day,
        mig_layouts: &BTreeMap<String, BTreeMap<String, u32>>,
    ) -> Vec<(String, NewRequest)> {
        let policy = &scenario.quota;
        self.teams
            .iter()
            .filter_map(|t| {
                let team = scenario.teams.iter().find(|x| x.name == t.team)?;
                let lines = t
                    .lines
                    .iter()
                    .flat_map(|l| {
                        let q = &l.suggested;
                        let line = |resource: String, per_gpu: i64| QuotaLine {
                            flavor: l.flavor.clone(),
                            resource,
                            nominal: i64::from(q.nominal_gpus) * per_gpu,
                            borrowing_limit: q.borrowing_limit_gpus.map(|g| i64::from(g) * per_gpu),
                            lending_limit: q.lending_limit_gpus.map(|g| i64::from(g) * per_gpu),
                        };
                        let layout = mig_layouts
                            .get(&l.flavor)
                            .filter(|layout| !layout.is_empty());
                        match (layout, scenario.accelerator(&l.flavor)) {
                            (Some(layout), _) => layout
                                .iter()
                                .map(|(profile, n)| {
                                    line(format!("nvidia.com/mig-{profile}"), i64::from(*n))
                                })
                                .collect(),
                            (None, Some(acc)) => {
                                vec![line(acc.resource().to_owned(), 1)]
                            }
                            (None, None) => vec![],
                        }
                    })
                    .collect();
                let checkpoint_interval_min = team
                    .workloads
                    .iter()
                    .filter(|w| w.preemptible && w.checkpoint_minutes > 0)
                    .map(|w| w.checkpoint_minutes)
                    .min();
                let spec = QuotaSpec {
                    lines,
                    reclaim_within_cohort: policy.reclaim_within_cohort,
                    within_cluster_queue: policy.within_cluster_queue,
                    queueing: policy.queueing,
                    checkpoint_interval_min,
                    justification: format!(
                        "Suggested by the planner for scenario “{}”: in its simulated week the \
                         p95 queue wait of the team's batch jobs is {} against a target of {} \
                         min (under today's quotas: {}).",
                        scenario.name,
                        wait_words(&t.suggested),
                        t.queue_wait_target_min,
                        wait_words(&t.today),
                    ),
                    project: None,
                    // The team's largest job, as its classes ask for GPUs.
                    largest_job_gpus: team.workloads.iter().map(|w| w.gpus_per_job).max(),
                    starts_on,
                    ends_on: None,
                };
                Some((t.team.clone(), NewRequest { spec }))
            })
            .collect()
    }

    pub fn targets_met_today(&self) -> usize {
        self.teams.iter().filter(|t| t.met_today).count()
    }

    pub fn targets_met_suggested(&self) -> usize {
        self.teams.iter().filter(|t| t.met_suggested).count()
    }
}

fn wait_words(stats: &TeamStats) -> String {
    stats
        .queue_wait_p95_min
        .map_or("none (no batch jobs)".to_owned(), |w| format!("{w:.0} min"))
}

/// What one team's work asks of one flavor over the week, in GPUs.
#[derive(Debug, Clone, Default)]
struct Need {
    /// Peak replicas × GPUs of its online inference.
    floor: u32,
    /// Mean of its other work's hourly demand.
    mean_batch: f64,
    backlog: f64,
    /// Peak of all its hourly demand, plus the backlog.
    peak: f64,
    /// GPUs of its largest batch job (0 without batch work).
    largest_job: u32,
}

/// `needs[team][flavor]`, flavors in fleet order.
fn needs(scenario: &Scenario, isolation: &IsolationPlan) -> Vec<Vec<Need>> {
    let hours = crate::planning::scenario::HOURS_PER_WEEK;
    // The plan lists the classes in the scenario's order: each team's first is at its offset.
    let mut first_class = 0;
    scenario
        .teams
        .iter()
        .map(|team| {
            let offset = first_class;
            first_class += team.workloads.len();
            scenario
                .fleet
                .iter()
                .map(|acc| {
                    let mut floor = vec![0.0; hours];
                    let mut other = vec![0.0; hours];
                    let mut need = Need::default();
                    let classes = team.workloads.iter().enumerate();
                    for (i, w) in classes.filter(|(_, w)| w.flavor == acc.flavor) {
                        // Cards' worth: a class whose jobs share cards needs a share of one each.
                        let per_card = isolation
                            .classes
                            .get(offset + i)
                            .map_or(1.0, |c| f64::from(c.jobs_per_card.max(1)));
                        let demand = w.demand.hourly();
                        match (&w.kind, &w.inference) {
                            (WorkloadKind::Inference, Some(inf)) => {
                                for (h, traffic) in demand.iter().enumerate() {
                                    let replicas = inf.replicas_held(*traffic, w.gpus_per_job);
                                    floor[h] += f64::from(replicas * w.gpus_per_job) / per_card;
                                }
                            }
                            _ => {
                                for (h, gpus) in demand.iter().enumerate() {
                                    other[h] += gpus / per_card;
                                }
                                need.backlog += w.backlog_gpus / per_card;
                                need.largest_job = need.largest_job.max(w.gpus_per_job);
                            }
                        }
                    }
                    need.floor = floor.iter().copied().fold(0.0, f64::max).ceil() as u32;
                    need.mean_batch = other.iter().sum::<f64>() / hours as f64;
                    need.peak = floor
                        .iter()
                        .zip(&other)
                        .map(|(a, b)| a + b)
                        .fold(0.0, f64::max)
                        + need.backlog;
                    need
                })
                .collect()
        })
        .collect()
}

/// `total` split in proportion to `weights` (largest remainder; ties to the first), so the
/// parts add up to `total` exactly. All zero weights: all zero parts.
/// `indices` by `keys[i]`, largest first, ties by index: the one ordering this module needs
/// (one sort, so one copy of its code in the wasm).
fn largest_first(mut indices: Vec<usize>, keys: &[f64]) -> Vec<usize> {
    indices.sort_unstable_by(|&a, &b| keys[b].total_cmp(&keys[a]).then(a.cmp(&b)));
    indices
}

fn apportion(total: u32, weights: &[f64]) -> Vec<u32> {
    let sum: f64 = weights.iter().sum();
    if sum <= 0.0 {
        return vec![0; weights.len()];
    }
    let exact: Vec<f64> = weights.iter().map(|w| f64::from(total) * w / sum).collect();
    let mut parts: Vec<u32> = exact.iter().map(|e| e.floor() as u32).collect();
    let remainders: Vec<f64> = exact.iter().map(|e| e - e.floor()).collect();
    let order = largest_first((0..weights.len()).collect(), &remainders);
    let left = total.saturating_sub(parts.iter().sum());
    for &i in order.iter().take(left as usize) {
        parts[i] += 1;
    }
    parts
}

/// The rule-based first proposal: `nominal[team][flavor]`.
fn first_nominals(
    scenario: &Scenario,
    needs: &[Vec<Need>],
    notes: &mut Vec<String>,
) -> Vec<Vec<u32>> {
    let mut nominal = vec![vec![0; scenario.fleet.len()]; scenario.teams.len()];
    for (f, acc) in scenario.fleet.iter().enumerate() {
        let of =
            |pick: fn(&Need) -> f64| -> Vec<f64> { needs.iter().map(|n| pick(&n[f])).collect() };
        let floors = of(|n| f64::from(n.floor));
        let floor_sum: f64 = floors.iter().sum();
        let parts = if floor_sum >= f64::from(acc.count) {
            if floor_sum > f64::from(acc.count) {
                notes.push(format!(
                    "{}: inference peaks need {} GPUs but the flavor has {}; each team's inference \
                     gets a share of the flavor in proportion to its peak",
                    acc.flavor, floor_sum, acc.count
                ));
            }
            apportion(acc.count, &floors)
        } else {
            let rest = acc.count - floor_sum as u32;
            let extra = [of(|n| n.mean_batch), of(|n| n.backlog), floors.clone()]
                .into_iter()
                .find(|w| w.iter().sum::<f64>() > 0.0)
                .map(|w| apportion(rest, &w));
            match extra {
                Some(extra) => floors
                    .iter()
                    .zip(extra)
                    .map(|(fl, e)| *fl as u32 + e)
                    .collect(),
                None => {
                    notes.push(format!(
                        "{}: no team's work runs on this flavor; its {} GPUs get no quota",
                        acc.flavor, acc.count
                    ));
                    vec![0; scenario.teams.len()]
                }
            }
        };
        for (t, part) in parts.into_iter().enumerate() {
            nominal[t][f] = part;
        }
    }
    nominal
}

/// The limits that go with `nominal` (see the module's rules).
fn limits(scenario: &Scenario, needs: &[Vec<Need>], nominal: &[Vec<u32>]) -> Vec<Vec<Limits>> {
    let reclaim = scenario.quota.reclaim_within_cohort != Reclaim::Never;
    nominal
        .iter()
        .zip(needs)
        .map(|(row, team_needs)| {
            row.iter()
                .zip(team_needs)
                .zip(&scenario.fleet)
                .map(|((&n, need), acc)| {
                    let peak = need.peak.ceil() as u32;
                    let borrow = peak
                        .saturating_sub(n)
                        .max(need.largest_job)
                        .min(acc.count.saturating_sub(n));
                    let unlent = if reclaim { 0 } else { need.floor.min(n) };
                    Limits {
                        nominal_gpus: n,
                        borrowing_limit_gpus: Some(borrow),
                        lending_limit_gpus: (unlent > 0).then(|| n - unlent),
                    }
                })
                .collect()
        })
        .collect()
}

/// `scenario` with `limits` as its teams' quotas, in a cohort.
fn with_limits(scenario: &Scenario, limits: &[Vec<Limits>]) -> Scenario {
    let mut s = scenario.clone();
    s.quota.cohort = true;
    for (team, row) in s.teams.iter_mut().zip(limits) {
        team.nominal_gpus = BTreeMap::new();
        team.borrowing_limit_gpus = BTreeMap::new();
        team.lending_limit_gpus = BTreeMap::new();
        for (acc, l) in scenario.fleet.iter().zip(row) {
            if l.nominal_gpus == 0 && l.borrowing_limit_gpus.unwrap_or(0) == 0 {
                continue;
            }
            let flavor = acc.flavor.clone();
            team.nominal_gpus.insert(flavor.clone(), l.nominal_gpus);
            if let Some(b) = l.borrowing_limit_gpus {
                team.borrowing_limit_gpus.insert(flavor.clone(), b);
            }
            if let Some(lend) = l.lending_limit_gpus {
                team.lending_limit_gpus.insert(flavor, lend);
            }
        }
    }
    s
}

/// How far a team's week is from its target: `None` when met, else the excess (p95 wait over
/// the target, as a ratio, plus the share of jobs never started).
fn miss(stats: &TeamStats, target_min: u32) -> Option<f64> {
    let unstarted_pct = if stats.jobs_submitted > 0 {
        (stats.jobs_submitted - stats.jobs_admitted.min(stats.jobs_submitted)) as f64 * 100.0
            / stats.jobs_submitted as f64
    } else {
        0.0
    };
    let wait = stats.queue_wait_p95_min.unwrap_or(0.0);
    let over_wait = (wait / f64::from(target_min) - 1.0).max(0.0);
    let over_unstarted = (unstarted_pct - UNSTARTED_ALLOWED_PCT).max(0.0) / 100.0;
    (over_wait > 0.0 || over_unstarted > 0.0).then_some(over_wait + over_unstarted)
}

/// Fewest teams missing, then the smallest total excess.
fn score(scenario: &Scenario, week: &Simulation) -> (usize, f64) {
    let misses: Vec<f64> = scenario
        .teams
        .iter()
        .zip(&week.teams)
        .filter_map(|(t, s)| miss(s, t.queue_wait_target_min))
        .collect();
    (misses.len(), misses.iter().sum())
}

/// Moves quota towards the teams that miss their target; `false` when nothing can move.
fn adjust(
    scenario: &Scenario,
    needs: &[Vec<Need>],
    nominal: &mut [Vec<u32>],
    week: &Simulation,
) -> bool {
    let misses: Vec<Option<f64>> = scenario
        .teams
        .iter()
        .zip(&week.teams)
        .map(|(t, s)| miss(s, t.queue_wait_target_min))
        .collect();
    let missed: Vec<f64> = misses.iter().map(|m| m.unwrap_or(0.0)).collect();
    let order = largest_first(
        (0..misses.len()).filter(|&t| misses[t].is_some()).collect(),
        &missed,
    );
    let mut moved = false;
    for t in order {
        for f in 0..scenario.fleet.len() {
            let need = &needs[t][f];
            if need.largest_job == 0 {
                continue;
            }
            let step = need.largest_job.max(nominal[t][f].div_ceil(10)).max(1);
            // Donors: teams that meet their target, most quota above their own use first.
            let spare = |d: usize| {
                f64::from(nominal[d][f]) - f64::from(needs[d][f].floor) - needs[d][f].mean_batch
            };
            let spares: Vec<f64> = (0..misses.len()).map(spare).collect();
            let donors = largest_first(
                (0..misses.len())
                    .filter(|&d| misses[d].is_none() && nominal[d][f] > needs[d][f].floor)
                    .collect(),
                &spares,
            );
            let mut wanted = step;
            for d in donors {
                let give = wanted.min(nominal[d][f] - needs[d][f].floor);
                nominal[d][f] -= give;
                nominal[t][f] += give;
                wanted -= give;
                moved |= give > 0;
                if wanted == 0 {
                    break;
                }
            }
        }
    }
    moved
}

/// Quotas tried (`[team][flavor]`), their week and its [`score`].
type Candidate = (Vec<Vec<Limits>>, Simulation, (usize, f64));

/// [`suggest_until`] to the end.
pub fn suggest(
    scenario: &Scenario,
    isolation: &IsolationPlan,
    today: &Simulation,
) -> QuotaSuggestion {
    match suggest_until(scenario, isolation, today, &Never) {
        Ok(suggestion) => suggestion,
        Err(Interrupted) => unreachable!("Never does not fire"),
    }
}

/// Suggests quotas for `scenario` (valid), whose week under today's quotas is `today`.
pub fn suggest_until(
    scenario: &Scenario,
    isolation: &IsolationPlan,
    today: &Simulation,
    stop: &dyn Interrupt,
) -> Result<QuotaSuggestion, Interrupted> {
    let mut notes = Vec::new();
    if !scenario.quota.cohort {
        notes.push(
            "Today's queues share no cohort; the suggestion puts them in one so unused quota is \
             lent."
                .to_owned(),
        );
    }
    if scenario.quota.reclaim_within_cohort == Reclaim::Never {
        notes.push(
            "reclaimWithinCohort is Never, so lent quota cannot be taken back: inference teams \
             lend none of the quota their peak needs. LowerPriority or Any lets them lend it \
             while traffic is low."
                .to_owned(),
        );
    }
    let needs = needs(scenario, isolation);
    let mut nominal = first_nominals(scenario, &needs, &mut notes);
    let mut best: Option<Candidate> = None;
    let mut weeks = 0;
    loop {
        let candidate = limits(scenario, &needs, &nominal);
        let week = simulate::simulate_until(&with_limits(scenario, &candidate), isolation, stop)?;
        weeks += 1;
        let score = score(scenario, &week);
        let done = score.0 == 0 || weeks == MAX_WEEKS;
        let stuck = !done && !adjust(scenario, &needs, &mut nominal, &week);
        if best
            .as_ref()
            .is_none_or(|(_, _, b)| score.0 < b.0 || (score.0 == b.0 && score.1 < b.1))
        {
            best = Some((candidate, week, score));
        }
        if stuck {
            notes.push(
                "Some targets cannot be met by moving quota between teams: every team that \
                 meets its target is down to its inference peak. The fleet is short for them."
                    .to_owned(),
            );
        }
        if done || stuck {
            break;
        }
    }
    let Some((limits, week, _)) = best else {
        unreachable!("at least one week is simulated")
    };
    Ok(summarise(scenario, today, limits, week, weeks, notes))
}

fn summarise(
    scenario: &Scenario,
    today: &Simulation,
    limits: Vec<Vec<Limits>>,
    week: Simulation,
    weeks: u32,
    mut notes: Vec<String>,
) -> QuotaSuggestion {
    let suggestion = QuotaSuggestion {
        teams: team_suggestions(scenario, today, &limits, &week),
        flavors: flavor_totals(scenario, &limits),
        today: today.total.clone(),
        suggested: week.total,
        weeks_simulated: weeks,
        notes: Vec::new(),
    };
    if suggestion.targets_met_today() > suggestion.targets_met_suggested() {
        notes.push(format!(
            "Today's quotas meet more targets ({} of {}) than the best suggestion found ({}); \
             keep them, or raise the targets that are missed.",
            suggestion.targets_met_today(),
            suggestion.teams.len(),
            suggestion.targets_met_suggested()
        ));
    }
    QuotaSuggestion {
        notes,
        ..suggestion
    }
}

/// Each team's lines (today's limits beside the suggested, on every flavor where either holds
/// quota) and its week under each.
fn team_suggestions(
    scenario: &Scenario,
    today: &Simulation,
    limits: &[Vec<Limits>],
    week: &Simulation,
) -> Vec<TeamSuggestion> {
    let today_limits = |team: &crate::planning::scenario::Team, flavor: &str| Limits {
        nominal_gpus: team.nominal_gpus.get(flavor).copied().unwrap_or(0),
        borrowing_limit_gpus: if scenario.quota.cohort {
            team.borrowing_limit_gpus.get(flavor).copied()
        } else {
            Some(0)
        },
        lending_limit_gpus: team.lending_limit_gpus.get(flavor).copied(),
    };
    scenario
        .teams
        .iter()
        .zip(limits)
        .zip(today.teams.iter().zip(week.teams.iter()))
        .map(|((team, row), (before, after))| TeamSuggestion {
            team: team.name.clone(),
            queue_wait_target_min: team.queue_wait_target_min,
            lines: scenario
                .fleet
                .iter()
                .zip(row)
                .filter(|(acc, l)| {
                    l.nominal_gpus > 0
                        || l.borrowing_limit_gpus.unwrap_or(0) > 0
                        || team.nominal_gpus.get(&acc.flavor).is_some_and(|&n| n > 0)
                })
                .map(|(acc, l)| FlavorLine {
                    flavor: acc.flavor.clone(),
                    today: today_limits(team, &acc.flavor),
                    suggested: l.clone(),
                })
                .collect(),
            met_today: miss(before, team.queue_wait_target_min).is_none(),
            met_suggested: miss(after, team.queue_wait_target_min).is_none(),
            today: before.clone(),
            suggested: after.clone(),
        })
        .collect()
}

/// Per flavor: its cards, and the nominal quota today and suggested, and what is lendable.
fn flavor_totals(scenario: &Scenario, limits: &[Vec<Limits>]) -> Vec<FlavorTotals> {
    scenario
        .fleet
        .iter()
        .enumerate()
        .map(|(f, acc)| {
            let column = || limits.iter().map(move |row| &row[f]);
            FlavorTotals {
                flavor: acc.flavor.clone(),
                capacity_gpus: acc.count,
                nominal_today_gpus: scenario
                    .teams
                    .iter()
                    .filter_map(|t| t.nominal_gpus.get(&acc.flavor))
                    .sum(),
                nominal_suggested_gpus: column().map(|l| l.nominal_gpus).sum(),
                lendable_suggested_gpus: column()
                    .map(|l| l.lending_limit_gpus.unwrap_or(l.nominal_gpus))
                    .sum(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
