//! Planned vs measured: a recorded week's Workloads replayed through the week engine under
//! the quotas in force, set beside what the fleet measured that week, per ClusterQueue (one per
//! team). How far the planner's figures can be trusted, learnt from the fleet's own week.
//!
//! The replay's scenario is the one derived from the history (`from_history`, over the week
//! and the week before it: the fleet, the quotas in force on the week's last day, the classes'
//! priorities, checkpoints and busy shares). Its jobs are the recorded ones, not drawn:
//! - a Workload admitted before the week and not finished by its start runs from minute 0
//!   (in the order Kueue admitted them) for what it still ran;
//! - one created before the week and still waiting at its start arrives at minute 0, one
//!   created in the week at its minute of creation;
//! - each holds its own whole GPUs on the flavor Kueue admitted it on, and works for its last
//!   recorded run (last admission to finish, or to the week's end while it runs: all the work
//!   it still had, less what a checkpoint kept from before an eviction, so at least what it
//!   needed); one never admitted works its class's mean run, since its own is unknown, on its
//!   class's flavor.
//!
//! The figures, each measured as the week engine counts it:
//! - admission wait p50 / p95: minutes from arrival in the week (creation, or the week's start)
//!   to admission, of the jobs admitted by the week's end (percentile: the sorted waits'
//!   element at round((n − 1) × q), as the week counts: to the first admission);
//! - evictions: the recorded evictions in the week; the week's preemptions;
//! - admitted GPU-hours in the week: GPUs × the minutes inside the week it held its quota
//!   (first admission to finish; for an evicted one, to its first eviction and from its last
//!   admission, so without any run between a second eviction and the last admission: at
//!   least); the week's admitted GPU-hours;
//! - busy GPU-hours: DCGM's busy time of the team's namespace over the week (only when DCGM
//!   observed the namespace on all 7 days); the week's busy (its jobs' GPUs × the class's busy
//!   share, the share itself measured by DCGM).
//!
//! Errors are planned − measured, and in % of measured (none where measured is 0).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    chargeback::UsageDay,
    cluster::workload::HistoryEntry,
    common::{
        day::Day,
        error::FieldError,
        interrupt::{Interrupt, Interrupted},
        validate::required_day,
    },
    planning::{
        from_history::{self, FromHistory},
        scenario::{Scenario, WorkloadKind},
        simulate::{self, MINUTES_PER_WEEK, Recorded, TeamStats, Waits},
    },
    quota::{QuotaSpec, QuotaWorld},
};

const MS_PER_MINUTE: i64 = 60_000;
const US_PER_HOUR: f64 = 3_600_000_000.0;
/// The days a replayed week holds.
pub const WEEK_DAYS: i32 = 7;

/// `GET /api/plan/replay?from=DAY`: the week of 7 days from `from` (UTC). Default: the last 7
/// whole days before today.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReplayQuery {
    pub from: Option<String>,
}

impl ReplayQuery {
    /// The week's first day: it must have ended by `today`.
    pub fn checked(&self, today: Day) -> Result<Day, Vec<FieldError>> {
        let latest = today.plus(-WEEK_DAYS);
        let Some(text) = self.from.as_deref() else {
            return Ok(latest);
        };
        let mut errors = Vec::new();
        match required_day("from", Some(text), &mut errors) {
            Some(from) if from > latest => Err(vec![FieldError {
                path: "from".to_owned(),
                message: format!(
                    "the week from {from} has not ended: the latest week to replay starts on {latest}"
                ),
            }]),
            Some(from) => Ok(from),
            None => Err(errors),
        }
    }
}

/// What the replay reads first: the days from which Workloads and DCGM's use are read (the
/// week before it too, for the Workloads running or waiting as it starts).
pub fn window(from: Day) -> (Day, Day) {
    (from.plus(-WEEK_DAYS), from.plus(WEEK_DAYS))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replay {
    pub from: Day,
    /// The week's last day, included.
    pub to: Day,
    /// Workloads replayed.
    pub workloads: u64,
    /// Per team (its ClusterQueue), in the scenario's order.
    pub teams: Vec<Comparison>,
    pub total: Comparison,
    /// What could not be replayed or measured, in words (the derivation's included).
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub team: String,
    pub figures: Vec<Compared>,
}

/// One figure, planned and measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compared {
    pub figure: Figure,
    pub planned: Option<f64>,
    pub measured: Option<f64>,
    /// planned − measured.
    pub error: Option<f64>,
    /// The error in % of measured; None where measured is 0.
    pub error_pct: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    WaitP50Minutes,
    WaitP95Minutes,
    Evictions,
    AdmittedGpuHours,
    BusyGpuHours,
}

/// A replay under way: Workloads are added one at a time (as the history is read in pages),
/// each kept in a few dozen bytes.
pub struct Replayer {
    from: Day,
    from_ms: i64,
    end_ms: i64,
    /// Namespace → team index, as the derivation's scenario lists teams.
    teams: BTreeMap<String, usize>,
    namespaces: Vec<String>,
    jobs: Vec<Job>,
    /// Workloads in no team's namespace, or holding no GPUs.
    left_out: usize,
}

/// One recorded Workload as the replay reads it.
struct Job {
    team: usize,
    /// The flavor of each resource Kueue admitted it with (`podSetAssignments`), over its pod
    /// sets: a launcher's CPU flavor beside its workers' GPU flavor; empty when never admitted.
    flavors: Vec<(String, String)>,
    priority: i32,
    /// Its extended resources (`nvidia.com/gpu` …), summed over its pod sets.
    resources: Vec<(String, u64)>,
    created_ms: i64,
    /// Its first admission.
    admitted_ms: Option<i64>,
    /// Its first eviction after that, and its last admission (its first, unless evicted and
    /// admitted again): it held its quota from the first admission to the first eviction and
    /// from the last admission on.
    evicted_ms: Option<i64>,
    last_admitted_ms: Option<i64>,
    /// When it finished or Kueue deleted it.
    ended_ms: Option<i64>,
    evictions_in_week: u64,
}

