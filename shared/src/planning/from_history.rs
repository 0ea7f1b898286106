//! A scenario from what the fleet really did: the inventory's flavors, the teams and the
//! quotas in force on the window's last day with their queues' policies (queueing strategy,
//! `reclaimWithinCohort`, `withinClusterQueue`: the scenario states one set for every queue,
//! the first team's in force, and names a team whose differ), and batch classes derived from
//! the recorded Workloads (`cluster::workload`): one class per team, flavor and priority.
//!
//! A class's figures, each with its source:
//! - GPUs per job: the most common whole-GPU count of its Workloads (ties: the larger);
//! - job length: the mean run (first admission → finish) of those that finished; where none
//!   did, the mean of what the running ones ran by the window's end, *at least*;
//! - demand: each Workload's GPUs over its run placed from its creation (when it was wanted),
//!   summed per hour of the week (hour 0 is Monday 00:00 UTC, as the presets count) and divided
//!   by how many times the window holds that hour, so a window of any whole days averages
//!   right; work beyond the window's end is left out;
//! - priority: the class's; checkpoints: the team's quota request says its interval;
//! - busy share: DCGM's busy over observed GPU time of the team's namespace on the flavor.
//!
//! A team whose namespace served tokens (vLLM's counters) gets one inference class:
//! - flavor: the one where DCGM observed most of the namespace's GPU time that its recorded
//!   Workloads do not account for (its serving GPUs); serving seen on other flavors is named in
//!   `problems`, since vLLM's counters do not say where a model runs;
//! - tokens per second per GPU, *at least*: the generated tokens over the serving GPU-seconds,
//!   over the class's KEDA threshold (KEDA keeps each replica's load at most at the threshold,
//!   so a held GPU serves at most threshold × capacity);
//! - demand: each hour of the week's generated tokens per second, averaged like the batch
//!   demand, in GPUs of that capacity; max replicas: what KEDA wants at the busiest hour.
//!
//! Invariants: nothing is guessed. A Workload that holds no whole GPUs of a flavor is not
//! batch work of the planner's kind; one never admitted has no flavor (Kueue picks it at
//! admission) and one outside every team's namespace has no team: each kind is counted in
//! `problems`, never placed. Where DCGM observed none of a team's time on a flavor, its
//! classes keep the format's busy default, and say so. A replica's GPUs are not in vLLM's
//! counters: the inference class keeps the format's one GPU a replica, and says so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    chargeback::{TokensHour, UsageDay},
    cluster::workload::HistoryEntry,
    common::day::Day,
    common::label::Labelled,
    planning::scenario::{
        Accelerator, Demand, HOURS_PER_WEEK, Preset, QuotaPolicy, Scenario, Team, Workload,
        WorkloadKind,
    },
    quota::{QuotaSpec, QuotaWorld},
};

const MS_PER_MINUTE: i64 = 60_000;
const MS_PER_HOUR: i64 = 3_600_000;

/// What the derivation reads.
pub struct Measured<'a> {
    pub world: &'a QuotaWorld,
    /// Each flavor's rate, in cents per GPU-hour.
    pub prices: &'a BTreeMap<String, i64>,
    /// The window's measured use by day, namespace and flavor (DCGM's busy and observed time).
    pub usage: &'a [UsageDay],
    /// The window's generated tokens by hour, namespace and served model.
    pub tokens: &'a [TokensHour],
    pub from: Day,
    /// The day after the last.
    pub end: Day,
}

/// A scenario and where each of its derived figures came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FromHistory {
    pub scenario: Scenario,
    pub sources: Vec<Source>,
    /// What was left out or could not be read, in words.
    pub problems: Vec<String>,
}

/// One derived figure's provenance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// The scenario path it sets, e.g. `teams[0].workloads[1].job_minutes`.
    pub path: String,
    pub from: String,
}

/// One recorded Workload as the planner reads it.
struct Run {
    team: usize,
    /// Its accelerator's place in the scenario's fleet.
    flavor: usize,
    priority: i32,
    gpus: u32,
    created_ms: i64,
    /// Minutes from first admission to finish, or to the window's end while still running.
    minutes: i64,
    finished: bool,
}

/// The scenario of `workloads` (one window's, any order).
pub fn scenario<'a>(
    m: &Measured,
    workloads: impl IntoIterator<Item = &'a HistoryEntry>,
) -> FromHistory {
    let mut derivation = Derivation::new(m);
    for entry in workloads {
        derivation.add(entry);
    }
    derivation.finish()
}

/// The fleet today (the Plan page's "Our fleet today"): the inventory and the teams with the
/// quotas in force on `m`'s last day, no recorded work read. What a team runs is not known
/// here, so each gets one starter class per flavor it holds quota on, peaking at that quota in
/// office hours (what it asked for when the quota was approved), and says so; a team with no
/// quota in force asks for nothing.
pub fn today(m: &Measured) -> FromHistory {
    let Derivation {
        mut base,
        mut sources,
        problems,
        ..
    } = Derivation::new(m);
    base.name = format!("our fleet on {}", m.end.plus(-1));
    for (t, team) in base.teams.iter_mut().enumerate() {
        for (flavor, &gpus) in &team.nominal_gpus {
            let mut work = Workload::new(&format!("work-{flavor}"), WorkloadKind::Batch, flavor);
            work.demand = Demand::Preset {
                preset: Preset::BusinessHoursDiurnal,
                peak_gpus: f64::from(gpus),
            };
            sources.push(Source {
                path: format!("teams[{t}].workloads[{}].demand", team.workloads.len()),
                from: format!("a starter: the team's quota in force on {flavor} ({gpus} GPUs) as its peak in office hours; replace it with what the team runs, or start from what the fleet did"),
            });
            team.workloads.push(work);
        }
        asks_nothing_without_work(
            t,
            team,
            &base.fleet,
            &mut sources,
            "no quota in force: a class that asks for nothing",
        );
    }
    FromHistory {
        scenario: base,
        sources,
        problems,
    }
}

