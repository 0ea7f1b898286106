//! Helpers shared by the integration tests: the real router over a `#[sqlx::test]` database,
//! requests with cookies and CSRF tokens, and users made through the real code paths.
#![allow(dead_code)] // each test binary uses its own subset

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use axum::{
    Router,
    body::Body,
    extract::ConnectInfo,
    http::{HeaderMap, Method, Request, StatusCode, header},
};
use backend::{AppState, app, auth::settings::AuthSettings, config::HttpSettings};
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;
use shared::accounts::{LoginRequest, Me, NewTeam, NewUser, Role};
use sqlx::{PgPool, postgres::PgPoolOptions};
use tower::ServiceExt;

pub mod prometheus;
pub mod real_cluster;
pub mod teams;

pub const PASSWORD: &str = "a long test password";

pub fn router(pool: PgPool) -> Router {
    router_with(pool, AuthSettings::default())
}

pub fn router_with(pool: PgPool, auth: AuthSettings) -> Router {
    app(
        AppState::with_auth(pool, auth),
        &HttpSettings {
            public_dir: public_fixture(),
            ..Default::default()
        },
    )
}

/// The URL of the test's own database, for the `gpufleet` binary.
pub fn database_url(pool: &PgPool) -> String {
    let options = pool.connect_options();
    format!(
        "postgres://{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().expect("a database name")
    )
}

/// The router over `pool` with these pools and HTTP settings.
pub fn router_on(pool: PgPool, work: backend::work::Work, settings: HttpSettings) -> Router {
    app(
        AppState::with_work(pool, AuthSettings::default(), work),
        &HttpSettings {
            public_dir: public_fixture(),
            ..settings
        },
    )
}

/// A pool whose server is a closed loopback port: the database is down.
pub fn dead_pool() -> PgPool {
    PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(1))
        .connect_lazy("postgres://gpufleet:hunter2@127.0.0.1:1/gpufleet")
        .expect("a well-formed url")
}

/// A public/ folder with a known index.html (and a 4 MiB wasm file), so static routing is tested apart from the build.
/// Written once per test process: tests run in parallel and must never see it half-written.
pub fn public_fixture() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("gpufleet-public-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pkg")).expect("temp dir");
        std::fs::write(
            dir.join("index.html"),
            "<!doctype html><title>gpufleet test</title>",
        )
        .expect("write index");
        std::fs::write(dir.join("pkg/app.js"), "export default 1;").expect("write js");
        // As large as the real one and as incompressible: bytes of an xorshift generator.
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let wasm: Vec<u8> = (0..4 << 20)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state.to_le_bytes()[0]
            })
            .collect();
        std::fs::write(dir.join("pkg/gpufleet_bg.wasm"), wasm).expect("write wasm");
        dir
    })
    .clone()
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json<T: DeserializeOwned>(&self) -> T {
        serde_json::from_slice(&self.body).unwrap_or_else(|err| {
            panic!(
                "not the expected JSON ({err}), status {}: {}",
                self.status,
                self.text()
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn is_json(&self) -> bool {
        self.headers
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v == "application/json")
    }
}

pub async fn send(router: &Router, request: Request<Body>) -> Reply {
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .to_vec();
    Reply {
        status,
        headers,
        body,
    }
}

/// The status and headers of a response whose body may never end (an event stream); the body
/// is read only when the answer is not a stream (errors are short JSON).
pub async fn send_head(router: &Router, request: Request<Body>) -> Reply {
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let streaming = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v == "text/event-stream");
    let body = if streaming {
        Vec::new()
    } else {
        response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
            .to_vec()
    };
    Reply {
        status,
        headers,
        body,
    }
}

/// A request as a browser at `peer` sends it, with the session (cookie and CSRF token) if any.
pub fn request(
    method: Method,
    uri: &str,
    session: Option<&Session>,
    body: Option<serde_json::Value>,
) -> Request<Body> {
    request_from(method, uri, session, body, "127.0.0.1:50000")
}

pub fn request_from(
    method: Method,
    uri: &str,
    session: Option<&Session>,
    body: Option<serde_json::Value>,
    peer: &str,
) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(uri);
    if let Some(s) = session {
        builder = builder
            .header(header::COOKIE, format!("gpufleet_session={}", s.token))
            .header("x-csrf-token", &s.me.csrf_token);
    }
    let body = match body {
        Some(json) => {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
            Body::from(json.to_string())
        }
        None => Body::empty(),
    };
    let mut request = builder.body(body).expect("request");
    let peer: SocketAddr = peer.parse().expect("socket address");
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

pub struct Session {
    pub token: String,
    pub me: Me,
    pub set_cookie: String,
}

/// Logs in through `POST /api/auth/login`; panics unless it succeeds.
pub async fn login(router: &Router, username: &str, password: &str) -> Session {
    let reply = try_login(router, username, password, "127.0.0.1:50000").await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "log-in of {username}: {}",
        reply.text()
    );
    let set_cookie = reply
        .headers
        .get(header::SET_COOKIE)
        .expect("a cookie")
        .to_str()
        .expect("ascii")
        .to_owned();
    let token = set_cookie
        .split(';')
        .next()
        .and_then(|kv| {
            kv.strip_prefix("gpufleet_session=")
                .or_else(|| kv.strip_prefix("__Host-gpufleet_session="))
        })
        .expect("the session cookie")
        .to_owned();
    Session {
        token,
        me: reply.json(),
        set_cookie,
    }
}

