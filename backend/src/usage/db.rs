//! The usage SQL: minute rows (monthly partitions), their hour and day rollups, token rows, the
//! sources' watermarks and the gaps. Instants cross as Unix milliseconds; each window is written
//! in one transaction, so a window is stored whole or not at all.

use std::collections::BTreeMap;

use shared::common::day::Day;
use shared::fleet::sharing;
use shared::usage::{
    DeviceMinute, FlavorFacts, Gap, Lending, Owners, SourceStatus, TokenKey, Tokens, UsageKey,
    Window,
    neighbours::{Histogram, LatencyKey, PodKey, PodMinute, ServedMinute, ServiceMinute},
    queues::{QueueKey, QueueMinute},
};
use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, Transaction};

use crate::clock::rfc3339;

/// The session-level lock one ingesting replica holds for a run.
const INGEST_LOCK: &str = "gpufleet.usage.ingest";

/// Teams' namespaces and queues, and the flavors, as attribution needs them.
pub struct Attribution {
    pub owners: Owners,
    /// namespace → team id
    pub teams: BTreeMap<String, i64>,
}

pub async fn attribution(db: &PgPool) -> sqlx::Result<Attribution> {
    let teams = sqlx::query!("select id, namespace, cluster_queue from teams order by id")
        .fetch_all(db)
        .await?;
    let flavors = sqlx::query!(
        r#"select f.name, m.name as model, coalesce(f.settings -> 'mig_layout', '{}') <> '{}' as "mig!",
                  f.settings ->> 'sharing' as sharing
           from flavors f join gpu_models m on m.id = f.gpu_model_id order by f.name"#
    )
    .fetch_all(db)
    .await?;
    Ok(Attribution {
        owners: Owners {
            cluster_queues: teams
                .iter()
                .map(|t| (t.cluster_queue.clone(), t.namespace.clone()))
                .collect(),
            flavors: flavors
                .into_iter()
                .map(|f| FlavorFacts {
                    name: f.name,
                    gpu_model: f.model,
                    mig: f.mig,
                    sharing: f
                        .sharing
                        .as_deref()
                        .and_then(shared::fleet::sharing::parse_sharing)
                        .flatten(),
                })
                .collect(),
        },
        teams: teams.into_iter().map(|t| (t.namespace, t.id)).collect(),
    })
}

async fn ensure_partitions(tx: &mut PgConnection, window: Window) -> sqlx::Result<()> {
    sqlx::query!(
        "select usage_ensure_partitions('epoch'::timestamptz + $1::bigint * interval '1 millisecond',
                                        'epoch'::timestamptz + $2::bigint * interval '1 millisecond')",
        window.from_ms,
        window.to_ms
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Replaces the window's allocation with `rows`, and its borrowing and lending with `lending`
/// (minutes Kueue said nothing of stay null).
pub async fn write_allocation(
    tx: &mut Transaction<'_, Postgres>,
    window: Window,
    rows: &BTreeMap<UsageKey, i64>,
    lending: &BTreeMap<UsageKey, Lending>,
    teams: &BTreeMap<String, i64>,
) -> sqlx::Result<()> {
    ensure_partitions(tx, window).await?;
    sqlx::query!(
        "update usage_minutes
         set allocated_gpu_microseconds = null, nominal_gpu_microseconds = null,
             borrowed_gpu_microseconds = null, lent_gpu_microseconds = null
         where minute >= 'epoch'::timestamptz + $1::bigint * interval '1 millisecond'
           and minute < 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
           and (allocated_gpu_microseconds is not null or nominal_gpu_microseconds is not null)",
        window.from_ms,
        window.to_ms
    )
    .execute(&mut **tx)
    .await?;
    let all: std::collections::BTreeSet<&UsageKey> = rows.keys().chain(lending.keys()).collect();
    let keys = Keys::of(all.iter().copied(), teams);
    let allocated: Vec<Option<i64>> = all.iter().map(|k| rows.get(*k).copied()).collect();
    let lent = |f: fn(&Lending) -> i64| -> Vec<Option<i64>> {
        all.iter().map(|k| lending.get(*k).map(f)).collect()
    };
    sqlx::query!(
        "insert into usage_minutes (minute, namespace, cluster_queue, flavor, team_id,
                                    allocated_gpu_microseconds, nominal_gpu_microseconds,
                                    borrowed_gpu_microseconds, lent_gpu_microseconds)
         select 'epoch'::timestamptz + m * interval '1 millisecond', ns, cq, fl, t, a, n, b, l
         from unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[],
                     $7::bigint[], $8::bigint[], $9::bigint[])
              as u(m, ns, cq, fl, t, a, n, b, l)
         on conflict (minute, namespace, cluster_queue, flavor) do update set
             team_id = excluded.team_id,
             allocated_gpu_microseconds = excluded.allocated_gpu_microseconds,
             nominal_gpu_microseconds = excluded.nominal_gpu_microseconds,
             borrowed_gpu_microseconds = excluded.borrowed_gpu_microseconds,
             lent_gpu_microseconds = excluded.lent_gpu_microseconds",
        &keys.minutes,
        &keys.namespaces,
        &keys.cluster_queues,
        &keys.flavors,
        &keys.teams as &[Option<i64>],
        &allocated as &[Option<i64>],
        &lent(|l| l.nominal_gpu_us) as &[Option<i64>],
        &lent(|l| l.borrowed_gpu_us) as &[Option<i64>],
        &lent(|l| l.lent_gpu_us) as &[Option<i64>],
    )
    .execute(&mut **tx)
    .await?;
    clear_empty(tx, window).await?;
    refresh_rollups(tx, window).await
}

