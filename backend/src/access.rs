//! Whether the caller may use a route: the one check every `/api` route goes through, with
//! CSRF defence for state-changing requests. Who the caller is comes from `crate::auth`.
//!
//! Invariants:
//! - every `/api` route declares an [`Access`] (see `app::Api`); a route without one cannot be
//!   added;
//! - a denied request never reaches its handler, so it returns no data, not even a count.

use axum::{
    extract::{FromRequestParts, RawPathParams, Request},
    http::{HeaderMap, HeaderValue, Method, header, request::Parts},
    middleware::Next,
    response::{IntoResponse, Response},
};
use shared::accounts::{Me, Role};

use crate::error::{Error, Result};

pub const CSRF_HEADER: &str = "x-csrf-token";

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

impl Access {
    /// Who may call the route, in the words of `docs/api.md`'s route table (a test holds the
    /// table to the router).
    pub fn who(self) -> String {
        let roles = |held: &[Role]| {
            Role::ALL
                .into_iter()
                .filter(|r| held.contains(r))
                .map(Role::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Self::Public => "anyone".to_owned(),
            Self::SignedIn => "signed in".to_owned(),
            Self::Roles(held) => roles(held),
            Self::TeamOr(held) => format!("the team's members, {}", roles(held)),
        }
    }
}

/// The signed-in user behind a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user_id: i64,
    pub username: String,
    pub display_name: String,
    pub roles: Vec<Role>,
    pub teams: Vec<String>,
    pub(crate) csrf_token: String,
    /// The session's token hash; `None` for auth-proxy callers.
    pub(crate) session: Option<Vec<u8>>,
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
pub(crate) struct IdentifyFailed;

/// Set when the auth proxy vouched for someone gpufleet refuses (no mapped group, a local
/// account's name): such requests get 403 with the reason, not a log-in prompt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Refused(pub &'static str);

/// Per-route check, run after routing (so the path's `{team}` is known); see [`Access`].
pub async fn authorize(access: Access, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    if let Err(err) = check(access, &mut parts).await {
        return err.into_response();
    }
    let user = parts.extensions.get::<Caller>().map(|c| c.user_id);
    let request = next.run(Request::from_parts(parts, body));
    match user {
        // heavy work is counted against the user's share (`work`)
        Some(user) => crate::work::as_user(user, request).await,
        None => request.await,
    }
}

async fn check(access: Access, parts: &mut Parts) -> Result<()> {
    let changes_state = !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
    let scheme = parts.extensions.get::<Scheme>().map_or("http", |s| s.0);
    if changes_state && !same_origin(&parts.headers, scheme) {
        return Err(Error::Forbidden("cross-site request refused"));
    }
    if access == Access::Public {
        return Ok(());
    }
    if parts.extensions.get::<IdentifyFailed>().is_some() {
        return Err(Error::Unavailable);
    }
    if let Some(Refused(why)) = parts.extensions.get::<Refused>() {
        return Err(Error::Forbidden(why));
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

/// How the console was reached (`http` or `https`, from the TLS settings and a trusted proxy's
/// `X-Forwarded-Proto`); set by `auth::identify`.
#[derive(Debug, Clone, Copy)]
pub struct Scheme(pub &'static str);

/// A request whose `Origin` is not this console's scheme, host and port is cross-site.
/// Browsers send `Origin` on every state-changing fetch; tools that send none are not browsers
/// and carry no ambient cookie risk beyond what the CSRF token already covers.
fn same_origin(headers: &HeaderMap, scheme: &str) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    !host.is_empty() && origin.eq_ignore_ascii_case(&format!("{scheme}://{host}"))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(same_origin(&headers(None), "https"));
        assert!(same_origin(
            &headers(Some("https://console.example:8080")),
            "https"
        ));
        assert!(same_origin(
            &headers(Some("http://console.example:8080")),
            "http"
        ));
        // Scheme, host and port must all match.
        assert!(!same_origin(
            &headers(Some("http://console.example:8080")),
            "https"
        ));
        assert!(!same_origin(
            &headers(Some("https://console.example:8081")),
            "https"
        ));
        assert!(!same_origin(
            &headers(Some("https://evil.example")),
            "https"
        ));
        assert!(!same_origin(&headers(Some("null")), "https"));
    }

    #[test]
    fn csrf_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
