//! The chargeback SQL: rates, and what a statement is made from (the usage day rollups, token
//! day rollups, teams and the inventory's capacity). UTC days cross as PostgreSQL `date`s.

use std::collections::BTreeMap;

use shared::{
    chargeback::{DrillMinute, Rate, Team, TokensDay, TokensHour, UsageDay},
    common::day::Day,
};
use sqlx::{
    PgExecutor,
    types::time::{Date, OffsetDateTime},
};

use crate::clock::{date, day, rfc3339};

fn dates(days: impl Iterator<Item = Day>) -> sqlx::Result<Vec<Date>> {
    days.map(date).collect()
}

/// A day's usage as the day rollups and the closed months store it.
struct UsageRow {
    day: Date,
    namespace: String,
    flavor: String,
    allocated_gpu_microseconds: Option<i64>,
    busy_gpu_microseconds: i64,
    observed_gpu_microseconds: i64,
    borrowed_gpu_microseconds: i64,
    lent_gpu_microseconds: i64,
}

impl From<UsageRow> for UsageDay {
    fn from(r: UsageRow) -> UsageDay {
        UsageDay {
            day: day(r.day),
            namespace: r.namespace,
            flavor: r.flavor,
            allocated_gpu_us: r.allocated_gpu_microseconds,
            busy_gpu_us: r.busy_gpu_microseconds,
            observed_gpu_us: r.observed_gpu_microseconds,
            borrowed_gpu_us: r.borrowed_gpu_microseconds,
            lent_gpu_us: r.lent_gpu_microseconds,
        }
    }
}

/// Tokens of an hour or a day (from its first instant) as the token rollups and the closed
/// months store them.
struct TokenRow {
    period: OffsetDateTime,
    namespace: String,
    model: String,
    prompt_tokens: i64,
    generation_tokens: i64,
    prefill_microseconds: i64,
    decode_microseconds: i64,
}

impl From<TokenRow> for TokensDay {
    fn from(r: TokenRow) -> TokensDay {
        TokensDay {
            day: day(r.period.date()),
            namespace: r.namespace,
            model: r.model,
            prompt_tokens: r.prompt_tokens,
            generation_tokens: r.generation_tokens,
            prefill_us: r.prefill_microseconds,
            decode_us: r.decode_microseconds,
        }
    }
}

/// Every explicit rate, and each flavor's model price as its rate from 1970-01-01.
pub async fn rates(db: impl PgExecutor<'_>) -> sqlx::Result<Vec<Rate>> {
    let rows = sqlx::query!(
        r#"select f.name as "flavor!", r.effective_from as "from!", r.cents_per_gpu_hour as "cents!"
           from flavor_rates r join flavors f on f.id = r.flavor_id
           union all
           select f.name, date '1970-01-01', m.price_cents_per_gpu_hour
           from flavors f join gpu_models m on m.id = f.gpu_model_id
           order by 1, 2"#
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Rate {
            flavor: r.flavor,
            effective_from: day(r.from),
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
         select id, $2, $3, $4 from flavors where name = $1
         on conflict (flavor_id, effective_from) do update set
             cents_per_gpu_hour = excluded.cents_per_gpu_hour, set_by = excluded.set_by,
             set_at = now()",
        flavor,
        date(from)?,
        cents,
        user_id
    )
    .execute(db)
    .await?;
    Ok((done.rows_affected() == 1).then_some(()))
}

/// A flavor's rate set from exactly `from`, if any.
pub async fn rate_at(
    db: impl PgExecutor<'_>,
    flavor: &str,
    from: Day,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        "select r.cents_per_gpu_hour from flavor_rates r join flavors f on f.id = r.flavor_id
         where f.name = $1 and r.effective_from = $2",
        flavor,
        date(from)?,
    )
    .fetch_optional(db)
    .await
}

