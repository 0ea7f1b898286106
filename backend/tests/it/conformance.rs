//! The week engine against real Kueue, scenario by scenario. Each scenario of
//! `tests/conformance/` (queues, a cohort, policies and a few jobs, each file citing the Kueue
//! page or source it exercises) runs twice: on the real Kueue of `./dev test`, whose Jobs the
//! test submits at their times and completes once they have worked their units since Kueue
//! last admitted them, and through the week engine's replay of the same jobs, a unit being one
//! of its minutes. Every job's admissions (and flavors), evictions and finish must agree, each
//! within [`TOLERANCE_UNITS`]; a scenario marked `engineDiffers` must still differ, so that the
//! mark goes once the engine is fixed.
//!
//! Real time is cut into units of [`UNIT`] from the scenario's start: jobs arrive a quarter
//! into their unit and complete at the start of one, so that, as in the engine's minute,
//! completions come before arrivals and both before admission. A step's unit is the one it was
//! seen in. Scenarios keep jobs that compete for quota out of the same unit: between two jobs
//! created a few milliseconds apart, Kueue admits whichever it sees first.

use std::{collections::BTreeMap, path::Path, time::Duration};

use futures_util::StreamExt;
use kube::{
    Client,
    api::{Api, DynamicObject, PostParams, WatchEvent, WatchParams},
};
use serde::Deserialize;
use serde_json::{Value, json};
use shared::{
    kueue::{
        FlavorObject, KueueVersion, Queue, Queueing, Quota, Reclaim, Setup, WithinQueue,
        priority_class,
    },
    planning::{
        scenario::{SCENARIO_VERSION, Scenario},
        simulate::{self, Happened, Recorded},
    },
};
use tokio::time::Instant;

use crate::{
    common::real_cluster::{Names, eventually, kueue, real, resource},
    real_cluster::{complete_in, job},
};

/// Real time per unit of a scenario (a minute of the engine's).
const UNIT: Duration = Duration::from_secs(2);
/// How far apart scenarios start, so that their first jobs do not reach Kueue in one burst.
const STAGGER: Duration = Duration::from_millis(250);
/// How far apart, in units, Kueue's step and the engine's may lie: a step seen late by the
/// watch lands in the next unit, and the engine's preemptor starts its work a minute after
/// its victims are evicted (their pods terminating), where Kueue's Jobs here have no pods.
const TOLERANCE_UNITS: u32 = 1;
/// Units of no change, with every job arrived and none admitted, after which a scenario's
/// run on Kueue is over (what is pending then stays pending).
const QUIET_UNITS: u32 = 3;
/// The most units a scenario runs on Kueue.
const MAX_UNITS: u32 = 60;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Case {
    #[serde(skip)]
    name: String,
    what: String,
    source: String,
    cohort: bool,
    queueing_strategy: String,
    reclaim_within_cohort: Reclaim,
    within_cluster_queue: WithinQueue,
    flavors: Vec<String>,
    queues: Vec<CaseQueue>,
    jobs: Vec<CaseJob>,
    /// Why the engine still departs from Kueue here, until it is fixed.
    #[serde(default)]
    engine_differs: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseQueue {
    name: String,
    /// Per flavor.
    quota: BTreeMap<String, CaseQuota>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CaseQuota {
    nominal: u32,
    #[serde(default)]
    borrowing_limit: Option<u32>,
    #[serde(default)]
    lending_limit: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseJob {
    name: String,
    queue: String,
    gpus: u32,
    priority: i32,
    /// The unit it is submitted in.
    at: u32,
    /// Units of work once admitted (all of it again after an eviction: no checkpoints).
    runs: u32,
}

/// One step of one job's life (`job`: its index in the scenario), in units from the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    job: usize,
    unit: u32,
    happened: Happened,
}

/// Every scenario, in file order.
fn cases() -> Vec<Case> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/conformance");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/conformance")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).expect("scenario");
            let mut case: Case =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            case.name = path.file_stem().expect("stem").to_string_lossy().into();
            case.check();
            case
        })
        .collect()
}

impl Case {
    /// A scenario that names only its own queues and flavors, and jobs that fit some quota.
    fn check(&self) {
        let name = &self.name;
        assert!(!self.what.is_empty() && !self.source.is_empty(), "{name}");
        for job in &self.jobs {
            assert!(self.queue(&job.queue).is_some(), "{name}: {}", job.queue);
            assert!(job.gpus > 0 && job.runs > 0, "{name}: {}", job.name);
        }
        for queue in &self.queues {
            for flavor in queue.quota.keys() {
                assert!(self.flavors.contains(flavor), "{name}: {flavor}");
            }
        }
        self.queueing();
    }