/// A derivation under way: Workloads are added one at a time (a window of a large fleet is
/// read from the database in pages), each kept as a run of a few dozen bytes.
pub struct Derivation<'a> {
    m: &'a Measured<'a>,
    base: Scenario,
    sources: Vec<Source>,
    problems: Vec<String>,
    runs: Vec<Run>,
    /// Each class's name (team, flavor, priority): its first Workload's priority class.
    class_names: BTreeMap<(usize, usize, i32), String>,
    /// Workloads left out: in no team's namespace, never admitted, on no whole GPUs.
    left_out: [usize; 3],
    /// Workloads of the demo's history read.
    demo: usize,
}

impl<'a> Derivation<'a> {
    pub fn new(m: &'a Measured<'a>) -> Self {
        let mut sources = Vec::new();
        let mut problems = Vec::new();
        let fleet = fleet(m, &mut sources, &mut problems);
        let mut base =
            Scenario::starting_from(&format!("measured {} to {}", m.from, m.end.plus(-1)), fleet);
        base.teams = teams(m, &base, &mut sources, &mut problems);
        policies(m, &mut base.quota, &mut sources, &mut problems);
        Derivation {
            m,
            base,
            sources,
            problems,
            runs: Vec::new(),
            class_names: BTreeMap::new(),
            left_out: [0; 3],
            demo: 0,
        }
    }

    /// One recorded Workload: a run of its team's class, or counted as left out.
    pub fn add(&mut self, entry: &HistoryEntry) {
        self.demo += usize::from(entry.demo);
        let w = &entry.workload;
        let Some(team) = self
            .m
            .world
            .teams
            .iter()
            .position(|t| t.namespace == w.namespace)
        else {
            self.left_out[0] += 1;
            return;
        };
        let Some(admitted_ms) = w.admitted_at_ms else {
            self.left_out[1] += 1;
            return;
        };
        let Some((flavor, gpus)) = gpu_flavor(entry, &self.base) else {
            self.left_out[2] += 1;
            return;
        };
        // A finished run counts whole (its length is the class's); a running one by the end.
        let until = w.finished.as_ref().map_or(day_ms(self.m.end), |f| f.at_ms);
        let class = (team, flavor, w.priority);
        self.class_names.entry(class).or_insert_with(|| {
            (w.priority_class.clone()).unwrap_or_else(|| format!("priority-{}", w.priority))
        });
        self.runs.push(Run {
            team,
            priority: w.priority,
            gpus,
            flavor,
            created_ms: w.created_at_ms.max(day_ms(self.m.from)),
            minutes: (until - admitted_ms).max(0) / MS_PER_MINUTE,
            finished: w.finished.is_some(),
        });
    }

    pub fn finish(mut self) -> FromHistory {
        let whys = [
            "in namespaces no team owns",
            "never admitted, so on no flavor yet",
            "holding no whole GPUs of a flavor (MIG instances, or no GPUs)",
        ];
        for (n, why) in self.left_out.iter().zip(whys) {
            if *n > 0 {
                self.problems.push(format!("{n} Workloads left out: {why}"));
            }
        }
        if self.demo > 0 {
            self.problems.push(format!(
                "demo data: {} of the Workloads read are the demo's history, not a cluster's",
                self.demo
            ));
        }
        let mut classes: BTreeMap<(usize, usize, i32), Vec<&Run>> = BTreeMap::new();
        for run in &self.runs {
            classes
                .entry((run.team, run.flavor, run.priority))
                .or_default()
                .push(run);
        }
        // by team, flavor name and priority
        let fleet = &self.base.fleet;
        let mut classes: Vec<_> = classes.into_iter().collect();
        classes.sort_by(|((t1, f1, p1), _), ((t2, f2, p2), _)| {
            (t1, &fleet[*f1].flavor, p1).cmp(&(t2, &fleet[*f2].flavor, p2))
        });
        let flavors: Vec<String> = fleet.iter().map(|a| a.flavor.clone()).collect();
        let (m, base, sources) = (self.m, &mut self.base, &mut self.sources);
        for ((team, f, priority), runs) in classes {
            let at = base.teams[team].workloads.len();
            let path = format!("teams[{team}].workloads[{at}]");
            let checkpoint = checkpoint_minutes(m, &base.teams[team].name);
            let (name, flavor) = (&self.class_names[&(team, f, priority)], &flavors[f]);
            let mut work = class(
                m,
                (name, flavor),
                priority,
                &runs,
                checkpoint,
                &path,
                sources,
            );
            let namespace = &m.world.teams[team].namespace;
            let (busy_pct, from) = busy_share(m, namespace, flavor);
            if let Some(pct) = busy_pct {
                work.busy_pct = pct;
            }
            sources.push(Source {
                path: format!("{path}.busy_pct"),
                from,
            });
            base.teams[team].workloads.push(work);
        }
        let batch_us = batch_gpu_us(&self.runs);
        for t in 0..base.teams.len() {
            let problems = &mut self.problems;
            if let Some(work) = inference_class(m, (t, base), &batch_us, sources, problems) {
                base.teams[t].workloads.push(work);
            }
        }
        for (t, team) in base.teams.iter_mut().enumerate() {
            asks_nothing_without_work(
                t,
                team,
                &base.fleet,
                sources,
                "no Workloads recorded in the window: a class that asks for nothing, so the team's quota stays (and lends)",
            );
        }
        FromHistory {
            scenario: self.base,
            sources: self.sources,
            problems: self.problems,
        }
    }
}

