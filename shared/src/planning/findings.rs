//! Re-plan findings: what the measured fleet says about the quotas in force, for approvers
//! (`GET /api/quota/findings`, `gpufleet quota findings`). It reads the workload history
//! (`cluster`) and measured use (`usage` rollups), both below `quota` on the domain map, so it
//! lives with the planner; the route is the quota room's, where approvers act on it.
//!
//! Over the last `weeks` whole weeks before today (UTC):
//! - **unused quota** (team, flavor): in *every* week Kueue reported the team's nominal quota
//!   and its allocation was at most `idle_percent` of it; drafts a request lowering the
//!   nominal quota to the busiest hour's allocation (rounded up);
//! - **idle allocation** (team, flavor): in every week DCGM saw its devices busy at most
//!   `idle_percent` of the time they were observed; opens the window's scenario from history;
//! - **waiting** (team): the admission wait p95 of the Workloads it created in the window
//!   (creation → first admission, as Kueue's `kueue_admission_wait_time_seconds` measures;
//!   a Workload not admitted by the window's end counts what it waited so far, *at least*)
//!   is above `wait_p95_target_minutes`; drafts a request adding the GPUs its work waited for
//!   on average on the flavor that admitted most of its work;
//! - **would pack** (team, flavor of whole GPUs): most of its admitted Workloads hold one GPU,
//!   and DCGM saw those devices busy at most `idle_percent` of the time with little memory in
//!   use: the cards it holds would take several such jobs each on MIG instances (the smallest
//!   plain profile with the memory and compute the jobs used) or fractions; opens the scenario.
//!
//! Invariants: nothing is guessed. A week without Kueue's nominal or allocation, or without
//! DCGM's observed time, is no evidence of idleness (and says so in `problems`); a finding
//! needs every week of the window. A draft is the team's request in force with one line
//! changed, checked against the rules like any request: what they refuse is said with it.
//! Nothing changes without the normal approval.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{
    cluster::workload::HistoryEntry,
    common::{day::Day, error::FieldError, utc::DAY_MS},
    fleet::catalogue,
    quota::{QuotaSpec, QuotaWorld},
    usage::queues::QueueFigures,
};

pub const DEFAULT_WEEKS: u32 = 4;
/// A quarter: the rollups hold it and one answer stays small.
pub const MAX_WEEKS: u32 = 13;
pub const DEFAULT_IDLE_PERCENT: u32 = 50;
pub const DEFAULT_WAIT_P95_TARGET_MINUTES: u32 = 30;
/// The longest admission-wait target, in minutes (a week).
pub const MAX_WAIT_P95_TARGET_MINUTES: u32 = 10_080;

const US_PER_MINUTE: i64 = 60_000_000;
const US_PER_HOUR: i64 = 3_600_000_000;
const MS_PER_MINUTE: i64 = 60_000;

/// `GET /api/quota/findings?weeks=4&idle_percent=50&wait_p95_target_minutes=30`, every
/// parameter optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FindingsQuery {
    pub weeks: Option<String>,
    pub idle_percent: Option<String>,
    pub wait_p95_target_minutes: Option<String>,
}

/// The thresholds a finding is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingRules {
    pub weeks: u32,
    pub idle_percent: u32,
    pub wait_p95_target_minutes: u32,
}

impl Default for FindingRules {
    fn default() -> Self {
        FindingRules {
            weeks: DEFAULT_WEEKS,
            idle_percent: DEFAULT_IDLE_PERCENT,
            wait_p95_target_minutes: DEFAULT_WAIT_P95_TARGET_MINUTES,
        }
    }
}

impl FindingsQuery {
    pub fn checked(&self) -> Result<FindingRules, Vec<FieldError>> {
        let d = FindingRules::default();
        let mut errors = Vec::new();
        let rules = FindingRules {
            weeks: number("weeks", &self.weeks, d.weeks, 1, MAX_WEEKS, &mut errors),
            idle_percent: number(
                "idle_percent",
                &self.idle_percent,
                d.idle_percent,
                1,
                99,
                &mut errors,
            ),
            wait_p95_target_minutes: number(
                "wait_p95_target_minutes",
                &self.wait_p95_target_minutes,
                d.wait_p95_target_minutes,
                1,
                MAX_WAIT_P95_TARGET_MINUTES,
                &mut errors,
            ),
        };
        if errors.is_empty() {
            Ok(rules)
        } else {
            Err(errors)
        }
    }
}

fn number(
    path: &str,
    text: &Option<String>,
    default: u32,
    least: u32,
    most: u32,
    errors: &mut Vec<FieldError>,
) -> u32 {
    let Some(text) = text.as_deref().filter(|t| !t.is_empty()) else {
        return default;
    };
    match text.parse::<u32>() {
        Ok(n) if (least..=most).contains(&n) => n,
        _ => {
            errors.push(FieldError {
                path: path.to_owned(),
                message: format!("{text:?}: a whole number from {least} to {most}"),
            });
            default
        }
    }
}

/// One team's measured use of one flavor in one week, from the usage rollups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeekUse {
    pub team: String,
    pub flavor: String,
    /// The week's first day.
    pub week: Day,
    /// Kueue's nominal quota over the week's time; `None` where Kueue reported none.
    pub nominal_gpu_microseconds: Option<i64>,
    /// Kueue's quota in use; `None` where Kueue reported none.
    pub allocated_gpu_microseconds: Option<i64>,
    /// DCGM: busy and observed device time of the team's namespace.
    pub busy_gpu_microseconds: i64,
    pub observed_gpu_microseconds: i64,
    /// DCGM: Σ over minutes of the framebuffer its devices used.
    pub fb_used_mib_minutes: i64,
    /// The allocation of the week's busiest hour.
    pub peak_hour_allocated_gpu_microseconds: i64,
}

