//! The cluster SQL: `cluster_objects` (what the reconciler last saw), `cluster_reconciler`
//! (its last run) and the apply columns of `quota_requests`. Times leave as RFC 3339 UTC text.

use sqlx::{PgConnection, PgExecutor};

/// The session-level lock one reconciling replica holds for a run.
const RECONCILER_LOCK: &str = "gpufleet.cluster.reconciler";

pub struct ObjectRow {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub team: Option<String>,
    pub desired: Option<String>,
    pub live: Option<String>,
    pub state: String,
    pub changes: String,
    pub error: Option<String>,
    pub conflicts: String,
    pub applied_at: Option<String>,
    pub checked_at: String,
}

pub async fn objects(db: impl PgExecutor<'_>) -> sqlx::Result<Vec<ObjectRow>> {
    sqlx::query_as!(
        ObjectRow,
        r#"select o.kind, o.namespace, o.name, t.name as "team?", o.desired::text as desired,
                  o.live::text as live, o.state, o.changes::text as "changes!", o.error, o.conflicts::text as "conflicts!",
                  to_char(o.applied_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as "applied_at?",
                  to_char(o.checked_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as "checked_at!"
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
    pub desired: Option<&'a str>,
    pub live: Option<&'a str>,
    pub state: &'a str,
    pub changes: &'a str,
    pub error: Option<&'a str>,
    pub conflicts: &'a str,
    /// The apply landed in this run.
    pub applied: bool,
}

pub async fn record(db: impl PgExecutor<'_>, seen: &Seen<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into cluster_objects as o (kind, namespace, name, team_id, desired, live, state,
                                             changes, error, conflicts, applied_at, checked_at)
           values ($1, $2, $3, (select id from teams where name = $4), $5::text::jsonb,
                   $11::text::jsonb, $6, $7::text::jsonb, $8, $9::text::jsonb,
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
        seen.changes,
        seen.error,
        seen.conflicts,
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
    pub last_run_at: Option<String>,
    pub last_ok_at: Option<String>,
    pub last_error: Option<String>,
    pub drift_count: i32,
    pub failed_count: i32,
    pub pending_count: i32,
}

pub async fn reconciler(db: impl PgExecutor<'_>) -> sqlx::Result<ReconcilerRow> {
    sqlx::query_as!(
        ReconcilerRow,
        r#"select to_char(last_run_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as last_run_at,
                  to_char(last_ok_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as last_ok_at,
                  last_error, drift_count, failed_count, pending_count
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
) -> sqlx::Result<()> {
    sqlx::query!(
        "update quota_requests
         set applied_at = case when $2::text is null then coalesce(applied_at, now()) end,
             apply_error = $2
         where id = $1 and state = 'approved'
           and (apply_error is distinct from $2 or (applied_at is null) <> ($2::text is not null))",
        id,
        error
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