    fn queue(&self, name: &str) -> Option<usize> {
        self.queues.iter().position(|q| q.name == name)
    }

    fn queueing(&self) -> Queueing {
        match self.queueing_strategy.as_str() {
            "StrictFIFO" => Queueing::StrictFifo,
            "BestEffortFIFO" => Queueing::BestEffortFifo,
            other => panic!("{}: queueingStrategy {other}", self.name),
        }
    }

    /// A flavor's cards: every queue's nominal quota of it (Kueue admits on quota alone).
    fn cards(&self, flavor: &str) -> u32 {
        let quotas = self.queues.iter().filter_map(|q| q.quota.get(flavor));
        quotas.map(|q| q.nominal).sum()
    }

    /// The engine's classes: one per queue and priority of its jobs, team by team, as the
    /// scenario lists them (a replayed job takes its class's priority).
    fn classes(&self) -> Vec<(usize, i32)> {
        let mut classes = Vec::new();
        for q in 0..self.queues.len() {
            for job in self.jobs.iter().filter(|j| self.queue(&j.queue) == Some(q)) {
                if !classes.contains(&(q, job.priority)) {
                    classes.push((q, job.priority));
                }
            }
        }
        classes
    }
}

/// The scenario as the week engine's: a team per queue, an H100 flavor per flavor.
fn scenario(case: &Case) -> Scenario {
    let limits = |queue: &CaseQueue, limit: fn(&CaseQuota) -> Option<u32>| -> Value {
        (queue.quota.iter())
            .filter_map(|(flavor, q)| Some((flavor.clone(), json!(limit(q)?))))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let classes = case.classes();
    let teams: Vec<Value> = (case.queues.iter().enumerate())
        .map(|(q, queue)| {
            let workloads: Vec<Value> = (classes.iter().filter(|c| c.0 == q))
                .map(|&(_, priority)| {
                    json!({"name": format!("priority-{priority}"), "kind": "batch",
                        "flavor": case.flavors[0], "demand": {"preset": "flat", "peak_gpus": 0.0},
                        "gpus_per_job": 1, "checkpoint_minutes": 0, "restart_minutes": 0,
                        "priority": priority})
                })
                .collect();
            json!({"name": queue.name, "nominal_gpus": limits(queue, |q| Some(q.nominal)),
                "borrowing_limit_gpus": limits(queue, |q| q.borrowing_limit),
                "lending_limit_gpus": limits(queue, |q| q.lending_limit), "workloads": workloads})
        })
        .collect();
    let fleet: Vec<Value> = (case.flavors.iter())
        .map(|f| {
            json!({"flavor": f, "gpu_model": "H100-SXM5-80GB", "count": case.cards(f),
                "gpus_per_node": 8, "price_cents_per_gpu_hour": 0})
        })
        .collect();
    let queueing = match case.queueing() {
        Queueing::StrictFifo => "strict_fifo",
        Queueing::BestEffortFifo => "best_effort_fifo",
    };
    serde_json::from_value(
        json!({"version": SCENARIO_VERSION, "name": case.name, "fleet": fleet, "teams": teams,
        "quota": {"cohort": case.cohort, "queueing": queueing,
            "reclaim_within_cohort": case.reclaim_within_cohort,
            "within_cluster_queue": case.within_cluster_queue},
        "constraints": {"kubernetes_version": "1.36", "platform_team_size": 1,
            "platform_engineer_cost_cents_per_year": 0, "runs_own_models": false}}),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", case.name))
}

/// What the week engine does with the scenario's jobs.
fn engine(case: &Case) -> Vec<Step> {
    let classes = case.classes();
    let recorded: Vec<Recorded> = (case.jobs.iter())
        .map(|j| {
            let of = (case.queue(&j.queue).expect("queue"), j.priority);
            Recorded {
                class: classes.iter().position(|c| *c == of).expect("class"),
                gpus: j.gpus,
                minute: j.at,
                length_min: j.runs,
                running: false,
            }
        })
        .collect();
    let (_, events) = simulate::replay_traced(&scenario(case), &recorded).expect("replayed");
    (events.into_iter())
        .map(|e| Step {
            job: usize::try_from(e.job).expect("index"),
            unit: e.minute,
            happened: e.happened,
        })
        .collect()
}

/// The scenario's Kueue objects, rendered by gpufleet's one Kueue renderer: a namespace and
/// cohort of its own, a ClusterQueue per queue (LocalQueues named as the queues).
fn setup(case: &Case, names: &Names) -> Setup {
    let namespace = names.of(&case.name);
    let gpu = "nvidia.com/gpu".to_owned();
    Setup {
        flavors: (case.flavors.iter())
            .map(|f| FlavorObject {
                name: names.of(f),
                ..FlavorObject::default()
            })
            .collect(),
        resources: (case.flavors.iter())
            .map(|f| (names.of(f), vec![gpu.clone()]))
            .collect(),
        queues: (case.queues.iter())
            .map(|q| Queue {
                cluster_queue: format!("{namespace}-{}", q.name),
                namespace: namespace.clone(),
                local_queue: q.name.clone(),
                cohort: case.cohort.then(|| namespace.clone()),
                queueing: case.queueing(),
                reclaim: case.reclaim_within_cohort,
                within: case.within_cluster_queue,
                quotas: (q.quota.iter())
                    .map(|(flavor, quota)| Quota {
                        flavor: names.of(flavor),
                        resource: gpu.clone(),
                        nominal: quota.nominal.into(),
                        borrowing_limit: quota.borrowing_limit.map(i64::from),
                        lending_limit: quota.lending_limit.map(i64::from),
                    })
                    .collect(),
                held: false,
            })
            .collect(),
        priorities: case.jobs.iter().map(|j| j.priority).collect(),
    }
}

/// What one job's Workload says now.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    reserved: bool,
    finished: bool,
    admissions: u32,
}

/// A scenario's objects on the cluster, its queues active, its Workloads watched: ready to run.
struct Prepared<'a> {
    case: &'a Case,
    names: &'a Names,
    jobs: Api<DynamicObject>,
    manifests: Vec<Value>,
    watch: futures_util::stream::BoxStream<'static, kube::Result<WatchEvent<DynamicObject>>>,
}

