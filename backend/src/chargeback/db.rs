//! The chargeback SQL: rates, and what a statement is made from (the usage day rollups, token
//! day rollups, teams and the inventory's capacity).

use std::collections::BTreeMap;

use shared::{
    chargeback::{Rate, Team, TokensDay, UsageDay},
    day::Day,
};
use sqlx::PgExecutor;

fn day(text: &str) -> Day {
    // the database writes dates as YYYY-MM-DD
    Day::parse(text).unwrap_or_else(|| Day::of_unix_seconds(0))
}

/// Every explicit rate, and each flavor's model price as its rate from 1970-01-01.
pub async fn rates(db: impl PgExecutor<'_>) -> sqlx::Result<Vec<Rate>> {
    let rows = sqlx::query!(
        r#"select f.name as "flavor!", r.effective_from::text as "from!", r.cents_per_gpu_hour as "cents!"
           from flavor_rates r join flavors f on f.id = r.flavor_id
           union all
           select f.name, '1970-01-01', m.price_cents_per_gpu_hour
           from flavors f join gpu_models m on m.id = f.gpu_model_id
           order by 1, 2"#
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Rate {
            flavor: r.flavor,
            effective_from: day(&r.from),
            cents_per_gpu_hour: r.cents,
        })
        .collect())
}

/// Sets a flavor's rate from a day on; `None` when there is no such flavor.
pub async fn set_rate(
    db: impl PgExecutor<'_>,
    flavor: &str,
    from: Day,
    cents: i64,
    user_id: Option<i64>,
) -> sqlx::Result<Option<()>> {
    let done = sqlx::query!(
        "insert into flavor_rates (flavor_id, effective_from, cents_per_gpu_hour, set_by)
         select id, $2::text::date, $3, $4 from flavors where name = $1
         on conflict (flavor_id, effective_from) do update set
             cents_per_gpu_hour = excluded.cents_per_gpu_hour, set_by = excluded.set_by,
             set_at = now()",
        flavor,
        from.to_string(),
        cents,
        user_id
    )
    .execute(db)
    .await?;
    Ok((done.rows_affected() == 1).then_some(()))
}

pub async fn teams(db: impl PgExecutor<'_>) -> sqlx::Result<Vec<Team>> {
    sqlx::query_as!(
        Team,
        "select name, namespace, cost_centre from teams order by name"
    )
    .fetch_all(db)
    .await
}

/// GPUs per flavor in the inventory now.
pub async fn capacity(db: impl PgExecutor<'_>) -> sqlx::Result<BTreeMap<String, i64>> {
    let rows = sqlx::query!(
        r#"select f.name, coalesce(sum(p.nodes::bigint * p.gpus_per_node), 0)::bigint as "gpus!"
           from flavors f left join node_pools p on p.flavor_id = f.id group by f.name"#
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.name, r.gpus)).collect())
}

/// Day rollups of `[from, to)`, by namespace (ClusterQueues no team owns under their name).
pub async fn usage_days(
    db: impl PgExecutor<'_>,
    from: Day,
    to: Day,
) -> sqlx::Result<Vec<UsageDay>> {
    let rows = sqlx::query!(
        r#"select (period at time zone 'UTC')::date::text as "day!",
                  case when cluster_queue <> '' then 'clusterqueue/' || cluster_queue
                       else namespace end as "namespace!",
                  flavor, allocated_gpu_microseconds,
                  coalesce(busy_gpu_microseconds, 0) as "busy!",
                  coalesce(observed_gpu_microseconds, 0) as "observed!"
           from usage_rollups
           where grain = 'day' and period >= $1::text::date::timestamp at time zone 'UTC'
             and period < $2::text::date::timestamp at time zone 'UTC'
           order by 1, 2, 3"#,
        from.to_string(),
        to.to_string()
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| UsageDay {
            day: day(&r.day),
            namespace: r.namespace,
            flavor: r.flavor,
            allocated_gpu_us: r.allocated_gpu_microseconds,
            busy_gpu_us: r.busy,
            observed_gpu_us: r.observed,
        })
        .collect())
}

pub async fn token_days(
    db: impl PgExecutor<'_>,
    from: Day,
    to: Day,
) -> sqlx::Result<Vec<TokensDay>> {
    let rows = sqlx::query!(
        r#"select (period at time zone 'UTC')::date::text as "day!", namespace, model,
                  prompt_tokens, generation_tokens
           from usage_token_rollups
           where grain = 'day' and period >= $1::text::date::timestamp at time zone 'UTC'
             and period < $2::text::date::timestamp at time zone 'UTC'
           order by 1, 2, 3"#,
        from.to_string(),
        to.to_string()
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| TokensDay {
            day: day(&r.day),
            namespace: r.namespace,
            model: r.model,
            prompt_tokens: r.prompt_tokens,
            generation_tokens: r.generation_tokens,
        })
        .collect())
}