/// Gives team `t`, when it has no class, one that asks for nothing, with `why` as its source.
fn asks_nothing_without_work(
    t: usize,
    team: &mut Team,
    fleet: &[Accelerator],
    sources: &mut Vec<Source>,
    why: &str,
) {
    if team.workloads.is_empty() {
        team.workloads.push(no_recorded_work(fleet, team));
        sources.push(Source {
            path: format!("teams[{t}].workloads[0]"),
            from: why.to_owned(),
        });
    }
}

/// The class of a team that ran nothing: no demand, on a flavor it holds quota on.
fn no_recorded_work(fleet: &[Accelerator], team: &Team) -> Workload {
    let flavor = team
        .nominal_gpus
        .keys()
        .next()
        .or(fleet.first().map(|a| &a.flavor))
        .cloned()
        .unwrap_or_default();
    let mut work = Workload::new("no-recorded-work", WorkloadKind::Batch, &flavor);
    work.demand = Demand::Hourly {
        hourly_gpus: vec![0.0; HOURS_PER_WEEK],
    };
    work
}

fn fleet(m: &Measured, sources: &mut Vec<Source>, problems: &mut Vec<String>) -> Vec<Accelerator> {
    let mut fleet = Vec::new();
    for f in m.world.flavors.iter().filter(|f| f.gpus > 0) {
        let price = m.prices.get(&f.name).copied().unwrap_or_else(|| {
            problems.push(format!("flavor {}: no rate, priced at 0", f.name));
            0
        });
        let mut acc = Accelerator::new(&f.name, &f.gpu_model, price);
        acc.count = u32::try_from(f.gpus).unwrap_or(u32::MAX);
        sources.push(Source {
            path: format!("fleet[{}].count", fleet.len()),
            from: format!(
                "the inventory: {} GPUs in pools {}",
                f.gpus,
                f.pools.join(", ")
            ),
        });
        fleet.push(acc);
    }
    fleet
}

/// The teams with the quota in force on the window's last day, in whole GPUs.
fn teams(
    m: &Measured,
    base: &Scenario,
    sources: &mut Vec<Source>,
    problems: &mut Vec<String>,
) -> Vec<Team> {
    let last = m.end.plus(-1);
    let in_force = m.world.effective_on(last);
    let mut teams = Vec::new();
    for queue in &m.world.teams {
        let mut team = Team::new(&queue.team);
        if let Some(approved) = in_force.get(queue.team.as_str()) {
            set_quota(&mut team, &approved.spec, base, problems);
            sources.push(Source {
                path: format!("teams[{}].nominal_gpus", teams.len()),
                from: format!("quota request {} in force on {last}", approved.id),
            });
        }
        teams.push(team);
    }
    teams
}

/// The queues' policies in force on the window's last day: the first team's (by name), each
/// team whose requests state others named in `problems`.
fn policies(
    m: &Measured,
    quota: &mut QuotaPolicy,
    sources: &mut Vec<Source>,
    problems: &mut Vec<String>,
) {
    let last = m.end.plus(-1);
    let of = |spec: &QuotaSpec| {
        (
            spec.queueing,
            spec.reclaim_within_cohort,
            spec.within_cluster_queue,
        )
    };
    let in_force = m.world.effective_on(last);
    let mut stated = in_force.iter().map(|(team, a)| (team, a.id, of(&a.spec)));
    let Some((_, id, first)) = stated.next() else {
        return;
    };
    (
        quota.queueing,
        quota.reclaim_within_cohort,
        quota.within_cluster_queue,
    ) = first;
    sources.push(Source {
        path: "quota".to_owned(),
        from: format!("quota request {id} in force on {last}"),
    });
    for (team, other, (q, r, w)) in stated.filter(|s| s.2 != first) {
        problems.push(format!(
            "team {team}: request {other} states {}, reclaimWithinCohort {}, withinClusterQueue {}; the scenario states one set for every queue, request {id}'s",
            q.label(),
            r.label(),
            w.label()
        ));
    }
}

/// Sets `team`'s quota to `spec`'s (replacing what it held, as an approved request does), in
/// whole GPUs of `base`'s flavors; a line of other resources (MIG instances) is named in
/// `problems`, not carried.
pub(crate) fn set_quota(
    team: &mut Team,
    spec: &QuotaSpec,
    base: &Scenario,
    problems: &mut Vec<String>,
) {
    team.nominal_gpus.clear();
    team.borrowing_limit_gpus.clear();
    team.lending_limit_gpus.clear();
    for line in &spec.lines {
        let Some(acc) = base.accelerator(&line.flavor) else {
            continue;
        };
        if acc
            .model()
            .is_none_or(|model| model.resource != line.resource)
        {
            problems.push(format!(
                "team {}: its quota of {} on {} is not carried (the planner's quotas are whole GPUs)",
                team.name, line.resource, line.flavor
            ));
            continue;
        }
        let gpus = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
        team.nominal_gpus
            .insert(line.flavor.clone(), gpus(line.nominal));
        if let Some(limit) = line.borrowing_limit {
            team.borrowing_limit_gpus
                .insert(line.flavor.clone(), gpus(limit));
        }
        if let Some(limit) = line.lending_limit {
            team.lending_limit_gpus
                .insert(line.flavor.clone(), gpus(limit));
        }
    }
}

