//! Users and teams: what admins manage (`/api/users`, `/api/teams`), what the CLI creates, and
//! the demo accounts.
//!
//! Invariants: usernames are lower-case; a team's name and namespace are DNS labels; an admin
//! cannot lock themself out (disable themself or drop their own admin role); disabling a user
//! or resetting their password ends their sessions.

pub mod cli;
pub mod db;

use axum::{
    Extension, Json,
    extract::{Path, State},
    http::{Method, StatusCode},
};
use shared::{
    FieldError,
    accounts::{self, NewTeam, NewUser, PasswordReset, Role, Team, TeamPatch, User, UserPatch},
};
use sqlx::PgPool;

use crate::{
    access::{Access, Caller},
    app::{Api, AppState},
    error::{Error, Result},
    json::ApiJson,
    password, work,
};

const ADMIN: &[Role] = &[Role::Admin];
/// Roles that see every team.
const SEE_ALL_TEAMS: &[Role] = &[Role::Approver, Role::Finance, Role::Admin];

pub fn api() -> Api {
    Api::default()
        .route(Method::GET, "/users", Access::Roles(ADMIN), list_users)
        .route(Method::POST, "/users", Access::Roles(ADMIN), create_user)
        .route(
            Method::PATCH,
            "/users/{username}",
            Access::Roles(ADMIN),
            update_user,
        )
        .route(
            Method::POST,
            "/users/{username}/password",
            Access::Roles(ADMIN),
            reset_password,
        )
        .route(Method::GET, "/teams", Access::SignedIn, list_teams)
        .route(Method::POST, "/teams", Access::Roles(ADMIN), create_team)
        .route(
            Method::GET,
            "/teams/{team}",
            Access::TeamOr(SEE_ALL_TEAMS),
            get_team,
        )
        .route(
            Method::PATCH,
            "/teams/{team}",
            Access::Roles(ADMIN),
            update_team,
        )
        .route(
            Method::PUT,
            "/teams/{team}/members/{username}",
            Access::Roles(ADMIN),
            add_member,
        )
        .route(
            Method::DELETE,
            "/teams/{team}/members/{username}",
            Access::Roles(ADMIN),
            remove_member,
        )
}

/// A user the auth proxy vouches for, with the roles and teams its groups give: created on
/// first sight, kept in step afterwards; teams that do not exist are left out. `None` for a
/// disabled user.
pub async fn provision(
    pool: &PgPool,
    username: &str,
    roles: &[String],
    teams: &[String],
) -> Result<Option<db::UserRow>> {
    let unknown = db::unknown_teams(pool, teams).await?;
    let teams: Vec<String> = teams
        .iter()
        .filter(|t| !unknown.contains(t))
        .cloned()
        .collect();
    if roles.is_empty() && teams.is_empty() {
        tracing::warn!(
            username,
            "auth proxy: no group maps to a role or a team; refused"
        );
        return Err(Error::Forbidden(
            "your groups at the sign-in proxy map to no role or team in gpufleet: ask an admin to map one",
        ));
    }
    if db::is_local(pool, username).await? {
        tracing::warn!(
            username,
            "auth proxy: the name is a local account's; refused"
        );
        return Err(Error::Forbidden(
            "this name belongs to a local account, which the sign-in proxy cannot take over: an admin renames one of the two",
        ));
    }
    match db::get_user(pool, username).await? {
        Some(user) if user.disabled => {
            tracing::warn!(
                username,
                "the auth proxy vouched for a disabled user; refused"
            );
            return Ok(None);
        }
        Some(user) if user.roles == roles && user.teams == teams => return Ok(Some(user)),
        _ => {}
    }
    let mut tx = pool.begin().await?;
    let user_id = match db::user_id(&mut *tx, username).await? {
        Some(id) => id,
        None => db::insert_user(&mut *tx, username, "", None)
            .await?
            .ok_or_else(|| {
                Error::Conflict("the user was created concurrently; retry".to_owned())
            })?,
    };
    db::set_roles(&mut *tx, user_id, roles).await?;
    db::set_teams(&mut *tx, user_id, &teams).await?;
    tx.commit().await?;
    tracing::info!(
        username,
        ?roles,
        ?teams,
        "auth proxy: user provisioned or updated"
    );
    Ok(db::get_user(pool, username).await?)
}

/// Roles as stored (text) to the shared enum. A check constraint keeps unknown text out; should
/// one appear anyway (a newer schema, a hand edit), it is an error, never a dropped permission.
pub fn parse_roles(roles: &[String]) -> Result<Vec<Role>> {
    roles
        .iter()
        .map(|r| {
            Role::parse(r).ok_or_else(|| {
                Error::Internal(format!(
                    "the database holds a role this build does not know: {r:?}"
                ))
            })
        })
        .collect()
}

fn role_names(roles: &[Role]) -> Vec<String> {
    let mut names: Vec<String> = roles.iter().map(|r| r.as_str().to_owned()).collect();
    names.sort();
    names.dedup();
    names
}

