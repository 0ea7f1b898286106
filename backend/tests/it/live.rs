//! The live view (`GET /api/usage/stream`) over a real PostgreSQL: the latest minutes on
//! connect, each newly ingested minute pushed to every viewer from one reader, a requester's
//! view kept to their teams, a resume with `Last-Event-ID`, and a viewer too slow to keep up
//! dropped while the others go on.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use crate::common::{PASSWORD, login, public_fixture, request, user};
use axum::{
    Router,
    body::Body,
    http::{Method, StatusCode, header},
};
use backend::{AppState, app, config::HttpSettings, usage::live::Live};
use http_body_util::BodyExt;
use shared::{
    accounts::Role,
    common::utc::{MINUTE_MS, floor_minute},
    usage::{DeviceMinute, LiveMinute, UsageKey, Window},
};
use sqlx::PgPool;
use tower::ServiceExt;

const GPU_MIN: i64 = 60_000_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .expect("clock")
}

/// Research busy `busy` GPUs of 4 allocated, search 1 of 2, in the minute at `at`.
async fn ingest_minute(pool: &PgPool, at: i64, busy: i64) {
    let key = |ns: &str| UsageKey {
        minute_ms: at,
        namespace: ns.to_owned(),
        cluster_queue: String::new(),
        flavor: "h100-shared".to_owned(),
    };
    let window = Window::new(at, at + MINUTE_MS).expect("window");
    let allocated = BTreeMap::from([
        (key("team-research"), 4 * GPU_MIN),
        (key("team-search"), 2 * GPU_MIN),
    ]);
    let devices = BTreeMap::from([
        (
            key("team-research"),
            DeviceMinute {
                busy_gpu_us: busy * GPU_MIN,
                observed_gpu_us: 4 * GPU_MIN,
                fb_used_mib: 0,
            },
        ),
        (
            key("team-search"),
            DeviceMinute {
                busy_gpu_us: GPU_MIN,
                observed_gpu_us: 2 * GPU_MIN,
                fb_used_mib: 0,
            },
        ),
    ]);
    backend::usage::db::store_window(pool, window, &allocated, &Default::default(), &devices)
        .await
        .expect("usage rows");
}

/// The router over `live`, and its reader of new minutes.
fn serving(pool: &PgPool, live: &Arc<Live>) -> (Router, tokio::task::JoinHandle<()>) {
    let state = AppState::new(pool.clone()).with_live(live.clone());
    let reader = backend::usage::live::spawn(pool.clone(), live.clone());
    let router = app(
        state,
        &HttpSettings {
            public_dir: public_fixture(),
            ..Default::default()
        },
    );
    (router, reader)
}

/// A subscriber's stream, read event by event.
struct Viewer {
    body: Body,
    pending: String,
}

impl Viewer {
    async fn open(
        router: &Router,
        session: &crate::common::Session,
        last_event_id: Option<i64>,
    ) -> Viewer {
        let mut req = request(Method::GET, "/api/usage/stream", Some(session), None);
        if let Some(id) = last_event_id {
            req.headers_mut()
                .insert("last-event-id", id.to_string().parse().expect("header"));
        }
        let response = router.clone().oneshot(req).await.expect("infallible");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        Viewer {
            body: response.into_body(),
            pending: String::new(),
        }
    }

