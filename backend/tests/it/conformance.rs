//! The week engine against real Kueue, scenario by scenario. Each scenario of
//! `tests/conformance/` (queues, a cohort, policies and a few jobs, each file citing the Kueue
//! page or source it exercises) runs twice: on the real Kueue of `./dev test`, whose Jobs the
//! test submits at their times and completes once they have worked their units since Kueue
//! last admitted them, and through the week engine's replay of the same jobs, a unit being one
//! of its minutes. Every job's admissions (and flavors), evictions and finish must agree, each
//! within [`TOLERANCE_UNITS`]; a scenario marked `engineDiffers` must still differ, so that the
//! mark goes once the engine is fixed.
//!
//! Real time is cut into units of [`UNIT`] from the scenario's start ([`drive`]). Scenarios keep
//! jobs that compete for quota out of the same unit: between two jobs created a few
//! milliseconds apart, Kueue admits whichever it sees first.

use std::{collections::BTreeMap, path::Path, time::Duration};

use crate::{
    common::real_cluster::{Names, eventually, kueue, real},
    drive::{self, Change, Clock, Timed, Watch},
    real_cluster::job,
};
use kube::{
    Client,
    api::{Api, DynamicObject},
};
use serde::Deserialize;
use serde_json::{Value, json};
use shared::{
    kueue::{
        BorrowWithinCohort, FlavorObject, KueueVersion, Queue, Queueing, Quota, Reclaim, Setup,
        WithinQueue, priority_class,
    },
    planning::{
        scenario::{SCENARIO_VERSION, Scenario},
        simulate::{self, Happened, Recorded},
    },
};

/// Real time per unit of a scenario (a minute of the engine's).
const UNIT: Duration = Duration::from_secs(2);
/// How far apart scenarios start, so that their first jobs do not reach Kueue in one burst.
const STAGGER: Duration = Duration::from_millis(250);
/// How far apart, in units, Kueue's step and the engine's may lie: a step seen late by the
/// watch lands in the next unit, and the engine's preemptor starts its work a minute after
/// its victims are evicted (their pods terminating), where Kueue's Jobs here have no pods.
const TOLERANCE_UNITS: u32 = 1;
/// Units of no change after which a scenario's run on Kueue is over ([`Clock::quiet_units`]).
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
    /// Kueue's default (`Never`) when absent.
    #[serde(default)]
    borrow_within_cohort: BorrowWithinCohort,
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
            "within_cluster_queue": case.within_cluster_queue,
            "borrow_within_cohort": case.borrow_within_cohort},
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
                borrow: case.borrow_within_cohort,
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

/// A scenario's objects on the cluster, its queues active, its Workloads watched: ready to run.
struct Prepared<'a> {
    case: &'a Case,
    names: &'a Names,
    jobs: Vec<Timed>,
    watch: Watch,
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
    Prepared {
        case,
        names,
        jobs: (case.jobs.iter())
            .map(|j| Timed {
                manifest: job(
                    &namespace,
                    &j.queue,
                    &j.name,
                    j.gpus,
                    &priority_class(j.priority),
                ),
                at: j.at,
                runs: j.runs,
            })
            .collect(),
        watch: drive::watch(client, &namespace).await,
    }
}

/// What real Kueue does with the scenario's jobs, after `delay`.
async fn kueue_run(client: &Client, prepared: Prepared<'_>, delay: Duration) -> Vec<Step> {
    tokio::time::sleep(delay).await;
    let Prepared {
        case,
        names,
        jobs,
        watch,
    } = prepared;
    let clock = Clock {
        unit: UNIT,
        // No scenario's arrival competes with a completion in its unit.
        arrival: UNIT / 4,
        quiet_units: QUIET_UNITS,
        max_units: MAX_UNITS,
    };
    let seen = drive::run(client, &jobs, vec![watch], &clock).await;
    let flavor = |name: &str| {
        (case.flavors.iter())
            .position(|f| names.of(f) == name)
            .expect("one of the scenario's flavors")
    };
    (seen.into_iter())
        .map(|s| Step {
            job: s.job,
            unit: s.unit,
            happened: match s.change {
                Change::Admitted { flavor: name } => Happened::Admitted {
                    flavor: flavor(&name),
                },
                Change::Evicted => Happened::Evicted,
                Change::Finished => Happened::Finished,
            },
        })
        .collect()
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
    let runs = (prepared.into_iter().zip(0u32..))
        .map(|(prepared, i)| kueue_run(&client, prepared, STAGGER * i));
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