fn invalid_if_any(errors: Vec<FieldError>) -> Result<()> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Invalid(errors))
    }
}

async fn list_users(State(state): State<AppState>) -> Result<Json<Vec<User>>> {
    let users = db::users(&state.pool, None).await?;
    let users = users
        .into_iter()
        .map(User::try_from)
        .collect::<Result<_>>()?;
    Ok(Json(users))
}

async fn create_user(
    State(state): State<AppState>,
    ApiJson(new): ApiJson<NewUser>,
) -> Result<(StatusCode, Json<User>)> {
    let user = insert_user(&state.pool, &state.work.hashing, &new).await?;
    tracing::info!(username = user.username, roles = ?user.roles, "user created");
    Ok((StatusCode::CREATED, Json(user)))
}

/// Validates and creates a user (the API and the CLI both come here); the password is hashed
/// on `hashing`.
pub async fn insert_user(pool: &PgPool, hashing: &work::Pool, new: &NewUser) -> Result<User> {
    new.validate().map_err(Error::Invalid)?;
    let plain = new.password.clone();
    let hash = hashing.run(move |_| password::hash(&plain)).await??;
    let mut tx = pool.begin().await?;
    check_teams_exist(&mut tx, &new.teams, "teams").await?;
    let user_id = db::insert_user(&mut *tx, &new.username, &new.display_name, Some(&hash))
        .await?
        .ok_or_else(|| Error::Conflict(format!("the username {:?} is taken", new.username)))?;
    db::set_roles(&mut *tx, user_id, &role_names(&new.roles)).await?;
    db::set_teams(&mut *tx, user_id, &new.teams).await?;
    let user = db::get_user(&mut *tx, &new.username)
        .await?
        .ok_or(Error::NotFound)?;
    tx.commit().await?;
    user.try_into()
}

async fn check_teams_exist(
    tx: &mut sqlx::PgConnection,
    teams: &[String],
    path: &str,
) -> Result<()> {
    let unknown = db::unknown_teams(&mut *tx, teams).await?;
    let errors = teams
        .iter()
        .enumerate()
        .filter(|(_, t)| unknown.contains(t))
        .map(|(i, t)| FieldError {
            path: format!("{path}[{i}]"),
            message: format!("no team is named {t:?}"),
        })
        .collect();
    invalid_if_any(errors)
}

async fn update_user(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(username): Path<String>,
    ApiJson(patch): ApiJson<UserPatch>,
) -> Result<Json<User>> {
    if username == caller.username {
        if patch.disabled == Some(true) {
            return Err(Error::Conflict("you cannot disable yourself".to_owned()));
        }
        if patch
            .roles
            .as_ref()
            .is_some_and(|roles| !roles.contains(&Role::Admin))
        {
            return Err(Error::Conflict(
                "you cannot remove your own admin role".to_owned(),
            ));
        }
    }
    patch.validate().map_err(Error::Invalid)?;
    let mut tx = state.pool.begin().await?;
    let user_id = db::user_id(&mut *tx, &username)
        .await?
        .ok_or(Error::NotFound)?;
    db::update_user(
        &mut *tx,
        user_id,
        patch.display_name.as_deref(),
        patch.disabled,
    )
    .await?;
    if let Some(roles) = &patch.roles {
        db::set_roles(&mut *tx, user_id, &role_names(roles)).await?;
    }
    if let Some(teams) = &patch.teams {
        check_teams_exist(&mut tx, teams, "teams").await?;
        db::set_teams(&mut *tx, user_id, teams).await?;
    }
    if patch.disabled == Some(true) {
        db::end_sessions(&mut *tx, user_id).await?;
    }
    let user = db::get_user(&mut *tx, &username)
        .await?
        .ok_or(Error::NotFound)?;
    tx.commit().await?;
    tracing::info!(username, by = caller.username, "user updated");
    Ok(Json(user.try_into()?))
}

async fn reset_password(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(username): Path<String>,
    ApiJson(body): ApiJson<PasswordReset>,
) -> Result<StatusCode> {
    set_password(&state.pool, &state.work.hashing, &username, &body.password).await?;
    tracing::info!(username, by = caller.username, "password reset");
    Ok(StatusCode::NO_CONTENT)
}

/// Sets a new password and ends the user's sessions (the API and the CLI both come here).
pub async fn set_password(
    pool: &PgPool,
    hashing: &work::Pool,
    username: &str,
    password: &str,
) -> Result<()> {
    PasswordReset {
        password: password.to_owned(),
    }
    .validate()
    .map_err(Error::Invalid)?;
    let plain = password.to_owned();
    let hash = hashing.run(move |_| password::hash(&plain)).await??;
    let mut tx = pool.begin().await?;
    let user_id = db::user_id(&mut *tx, username)
        .await?
        .ok_or(Error::NotFound)?;
    db::set_password(&mut *tx, user_id, &hash).await?;
    db::end_sessions(&mut *tx, user_id).await?;
    tx.commit().await?;
    Ok(())
}