/// The flavor whose whole GPUs the Workload was admitted on, and how many it holds.
fn gpu_flavor(entry: &HistoryEntry, base: &Scenario) -> Option<(usize, u32)> {
    let pod_sets = &entry.workload.pod_sets;
    let (flavor, resource) = pod_sets.iter().find_map(|set| {
        set.flavors.iter().find_map(|(resource, flavor)| {
            let f = base.fleet.iter().position(|a| a.flavor == *flavor)?;
            (base.fleet[f].model()?.resource == *resource).then_some((f, resource))
        })
    })?;
    let gpus: u64 = pod_sets
        .iter()
        .filter_map(|s| s.resources.get(resource))
        .sum();
    Some((flavor, u32::try_from(gpus).ok().filter(|g| *g > 0)?))
}

fn checkpoint_minutes(m: &Measured, team: &str) -> Option<u32> {
    m.world
        .effective_on(m.end.plus(-1))
        .get(team)
        .and_then(|a| a.spec.checkpoint_interval_min)
}

/// One class from its runs.
fn class(
    m: &Measured,
    (name, flavor): (&str, &str),
    priority: i32,
    runs: &[&Run],
    checkpoint: Option<u32>,
    path: &str,
    sources: &mut Vec<Source>,
) -> Workload {
    let window = format!("{} to {}", m.from, m.end.plus(-1));
    let mut work = Workload::new(&format!("{name}-{flavor}"), WorkloadKind::Batch, flavor);
    work.priority = priority;
    let mut say = |field: &str, from: String| {
        sources.push(Source {
            path: format!("{path}.{field}"),
            from,
        })
    };
    let mut sizes: BTreeMap<u32, usize> = BTreeMap::new();
    for run in runs {
        *sizes.entry(run.gpus).or_insert(0) += 1;
    }
    let (gpus, _) = sizes
        .iter()
        .max_by_key(|(gpus, n)| (**n, **gpus))
        .map_or((1, 0), |(g, n)| (*g, *n));
    work.gpus_per_job = gpus;
    say(
        "gpus_per_job",
        format!(
            "the most common size of {} Workloads ({window})",
            runs.len()
        ),
    );
    let finished: Vec<i64> = runs
        .iter()
        .filter(|r| r.finished)
        .map(|r| r.minutes)
        .collect();
    let (lengths, how) = if finished.is_empty() {
        let running: Vec<i64> = runs.iter().map(|r| r.minutes).collect();
        (
            running,
            "at least: none finished; what the running ones ran by the window's end",
        )
    } else {
        (finished, "the mean run, first admission to finish")
    };
    let mean = lengths.iter().sum::<i64>() / i64::try_from(lengths.len()).unwrap_or(1).max(1);
    work.job_minutes = u32::try_from(mean.max(1)).unwrap_or(u32::MAX);
    say(
        "job_minutes",
        format!("{how}, of {} Workloads ({window})", lengths.len()),
    );
    work.demand = Demand::Hourly {
        hourly_gpus: demand(m, runs, work.job_minutes),
    };
    say(
        "demand",
        format!(
            "{} Workloads' GPUs over their runs from their creation, by hour of the week ({window})",
            runs.len()
        ),
    );
    work.checkpoint_minutes = checkpoint.unwrap_or(0);
    say(
        "checkpoint_minutes",
        checkpoint.map_or_else(
            || "not stated: the team's quota request gives no checkpoint interval".to_owned(),
            |c| format!("the team's quota request: every {c} minutes"),
        ),
    );
    work
}

/// The busy share of `namespace`'s GPU time on `flavor` as DCGM measured it (busy over
/// observed device time, in whole percent), and where it came from.
fn busy_share(m: &Measured, namespace: &str, flavor: &str) -> (Option<u32>, String) {
    let (mut busy, mut observed, mut days) = (0i128, 0i128, 0);
    for u in m
        .usage
        .iter()
        .filter(|u| u.namespace == namespace && u.flavor == flavor)
    {
        busy += i128::from(u.busy_gpu_us);
        observed += i128::from(u.observed_gpu_us);
        days += 1;
    }
    if observed <= 0 {
        return (
            None,
            format!(
                "not measured: DCGM observed none of {namespace}'s GPU time on {flavor} in the window; the format's default"
            ),
        );
    }
    let pct = ((busy * 100 + observed / 2) / observed).clamp(0, 100);
    (
        Some(u32::try_from(pct).unwrap_or(100)),
        format!(
            "DCGM: busy over observed GPU time of {namespace} on {flavor}, {days} days of the window (the team's, not this class's alone)"
        ),
    )
}

/// Each team's and flavor's GPU time held by its recorded runs, in microseconds.
fn batch_gpu_us(runs: &[Run]) -> BTreeMap<(usize, usize), i128> {
    let mut held = BTreeMap::new();
    for run in runs {
        let us = i128::from(run.gpus) * i128::from(run.minutes) * i128::from(MS_PER_MINUTE) * 1000;
        *held.entry((run.team, run.flavor)).or_insert(0) += us;
    }
    held
}

