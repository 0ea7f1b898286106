//! Load benchmark, loopback only, bounded in count and time: the real router served on
//! 127.0.0.1 over a scratch database on `DATABASE_URL`'s server. Prints:
//! 1. log-ins per second with 32 clients logging in as fast as they can for 10 s (the hashing
//!    pool saturated), how many were refused (429), and the process's peak RSS;
//! 2. `/api/health` latency (p50, p99, max) over 10 s while 4 clients keep the compute pool
//!    full of week-long evaluations;
//! 3. the live view with 1,000 subscribers on `/api/usage/stream`: for each of 5 ingested
//!    minutes, the delay from its commit to each subscriber receiving it (p50, p99, max; the
//!    reader ticks every second) and the spread between the first and the last subscriber, and
//!    the process's RSS with them connected;
//! 4. a 10,000-team chargeback statement (finance's, by day over 40 days, and the total of
//!    200 days): its time and size, the process's peak RSS above idle, and `/api/health`
//!    latency meanwhile;
//! 5. 1,100 idle connections that send nothing: how many the server holds, whether
//!    `/api/health` still answers beside them, and how long until the header-read timeout
//!    closes them all;
//! 6. the process's RSS once every client is gone, against its peak.
//!
//! Run: `DATABASE_URL=postgres://…/postgres cargo bench -p gpufleet-backend --bench load`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use backend::{AppState, app, config::HttpSettings};
use shared::accounts::{NewUser, Role};
use sqlx::{Connection, PgConnection, postgres::PgPoolOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "../tests/common/teams.rs"]
mod teams;

const PASSWORD: &str = "a long load-test password";
const RUN: Duration = Duration::from_secs(10);

async fn http(addr: &str, request: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let status = response.get(9..12)?.parse().ok()?;
    Some((status, response))
}

