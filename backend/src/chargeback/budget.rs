//! Budgets (`shared::chargeback::budget`): set and removed by finance or admins (audited), read
//! with each team's burn and forecast for the month, and their thresholds' alerts: raised once
//! per budget as set, kept in `budget_alerts`, and POSTed to a webhook (when one is configured)
//! until it answers 2xx — retried with backoff, never lost.
//!
//! The server's loop ([`spawn`]) evaluates this month's budgets and delivers due alerts every
//! minute; one replica claims an alert at a time (a lease on `next_attempt_at`).
//!
//! A burn that reaches its whole budget proposes a hold of the team's ClusterQueue (audited as
//! the console's); an approver confirms or dismisses it and releases a hold in force
//! ([`decide_hold`], audited); `quota::world` reads the holds in force, so the reconciler
//! applies them as `spec.stopPolicy: Hold`.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
};
use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::Full;
use serde::Deserialize;
use serde_json::json;
use shared::{
    FieldError,
    accounts::Role,
    audit::Kind,
    chargeback::{
        IdleShare, Period, Statement,
        budget::{self as model, Budget, Budgets, Crossing, Hold, HoldAction, NewBudget},
        parse_month,
    },
    common::day::Day,
};
use sqlx::PgPool;

use crate::{
    access::Caller,
    app::AppState,
    audit::{self, Actor},
    error::CliError,
    error::{Error, Result},
    json::ApiJson,
    work::Deadline,
};

/// Who sets budgets.
pub const SETTERS: &[Role] = &[Role::Finance, Role::Admin];
/// Who confirms, dismisses and releases holds: those who decide quota.
pub const HOLDERS: &[Role] = &[Role::Approver, Role::Admin];

#[derive(Debug, Deserialize)]
pub struct MonthQuery {
    /// `YYYY-MM`; this month (UTC) when left out.
    pub month: Option<String>,
}

/// `GET /api/chargeback/budgets?month=YYYY-MM`: every budget of the month with its burn,
/// forecast and alerts; a requester sees their own teams' (`403` with none, as statements).
/// The month's statement they burn is [`MonthToDate`]'s: made on the compute pool within the
/// request's deadline, at most once a minute however many ask.
pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Extension(deadline): Extension<Deadline>,
    Query(query): Query<MonthQuery>,
) -> Result<Json<Budgets>> {
    let month = match query.month.as_deref() {
        None | Some("") => crate::clock::today().first_of_month(),
        Some(text) => month_of("month", text)?,
    };
    let readers = [Role::Finance, Role::Approver, Role::Admin];
    if !caller.has_any(&readers) && caller.teams.is_empty() {
        return Err(Error::Forbidden(
            "budgets are for finance, approvers, admins and team members",
        ));
    }
    let now_ms = crate::clock::now_ms();
    let statement = if db::all(&state.pool, month).await?.is_empty() {
        None
    } else {
        state
            .month_to_date
            .get(&state, month, now_ms, deadline)
            .await?
    };
    let mut budgets = assemble(&state.pool, month, now_ms, statement.as_deref()).await?;
    if !caller.has_any(&readers) {
        budgets.lines.retain(|l| caller.teams.contains(&l.team));
        budgets.alerts.retain(|a| caller.teams.contains(&a.team));
        budgets.holds.retain(|h| caller.teams.contains(&h.team));
    }
    Ok(Json(budgets))
}

