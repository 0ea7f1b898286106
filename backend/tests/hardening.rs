//! No request can take the console down: work over the cost limits is refused at once, a
//! full pool refuses rather than queues, `/api/health` answers while the pools are busy, an
//! abandoned evaluation stops, the log-in throttle holds under concurrency, and SIGTERM ends
//! the real server even while it computes.

mod common;

use std::time::{Duration, Instant};

use axum::{
    Router,
    http::{Method, StatusCode, header},
};
use backend::{config::HttpSettings, work::Work};
use common::{Session, login, request, request_from, router_on, send, try_login, user};
use shared::{
    ApiError, ErrorCode,
    auth::Role,
    scenario::{Scenario, Team, bench_scenario},
};
use sqlx::PgPool;

/// The benchmark scenario with four times its teams: a week that takes seconds to simulate.
fn heavy_scenario() -> Scenario {
    let mut s = bench_scenario();
    let teams: Vec<Team> = s.teams.clone();
    s.teams = (0..4)
        .flat_map(|copy| {
            teams.iter().map(move |t| Team {
                name: format!("{}-{copy}", t.name),
                ..t.clone()
            })
        })
        .collect();
    s
}

fn evaluate(session: &Session, scenario: &Scenario) -> axum::http::Request<axum::body::Body> {
    request(
        Method::POST,
        "/api/plan/evaluate",
        Some(session),
        Some(serde_json::to_value(scenario).expect("json")),
    )
}