fn post(addr: &str, path: &str, extra: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

/// A `/proc/self/status` figure in KiB (`VmRSS:`, `VmHWM:` the peak).
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let server_url =
        std::env::var("DATABASE_URL").expect("set DATABASE_URL to a PostgreSQL server");
    let scratch = format!("gpufleet_load_{}", std::process::id());
    let base = server_url
        .rsplit_once('/')
        .map_or(server_url.as_str(), |(b, _)| b)
        .to_owned();
    let mut admin = PgConnection::connect(&server_url).await.unwrap();
    sqlx::query(&format!("create database {scratch}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let pool = PgPoolOptions::new()
        .max_connections(20)
        .connect(&format!("{base}/{scratch}"))
        .await
        .unwrap();
    backend::MIGRATOR.run(&pool).await.unwrap();
    backend::fleet::load_demo(&pool).await.unwrap();
    // one user's 1,000 live views: the fan-out, not the per-user cap (8), is measured here
    let mut live = backend::usage::live::Live::new(Duration::from_secs(1));
    live.per_user = 1_000;
    let state = AppState::new(pool.clone()).with_live(Arc::new(live));
    let live = backend::usage::live::spawn(pool.clone(), state.live.clone());
    let work = state.work.clone();
    let new = NewUser {
        username: "load".into(),
        display_name: String::new(),
        password: PASSWORD.into(),
        roles: vec![Role::Approver],
        teams: vec![],
    };
    backend::accounts::insert_user(&pool, &work.hashing, &new)
        .await
        .unwrap();
    let router = app(state, &HttpSettings::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop_server, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(backend::serve(
        listener,
        router,
        async {
            let _ = stopped.await;
        },
        work.clone(),
        // Loopback stands for the bench's thousand clients: held to the cap, not to one
        // address's share of it.
        backend::Connections {
            shared_addresses: vec!["127.0.0.0/8".parse().unwrap()],
            ..backend::Connections::within(10_000, backend::server::raise_open_file_limit())
        },
    ));

    // 1. Log-ins at saturation.
    let login_body = serde_json::json!({"username": "load", "password": PASSWORD}).to_string();
    let (ok, refused, other) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let rss_before = rss_kib();
    let peak = Arc::new(AtomicU64::new(rss_before));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn({
        let (peak, done) = (Arc::clone(&peak), Arc::clone(&done));
        async move {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    });
    let started = Instant::now();
    let clients: Vec<_> = (0..32)
        .map(|_| {
            let (ok, refused, other) = (Arc::clone(&ok), Arc::clone(&refused), Arc::clone(&other));
            let request = post(&addr, "/api/auth/login", "", &login_body);
            let addr = addr.clone();
            tokio::spawn(async move {
                while started.elapsed() < RUN {
                    match http(&addr, &request).await {
                        Some((200, _)) => ok.fetch_add(1, Ordering::Relaxed),
                        Some((429, _)) => refused.fetch_add(1, Ordering::Relaxed),
                        _ => other.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    let seconds = started.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    sampler.await.unwrap();
    println!(
        "log-in: {:.1} log-ins/s at saturation (32 clients, {seconds:.1} s): {} signed in, {} refused 429 (pool full), {} other; RSS {} MiB before, peak {} MiB",
        ok.load(Ordering::Relaxed) as f64 / seconds,
        ok.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
        other.load(Ordering::Relaxed),
        rss_before / 1024,
        peak.load(Ordering::Relaxed) / 1024,
    );

    // 2. Health while planning saturates the compute pool.
    let (_, answer) = http(&addr, &post(&addr, "/api/auth/login", "", &login_body))
        .await
        .unwrap();
    let cookie = answer
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_owned();
    let me: shared::accounts::Me =
        serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let scenario = serde_json::to_string(&shared::planning::scenario::bench_scenario()).unwrap();
    let evaluate = post(
        &addr,
        "/api/plan/evaluate",
        &format!("Cookie: {cookie}\r\nX-CSRF-Token: {}\r\n", me.csrf_token),
        &scenario,
    );
    let (evaluated, busy) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let started = Instant::now();
    let planners: Vec<_> = (0..4)
        .map(|_| {
            let (evaluated, busy) = (Arc::clone(&evaluated), Arc::clone(&busy));
            let (addr, evaluate) = (addr.clone(), evaluate.clone());
            tokio::spawn(async move {
                while started.elapsed() < RUN {
                    match http(&addr, &evaluate).await {
                        Some((200, _)) => evaluated.fetch_add(1, Ordering::Relaxed),
                        _ => busy.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let health = format!("GET /api/health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut latencies = Vec::new();
    while started.elapsed() < RUN {
        let asked = Instant::now();
        let answered = http(&addr, &health).await;
        assert!(matches!(answered, Some((200, _))), "health failed");
        latencies.push(asked.elapsed().as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for planner in planners {
        planner.await.unwrap();
    }
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "health under planning load: {} requests, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; meanwhile {} evaluations of the 10,000-GPU benchmark week done, {} refused 503 (pool full)",
        latencies.len(),
        at(0.5),
        at(0.99),
        at(1.0),
        evaluated.load(Ordering::Relaxed),
        busy.load(Ordering::Relaxed),
    );

    // 3. The live view: 1,000 subscribers, 5 minutes ingested one by one.
    let subscribers = 1_000;
    let stream = format!(
        "GET /api/usage/stream HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n"
    );
    let rss_idle = rss_kib();
    let (tx, mut arrivals) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let mut readers = Vec::new();
    for _ in 0..subscribers {
        let (stream, addr, tx) = (stream.clone(), addr.clone(), tx.clone());
        readers.push(tokio::spawn(async move {
            let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
            socket.write_all(stream.as_bytes()).await.unwrap();
            let mut buffer = vec![0u8; 16 * 1024];
            let mut seen = String::new();
            loop {
                let n = match socket.read(&mut buffer).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                let at = Instant::now();
                seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
                while let Some(start) = seen.find("id: ") {
                    let rest = &seen[start + 4..];
                    let Some(end) = rest.find('\n') else { break };
                    let _ = tx.send((rest[..end].trim().to_owned(), at));
                    seen = rest[end..].to_owned();
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_connected = rss_kib();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let first = shared::common::utc::floor_minute(now_ms) - 30 * shared::common::utc::MINUTE_MS;
    let (mut lags, mut spreads) = (Vec::new(), Vec::new());
    for n in 0..5 {
        let minute = first + n * shared::common::utc::MINUTE_MS;
        let window =
            shared::usage::Window::new(minute, minute + shared::common::utc::MINUTE_MS).unwrap();
        let key = shared::usage::UsageKey {
            minute_ms: minute,
            namespace: "team-research".into(),
            cluster_queue: String::new(),
            flavor: "h100-shared".into(),
        };
        let devices = [(
            key,
            shared::usage::DeviceMinute {
                busy_gpu_us: 60_000_000,
                observed_gpu_us: 60_000_000,
                fb_used_mib: 0,
            },
        )]
        .into();
        backend::usage::db::store_window(
            &pool,
            window,
            &Default::default(),
            &Default::default(),
            &devices,
        )
        .await
        .unwrap();
        let committed = Instant::now();
        let id = minute.to_string();
        let mut got = Vec::new();
        let deadline = committed + Duration::from_secs(10);
        while got.len() < subscribers && Instant::now() < deadline {
            match tokio::time::timeout_at(deadline.into(), arrivals.recv()).await {
                Ok(Some((event, at))) if event == id => got.push(at),
                Ok(Some(_)) => {}
                _ => break,
            }
        }
        assert_eq!(got.len(), subscribers, "every subscriber got minute {n}");
        got.sort();
        lags.extend(
            got.iter()
                .map(|at| at.duration_since(committed).as_secs_f64() * 1000.0),
        );
        spreads.push(got[got.len() - 1].duration_since(got[0]).as_secs_f64() * 1000.0);
    }
    lags.sort_by(f64::total_cmp);
    let at = |q: f64| lags[((lags.len() - 1) as f64 * q).round() as usize];
    println!(
        "live view: {subscribers} subscribers, 5 minutes each: commit to delivery p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms (the reader ticks every 1 s); first to last subscriber at most {:.0} ms; RSS {} MiB idle, {} MiB with them connected",
        at(0.5),
        at(0.99),
        at(1.0),
        spreads.iter().copied().fold(0.0, f64::max),
        rss_idle / 1024,
        rss_connected / 1024,
    );
    for reader in readers {
        reader.abort();
    }
    live.abort();

    // 4. A 10,000-team statement, streamed, with health beside it.
    statements(&pool, &addr, &cookie).await;

    // 5. Idle sockets.
    idle_sockets(&addr).await;

    // 6. What the process keeps once every client is gone.
    tokio::time::sleep(Duration::from_secs(5)).await;
    println!(
        "RSS once every client is gone: {} MiB (peak {} MiB); MALLOC_ARENA_MAX={}",
        rss_kib() / 1024,
        status_kib("VmHWM:") / 1024,
        std::env::var("MALLOC_ARENA_MAX").unwrap_or_else(|_| "unset".into()),
    );

    let _ = stop_server.send(());
    server.await.unwrap().unwrap();
    pool.close().await;
    sqlx::query(&format!("drop database {scratch} with (force)"))
        .execute(&mut admin)
        .await
        .unwrap();
}

/// Reads a response to its end, keeping only its status and length.
async fn drain(addr: &str, request: &str) -> Option<(u16, u64)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut buffer = vec![0u8; 64 * 1024];
    let (mut total, mut status) = (0u64, None);
    loop {
        let n = stream.read(&mut buffer).await.ok()?;
        if n == 0 {
            return Some((status?, total));
        }
        if status.is_none() {
            status = std::str::from_utf8(buffer.get(9..12)?).ok()?.parse().ok();
        }
        total += n as u64;
    }
}

async fn statements(pool: &sqlx::PgPool, addr: &str, cookie: &str) {
    // 10,000 teams with the demo's two: at both of a statement's limits (10,000 × 40 days by
    // day = 400,000 lines; 10,000 × 200 days = 2,000,000 team-days)
    teams::many_teams(pool, 9_998, 200).await.unwrap();
    let health = format!("GET /api/health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    for query in [
        "from=2025-01-01&to=2025-02-09&by=day",
        "from=2025-01-01&to=2025-07-19",
    ] {
        let get = format!(
            "GET /api/chargeback/statement?{query} HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
        );
        let rss_idle = rss_kib();
        let peak = Arc::new(AtomicU64::new(rss_idle));
        let done = Arc::new(AtomicBool::new(false));
        let prober = tokio::spawn({
            let (peak, done, addr, health) = (
                Arc::clone(&peak),
                Arc::clone(&done),
                addr.to_owned(),
                health.clone(),
            );
            async move {
                let mut latencies = Vec::new();
                while !done.load(Ordering::Relaxed) {
                    peak.fetch_max(rss_kib(), Ordering::Relaxed);
                    let asked = Instant::now();
                    assert!(matches!(http(&addr, &health).await, Some((200, _))));
                    latencies.push(asked.elapsed().as_secs_f64() * 1000.0);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                latencies
            }
        });
        let started = Instant::now();
        let (status, bytes) = drain(addr, &get).await.unwrap();
        let seconds = started.elapsed().as_secs_f64();
        done.store(true, Ordering::Relaxed);
        let mut latencies = prober.await.unwrap();
        latencies.sort_by(f64::total_cmp);
        let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
        println!(
            "statement of 10,000 teams ({query}): HTTP {status}, {:.1} MB in {seconds:.1} s; RSS {} MiB idle, peak {} MiB (+{} MiB); health meanwhile p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} requests)",
            bytes as f64 / 1e6,
            rss_idle / 1024,
            peak.load(Ordering::Relaxed) / 1024,
            (peak.load(Ordering::Relaxed) - rss_idle) / 1024,
            at(0.5),
            at(0.99),
            at(1.0),
            latencies.len(),
        );
    }
}

async fn idle_sockets(addr: &str) {
    let mut idle = Vec::new();
    for _ in 0..1_100 {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(socket) => idle.push(socket),
            Err(_) => break,
        }
    }
    let opened = idle.len();
    let health = format!("GET /api/health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let asked = Instant::now();
    let answered = http(addr, &health).await;
    let health_ms = asked.elapsed().as_secs_f64() * 1000.0;
    let started = Instant::now();
    let mut closed = 0;
    for mut socket in idle {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0)) =
            tokio::time::timeout(Duration::from_secs(15), socket.read(&mut byte)).await
        {
            closed += 1;
        }
    }
    println!(
        "idle sockets: {opened} opened and held; /api/health beside them: {} in {health_ms:.1} ms; {closed} closed by the server within {:.1} s (header-read timeout 10 s)",
        answered.map_or("no answer".to_owned(), |(status, _)| format!(
            "HTTP {status}"
        )),
        started.elapsed().as_secs_f64(),
    );
}
