//! The demo exporter: the demo fleet's DCGM, Kueue and vLLM metrics (`shared::usage::demo`)
//! served at `/metrics` for a Prometheus to scrape, and the same as OpenMetrics history for
//! `promtool tsdb create-blocks-from openmetrics`, so a fresh demo console has days to show.
//! Everything it makes goes through the real path: Prometheus, then the ingest.

use std::{io::Write, net::SocketAddr};

use axum::{Router, extract::State, http::header, response::IntoResponse, routing::get};
use shared::usage::demo::{self, DemoPool, DemoTeam};
use sqlx::PgPool;

/// The inventory's pools and teams, with each team's approved quotas, as the demo generator
/// wants them.
pub async fn fleet(pool: &PgPool) -> sqlx::Result<(Vec<DemoPool>, Vec<DemoTeam>)> {
    let pools = sqlx::query!(
        r#"select f.name as flavor, m.name as model, p.nodes::bigint as "nodes!",
                  p.gpus_per_node::bigint as "gpus_per_node!",
                  coalesce(f.settings -> 'mig_layout', '{}')::text as "mig_layout!"
           from node_pools p join flavors f on f.id = p.flavor_id
           join gpu_models m on m.id = p.gpu_model_id order by p.id"#
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| {
        // validated on the way in: profile → instances per GPU
        let layout: std::collections::BTreeMap<String, u32> =
            serde_json::from_str(&r.mig_layout).map_err(|e| sqlx::Error::Decode(e.into()))?;
        Ok(DemoPool {
            flavor: r.flavor,
            mem_mib: shared::fleet::catalogue::find(&r.model)
                .map_or(81_920, |m| i64::from(m.mem_mib)),
            gpu_model: r.model,
            nodes: r.nodes,
            gpus_per_node: r.gpus_per_node,
            mig_layout: layout.into_iter().collect(),
        })
    })
    .collect::<sqlx::Result<_>>()?;
    let approved = crate::quota::db::approved(pool).await?;
    let teams =
        sqlx::query!("select name, namespace, cluster_queue, cohort from teams order by id")
            .fetch_all(pool)
            .await?
            .into_iter()
            .map(|r| DemoTeam {
                approved: approved
                    .iter()
                    .filter(|a| a.team == r.name)
                    .map(|a| a.spec.0.clone())
                    .collect(),
                namespace: r.namespace,
                cluster_queue: r.cluster_queue,
                cohort: r.cohort,
            })
            .collect();
    Ok((pools, teams))
}

/// Serves `/metrics` on `addr` until the task is dropped.
pub async fn serve(pool: PgPool, addr: SocketAddr) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|err| anyhow::anyhow!("the demo exporter cannot listen on {addr}: {err}"))?;
    tracing::info!(url = %format!("http://{addr}/metrics"), "serving the demo exporter (demo data)");
    let router = Router::new()
        .route("/metrics", get(metrics))
        .with_state(pool);
    Ok(tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, router).await {
            tracing::error!(%err, "the demo exporter stopped");
        }
    }))
}

async fn metrics(State(pool): State<PgPool>) -> axum::response::Response {
    match fleet(&pool).await {
        Ok((pools, teams)) => {
            let now = crate::clock::now_ms();
            let body = demo::exposition(&demo::samples(&pools, &teams, now));
            (
                [(
                    header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )],
                body,
            )
                .into_response()
        }
        Err(err) => {
            tracing::warn!(%err, "demo exporter: cannot read the inventory");
            (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "the inventory cannot be read\n",
            )
                .into_response()
        }
    }
}

/// Writes the demo fleet's samples from `from_ms` to `to_ms` every `step_ms` as OpenMetrics.
pub fn write_history(
    out: &mut impl Write,
    pools: &[DemoPool],
    teams: &[DemoTeam],
    from_ms: i64,
    to_ms: i64,
    step_ms: i64,
) -> std::io::Result<usize> {
    // OpenMetrics wants each family's samples together: one pass per family.
    let families = [
        shared::usage::GPU_UTIL,
        shared::usage::GR_ENGINE_ACTIVE,
        shared::usage::FB_USED,
        shared::usage::KUEUE_USAGE,
        shared::usage::KUEUE_NOMINAL,
        shared::usage::PROMPT_TOKENS,
        shared::usage::GENERATION_TOKENS,
        shared::usage::PREFILL_SECONDS,
        shared::usage::DECODE_SECONDS,
        shared::usage::neighbours::TTFT_BUCKET,
        shared::usage::neighbours::QUEUE_BUCKET,
        shared::usage::queues::ADMISSION_WAIT_BUCKET,
        shared::usage::queues::PENDING,
        shared::usage::queues::EVICTED,
    ];
    let mut written = 0;
    for family in families {
        let (name, kind) = match family.strip_suffix("_total") {
            Some(base) => (base, "counter"),
            None => (family, "gauge"),
        };
        writeln!(out, "# TYPE {name} {kind}")?;
        let mut at = from_ms;
        while at < to_ms {
            for sample in demo::samples(pools, teams, at)
                .iter()
                .filter(|s| s.metric == family)
            {
                writeln!(
                    out,
                    "{} {}.{:03}",
                    demo::line(sample),
                    at.div_euclid(1000),
                    at.rem_euclid(1000)
                )?;
                written += 1;
            }
            at += step_ms;
        }
    }
    writeln!(out, "# EOF")?;
    Ok(written)
}
