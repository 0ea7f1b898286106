//! The workload history (`/api/cluster/workloads`): every Kueue Workload on the cluster, listed
//! a page at a time, then followed by watch, and recorded (`db.rs`), so that what ran is kept
//! after Kueue deletes it and the planner can learn from it. The recorder works as client-go's
//! reflector does: a complete listing, then a watch from the resource version the listing was
//! consistent at, made again from the last version seen whenever the server ends it or it
//! fails; only a watch the server can no longer serve (410 Expired) lists again.
//!
//! Invariants:
//! - recording is idempotent: a listing or a change writes by upsert and each eviction once
//!   (its condition's transition time is its identity), so a restart, two replicas or a change
//!   seen again after a failure count nothing twice;
//! - nothing is lost: a row outlives its object (a deletion the watch sees, or a complete
//!   listing that no longer holds it, marks it gone); a cluster that is down is watched again
//!   from where the watch was, and a listing that fails part-way marks nothing gone;
//! - only a cluster is read: in GitOps mode or with no target the answer says so, and holds
//!   only the demo's history (`load_demo`, marked demo) if `gpufleet demo` wrote one.

use axum::{
    Json,
    extract::{Path, Query, State},
};
use futures_util::{StreamExt, TryStreamExt};
use shared::{
    cluster::workload::{
        self, HistoryEntry, HistoryQuery, MAX_HISTORY_WORKLOADS, RecordedWorkload, RecorderStatus,
        Transition, WorkloadHistory,
    },
    common::day::Day,
};
use sqlx::PgPool;
use tokio::task::JoinHandle;

use crate::{
    app::AppState,
    clock,
    error::{Error, Result},
    retry,
};

use super::{
    db,
    k8s::{Change, Failure},
};

/// Follows and records the cluster's Workloads (a listing, then watches; failures wait,
/// backing off from `every`, and watch again from where they were); None when no cluster is
/// read.
pub fn spawn(state: AppState) -> Option<JoinHandle<()>> {
    state.cluster.client()?;
    Some(tokio::spawn(async move {
        // The resource version to watch from; None: list first.
        let (mut from, mut failures): (Option<String>, u32) = (None, 0);
        loop {
            let started = tokio::time::Instant::now();
            let step = match from.as_mut() {
                None => list(&state).await.map(|l| l.map(|l| l.version)),
                Some(version) => follow(&state, version)
                    .await
                    .map(|expired| (!expired).then(|| version.clone())),
            };
            match step {
                Ok(next) => {
                    failures = 0;
                    from = next;
                    // A server that ends each watch at once is not asked again at once.
                    tokio::time::sleep_until(started + std::time::Duration::from_secs(1)).await;
                }
                Err(err) => {
                    tracing::warn!(%err, "recording the workload history failed");
                    failures = failures.saturating_add(1);
                    tokio::time::sleep(retry::backoff(state.cluster.every, failures)).await;
                }
            }
        }
    }))
}

/// A complete listing, recorded.
pub struct Listing {
    pub workloads: u32,
    /// The resource version it is consistent at: a watch from here misses nothing.
    pub version: String,
}

/// One complete listing: how many Workloads it recorded (None without a cluster).
pub async fn record(state: &AppState) -> Result<Option<u32>> {
    Ok(list(state).await?.map(|l| l.workloads))
}

/// One complete listing (None without a cluster). A failure is kept as the recorder's state
/// (shown with the history) and returned.
pub async fn list(state: &AppState) -> Result<Option<Listing>> {
    let Some(kube) = state.cluster.client() else {
        return Ok(None);
    };
    let started_ms = clock::now_ms();
    let (mut listed, mut next, mut version) = (0u32, None, None);
    loop {
        let page = kube
            .list_page(
                "Workload",
                state.cluster.version,
                state.cluster.page,
                next.clone(),
            )
            .await;
        let page = match page {
            Ok(page) => page,
            Err(failure) => return Err(failed(state, &failure).await),
        };
        // A paged listing is consistent at its first page's version.
        version.get_or_insert(page.version);
        let recorded = store(state, &page.items, started_ms).await?;
        listed = listed.saturating_add(recorded);
        // A server handing back the token it was given would page for ever.
        if page.next.is_none() || page.next == next {
            break;
        }
        next = page.next;
    }
    db::listed_workloads(
        &state.pool,
        started_ms,
        i32::try_from(listed).unwrap_or(i32::MAX),
    )
    .await?;
    Ok(Some(Listing {
        workloads: listed,
        version: version.unwrap_or_default(),
    }))
}

