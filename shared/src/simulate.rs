//! A week of demand under Kueue semantics, minute by minute, deterministic for a seed.
//!
//! Model: one ClusterQueue per team with a nominal quota per flavor; with a cohort, unused
//! quota is lent (up to each lender's `lendingLimit`) and borrowed (up to each borrower's
//! `borrowingLimit`); admission is all-or-nothing; `reclaimWithinCohort: Any` evicts borrowers
//! so an owner gets its nominal quota back, `withinClusterQueue: LowerPriority` evicts lower
//! priority work of the same team; queues are StrictFIFO or BestEffortFIFO, ordered by priority
//! then arrival. Batch classes arrive as jobs whose rate gives the demand profile (Little's
//! law); inference replicas scale like KEDA (threshold, activationThreshold, cooldownPeriod,
//! a 5-minute scale-down stabilisation) and serve only after their cold start. A preempted job
//! loses the work done since its last checkpoint.
//!
//! Invariants (tested): admitted GPU-minutes + idle GPU-minutes = capacity × minutes; no team
//! ever holds more than its nominal quota plus its borrowing limit.

use std::{cmp::Reverse, collections::BinaryHeap};

use serde::{Deserialize, Serialize};

use crate::{
    rng::Rng,
    scenario::{HOURS_PER_WEEK, Queueing, Scenario, WorkloadKind},
};

pub const MINUTES_PER_WEEK: u32 = (HOURS_PER_WEEK as u32) * 60;
/// Inference replicas outrank every batch priority.
const INFERENCE_PRIORITY: i64 = i64::MAX / 2;
/// HPA's default scale-down stabilisation window.
const STABILISATION_MIN: u32 = 5;
/// A scale-up within this long after a scale-down counts as one flapping cycle.
const FLAP_WINDOW_MIN: u32 = 60;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamStats {
    pub team: String,
    pub wanted_gpu_minutes: f64,
    pub admitted_gpu_minutes: f64,
    pub busy_gpu_minutes: f64,
    pub jobs_submitted: u64,
    pub jobs_admitted: u64,
    /// Minutes from arrival to first admission (batch jobs).
    pub queue_wait_p50_min: Option<f64>,
    pub queue_wait_p95_min: Option<f64>,
    /// Times this team's workloads were evicted.
    pub preemptions: u64,
    pub rework_gpu_hours: f64,
    /// Inference traffic not served (no ready replica), in % of the traffic.
    pub unserved_inference_pct: Option<f64>,
    /// Scale-down then scale-up within an hour: each costs a cold start.
    pub flapping_cycles: u64,
    /// Evictions of other work caused by this team's inference scaling up.
    pub preemptions_caused_by_scale_up: u64,
    /// The most GPUs held above nominal quota at any minute, over all flavors.
    pub peak_borrowed_gpus: u32,
    /// The most GPUs held above nominal + borrowing limit (0 when Kueue's rule held).
    pub peak_over_limit_gpus: u32,
    /// Admitted GPU-minutes ÷ the team's nominal quota (the fleet, for the total), in %; over
    /// 100 when the team borrowed. None without quota.
    pub allocated_pct: Option<f64>,
    /// Busy GPU-minutes over the same base, in %.
    pub busy_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Simulation {
    pub minutes: u32,
    pub capacity_gpus: u64,
    pub teams: Vec<TeamStats>,
    pub total: TeamStats,
    pub idle_gpu_minutes: f64,
}

#[derive(Debug, Clone)]
struct Job {
    team: usize,
    flavor: usize,
    workload: usize,
    gpus: u32,
    /// Minutes of work left (u32::MAX for inference replicas).
    remaining: u32,
    priority: i64,
    preemptible: bool,
    checkpoint: u32,
    busy: f64,
    arrival: u32,
    first_admit: Option<u32>,
    started: u32,
    running: bool,
    /// Bumped on eviction so stale completion events are ignored.
    generation: u32,
    /// Inference: when it can serve.
    ready_at: u32,
}

/// KEDA-like scaling state of one inference class.
struct Autoscaler {
    workload: usize,
    team: usize,
    hourly: Vec<f64>,
    tokens_per_gpu: f64,
    gpus_per_replica: u32,
    min: u32,
    max: u32,
    threshold: f64,
    activation: f64,
    cooldown_min: u32,
    replicas: Vec<usize>,
    recent_desired: Vec<u32>,
    below_activation_since: Option<u32>,
    last_scale_down: Option<u32>,
    demand_tokens: f64,
    unserved_tokens: f64,
}

struct State<'a> {
    scenario: &'a Scenario,
    /// Every workload class, in scenario order (teams, then their workloads).
    workloads: Vec<&'a crate::scenario::Workload>,
    /// Σ over teams of usage beyond the guaranteed (non-lendable) part, per flavor.
    pool_use: Vec<u32>,
    capacity: Vec<u32>,
    nominal: Vec<Vec<u32>>,
    borrow_limit: Vec<Vec<Option<u32>>>,
    /// Nominal quota that is not lendable (nominal − lendingLimit).
    guaranteed: Vec<Vec<u32>>,
    /// Σ lendable quota per flavor.
    pool_cap: Vec<u32>,
    usage: Vec<Vec<u32>>,
    total_usage: Vec<u32>,
    jobs: Vec<Job>,
    /// Pending job ids per team, ordered by (priority desc, arrival asc).
    pending: Vec<Vec<usize>>,
    /// Running job ids per (team, flavor).
    running: Vec<Vec<Vec<usize>>>,
    ends: BinaryHeap<Reverse<(u32, usize, u32)>>,
    stats: Vec<TeamStats>,
    waits: Vec<Vec<f64>>,
    busy_now: f64,
}

