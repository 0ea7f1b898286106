//! Jobs on the real cluster in compressed time, as a Job controller and kubelet would report
//! them (there are none here): each Job is created in its unit and completed once it has worked
//! its units since Kueue last admitted it; Kueue's admissions, evictions and finishes are read
//! from a watch of the Workloads, each in the unit it was seen in. Used by the conformance
//! scenarios and the recorded week.
//!
//! Jobs complete at the start of a unit and arrive [`Clock::arrival`] into theirs, so that, as
//! in the week engine's minute, completions come before arrivals and both before admission.
//! How far apart matters: Kueue requeues the workloads it found inadmissible one batch period
//! after quota frees (`requeueBatchPeriod`, 1 s, pkg/cache/queue/inadmissible_workloads.go,
//! v0.17), and a job created within it takes the freed quota first.

use std::time::Duration;

use futures_util::{StreamExt, stream::BoxStream};
use kube::{
    Client,
    api::{Api, DynamicObject, PostParams, WatchEvent, WatchParams},
};
use serde_json::Value;
use tokio::time::Instant;

use crate::{
    common::real_cluster::{kueue, resource},
    real_cluster::complete_in,
};

/// A Workload watch.
pub(crate) type Watch = BoxStream<'static, kube::Result<WatchEvent<DynamicObject>>>;

/// One Job to run: its manifest (`real_cluster::job`), the unit it is created in and the units
/// it works once admitted (all of them again after an eviction: no checkpoints).
pub(crate) struct Timed {
    pub(crate) manifest: Value,
    pub(crate) at: u32,
    pub(crate) runs: u32,
}

impl Timed {
    fn namespace(&self) -> &str {
        self.manifest["metadata"]["namespace"]
            .as_str()
            .expect("namespace")
    }

    fn name(&self) -> &str {
        self.manifest["metadata"]["name"].as_str().expect("name")
    }
}

/// What happened to a Job's Workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// Quota reserved, on this flavor of `nvidia.com/gpu`.
    Admitted {
        flavor: String,
    },
    Evicted,
    Finished,
}

/// A change of job `job` (its index), seen `at` from the start, in `unit`.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) job: usize,
    pub(crate) at: Duration,
    pub(crate) unit: u32,
    pub(crate) change: Change,
}

/// Real time per unit, and when a run is over.
pub(crate) struct Clock {
    pub(crate) unit: Duration,
    /// How far into its unit a job is created.
    pub(crate) arrival: Duration,
    /// Units of no change, with every job arrived and none admitted, after which the run is
    /// over (what is pending then stays pending).
    pub(crate) quiet_units: u32,
    pub(crate) max_units: u32,
}

/// A watch of `namespace`'s Workloads from now: opened before the clock starts, so that no
/// change is missed.
pub(crate) async fn watch(client: &Client, namespace: &str) -> Watch {
    let workloads: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &kueue("Workload"));
    workloads
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .expect("watch Workloads")
        .boxed()
}

/// What a Job's Workload says: quota reserved, finished, and how often it was admitted.
#[derive(Debug, Default, Clone, Copy)]
struct State {
    reserved: bool,
    finished: bool,
    admissions: u32,
}