pub async fn try_login(router: &Router, username: &str, password: &str, peer: &str) -> Reply {
    let body = serde_json::to_value(LoginRequest {
        username: username.into(),
        password: password.into(),
    })
    .expect("json");
    send(
        router,
        request_from(Method::POST, "/api/auth/login", None, Some(body), peer),
    )
    .await
}

pub async fn team(pool: &PgPool, name: &str) {
    let new = NewTeam {
        name: name.into(),
        namespace: format!("ns-{name}"),
        cost_centre: format!("CC-{name}"),
    };
    backend::accounts::insert_team(pool, &new)
        .await
        .expect("team");
}

pub async fn user(pool: &PgPool, username: &str, roles: &[Role], teams: &[&str]) {
    let new = NewUser {
        username: username.into(),
        display_name: format!("{username} test"),
        password: PASSWORD.into(),
        roles: roles.to_vec(),
        teams: teams.iter().map(|t| (*t).to_owned()).collect(),
    };
    backend::accounts::insert_user(pool, &backend::work::Work::for_this_machine().hashing, &new)
        .await
        .expect("user");
}

/// Runs the `gpufleet` binary on `pool`'s database with `args` (and `stdin`, when given).
pub fn gpufleet(pool: &PgPool, args: &[&str], stdin: Option<&str>) -> std::process::Output {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .args(args)
        .env("DATABASE_URL", database_url(pool))
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run gpufleet");
    if let Some(text) = stdin {
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), text.as_bytes())
            .expect("write stdin");
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("gpufleet exits")
}

/// The inventory as stored.
pub async fn stored_inventory(pool: &PgPool) -> shared::inventory::Inventory {
    let mut conn = pool.acquire().await.expect("a connection");
    backend::fleet::db::read_inventory(&mut conn)
        .await
        .expect("the inventory")
}

/// Applies `wanted` as the console's import and returns what changed (the lines that are not
/// "keep"); the export then is `wanted` normalised, and applying it again changes nothing.
pub async fn inventory_applied(
    pool: &PgPool,
    wanted: &shared::inventory::Inventory,
) -> Vec<String> {
    use backend::{audit::Actor, fleet::inventory};
    let applied = inventory::apply(pool, wanted, Actor::Console, false)
        .await
        .expect("apply");
    let exported = stored_inventory(pool).await;
    assert_eq!(exported, wanted.normalised());
    let again = inventory::apply(pool, &exported, Actor::Console, false)
        .await
        .expect("apply again");
    assert!(!again.applied, "{:?}", again.changes);
    applied
        .changes
        .into_iter()
        .filter(|c| !c.starts_with("keep"))
        .collect()
}
