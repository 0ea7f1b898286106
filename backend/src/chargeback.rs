//! Chargeback statements (`/api/chargeback/…`, `gpufleet chargeback …`): the shared crate's
//! statement (`shared::chargeback`) over the usage day rollups, the inventory's capacity and
//! the flavors' rates (`db.rs`). Finance, approvers and admins see every team and the fleet; a
//! requester sees only their own teams' lines.

pub mod cli;
pub mod db;

use std::collections::{BTreeMap, BTreeSet};

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
    http::{HeaderMap, Method, header},
    response::{IntoResponse, Response},
};
use serde::Deserialize;
use shared::{
    FieldError,
    audit::Kind,
    auth::Role,
    chargeback::{
        self as model, ClosedMonth, Drill, DrillDay, NewRate, Period, Rate, Reopen, Statement,
        StatementInput, StatementQuery, Team, TokensDay, UsageDay,
    },
    day::Day,
    usage::neighbours::{self, NeighbourReport},
};
use sqlx::PgPool;

use crate::{
    access::{Access, Caller},
    app::{Api, AppState},
    audit::{self, Actor},
    error::{Error, Result},
    json::ApiJson,
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

/// Freezes a month that has ended and whose usage is ingested past its end.
pub async fn close(pool: &PgPool, month: Day, actor: Actor<'_>) -> Result<()> {
    let end = month.next_month();
    if end > crate::quota::today() {
        return Err(Error::Conflict(format!(
            "{} has not ended (it ends {end} 00:00 UTC)",
            month.month_name()
        )));
    }
    let ingested = db::ingested_until(pool).await?;
    let end_ms = i64::from(end.days_since_epoch()) * shared::utc::DAY_MS;
    if ingested
        .as_deref()
        .and_then(shared::utc::parse_rfc3339)
        .is_none_or(|at| at < end_ms)
    {
        return Err(Error::Conflict(format!(
            "the usage ingest has read Kueue and DCGM only up to {}: close {} once it has passed {end} 00:00 UTC (or ingest the rest with gpufleet usage ingest)",
            ingested.as_deref().unwrap_or("nothing yet"),
            month.month_name()
        )));
    }
    let mut conn = pool.acquire().await?;
    let capacity = db::capacity(&mut *conn).await?;
    let live_rates = db::rates(&mut *conn).await?;
    let usage = db::usage_days(&mut *conn, month, end).await?;
    let tokens = db::token_days(&mut *conn, month, end).await?;
    drop(conn);
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
    let user = match actor {
        Actor::User(caller) => Some(caller.user_id),
        Actor::Console => None,
    };
    db::close(&mut tx, month, user, &usage, &tokens, &rates)
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
        Some(&serde_json::json!({"usage_rows": usage.len(), "token_rows": tokens.len()})),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

async fn close_month(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(month): Path<String>,
) -> Result<Json<Vec<ClosedMonth>>> {
    close(&state.pool, month_of(&month)?, Actor::User(&caller)).await?;
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
    if reason.is_empty() || reason.len() > 2000 {
        return Err(Error::Invalid(vec![FieldError {
            path: "reason".into(),
            message: "say why the month is reopened (up to 2,000 characters)".into(),
        }]));
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

/// The statement of a checked period, for every team and the fleet: open days from the usage
/// rollups at today's rates, closed days from what was frozen when their month was closed, and
/// the adjustments of closed months whose next open month starts in the period.
pub async fn build(pool: &PgPool, period: &Period) -> Result<Statement> {
    let mut conn = pool.acquire().await?;
    let teams = db::teams(&mut *conn).await?;
    let capacity = db::capacity(&mut *conn).await?;
    let live_rates = db::rates(&mut *conn).await?;
    let closed: BTreeSet<Day> = db::closed_months(&mut *conn)
        .await?
        .into_iter()
        .map(|(month, _, _)| month)
        .collect();
    let is_closed = |day: Day| closed.contains(&day.first_of_month());
    let facts = Facts {
        live_usage: db::usage_days(&mut *conn, period.from, period.to).await?,
        live_tokens: db::token_days(&mut *conn, period.from, period.to).await?,
        frozen_usage: db::frozen_usage(&mut *conn, period.from, period.to).await?,
        frozen_tokens: db::frozen_tokens(&mut *conn, period.from, period.to).await?,
        frozen_rates: db::frozen_rates(&mut *conn, period.from, period.to).await?,
    };
    let input = facts.input(
        period,
        &teams,
        &capacity,
        &live_rates,
        &is_closed,
        &is_closed,
    );
    let mut statement = model::statement(&input, period.by_day);
    let mut month = period.from.first_of_month();
    while month < period.to {
        if closed.contains(&month) {
            statement.closed_months.push(month.month_name());
        }
        month = month.next_month();
    }
    // a closed month's late changes are charged in the first open month after it
    for &closed_month in &closed {
        let mut next = closed_month.next_month();
        while closed.contains(&next) {
            next = next.next_month();
        }
        if next < period.from || next >= period.to {
            continue;
        }
        let whole = Period {
            from: closed_month,
            to: closed_month.next_month(),
            by_day: false,
            idle: period.idle,
            lend_credit_pct: period.lend_credit_pct,
            csv: false,
        };
        let facts = Facts {
            live_usage: db::usage_days(&mut *conn, whole.from, whole.to).await?,
            live_tokens: db::token_days(&mut *conn, whole.from, whole.to).await?,
            frozen_usage: db::frozen_usage(&mut *conn, whole.from, whole.to).await?,
            frozen_tokens: db::frozen_tokens(&mut *conn, whole.from, whole.to).await?,
            frozen_rates: db::frozen_rates(&mut *conn, whole.from, whole.to).await?,
        };
        let frozen = model::statement(
            &facts.input(&whole, &teams, &capacity, &live_rates, &|_| true, &|_| true),
            false,
        );
        let now = model::statement(
            &facts.input(&whole, &teams, &capacity, &live_rates, &|_| false, &|_| {
                true
            }),
            false,
        );
        statement.adjustments.extend(model::adjustments(
            &closed_month.month_name(),
            &frozen,
            &now,
        ));
    }
    Ok(statement)
}

/// What a statement reads, live and frozen.
struct Facts {
    live_usage: Vec<UsageDay>,
    live_tokens: Vec<TokensDay>,
    frozen_usage: Vec<UsageDay>,
    frozen_tokens: Vec<TokensDay>,
    frozen_rates: Vec<db::FrozenRate>,
}

impl Facts {
    /// The statement input: usage and tokens frozen on days `frozen_usage` says, rates and
    /// capacity frozen on days `frozen_prices` says, live otherwise. Every day gets its own
    /// rate entry, so a day is priced at exactly its rate.
    fn input(
        &self,
        period: &Period,
        teams: &[Team],
        capacity: &BTreeMap<String, i64>,
        live_rates: &[Rate],
        frozen_usage: &dyn Fn(Day) -> bool,
        frozen_prices: &dyn Fn(Day) -> bool,
    ) -> StatementInput {
        let usage: Vec<UsageDay> = self
            .live_usage
            .iter()
            .filter(|u| !frozen_usage(u.day))
            .chain(self.frozen_usage.iter().filter(|u| frozen_usage(u.day)))
            .cloned()
            .collect();
        let tokens = self
            .live_tokens
            .iter()
            .filter(|t| !frozen_usage(t.day))
            .chain(self.frozen_tokens.iter().filter(|t| frozen_usage(t.day)))
            .cloned()
            .collect();
        let flavors: BTreeSet<&str> = capacity
            .keys()
            .map(String::as_str)
            .chain(usage.iter().map(|u| u.flavor.as_str()))
            .collect();
        let mut rates = Vec::new();
        let mut capacity_by_day = BTreeMap::new();
        let days = (0..period.from.days_until(period.to)).map(|n| period.from.plus(n));
        for day in days {
            let frozen: Vec<&db::FrozenRate> =
                self.frozen_rates.iter().filter(|r| r.day == day).collect();
            if frozen_prices(day) && !frozen.is_empty() {
                capacity_by_day.insert(
                    day,
                    frozen.iter().map(|r| (r.flavor.clone(), r.gpus)).collect(),
                );
                rates.extend(frozen.iter().filter_map(|r| {
                    r.cents_per_gpu_hour.map(|cents| Rate {
                        flavor: r.flavor.clone(),
                        effective_from: day,
                        cents_per_gpu_hour: cents,
                    })
                }));
            } else {
                rates.extend(flavors.iter().filter_map(|flavor| {
                    model::rate_on(live_rates, flavor, day).map(|cents| Rate {
                        flavor: (*flavor).to_owned(),
                        effective_from: day,
                        cents_per_gpu_hour: cents,
                    })
                }));
            }
        }
        StatementInput {
            from: period.from,
            to: period.to,
            idle: period.idle,
            lend_credit_pct: period.lend_credit_pct,
            teams: teams.to_vec(),
            capacity: capacity.clone(),
            capacity_by_day,
            rates,
            usage,
            tokens,
        }
    }
}

async fn statement(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Query(query): Query<StatementQuery>,
) -> Result<Response> {
    let mut period = query.checked().map_err(Error::Invalid)?;
    let wants_csv = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/csv"));
    period.csv |= wants_csv;
    let mut statement = build(&state.pool, &period).await?;
    if !caller.has_any(READERS) {
        if caller.teams.is_empty() {
            return Err(Error::Forbidden(
                "statements are for finance, approvers, admins and team members",
            ));
        }
        statement = statement.only_teams(&caller.teams);
    }
    Ok(if period.csv {
        let name = format!(
            "attachment; filename=\"gpufleet-statement-{}-{}.csv\"",
            statement.from, statement.to_inclusive
        );
        (
            [
                (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
                (header::CONTENT_DISPOSITION, name),
            ],
            model::csv(&statement),
        )
            .into_response()
    } else {
        Json(statement).into_response()
    })
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
    let day_ms = |d: Day| i64::from(d.days_since_epoch()) * shared::utc::DAY_MS;
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
    let summary = |rows: Vec<UsageDay>| -> Vec<DrillDay> {
        rows.into_iter()
            .filter(|u| u.namespace == owner.namespace)
            .map(|u| DrillDay {
                flavor: u.flavor,
                allocated_gpu_hours: u.allocated_gpu_us.map(model::Hours),
                busy_gpu_hours: model::Hours(u.busy_gpu_us),
                observed_gpu_hours: model::Hours(u.observed_gpu_us),
            })
            .collect()
    };
    let closed = db::closed_months(&mut *conn)
        .await?
        .iter()
        .any(|(month, _, _)| *month == day.first_of_month());
    let frozen = summary(db::frozen_usage(&mut *conn, day, day.plus(1)).await?);
    let rollups = summary(db::usage_days(&mut *conn, day, day.plus(1)).await?);
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
    if rate.cents_per_gpu_hour < 0 || rate.cents_per_gpu_hour > 10_000_000 {
        return Err(Error::Invalid(vec![FieldError {
            path: "cents_per_gpu_hour".into(),
            message: "whole cents per GPU-hour, 0 to 10,000,000".into(),
        }]));
    }
    let mut tx = state.pool.begin().await?;
    db::set_rate(
        &mut *tx,
        &flavor,
        rate.effective_from,
        rate.cents_per_gpu_hour,
        Some(caller.user_id),
    )
    .await?
    .ok_or(Error::NotFound)?;
    audit::record(
        &mut *tx,
        Actor::User(&caller),
        Kind::Flavor,
        "set rate",
        &format!("flavor {flavor}"),
        None,
        None,
        Some(&serde_json::json!(rate)),
    )
    .await?;
    tx.commit().await?;
    Ok(Json(db::rates(&state.pool).await?))
}
