//! Who is calling: log-in and log-out with server-side sessions, failed-log-in throttling, and
//! the `identify` middleware that finds the caller (session cookie, or the trusted auth proxy
//! in `proxy.rs`). Settings are in `settings.rs`; whether the caller may use a route is
//! `crate::access`.
//!
//! Invariants:
//! - the session cookie holds a random token; the database keeps only its SHA-256;
//! - passwords are argon2id hashes; no password or hash is ever logged or returned;
//! - `X-Forwarded-User`/`X-Forwarded-Groups` count only in proxy mode and only from a trusted
//!   proxy address; from anywhere else they are ignored and logged.

pub mod db;
mod proxy;
pub mod settings;

use std::{
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use axum::{
    Extension, Json,
    extract::{ConnectInfo, Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use sha2::{Digest, Sha256};
use shared::accounts::{LoginRequest, Me};

use crate::{
    access::{Access, Caller, ClientAddr, IdentifyFailed, Refused, Scheme},
    accounts::{self, db::UserRow},
    app::{Api, AppState},
    error::{Error, Result},
    json::ApiJson,
    password,
};

pub const SESSION_COOKIE: &str = "gpufleet_session";
/// The session cookie's name over TLS: browsers keep a `__Host-` cookie only when it is
/// `Secure`, for `Path=/` and this host alone, so no subdomain or plain-http page can set it.
pub const SECURE_SESSION_COOKIE: &str = "__Host-gpufleet_session";
const FORWARDED_USER: &str = "x-forwarded-user";

/// Failed log-ins allowed per account, then per address, within [`THROTTLE_WINDOW`].
pub const MAX_FAILURES_PER_ACCOUNT: i64 = 5;
pub const MAX_FAILURES_PER_ADDRESS: i64 = 20;
pub const THROTTLE_WINDOW: Duration = Duration::from_secs(15 * 60);

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
        // the auth proxy's user, refused (no mapped group, a local account's name)
        Err(Error::Forbidden(why)) => {
            request.extensions_mut().insert(Refused(why));
        }
        Err(err) => {
            tracing::error!(%err, "identifying the caller failed");
            request.extensions_mut().insert(IdentifyFailed);
        }
    }
    request.extensions_mut().insert(ClientAddr(address));
    let scheme = scheme(&state, &request);
    request.extensions_mut().insert(Scheme(scheme));
    next.run(request).await
}

/// `https` when the request came over TLS here or through a trusted proxy that says it did
/// (`X-Forwarded-Proto`), else `http`.
pub fn scheme(state: &AppState, request: &Request) -> &'static str {
    let trusted_peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .is_some_and(|c| state.auth.is_trusted(c.0.ip()));
    if over_tls(state, request.headers(), trusted_peer) {
        "https"
    } else {
        "http"
    }
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
            Some(proxy) if trusted_peer => return proxy::caller(state, proxy, headers).await,
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
    let Some(token) =
        cookie(headers, SECURE_SESSION_COOKIE).or_else(|| cookie(headers, SESSION_COOKIE))
    else {
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

/// The caller as they stand now, for work that outlives its request (a live stream): `None`
/// once their session has ended (log-out, expiry, a password reset) or they were disabled;
/// else their roles and teams as they are now. It does not keep a session alive: a stream
/// alone is no activity.
pub async fn recheck(state: &AppState, caller: &Caller) -> Result<Option<Caller>> {
    match &caller.session {
        Some(hash) => {
            let idle_s = state.auth.session_idle.as_secs_f64();
            match db::session_user(&state.pool, hash, idle_s).await? {
                Some((user, csrf_token, _)) => {
                    caller_of(user, csrf_token, Some(hash.clone())).map(Some)
                }
                None => Ok(None),
            }
        }
        None => match accounts::db::get_user(&state.pool, &caller.username).await? {
            Some(user) if !user.disabled => {
                caller_of(user, caller.csrf_token.clone(), None).map(Some)
            }
            _ => Ok(None),
        },
    }
}

pub(crate) fn caller_of(
    user: UserRow,
    csrf_token: String,
    session: Option<Vec<u8>>,
) -> Result<Caller> {
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

fn sha256(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

pub(crate) fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
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
    let (name, secure) = if secure {
        (SECURE_SESSION_COOKIE, "; Secure")
    } else {
        (SESSION_COOKIE, "")
    };
    let cookie =
        format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{secure}");
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
    body.validate().map_err(Error::Invalid)?;
    let username = body.username.trim().to_lowercase();
    let window_s = THROTTLE_WINDOW.as_secs_f64();
    // The attempt is counted before the password is checked, under locks on the account and
    // the address, so concurrent attempts cannot all slip under the limit.
    let limits = (MAX_FAILURES_PER_ACCOUNT, MAX_FAILURES_PER_ADDRESS);
    let attempt =
        match db::reserve_attempt(&state.pool, &username, &address, window_s, limits).await? {
            db::Attempt::Reserved(id) => id,
            db::Attempt::Locked => {
                tracing::warn!(username, address, "log-in throttled");
                let wait = THROTTLE_WINDOW.as_secs();
                return Err(Error::caller_limit(
                    format!(
                        "too many failed log-ins; try again in {}",
                        crate::error::wait_in_words(wait)
                    ),
                    wait,
                ));
            }
            // not locked: as many attempts as the limit are in flight; one of them may be right
            db::Attempt::Busy => {
                return Err(Error::caller_limit(
                    "other log-ins to this account are being checked; try again in 1 second",
                    1,
                ));
            }
        };
    let credentials = db::credentials(&state.pool, &username).await?;
    let hash = credentials.as_ref().and_then(|c| c.password_hash.clone());
    let password = body.password;
    let verified = match state
        .work
        .hashing
        .run(move |_| password::verify(&password, hash.as_deref()))
        .await
    {
        Ok(verified) => verified,
        Err(err) => {
            // Not evaluated (too many at once): it does not count.
            db::release_attempt(&state.pool, attempt).await?;
            return Err(err);
        }
    };
    let user_id = match credentials {
        Some(c) if verified && !c.disabled => c.user_id,
        _ => {
            // The reserved attempt stays: it is the failure's record.
            db::settle_failure(&state.pool, attempt).await?;
            tracing::info!(username, address, "failed log-in");
            // The same answer whether the user is unknown, disabled, or the password wrong.
            return Err(Error::Unauthenticated("wrong username or password"));
        }
    };
    db::release_attempt(&state.pool, attempt).await?;
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
    // whichever name the browser holds (the `__Host-` one only takes over TLS)
    let mut response = StatusCode::NO_CONTENT.into_response();
    for secure in [false, true] {
        response
            .headers_mut()
            .append(header::SET_COOKIE, session_cookie_header("", 0, secure));
    }
    Ok(response)
}

async fn me(Extension(caller): Extension<Caller>) -> Json<Me> {
    Json(caller.me())
}

/// `GET /api/auth/session`: the signed-in user as `/me` gives it, or `null` for a visitor. The
/// console asks this on start, so a visitor's first load logs no failed request.
async fn session(caller: Option<Extension<Caller>>) -> Json<Option<Me>> {
    Json(caller.map(|Extension(caller)| caller.me()))
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
}