impl Replayer {
    /// The week from `from` of `world`'s teams (in its order, as the derivation lists them).
    pub fn new(from: Day, world: &QuotaWorld) -> Self {
        let namespaces: Vec<String> = world.teams.iter().map(|t| t.namespace.clone()).collect();
        Replayer {
            from,
            from_ms: from_history::day_ms(from),
            end_ms: from_history::day_ms(from.plus(WEEK_DAYS)),
            teams: namespaces
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i))
                .collect(),
            namespaces,
            jobs: Vec::new(),
            left_out: 0,
        }
    }

    /// One recorded Workload (any window's: those not alive in the week are passed over).
    pub fn add(&mut self, entry: &HistoryEntry) {
        let w = &entry.workload;
        let ended_ms = w.finished.as_ref().map(|f| f.at_ms).or(entry.gone_at_ms);
        if w.created_at_ms >= self.end_ms || ended_ms.is_some_and(|e| e <= self.from_ms) {
            return;
        }
        let Some(&team) = self.teams.get(&w.namespace) else {
            self.left_out += 1;
            return;
        };
        let flavors = w
            .pod_sets
            .iter()
            .flat_map(|s| s.flavors.iter())
            .map(|(resource, flavor)| (resource.clone(), flavor.clone()))
            .collect();
        let evictions_in_week = entry
            .evictions_seen
            .iter()
            .filter(|t| (self.from_ms..self.end_ms).contains(&t.at_ms))
            .count() as u64;
        self.jobs.push(Job {
            team,
            flavors,
            priority: w.priority,
            resources: w
                .resources()
                .into_iter()
                .map(|(name, n)| (name.to_owned(), n))
                .collect(),
            created_ms: w.created_at_ms,
            admitted_ms: w.admitted_at_ms,
            evicted_ms: (entry.evictions_seen.iter())
                .map(|t| t.at_ms)
                .find(|&at| w.admitted_at_ms.is_some_and(|a| a <= at)),
            last_admitted_ms: entry.last_admitted_at_ms.or(w.admitted_at_ms),
            ended_ms,
            evictions_in_week,
        });
    }

    /// Replays the week under `derived`'s scenario (derived from `m`) and compares it with
    /// what was measured (`m.usage`: DCGM's use by day, of any days; the week's are read).
    pub fn finish(
        mut self,
        derived: &FromHistory,
        m: &from_history::Measured,
        stop: &dyn Interrupt,
    ) -> Result<Replay, Interrupted> {
        let scenario = &derived.scenario;
        let mut problems = derived.problems.clone();
        let (from, last) = (self.from, self.from.plus(WEEK_DAYS - 1));
        if quota_ids(m, from) != quota_ids(m, last) {
            problems.push(format!(
                "the quotas changed during the week: replayed under those in force on {last}"
            ));
        }
        let (recorded, mut measured) = self.prepare(scenario);
        if self.left_out > 0 {
            problems.push(format!(
                "{} Workloads not replayed: in namespaces no team owns, or holding no whole GPUs of a flavor",
                self.left_out
            ));
        }
        for (team, m) in scenario.teams.iter().zip(&measured) {
            if m.admitted_gpu_minutes > 0 && team.nominal_gpus.values().all(|n| *n == 0) {
                problems.push(format!(
                    "team {}: no quota in force on {last}, so the replay admits its work only by borrowing, where Kueue ran it",
                    team.name
                ));
            }
        }
        busy_measured(
            &self.namespaces,
            m.usage,
            from,
            &mut measured,
            &mut problems,
        );
        let Some(simulation) = simulate::replay_until(scenario, &recorded, stop)? else {
            problems.push(format!(
                "the recorded week could not be replayed: its jobs come in more than {} class and size pairs",
                simulate::MAX_REPLAY_TEMPLATES
            ));
            return Ok(Replay {
                from,
                to: last,
                workloads: 0,
                teams: Vec::new(),
                total: Comparison {
                    team: "total".to_owned(),
                    figures: Vec::new(),
                },
                problems,
            });
        };
        let total = Measured::sum(&measured);
        Ok(Replay {
            from,
            to: last,
            workloads: recorded.len() as u64,
            teams: simulation
                .teams
                .iter()
                .zip(&measured)
                .map(|(s, m)| compare(&s.team, s, m))
                .collect(),
            total: compare("total", &simulation.total, &total),
            problems,
        })
    }

    /// The week's jobs as the week engine replays them under `scenario`, and what was measured
    /// of them per team.
    fn prepare(&mut self, scenario: &Scenario) -> (Vec<Recorded>, Vec<Measured>) {
        // Those running as the week starts first, in the order Kueue admitted them; then by
        // creation.
        let from_ms = self.from_ms;
        self.jobs.sort_by_key(|j| match j.admitted_ms {
            Some(admitted) if admitted <= from_ms => (false, admitted),
            _ => (true, j.created_ms),
        });
        let mut recorded = Vec::new();
        let mut measured = vec![Measured::default(); scenario.teams.len()];
        let jobs = std::mem::take(&mut self.jobs);
        for job in &jobs {
            let Some(r) = self.recorded(scenario, job) else {
                self.left_out += 1;
                continue;
            };
            recorded.push(r);
            self.measure(job, &r, &mut measured[job.team]);
        }
        (recorded, measured)
    }

    /// `job` as the week engine replays it; None when it has no class or no GPUs.
    fn recorded(&self, scenario: &Scenario, job: &Job) -> Option<Recorded> {
        let (class, w) = class_of(scenario, job)?;
        let model = scenario.accelerator(&w.flavor)?.model()?;
        let (_, n) = job.resources.iter().find(|(r, _)| *r == model.resource)?;
        let gpus = u32::try_from(*n).ok();
        let gpus = gpus.filter(|g| *g > 0)?;
        let running = job.admitted_ms.is_some_and(|a| a <= self.from_ms);
        // Its last run, the work it still had when last admitted (all of it, unless it kept
        // some from before an eviction in a checkpoint); from the week's start for one running.
        let length_min = match (job.last_admitted_ms, job.ended_ms) {
            (Some(admitted), Some(ended)) => minutes(ended - admitted.max(self.from_ms)),
            (Some(admitted), None) if admitted < self.end_ms => {
                minutes(self.end_ms - admitted.max(self.from_ms))
            }
            _ => w.job_minutes,
        };
        Some(Recorded {
            class,
            gpus,
            minute: minutes(job.created_ms - self.from_ms).min(MINUTES_PER_WEEK - 1),
            length_min: length_min.max(1),
            running,
        })
    }

    /// What was measured of `job` in the week.
    fn measure(&self, job: &Job, r: &Recorded, m: &mut Measured) {
        m.evictions += job.evictions_in_week;
        let Some(admitted) = job.admitted_ms.filter(|a| *a < self.end_ms) else {
            return;
        };
        let end = job.ended_ms.unwrap_or(self.end_ms).min(self.end_ms);
        let held = |(from, to): (i64, i64)| (to.min(end) - from.max(self.from_ms)).max(0);
        let held_ms = match (job.evicted_ms, job.last_admitted_ms) {
            (Some(evicted), Some(last)) if last > evicted => {
                held((admitted, evicted)) + held((last, end))
            }
            (Some(evicted), _) => held((admitted, evicted)),
            (None, _) => held((admitted, end)),
        };
        m.admitted_gpu_minutes += i64::from(r.gpus) * held_ms / MS_PER_MINUTE;
        let arrived = job.created_ms.max(self.from_ms);
        m.waits.add(minutes(admitted - arrived));
    }
}

