//! The rules a request must meet against the fleet and the approvals in force, and the cohort
//! impact an approver sees.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{common::day::Day, common::error::FieldError};

use super::*;

/// Everything the rules read: the flavors, the teams' queues and the approved requests.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QuotaWorld {
    pub flavors: Vec<Flavor>,
    pub teams: Vec<TeamQueue>,
    pub approved: Vec<Approved>,
    /// Teams whose ClusterQueue an approver has held (a budget's hold): rendered with
    /// `stopPolicy: Hold`. Only the server reads it; it does not travel to the browser.
    #[serde(skip)]
    pub held: Vec<String>,
}

/// The outcome of checking a request: errors block it, warnings inform the approver.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Checked {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<FieldError>,
}

/// One flavor resource of the fleet on a day: capacity, each team's approved nominal quota,
/// and what is left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub flavor: String,
    pub resource: String,
    pub capacity: i64,
    /// Teams with nominal quota here, in name order.
    pub teams: Vec<(String, i64)>,
    pub nominal_total: i64,
    /// Capacity no queue holds.
    pub unassigned: i64,
    /// What queues in a cohort lend (lending limit, or all their nominal quota when idle).
    pub lendable: i64,
}

/// One flavor resource before and after a request, as the approver sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Impact {
    pub flavor: String,
    pub resource: String,
    pub capacity: i64,
    pub on: Day,
    pub before: Side,
    pub after: Side,
    /// Why the requesting team may borrow none of it after the approval, in words; `None`
    /// when it may borrow some.
    pub why_no_borrowing: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Side {
    pub nominal_total: i64,
    /// Capacity no queue holds.
    pub unassigned: i64,
    /// What the requesting team's cohort can lend: each member's lending limit, or its whole
    /// nominal quota when it has none (Kueue lends unused nominal quota).
    pub cohort_lendable: i64,
    pub teams: Vec<TeamSide>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamSide {
    pub team: String,
    pub nominal: i64,
    /// The most it can borrow: its borrowing limit or, when lower, what the rest of its
    /// cohort lends; 0 outside a cohort.
    pub most_borrowable: i64,
}

impl QuotaWorld {
    pub fn team(&self, name: &str) -> Option<&TeamQueue> {
        self.teams.iter().find(|t| t.team == name)
    }

    pub fn flavor(&self, name: &str) -> Option<&Flavor> {
        self.flavors.iter().find(|f| f.name == name)
    }

    /// Each team's effective request on `day`: its latest-approved one whose window holds it.
    pub fn effective_on(&self, day: Day) -> BTreeMap<&str, &Approved> {
        let mut effective: BTreeMap<&str, &Approved> = BTreeMap::new();
        for a in self.approved.iter().filter(|a| a.spec.holds(day)) {
            let slot = effective.entry(a.team.as_str()).or_insert(a);
            if a.order > slot.order {
                *slot = a;
            }
        }
        effective
    }

    /// The world as it would be with `spec` approved for `team` now (approved last).
    pub fn with(&self, team: &str, spec: &QuotaSpec) -> QuotaWorld {
        let mut world = self.clone();
        let order = self.approved.iter().map(|a| a.order).max().unwrap_or(0) + 1;
        world.approved.push(Approved {
            id: 0,
            team: team.to_owned(),
            order,
            spec: spec.clone(),
        });
        world
    }

    /// Ids of `team`'s approved requests that a new approval of `spec` leaves nothing to count
    /// for: from today on, their window lies inside the new one.
    pub fn superseded_by(&self, team: &str, spec: &QuotaSpec, today: Day) -> Vec<i64> {
        self.approved
            .iter()
            .filter(|a| a.team == team)
            .filter(|a| {
                let from = a.spec.starts_on.max(today);
                let ends_inside = match (a.spec.ends_on, spec.ends_on) {
                    (_, None) => true,
                    (Some(old), Some(new)) => old <= new,
                    (None, Some(_)) => false,
                };
                from >= spec.starts_on && ends_inside
            })
            .map(|a| a.id)
            .collect()
    }

    /// Sum of effective nominal quota per flavor resource on `day`.
    fn nominal_totals(&self, day: Day) -> BTreeMap<(String, String), i64> {
        let mut totals = BTreeMap::new();
        for a in self.effective_on(day).values() {
            for line in &a.spec.lines {
                *totals
                    .entry((line.flavor.clone(), line.resource.clone()))
                    .or_insert(0) += line.nominal;
            }
        }
        totals
    }

    /// Days from `from` to `until` (inclusive; `None`: open) on which the effective set can
    /// change: `from` itself, each approved window's start, and the day after each end.
    pub(crate) fn change_days(&self, from: Day, until: Option<Day>) -> Vec<Day> {
        let mut days = vec![from];
        for a in &self.approved {
            days.push(a.spec.starts_on);
            if let Some(end) = a.spec.ends_on {
                days.push(end.plus(1));
            }
        }
        days.retain(|d| *d >= from && until.is_none_or(|u| *d <= u));
        days.sort_unstable();
        days.dedup();
        days
    }

    /// Flavor resources whose approved nominal quotas add up to more than their capacity on
    /// some day from `from` on (after a flavor shrinks or changes its MIG layout), in words.
    pub fn overcommitted(&self, from: Day) -> Vec<String> {
        let mut problems = Vec::new();
        for day in self.change_days(from, None) {
            for ((flavor, resource), total) in self.nominal_totals(day) {
                let capacity = self
                    .flavor(&flavor)
                    .and_then(|f| f.capacity(&resource))
                    .unwrap_or(0);
                let problem = format!(
                    "flavor {flavor} {resource}: approved nominal quotas add up to {total} on {day}, over its capacity of {capacity}"
                );
                if total > capacity
                    && !problems
                        .iter()
                        .any(|p: &String| p.starts_with(&format!("flavor {flavor} {resource}:")))
                {
                    problems.push(problem);
                }
            }
        }
        problems
    }

    /// Every rule for `team` asking for `spec` on `today`; see the module's invariants.
    pub fn check(&self, team: &str, spec: &QuotaSpec, today: Day) -> Checked {
        let mut checked = Checked::default();
        let Some(queue) = self.team(team) else {
            checked
                .errors
                .push(field("team", format!("no team is named {team:?}")));
            return checked;
        };
        self.check_lines(queue, spec, &mut checked);
        // Capacity needs well-formed lines and dates, not a justification: the form shows it
        // while the rest is still being written.
        let well_formed = checked.errors.is_empty();
        check_terms(spec, queue.cohort.is_some(), today, &mut checked);
        check_largest_job(spec, queue.cohort.is_some(), &mut checked);
        if well_formed {
            // A wrong end date still leaves the first day to check: the capacity check never
            // vanishes while a date is being fixed.
            let first_day_only;
            let spec = if checked.errors.iter().any(|e| e.path == "ends_on") {
                first_day_only = QuotaSpec {
                    ends_on: Some(spec.starts_on.max(today)),
                    ..spec.clone()
                };
                &first_day_only
            } else {
                spec
            };
            self.check_capacity(team, spec, today, &mut checked);
            self.check_borrowing(team, spec, today, &mut checked);
        }
        checked
    }

    fn check_lines(&self, queue: &TeamQueue, spec: &QuotaSpec, checked: &mut Checked) {
        for (i, line) in spec.lines.iter().enumerate() {
            let at = |what: &str| format!("lines[{i}].{what}");
            let Some(flavor) = self.flavor(&line.flavor) else {
                let known: Vec<&str> = self.flavors.iter().map(|f| f.name.as_str()).collect();
                checked.errors.push(field(
                    &at("flavor"),
                    format!(
                        "no flavor is named {:?}; the fleet has {}",
                        line.flavor,
                        known.join(", ")
                    ),
                ));
                continue;
            };
            if flavor.capacity(&line.resource).is_none() {
                let offers: Vec<String> =
                    flavor.resources().into_iter().map(|c| c.resource).collect();
                checked.errors.push(field(
                    &at("resource"),
                    format!(
                        "flavor {} offers {}, not {}",
                        flavor.name,
                        offers.join(", "),
                        line.resource
                    ),
                ));
            }
            if spec.lines[..i]
                .iter()
                .any(|l| l.flavor == line.flavor && l.resource == line.resource)
            {
                checked.errors.push(field(
                    &at("resource"),
                    format!("{} of {} is listed twice", line.resource, line.flavor),
                ));
            }
            for (what, value) in [
                ("nominal", Some(line.nominal)),
                ("borrowing_limit", line.borrowing_limit),
                ("lending_limit", line.lending_limit),
            ] {
                if value.is_some_and(|v| v < 0) {
                    checked
                        .errors
                        .push(field(&at(what), "must not be negative".into()));
                }
            }
            if queue.cohort.is_none() {
                for (what, value) in [
                    ("borrowing_limit", line.borrowing_limit),
                    ("lending_limit", line.lending_limit),
                ] {
                    if value.is_some() {
                        checked.errors.push(field(
                            &at(what),
                            format!(
                                "only with a cohort: {}'s queue is in none, so its quota is hard",
                                queue.team
                            ),
                        ));
                    }
                }
            }
            if let Some(lend) = line.lending_limit
                && lend > line.nominal
            {
                checked.errors.push(field(
                    &at("lending_limit"),
                    format!(
                        "{lend} is more than the nominal quota of {}: a queue lends only its own",
                        line.nominal
                    ),
                ));
            }
        }
    }

    fn check_capacity(&self, team: &str, spec: &QuotaSpec, today: Day, checked: &mut Checked) {
        let would_be = self.with(team, spec);
        let from = spec.starts_on.max(today);
        let mut warned = Vec::new();
        for day in would_be.change_days(from, spec.ends_on) {
            let totals = would_be.nominal_totals(day);
            for (i, line) in spec.lines.iter().enumerate() {
                let Some(capacity) = self
                    .flavor(&line.flavor)
                    .and_then(|f| f.capacity(&line.resource))
                else {
                    continue;
                };
                let key = (line.flavor.clone(), line.resource.clone());
                let total = totals.get(&key).copied().unwrap_or(0);
                let path = format!("lines[{i}].nominal");
                if total > capacity && !checked.errors.iter().any(|e| e.path == path) {
                    checked.errors.push(field(
                        &path,
                        format!(
                            "flavor {} {}: the nominal quotas would add up to {total} on {day}, over its capacity of {capacity}",
                            line.flavor, line.resource
                        ),
                    ));
                } else if total == capacity
                    && line.nominal > 0
                    && self.team(team).is_some_and(|t| t.cohort.is_some())
                    && !warned.contains(&key)
                {
                    warned.push(key);
                    checked.warnings.push(field(
                        &path,
                        format!(
                            "flavor {} {}: the nominal quotas add up to its whole capacity of {capacity} on {day}; nothing is left unassigned, so the cohort only moves idle quota its owners reclaim on demand",
                            line.flavor, line.resource
                        ),
                    ));
                }
            }
        }
    }

    fn check_borrowing(&self, team: &str, spec: &QuotaSpec, today: Day, checked: &mut Checked) {
        let would_be = self.with(team, spec);
        let day = spec.starts_on.max(today);
        for (i, line) in spec.lines.iter().enumerate() {
            let Some(limit) = line.borrowing_limit else {
                continue;
            };
            let lendable = would_be.lendable_to(team, &line.flavor, &line.resource, day);
            if limit > lendable {
                checked.warnings.push(field(
                    &format!("lines[{i}].borrowing_limit"),
                    format!(
                        "{limit} is more than the rest of the cohort can lend of {} {} ({lendable} on {day})",
                        line.flavor, line.resource
                    ),
                ));
            }
        }
    }

    /// Why `team` may borrow none of a flavor resource on `day`, in words; `None` when it may
    /// borrow some.
    pub fn why_no_borrowing(
        &self,
        team: &str,
        flavor: &str,
        resource: &str,
        day: Day,
    ) -> Option<String> {
        let effective = self.effective_on(day);
        let limit = effective
            .get(team)
            .and_then(|a| a.spec.line(flavor, resource))
            .and_then(|l| l.borrowing_limit);
        let lendable = self.lendable_to(team, flavor, resource, day);
        if self.team(team).is_none_or(|t| t.cohort.is_none()) {
            Some(format!("{team}'s queue is in no cohort: its quota is hard"))
        } else if limit == Some(0) {
            Some(format!("{team}'s borrowing limit is 0"))
        } else if lendable == 0 {
            Some("the rest of the cohort lends none of it".to_owned())
        } else {
            None
        }
    }

    /// What the other members of `team`'s cohort can lend it of one flavor resource on `day`.
    fn lendable_to(&self, team: &str, flavor: &str, resource: &str, day: Day) -> i64 {
        let Some(cohort) = self.team(team).and_then(|t| t.cohort.as_deref()) else {
            return 0;
        };
        self.effective_on(day)
            .values()
            .filter(|a| a.team != team)
            .filter(|a| self.team(&a.team).and_then(|t| t.cohort.as_deref()) == Some(cohort))
            .filter_map(|a| a.spec.line(flavor, resource))
            .map(|l| l.lending_limit.unwrap_or(l.nominal).min(l.nominal))
            .sum()
    }

    fn side(&self, team: &str, flavor: &Flavor, resource: &str, day: Day) -> Side {
        let capacity = flavor.capacity(resource).unwrap_or(0);
        let effective = self.effective_on(day);
        let nominal_of = |t: &str| {
            effective
                .get(t)
                .map_or(0, |a| a.spec.nominal(&flavor.name, resource))
        };
        let nominal_total: i64 = self.teams.iter().map(|t| nominal_of(&t.team)).sum();
        let cohort = self.team(team).and_then(|t| t.cohort.clone());
        let cohort_lendable = self
            .teams
            .iter()
            .filter(|t| cohort.is_some() && t.cohort == cohort)
            .filter_map(|t| effective.get(t.team.as_str()))
            .filter_map(|a| a.spec.line(&flavor.name, resource))
            .map(|l| l.lending_limit.unwrap_or(l.nominal).min(l.nominal))
            .sum();
        let teams = self
            .teams
            .iter()
            .map(|t| {
                let lendable = self.lendable_to(&t.team, &flavor.name, resource, day);
                let limit = effective
                    .get(t.team.as_str())
                    .and_then(|a| a.spec.line(&flavor.name, resource))
                    .and_then(|l| l.borrowing_limit);
                TeamSide {
                    team: t.team.clone(),
                    nominal: nominal_of(&t.team),
                    most_borrowable: limit.map_or(lendable, |l| l.min(lendable)),
                }
            })
            .collect();
        Side {
            nominal_total,
            unassigned: capacity - nominal_total,
            cohort_lendable,
            teams,
        }
    }

    /// Per flavor resource, the approved quota in force on `day` (the Fleet page's bars).
    pub fn allocation(&self, day: Day) -> Vec<Allocation> {
        let effective = self.effective_on(day);
        self.flavors
            .iter()
            .flat_map(|flavor| {
                let effective = &effective;
                flavor.resources().into_iter().map(move |c| {
                    let lines: Vec<(&TeamQueue, &QuotaLine)> = self
                        .teams
                        .iter()
                        .filter_map(|t| {
                            let line = effective
                                .get(t.team.as_str())?
                                .spec
                                .line(&flavor.name, &c.resource)?;
                            Some((t, line))
                        })
                        .collect();
                    let teams: Vec<(String, i64)> = lines
                        .iter()
                        .filter(|(_, l)| l.nominal > 0)
                        .map(|(t, l)| (t.team.clone(), l.nominal))
                        .collect();
                    let nominal_total = teams.iter().map(|(_, n)| n).sum();
                    Allocation {
                        flavor: flavor.name.clone(),
                        resource: c.resource.clone(),
                        capacity: c.amount,
                        lendable: lines
                            .iter()
                            .filter(|(t, _)| t.cohort.is_some())
                            .map(|(_, l)| l.lending_limit.unwrap_or(l.nominal).min(l.nominal))
                            .sum(),
                        unassigned: c.amount - nominal_total,
                        nominal_total,
                        teams,
                    }
                })
            })
            .collect()
    }

    /// Per flavor resource, the fleet before and after approving `spec` for `team`, on the
    /// first day it would count.
    pub fn impact(&self, team: &str, spec: &QuotaSpec, today: Day) -> Vec<Impact> {
        let on = spec.starts_on.max(today);
        let after = self.with(team, spec);
        self.flavors
            .iter()
            .flat_map(|flavor| {
                flavor.resources().into_iter().map(|c| Impact {
                    flavor: flavor.name.clone(),
                    resource: c.resource.clone(),
                    capacity: c.amount,
                    on,
                    before: self.side(team, flavor, &c.resource, on),
                    after: after.side(team, flavor, &c.resource, on),
                    why_no_borrowing: after.why_no_borrowing(team, &flavor.name, &c.resource, on),
                })
            })
            .collect()
    }
}

/// Dates, justification and checkpoints.
/// The team's largest job against what its queue may hold of one flavor's whole GPUs: Kueue
/// admits a Workload whole or not at all (its pod sets' requests fit the flavor's quota
/// together, or it waits), so a job larger than every line's nominal quota runs only on
/// quota borrowed from the cohort, and one larger than nominal plus the borrowing limit (the
/// nominal quota alone outside a cohort) on every line never runs. Without a borrowing limit,
/// a queue in a cohort may borrow all the cohort's unused quota.
fn check_largest_job(spec: &QuotaSpec, in_cohort: bool, checked: &mut Checked) {
    let Some(job) = spec.largest_job_gpus.map(i64::from) else {
        return;
    };
    let whole: Vec<&QuotaLine> = spec
        .lines
        .iter()
        .filter(|l| !l.resource.contains("/mig-"))
        .collect();
    if job == 0 || whole.is_empty() {
        let why = if job == 0 {
            "at least 1 GPU, or blank if you do not know"
        } else {
            "no line asks for whole GPUs, so no job of whole GPUs can run"
        };
        checked
            .errors
            .push(field("largest_job_gpus", why.to_owned()));
        return;
    }
    let most_nominal = whole.iter().map(|l| l.nominal).max().unwrap_or(0);
    let most_held = whole
        .iter()
        .map(|l| match (in_cohort, l.borrowing_limit) {
            (false, _) => Some(l.nominal),
            (true, Some(limit)) => Some(l.nominal + limit),
            (true, None) => None,
        })
        .try_fold(0, |most, held| held.map(|h| most.max(h)));
    match most_held {
        Some(most) if job > most => checked.errors.push(field(
            "largest_job_gpus",
            format!(
                "a job of {job} GPUs would never start: Kueue admits a job whole or not at all, and this queue may hold at most {most} GPUs of one flavor ({})",
                if in_cohort {
                    "its nominal quota plus its borrowing limit"
                } else {
                    "its nominal quota: it is in no cohort, so it borrows nothing"
                }
            ),
        )),
        _ if job > most_nominal => checked.warnings.push(field(
            "largest_job_gpus",
            format!(
                "a job of {job} GPUs is larger than any flavor's nominal quota here (at most {most_nominal}): it starts only on quota borrowed from the cohort, when other teams leave theirs idle, and is the first to be reclaimed"
            ),
        )),
        _ => {}
    }
}

fn check_terms(spec: &QuotaSpec, in_cohort: bool, today: Day, checked: &mut Checked) {
    if let Some(project) = &spec.project {
        crate::common::validate::validate_visible("project", project, &mut checked.errors);
    }
    crate::common::validate::validate_visible_lines(
        "justification",
        &spec.justification,
        &mut checked.errors,
    );
    let project = spec.project.as_deref().map_or(0, |p| p.chars().count());
    if project > MAX_PROJECT_CHARS {
        checked.errors.push(field(
            "project",
            format!("at most {MAX_PROJECT_CHARS} characters; {project} given"),
        ));
    }
    let chars = spec.justification.trim().chars().count();
    if chars == 0 {
        checked.errors.push(field(
            "justification",
            "say why the team needs this quota".into(),
        ));
    } else if chars > MAX_JUSTIFICATION_CHARS {
        checked.errors.push(field(
            "justification",
            format!("at most {MAX_JUSTIFICATION_CHARS} characters; {chars} given"),
        ));
    }
    if spec.starts_on < today {
        checked.warnings.push(field(
            "starts_on",
            format!(
                "{} has passed (today is {today}): the quota counts from the day it is approved",
                spec.starts_on
            ),
        ));
    }
    if let Some(end) = spec.ends_on {
        if end < spec.starts_on {
            checked.errors.push(field(
                "ends_on",
                format!("{end} is before the start, {}", spec.starts_on),
            ));
        } else if end < today {
            checked.errors.push(field(
                "ends_on",
                format!("{end} has passed (today is {today})"),
            ));
        }
    }
    if spec.preemptible(in_cohort) {
        match spec.checkpoint_interval_min {
            None | Some(0) => checked.errors.push(field(
                "checkpoint_interval_min",
                "a preemptible queue needs a checkpoint interval: its work may be evicted when it borrows or when higher-priority work arrives".into(),
            )),
            Some(m) if m > CHECKPOINT_WARN_MIN => checked.warnings.push(field(
                "checkpoint_interval_min",
                format!(
                    "every {m} minutes: after a reclaim a job redoes {} minutes on average, more than 15",
                    f64::from(m) / 2.0
                ),
            )),
            Some(_) => {}
        }
    }
}
