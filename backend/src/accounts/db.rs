//! The accounts' SQL: `users`, `user_roles`, `teams`, `team_members`, read through the
//! `user_profiles` view; and ending a user's sessions when they are disabled or reset.

use shared::accounts::{Team, User};
use sqlx::PgExecutor;

/// A user with roles and teams, from the `user_profiles` view.
pub struct UserRow {
    pub user_id: i64,
    pub username: String,
    pub display_name: String,
    pub roles: Vec<String>,
    pub teams: Vec<String>,
    pub disabled: bool,
}

impl TryFrom<UserRow> for User {
    type Error = crate::error::Error;

    fn try_from(row: UserRow) -> crate::error::Result<Self> {
        Ok(User {
            roles: super::parse_roles(&row.roles)?,
            username: row.username,
            display_name: row.display_name,
            teams: row.teams,
            disabled: row.disabled,
        })
    }
}

/// All users, or the one named `only`.
pub async fn users(db: impl PgExecutor<'_>, only: Option<&str>) -> sqlx::Result<Vec<UserRow>> {
    sqlx::query_as!(
        UserRow,
        r#"select user_id as "user_id!", username as "username!", display_name as "display_name!",
                  disabled as "disabled!", roles as "roles!", teams as "teams!"
           from user_profiles
           where $1::text is null or username = $1
           order by username"#,
        only
    )
    .fetch_all(db)
    .await
}

pub async fn get_user(db: impl PgExecutor<'_>, username: &str) -> sqlx::Result<Option<UserRow>> {
    Ok(users(db, Some(username)).await?.pop())
}

pub async fn user_id(db: impl PgExecutor<'_>, username: &str) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!("select id from users where username = $1", username)
        .fetch_optional(db)
        .await
}

/// Whether `username` is a local account (it has a password), not one the auth proxy made.
pub async fn is_local(db: impl PgExecutor<'_>, username: &str) -> sqlx::Result<bool> {
    Ok(sqlx::query_scalar!(
        r#"select password_hash is not null as "local!" from users where username = $1"#,
        username
    )
    .fetch_optional(db)
    .await?
    .unwrap_or(false))
}

pub async fn count_users(db: impl PgExecutor<'_>) -> sqlx::Result<i64> {
    sqlx::query_scalar!(r#"select count(*) as "count!" from users"#)
        .fetch_one(db)
        .await
}

/// Inserts a user; `None` when the username is taken.
pub async fn insert_user(
    db: impl PgExecutor<'_>,
    username: &str,
    display_name: &str,
    password_hash: Option<&str>,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        "insert into users (username, display_name, password_hash) values ($1, $2, $3)
         on conflict (username) do nothing returning id",
        username,
        display_name,
        password_hash,
    )
    .fetch_optional(db)
    .await
}

pub async fn update_user(
    db: impl PgExecutor<'_>,
    user_id: i64,
    display_name: Option<&str>,
    disabled: Option<bool>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "update users set display_name = coalesce($2, display_name), disabled = coalesce($3, disabled)
         where id = $1",
        user_id,
        display_name,
        disabled,
    )
    .execute(db)
    .await?;
    Ok(())
}

pub async fn set_password(
    db: impl PgExecutor<'_>,
    user_id: i64,
    password_hash: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "update users set password_hash = $2 where id = $1",
        user_id,
        password_hash
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Replaces the user's roles.
pub async fn set_roles(
    db: impl PgExecutor<'_>,
    user_id: i64,
    roles: &[String],
) -> sqlx::Result<()> {
    sqlx::query!(
        "with gone as (delete from user_roles where user_id = $1 and role <> all($2))
         insert into user_roles (user_id, role) select $1, unnest($2::text[])
         on conflict do nothing",
        user_id,
        roles,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The names in `teams` that name no team.
pub async fn unknown_teams(db: impl PgExecutor<'_>, teams: &[String]) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        r#"select name as "name!" from unnest($1::text[]) as given(name)
           where not exists (select 1 from teams t where t.name = given.name)"#,
        teams
    )
    .fetch_all(db)
    .await
}

/// Replaces the user's team memberships (names must exist; see [`unknown_teams`]).
pub async fn set_teams(
    db: impl PgExecutor<'_>,
    user_id: i64,
    teams: &[String],
) -> sqlx::Result<()> {
    sqlx::query!(
        "with gone as (
             delete from team_members m using teams t
             where m.team_id = t.id and m.user_id = $1 and t.name <> all($2)
         )
         insert into team_members (team_id, user_id)
         select t.id, $1 from teams t where t.name = any($2)
         on conflict do nothing",
        user_id,
        teams,
    )
    .execute(db)
    .await?;
    Ok(())
}

pub struct TeamRow {
    pub name: String,
    pub namespace: String,
    pub cost_centre: String,
    pub members: Vec<String>,
}

impl From<TeamRow> for Team {
    fn from(row: TeamRow) -> Self {
        Team {
            name: row.name,
            namespace: row.namespace,
            cost_centre: row.cost_centre,
            members: row.members,
        }
    }
}

/// Teams, all of them or only those named in `only`.
pub async fn list_teams(
    db: impl PgExecutor<'_>,
    only: Option<&[String]>,
) -> sqlx::Result<Vec<TeamRow>> {
    sqlx::query_as!(
        TeamRow,
        r#"select t.name, t.namespace, t.cost_centre,
                  array(select u.username from team_members m join users u on u.id = m.user_id
                        where m.team_id = t.id order by u.username) as "members!"
           from teams t
           where $1::text[] is null or t.name = any($1)
           order by t.name"#,
        only,
    )
    .fetch_all(db)
    .await
}

pub async fn count_teams(db: impl PgExecutor<'_>) -> sqlx::Result<i64> {
    sqlx::query_scalar!(r#"select count(*) as "count!" from teams"#)
        .fetch_one(db)
        .await
}

/// Inserts a team; `false` when the name or the namespace is taken.
pub async fn insert_team(
    db: impl PgExecutor<'_>,
    name: &str,
    namespace: &str,
    cost_centre: &str,
) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "insert into teams (name, namespace, cost_centre) values ($1, $2, $3) on conflict do nothing",
        name,
        namespace,
        cost_centre,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Updates a team; `None` when no team has that name.
pub async fn update_team(
    db: impl PgExecutor<'_>,
    name: &str,
    namespace: Option<&str>,
    cost_centre: Option<&str>,
) -> sqlx::Result<Option<()>> {
    let done = sqlx::query!(
        "update teams set namespace = coalesce($2, namespace), cost_centre = coalesce($3, cost_centre)
         where name = $1",
        name,
        namespace,
        cost_centre,
    )
    .execute(db)
    .await?;
    Ok((done.rows_affected() == 1).then_some(()))
}

/// Adds a member (again is fine); `false` when the team or the user does not exist.
pub async fn add_member(db: impl PgExecutor<'_>, team: &str, username: &str) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "insert into team_members (team_id, user_id)
         select t.id, u.id from teams t, users u where t.name = $1 and u.username = $2
         on conflict (team_id, user_id) do update set created_at = team_members.created_at",
        team,
        username,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn remove_member(
    db: impl PgExecutor<'_>,
    team: &str,
    username: &str,
) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "delete from team_members m using teams t, users u
         where m.team_id = t.id and m.user_id = u.id and t.name = $1 and u.username = $2",
        team,
        username,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Ends every session of a user (disabled, or password reset).
pub async fn end_sessions(db: impl PgExecutor<'_>, user_id: i64) -> sqlx::Result<()> {
    sqlx::query!("delete from sessions where user_id = $1", user_id)
        .execute(db)
        .await?;
    Ok(())
}