/// `POST /api/chargeback/holds/{id}/{action}`: an approver confirms a proposed hold (the
/// reconciler, woken now, applies the team's ClusterQueue with `stopPolicy: Hold`), dismisses
/// it, or releases a hold in force; audited. 409 when the hold is not in the state the action
/// needs (two approvers at once: one wins). Four eyes: a member of the held team may not
/// dismiss or release its hold (403).
pub async fn decide_hold(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((id, action)): Path<(i64, String)>,
) -> Result<Json<Hold>> {
    let action = HoldAction::parse(&action).ok_or_else(|| {
        Error::Invalid(vec![FieldError {
            path: "action".into(),
            message: format!("{action:?}: confirm, dismiss or release"),
        }])
    })?;
    let (from, to) = action.moves();
    let mut tx = state.pool.begin().await?;
    let lifts = matches!(action, HoldAction::Dismiss | HoldAction::Release);
    if lifts
        && let Some(hold) = db::holds(&mut *tx, None, Some(id)).await?.pop()
        && caller.teams.contains(&hold.team)
    {
        return Err(Error::Forbidden(
            "you are a member of the held team; another approver must lift its hold (four eyes)",
        ));
    }
    if !db::move_hold(&mut *tx, id, from.name(), to.name(), caller.user_id).await? {
        let hold = db::holds(&mut *tx, None, Some(id)).await?.pop();
        return Err(match hold {
            None => Error::NotFound,
            Some(hold) => Error::Conflict(format!(
                "this hold of {}'s ClusterQueue is {}, not {}",
                hold.team,
                hold.state.name(),
                from.name()
            )),
        });
    }
    let hold = db::holds(&mut *tx, None, Some(id))
        .await?
        .pop()
        .ok_or(Error::NotFound)?;
    audit::record(
        &mut *tx,
        Actor::User(&caller),
        Kind::Budget,
        action.audited(),
        &format!("ClusterQueue of {}", hold.team),
        Some(&hold.team),
        Some(&json!({"hold": id, "state": from.name()})),
        Some(&json!({"hold": id, "state": to.name()})),
    )
    .await?;
    tx.commit().await?;
    if action != HoldAction::Dismiss {
        state.cluster.wake();
    }
    Ok(Json(hold))
}

/// Teams whose ClusterQueue is held now.
pub async fn held(db: &mut sqlx::PgConnection) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        "select t.name from queue_holds h join teams t on t.id = h.team_id
         where h.state = 'held' order by t.name"
    )
    .fetch_all(db)
    .await
}

/// `PUT /api/chargeback/budgets/{team}/{month}`: sets (or replaces) a team's budget; audited.
pub async fn set(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((team, month)): Path<(String, String)>,
    ApiJson(new): ApiJson<NewBudget>,
) -> Result<Json<Budgets>> {
    let month = month_of("month", &month)?;
    let budget = new.checked().map_err(Error::Invalid)?;
    put(&state.pool, &team, month, &budget, Actor::User(&caller)).await?;
    Ok(Json(
        read(&state.pool, month, crate::clock::now_ms()).await?,
    ))
}

