use sqlx::PgExecutor;

/// The newest applied migration; this also proves the database answers.
pub async fn schema_version(db: impl PgExecutor<'_>) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!("select max(version) from _sqlx_migrations where success")
        .fetch_one(db)
        .await
}