/// Applies the scenario's Kueue objects (through `client`, shared by every scenario) and waits
/// until its ClusterQueues are active.
async fn prepare<'a>(case: &'a Case, names: &'a Names, client: &Client) -> Prepared<'a> {
    let setup = setup(case, names);
    let namespace = names.of(&case.name);
    real().create_namespace(&namespace).await;
    for object in setup.objects(KueueVersion::V1beta2) {
        real()
            .apply("gpufleet-conformance", object)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    }
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &kueue("ClusterQueue"));
    for queue in &setup.queues {
        eventually(30, &format!("{} active", queue.cluster_queue), async || {
            let cq = queues.get(&queue.cluster_queue).await.ok()?;
            let conditions = cq.data["status"]["conditions"].as_array()?;
            let active = conditions.iter().find(|c| c["type"] == "Active")?;
            (active["status"] == "True").then_some(())
        })
        .await;
    }
    let workloads: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &kueue("Workload"));
    let watch = workloads
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .expect("watch Workloads")
        .boxed();
    Prepared {
        case,
        names,
        jobs: Api::namespaced_with(client.clone(), &namespace, &resource("batch/v1", "Job")),
        manifests: (case.jobs.iter())
            .map(|j| {
                job(
                    &namespace,
                    &j.queue,
                    &j.name,
                    j.gpus,
                    &priority_class(j.priority),
                )
            })
            .collect(),
        watch,
    }
}