/// Sets (or replaces) `team`'s budget for `month`, audited as `actor`'s; `NotFound` for no
/// such team.
pub async fn put(
    pool: &PgPool,
    team: &str,
    month: Day,
    budget: &Budget,
    actor: Actor<'_>,
) -> Result<()> {
    let mut tx = pool.begin().await?;
    let before = db::one(&mut *tx, team, month).await?;
    let (cents, hours, thresholds) = columns(budget);
    let set_by = match &actor {
        Actor::User(caller) => Some(caller.user_id),
        _ => None,
    };
    let set = sqlx::query!(
        "insert into budgets (team_id, month, limit_cents, limit_gpu_hours, basis, thresholds_pct, set_by)
         select id, $2, $3, $4, $5, $6, $7 from teams where name = $1
         on conflict (team_id, month) do update set limit_cents = excluded.limit_cents,
             limit_gpu_hours = excluded.limit_gpu_hours, basis = excluded.basis,
             thresholds_pct = excluded.thresholds_pct, set_by = excluded.set_by, set_at = now()",
        team,
        crate::clock::date(month)?,
        cents,
        hours,
        budget.basis.name(),
        &thresholds,
        set_by,
    )
    .execute(&mut *tx)
    .await?;
    if set.rows_affected() == 0 {
        return Err(Error::NotFound);
    }
    audit::record(
        &mut *tx,
        actor,
        Kind::Budget,
        "set budget",
        &format!("budget {team} {}", month.month_name()),
        Some(team),
        before.map(|b| json!(b)).as_ref(),
        Some(&json!(budget)),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// `DELETE /api/chargeback/budgets/{team}/{month}`: removes a team's budget; audited.
pub async fn remove(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((team, month)): Path<(String, String)>,
) -> Result<Json<Budgets>> {
    let month = month_of("month", &month)?;
    let mut tx = state.pool.begin().await?;
    let Some(before) = db::one(&mut *tx, &team, month).await? else {
        return Err(Error::NotFound);
    };
    sqlx::query!(
        "delete from budgets b using teams t
         where t.id = b.team_id and t.name = $1 and b.month = $2",
        team,
        crate::clock::date(month)?,
    )
    .execute(&mut *tx)
    .await?;
    audit::record(
        &mut *tx,
        Actor::User(&caller),
        Kind::Budget,
        "remove budget",
        &format!("budget {team} {}", month.month_name()),
        Some(&team),
        Some(&json!(before)),
        None,
    )
    .await?;
    tx.commit().await?;
    Ok(Json(
        read(&state.pool, month, crate::clock::now_ms()).await?,
    ))
}

fn month_of(path: &str, text: &str) -> Result<Day> {
    parse_month(text).ok_or_else(|| {
        Error::Invalid(vec![FieldError {
            path: path.into(),
            message: format!("{text:?} is not a month written YYYY-MM"),
        }])
    })
}

/// The month's budgets, each with its burn up to `now_ms` and forecast, and their alerts (the
/// server's loop; the statement made on a blocking thread, bounded like the API's).
pub async fn read(pool: &PgPool, month: Day, now_ms: i64) -> Result<Budgets> {
    // the statement only when there is a budget to read it for
    let statement = match month_to_date(month, now_ms) {
        Some(period) if !db::all(pool, month).await?.is_empty() => {
            Some(super::build(pool, &period).await?)
        }
        _ => None,
    };
    assemble(pool, month, now_ms, statement.as_ref()).await
}

/// The month's budgets with their burn in `statement` (the month's to date).
async fn assemble(
    pool: &PgPool,
    month: Day,
    now_ms: i64,
    statement: Option<&Statement>,
) -> Result<Budgets> {
    let lines = db::all(pool, month)
        .await?
        .into_iter()
        .filter_map(|(team, budget)| {
            let line = statement?.teams.iter().find(|t| t.team == team)?;
            Some(model::burn(month, now_ms, line, &budget))
        })
        .collect();
    Ok(Budgets {
        month: month.month_name(),
        lines,
        alerts: db::alerts(pool, month).await?,
        holds: db::holds(pool, Some(month), None).await?,
    })
}

/// The period of the month's statement up to today (the whole month once it has ended; `None`
/// before it begins), with idle shared by allocation and no lending credit, as a team's own
/// reads.
fn month_to_date(month: Day, now_ms: i64) -> Option<Period> {
    let today = Day::of_unix_seconds(now_ms.div_euclid(1000));
    (today >= month).then(|| Period {
        from: month,
        to: month.next_month().min(today.plus(1)),
        by_day: false,
        idle: IdleShare::Allocation,
        lend_credit_pct: 0,
        format: shared::chargeback::Format::Json,
    })
}

/// How long a month's statement made for budgets is read again before it is made anew: usage
/// arrives a minute at a time.
const MONTH_TO_DATE_FRESH: Duration = Duration::from_secs(60);

/// The month's statement budgets burn, made for requests: at most once per
/// [`MONTH_TO_DATE_FRESH`] and month, and one at a time; those asking meanwhile wait for it
/// (without a thread) instead of each making their own. A page that many open at once costs one
/// statement, not one each.
#[derive(Default)]
pub struct MonthToDate(tokio::sync::Mutex<Option<Made>>);

struct Made {
    month: Day,
    at: Instant,
    statement: Option<Arc<Statement>>,
}

impl MonthToDate {
    /// The month's statement to date (`None` before the month begins), made on the compute
    /// pool within `deadline` when none fresh is kept.
    pub async fn get(
        &self,
        state: &AppState,
        month: Day,
        now_ms: i64,
        deadline: Deadline,
    ) -> Result<Option<Arc<Statement>>> {
        let mut kept = tokio::time::timeout_at(deadline.0.into(), self.0.lock())
            .await
            .map_err(|_| Error::Unavailable)?;
        let fresh = |made: &&Made| made.month == month && made.at.elapsed() < MONTH_TO_DATE_FRESH;
        if let Some(made) = kept.as_ref().filter(fresh) {
            return Ok(made.statement.clone());
        }
        let statement = match month_to_date(month, now_ms) {
            Some(period) => Some(Arc::new(
                super::statement::build_on(&state.work.compute, &state.pool, &period, deadline)
                    .await?,
            )),
            None => None,
        };
        *kept = Some(Made {
            month,
            at: Instant::now(),
            statement: statement.clone(),
        });
        Ok(statement)
    }
}

/// What one evaluation raised that was new.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Raised {
    pub alerts: usize,
    pub holds: usize,
}

/// Raises this month's alerts, one per breach: the highest threshold a budget's burn has
/// crossed, then the highest its forecast has, each unless this budget as set raised that
/// threshold or a higher one already (a forecast's is covered by the burn's too), so a jump
/// past several thresholds is one notice. Proposes a hold for each team whose burn reached its
/// whole budget, once per budget as set, unless the team has one proposed or in force.
pub async fn evaluate(pool: &PgPool, now_ms: i64) -> Result<Raised> {
    let month = Day::of_unix_seconds(now_ms.div_euclid(1000)).first_of_month();
    let budgets = read(pool, month, now_ms).await?;
    let mut raised = Raised::default();
    for line in &budgets.lines {
        for (crossing, crossed) in [
            (Crossing::Actual, &line.crossed_pct),
            (Crossing::Forecast, &line.forecast_crossed_pct),
        ] {
            if let Some(pct) = crossed.iter().max() {
                raised.alerts += db::raise(pool, month, line, *pct, crossing).await?;
            }
        }
        if line.over_limit {
            raised.holds += propose_hold(pool, month, line).await?;
        }
    }
    Ok(raised)
}

/// Proposes a hold of `line`'s team's ClusterQueue (audited as the console's): 1 when new.
async fn propose_hold(pool: &PgPool, month: Day, line: &model::BudgetLine) -> Result<usize> {
    let mut tx = pool.begin().await?;
    let reason = model::hold_reason(line);
    let proposed = sqlx::query!(
        "insert into queue_holds (team_id, month, limit_key, reason)
         select id, $2, $3, $4 from teams where name = $1
         on conflict do nothing",
        line.team,
        crate::clock::date(month)?,
        model::limit_key(&line.budget),
        reason,
    )
    .execute(&mut *tx)
    .await?;
    if proposed.rows_affected() == 0 {
        return Ok(0);
    }
    audit::record(
        &mut *tx,
        Actor::Console,
        Kind::Budget,
        "propose hold",
        &format!("ClusterQueue of {}", line.team),
        Some(&line.team),
        None,
        Some(&json!({"state": "proposed", "reason": reason})),
    )
    .await?;
    tx.commit().await?;
    Ok(1)
}

/// Where alerts are POSTed: an HTTP(S) URL taking a JSON body (as Slack- and Teams-style
/// incoming webhooks do).
#[derive(Clone)]
pub struct Webhook {
    url: http::Uri,
    client: crate::usage::prom::HttpsClient,
    timeout: Duration,
}

impl Webhook {
    pub fn new(url: &str, timeout: Duration) -> std::result::Result<Webhook, CliError> {
        let uri: http::Uri = url.parse().map_err(|err| {
            CliError::Input(format!(
                "GPUFLEET_BUDGET_WEBHOOK_URL {url:?} is not a URL: {err}"
            ))
        })?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(CliError::Input(format!(
                "GPUFLEET_BUDGET_WEBHOOK_URL {url:?} must be an http:// or https:// URL with a host"
            )));
        }
        Ok(Webhook {
            url: uri,
            client: crate::usage::prom::https_client(None, timeout).map_err(CliError::Failed)?,
            timeout,
        })
    }

    async fn post(&self, body: &serde_json::Value) -> std::result::Result<(), String> {
        let request = Request::builder()
            .method(Method::POST)
            .uri(self.url.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|err| err.to_string())?;
        let answer = tokio::time::timeout(self.timeout, self.client.request(request))
            .await
            .map_err(|_| format!("no answer within {} s", self.timeout.as_secs()))?
            .map_err(|err| format!("cannot reach the webhook: {err}"))?;
        match answer.status() {
            status if status.is_success() => Ok(()),
            status => Err(format!("the webhook answered {}", status.as_u16())),
        }
    }
}

