//! The HTTP contract, driven through the real router against a real PostgreSQL (one fresh,
//! migrated database per test, from `#[sqlx::test]`; DATABASE_URL names the server).

use crate::common::{Reply, dead_pool, login, public_fixture, request, router, send, user};
use axum::{
    body::Body,
    http::{Method, Request, StatusCode, header},
};
use backend::{
    AppState, app,
    config::HttpSettings,
    fleet::{self, DemoLoad},
};
use shared::{
    ApiError, ErrorCode,
    accounts::Role,
    fleet::Fleet,
    health::{DatabaseStatus, Health, Status},
};
use sqlx::PgPool;

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).expect("request")
}

fn assert_no_internals(reply: &Reply) {
    let text = reply.text();
    assert!(
        !text.contains("127.0.0.1") && !text.contains("hunter2"),
        "leaks internals: {text}"
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn health_is_ok_with_build_facts_and_schema_version(pool: PgPool) {
    let reply = send(&router(pool), get("/api/health")).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.is_json());
    let health: Health = reply.json();
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
        reply.headers.contains_key("x-request-id"),
        "every response carries its request id"
    );
}

#[tokio::test]
async fn health_reports_a_dead_database_clearly_and_the_server_keeps_serving() {
    let router = router(dead_pool());
    for _ in 0..2 {
        let reply = send(&router, get("/api/health")).await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(reply.is_json());
        let health: Health = reply.json();
        assert_eq!(health.status, Status::Degraded);
        assert_eq!(health.database.status, DatabaseStatus::Down);
        assert_eq!(
            health.database.message.as_deref(),
            Some("the database does not answer")
        );
        assert_no_internals(&reply);
    }
}

