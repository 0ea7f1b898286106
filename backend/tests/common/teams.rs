//! A fleet of many teams for the statement's limits: shared by the hardening tests and the
//! load benchmark (`#[path]`).

use sqlx::PgPool;

/// `teams` teams (`t-1`…, namespaces `ns-1`…) each holding 8 H100s all day, 6 busy, on
/// `days` days from 2025-01-01 (day rollups, as the ingest leaves them).
pub async fn many_teams(pool: &PgPool, teams: i32, days: i32) -> sqlx::Result<()> {
    sqlx::query(
        "insert into teams (name, namespace, cost_centre)
         select 't-' || i, 'ns-' || i, 'CC-' || i from generate_series(1, $1) i",
    )
    .bind(teams)
    .execute(pool)
    .await?;
    sqlx::query(
        "insert into usage_rollups (grain, period, namespace, cluster_queue, flavor,
             allocated_gpu_microseconds, busy_gpu_microseconds, observed_gpu_microseconds, minutes)
         select 'day', timestamptz '2025-01-01 00:00Z' + d * interval '1 day', 'ns-' || i, '',
                'h100-shared', 8 * 86400000000, 6 * 86400000000, 8 * 86400000000, 1440
         from generate_series(1, $1) i, generate_series(0, $2 - 1) d",
    )
    .bind(teams)
    .bind(days)
    .execute(pool)
    .await?;
    Ok(())
}
