//! The cluster SQL: `cluster_objects` (what the reconciler last saw), `cluster_reconciler`
//! (its last run), the apply columns of `quota_requests`, and the workload history
//! (`workload_history`, `workload_evictions`, `workload_recorder`).

use futures_util::stream::BoxStream;
use serde_json::Value;
use shared::cluster::FieldChange;
use sqlx::{
    PgConnection, PgExecutor,
    types::{
        Json,
        time::{Date, OffsetDateTime},
    },
};

/// The session-level lock one reconciling replica holds for a run.
const RECONCILER_LOCK: &str = "gpufleet.cluster.reconciler";

pub struct ObjectRow {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub team: Option<String>,
    pub desired: Option<Json<Value>>,
    pub live: Option<Json<Value>>,
    pub state: String,
    pub changes: Json<Vec<FieldChange>>,
    pub error: Option<String>,
    pub conflicts: Json<Vec<String>>,
    pub applied_at: Option<OffsetDateTime>,
    pub checked_at: OffsetDateTime,
}

pub async fn objects(db: impl PgExecutor<'_>) -> sqlx::Result<Vec<ObjectRow>> {
    sqlx::query_as!(
        ObjectRow,
        r#"select o.kind, o.namespace, o.name, t.name as "team?",
                  o.desired as "desired: Json<Value>", o.live as "live: Json<Value>", o.state,
                  o.changes as "changes: Json<Vec<FieldChange>>", o.error,
                  o.conflicts as "conflicts: Json<Vec<String>>", o.applied_at, o.checked_at
           from cluster_objects o left join teams t on t.id = o.team_id
           order by array_position(array['ResourceFlavor', 'Cohort', 'ClusterQueue', 'LocalQueue',
                                         'WorkloadPriorityClass'], o.kind),
                    o.namespace, o.name"#
    )
    .fetch_all(db)
    .await
}

/// What one reconcile learned about one object.
pub struct Seen<'a> {
    pub kind: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub team: Option<&'a str>,
    pub desired: Option<&'a Value>,
    pub live: Option<&'a Value>,
    pub state: &'a str,
    pub changes: &'a [FieldChange],
    pub error: Option<&'a str>,
    pub conflicts: &'a [String],
    /// The apply landed in this run.
    pub applied: bool,
}

pub async fn record(db: impl PgExecutor<'_>, seen: &Seen<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into cluster_objects as o (kind, namespace, name, team_id, desired, live, state,
                                             changes, error, conflicts, applied_at, checked_at)
           values ($1, $2, $3, (select id from teams where name = $4), $5,
                   $11, $6, $7, $8, $9,
                   case when $10 then now() end, now())
           on conflict (kind, namespace, name) do update set
               team_id = excluded.team_id, desired = excluded.desired, live = excluded.live,
               state = excluded.state,
               changes = excluded.changes, error = excluded.error, conflicts = excluded.conflicts,
               applied_at = coalesce(excluded.applied_at, o.applied_at), checked_at = now()"#,
        seen.kind,
        seen.namespace,
        seen.name,
        seen.team,
        seen.desired,
        seen.state,
        Json(seen.changes) as _,
        seen.error,
        Json(seen.conflicts) as _,
        seen.applied,
        seen.live,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Forgets every object not in the lists (neither approved nor found on the cluster).
pub async fn keep_only(
    db: impl PgExecutor<'_>,
    kinds: &[String],
    namespaces: &[String],
    names: &[String],
) -> sqlx::Result<()> {
    sqlx::query!(
        "delete from cluster_objects where (kind, namespace, name) not in
             (select * from unnest($1::text[], $2::text[], $3::text[]))",
        kinds,
        namespaces,
        names
    )
    .execute(db)
    .await?;
    Ok(())
}

pub struct ReconcilerRow {
    pub last_run_at: Option<OffsetDateTime>,
    pub last_ok_at: Option<OffsetDateTime>,
    pub last_error: Option<String>,
    pub drift_count: i32,
    pub failed_count: i32,
    pub pending_count: i32,
}