/// Replaces the window's DCGM columns with `rows`.
pub async fn write_devices(
    tx: &mut Transaction<'_, Postgres>,
    window: Window,
    rows: &BTreeMap<UsageKey, DeviceMinute>,
    teams: &BTreeMap<String, i64>,
) -> sqlx::Result<()> {
    ensure_partitions(tx, window).await?;
    sqlx::query!(
        "update usage_minutes
         set busy_gpu_microseconds = null, observed_gpu_microseconds = null, fb_used_mib = null
         where minute >= 'epoch'::timestamptz + $1::bigint * interval '1 millisecond'
           and minute < 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
           and observed_gpu_microseconds is not null",
        window.from_ms,
        window.to_ms
    )
    .execute(&mut **tx)
    .await?;
    let keys = Keys::of(rows.keys(), teams);
    let busy: Vec<i64> = rows.values().map(|r| r.busy_gpu_us).collect();
    let observed: Vec<i64> = rows.values().map(|r| r.observed_gpu_us).collect();
    let fb: Vec<i64> = rows.values().map(|r| r.fb_used_mib).collect();
    sqlx::query!(
        "insert into usage_minutes (minute, namespace, cluster_queue, flavor, team_id,
                                    busy_gpu_microseconds, observed_gpu_microseconds, fb_used_mib)
         select 'epoch'::timestamptz + m * interval '1 millisecond', ns, cq, fl, t, b, o, f
         from unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[],
                     $6::bigint[], $7::bigint[], $8::bigint[]) as u(m, ns, cq, fl, t, b, o, f)
         on conflict (minute, namespace, cluster_queue, flavor) do update set
             team_id = excluded.team_id,
             busy_gpu_microseconds = excluded.busy_gpu_microseconds,
             observed_gpu_microseconds = excluded.observed_gpu_microseconds,
             fb_used_mib = excluded.fb_used_mib",
        &keys.minutes,
        &keys.namespaces,
        &keys.cluster_queues,
        &keys.flavors,
        &keys.teams as &[Option<i64>],
        &busy,
        &observed,
        &fb,
    )
    .execute(&mut **tx)
    .await?;
    clear_empty(tx, window).await?;
    refresh_rollups(tx, window).await
}

/// Replaces the window's token rows.
pub async fn write_tokens(
    tx: &mut Transaction<'_, Postgres>,
    window: Window,
    rows: &BTreeMap<TokenKey, Tokens>,
    teams: &BTreeMap<String, i64>,
) -> sqlx::Result<()> {
    clear_window(tx, "usage_token_minutes", window).await?;
    let minutes: Vec<i64> = rows.keys().map(|k| k.minute_ms).collect();
    let namespaces: Vec<String> = rows.keys().map(|k| k.namespace.clone()).collect();
    let models: Vec<String> = rows.keys().map(|k| k.model.clone()).collect();
    let team_ids: Vec<Option<i64>> = rows
        .keys()
        .map(|k| teams.get(&k.namespace).copied())
        .collect();
    let prompt: Vec<i64> = rows.values().map(|t| t.prompt).collect();
    let generation: Vec<i64> = rows.values().map(|t| t.generation).collect();
    let prefill: Vec<i64> = rows.values().map(|t| t.prefill_us).collect();
    let decode: Vec<i64> = rows.values().map(|t| t.decode_us).collect();
    sqlx::query!(
        "insert into usage_token_minutes (minute, namespace, model, team_id, prompt_tokens,
                                          generation_tokens, prefill_microseconds,
                                          decode_microseconds)
         select 'epoch'::timestamptz + m * interval '1 millisecond', ns, mo, t, p, g, pf, dc
         from unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::bigint[],
                     $6::bigint[], $7::bigint[], $8::bigint[]) as u(m, ns, mo, t, p, g, pf, dc)",
        &minutes,
        &namespaces,
        &models,
        &team_ids as &[Option<i64>],
        &prompt,
        &generation,
        &prefill,
        &decode,
    )
    .execute(&mut **tx)
    .await?;
    refresh_token_rollups(tx, window).await
}

