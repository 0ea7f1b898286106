//! Usage ingest against a real Prometheus and a real PostgreSQL: controlled DCGM, Kueue and
//! vLLM samples (written into Prometheus's TSDB by promtool, so times and values are exact and
//! series end without staleness markers) → minute rows equal to the hand-computed ones;
//! the same rows whatever Prometheus's lookback; Prometheus stopped mid-ingest → a gap,
//! backfilled once it is back, nothing counted twice; bad configuration → a clear message and
//! no rows; the real H200's NVML trace → busy GPU-minutes matching its duty cycles.
//!
//! The fleet is the demo inventory's (flavors h100-shared, h200-train, rtx-inference, h100-mig; teams
//! research and search in namespaces team-research and team-search, ClusterQueues named after
//! the team), with h200-train split into MIG instances where a test says so.

use std::{collections::BTreeMap, time::Duration};

use crate::common::prometheus::{Point, PromServer, backfill, point, scratch};
use backend::usage::{self, IngestError, IngestSettings, Source, Usage, prom::PromError};
use shared::{
    common::utc::{HOUR_MS, MINUTE_MS},
    usage::Window,
};
use sqlx::PgPool;

const SEC: i64 = 1_000;
/// GPU-microseconds in a GPU-minute.
const GPU_MIN: i64 = 60_000_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .expect("a clock after 1970")
}

/// A whole hour three hours ago: the data lies well inside Prometheus's retention and well
/// behind any settle time.
fn t0() -> i64 {
    (now_ms() / HOUR_MS - 3) * HOUR_MS
}

async fn fleet(pool: &PgPool, mig: bool) {
    backend::fleet::load_demo(pool).await.expect("demo fleet");
    if mig {
        sqlx::query(
            r#"update flavors set settings = '{"mig_layout": {"1g.18gb": 3, "3g.71gb": 1}}'
               where name = 'h200-train'"#,
        )
        .execute(pool)
        .await
        .expect("mig layout");
    }
}

fn settings(shards: u32) -> IngestSettings {
    IngestSettings {
        shards,
        ..IngestSettings::default()
    }
}

fn dcgm(
    gpu: &str,
    uuid: &str,
    host: &str,
    model: &str,
    extra: &[(&str, &str)],
) -> Vec<(String, String)> {
    let mut labels = vec![
        ("gpu".to_owned(), gpu.to_owned()),
        ("UUID".to_owned(), uuid.to_owned()),
        ("device".to_owned(), format!("nvidia{gpu}")),
        ("modelName".to_owned(), model.to_owned()),
        ("Hostname".to_owned(), host.to_owned()),
    ];
    labels.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    labels
}

fn at(
    metric: &'static str,
    labels: &[(String, String)],
    at_ms: i64,
    value: impl ToString,
) -> Point {
    Point {
        metric,
        labels: labels.to_vec(),
        at_ms,
        value: value.to_string(),
    }
}

/// Ten minutes from `t0`, scraped every 15 s, plus one scrape before and two minutes after so
/// the window's edges are tested:
/// - GPU A (H100, whole) in team-research: 80% busy in minutes 0-4, 40% in 5-9; 40,000 MiB;
/// - GPU B (H100, whole) in team-search, scraped with the exporter's namespace clashing
///   (`exported_namespace`): 100% busy, 20,000 MiB, no sample at all in minute 3 (an
///   exporter gap);
/// - GPU C (H100, whole) held by no pod: 5% busy, 1,000 MiB, its exporter dies after minute 3
///   (no staleness marker: an instant query would still answer for it for the lookback);
/// - GPU D (H200, MIG): a 1g.18gb instance in team-search at 0.7 engine-active, 15,000 MiB, and
///   a 3g.71gb instance in team-research at 0.35, 50,000 MiB (DCGM reports no GPU_UTIL for
///   instances);
/// - Kueue: research holds 1 H100 and one 3g.71gb, search 1 H100 and one 1g.18gb, a queue no
///   team owns ("ghost") 2 H100s; cpu is reported and is no GPU;
/// - vLLM in team-search (llama-8b): prompt +150 and generation +30 per scrape, the server
///   restarting at minute 5 (both counters back to one scrape's worth).
fn controlled(t0: i64) -> Vec<Point> {
    let a = dcgm(
        "0",
        "GPU-a0aa0000-0000-0000-0000-000000000000",
        "node-a",
        "NVIDIA H100 80GB HBM3",
        &[
            ("namespace", "team-research"),
            ("pod", "train-0"),
            ("container", "main"),
        ],
    );
    let b = dcgm(
        "1",
        "GPU-b1bb0000-0000-0000-0000-000000000000",
        "node-a",
        "NVIDIA H100 80GB HBM3",
        &[
            ("exported_namespace", "team-search"),
            ("namespace", "gpu-operator"),
            ("pod", "serve-0"),
        ],
    );
    let c = dcgm(
        "0",
        "GPU-c2cc0000-0000-0000-0000-000000000000",
        "node-b",
        "NVIDIA H100 80GB HBM3",
        &[],
    );
    let d1 = dcgm(
        "0",
        "GPU-d3dd0000-0000-0000-0000-000000000000",
        "node-c",
        "NVIDIA H200",
        &[
            ("GPU_I_PROFILE", "1g.18gb"),
            ("GPU_I_ID", "7"),
            ("namespace", "team-search"),
            ("pod", "embed-0"),
        ],
    );
    let d3 = dcgm(
        "0",
        "GPU-d3dd0000-0000-0000-0000-000000000000",
        "node-c",
        "NVIDIA H200",
        &[
            ("GPU_I_PROFILE", "3g.71gb"),
            ("GPU_I_ID", "1"),
            ("namespace", "team-research"),
            ("pod", "ft-0"),
        ],
    );
    let kueue = |cq: &str, flavor: &str, resource: &str| {
        vec![
            ("cluster_queue".to_owned(), cq.to_owned()),
            ("cohort".to_owned(), "gpufleet".to_owned()),
            ("flavor".to_owned(), flavor.to_owned()),
            ("resource".to_owned(), resource.to_owned()),
        ]
    };
    let vllm = vec![
        ("namespace".to_owned(), "team-search".to_owned()),
        ("model_name".to_owned(), "llama-8b".to_owned()),
        ("engine".to_owned(), "0".to_owned()),
        ("pod".to_owned(), "vllm-0".to_owned()),
    ];
    let mut points = Vec::new();
    // scrapes k = -1 (before the window) to 47 (two minutes after it)
    for k in -1i64..48 {
        let ts = t0 + k * 15 * SEC;
        let minute = k.div_euclid(4);
        let util_a = if minute < 5 { 80 } else { 40 };
        points.push(at("DCGM_FI_DEV_GPU_UTIL", &a, ts, util_a));
        points.push(at("DCGM_FI_DEV_FB_USED", &a, ts, 40_000));
        if minute != 3 {
            points.push(at("DCGM_FI_DEV_GPU_UTIL", &b, ts, 100));
            points.push(at("DCGM_FI_DEV_FB_USED", &b, ts, 20_000));
        }
        if minute <= 3 {
            points.push(at("DCGM_FI_DEV_GPU_UTIL", &c, ts, 5));
            points.push(at("DCGM_FI_DEV_FB_USED", &c, ts, 1_000));
        }
        points.push(at("DCGM_FI_PROF_GR_ENGINE_ACTIVE", &d1, ts, "0.700000"));
        points.push(at("DCGM_FI_DEV_FB_USED", &d1, ts, 15_000));
        points.push(at("DCGM_FI_PROF_GR_ENGINE_ACTIVE", &d3, ts, "0.350000"));
        points.push(at("DCGM_FI_DEV_FB_USED", &d3, ts, 50_000));
        let usage = "kueue_cluster_queue_resource_usage";
        points.push(at(
            usage,
            &kueue("research", "h100-shared", "nvidia.com/gpu"),
            ts,
            1,
        ));
        points.push(at(usage, &kueue("research", "h100-shared", "cpu"), ts, 16));
        points.push(at(
            usage,
            &kueue("research", "h200-train", "nvidia.com/mig-3g.71gb"),
            ts,
            1,
        ));
        points.push(at(
            usage,
            &kueue("search", "h100-shared", "nvidia.com/gpu"),
            ts,
            1,
        ));
        points.push(at(
            usage,
            &kueue("search", "h200-train", "nvidia.com/mig-1g.18gb"),
            ts,
            1,
        ));
        points.push(at(
            usage,
            &kueue("ghost", "h100-shared", "nvidia.com/gpu"),
            ts,
            2,
        ));
        // counters: 1,000 + 150 per scrape from k = -1; the restart at k = 20 (minute 5)
        // starts again from one scrape's worth
        let (prompt, generation) = if k < 20 {
            (1_000 + 150 * (k + 1), 500 + 30 * (k + 1))
        } else {
            (150 * (k - 19), 30 * (k - 19))
        };
        points.push(at("vllm:prompt_tokens_total", &vllm, ts, prompt));
        points.push(at("vllm:generation_tokens_total", &vllm, ts, generation));
        // the histograms' sums: 0.25 s of prefill and 1.5 s of decode per scrape, reset too
        let scrapes = if k < 20 { k + 1 + 40 } else { k - 19 };
        points.push(at(
            "vllm:request_prefill_time_seconds_sum",
            &vllm,
            ts,
            format!("{:.2}", 0.25 * scrapes as f64),
        ));
        points.push(at(
            "vllm:request_decode_time_seconds_sum",
            &vllm,
            ts,
            format!("{:.1}", 1.5 * scrapes as f64),
        ));
    }
    points
}

type Row = (Option<i64>, Option<i64>, Option<i64>, Option<i64>);
/// A token row: (minute, namespace, model) → (prompt, generation, prefill µs, decode µs).
type TokenRows = BTreeMap<(i64, String, String), (i64, i64, i64, i64)>;
/// A minute row as stored: minute (ms), namespace, queue, flavor, then the four figures.
type StoredRow = (
    i64,
    String,
    String,
    String,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);
type Key = (i64, String, String, String);

