//! A week of demand under Kueue semantics, minute by minute, deterministic for a seed.
//!
//! Model: one ClusterQueue per team with a nominal quota per flavor; with a cohort, unused
//! quota is lent (up to each lender's `lendingLimit`) and borrowed (up to each borrower's
//! `borrowingLimit`); admission is all-or-nothing. Each minute runs Kueue's scheduling cycles
//! (v0.19, pkg/scheduler/scheduler.go): a cycle takes one head per queue and sorts them (within
//! nominal quota first, then priority, then creation); inside a queue, priority then arrival,
//! StrictFIFO or BestEffortFIFO. Preemption as Kueue's classical preemption
//! (pkg/scheduler/preemption): `reclaimWithinCohort: Any` evicts workloads of borrowing
//! queues whatever their priority (inference replicas included: Kueue has no per-workload
//! protection), `withinClusterQueue: LowerPriority` lower-priority work of the same queue; a
//! job that fits within its queue's nominal quota may evict any of them; one that must borrow
//! evicts other queues' work while borrowing only as `borrowWithinCohort` allows, else only if
//! it then lands within nominal; candidates from other queues first, then lowest priority,
//! then most recently admitted, trimmed to the fewest needed. A preemptor holds its victims'
//! GPUs while they terminate (a minute) and stays its queue's head meanwhile, so a queue
//! reclaims one termination at a time. Batch classes arrive as jobs whose rate gives the demand
//! profile (Little's law), plus a standing backlog renewed as it completes (elastic filler: its
//! evictions are reported as reclaims, apart from the preemptions of submitted jobs);
//! inference replicas scale like KEDA (threshold, activationThreshold, cooldownPeriod, a
//! 5-minute scale-down stabilisation) and serve only after their cold start. A preempted job
//! loses the work done since its last checkpoint.
//!
//! A class may run on any flavor of its GPU model (its pods select the model's node label and
//! the exported queues list the model's flavors in one resource group), tried in the fleet's
//! order as Kueue's flavor assigner tries them with its default `flavorFungibility`: the first
//! that fits within nominal quota or by borrowing, else preemption on one where the job lands
//! within nominal. A replica's cache warms by use.
//!
//! Work smaller than a GPU holds the share of a card the isolation plan packs it to
//! (`ClassIsolation::jobs_per_card`: MIG instances of its profile, HAMi vGPUs, MPS or
//! time-slicing replicas, each within what the sizing packs), counted in slices of a card
//! ([`SLICES_PER_GPU`]) against quotas, lending pools and nodes alike: a team's quota in GPUs
//! holds seven `1g.10gb` jobs per GPU on H100s. Where the week and the sizing still differ: the
//! sizing packs every class smaller than a card, the week only those the plan shares (a class
//! kept on whole cards for isolation holds a card per job); nodes are a flavor's slices, not
//! cards with MIG layouts (fragmentation is `packing`'s subject).
//!
//! Kueue admits on quota, not on nodes: when nominal quotas add up to more than a flavor's
//! cards, admitted pods wait Pending until the kube-scheduler finds them room (counted as
//! Pending GPU-minutes, never as a preemption); cards outside every quota serve no one, since
//! a ClusterQueue borrows only the unused nominal quota of others.
//!
//! Invariants (tested): admitted GPU-minutes on nodes + idle GPU-minutes = capacity × minutes;
//! no team ever holds more than its nominal quota plus its borrowing limit; lendingLimit holds.
//!
//! Scale: the week's jobs are drawn before it starts, 12 bytes each, and made whole only as
//! they arrive; a finished job's place goes to the next. Memory follows the jobs queued or
//! running at once, time the jobs of the week (a 10,000-card fleet of one-hour jobs, 1.69
//! million, in about a second).
//!
//! Rooms: `quota` (Kueue's arithmetic), `job` (the work and its arrivals), `autoscale`
//! (KEDA), `running` (each queue's admitted work in victim order), `week` (the minute's
//! steps); this file runs the week and sums it up.

mod autoscale;
mod job;
mod pending;
mod quota;
mod running;
mod week;

use serde::{Deserialize, Serialize};

use crate::{
    common::interrupt::{Interrupt, Interrupted, Never},
    planning::{
        isolation::IsolationPlan,
        scenario::{HOURS_PER_WEEK, Scenario},
    },
};