/// What the findings read.
pub struct Inputs<'a> {
    pub world: &'a QuotaWorld,
    pub usage: &'a [WeekUse],
    /// Kueue's own queue metrics over the window (`usage::queues`): the waits of teams whose
    /// Workloads are not recorded (GitOps mode, no cluster).
    pub queues: &'a [QueueFigures],
    pub rules: FindingRules,
    /// Today (UTC): the window ends where it starts, drafts start on it.
    pub today: Day,
}

impl FindingRules {
    /// The window's first day: `weeks` whole weeks before `today`.
    pub fn first_day(&self, today: Day) -> Day {
        today.plus(-7 * self.weeks as i32)
    }
}

impl Inputs<'_> {
    /// The window's first day.
    pub fn from(&self) -> Day {
        self.rules.first_day(self.today)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    UnusedQuota,
    IdleAllocation,
    Waiting,
    WouldPack,
}

/// One finding: what was measured, and what it opens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub kind: Kind,
    pub team: String,
    pub flavor: Option<String>,
    /// One sentence with the figures.
    pub summary: String,
    /// The weeks read, for the usage kinds.
    pub weeks: Vec<WeekUse>,
    pub wait: Option<WaitFigures>,
    pub packing: Option<PackFigures>,
    /// A drafted quota request (the team's in force, one line changed), to open in the form.
    pub draft: Option<QuotaSpec>,
    /// What the quota rules refuse in the draft as it stands.
    pub draft_problems: Vec<String>,
    /// A scenario from history over this window, to open on the Plan page.
    pub scenario: Option<Window>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub from: Day,
    /// The last day, included.
    pub to: Day,
}

/// A team's admission waits over the window, in minutes (nearest rank).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitFigures {
    pub workloads: u32,
    /// Of those, still not admitted at the window's end (their waits are at least).
    pub not_admitted: u32,
    pub p50_minutes: i64,
    pub p95_minutes: i64,
    /// Σ GPUs × minutes waited; `None` where only Kueue's metrics are known (they count
    /// Workloads, not GPUs).
    pub waited_gpu_minutes: Option<i64>,
    /// GPUs waiting on average over the window (`waited_gpu_minutes` over its minutes).
    pub mean_gpus_waiting: Option<f64>,
    /// Where the waits come from: the workload history, or Kueue's
    /// `kueue_admission_wait_time_seconds` (percentiles as `histogram_quantile` gives them).
    pub from: String,
}

/// Why a team's work on a flavor would pack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackFigures {
    pub admitted: u32,
    pub one_gpu: u32,
    pub busy_percent: f64,
    /// Mean framebuffer in use per observed device.
    pub fb_used_mib_per_gpu: i64,
    /// `mig-<profile>` or `fractions`.
    pub onto: String,
    pub jobs_per_card: u32,
}

/// Every finding of the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Findings {
    pub rules: FindingRules,
    pub from: Day,
    /// The last day, included.
    pub to: Day,
    pub findings: Vec<Finding>,
    /// What could not be read, in words.
    pub problems: Vec<String>,
    /// Workloads read from the history, and of them the demo's.
    pub workloads_read: u32,
    pub demo_workloads: u32,
    /// Why no workload history is recorded (GitOps mode, no cluster), when none is.
    #[serde(default)]
    pub unrecorded: Option<String>,
}

/// One team's recorded work over the window.
#[derive(Default)]
struct TeamWork {
    waits: Vec<i64>,
    not_admitted: u32,
    waited_gpu_minutes: i64,
    /// Per flavor: admitted Workloads, of them on one GPU, and their GPU count.
    admitted: BTreeMap<String, (u32, u32, u64)>,
}

/// The findings, a Workload at a time.
pub struct Review<'a> {
    inputs: &'a Inputs<'a>,
    /// Whole-GPU resource per flavor.
    resource: BTreeMap<&'a str, &'static str>,
    teams: BTreeMap<String, TeamWork>,
    read: u32,
    demo: u32,
    no_team: u32,
}

impl<'a> Review<'a> {
    pub fn new(inputs: &'a Inputs<'a>) -> Self {
        let resource = inputs
            .world
            .flavors
            .iter()
            .filter_map(|f| Some((f.name.as_str(), whole_resource(&f.gpu_model)?)))
            .collect();
        Review {
            inputs,
            resource,
            teams: BTreeMap::new(),
            read: 0,
            demo: 0,
            no_team: 0,
        }
    }

    /// One Workload created in the window.
    pub fn add(&mut self, entry: &HistoryEntry) {
        self.read += 1;
        self.demo += u32::from(entry.demo);
        let Some(team) = &entry.team else {
            self.no_team += 1;
            return;
        };
        let w = &entry.workload;
        let end_ms = i64::from(self.inputs.today.days_since_epoch()) * DAY_MS;
        let admitted = w.admitted_at_ms.filter(|at| *at <= end_ms);
        let stopped = [w.finished.as_ref().map(|t| t.at_ms), entry.gone_at_ms];
        let waited_to = admitted.unwrap_or(stopped.into_iter().flatten().fold(end_ms, i64::min));
        let waited = (waited_to - w.created_at_ms).max(0) / MS_PER_MINUTE;
        let (flavor, gpus) = self.whole_gpus(entry, &w.resources());
        let flavor = flavor.filter(|_| admitted.is_some()).map(str::to_owned);
        let work = self.teams.entry(team.clone()).or_default();
        work.waits.push(waited);
        work.not_admitted += u32::from(admitted.is_none());
        work.waited_gpu_minutes += waited * gpus as i64;
        if let Some(flavor) = flavor {
            let slot = work.admitted.entry(flavor).or_default();
            slot.0 += 1;
            slot.1 += u32::from(gpus == 1);
            slot.2 += gpus;
        }
    }