/// Deletes the window's rows of a minute table one source writes whole (`table` is one of
/// ours, never input), making its partitions first.
async fn clear_window(
    tx: &mut Transaction<'_, Postgres>,
    table: &'static str,
    window: Window,
) -> sqlx::Result<()> {
    ensure_partitions(tx, window).await?;
    sqlx::query(&format!(
        "delete from {table}
         where minute >= 'epoch'::timestamptz + $1::bigint * interval '1 millisecond'
           and minute < 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'"
    ))
    .bind(window.from_ms)
    .bind(window.to_ms)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// One row's array as PostgreSQL's literal (`{1,2,3}`): arrays of differing lengths cross as
/// text, one per row.
fn array_literal(items: impl Iterator<Item = impl ToString>) -> String {
    let items: Vec<String> = items.map(|i| i.to_string()).collect();
    format!("{{{}}}", items.join(","))
}

/// Replaces the window's latency histograms with `rows`.
pub async fn write_latency(
    tx: &mut Transaction<'_, Postgres>,
    window: Window,
    rows: &BTreeMap<LatencyKey, ServiceMinute>,
) -> sqlx::Result<()> {
    clear_window(tx, "usage_latency_minutes", window).await?;
    let bounds = |h: &Histogram| array_literal(h.buckets.keys());
    let counts = |h: &Histogram| array_literal(h.buckets.values());
    let pods = |m: &ServiceMinute| {
        // quoted, with `"` and `\` escaped, as an array literal wants
        array_literal(
            m.pods
                .iter()
                .map(|p| format!("\"{}\"", p.replace('\\', "\\\\").replace('"', "\\\""))),
        )
    };
    let column =
        |f: &dyn Fn(&ServiceMinute) -> String| -> Vec<String> { rows.values().map(f).collect() };
    let minutes: Vec<i64> = rows.keys().map(|k| k.minute_ms).collect();
    let namespaces: Vec<String> = rows.keys().map(|k| k.namespace.clone()).collect();
    let models: Vec<String> = rows.keys().map(|k| k.model.clone()).collect();
    let observations = |h: fn(&ServiceMinute) -> &Histogram| -> Vec<Option<i64>> {
        rows.values().map(|m| h(m).count).collect()
    };
    sqlx::query!(
        "insert into usage_latency_minutes (minute, namespace, model, pods,
                                            ttft_le_microseconds, ttft_counts, ttft_observations,
                                            queue_le_microseconds, queue_counts, queue_observations)
         select 'epoch'::timestamptz + m * interval '1 millisecond', ns, mo, po::text[],
                tl::bigint[], tc::bigint[], tn, ql::bigint[], qc::bigint[], qn
         from unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                     $7::bigint[], $8::text[], $9::text[], $10::bigint[])
              as u(m, ns, mo, po, tl, tc, tn, ql, qc, qn)",
        &minutes,
        &namespaces,
        &models,
        &column(&pods),
        &column(&|m| bounds(&m.ttft)),
        &column(&|m| counts(&m.ttft)),
        &observations(|m| &m.ttft) as &[Option<i64>],
        &column(&|m| bounds(&m.queue)),
        &column(&|m| counts(&m.queue)),
        &observations(|m| &m.queue) as &[Option<i64>],
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Replaces the window's Kueue queue minutes with `rows`.
pub async fn write_queues(
    tx: &mut Transaction<'_, Postgres>,
    window: Window,
    rows: &BTreeMap<QueueKey, QueueMinute>,
) -> sqlx::Result<()> {
    clear_window(tx, "usage_queue_minutes", window).await?;
    let minutes: Vec<i64> = rows.keys().map(|k| k.minute_ms).collect();
    let queues: Vec<String> = rows.keys().map(|k| k.cluster_queue.clone()).collect();
    let bounds: Vec<String> = rows
        .values()
        .map(|m| array_literal(m.wait.buckets.keys()))
        .collect();
    let counts: Vec<String> = rows
        .values()
        .map(|m| array_literal(m.wait.buckets.values()))
        .collect();
    let observations: Vec<Option<i64>> = rows.values().map(|m| m.wait.count).collect();
    let pending: Vec<Option<i64>> = rows.values().map(|m| m.pending).collect();
    let evicted: Vec<String> = rows
        .values()
        .map(|m| serde_json::to_string(&m.evicted).unwrap_or_else(|_| "{}".to_owned()))
        .collect();
    sqlx::query!(
        "insert into usage_queue_minutes (minute, cluster_queue, wait_le_microseconds, wait_counts,
                                          wait_observations, pending_workloads, evicted)
         select 'epoch'::timestamptz + m * interval '1 millisecond', q, l::bigint[], c::bigint[],
                n, p, e::jsonb
         from unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[],
                     $6::bigint[], $7::text[]) as u(m, q, l, c, n, p, e)",
        &minutes,
        &queues,
        &bounds,
        &counts,
        &observations as &[Option<i64>],
        &pending as &[Option<i64>],
        &evicted,
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Each ClusterQueue's minutes of `[from, end)` summed: its admission waits by `le` (and
/// `+Inf`), its highest pending count, its evictions by reason; and the team it belongs to.
pub async fn queue_window(
    db: impl PgExecutor<'_>,
    from: Day,
    end: Day,
) -> sqlx::Result<Vec<shared::usage::queues::QueueFigures>> {
    let rows = sqlx::query!(
        r#"with m as (
               select * from usage_queue_minutes
               where minute >= $1::date::timestamp at time zone 'UTC'
                 and minute < $2::date::timestamp at time zone 'UTC'),
           buckets as (
               select cluster_queue, array_agg(le order by le) as le, array_agg(n order by le) as n
               from (select cluster_queue, u.le, sum(u.c)::bigint as n
                     from m, unnest(m.wait_le_microseconds, m.wait_counts) as u(le, c)
                     group by 1, 2) b
               group by 1),
           evictions as (
               select cluster_queue, jsonb_object_agg(reason, n) as evicted
               from (select cluster_queue, e.key as reason, sum(e.value::bigint)::bigint as n
                     from m, jsonb_each_text(m.evicted) as e
                     group by 1, 2) r
               group by 1),
           totals as (
               select cluster_queue, sum(wait_observations)::bigint as observations,
                      max(pending_workloads) as pending_peak
               from m group by 1)
           select t.cluster_queue as "cluster_queue!", teams.name as "team?",
                  coalesce(b.le, '{}') as "le!: Vec<i64>", coalesce(b.n, '{}') as "n!: Vec<i64>",
                  t.observations, t.pending_peak,
                  coalesce(e.evicted, '{}')::text as "evicted!"
           from totals t
           left join buckets b using (cluster_queue)
           left join evictions e using (cluster_queue)
           left join teams on teams.cluster_queue = t.cluster_queue
           order by 1"#,
        crate::clock::date(from)?,
        crate::clock::date(end)?
    )
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|r| {
            let wait = Histogram {
                buckets: r.le.into_iter().zip(r.n).collect(),
                count: r.observations,
            };
            let evicted =
                serde_json::from_str(&r.evicted).map_err(|e| sqlx::Error::Decode(e.into()))?;
            Ok(shared::usage::queues::QueueFigures::new(
                r.cluster_queue,
                r.team,
                &wait,
                r.pending_peak,
                evicted,
            ))
        })
        .collect()
}