pub use self::job::{MAX_REPLAY_TEMPLATES, Recorded};
use self::week::Week;

pub const MINUTES_PER_WEEK: u32 = (HOURS_PER_WEEK as u32) * 60;

/// What the week counts a card in: the least common multiple of 1 to 16, so a card shared by
/// up to 16 jobs gives each a whole number of slices (more than 16 to a card gives each the
/// whole slices of its share: at most 16 slices of 720,720 short).
pub const SLICES_PER_GPU: u64 = 720_720;

/// `gpus` whole cards, in slices.
fn slices(gpus: u32) -> u64 {
    u64::from(gpus) * SLICES_PER_GPU
}

/// `slices`, in GPUs.
fn gpus(slices: u64) -> f64 {
    slices as f64 / SLICES_PER_GPU as f64
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamStats {
    pub team: String,
    /// What the week asks for, in two units: batch GPU-minutes of the demand profiles, and
    /// inference traffic in GPUs' worth × minutes (replicas hold more: traffic ÷ threshold).
    pub wanted_batch_gpu_minutes: f64,
    pub wanted_traffic_gpu_minutes: f64,
    /// Everything held: the four parts below add up to it.
    pub admitted_gpu_minutes: f64,
    /// Batch jobs that arrived this week, rework after evictions included.
    pub batch_gpu_minutes: f64,
    /// Jobs already running when the week starts (not in wanted).
    pub warm_start_gpu_minutes: f64,
    /// Backlog work (not in wanted).
    pub backlog_gpu_minutes: f64,
    /// Inference replicas, cold starts included.
    pub replica_gpu_minutes: f64,
    /// Of those, the replicas' cold starts (placed, loading weights, not yet serving).
    pub cold_start_gpu_minutes: f64,
    /// What warm node-local caches cut from the cold starts: each replica that loaded from
    /// one would have loaded from object storage for this much longer (as far as it ran).
    pub cold_start_cut_by_cache_gpu_minutes: f64,
    /// Admitted GPU-minutes whose pods waited for nodes (Kueue admits on quota: when nominal
    /// quotas add up to more than a flavor's cards, admitted pods stay Pending). Part of
    /// admitted, not of any GPU's time.
    pub pending_gpu_minutes: f64,
    /// Work of this week's arrivals still queued or running at its end.
    pub unfinished_gpu_minutes: f64,
    pub busy_gpu_minutes: f64,
    /// Batch jobs submitted (this week's arrivals and the work running at its start; backlog
    /// filler is not submitted work).
    pub jobs_submitted: u64,
    pub jobs_admitted: u64,
    /// Minutes from arrival to first admission (submitted batch jobs).
    pub queue_wait_p50_min: Option<f64>,
    pub queue_wait_p95_min: Option<f64>,
    /// Times this team's submitted jobs and inference replicas were evicted.
    pub preemptions: u64,
    /// Work those evictions lost since the last checkpoint.
    pub rework_gpu_hours: f64,
    /// Times this team's backlog (elastic filler on idle quota) was reclaimed, and the work
    /// lost with it: reclaiming it is what it is for, so it is not counted in `preemptions`.
    pub backlog_reclaims: u64,
    pub backlog_rework_gpu_hours: f64,
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
    /// Admitted GPU-minutes on nodes (not Pending) ÷ the team's nominal quota (the fleet, for
    /// the total), in %; over 100 when the team borrowed. None without quota.
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

/// Simulates one week of `scenario` (which must be valid), its classes packed as `isolation`
/// (the scenario's isolation plan) says.
pub fn simulate(scenario: &Scenario, isolation: &IsolationPlan) -> Simulation {
    match simulate_until(scenario, isolation, &Never) {
        Ok(simulation) => simulation,
        Err(Interrupted) => unreachable!("Never does not fire"),
    }
}

/// [`simulate`], checking `stop` every simulated minute.
pub fn simulate_until(
    scenario: &Scenario,
    isolation: &IsolationPlan,
    stop: &dyn Interrupt,
) -> Result<Simulation, Interrupted> {
    let (week, autoscalers) = run(scenario, job::plan(scenario, isolation), None, stop)?;
    Ok(sum_up(week, &autoscalers))
}

/// The week of `recorded` batch jobs (a recorded week's Workloads) under `scenario`'s fleet and
/// quotas, instead of jobs drawn from its demand profiles: no backlog, no inference, each job
/// on whole cards. `Ok(None)` when a job names no batch class of the scenario (or more than
/// [`job::MAX_REPLAY_TEMPLATES`] class and size pairs are named).
pub fn replay_until(
    scenario: &Scenario,
    recorded: &[Recorded],
    stop: &dyn Interrupt,
) -> Result<Option<Simulation>, Interrupted> {
    Ok(replay_keeping_waits(scenario, recorded, stop)?.map(|(simulation, _)| simulation))
}

/// [`replay_until`], with each team's admission waits kept (weeks are merged by them).
pub(crate) fn replay_keeping_waits(
    scenario: &Scenario,
    recorded: &[Recorded],
    stop: &dyn Interrupt,
) -> Result<Option<(Simulation, Vec<Waits>)>, Interrupted> {
    let Some(plan) = job::replay_plan(scenario, recorded) else {
        return Ok(None);
    };
    let (week, autoscalers) = run(scenario, plan, None, stop)?;
    let waits = week.waits.clone();
    Ok(Some((sum_up(week, &autoscalers), waits)))
}

/// What happened to one replayed job, in the words of a Workload's conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Happened {
    /// Kueue reserved its quota, on the scenario's flavor of this index.
    Admitted {
        flavor: usize,
    },
    /// Preempted: it gave its quota back and queues again.
    Evicted,
    Finished,
}

/// One step of a replayed job's life: `job` is its index in the recorded jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub job: u64,
    pub minute: u32,
    pub happened: Happened,
}

