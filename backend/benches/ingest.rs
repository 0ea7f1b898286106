//! Ingest benchmark: a simulated 10,000-GPU fleet (the demo generator over 1,250 nodes in three
//! pools, 50 teams) written for one hour at dcgm-exporter's default 30 s interval into a real
//! Prometheus (promtool), then ingested into a scratch database on `DATABASE_URL`'s server.
//! Prints the samples read from Prometheus per second, the minute rows written per second,
//! the hour's wall time per source, and one day's time projected from the hour (24 windows);
//! then a month's statement from the rollups, the same month as FOCUS rows and its budgets,
//! and a day's noisy-neighbour report.
//!
//! Run: `DATABASE_URL=postgres://…/postgres cargo bench -p gpufleet-backend --bench ingest`
//! (needs Debian's `prometheus` and `promtool`; takes a few minutes, most of it promtool).
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::{
    io::Write,
    net::TcpListener,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use backend::usage::{
    self, IngestSettings, Source,
    prom::{PromSettings, Prometheus},
};
use shared::{
    common::{
        day::Day,
        utc::{HOUR_MS, MINUTE_MS},
    },
    quota::{QuotaLine, QuotaSpec},
    usage::{
        Window,
        demo::{DemoPool, DemoTeam},
    },
};
use sqlx::{Connection, PgConnection, postgres::PgPoolOptions};

const TEAMS: usize = 50;

fn inventory() -> String {
    let mut yaml = String::from(
        "models:\n  - name: H100-SXM5-80GB\n    price_cents_per_gpu_hour: 860\n  - name: H200-SXM-141GB\n    price_cents_per_gpu_hour: 791\n  - name: RTX-PRO-6000-96GB\n    price_cents_per_gpu_hour: 414\n\
         flavors:\n  - name: h100-shared\n  - name: h200-train\n  - name: rtx-inference\npools:\n",
    );
    for (name, model, nodes) in [
        ("h100-shared", "H100-SXM5-80GB", 300),
        ("h200-train", "H200-SXM-141GB", 575),
        ("rtx-inference", "RTX-PRO-6000-96GB", 375),
    ] {
        yaml.push_str(&format!(
            "  - name: {name}\n    gpu_model: {model}\n    nodes: {nodes}\n    gpus_per_node: 8\n    flavor: {name}\n"
        ));
    }
    yaml.push_str("teams:\n");
    for t in 0..TEAMS {
        yaml.push_str(&format!(
            "  - name: team{t:02}\n    namespace: team-{t:02}\n    cost_centre: CC-{t:04}\n"
        ));
    }
    yaml
}

/// Every GPU under some team's quota, as a cluster in use would have it: the first team (the
/// demo's trainer) holds the training pool and half the shared one, the others (its servers)
/// the rest evenly; all in one cohort.
fn under_quota(pools: &[DemoPool], teams: &mut [DemoTeam]) {
    let servers = teams.len().saturating_sub(1).max(1) as i64;
    for (t, team) in teams.iter_mut().enumerate() {
        let lines = pools
            .iter()
            .map(|p| {
                let gpus = p.nodes * p.gpus_per_node;
                let trainer = if p.flavor.contains("train") {
                    gpus
                } else if p.flavor.contains("inference") {
                    0
                } else {
                    gpus / 2
                };
                let nominal = match t {
                    0 => trainer,
                    _ => (gpus - trainer) / servers,
                };
                QuotaLine::nvidia_gpus(&p.flavor, nominal)
            })
            .collect();
        team.cohort = Some("bench".to_owned());
        team.approved = vec![QuotaSpec {
            lines,
            ..QuotaSpec::blank(&[], Day::parse("2020-01-01").unwrap())
        }];
    }
}

#[tokio::main]
async fn main() {
    let base = std::env::var("DATABASE_URL").expect("DATABASE_URL (a PostgreSQL server URL)");
    let base = base
        .rsplit_once('/')
        .map_or(base.clone(), |(b, _)| b.to_owned());
    let scratch = format!("gpufleet_ingest_bench_{}", std::process::id());
    let mut admin = PgConnection::connect(&format!("{base}/postgres"))
        .await
        .unwrap();
    sqlx::query(&format!("create database {scratch}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(&format!("{base}/{scratch}"))
        .await
        .unwrap();
    backend::MIGRATOR.run(&pool).await.unwrap();
    let wanted = backend::fleet::inventory::parse("bench", &inventory()).unwrap();
    backend::fleet::inventory::apply(&pool, &wanted, backend::audit::Actor::Console, false)
        .await
        .unwrap();
    let (pools, mut teams): (Vec<DemoPool>, Vec<DemoTeam>) =
        backend::usage::demo::fleet(&pool).await.unwrap();
    under_quota(&pools, &mut teams);
    let gpus: i64 = pools.iter().map(|p| p.nodes * p.gpus_per_node).sum();

    // one hour, three hours ago, every 30 s
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let from = (now / HOUR_MS - 3) * HOUR_MS;
    let dir = std::env::temp_dir().join(format!("gpufleet-ingest-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let om = dir.join("fleet.om");
    let started = Instant::now();
    let written = {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&om).unwrap());
        let n = usage::demo::write_history(&mut out, &pools, &teams, from, from + HOUR_MS, 30_000)
            .unwrap();
        out.flush().unwrap();
        n
    };
    println!(
        "fleet: {gpus} GPUs, {} teams; wrote {written} samples of one hour in {:.1} s",
        teams.len(),
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let status = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&om)
        .arg(dir.join("data"))
        .stdout(Stdio::null())
        .status()
        .expect("promtool (Debian's prometheus package)");
    assert!(status.success());
    std::fs::remove_file(&om).unwrap();
    println!("promtool: {:.1} s", started.elapsed().as_secs_f64());

    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(dir.join("p.yml"), "global:\n  scrape_interval: 15s\n").unwrap();
    let mut prometheus = Command::new("prometheus")
        .arg(format!("--config.file={}", dir.join("p.yml").display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--storage.tsdb.retention.time=30d")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus");
    let prom = Prometheus::new(&PromSettings {
        url: format!("http://127.0.0.1:{port}"),
        timeout: Duration::from_secs(120),
        ..PromSettings::default()
    })
    .unwrap();
    let probe = Window::new(from, from + MINUTE_MS).unwrap();
    while prom.gauge_samples("up", probe).await.is_err() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let settings = IngestSettings::default();
    let window = Window::new(from, from + HOUR_MS).unwrap();
    let mut total = Duration::ZERO;
    for source in [Source::Kueue, Source::Dcgm, Source::Vllm] {
        let started = Instant::now();
        let landed = usage::ingest(&pool, &prom, &settings, source, window)
            .await
            .unwrap();
        let took = started.elapsed();
        total += took;
        println!(
            "{:<5}: one hour in {:>6.2} s: {:>9} samples ({:>9.0}/s read), {:>7} minute rows ({:>8.0}/s written)",
            source.name(),
            took.as_secs_f64(),
            landed.samples,
            landed.samples as f64 / took.as_secs_f64(),
            landed.rows,
            landed.rows as f64 / took.as_secs_f64(),
        );
    }
    println!(
        "one hour of {gpus} GPUs in {:.1} s; one day (24 such windows) ≈ {:.0} s",
        total.as_secs_f64(),
        24.0 * total.as_secs_f64()
    );

    let _ = prometheus.kill();
    let _ = prometheus.wait();

    // A month's statement for the same fleet from the day rollups: 30 days of every team on
    // every flavor (4,500 day rows), timed as the API builds it.
    sqlx::query(
        "insert into usage_rollups (grain, period, namespace, cluster_queue, flavor, team_id,
             allocated_gpu_microseconds, busy_gpu_microseconds, observed_gpu_microseconds,
             fb_used_mib_minutes, minutes)
         select 'day', d, t.namespace, '', f.name, t.id, 60 * 86400000000::bigint,
                45 * 86400000000::bigint, 58 * 86400000000::bigint, 0, 1440
         from generate_series('2026-11-01'::timestamptz, '2026-11-30', interval '1 day') d,
              teams t, flavors f
         on conflict do nothing",
    )
    .execute(&pool)
    .await
    .unwrap();
    let query = shared::chargeback::StatementQuery {
        from: Some("2026-11-01".into()),
        to: Some("2026-11-30".into()),
        by: Some("day".into()),
        ..Default::default()
    };
    let period = query.checked().unwrap();
    let mut times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let statement = backend::chargeback::build(&pool, &period).await.unwrap();
        times.push(started.elapsed());
        assert_eq!(statement.teams.len(), TEAMS);
    }
    times.sort();
    println!(
        "statement: November by day for {gpus} GPUs and {TEAMS} teams from the day rollups: median {:.0} ms, min {:.0} ms (5 runs)",
        times[2].as_secs_f64() * 1000.0,
        times[0].as_secs_f64() * 1000.0
    );

    // The same month as FinOps FOCUS rows (every team × flavor × day, with the idle shares),
    // written as the API streams them.
    let focus = shared::chargeback::StatementQuery {
        from: Some("2026-11-01".into()),
        to: Some("2026-11-30".into()),
        format: Some("focus".into()),
        ..Default::default()
    }
    .checked()
    .unwrap();
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..5 {
        let started = Instant::now();
        bytes = backend::chargeback::written(&pool, &focus)
            .await
            .unwrap()
            .len();
        times.push(started.elapsed());
    }
    times.sort();
    println!(
        "FOCUS export: November for {gpus} GPUs and {TEAMS} teams ({bytes} bytes): median {:.0} ms, min {:.0} ms (5 runs)",
        times[2].as_secs_f64() * 1000.0,
        times[0].as_secs_f64() * 1000.0
    );

    // The same month's budgets, every team's, read with their burn and forecast as of
    // November 20 (the month-to-date statement and each team's line).
    sqlx::query(
        "insert into budgets (team_id, month, limit_cents, basis, thresholds_pct)
         select id, '2026-11-01', 100000000, 'allocation', '{80,100}' from teams",
    )
    .execute(&pool)
    .await
    .unwrap();
    let nov_20 = shared::common::utc::parse_rfc3339("2026-11-20T00:00:00Z").unwrap();
    let month = shared::common::day::Day::parse("2026-11-01").unwrap();
    let mut times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let budgets = backend::chargeback::budget::read(&pool, month, nov_20)
            .await
            .unwrap();
        times.push(started.elapsed());
        assert_eq!(budgets.lines.len(), TEAMS);
    }
    times.sort();
    println!(
        "budgets: November's {TEAMS} budgets with burn and forecast for {gpus} GPUs: median {:.0} ms, min {:.0} ms (5 runs)",
        times[2].as_secs_f64() * 1000.0,
        times[0].as_secs_f64() * 1000.0
    );

    // The noisy-neighbour report of a day: 100 inference services of 2 pods each (144,000
    // latency rows, two histograms per service and minute), half of them on MIG with co-tenants
    // (144,000 pod rows), read and judged as the API does.
    for query in [
        "select usage_ensure_partitions('2026-11-10', '2026-11-11')",
        "insert into usage_latency_minutes (minute, namespace, model, pods,
             ttft_le_microseconds, ttft_counts, ttft_observations,
             queue_le_microseconds, queue_counts, queue_observations)
         select m, 'team-' || lpad((s % 50)::text, 2, '0'), 'model-' || s,
                array['pod-' || s || '-0', 'pod-' || s || '-1'],
                array[20000, 40000, 60000, 80000, 100000, 250000, 500000, 750000, 1000000, 2500000],
                array[20, 50, 80, 100, 110, 116, 120, 120, 120, 120], 120,
                array[300000, 500000, 800000, 1000000, 1500000],
                array[110, 116, 120, 120, 120], 120
         from generate_series('2026-11-10'::timestamptz, '2026-11-10 23:59', interval '1 minute') m,
              generate_series(0, 99) s",
        "insert into usage_pod_minutes (minute, namespace, pod, sharing, neighbours,
             neighbour_busy_gpu_microseconds, neighbour_observed_gpu_microseconds)
         select m, 'team-' || lpad((s % 50)::text, 2, '0'), 'pod-' || s || '-' || p, 'mig', 6,
                (extract(minute from m)::bigint * 428571), 25714286
         from generate_series('2026-11-10'::timestamptz, '2026-11-10 23:59', interval '1 minute') m,
              generate_series(0, 98, 2) s, generate_series(0, 1) p",
    ] {
        sqlx::query(query).execute(&pool).await.unwrap();
    }
    let day = shared::chargeback::StatementQuery {
        from: Some("2026-11-10".into()),
        to: Some("2026-11-10".into()),
        ..Default::default()
    }
    .checked()
    .unwrap();
    let mut times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let report = backend::chargeback::neighbour_report(&pool, &day, None)
            .await
            .unwrap();
        times.push(started.elapsed());
        assert_eq!(report.services.len(), 100);
    }
    times.sort();
    let started = Instant::now();
    let minutes = usage::db::served_minutes(&pool, 1_794_268_800_000, 1_794_355_200_000, None)
        .await
        .unwrap();
    let read = started.elapsed();
    let started = Instant::now();
    let report =
        shared::usage::neighbours::report(day.from, day.from, &minutes, &Default::default());
    let judged = started.elapsed();
    assert_eq!(report.services.len(), 100);
    println!(
        "noisy neighbours: a day of 100 services × 2 pods (144,000 latency and 144,000 pod rows): median {:.0} ms, min {:.0} ms (5 runs); of one run, reading the rows {:.0} ms, the report {:.0} ms",
        times[2].as_secs_f64() * 1000.0,
        times[0].as_secs_f64() * 1000.0,
        read.as_secs_f64() * 1000.0,
        judged.as_secs_f64() * 1000.0
    );

    pool.close().await;
    sqlx::query(&format!("drop database {scratch}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