/// Simulates one week of `scenario` (which must be valid).
pub fn simulate(scenario: &Scenario) -> Simulation {
    let flavors: Vec<&str> = scenario.fleet.iter().map(|a| a.flavor.as_str()).collect();
    let f_index = |name: &str| flavors.iter().position(|f| *f == name).unwrap_or(0);
    let quota = |map: &std::collections::BTreeMap<String, u32>, f: &str| map.get(f).copied();
    let nominal: Vec<Vec<u32>> = scenario
        .teams
        .iter()
        .map(|t| {
            flavors
                .iter()
                .map(|f| quota(&t.nominal_gpus, f).unwrap_or(0))
                .collect()
        })
        .collect();
    let borrow_limit: Vec<Vec<Option<u32>>> = scenario
        .teams
        .iter()
        .map(|t| {
            flavors
                .iter()
                .map(|f| {
                    if scenario.quota.cohort {
                        quota(&t.borrowing_limit_gpus, f)
                    } else {
                        Some(0)
                    }
                })
                .collect()
        })
        .collect();
    let guaranteed: Vec<Vec<u32>> = scenario
        .teams
        .iter()
        .enumerate()
        .map(|(ti, t)| {
            flavors
                .iter()
                .enumerate()
                .map(|(fi, f)| {
                    let n = nominal[ti][fi];
                    if !scenario.quota.cohort {
                        return n;
                    }
                    n - quota(&t.lending_limit_gpus, f).unwrap_or(n).min(n)
                })
                .collect()
        })
        .collect();
    let pool_cap: Vec<u32> = (0..flavors.len())
        .map(|f| {
            (0..scenario.teams.len())
                .map(|t| nominal[t][f] - guaranteed[t][f])
                .sum()
        })
        .collect();
    let team_count = scenario.teams.len();
    let mut state = State {
        scenario,
        workloads: scenario.teams.iter().flat_map(|t| &t.workloads).collect(),
        pool_use: vec![0; flavors.len()],
        capacity: scenario.fleet.iter().map(|a| a.count).collect(),
        nominal,
        borrow_limit,
        guaranteed,
        pool_cap,
        usage: vec![vec![0; flavors.len()]; team_count],
        total_usage: vec![0; flavors.len()],
        jobs: Vec::new(),
        pending: vec![Vec::new(); team_count],
        running: vec![vec![Vec::new(); flavors.len()]; team_count],
        ends: BinaryHeap::new(),
        stats: scenario
            .teams
            .iter()
            .map(|t| empty_stats(&t.name))
            .collect(),
        waits: vec![Vec::new(); team_count],
        busy_now: 0.0,
    };

    // Batch arrivals, in minute order; and the inference classes.
    let mut rng = Rng::new(scenario.seed);
    let mut arrivals: Vec<usize> = Vec::new();
    let mut inference: Vec<Autoscaler> = Vec::new();
    let mut workload_index = 0;
    for (ti, team) in scenario.teams.iter().enumerate() {
        for w in &team.workloads {
            let hourly = w.demand.hourly();
            state.stats[ti].wanted_gpu_minutes += hourly.iter().sum::<f64>() * 60.0;
            let flavor = f_index(&w.flavor);
            if let (WorkloadKind::Inference, Some(inf)) = (w.kind, &w.inference) {
                inference.push(Autoscaler {
                    workload: workload_index,
                    team: ti,
                    hourly,
                    tokens_per_gpu: f64::from(inf.tokens_per_s_per_gpu),
                    gpus_per_replica: w.gpus_per_job,
                    min: inf.min_replicas,
                    max: inf.max_replicas,
                    threshold: f64::from(inf.threshold_pct) / 100.0,
                    activation: f64::from(inf.activation_threshold_pct) / 100.0,
                    cooldown_min: inf.cooldown_s.div_ceil(60),
                    replicas: Vec::new(),
                    recent_desired: Vec::new(),
                    below_activation_since: None,
                    last_scale_down: None,
                    demand_tokens: 0.0,
                    unserved_tokens: 0.0,
                });
            } else {
                let job_gpu_hours = f64::from(w.gpus_per_job) * f64::from(w.job_minutes) / 60.0;
                let template = Job {
                    team: ti,
                    flavor,
                    workload: workload_index,
                    gpus: w.gpus_per_job,
                    remaining: w.job_minutes,
                    priority: i64::from(w.priority),
                    preemptible: w.preemptible,
                    checkpoint: w.checkpoint_minutes,
                    busy: f64::from(w.busy_pct) / 100.0,
                    arrival: 0,
                    first_admit: None,
                    started: 0,
                    running: false,
                    generation: 0,
                    ready_at: 0,
                };
                // Warm start: the work already running at the start of the week.
                let initial = (hourly.first().copied().unwrap_or(0.0) / f64::from(w.gpus_per_job))
                    .floor() as u32;
                for _ in 0..initial {
                    let remaining = 1 + rng.below(w.job_minutes as usize) as u32;
                    state.jobs.push(Job {
                        remaining,
                        ..template.clone()
                    });
                    arrivals.push(state.jobs.len() - 1);
                }
                let mut carry = 0.0;
                for (h, gpus) in hourly.iter().enumerate() {
                    carry += gpus / job_gpu_hours;
                    while carry >= 1.0 {
                        carry -= 1.0;
                        let arrival = h as u32 * 60 + rng.below(60) as u32;
                        // ±50% around the mean length.
                        let length = (f64::from(w.job_minutes)
                            * (0.5 + rng.below(1001) as f64 / 1000.0))
                            .round()
                            .max(1.0) as u32;
                        state.jobs.push(Job {
                            arrival,
                            remaining: length,
                            ..template.clone()
                        });
                        arrivals.push(state.jobs.len() - 1);
                    }
                }
            }
            workload_index += 1;
        }
    }
    arrivals.sort_by_key(|&j| (state.jobs[j].arrival, j));

    let capacity_gpus: u64 = state.capacity.iter().map(|&c| u64::from(c)).sum();
    let mut idle_gpu_minutes = 0.0;
    let mut next_arrival = 0;
    for minute in 0..MINUTES_PER_WEEK {
        // 1. Completions.
        while let Some(&Reverse((end, job, generation))) = state.ends.peek() {
            if end > minute {
                break;
            }
            state.ends.pop();
            if state.jobs[job].generation == generation && state.jobs[job].running {
                state.stop(job, minute);
            }
        }
        // 2. Arrivals.
        while let Some(&job) = arrivals.get(next_arrival) {
            if state.jobs[job].arrival > minute {
                break;
            }
            next_arrival += 1;
            state.stats[state.jobs[job].team].jobs_submitted += 1;
            state.enqueue(job);
        }
        // 3. Inference scaling.
        for inf in &mut inference {
            state.scale(inf, minute);
        }
        // 4. Admission, starting from a different team each minute so that no queue always
        // gets the cohort's spare quota first.
        let teams = state.pending.len();
        for k in 0..teams {
            state.admit_team((minute as usize + k) % teams, minute);
        }
        // 5. Accounting for this minute.
        state.busy_now = 0.0;
        for team in 0..state.stats.len() {
            for f in 0..state.capacity.len() {
                for &job in &state.running[team][f] {
                    let j = &state.jobs[job];
                    if j.remaining != u32::MAX {
                        state.busy_now += f64::from(j.gpus) * j.busy;
                        state.stats[team].busy_gpu_minutes += f64::from(j.gpus) * j.busy;
                    }
                }
                let borrowed = state.usage[team][f].saturating_sub(state.nominal[team][f]);
                let limit = state.nominal[team][f]
                    .saturating_add(state.borrow_limit[team][f].unwrap_or(u32::MAX));
                let over = state.usage[team][f].saturating_sub(limit);
                let s = &mut state.stats[team];
                s.peak_borrowed_gpus = s.peak_borrowed_gpus.max(borrowed);
                s.peak_over_limit_gpus = s.peak_over_limit_gpus.max(over);
            }
        }
        for inf in &mut inference {
            state.serve(inf, minute);
        }
        idle_gpu_minutes += state
            .capacity
            .iter()
            .zip(&state.total_usage)
            .map(|(c, u)| f64::from(c - u))
            .sum::<f64>();
    }
    // Close the intervals still open at the end of the week.
    for job in 0..state.jobs.len() {
        if state.jobs[job].running {
            state.account(job, MINUTES_PER_WEEK);
        }
    }
    for inf in &inference {
        if inf.demand_tokens > 0.0 {
            let s = &mut state.stats[inf.team];
            let unserved = s.unserved_inference_pct.unwrap_or(0.0)
                + inf.unserved_tokens / inf.demand_tokens * 100.0;
            s.unserved_inference_pct = Some(unserved);
        }
    }
    for (team, waits) in state.waits.iter_mut().enumerate() {
        waits.sort_by(f64::total_cmp);
        state.stats[team].queue_wait_p50_min = percentile(waits, 0.50);
        state.stats[team].queue_wait_p95_min = percentile(waits, 0.95);
    }
    let mut total = empty_stats("total");
    let mut all_waits: Vec<f64> = state.waits.concat();
    all_waits.sort_by(f64::total_cmp);
    for s in &state.stats {
        total.wanted_gpu_minutes += s.wanted_gpu_minutes;
        total.admitted_gpu_minutes += s.admitted_gpu_minutes;
        total.busy_gpu_minutes += s.busy_gpu_minutes;
        total.jobs_submitted += s.jobs_submitted;
        total.jobs_admitted += s.jobs_admitted;
        total.preemptions += s.preemptions;
        total.rework_gpu_hours += s.rework_gpu_hours;
        total.flapping_cycles += s.flapping_cycles;
        total.preemptions_caused_by_scale_up += s.preemptions_caused_by_scale_up;
        total.peak_borrowed_gpus = total.peak_borrowed_gpus.max(s.peak_borrowed_gpus);
        total.peak_over_limit_gpus = total.peak_over_limit_gpus.max(s.peak_over_limit_gpus);
    }
    let (served, demand): (f64, f64) = inference.iter().fold((0.0, 0.0), |(u, d), i| {
        (u + i.unserved_tokens, d + i.demand_tokens)
    });
    total.unserved_inference_pct = (demand > 0.0).then(|| served / demand * 100.0);
    total.queue_wait_p50_min = percentile(&all_waits, 0.50);
    total.queue_wait_p95_min = percentile(&all_waits, 0.95);
    let minutes = f64::from(MINUTES_PER_WEEK);
    let shares = |s: &mut TeamStats, gpus: f64| {
        if gpus > 0.0 {
            s.allocated_pct = Some(s.admitted_gpu_minutes / (gpus * minutes) * 100.0);
            s.busy_pct = Some(s.busy_gpu_minutes / (gpus * minutes) * 100.0);
        }
    };
    for (team, s) in state.stats.iter_mut().enumerate() {
        shares(s, f64::from(state.nominal[team].iter().sum::<u32>()));
    }
    shares(&mut total, capacity_gpus as f64);
    Simulation {
        minutes: MINUTES_PER_WEEK,
        capacity_gpus,
        teams: state.stats,
        total,
        idle_gpu_minutes,
    }
}