/// [`replay_until`] with every admission, eviction and finish of every job, in the order the
/// week made them (within a minute, the order of its scheduling cycles): what a conformance
/// run sets beside the Workload conditions a real Kueue writes for the same jobs.
pub fn replay_traced(
    scenario: &Scenario,
    recorded: &[Recorded],
) -> Option<(Simulation, Vec<Event>)> {
    let plan = job::replay_plan(scenario, recorded)?;
    let (mut week, autoscalers) = match run(scenario, plan, Some(Vec::new()), &Never) {
        Ok(done) => done,
        Err(Interrupted) => unreachable!("Never does not fire"),
    };
    let events = week.trace.take().unwrap_or_default();
    Some((sum_up(week, &autoscalers), events))
}

/// The week of `plan`'s jobs and autoscalers, run to its end; with `trace`, each job's events
/// are added to it.
fn run(
    scenario: &Scenario,
    mut plan: job::Plan,
    trace: Option<Vec<Event>>,
    stop: &dyn Interrupt,
) -> Result<(Week, Vec<autoscale::Autoscaler>), Interrupted> {
    let mut autoscalers = std::mem::take(&mut plan.autoscalers);
    let stats = scenario
        .teams
        .iter()
        .zip(&plan.wanted)
        .map(|(t, &(batch, traffic))| TeamStats {
            wanted_batch_gpu_minutes: batch,
            wanted_traffic_gpu_minutes: traffic,
            ..empty_stats(&t.name)
        })
        .collect();
    let mut week = Week::new(scenario.quota.clone(), quota::of(scenario), plan, stats);
    week.trace = trace;
    for minute in 0..MINUTES_PER_WEEK {
        if stop.fired() {
            return Err(Interrupted);
        }
        week.complete(minute);
        week.arrive(minute);
        for scaler in &mut autoscalers {
            week.scale(scaler, minute);
        }
        week.admit(minute);
        week.place(minute);
        for scaler in &mut autoscalers {
            week.serve(scaler, minute);
        }
        week.count_idle();
    }
    week.close(MINUTES_PER_WEEK);
    Ok((week, autoscalers))
}