/// Delivers every alert due by now, each claimed for a minute so no other replica sends it at
/// once; a failure is recorded and tried again after a backoff. Returns how many were sent.
pub async fn deliver(pool: &PgPool, webhook: &Webhook) -> Result<usize> {
    let mut sent = 0;
    while let Some((id, body, attempts)) = db::claim(pool).await? {
        match webhook.post(&body).await {
            Ok(()) => {
                db::delivered(pool, id).await?;
                sent += 1;
            }
            Err(error) => {
                let wait = crate::retry::backoff(Duration::from_secs(30), attempts + 1);
                db::failed(pool, id, &error, wait).await?;
            }
        }
    }
    Ok(sent)
}

/// The server's loop: every `every`, this month's alerts raised and the due ones delivered.
pub fn spawn(
    pool: PgPool,
    webhook: Option<Webhook>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Err(err) = evaluate(&pool, crate::clock::now_ms()).await {
                tracing::warn!(error = %err, "budget alerts: cannot evaluate");
            }
            if let Some(webhook) = &webhook
                && let Err(err) = deliver(&pool, webhook).await
            {
                tracing::warn!(error = %err, "budget alerts: cannot deliver");
            }
            tokio::time::sleep(every).await;
        }
    })
}

/// A budget as its row's columns: limit in cents, limit in GPU-hours, thresholds.
fn columns(budget: &Budget) -> (Option<i64>, Option<i64>, Vec<i16>) {
    let (cents, hours) = budget.limit.split();
    let thresholds = budget
        .thresholds_pct
        .iter()
        .map(|p| i16::try_from(*p).unwrap_or(i16::MAX))
        .collect();
    (cents, hours, thresholds)
}