async fn planner(pool: &PgPool, router: &Router) -> Session {
    user(pool, "alex", &[Role::Approver], &[]).await;
    login(router, "alex", common::PASSWORD).await
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_replay_over_the_cost_limit_is_refused_within_a_second(pool: PgPool) {
    let router = common::router(pool.clone());
    let session = planner(&pool, &router).await;
    // The probe that exhausted memory: 10,000 nodes, a one-line pod list, inflate 10.
    let mut nodes = String::from("sn,cpu_milli,memory_mib,gpu,model\n");
    for i in 0..10_000 {
        nodes.push_str(&format!("node-{i},96000,786432,8,V100M32\n"));
    }
    let pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,1,10\n";
    let boundary = "gpufleet-hardening";
    let mut body = String::new();
    for (name, value) in [("nodes", nodes.as_str()), ("pods", pods), ("inflate", "10")] {
        body.push_str(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{name}.csv\"\r\n\r\n{value}\r\n"
        ));
    }
    body.push_str(&format!("--{boundary}--\r\n"));
    let mut upload = request(Method::POST, "/api/packing/replay", Some(&session), None);
    *upload.body_mut() = axum::body::Body::from(body);
    upload.headers_mut().insert(
        header::CONTENT_TYPE,
        format!("multipart/form-data; boundary={boundary}")
            .parse()
            .expect("header"),
    );
    let started = Instant::now();
    let reply = send(&router, upload).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.text()
    );
    let err: ApiError = reply.json();
    assert_eq!(err.fields[0].path, "inflate");
    assert!(
        err.fields[0].message.contains("at most 1000000 pods"),
        "{}",
        err.fields[0].message
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_full_pool_answers_503_and_health_keeps_answering(pool: PgPool) {
    let work = Work::new(1, 1, 2, 8);
    let router = router_on(pool.clone(), work.clone(), HttpSettings::default());
    let session = planner(&pool, &router).await;
    let heavy = heavy_scenario();
    // One runs, one waits.
    let mut running = Vec::new();
    for _ in 0..2 {
        let (router, request) = (router.clone(), evaluate(&session, &heavy));
        running.push(tokio::spawn(async move { send(&router, request).await }));
    }
    let started = Instant::now();
    while work.compute.running() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "nothing started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A third is refused at once, saying when to come back.
    let refused = send(&router, evaluate(&session, &heavy)).await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.text()
    );
    assert_eq!(
        refused
            .headers
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    assert_eq!(refused.json::<ApiError>().code, ErrorCode::Unavailable);
    // Health and light reads are not in the queue.
    for _ in 0..5 {
        let asked = Instant::now();
        let health = send(&router, request(Method::GET, "/api/health", None, None)).await;
        assert_eq!(health.status, StatusCode::OK);
        assert!(
            asked.elapsed() < Duration::from_secs(1),
            "{:?}",
            asked.elapsed()
        );
    }
    assert!(
        work.compute.running() > 0,
        "the heavy work is still running"
    );
    for task in running {
        task.abort();
    }
    // Abandoned, the work stops (the interrupt fires when the request is dropped).
    stops_within(&work, Duration::from_secs(2)).await;
}

/// Waits for the compute pool to be idle; fails if it is still computing after `limit`.
async fn stops_within(work: &Work, limit: Duration) {
    let since = Instant::now();
    while work.compute.running() > 0 {
        assert!(since.elapsed() < limit, "still computing after {limit:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_timed_out_evaluation_stops_computing(pool: PgPool) {
    let work = Work::new(1, 1, 2, 8);
    let settings = HttpSettings {
        request_timeout: Duration::from_millis(300),
        ..HttpSettings::default()
    };
    let router = router_on(pool.clone(), work.clone(), settings);
    let session = planner(&pool, &router).await;
    let reply = send(&router, evaluate(&session, &heavy_scenario())).await;
    assert_eq!(
        reply.status,
        StatusCode::REQUEST_TIMEOUT,
        "{}",
        reply.text()
    );
    // The week would take seconds more; stopped, it gives its core back at once.
    stops_within(&work, Duration::from_millis(500)).await;
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_throttle_holds_under_concurrent_attempts(pool: PgPool) {
    // A hashing pool wide enough that only the throttle limits.
    let router = router_on(
        pool.clone(),
        Work::new(1, 1, 4, 200),
        HttpSettings::default(),
    );
    user(&pool, "rita", &[Role::Requester], &[]).await;
    // 50 at once on one account, each from its own address: 5 are checked, 45 throttled.
    let wrong_passwords = |accounts: Vec<String>, addresses: Vec<String>| {
        let router = router.clone();
        async move {
            let attempts = accounts.into_iter().zip(addresses).map(|(who, from)| {
                let router = router.clone();
                tokio::spawn(
                    async move { try_login(&router, &who, "a wrong password", &from).await },
                )
            });
            let replies: Vec<common::Reply> = futures_util::future::join_all(attempts)
                .await
                .into_iter()
                .map(|r| r.expect("joined"))
                .collect();
            let count = |status| replies.iter().filter(|r| r.status == status).count();
            (
                count(StatusCode::UNAUTHORIZED),
                count(StatusCode::TOO_MANY_REQUESTS),
            )
        }
    };
    let checked = wrong_passwords(
        vec!["rita".to_owned(); 50],
        (0..50).map(|i| format!("10.3.0.{i}:1")).collect(),
    )
    .await;
    assert_eq!(checked, (5, 45));
    // 60 at once from one address, each on its own (unknown) account: 20 checked, 40 throttled.
    let checked = wrong_passwords(
        (0..60).map(|i| format!("nobody-{i}")).collect(),
        vec!["10.4.0.1:1".to_owned(); 60],
    )
    .await;
    assert_eq!(checked, (20, 40));
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn log_ins_beyond_the_hashing_pool_are_refused_not_queued(pool: PgPool) {
    let router = router_on(pool.clone(), Work::new(1, 1, 1, 2), HttpSettings::default());
    // One account each, so only the pool limits (attempts in flight count against an
    // account's throttle, as they must for the throttle to hold under concurrency).
    for i in 0..24 {
        user(&pool, &format!("user-{i}"), &[Role::Requester], &[]).await;
    }
    let attempts = (0..24).map(|i| {
        let router = router.clone();
        tokio::spawn(async move {
            let body =
                serde_json::json!({"username": format!("user-{i}"), "password": common::PASSWORD});
            send(
                &router,
                request_from(
                    Method::POST,
                    "/api/auth/login",
                    None,
                    Some(body),
                    &format!("10.5.0.{i}:1"),
                ),
            )
            .await
        })
    });
    let replies: Vec<common::Reply> = futures_util::future::join_all(attempts)
        .await
        .into_iter()
        .map(|r| r.expect("joined"))
        .collect();
    let ok = replies
        .iter()
        .filter(|r| r.status == StatusCode::OK)
        .count();
    let busy: Vec<&common::Reply> = replies
        .iter()
        .filter(|r| r.status == StatusCode::TOO_MANY_REQUESTS)
        .collect();
    assert_eq!(ok + busy.len(), replies.len(), "only 200 or 429");
    assert!(
        ok >= 1 && !busy.is_empty(),
        "{ok} in, {} refused",
        busy.len()
    );
    for reply in &busy {
        assert_eq!(
            reply.json::<ApiError>().message,
            "too many log-ins at once; try again in 1 second"
        );
    }
    // A refused log-in was not counted as a failure: each user still gets in.
    for i in 0..24 {
        login(&router, &format!("user-{i}"), common::PASSWORD).await;
    }
}

/// A minimal HTTP/1.1 exchange over loopback, for the real binary.
async fn http(addr: &str, request: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    response
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn sigterm_ends_the_server_while_it_computes(pool: PgPool) {
    user(&pool, "alex", &[Role::Approver], &[]).await;
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let addr = format!("127.0.0.1:{port}");
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(["serve", "--listen", &addr])
        .env("DATABASE_URL", common::database_url(&pool))
        .env("GPUFLEET_PUBLIC_DIR", common::public_fixture())
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .expect("start gpufleet serve");
    let up = Instant::now();
    while tokio::net::TcpStream::connect(&addr).await.is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(20),
            "the server did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let body = serde_json::json!({"username": "alex", "password": common::PASSWORD}).to_string();
    let answer = http(
        &addr,
        format!(
            "POST /api/auth/login HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
    .await;
    let cookie = answer
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_owned();
    let json = answer.split("\r\n\r\n").nth(1).expect("a body");
    let me: shared::auth::Me = serde_json::from_str(json).expect("me");
    // A week that takes seconds, left running.
    let scenario = serde_json::to_string(&heavy_scenario()).expect("json");
    let evaluate = format!(
        "POST /api/plan/evaluate HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nX-CSRF-Token: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{scenario}",
        me.csrf_token,
        scenario.len()
    );
    let in_flight = tokio::spawn({
        let addr = addr.clone();
        async move { http(&addr, evaluate).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = server.id().expect("a pid").to_string();
    let signalled = Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(15), server.wait())
        .await
        .expect("the server exited")
        .expect("status");
    // Well inside the 10-second limit: the running week saw its interrupt and stopped.
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "took {:?}",
        signalled.elapsed()
    );
    assert!(status.success(), "{status}");
    let answer = in_flight.await.expect("joined");
    assert!(
        answer.starts_with("HTTP/1.1 503"),
        "{}",
        &answer[..answer.len().min(300)]
    );
}