/// `GET /api/quota/teams/{team}/requests/{id}/what-if?weeks=N`: the last N whole weeks.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WhatIfQuery {
    pub weeks: Option<String>,
}

pub const DEFAULT_WHAT_IF_WEEKS: u32 = 4;
pub const MAX_WHAT_IF_WEEKS: u32 = 8;

impl WhatIfQuery {
    pub fn checked(&self) -> Result<u32, Vec<FieldError>> {
        let Some(text) = self.weeks.as_deref() else {
            return Ok(DEFAULT_WHAT_IF_WEEKS);
        };
        match text.parse::<u32>() {
            Ok(n) if (1..=MAX_WHAT_IF_WEEKS).contains(&n) => Ok(n),
            _ => Err(vec![FieldError {
                path: "weeks".to_owned(),
                message: format!(
                    "{text:?} is not a whole number of weeks from 1 to {MAX_WHAT_IF_WEEKS}"
                ),
            }]),
        }
    }
}

/// The what-if's weeks: the first one's first day, and the days the history is read for them
/// (from the week before the first, to today included: the quotas in force today are the
/// "before").
pub fn what_if_window(weeks: u32, today: Day) -> (Day, Day, Day) {
    let first = today.plus(-WEEK_DAYS * weeks as i32);
    (first, first.plus(-WEEK_DAYS), today.plus(1))
}

/// A quota request's effect on the last weeks' recorded work: each week replayed under the
/// quotas in force today and again with the request approved, per team of the cohort.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIf {
    pub request: i64,
    pub team: String,
    pub from: Day,
    /// The last week's last day, included.
    pub to: Day,
    pub weeks: u32,
    /// Workloads replayed, over all weeks.
    pub workloads: u64,
    pub teams: Vec<Change>,
    pub problems: Vec<String>,
}

/// One team's replayed weeks before and after the approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub team: String,
    pub before: Outcome,
    pub after: Outcome,
}

/// What the replayed weeks did to a team.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Admission wait p95 over every week's admitted jobs; None when none was admitted.
    pub wait_p95_minutes: Option<f64>,
    pub evictions: u64,
    /// GPU-hours admitted (quota reserved) in the weeks: the work the quotas let run.
    pub admitted_gpu_hours: f64,
    /// Inference traffic not served, in %: None, since the record holds no inference replicas
    /// to replay (said in `problems`).
    pub unserved_inference_pct: Option<f64>,
}

/// A what-if under way: one replayer a week, each fed every Workload.
pub struct WhatIfRun {
    first: Day,
    weeks: Vec<Replayer>,
}

impl WhatIfRun {
    /// `weeks` weeks from `first`, of `world`'s teams.
    pub fn new(first: Day, weeks: u32, world: &QuotaWorld) -> Self {
        WhatIfRun {
            first,
            weeks: (0..weeks as i32)
                .map(|w| Replayer::new(first.plus(WEEK_DAYS * w), world))
                .collect(),
        }
    }

    pub fn add(&mut self, entry: &HistoryEntry) {
        for week in &mut self.weeks {
            week.add(entry);
        }
    }

    /// Everything the replay needs, with nothing more to read: `derived`'s scenario (the quotas
    /// in force today), the same with request `id` of `team` approved (its whole quota replaced
    /// by `spec`'s), and each week's recorded jobs.
    pub fn prepare(
        self,
        derived: &FromHistory,
        (id, team, spec): (i64, &str, &QuotaSpec),
    ) -> WhatIfInput {
        let before = derived.scenario.clone();
        let mut problems = derived.problems.clone();
        let mut after = before.clone();
        match after.teams.iter().position(|t| t.name == team) {
            Some(t) => from_history::set_quota(&mut after.teams[t], spec, &before, &mut problems),
            None => problems.push(format!("team {team} is not in the cohort's scenario")),
        }
        problems.push(
            "no inference replicas are recorded, so unserved traffic is not replayed".to_owned(),
        );
        let mut left_out = 0;
        let weeks: Vec<Vec<Recorded>> = self
            .weeks
            .into_iter()
            .map(|mut week| {
                let (jobs, _) = week.prepare(&before);
                left_out += week.left_out;
                jobs
            })
            .collect();
        if left_out > 0 {
            problems.push(format!(
                "{left_out} Workload-weeks not replayed: in namespaces no team owns, or holding no whole GPUs of a flavor"
            ));
        }
        WhatIfInput {
            request: id,
            team: team.to_owned(),
            from: self.first,
            to: self.first.plus(WEEK_DAYS * weeks.len() as i32 - 1),
            workloads: weeks.iter().map(|w| w.len() as u64).sum(),
            problems,
            replay: WhatIfReplay {
                before,
                after,
                weeks: RecordedWeeks(weeks),
            },
        }
    }
}