/// Removes a flavor's rate set from exactly `from`: the cents it had, `None` when there was none.
pub async fn remove_rate(
    db: impl PgExecutor<'_>,
    flavor: &str,
    from: Day,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        "delete from flavor_rates r using flavors f
         where f.id = r.flavor_id and f.name = $1 and r.effective_from = $2
         returning r.cents_per_gpu_hour",
        flavor,
        date(from)?,
    )
    .fetch_optional(db)
    .await
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
    let rows = sqlx::query_as!(
        UsageRow,
        r#"select (period at time zone 'UTC')::date as "day!",
                  case when cluster_queue <> '' then 'clusterqueue/' || cluster_queue
                       else namespace end as "namespace!",
                  flavor, allocated_gpu_microseconds,
                  coalesce(busy_gpu_microseconds, 0) as "busy_gpu_microseconds!",
                  coalesce(observed_gpu_microseconds, 0) as "observed_gpu_microseconds!",
                  coalesce(borrowed_gpu_microseconds, 0) as "borrowed_gpu_microseconds!",
                  coalesce(lent_gpu_microseconds, 0) as "lent_gpu_microseconds!"
           from usage_rollups
           where grain = 'day' and period >= $1::date::timestamp at time zone 'UTC'
             and period < $2::date::timestamp at time zone 'UTC'
           order by 1, 2, 3"#,
        date(from)?,
        date(to)?
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(UsageDay::from).collect())
}

/// The tokens served in [`from`, `to`) by day, namespace and model.
pub async fn token_days(
    db: impl PgExecutor<'_>,
    from: Day,
    to: Day,
) -> sqlx::Result<Vec<TokensDay>> {
    let rows = token_rollups(db, "day", from, to).await?;
    Ok(rows.into_iter().map(TokensDay::from).collect())
}

/// The generated tokens of [`from`, `to`) by hour, namespace and served model.
pub async fn token_hours(
    db: impl PgExecutor<'_>,
    from: Day,
    to: Day,
) -> sqlx::Result<Vec<TokensHour>> {
    let rows = token_rollups(db, "hour", from, to).await?;
    Ok(rows
        .into_iter()
        .map(|r| TokensHour {
            hour_ms: crate::clock::unix_ms(r.period),
            namespace: r.namespace,
            model: r.model,
            generation_tokens: r.generation_tokens,
        })
        .collect())
}

/// The token rollups of `grain` (`hour` or `day`) in [`from`, `to`), oldest first.
async fn token_rollups(
    db: impl PgExecutor<'_>,
    grain: &str,
    from: Day,
    to: Day,
) -> sqlx::Result<Vec<TokenRow>> {
    sqlx::query_as!(
        TokenRow,
        r#"select period, namespace, model, prompt_tokens, generation_tokens,
                  prefill_microseconds, decode_microseconds
           from usage_token_rollups
           where grain = $3 and period >= $1::date::timestamp at time zone 'UTC'
             and period < $2::date::timestamp at time zone 'UTC'
           order by 1, 2, 3"#,
        date(from)?,
        date(to)?,
        grain
    )
    .fetch_all(db)
    .await
}

/// Closed months, oldest first: `(first day, closed at, closed by)`.
pub async fn closed_months(
    db: impl PgExecutor<'_>,
) -> sqlx::Result<Vec<(Day, String, Option<String>)>> {
    let rows = sqlx::query!(
        r#"select c.month as "month!", c.closed_at, u.username as "closed_by?"
           from chargeback_closed_months c left join users u on u.id = c.closed_by
           order by c.month"#
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (day(r.month), rfc3339(r.closed_at), r.closed_by))
        .collect())
}

/// The frozen usage of closed days in `[from, to)`.
pub async fn frozen_usage(
    db: impl PgExecutor<'_>,
    from: Day,
    to: Day,
) -> sqlx::Result<Vec<UsageDay>> {
    let rows = sqlx::query_as!(
        UsageRow,
        r#"select day as "day!", namespace, flavor, allocated_gpu_microseconds,
                  busy_gpu_microseconds, observed_gpu_microseconds,
                  coalesce(borrowed_gpu_microseconds, 0) as "borrowed_gpu_microseconds!",
                  coalesce(lent_gpu_microseconds, 0) as "lent_gpu_microseconds!"
           from chargeback_closed_usage
           where day >= $1 and day < $2 order by 1, 2, 3"#,
        date(from)?,
        date(to)?
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(UsageDay::from).collect())
}