/// Records what one watch from `from` sees until the server ends it, moving `from` past each
/// change recorded; true when the server no longer holds the changes since `from` (list
/// again). A failure is kept as the recorder's state and returned.
pub async fn follow(state: &AppState, from: &mut String) -> Result<bool> {
    let Some(kube) = state.cluster.client() else {
        return Ok(false);
    };
    let mut changes = match kube.watch("Workload", state.cluster.version, from).await {
        Ok(changes) => changes,
        Err(failure) => return Err(failed(state, &failure).await),
    };
    while let Some(change) = changes.next().await {
        let object = match change {
            Err(failure) => return Err(failed(state, &failure).await),
            Ok(Change::Expired) => return Ok(true),
            Ok(Change::Bookmark(version)) => {
                *from = version;
                db::watched(&state.pool).await?;
                continue;
            }
            Ok(Change::Applied(object)) => {
                store(state, std::slice::from_ref(&object), clock::now_ms()).await?;
                object
            }
            Ok(Change::Deleted(object)) => {
                store(state, std::slice::from_ref(&object), clock::now_ms()).await?;
                if let Some(uid) = object["metadata"]["uid"].as_str() {
                    db::workload_gone(&state.pool, uid).await?;
                }
                object
            }
        };
        if let Some(version) = object["metadata"]["resourceVersion"].as_str() {
            version.clone_into(from);
        }
        db::watched(&state.pool).await?;
    }
    Ok(false)
}

/// Records the Workloads among `objects` as seen at `seen_at_ms`: how many.
async fn store(state: &AppState, objects: &[serde_json::Value], seen_at_ms: i64) -> Result<u32> {
    let recorded: Vec<_> = objects
        .iter()
        .filter_map(|object| {
            workload::read(object)
                .inspect_err(|why| tracing::warn!(%why, "a Workload is not recorded"))
                .ok()
        })
        .collect();
    let rows = serde_json::to_string(&recorded).map_err(|e| Error::Internal(e.to_string()))?;
    db::record_workloads(&state.pool, &rows, seen_at_ms, false).await?;
    Ok(u32::try_from(recorded.len()).unwrap_or(u32::MAX))
}

async fn failed(state: &AppState, failure: &Failure) -> Error {
    let message = format!("following Kueue's Workloads: {}", failure.message());
    match db::recording_failed(&state.pool, &message).await {
        Ok(()) => Error::Unavailable,
        Err(err) => err.into(),
    }
}

/// Days of demo history `gpufleet demo` writes: four weeks and today.
pub(crate) const DEMO_DAYS: i32 = 28;

/// The demo's workload history (`shared::usage::demo::workloads`): four weeks up to now for
/// every team with whole GPUs in force today outside the inference pools (what serves there is
/// the demo's vLLM replicas, counted by vLLM's metrics, not batch jobs), doing the training the
/// demo exporter's metrics show (`shared::usage::demo::training`), written as the recorder
/// would have seen it and marked demo.
/// Only into an empty history: how many Workloads, or None when it held some.
pub async fn load_demo(pool: &PgPool) -> Result<Option<usize>> {
    use shared::usage::demo::{self, workloads::DemoQueue};
    if db::has_workloads(pool).await? {
        return Ok(None);
    }
    let world = {
        let mut conn = pool.acquire().await?;
        crate::quota::world(&mut conn).await?
    };
    let today = clock::today();
    let in_force = world.effective_on(today);
    let queues: Vec<DemoQueue> = world
        .teams
        .iter()
        .filter_map(|t| {
            let spec = &in_force.get(t.team.as_str())?.spec;
            let line = spec.lines.iter().find(|l| {
                l.resource == "nvidia.com/gpu" && l.nominal > 0 && !l.flavor.contains("inference")
            })?;
            Some(DemoQueue {
                namespace: t.namespace.clone(),
                local_queue: t.local_queue.clone(),
                cluster_queue: t.cluster_queue.clone(),
                flavor: line.flavor.clone(),
                resource: line.resource.clone(),
            })
        })
        .collect();
    let (pools, teams) = crate::usage::demo::fleet(pool).await?;
    let metrics = |q: &DemoQueue, at_ms: i64| {
        demo::training(&pools, &teams, (&q.cluster_queue, &q.flavor), at_ms)
    };
    let now_ms = clock::now_ms();
    let from_ms = i64::from(today.plus(-DEMO_DAYS).days_since_epoch()) * 86_400_000;
    let demo = demo::workloads::history(
        &queues,
        &metrics,
        (from_ms, DEMO_DAYS.unsigned_abs() + 1),
        now_ms,
        shared::common::rng::DEFAULT_SEED,
    );
    for snapshot in [&demo.while_evicted, &demo.now] {
        for page in snapshot.chunks(500) {
            let rows = serde_json::to_string(page).map_err(|e| Error::Internal(e.to_string()))?;
            db::record_workloads(pool, &rows, now_ms, true).await?;
        }
    }
    Ok(Some(demo.now.len()))
}