/// A what-if ready to replay (`GET …/what-if/input`): what the answer says of itself, and what
/// the week engine replays. The server replays it for the API and the CLI; the approver's
/// browser replays the same in the planner's worker, which reads only [`WhatIfReplay`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIfInput {
    pub request: i64,
    pub team: String,
    /// The first week's first day.
    pub from: Day,
    /// The last week's last day, included.
    pub to: Day,
    /// Workloads to replay, over all weeks.
    pub workloads: u64,
    /// What could not be derived or will not be replayed, in words.
    pub problems: Vec<String>,
    #[serde(flatten)]
    pub replay: WhatIfReplay,
}

impl WhatIfInput {
    /// The what-if: this input's account of itself, with what its replay found.
    pub fn answer(self, replayed: Replayed) -> WhatIf {
        let mut problems = self.problems;
        problems.extend(replayed.problems);
        WhatIf {
            request: self.request,
            team: self.team,
            from: self.from,
            to: self.to,
            weeks: self.replay.weeks.0.len() as u32,
            workloads: self.workloads,
            teams: replayed.teams,
            problems,
        }
    }
}

/// What the week engine replays: the cohort's scenario under the quotas in force today and with
/// the request approved, and each week's recorded jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIfReplay {
    pub before: Scenario,
    pub after: Scenario,
    pub weeks: RecordedWeeks,
}

/// Each week's recorded jobs. In JSON one list of whole numbers: for each week, its number of
/// jobs, then five numbers a job (class, GPUs, minute, length in minutes, 1 when it runs as the
/// week starts, else 0). A what-if carries hundreds of thousands of jobs to the browser, which
/// reads them with the least code this way.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "Vec<u32>")]
pub struct RecordedWeeks(pub Vec<Vec<Recorded>>);

impl TryFrom<Vec<u32>> for RecordedWeeks {
    type Error = &'static str;

    fn try_from(numbers: Vec<u32>) -> Result<Self, &'static str> {
        let mut weeks = Vec::new();
        let mut rest = &numbers[..];
        while let Some((&jobs, after)) = rest.split_first() {
            let (week, after) = (jobs as usize)
                .checked_mul(5)
                .and_then(|n| after.split_at_checked(n))
                .ok_or("a week holds fewer jobs than it says")?;
            let job = |n: &[u32]| Recorded {
                class: n[0] as usize,
                gpus: n[1],
                minute: n[2],
                length_min: n[3],
                running: n[4] != 0,
            };
            weeks.push(week.chunks_exact(5).map(job).collect());
            rest = after;
        }
        Ok(RecordedWeeks(weeks))
    }
}

impl Serialize for RecordedWeeks {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let number = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        s.collect_seq(self.0.iter().flat_map(|week| {
            let jobs = week.iter().flat_map(|r| {
                [
                    number(r.class),
                    r.gpus,
                    r.minute,
                    r.length_min,
                    u32::from(r.running),
                ]
            });
            std::iter::once(number(week.len())).chain(jobs)
        }))
    }
}

/// What a what-if's replay found: per team of the cohort, before and after; the weeks it could
/// not replay, in words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replayed {
    pub teams: Vec<Change>,
    pub problems: Vec<String>,
}

/// Which scenario of a what-if a replay runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The quotas in force today.
    Before,
    /// With the request approved.
    After,
}

/// One side of a what-if replayed over every week (the approver's browser replays the two at
/// once, one worker each): per team of the cohort, in the scenario's order, its name and what
/// the weeks did to it; the weeks that could not be replayed, in words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideReplayed {
    pub teams: Vec<(String, Outcome)>,
    pub problems: Vec<String>,
}

impl Replayed {
    /// The two sides of one what-if, team by team: replayed from one input, they name the same
    /// teams in the same order and leave out the same weeks.
    pub fn join(before: SideReplayed, after: SideReplayed) -> Replayed {
        let teams = before.teams.into_iter().zip(after.teams);
        Replayed {
            teams: teams
                .map(|((team, before), (_, after))| Change {
                    team,
                    before,
                    after,
                })
                .collect(),
            problems: before.problems,
        }
    }
}

impl WhatIfReplay {
    /// Checks what a browser is handed before it replays it, as any scenario is checked: the
    /// scenario before the approval, then after it. Whether a week can be replayed depends on
    /// the fleet's flavors and the teams' classes (their kinds and flavors), so the two
    /// scenarios must share those: a week then replays on both sides or on neither.
    pub fn checked(self) -> Result<WhatIfReplay, Vec<FieldError>> {
        self.before.validate()?;
        self.after.validate()?;
        let classes = |s: &Scenario| -> Vec<(usize, WorkloadKind, String)> {
            let teams = s.teams.iter().enumerate();
            teams
                .flat_map(|(t, team)| {
                    team.workloads
                        .iter()
                        .map(move |w| (t, w.kind, w.flavor.clone()))
                })
                .collect()
        };
        let flavors = |s: &Scenario| s.fleet.iter().map(|a| a.flavor.clone()).collect::<Vec<_>>();
        if classes(&self.before) != classes(&self.after)
            || flavors(&self.before) != flavors(&self.after)
        {
            return Err(vec![FieldError {
                path: "after".to_owned(),
                message: "the scenario after the approval must have the fleet's flavors and the teams' classes of the one before it".to_owned(),
            }]);
        }
        Ok(self)
    }