pub async fn frozen_tokens(
    db: impl PgExecutor<'_>,
    from: Day,
    to: Day,
) -> sqlx::Result<Vec<TokensDay>> {
    let rows = sqlx::query_as!(
        TokenRow,
        r#"select day::timestamp at time zone 'UTC' as "period!", namespace, model,
                  prompt_tokens, generation_tokens, prefill_microseconds, decode_microseconds
           from chargeback_closed_tokens
           where day >= $1 and day < $2 order by 1, 2, 3"#,
        date(from)?,
        date(to)?
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(TokensDay::from).collect())
}

/// The frozen capacity and rate per closed day and flavor.
pub struct FrozenRate {
    pub day: Day,
    pub flavor: String,
    pub gpus: i64,
    pub cents_per_gpu_hour: Option<i64>,
}

pub async fn frozen_rates(
    db: impl PgExecutor<'_>,
    from: Day,
    to: Day,
) -> sqlx::Result<Vec<FrozenRate>> {
    let rows = sqlx::query!(
        r#"select day as "day!", flavor, gpus, cents_per_gpu_hour
           from chargeback_closed_rates
           where day >= $1 and day < $2 order by 1, 2"#,
        date(from)?,
        date(to)?
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| FrozenRate {
            day: day(r.day),
            flavor: r.flavor,
            gpus: r.gpus,
            cents_per_gpu_hour: r.cents_per_gpu_hour,
        })
        .collect())
}

/// Where the usage ingest stands: the earliest watermark of Kueue and DCGM, as a day; `None`
/// before either has one.
pub async fn ingested_until(db: impl PgExecutor<'_>) -> sqlx::Result<Option<String>> {
    let until = sqlx::query_scalar!(
        r#"select min(watermark)
           from usage_sources where source in ('kueue', 'dcgm') having count(watermark) = 2"#
    )
    .fetch_optional(db)
    .await?;
    Ok(until.flatten().map(rfc3339))
}

/// Freezes `month` (its first day): the month row, then every day's usage, tokens and
/// capacity with the rate in force, in the caller's transaction.
pub async fn close(
    tx: &mut sqlx::PgConnection,
    month: Day,
    closed_by: Option<i64>,
    usage: &[UsageDay],
    tokens: &[TokensDay],
    rates: &[FrozenRate],
) -> sqlx::Result<()> {
    sqlx::query_scalar!(
        r#"select set_config('gpufleet.closing', $1, true) as "set!""#,
        month.to_string()
    )
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query!(
        "insert into chargeback_closed_months (month, closed_by) values ($1, $2)",
        date(month)?,
        closed_by
    )
    .execute(&mut *tx)
    .await?;
    let m = date(month)?;
    freeze_usage(tx, m, usage).await?;
    freeze_tokens(tx, m, tokens).await?;
    freeze_rates(tx, m, rates).await
}