/// Every team's budgets, by team and month (the inventory's export).
pub async fn every(db: &mut sqlx::PgConnection) -> sqlx::Result<Vec<(String, Day, Budget)>> {
    let rows = sqlx::query!(
        "select t.name, b.month, b.limit_cents, b.limit_gpu_hours, b.basis, b.thresholds_pct
         from budgets b join teams t on t.id = b.team_id order by t.name, b.month"
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let budget = db::budget(
                r.limit_cents,
                r.limit_gpu_hours,
                &r.basis,
                &r.thresholds_pct,
            );
            (r.name, crate::clock::day(r.month), budget)
        })
        .collect())
}

/// Replaces `team`'s budgets with `budgets` (the inventory's import, audited with it).
pub async fn replace(
    db: &mut sqlx::PgConnection,
    team: &str,
    budgets: &[(Day, Budget)],
) -> Result<()> {
    sqlx::query!(
        "delete from budgets b using teams t where t.id = b.team_id and t.name = $1",
        team
    )
    .execute(&mut *db)
    .await?;
    for (month, budget) in budgets {
        let (cents, hours, thresholds) = columns(budget);
        sqlx::query!(
            "insert into budgets (team_id, month, limit_cents, limit_gpu_hours, basis, thresholds_pct)
             select id, $2, $3, $4, $5, $6 from teams where name = $1",
            team,
            crate::clock::date(*month)?,
            cents,
            hours,
            budget.basis.name(),
            &thresholds,
        )
        .execute(&mut *db)
        .await?;
    }
    Ok(())
}