    /// The next `minute` event (heartbeats skipped), or `None` when the stream ended.
    async fn next(&mut self) -> Option<(i64, LiveMinute)> {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let block: String = self.pending.drain(..end + 2).collect();
                let mut id = None;
                let mut data = None;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = v.parse().ok();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = Some(v.to_owned());
                    }
                }
                if let (Some(id), Some(data)) = (id, data) {
                    return Some((id, serde_json::from_str(&data).expect("a live minute")));
                }
                continue;
            }
            let frame = tokio::time::timeout(Duration::from_secs(10), self.body.frame())
                .await
                .expect("an event within 10 s")?;
            if let Ok(bytes) = frame.expect("a frame").into_data() {
                self.pending.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn newly_ingested_minutes_reach_every_viewer(pool: PgPool) {
    backend::fleet::load_demo(&pool).await.expect("demo fleet");
    user(&pool, "fiona", &[Role::Finance], &[]).await;
    user(&pool, "rita", &[Role::Requester], &["research"]).await;
    user(&pool, "nora", &[Role::Requester], &[]).await;
    let live = Arc::new(Live::with_buffer(Duration::from_millis(100), 2));
    let (router, reader) = serving(&pool, &live);
    let (fiona, rita, nora) = (
        login(&router, "fiona", PASSWORD).await,
        login(&router, "rita", PASSWORD).await,
        login(&router, "nora", PASSWORD).await,
    );
    let first = floor_minute(now_ms()) - 10 * MINUTE_MS;
    ingest_minute(&pool, first, 3).await;

    // on connect: the latest minute; research 3 of 4 GPUs busy, search 1 of 2
    let mut finance = Viewer::open(&router, &fiona, None).await;
    let (id, minute) = finance.next().await.expect("the latest minute");
    assert_eq!(id, first);
    assert_eq!(minute.capacity_gpus, 200);
    let teams: Vec<(&str, Option<i64>, i64)> = minute
        .teams
        .iter()
        .map(|t| {
            (
                t.team.as_str(),
                t.allocated_gpu_microseconds,
                t.busy_gpu_microseconds,
            )
        })
        .collect();
    assert_eq!(
        teams,
        vec![
            ("research", Some(4 * GPU_MIN), 3 * GPU_MIN),
            ("search", Some(2 * GPU_MIN), GPU_MIN)
        ]
    );
    let mut requester = Viewer::open(&router, &rita, None).await;
    let (_, mine) = requester.next().await.expect("rita's minute");
    assert_eq!(mine.teams.len(), 1);
    assert_eq!(mine.teams[0].team, "research");
    let slow = Viewer::open(&router, &fiona, None).await;
    assert!(live.subscribers() >= 3);

    // a new minute is ingested: pushed to both viewers within a tick or two
    ingest_minute(&pool, first + MINUTE_MS, 4).await;
    let (id, minute) = finance.next().await.expect("the new minute");
    assert_eq!(id, first + MINUTE_MS);
    assert_eq!(minute.teams[0].busy_gpu_microseconds, 4 * GPU_MIN);
    let (id, mine) = requester.next().await.expect("rita's new minute");
    assert_eq!((id, mine.teams.len()), (first + MINUTE_MS, 1));

    // a viewer that reconnects after the first minute gets the second first
    let mut resumed = Viewer::open(&router, &fiona, Some(first)).await;
    assert_eq!(
        resumed.next().await.map(|(id, _)| id),
        Some(first + MINUTE_MS)
    );

    // four more minutes, one per tick, while `slow` reads nothing: its buffer (2) overflows
    // and it is dropped; the others see every minute
    for n in 2..6 {
        ingest_minute(&pool, first + n * MINUTE_MS, 2).await;
        let (id, _) = finance.next().await.expect("a minute");
        assert_eq!(id, first + n * MINUTE_MS);
    }
    let mut slow = slow;
    let mut seen = Vec::new();
    while let Some((id, _)) = slow.next().await {
        seen.push(id);
    }
    assert!(
        seen.len() < 5,
        "the slow viewer was dropped after a few: {seen:?}"
    );
    // the others are still served
    ingest_minute(&pool, first + 6 * MINUTE_MS, 1).await;
    assert_eq!(
        finance.next().await.map(|(id, _)| id),
        Some(first + 6 * MINUTE_MS)
    );

    // a requester in no team gets nothing
    let refused = router
        .clone()
        .oneshot(request(Method::GET, "/api/usage/stream", Some(&nora), None))
        .await
        .expect("infallible");
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    reader.abort();
}

/// Opens a stream; its status (the body is dropped with the response when it is not 200).
async fn open_status(
    router: &Router,
    session: &crate::common::Session,
) -> (StatusCode, Option<Body>) {
    let req = request(Method::GET, "/api/usage/stream", Some(session), None);
    let response = router.clone().oneshot(req).await.expect("infallible");
    let status = response.status();
    (
        status,
        (status == StatusCode::OK).then(|| response.into_body()),
    )
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn streams_end_with_their_viewer_and_are_capped(pool: PgPool) {
    backend::fleet::load_demo(&pool).await.expect("demo fleet");
    user(&pool, "fiona", &[Role::Finance], &[]).await;
    user(&pool, "rita", &[Role::Requester], &["research", "search"]).await;
    user(&pool, "ada", &[Role::Admin], &[]).await;
    user(&pool, "alex", &[Role::Approver], &[]).await;
    let mut live = Live::with_buffer(Duration::from_millis(100), 8);
    live.check_every = Duration::from_millis(100);
    live.lifetime = Duration::from_secs(2);
    (live.per_user, live.in_all) = (2, 3);
    let live = Arc::new(live);
    let (router, reader) = serving(&pool, &live);
    let (fiona, rita, ada) = (
        login(&router, "fiona", PASSWORD).await,
        login(&router, "rita", PASSWORD).await,
        login(&router, "ada", PASSWORD).await,
    );
    let first = floor_minute(now_ms()) - 10 * MINUTE_MS;
    ingest_minute(&pool, first, 3).await;
    let call = |method: Method, uri: &str, body: Option<serde_json::Value>| {
        let router = router.clone();
        let req = request(method, uri, Some(&ada), body);
        async move { crate::common::send(&router, req).await.status }
    };

    // Fiona logs out: her open stream ends at its next check.
    let mut finance = Viewer::open(&router, &fiona, None).await;
    assert!(finance.next().await.is_some());
    let out = crate::common::send(
        &router,
        request(Method::POST, "/api/auth/logout", Some(&fiona), None),
    )
    .await;
    assert_eq!(out.status, StatusCode::NO_CONTENT);
    assert!(finance.next().await.is_none(), "ended with the session");

    // Rita leaves research: her stream follows her teams as they are now; disabled, it ends.
    let mut requester = Viewer::open(&router, &rita, None).await;
    let (_, mine) = requester.next().await.expect("rita's minute");
    assert_eq!(mine.teams.len(), 2);
    assert_eq!(
        call(Method::DELETE, "/api/teams/research/members/rita", None).await,
        StatusCode::NO_CONTENT
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    ingest_minute(&pool, first + MINUTE_MS, 4).await;
    let (_, mine) = requester.next().await.expect("the next minute");
    let teams: Vec<&str> = mine.teams.iter().map(|t| t.team.as_str()).collect();
    assert_eq!(teams, ["search"]);
    let disabled = call(
        Method::PATCH,
        "/api/users/rita",
        Some(serde_json::json!({"disabled": true})),
    )
    .await;
    assert_eq!(disabled, StatusCode::OK);
    assert!(requester.next().await.is_none(), "ended when disabled");

    // Caps: two streams per user, three in all (429, then 503, each with Retry-After).
    let fiona = login(&router, "fiona", PASSWORD).await;
    let alex = login(&router, "alex", PASSWORD).await;
    let (a, _held_a) = open_status(&router, &fiona).await;
    let (b, _held_b) = open_status(&router, &fiona).await;
    assert_eq!((a, b), (StatusCode::OK, StatusCode::OK));
    assert_eq!(
        open_status(&router, &fiona).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    let (c, held_c) = open_status(&router, &alex).await;
    assert_eq!(c, StatusCode::OK);
    assert_eq!(
        open_status(&router, &ada).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // A stream lives at most its lifetime (2 s here); its seat is then free.
    let mut aged = Viewer {
        body: held_c.expect("a body"),
        pending: String::new(),
    };
    while aged.next().await.is_some() {}
    assert_eq!(open_status(&router, &ada).await.0, StatusCode::OK);
    reader.abort();
}
