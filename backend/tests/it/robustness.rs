//! Every `/api` route, read from `Api::rules()` so that routes added later are covered without
//! anyone remembering: random and malformed JSON, bytes that are not JSON, wrong content
//! types, oversized fields, NUL characters and odd path segments never give a 5xx, a panic or
//! an error that is not our JSON; and a refused request writes nothing.

use crate::common::{Session, login, send_head, team, user};
use axum::{
    Router,
    body::Body,
    extract::ConnectInfo,
    http::{Method, Request, header},
};
use proptest::{
    prelude::*,
    strategy::ValueTree,
    test_runner::{Config, TestRng, TestRunner},
};
use serde_json::Value;
use shared::{ApiError, accounts::Role};
use sqlx::PgPool;

/// Cases per route.
const CASES: usize = 24;

/// Field names the API knows, so random objects often reach the validation behind the parser.
const FIELDS: &[&str] = &[
    "username",
    "password",
    "display_name",
    "roles",
    "teams",
    "disabled",
    "name",
    "namespace",
    "cost_centre",
    "gpu_model",
    "groups",
    "mem_mib",
    "replicas",
    "version",
    "fleet",
    "constraints",
];

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        "\\PC{0,24}".prop_map(Value::from),
        Just(Value::from("requester")),
        Just(Value::from("a\u{0}b")),
        // Far past every field's limit.
        Just(Value::from("x".repeat(100_000))),
    ];
    leaf.prop_recursive(3, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((field(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(FIELDS).prop_map(str::to_owned),
        "[a-z_]{1,12}",
    ]
}

/// A body and the content type it is sent with.
#[derive(Debug, Clone)]
enum Body_ {
    Json(Value),
    Bytes(Vec<u8>),
    WrongType(Value),
    Empty,
}

fn body() -> impl Strategy<Value = Body_> {
    prop_oneof![
        4 => json().prop_map(Body_::Json),
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Body_::Bytes),
        1 => json().prop_map(Body_::WrongType),
        1 => Just(Body_::Empty),
    ]
}

/// What a path parameter is filled with.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just(String::new()),
        1 => Just("a%00b".to_owned()),
        1 => Just("x".repeat(300)),
        1 => Just("%2e%2e".to_owned()),
        1 => "[a-z0-9-]{1,20}",
    ]
}

fn build(
    method: &Method,
    uri: &str,
    body: &Body_,
    session: &Session,
    peer: usize,
) -> Request<Body> {
    let mut builder = Request::builder()
        .method(method.clone())
        .uri(uri)
        .header(
            header::COOKIE,
            format!("gpufleet_session={}", session.token),
        )
        .header("x-csrf-token", &session.me.csrf_token);
    let body = match body {
        Body_::Json(v) => {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
            Body::from(v.to_string())
        }
        Body_::Bytes(b) => {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
            Body::from(b.clone())
        }
        Body_::WrongType(v) => {
            builder = builder.header(header::CONTENT_TYPE, "text/plain");
            Body::from(v.to_string())
        }
        Body_::Empty => Body::empty(),
    };
    let mut request = builder.body(body).expect("request");
    // A peer per case, so random log-ins never throttle the test's own address.
    let peer = format!("10.77.{}.{}:1", peer / 250, peer % 250 + 1);
    request.extensions_mut().insert(ConnectInfo(
        peer.parse::<std::net::SocketAddr>().expect("peer"),
    ));
    request
}

/// Everything a refused request must leave as it was (sessions and failed log-ins are the
/// throttle's own bookkeeping).
async fn digest(pool: &PgPool) -> String {
    sqlx::query_scalar(
        "select md5(coalesce(string_agg(x, '|' order by x), '')) from (
             select 'u' || t::text as x from users t
             union all select 'r' || t::text from user_roles t
             union all select 't' || t::text from teams t
             union all select 'm' || t::text from team_members t
             union all select 'g' || t::text from gpu_models t
             union all select 'p' || t::text from node_pools t
             union all select 's' || t::text from scenarios t
         ) all_rows",
    )
    .fetch_one(pool)
    .await
    .expect("digest")
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn no_request_to_any_route_gives_a_server_error_or_writes_when_refused(pool: PgPool) {
    team(&pool, "own").await;
    user(&pool, "root", &Role::ALL, &["own"]).await;
    user(&pool, "tom", &[Role::Requester], &[]).await;
    backend::fleet::load_demo(&pool).await.expect("demo fleet");
    let router: Router = crate::common::router(pool.clone());
    let mut session = login(&router, "root", crate::common::PASSWORD).await;

    let mut rules = backend::app::api().rules().to_vec();
    // Log-out ends the session the other cases use: take it last.
    rules.sort_by_key(|r| r.path == "/auth/logout");
    assert!(rules.len() >= 19, "{} routes", rules.len());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha),
    );
    let cases = (body(), segment(), segment());
    // Besides the random cases, each known field alone at 100,000 letters, and log-ins with
    // one: limits must be checked before the database sees the text. The letters come from a
    // linear congruential sequence, so PostgreSQL cannot compress them away.
    let mut state: u64 = 1;
    let huge: String = (0..100_000)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            char::from(b'a' + ((state >> 33) % 26) as u8)
        })
        .collect();
    let mut fixed: Vec<Body_> = FIELDS
        .iter()
        .map(|f| Body_::Json(serde_json::json!({ *f: huge })))
        .collect();
    fixed.push(Body_::Json(
        serde_json::json!({"username": huge, "password": "y"}),
    ));
    fixed.push(Body_::Json(
        serde_json::json!({"username": "root", "password": huge}),
    ));
    let mut peer = 0;
    for rule in &rules {
        for case in 0..CASES + fixed.len() {
            let (random, team_segment, user_segment) =
                cases.new_tree(&mut runner).expect("a case").current();
            let body = fixed.get(case).cloned().unwrap_or(random);
            let or = |s: String, default: &str| if s.is_empty() { default.to_owned() } else { s };
            let uri = format!(
                "/api{}",
                rule.path
                    .replace("{team}", &or(team_segment, "own"))
                    .replace("{username}", &or(user_segment, "tom"))
            );
            let before = digest(&pool).await;
            peer += 1;
            // an event stream's body never ends: its head (and any refusal's body) is the answer
            let reply = send_head(&router, build(&rule.method, &uri, &body, &session, peer)).await;
            // at most 300 characters (a body's multi-byte characters stay whole)
            let context: String = format!("{} {uri} with {body:?}", rule.method)
                .chars()
                .take(300)
                .collect();
            assert!(
                reply.status.as_u16() < 500,
                "{context}: {} {}",
                reply.status,
                reply.text()
            );
            if reply.status.is_client_error() {
                let err: ApiError = serde_json::from_slice(&reply.body).unwrap_or_else(|e| {
                    panic!("{context}: not our error JSON ({e}): {}", reply.text())
                });
                assert!(!err.message.is_empty(), "{context}");
                assert_eq!(
                    digest(&pool).await,
                    before,
                    "{context}: refused, yet it wrote"
                );
            }
            // Admin changes may have ended root's session (a reset or a lost role): start again.
            if reply.status == axum::http::StatusCode::UNAUTHORIZED && rule.path != "/auth/logout" {
                session = login(&router, "root", crate::common::PASSWORD).await;
            }
        }
    }
}