mod db {
    use std::time::Duration;

    use shared::{
        chargeback::budget::{Alert, Basis, Budget, BudgetLine, Crossing, Hold, HoldState, Limit},
        common::day::Day,
    };
    use sqlx::{PgExecutor, PgPool};

    use crate::clock::rfc3339;

    pub fn budget(cents: Option<i64>, hours: Option<i64>, basis: &str, pct: &[i16]) -> Budget {
        Budget {
            limit: match (cents, hours) {
                (Some(c), _) => Limit::Cents(c),
                (None, h) => Limit::GpuHours(h.unwrap_or(0)),
            },
            basis: Basis::parse(basis).unwrap_or_default(),
            thresholds_pct: pct.iter().map(|p| u16::try_from(*p).unwrap_or(0)).collect(),
        }
    }

    pub async fn one(
        db: impl PgExecutor<'_>,
        team: &str,
        month: Day,
    ) -> sqlx::Result<Option<Budget>> {
        let row = sqlx::query!(
            "select b.limit_cents, b.limit_gpu_hours, b.basis, b.thresholds_pct
             from budgets b join teams t on t.id = b.team_id where t.name = $1 and b.month = $2",
            team,
            crate::clock::date(month)?,
        )
        .fetch_optional(db)
        .await?;
        Ok(row.map(|r| {
            budget(
                r.limit_cents,
                r.limit_gpu_hours,
                &r.basis,
                &r.thresholds_pct,
            )
        }))
    }