    /// Replays every week before and after the approval.
    pub fn replay(&self, stop: &dyn Interrupt) -> Result<Replayed, Interrupted> {
        let before = self.replay_side(Side::Before, stop)?;
        Ok(Replayed::join(before, self.replay_side(Side::After, stop)?))
    }

    /// Replays every week under one side's scenario. Whether a week can be replayed depends
    /// on the fleet and the classes only, which the two sides share ([`WhatIfReplay::checked`]):
    /// a week counts on both sides or on neither.
    pub fn replay_side(
        &self,
        side: Side,
        stop: &dyn Interrupt,
    ) -> Result<SideReplayed, Interrupted> {
        let scenario = match side {
            Side::Before => &self.before,
            Side::After => &self.after,
        };
        let mut sum = Sum::new(scenario.teams.len());
        let mut problems = Vec::new();
        let weeks = &self.weeks.0;
        for (n, jobs) in weeks.iter().enumerate() {
            match simulate::replay_keeping_waits(scenario, jobs, stop)? {
                Some((week, waits)) => sum.add(&week, &waits),
                None => problems.push(format!(
                    "week {} of {} could not be replayed: a job names no batch class of the scenario, or its jobs come in more than {} class and size pairs",
                    n + 1,
                    weeks.len(),
                    simulate::MAX_REPLAY_TEMPLATES
                )),
            }
        }
        let teams = scenario.teams.iter().enumerate();
        Ok(SideReplayed {
            teams: teams
                .map(|(t, team)| (team.name.clone(), sum.outcome(t)))
                .collect(),
            problems,
        })
    }
}

/// One side of the what-if, summed over the weeks.
struct Sum {
    waits: Vec<Waits>,
    evictions: Vec<u64>,
    admitted_gpu_minutes: Vec<f64>,
}

impl Sum {
    fn new(teams: usize) -> Self {
        Sum {
            waits: vec![Waits::default(); teams],
            evictions: vec![0; teams],
            admitted_gpu_minutes: vec![0.0; teams],
        }
    }

    fn add(&mut self, week: &simulate::Simulation, waits: &[Waits]) {
        for (t, s) in week.teams.iter().enumerate() {
            self.waits[t].merge(&waits[t]);
            self.evictions[t] += s.preemptions;
            self.admitted_gpu_minutes[t] += s.admitted_gpu_minutes;
        }
    }

    fn outcome(&self, team: usize) -> Outcome {
        Outcome {
            wait_p95_minutes: self.waits[team].percentile(0.95),
            evictions: self.evictions[team],
            admitted_gpu_hours: self.admitted_gpu_minutes[team] / 60.0,
            unserved_inference_pct: None,
        }
    }
}

/// Whole minutes of `ms` (none when negative).
fn minutes(ms: i64) -> u32 {
    u32::try_from(ms.max(0) / MS_PER_MINUTE).unwrap_or(u32::MAX)
}

/// The quota requests in force on `day`, by team.
fn quota_ids(m: &from_history::Measured, day: Day) -> Vec<(String, i64)> {
    m.world
        .effective_on(day)
        .into_iter()
        .map(|(team, a)| (team.to_owned(), a.id))
        .collect()
}

/// One team's figures side by side.
fn compare(team: &str, planned: &TeamStats, measured: &Measured) -> Comparison {
    let hours = |minutes: f64| minutes / 60.0;
    let figures = [
        (
            Figure::WaitP50Minutes,
            planned.queue_wait_p50_min,
            measured.waits.percentile(0.50),
        ),
        (
            Figure::WaitP95Minutes,
            planned.queue_wait_p95_min,
            measured.waits.percentile(0.95),
        ),
        (
            Figure::Evictions,
            Some(planned.preemptions as f64),
            Some(measured.evictions as f64),
        ),
        (
            Figure::AdmittedGpuHours,
            Some(hours(planned.admitted_gpu_minutes)),
            Some(hours(measured.admitted_gpu_minutes as f64)),
        ),
        (
            Figure::BusyGpuHours,
            Some(hours(planned.busy_gpu_minutes)),
            measured.busy_gpu_us.map(|us| us as f64 / US_PER_HOUR),
        ),
    ];
    Comparison {
        team: team.to_owned(),
        figures: figures
            .into_iter()
            .map(|(figure, planned, measured)| {
                let error = planned.zip(measured).map(|(p, m)| p - m);
                Compared {
                    figure,
                    planned,
                    measured,
                    error,
                    error_pct: error
                        .zip(measured)
                        .filter(|(_, m)| *m != 0.0)
                        .map(|(e, m)| e / m * 100.0),
                }
            })
            .collect(),
    }
}

/// The scenario's batch class of `job`: the one of its team on the flavor of the whole GPUs it
/// was admitted with and of its priority; never admitted, its team's first of its priority (else its first).
fn class_of<'s>(
    scenario: &'s Scenario,
    job: &Job,
) -> Option<(usize, &'s crate::planning::scenario::Workload)> {
    let before: usize = scenario.teams[..job.team]
        .iter()
        .map(|t| t.workloads.len())
        .sum();
    let classes = scenario.teams.get(job.team)?.workloads.iter().enumerate();
    let batch = || {
        classes
            .clone()
            .filter(|(_, w)| w.kind != WorkloadKind::Inference)
    };
    let found = if job.flavors.is_empty() {
        batch()
            .find(|(_, w)| w.priority == job.priority)
            .or_else(|| batch().next())
    } else {
        // The flavor of its whole GPUs: the one whose model's resource it was admitted with.
        let gpu = |(resource, flavor): &&(String, String)| {
            scenario
                .accelerator(flavor)
                .and_then(|a| a.model())
                .is_some_and(|m| m.resource == *resource)
        };
        let (_, flavor) = job.flavors.iter().find(gpu)?;
        batch().find(|(_, w)| w.flavor == *flavor && w.priority == job.priority)
    }?;
    Some((before + found.0, found.1))
}