/// `GET /api/cluster/workloads`: every team's recorded Workloads created in the window.
pub async fn all(
    State(state): State<AppState>,
    Query(query): Query<HistoryQuery>,
) -> Result<Json<WorkloadHistory>> {
    Ok(Json(history(&state, &query, None).await?))
}

/// `GET /api/cluster/teams/{team}/workloads`: one team's (the Workloads in its namespace).
pub async fn of_team(
    State(state): State<AppState>,
    Path(team): Path<String>,
    Query(query): Query<HistoryQuery>,
) -> Result<Json<WorkloadHistory>> {
    Ok(Json(history(&state, &query, Some(&team)).await?))
}

async fn history(
    state: &AppState,
    query: &HistoryQuery,
    team: Option<&str>,
) -> Result<WorkloadHistory> {
    let (from, end) = query.checked().map_err(Error::Invalid)?;
    let row = db::recorder(&state.pool).await?;
    let (workloads, truncated) = window(state, from, end, team).await?;
    Ok(WorkloadHistory {
        unrecorded: unrecorded(state.cluster.mode()),
        recorder: RecorderStatus {
            listed_at_ms: row.listed_at_ms,
            listed: row.listed.and_then(|n| u32::try_from(n).ok()),
            watched_at_ms: row.watched_at_ms,
            last_error: row.last_error,
            last_error_at_ms: row.last_error_at_ms,
        },
        from,
        to: end.plus(-1),
        workloads,
        truncated,
    })
}

/// The recorded Workloads created in [`from`, `end`) (in `team`'s namespace when given), at
/// most [`MAX_HISTORY_WORKLOADS`], oldest first; and whether the window held more.
pub async fn window(
    state: &AppState,
    from: Day,
    end: Day,
    team: Option<&str>,
) -> Result<(Vec<HistoryEntry>, bool)> {
    let most = MAX_HISTORY_WORKLOADS as usize;
    let (from, end) = (clock::date(from)?, clock::date(end)?);
    let seen = evictions_seen(state, from, end, team).await?;
    let mut rows = db::workload_history(&state.pool, (from, end), team, most as i64 + 1);
    let mut workloads = Vec::new();
    while let Some(row) = rows.try_next().await? {
        if workloads.len() == most {
            return Ok((workloads, true));
        }
        workloads.push(entry(row, &seen)?);
    }
    Ok((workloads, false))
}

/// Every recorded Workload created in [`from`, `end`), oldest first, handed to `each`, at most
/// `most`; whether the window held more. One query streams the rows; a task beside it reads
/// them a page at a time and each page is parsed on the compute pool while the next is read,
/// so a large window does not hold up the async runtime.
pub async fn each_in_window(
    state: &AppState,
    from: Day,
    end: Day,
    most: usize,
    mut each: impl FnMut(&HistoryEntry),
) -> Result<bool> {
    const PAGE: usize = 5_000;
    let (from, end) = (clock::date(from)?, clock::date(end)?);
    let seen = std::sync::Arc::new(evictions_seen(state, from, end, None).await?);
    let (pages, mut read) = tokio::sync::mpsc::channel(2);
    let pool = state.pool.clone();
    let reader = tokio::spawn(async move {
        let mut rows = db::workload_history(&pool, (from, end), None, most as i64 + 1);
        let mut page = Vec::with_capacity(PAGE);
        while let Some(row) = rows.try_next().await.transpose() {
            page.push(row);
            if page.len() == PAGE && pages.send(std::mem::take(&mut page)).await.is_err() {
                return;
            }
        }
        let _ = pages.send(page).await;
    });
    let _stop_reading = AbortOnDrop(reader);
    let mut handed = 0usize;
    while let Some(rows) = read.recv().await {
        let seen = seen.clone();
        let page = state
            .work
            .compute
            .run(move |_| {
                rows.into_iter()
                    .map(|row| entry(row?, &seen))
                    .collect::<Result<Vec<_>>>()
            })
            .await??;
        for entry in &page {
            if handed == most {
                return Ok(true);
            }
            each(entry);
            handed += 1;
        }
    }
    Ok(false)
}