/// Per-team and total figures of the finished week.
fn sum_up(mut week: Week, autoscalers: &[autoscale::Autoscaler]) -> Simulation {
    for scaler in autoscalers {
        if scaler.demand_tokens > 0.0 {
            let s = &mut week.stats[scaler.team];
            let unserved = s.unserved_inference_pct.unwrap_or(0.0)
                + scaler.unserved_tokens / scaler.demand_tokens * 100.0;
            s.unserved_inference_pct = Some(unserved);
        }
    }
    let mut all_waits = Waits::default();
    for (team, waits) in week.waits.iter().enumerate() {
        week.stats[team].queue_wait_p50_min = waits.percentile(0.50);
        week.stats[team].queue_wait_p95_min = waits.percentile(0.95);
        all_waits.merge(waits);
    }
    let mut held = Held::default();
    for (team, h) in week.held.iter().enumerate() {
        h.write(&mut week.stats[team]);
        held.add(h);
    }
    let mut total = empty_stats("total");
    for s in &week.stats {
        total.wanted_batch_gpu_minutes += s.wanted_batch_gpu_minutes;
        total.wanted_traffic_gpu_minutes += s.wanted_traffic_gpu_minutes;
        total.busy_gpu_minutes += s.busy_gpu_minutes;
        total.jobs_submitted += s.jobs_submitted;
        total.jobs_admitted += s.jobs_admitted;
        total.preemptions += s.preemptions;
        total.rework_gpu_hours += s.rework_gpu_hours;
        total.backlog_reclaims += s.backlog_reclaims;
        total.backlog_rework_gpu_hours += s.backlog_rework_gpu_hours;
        total.flapping_cycles += s.flapping_cycles;
        total.preemptions_caused_by_scale_up += s.preemptions_caused_by_scale_up;
        total.peak_borrowed_gpus = total.peak_borrowed_gpus.max(s.peak_borrowed_gpus);
        total.peak_over_limit_gpus = total.peak_over_limit_gpus.max(s.peak_over_limit_gpus);
    }
    held.write(&mut total);
    let (unserved, demand): (f64, f64) = autoscalers.iter().fold((0.0, 0.0), |(u, d), s| {
        (u + s.unserved_tokens, d + s.demand_tokens)
    });
    total.unserved_inference_pct = (demand > 0.0).then(|| unserved / demand * 100.0);
    total.queue_wait_p50_min = all_waits.percentile(0.50);
    total.queue_wait_p95_min = all_waits.percentile(0.95);
    let minutes = f64::from(MINUTES_PER_WEEK);
    let shares = |s: &mut TeamStats, gpus: f64| {
        if gpus > 0.0 {
            let on_nodes = s.admitted_gpu_minutes - s.pending_gpu_minutes;
            s.allocated_pct = Some(on_nodes / (gpus * minutes) * 100.0);
            s.busy_pct = Some(s.busy_gpu_minutes / (gpus * minutes) * 100.0);
        }
    };
    for (team, s) in week.stats.iter_mut().enumerate() {
        let flavors = 0..week.quotas.capacity.len();
        shares(
            s,
            gpus(flavors.map(|f| week.quotas.nominal(team, f)).sum::<u64>()),
        );
    }
    let capacity_gpus: u64 = week.quotas.capacity.iter().sum::<u64>() / SLICES_PER_GPU;
    shares(&mut total, capacity_gpus as f64);
    Simulation {
        minutes: MINUTES_PER_WEEK,
        capacity_gpus,
        teams: week.stats,
        total,
        idle_gpu_minutes: gpus(week.idle),
    }
}

fn empty_stats(team: &str) -> TeamStats {
    TeamStats {
        team: team.to_owned(),
        wanted_batch_gpu_minutes: 0.0,
        wanted_traffic_gpu_minutes: 0.0,
        admitted_gpu_minutes: 0.0,
        batch_gpu_minutes: 0.0,
        warm_start_gpu_minutes: 0.0,
        backlog_gpu_minutes: 0.0,
        replica_gpu_minutes: 0.0,
        cold_start_gpu_minutes: 0.0,
        cold_start_cut_by_cache_gpu_minutes: 0.0,
        unfinished_gpu_minutes: 0.0,
        pending_gpu_minutes: 0.0,
        busy_gpu_minutes: 0.0,
        jobs_submitted: 0,
        jobs_admitted: 0,
        queue_wait_p50_min: None,
        queue_wait_p95_min: None,
        preemptions: 0,
        rework_gpu_hours: 0.0,
        backlog_reclaims: 0,
        backlog_rework_gpu_hours: 0.0,
        unserved_inference_pct: None,
        flapping_cycles: 0,
        preemptions_caused_by_scale_up: 0,
        peak_borrowed_gpus: 0,
        peak_over_limit_gpus: 0,
        allocated_pct: None,
        busy_pct: None,
    }
}

