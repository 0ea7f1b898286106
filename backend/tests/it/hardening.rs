//! No request can take the console down: work over the cost limits is refused at once, a
//! full pool refuses rather than queues, `/api/health` answers while the pools are busy, an
//! abandoned evaluation stops, the log-in throttle holds under concurrency, and SIGTERM ends
//! the real server even while it computes.

use std::time::{Duration, Instant};

use crate::common::{Session, login, request, request_from, router_on, send, try_login, user};
use axum::{
    Router,
    http::{Method, StatusCode, header},
};
use backend::{config::HttpSettings, work::Work};
use http_body_util::BodyExt;
use shared::{
    ApiError, ErrorCode,
    accounts::Role,
    chargeback::{Statement, StatementQuery},
    planning::scenario::{Scenario, Team, bench_scenario},
};
use sqlx::PgPool;
use tower::ServiceExt;

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
    login(router, "alex", crate::common::PASSWORD).await
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_replay_over_the_cost_limit_is_refused_within_a_second(pool: PgPool) {
    let router = crate::common::router(pool.clone());
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
    let running = fill_pool(&pool, &work, &router).await;
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

/// One user's loop of heavy requests cannot take the whole pool: with one thread and one
/// waiting place, rita holds one (her second is 429, saying when to come back), and alex's
/// request takes the other and is served once hers is done (abandoned here).
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn one_user_holds_at_most_half_of_the_compute_pool(pool: PgPool) {
    let work = Work::new(1, 1, 2, 8);
    let router = router_on(pool.clone(), work.clone(), HttpSettings::default());
    let alex = planner(&pool, &router).await;
    user(&pool, "rita", &[Role::Approver], &[]).await;
    let rita = login(&router, "rita", crate::common::PASSWORD).await;
    let heavy = heavy_scenario();
    let first = tokio::spawn({
        let (router, request) = (router.clone(), evaluate(&rita, &heavy));
        async move { send(&router, request).await }
    });
    while work.compute.running() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let again = send(&router, evaluate(&rita, &heavy)).await;
    assert_eq!(
        again.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        again.text()
    );
    assert_eq!(
        again
            .headers
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let mut light = heavy_scenario();
    light.teams.truncate(1);
    let theirs = tokio::spawn({
        let (router, request) = (router.clone(), evaluate(&alex, &light));
        async move { send(&router, request).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    first.abort();
    let served = tokio::time::timeout(Duration::from_secs(60), theirs)
        .await
        .expect("alex's evaluation was served")
        .expect("joined");
    assert_eq!(served.status, StatusCode::OK, "{}", served.text());
}

/// Fills a compute pool of one thread and one waiting place with heavy evaluations of two
/// users (one may hold half the pool), one running and one waiting; their tasks, to abort.
async fn fill_pool(
    pool: &PgPool,
    work: &Work,
    router: &Router,
) -> Vec<tokio::task::JoinHandle<crate::common::Reply>> {
    let heavy = heavy_scenario();
    let mut running = Vec::new();
    for name in ["filler-1", "filler-2"] {
        user(pool, name, &[Role::Approver], &[]).await;
        let session = login(router, name, crate::common::PASSWORD).await;
        let (router, request) = (router.clone(), evaluate(&session, &heavy));
        running.push(tokio::spawn(async move { send(&router, request).await }));
        while work.compute.running() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
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
    running
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
            let replies: Vec<crate::common::Reply> = futures_util::future::join_all(attempts)
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
async fn a_right_password_is_not_told_locked_while_other_attempts_are_checked(pool: PgPool) {
    let router = crate::common::router(pool.clone());
    user(&pool, "rita", &[Role::Requester], &[]).await;
    // Attempts in flight (being checked) on Rita's account, from other addresses, `age` old.
    let in_flight = |n: i32, pending: bool, age_s: i32| {
        let pool = pool.clone();
        async move {
            sqlx::query("delete from login_failures")
                .execute(&pool)
                .await
                .expect("clear");
            sqlx::query(
                "insert into login_failures (username, address, pending, created_at)
                 select 'rita', '10.5.0.' || i, $2, now() - $3 * interval '1 second'
                 from generate_series(1, $1) i",
            )
            .bind(n)
            .bind(pending)
            .bind(age_s)
            .execute(&pool)
            .await
            .expect("attempts");
        }
    };
    let rita = || try_login(&router, "rita", crate::common::PASSWORD, "10.6.0.1:1");
    let retry_after = |reply: &crate::common::Reply| {
        reply
            .headers
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().expect("text").to_owned())
    };
    // Five being checked: not locked, so "try again in 1 second".
    in_flight(5, true, 0).await;
    let reply = rita().await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(retry_after(&reply).as_deref(), Some("1"));
    let err: ApiError = reply.json();
    assert!(err.message.contains("being checked"), "{}", err.message);
    // Five failed: locked for the window.
    in_flight(5, false, 0).await;
    let reply = rita().await;
    assert_eq!(retry_after(&reply).as_deref(), Some("900"));
    assert!(reply.json::<ApiError>().message.contains("15 minutes"));
    // Five left pending by a server that stopped a minute ago count as failures.
    in_flight(5, true, 120).await;
    assert_eq!(retry_after(&rita().await).as_deref(), Some("900"));
    // Four in flight: hers is checked and signed in; theirs stay, to settle as they end.
    in_flight(4, true, 0).await;
    assert_eq!(rita().await.status, StatusCode::OK);
    let left: i64 = sqlx::query_scalar("select count(*) from login_failures where pending")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(left, 4);
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
                serde_json::json!({"username": format!("user-{i}"), "password": crate::common::PASSWORD});
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
    let replies: Vec<crate::common::Reply> = futures_util::future::join_all(attempts)
        .await
        .into_iter()
        .map(|r| r.expect("joined"))
        .collect();
    let ok = replies
        .iter()
        .filter(|r| r.status == StatusCode::OK)
        .count();
    let busy: Vec<&crate::common::Reply> = replies
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
        login(&router, &format!("user-{i}"), crate::common::PASSWORD).await;
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
        .env("DATABASE_URL", crate::common::database_url(&pool))
        .env("GPUFLEET_PUBLIC_DIR", crate::common::public_fixture())
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
    let body =
        serde_json::json!({"username": "alex", "password": crate::common::PASSWORD}).to_string();
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
    let me: shared::accounts::Me = serde_json::from_str(json).expect("me");
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

/// The demo fleet and `teams` more teams with `days` of rollups (`crate::common::teams`).
async fn many_teams(pool: &PgPool, teams: i32, days: i32) {
    backend::fleet::load_demo(pool).await.expect("demo fleet");
    crate::common::teams::many_teams(pool, teams, days)
        .await
        .expect("teams and rollups");
}

fn statement_request(session: &Session, query: &str) -> axum::http::Request<axum::body::Body> {
    request(
        Method::GET,
        &format!("/api/chargeback/statement?{query}"),
        Some(session),
        None,
    )
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_statement_too_large_is_refused_before_any_work(pool: PgPool) {
    many_teams(&pool, 3_000, 0).await;
    user(&pool, "fiona", &[Role::Finance], &[]).await;
    let router = crate::common::router(pool.clone());
    let fiona = login(&router, "fiona", crate::common::PASSWORD).await;
    // 3,002 teams (the demo's two and 3,000) × 730 days = 2,191,460 team-days to read: over
    // 2,000,000.
    let started = Instant::now();
    let reply = send(
        &router,
        statement_request(&fiona, "from=2025-01-01&to=2026-12-31"),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let err: ApiError = reply.json();
    assert_eq!(err.fields[0].path, "to");
    assert!(
        err.fields[0].message.contains("2191460 team-days")
            && err.fields[0].message.contains("at most 666 days"),
        "{}",
        err.fields[0].message
    );
    // 200 days read 600,400 team-days, but by day they write 600,400 lines: over 400,000.
    let reply = send(
        &router,
        statement_request(&fiona, "from=2025-01-01&to=2025-07-19&by=day&format=csv"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let err: ApiError = reply.json();
    assert!(
        err.fields[0].message.contains("600400 lines by day")
            && err.fields[0].message.contains("at most 133 days by day"),
        "{}",
        err.fields[0].message
    );
    // The same period as one total is made.
    let reply = send(
        &router,
        statement_request(&fiona, "from=2025-01-01&to=2025-07-19"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_streamed_statement_is_the_whole_statement_and_a_requester_sees_only_theirs(
    pool: PgPool,
) {
    many_teams(&pool, 40, 45).await;
    user(&pool, "fiona", &[Role::Finance], &[]).await;
    user(&pool, "rita", &[Role::Requester], &["t-7"]).await;
    let router = crate::common::router(pool.clone());
    let (fiona, rita) = (
        login(&router, "fiona", crate::common::PASSWORD).await,
        login(&router, "rita", crate::common::PASSWORD).await,
    );
    // 40 teams × 45 days by day: several pieces of 64 KiB.
    let query = "from=2025-01-01&to=2025-02-14&by=day";
    let reply = send(&router, statement_request(&fiona, query)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert!(reply.body.len() > 4 * backend::chargeback::statement::PIECE_BYTES);
    let streamed: Statement = reply.json();
    let period = StatementQuery {
        from: Some("2025-01-01".into()),
        to: Some("2025-02-14".into()),
        by: Some("day".into()),
        ..StatementQuery::default()
    }
    .checked()
    .expect("period");
    let whole = backend::chargeback::build(&pool, &period)
        .await
        .expect("statement");
    assert_eq!(streamed, whole);
    assert_eq!(streamed.days.len(), 45);
    // By hand, one team's day: 8 H100-days = 192 GPU-hours at 860 cents = $1,651.20 by
    // allocation, 144 busy = $1,238.40 by use.
    let day = streamed.days[0]
        .teams
        .iter()
        .find(|t| t.team == "t-1")
        .expect("t-1");
    assert_eq!(
        (day.cost_by_allocation_cents, day.cost_by_use_cents),
        (165_120, 123_840)
    );
    // The CSV streams the same lines: 42 teams (the demo's two and 40) and the platform row
    // per day, then the period's. Asked for gzip as browsers do: the compressed stream ends
    // cleanly too.
    let mut csv = statement_request(&fiona, &format!("{query}&format=csv"));
    csv.headers_mut()
        .insert(header::ACCEPT_ENCODING, "gzip".parse().expect("header"));
    let zipped = send(&router, csv).await;
    assert_eq!(zipped.status, StatusCode::OK);
    assert_eq!(zipped.headers[header::CONTENT_ENCODING], "gzip");
    let reply = send(
        &router,
        statement_request(&fiona, &format!("{query}&format=csv")),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.text(), shared::chargeback::csv(&whole));
    assert_eq!(
        reply.text().split("\r\n").filter(|l| !l.is_empty()).count(),
        1 + 46 * 43
    );
    // Rita sees t-7's lines only, the same as finance's, and no fleet line.
    let reply = send(&router, statement_request(&rita, query)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let hers: Statement = reply.json();
    assert_eq!(hers.teams.len(), 1);
    assert_eq!(
        hers.teams[0],
        *whole.teams.iter().find(|t| t.team == "t-7").expect("t-7")
    );
    assert!(
        hers.fleet.is_none()
            && hers
                .days
                .iter()
                .all(|d| d.fleet.is_none() && d.teams.len() == 1)
    );
    // Idle shared by use or evenly, or a lending credit, would let her work out the fleet's
    // totals: those are finance's choices.
    for choice in ["idle=use", "idle=even", "idle=separate", "lend_credit=50"] {
        let reply = send(
            &router,
            statement_request(&rita, &format!("{query}&{choice}")),
        )
        .await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{choice}");
    }
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_statement_stops_when_its_client_leaves_or_its_time_is_up(pool: PgPool) {
    // 1,000 teams × 365 days: seconds of work, hundreds of megabytes of JSON by day.
    many_teams(&pool, 1_000, 365).await;
    user(&pool, "fiona", &[Role::Finance], &[]).await;
    let work = Work::new(1, 1, 2, 8);
    let router = router_on(pool.clone(), work.clone(), HttpSettings::default());
    let fiona = login(&router, "fiona", crate::common::PASSWORD).await;
    let query = "from=2025-01-01&to=2025-12-31&by=day";
    let response = router
        .clone()
        .oneshot(statement_request(&fiona, query))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let first = body.frame().await.expect("a piece").expect("no error");
    assert!(first.is_data());
    assert_eq!(work.compute.running(), 1);
    // The client leaves after the first piece: the work stops.
    drop(body);
    stops_within(&work, Duration::from_secs(2)).await;
    // A request timeout ends the work, not only the response: the period's total sends
    // nothing before it is done.
    let settings = HttpSettings {
        request_timeout: Duration::from_millis(300),
        ..HttpSettings::default()
    };
    let router = router_on(pool.clone(), work.clone(), settings);
    let reply = send(
        &router,
        statement_request(&fiona, "from=2025-01-01&to=2025-12-31"),
    )
    .await;
    assert_eq!(
        reply.status,
        StatusCode::REQUEST_TIMEOUT,
        "{}",
        reply.text()
    );
    stops_within(&work, Duration::from_secs(2)).await;
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn cluster_objects_render_on_the_bounded_pool(pool: PgPool) {
    // One compute thread and no room to wait: while it is taken, rendering the Cluster view
    // or the GitOps zip is refused at once (it would otherwise hold up the async runtime),
    // and health answers.
    let work = Work::new(1, 0, 2, 8);
    let router = router_on(pool.clone(), work.clone(), HttpSettings::default());
    let session = planner(&pool, &router).await;
    let held = tokio::spawn({
        let compute = work.compute.clone();
        async move {
            compute
                .run(|stop| {
                    while !stop.fired() {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                })
                .await
        }
    });
    while work.compute.running() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for path in ["/api/cluster", "/api/cluster/gitops.zip"] {
        let reply = send(&router, request(Method::GET, path, Some(&session), None)).await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
        assert!(reply.headers.contains_key(header::RETRY_AFTER), "{path}");
    }
    let health = send(&router, request(Method::GET, "/api/health", None, None)).await;
    assert_eq!(health.status, StatusCode::OK);
    held.abort();
    stops_within(&work, Duration::from_secs(2)).await;
    let zip = send(
        &router,
        request(Method::GET, "/api/cluster/gitops.zip", Some(&session), None),
    )
    .await;
    assert_eq!(zip.status, StatusCode::OK);
    assert_eq!(&zip.body[..2], b"PK");
}

/// The calendar's last day, 9999-12-31, is a day like any other: every route that takes a day
/// answers it (an empty window) instead of a 500 from the day after it, 10000-01-01, that a
/// window's end is.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_calendars_last_day_is_answered_not_a_500(pool: PgPool) {
    let router = crate::common::router(pool.clone());
    crate::common::team(&pool, "research").await;
    user(
        &pool,
        "ada",
        &[Role::Admin, Role::Finance, Role::Approver],
        &[],
    )
    .await;
    let ada = login(&router, "ada", crate::common::PASSWORD).await;
    let last = "9999-12-31";
    for path in [
        format!("/api/chargeback/statement?from={last}&to={last}"),
        format!("/api/chargeback/drill?team=research&day={last}"),
        format!("/api/usage/queues?from={last}&to={last}"),
        format!("/api/cluster/workloads?from={last}&to={last}"),
        format!("/api/cluster/teams/research/workloads?from={last}&to={last}"),
        format!("/api/plan/from-history?from={last}&to={last}"),
    ] {
        let response = send(&router, request(Method::GET, &path, Some(&ada), None)).await;
        assert!(
            response.status.is_success() || response.status.is_client_error(),
            "{path}: {} {}",
            response.status,
            response.text()
        );
    }
}

/// Two replicas starting together on a fresh database both ask for the shared secret: each
/// gets the one kept, never an error (the first's insert commits while the second's statement
/// runs on a snapshot from before it). Tried many times, a fresh secret name each time.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn replicas_starting_together_share_one_secret(pool: PgPool) {
    for attempt in 0..300 {
        let name = format!("race-{attempt}");
        let ask = |fresh: &'static str| {
            let (pool, name) = (pool.clone(), name.clone());
            tokio::spawn(async move { backend::auth::db::shared_secret(&pool, &name, fresh).await })
        };
        let (a, b) = (
            ask("from-replica-a-0123456789abcdef0123456789"),
            ask("from-replica-b-0123456789abcdef0123456789"),
        );
        let (a, b) = (a.await.expect("joined"), b.await.expect("joined"));
        let (a, b) = (
            a.unwrap_or_else(|e| panic!("attempt {attempt}: {e}")),
            b.unwrap_or_else(|e| panic!("attempt {attempt}: {e}")),
        );
        assert_eq!(a, b, "attempt {attempt}");
    }
}

/// Budgets burn a month's statement: whoever reads them must be one who may read a statement
/// (`403` for a requester with no team, as statements), and it is made on the compute pool,
/// so a full pool refuses it at once instead of taking a thread of its own.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn budgets_are_read_by_who_may_and_wait_for_the_compute_pool(pool: PgPool) {
    let work = Work::new(1, 1, 2, 8);
    let router = router_on(pool.clone(), work.clone(), HttpSettings::default());
    crate::common::team(&pool, "research").await;
    user(&pool, "fiona", &[Role::Finance], &[]).await;
    user(&pool, "rhea", &[Role::Requester], &[]).await;
    let fiona = login(&router, "fiona", crate::common::PASSWORD).await;
    let rhea = login(&router, "rhea", crate::common::PASSWORD).await;
    let path = "/api/chargeback/budgets?month=2026-11";
    let set = request(
        Method::PUT,
        "/api/chargeback/budgets/research/2026-11",
        Some(&fiona),
        Some(serde_json::json!({"limit_cents": 100_000})),
    );
    assert_eq!(send(&router, set).await.status, StatusCode::OK);
    let teamless = send(&router, request(Method::GET, path, Some(&rhea), None)).await;
    assert_eq!(
        teamless.status,
        StatusCode::FORBIDDEN,
        "{}",
        teamless.text()
    );
    // The pool full (an evaluation running, one waiting): refused at once, not queued.
    let running = fill_pool(&pool, &work, &router).await;
    let asked = Instant::now();
    let refused = send(&router, request(Method::GET, path, Some(&fiona), None)).await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.text()
    );
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    for task in running {
        task.abort();
    }
    stops_within(&work, Duration::from_secs(2)).await;
    // Many at once on a pool of one thread and one waiting place: one statement is made, the
    // others wait for it, and every one is answered.
    let asking: Vec<_> = (0..20)
        .map(|_| {
            let (router, request) = (
                router.clone(),
                request(Method::GET, path, Some(&fiona), None),
            );
            tokio::spawn(async move { send(&router, request).await })
        })
        .collect();
    for task in asking {
        let reply = task.await.expect("answered");
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        let budgets: serde_json::Value = reply.json();
        assert_eq!(budgets["lines"][0]["team"], "research", "{budgets}");
    }
}

/// A client that takes the first piece of a statement and then stops reading, keeping its
/// connection: the job waiting to hand it more checks its deadline, ends with it, and frees the
/// compute pool (it used to wait in the send for as long as the socket stayed open).
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_client_that_stops_reading_holds_the_pool_no_longer_than_its_deadline(pool: PgPool) {
    many_teams(&pool, 1_000, 365).await;
    user(&pool, "fiona", &[Role::Finance], &[]).await;
    let work = Work::new(1, 1, 2, 8);
    let settings = HttpSettings {
        request_timeout: Duration::from_secs(2),
        ..HttpSettings::default()
    };
    let router = router_on(pool.clone(), work.clone(), settings);
    let fiona = login(&router, "fiona", crate::common::PASSWORD).await;
    let response = router
        .clone()
        .oneshot(statement_request(
            &fiona,
            "from=2025-01-01&to=2025-12-31&by=day",
        ))
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    assert!(
        body.frame()
            .await
            .expect("a piece")
            .expect("no error")
            .is_data()
    );
    assert_eq!(work.compute.running(), 1);
    // Held, never read again: the job ends at the deadline (2 s) all the same.
    stops_within(&work, Duration::from_secs(4)).await;
    drop(body);
}