/// What real Kueue does with the scenario's jobs.
async fn kueue_run(prepared: Prepared<'_>, delay: Duration) -> Vec<Step> {
    tokio::time::sleep(delay).await;
    let Prepared {
        case,
        names,
        jobs,
        manifests,
        mut watch,
    } = prepared;
    let mut arrivals: Vec<usize> = (0..case.jobs.len()).collect();
    arrivals.sort_by_key(|&j| case.jobs[j].at);
    let mut arrivals = arrivals.into_iter().peekable();
    let start = Instant::now();
    let unit_of = |at: Instant| u32::try_from((at - start).as_millis() / UNIT.as_millis());
    let unit_of = move |at: Instant| unit_of(at).expect("units");
    let at_unit = |unit: u32| start + UNIT * unit;
    let mut seen = vec![Seen::default(); case.jobs.len()];
    // Completions due: (when, job, its admission).
    let mut due: Vec<(Instant, usize, u32)> = Vec::new();
    let mut steps = Vec::new();
    let mut last_change = start;
    loop {
        let now = Instant::now();
        let arrived = arrivals.peek().is_none();
        let quiet = arrived
            && seen.iter().all(|s| !s.reserved || s.finished)
            && now - last_change > UNIT * QUIET_UNITS;
        if seen.iter().all(|s| s.finished) || quiet || unit_of(now) >= MAX_UNITS {
            return steps;
        }
        let next_arrival = (arrivals.peek()).map(|&j| at_unit(case.jobs[j].at) + UNIT / 4);
        let next_due = due.iter().map(|d| d.0).min();
        let wake = [next_arrival, next_due]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + UNIT);
        tokio::select! {
            event = watch.next() => {
                let event = event.expect("the watch goes on").expect("a watch event");
                let (WatchEvent::Added(workload) | WatchEvent::Modified(workload)) = event else {
                    continue;
                };
                let Some(j) = owner(case, &workload) else { continue };
                let now = Instant::now();
                let (was, is) = (seen[j], state(&workload));
                let unit = unit_of(now);
                let happened = match (was.reserved, is.0, was.finished, is.1) {
                    (_, _, false, true) => Some(Happened::Finished),
                    (false, true, _, _) => Some(Happened::Admitted { flavor: flavor(case, names, &workload) }),
                    (true, false, _, _) => Some(Happened::Evicted),
                    _ => None,
                };
                seen[j].reserved = is.0;
                seen[j].finished = is.1;
                if let Some(happened) = happened {
                    last_change = now;
                    steps.push(Step { job: j, unit, happened });
                    if let Happened::Admitted { .. } = happened {
                        seen[j].admissions += 1;
                        let ends = at_unit(unit + case.jobs[j].runs) + Duration::from_millis(20);
                        due.push((ends, j, seen[j].admissions));
                    }
                }
            }
            _ = tokio::time::sleep_until(wake) => {
                let now = Instant::now();
                while let Some(j) = arrivals.next_if(|&j| at_unit(case.jobs[j].at) + UNIT / 4 <= now) {
                    (jobs.create(&PostParams::default(), &serde_json::from_value(manifests[j].clone()).expect("job")))
                        .await
                        .unwrap_or_else(|e| panic!("{}: {}: {e}", case.name, case.jobs[j].name));
                }
                let (now_due, later): (Vec<_>, Vec<_>) = due.drain(..).partition(|d| d.0 <= now);
                due = later;
                for (_, j, admission) in now_due {
                    let s = seen[j];
                    if s.reserved && !s.finished && s.admissions == admission {
                        complete_in(&jobs, &case.jobs[j].name).await;
                    }
                }
            }
        }
    }
}

/// The scenario's job a Workload belongs to (its owner Job).
fn owner(case: &Case, workload: &DynamicObject) -> Option<usize> {
    let owners = workload.metadata.owner_references.as_ref()?;
    let name = &owners.first()?.name;
    case.jobs.iter().position(|j| j.name == *name)
}

/// Whether a Workload holds quota (`QuotaReserved`), and whether it has finished.
fn state(workload: &DynamicObject) -> (bool, bool) {
    let conditions = workload.data["status"]["conditions"].as_array();
    let is = |kind: &str| {
        conditions
            .into_iter()
            .flatten()
            .any(|c| c["type"] == kind && c["status"] == "True")
    };
    (is("QuotaReserved"), is("Finished"))
}

/// The scenario's flavor Kueue admitted a Workload on.
fn flavor(case: &Case, names: &Names, workload: &DynamicObject) -> usize {
    let assigned = &workload.data["status"]["admission"]["podSetAssignments"][0]["flavors"];
    let name = assigned["nvidia.com/gpu"].as_str().expect("a flavor");
    (case.flavors.iter())
        .position(|f| names.of(f) == name)
        .expect("one of the scenario's flavors")
}

