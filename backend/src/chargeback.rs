//! Chargeback statements (`/api/chargeback/…`, `gpufleet chargeback …`): the shared crate's
//! statement (`shared::chargeback`) over the usage day rollups, the inventory's capacity and
//! the flavors' rates (`db.rs`). Finance, approvers and admins see every team and the fleet; a
//! requester sees only their own teams' lines.

pub mod cli;
pub mod db;

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
    http::{HeaderMap, Method, header},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};
use shared::{
    FieldError,
    audit::Kind,
    auth::Role,
    chargeback::{self as model, Period, Rate, Statement, StatementInput, StatementQuery},
    day::Day,
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
}

/// The statement of a checked period, for every team and the fleet.
pub async fn build(pool: &PgPool, period: &Period) -> Result<Statement> {
    let mut conn = pool.acquire().await?;
    let input = StatementInput {
        from: period.from,
        to: period.to,
        idle: period.idle,
        teams: db::teams(&mut *conn).await?,
        capacity: db::capacity(&mut *conn).await?,
        rates: db::rates(&mut *conn).await?,
        usage: db::usage_days(&mut *conn, period.from, period.to).await?,
        tokens: db::token_days(&mut *conn, period.from, period.to).await?,
    };
    Ok(model::statement(&input, period.by_day))
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

async fn rates(State(state): State<AppState>) -> Result<Json<Vec<Rate>>> {
    Ok(Json(db::rates(&state.pool).await?))
}

/// `PUT /api/chargeback/rates/{flavor}`: a rate from a day on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewRate {
    pub effective_from: Day,
    pub cents_per_gpu_hour: i64,
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