/// One team's measured week.
#[derive(Debug, Clone, Default)]
struct Measured {
    waits: Waits,
    evictions: u64,
    admitted_gpu_minutes: i64,
    /// DCGM's busy GPU-microseconds; None where it did not observe all 7 days.
    busy_gpu_us: Option<i64>,
}

impl Measured {
    fn sum(teams: &[Measured]) -> Measured {
        let mut total = Measured {
            busy_gpu_us: Some(0),
            ..Measured::default()
        };
        for m in teams {
            total.waits.merge(&m.waits);
            total.evictions += m.evictions;
            total.admitted_gpu_minutes += m.admitted_gpu_minutes;
            total.busy_gpu_us = total.busy_gpu_us.zip(m.busy_gpu_us).map(|(a, b)| a + b);
        }
        total
    }
}

/// Each team's busy time as DCGM measured it in the week, where it observed all 7 days.
fn busy_measured(
    namespaces: &[String],
    usage: &[UsageDay],
    from: Day,
    measured: &mut [Measured],
    problems: &mut Vec<String>,
) {
    let end = from.plus(WEEK_DAYS);
    for (namespace, m) in namespaces.iter().zip(measured.iter_mut()) {
        let mut days = std::collections::BTreeSet::new();
        let mut busy = 0i64;
        for u in usage
            .iter()
            .filter(|u| u.namespace == *namespace && u.day >= from && u.day < end)
        {
            if u.observed_gpu_us > 0 {
                days.insert(u.day);
            }
            busy += u.busy_gpu_us;
        }
        if days.len() == WEEK_DAYS as usize {
            m.busy_gpu_us = Some(busy);
        } else {
            problems.push(format!(
                "{namespace}: DCGM observed it on {} of the week's 7 days: its busy GPU-hours are not measured",
                days.len()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{
        common::interrupt::Never,
        planning::from_history::{Derivation, Measured as Read},
    };

    /// 2026-11-30 (a Monday) 00:00 UTC: the week replayed.
    const MONDAY_MS: i64 = 1_795_996_800_000;
    const HOUR_US: i64 = 3_600_000_000;

    fn monday() -> Day {
        Day::parse("2026-11-30").expect("a day")
    }

    /// `gpus` H100s; each team named holds `nominal` of them by its own request, all in one
    /// cohort.
    fn world(gpus: u32, teams: &[(&str, u32)]) -> QuotaWorld {
        let queues: Vec<_> = teams
            .iter()
            .map(|(t, _)| {
                json!({"team": t, "namespace": format!("team-{t}"), "cluster_queue": t,
                "local_queue": t, "cohort": "gpufleet"})
            })
            .collect();
        let approved: Vec<_> = teams
            .iter()
            .enumerate()
            .map(|(i, (t, nominal))| {
                json!({"id": i + 1, "team": t, "order": i + 1, "spec": {
                "lines": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": nominal}],
                "justification": "training", "starts_on": "2026-11-01"}})
            })
            .collect();
        serde_json::from_value(json!({
            "flavors": [{"name": "h100", "gpu_model": "H100-SXM5-80GB", "pools": ["p1"],
                "gpus": gpus, "settings": {}}],
            "teams": queues, "approved": approved,
        }))
        .expect("a world")
    }

    /// A Workload of `gpus` H100s in `team`'s namespace, created, admitted and finished at
    /// those minutes after the replayed week's start (negative: before it).
    fn recorded(team: &str, gpus: u32, created: i64, admitted: i64, finished: i64) -> HistoryEntry {
        let at = |minutes: i64| MONDAY_MS + minutes * MS_PER_MINUTE;
        serde_json::from_value(json!({
            "uid": format!("{team}-{created}-{admitted}"), "namespace": format!("team-{team}"),
            "name": "job", "local_queue": team, "cluster_queue": team, "priority": 0,
            "priority_class": null,
            "pod_sets": [{"name": "main", "count": 1, "resources": {"nvidia.com/gpu": gpus},
                "flavors": {"nvidia.com/gpu": "h100"}}],
            "created_at_ms": at(created), "quota_reserved_at_ms": at(admitted),
            "admitted_at_ms": at(admitted), "evicted": null,
            "finished": {"at_ms": at(finished), "reason": "Succeeded", "detail": null},
            "evictions": [], "problems": [], "team": team, "evictions_seen": [], "gone_at_ms": null
        }))
        .expect("an entry")
    }

    /// Each day of the week, `team` observed for `observed` GPU-hours, busy for `busy`.
    fn usage(team: &str, busy: i64, observed: i64) -> Vec<UsageDay> {
        (0..WEEK_DAYS)
            .map(|d| UsageDay {
                day: monday().plus(d),
                namespace: format!("team-{team}"),
                flavor: "h100".into(),
                allocated_gpu_us: Some(observed * HOUR_US),
                busy_gpu_us: busy * HOUR_US,
                observed_gpu_us: observed * HOUR_US,
                borrowed_gpu_us: 0,
                lent_gpu_us: 0,
            })
            .collect()
    }

    fn replay(world: &QuotaWorld, usage: &[UsageDay], history: &[HistoryEntry]) -> Replay {
        let prices = [("h100".to_owned(), 250)].into();
        let (from, end) = window(monday());
        let read = Read {
            world,
            prices: &prices,
            usage,
            tokens: &[],
            from,
            end,
        };
        let mut derivation = Derivation::new(&read);
        let mut replayer = Replayer::new(monday(), world);
        for entry in history {
            derivation.add(entry);
            replayer.add(entry);
        }
        replayer
            .finish(&derivation.finish(), &read, &Never)
            .expect("never interrupted")
    }

    fn figure(c: &Comparison, figure: Figure) -> (Option<f64>, Option<f64>) {
        let f = c
            .figures
            .iter()
            .find(|f| f.figure == figure)
            .expect("a figure");
        (f.planned, f.measured)
    }

    /// A week Kueue could have recorded on 4 H100s that one team holds: a 4-GPU job running
    /// since 30 minutes before the week until 30 minutes into it, then three 4-GPU jobs
    /// created as the week starts, each run for an hour, admitted one after the other (at 30,
    /// 90 and 150 minutes: quota is all-or-nothing, one 4-GPU job at a time). DCGM saw the
    /// team busy 1 of 2 observed GPU-hours each day. By hand, on both sides: waits 0, 30, 90,
    /// 150 → p50 the sorted element at round(3 × 0.5) = 2: 90; p95 at round(2.85) = 3: 150;
    /// admitted 4 × 0.5 + 3 × 4 × 1 = 14 GPU-hours; busy 14 × 50% = 7 (DCGM: 7 × 1); no
    /// evictions. The replay is the record: every error 0.
    #[test]
    fn a_week_kueue_could_have_recorded_replays_to_the_minute() {
        let world = world(4, &[("research", 4)]);
        let history = [
            recorded("research", 4, -40, -30, 30),
            recorded("research", 4, 0, 30, 90),
            recorded("research", 4, 0, 90, 150),
            recorded("research", 4, 0, 150, 210),
        ];
        let r = replay(&world, &usage("research", 1, 2), &history);
        assert_eq!((r.from, r.to), (monday(), monday().plus(6)));
        assert_eq!(r.workloads, 4);
        let research = &r.teams[0];
        assert_eq!(research.team, "research");
        let both = |x: f64| (Some(x), Some(x));
        assert_eq!(figure(research, Figure::WaitP50Minutes), both(90.0));
        assert_eq!(figure(research, Figure::WaitP95Minutes), both(150.0));
        assert_eq!(figure(research, Figure::Evictions), both(0.0));
        assert_eq!(figure(research, Figure::AdmittedGpuHours), both(14.0));
        assert_eq!(figure(research, Figure::BusyGpuHours), both(7.0));
        assert!(research.figures.iter().all(|f| f.error == Some(0.0)));
        assert_eq!(r.total.figures, research.figures);
    }

    /// 8 H100s, research and vision 4 each in one cohort; research submits two 4-GPU jobs as
    /// the week starts and vision nothing. Kueue lends a ClusterQueue's unused nominal quota to
    /// the others of its cohort (Kueue's concepts, "Cohort": a ClusterQueue may borrow the
    /// unused quota of the cohort's others, up to its borrowingLimit, none here): both are
    /// admitted at once. The record says the second waited an hour (the cluster did not lend):
    /// the replay shows it, p95 0 planned against 60 measured: an error of −60 minutes, −100%.
    /// Vision was never observed by DCGM: its busy hours are not measured, and said so.
    #[test]
    fn the_replay_lends_in_the_cohort_where_the_record_waited() {
        let world = world(8, &[("research", 4), ("vision", 4)]);
        let history = [
            recorded("research", 4, 0, 0, 60),
            recorded("research", 4, 0, 60, 120),
        ];
        let r = replay(&world, &usage("research", 1, 2), &history);
        let research = &r.teams[0];
        assert_eq!(
            figure(research, Figure::WaitP95Minutes),
            (Some(0.0), Some(60.0))
        );
        let p95 = &research.figures[1];
        assert_eq!((p95.error, p95.error_pct), (Some(-60.0), Some(-100.0)));
        assert_eq!(
            figure(research, Figure::AdmittedGpuHours),
            (Some(8.0), Some(8.0))
        );
        assert_eq!(figure(&r.teams[1], Figure::BusyGpuHours), (Some(0.0), None));
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("team-vision: DCGM observed it on 0 of the week's 7 days")),
            "{:?}",
            r.problems
        );
    }

    /// An evicted Workload counts its recorded evictions in the week, its wait to its first
    /// admission (10 minutes), the quota it held (admitted at 10, evicted at 60, admitted again
    /// at 120, finished at 200: 50 + 80 minutes on 8 GPUs, 17.3 GPU-hours) and, replayed, the
    /// work of its last run (80 minutes: 10.7 GPU-hours, nothing evicting it); one in no team's
    /// namespace is not replayed; one finished before the week is passed over.
    #[test]
    fn evictions_count_and_what_is_not_replayed_is_said() {
        let world = world(8, &[("research", 8)]);
        let mut evicted = recorded("research", 8, 0, 10, 200);
        evicted
            .evictions_seen
            .push(crate::cluster::workload::Transition {
                at_ms: MONDAY_MS + 60 * MS_PER_MINUTE,
                reason: "Preempted".into(),
                detail: Some("InClusterQueue".into()),
            });
        evicted.last_admitted_at_ms = Some(MONDAY_MS + 120 * MS_PER_MINUTE);
        let history = [
            evicted,
            recorded("elsewhere", 8, 0, 0, 60),
            recorded("research", 8, -300, -200, -100),
        ];
        let r = replay(&world, &usage("research", 1, 2), &history);
        assert_eq!(r.workloads, 1);
        let research = &r.teams[0];
        assert_eq!(figure(research, Figure::Evictions), (Some(0.0), Some(1.0)));
        assert_eq!(
            figure(research, Figure::WaitP50Minutes),
            (Some(0.0), Some(10.0))
        );
        let (planned, measured) = figure(research, Figure::AdmittedGpuHours);
        assert!((measured.expect("measured") - 8.0 * 130.0 / 60.0).abs() < 1e-9);
        assert!((planned.expect("planned") - 8.0 * 80.0 / 60.0).abs() < 1e-9);
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("1 Workloads not replayed")),
            "{:?}",
            r.problems
        );
    }

    /// 12 H100s, research and vision 4 each in one cohort (4 in no one's quota). In the week,
    /// research runs two 4-GPU one-hour jobs from its start, vision one from minute 30. Under
    /// today's quotas Kueue admits research's second by borrowing vision's unused 4 (Kueue's
    /// concepts, "Cohort"), and when vision's job comes, reclaims it (`reclaimWithinCohort:
    /// Any`): research is evicted once, its job admitted again when its first ends (minute 60)
    /// and run whole after its restart (no checkpoints; the format's 2-minute restart): 4 GPUs
    /// × (60 + 30 + 2 + 60) minutes = 608 GPU-minutes admitted; vision's job holds its quota
    /// while its victim terminates (a minute, as the week models it) and waits that minute: 4 ×
    /// 61 GPU-minutes. Research's request
    /// for 8 makes the same week evict nothing and wait for nothing: 8 + 4 GPU-hours.
    #[test]
    fn the_what_if_replays_the_weeks_before_and_after_the_request() {
        let world = world(12, &[("research", 4), ("vision", 4)]);
        let history = [
            recorded("research", 4, 0, 0, 60),
            recorded("research", 4, 0, 60, 120),
            recorded("vision", 4, 30, 30, 90),
        ];
        let prices = [("h100".to_owned(), 250)].into();
        let today = monday().plus(WEEK_DAYS);
        let (first, from, end) = what_if_window(1, today);
        assert_eq!(
            (first, from, end),
            (monday(), monday().plus(-7), today.plus(1))
        );
        let usage = usage("research", 1, 2);
        let read = Read {
            world: &world,
            prices: &prices,
            usage: &usage,
            tokens: &[],
            from,
            end,
        };
        let mut derivation = Derivation::new(&read);
        let mut run = WhatIfRun::new(first, 1, &world);
        for entry in &history {
            derivation.add(entry);
            run.add(entry);
        }
        let spec: QuotaSpec = serde_json::from_value(json!({
            "lines": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 8}],
            "justification": "more", "starts_on": "2026-12-07"}))
        .expect("a request's spec");
        let input = run.prepare(&derivation.finish(), (9, "research", &spec));
        let replayed = input.replay.replay(&Never).expect("never interrupted");
        let what_if = input.answer(replayed);
        assert_eq!((what_if.workloads, what_if.weeks), (3, 1));
        let [research, vision] = [&what_if.teams[0], &what_if.teams[1]];
        let outcome = |o: &Outcome| (o.wait_p95_minutes, o.evictions, o.admitted_gpu_hours);
        assert_eq!(outcome(&research.before), (Some(0.0), 1, 608.0 / 60.0));
        assert_eq!(outcome(&vision.before), (Some(1.0), 0, 244.0 / 60.0));
        assert_eq!(outcome(&research.after), (Some(0.0), 0, 8.0));
        assert_eq!(outcome(&vision.after), (Some(0.0), 0, 4.0));
        assert!(research.before.unserved_inference_pct.is_none());
    }

    /// A job of two pod sets, a launcher on the CPU flavor `default` listed first and 8 workers
    /// of one H100 each (as Kueue's `podSetAssignments` name a flavor per resource), is replayed
    /// on its GPUs' flavor: 8 GPUs for an hour, 8 GPU-hours on both sides.
    #[test]
    fn a_job_is_replayed_on_the_flavor_of_its_gpus() {
        let world = world(8, &[("research", 8)]);
        let mut job = recorded("research", 8, 0, 0, 60);
        job.workload.pod_sets = serde_json::from_value(json!([
            {"name": "launcher", "count": 1, "resources": {"cpu": 1}, "flavors": {"cpu": "default"}},
            {"name": "worker", "count": 8, "resources": {"nvidia.com/gpu": 8},
                "flavors": {"nvidia.com/gpu": "h100"}}]))
        .expect("pod sets");
        let r = replay(&world, &usage("research", 1, 2), &[job]);
        assert_eq!(r.workloads, 1, "{:?}", r.problems);
        let research = &r.teams[0];
        assert_eq!(
            figure(research, Figure::AdmittedGpuHours),
            (Some(8.0), Some(8.0))
        );
    }

    /// The jobs' wire form: each week's count, then five numbers a job; a week may be empty;
    /// a count larger than what follows is refused, not read short.
    #[test]
    fn recorded_weeks_read_as_counted_lists_of_five_numbers() {
        let job = Recorded {
            class: 3,
            gpus: 8,
            minute: 600,
            length_min: 60,
            running: true,
        };
        let weeks: RecordedWeeks = serde_json::from_str("[1, 3, 8, 600, 60, 1, 0]").expect("reads");
        assert_eq!(weeks, RecordedWeeks(vec![vec![job], vec![]]));
        assert_eq!(
            serde_json::to_string(&weeks).expect("JSON"),
            "[1,3,8,600,60,1,0]"
        );
        for short in ["[2, 3, 8, 600, 60, 1]", "[4294967295, 1]"] {
            assert!(
                serde_json::from_str::<RecordedWeeks>(short).is_err(),
                "{short}"
            );
        }
    }

    #[test]
    fn the_week_must_have_ended_and_defaults_to_the_last_seven_days() {
        let today = Day::parse("2026-12-03").expect("a day");
        let query = |from: Option<&str>| ReplayQuery {
            from: from.map(str::to_owned),
        };
        assert_eq!(
            query(None).checked(today),
            Ok(Day::parse("2026-11-26").expect("a day"))
        );
        assert_eq!(
            query(Some("2026-11-20")).checked(today),
            Ok(Day::parse("2026-11-20").expect("a day"))
        );
        let late = query(Some("2026-11-27"))
            .checked(today)
            .expect_err("not ended");
        assert_eq!(late[0].path, "from");
        assert!(
            late[0].message.contains("has not ended"),
            "{}",
            late[0].message
        );
        let bad = query(Some("Monday")).checked(today).expect_err("not a day");
        assert!(bad[0].message.contains("YYYY-MM-DD"), "{}", bad[0].message);
    }
}