/// One job's steps, as `0-6` (admitted in unit 0, finished in 6), `0-2x` (evicted in 2), a
/// flavor other than the first after `@`, `-` for none.
fn lives(case: &Case, steps: &[Step], job: usize) -> String {
    let mut out = String::new();
    for step in steps.iter().filter(|s| s.job == job) {
        match step.happened {
            Happened::Admitted { flavor } => {
                out += &format!(" {}", step.unit);
                if flavor > 0 {
                    out += &format!("@{}", case.flavors[flavor]);
                }
            }
            Happened::Evicted => out += &format!("-{}x", step.unit),
            Happened::Finished => out += &format!("-{}", step.unit),
        }
    }
    if out.is_empty() { " -".into() } else { out }
}

/// Each queue's GPU-units held (admission to eviction or finish; `end` for one still held).
fn gpu_units(case: &Case, steps: &[Step], end: u32) -> Vec<u32> {
    let mut held = vec![0; case.queues.len()];
    for (j, job) in case.jobs.iter().enumerate() {
        let mut since = None;
        for step in steps.iter().filter(|s| s.job == j) {
            match step.happened {
                Happened::Admitted { .. } => since = Some(step.unit),
                Happened::Evicted | Happened::Finished => {
                    let from = since.take().expect("admitted before");
                    held[case.queue(&job.queue).expect("queue")] += job.gpus * (step.unit - from);
                }
            }
        }
        if let Some(from) = since {
            held[case.queue(&job.queue).expect("queue")] += job.gpus * end.saturating_sub(from);
        }
    }
    held
}

/// Where Kueue's steps and the engine's part, job by job; empty when they agree.
fn differences(case: &Case, kueue: &[Step], engine: &[Step]) -> Vec<String> {
    let mut differences = Vec::new();
    for (j, job) in case.jobs.iter().enumerate() {
        let of = |steps: &[Step]| -> Vec<Step> {
            steps.iter().filter(|s| s.job == j).copied().collect()
        };
        let (k, e) = (of(kueue), of(engine));
        let alike = k.len() == e.len()
            && k.iter().zip(&e).all(|(k, e)| {
                k.happened == e.happened && k.unit.abs_diff(e.unit) <= TOLERANCE_UNITS
            });
        if !alike {
            differences.push(format!(
                "{}: Kueue{} / engine{}",
                job.name,
                lives(case, kueue, j),
                lives(case, engine, j)
            ));
        }
    }
    differences
}

/// Every scenario on real Kueue and in the week engine, side by side; the table is printed
/// (`--nocapture`) for the docs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_week_admits_evicts_and_finishes_jobs_as_real_kueue_does() {
    let cases = cases();
    assert!(cases.len() >= 24, "{} scenarios", cases.len());
    let names = Names::new("conformance");
    let client = real().client().await;
    // Every scenario set up before any starts its clock, then all side by side.
    let prepared =
        futures_util::future::join_all(cases.iter().map(|c| prepare(c, &names, &client))).await;
    let runs =
        (prepared.into_iter().zip(0u32..)).map(|(prepared, i)| kueue_run(prepared, STAGGER * i));
    let runs = futures_util::future::join_all(runs).await;
    let mut table = String::from(
        "| scenario | Kueue | engine | GPU-units (Kueue / engine) | agree |\n|---|---|---|---|---|\n",
    );
    let mut wrong = Vec::new();
    for (case, kueue) in cases.iter().zip(&runs) {
        let engine = engine(case);
        let differences = differences(case, kueue, &engine);
        let trace = |steps: &[Step]| -> String {
            (0..case.jobs.len())
                .map(|j| format!("{}{}", case.jobs[j].name, lives(case, steps, j)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let end = kueue.iter().map(|s| s.unit).max().unwrap_or(0);
        let held = |steps: &[Step]| gpu_units(case, steps, end);
        let units: Vec<String> = (case.queues.iter())
            .zip(held(kueue).iter().zip(held(&engine)))
            .map(|(q, (k, e))| format!("{} {k}/{e}", q.name))
            .collect();
        let agree = differences.is_empty();
        table += &format!(
            "| {} | {} | {} | {} | {} |\n",
            case.name,
            trace(kueue),
            trace(&engine),
            units.join(", "),
            if agree { "yes" } else { "no" }
        );
        match (&case.engine_differs, agree) {
            (None, false) => wrong.push(format!("{}: {}", case.name, differences.join("; "))),
            (Some(why), true) => wrong.push(format!(
                "{}: marked as differing ({why}) but the engine now agrees: remove the mark",
                case.name
            )),
            _ => {}
        }
    }
    eprintln!("{table}");
    assert!(wrong.is_empty(), "{}\n\n{table}", wrong.join("\n"));
}
