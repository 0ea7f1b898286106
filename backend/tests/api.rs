//! The HTTP contract, driven through the real router against a real PostgreSQL (one fresh,
//! migrated database per test, from `#[sqlx::test]`; DATABASE_URL names the server).

mod common;

use axum::{
    Router,
    body::Body,
    http::{Method, Request, StatusCode, header},
};
use backend::{
    AppState, app,
    config::HttpSettings,
    fleet::{self, DemoLoad},
};
use common::{dead_pool, login, public_fixture, request, router, send, user};
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;
use shared::{
    ApiError, ErrorCode,
    auth::Role,
    fleet::Fleet,
    health::{DatabaseStatus, Health, Status},
};
use sqlx::PgPool;
use tower::ServiceExt;

async fn send_raw(
    router: Router,
    request: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let response = router.oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .to_vec();
    (status, headers, body)
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).expect("request")
}

fn decode<T: DeserializeOwned>(body: &[u8]) -> T {
    serde_json::from_slice(body).unwrap_or_else(|err| {
        panic!(
            "not the expected JSON ({err}): {}",
            String::from_utf8_lossy(body)
        )
    })
}

fn assert_json(headers: &axum::http::HeaderMap) {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    assert_eq!(content_type, Some("application/json"));
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn health_is_ok_with_build_facts_and_schema_version(pool: PgPool) {
    let (status, headers, body) = send_raw(router(pool), get("/api/health")).await;
    assert_eq!(status, StatusCode::OK);
    assert_json(&headers);
    let health: Health = decode(&body);
    assert_eq!(health.status, Status::Ok);
    assert_eq!(health.database.status, DatabaseStatus::Up);
    assert_eq!(
        health.database.schema_version,
        backend::MIGRATOR.iter().map(|m| m.version).max()
    );
    assert!(health.database.latency_ms.is_some());
    assert_eq!(health.build.version, env!("CARGO_PKG_VERSION"));
    assert!(!health.build.git_sha.is_empty());
    assert!(
        headers.contains_key("x-request-id"),
        "every response carries its request id"
    );
}

#[tokio::test]
async fn health_reports_a_dead_database_clearly_and_the_server_keeps_serving() {
    let router = router(dead_pool());
    for _ in 0..2 {
        let (status, headers, body) = send_raw(router.clone(), get("/api/health")).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_json(&headers);
        let health: Health = decode(&body);
        assert_eq!(health.status, Status::Degraded);
        assert_eq!(health.database.status, DatabaseStatus::Down);
        assert_eq!(
            health.database.message.as_deref(),
            Some("the database does not answer")
        );
        let text = String::from_utf8_lossy(&body);
        assert!(
            !text.contains("127.0.0.1") && !text.contains("hunter2"),
            "leaks internals: {text}"
        );
    }
}

#[tokio::test]
async fn a_dead_database_is_a_503_with_a_request_id_and_no_internals() {
    // A session cookie makes the server look the caller up in the (dead) database.
    let request = Request::get("/api/fleet")
        .header(header::COOKIE, "gpufleet_session=0123")
        .body(Body::empty())
        .expect("request");
    let (status, headers, body) = send_raw(router(dead_pool()), request).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_json(&headers);
    let err: ApiError = decode(&body);
    assert_eq!(err.code, ErrorCode::Unavailable);
    let request_id = headers.get("x-request-id").and_then(|v| v.to_str().ok());
    assert_eq!(err.request_id.as_deref(), request_id);
    let text = String::from_utf8_lossy(&body);
    assert!(
        !text.contains("127.0.0.1") && !text.contains("hunter2"),
        "leaks internals: {text}"
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn unknown_api_routes_are_404_json(pool: PgPool) {
    for uri in ["/api/nope", "/api/", "/api/health/extra"] {
        let (status, headers, body) = send_raw(router(pool.clone()), get(uri)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
        assert_json(&headers);
        let err: ApiError = decode(&body);
        assert_eq!(err.code, ErrorCode::NotFound);
        assert_eq!(err.message, "no such resource");
    }
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn wrong_methods_are_405_json_with_allow(pool: PgPool) {
    let request = Request::post("/api/health")
        .body(Body::empty())
        .expect("request");
    let (status, headers, body) = send_raw(router(pool), request).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_json(&headers);
    assert!(headers.contains_key(header::ALLOW));
    assert_eq!(decode::<ApiError>(&body).code, ErrorCode::MethodNotAllowed);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn oversized_bodies_are_413_json(pool: PgPool) {
    let settings = HttpSettings {
        public_dir: public_fixture(),
        body_limit_bytes: 1024,
        ..Default::default()
    };
    let router = app(AppState::new(pool), &settings);
    let request = Request::post("/api/fleet")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, 4096)
        .body(Body::from(vec![b' '; 4096]))
        .expect("request");
    let (status, headers, body) = send_raw(router, request).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_json(&headers);
    let err: ApiError = decode(&body);
    assert_eq!(err.code, ErrorCode::PayloadTooLarge);
    assert_eq!(err.message, "the request body is too large");
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_demo_fleet_loads_once_into_an_empty_database(pool: PgPool) {
    user(&pool, "viewer", &[Role::Finance], &[]).await;
    let router = router(pool.clone());
    let session = login(&router, "viewer", common::PASSWORD).await;
    let reply = send(
        &router,
        request(Method::GET, "/api/fleet", Some(&session), None),
    )
    .await;
    assert_eq!(reply.json::<Fleet>(), Fleet::default());

    let want = fleet::demo_fleet();
    assert_eq!(
        fleet::load_demo(&pool).await.expect("loads"),
        DemoLoad::Loaded { gpus: 192 }
    );
    assert_eq!(
        fleet::load_demo(&pool).await.expect("runs"),
        DemoLoad::AlreadyHasFleet
    );

    let reply = send(
        &router,
        request(Method::GET, "/api/fleet", Some(&session), None),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    let got: Fleet = reply.json();
    assert_eq!(got.total_gpus(), 192);
    let mut want_models = want.models.clone();
    want_models.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(got.models, want_models);
    let mut want_pools = want.pools.clone();
    want_pools.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(got.pools, want_pools);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_console_is_served_with_client_routes_but_missing_assets_stay_404(pool: PgPool) {
    for uri in ["/", "/fleet", "/plan/anything"] {
        let (status, headers, body) = send_raw(router(pool.clone()), get(uri)).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
        assert!(
            String::from_utf8_lossy(&body).contains("gpufleet test"),
            "{uri}"
        );
        assert_eq!(
            headers.get(header::CACHE_CONTROL).map(|v| v.as_bytes()),
            Some(&b"no-cache"[..])
        );
    }
    let (status, _, body) = send_raw(router(pool.clone()), get("/pkg/app.js")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, b"export default 1;");
    let (status, headers, _) = send_raw(router(pool), get("/pkg/missing.js")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_json(&headers);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn responses_are_compressed_when_asked(pool: PgPool) {
    let request = Request::get("/api/health")
        .header(header::ACCEPT_ENCODING, "gzip")
        .body(Body::empty())
        .expect("request");
    let (status, headers, _) = send_raw(router(pool), request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers.get(header::CONTENT_ENCODING).map(|v| v.as_bytes()),
        Some(&b"gzip"[..])
    );
}
