//! Who is calling, and may they: log-in with server-side sessions, the trusted auth-proxy
//! mode, CSRF defence, failed-log-in throttling, and the one access check every `/api` route
//! goes through.
//!
//! Invariants:
//! - every `/api` route declares an [`Access`] (see `app::Api`); a route without one cannot be
//!   added;
//! - a denied request never reaches its handler, so it returns no data, not even a count;
//! - the session cookie holds a random token; the database keeps only its SHA-256;
//! - passwords are argon2id hashes; no password or hash is ever logged or returned;
//! - `X-Forwarded-User`/`X-Forwarded-Groups` count only in proxy mode and only from a trusted
//!   proxy address; from anywhere else they are ignored and logged.

mod db;
pub mod password;

use std::{
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use axum::{
    Extension, Json,
    extract::{ConnectInfo, FromRequestParts, RawPathParams, Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header, request::Parts},
    middleware::Next,
    response::{IntoResponse, Response},
};
use ipnet::IpNet;
use sha2::{Digest, Sha256};
use shared::auth::{LoginRequest, Me, Role};

use crate::{
    accounts::{self, db::UserRow},
    app::{Api, AppState},
    error::{Error, Result},
    json::ApiJson,
};

pub const SESSION_COOKIE: &str = "gpufleet_session";
pub const CSRF_HEADER: &str = "x-csrf-token";
const FORWARDED_USER: &str = "x-forwarded-user";
const FORWARDED_GROUPS: &str = "x-forwarded-groups";

/// Failed log-ins allowed per account, then per address, within [`THROTTLE_WINDOW`].
pub const MAX_FAILURES_PER_ACCOUNT: i64 = 5;
pub const MAX_FAILURES_PER_ADDRESS: i64 = 20;
pub const THROTTLE_WINDOW: Duration = Duration::from_secs(15 * 60);

/// What a route needs from its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, signed in or not (health, log-in).
    Public,
    /// Any signed-in user.
    SignedIn,
    /// A signed-in user holding one of these roles.
    Roles(&'static [Role]),
    /// A member of the team named by the path's `{team}`, or a holder of one of these roles.
    TeamOr(&'static [Role]),
}

/// The signed-in user behind a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user_id: i64,
    pub username: String,
    pub display_name: String,
    pub roles: Vec<Role>,
    pub teams: Vec<String>,
    csrf_token: String,
    /// The session's token hash; `None` for auth-proxy callers.
    session: Option<Vec<u8>>,
}

impl Caller {
    pub fn has_any(&self, roles: &[Role]) -> bool {
        roles.iter().any(|r| self.roles.contains(r))
    }

    pub fn me(&self) -> Me {
        Me {
            username: self.username.clone(),
            display_name: self.display_name.clone(),
            roles: self.roles.clone(),
            teams: self.teams.clone(),
            csrf_token: self.csrf_token.clone(),
        }
    }
}

/// The client's address: the peer, or what a trusted proxy says in `X-Forwarded-For`.
#[derive(Debug, Clone)]
pub struct ClientAddr(pub String);

/// Set when looking the caller up failed (the database is down): such requests get 503.
#[derive(Debug, Clone, Copy)]
struct IdentifyFailed;

/// Auth configuration, from the command line.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    pub session_idle: Duration,
    pub session_absolute: Duration,
    /// Always mark the cookie `Secure` (it is anyway when a trusted proxy says the request came
    /// over https).
    pub secure_cookies: bool,
    pub trusted_proxies: Vec<IpNet>,
    /// `Some` when the trusted auth-proxy mode is on.
    pub proxy: Option<ProxySettings>,
    /// The CSRF token of auth-proxy callers, random per process.
    pub proxy_csrf_token: String,
}

#[derive(Debug, Clone)]
pub struct ProxySettings {
    /// `(group, role)`: members of the group hold the role.
    pub role_groups: Vec<(String, Role)>,
    /// Groups named `<prefix><team>` make their members members of that team.
    pub team_group_prefix: String,
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            session_idle: Duration::from_secs(30 * 60),
            session_absolute: Duration::from_secs(12 * 3600),
            secure_cookies: false,
            trusted_proxies: Vec::new(),
            proxy: None,
            proxy_csrf_token: password::random_hex(32),
        }
    }
}

impl AuthSettings {
    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|net| net.contains(&ip))
    }
}

/// Parses `10.0.0.0/8,127.0.0.1` into networks (a bare address is a /32 or /128).
pub fn parse_networks(list: &str) -> std::result::Result<Vec<IpNet>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<IpNet>()
                .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| format!("{s:?} is not an IP address or CIDR network"))
        })
        .collect()
}