#[tokio::test]
async fn a_dead_database_is_a_503_with_a_request_id_and_no_internals() {
    // A session cookie makes the server look the caller up in the (dead) database.
    let request = Request::get("/api/fleet")
        .header(header::COOKIE, "gpufleet_session=0123")
        .body(Body::empty())
        .expect("request");
    let reply = send(&router(dead_pool()), request).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(reply.is_json());
    let err: ApiError = reply.json();
    assert_eq!(err.code, ErrorCode::Unavailable);
    let request_id = reply
        .headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok());
    assert_eq!(err.request_id.as_deref(), request_id);
    assert_no_internals(&reply);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn unknown_api_routes_are_404_json(pool: PgPool) {
    let router = router(pool);
    for uri in ["/api/nope", "/api/", "/api/health/extra"] {
        let reply = send(&router, get(uri)).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{uri}");
        assert!(reply.is_json());
        let err: ApiError = reply.json();
        assert_eq!(err.code, ErrorCode::NotFound);
        assert_eq!(err.message, "no such resource");
    }
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn wrong_methods_are_405_json_with_allow(pool: PgPool) {
    let reply = send(
        &router(pool),
        request(Method::POST, "/api/health", None, None),
    )
    .await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(reply.is_json());
    assert!(reply.headers.contains_key(header::ALLOW));
    assert_eq!(reply.json::<ApiError>().code, ErrorCode::MethodNotAllowed);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn oversized_bodies_are_413_json(pool: PgPool) {
    let settings = HttpSettings {
        public_dir: public_fixture(),
        body_limit_bytes: 1024,
        ..Default::default()
    };
    let router = app(AppState::new(pool), &settings);
    let request = Request::post("/api/auth/login")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, 4096)
        .body(Body::from(vec![b' '; 4096]))
        .expect("request");
    let reply = send(&router, request).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(reply.is_json());
    let err: ApiError = reply.json();
    assert_eq!(err.code, ErrorCode::PayloadTooLarge);
    assert_eq!(err.message, "the request body is too large");

    // Without a Content-Length the limit still holds while the body streams in.
    let chunks = (0..8).map(|_| Ok::<_, std::io::Error>(vec![b' '; 512]));
    let request = Request::post("/api/auth/login")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(futures_util::stream::iter(chunks)))
        .expect("request");
    let reply = send(&router, request).await;
    assert_eq!(
        reply.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        reply.text()
    );
    assert_eq!(reply.json::<ApiError>().code, ErrorCode::PayloadTooLarge);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn malformed_json_is_a_clear_400_or_422(pool: PgPool) {
    let router = router(pool);
    let broken = Request::post("/api/auth/login")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{\"username\": "))
        .expect("request");
    let reply = send(&router, broken).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let err: ApiError = reply.json();
    assert_eq!(err.code, ErrorCode::BadRequest);
    assert!(err.message.contains("EOF"), "{}", err.message);

    let missing = request(
        Method::POST,
        "/api/auth/login",
        None,
        Some(serde_json::json!({"username": "a"})),
    );
    let reply = send(&router, missing).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let err: ApiError = reply.json();
    assert!(
        err.fields[0].message.contains("missing field `password`"),
        "{err:?}"
    );
    // A wrong type names the field, in words, never a Rust type.
    let wrong = request(
        Method::POST,
        "/api/auth/login",
        None,
        Some(serde_json::json!({"username": 7, "password": "x"})),
    );
    let reply = send(&router, wrong).await;
    assert_eq!(reply.json::<ApiError>().fields[0].path, "username");
    assert!(!reply.text().contains("LoginRequest"), "{}", reply.text());
    // Text PostgreSQL cannot store is refused before SQL, in the body and in the path.
    let nul = request(
        Method::POST,
        "/api/auth/login",
        None,
        Some(serde_json::json!({"username": "a\u{0}b", "password": "x"})),
    );
    let reply = send(&router, nul).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reply.json::<ApiError>().fields[0].path, "username");
    let reply = send(&router, get("/api/teams/a%00b")).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);

    let not_json = Request::post("/api/auth/login")
        .body(Body::from("username=a"))
        .expect("request");
    let reply = send(&router, not_json).await;
    assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        reply.json::<ApiError>().code,
        ErrorCode::UnsupportedMediaType
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_demo_fleet_loads_once_into_an_empty_database(pool: PgPool) {
    user(&pool, "viewer", &[Role::Finance], &[]).await;
    let router = router(pool.clone());
    let session = login(&router, "viewer", crate::common::PASSWORD).await;
    let reply = send(
        &router,
        request(Method::GET, "/api/fleet", Some(&session), None),
    )
    .await;
    assert_eq!(reply.json::<Fleet>(), Fleet::default());

    let want = fleet::demo_fleet();
    assert_eq!(
        fleet::load_demo(&pool).await.expect("loads"),
        DemoLoad::Loaded { gpus: 200 }
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
    assert_eq!(got.total_gpus(), 200);
    let mut want_models = want.models.clone();
    want_models.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(got.models, want_models);
    let mut want_pools = want.pools.clone();
    want_pools.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(got.pools, want_pools);
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_console_is_served_with_client_routes_but_missing_assets_stay_404(pool: PgPool) {
    let router = router(pool);
    for uri in ["/", "/fleet", "/plan/anything"] {
        let reply = send(&router, get(uri)).await;
        assert_eq!(reply.status, StatusCode::OK, "{uri}");
        assert!(reply.text().contains("gpufleet test"), "{uri}");
        assert_eq!(
            reply
                .headers
                .get(header::CACHE_CONTROL)
                .map(|v| v.as_bytes()),
            Some(&b"no-cache"[..])
        );
    }
    let reply = send(&router, get("/pkg/app.js")).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body, b"export default 1;");
    let reply = send(&router, get("/pkg/missing.js")).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert!(reply.is_json());
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn responses_are_compressed_when_asked(pool: PgPool) {
    let request = Request::get("/api/health")
        .header(header::ACCEPT_ENCODING, "gzip")
        .body(Body::empty())
        .expect("request");
    let reply = send(&router(pool), request).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        reply
            .headers
            .get(header::CONTENT_ENCODING)
            .map(|v| v.as_bytes()),
        Some(&b"gzip"[..])
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn every_response_carries_the_security_headers_and_our_own_request_id(pool: PgPool) {
    let router = router(pool);
    for uri in ["/", "/fleet", "/api/health", "/api/nope", "/pkg/missing.js"] {
        let mut request = get(uri);
        request
            .headers_mut()
            .insert("x-request-id", "client-chosen-id".parse().expect("header"));
        let reply = send(&router, request).await;
        let header = |name: &str| {
            reply
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let csp = header("content-security-policy");
        for directive in [
            "script-src 'self' 'wasm-unsafe-eval'",
            "frame-ancestors 'none'",
            "object-src 'none'",
        ] {
            assert!(csp.contains(directive), "{uri}: {csp}");
        }
        assert!(
            !csp.contains("unsafe-eval'") || csp.contains("wasm-unsafe-eval"),
            "{csp}"
        );
        assert_eq!(header("x-content-type-options"), "nosniff", "{uri}");
        assert_eq!(header("x-frame-options"), "DENY", "{uri}");
        assert_eq!(header("referrer-policy"), "same-origin", "{uri}");
        // The id is the server's (a UUID), never the client's echoed back.
        let id = header("x-request-id");
        assert_ne!(id, "client-chosen-id", "{uri}");
        assert_eq!(id.len(), 36, "{uri}: {id}");
    }
}

/// docs/api.md's route table is the router's: one row per route, every route, and who may call
/// it in [`backend::access::Access::who`]'s words.
#[test]
fn the_route_table_in_the_docs_is_the_routers() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md"))
        .expect("docs/api.md");
    let mut documented: Vec<(String, String)> = doc
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|row| {
            let (route, rest) = row.split_once("` | ")?;
            let (method, path) = route.split_once(" /api")?;
            let who = rest.split(" | ").next()?;
            let path = path.split('?').next()?;
            Some((format!("{method} {path}"), who.to_owned()))
        })
        .collect();
    let mut routed: Vec<(String, String)> = backend::app::api()
        .rules()
        .iter()
        .map(|rule| (format!("{} {}", rule.method, rule.path), rule.access.who()))
        .collect();
    documented.sort();
    routed.sort();
    assert_eq!(documented, routed);
}