/// Stops the history's reader when the read ends early (its window held more, or failed).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The evictions the recorder saw, by uid, oldest first.
type Seen = std::collections::HashMap<String, Vec<Transition>>;

/// Every eviction seen of the Workloads created in [`from`, `end`) (in `team`'s namespace
/// when given).
async fn evictions_seen(
    state: &AppState,
    from: sqlx::types::time::Date,
    end: sqlx::types::time::Date,
    team: Option<&str>,
) -> Result<Seen> {
    let mut seen = Seen::new();
    for row in db::evictions_seen(&state.pool, from, end, team).await? {
        seen.entry(row.uid).or_default().push(Transition {
            at_ms: row.at_ms,
            reason: row.reason,
            detail: row.detail,
        });
    }
    Ok(seen)
}

/// A stored row as the history's entry, with the evictions seen of it; its JSON parts were
/// written by the recorder, so one that does not read is a fault of ours (500), not the
/// caller's.
fn entry(row: db::HistoryRow, seen: &Seen) -> Result<HistoryEntry> {
    fn json<T: serde::de::DeserializeOwned>(uid: &str, text: &str) -> Result<T> {
        serde_json::from_str(text)
            .map_err(|e| Error::Internal(format!("the recorded Workload {uid} does not read: {e}")))
    }
    /// `evictions` and `problems`: absent where empty.
    fn listed<T: serde::de::DeserializeOwned>(uid: &str, text: Option<String>) -> Result<Vec<T>> {
        text.map_or(Ok(Vec::new()), |t| json(uid, &t))
    }
    let uid = row.uid.as_str();
    let (pod_sets, evicted, evictions, problems, evictions_seen) = (
        json(uid, &row.pod_sets)?,
        row.evicted.as_deref().map(|t| json(uid, t)).transpose()?,
        listed(uid, row.evictions)?,
        listed(uid, row.problems)?,
        seen.get(uid).cloned().unwrap_or_default(),
    );
    Ok(HistoryEntry {
        workload: RecordedWorkload {
            pod_sets,
            evicted,
            evictions,
            problems,
            created_at_ms: clock::unix_ms(row.created_at),
            quota_reserved_at_ms: row.quota_reserved_at.map(clock::unix_ms),
            admitted_at_ms: row.admitted_at.map(clock::unix_ms),
            finished: row.finished_at.map(|at| Transition {
                at_ms: clock::unix_ms(at),
                reason: row.finished_reason.unwrap_or_default(),
                detail: None,
            }),
            namespace: row.namespace,
            name: row.name,
            local_queue: row.local_queue,
            cluster_queue: row.cluster_queue,
            priority: row.priority,
            priority_class: row.priority_class,
            uid: row.uid,
        },
        evictions_seen,
        team: row.team,
        last_admitted_at_ms: row.last_admitted_at.map(clock::unix_ms),
        gone_at_ms: row.gone_at.map(clock::unix_ms),
        demo: row.demo,
    })
}

/// Why nothing is recorded, in the words the console shows wherever history is.
pub(crate) fn unrecorded(mode: &str) -> Option<String> {
    match mode {
        "cluster" => None,
        "gitops" => Some(
            "GitOps mode: the console writes Kueue's objects to files and reads no cluster, so \
             it records no Workloads; only what Prometheus scrapes of Kueue is history here"
                .to_owned(),
        ),
        _ => Some(
            "no cluster is configured (GPUFLEET_KUBECONFIG or GPUFLEET_IN_CLUSTER): no Workloads \
             are recorded"
                .to_owned(),
        ),
    }
}
