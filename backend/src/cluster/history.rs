//! The workload history (`/api/cluster/workloads`): every Kueue Workload on the cluster, listed
//! a page at a time every `every` and recorded (`db.rs`), so that what ran is kept after Kueue
//! deletes it and the planner can learn from it.
//!
//! Invariants:
//! - recording is idempotent: a listing writes by upsert and each eviction once (its condition's
//!   transition time is its identity), so a restart, two replicas or a listing repeated after a
//!   failure count nothing twice;
//! - nothing is lost: a row outlives its object (a complete listing that no longer holds it
//!   marks it gone), and a listing that fails part-way marks nothing gone;
//! - only a cluster is read: in GitOps mode or with no target the answer says so, and holds
//!   only the demo's history (`load_demo`, marked demo) if `gpufleet demo` wrote one.

use axum::{
    Json,
    extract::{Path, Query, State},
};
use shared::{
    cluster::{
        demo::DemoQueue,
        workload::{
            self, HistoryEntry, HistoryQuery, MAX_HISTORY_WORKLOADS, RecordedWorkload,
            RecorderStatus, Transition, WorkloadHistory,
        },
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

use super::{db, k8s::Failure};

/// Lists and records the cluster's Workloads every `every` (backing off while listings fail);
/// None when no cluster is read.
pub fn spawn(state: AppState) -> Option<JoinHandle<()>> {
    state.cluster.client()?;
    Some(tokio::spawn(async move {
        let mut failures = 0u32;
        loop {
            match record(&state).await {
                Ok(_) => failures = 0,
                Err(err) => {
                    tracing::warn!(%err, "recording the workload history failed");
                    failures = failures.saturating_add(1);
                }
            }
            tokio::time::sleep(retry::backoff(state.cluster.every, failures)).await;
        }
    }))
}

/// One complete listing: how many Workloads it recorded (None without a cluster). A failure
/// is kept as the recorder's state (shown with the history) and returned.
pub async fn record(state: &AppState) -> Result<Option<u32>> {
    let Some(kube) = state.cluster.client() else {
        return Ok(None);
    };
    let started_ms = clock::now_ms();
    let (mut listed, mut next) = (0u32, None);
    loop {
        let page = kube
            .list_page(
                "Workload",
                state.cluster.version,
                state.cluster.page,
                next.clone(),
            )
            .await;
        let (objects, more) = match page {
            Ok(page) => page,
            Err(failure) => return Err(failed(state, &failure).await),
        };
        let recorded: Vec<_> = objects
            .iter()
            .filter_map(|object| {
                workload::read(object)
                    .inspect_err(|why| tracing::warn!(%why, "a Workload is not recorded"))
                    .ok()
            })
            .collect();
        let rows = serde_json::to_string(&recorded).map_err(|e| Error::Internal(e.to_string()))?;
        db::record_workloads(&state.pool, &rows, started_ms, false).await?;
        listed = listed.saturating_add(u32::try_from(recorded.len()).unwrap_or(u32::MAX));
        // A server handing back the token it was given would page for ever.
        if more.is_none() || more == next {
            break;
        }
        next = more;
    }
    db::listed_workloads(
        &state.pool,
        started_ms,
        i32::try_from(listed).unwrap_or(i32::MAX),
    )
    .await?;
    Ok(Some(listed))
}

async fn failed(state: &AppState, failure: &Failure) -> Error {
    let message = format!("listing Kueue's Workloads: {}", failure.message());
    match db::listing_failed(&state.pool, &message).await {
        Ok(()) => Error::Unavailable,
        Err(err) => err.into(),
    }
}

/// Days of demo history `gpufleet demo` writes: four weeks and today.
pub(crate) const DEMO_DAYS: i32 = 28;

/// The demo's workload history (`shared::cluster::demo`): four weeks up to now for every team
/// with whole GPUs in force today outside the inference pools (what serves there is the
/// demo's vLLM replicas, counted by vLLM's metrics, not batch jobs), written as the recorder
/// would have seen it and marked demo.
/// Only into an empty history: how many Workloads, or None when it held some.
pub async fn load_demo(pool: &PgPool) -> Result<Option<usize>> {
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
                nominal: u32::try_from(line.nominal).unwrap_or(u32::MAX),
            })
        })
        .collect();
    let now_ms = clock::now_ms();
    let from_ms = i64::from(today.plus(-DEMO_DAYS).days_since_epoch()) * 86_400_000;
    let demo = shared::cluster::demo::history(
        &queues,
        from_ms,
        DEMO_DAYS.unsigned_abs() + 1,
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
    let (from, end) = (clock::date(from)?, clock::date(end)?);
    let rows = db::workload_history(
        &state.pool,
        from,
        end,
        team,
        None,
        i64::from(MAX_HISTORY_WORKLOADS) + 1,
    )
    .await?;
    let seen = evictions_seen(state, from, end, team).await?;
    let truncated = rows.len() > MAX_HISTORY_WORKLOADS as usize;
    let workloads = rows
        .iter()
        .take(MAX_HISTORY_WORKLOADS as usize)
        .map(|row| entry(row, &seen))
        .collect::<Result<_>>()?;
    Ok((workloads, truncated))
}