pub async fn reconciler(db: impl PgExecutor<'_>) -> sqlx::Result<ReconcilerRow> {
    sqlx::query_as!(
        ReconcilerRow,
        r#"select last_run_at, last_ok_at, last_error, drift_count, failed_count, pending_count
           from cluster_reconciler"#
    )
    .fetch_one(db)
    .await
}

/// The run's outcome; `error` is None when every object ended in sync (or only drifted,
/// conflicted or unapproved ones remain, which are reports, not failures of the run).
pub async fn record_run(
    db: impl PgExecutor<'_>,
    error: Option<&str>,
    drift_count: i32,
    failed_count: i32,
    pending_count: i32,
) -> sqlx::Result<()> {
    sqlx::query!(
        "update cluster_reconciler set last_run_at = now(),
             last_ok_at = case when $1::text is null then now() else last_ok_at end,
             last_error = $1, drift_count = $2, failed_count = $3, pending_count = $4",
        error,
        drift_count,
        failed_count,
        pending_count
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The request in force for a team: landed (`error` None) or not yet, and why.
pub async fn mark_request(
    db: impl PgExecutor<'_>,
    id: i64,
    error: Option<&str>,
    applied_to: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "update quota_requests
         set applied_at = case when $2::text is null then coalesce(applied_at, now()) end,
             apply_error = $2,
             applied_to = case when $2::text is null then $3 end
         where id = $1 and state = 'approved'
           and (apply_error is distinct from $2 or (applied_at is null) <> ($2::text is not null)
                or ($2::text is null and applied_to is distinct from $3))",
        id,
        error,
        applied_to
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Takes the reconciler's lock on this session if no other replica holds it.
pub async fn try_lock(db: &mut PgConnection) -> sqlx::Result<bool> {
    let row = sqlx::query!(
        r#"select pg_try_advisory_lock(hashtext($1)::bigint) as "locked!""#,
        RECONCILER_LOCK
    )
    .fetch_one(db)
    .await?;
    Ok(row.locked)
}

pub async fn unlock(db: &mut PgConnection) -> sqlx::Result<()> {
    sqlx::query!(
        "select pg_advisory_unlock(hashtext($1)::bigint)",
        RECONCILER_LOCK
    )
    .fetch_one(db)
    .await?;
    Ok(())
}

/// Records one page of listed Workloads (`workloads`: `shared::cluster::workload::RecordedWorkload`s
/// as a JSON array) as seen at `seen_at_ms`, and each eviction they show, once. Idempotent: the
/// same page twice changes only `last_seen_at`; the first time a condition was seen True is
/// kept, so a re-admission does not move the first admission (it moves the last one).
pub async fn record_workloads(
    db: impl PgExecutor<'_>,
    workloads: &str,
    seen_at_ms: i64,
    demo: bool,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"with r as (
               select * from jsonb_to_recordset($1::text::jsonb) as r(
                   uid text, namespace text, name text, local_queue text, cluster_queue text,
                   priority integer, priority_class text, pod_sets jsonb, created_at_ms bigint,
                   quota_reserved_at_ms bigint, admitted_at_ms bigint, evicted jsonb,
                   finished jsonb, evictions jsonb, problems jsonb)
           ), recorded as (
               insert into workload_history as h (uid, namespace, name, local_queue,
                   cluster_queue, priority, priority_class, pod_sets, created_at,
                   quota_reserved_at, admitted_at, last_admitted_at, finished_at,
                   finished_reason, evicted, evictions, problems, first_seen_at, last_seen_at,
                   demo)
               select uid, namespace, name, local_queue, cluster_queue, priority, priority_class,
                      pod_sets,
                      timestamptz 'epoch' + created_at_ms * interval '1 millisecond',
                      timestamptz 'epoch' + quota_reserved_at_ms * interval '1 millisecond',
                      timestamptz 'epoch' + admitted_at_ms * interval '1 millisecond',
                      timestamptz 'epoch' + admitted_at_ms * interval '1 millisecond',
                      timestamptz 'epoch' + (finished->>'at_ms')::bigint * interval '1 millisecond',
                      finished->>'reason', nullif(evicted, 'null'::jsonb), evictions, problems,
                      timestamptz 'epoch' + $2::bigint * interval '1 millisecond',
                      timestamptz 'epoch' + $2::bigint * interval '1 millisecond', $3
               from r
               on conflict (uid) do update set
                   local_queue = excluded.local_queue,
                   cluster_queue = coalesce(excluded.cluster_queue, h.cluster_queue),
                   priority = excluded.priority,
                   priority_class = excluded.priority_class,
                   pod_sets = case when excluded.cluster_queue is not null or h.cluster_queue is null
                                   then excluded.pod_sets else h.pod_sets end,
                   quota_reserved_at = coalesce(h.quota_reserved_at, excluded.quota_reserved_at),
                   admitted_at = coalesce(h.admitted_at, excluded.admitted_at),
                   last_admitted_at = coalesce(excluded.last_admitted_at, h.last_admitted_at),
                   finished_at = coalesce(h.finished_at, excluded.finished_at),
                   finished_reason = coalesce(h.finished_reason, excluded.finished_reason),
                   evicted = excluded.evicted,
                   evictions = excluded.evictions,
                   problems = excluded.problems,
                   last_seen_at = excluded.last_seen_at,
                   gone_at = null
               returning 1
           )
           insert into workload_evictions (uid, at, reason, detail)
           select uid, timestamptz 'epoch' + (evicted->>'at_ms')::bigint * interval '1 millisecond',
                  evicted->>'reason', evicted->>'detail'
           from r where jsonb_typeof(evicted) = 'object'
           on conflict do nothing"#,
        workloads,
        seen_at_ms,
        demo
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Ends a complete listing that began at `listed_from_ms`: Workloads it did not hold are gone
/// (kept, marked; the demo's were never on the cluster); the recorder's state says when and how many.
pub async fn listed_workloads(
    db: impl PgExecutor<'_>,
    listed_from_ms: i64,
    listed: i32,
) -> sqlx::Result<()> {
    sqlx::query!(
        "with gone as (
             update workload_history set gone_at = now()
             where gone_at is null and not demo
               and last_seen_at < timestamptz 'epoch' + $1::bigint * interval '1 millisecond'
         )
         update workload_recorder set listed_at = now(), listed = $2, last_error = null,
             last_error_at = null",
        listed_from_ms,
        listed
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A Workload the watch saw deleted: kept, marked gone (its last state recorded before).
pub async fn workload_gone(db: impl PgExecutor<'_>, uid: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "update workload_history set gone_at = now() where uid = $1 and gone_at is null",
        uid
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The watch delivered a change or a bookmark: the history is current to now.
pub async fn watched(db: impl PgExecutor<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        "update workload_recorder set watched_at = now(), last_error = null, last_error_at = null"
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A listing or watch that failed: nothing is marked gone, and the error is shown until one
/// succeeds.
pub async fn recording_failed(db: impl PgExecutor<'_>, error: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "update workload_recorder set last_error = $1, last_error_at = now(), watched_at = null",
        error
    )
    .execute(db)
    .await?;
    Ok(())
}

pub struct RecorderRow {
    pub listed_at_ms: Option<i64>,
    pub listed: Option<i32>,
    pub watched_at_ms: Option<i64>,
    pub last_error: Option<String>,
    pub last_error_at_ms: Option<i64>,
}

pub async fn recorder(db: impl PgExecutor<'_>) -> sqlx::Result<RecorderRow> {
    sqlx::query_as!(
        RecorderRow,
        r#"select (extract(epoch from listed_at) * 1000)::bigint as listed_at_ms, listed,
                  (extract(epoch from watched_at) * 1000)::bigint as watched_at_ms, last_error, (extract(epoch from last_error_at) * 1000)::bigint as last_error_at_ms
           from workload_recorder"#
    )
    .fetch_one(db)
    .await
}

/// One recorded Workload as stored: plain columns, its JSON parts as text (building one JSON
/// document per row in PostgreSQL cost 6.7 s for 400,000 rows; these columns 0.3 s), and
/// `evictions` and `problems` absent where they are empty, as nearly all are.
pub struct HistoryRow {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub local_queue: String,
    pub cluster_queue: Option<String>,
    pub priority: i32,
    pub priority_class: Option<String>,
    pub pod_sets: String,
    pub created_at: OffsetDateTime,
    pub quota_reserved_at: Option<OffsetDateTime>,
    pub admitted_at: Option<OffsetDateTime>,
    pub last_admitted_at: Option<OffsetDateTime>,
    pub evicted: Option<String>,
    pub finished_at: Option<OffsetDateTime>,
    pub finished_reason: Option<String>,
    pub evictions: Option<String>,
    pub problems: Option<String>,
    pub team: Option<String>,
    pub gone_at: Option<OffsetDateTime>,
    pub demo: bool,
}

/// The recorded Workloads created in `[from, to)` (in `team`'s namespace when given), oldest
/// first, at most `limit`, as one stream: a window of a large fleet is read by one query, not
/// in pages.
pub fn workload_history<'e>(
    db: impl PgExecutor<'e> + 'e,
    (from, to): (Date, Date),
    team: Option<&'e str>,
    limit: i64,
) -> BoxStream<'e, sqlx::Result<HistoryRow>> {
    sqlx::query_as!(
        HistoryRow,
        r#"select h.uid, h.namespace, h.name, h.local_queue, h.cluster_queue, h.priority,
                  h.priority_class, h.pod_sets::text as "pod_sets!", h.created_at,
                  h.quota_reserved_at, h.admitted_at, h.last_admitted_at,
                  h.evicted::text as evicted,
                  h.finished_at, h.finished_reason,
                  nullif(h.evictions, '[]')::text as evictions,
                  nullif(h.problems, '[]')::text as problems, t.name as "team?", h.gone_at,
                  h.demo
           from workload_history h left join teams t on t.namespace = h.namespace
           where h.created_at >= $1::date::timestamp at time zone 'UTC'
             and h.created_at < $2::date::timestamp at time zone 'UTC'
             and ($3::text is null or t.name = $3)
           order by h.created_at, h.uid
           limit $4"#,
        from,
        to,
        team,
        limit
    )
    .fetch(db)
}

/// One eviction the recorder saw.
pub struct SeenRow {
    pub uid: String,
    pub at_ms: i64,
    pub reason: String,
    pub detail: Option<String>,
}

/// Every eviction the recorder saw of the Workloads created in `[from, to)` (in `team`'s
/// namespace when given), by uid and then oldest first: one read for a whole window, where a
/// look-up per Workload cost half of the history's read.
pub async fn evictions_seen(
    db: impl PgExecutor<'_>,
    from: Date,
    to: Date,
    team: Option<&str>,
) -> sqlx::Result<Vec<SeenRow>> {
    sqlx::query_as!(
        SeenRow,
        r#"select e.uid, (extract(epoch from e.at) * 1000)::bigint as "at_ms!", e.reason, e.detail
           from workload_evictions e join workload_history h on h.uid = e.uid
           left join teams t on t.namespace = h.namespace
           where h.created_at >= $1::date::timestamp at time zone 'UTC'
             and h.created_at < $2::date::timestamp at time zone 'UTC'
             and ($3::text is null or t.name = $3)
           order by e.uid, e.at"#,
        from,
        to,
        team
    )
    .fetch_all(db)
    .await
}

/// Whether any Workload is recorded (the demo's history goes only into an empty one).
pub async fn has_workloads(db: impl PgExecutor<'_>) -> sqlx::Result<bool> {
    let row = sqlx::query!(r#"select exists (select 1 from workload_history) as "any!""#)
        .fetch_one(db)
        .await?;
    Ok(row.any)
}