/// Replaces the window's co-tenancy with `rows`.
pub async fn write_pods(
    tx: &mut Transaction<'_, Postgres>,
    window: Window,
    rows: &BTreeMap<PodKey, PodMinute>,
) -> sqlx::Result<()> {
    clear_window(tx, "usage_pod_minutes", window).await?;
    let minutes: Vec<i64> = rows.keys().map(|k| k.minute_ms).collect();
    let namespaces: Vec<String> = rows.keys().map(|k| k.namespace.clone()).collect();
    let pods: Vec<String> = rows.keys().map(|k| k.pod.clone()).collect();
    let sharing: Vec<String> = rows
        .values()
        .map(|r| sharing::sharing_name(r.sharing).to_owned())
        .collect();
    let counts: Vec<i32> = rows.values().map(|r| r.neighbours).collect();
    let busy: Vec<i64> = rows.values().map(|r| r.neighbour_busy_gpu_us).collect();
    let observed: Vec<i64> = rows.values().map(|r| r.neighbour_observed_gpu_us).collect();
    sqlx::query!(
        "insert into usage_pod_minutes (minute, namespace, pod, sharing, neighbours,
                                        neighbour_busy_gpu_microseconds,
                                        neighbour_observed_gpu_microseconds)
         select 'epoch'::timestamptz + m * interval '1 millisecond', ns, po, sh, n, b, o
         from unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::int[], $6::bigint[],
                     $7::bigint[]) as u(m, ns, po, sh, n, b, o)",
        &minutes,
        &namespaces,
        &pods,
        &sharing,
        &counts,
        &busy,
        &observed,
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The services' minutes in `[from_ms, to_ms)` with their pods' co-tenancy, of the namespaces
/// given (all when `None`).
pub async fn served_minutes(
    db: &PgPool,
    from_ms: i64,
    to_ms: i64,
    namespaces: Option<&[String]>,
) -> sqlx::Result<Vec<ServedMinute>> {
    let (latency, pods) = tokio::try_join!(
        sqlx::query!(
            r#"select (extract(epoch from minute) * 1000)::bigint as "minute_ms!",
                      namespace, model, pods, ttft_le_microseconds, ttft_counts,
                      ttft_observations, queue_le_microseconds, queue_counts, queue_observations
               from usage_latency_minutes
               where minute >= 'epoch'::timestamptz + $1::bigint * interval '1 millisecond'
                 and minute < 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
                 and ($3::text[] is null or namespace = any($3))"#,
            from_ms,
            to_ms,
            namespaces as Option<&[String]>,
        )
        .fetch_all(db),
        sqlx::query!(
            r#"select (extract(epoch from minute) * 1000)::bigint as "minute_ms!",
                      namespace, pod, sharing, neighbours, neighbour_busy_gpu_microseconds,
                      neighbour_observed_gpu_microseconds
               from usage_pod_minutes
               where minute >= 'epoch'::timestamptz + $1::bigint * interval '1 millisecond'
                 and minute < 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
                 and ($3::text[] is null or namespace = any($3))"#,
            from_ms,
            to_ms,
            namespaces as Option<&[String]>,
        )
        .fetch_all(db),
    )?;
    let mut cotenancy: std::collections::HashMap<(i64, String, String), PodMinute> = pods
        .into_iter()
        .map(|p| {
            (
                (p.minute_ms, p.namespace, p.pod),
                PodMinute {
                    sharing: sharing::parse_sharing(&p.sharing).flatten(),
                    neighbours: p.neighbours,
                    neighbour_busy_gpu_us: p.neighbour_busy_gpu_microseconds,
                    neighbour_observed_gpu_us: p.neighbour_observed_gpu_microseconds,
                },
            )
        })
        .collect();
    let histogram = |bounds: Vec<i64>, counts: Vec<i64>, count: Option<i64>| Histogram {
        buckets: bounds.into_iter().zip(counts).collect(),
        count,
    };
    Ok(latency
        .into_iter()
        .map(|r| {
            let mut key = (r.minute_ms, r.namespace, String::new());
            let cotenancy = r
                .pods
                .iter()
                .filter_map(|pod| {
                    key.2.clone_from(pod);
                    cotenancy.remove(&key)
                })
                .collect();
            ServedMinute {
                minute_ms: r.minute_ms,
                namespace: key.1,
                model: r.model,
                pods: r.pods,
                ttft: histogram(r.ttft_le_microseconds, r.ttft_counts, r.ttft_observations),
                queue: histogram(
                    r.queue_le_microseconds,
                    r.queue_counts,
                    r.queue_observations,
                ),
                cotenancy,
            }
        })
        .collect())
}