    /// The flavor the Workload was admitted on (if it was) and the whole GPUs it asks for.
    fn whole_gpus<'e>(
        &self,
        entry: &'e HistoryEntry,
        resources: &BTreeMap<&str, u64>,
    ) -> (Option<&'e str>, u64) {
        let admitted_on = entry.workload.pod_sets.iter().find_map(|set| {
            set.flavors.iter().find_map(|(resource, flavor)| {
                (self.resource.get(flavor.as_str()) == Some(&resource.as_str()))
                    .then_some(flavor.as_str())
            })
        });
        let gpus = match admitted_on {
            Some(flavor) => resources.get(self.resource[flavor]).copied().unwrap_or(0),
            None => catalogue::device_resources()
                .filter_map(|r| resources.get(r))
                .sum(),
        };
        (admitted_on, gpus)
    }

    /// `team`'s admission waits over the window, whatever the target: from its recorded
    /// Workloads, else from Kueue's metrics of its ClusterQueue (a team member's view).
    pub fn wait_of(&self, team: &str) -> Option<WaitFigures> {
        match self.teams.get(team) {
            Some(work) => history_wait(self.inputs, work),
            None => self
                .inputs
                .queues
                .iter()
                .find(|q| q.team.as_deref() == Some(team))
                .and_then(metrics_wait),
        }
    }

    pub fn finish(self) -> Findings {
        let inputs = self.inputs;
        let (from, to) = (inputs.from(), inputs.today.plus(-1));
        let window = Window { from, to };
        let mut problems = Vec::new();
        if self.no_team > 0 {
            problems.push(format!(
                "{} Workloads in no team's namespace are left out",
                self.no_team
            ));
        }
        let weeks = by_team_flavor(inputs);
        let mut findings = usage_findings(inputs, &weeks, window, &mut problems);
        for (team, work) in &self.teams {
            findings.extend(waiting(inputs, team, work));
            findings.extend(packing(inputs, &weeks, team, work, window));
        }
        let recorded = |team: &String| self.teams.contains_key(team);
        for q in inputs.queues {
            match &q.team {
                Some(team) if !recorded(team) => {
                    findings.extend(waiting_by_metrics(inputs, team, q))
                }
                _ => {}
            }
        }
        findings.sort_by(|a, b| (a.kind, &a.team, &a.flavor).cmp(&(b.kind, &b.team, &b.flavor)));
        Findings {
            rules: inputs.rules,
            from,
            to,
            findings,
            problems,
            workloads_read: self.read,
            demo_workloads: self.demo,
            unrecorded: None,
        }
    }
}

fn whole_resource(gpu_model: &str) -> Option<&'static str> {
    catalogue::find(gpu_model).ok().map(|m| m.resource.as_str())
}

/// Each (team, flavor)'s weeks of the window, in order; a missing week is `None`.
type Weeks<'u> = BTreeMap<(&'u str, &'u str), Vec<Option<&'u WeekUse>>>;

fn by_team_flavor<'u>(inputs: &Inputs<'u>) -> Weeks<'u> {
    let from = inputs.from();
    let mut out: BTreeMap<(&str, &str), Vec<Option<&WeekUse>>> = BTreeMap::new();
    for u in inputs.usage {
        let index = from.days_until(u.week);
        if index < 0 || index % 7 != 0 || index / 7 >= inputs.rules.weeks as i32 {
            continue;
        }
        let weeks = out
            .entry((u.team.as_str(), u.flavor.as_str()))
            .or_insert_with(|| vec![None; inputs.rules.weeks as usize]);
        weeks[(index / 7) as usize] = Some(u);
    }
    out
}

fn usage_findings(
    inputs: &Inputs,
    by_team_flavor: &Weeks,
    window: Window,
    problems: &mut Vec<String>,
) -> Vec<Finding> {
    let idle = i128::from(inputs.rules.idle_percent);
    let mut findings = Vec::new();
    let mut unknown_quota = Vec::new();
    for (&(team, flavor), weeks) in by_team_flavor {
        let all = |f: &dyn Fn(&WeekUse) -> Option<(i64, i64)>| {
            weeks
                .iter()
                .map(|w| w.and_then(f))
                .collect::<Option<Vec<(i64, i64)>>>()
                .filter(|parts| {
                    parts.iter().all(|(part, whole)| {
                        *whole > 0 && 100 * i128::from(*part) <= idle * i128::from(*whole)
                    })
                })
        };
        let held: Vec<WeekUse> = weeks.iter().flatten().map(|w| (*w).clone()).collect();
        let quota_known = weeks.iter().all(|w| {
            w.is_some_and(|w| {
                w.nominal_gpu_microseconds.is_some() && w.allocated_gpu_microseconds.is_some()
            })
        });
        if !quota_known
            && weeks
                .iter()
                .flatten()
                .any(|w| w.nominal_gpu_microseconds.is_some())
        {
            unknown_quota.push(format!("{team} on {flavor}"));
        }
        let unused = all(&|w| Some((w.allocated_gpu_microseconds?, w.nominal_gpu_microseconds?)));
        if let Some(parts) = unused {
            findings.push(unused_quota(
                inputs,
                team,
                flavor,
                &parts,
                held.clone(),
                window,
            ));
        }
        let idle_devices = all(&|w| Some((w.busy_gpu_microseconds, w.observed_gpu_microseconds)));
        if let Some(parts) = idle_devices {
            let (busy, observed) = sums(&parts);
            findings.push(Finding {
                kind: Kind::IdleAllocation,
                team: team.to_owned(),
                flavor: Some(flavor.to_owned()),
                summary: format!(
                    "{team}'s devices on {flavor} were busy {:.1}% of the time DCGM observed them over {} weeks (each week at most {}%): its jobs hold GPUs they do not use",
                    percent(busy, observed),
                    weeks.len(),
                    inputs.rules.idle_percent
                ),
                weeks: held,
                wait: None,
                packing: None,
                draft: None,
                draft_problems: Vec::new(),
                scenario: Some(window),
            });
        }
    }
    if !unknown_quota.is_empty() {
        problems.push(format!(
            "Kueue's nominal quota or allocation is missing for part of the window, so no unused-quota finding for {}",
            unknown_quota.join(", ")
        ));
    }
    findings
}