/// The rows of minutes 0-9 worked out by hand from the data above.
fn expected_rows() -> BTreeMap<Key, Row> {
    // MIG shares on a 7-slice H200: 1g = 1/7 GPU, 3g = 3/7 GPU.
    // 1/7 GPU-minute = 8,571,428.57 µs → 8,571,429; 3/7 = 25,714,285.71 → 25,714,286.
    let (one_seventh, three_sevenths) = (8_571_429, 25_714_286);
    let mut rows = BTreeMap::new();
    let key = |m: i64, ns: &str, cq: &str, flavor: &str| {
        (m, ns.to_owned(), cq.to_owned(), flavor.to_owned())
    };
    for m in 0..10 {
        // GPU A: 80% (then 40%) of a GPU-minute; Kueue: 1 GPU
        let busy_a = if m < 5 { 48_000_000 } else { 24_000_000 };
        rows.insert(
            key(m, "team-research", "", "h100-shared"),
            (Some(GPU_MIN), Some(busy_a), Some(GPU_MIN), Some(40_000)),
        );
        // GPU B: 100% busy, except minute 3 with no sample: allocation unobserved, not idle
        let b = if m == 3 {
            (None, None, None)
        } else {
            (Some(GPU_MIN), Some(GPU_MIN), Some(20_000))
        };
        rows.insert(
            key(m, "team-search", "", "h100-shared"),
            (Some(GPU_MIN), b.0, b.1, b.2),
        );
        // GPU C until its exporter died: 5% of a GPU-minute = 3 s busy
        if m <= 3 {
            rows.insert(
                key(m, "", "", "h100-shared"),
                (None, Some(3_000_000), Some(GPU_MIN), Some(1_000)),
            );
        }
        // 1g.18gb at 0.7: 0.7 × 1/7 GPU-minute = 6 s; 3g.71gb at 0.35: 0.35 × 3/7 = 0.15 → 9 s
        rows.insert(
            key(m, "team-search", "", "h200-train"),
            (
                Some(one_seventh),
                Some(6_000_000),
                Some(one_seventh),
                Some(15_000),
            ),
        );
        rows.insert(
            key(m, "team-research", "", "h200-train"),
            (
                Some(three_sevenths),
                Some(9_000_000),
                Some(three_sevenths),
                Some(50_000),
            ),
        );
        // the queue no team owns: 2 GPUs, kept under its own name
        rows.insert(
            key(m, "", "ghost", "h100-shared"),
            (Some(2 * GPU_MIN), None, None, None),
        );
    }
    rows
}

async fn minute_rows(pool: &PgPool, t0: i64) -> BTreeMap<Key, Row> {
    let rows: Vec<StoredRow> = sqlx::query_as(
        "select (extract(epoch from minute) * 1000)::bigint, namespace, cluster_queue, flavor,
                allocated_gpu_microseconds, busy_gpu_microseconds, observed_gpu_microseconds, fb_used_mib
         from usage_minutes order by 1, 2, 3, 4",
    )
    .fetch_all(pool)
    .await
    .expect("minute rows");
    rows.into_iter()
        .map(|(ms, ns, cq, fl, a, b, o, f)| (((ms - t0) / MINUTE_MS, ns, cq, fl), (a, b, o, f)))
        .collect()
}

async fn token_rows(
    pool: &PgPool,
    t0: i64,
) -> BTreeMap<(i64, String, String), (i64, i64, i64, i64)> {
    let rows: Vec<(i64, String, String, i64, i64, i64, i64)> = sqlx::query_as(
        "select (extract(epoch from minute) * 1000)::bigint, namespace, model, prompt_tokens,
                generation_tokens, prefill_microseconds, decode_microseconds
         from usage_token_minutes order by 1, 2, 3",
    )
    .fetch_all(pool)
    .await
    .expect("token rows");
    rows.into_iter()
        .map(|(ms, ns, model, p, g, pf, dc)| (((ms - t0) / MINUTE_MS, ns, model), (p, g, pf, dc)))
        .collect()
}

/// Every scrape adds 150 prompt and 30 generation tokens, 0.25 s of prefill and 1.5 s of
/// decode: 4 scrapes a minute → 600 and 120 tokens, 1 s and 6 s, in the minute of the restart
/// too (the restarted counter's first value is its increase).
fn expected_tokens() -> TokenRows {
    (0..10)
        .map(|m| {
            (
                (m, "team-search".to_owned(), "llama-8b".to_owned()),
                (600, 120, 1_000_000, 6_000_000),
            )
        })
        .collect()
}