fn empty_stats(team: &str) -> TeamStats {
    TeamStats {
        team: team.to_owned(),
        wanted_gpu_minutes: 0.0,
        admitted_gpu_minutes: 0.0,
        busy_gpu_minutes: 0.0,
        jobs_submitted: 0,
        jobs_admitted: 0,
        queue_wait_p50_min: None,
        queue_wait_p95_min: None,
        preemptions: 0,
        rework_gpu_hours: 0.0,
        unserved_inference_pct: None,
        flapping_cycles: 0,
        preemptions_caused_by_scale_up: 0,
        peak_borrowed_gpus: 0,
        peak_over_limit_gpus: 0,
        allocated_pct: None,
        busy_pct: None,
    }
}

fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    Some(sorted[i])
}

impl State<'_> {
    fn enqueue(&mut self, job: usize) {
        let key = |j: &Job| (Reverse(j.priority), j.arrival);
        let k = key(&self.jobs[job]);
        let queue = &self.pending[self.jobs[job].team];
        let at = queue.partition_point(|&other| (key(&self.jobs[other]), other) < (k, job));
        self.pending[self.jobs[job].team].insert(at, job);
    }

    /// Whether `gpus` more on `flavor` for `team` fit quota, cohort and the fleet.
    fn fits(&self, team: usize, f: usize, gpus: u32) -> bool {
        self.fits_given(
            team,
            f,
            gpus,
            self.usage[team][f],
            self.total_usage[f],
            self.pool_use[f],
        )
    }

    /// The same check against hypothetical usage (the team's, the flavor's, the pool's).
    fn fits_given(
        &self,
        team: usize,
        f: usize,
        gpus: u32,
        usage: u32,
        total: u32,
        pool_use: u32,
    ) -> bool {
        if total + gpus > self.capacity[f] {
            return false;
        }
        let new = usage + gpus;
        let limit =
            self.nominal[team][f].saturating_add(self.borrow_limit[team][f].unwrap_or(u32::MAX));
        if new > limit {
            return false;
        }
        let guaranteed = self.guaranteed[team][f];
        pool_use - usage.saturating_sub(guaranteed) + new.saturating_sub(guaranteed)
            <= self.pool_cap[f]
    }

    /// Adds (or, with `add` false, removes) `gpus` to a team's usage of a flavor, keeping the
    /// flavor total and the lending pool in step.
    fn add_usage(&mut self, team: usize, f: usize, gpus: u32, add: bool) {
        let guaranteed = self.guaranteed[team][f];
        let before = self.usage[team][f].saturating_sub(guaranteed);
        if add {
            self.usage[team][f] += gpus;
            self.total_usage[f] += gpus;
        } else {
            self.usage[team][f] -= gpus;
            self.total_usage[f] -= gpus;
        }
        let after = self.usage[team][f].saturating_sub(guaranteed);
        self.pool_use[f] = self.pool_use[f] - before + after;
    }

    fn admit_team(&mut self, team: usize, minute: u32) {
        let strict = self.scenario.quota.queueing == Queueing::StrictFifo;
        let mut i = 0;
        let mut preemption_tried = false;
        while i < self.pending[team].len() {
            let job = self.pending[team][i];
            let (f, gpus) = (self.jobs[job].flavor, self.jobs[job].gpus);
            let mut ok = self.fits(team, f, gpus);
            if !ok && !preemption_tried {
                // One preemption attempt per queue per minute, as Kueue's heads go.
                preemption_tried = true;
                ok = self.preempt_for(job, minute);
            }
            if ok {
                self.pending[team].remove(i);
                self.start(job, minute);
            } else if strict {
                break;
            } else {
                i += 1;
            }
        }
    }

    /// Evicts what Kueue's preemption allows so `job` fits; `false` (and nothing evicted) if it
    /// cannot be made to fit.
    fn preempt_for(&mut self, job: usize, minute: u32) -> bool {
        let (team, f, gpus, priority) = (
            self.jobs[job].team,
            self.jobs[job].flavor,
            self.jobs[job].gpus,
            self.jobs[job].priority,
        );
        let policy = &self.scenario.quota;
        let mut victims: Vec<usize> = Vec::new();
        // reclaimWithinCohort: Any — take back lent quota from borrowers, whatever their
        // priority, when the job fits within the team's nominal quota.
        if policy.cohort
            && policy.reclaim_within_cohort
            && self.usage[team][f] + gpus <= self.nominal[team][f]
        {
            for other in (0..self.usage.len()).filter(|&t| t != team) {
                let mut over = self.usage[other][f].saturating_sub(self.nominal[other][f]);
                let mut candidates: Vec<usize> = self.running[other][f]
                    .iter()
                    .copied()
                    .filter(|&j| self.jobs[j].preemptible)
                    .collect();
                candidates.sort_by_key(|&j| Reverse((self.jobs[j].started, j)));
                for j in candidates {
                    if over == 0 {
                        break;
                    }
                    over = over.saturating_sub(self.jobs[j].gpus);
                    victims.push(j);
                }
            }
        }
        // withinClusterQueue: LowerPriority.
        if policy.preempt_lower_priority {
            let mut own: Vec<usize> = self.running[team][f]
                .iter()
                .copied()
                .filter(|&j| self.jobs[j].preemptible && self.jobs[j].priority < priority)
                .collect();
            own.sort_by_key(|&j| (self.jobs[j].priority, Reverse(self.jobs[j].started), j));
            victims.extend(own);
        }
        if victims.is_empty() {
            return false;
        }
        // Evict in order only as many as needed; if even all are not enough, evict none.
        let mut usage: Vec<u32> = (0..self.usage.len()).map(|t| self.usage[t][f]).collect();
        let (mut total, mut pool_use) = (self.total_usage[f], self.pool_use[f]);
        for (n, &v) in victims.iter().enumerate() {
            let (vt, vg) = (self.jobs[v].team, self.jobs[v].gpus);
            let guaranteed = self.guaranteed[vt][f];
            pool_use = pool_use - usage[vt].saturating_sub(guaranteed)
                + (usage[vt] - vg).saturating_sub(guaranteed);
            usage[vt] -= vg;
            total -= vg;
            if self.fits_given(team, f, gpus, usage[team], total, pool_use) {
                for &v in &victims[..=n] {
                    self.evict(v, minute);
                    if self.jobs[job].remaining == u32::MAX {
                        self.stats[team].preemptions_caused_by_scale_up += 1;
                    }
                }
                return true;
            }
        }
        false
    }

    fn start(&mut self, job: usize, minute: u32) {
        let cold_start = self.cold_start_of(job);
        let j = &mut self.jobs[job];
        if j.first_admit.is_none() {
            j.first_admit = Some(minute);
            if j.remaining != u32::MAX {
                self.stats[j.team].jobs_admitted += 1;
                self.waits[j.team].push(f64::from(minute - j.arrival));
            }
        }
        j.running = true;
        j.started = minute;
        j.generation += 1;
        let (team, f, gpus) = (j.team, j.flavor, j.gpus);
        if j.remaining != u32::MAX {
            self.ends
                .push(Reverse((minute + j.remaining, job, j.generation)));
        } else {
            j.ready_at = minute + cold_start;
        }
        self.add_usage(team, f, gpus, true);
        self.running[team][f].push(job);
    }

    fn cold_start_of(&self, job: usize) -> u32 {
        let w = self.workload(self.jobs[job].workload);
        w.inference.as_ref().map_or(0, |i| i.cold_start_min())
    }

    fn workload(&self, index: usize) -> &crate::scenario::Workload {
        self.workloads[index]
    }

    /// Closes the job's running interval: admitted GPU-minutes.
    fn account(&mut self, job: usize, minute: u32) {
        let j = &self.jobs[job];
        self.stats[j.team].admitted_gpu_minutes +=
            f64::from(j.gpus) * f64::from(minute - j.started);
    }

    fn stop(&mut self, job: usize, minute: u32) {
        self.account(job, minute);
        let j = &mut self.jobs[job];
        j.running = false;
        let (team, f, gpus) = (j.team, j.flavor, j.gpus);
        self.add_usage(team, f, gpus, false);
        if let Some(at) = self.running[team][f].iter().position(|&r| r == job) {
            self.running[team][f].swap_remove(at);
        }
    }

    /// Eviction: the work since the last checkpoint is lost and the job queues again.
    fn evict(&mut self, job: usize, minute: u32) {
        self.stop(job, minute);
        let j = &mut self.jobs[job];
        j.generation += 1;
        self.stats[j.team].preemptions += 1;
        if j.remaining == u32::MAX {
            let team = j.team;
            self.pending[team].push(job);
            return;
        }
        let ran = minute - j.started;
        // Work up to the last checkpoint is kept; with no checkpoints, nothing is.
        let kept = ran
            .checked_div(j.checkpoint)
            .map_or(0, |n| n * j.checkpoint);
        let lost = ran - kept;
        j.remaining -= kept;
        self.stats[j.team].rework_gpu_hours += f64::from(j.gpus) * f64::from(lost) / 60.0;
        self.enqueue(job);
    }

    /// KEDA for one inference class at `minute`.
    fn scale(&mut self, inf: &mut Autoscaler, minute: u32) {
        let hour = (minute / 60) as usize % HOURS_PER_WEEK;
        let demand_gpus = inf.hourly.get(hour).copied().unwrap_or(0.0);
        let replica_capacity = inf.tokens_per_gpu * f64::from(inf.gpus_per_replica);
        let demand = demand_gpus * inf.tokens_per_gpu;
        let current = inf.replicas.len() as u32;
        let below_activation = demand < inf.activation * replica_capacity;
        let mut desired = (demand / (replica_capacity * inf.threshold)).ceil() as u32;
        if below_activation {
            // The ScaledObject is inactive: it stays at zero, or drops to zero once
            // cooldownPeriod has passed (min_replicas still holds, below).
            let since = *inf.below_activation_since.get_or_insert(minute);
            desired = if current > 0 && minute - since < inf.cooldown_min {
                desired.max(1)
            } else {
                0
            };
        } else {
            inf.below_activation_since = None;
            desired = desired.max(1);
        }
        desired = desired.clamp(inf.min, inf.max.max(inf.min));
        inf.recent_desired.push(desired);
        if inf.recent_desired.len() > STABILISATION_MIN as usize {
            inf.recent_desired.remove(0);
        }
        // Scale down to the highest recommendation of the stabilisation window.
        let target = if desired >= current {
            desired
        } else {
            inf.recent_desired.iter().copied().max().unwrap_or(desired)
        };
        if target > current {
            if inf
                .last_scale_down
                .is_some_and(|down| minute - down <= FLAP_WINDOW_MIN)
            {
                self.stats[inf.team].flapping_cycles += 1;
                inf.last_scale_down = None;
            }
            for _ in current..target {
                let (team, flavor) = (inf.team, self.flavor_of(inf.workload));
                self.jobs.push(Job {
                    team,
                    flavor,
                    workload: inf.workload,
                    gpus: inf.gpus_per_replica,
                    remaining: u32::MAX,
                    priority: INFERENCE_PRIORITY,
                    preemptible: false,
                    checkpoint: 0,
                    busy: 0.0,
                    arrival: minute,
                    first_admit: None,
                    started: minute,
                    running: false,
                    generation: 0,
                    ready_at: u32::MAX,
                });
                let id = self.jobs.len() - 1;
                inf.replicas.push(id);
                self.enqueue(id);
            }
        } else if target < current {
            inf.last_scale_down = Some(minute);
            // Remove pending replicas first, then the newest running ones.
            inf.replicas
                .sort_by_key(|&r| (self.jobs[r].running, Reverse(self.jobs[r].started), r));
            for r in inf
                .replicas
                .drain(..(current - target) as usize)
                .collect::<Vec<_>>()
            {
                if self.jobs[r].running {
                    self.stop(r, minute);
                } else if let Some(at) =
                    self.pending[self.jobs[r].team].iter().position(|&p| p == r)
                {
                    self.pending[self.jobs[r].team].remove(at);
                }
            }
        }
    }

    fn flavor_of(&self, workload: usize) -> usize {
        let name = &self.workload(workload).flavor;
        self.scenario
            .fleet
            .iter()
            .position(|a| &a.flavor == name)
            .unwrap_or(0)
    }

    /// Traffic served this minute by ready replicas; the rest is unserved.
    fn serve(&mut self, inf: &mut Autoscaler, minute: u32) {
        let hour = (minute / 60) as usize % HOURS_PER_WEEK;
        let demand = inf.hourly.get(hour).copied().unwrap_or(0.0) * inf.tokens_per_gpu;
        let ready = inf
            .replicas
            .iter()
            .filter(|&&r| self.jobs[r].running && self.jobs[r].ready_at <= minute)
            .count();
        let capacity = ready as f64 * f64::from(inf.gpus_per_replica) * inf.tokens_per_gpu;
        let served = demand.min(capacity);
        inf.demand_tokens += demand * 60.0;
        inf.unserved_tokens += (demand - served) * 60.0;
        let busy_pct = f64::from(self.workload(inf.workload).busy_pct) / 100.0;
        let busy_gpus = served / inf.tokens_per_gpu * busy_pct;
        self.stats[inf.team].busy_gpu_minutes += busy_gpus;
        self.busy_now += busy_gpus;
    }
}