/// Parses `admin=platform-admins,finance=finance` into `(group, role)` pairs.
pub fn parse_role_groups(list: &str) -> std::result::Result<Vec<(String, Role)>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|pair| {
            let (role, group) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not role=group"))?;
            let role = Role::parse(role.trim()).ok_or_else(|| format!("{role:?} is not a role"))?;
            Ok((group.trim().to_owned(), role))
        })
        .collect()
}

pub fn api() -> Api {
    Api::default()
        .route(Method::POST, "/auth/login", Access::Public, login)
        .route(Method::POST, "/auth/logout", Access::SignedIn, logout)
        .route(Method::GET, "/auth/me", Access::SignedIn, me)
        .route(Method::GET, "/auth/session", Access::Public, session)
}

/// Global `/api` middleware: finds the caller (auth proxy or session cookie) and the client's
/// address, and puts them in the request's extensions. It never rejects; [`authorize`] does.
pub async fn identify(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let trusted_peer = peer.is_some_and(|ip| state.auth.is_trusted(ip));
    let address = client_address(peer, trusted_peer, request.headers());
    match resolve(&state, peer, trusted_peer, request.headers()).await {
        Ok(Some(caller)) => {
            request.extensions_mut().insert(caller);
        }
        Ok(None) => {}
        Err(err) => {
            tracing::error!(%err, "identifying the caller failed");
            request.extensions_mut().insert(IdentifyFailed);
        }
    }
    request.extensions_mut().insert(ClientAddr(address));
    next.run(request).await
}

fn client_address(peer: Option<IpAddr>, trusted_peer: bool, headers: &HeaderMap) -> String {
    let forwarded = headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.trim().parse::<IpAddr>().ok());
    match (peer, forwarded) {
        (_, Some(ip)) if trusted_peer => ip.to_string(),
        (Some(ip), _) => ip.to_string(),
        (None, _) => "unknown".to_owned(),
    }
}

async fn resolve(
    state: &AppState,
    peer: Option<IpAddr>,
    trusted_peer: bool,
    headers: &HeaderMap,
) -> Result<Option<Caller>> {
    if headers.contains_key(FORWARDED_USER) {
        match &state.auth.proxy {
            Some(proxy) if trusted_peer => return proxy_caller(state, proxy, headers).await,
            Some(_) => tracing::warn!(
                ?peer,
                "ignored X-Forwarded-User from an address that is not a trusted proxy"
            ),
            None => tracing::warn!(
                ?peer,
                "ignored X-Forwarded-User: the auth-proxy mode is off"
            ),
        }
    }
    let Some(token) = cookie(headers, SESSION_COOKIE) else {
        return Ok(None);
    };
    let hash = sha256(token);
    let idle_s = state.auth.session_idle.as_secs_f64();
    let Some((user, csrf_token, stale)) = db::session_user(&state.pool, &hash, idle_s).await?
    else {
        return Ok(None);
    };
    if stale {
        db::touch_session(&state.pool, &hash).await?;
    }
    caller_of(user, csrf_token, Some(hash)).map(Some)
}

fn caller_of(user: UserRow, csrf_token: String, session: Option<Vec<u8>>) -> Result<Caller> {
    Ok(Caller {
        roles: accounts::parse_roles(&user.roles)?,
        user_id: user.user_id,
        username: user.username,
        display_name: user.display_name,
        teams: user.teams,
        csrf_token,
        session,
    })
}

