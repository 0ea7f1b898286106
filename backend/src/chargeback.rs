//! Chargeback statements (`/api/chargeback/…`, `gpufleet chargeback …`): the shared crate's
//! statement (`shared::chargeback`) over the usage day rollups, the inventory's capacity and
//! the flavors' rates (`db.rs`). Finance, approvers and admins see every team and the fleet; a
//! requester sees only their own teams' lines.

pub mod budget;
pub mod cli;
pub mod db;
pub mod statement;

pub use statement::{build, written};

use std::{
    collections::BTreeSet,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use axum::{
    Extension, Json,
    body::{Body, Bytes},
    extract::{Path, Query, State},
    http::{HeaderMap, Method, header},
    response::{IntoResponse, Response},
};
use serde::Deserialize;
use shared::{
    FieldError,
    accounts::Role,
    audit::Kind,
    chargeback::{
        self as model, CloseMonth, ClosedMonth, Drill, DrillDay, Format, IdleShare, NewRate,
        Period, Rate, Reopen, StatementQuery, Unobserved, UsageDay,
    },
    common::day::Day,
    common::interrupt::Interrupt,
    usage::neighbours::{self, NeighbourReport},
};
use sqlx::PgPool;
use tokio::runtime::Handle;

use crate::{
    access::{Access, Caller},
    app::{Api, AppState},
    audit::{self, Actor},
    error::{Error, Result},
    json::ApiJson,
    work::Deadline,
};

const READERS: &[Role] = &[Role::Finance, Role::Approver, Role::Admin];

pub fn api() -> Api {
    Api::default()
        .route(
            Method::GET,
            "/chargeback/statement",
            Access::SignedIn,
            statement,
        )
        .route(
            Method::GET,
            "/chargeback/rates",
            Access::Roles(READERS),
            rates,
        )
        .route(
            Method::PUT,
            "/chargeback/rates/{flavor}",
            Access::Roles(&[Role::Admin]),
            set_rate,
        )
        .route(
            Method::DELETE,
            "/chargeback/rates/{flavor}/{from}",
            Access::Roles(&[Role::Admin]),
            remove_rate,
        )
        .route(Method::GET, "/chargeback/drill", Access::SignedIn, drill)
        .route(
            Method::GET,
            "/chargeback/neighbours",
            Access::SignedIn,
            neighbours,
        )
        .route(
            Method::GET,
            "/chargeback/months",
            Access::Roles(READERS),
            months,
        )
        .route(
            Method::GET,
            "/chargeback/budgets",
            Access::SignedIn,
            budget::list,
        )
        .route(
            Method::PUT,
            "/chargeback/budgets/{team}/{month}",
            Access::Roles(budget::SETTERS),
            budget::set,
        )
        .route(
            Method::DELETE,
            "/chargeback/budgets/{team}/{month}",
            Access::Roles(budget::SETTERS),
            budget::remove,
        )
        .route(
            Method::POST,
            "/chargeback/holds/{id}/{action}",
            Access::Roles(budget::HOLDERS),
            budget::decide_hold,
        )
        .route(
            Method::POST,
            "/chargeback/months/{month}/close",
            Access::Roles(&[Role::Finance, Role::Admin]),
            close_month,
        )
        .route(
            Method::POST,
            "/chargeback/months/{month}/reopen",
            Access::Roles(&[Role::Admin]),
            reopen_month,
        )
}

async fn closed(pool: &PgPool) -> Result<Vec<ClosedMonth>> {
    Ok(db::closed_months(pool)
        .await?
        .into_iter()
        .map(|(month, closed_at, closed_by)| ClosedMonth {
            month: month.month_name(),
            closed_at,
            closed_by,
        })
        .collect())
}

async fn months(State(state): State<AppState>) -> Result<Json<Vec<ClosedMonth>>> {
    Ok(Json(closed(&state.pool).await?))
}

fn month_of(text: &str) -> Result<Day> {
    model::parse_month(text).ok_or_else(|| {
        Error::Invalid(vec![FieldError {
            path: "month".into(),
            message: format!("{text:?} is not a month written YYYY-MM"),
        }])
    })
}

/// Freezes a month that has ended and whose usage is ingested past its end; where some of its
/// capacity had no DCGM sample, only with `accepted` equal to those GPU-hours.
pub async fn close(
    pool: &PgPool,
    month: Day,
    accepted: &CloseMonth,
    actor: Actor<'_>,
) -> Result<()> {
    let end = month.next_month();
    if end > crate::clock::today() {
        return Err(Error::Conflict(format!(
            "{} has not ended (it ends {end} 00:00 UTC)",
            month.month_name()
        )));
    }
    let ingested = db::ingested_until(pool).await?;
    let end_ms = i64::from(end.days_since_epoch()) * shared::common::utc::DAY_MS;
    if ingested
        .as_deref()
        .and_then(shared::common::utc::parse_rfc3339)
        .is_none_or(|at| at < end_ms)
    {
        return Err(Error::Conflict(format!(
            "the usage ingest has read Kueue and DCGM only up to {}: close {} once it has passed {end} 00:00 UTC (or ingest the rest with gpufleet usage ingest)",
            ingested.as_deref().unwrap_or("nothing yet"),
            month.month_name()
        )));
    }
    let mut conn = pool.acquire().await?;
    // closed already: said before anything is asked of the closer
    if db::closed_months(&mut *conn)
        .await?
        .iter()
        .any(|(m, ..)| *m == month)
    {
        return Err(Error::Conflict(format!(
            "{} is closed already",
            month.month_name()
        )));
    }
    let capacity = db::capacity(&mut *conn).await?;
    let live_rates = db::rates(&mut *conn).await?;
    let usage = db::usage_days(&mut *conn, month, end).await?;
    let tokens = db::token_days(&mut *conn, month, end).await?;
    drop(conn);
    let unobserved = Unobserved::of(&model::StatementInput {
        from: month,
        to: end,
        idle: IdleShare::Separate,
        lend_credit_pct: 0,
        teams: Vec::new(),
        capacity: capacity.clone(),
        capacity_by_day: Default::default(),
        rates: live_rates.clone(),
        usage: usage.clone(),
        tokens: Vec::new(),
    });
    if !unobserved.confirmed_by(accepted.accept_unobserved_gpu_hours) {
        return Err(Error::Unconfirmed(format!(
            "{} has {} of capacity with no DCGM sample (before the first sample, after the last, in a gap, or GPUs that never reported): closing freezes them on the platform line, billed to no team. Ingest what is missing first (gpufleet usage ingest), or close it anyway confirming those GPU-hours: accept_unobserved_gpu_hours \"{2}\" in the API, --accept-unobserved-gpu-hours {2} on the command line.",
            month.month_name(),
            unobserved.words(),
            unobserved.gpu_hours,
        )));
    }
    let flavors: BTreeSet<&str> = capacity
        .keys()
        .map(String::as_str)
        .chain(usage.iter().map(|u| u.flavor.as_str()))
        .collect();
    let rates: Vec<db::FrozenRate> = (0..month.days_until(end))
        .map(|n| month.plus(n))
        .flat_map(|day| {
            let (capacity, live_rates) = (&capacity, &live_rates);
            flavors.iter().map(move |flavor| db::FrozenRate {
                day,
                flavor: (*flavor).to_owned(),
                gpus: capacity.get(*flavor).copied().unwrap_or(0),
                cents_per_gpu_hour: model::rate_on(live_rates, flavor, day),
            })
        })
        .collect();
    let mut tx = pool.begin().await?;
    db::close(&mut tx, month, actor.user_id(), &usage, &tokens, &rates)
        .await
        .map_err(|err| match &err {
            sqlx::Error::Database(e) if e.is_unique_violation() => {
                Error::Conflict(format!("{} is closed already", month.month_name()))
            }
            _ => Error::from(err),
        })?;
    audit::record(
        &mut *tx,
        actor,
        Kind::ChargebackMonth,
        "close",
        &format!("month {}", month.month_name()),
        None,
        None,
        Some(&serde_json::json!({
            "usage_rows": usage.len(),
            "token_rows": tokens.len(),
            "unobserved_gpu_hours": unobserved.gpu_hours,
        })),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

async fn close_month(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(month): Path<String>,
    ApiJson(accepted): ApiJson<CloseMonth>,
) -> Result<Json<Vec<ClosedMonth>>> {
    close(
        &state.pool,
        month_of(&month)?,
        &accepted,
        Actor::User(&caller),
    )
    .await?;
    Ok(Json(closed(&state.pool).await?))
}

async fn reopen_month(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(month): Path<String>,
    ApiJson(why): ApiJson<Reopen>,
) -> Result<Json<Vec<ClosedMonth>>> {
    let month = month_of(&month)?;
    let reason = why.reason.trim();
    let mut errors = Vec::new();
    if reason.is_empty() || reason.len() > 2000 {
        errors.push(FieldError {
            path: "reason".into(),
            message: "say why the month is reopened (up to 2,000 characters)".into(),
        });
    }
    shared::common::validate::validate_visible_lines("reason", reason, &mut errors);
    if !errors.is_empty() {
        return Err(Error::Invalid(errors));
    }
    let mut tx = state.pool.begin().await?;
    if !db::reopen(&mut tx, month).await? {
        return Err(Error::Conflict(format!(
            "{} is not closed",
            month.month_name()
        )));
    }
    audit::record(
        &mut *tx,
        Actor::User(&caller),
        Kind::ChargebackMonth,
        "reopen",
        &format!("month {}", month.month_name()),
        None,
        None,
        Some(&serde_json::json!({"reason": reason})),
    )
    .await?;
    tx.commit().await?;
    Ok(Json(closed(&state.pool).await?))
}

/// The statement of a period, streamed as it is made (see `statement`): JSON, or CSV when
/// asked by `format=csv` or `Accept: text/csv`. Finance, approvers and admins see every team
/// and the fleet; a requester only their own teams' lines, with idle shared by allocation and
/// no lending credit (the other choices would let the fleet's totals be worked out).
async fn statement(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Extension(deadline): Extension<Deadline>,
    headers: HeaderMap,
    Query(query): Query<StatementQuery>,
) -> Result<Response> {
    let mut period = query.checked().map_err(Error::Invalid)?;
    let csv_accepted = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/csv"));
    if csv_accepted && period.format == Format::Json {
        period.format = Format::Csv;
    }
    let visible = if caller.has_any(READERS) {
        None
    } else if caller.teams.is_empty() {
        return Err(Error::Forbidden(
            "statements are for finance, approvers, admins and team members",
        ));
    } else if period.idle != IdleShare::default() || period.lend_credit_pct != 0 {
        return Err(Error::Forbidden(
            "a team's statement shares idle by allocation with no lending credit: other choices are finance's",
        ));
    } else {
        Some(caller.teams.clone())
    };
    let body = stream_statement(&state, period, visible, deadline).await?;
    let kind = match period.format {
        Format::Json => None,
        Format::Csv => Some("statement"),
        Format::Focus(_) => Some("focus"),
    };
    Ok(match kind {
        Some(kind) => {
            let name = format!(
                "attachment; filename=\"gpufleet-{kind}-{}-{}.csv\"",
                period.from,
                period.to.plus(-1)
            );
            let head = [
                (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
                (header::CONTENT_DISPOSITION, name),
            ];
            (head, body).into_response()
        }
        None => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
    })
}

/// Makes the statement on the compute pool and streams it: errors before its first piece (a
/// full pool, a period too large, a database down) are answered as errors; after it, they end
/// the body short, so the client sees a broken transfer, never a statement cut short as if
/// whole. The work stops when the client goes away, the request's deadline passes, or the
/// server shuts down.
async fn stream_statement(
    state: &AppState,
    period: Period,
    visible: Option<Vec<String>>,
    deadline: Deadline,
) -> Result<Body> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>>>(4);
    let (rt, pool, failed) = (Handle::current(), state.pool.clone(), tx.clone());
    let cut_short = Arc::new(AtomicBool::new(false));
    let ended_short = Arc::clone(&cut_short);
    let job = move |stop: &dyn Interrupt| {
        let until = Until {
            stop,
            deadline,
            body: &tx,
        };
        let send = |piece: Vec<u8>| hand_over(&tx, piece, &until);
        let mut writer = statement::Writer::new(&period, send);
        let now = crate::clock::now_ms();
        let made = statement::make(
            &rt,
            &pool,
            &period,
            visible.as_deref(),
            &mut writer,
            &until,
            now,
        );
        if let Err(err) = made {
            let err = if deadline.passed() {
                Error::Unavailable
            } else {
                err
            };
            // Never waiting on a client that does not read: where the error cannot be handed
            // over, the body learns of it when the pieces run out.
            if tx.try_send(Err(err)).is_err() {
                cut_short.store(true, Ordering::Release);
            }
        }
    };
    let compute = state.work.compute.clone();
    tokio::spawn(async move {
        if let Err(err) = compute.run(job).await {
            let _ = failed.send(Err(err)).await;
        }
    });
    let first = match rx.recv().await {
        Some(Ok(piece)) => piece,
        Some(Err(err)) => return Err(err),
        None => {
            return Err(Error::Internal(
                "the statement's job ended without a word".into(),
            ));
        }
    };
    let state = (Some(first), rx, ended_short);
    let pieces = futures_util::stream::unfold(state, |(first, mut rx, ended_short)| async move {
        let piece = match first {
            Some(piece) => Ok(piece),
            None => match rx.recv().await {
                Some(Ok(piece)) => Ok(piece),
                Some(Err(err)) => {
                    tracing::warn!(%err, "a statement stopped while it was sent: its body ends short");
                    Err(std::io::Error::other(err.to_string()))
                }
                None if ended_short.swap(false, Ordering::AcqRel) => {
                    tracing::warn!("a statement stopped while it was sent: its body ends short");
                    Err(std::io::Error::other(
                        "the statement stopped while it was sent",
                    ))
                }
                None => return None,
            },
        };
        Some((piece.map(Bytes::from), (None, rx, ended_short)))
    });
    // fused: a compressing body polls once more after the end
    Ok(Body::from_stream(futures_util::StreamExt::fuse(pieces)))
}

/// Hands `piece` to the body, waiting while the client has not taken the ones before it (the
/// channel full) only until `until` fires: a client that keeps its connection but stops reading
/// holds the job no longer than its deadline.
fn hand_over(
    body: &tokio::sync::mpsc::Sender<Result<Vec<u8>>>,
    piece: Vec<u8>,
    until: &Until,
) -> Result<()> {
    let mut piece = Ok(piece);
    loop {
        match body.try_send(piece) {
            Ok(()) => return Ok(()),
            Err(tokio::sync::mpsc::error::TrySendError::Full(back)) if !until.fired() => {
                piece = back;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(_) => return Err(Error::Unavailable),
        }
    }
}

/// A streamed statement's interrupt: the pool's (abandoned or shutting down), its request's
/// deadline, or its body gone (the client left).
struct Until<'a> {
    stop: &'a dyn Interrupt,
    deadline: Deadline,
    body: &'a tokio::sync::mpsc::Sender<Result<Vec<u8>>>,
}

impl Interrupt for Until<'_> {
    fn fired(&self) -> bool {
        self.stop.fired() || self.deadline.passed() || self.body.is_closed()
    }
}

/// Each inference service's latency beside how its GPUs are shared and its co-tenants' load,
/// flagged when latency degrades while a neighbour's load rises. Same access as statements.
async fn neighbours(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<StatementQuery>,
) -> Result<Json<NeighbourReport>> {
    let period = query.checked().map_err(Error::Invalid)?;
    if !caller.has_any(READERS) && caller.teams.is_empty() {
        return Err(Error::Forbidden(
            "latency reports are for finance, approvers, admins and team members",
        ));
    }
    let only = (!caller.has_any(READERS)).then_some(caller.teams.as_slice());
    Ok(Json(neighbour_report(&state.pool, &period, only).await?))
}

/// The report of `period`, of only the teams named when some are.
pub async fn neighbour_report(
    pool: &PgPool,
    period: &Period,
    only_teams: Option<&[String]>,
) -> Result<NeighbourReport> {
    let days = period.from.days_until(period.to);
    if days > neighbours::MAX_DAYS {
        return Err(Error::Invalid(vec![FieldError {
            path: "to".into(),
            message: format!(
                "{days} days: the latency report covers at most {} (it reads minutes)",
                neighbours::MAX_DAYS
            ),
        }]));
    }
    let teams = db::teams(pool).await?;
    let own: Option<Vec<String>> = only_teams.map(|only| {
        teams
            .iter()
            .filter(|t| only.contains(&t.name))
            .map(|t| t.namespace.clone())
            .collect()
    });
    let day_ms = |d: Day| i64::from(d.days_since_epoch()) * shared::common::utc::DAY_MS;
    let minutes = crate::usage::db::served_minutes(
        pool,
        day_ms(period.from),
        day_ms(period.to),
        own.as_deref(),
    )
    .await?;
    let names = teams.into_iter().map(|t| (t.namespace, t.name)).collect();
    Ok(neighbours::report(
        period.from,
        period.to.plus(-1),
        &minutes,
        &names,
    ))
}

#[derive(Debug, Deserialize)]
struct DrillQuery {
    team: Option<String>,
    day: Option<String>,
}

/// The minute rows behind a team's figures on a day, the day's rollups, and, for a closed
/// month, the frozen figures the statement shows.
async fn drill(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<DrillQuery>,
) -> Result<Json<Drill>> {
    let mut errors = Vec::new();
    let team = query.team.unwrap_or_default();
    if team.is_empty() {
        errors.push(FieldError {
            path: "team".into(),
            message: "required: a team's name".into(),
        });
    }
    let day = query.day.as_deref().and_then(Day::parse);
    if day.is_none() {
        errors.push(FieldError {
            path: "day".into(),
            message: "required: a date written YYYY-MM-DD (UTC)".into(),
        });
    }
    let Some(day) = day.filter(|_| errors.is_empty()) else {
        return Err(Error::Invalid(errors));
    };
    if !caller.has_any(READERS) && !caller.teams.contains(&team) {
        return Err(Error::Forbidden("a requester sees only their own teams"));
    }
    let mut conn = state.pool.acquire().await?;
    let teams = db::teams(&mut *conn).await?;
    let Some(owner) = teams.iter().find(|t| t.name == team) else {
        return Err(Error::NotFound);
    };
    let ours = |rows: Vec<UsageDay>| rows.into_iter().filter(|u| u.namespace == owner.namespace);
    let closed = db::closed_months(&mut *conn)
        .await?
        .iter()
        .any(|(month, _, _)| *month == day.first_of_month());
    let frozen_rates = db::frozen_rates(&mut *conn, day, day.plus(1)).await?;
    let frozen: Vec<DrillDay> = ours(db::frozen_usage(&mut *conn, day, day.plus(1)).await?)
        .map(|u| {
            let rate = frozen_rates.iter().find(|r| r.flavor == u.flavor);
            DrillDay::priced(&u, rate.and_then(|r| r.cents_per_gpu_hour))
        })
        .collect();
    let live_rates = db::rates(&mut *conn).await?;
    let rollups: Vec<DrillDay> = ours(db::usage_days(&mut *conn, day, day.plus(1)).await?)
        .map(|u| DrillDay::priced(&u, model::rate_on(&live_rates, &u.flavor, day)))
        .collect();
    let minutes = db::drill_minutes(&mut *conn, &owner.namespace, day).await?;
    let mut notes = Vec::new();
    if minutes.is_empty() && !rollups.is_empty() {
        notes.push(
            "No minute rows: the day is past the minute retention (GPUFLEET_USAGE_MINUTE_RETENTION_DAYS); its rollups remain.".to_owned(),
        );
    }
    Ok(Json(Drill {
        team: owner.name.clone(),
        namespace: owner.namespace.clone(),
        day,
        closed,
        frozen,
        rollups,
        minutes,
        notes,
    }))
}

async fn rates(State(state): State<AppState>) -> Result<Json<Vec<Rate>>> {
    Ok(Json(db::rates(&state.pool).await?))
}

async fn set_rate(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(flavor): Path<String>,
    ApiJson(rate): ApiJson<NewRate>,
) -> Result<Json<Vec<Rate>>> {
    put_rate(&state.pool, &flavor, &rate, Actor::User(&caller)).await?;
    Ok(Json(db::rates(&state.pool).await?))
}

/// Sets (or, on a day that has one, corrects) `flavor`'s rate, audited: refused in a closed
/// month, and unless confirmed when it is far from the rate it follows or the catalogue's price
/// ([`NewRate::far_from`]).
pub async fn put_rate(pool: &PgPool, flavor: &str, rate: &NewRate, actor: Actor<'_>) -> Result<()> {
    if !(0..=model::MAX_CENTS_PER_GPU_HOUR).contains(&rate.cents_per_gpu_hour) {
        return Err(Error::Invalid(vec![FieldError {
            path: "cents_per_gpu_hour".into(),
            message: format!(
                "whole cents per GPU-hour, 0 to {}",
                model::MAX_CENTS_PER_GPU_HOUR
            ),
        }]));
    }
    let mut tx = pool.begin().await?;
    rate_month_open(&mut tx, rate.effective_from).await?;
    if !rate.confirm
        && let Some(far) = rate.far_from(&db::rates(&mut *tx).await?, flavor)
    {
        return Err(Error::Unconfirmed(far));
    }
    // a day that has a rate already: the rate is corrected, and the audit shows the old one
    let before = db::rate_at(&mut *tx, flavor, rate.effective_from).await?;
    db::set_rate(
        &mut *tx,
        flavor,
        rate.effective_from,
        rate.cents_per_gpu_hour,
        actor.user_id(),
    )
    .await?
    .ok_or(Error::NotFound)?;
    let as_set = |cents: i64| {
        serde_json::json!(NewRate {
            effective_from: rate.effective_from,
            cents_per_gpu_hour: cents,
            confirm: rate.confirm,
        })
    };
    audit::record(
        &mut *tx,
        actor,
        Kind::Flavor,
        if before.is_some() {
            "correct rate"
        } else {
            "set rate"
        },
        &format!("flavor {flavor}"),
        None,
        before.map(as_set).as_ref(),
        Some(&as_set(rate.cents_per_gpu_hour)),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// `DELETE /api/chargeback/rates/{flavor}/{from}`: removes a rate entered by mistake (the
/// model's price from the start is the catalogue's, not a rate); refused in a closed month;
/// audited.
async fn remove_rate(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((flavor, from)): Path<(String, String)>,
) -> Result<Json<Vec<Rate>>> {
    let from = Day::parse(&from).ok_or_else(|| {
        Error::Invalid(vec![FieldError {
            path: "from".into(),
            message: format!("{from:?} is not a day written YYYY-MM-DD"),
        }])
    })?;
    let mut tx = state.pool.begin().await?;
    rate_month_open(&mut tx, from).await?;
    let cents = db::remove_rate(&mut *tx, &flavor, from)
        .await?
        .ok_or(Error::NotFound)?;
    audit::record(
        &mut *tx,
        Actor::User(&caller),
        Kind::Flavor,
        "remove rate",
        &format!("flavor {flavor}"),
        None,
        Some(&serde_json::json!(NewRate {
            effective_from: from,
            cents_per_gpu_hour: cents,
            confirm: false,
        })),
        None,
    )
    .await?;
    tx.commit().await?;
    Ok(Json(db::rates(&state.pool).await?))
}

/// Refuses a rate change dated in a closed month: its figures are frozen, so the change would
/// show nowhere in it and price the months after it instead.
async fn rate_month_open(db: &mut sqlx::PgConnection, from: Day) -> Result<()> {
    let month = from.first_of_month();
    let closed = db::closed_months(&mut *db).await?;
    if closed.iter().any(|(m, ..)| *m == month) {
        return Err(Error::Conflict(format!(
            "{} is closed: its figures are frozen, so a rate dated {from} would change nothing in it and would price the months after it instead; date the rate in an open month, or have an admin reopen {0} first",
            month.month_name()
        )));
    }
    Ok(())
}