/// Runs `jobs` on the cluster through `client`, reading `watches` (one for each namespace of
/// the jobs); every change seen, in order.
pub(crate) async fn run(
    client: &Client,
    jobs: &[Timed],
    watches: Vec<Watch>,
    clock: &Clock,
) -> Vec<Seen> {
    let mut watch = futures_util::stream::select_all(watches);
    let api = |j: &Timed| -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), j.namespace(), &resource("batch/v1", "Job"))
    };
    let mut arrivals: Vec<usize> = (0..jobs.len()).collect();
    arrivals.sort_by_key(|&j| jobs[j].at);
    let mut arrivals = arrivals.into_iter().peekable();
    let start = Instant::now();
    let unit_of = |at: Instant| {
        u32::try_from((at - start).as_millis() / clock.unit.as_millis()).expect("units")
    };
    let at_unit = |unit: u32| start + clock.unit * unit;
    let arrives = |j: usize| at_unit(jobs[j].at) + clock.arrival;
    let mut states = vec![State::default(); jobs.len()];
    // Completions due: (when, job, its admission).
    let mut due: Vec<(Instant, usize, u32)> = Vec::new();
    let mut seen = Vec::new();
    let mut last_change = start;
    loop {
        let now = Instant::now();
        let quiet = arrivals.peek().is_none()
            && states.iter().all(|s| !s.reserved || s.finished)
            && now - last_change > clock.unit * clock.quiet_units;
        if states.iter().all(|s| s.finished) || quiet || unit_of(now) >= clock.max_units {
            return seen;
        }
        let next_arrival = arrivals.peek().map(|&j| arrives(j));
        let next_due = due.iter().map(|d| d.0).min();
        let wake = [next_arrival, next_due]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + clock.unit);
        tokio::select! {
            event = watch.next() => {
                let event = event.expect("the watch goes on").expect("a watch event");
                let (WatchEvent::Added(workload) | WatchEvent::Modified(workload)) = event else {
                    continue;
                };
                let Some(j) = owner(jobs, &workload) else { continue };
                let now = Instant::now();
                let unit = unit_of(now);
                let (was, is) = (states[j], conditions(&workload));
                let change = match (was.reserved, is.0, was.finished, is.1) {
                    (_, _, false, true) => Some(Change::Finished),
                    (false, true, _, _) => Some(Change::Admitted { flavor: flavor(&workload) }),
                    (true, false, _, _) => Some(Change::Evicted),
                    _ => None,
                };
                (states[j].reserved, states[j].finished) = is;
                let Some(change) = change else { continue };
                last_change = now;
                if let Change::Admitted { .. } = change {
                    states[j].admissions += 1;
                    let ends = at_unit(unit + jobs[j].runs) + Duration::from_millis(20);
                    due.push((ends, j, states[j].admissions));
                }
                seen.push(Seen { job: j, at: now - start, unit, change });
            }
            () = tokio::time::sleep_until(wake) => {
                let now = Instant::now();
                while let Some(j) = arrivals.next_if(|&j| arrives(j) <= now) {
                    let job = serde_json::from_value(jobs[j].manifest.clone()).expect("a Job");
                    (api(&jobs[j]).create(&PostParams::default(), &job).await)
                        .unwrap_or_else(|e| panic!("{}: {e}", jobs[j].name()));
                }
                let (now_due, later): (Vec<_>, Vec<_>) = due.drain(..).partition(|d| d.0 <= now);
                due = later;
                for (_, j, admission) in now_due {
                    let s = states[j];
                    if s.reserved && !s.finished && s.admissions == admission {
                        complete_in(&api(&jobs[j]), jobs[j].name()).await;
                    }
                }
            }
        }
    }
}

/// The job a Workload belongs to (its owner Job, in its namespace).
fn owner(jobs: &[Timed], workload: &DynamicObject) -> Option<usize> {
    let owners = workload.metadata.owner_references.as_ref()?;
    let name = &owners.first()?.name;
    let namespace = workload.metadata.namespace.as_deref()?;
    jobs.iter()
        .position(|j| j.name() == name && j.namespace() == namespace)
}

/// Whether a Workload holds quota (`QuotaReserved`), and whether it has finished.
fn conditions(workload: &DynamicObject) -> (bool, bool) {
    let conditions = workload.data["status"]["conditions"].as_array();
    let is = |kind: &str| {
        conditions
            .into_iter()
            .flatten()
            .any(|c| c["type"] == kind && c["status"] == "True")
    };
    (is("QuotaReserved"), is("Finished"))
}

/// The flavor Kueue assigned a Workload's GPUs.
fn flavor(workload: &DynamicObject) -> String {
    let assigned = &workload.data["status"]["admission"]["podSetAssignments"][0]["flavors"];
    assigned["nvidia.com/gpu"]
        .as_str()
        .expect("a flavor")
        .to_owned()
}