struct Keys {
    minutes: Vec<i64>,
    namespaces: Vec<String>,
    cluster_queues: Vec<String>,
    flavors: Vec<String>,
    teams: Vec<Option<i64>>,
}

impl Keys {
    fn of<'a>(keys: impl Iterator<Item = &'a UsageKey>, teams: &BTreeMap<String, i64>) -> Keys {
        let mut out = Keys {
            minutes: Vec::new(),
            namespaces: Vec::new(),
            cluster_queues: Vec::new(),
            flavors: Vec::new(),
            teams: Vec::new(),
        };
        for k in keys {
            out.minutes.push(k.minute_ms);
            out.namespaces.push(k.namespace.clone());
            out.cluster_queues.push(k.cluster_queue.clone());
            out.flavors.push(k.flavor.clone());
            // allocation of a queue no team owns has no namespace, and so no team
            out.teams.push(teams.get(&k.namespace).copied());
        }
        out
    }
}

async fn clear_empty(tx: &mut PgConnection, window: Window) -> sqlx::Result<()> {
    sqlx::query!(
        "delete from usage_minutes
         where minute >= 'epoch'::timestamptz + $1::bigint * interval '1 millisecond'
           and minute < 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
           and allocated_gpu_microseconds is null and observed_gpu_microseconds is null
           and nominal_gpu_microseconds is null",
        window.from_ms,
        window.to_ms
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The hours and the days a window touches, in Unix milliseconds.
fn spans(window: Window) -> [(&'static str, i64, i64); 2] {
    use shared::common::utc::{DAY_MS, HOUR_MS};
    let ceil = |ms: i64, unit: i64| {
        ms.div_euclid(unit) * unit + if ms.rem_euclid(unit) == 0 { 0 } else { unit }
    };
    [
        (
            "hour",
            window.from_ms.div_euclid(HOUR_MS) * HOUR_MS,
            ceil(window.to_ms, HOUR_MS),
        ),
        (
            "day",
            window.from_ms.div_euclid(DAY_MS) * DAY_MS,
            ceil(window.to_ms, DAY_MS),
        ),
    ]
}

/// Rewrites the hours the window touches from their minutes, then the days from their hours.
async fn refresh_rollups(tx: &mut PgConnection, window: Window) -> sqlx::Result<()> {
    for (grain, from_ms, to_ms) in spans(window) {
        sqlx::query!(
            "delete from usage_rollups
             where grain = $1 and period >= 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
               and period < 'epoch'::timestamptz + $3::bigint * interval '1 millisecond'",
            grain,
            from_ms,
            to_ms
        )
        .execute(&mut *tx)
        .await?;
        sqlx::query!(
            "insert into usage_rollups (grain, period, namespace, cluster_queue, flavor, team_id,
                                        allocated_gpu_microseconds, busy_gpu_microseconds,
                                        observed_gpu_microseconds, fb_used_mib_minutes, minutes,
                                        nominal_gpu_microseconds, borrowed_gpu_microseconds,
                                        lent_gpu_microseconds)
             select 'hour', date_trunc('hour', minute, 'UTC'), namespace, cluster_queue, flavor,
                    max(team_id), sum(allocated_gpu_microseconds), sum(busy_gpu_microseconds),
                    sum(observed_gpu_microseconds), sum(fb_used_mib), count(*),
                    sum(nominal_gpu_microseconds), sum(borrowed_gpu_microseconds),
                    sum(lent_gpu_microseconds)
             from usage_minutes
             where $1 = 'hour'
               and minute >= 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
               and minute < 'epoch'::timestamptz + $3::bigint * interval '1 millisecond'
             group by 2, 3, 4, 5
             union all
             select 'day', date_trunc('day', period, 'UTC'), namespace, cluster_queue, flavor,
                    max(team_id), sum(allocated_gpu_microseconds), sum(busy_gpu_microseconds),
                    sum(observed_gpu_microseconds), sum(fb_used_mib_minutes), sum(minutes),
                    sum(nominal_gpu_microseconds), sum(borrowed_gpu_microseconds),
                    sum(lent_gpu_microseconds)
             from usage_rollups
             where $1 = 'day' and grain = 'hour'
               and period >= 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
               and period < 'epoch'::timestamptz + $3::bigint * interval '1 millisecond'
             group by 2, 3, 4, 5",
            grain,
            from_ms,
            to_ms
        )
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

async fn refresh_token_rollups(tx: &mut PgConnection, window: Window) -> sqlx::Result<()> {
    for (grain, from_ms, to_ms) in spans(window) {
        sqlx::query!(
            "delete from usage_token_rollups
             where grain = $1 and period >= 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
               and period < 'epoch'::timestamptz + $3::bigint * interval '1 millisecond'",
            grain,
            from_ms,
            to_ms
        )
        .execute(&mut *tx)
        .await?;
        sqlx::query!(
            "insert into usage_token_rollups (grain, period, namespace, model, team_id,
                                              prompt_tokens, generation_tokens,
                                              prefill_microseconds, decode_microseconds)
             select 'hour', date_trunc('hour', minute, 'UTC'), namespace, model, max(team_id),
                    sum(prompt_tokens), sum(generation_tokens), sum(prefill_microseconds),
                    sum(decode_microseconds)
             from usage_token_minutes
             where $1 = 'hour'
               and minute >= 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
               and minute < 'epoch'::timestamptz + $3::bigint * interval '1 millisecond'
             group by 2, 3, 4
             union all
             select 'day', date_trunc('day', period, 'UTC'), namespace, model, max(team_id),
                    sum(prompt_tokens), sum(generation_tokens), sum(prefill_microseconds),
                    sum(decode_microseconds)
             from usage_token_rollups
             where $1 = 'day' and grain = 'hour'
               and period >= 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
               and period < 'epoch'::timestamptz + $3::bigint * interval '1 millisecond'
             group by 2, 3, 4",
            grain,
            from_ms,
            to_ms
        )
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

/// A source's watermark in Unix milliseconds.
pub async fn watermark(db: impl PgExecutor<'_>, source: &str) -> sqlx::Result<Option<i64>> {
    let row = sqlx::query_scalar!(
        r#"select (extract(epoch from watermark) * 1000)::bigint as "ms" from usage_sources
           where source = $1"#,
        source
    )
    .fetch_one(db)
    .await?;
    Ok(row)
}

/// A window landed: the watermark moves to its end when it starts at or before the watermark
/// (windows ahead of it, from `gpufleet usage ingest`, leave it), and the gaps it covers, or
/// that now lie wholly before the watermark, close.
pub async fn succeeded(
    tx: &mut Transaction<'_, Postgres>,
    source: &str,
    window: Window,
    note: Option<&str>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "update usage_sources set
             watermark = case
                 when watermark is null
                   or watermark >= 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
                 then greatest(watermark, 'epoch'::timestamptz + $3::bigint * interval '1 millisecond')
                 else watermark end,
             last_attempt_at = now(), last_success_at = now(), last_error = null, note = $4
         where source = $1",
        source,
        window.from_ms,
        window.to_ms,
        note
    )
    .execute(&mut **tx)
    .await?;
    sqlx::query!(
        "update usage_gaps set resolved_at = now()
         where source = $1 and resolved_at is null
           and ((from_at >= 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
                 and to_at <= 'epoch'::timestamptz + $3::bigint * interval '1 millisecond')
                or to_at <= (select watermark from usage_sources where source = $1))",
        source,
        window.from_ms,
        window.to_ms
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A window failed: it is a gap (one open gap per source and start, its attempts counted). A
/// source that never succeeded keeps the window's start as its watermark, so the next run
/// starts there rather than at a later `now - backfill`.
pub async fn failed(db: &PgPool, source: &str, window: Window, error: &str) -> sqlx::Result<()> {
    let mut tx = db.begin().await?;
    sqlx::query!(
        "update usage_sources set last_attempt_at = now(), last_error = $2, last_error_at = now(),
             watermark = coalesce(watermark, 'epoch'::timestamptz + $3::bigint * interval '1 millisecond')
         where source = $1",
        source,
        error,
        window.from_ms
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "insert into usage_gaps (source, from_at, to_at, error)
         values ($1, 'epoch'::timestamptz + $2::bigint * interval '1 millisecond',
                 'epoch'::timestamptz + $3::bigint * interval '1 millisecond', $4)
         on conflict (source, from_at) where resolved_at is null do update set
             to_at = greatest(usage_gaps.to_at, excluded.to_at), error = excluded.error,
             attempts = usage_gaps.attempts + 1, last_failed_at = now()",
        source,
        window.from_ms,
        window.to_ms,
        error
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// The sum of allocation Kueue reported in a window, when it reported any.
pub async fn allocated_in(db: impl PgExecutor<'_>, window: Window) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        r#"select sum(allocated_gpu_microseconds)::bigint as "sum" from usage_minutes
           where minute >= 'epoch'::timestamptz + $1::bigint * interval '1 millisecond'
             and minute < 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'"#,
        window.from_ms,
        window.to_ms
    )
    .fetch_one(db)
    .await
}

/// Drops minute partitions wholly older than `before_ms`; returns how many tables went.
pub async fn drop_old_minutes(db: &PgPool, before_ms: i64) -> sqlx::Result<i32> {
    let dropped = sqlx::query_scalar!(
        r#"select usage_drop_partitions('epoch'::timestamptz + $1::bigint * interval '1 millisecond') as "n!""#,
        before_ms
    )
    .fetch_one(db)
    .await?;
    Ok(dropped)
}

pub async fn sources(db: impl PgExecutor<'_>) -> sqlx::Result<Vec<SourceStatus>> {
    let rows = sqlx::query!(
        r#"select source, watermark,
                  extract(epoch from now() - watermark)::bigint as "lag_seconds?",
                  last_success_at, last_error, last_error_at, note
           from usage_sources
           order by array_position(array['kueue', 'dcgm', 'vllm'], source)"#
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| SourceStatus {
            source: r.source,
            watermark: r.watermark.map(rfc3339),
            lag_seconds: r.lag_seconds,
            last_success_at: r.last_success_at.map(rfc3339),
            last_error: r.last_error,
            last_error_at: r.last_error_at.map(rfc3339),
            note: r.note,
        })
        .collect())
}

pub async fn open_gaps(db: impl PgExecutor<'_>) -> sqlx::Result<Vec<Gap>> {
    let rows = sqlx::query!(
        r#"select source, from_at, to_at, error, attempts, first_failed_at, last_failed_at
           from usage_gaps where resolved_at is null order by from_at, source"#
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Gap {
            source: r.source,
            from: rfc3339(r.from_at),
            to: rfc3339(r.to_at),
            error: r.error,
            attempts: r.attempts,
            first_failed_at: rfc3339(r.first_failed_at),
            last_failed_at: rfc3339(r.last_failed_at),
        })
        .collect())
}

/// Namespaces and queues no team owns, with usage in the last 7 days.
pub async fn unattributed(db: impl PgExecutor<'_>) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        r#"select distinct case when cluster_queue <> '' then 'clusterqueue/' || cluster_queue
                                else namespace end as "owner!"
           from usage_rollups
           where grain = 'hour' and period >= now() - interval '7 days' and team_id is null
             and (namespace <> '' or cluster_queue <> '')
           union
           select distinct namespace from usage_token_rollups
           where grain = 'hour' and period >= now() - interval '7 days' and team_id is null
           order by 1"#
    )
    .fetch_all(db)
    .await
}

/// Only one replica ingests at a time.
pub async fn try_lock(conn: &mut PgConnection) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"select pg_try_advisory_lock(hashtext($1)) as "locked!""#,
        INGEST_LOCK
    )
    .fetch_one(conn)
    .await
}

pub async fn unlock(conn: &mut PgConnection) -> sqlx::Result<()> {
    sqlx::query_scalar!(
        r#"select pg_advisory_unlock(hashtext($1)) as "unlocked!""#,
        INGEST_LOCK
    )
    .fetch_one(conn)
    .await?;
    Ok(())
}

/// Writes a window's allocation (with its borrowing and lending) and device rows in one transaction, attributed to today's
/// teams, as the Kueue and DCGM ingests write theirs (tests and benchmarks use it to lay down
/// known minutes without a Prometheus).
pub async fn store_window(
    pool: &PgPool,
    window: Window,
    allocated: &BTreeMap<UsageKey, i64>,
    lending: &BTreeMap<UsageKey, Lending>,
    devices: &BTreeMap<UsageKey, DeviceMinute>,
) -> sqlx::Result<()> {
    let teams = attribution(pool).await?.teams;
    let mut tx = pool.begin().await?;
    write_allocation(&mut tx, window, allocated, lending, &teams).await?;
    write_devices(&mut tx, window, devices, &teams).await?;
    tx.commit().await
}

/// Each team's use of each flavor per week of `[from, end)` (weeks counted from `from`), from
/// the hour rollups. Kueue's nominal and allocation are a week's sum only when every one of its
/// 168 hours reported them (else `None`: not known, which is not idle); the peak is the week's
/// busiest hour's allocation.
pub async fn week_use(
    db: impl PgExecutor<'_>,
    from: Day,
    end: Day,
) -> sqlx::Result<Vec<shared::planning::findings::WeekUse>> {
    let rows = sqlx::query!(
        r#"with hours as (
               select t.name as team, r.flavor, r.period,
                      sum(r.nominal_gpu_microseconds) as nominal,
                      sum(r.allocated_gpu_microseconds) as allocated,
                      sum(r.busy_gpu_microseconds) as busy,
                      sum(r.observed_gpu_microseconds) as observed,
                      sum(r.fb_used_mib_minutes) as fb
               from usage_rollups r join teams t on t.id = r.team_id
               where r.grain = 'hour' and r.period >= $1::date::timestamp at time zone 'UTC'
                 and r.period < $2::date::timestamp at time zone 'UTC'
               group by 1, 2, 3)
           select team as "team!", flavor as "flavor!",
                  $1::date + 7 * (((period at time zone 'UTC')::date - $1::date) / 7) as "week!",
                  case when count(nominal) = 168 then sum(nominal)::bigint end as nominal,
                  case when count(allocated) = 168 then sum(allocated)::bigint end as allocated,
                  coalesce(sum(busy), 0)::bigint as "busy!",
                  coalesce(sum(observed), 0)::bigint as "observed!",
                  coalesce(sum(fb), 0)::bigint as "fb!",
                  coalesce(max(allocated), 0)::bigint as "peak!"
           from hours group by 1, 2, 3 order by 1, 2, 3"#,
        crate::clock::date(from)?,
        crate::clock::date(end)?
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| shared::planning::findings::WeekUse {
            team: r.team,
            flavor: r.flavor,
            week: crate::clock::day(r.week),
            nominal_gpu_microseconds: r.nominal,
            allocated_gpu_microseconds: r.allocated,
            busy_gpu_microseconds: r.busy,
            observed_gpu_microseconds: r.observed,
            fb_used_mib_minutes: r.fb,
            peak_hour_allocated_gpu_microseconds: r.peak,
        })
        .collect())
}