/// The auth proxy vouches for the user on every request: create the user on first sight and
/// keep roles and teams in step with the groups.
async fn proxy_caller(
    state: &AppState,
    proxy: &ProxySettings,
    headers: &HeaderMap,
) -> Result<Option<Caller>> {
    let username = header_text(headers, FORWARDED_USER).trim().to_lowercase();
    let mut problems = Vec::new();
    shared::auth::validate_username("X-Forwarded-User", &username, &mut problems);
    if !problems.is_empty() {
        tracing::warn!(
            username,
            "ignored an auth-proxy user name that is not a valid username"
        );
        return Ok(None);
    }
    let groups: Vec<String> = header_text(headers, FORWARDED_GROUPS)
        .split(',')
        .map(|g| g.trim().to_owned())
        .filter(|g| !g.is_empty())
        .collect();
    let mut roles: Vec<String> = proxy
        .role_groups
        .iter()
        .filter(|(group, _)| groups.contains(group))
        .map(|(_, role)| role.as_str().to_owned())
        .collect();
    roles.sort();
    roles.dedup();
    let mut teams: Vec<String> = groups
        .iter()
        .filter_map(|g| g.strip_prefix(&proxy.team_group_prefix))
        .map(str::to_owned)
        .collect();
    teams.sort();
    teams.dedup();
    let unknown = accounts::db::unknown_teams(&state.pool, &teams).await?;
    teams.retain(|t| !unknown.contains(t));

    let proxy_caller = |user: UserRow| caller_of(user, state.auth.proxy_csrf_token.clone(), None);
    match accounts::db::get_user(&state.pool, &username).await? {
        Some(user) if user.disabled => {
            tracing::warn!(
                username,
                "the auth proxy vouched for a disabled user; refused"
            );
            return Ok(None);
        }
        Some(user) if user.roles == roles && user.teams == teams => {
            return proxy_caller(user).map(Some);
        }
        _ => {}
    }
    let mut tx = state.pool.begin().await?;
    let user_id = match accounts::db::user_id(&mut *tx, &username).await? {
        Some(id) => id,
        None => {
            let id = accounts::db::insert_user(&mut *tx, &username, "", None).await?;
            id.ok_or_else(|| {
                Error::Conflict("the user was created concurrently; retry".to_owned())
            })?
        }
    };
    accounts::db::set_roles(&mut *tx, user_id, &roles).await?;
    accounts::db::set_teams(&mut *tx, user_id, &teams).await?;
    tx.commit().await?;
    tracing::info!(
        username,
        ?roles,
        ?teams,
        "auth proxy: user provisioned or updated"
    );
    accounts::db::get_user(&state.pool, &username)
        .await?
        .map(proxy_caller)
        .transpose()
}

/// Per-route check, run after routing (so the path's `{team}` is known); see [`Access`].
pub async fn authorize(access: Access, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    if let Err(err) = check(access, &mut parts).await {
        return err.into_response();
    }
    next.run(Request::from_parts(parts, body)).await
}

async fn check(access: Access, parts: &mut Parts) -> Result<()> {
    let changes_state = !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
    if changes_state && !same_origin(&parts.headers) {
        return Err(Error::Forbidden("cross-site request refused"));
    }
    if access == Access::Public {
        return Ok(());
    }
    if parts.extensions.get::<IdentifyFailed>().is_some() {
        return Err(Error::Unavailable);
    }
    let caller = parts
        .extensions
        .get::<Caller>()
        .ok_or(Error::Unauthenticated("please log in"))?;
    if changes_state {
        let sent = parts
            .headers
            .get(CSRF_HEADER)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        if caller.csrf_token.is_empty() || !constant_time_eq(sent, caller.csrf_token.as_bytes()) {
            return Err(Error::Forbidden(
                "missing or wrong X-CSRF-Token; reload the page",
            ));
        }
    }
    let allowed = match access {
        Access::Public | Access::SignedIn => true,
        Access::Roles(roles) => caller.has_any(roles),
        Access::TeamOr(roles) => {
            caller.has_any(roles) || {
                let caller = caller.clone();
                let params = RawPathParams::from_request_parts(parts, &())
                    .await
                    .map_err(|_| Error::NotFound)?;
                params
                    .iter()
                    .any(|(key, value)| key == "team" && caller.teams.iter().any(|t| t == value))
            }
        }
    };
    if allowed {
        Ok(())
    } else {
        Err(Error::Forbidden("you are not allowed to do this"))
    }
}

/// A request whose `Origin` names another host is cross-site. Browsers send `Origin` on every
/// state-changing fetch; tools that send none are not browsers and carry no ambient cookie risk
/// beyond what the CSRF token already covers.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let origin_host = origin.split_once("://").map_or("", |(_, rest)| rest);
    !host.is_empty() && origin_host == host
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn sha256(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
        .filter(|v| !v.is_empty())
}

fn session_cookie_header(value: &str, max_age_s: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let cookie = format!(
        "{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{secure}"
    );
    HeaderValue::from_str(&cookie).unwrap_or_else(|_| HeaderValue::from_static("invalid=1"))
}

fn over_tls(state: &AppState, headers: &HeaderMap, peer_trusted: bool) -> bool {
    state.auth.secure_cookies
        || (peer_trusted && header_text(headers, "x-forwarded-proto") == "https")
}

