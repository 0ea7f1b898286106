//! The log-in SQL: `sessions` (token hashes, CSRF tokens, expiries) and the append-only
//! `login_failures` the throttle counts.

use sqlx::{PgExecutor, PgPool};

use crate::accounts::db::UserRow;

/// The live session behind a token hash: not past its absolute expiry, not idle for longer
/// than `idle_s`, and its user not disabled. Returns the user, the session's CSRF token, and
/// whether it was last marked seen over a minute ago (see [`touch_session`]).
pub async fn session_user(
    db: impl PgExecutor<'_>,
    token_sha256: &[u8],
    idle_s: f64,
) -> sqlx::Result<Option<(UserRow, String, bool)>> {
    let row = sqlx::query!(
        r#"select p.user_id as "user_id!", p.username as "username!", p.display_name as "display_name!",
                  p.disabled as "disabled!", p.roles as "roles!", p.teams as "teams!", s.csrf_token,
                  (s.last_seen_at < now() - interval '60 seconds') as "stale!"
           from sessions s join user_profiles p on p.user_id = s.user_id
           where s.token_sha256 = $1 and s.expires_at > now()
             and s.last_seen_at > now() - make_interval(secs => $2)
             and not p.disabled"#,
        token_sha256,
        idle_s,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| {
        let user = UserRow {
            user_id: r.user_id,
            username: r.username,
            display_name: r.display_name,
            roles: r.roles,
            teams: r.teams,
            disabled: r.disabled,
        };
        (user, r.csrf_token, r.stale)
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

/// What the throttle says of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Recorded as pending, with its id: check the password.
    Reserved(i64),
    /// The account or the address has failed too often in the window.
    Locked,
    /// Under the failure limit, but enough attempts on it are being checked right now.
    Busy,
}

/// Counts the failures and the attempts being checked in the last `window_s` for the account
/// and for the address and, when both are under their `limits`, records this one as pending.
/// One transaction holds advisory locks on the account and then the address (always in that
/// order), so concurrent attempts are counted one after another.
pub async fn reserve_attempt(
    pool: &PgPool,
    username: &str,
    address: &str,
    window_s: f64,
    (account_limit, address_limit): (i64, i64),
) -> sqlx::Result<Attempt> {
    let mut tx = pool.begin().await?;
    sqlx::query!(
        "select pg_advisory_xact_lock(hashtextextended('gpufleet-login-account:' || $1, 0)),
                pg_advisory_xact_lock(hashtextextended('gpufleet-login-address:' || $2, 0))",
        username,
        address
    )
    .fetch_one(&mut *tx)
    .await?;
    let counts = sqlx::query!(
        r#"with recent as (
               select username, address,
                      not pending or created_at < now() - interval '1 minute' as failed
               from login_failures
               where created_at > now() - make_interval(secs => $3)
                 and (username = $1 or address = $2))
           select
             count(*) filter (where username = $1) as "account!",
             count(*) filter (where username = $1 and failed) as "account_failed!",
             count(*) filter (where address = $2) as "address!",
             count(*) filter (where address = $2 and failed) as "address_failed!"
           from recent"#,
        username,
        address,
        window_s,
    )
    .fetch_one(&mut *tx)
    .await?;
    if counts.account_failed >= account_limit || counts.address_failed >= address_limit {
        return Ok(Attempt::Locked);
    }
    if counts.account >= account_limit || counts.address >= address_limit {
        return Ok(Attempt::Busy);
    }
    let id = sqlx::query_scalar!(
        "insert into login_failures (username, address, pending) values ($1, $2, true) returning id",
        username,
        address
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Attempt::Reserved(id))
}

/// A checked attempt that failed: its row stays as the failure's record.
pub async fn settle_failure(db: impl PgExecutor<'_>, id: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "update login_failures set pending = false where id = $1",
        id
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Takes back a reserved attempt that was never evaluated.
pub async fn release_attempt(db: impl PgExecutor<'_>, id: i64) -> sqlx::Result<()> {
    sqlx::query!("delete from login_failures where id = $1", id)
        .execute(db)
        .await?;
    Ok(())
}

/// After a successful log-in the account's count starts again (attempts still being checked
/// stay, to settle as they end); the address's stays.
pub async fn forget_failures(db: impl PgExecutor<'_>, username: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "delete from login_failures where username = $1 and not pending",
        username
    )
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

/// The secret named `name` that every replica shares: `fresh` when none was kept yet (the
/// first replica to ask keeps it), else the one kept. One `insert … on conflict do update`,
/// which PostgreSQL guarantees ends in an insert or an update of the committed row even under
/// concurrency (the INSERT reference page, "ON CONFLICT Clause"), so a replica whose insert
/// meets another's just committed still reads the kept value: a read in the same statement
/// would look at a snapshot from before that commit and find nothing.
pub async fn shared_secret(
    db: impl PgExecutor<'_>,
    name: &str,
    fresh: &str,
) -> sqlx::Result<String> {
    sqlx::query_scalar!(
        r#"insert into server_secrets (name, value) values ($1, $2)
           on conflict (name) do update set value = server_secrets.value
           returning value"#,
        name,
        fresh
    )
    .fetch_one(db)
    .await
}