/// What a team's jobs held, in slice-minutes: whole numbers, so the parts add up to the whole
/// exactly (and admitted on nodes plus idle to the fleet's slice-minutes), however the jobs
/// share cards; GPU-minutes once the week is summed up.
#[derive(Debug, Clone, Copy, Default)]
struct Held {
    admitted: u64,
    /// Admitted, its pods waiting for nodes.
    pending: u64,
    /// Admitted, by part: this week's arrivals, the work running at its start, backlog,
    /// replicas.
    batch: u64,
    warm_start: u64,
    backlog: u64,
    replica: u64,
    /// Replicas loading weights, and what warm caches cut from that.
    cold_start: u64,
    cold_start_cut_by_cache: u64,
    /// This week's arrivals' work left at its end.
    unfinished: u64,
}

impl Held {
    fn add(&mut self, other: &Held) {
        self.admitted += other.admitted;
        self.pending += other.pending;
        self.batch += other.batch;
        self.warm_start += other.warm_start;
        self.backlog += other.backlog;
        self.replica += other.replica;
        self.cold_start += other.cold_start;
        self.cold_start_cut_by_cache += other.cold_start_cut_by_cache;
        self.unfinished += other.unfinished;
    }

    /// Sets `stats`' GPU-minutes from these.
    fn write(&self, stats: &mut TeamStats) {
        stats.admitted_gpu_minutes = gpus(self.admitted);
        stats.pending_gpu_minutes = gpus(self.pending);
        stats.batch_gpu_minutes = gpus(self.batch);
        stats.warm_start_gpu_minutes = gpus(self.warm_start);
        stats.backlog_gpu_minutes = gpus(self.backlog);
        stats.replica_gpu_minutes = gpus(self.replica);
        stats.cold_start_gpu_minutes = gpus(self.cold_start);
        stats.cold_start_cut_by_cache_gpu_minutes = gpus(self.cold_start_cut_by_cache);
        stats.unfinished_gpu_minutes = gpus(self.unfinished);
    }
}

/// Queue waits in whole minutes, as a count per minute: percentiles as of the sorted waits,
/// in memory that grows with the longest wait rather than with the jobs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Waits {
    /// Jobs that waited each number of minutes.
    counts: Vec<u32>,
    jobs: u64,
}

impl Waits {
    pub(crate) fn add(&mut self, minutes: u32) {
        let at = minutes as usize;
        if self.counts.len() <= at {
            self.counts.resize(at + 1, 0);
        }
        self.counts[at] += 1;
        self.jobs += 1;
    }

    pub(crate) fn merge(&mut self, other: &Waits) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.jobs += other.jobs;
    }

    /// The wait at `q` (0 to 1): the sorted waits' element at `round((n − 1) × q)`.
    pub(crate) fn percentile(&self, q: f64) -> Option<f64> {
        let index = (self.jobs.checked_sub(1)? as f64 * q).round() as u64;
        let mut below = 0;
        for (minutes, &count) in self.counts.iter().enumerate() {
            below += u64::from(count);
            if below > index {
                return Some(minutes as f64);
            }
        }
        None
    }
}

#[cfg(test)]
mod properties {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::{
        kueue::{BorrowPolicy, BorrowWithinCohort, Queueing, Reclaim, WithinQueue},
        planning::scenario::*,
    };

    /// A queue's queueing and preemption from drawn indices.
    fn drawn(reclaim: usize, within: usize, strict: bool) -> (Queueing, Reclaim, WithinQueue) {
        (
            if strict {
                Queueing::StrictFifo
            } else {
                Queueing::BestEffortFifo
            },
            [Reclaim::Any, Reclaim::LowerPriority, Reclaim::Never][reclaim],
            [
                WithinQueue::LowerPriority,
                WithinQueue::LowerOrNewerEqualPriority,
                WithinQueue::Never,
            ][within],
        )
    }

