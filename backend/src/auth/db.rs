use sqlx::PgExecutor;

/// A signed-in user as the access checks need it.
pub struct CallerRow {
    pub user_id: i64,
    pub username: String,
    pub display_name: String,
    pub roles: Vec<String>,
    pub teams: Vec<String>,
    pub csrf_token: Option<String>,
}

/// The live session behind a token hash: not past its absolute expiry, not idle for longer
/// than `idle_s`, and its user not disabled. `stale` says it was last marked seen over a minute
/// ago (see [`touch_session`]).
pub async fn session_caller(
    db: impl PgExecutor<'_>,
    token_sha256: &[u8],
    idle_s: f64,
) -> sqlx::Result<Option<(CallerRow, bool)>> {
    let row = sqlx::query!(
        r#"select u.id as user_id, u.username, u.display_name, s.csrf_token,
                  array(select role from user_roles r where r.user_id = u.id order by role) as "roles!",
                  array(select t.name from team_members m join teams t on t.id = m.team_id
                        where m.user_id = u.id order by t.name) as "teams!",
                  (s.last_seen_at < now() - interval '60 seconds') as "stale!"
           from sessions s join users u on u.id = s.user_id
           where s.token_sha256 = $1 and s.expires_at > now()
             and s.last_seen_at > now() - make_interval(secs => $2)
             and not u.disabled"#,
        token_sha256,
        idle_s,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| {
        let caller = CallerRow {
            user_id: r.user_id,
            username: r.username,
            display_name: r.display_name,
            roles: r.roles,
            teams: r.teams,
            csrf_token: Some(r.csrf_token),
        };
        (caller, r.stale)
    }))
}

/// Marks a session seen now, which pushes its idle expiry back.
pub async fn touch_session(db: impl PgExecutor<'_>, token_sha256: &[u8]) -> sqlx::Result<()> {
    sqlx::query!(
        "update sessions set last_seen_at = now() where token_sha256 = $1",
        token_sha256
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A user by name, with roles and teams (for the auth proxy, which has no session).
pub async fn user_caller(
    db: impl PgExecutor<'_>,
    username: &str,
) -> sqlx::Result<Option<CallerRow>> {
    sqlx::query_as!(
        CallerRow,
        r#"select u.id as user_id, u.username, u.display_name,
                  array(select role from user_roles r where r.user_id = u.id order by role) as "roles!",
                  array(select t.name from team_members m join teams t on t.id = m.team_id
                        where m.user_id = u.id order by t.name) as "teams!",
                  null::text as "csrf_token?"
           from users u where u.username = $1 and not u.disabled"#,
        username,
    )
    .fetch_optional(db)
    .await
}

pub struct Credentials {
    pub user_id: i64,
    pub password_hash: Option<String>,
    pub disabled: bool,
}

pub async fn credentials(
    db: impl PgExecutor<'_>,
    username: &str,
) -> sqlx::Result<Option<Credentials>> {
    sqlx::query_as!(
        Credentials,
        "select id as user_id, password_hash, disabled from users where username = $1",
        username
    )
    .fetch_optional(db)
    .await
}

pub async fn insert_session(
    db: impl PgExecutor<'_>,
    token_sha256: &[u8],
    user_id: i64,
    csrf_token: &str,
    absolute_s: f64,
) -> sqlx::Result<()> {
    sqlx::query!(
        "insert into sessions (token_sha256, user_id, csrf_token, expires_at)
         values ($1, $2, $3, now() + make_interval(secs => $4))",
        token_sha256,
        user_id,
        csrf_token,
        absolute_s,
    )
    .execute(db)
    .await?;
    Ok(())
}

pub async fn delete_session(db: impl PgExecutor<'_>, token_sha256: &[u8]) -> sqlx::Result<()> {
    sqlx::query!("delete from sessions where token_sha256 = $1", token_sha256)
        .execute(db)
        .await?;
    Ok(())
}

pub async fn delete_sessions_of(db: impl PgExecutor<'_>, user_id: i64) -> sqlx::Result<()> {
    sqlx::query!("delete from sessions where user_id = $1", user_id)
        .execute(db)
        .await?;
    Ok(())
}

/// Sessions past either expiry, so the table does not grow without bound.
pub async fn delete_expired_sessions(db: impl PgExecutor<'_>, idle_s: f64) -> sqlx::Result<u64> {
    let done = sqlx::query!(
        "delete from sessions
         where expires_at <= now() or last_seen_at <= now() - make_interval(secs => $1)",
        idle_s
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Failed log-ins in the last `window_s` for the account and for the address.
pub async fn recent_failures(
    db: impl PgExecutor<'_>,
    username: &str,
    address: &str,
    window_s: f64,
) -> sqlx::Result<(i64, i64)> {
    let row = sqlx::query!(
        r#"select
             count(*) filter (where username = $1) as "account!",
             count(*) filter (where address = $2) as "address!"
           from login_failures
           where created_at > now() - make_interval(secs => $3)
             and (username = $1 or address = $2)"#,
        username,
        address,
        window_s,
    )
    .fetch_one(db)
    .await?;
    Ok((row.account, row.address))
}

pub async fn record_failure(
    db: impl PgExecutor<'_>,
    username: &str,
    address: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "insert into login_failures (username, address) values ($1, $2)",
        username,
        address
    )
    .execute(db)
    .await?;
    Ok(())
}

/// After a successful log-in the account's count starts again; the address's stays.
pub async fn forget_failures(db: impl PgExecutor<'_>, username: &str) -> sqlx::Result<()> {
    sqlx::query!("delete from login_failures where username = $1", username)
        .execute(db)
        .await?;
    Ok(())
}

pub async fn prune_failures(db: impl PgExecutor<'_>) -> sqlx::Result<()> {
    sqlx::query!("delete from login_failures where created_at < now() - interval '1 day'")
        .execute(db)
        .await?;
    Ok(())
}
