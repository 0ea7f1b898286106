//! The append-only audit log: [`record`] is the one way rows get in (quota requests, flavors,
//! team queues, the inventory); `GET /api/quota/audit` pages through it with filters and
//! `GET /api/quota/audit.csv` exports what the filters select. The database refuses UPDATE,
//! DELETE and TRUNCATE on `audit_log` (a trigger), so no code path can rewrite history.

use axum::{
    Json,
    extract::{Query, State},
    http::header,
    response::IntoResponse,
};
use serde_json::Value;
use shared::audit::{self, Entry, Filter, Kind, Page};
use sqlx::{
    PgExecutor,
    types::{Json as SqlJson, time::OffsetDateTime},
};

use crate::{
    access::Caller,
    app::AppState,
    error::{Error, Result},
};

/// Who an entry names: a signed-in user, or the console itself.
pub enum Actor<'a> {
    User(&'a Caller),
    Console,
}

impl Actor<'_> {
    /// The user's id; `None` for the console.
    pub fn user_id(&self) -> Option<i64> {
        match self {
            Actor::User(caller) => Some(caller.user_id),
            Actor::Console => None,
        }
    }
}

/// One entry: `subject` names the object (`quota request 12`, `flavor h100`).
#[allow(clippy::too_many_arguments)]
pub async fn record(
    db: impl PgExecutor<'_>,
    actor: Actor<'_>,
    kind: Kind,
    action: &str,
    subject: &str,
    team: Option<&str>,
    before: Option<&Value>,
    after: Option<&Value>,
) -> Result<()> {
    let (actor_id, actor) = match actor {
        Actor::User(caller) => (Some(caller.user_id), caller.username.as_str()),
        Actor::Console => (None, "gpufleet"),
    };
    sqlx::query!(
        "insert into audit_log (actor_id, actor, kind, action, subject, team, before, after)
         values ($1, $2, $3, $4, $5, $6, $7, $8)",
        actor_id,
        actor,
        kind.as_str(),
        action,
        subject,
        team,
        before,
        after,
    )
    .execute(db)
    .await?;
    Ok(())
}

struct Row {
    id: i64,
    at: OffsetDateTime,
    actor: String,
    kind: String,
    action: String,
    subject: String,
    team: Option<String>,
    before: Option<SqlJson<Value>>,
    after: Option<SqlJson<Value>>,
    total: i64,
}

/// At most this many rows go into one CSV export.
const CSV_LIMIT: i64 = 100_000;

async fn select(db: impl PgExecutor<'_>, f: &Filter, limit: i64, offset: i64) -> Result<Vec<Row>> {
    let from = f.from.map(crate::clock::date).transpose()?;
    let to = f.to.map(crate::clock::date).transpose()?;
    let rows = sqlx::query_as!(
        Row,
        r#"select id, at, actor, kind, action, subject, team,
                  before as "before: SqlJson<Value>", after as "after: SqlJson<Value>",
                  count(*) over () as "total!"
           from audit_log
           where ($1::text is null or team = $1) and ($2::text is null or actor = $2)
             and ($3::text is null or kind = $3)
             and ($4::date is null or at >= $4::date::timestamp at time zone 'UTC')
             and ($5::date is null or at < ($5::date + 1)::timestamp at time zone 'UTC')
           order by at desc, id desc
           limit $6 offset $7"#,
        f.team,
        f.actor,
        f.kind.map(Kind::as_str),
        from,
        to,
        limit,
        offset,
    )
    .fetch_all(db)
    .await?;
    Ok(rows)
}

fn entry(row: Row) -> Result<Entry> {
    Ok(Entry {
        kind: Kind::parse(&row.kind)
            .ok_or_else(|| Error::Internal(format!("audit_log holds kind {:?}", row.kind)))?,
        before: row.before.map(|j| j.0),
        after: row.after.map(|j| j.0),
        id: row.id,
        at: crate::clock::rfc3339(row.at),
        actor: row.actor,
        action: row.action,
        subject: row.subject,
        team: row.team,
    })
}

pub async fn page(
    State(state): State<AppState>,
    Query(query): Query<audit::Query>,
) -> Result<Json<Page>> {
    let f = query.filter().map_err(Error::Invalid)?;
    let offset = i64::from(f.page - 1) * i64::from(f.per_page);
    let rows = select(&state.pool, &f, i64::from(f.per_page), offset).await?;
    let total = match rows.first() {
        Some(r) => r.total,
        // Past the last page the window count is not there to read.
        None if f.page > 1 => select(&state.pool, &f, 1, 0)
            .await?
            .first()
            .map_or(0, |r| r.total),
        None => 0,
    };
    let entries = rows.into_iter().map(entry).collect::<Result<_>>()?;
    Ok(Json(Page {
        entries,
        total,
        page: f.page,
        per_page: f.per_page,
    }))
}

pub async fn csv(
    State(state): State<AppState>,
    Query(query): Query<audit::Query>,
) -> Result<impl IntoResponse> {
    let f = query.filter().map_err(Error::Invalid)?;
    let rows = select(&state.pool, &f, CSV_LIMIT, 0).await?;
    let entries: Vec<Entry> = rows.into_iter().map(entry).collect::<Result<_>>()?;
    let body = format!("{}{}", audit::CSV_HEADER, audit::csv_rows(&entries));
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"gpufleet-audit.csv\"",
            ),
        ],
        body,
    ))
}
