//! The quota SQL: `flavors` (with their pools and models), the teams' queue columns,
//! `quota_requests`. Specs and settings are
//! jsonb, read into the shared types by sqlx's `Json`.

use serde_json::Value;
use shared::quota::{FlavorSettings, QuotaSpec};
use sqlx::{
    PgExecutor,
    types::{Json, time::OffsetDateTime},
};

pub struct FlavorRow {
    pub name: String,
    pub gpu_model: String,
    pub settings: Json<FlavorSettings>,
    pub version: i32,
    pub pools: Vec<String>,
    pub gpus: i64,
    pub product_label: Option<String>,
}

pub async fn flavors(db: impl PgExecutor<'_>) -> sqlx::Result<Vec<FlavorRow>> {
    sqlx::query_as!(
        FlavorRow,
        r#"select f.name, m.name as gpu_model, f.settings as "settings!: Json<FlavorSettings>", f.version, m.product_label,
                  array(select p.name from node_pools p where p.flavor_id = f.id order by p.name) as "pools!",
                  coalesce((select sum(p.nodes::bigint * p.gpus_per_node) from node_pools p
                            where p.flavor_id = f.id), 0)::bigint as "gpus!"
           from flavors f join gpu_models m on m.id = f.gpu_model_id
           order by f.name"#
    )
    .fetch_all(db)
    .await
}

/// A flavor's settings and version, locked for an update.
pub async fn lock_flavor(
    db: impl PgExecutor<'_>,
    name: &str,
) -> sqlx::Result<Option<(Value, i32, String)>> {
    let row = sqlx::query!(
        r#"select f.settings as "settings!", f.version, m.name as gpu_model
           from flavors f join gpu_models m on m.id = f.gpu_model_id
           where f.name = $1 for update of f"#,
        name
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.settings, r.version, r.gpu_model)))
}

pub async fn update_flavor(
    db: impl PgExecutor<'_>,
    name: &str,
    settings: &Value,
) -> sqlx::Result<()> {
    sqlx::query!(
        "update flavors set settings = $2, version = version + 1 where name = $1",
        name,
        settings
    )
    .execute(db)
    .await?;
    Ok(())
}

pub struct TeamQueueRow {
    pub team: String,
    pub namespace: String,
    pub cluster_queue: String,
    pub local_queue: String,
    pub cohort: Option<String>,
}

/// Every team's queue identity, or only `team`'s.
pub async fn team_queues(
    db: impl PgExecutor<'_>,
    only: Option<&str>,
) -> sqlx::Result<Vec<TeamQueueRow>> {
    sqlx::query_as!(
        TeamQueueRow,
        r#"select name as team, namespace, cluster_queue, local_queue, cohort
           from teams where $1::text is null or name = $1 order by name"#,
        only
    )
    .fetch_all(db)
    .await
}