#[cfg(test)]
mod properties {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::scenario::*;

    /// Small random scenarios: 1-2 flavors, 1-4 teams, batch and inference classes, quotas with
    /// and without borrowing limits.
    fn arb_scenario() -> impl Strategy<Value = Scenario> {
        let team = (
            0u32..40,
            prop::option::of(0u32..20),
            prop::option::of(0u32..20),
            prop::collection::vec(
                (
                    0usize..4,
                    0.0f64..40.0,
                    1u32..8,
                    10u32..600,
                    0u32..60,
                    -5i32..5,
                    any::<bool>(),
                    0usize..3,
                ),
                1..4,
            ),
        );
        (
            1u32..3,
            prop::collection::vec(8u32..64, 2),
            prop::collection::vec(team, 1..5),
            any::<bool>(),
            any::<bool>(),
            0u64..1000,
        )
            .prop_map(|(flavor_count, counts, teams, cohort, strict, seed)| {
                let flavors: Vec<String> = (0..flavor_count).map(|f| format!("f{f}")).collect();
                let fleet = flavors
                    .iter()
                    .zip(&counts)
                    .map(|(f, &count)| Accelerator {
                        flavor: f.clone(),
                        gpu_model: "H100-SXM5-80GB".into(),
                        count,
                        gpus_per_node: 8,
                        price_cents_per_gpu_hour: 300,
                    })
                    .collect();
                let teams = teams
                    .into_iter()
                    .enumerate()
                    .map(|(t, (nominal, borrow, lend, works))| {
                        let f = flavors[t % flavors.len()].clone();
                        let one = |v: Option<u32>| -> BTreeMap<String, u32> {
                            v.filter(|_| cohort)
                                .map(|v| (f.clone(), v))
                                .into_iter()
                                .collect()
                        };
                        Team {
                            name: format!("t{t}"),
                            nominal_gpus: [(f.clone(), nominal)].into_iter().collect(),
                            borrowing_limit_gpus: one(borrow),
                            lending_limit_gpus: one(lend),
                            workloads: works
                                .into_iter()
                                .enumerate()
                                .map(
                                    |(
                                        i,
                                        (
                                            kind,
                                            peak,
                                            gpus,
                                            minutes,
                                            ckpt,
                                            priority,
                                            preemptible,
                                            preset,
                                        ),
                                    )| {
                                        let kind = [
                                            WorkloadKind::PreTraining,
                                            WorkloadKind::FineTuning,
                                            WorkloadKind::Batch,
                                            WorkloadKind::Inference,
                                        ][kind];
                                        let preset = [
                                            Preset::Flat,
                                            Preset::BusinessHoursDiurnal,
                                            Preset::WeeklyBatch,
                                        ][preset];
                                        Workload {
                                            name: format!("w{i}"),
                                            kind,
                                            flavor: f.clone(),
                                            demand: Demand::Preset {
                                                preset,
                                                peak_gpus: peak,
                                            },
                                            gpus_per_job: gpus,
                                            job_minutes: minutes,
                                            checkpoint_minutes: ckpt,
                                            priority,
                                            preemptible: preemptible
                                                && kind != WorkloadKind::Inference,
                                            busy_pct: 80,
                                            tenants: 1,
                                            slo: false,
                                            inference: (kind == WorkloadKind::Inference).then_some(
                                                Inference {
                                                    tokens_per_s_per_gpu: 1000,
                                                    cold_start_s: 120,
                                                    warm_cache_cold_start_s: None,
                                                    min_replicas: 0,
                                                    max_replicas: 16,
                                                    threshold_pct: 70,
                                                    activation_threshold_pct: 5,
                                                    cooldown_s: 300,
                                                },
                                            ),
                                            current_isolation: None,
                                        }
                                    },
                                )
                                .collect(),
                        }
                    })
                    .collect();
                Scenario {
                    version: SCENARIO_VERSION,
                    name: "property".into(),
                    seed,
                    fleet,
                    teams,
                    quota: QuotaPolicy {
                        cohort,
                        queueing: if strict {
                            Queueing::StrictFifo
                        } else {
                            Queueing::BestEffortFifo
                        },
                        reclaim_within_cohort: true,
                        preempt_lower_priority: true,
                    },
                    constraints: bench_scenario().constraints,
                    weights: Weights::default(),
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn the_week_conserves_gpu_minutes_and_respects_quota(s in arb_scenario()) {
            prop_assert!(s.validate().is_ok(), "{:?}", s.validate());
            let sim = simulate(&s);
            let capacity = sim.capacity_gpus as f64 * f64::from(sim.minutes);
            // Admitted (summed per job interval) + idle (counted per minute) = capacity × time.
            prop_assert_eq!(sim.total.admitted_gpu_minutes + sim.idle_gpu_minutes, capacity);
            for (team, stats) in s.teams.iter().zip(&sim.teams) {
                // Never above nominal + borrowing limit; never borrowing without a cohort.
                prop_assert_eq!(stats.peak_over_limit_gpus, 0, "{}", team.name);
                if !s.quota.cohort {
                    prop_assert_eq!(stats.peak_borrowed_gpus, 0);
                }
                if let Some(limit) = team.borrowing_limit_gpus.values().next() {
                    prop_assert!(stats.peak_borrowed_gpus <= *limit);
                }
            }
            prop_assert!(sim.total.busy_pct <= sim.total.allocated_pct.map(|a| a + 1e-9));
        }

        #[test]
        fn a_shared_pool_never_needs_more_gpus_than_separate_pools(s in arb_scenario()) {
            let sizing = crate::sizing::size(&s);
            prop_assert!(sizing.shared_pool.gpus <= sizing.separate_pools.gpus);
            for f in &sizing.by_flavor {
                prop_assert!(f.shared_gpus <= f.separate_gpus);
            }
        }
    }
}
