//! The trusted auth-proxy mode (e.g. oauth2-proxy): the proxy vouches for the user in
//! `X-Forwarded-User` and `X-Forwarded-Groups`; groups map to roles and teams, and the user is
//! provisioned through `accounts` on first sight.

use axum::http::HeaderMap;

use super::{FORWARDED_USER, caller_of, header_text, settings::ProxySettings};
use crate::{
    access::Caller,
    accounts::{self, db::UserRow},
    app::AppState,
    error::Result,
};

const FORWARDED_GROUPS: &str = "x-forwarded-groups";

/// The auth proxy vouches for the user on every request: create the user on first sight and
/// keep roles and teams in step with the groups.
pub(super) async fn caller(
    state: &AppState,
    proxy: &ProxySettings,
    headers: &HeaderMap,
) -> Result<Option<Caller>> {
    let username = header_text(headers, FORWARDED_USER).trim().to_lowercase();
    let mut problems = Vec::new();
    shared::accounts::validate_username("X-Forwarded-User", &username, &mut problems);
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
    let user = accounts::provision(&state.pool, &username, &roles, &teams).await?;
    user.map(|user: UserRow| {
        let token = state.auth.proxy_csrf_token(user.user_id);
        caller_of(user, token, None)
    })
    .transpose()
}