async fn login(
    State(state): State<AppState>,
    Extension(ClientAddr(address)): Extension<ClientAddr>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<LoginRequest>,
) -> Result<Response> {
    let username = body.username.trim().to_lowercase();
    let window_s = THROTTLE_WINDOW.as_secs_f64();
    let (account, from_address) =
        db::recent_failures(&state.pool, &username, &address, window_s).await?;
    if account >= MAX_FAILURES_PER_ACCOUNT || from_address >= MAX_FAILURES_PER_ADDRESS {
        tracing::warn!(username, address, account, from_address, "log-in throttled");
        return Err(Error::TooManyRequests {
            retry_after_s: THROTTLE_WINDOW.as_secs(),
        });
    }
    let credentials = db::credentials(&state.pool, &username).await?;
    let hash = credentials.as_ref().and_then(|c| c.password_hash.clone());
    let password = body.password;
    let verified =
        tokio::task::spawn_blocking(move || password::verify(&password, hash.as_deref()))
            .await
            .map_err(|err| anyhow::anyhow!("password check panicked: {err}"))?;
    let user_id = match credentials {
        Some(c) if verified && !c.disabled => c.user_id,
        _ => {
            db::record_failure(&state.pool, &username, &address).await?;
            tracing::info!(username, address, "failed log-in");
            // The same answer whether the user is unknown, disabled, or the password wrong.
            return Err(Error::Unauthenticated("wrong username or password"));
        }
    };
    db::forget_failures(&state.pool, &username).await?;
    db::prune_failures(&state.pool).await?;
    db::delete_expired_sessions(&state.pool, state.auth.session_idle.as_secs_f64()).await?;

    let token = password::random_hex(32);
    let hash = sha256(&token);
    let csrf = password::random_hex(32);
    let absolute = state.auth.session_absolute;
    db::insert_session(&state.pool, &hash, user_id, &csrf, absolute.as_secs_f64()).await?;
    let user = accounts::db::get_user(&state.pool, &username)
        .await?
        .ok_or(Error::NotFound)?;
    tracing::info!(username, address, "logged in");
    let trusted = peer.is_some_and(|Extension(ConnectInfo(p))| state.auth.is_trusted(p.ip()));
    let cookie = session_cookie_header(
        &token,
        absolute.as_secs(),
        over_tls(&state, &headers, trusted),
    );
    let me = caller_of(user, csrf, Some(hash))?.me();
    Ok(([(header::SET_COOKIE, cookie)], Json(me)).into_response())
}

async fn logout(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Response> {
    if let Some(hash) = &caller.session {
        db::delete_session(&state.pool, hash).await?;
    }
    tracing::info!(username = caller.username, "logged out");
    let expired = session_cookie_header("", 0, state.auth.secure_cookies);
    Ok((StatusCode::NO_CONTENT, [(header::SET_COOKIE, expired)]).into_response())
}

async fn me(Extension(caller): Extension<Caller>) -> Json<Me> {
    Json(caller.me())
}

/// `GET /api/auth/session`: the signed-in user as `/me` gives it, or `null` for a visitor. The
/// console asks this on start, so a visitor's first load logs no failed request.
async fn session(caller: Option<Extension<Caller>>) -> Json<Option<Me>> {
    Json(caller.map(|Extension(caller)| caller.me()))
}

/// Ends every session of a user (disabled, or password reset).
pub async fn end_sessions(db: impl sqlx::PgExecutor<'_>, user_id: i64) -> sqlx::Result<()> {
    db::delete_sessions_of(db, user_id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; gpufleet_session=abc; b=2"),
        );
        assert_eq!(cookie(&headers, SESSION_COOKIE), Some("abc"));
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("gpufleet_session="),
        );
        assert_eq!(cookie(&headers, SESSION_COOKIE), None);
    }

    #[test]
    fn origins_must_match_the_host() {
        let headers = |origin: Option<&'static str>| {
            let mut h = HeaderMap::new();
            h.insert(
                header::HOST,
                HeaderValue::from_static("console.example:8080"),
            );
            if let Some(o) = origin {
                h.insert(header::ORIGIN, HeaderValue::from_static(o));
            }
            h
        };
        assert!(same_origin(&headers(None)));
        assert!(same_origin(&headers(Some("https://console.example:8080"))));
        assert!(!same_origin(&headers(Some("https://evil.example"))));
        assert!(!same_origin(&headers(Some("null"))));
    }

    #[test]
    fn settings_lists_parse_or_explain() {
        let nets = parse_networks("10.0.0.0/8, 127.0.0.1,::1").expect("parses");
        assert_eq!(nets.len(), 3);
        assert!(nets[0].contains(&"10.1.2.3".parse::<IpAddr>().expect("ip")));
        assert!(nets[1].contains(&"127.0.0.1".parse::<IpAddr>().expect("ip")));
        assert!(!nets[1].contains(&"127.0.0.2".parse::<IpAddr>().expect("ip")));
        assert!(parse_networks("10.0.0.0/33").is_err());
        let groups = parse_role_groups("admin=ops, finance = money").expect("parses");
        assert_eq!(
            groups,
            vec![
                ("ops".to_owned(), Role::Admin),
                ("money".to_owned(), Role::Finance)
            ]
        );
        assert!(parse_role_groups("root=ops").is_err());
        assert!(parse_role_groups("admin").is_err());
    }

    #[test]
    fn csrf_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