    /// Small random scenarios: 1-2 flavors (of one GPU model or two), 1-4 teams, batch and
    /// inference classes, some smaller than a card, quotas with and without borrowing limits,
    /// and every preemption policy.
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
            (0u64..1000, any::<bool>(), 0usize..3, 0usize..3),
            // borrowWithinCohort: `None` Never, else LowerPriority with this threshold.
            prop::option::of(prop::option::of(-5i32..5)),
        )
            .prop_map(
                |(
                    flavor_count,
                    counts,
                    teams,
                    cohort,
                    strict,
                    (seed, one_model, reclaim, within),
                    borrow,
                )| {
                    let flavors: Vec<String> = (0..flavor_count).map(|f| format!("f{f}")).collect();
                    let models = [
                        "H100-SXM5-80GB",
                        if one_model {
                            "H100-SXM5-80GB"
                        } else {
                            "H200-SXM-141GB"
                        },
                    ];
                    let fleet = flavors
                        .iter()
                        .zip(&counts)
                        .zip(models)
                        .map(|((f, &count), model)| Accelerator {
                            flavor: f.clone(),
                            gpu_model: model.into(),
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
                                queue_wait_target_min:
                                    crate::planning::scenario::DEFAULT_QUEUE_WAIT_TARGET_MIN,
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
                                                restart_minutes: 2,
                                                priority,
                                                preemptible: preemptible
                                                    && kind != WorkloadKind::Inference,
                                                // Small jobs busy a fifth of a card, so up
                                                // to five share one.
                                                busy_pct: if gpus == 1 && minutes % 2 == 0 {
                                                    20
                                                } else {
                                                    80
                                                },
                                                // Odd priorities: two tenants (HAMi or MIG
                                                // where the class shares cards).
                                                tenants: 1 + priority.rem_euclid(2) as u32,
                                                slo: false,
                                                inference: (kind == WorkloadKind::Inference)
                                                    .then_some(Inference {
                                                        tokens_per_s_per_gpu: 1000,
                                                        cold_start_s: 120,
                                                        warm_cache_cold_start_s: None,
                                                        min_replicas: 0,
                                                        max_replicas: 16,
                                                        threshold_pct: 70,
                                                        activation_threshold_pct: 5,
                                                        cooldown_s: 300,
                                                    }),
                                                backlog_gpus: 0.0,
                                                // Every other one-GPU class smaller than a
                                                // card (8, 16 or 24 GiB): packed as its
                                                // isolation says.
                                                mem_mib_per_job: (gpus == 1 && minutes % 2 == 0)
                                                    .then_some(8_192 * (1 + minutes % 3)),
                                                throughput: false,
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
                            queueing: drawn(reclaim, within, strict).0,
                            reclaim_within_cohort: drawn(reclaim, within, strict).1,
                            within_cluster_queue: drawn(reclaim, within, strict).2,
                            // Kueue's rule: only with a cohort that reclaims.
                            borrow_within_cohort: borrow
                                .filter(|_| cohort && reclaim != 2)
                                .map_or_else(BorrowWithinCohort::default, |threshold| {
                                    BorrowWithinCohort {
                                        policy: BorrowPolicy::LowerPriority,
                                        max_priority_threshold: threshold,
                                    }
                                }),
                        },
                        constraints: bench_scenario().constraints,
                        weights: Weights::default(),
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn the_week_conserves_gpu_minutes_and_respects_quota(s in arb_scenario()) {
            prop_assert!(s.validate().is_ok(), "{:?}", s.validate());
            let sim = simulate(&s, &crate::planning::isolation_plan(&s));
            let capacity = sim.capacity_gpus as f64 * f64::from(sim.minutes);
            // Admitted on nodes (admitted less Pending, summed per job interval) + idle
            // (counted per minute) = capacity × time. The week counts in slice-minutes, whole
            // numbers that add exactly, shared cards included; each figure here is rounded once
            // on its way to GPU-minutes (1/7 of a card has no exact binary fraction), so they
            // meet within a few units in the last place.
            let t = &sim.total;
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
            let on_nodes_and_idle = t.admitted_gpu_minutes - t.pending_gpu_minutes + sim.idle_gpu_minutes;
            prop_assert!(close(on_nodes_and_idle, capacity), "{on_nodes_and_idle} vs {capacity}");
            // Pods wait for nodes only where quota exceeds them.
            let overcommitted = s.fleet.iter().any(|a| {
                s.teams.iter().filter_map(|t| t.nominal_gpus.get(&a.flavor)).sum::<u32>() > a.count
            });
            prop_assert!(overcommitted || t.pending_gpu_minutes == 0.0, "{:?}", t);
            // Admitted is its four parts.
            let parts = t.batch_gpu_minutes + t.warm_start_gpu_minutes + t.backlog_gpu_minutes
                + t.replica_gpu_minutes;
            prop_assert!(close(parts, t.admitted_gpu_minutes), "{parts} vs {}", t.admitted_gpu_minutes);
            for (team, stats) in s.teams.iter().zip(&sim.teams) {
                // Never above nominal + borrowing limit; never borrowing without a cohort.
                prop_assert_eq!(stats.peak_over_limit_gpus, 0, "{}", team.name);
                if !s.quota.cohort {
                    prop_assert_eq!(stats.peak_borrowed_gpus, 0);
                }
                // With its model's only flavor limited, that limit bounds all it borrows.
                let flavor = &team.workloads[0].flavor;
                let model = |f: &str| s.accelerator(f).map(|a| a.gpu_model.clone());
                let alone = s.fleet.iter().filter(|a| model(&a.flavor) == model(flavor)).count() == 1;
                if let (true, Some(limit)) = (alone, team.borrowing_limit_gpus.get(flavor)) {
                    prop_assert!(stats.peak_borrowed_gpus <= *limit);
                }
            }
            prop_assert!(sim.total.busy_pct <= sim.total.allocated_pct.map(|a| a + 1e-9));
            // Jobs that share a card keep it no busier than its whole time: each team's busy
            // GPU-minutes stay within what it held on nodes.
            for stats in &sim.teams {
                let on_nodes = stats.admitted_gpu_minutes - stats.pending_gpu_minutes;
                prop_assert!(stats.busy_gpu_minutes <= on_nodes + 1e-6, "{stats:?}");
            }
        }

        /// Kueue preempts only for a workload that does not fit: with quota for every job and
        /// replica of the week at once, nothing is preempted and nothing waits. The quota is on
        /// the first flavor of the class's model, where Kueue's flavor assigner looks first: a
        /// queue whose quota sat on a later flavor of the same model would borrow on the first
        /// one while it fits there (`whenCanBorrow: MayStopSearch`, cluster_queue.md,
        /// "FlavorFungibility") and be reclaimed by its owner.
        #[test]
        fn nothing_is_preempted_or_waits_when_everything_fits_at_once(s in arb_scenario()) {
            let first = simulate(&s, &crate::planning::isolation_plan(&s));
            let mut roomy = s.clone();
            for f in &mut roomy.fleet {
                f.count = 0;
            }
            let first_of_model = |flavor: &str| {
                let model = s.accelerator(flavor).map(|a| a.gpu_model.clone());
                let alike = s.fleet.iter().find(|a| Some(&a.gpu_model) == model.as_ref());
                alike.map_or(flavor.to_owned(), |a| a.flavor.clone())
            };
            for (team, stats) in roomy.teams.iter_mut().zip(&first.teams) {
                let flavor = first_of_model(&team.workloads[0].flavor);
                let largest = team.workloads.iter().map(|w| w.gpus_per_job).max().unwrap_or(0);
                let replicas: u64 = team
                    .workloads
                    .iter()
                    .filter_map(|w| w.inference.as_ref().map(|i| u64::from(i.max_replicas * w.gpus_per_job)))
                    .sum();
                let all = u32::try_from(stats.jobs_submitted * u64::from(largest) + replicas)
                    .expect("fits in u32");
                team.nominal_gpus = [(flavor.clone(), all)].into_iter().collect();
                let acc = roomy.fleet.iter_mut().find(|a| a.flavor == flavor).expect("its flavor");
                acc.count += all;
            }
            let sim = simulate(&roomy, &crate::planning::isolation_plan(&roomy));
            prop_assert_eq!(sim.total.jobs_submitted, first.total.jobs_submitted);
            prop_assert_eq!(sim.total.preemptions, 0);
            prop_assert_eq!(sim.total.backlog_reclaims, 0);
            prop_assert!(sim.total.queue_wait_p95_min.is_none_or(|w| w == 0.0), "{:?}", sim.total);
        }

        #[test]
        fn a_shared_pool_never_needs_more_gpus_than_separate_pools(s in arb_scenario()) {
            let sizing = crate::planning::sizing::size(&s);
            prop_assert!(sizing.shared_pool.gpus <= sizing.separate_pools.gpus);
            for f in &sizing.by_flavor {
                prop_assert!(f.shared_gpus <= f.separate_gpus);
            }
        }
    }
}