/// Team `t`'s inference class from the tokens its namespace's models generated (module docs),
/// or None where it served none; serving it cannot place is said in `problems`.
fn inference_class(
    m: &Measured,
    (t, base): (usize, &Scenario),
    batch_us: &BTreeMap<(usize, usize), i128>,
    sources: &mut Vec<Source>,
    problems: &mut Vec<String>,
) -> Option<Workload> {
    let (team, namespace) = (&base.teams[t].name, &m.world.teams[t].namespace);
    let (from_ms, end_ms) = (day_ms(m.from), day_ms(m.end));
    let hours: Vec<&TokensHour> = (m.tokens.iter())
        .filter(|h| h.namespace == *namespace && (from_ms..end_ms).contains(&h.hour_ms))
        .collect();
    let tokens: i128 = hours.iter().map(|h| i128::from(h.generation_tokens)).sum();
    if tokens <= 0 {
        return None;
    }
    let serving = serving_gpu_us(m, (t, namespace), &base.fleet, batch_us);
    let Some(f) = (0..serving.len())
        .filter(|f| serving[*f] > 0)
        .max_by_key(|f| serving[*f])
    else {
        problems.push(format!(
            "{team} generated {tokens} tokens, but DCGM observed none of {namespace}'s GPU time beyond its recorded Workloads: no inference class"
        ));
        return None;
    };
    let flavor = base.fleet[f].flavor.as_str();
    for (other, us) in (serving.iter().enumerate()).filter(|(o, us)| *o != f && **us > 0) {
        problems.push(format!(
            "{team} also served on {} ({:.1} GPU-hours beyond its Workloads): counted in its one inference class on {flavor}, since vLLM's counters do not say where a model runs",
            base.fleet[other].flavor,
            *us as f64 / 3.6e9
        ));
    }
    let serving_us: i128 = serving.iter().sum();
    let mut work = serving_class(m, flavor, &hours, (tokens, serving_us))?;
    let (busy_pct, busy_from) = busy_share(m, namespace, flavor);
    if let Some(pct) = busy_pct {
        work.busy_pct = pct;
    }
    let path = format!("teams[{t}].workloads[{}]", base.teams[t].workloads.len());
    let said = inference_sources(m, (namespace, &work), &hours, (tokens, serving_us));
    for (field, from) in said.into_iter().chain([("busy_pct", busy_from)]) {
        sources.push(Source {
            path: format!("{path}.{field}"),
            from,
        });
    }
    Some(work)
}

/// Team `t`'s GPU time on each of the fleet's flavors beyond what its recorded Workloads held
/// there (DCGM's observed time of its namespace), in microseconds.
fn serving_gpu_us(
    m: &Measured,
    (t, namespace): (usize, &str),
    fleet: &[Accelerator],
    batch_us: &BTreeMap<(usize, usize), i128>,
) -> Vec<i128> {
    (fleet.iter().enumerate())
        .map(|(f, acc)| {
            let observed: i128 = (m.usage.iter())
                .filter(|u| u.namespace == namespace && u.flavor == acc.flavor)
                .map(|u| i128::from(u.observed_gpu_us))
                .sum();
            (observed - batch_us.get(&(t, f)).copied().unwrap_or(0)).max(0)
        })
        .collect()
}

/// An inference class on `flavor` serving `hours`' tokens: at least `tokens` over the
/// `serving_us` GPU-microseconds over KEDA's threshold a GPU, the hourly traffic in GPUs of
/// that, and the replicas KEDA wants at its busiest hour.
fn serving_class(
    m: &Measured,
    flavor: &str,
    hours: &[&TokensHour],
    (tokens, serving_us): (i128, i128),
) -> Option<Workload> {
    let mut work = Workload::new(
        &format!("serving-{flavor}"),
        WorkloadKind::Inference,
        flavor,
    );
    let mut inference = work.inference.clone()?;
    // tokens per GPU-second over the threshold, rounded up (×100 / threshold_pct)
    let over = serving_us * i128::from(inference.threshold_pct.max(1));
    let per_gpu = (tokens * 1_000_000 * 100 + over - 1) / over;
    inference.tokens_per_s_per_gpu = u32::try_from(per_gpu.max(1)).unwrap_or(u32::MAX);
    let capacity = f64::from(inference.tokens_per_s_per_gpu);
    let mut per_hour = vec![0i64; HOURS_PER_WEEK];
    for h in hours {
        per_hour[hour_of_week(h.hour_ms)] += h.generation_tokens;
    }
    let hourly_gpus: Vec<f64> = (per_hour.iter().zip(occurrences(m)))
        .map(|(tokens, n)| *tokens as f64 / (3600.0 * n.max(1) as f64) / capacity)
        .collect();
    let peak = hourly_gpus.iter().copied().fold(0.0, f64::max);
    inference.max_replicas = (inference.replicas_for(peak, work.gpus_per_job))
        .max(inference.min_replicas)
        .max(1);
    work.inference = Some(inference);
    work.demand = Demand::Hourly { hourly_gpus };
    Some(work)
}