pub async fn update_team_queue(
    db: impl PgExecutor<'_>,
    team: &str,
    cluster_queue: &str,
    local_queue: &str,
    cohort: Option<&str>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "update teams set cluster_queue = $2, local_queue = $3, cohort = $4 where name = $1",
        team,
        cluster_queue,
        local_queue,
        cohort
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The approved requests: what counts toward the rules.
pub struct ApprovedRow {
    pub id: i64,
    pub team: String,
    pub approval_order: i64,
    pub spec: Json<QuotaSpec>,
}

pub async fn approved(db: impl PgExecutor<'_>) -> sqlx::Result<Vec<ApprovedRow>> {
    sqlx::query_as!(
        ApprovedRow,
        r#"select r.id, t.name as team, r.approval_order as "approval_order!", r.spec as "spec!: Json<QuotaSpec>"
           from quota_requests r join teams t on t.id = r.team_id
           where r.state = 'approved' order by r.approval_order"#
    )
    .fetch_all(db)
    .await
}

pub struct RequestRow {
    pub id: i64,
    pub team: String,
    pub state: String,
    pub version: i32,
    pub spec: Json<QuotaSpec>,
    pub created_by: String,
    pub submitted_by_id: Option<i64>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub submitted_at: Option<OffsetDateTime>,
    pub decided_by: Option<String>,
    pub decided_at: Option<OffsetDateTime>,
    pub comment: Option<String>,
    pub applied_at: Option<OffsetDateTime>,
    pub apply_error: Option<String>,
    pub applied_to: Option<String>,
}

/// Requests, newest first: of one team, in one state, or the one with `id` (any may be `None`).
pub async fn requests(
    db: impl PgExecutor<'_>,
    team: Option<&str>,
    state: Option<&str>,
    id: Option<i64>,
) -> sqlx::Result<Vec<RequestRow>> {
    sqlx::query_as!(
        RequestRow,
        r#"select r.id, t.name as team, r.state, r.version, r.spec as "spec!: Json<QuotaSpec>",
                  c.username as created_by, r.submitted_by as submitted_by_id,
                  r.created_at, r.updated_at, r.submitted_at,
                  d.username as "decided_by?", r.decided_at, r.comment,
                  r.applied_at, r.apply_error, r.applied_to
           from quota_requests r
           join teams t on t.id = r.team_id
           join users c on c.id = r.created_by
           left join users d on d.id = r.decided_by
           where ($1::text is null or t.name = $1) and ($2::text is null or r.state = $2)
             and ($3::bigint is null or r.id = $3)
           order by r.id desc
           limit 1000"#,
        team,
        state,
        id
    )
    .fetch_all(db)
    .await
}

/// The request locked for a change: its team, state and version.
pub async fn lock_request(
    db: impl PgExecutor<'_>,
    id: i64,
) -> sqlx::Result<Option<(String, String, i32)>> {
    let row = sqlx::query!(
        "select t.name as team, r.state, r.version from quota_requests r join teams t on t.id = r.team_id
         where r.id = $1 for update of r",
        id
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.team, r.state, r.version)))
}

/// Inserts a draft; `None` when no team has that name.
pub async fn insert_request(
    db: impl PgExecutor<'_>,
    team: &str,
    spec: &Value,
    created_by: i64,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        "insert into quota_requests (team_id, spec, created_by)
         select id, $2, $3 from teams where name = $1 returning id",
        team,
        spec,
        created_by
    )
    .fetch_optional(db)
    .await
}

/// A new version of the spec, written by `by` (kept among its writers, for four eyes).
pub async fn update_spec(
    db: impl PgExecutor<'_>,
    id: i64,
    spec: &Value,
    by: i64,
) -> sqlx::Result<()> {
    sqlx::query!(
        "update quota_requests set spec = $2, version = version + 1,
                written_by = case when $3 = any (written_by) then written_by
                                  else written_by || $3 end
         where id = $1",
        id,
        spec,
        by
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Whether `user` wrote any version of request `id`'s spec.
pub async fn wrote(db: impl PgExecutor<'_>, id: i64, user: i64) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"select $2 = any (written_by) as "wrote!" from quota_requests where id = $1"#,
        id,
        user
    )
    .fetch_one(db)
    .await
}

pub async fn set_submitted(db: impl PgExecutor<'_>, id: i64, by: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "update quota_requests set state = 'submitted', submitted_by = $2, submitted_at = now(),
                version = version + 1
         where id = $1",
        id,
        by
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A submitted request withdrawn: a draft again, submitted by nobody.
pub async fn set_withdrawn(db: impl PgExecutor<'_>, id: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "update quota_requests set state = 'draft', submitted_by = null, submitted_at = null,
                version = version + 1
         where id = $1",
        id
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Records an approval (with the next approval order) or a rejection.
pub async fn set_decided(
    db: impl PgExecutor<'_>,
    id: i64,
    state: &str,
    by: i64,
    comment: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "update quota_requests set state = $2, decided_by = $3, decided_at = now(), comment = $4,
                approval_order = case when $2 = 'approved' then nextval('quota_approval_order') end,
                version = version + 1
         where id = $1",
        id,
        state,
        by,
        comment
    )
    .execute(db)
    .await?;
    Ok(())
}

/// An approved request leaves force: revoked or superseded (keeps its approval order).
pub async fn set_ended(db: impl PgExecutor<'_>, id: i64, state: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "update quota_requests set state = $2, version = version + 1 where id = $1",
        id,
        state
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Serialises the changes that the capacity rules read (approvals, revocations, flavor and
/// queue edits) for the rest of the transaction.
pub async fn lock_quota(db: impl PgExecutor<'_>) -> sqlx::Result<()> {
    sqlx::query!("select pg_advisory_xact_lock(hashtext('gpufleet.quota')::bigint)")
        .execute(db)
        .await?;
    Ok(())
}