/// The month's usage by day, namespace and flavor, as it stands.
async fn freeze_usage(
    tx: &mut sqlx::PgConnection,
    m: Date,
    usage: &[UsageDay],
) -> sqlx::Result<()> {
    sqlx::query!(
        "insert into chargeback_closed_usage (month, day, namespace, flavor,
             allocated_gpu_microseconds, busy_gpu_microseconds, observed_gpu_microseconds,
             borrowed_gpu_microseconds, lent_gpu_microseconds)
         select $1, d, ns, fl, a, b, o, bo, le
         from unnest($2::date[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[],
                     $8::bigint[], $9::bigint[])
              as u(d, ns, fl, a, b, o, bo, le)",
        m,
        &dates(usage.iter().map(|u| u.day))?,
        &usage
            .iter()
            .map(|u| u.namespace.clone())
            .collect::<Vec<_>>(),
        &usage.iter().map(|u| u.flavor.clone()).collect::<Vec<_>>(),
        &usage.iter().map(|u| u.allocated_gpu_us).collect::<Vec<_>>() as &[Option<i64>],
        &usage.iter().map(|u| u.busy_gpu_us).collect::<Vec<_>>(),
        &usage.iter().map(|u| u.observed_gpu_us).collect::<Vec<_>>(),
        &usage.iter().map(|u| u.borrowed_gpu_us).collect::<Vec<_>>(),
        &usage.iter().map(|u| u.lent_gpu_us).collect::<Vec<_>>(),
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The month's served tokens by day, namespace and model, as they stand.
async fn freeze_tokens(
    tx: &mut sqlx::PgConnection,
    m: Date,
    tokens: &[TokensDay],
) -> sqlx::Result<()> {
    sqlx::query!(
        "insert into chargeback_closed_tokens (month, day, namespace, model, prompt_tokens,
                                               generation_tokens, prefill_microseconds,
                                               decode_microseconds)
         select $1, d, ns, mo, p, g, pf, dc
         from unnest($2::date[], $3::text[], $4::text[], $5::bigint[], $6::bigint[],
                     $7::bigint[], $8::bigint[])
              as u(d, ns, mo, p, g, pf, dc)",
        m,
        &dates(tokens.iter().map(|t| t.day))?,
        &tokens
            .iter()
            .map(|t| t.namespace.clone())
            .collect::<Vec<_>>(),
        &tokens.iter().map(|t| t.model.clone()).collect::<Vec<_>>(),
        &tokens.iter().map(|t| t.prompt_tokens).collect::<Vec<_>>(),
        &tokens
            .iter()
            .map(|t| t.generation_tokens)
            .collect::<Vec<_>>(),
        &tokens.iter().map(|t| t.prefill_us).collect::<Vec<_>>(),
        &tokens.iter().map(|t| t.decode_us).collect::<Vec<_>>(),
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Each day's capacity and rate in force per flavor.
async fn freeze_rates(
    tx: &mut sqlx::PgConnection,
    m: Date,
    rates: &[FrozenRate],
) -> sqlx::Result<()> {
    sqlx::query!(
        "insert into chargeback_closed_rates (month, day, flavor, gpus, cents_per_gpu_hour)
         select $1, d, fl, g, c
         from unnest($2::date[], $3::text[], $4::bigint[], $5::bigint[]) as u(d, fl, g, c)",
        m,
        &dates(rates.iter().map(|r| r.day))?,
        &rates.iter().map(|r| r.flavor.clone()).collect::<Vec<_>>(),
        &rates.iter().map(|r| r.gpus).collect::<Vec<_>>(),
        &rates
            .iter()
            .map(|r| r.cents_per_gpu_hour)
            .collect::<Vec<_>>() as &[Option<i64>],
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Removes a closed month's frozen rows; `false` when it was not closed.
pub async fn reopen(tx: &mut sqlx::PgConnection, month: Day) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"select set_config('gpufleet.reopening', $1, true) as "set!""#,
        month.to_string()
    )
    .fetch_one(&mut *tx)
    .await?;
    let m = date(month)?;
    for statement in [
        "delete from chargeback_closed_usage where month = $1",
        "delete from chargeback_closed_tokens where month = $1",
        "delete from chargeback_closed_rates where month = $1",
    ] {
        sqlx::query(statement).bind(m).execute(&mut *tx).await?;
    }
    let gone = sqlx::query!("delete from chargeback_closed_months where month = $1", m)
        .execute(&mut *tx)
        .await?;
    Ok(gone.rows_affected() == 1)
}

/// One namespace's minute rows of a day, oldest first.
pub async fn drill_minutes(
    db: impl PgExecutor<'_>,
    namespace: &str,
    day: Day,
) -> sqlx::Result<Vec<DrillMinute>> {
    let rows = sqlx::query!(
        r#"select minute, flavor, allocated_gpu_microseconds, busy_gpu_microseconds,
                  observed_gpu_microseconds, fb_used_mib
           from usage_minutes
           where namespace = $1 and cluster_queue = ''
             and minute >= $2::date::timestamp at time zone 'UTC'
             and minute < ($2::date + 1)::timestamp at time zone 'UTC'
           order by minute, flavor"#,
        namespace,
        date(day)?
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let mut sources = Vec::new();
            if r.allocated_gpu_microseconds.is_some() {
                sources.push("kueue".to_owned());
            }
            if r.observed_gpu_microseconds.is_some() {
                sources.push("dcgm".to_owned());
            }
            DrillMinute {
                minute: rfc3339(r.minute),
                flavor: r.flavor,
                allocated_gpu_microseconds: r.allocated_gpu_microseconds,
                busy_gpu_microseconds: r.busy_gpu_microseconds,
                observed_gpu_microseconds: r.observed_gpu_microseconds,
                fb_used_mib: r.fb_used_mib,
                sources,
            }
        })
        .collect())
}