/// What `team` used of each flavor over the `hours` whole hours before `until_ms` (an hour's
/// start), from the hour rollups. Kueue's nominal and allocation are sums only when every hour
/// reported them (else `None`: not known, which is not idle).
pub async fn in_use(
    db: impl PgExecutor<'_>,
    team: &str,
    until_ms: i64,
    hours: i64,
) -> sqlx::Result<Vec<shared::chargeback::worth::InUse>> {
    let rows = sqlx::query!(
        r#"with hours as (
               select r.flavor, r.period,
                      sum(r.nominal_gpu_microseconds) as nominal,
                      sum(r.allocated_gpu_microseconds) as allocated,
                      sum(r.busy_gpu_microseconds) as busy
               from usage_rollups r join teams t on t.id = r.team_id
               where r.grain = 'hour' and t.name = $1
                 and r.period >= 'epoch'::timestamptz + ($2::bigint - $3::bigint * 3600000) * interval '1 millisecond'
                 and r.period < 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
               group by 1, 2)
           select flavor as "flavor!",
                  case when count(nominal) = $3 then sum(nominal)::bigint end as nominal,
                  case when count(allocated) = $3 then sum(allocated)::bigint end as allocated,
                  coalesce(sum(busy), 0)::bigint as "busy!"
           from hours group by 1 order by 1"#,
        team,
        until_ms,
        hours
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| shared::chargeback::worth::InUse {
            flavor: r.flavor,
            hours,
            nominal_gpu_microseconds: r.nominal,
            allocated_gpu_microseconds: r.allocated,
            busy_gpu_microseconds: r.busy,
        })
        .collect())
}