/// Every recorded Workload created in [`from`, `end`), oldest first, handed to `each` a page
/// at a time, at most `most`; whether the window held more. Each page is read on the compute
/// pool, so a large window does not hold up the async runtime.
pub async fn each_in_window(
    state: &AppState,
    from: Day,
    end: Day,
    most: usize,
    mut each: impl FnMut(&HistoryEntry),
) -> Result<bool> {
    const PAGE: i64 = 5_000;
    let (from, end) = (clock::date(from)?, clock::date(end)?);
    // The next page is read while this one is parsed and handed on.
    let page_after = |after: Option<(i64, String)>| {
        let pool = state.pool.clone();
        tokio::spawn(async move {
            let after = after.as_ref().map(|(ms, uid)| (*ms, uid.as_str()));
            db::workload_history(&pool, from, end, None, after, PAGE).await
        })
    };
    let seen = std::sync::Arc::new(evictions_seen(state, from, end, None).await?);
    let mut next = Some(page_after(None));
    let mut read = 0usize;
    while let Some(reading) = next.take() {
        let rows = reading
            .await
            .map_err(|e| Error::Internal(format!("reading the history stopped: {e}")))??;
        if rows.len() as i64 == PAGE {
            next = rows
                .last()
                .map(|r| page_after(Some((r.created_at_ms, r.uid.clone()))));
        }
        let seen = seen.clone();
        let page = state
            .work
            .compute
            .run(move |_| {
                rows.iter()
                    .map(|row| entry(row, &seen))
                    .collect::<Result<Vec<_>>>()
            })
            .await??;
        for entry in page {
            if read == most {
                if let Some(reading) = next {
                    reading.abort();
                }
                return Ok(true);
            }
            each(&entry);
            read += 1;
        }
    }
    Ok(false)
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
fn entry(row: &db::HistoryRow, seen: &Seen) -> Result<HistoryEntry> {
    fn json<T: serde::de::DeserializeOwned>(uid: &str, text: &str) -> Result<T> {
        serde_json::from_str(text)
            .map_err(|e| Error::Internal(format!("the recorded Workload {uid} does not read: {e}")))
    }
    let uid = row.uid.as_str();
    Ok(HistoryEntry {
        workload: RecordedWorkload {
            uid: row.uid.clone(),
            namespace: row.namespace.clone(),
            name: row.name.clone(),
            local_queue: row.local_queue.clone(),
            cluster_queue: row.cluster_queue.clone(),
            priority: row.priority,
            priority_class: row.priority_class.clone(),
            pod_sets: json(uid, &row.pod_sets)?,
            created_at_ms: row.created_at_ms,
            quota_reserved_at_ms: row.quota_reserved_at_ms,
            admitted_at_ms: row.admitted_at_ms,
            evicted: row.evicted.as_deref().map(|t| json(uid, t)).transpose()?,
            finished: row.finished_at_ms.map(|at_ms| Transition {
                at_ms,
                reason: row.finished_reason.clone().unwrap_or_default(),
                detail: None,
            }),
            evictions: json(uid, &row.evictions)?,
            problems: json(uid, &row.problems)?,
        },
        team: row.team.clone(),
        evictions_seen: seen.get(uid).cloned().unwrap_or_default(),
        gone_at_ms: row.gone_at_ms,
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