/// Where an inference class's figures came from, by field.
fn inference_sources(
    m: &Measured,
    (namespace, work): (&str, &Workload),
    hours: &[&TokensHour],
    (tokens, serving_us): (i128, i128),
) -> [(&'static str, String); 5] {
    let window = format!("{} to {}", m.from, m.end.plus(-1));
    let models: std::collections::BTreeSet<&str> = hours.iter().map(|h| h.model.as_str()).collect();
    let models = models.into_iter().collect::<Vec<_>>().join(", ");
    let threshold = work.inference.as_ref().map_or(0, |i| i.threshold_pct);
    let serving_h = serving_us as f64 / 3.6e9;
    [
        (
            "flavor",
            format!(
                "DCGM: where most of {namespace}'s GPU time beyond its recorded Workloads was ({window})"
            ),
        ),
        (
            "inference.tokens_per_s_per_gpu",
            format!(
                "at least: {tokens} tokens generated by {models} (vLLM) over {serving_h:.1} serving GPU-hours (DCGM), over the {threshold}% KEDA threshold ({window})"
            ),
        ),
        (
            "demand",
            format!(
                "vLLM's generated tokens per second by hour of the week, in GPUs of that capacity ({window})"
            ),
        ),
        (
            "inference.max_replicas",
            "KEDA's replicas for the busiest hour's traffic".to_owned(),
        ),
        (
            "gpus_per_job",
            "the format's default: vLLM's counters do not say a replica's GPUs".to_owned(),
        ),
    ]
}

/// GPUs wanted per hour of the week: each run's GPUs from its creation for its length
/// (`fallback` minutes for one still running with none), within the window, over how many
/// times the window holds that hour.
fn demand(m: &Measured, runs: &[&Run], fallback: u32) -> Vec<f64> {
    let end_ms = day_ms(m.end);
    let mut gpu_minutes = vec![0i64; HOURS_PER_WEEK];
    for run in runs {
        let minutes = if run.minutes > 0 {
            run.minutes
        } else {
            i64::from(fallback)
        };
        let (mut at, stop) = (
            run.created_ms,
            (run.created_ms + minutes * MS_PER_MINUTE).min(end_ms),
        );
        while at < stop {
            let hour_end = (at.div_euclid(MS_PER_HOUR) + 1) * MS_PER_HOUR;
            let next = hour_end.min(stop);
            gpu_minutes[hour_of_week(at)] += i64::from(run.gpus) * (next - at) / MS_PER_MINUTE;
            at = next;
        }
    }
    gpu_minutes
        .iter()
        .zip(occurrences(m))
        .map(|(g, n)| {
            if n > 0 {
                *g as f64 / (60.0 * n as f64)
            } else {
                0.0
            }
        })
        .collect()
}

/// How many times `m`'s window holds each hour of the week.
fn occurrences(m: &Measured) -> [i64; HOURS_PER_WEEK] {
    let mut occurrences = [0i64; HOURS_PER_WEEK];
    let mut hour = day_ms(m.from);
    while hour < day_ms(m.end) {
        occurrences[hour_of_week(hour)] += 1;
        hour += MS_PER_HOUR;
    }
    occurrences
}

/// Hour of the week from Monday 00:00 UTC (1970-01-01 was a Thursday: hour 72).
fn hour_of_week(ms: i64) -> usize {
    (ms.div_euclid(MS_PER_HOUR) + 72).rem_euclid(HOURS_PER_WEEK as i64) as usize
}

/// The first millisecond of `day` (UTC).
pub(crate) fn day_ms(day: Day) -> i64 {
    i64::from(day.days_since_epoch()) * 24 * MS_PER_HOUR
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// 2026-11-30 (a Monday) 00:00 UTC.
    const MONDAY_MS: i64 = 1_795_996_800_000;

    /// 16 H100s; research (namespace team-research) holds all 16 by request 7, which says it
    /// checkpoints every 30 minutes.
    fn world() -> QuotaWorld {
        serde_json::from_value(json!({
            "flavors": [{"name": "h100", "gpu_model": "H100-SXM5-80GB", "pools": ["p1"], "gpus": 16,
                "settings": {}}],
            "teams": [{"team": "research", "namespace": "team-research", "cluster_queue": "research",
                "local_queue": "research", "cohort": "gpufleet"}],
            "approved": [{"id": 7, "team": "research", "order": 1, "spec": {
                "lines": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 16}],
                "checkpoint_interval_min": 30, "justification": "training",
                "starts_on": "2026-11-01"}}]
        }))
        .expect("a world")
    }

    /// A Workload of `gpus` H100s in `namespace`, created `created` minutes after Monday 00:00,
    /// admitted `wait` minutes later (None: never) and finished `run` minutes after that.
    fn recorded(
        namespace: &str,
        gpus: u32,
        created: i64,
        wait: Option<i64>,
        run: i64,
    ) -> HistoryEntry {
        let at = |minutes: i64| MONDAY_MS + minutes * MS_PER_MINUTE;
        let admitted = wait.map(|w| at(created + w));
        let flavors: Value = if admitted.is_some() {
            json!({"nvidia.com/gpu": "h100"})
        } else {
            json!({})
        };
        serde_json::from_value(json!({
            "uid": format!("{namespace}-{created}"), "namespace": namespace, "name": "job",
            "local_queue": "research", "cluster_queue": null, "priority": 100,
            "priority_class": "training",
            "pod_sets": [{"name": "main", "count": 1, "resources": {"nvidia.com/gpu": gpus},
                "flavors": flavors}],
            "created_at_ms": at(created), "quota_reserved_at_ms": admitted, "admitted_at_ms": admitted,
            "evicted": null,
            "finished": admitted.map(|a| json!({"at_ms": a + run * MS_PER_MINUTE, "reason": "Succeeded", "detail": null})),
            "evictions": [], "problems": [], "team": null, "evictions_seen": [], "gone_at_ms": null
        }))
        .expect("an entry")
    }

    fn history() -> Vec<HistoryEntry> {
        vec![
            recorded("team-research", 8, 8 * 60, Some(4), 120),
            recorded("team-research", 8, 9 * 60 + 30, Some(0), 60),
            recorded("team-research", 4, 24 * 60, Some(0), 60),
            recorded("elsewhere", 8, 60, Some(0), 60),
            recorded("team-research", 8, 120, None, 0),
        ]
    }

    fn derive(days: i32) -> FromHistory {
        // Two days of research's H100 time: 3 and 1 GPU-hours busy of 4 and 4 observed.
        derive_measured(days, &[(3, 4), (1, 4)], &[])
    }

    /// The history above with research's DCGM `(busy, observed)` GPU-hours a day from Monday,
    /// and its generated tokens `(hour of the week, tokens)` of the model "llama".
    fn derive_measured(days: i32, usage: &[(i64, i64)], tokens: &[(i64, i64)]) -> FromHistory {
        let world = world();
        let prices = [("h100".to_owned(), 250)].into();
        let from = Day::parse("2026-11-30").expect("a day");
        let hour_us = 3_600_000_000;
        let usage: Vec<UsageDay> = usage
            .iter()
            .enumerate()
            .map(|(d, (busy, seen))| UsageDay {
                day: from.plus(d as i32),
                namespace: "team-research".into(),
                flavor: "h100".into(),
                allocated_gpu_us: Some(seen * hour_us),
                busy_gpu_us: busy * hour_us,
                observed_gpu_us: seen * hour_us,
                borrowed_gpu_us: 0,
                lent_gpu_us: 0,
            })
            .collect();
        let tokens: Vec<TokensHour> = tokens
            .iter()
            .map(|(hour, n)| TokensHour {
                hour_ms: MONDAY_MS + hour * MS_PER_HOUR,
                namespace: "team-research".into(),
                model: "llama".into(),
                generation_tokens: *n,
            })
            .collect();
        let measured = Measured {
            world: &world,
            prices: &prices,
            usage: &usage,
            tokens: &tokens,
            from,
            end: from.plus(days),
        };
        scenario(&measured, &history())
    }

    /// The queues' policies are the requests' in force: research's (StrictFIFO, reclaim Never,
    /// LowerOrNewerEqualPriority) for every queue, and vision's request, which states Kueue's
    /// defaults, named as differing.
    #[test]
    fn the_queues_policies_are_those_of_the_requests_in_force() {
        let mut world = serde_json::to_value(world()).expect("json");
        let spec = &mut world["approved"][0]["spec"];
        spec["queueing"] = "strict_fifo".into();
        spec["reclaim_within_cohort"] = "Never".into();
        spec["within_cluster_queue"] = "LowerOrNewerEqualPriority".into();
        let mut vision = world["approved"][0].clone();
        vision["spec"] = json!({"lines": [], "checkpoint_interval_min": 30,
            "justification": "serving", "starts_on": "2026-11-01"});
        (vision["id"], vision["team"], vision["order"]) = (8.into(), "vision".into(), 2.into());
        world["approved"]
            .as_array_mut()
            .expect("approved")
            .push(vision);
        let mut team = world["teams"][0].clone();
        (team["team"], team["namespace"]) = ("vision".into(), "team-vision".into());
        (team["cluster_queue"], team["local_queue"]) = ("vision".into(), "vision".into());
        world["teams"].as_array_mut().expect("teams").push(team);
        let world: QuotaWorld = serde_json::from_value(world).expect("a world");
        let from = Day::parse("2026-11-30").expect("a day");
        let measured = Measured {
            world: &world,
            prices: &BTreeMap::new(),
            usage: &[],
            tokens: &[],
            from,
            end: from.plus(7),
        };
        let derived = scenario(&measured, &history());
        let quota = &derived.scenario.quota;
        assert_eq!(
            (
                quota.queueing,
                quota.reclaim_within_cohort,
                quota.within_cluster_queue
            ),
            (
                crate::kueue::Queueing::StrictFifo,
                crate::kueue::Reclaim::Never,
                crate::kueue::WithinQueue::LowerOrNewerEqualPriority
            )
        );
        assert!(
            derived.problems.iter().any(|p| p.starts_with(
                "team vision: request 8 states BestEffortFIFO, reclaimWithinCohort Any, withinClusterQueue LowerPriority"
            )),
            "{:?}",
            derived.problems
        );
    }

    /// By hand: A holds 8 GPUs Monday 08:00-10:00 (its run of 120 minutes placed from its
    /// creation), B 8 from 09:30 to 10:30, C 4 on Tuesday 00:00-01:00: hour 8 holds 480
    /// GPU-minutes, hour 9 480 + 240, hour 10 240, hour 24 240; a week holds each hour once.
    /// Sizes 8, 8, 4: 8 a job; runs 120, 60, 60: 80 minutes.
    #[test]
    fn a_weeks_recorded_jobs_become_a_class_by_hand() {
        let derived = derive(7);
        let s = &derived.scenario;
        assert_eq!(s.fleet[0].count, 16);
        assert_eq!(s.fleet[0].price_cents_per_gpu_hour, 250);
        let team = &s.teams[0];
        assert_eq!(team.nominal_gpus["h100"], 16);
        let class = &team.workloads[0];
        assert_eq!(class.name, "training-h100");
        assert_eq!(
            (
                class.gpus_per_job,
                class.job_minutes,
                class.priority,
                class.checkpoint_minutes
            ),
            (8, 80, 100, 30)
        );
        let hourly = class.demand.hourly();
        let busy: Vec<(usize, f64)> = hourly
            .iter()
            .enumerate()
            .filter(|(_, g)| **g > 0.0)
            .map(|(h, g)| (h, *g))
            .collect();
        assert_eq!(busy, [(8, 8.0), (9, 12.0), (10, 4.0), (24, 4.0)]);
        assert_eq!(
            derived.problems,
            [
                "1 Workloads left out: in namespaces no team owns",
                "1 Workloads left out: never admitted, so on no flavor yet"
            ]
        );
        assert!(
            derived
                .sources
                .iter()
                .any(|src| src.path == "teams[0].workloads[0].job_minutes"
                    && src.from.starts_with("the mean run"))
        );
        assert!(s.validate().is_ok(), "{:?}", s.validate());
    }

    /// Our fleet today: research holds its 16 H100s by request 7, so its one class peaks at 16
    /// in office hours (8-20 on weekdays: Monday 08:00 is hour 8) and is a quarter of that at
    /// night (the preset's shape); the 250-cent rate is the inventory's.
    #[test]
    fn the_fleet_today_starts_each_team_at_its_quota_in_force() {
        let (world, prices) = (world(), [("h100".to_owned(), 250)].into());
        let today = Day::parse("2026-12-04").expect("a day");
        let measured = Measured {
            world: &world,
            prices: &prices,
            usage: &[],
            tokens: &[],
            from: today,
            end: today.plus(1),
        };
        let derived = super::today(&measured);
        let s = &derived.scenario;
        assert_eq!(s.name, "our fleet on 2026-12-04");
        assert_eq!(
            (s.fleet[0].count, s.fleet[0].price_cents_per_gpu_hour),
            (16, 250)
        );
        let team = &s.teams[0];
        assert_eq!(
            (team.name.as_str(), team.nominal_gpus["h100"]),
            ("research", 16)
        );
        let class = &team.workloads[0];
        assert_eq!(class.name, "work-h100");
        let hourly = class.demand.hourly();
        assert_eq!((hourly[8], hourly[2]), (16.0, 4.0));
        assert!(derived.sources.iter().any(|src| {
            src.path == "teams[0].workloads[0].demand"
                && src
                    .from
                    .starts_with("a starter: the team's quota in force on h100 (16 GPUs)")
        }));
        assert!(s.validate().is_ok(), "{:?}", s.validate());
    }

    /// Two weeks hold each hour twice: the same work averages to half.
    #[test]
    fn a_longer_window_averages_over_the_times_it_holds_each_hour() {
        let hourly = derive(14).scenario.teams[0].workloads[0].demand.hourly();
        assert_eq!((hourly[8], hourly[9], hourly[24]), (4.0, 6.0, 2.0));
    }

    /// Research's recorded Workloads hold 8 × 120 + 8 × 60 + 4 × 60 = 1,680 GPU-minutes (28
    /// GPU-hours) of H100; DCGM observed 38 GPU-hours of its namespace (19 busy), so 10
    /// GPU-hours (36,000 GPU-seconds) served the 10,080,000 tokens llama generated: 280 a
    /// GPU-second, over KEDA's 70% threshold at least 400 tokens/s a GPU. Monday 09:00's
    /// 7,560,000 tokens are 2,100 a second, 5.25 GPUs of 400; 10:00's 2,520,000 are 1.75 GPUs.
    /// KEDA wants ⌈5.25 ÷ 0.7⌉ = 8 replicas of one GPU at the peak. Busy: 19 of 38, 50%.
    #[test]
    fn served_tokens_become_an_inference_class_by_hand() {
        let derived = derive_measured(7, &[(19, 38)], &[(9, 7_560_000), (10, 2_520_000)]);
        let team = &derived.scenario.teams[0];
        let class = &team.workloads[1];
        assert_eq!(
            (class.name.as_str(), class.kind, class.flavor.as_str()),
            ("serving-h100", WorkloadKind::Inference, "h100")
        );
        let inference = class.inference.as_ref().expect("inference");
        assert_eq!(
            (inference.tokens_per_s_per_gpu, inference.max_replicas),
            (400, 8)
        );
        let hourly = class.demand.hourly();
        assert_eq!((hourly[9], hourly[10], hourly[11]), (5.25, 1.75, 0.0));
        assert_eq!((class.busy_pct, class.gpus_per_job), (50, 1));
        assert!(derived.sources.iter().any(|src| {
            src.path == "teams[0].workloads[1].inference.tokens_per_s_per_gpu"
                && src.from.starts_with(
                    "at least: 10080000 tokens generated by llama (vLLM) over 10.0 serving GPU-hours",
                )
        }));
        assert!(derived.scenario.validate().is_ok());
    }

    /// Tokens served where DCGM saw no GPU time beyond the recorded Workloads (8 observed
    /// GPU-hours against their 28) are said, never placed.
    #[test]
    fn tokens_without_serving_gpus_are_said_not_placed() {
        let derived = derive_measured(7, &[(3, 4), (1, 4)], &[(9, 1_000)]);
        assert!(
            derived.scenario.teams[0]
                .workloads
                .iter()
                .all(|w| w.kind != WorkloadKind::Inference)
        );
        assert!(derived.problems.iter().any(|p| p
            == "research generated 1000 tokens, but DCGM observed none of team-research's GPU time beyond its recorded Workloads: no inference class"));
    }
}