/// The usage rows' reach back from the newest minute held when reading what Kueue reports of a
/// team's quota: older reports say nothing of the quota now.
const REPORTED_WITHIN_MINUTES: i64 = 15;

/// Kueue's nominal quota for `team`'s ClusterQueue, per flavor, in the newest minute read at or
/// after `since_ms` and within [`REPORTED_WITHIN_MINUTES`] of the newest minute the ingest holds
/// (`kueue_cluster_queue_nominal_quota`, as the ingest writes it into the rows).
pub async fn reported_nominal(
    db: impl PgExecutor<'_>,
    team: &str,
    since_ms: i64,
) -> sqlx::Result<Vec<shared::usage::reported::ReportedNominal>> {
    let rows = sqlx::query!(
        r#"with newest as (select max(minute) as minute from usage_minutes)
           select distinct on (u.flavor) u.flavor,
                  (extract(epoch from u.minute) * 1000)::bigint as "minute_ms!",
                  sum(u.nominal_gpu_microseconds)::bigint as "nominal!"
           from usage_minutes u join teams t on t.id = u.team_id, newest
           where t.name = $1 and u.nominal_gpu_microseconds is not null
             and u.minute >= 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
             and u.minute >= newest.minute - $3::bigint * interval '1 minute'
           group by u.flavor, u.minute
           order by u.flavor, u.minute desc"#,
        team,
        since_ms,
        REPORTED_WITHIN_MINUTES
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| shared::usage::reported::ReportedNominal {
            flavor: r.flavor,
            minute_ms: r.minute_ms,
            nominal_gpu_us: r.nominal,
        })
        .collect())
}