async fn list_teams(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Vec<Team>>> {
    // Everyone else sees only their own teams.
    let only = (!caller.has_any(SEE_ALL_TEAMS)).then_some(caller.teams.as_slice());
    let teams = db::list_teams(&state.pool, only).await?;
    Ok(Json(teams.into_iter().map(Team::from).collect()))
}

async fn get_team(State(state): State<AppState>, Path(team): Path<String>) -> Result<Json<Team>> {
    let mut teams = db::list_teams(&state.pool, Some(std::slice::from_ref(&team))).await?;
    teams.pop().map(|t| Json(t.into())).ok_or(Error::NotFound)
}

async fn create_team(
    State(state): State<AppState>,
    ApiJson(new): ApiJson<NewTeam>,
) -> Result<(StatusCode, Json<Team>)> {
    let team = insert_team(&state.pool, &new).await?;
    tracing::info!(team = team.name, "team created");
    Ok((StatusCode::CREATED, Json(team)))
}

pub async fn insert_team(pool: &PgPool, new: &NewTeam) -> Result<Team> {
    new.validate().map_err(Error::Invalid)?;
    if !db::insert_team(pool, &new.name, &new.namespace, new.cost_centre.trim()).await? {
        return Err(Error::Conflict(format!(
            "a team named {:?} or using the namespace {:?} exists",
            new.name, new.namespace
        )));
    }
    Ok(Team {
        name: new.name.clone(),
        namespace: new.namespace.clone(),
        cost_centre: new.cost_centre.trim().to_owned(),
        members: Vec::new(),
    })
}

async fn update_team(
    State(state): State<AppState>,
    Path(team): Path<String>,
    ApiJson(patch): ApiJson<TeamPatch>,
) -> Result<Json<Team>> {
    patch.validate().map_err(Error::Invalid)?;
    let updated = db::update_team(
        &state.pool,
        &team,
        patch.namespace.as_deref(),
        patch.cost_centre.as_deref().map(str::trim),
    )
    .await
    .map_err(|err| match &err {
        sqlx::Error::Database(e) if e.is_unique_violation() => {
            Error::Conflict("another team uses that namespace".to_owned())
        }
        _ => Error::Database(err),
    })?;
    updated.ok_or(Error::NotFound)?;
    get_team(State(state), Path(team)).await
}

async fn add_member(
    State(state): State<AppState>,
    Path((team, username)): Path<(String, String)>,
) -> Result<StatusCode> {
    if db::add_member(&state.pool, &team, &username).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Error::NotFound)
    }
}

async fn remove_member(
    State(state): State<AppState>,
    Path((team, username)): Path<(String, String)>,
) -> Result<StatusCode> {
    if db::remove_member(&state.pool, &team, &username).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Error::NotFound)
    }
}

/// The demo accounts: one user per role, in two teams. Created only in a database without any
/// user (real installs start with none); the passwords are random and returned once.
pub async fn load_demo(
    pool: &PgPool,
    hashing: &work::Pool,
) -> Result<Option<Vec<(String, String)>>> {
    if db::count_users(pool).await? > 0 {
        return Ok(None);
    }
    if db::count_teams(pool).await? == 0 {
        for (name, cost_centre) in [("research", "CC-1001"), ("search", "CC-1002")] {
            let team = NewTeam {
                name: name.into(),
                namespace: format!("team-{name}"),
                cost_centre: cost_centre.into(),
            };
            insert_team(pool, &team).await?;
        }
    }
    let people: [(&str, &str, Role, &[&str]); 5] = [
        ("rita", "Rita Requester", Role::Requester, &["research"]),
        ("sam", "Sam Requester", Role::Requester, &["search"]),
        ("alex", "Alex Approver", Role::Approver, &[]),
        ("fiona", "Fiona Finance", Role::Finance, &[]),
        ("ada", "Ada Admin", Role::Admin, &[]),
    ];
    let mut credentials = Vec::new();
    for (username, display_name, role, teams) in people {
        let password = password::generate();
        let new = NewUser {
            username: username.into(),
            display_name: display_name.into(),
            password: password.clone(),
            roles: vec![role],
            teams: teams.iter().map(|t| (*t).to_owned()).collect(),
        };
        insert_user(pool, hashing, &new).await?;
        credentials.push((
            format!("{username} ({})", accounts::Role::as_str(role)),
            password,
        ));
    }
    Ok(Some(credentials))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_role_in_the_database_is_an_error_not_a_dropped_permission() {
        let stored = |roles: &[&str]| roles.iter().map(|r| (*r).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            parse_roles(&stored(&["admin", "finance"])).expect("known"),
            [Role::Admin, Role::Finance]
        );
        let err = parse_roles(&stored(&["admin", "root"])).expect_err("unknown");
        assert!(err.to_string().contains("\"root\""), "{err}");
    }
}