fn sums(parts: &[(i64, i64)]) -> (i64, i64) {
    parts.iter().fold((0, 0), |(a, b), (p, w)| (a + p, b + w))
}

fn percent(part: i64, whole: i64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn unused_quota(
    inputs: &Inputs,
    team: &str,
    flavor: &str,
    parts: &[(i64, i64)],
    weeks: Vec<WeekUse>,
    window: Window,
) -> Finding {
    let (allocated, nominal) = sums(parts);
    let peak_us = weeks
        .iter()
        .map(|w| w.peak_hour_allocated_gpu_microseconds)
        .max()
        .unwrap_or(0);
    let peak_gpus = (peak_us + US_PER_HOUR - 1) / US_PER_HOUR;
    let summary = format!(
        "{team} used {:.1} of its {:.1} nominal GPU-hours on {flavor} ({:.1}%) over {} weeks, each week at most {}%; its busiest hour held {peak_gpus} GPUs",
        allocated as f64 / US_PER_HOUR as f64,
        nominal as f64 / US_PER_HOUR as f64,
        percent(allocated, nominal),
        parts.len(),
        inputs.rules.idle_percent,
    );
    let (draft, draft_problems) = drafted(inputs, team, flavor, &summary, |nominal| {
        (peak_gpus < nominal).then_some(peak_gpus)
    });
    Finding {
        kind: Kind::UnusedQuota,
        team: team.to_owned(),
        flavor: Some(flavor.to_owned()),
        summary,
        weeks,
        wait: None,
        packing: None,
        draft,
        draft_problems,
        scenario: Some(window),
    }
}

/// The team's request in force with the flavor's whole-GPU line's nominal quota set by
/// `change` (from its present one; `None`: no change worth a request), checked. A rise the
/// flavor's capacity cannot hold is capped at the most it can (the draft must itself pass the
/// rules it will be checked by), and its justification says so.
fn drafted(
    inputs: &Inputs,
    team: &str,
    flavor: &str,
    why: &str,
    change: impl Fn(i64) -> Option<i64>,
) -> (Option<QuotaSpec>, Vec<String>) {
    let Some(resource) = inputs
        .world
        .flavors
        .iter()
        .find(|f| f.name == flavor)
        .and_then(|f| whole_resource(&f.gpu_model))
    else {
        return (None, Vec::new());
    };
    let in_force = inputs.world.effective_on(inputs.today);
    let Some(mut spec) = in_force.get(team).map(|a| a.spec.clone()) else {
        return (None, Vec::new());
    };
    let Some(i) = spec
        .lines
        .iter()
        .position(|l| l.flavor == flavor && l.resource == resource)
    else {
        return (None, Vec::new());
    };
    let present = spec.lines[i].nominal;
    let Some(wanted) = change(present) else {
        return (None, Vec::new());
    };
    spec.starts_on = inputs.today;
    let nominal = most_that_fits(inputs, team, &mut spec, i, present, wanted);
    let capped = if nominal < wanted {
        format!(
            "; capped at {nominal} GPUs, what the flavor's capacity leaves (it asked for {wanted})"
        )
    } else {
        String::new()
    };
    spec.justification = format!("Re-plan finding: {why}{capped}.")
        .chars()
        .take(crate::quota::MAX_JUSTIFICATION_CHARS)
        .collect();
    let checked = inputs.world.check(team, &spec, inputs.today);
    let problems = checked
        .errors
        .iter()
        .map(|e| format!("{}: {}", e.path, e.message))
        .collect();
    (Some(spec), problems)
}

/// Sets line `i`'s nominal quota to `wanted`, or where the rules refuse that line (a rise past
/// the flavor's capacity), to the most between `present` and `wanted` they accept (found by
/// bisection: at most ~log₂ of the rise checks) when that is a rise at all; returns what it
/// set.
fn most_that_fits(
    inputs: &Inputs,
    team: &str,
    spec: &mut QuotaSpec,
    i: usize,
    present: i64,
    wanted: i64,
) -> i64 {
    let path = format!("lines[{i}].nominal");
    let fits = |spec: &mut QuotaSpec, nominal: i64| {
        let line = &mut spec.lines[i];
        line.nominal = nominal;
        line.lending_limit = line.lending_limit.map(|l| l.min(nominal));
        let checked = inputs.world.check(team, spec, inputs.today);
        checked.errors.iter().all(|e| e.path != path)
    };
    if wanted <= present || fits(spec, wanted) || !fits(spec, present) {
        fits(spec, wanted);
        return wanted;
    }
    // present fits, wanted does not
    let (mut good, mut bad) = (present, wanted);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if fits(spec, mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    if good == present {
        // no room at all: the draft asks for what it wants and its problems say why it does not
        // fit (no draft is offered to save)
        fits(spec, wanted);
        return wanted;
    }
    fits(spec, good);
    good
}

/// The nearest-rank percentile of sorted values.
fn nearest_rank(sorted: &[i64], pct: usize) -> i64 {
    let rank = (sorted.len() * pct).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// A team's admission waits from its recorded Workloads; `None` when it recorded none.
fn history_wait(inputs: &Inputs, work: &TeamWork) -> Option<WaitFigures> {
    let mut waits = work.waits.clone();
    if waits.is_empty() {
        return None;
    }
    waits.sort_unstable();
    let window_minutes = i64::from(inputs.rules.weeks) * 7 * 24 * 60;
    Some(WaitFigures {
        workloads: waits.len() as u32,
        not_admitted: work.not_admitted,
        p50_minutes: nearest_rank(&waits, 50),
        p95_minutes: nearest_rank(&waits, 95),
        waited_gpu_minutes: Some(work.waited_gpu_minutes),
        mean_gpus_waiting: Some(work.waited_gpu_minutes as f64 / window_minutes as f64),
        from: "the workload history (creation to first admission)".to_owned(),
    })
}

/// A ClusterQueue's admission waits by Kueue's own histogram; `None` without its percentiles.
fn metrics_wait(q: &QueueFigures) -> Option<WaitFigures> {
    let minutes = |us: Option<i64>| us.map(|us| (us + 30_000_000) / 60_000_000);
    Some(WaitFigures {
        workloads: u32::try_from(q.admitted).unwrap_or(u32::MAX),
        not_admitted: 0,
        p50_minutes: minutes(q.wait_p50_microseconds)?,
        p95_minutes: minutes(q.wait_p95_microseconds)?,
        waited_gpu_minutes: None,
        mean_gpus_waiting: None,
        from: "kueue_admission_wait_time_seconds".to_owned(),
    })
}

fn waiting(inputs: &Inputs, team: &str, work: &TeamWork) -> Option<Finding> {
    let wait = history_wait(inputs, work)?;
    let (p50, p95) = (wait.p50_minutes, wait.p95_minutes);
    if p95 <= i64::from(inputs.rules.wait_p95_target_minutes) {
        return None;
    }
    let mean = wait.mean_gpus_waiting.unwrap_or(0.0);
    let flavor = work
        .admitted
        .iter()
        .max_by_key(|(name, (_, _, gpus))| (*gpus, std::cmp::Reverse(*name)))
        .map(|(name, _)| name.clone());
    let summary = format!(
        "{team}'s {} Workloads waited p95 {p95} min for admission (p50 {p50}; target {} min{}), {:.1} GPUs waiting on average",
        wait.workloads,
        inputs.rules.wait_p95_target_minutes,
        if wait.not_admitted > 0 {
            format!(
                "; {} not admitted by the window's end, counted at least",
                wait.not_admitted
            )
        } else {
            String::new()
        },
        mean
    );
    let more = mean.ceil() as i64;
    let (draft, draft_problems) = match &flavor {
        Some(flavor) => drafted(inputs, team, flavor, &summary, |n| {
            (more > 0).then_some(n + more)
        }),
        None => (None, Vec::new()),
    };
    Some(Finding {
        kind: Kind::Waiting,
        team: team.to_owned(),
        flavor,
        summary,
        weeks: Vec::new(),
        wait: Some(wait),
        packing: None,
        draft,
        draft_problems,
        scenario: None,
    })
}

/// A team with no recorded Workloads whose ClusterQueue's admissions waited past the target by
/// Kueue's own histogram. How many GPUs waited is not in the metrics: no draft.
fn waiting_by_metrics(inputs: &Inputs, team: &str, q: &QueueFigures) -> Option<Finding> {
    let wait = metrics_wait(q)?;
    let (p50, p95) = (wait.p50_minutes, wait.p95_minutes);
    if p95 <= i64::from(inputs.rules.wait_p95_target_minutes) {
        return None;
    }
    let summary = format!(
        "{team}'s ClusterQueue {} admitted {} Workloads, p95 {p95} min after they were created or requeued (p50 {p50}; target {} min), by Kueue's kueue_admission_wait_time_seconds; the metrics do not say how many GPUs waited, so nothing is drafted",
        q.cluster_queue, q.admitted, inputs.rules.wait_p95_target_minutes
    );
    Some(Finding {
        kind: Kind::Waiting,
        team: team.to_owned(),
        flavor: None,
        summary,
        weeks: Vec::new(),
        wait: Some(wait),
        packing: None,
        draft: None,
        draft_problems: Vec::new(),
        scenario: None,
    })
}

fn packing(
    inputs: &Inputs,
    by_team_flavor: &Weeks,
    team: &str,
    work: &TeamWork,
    window: Window,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (flavor, &(admitted, one_gpu, _)) in &work.admitted {
        if 2 * one_gpu <= admitted {
            continue;
        }
        let Some(f) = inputs.world.flavors.iter().find(|f| &f.name == flavor) else {
            continue;
        };
        if !f.settings.mig_layout.is_empty() || f.settings.sharing.is_some() {
            continue;
        }
        let weeks: Vec<&WeekUse> = by_team_flavor
            .get(&(team, flavor.as_str()))
            .map(|weeks| weeks.iter().flatten().copied().collect())
            .unwrap_or_default();
        let busy: i64 = weeks.iter().map(|w| w.busy_gpu_microseconds).sum();
        let observed: i64 = weeks.iter().map(|w| w.observed_gpu_microseconds).sum();
        let fb: i64 = weeks.iter().map(|w| w.fb_used_mib_minutes).sum();
        if observed == 0
            || 100 * i128::from(busy) > i128::from(inputs.rules.idle_percent) * i128::from(observed)
        {
            continue;
        }
        let fb_per_gpu = (i128::from(fb) * i128::from(US_PER_MINUTE) / i128::from(observed)) as i64;
        let Ok(model) = catalogue::find(&f.gpu_model) else {
            continue;
        };
        let busy_share = busy as f64 / observed as f64;
        let Some((onto, jobs_per_card)) = pack_onto(model, busy_share, fb_per_gpu) else {
            continue;
        };
        let figures = PackFigures {
            admitted,
            one_gpu,
            busy_percent: busy_share * 100.0,
            fb_used_mib_per_gpu: fb_per_gpu,
            onto,
            jobs_per_card,
        };
        findings.push(Finding {
            kind: Kind::WouldPack,
            team: team.to_owned(),
            flavor: Some(flavor.clone()),
            summary: format!(
                "{one_gpu} of {team}'s {admitted} Workloads on {flavor} held one GPU, busy {:.1}% with {fb_per_gpu} MiB in use: {jobs_per_card} such jobs would share a card on {}",
                figures.busy_percent, figures.onto
            ),
            weeks: weeks.into_iter().cloned().collect(),
            wait: None,
            packing: Some(figures),
            draft: None,
            draft_problems: Vec::new(),
            scenario: Some(window),
        });
    }
    findings
}

/// Where jobs busy `busy_share` of the time using `fb_mib` of memory pack: the smallest plain
/// MIG profile offering both (its instances a card), or, without MIG, fractions of the card
/// (as many as memory and busy time allow, at most HAMi's 10 a card); `None` below two.
fn pack_onto(
    model: &catalogue::AcceleratorModel,
    busy_share: f64,
    fb_mib: i64,
) -> Option<(String, u32)> {
    if let Some(mig) = &model.mig {
        let total = f64::from(mig.total_compute_slices);
        return mig
            .profiles
            .iter()
            .filter(|p| p.is_plain() && p.max_instances >= 2)
            .filter(|p| {
                i64::from(p.mem_mib) >= fb_mib && f64::from(p.compute_slices) / total >= busy_share
            })
            .min_by_key(|p| (p.compute_slices, p.memory_slices))
            .map(|p| (format!("mig-{}", p.name), u32::from(p.max_instances)));
    }
    let by_memory = i64::from(model.mem_mib) / fb_mib.max(1);
    let by_busy = (1.0 / busy_share.max(0.01)).floor() as i64;
    let jobs = by_memory.min(by_busy).min(10);
    (jobs >= 2).then(|| ("fractions".to_owned(), jobs as u32))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const HOUR_US: i64 = 3_600_000_000;
    const WEEK_HOURS: i64 = 168;

    fn day(s: &str) -> Day {
        Day::parse(s).expect("a day")
    }

    /// 64 H100s in one cohort; research holds 32 (lending at most 16), serving 16.
    fn world() -> QuotaWorld {
        serde_json::from_value(json!({
            "flavors": [{"name": "h100", "gpu_model": "H100-SXM5-80GB", "pools": ["p1"], "gpus": 64,
                "settings": {}}],
            "teams": [
                {"team": "research", "namespace": "team-research", "cluster_queue": "research",
                 "local_queue": "research", "cohort": "gpufleet"},
                {"team": "serving", "namespace": "team-serving", "cluster_queue": "serving",
                 "local_queue": "serving", "cohort": "gpufleet"}],
            "approved": [
                {"id": 1, "team": "research", "order": 1, "spec": {
                    "lines": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 32,
                               "lending_limit": 16}],
                    "checkpoint_interval_min": 30, "justification": "training",
                    "starts_on": "2026-10-01"}},
                {"id": 2, "team": "serving", "order": 2, "spec": {
                    "lines": [{"flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 16}],
                    "checkpoint_interval_min": 30, "justification": "inference",
                    "starts_on": "2026-10-01"}}]
        }))
        .expect("a world")
    }

    /// A week of `team` on h100: nominal, allocated, busy and observed as whole GPUs all week,
    /// the busiest hour's allocation in GPUs.
    fn week(team: &str, week: &str, gpus: [i64; 4], peak: i64, fb_mib: i64) -> WeekUse {
        let [nominal, allocated, busy, observed] = gpus.map(|g| g * WEEK_HOURS * HOUR_US);
        WeekUse {
            team: team.into(),
            flavor: "h100".into(),
            week: day(week),
            nominal_gpu_microseconds: Some(nominal),
            allocated_gpu_microseconds: Some(allocated),
            busy_gpu_microseconds: busy,
            observed_gpu_microseconds: observed,
            fb_used_mib_minutes: fb_mib * gpus[3] * WEEK_HOURS * 60,
            peak_hour_allocated_gpu_microseconds: peak * HOUR_US,
        }
    }

    const TODAY: &str = "2026-11-30";

    fn review(usage: &[WeekUse], history: &[HistoryEntry], weeks: u32) -> Findings {
        review_with(usage, history, weeks, &[])
    }

    fn review_with(
        usage: &[WeekUse],
        history: &[HistoryEntry],
        weeks: u32,
        queues: &[QueueFigures],
    ) -> Findings {
        let world = world();
        let inputs = Inputs {
            world: &world,
            usage,
            queues,
            rules: FindingRules {
                weeks,
                ..FindingRules::default()
            },
            today: day(TODAY),
        };
        let mut review = Review::new(&inputs);
        for entry in history {
            review.add(entry);
        }
        review.finish()
    }

    fn of(findings: &Findings, kind: Kind) -> Vec<&Finding> {
        findings
            .findings
            .iter()
            .filter(|f| f.kind == kind)
            .collect()
    }

    #[test]
    fn a_team_using_a_quarter_of_its_quota_every_week_is_drafted_down_to_its_busiest_hour() {
        // Two weeks (from 2026-11-16): research holds 32, uses 8 then 12 (25%, 37.5%, both at
        // most 50%), its busiest hour 14 GPUs. Serving uses 10 of 16 one week (62.5%): no.
        let usage = [
            week("research", "2026-11-16", [32, 8, 7, 8], 11, 0),
            week("research", "2026-11-23", [32, 12, 11, 12], 14, 0),
            week("serving", "2026-11-16", [16, 4, 3, 4], 6, 0),
            week("serving", "2026-11-23", [16, 10, 9, 10], 12, 0),
        ];
        let found = review(&usage, &[], 2);
        assert_eq!(
            (found.from, found.to),
            (day("2026-11-16"), day("2026-11-29"))
        );
        let unused = of(&found, Kind::UnusedQuota);
        assert_eq!(unused.len(), 1, "{:#?}", found.findings);
        let f = unused[0];
        assert_eq!(
            (f.team.as_str(), f.flavor.as_deref()),
            ("research", Some("h100"))
        );
        // (8 + 12) × 168 = 3,360 of 2 × 32 × 168 = 10,752 GPU-hours: 31.25%.
        assert!(f.summary.contains("3360.0 of its 10752.0"), "{}", f.summary);
        assert!(f.summary.contains("(31.2%)") && f.summary.contains("held 14 GPUs"));
        let draft = f.draft.as_ref().expect("a draft");
        assert_eq!(draft.lines[0].nominal, 14);
        // Its lending limit of 16 would exceed the new nominal: it is lowered with it.
        assert_eq!(draft.lines[0].lending_limit, Some(14));
        assert_eq!(draft.starts_on, day(TODAY));
        assert!(
            draft
                .justification
                .starts_with("Re-plan finding: research used")
        );
        assert!(f.draft_problems.is_empty(), "{:?}", f.draft_problems);
        assert_eq!(
            f.scenario,
            Some(Window {
                from: day("2026-11-16"),
                to: day("2026-11-29")
            })
        );
    }

    #[test]
    fn a_week_without_kueues_figures_is_no_evidence() {
        let mut usage = vec![
            week("research", "2026-11-16", [32, 8, 7, 8], 11, 0),
            week("research", "2026-11-23", [32, 8, 7, 8], 11, 0),
        ];
        usage[1].allocated_gpu_microseconds = None;
        let found = review(&usage, &[], 2);
        assert!(of(&found, Kind::UnusedQuota).is_empty());
        assert_eq!(found.problems.len(), 1, "{:?}", found.problems);
        // Two teams without the figures: one caveat naming both, not one each.
        let mut both = usage.clone();
        both.extend(usage.iter().map(|w| WeekUse {
            team: "serving".into(),
            ..w.clone()
        }));
        let found = review(&both, &[], 2);
        assert_eq!(
            found.problems,
            [
                "Kueue's nominal quota or allocation is missing for part of the window, so no unused-quota finding for research on h100, serving on h100"
            ]
        );
        // One of two weeks only: no finding either (every week of the window is needed).
        let found = review(&usage[..1], &[], 2);
        assert!(of(&found, Kind::UnusedQuota).is_empty());
    }

    #[test]
    fn devices_busy_a_fifth_of_the_time_they_are_held_are_an_idle_allocation() {
        // Research: 20 of 24 GPUs allocated (no unused quota at 24 of 32 = 75%), busy 5 of 24
        // observed = 20.8% ≤ 50%.
        let usage = [week("research", "2026-11-23", [32, 24, 5, 24], 24, 0)];
        let found = review(&usage, &[], 1);
        assert!(of(&found, Kind::UnusedQuota).is_empty());
        let idle = of(&found, Kind::IdleAllocation);
        assert_eq!(idle.len(), 1);
        assert!(
            idle[0].summary.contains("busy 20.8%"),
            "{}",
            idle[0].summary
        );
        assert!(idle[0].draft.is_none() && idle[0].scenario.is_some());
    }

    /// 2026-11-23 (a Monday) 00:00 UTC.
    const MONDAY_MS: i64 = 1_795_392_000_000;

    /// A Workload of `gpus` H100s of `namespace`'s team, created `created` minutes after
    /// Monday 00:00 and admitted `wait` minutes later (None: never).
    fn recorded(team: &str, gpus: u32, created: i64, wait: Option<i64>) -> HistoryEntry {
        let at = |minutes: i64| MONDAY_MS + minutes * MS_PER_MINUTE;
        let admitted = wait.map(|w| at(created + w));
        let flavors = if admitted.is_some() {
            json!({"nvidia.com/gpu": "h100"})
        } else {
            json!({})
        };
        serde_json::from_value(json!({
            "uid": format!("{team}-{created}"), "namespace": format!("team-{team}"), "name": "job",
            "local_queue": team, "cluster_queue": null, "priority": 100, "priority_class": null,
            "pod_sets": [{"name": "main", "count": 1, "resources": {"nvidia.com/gpu": gpus},
                "flavors": flavors}],
            "created_at_ms": at(created), "quota_reserved_at_ms": admitted, "admitted_at_ms": admitted,
            "evicted": null, "finished": null, "evictions": [], "problems": [],
            "team": team, "evictions_seen": [], "gone_at_ms": null, "demo": false
        }))
        .expect("an entry")
    }

    #[test]
    fn a_team_whose_work_waits_past_the_target_is_drafted_the_gpus_it_waited_for() {
        // Serving: 20 four-GPU Workloads waiting 10, 20, …, 190 minutes; one more created on
        // Sunday 23:00 never admitted (waits at least the hour to the window's end).
        let mut history: Vec<HistoryEntry> = (1..=19)
            .map(|i| recorded("serving", 4, i * 300, Some(i * 10)))
            .collect();
        history.push(recorded("serving", 4, 7 * 24 * 60 - 60, None));
        // Research's work waits 5 minutes: within the target.
        history.push(recorded("research", 8, 0, Some(5)));
        let found = review(&[], &history, 1);
        let waiting = of(&found, Kind::Waiting);
        assert_eq!(waiting.len(), 1, "{:#?}", found.findings);
        let f = waiting[0];
        let wait = f.wait.as_ref().expect("figures");
        // Sorted waits 10..190 and 60: nearest rank 50% of 20 is the 10th (90), 95% the
        // 19th (180).
        assert_eq!((wait.workloads, wait.not_admitted), (20, 1));
        assert_eq!((wait.p50_minutes, wait.p95_minutes), (90, 180));
        // 4 × (10 + … + 190) + 4 × 60 = 4 × 1,900 + 240 = 7,840 GPU-minutes over 10,080.
        assert_eq!(wait.waited_gpu_minutes, Some(7_840));
        assert!((wait.mean_gpus_waiting.expect("known") - 7_840.0 / 10_080.0).abs() < 1e-12);
        // Serving's 16 + ⌈0.78⌉ = 17 on the flavor that admitted its work.
        let draft = f.draft.as_ref().expect("a draft");
        assert_eq!(
            (f.flavor.as_deref(), draft.lines[0].nominal),
            (Some("h100"), 17)
        );
        assert!(f.draft_problems.is_empty(), "{:?}", f.draft_problems);
        assert_eq!(found.workloads_read, 21);
    }

    /// The draft must itself pass the rules: serving waits for 20 GPUs on average, but the
    /// 64 H100s hold research's 32 and serving's 16, so 16 + 20 = 36 would put the nominal
    /// quotas at 68; the draft asks for the 32 that fit (32 + 32 = 64) and says why.
    #[test]
    fn a_draft_past_the_flavors_capacity_is_capped_at_what_it_leaves() {
        // 21 sixteen-GPU Workloads each waiting 600 minutes: 21 × 16 × 600 = 201,600
        // GPU-minutes over the week's 10,080 = 20 GPUs waiting on average
        let history: Vec<HistoryEntry> = (0..21)
            .map(|i| recorded("serving", 16, i * 300, Some(600)))
            .collect();
        let found = review(&[], &history, 1);
        let f = of(&found, Kind::Waiting)[0];
        let draft = f.draft.as_ref().expect("a draft");
        assert_eq!(draft.lines[0].nominal, 32);
        assert!(f.draft_problems.is_empty(), "{:?}", f.draft_problems);
        assert!(
            draft.justification.ends_with(
                "; capped at 32 GPUs, what the flavor's capacity leaves (it asked for 36)."
            ),
            "{}",
            draft.justification
        );
        // with research at 48 nothing is left: the draft keeps the rise, and its problem says
        // it does not fit
        let mut world = world();
        world.approved[0].spec.lines[0].nominal = 48;
        let inputs = Inputs {
            world: &world,
            usage: &[],
            queues: &[],
            rules: FindingRules {
                weeks: 1,
                ..FindingRules::default()
            },
            today: day(TODAY),
        };
        let mut review = Review::new(&inputs);
        for entry in &history {
            review.add(entry);
        }
        let found = review.finish();
        let f = of(&found, Kind::Waiting)[0];
        assert_eq!(f.draft.as_ref().map(|d| d.lines[0].nominal), Some(36));
        assert!(
            f.draft_problems[0].contains("would add up to 84"),
            "{:?}",
            f.draft_problems
        );
    }

    #[test]
    fn one_gpu_jobs_busy_a_tenth_with_little_memory_would_pack_seven_to_an_h100() {
        // 6 of research's 8 admitted Workloads hold one GPU; its devices busy 10% (2.4 of 24)
        // with 8,000 MiB in use: H100's 1g.10gb (1 of 7 compute slices, 10 GB) holds that, 7 a
        // card (NVIDIA's MIG table, shared/data/mig_profiles.csv).
        let mut history: Vec<HistoryEntry> = (0..6)
            .map(|i| recorded("research", 1, i * 60, Some(0)))
            .collect();
        history.extend((6..8).map(|i| recorded("research", 8, i * 60, Some(0))));
        let mut usage = week("research", "2026-11-23", [32, 24, 0, 24], 24, 8_000);
        usage.busy_gpu_microseconds = usage.observed_gpu_microseconds / 10;
        let found = review(&[usage.clone()], &history, 1);
        let pack = of(&found, Kind::WouldPack);
        assert_eq!(pack.len(), 1, "{:#?}", found.findings);
        let figures = pack[0].packing.as_ref().expect("figures");
        assert_eq!((figures.admitted, figures.one_gpu), (8, 6));
        assert_eq!(figures.fb_used_mib_per_gpu, 8_000);
        assert_eq!(
            (figures.onto.as_str(), figures.jobs_per_card),
            ("mig-1g.10gb", 7)
        );
        // Busy 30%: 1g's 1/7 is too little compute; 2g.20gb (2/7 = 28.6%) too; 3g.40gb, 2 a card.
        usage.busy_gpu_microseconds = usage.observed_gpu_microseconds * 3 / 10;
        let found = review(&[usage], &history, 1);
        let figures = of(&found, Kind::WouldPack)[0]
            .packing
            .clone()
            .expect("figures");
        assert_eq!(
            (figures.onto.as_str(), figures.jobs_per_card),
            ("mig-3g.40gb", 2)
        );
    }

    #[test]
    fn the_query_is_checked_field_by_field() {
        assert_eq!(
            FindingsQuery::default().checked(),
            Ok(FindingRules::default())
        );
        let bad = FindingsQuery {
            weeks: Some("14".into()),
            idle_percent: Some("half".into()),
            wait_p95_target_minutes: Some("0".into()),
        };
        let errors = bad.checked().expect_err("three errors");
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["weeks", "idle_percent", "wait_p95_target_minutes"]);
        assert!(errors[0].message.contains("from 1 to 13"));
    }
}

#[cfg(test)]
mod by_metrics {
    use super::*;

    #[test]
    fn without_recorded_workloads_kueues_histogram_says_who_waits() {
        let world: QuotaWorld = serde_json::from_value(serde_json::json!({
            "flavors": [], "approved": [],
            "teams": [{"team": "search", "namespace": "team-search", "cluster_queue": "search",
                       "local_queue": "search", "cohort": null}]
        }))
        .expect("a world");
        let queue = |p95_s: i64| QueueFigures {
            cluster_queue: "search".into(),
            team: Some("search".into()),
            admitted: 30,
            wait_p50_microseconds: Some(240_000_000),
            wait_p95_microseconds: Some(p95_s * 1_000_000),
            pending_peak: Some(8),
            evicted: BTreeMap::new(),
        };
        let found = |q: QueueFigures| {
            let queues = [q];
            let inputs = Inputs {
                world: &world,
                usage: &[],
                queues: &queues,
                rules: FindingRules::default(),
                today: Day::parse("2026-11-30").expect("a day"),
            };
            Review::new(&inputs).finish().findings
        };
        // p95 2,368 s = 39.5 min, rounded to 39 (> 30): waiting, no draft; 1,790 s = 29.8 → 30: not.
        let f = found(queue(2_368));
        assert_eq!(f.len(), 1);
        let wait = f[0].wait.as_ref().expect("figures");
        assert_eq!(
            (wait.p50_minutes, wait.p95_minutes, wait.waited_gpu_minutes),
            (4, 39, None)
        );
        assert!(f[0].draft.is_none());
        assert!(found(queue(1_790)).is_empty());
    }
}
