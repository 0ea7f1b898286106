//! The planning SQL: saved scenarios (`scenarios`, owners from `users`).

use shared::planning::scenario::Scenario;
use sqlx::{
    PgExecutor,
    types::{Json, time::OffsetDateTime},
};

/// A stored row, the body (JSON text) still in its stored version.
pub struct Row {
    pub id: i64,
    pub name: String,
    pub owner: String,
    pub owner_id: i64,
    pub schema_version: i32,
    pub body: String,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// The list, newest change first, without bodies.
pub async fn list(db: impl PgExecutor<'_>) -> sqlx::Result<Vec<Row>> {
    sqlx::query_as!(
        Row,
        r#"select s.id, s.name, u.username as owner, s.owner_id, s.schema_version,
                  '' as "body!",
                  s.created_at,
                  s.updated_at
           from scenarios s join users u on u.id = s.owner_id
           order by s.updated_at desc, s.id desc"#
    )
    .fetch_all(db)
    .await
}

pub async fn get(db: impl PgExecutor<'_>, id: i64) -> sqlx::Result<Option<Row>> {
    sqlx::query_as!(
        Row,
        r#"select s.id, s.name, u.username as owner, s.owner_id, s.schema_version, s.body::text as "body!",
                  s.created_at,
                  s.updated_at
           from scenarios s join users u on u.id = s.owner_id
           where s.id = $1"#,
        id
    )
    .fetch_optional(db)
    .await
}

/// Inserts a scenario; its id.
pub async fn insert(
    db: impl PgExecutor<'_>,
    name: &str,
    owner_id: i64,
    schema_version: i32,
    body: &Scenario,
) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        "insert into scenarios (name, owner_id, schema_version, body) values ($1, $2, $3, $4)
         returning id",
        name,
        owner_id,
        schema_version,
        Json(body) as _
    )
    .fetch_one(db)
    .await
}

/// Replaces a scenario's name and body; `false` when there is no such scenario.
pub async fn update(
    db: impl PgExecutor<'_>,
    id: i64,
    name: &str,
    schema_version: i32,
    body: &Scenario,
) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "update scenarios set name = $2, schema_version = $3, body = $4 where id = $1",
        id,
        name,
        schema_version,
        Json(body) as _
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn delete(db: impl PgExecutor<'_>, id: i64) -> sqlx::Result<bool> {
    let done = sqlx::query!("delete from scenarios where id = $1", id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}