    /// (team, budget) of every budget of the month, by team.
    pub async fn all(db: &PgPool, month: Day) -> sqlx::Result<Vec<(String, Budget)>> {
        let rows = sqlx::query!(
            "select t.name, b.limit_cents, b.limit_gpu_hours, b.basis, b.thresholds_pct
             from budgets b join teams t on t.id = b.team_id where b.month = $1 order by t.name",
            crate::clock::date(month)?,
        )
        .fetch_all(db)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let b = budget(
                    r.limit_cents,
                    r.limit_gpu_hours,
                    &r.basis,
                    &r.thresholds_pct,
                );
                (r.name, b)
            })
            .collect())
    }

    pub async fn alerts(db: &PgPool, month: Day) -> sqlx::Result<Vec<Alert>> {
        let rows = sqlx::query!(
            r#"select t.name, a.threshold_pct, a.crossing, a.body ->> 'text' as "text!",
                      a.raised_at, a.delivered_at, a.attempts, a.last_error
               from budget_alerts a join teams t on t.id = a.team_id
               where a.month = $1 order by a.id"#,
            crate::clock::date(month)?,
        )
        .fetch_all(db)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| Alert {
                team: r.name,
                threshold_pct: u16::try_from(r.threshold_pct).unwrap_or(0),
                crossing: if r.crossing == "actual" {
                    Crossing::Actual
                } else {
                    Crossing::Forecast
                },
                text: r.text,
                raised_at: rfc3339(r.raised_at),
                delivered_at: r.delivered_at.map(rfc3339),
                attempts: r.attempts,
                last_error: r.last_error,
            })
            .collect())
    }

    /// Raises one alert unless this budget raised it, or a higher threshold, already (of the
    /// same crossing, or of its burn): 1 when new.
    pub async fn raise(
        db: &PgPool,
        month: Day,
        line: &BudgetLine,
        pct: u16,
        crossing: Crossing,
    ) -> sqlx::Result<usize> {
        let body = shared::chargeback::budget::alert_body(line, pct, crossing);
        let done = sqlx::query!(
            "insert into budget_alerts (team_id, month, limit_key, threshold_pct, crossing, body)
             select t.id, $2, $3, $4, $5, $6 from teams t
             where t.name = $1
               and not exists (select from budget_alerts a
                               where a.team_id = t.id and a.month = $2 and a.limit_key = $3
                                 and a.threshold_pct >= $4
                                 and (a.crossing = $5 or a.crossing = 'actual'))
             on conflict do nothing",
            line.team,
            crate::clock::date(month)?,
            shared::chargeback::budget::limit_key(&line.budget),
            i16::try_from(pct).unwrap_or(i16::MAX),
            crossing.name(),
            body,
        )
        .execute(db)
        .await?;
        Ok(usize::from(done.rows_affected() > 0))
    }

    /// The oldest due alert, leased for a minute: (id, body, attempts so far).
    pub async fn claim(db: &PgPool) -> sqlx::Result<Option<(i64, serde_json::Value, u32)>> {
        let row = sqlx::query!(
            "update budget_alerts set next_attempt_at = now() + interval '1 minute'
             where id = (select id from budget_alerts
                         where delivered_at is null and next_attempt_at <= now()
                         order by id limit 1 for update skip locked)
             returning id, body, attempts",
        )
        .fetch_optional(db)
        .await?;
        Ok(row.map(|r| (r.id, r.body, u32::try_from(r.attempts).unwrap_or(0))))
    }

    pub async fn delivered(db: &PgPool, id: i64) -> sqlx::Result<()> {
        sqlx::query!(
            "update budget_alerts set delivered_at = now(), attempts = attempts + 1, last_error = null
             where id = $1",
            id
        )
        .execute(db)
        .await?;
        Ok(())
    }

    pub async fn failed(db: &PgPool, id: i64, error: &str, wait: Duration) -> sqlx::Result<()> {
        sqlx::query!(
            "update budget_alerts set attempts = attempts + 1, last_error = $2,
                 next_attempt_at = now() + $3 * interval '1 millisecond'
             where id = $1",
            id,
            error,
            f64::from(u32::try_from(wait.as_millis()).unwrap_or(u32::MAX)),
        )
        .execute(db)
        .await?;
        Ok(())
    }

    /// Holds of `month` and every hold proposed or in force, or only hold `id`; by id.
    pub async fn holds(
        db: impl PgExecutor<'_>,
        month: Option<Day>,
        id: Option<i64>,
    ) -> sqlx::Result<Vec<Hold>> {
        let month = month.map(crate::clock::date).transpose()?;
        let rows = sqlx::query!(
            r#"select h.id, t.name, to_char(h.month, 'YYYY-MM') as "month!", h.state, h.reason,
                      h.proposed_at, d.username as "decided_by?", h.decided_at,
                      r.username as "released_by?", h.released_at
               from queue_holds h join teams t on t.id = h.team_id
                    left join users d on d.id = h.decided_by
                    left join users r on r.id = h.released_by
               where case when $2::bigint is null
                          then h.month = $1 or h.state in ('proposed', 'held')
                          else h.id = $2 end
               order by h.id"#,
            month,
            id,
        )
        .fetch_all(db)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| Hold {
                id: r.id,
                team: r.name,
                month: r.month,
                state: HoldState::parse(&r.state).unwrap_or(HoldState::Proposed),
                reason: r.reason,
                proposed_at: rfc3339(r.proposed_at),
                decided_by: r.decided_by,
                decided_at: r.decided_at.map(rfc3339),
                released_by: r.released_by,
                released_at: r.released_at.map(rfc3339),
            })
            .collect())
    }

    /// Moves hold `id` from state `from` to `to`, by `user`: false when it is not in `from`
    /// (or there is none).
    pub async fn move_hold(
        db: impl PgExecutor<'_>,
        id: i64,
        from: &str,
        to: &str,
        user: i64,
    ) -> sqlx::Result<bool> {
        let moved = sqlx::query!(
            "update queue_holds set state = $3,
                 decided_by = case when $2 = 'proposed' then $4 else decided_by end,
                 decided_at = case when $2 = 'proposed' then now() else decided_at end,
                 released_by = case when $2 = 'held' then $4 else released_by end,
                 released_at = case when $2 = 'held' then now() else released_at end
             where id = $1 and state = $2",
            id,
            from,
            to,
            user,
        )
        .execute(db)
        .await?;
        Ok(moved.rows_affected() == 1)
    }
}