async fn ingest_all(
    pool: &PgPool,
    prom: &backend::usage::prom::Prometheus,
    shards: u32,
    window: Window,
) {
    for source in Source::ALL {
        usage::ingest(pool, prom, &settings(shards), source, window)
            .await
            .unwrap_or_else(|err| panic!("{}: {err}", source.name()));
    }
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn ingest_gives_the_hand_computed_rows_whatever_the_lookback(pool: PgPool) {
    fleet(&pool, true).await;
    let t0 = t0();
    let dir = scratch("controlled");
    backfill(&dir, &controlled(t0));
    let window = Window::new(t0, t0 + 10 * MINUTE_MS).expect("window");

    for (lookback, shards) in [
        ("--query.lookback-delta=15m", 16),
        ("--query.lookback-delta=1m", 1),
    ] {
        let mut prom = PromServer::start(&dir, &[lookback]).await;
        ingest_all(&pool, &prom.client(), shards, window).await;
        assert_eq!(
            minute_rows(&pool, t0).await,
            expected_rows(),
            "with {lookback}, {shards} shards"
        );
        assert_eq!(
            token_rows(&pool, t0).await,
            expected_tokens(),
            "with {lookback}"
        );
        prom.stop();
    }

    // teams are attributed; the unassigned GPU and the ghost queue are kept, owned by no one
    let owners: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "select distinct m.namespace, m.cluster_queue, t.name from usage_minutes m
         left join teams t on t.id = m.team_id order by 1, 2",
    )
    .fetch_all(&pool)
    .await
    .expect("owners");
    assert_eq!(
        owners,
        vec![
            (String::new(), String::new(), None),
            (String::new(), "ghost".to_owned(), None),
            (
                "team-research".to_owned(),
                String::new(),
                Some("research".to_owned())
            ),
            (
                "team-search".to_owned(),
                String::new(),
                Some("search".to_owned())
            ),
        ]
    );

    // the hour's rollup is the sum of its minutes: research on h100-shared was busy
    // 5 × 48 s + 5 × 24 s = 360 GPU-seconds of 600 allocated
    let hour: (i64, i64, i64, i32) = sqlx::query_as(
        "select allocated_gpu_microseconds, busy_gpu_microseconds, observed_gpu_microseconds, minutes
         from usage_rollups where grain = 'hour' and namespace = 'team-research' and flavor = 'h100-shared'",
    )
    .fetch_one(&pool)
    .await
    .expect("hour rollup");
    assert_eq!(hour, (600_000_000, 360_000_000, 600_000_000, 10));
    let day_busy: i64 = sqlx::query_scalar(
        "select busy_gpu_microseconds from usage_rollups
         where grain = 'day' and namespace = 'team-research' and flavor = 'h100-shared'",
    )
    .fetch_one(&pool)
    .await
    .expect("day rollup");
    assert_eq!(day_busy, 360_000_000);
    let day_tokens: (i64, i64) = sqlx::query_as(
        "select prompt_tokens, generation_tokens from usage_token_rollups where grain = 'day'",
    )
    .fetch_one(&pool)
    .await
    .expect("token rollup");
    assert_eq!(day_tokens, (6_000, 1_200));

    // the minutes live in the month's partition
    let partition: String =
        sqlx::query_scalar("select tableoid::regclass::text from usage_minutes limit 1")
            .fetch_one(&pool)
            .await
            .expect("partition");
    assert!(partition.starts_with("usage_minutes_20"), "{partition}");
    let health = usage::health(&pool, &Usage::off()).await.expect("health");
    // the queue no team owns is listed for someone to claim; the unassigned GPU is no one's
    assert_eq!(health.unattributed, vec!["clusterqueue/ghost".to_owned()]);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn prometheus_stopped_mid_ingest_leaves_a_gap_that_is_backfilled_once(pool: PgPool) {
    fleet(&pool, true).await;
    let t0 = t0();
    let dir = scratch("restart");
    backfill(&dir, &controlled(t0));
    // the very first run finds no Prometheus: every source's first window is a gap, and the
    // watermark holds its start (not a `now - backfill` that moves on)
    let down = Usage::new(
        backend::usage::prom::Prometheus::new(&backend::usage::prom::PromSettings {
            url: "http://127.0.0.1:1".to_owned(),
            timeout: Duration::from_secs(5),
            ..Default::default()
        })
        .expect("settings"),
        IngestSettings {
            backfill: Duration::from_millis((now_ms() - t0) as u64),
            ..IngestSettings::default()
        },
    );
    assert_eq!(
        usage::run_once(&pool, &down).await.expect("run"),
        Some(false)
    );
    let health = usage::health(&pool, &down).await.expect("health");
    assert_eq!(health.open_gaps.len(), 3, "{health:?}");
    for source in &health.sources {
        assert_eq!(
            source.watermark.as_deref(),
            Some(shared::common::utc::format_rfc3339(t0).as_str())
        );
    }
    let mut prom = PromServer::start(&dir, &[]).await;
    let first = Window::new(t0, t0 + 5 * MINUTE_MS).expect("window");
    let second = Window::new(t0 + 5 * MINUTE_MS, t0 + 10 * MINUTE_MS).expect("window");
    let client = prom.client();
    for source in Source::ALL {
        usage::ingest(&pool, &client, &settings(4), source, first)
            .await
            .expect("first half");
    }
    prom.stop();
    let err = usage::ingest(&pool, &client, &settings(4), Source::Dcgm, second)
        .await
        .expect_err("Prometheus is down");
    assert!(
        matches!(err, IngestError::Prometheus(PromError::Unreachable { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("cannot be reached"), "{err}");
    // nothing of the failed window is stored, the watermark waits at its start, the gap is known
    let stored: i64 = sqlx::query_scalar(
        "select count(*) from usage_minutes where minute >= to_timestamp($1::bigint / 1000) and busy_gpu_microseconds is not null",
    )
    .bind(second.from_ms)
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!(stored, 0);
    let health = usage::health(&pool, &Usage::off()).await.expect("health");
    let dcgm = health
        .sources
        .iter()
        .find(|s| s.source == "dcgm")
        .expect("dcgm");
    assert_eq!(
        dcgm.watermark.as_deref(),
        Some(shared::common::utc::format_rfc3339(second.from_ms).as_str())
    );
    assert!(
        dcgm.last_error
            .as_deref()
            .unwrap_or_default()
            .contains("cannot be reached"),
        "{dcgm:?}"
    );
    // the first run's gaps are still open (the watermark has not passed them), and the
    // failed window's is one more
    assert_eq!(health.open_gaps.len(), 4, "{health:?}");
    assert!(
        health
            .open_gaps
            .iter()
            .any(|g| g.source == "dcgm"
                && g.from == shared::common::utc::format_rfc3339(second.from_ms)),
        "{health:?}"
    );

    // Prometheus is back (on another port): the continuous ingest resumes from each watermark
    // up to now and backfills the gap; nothing is counted twice
    let prom = PromServer::start(&dir, &[]).await;
    let usage = Usage::new(
        prom.client(),
        IngestSettings {
            backfill: Duration::from_millis((now_ms() - t0) as u64),
            shards: 4,
            ..IngestSettings::default()
        },
    );
    assert_eq!(
        usage::run_once(&pool, &usage).await.expect("run"),
        Some(true)
    );
    // (it also read minutes 10 and 11, the data's tail past the ten minutes worked out here)
    let first_ten = |rows: BTreeMap<Key, Row>| -> BTreeMap<Key, Row> {
        rows.into_iter().filter(|(k, _)| k.0 < 10).collect()
    };
    assert_eq!(first_ten(minute_rows(&pool, t0).await), expected_rows());
    let tokens: BTreeMap<_, _> = token_rows(&pool, t0)
        .await
        .into_iter()
        .filter(|(k, _)| k.0 < 10)
        .collect();
    assert_eq!(tokens, expected_tokens());
    let health = usage::health(&pool, &usage).await.expect("health");
    assert!(health.open_gaps.is_empty(), "{health:?}");
    for source in &health.sources {
        assert!(source.last_error.is_none(), "{source:?}");
        assert!(
            source.lag_seconds.is_some_and(|lag| lag < 10 * 60),
            "{source:?}"
        );
    }
    // a second run finds nothing new to do and changes nothing
    assert_eq!(
        usage::run_once(&pool, &usage).await.expect("run"),
        Some(true)
    );
    assert_eq!(first_ten(minute_rows(&pool, t0).await), expected_rows());
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn bad_configuration_gives_a_clear_message_and_no_rows(pool: PgPool) {
    fleet(&pool, false).await;
    let t0 = t0();
    let window = Window::new(t0, t0 + 5 * MINUTE_MS).expect("window");

    // nothing listens there
    let nowhere = backend::usage::prom::Prometheus::new(&backend::usage::prom::PromSettings {
        url: "http://127.0.0.1:1".to_owned(),
        timeout: Duration::from_secs(5),
        ..Default::default()
    })
    .expect("settings");
    let err = usage::ingest(&pool, &nowhere, &settings(1), Source::Kueue, window)
        .await
        .expect_err("unreachable");
    assert!(
        err.to_string()
            .contains("http://127.0.0.1:1 cannot be reached"),
        "{err}"
    );
    assert!(err.to_string().to_lowercase().contains("refused"), "{err}");

    // Prometheus behind basic auth, asked with the wrong password
    let dir = scratch("auth");
    let owner = dcgm(
        "0",
        "GPU-e4ee0000-0000-0000-0000-000000000000",
        "node-a",
        "NVIDIA H100 80GB HBM3",
        &[],
    );
    let mut points = Vec::new();
    for k in 0..20 {
        let ts = t0 + k * 15 * SEC;
        // a GPU with no namespace label (dcgm-exporter without --kubernetes) …
        points.push(at("DCGM_FI_DEV_GPU_UTIL", &owner, ts, 90));
        // … while Kueue says research holds it
        points.push(point(
            "kueue_cluster_queue_resource_usage",
            &[
                ("cluster_queue", "research"),
                ("flavor", "h100-shared"),
                ("resource", "nvidia.com/gpu"),
            ],
            ts,
            1,
        ));
    }
    // later, with Kueue's series gone: kube-state-metrics' requests of a running pod (2 GPUs)
    // and of a finished one (its Running series reads 0)
    for k in 0..4 {
        let ts = t0 + 40 * MINUTE_MS + k * 15 * SEC;
        for (pod, running) in [("serve-1", 1), ("done-0", 0)] {
            points.push(point(
                "kube_pod_container_resource_requests",
                &[
                    ("namespace", "team-search"),
                    ("pod", pod),
                    ("container", "main"),
                    ("resource", "nvidia_com_gpu"),
                    ("unit", "integer"),
                ],
                ts,
                2,
            ));
            points.push(point(
                "kube_pod_status_phase",
                &[
                    ("namespace", "team-search"),
                    ("pod", pod),
                    ("phase", "Running"),
                ],
                ts,
                running,
            ));
        }
    }
    backfill(&dir, &points);
    // bcrypt of "right-password" (cost 4), made once with Python's bcrypt for this fixture
    std::fs::write(
        dir.join("web.yml"),
        "basic_auth_users:\n  gpufleet: $2b$04$RvydhyEws5ayn0L3PU6OCemNmqIPJ9gwSZ6LiETYEm5CxlcGW5z3O\n",
    )
    .expect("web config");
    let web = format!("--web.config.file={}", dir.join("web.yml").display());
    let prom = PromServer::start(&dir, &[web.as_str()]).await;
    let wrong = prom.client_with(|s| s.basic_auth = Some("gpufleet:wrong-password".to_owned()));
    let err = usage::ingest(&pool, &wrong, &settings(1), Source::Kueue, window)
        .await
        .expect_err("wrong password");
    assert!(
        matches!(
            err,
            IngestError::Prometheus(PromError::Refused { status: 401 })
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("GPUFLEET_PROMETHEUS_BASIC_AUTH"),
        "{err}"
    );
    let rows: i64 = sqlx::query_scalar("select count(*) from usage_minutes")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(rows, 0, "a refused window stores nothing");

    // the right password: Kueue's allocation lands; DCGM's series carry no namespace while
    // Kueue reports GPUs allocated, so the DCGM window is refused with what to change
    let right = prom.client_with(|s| s.basic_auth = Some("gpufleet:right-password".to_owned()));
    usage::ingest(&pool, &right, &settings(1), Source::Kueue, window)
        .await
        .expect("kueue");
    let err = usage::ingest(&pool, &right, &settings(1), Source::Dcgm, window)
        .await
        .expect_err("no namespace label");
    assert!(matches!(err, IngestError::Config(_)), "{err}");
    assert!(err.to_string().contains("--kubernetes"), "{err}");
    let busy: i64 = sqlx::query_scalar(
        "select count(*) from usage_minutes where busy_gpu_microseconds is not null",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!(busy, 0);
    let health = usage::health(&pool, &Usage::off()).await.expect("health");
    let gaps: Vec<(&str, &str)> = health
        .open_gaps
        .iter()
        .map(|g| (g.source.as_str(), g.error.as_str()))
        .collect();
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert_eq!(gaps[0].0, "dcgm");
    assert!(gaps[0].1.contains("--kubernetes"), "{gaps:?}");

    // Kueue without enableClusterQueueResources: no series → said, and no allocation claimed
    let empty = Window::new(t0 + 30 * MINUTE_MS, t0 + 31 * MINUTE_MS).expect("window");
    let landed = usage::ingest(&pool, &right, &settings(1), Source::Kueue, empty)
        .await
        .expect("an empty window");
    assert_eq!(landed.rows, 0);
    assert!(
        landed
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("enableClusterQueueResources"),
        "{landed:?}"
    );
    let health = usage::health(&pool, &Usage::off()).await.expect("health");
    let kueue = health
        .sources
        .iter()
        .find(|s| s.source == "kueue")
        .expect("kueue");
    assert!(
        kueue
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("not zero"),
        "{kueue:?}"
    );

    // … and where kube-state-metrics has the pods' GPU requests, they stand in: 2 GPUs of the
    // running pod for the minute (the finished pod's are not counted), flavor unknown
    let fallback = Window::new(t0 + 40 * MINUTE_MS, t0 + 41 * MINUTE_MS).expect("window");
    let landed = usage::ingest(&pool, &right, &settings(1), Source::Kueue, fallback)
        .await
        .expect("fallback window");
    assert!(
        landed
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("kube-state-metrics"),
        "{landed:?}"
    );
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        "select namespace, flavor, allocated_gpu_microseconds from usage_minutes
         where minute = to_timestamp($1::bigint / 1000)",
    )
    .bind(fallback.from_ms)
    .fetch_all(&pool)
    .await
    .expect("rows");
    assert_eq!(
        rows,
        vec![("team-search".to_owned(), String::new(), 2 * GPU_MIN)]
    );
}

/// NVML's readings off a real H200 at duty cycles 0, 25, 50, 75, 100 and 0%, one phase per
/// minute (the readings unchanged, their spacing stretched from 1 s to 2 s).
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_real_h200_trace_gives_its_duty_cycles(pool: PgPool) {
    fleet(&pool, false).await;
    let t0 = t0();
    let csv = include_str!("../fixtures/h200-nvml-trace/util_trace.csv");
    let phases = ["idle", "duty25", "duty50", "duty75", "full", "idle_after"];
    let labels = dcgm(
        "0",
        "GPU-82d0b494-c749-c9ff-1f40-5f515fdc8df0",
        "h200-probe",
        "NVIDIA H200",
        &[],
    );
    let mut points = Vec::new();
    let mut readings: BTreeMap<usize, (f64, Vec<i64>)> = BTreeMap::new();
    for line in csv.lines().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        let phase = phases
            .iter()
            .position(|p| *p == fields[1])
            .expect("a known phase");
        let duty: f64 = fields[2].parse().expect("duty");
        let util: i64 = fields[3].parse().expect("util");
        let entry = readings.entry(phase).or_insert((duty, Vec::new()));
        let i = entry.1.len() as i64;
        entry.1.push(util);
        points.push(at(
            "DCGM_FI_DEV_GPU_UTIL",
            &labels,
            t0 + phase as i64 * MINUTE_MS + i * 2 * SEC,
            util,
        ));
    }
    let dir = scratch("h200");
    backfill(&dir, &points);
    let prom = PromServer::start(&dir, &[]).await;
    let window = Window::new(t0, t0 + 6 * MINUTE_MS).expect("window");
    usage::ingest(&pool, &prom.client(), &settings(16), Source::Dcgm, window)
        .await
        .expect("ingest");
    let rows = minute_rows(&pool, t0).await;
    assert_eq!(rows.len(), 6);
    for (phase, (duty, utils)) in &readings {
        let row = rows
            .get(&(
                *phase as i64,
                String::new(),
                String::new(),
                "h200-train".to_owned(),
            ))
            .unwrap_or_else(|| panic!("minute {phase}: {rows:?}"));
        // the readings' mean: Σ% / n of a GPU-minute = Σ × 600,000 / n µs, half up
        let sum: i64 = utils.iter().sum();
        let n = utils.len() as i64;
        let mean_us = (sum * 600_000 * 2 + n) / (2 * n);
        assert_eq!(row.1, Some(mean_us), "{}", phases[*phase]);
        assert_eq!(row.2, Some(GPU_MIN));
        // and the world: within 5 points of the duty cycle the load ran at (NVML itself read
        // 23.6, 47.4, 71.1 and 96.1% for 25, 50, 75 and 100%)
        let busy_share = mean_us as f64 / GPU_MIN as f64;
        assert!(
            (busy_share - duty).abs() < 0.05,
            "{}: {busy_share} vs {duty}",
            phases[*phase]
        );
    }
}

/// The demo's own history (what `./dev run` seeds) through promtool, Prometheus and the ingest,
/// with every GPU under quota (research all 96 H200s and half of the 64 shared H100s, search
/// the other half, the 32 RTX GPUs and the MIG node's 56 instances, one cohort): the MIG
/// node's 56 `1g.10gb` instances count a seventh of an H100 each. At 04:00 UTC traffic is 0
/// and the serving team holds 25% of them (14 = 2 GPUs), at 16:00 it is 1 and it holds 85%
/// (47.6 → 48 = 6 6/7 GPUs), each instance 15% + 60% × traffic busy, ±4 points.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_demo_history_counts_mig_instances_at_their_share(pool: PgPool) {
    fleet(&pool, false).await;
    let (pools, mut teams) = usage::demo::fleet(&pool).await.expect("demo fleet");
    let gpus = shared::quota::QuotaLine::nvidia_gpus;
    let mig = shared::quota::QuotaLine {
        resource: "nvidia.com/mig-1g.10gb".to_owned(),
        ..gpus("h100-mig", 56)
    };
    for (team, lines) in teams.iter_mut().zip([
        vec![gpus("h200-train", 96), gpus("h100-shared", 32)],
        vec![gpus("h100-shared", 32), gpus("rtx-inference", 32), mig],
    ]) {
        team.approved = vec![shared::quota::QuotaSpec {
            lines,
            ..shared::quota::QuotaSpec::blank(&[], shared::common::day::Day::of_unix_seconds(0))
        }];
    }
    // a day whose 16:00 is at least four hours old
    let day = (now_ms() - 20 * HOUR_MS).div_euclid(24 * HOUR_MS) * 24 * HOUR_MS;
    let dir = scratch("demo");
    let mut windows = Vec::new();
    for hour in [4, 16] {
        let from = day + hour * HOUR_MS;
        let file = dir.join(format!("demo-{hour}.om"));
        let mut out = std::fs::File::create(&file).expect("history file");
        usage::demo::write_history(
            &mut out,
            &pools,
            &teams,
            from,
            from + 2 * MINUTE_MS,
            15 * SEC,
        )
        .expect("history");
        crate::common::prometheus::backfill_file(&dir, &file);
        windows.push(Window::new(from, from + 2 * MINUTE_MS).expect("window"));
    }
    let prom = PromServer::start(&dir, &[]).await;
    for window in &windows {
        ingest_all(&pool, &prom.client(), 16, *window).await;
    }
    let rows = minute_rows(&pool, day).await;
    let mig = |minute: i64, ns: &str| {
        rows.get(&(minute, ns.to_owned(), String::new(), "h100-mig".to_owned()))
            .copied()
            .unwrap_or_else(|| panic!("minute {minute}, {ns:?}: {rows:?}"))
    };
    // (held instances, busy share low, high); 48/7 GPU-min = 411,428,571.43 µs → half up
    for (hour, held_us, idle_us, low, high) in [
        (4, 2 * GPU_MIN, 6 * GPU_MIN, 0.11, 0.19),
        (16, 411_428_571, 68_571_429, 0.71, 0.79),
    ] {
        for m in 0..2 {
            let minute = hour * 60 + m;
            let (allocated, busy, observed, fb) = mig(minute, "team-search");
            assert_eq!(allocated, Some(held_us), "{hour}:0{m} allocated");
            assert_eq!(observed, Some(held_us), "{hour}:0{m} observed");
            let busy = busy.expect("busy") as f64 / held_us as f64;
            assert!((low..high).contains(&busy), "{hour}:0{m} busy {busy}");
            assert!(fb.expect("framebuffer") > 0);
            // the instances nobody holds: observed, idle, allocated to nobody
            let (allocated, busy, observed, _) = mig(minute, "");
            assert_eq!((allocated, busy, observed), (None, Some(0), Some(idle_us)));
            // research's queue lists the MIG flavor at nominal 0 (as the console writes every
            // ClusterQueue) and holds none of it
            let (allocated, busy, observed, _) = mig(minute, "team-research");
            assert_eq!((allocated, busy, observed), (Some(0), None, None));
        }
    }
    // Borrowing and lending on the shared H100s, whose nominal quota is half each (32): at
    // 04:00 training holds round(0.7 × 64) = 45 (13 borrowed) and serving round(0.15 × 64) = 10
    // (22 unused, 13 of it lent); at 16:00 training holds round(0.1 × 64) = 6 (26 unused) and
    // serving round(0.75 × 64) = 48 (16 borrowed, all of it lent by training).
    let lending: Vec<(i64, String, i64, i64, i64)> = sqlx::query_as(
        "select (extract(epoch from minute) * 1000)::bigint, namespace, nominal_gpu_microseconds,
                borrowed_gpu_microseconds, lent_gpu_microseconds
         from usage_minutes where flavor = 'h100-shared' and namespace <> ''
           and nominal_gpu_microseconds is not null order by 1, 2",
    )
    .fetch_all(&pool)
    .await
    .expect("lending rows");
    let mut want = Vec::new();
    for (hour, research, search) in [(4, (13, 0), (0, 13)), (16, (0, 16), (16, 0))] {
        for m in 0..2 {
            let at = day + hour * HOUR_MS + m * MINUTE_MS;
            for (ns, (borrowed, lent)) in [("team-research", research), ("team-search", search)] {
                want.push((
                    at,
                    ns.to_owned(),
                    32 * GPU_MIN,
                    borrowed * GPU_MIN,
                    lent * GPU_MIN,
                ));
            }
        }
    }
    assert_eq!(lending, want);
    // a queue with quota of a flavor it does not use is using none of it, not unknown
    let unknown: i64 = sqlx::query_scalar(
        "select count(*) from usage_minutes
         where nominal_gpu_microseconds is not null and allocated_gpu_microseconds is null",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!(unknown, 0);

    // the small model serves tokens too, at its steady 2 requests a second: a whole minute
    // (four 15 s increases, the samples in (m, m + 60 s]) 2 × 60 × 250 = 30,000 prompt and
    // 2 × 60 × 80 = 9,600 generated tokens, 2 × 60 × 0.02 = 2.4 s of prefill and 2 × 60 × 0.6
    // = 72 s of decode; the window's second minute has three (the history's last sample is at
    // its :45), three quarters of that (so the cost per million tokens shows the model)
    let tokens = token_rows(&pool, day).await;
    for hour in [4, 16] {
        for (m, quarters) in [(0, 4), (1, 3)] {
            let key = (
                hour * 60 + m,
                "team-search".to_owned(),
                "llama-3.2-1b-instruct".to_owned(),
            );
            let whole = [30_000, 9_600, 2_400_000, 72_000_000].map(|v| v * quarters / 4);
            assert_eq!(
                tokens.get(&key),
                Some(&(whole[0], whole[1], whole[2], whole[3])),
                "{key:?}"
            );
        }
    }

    // the noisy-neighbour view of the day: the small model on the MIG node's first instance
    // serves a steady 2 requests a second, its six co-tenants (the GPU's other instances) busy
    // with traffic; its time to first token slows with them, so it is flagged; the big models
    // on whole GPUs have no co-tenant
    let day = shared::common::day::Day::of_unix_seconds(day / 1000).to_string();
    let period = shared::chargeback::StatementQuery {
        from: Some(day.clone()),
        to: Some(day),
        ..Default::default()
    }
    .checked()
    .expect("period");
    let report = backend::chargeback::neighbour_report(&pool, &period, None)
        .await
        .expect("report");
    let small = report
        .services
        .iter()
        .find(|s| s.model == "llama-3.2-1b-instruct")
        .unwrap_or_else(|| panic!("{report:#?}"));
    assert_eq!(
        (small.sharing.as_slice(), small.max_neighbours),
        (&["mig".to_owned()][..], 6)
    );
    assert!(small.flagged, "{}", small.verdict);
    let big = report
        .services
        .iter()
        .find(|s| s.model == "llama-3.1-8b-instruct" && s.namespace == "team-search")
        .unwrap_or_else(|| panic!("{report:#?}"));
    assert_eq!(big.sharing, ["whole_gpu"]);
    assert!(big.verdict.starts_with("no co-tenant"), "{}", big.verdict);

    // Kueue's queue metrics of both ClusterQueues: at 16:00 (full traffic) 6 active and 1
    // inadmissible Workloads pending, at 04:00 none; research (the first) admits one a
    // minute
    let queues = usage::db::queue_window(&pool, period.from, period.to)
        .await
        .expect("queues");
    let seen: Vec<(&str, Option<i64>)> = queues
        .iter()
        .map(|q| (q.cluster_queue.as_str(), q.pending_peak))
        .collect();
    assert_eq!(seen, [("research", Some(7)), ("search", Some(7))]);
    assert!(queues[0].admitted >= 1, "{queues:?}");
}

fn gpufleet(pool: &PgPool, prometheus: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(args)
        .env("DATABASE_URL", crate::common::database_url(pool))
        .env("GPUFLEET_PROMETHEUS_URL", prometheus)
        .env("RUST_LOG", "error")
        .output()
        .expect("run gpufleet")
}

/// `gpufleet usage ingest` and `usage status`, as an operator runs them for a backfill.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_cli_ingests_a_window_and_reports_the_state(pool: PgPool) {
    fleet(&pool, true).await;
    let t0 = t0();
    let dir = scratch("cli");
    backfill(&dir, &controlled(t0));
    let prom = PromServer::start(&dir, &[]).await;
    let (from, to) = (
        shared::common::utc::format_rfc3339(t0),
        shared::common::utc::format_rfc3339(t0 + 10 * MINUTE_MS),
    );

    // bad input: exit status 2, the flag and what is wrong
    for (args, said) in [
        (
            vec!["--from", "yesterday", "--to", to.as_str()],
            "--from \"yesterday\" is not an RFC 3339 time",
        ),
        (
            vec!["--from", "2026-12-01T00:00:30Z", "--to", to.as_str()],
            "is not on a whole minute",
        ),
        (
            vec!["--from", to.as_str(), "--to", from.as_str()],
            "must be after --from",
        ),
        (
            vec![
                "--from",
                from.as_str(),
                "--to",
                to.as_str(),
                "--source",
                "nvml",
            ],
            "kueue, dcgm or vllm",
        ),
    ] {
        let mut all = vec!["usage", "ingest"];
        all.extend(args);
        let out = gpufleet(&pool, &prom.url, &all);
        assert_eq!(out.status.code(), Some(2), "{all:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(said), "{all:?}: {stderr}");
    }

    let out = gpufleet(
        &pool,
        &prom.url,
        &["usage", "ingest", "--from", &from, "--to", &to],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // one window (ten minutes inside one hour) per source
    assert!(
        stdout.starts_with(&format!(
            "ingested {from} to {to} (10 minutes) from kueue, dcgm, vllm: 3 windows, "
        )),
        "{stdout}"
    );
    assert!(stdout.contains(" 0 failed"), "{stdout}");
    assert_eq!(minute_rows(&pool, t0).await, expected_rows());
    assert_eq!(token_rows(&pool, t0).await, expected_tokens());

    let status = gpufleet(&pool, &prom.url, &["usage", "status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success());
    for source in ["kueue", "dcgm", "vllm"] {
        assert!(text.contains(&format!("{source:<7} {to}")), "{text}");
    }
    assert!(text.contains("open gaps: none"), "{text}");
    assert!(text.contains("clusterqueue/ghost"), "{text}");

    // Prometheus gone: exit 1, every window named, recorded as gaps
    let out = gpufleet(
        &pool,
        "http://127.0.0.1:1",
        &[
            "usage", "ingest", "--from", &from, "--to", &to, "--source", "dcgm",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1 windows failed and are recorded as gaps"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "dcgm {from}: Prometheus at http://127.0.0.1:1 cannot be reached"
        )),
        "{stderr}"
    );
    // … and the rows it had stay as they were
    assert_eq!(minute_rows(&pool, t0).await, expected_rows());
    let json = gpufleet(&pool, &prom.url, &["usage", "status", "--format", "json"]);
    let health: shared::usage::UsageHealth =
        serde_json::from_slice(&json.stdout).expect("json status");
    assert_eq!(health.open_gaps.len(), 1);
    assert_eq!(health.open_gaps[0].source, "dcgm");
}

/// The live path: Prometheus scrapes a test exporter every second and stores its samples, 15 s
/// apart on the exporter's clock, and a whole minute of them is ingested: one H100 in
/// team-research at a constant 50% and 1,000 MiB, Kueue reporting it allocated. Four samples
/// land in the minute; it is 30 GPU-seconds busy of 60 allocated and observed.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_scraped_exporter_gives_the_same_figures(pool: PgPool) {
    fleet(&pool, false).await;
    let gpu = r#"gpu="0",UUID="GPU-f5ff0000-0000-0000-0000-000000000000",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-live",container="main",namespace="team-research",pod="train-live""#;
    let body = format!(
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{{{gpu}}} 50\n\
         # TYPE DCGM_FI_DEV_FB_USED gauge\nDCGM_FI_DEV_FB_USED{{{gpu}}} 1000\n\
         # TYPE kueue_cluster_queue_resource_usage gauge\n\
         kueue_cluster_queue_resource_usage{{cluster_queue=\"research\",cohort=\"gpufleet\",flavor=\"h100-shared\",resource=\"nvidia.com/gpu\"}} 1\n"
    );
    // a whole minute ten minutes ago, and the scrape after its end
    let minute = (now_ms() / MINUTE_MS - 10) * MINUTE_MS;
    let exporter =
        crate::common::prometheus::StampedExporter::start(minute, 15 * SEC, move |_| body.clone())
            .await;
    let dir = scratch("live");
    let prom = PromServer::scraping(&dir, &[], Some(&exporter.target)).await;
    exporter.run_until(minute + MINUTE_MS + 15 * SEC).await;
    let window = Window::new(minute, minute + MINUTE_MS).expect("window");
    for source in [Source::Kueue, Source::Dcgm] {
        usage::ingest(&pool, &prom.client(), &settings(16), source, window)
            .await
            .unwrap_or_else(|err| panic!("{}: {err}", source.name()));
    }
    let rows = minute_rows(&pool, minute).await;
    assert_eq!(
        rows,
        BTreeMap::from([(
            (
                0,
                "team-research".to_owned(),
                String::new(),
                "h100-shared".to_owned()
            ),
            (Some(GPU_MIN), Some(GPU_MIN / 2), Some(GPU_MIN), Some(1_000))
        )])
    );
}

/// Prometheus behind https with its own CA: read with GPUFLEET_PROMETHEUS_CA_FILE, refused
/// without it, and a CA file that holds no certificate is said before any call.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn https_with_a_private_ca(pool: PgPool) {
    fleet(&pool, true).await;
    let t0 = t0();
    let dir = scratch("tls");
    backfill(&dir, &controlled(t0));
    let web = crate::common::prometheus::tls_web_config(&dir);
    let prom = PromServer::start(&dir, &[web.as_str()]).await;
    assert!(prom.url.starts_with("https://"), "{}", prom.url);
    let window = Window::new(t0, t0 + 10 * MINUTE_MS).expect("window");
    ingest_all(&pool, &prom.client(), 16, window).await;
    assert_eq!(minute_rows(&pool, t0).await, expected_rows());

    let untrusted = prom.client_with(|s| s.ca_file = None);
    let err = usage::ingest(&pool, &untrusted, &settings(1), Source::Kueue, window)
        .await
        .expect_err("a certificate nobody vouches for");
    assert!(
        matches!(err, IngestError::Prometheus(PromError::Unreachable { .. })),
        "{err}"
    );
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );

    let not_pem = dir.join("not-a-ca.pem");
    std::fs::write(&not_pem, "hello").expect("write");
    let err = backend::usage::prom::Prometheus::new(&backend::usage::prom::PromSettings {
        url: prom.url.clone(),
        ca_file: Some(not_pem.clone()),
        timeout: Duration::from_secs(5),
        ..Default::default()
    })
    .expect_err("no certificate in it");
    assert!(
        err.contains("holds no certificate") && err.contains("not-a-ca.pem"),
        "{err}"
    );
}

/// Minute rows past the retention go a whole month at a time; their rollups stay.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn retention_drops_old_minute_months_and_keeps_rollups(pool: PgPool) {
    fleet(&pool, false).await;
    // 2026-06-15T10:00Z and 2026-11-20T10:00Z: one old month, one recent
    let (old, recent) = (
        shared::common::utc::parse_rfc3339("2026-06-15T10:00:00Z").expect("time"),
        shared::common::utc::parse_rfc3339("2026-11-20T10:00:00Z").expect("time"),
    );
    for at in [old, recent] {
        let window = Window::new(at, at + MINUTE_MS).expect("window");
        let rows = BTreeMap::from([(
            shared::usage::UsageKey {
                minute_ms: at,
                namespace: "team-research".to_owned(),
                cluster_queue: String::new(),
                flavor: "h100-shared".to_owned(),
            },
            GPU_MIN,
        )]);
        let mut tx = pool.begin().await.expect("tx");
        usage::db::write_allocation(&mut tx, window, &rows, &BTreeMap::new(), &BTreeMap::new())
            .await
            .expect("write");
        tx.commit().await.expect("commit");
    }
    // keep 90 days before 2026-12-02: June's minutes go (the partitions of the five minute
    // tables: usage, tokens, latency, pods, Kueue's queues)
    let cut = shared::common::utc::parse_rfc3339("2026-09-03T00:00:00Z").expect("time");
    assert_eq!(
        usage::db::drop_old_minutes(&pool, cut).await.expect("drop"),
        5
    );
    let minutes: Vec<i64> = sqlx::query_scalar(
        "select (extract(epoch from minute) * 1000)::bigint from usage_minutes order by 1",
    )
    .fetch_all(&pool)
    .await
    .expect("minutes");
    assert_eq!(minutes, vec![recent]);
    let hours: i64 = sqlx::query_scalar("select count(*) from usage_rollups where grain = 'hour'")
        .fetch_one(&pool)
        .await
        .expect("rollups");
    assert_eq!(hours, 2, "both hours' rollups stay");
    // a window past the retention is refused before anything is read or rewritten
    let nowhere = backend::usage::prom::Prometheus::new(&backend::usage::prom::PromSettings {
        url: "http://127.0.0.1:1".to_owned(),
        timeout: Duration::from_secs(5),
        ..Default::default()
    })
    .expect("settings");
    let window = Window::new(old, old + MINUTE_MS).expect("window");
    let err = usage::ingest(&pool, &nowhere, &settings(1), Source::Kueue, window)
        .await
        .expect_err("past the retention");
    assert!(
        err.to_string()
            .contains("older than the minute retention (90 days"),
        "{err}"
    );
    let hours: i64 = sqlx::query_scalar("select count(*) from usage_rollups where grain = 'hour'")
        .fetch_one(&pool)
        .await
        .expect("rollups");
    assert_eq!(hours, 2);
}

/// Twenty minutes from `t0` of two inference services and their co-tenants (DCGM every 15 s,
/// vLLM every minute at :30, one vLLM scrape before the window):
/// - GPU-a1 (H100 in MIG, flavor h100-mig): team-search's `vllm-llama-0` (model llama-8b) on
///   a 1g.10gb instance at 0.3 engine-active; team-research's `train-0` on a 3g.40gb instance
///   at 0.1 in minutes 0-9 and 0.9 in minutes 10-19;
/// - GPU-b2 (H100, flavor h100-shared, declared time-sliced): team-research's
///   `vllm-mistral-0` (model mistral-7b) and team-search's `etl-0`, the card 30% busy;
/// - llama's time to first token, per minute 30 requests: in minutes 0-9, 29 within 0.1 s and
///   1 within 0.25 s; in minutes 10-19, 10, 10 and 10 within 0.1, 0.25 and 0.5 s. Its queue
///   time, and mistral's, always within 10 ms; mistral's first token: 28 within 0.1 s, 2 within
///   0.25 s, every minute.
fn neighbours(t0: i64) -> Vec<Point> {
    let mut points = Vec::new();
    let h100 = "NVIDIA H100 80GB HBM3";
    let mig = |gi: &'static str, profile: &'static str, ns: &'static str, pod: &'static str| {
        dcgm(
            "0",
            "GPU-a1000000-0000-0000-0000-000000000001",
            "node-m",
            h100,
            &[
                ("GPU_I_PROFILE", profile),
                ("GPU_I_ID", gi),
                ("namespace", ns),
                ("pod", pod),
                ("container", "main"),
            ],
        )
    };
    let sliced = |ns: &'static str, pod: &'static str| {
        dcgm(
            "0",
            "GPU-b2000000-0000-0000-0000-000000000002",
            "node-s",
            h100,
            &[("namespace", ns), ("pod", pod), ("container", "main")],
        )
    };
    let llama = mig("1", "1g.10gb", "team-search", "vllm-llama-0");
    let train = mig("2", "3g.40gb", "team-research", "train-0");
    for minute in 0..20 {
        for s in [0, 15, 30, 45] {
            let t = t0 + minute * MINUTE_MS + s * SEC;
            points.push(at(GR_ENGINE, &llama, t, "0.3"));
            let busy = if minute < 10 { "0.1" } else { "0.9" };
            points.push(at(GR_ENGINE, &train, t, busy));
            for (ns, pod) in [
                ("team-research", "vllm-mistral-0"),
                ("team-search", "etl-0"),
            ] {
                points.push(at(UTIL, &sliced(ns, pod), t, 30));
            }
        }
    }
    let vllm = |ns: &str, pod: &str, model: &str, le: &str| {
        vec![
            ("namespace".to_owned(), ns.to_owned()),
            ("pod".to_owned(), pod.to_owned()),
            ("model_name".to_owned(), model.to_owned()),
            ("engine".to_owned(), "0".to_owned()),
            ("le".to_owned(), le.to_owned()),
        ]
    };
    // cumulative counts after each minute
    let (mut llama_ttft, mut mistral_ttft) = ([0i64; 4], [0i64; 4]);
    let mut queue = 0i64;
    for minute in -1..20i64 {
        if minute >= 0 {
            let add = if minute < 10 {
                [29, 30, 30, 30]
            } else {
                [10, 20, 30, 30]
            };
            for (c, a) in llama_ttft.iter_mut().zip(add) {
                *c += a;
            }
            for (c, a) in mistral_ttft.iter_mut().zip([28, 30, 30, 30]) {
                *c += a;
            }
            queue += 30;
        }
        let t = t0 + minute * MINUTE_MS + 30 * SEC;
        for (i, le) in ["0.1", "0.25", "0.5", "+Inf"].into_iter().enumerate() {
            let l = vllm("team-search", "vllm-llama-0", "llama-8b", le);
            points.push(at(TTFT, &l, t, llama_ttft[i]));
            let m = vllm("team-research", "vllm-mistral-0", "mistral-7b", le);
            points.push(at(TTFT, &m, t, mistral_ttft[i]));
        }
        for le in ["0.01", "+Inf"] {
            for (ns, pod, model) in [
                ("team-search", "vllm-llama-0", "llama-8b"),
                ("team-research", "vllm-mistral-0", "mistral-7b"),
            ] {
                points.push(at(QUEUE, &vllm(ns, pod, model, le), t, queue));
            }
        }
    }
    points
}

const GR_ENGINE: &str = "DCGM_FI_PROF_GR_ENGINE_ACTIVE";
const UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
const TTFT: &str = "vllm:time_to_first_token_seconds_bucket";
const QUEUE: &str = "vllm:request_queue_time_seconds_bucket";

/// Latency beside co-tenancy: ingested from a real Prometheus, read through the API for each
/// role and through the CLI, against hand-computed figures and Prometheus's own
/// `histogram_quantile`.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_service_slowed_by_its_neighbour_is_flagged(pool: PgPool) {
    use crate::common::{login, request, send, user};
    use axum::http::{Method, StatusCode};
    use shared::{accounts::Role, usage::neighbours::NeighbourReport};

    fleet(&pool, false).await;
    sqlx::query(
        r#"update flavors set settings = settings || '{"sharing": "time_slicing"}'
           where name = 'h100-shared'"#,
    )
    .execute(&pool)
    .await
    .expect("time-sliced flavor");
    let t0 = t0();
    let dir = scratch("neighbours");
    backfill(&dir, &neighbours(t0));
    let prom = PromServer::start(&dir, &[]).await;
    let window = Window::new(t0, t0 + 20 * MINUTE_MS).expect("window");
    ingest_all(&pool, &prom.client(), 16, window).await;

    // co-tenancy per minute, by hand: llama's neighbour is train's 3g (3/7 of a GPU) at 0.1
    // then 0.9: 0.1 × 3/7 × 60 s = 2.571429 s, 0.9 × … = 23.142857 s, of 25.714286 s;
    // train's is llama's 1g at 0.3: 0.3 × 1/7 × 60 s = 2.571429 s of 8.571429 s; the
    // time-sliced card's two pods see the card: 0.3 × 60 s of 60 s
    let pods: Vec<(i64, String, String, i32, i64, i64)> = sqlx::query_as(
        "select (extract(epoch from minute) * 1000)::bigint, pod, sharing, neighbours,
                neighbour_busy_gpu_microseconds, neighbour_observed_gpu_microseconds
         from usage_pod_minutes
         where minute in ('epoch'::timestamptz + $1 * interval '1 millisecond',
                          'epoch'::timestamptz + $2 * interval '1 millisecond')
         order by 1, 2",
    )
    .bind(t0)
    .bind(t0 + 10 * MINUTE_MS)
    .fetch_all(&pool)
    .await
    .expect("pod minutes");
    let row = |minute: i64, pod: &str, sharing: &str, busy: i64, observed: i64| {
        (
            t0 + minute * MINUTE_MS,
            pod.to_owned(),
            sharing.to_owned(),
            1,
            busy,
            observed,
        )
    };
    assert_eq!(
        pods,
        vec![
            row(0, "etl-0", "time_slicing", 18_000_000, GPU_MIN),
            row(0, "train-0", "mig", 2_571_429, 8_571_429),
            row(0, "vllm-llama-0", "mig", 2_571_429, 25_714_286),
            row(0, "vllm-mistral-0", "time_slicing", 18_000_000, GPU_MIN),
            row(10, "etl-0", "time_slicing", 18_000_000, GPU_MIN),
            row(10, "train-0", "mig", 2_571_429, 8_571_429),
            row(10, "vllm-llama-0", "mig", 23_142_857, 25_714_286),
            row(10, "vllm-mistral-0", "time_slicing", 18_000_000, GPU_MIN),
        ]
    );
    let (latency_rows, pod_rows): (i64, i64) = sqlx::query_as(
        "select (select count(*) from usage_latency_minutes), (select count(*) from usage_pod_minutes)",
    )
    .fetch_one(&pool)
    .await
    .expect("counts");
    // 2 services × 20 minutes; 4 pods × 20 minutes
    assert_eq!((latency_rows, pod_rows), (40, 80));

    let router = crate::common::router(pool.clone());
    user(&pool, "fin", &[Role::Finance], &[]).await;
    user(&pool, "res", &[Role::Requester], &["research"]).await;
    user(&pool, "nobody", &[Role::Requester], &[]).await;
    let day = shared::common::day::Day::of_unix_seconds(t0 / 1000);
    let uri = format!("/api/chargeback/neighbours?from={day}&to={day}");
    let finance = login(&router, "fin", crate::common::PASSWORD).await;
    let reply = send(&router, request(Method::GET, &uri, Some(&finance), None)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let report: NeighbourReport = reply.json();
    let service = |ns: &str| {
        report
            .services
            .iter()
            .find(|s| s.namespace == ns)
            .unwrap_or_else(|| panic!("{ns} in {report:#?}"))
    };
    let llama = service("team-search");
    assert_eq!(
        (llama.model.as_str(), llama.team.as_deref(), llama.pods),
        ("llama-8b", Some("search"), 1)
    );
    assert_eq!(
        (llama.sharing.as_slice(), llama.max_neighbours),
        (&["mig".to_owned()][..], 1)
    );
    // quiet half (minutes 0-9, co-tenant at 10%): 300 requests, 290 within 0.1 s: p95 rank
    // 285 in the first bucket: 0.1 × 285 / 290 = 0.098276 s; p99 rank 297 in (0.1, 0.25]
    // holding 10: 0.1 + 0.15 × 7 / 10 = 0.205 s
    assert_eq!(llama.quiet.requests, 300);
    assert_eq!(llama.quiet.ttft_p95_microseconds, Some(98_276));
    assert_eq!(llama.quiet.ttft_p99_microseconds, Some(205_000));
    assert_eq!(llama.quiet.neighbour_load_pct(), 10);
    // busy half (minutes 10-19, 90%): 100, 200, 300 within 0.1, 0.25, 0.5 s: p95 rank 285:
    // 0.25 + 0.25 × 85 / 100 = 0.4625 s; p99 0.25 + 0.25 × 97 / 100 = 0.4925 s
    assert_eq!(llama.busy.ttft_p95_microseconds, Some(462_500));
    assert_eq!(llama.busy.ttft_p99_microseconds, Some(492_500));
    assert_eq!(llama.busy.neighbour_load_pct(), 90);
    // queue time: every request within 10 ms: p95 = 0.01 × 0.95
    assert_eq!(llama.busy.queue_p95_microseconds, Some(9_500));
    // all twenty minutes: 390, 500, 600 within 0.1, 0.25, 0.5 s: p95 rank 570:
    // 0.25 + 0.25 × 70 / 100 = 0.425 s
    assert_eq!(llama.overall.requests, 600);
    assert_eq!(llama.overall.ttft_p95_microseconds, Some(425_000));
    assert!(llama.flagged, "{}", llama.verdict);
    assert!(
        llama
            .verdict
            .contains("time to first token p95 98.3 ms → 462.5 ms")
            && llama.verdict.contains("10% → 90%")
            && llama.verdict.contains("30.00 → 30.00 per minute"),
        "{}",
        llama.verdict
    );
    let mistral = service("team-research");
    assert_eq!(mistral.sharing, ["time_slicing"]);
    assert!(!mistral.flagged);
    assert!(mistral.verdict.contains("30% → 30%"), "{}", mistral.verdict);

    // Prometheus's own histogram_quantile over the same increases agrees
    let quantile = |q: &str, offset: &str, at_ms: i64| {
        let expr = format!(
            r#"histogram_quantile({q}, sum by (le) ({TTFT}{{namespace="team-search"}} - {TTFT}{{namespace="team-search"}} offset {offset}))"#
        );
        let url = prom.url.clone();
        async move {
            let answer = crate::common::prometheus::instant(&url, &expr, at_ms).await;
            let value = answer["data"]["result"][0]["value"][1]
                .as_str()
                .unwrap_or_else(|| panic!("{answer}"))
                .parse::<f64>()
                .expect("a number");
            (value * 1e6).round() as i64
        }
    };
    let end_of_quiet = t0 + 9 * MINUTE_MS + 30 * SEC;
    let end = t0 + 19 * MINUTE_MS + 30 * SEC;
    assert_eq!(quantile("0.95", "10m", end_of_quiet).await, 98_276);
    assert_eq!(quantile("0.99", "10m", end_of_quiet).await, 205_000);
    assert_eq!(quantile("0.95", "10m", end).await, 462_500);
    assert_eq!(quantile("0.95", "20m", end).await, 425_000);

    // a requester sees their own team's services only; one without a team, none
    let res = login(&router, "res", crate::common::PASSWORD).await;
    let reply = send(&router, request(Method::GET, &uri, Some(&res), None)).await;
    let own: NeighbourReport = reply.json();
    let namespaces: Vec<&str> = own.services.iter().map(|s| s.namespace.as_str()).collect();
    assert_eq!(namespaces, ["team-research"]);
    let nobody = login(&router, "nobody", crate::common::PASSWORD).await;
    let reply = send(&router, request(Method::GET, &uri, Some(&nobody), None)).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text());
    // a period too long, a bad date: clear errors
    let long = "/api/chargeback/neighbours?from=2026-01-01&to=2026-01-08";
    let reply = send(&router, request(Method::GET, long, Some(&finance), None)).await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.text()
    );
    assert!(reply.text().contains("at most 7"), "{}", reply.text());
    let bad = "/api/chargeback/neighbours?from=soon&to=2026-03-01";
    let reply = send(&router, request(Method::GET, bad, Some(&finance), None)).await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.text()
    );

    // the CLI prints the same report
    let out = gpufleet(
        &pool,
        &prom.url,
        &[
            "chargeback",
            "neighbours",
            "--from",
            &day.to_string(),
            "--to",
            &day.to_string(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: NeighbourReport = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(printed, report);
}

/// Kueue's queue metrics for ClusterQueue `search` over 20 minutes, scraped every 15 s: one
/// admission a minute waiting 30 s in minutes 0-9, then two a minute waiting 300 s and 2,000 s
/// (each at second 20 of its minute); 3 active and 1 inadmissible Workloads pending, then 7
/// and 1; evictions by reason in minutes 3, 12 and 15.
fn queue_points(t0: i64) -> Vec<Point> {
    const BOUNDS: [&str; 15] = [
        "1", "2.5", "5", "10", "20", "40", "80", "160", "320", "640", "1280", "2560", "5120",
        "10240", "+Inf",
    ];
    // (second of the window it was admitted at, seconds it waited)
    let admissions: Vec<(i64, f64)> = (0..20)
        .flat_map(|m: i64| {
            let at = m * 60 + 20;
            if m < 10 {
                vec![(at, 30.0)]
            } else {
                vec![(at, 300.0), (at, 2_000.0)]
            }
        })
        .collect();
    let mut points = Vec::new();
    for tick in -4..80 {
        let second = tick * 15;
        let t = t0 + second * SEC;
        let cq = [("cluster_queue", "search")];
        for le in BOUNDS {
            let bound: f64 = le.parse().unwrap_or(f64::INFINITY);
            let n = admissions
                .iter()
                .filter(|(at, waited)| *at <= second && *waited <= bound)
                .count();
            points.push(point(
                "kueue_admission_wait_time_seconds_bucket",
                &[("cluster_queue", "search"), ("le", le)],
                t,
                n,
            ));
        }
        let active = if second < 600 { 3 } else { 7 };
        points.push(point(
            "kueue_pending_workloads",
            &[cq[0], ("status", "active")],
            t,
            active,
        ));
        points.push(point(
            "kueue_pending_workloads",
            &[cq[0], ("status", "inadmissible")],
            t,
            1,
        ));
        let preempted = [12 * 60, 15 * 60]
            .iter()
            .filter(|at| **at <= second)
            .count();
        let timed_out = usize::from(3 * 60 <= second);
        points.push(point(
            "kueue_evicted_workloads_total",
            &[cq[0], ("reason", "Preempted")],
            t,
            preempted,
        ));
        points.push(point(
            "kueue_evicted_workloads_total",
            &[cq[0], ("reason", "PodsReadyTimeout")],
            t,
            timed_out,
        ));
    }
    points
}

/// Kueue's queue metrics ingested per minute and read back per ClusterQueue through the API:
/// 30 admissions, cumulative 10, 20, 30 within 40, 320, 2,560 s. By hand, as
/// histogram_quantile interpolates: p50 at rank 15 in (160 s, 320 s] holding 10 above 10:
/// 160 + 160 × 5 / 10 = 240 s; p95 at rank 28.5 in (1,280 s, 2,560 s]: 1,280 + 1,280 × 8.5 /
/// 10 = 2,368 s; and Prometheus's own histogram_quantile over the same increases agrees.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn kueues_queue_metrics_give_the_waits_histogram_quantile_gives(pool: PgPool) {
    use crate::common::{login, request, send, user};
    use axum::http::{Method, StatusCode};
    use shared::{accounts::Role, usage::queues::QueueReport};

    fleet(&pool, false).await;
    let t0 = t0();
    let dir = scratch("queues");
    backfill(&dir, &queue_points(t0));
    let prom = PromServer::start(&dir, &[]).await;
    let window = Window::new(t0, t0 + 20 * MINUTE_MS).expect("window");
    usage::ingest(&pool, &prom.client(), &settings(16), Source::Kueue, window)
        .await
        .expect("the Kueue window");
    let minutes: i64 = sqlx::query_scalar("select count(*) from usage_queue_minutes")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(minutes, 20);

    let router = crate::common::router(pool.clone());
    user(&pool, "fin", &[Role::Finance], &[]).await;
    user(&pool, "res", &[Role::Requester], &["research"]).await;
    let day = shared::common::day::Day::of_unix_seconds(t0 / 1000);
    let uri = format!("/api/usage/queues?from={day}&to={day}");
    let finance = login(&router, "fin", crate::common::PASSWORD).await;
    let reply = send(&router, request(Method::GET, &uri, Some(&finance), None)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let report: QueueReport = reply.json();
    assert_eq!(report.queues.len(), 1);
    let search = &report.queues[0];
    assert_eq!(
        (search.cluster_queue.as_str(), search.team.as_deref()),
        ("search", Some("search"))
    );
    assert_eq!(search.admitted, 30);
    assert_eq!(search.wait_p50_microseconds, Some(240_000_000));
    assert_eq!(search.wait_p95_microseconds, Some(2_368_000_000));
    assert_eq!(search.pending_peak, Some(8));
    assert_eq!(
        search.evicted,
        BTreeMap::from([
            ("PodsReadyTimeout".to_owned(), 1),
            ("Preempted".to_owned(), 2)
        ])
    );

    // Prometheus's own histogram_quantile over the window's increases (last sample at 19:45,
    // the one before the window at -0:15)
    let end = t0 + 19 * MINUTE_MS + 45 * SEC;
    for (q, want) in [("0.5", 240.0), ("0.95", 2_368.0)] {
        let b = "kueue_admission_wait_time_seconds_bucket";
        let expr = format!(r#"histogram_quantile({q}, sum by (le) ({b} - {b} offset 20m))"#);
        let answer = crate::common::prometheus::instant(&prom.url, &expr, end).await;
        let value: f64 = answer["data"]["result"][0]["value"][1]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .parse()
            .expect("a number");
        assert!((value - want).abs() < 1e-9, "{q}: {value}");
    }

    // a requester is not shown every queue; a window that is not one is refused
    let res = login(&router, "res", crate::common::PASSWORD).await;
    let reply = send(&router, request(Method::GET, &uri, Some(&res), None)).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    let bad = format!("/api/usage/queues?from={day}&to={}", day.plus(-1));
    let reply = send(&router, request(Method::GET, &bad, Some(&finance), None)).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
}

/// A counter scraped every minute over two days A and B, as (time, value): 1,000 at A 00:00,
/// then +1 a minute, but +40 at B 00:00 (counted up to midnight: day A's), a restart at
/// B 00:00:30 (5: its increase is 5), +4 at E 00:00 (the end, day B's) and +1,000 at E 00:01
/// (after it). By hand: day A 1,439 + 40 = 1,479; day B 5 + 1,439 + 4 = 1,448; both 2,927 —
/// what `increase(x[1d])` at each midnight and `increase(x[2d])` at the end say.
fn midnight_counter(a: i64, scale: i64) -> Vec<(i64, i64)> {
    let mut samples = vec![(a, 1_000)];
    let mut value = 1_000;
    for minute in 1..=2 * 1440 + 1 {
        value += match minute {
            1440 => 40,
            2880 => 4,
            2881 => 1_000,
            _ => 1,
        };
        samples.push((a + minute * MINUTE_MS, value));
        if minute == 1440 {
            value = 5;
            samples.push((a + minute * MINUTE_MS + 30 * SEC, value));
        }
    }
    samples.into_iter().map(|(at, v)| (at, v * scale)).collect()
}

/// Issue 32, point 1: the increase over the 23:59 sample of one stamped 00:00 is the earlier
/// day's. Tokens, prefill and decode time, and a latency histogram's buckets, ingested hour by
/// hour as the continuous ingest does → each day's figures and the two days' statement equal
/// Prometheus's own `increase()` over the day and over the period.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_counters_increase_belongs_to_the_day_before_the_sample_that_shows_it(pool: PgPool) {
    use crate::common::{login, request, send, user};
    use axum::http::{Method, StatusCode};
    use shared::{accounts::Role, chargeback::Statement, common::day::Day};

    fleet(&pool, false).await;
    let today = now_ms() / (24 * HOUR_MS) * (24 * HOUR_MS);
    let a = today - 3 * 24 * HOUR_MS;
    let end = a + 2 * 24 * HOUR_MS;
    let vllm = [
        ("namespace", "team-search"),
        ("model_name", "llama-8b"),
        ("pod", "vllm-0"),
    ];
    let mut points = Vec::new();
    // tokens as counted; seconds with three decimals (×0.001); histogram counts
    for (metric, scale, extra) in [
        ("vllm:prompt_tokens_total", 1, None),
        ("vllm:generation_tokens_total", 2, None),
        ("vllm:request_prefill_time_seconds_sum", 1, None),
        ("vllm:request_decode_time_seconds_sum", 3, None),
        ("vllm:time_to_first_token_seconds_bucket", 1, Some("0.5")),
        ("vllm:time_to_first_token_seconds_bucket", 2, Some("+Inf")),
    ] {
        let mut labels = vllm.to_vec();
        labels.extend(extra.map(|le| ("le", le)));
        for (at, value) in midnight_counter(a, scale) {
            let text = if metric.ends_with("seconds_sum") {
                format!("{}.{:03}", value / 1000, value % 1000)
            } else {
                value.to_string()
            };
            points.push(point(metric, &labels, at, text));
        }
    }
    let dir = scratch("midnight");
    backfill(&dir, &points);
    let prom = PromServer::start(&dir, &[]).await;
    for hour in 0..48 {
        let from = a + hour * HOUR_MS;
        let window = Window::new(from, from + HOUR_MS).expect("window");
        usage::ingest(&pool, &prom.client(), &settings(1), Source::Vllm, window)
            .await
            .expect("an hour of vLLM");
    }

    // Prometheus's own increase() over each day and over both
    let increase = |expr: String, at_ms: i64| {
        let url = prom.url.clone();
        async move {
            let answer = crate::common::prometheus::instant(&url, &expr, at_ms).await;
            let text = answer["data"]["result"][0]["value"][1]
                .as_str()
                .unwrap_or_else(|| panic!("{expr}: {answer}"))
                .to_owned();
            // in millionths: Prometheus computes in floating point
            (text.parse::<f64>().expect("a number") * 1e6).round() as i64
        }
    };
    let days = [(a, "1d"), (a + 24 * HOUR_MS, "1d"), (a, "2d")];
    let mut prometheus = Vec::new();
    for (start, range) in days {
        let at = if range == "2d" {
            end
        } else {
            start + 24 * HOUR_MS
        };
        let mut figures = Vec::new();
        for expr in [
            "vllm:prompt_tokens_total",
            "vllm:generation_tokens_total",
            "vllm:request_prefill_time_seconds_sum",
            "vllm:request_decode_time_seconds_sum",
            r#"vllm:time_to_first_token_seconds_bucket{le="0.5"}"#,
            r#"vllm:time_to_first_token_seconds_bucket{le="+Inf"}"#,
        ] {
            figures.push(increase(format!("increase({expr}[{range}])"), at).await);
        }
        prometheus.push(figures);
    }
    // by hand: 1,479, 1,448 and 2,927 of each series' scale (seconds in thousandths), in
    // millionths
    let million = 1_000_000;
    assert_eq!(
        prometheus,
        [1_479, 1_448, 2_927].map(|n| vec![
            n * million,
            2 * n * million,
            n * 1_000,
            3 * n * 1_000,
            n * million,
            2 * n * million
        ])
    );

    // what gpufleet stored, per day: tokens, prefill and decode µs, ttft buckets
    let stored: Vec<(i64, i64, i64, i64, i64, i64, i64)> = sqlx::query_as(
        "with t as (
             select date_trunc('day', minute) as day, sum(prompt_tokens)::bigint as p,
                    sum(generation_tokens)::bigint as g, sum(prefill_microseconds)::bigint as pf,
                    sum(decode_microseconds)::bigint as dc
             from usage_token_minutes group by 1),
         l as (
             select date_trunc('day', minute) as day, sum(ttft_counts[1])::bigint as le,
                    sum(ttft_observations)::bigint as inf
             from usage_latency_minutes group by 1)
         select (extract(epoch from t.day) * 1000)::bigint, p, g, pf, dc, le, inf
         from t join l using (day) order by 1",
    )
    .fetch_all(&pool)
    .await
    .expect("stored days");
    let per_day = |n: i64| (n, 2 * n, n * 1000, 3 * n * 1000, n, 2 * n);
    let want: Vec<_> = [(a, 1_479), (a + 24 * HOUR_MS, 1_448)]
        .map(|(day, n)| {
            let (p, g, pf, dc, le, inf) = per_day(n);
            (day, p, g, pf, dc, le, inf)
        })
        .to_vec();
    assert_eq!(stored, want);
    // the increase shown at 00:00 is counted in the earlier day's last minute
    let last_minute: i64 = sqlx::query_scalar(
        "select prompt_tokens from usage_token_minutes
         where (extract(epoch from minute) * 1000)::bigint = $1",
    )
    .bind(a + 24 * HOUR_MS - MINUTE_MS)
    .fetch_one(&pool)
    .await
    .expect("23:59");
    assert_eq!(last_minute, 40);

    // the two days' statement, each day's and the whole period's, as finance reads it
    let router = crate::common::router(pool.clone());
    user(&pool, "fin", &[Role::Finance], &[]).await;
    let finance = login(&router, "fin", crate::common::PASSWORD).await;
    let (first, last) = (
        Day::of_unix_seconds(a / 1000),
        Day::of_unix_seconds((end - 1) / 1000),
    );
    let uri = format!("/api/chargeback/statement?from={first}&to={last}&by=day");
    let reply = send(&router, request(Method::GET, &uri, Some(&finance), None)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let statement: Statement = reply.json();
    let tokens = |teams: &[shared::chargeback::TeamLine]| {
        let search = teams.iter().find(|t| t.team == "search").expect("search");
        (search.prompt_tokens, search.generation_tokens)
    };
    assert_eq!(tokens(&statement.teams), (2_927, 5_854));
    let daily: Vec<_> = statement.days.iter().map(|d| tokens(&d.teams)).collect();
    assert_eq!(daily, [(1_479, 2_958), (1_448, 2_896)]);
}

/// Issue 32, point 2: three hours of one node (`node-m`) in flavor `h100-shared`, scraped every
/// 30 s: GPUs 0 and 1 whole, research's, 50% busy; GPU 2 whole and search's, 100% busy, in
/// hour 0, then split into seven `1g.10gb` instances, all search's, at 0.7 engine-active in
/// hours 1-2. Kueue reports research 2 `nvidia.com/gpu`, search 1 `nvidia.com/gpu` then 7
/// `nvidia.com/mig-1g.10gb`, all on `h100-shared` (one ResourceFlavor covering both resources).
/// The demo's `h100-mig` flavor (the same model, split) is priced at $20.00 so a misplaced
/// instance shows in the cost. By hand, at h100-shared's $8.60 a GPU-hour:
/// - research: allocated 2 × 3 = 6 GPU-h, busy 3, observed all: $51.60 by allocation, $25.80 by use;
/// - search: allocated 1 + 2 × 7 × 1/7 = 3 GPU-h, busy 1 + 2 × 7 × 0.7 × 1/7 = 2.4, observed all:
///   $25.80 by allocation, $20.64 by use.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn mig_instances_inside_a_flavor_of_whole_gpus_are_priced_and_observed_there(pool: PgPool) {
    use crate::common::{login, request, send, user};
    use axum::http::{Method, StatusCode};
    use shared::{accounts::Role, chargeback::Statement, common::day::Day};

    fleet(&pool, false).await;
    backend::chargeback::db::set_rate(&pool, "h100-mig", Day::of_unix_seconds(0), 2_000, None)
        .await
        .expect("a rate")
        .expect("the flavor");
    let t0 = (now_ms() / HOUR_MS - 4) * HOUR_MS;
    let h100 = "NVIDIA H100 80GB HBM3";
    let uuid = |gpu: i64| format!("GPU-m{gpu}000000-0000-0000-0000-000000000000");
    let owned = |ns: &str, pod: &str| vec![("namespace", ns.to_owned()), ("pod", pod.to_owned())];
    let device = |gpu: i64, extra: Vec<(&str, String)>| {
        let extra: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
        dcgm(&gpu.to_string(), &uuid(gpu), "node-m", h100, &extra)
    };
    let kueue = |cq: &str, resource: &str| {
        vec![
            ("cluster_queue".to_owned(), cq.to_owned()),
            ("cohort".to_owned(), "gpufleet".to_owned()),
            ("flavor".to_owned(), "h100-shared".to_owned()),
            ("resource".to_owned(), resource.to_owned()),
        ]
    };
    let mut points = Vec::new();
    for k in 0..360 {
        let ts = t0 + k * 30 * SEC;
        let split = k >= 120;
        for gpu in [0, 1] {
            let labels = device(gpu, owned("team-research", &format!("train-{gpu}")));
            points.push(at("DCGM_FI_DEV_GPU_UTIL", &labels, ts, 50));
        }
        if split {
            for instance in 0..7 {
                let mut extra = owned("team-search", &format!("small-{instance}"));
                extra.push(("GPU_I_PROFILE", "1g.10gb".to_owned()));
                extra.push(("GPU_I_ID", (7 + instance).to_string()));
                points.push(at(
                    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                    &device(2, extra),
                    ts,
                    "0.7",
                ));
            }
        } else {
            let labels = device(2, owned("team-search", "serve-0"));
            points.push(at("DCGM_FI_DEV_GPU_UTIL", &labels, ts, 100));
        }
        let usage = "kueue_cluster_queue_resource_usage";
        points.push(at(usage, &kueue("research", "nvidia.com/gpu"), ts, 2));
        points.push(at(
            usage,
            &kueue("search", "nvidia.com/gpu"),
            ts,
            u8::from(!split),
        ));
        let mig = if split { 7 } else { 0 };
        points.push(at(
            usage,
            &kueue("search", "nvidia.com/mig-1g.10gb"),
            ts,
            mig,
        ));
    }
    let dir = scratch("mixed-mig");
    backfill(&dir, &points);
    let prom = PromServer::start(&dir, &[]).await;
    for hour in 0..3 {
        let window = Window::new(t0 + hour * HOUR_MS, t0 + (hour + 1) * HOUR_MS).expect("window");
        for source in [Source::Kueue, Source::Dcgm] {
            usage::ingest(&pool, &prom.client(), &settings(16), source, window)
                .await
                .unwrap_or_else(|err| panic!("{}: {err}", source.name()));
        }
    }
    let flavors: Vec<String> =
        sqlx::query_scalar("select distinct flavor from usage_minutes order by 1")
            .fetch_all(&pool)
            .await
            .expect("flavors");
    assert_eq!(flavors, ["h100-shared"]);

    let router = crate::common::router(pool.clone());
    user(&pool, "fin", &[Role::Finance], &[]).await;
    let finance = login(&router, "fin", crate::common::PASSWORD).await;
    let (first, last) = (
        Day::of_unix_seconds(t0 / 1000),
        Day::of_unix_seconds((t0 + 3 * HOUR_MS - 1) / 1000),
    );
    let uri = format!("/api/chargeback/statement?from={first}&to={last}");
    let reply = send(&router, request(Method::GET, &uri, Some(&finance), None)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let statement: Statement = reply.json();
    let hours = |h: i128| h * 3_600_000_000 / 10;
    let figures: Vec<_> = ["research", "search"]
        .iter()
        .map(|name| {
            let t = statement
                .teams
                .iter()
                .find(|t| t.team == *name)
                .expect("team");
            (
                t.allocated_gpu_hours.microseconds(),
                t.busy_gpu_hours.microseconds(),
                t.unobserved_allocated_gpu_hours.microseconds(),
                t.cost_by_allocation_cents,
                t.cost_by_use_cents,
            )
        })
        .collect();
    // hours in tenths: 6.0, 3.0 and 3.0, 2.4
    assert_eq!(
        figures,
        [
            (hours(60), hours(30), 0, 5_160, 2_580),
            (hours(30), hours(24), 0, 2_580, 2_064),
        ]
    );
}
