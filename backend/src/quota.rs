//! GPU quota as a system of record (`/api/quota/…`): flavors and each team's Kueue identity
//! (admins edit them), quota requests from draft to approval (team members request, approvers
//! decide), and the audit log. The rules are `shared::quota`, the same code the request form
//! runs in the browser; the SQL is in `db.rs`.
//!
//! Invariants:
//! - every change that the capacity rules read (approve, revoke, flavor and queue edits) runs
//!   under one advisory lock, so two approvals can never together exceed a flavor's capacity;
//! - a request changes only from the version its caller read (else 409) and only along
//!   `shared::quota::State::after` (else 409); whoever wrote or submitted it cannot approve it;
//! - every change writes its audit entry in the same transaction: no change without a record.

pub mod cli;
pub mod db;
pub mod findings;

use std::collections::BTreeSet;

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
    http::{Method, StatusCode},
};
use serde::Deserialize;
use serde_json::{Value, json};
use shared::{
    FieldError,
    accounts::Role,
    audit::Kind,
    chargeback::worth::{self, Review},
    common::{day::Day, utc::format_rfc3339},
    kueue::KueueVersion,
    planning::replay::{WhatIf, WhatIfInput, WhatIfQuery},
    quota::{
        Action, Approved, Decision, EditRequest, Flavor, FlavorEdit, NewRequest, OnCluster,
        QueueNames, QuotaRequest, QuotaSpec, QuotaWorld, RequestView, State as RequestState,
        Submit, TeamQueue,
    },
    usage::reported,
};
use sqlx::{PgConnection, PgPool, types::time::OffsetDateTime};

use crate::{
    access::{Access, Caller},
    app::{Api, AppState},
    audit::{self, Actor},
    clock,
    error::{Error, Result},
    json::ApiJson,
};

const ADMIN: &[Role] = &[Role::Admin];
/// Who decides on requests.
const DECIDERS: &[Role] = &[Role::Approver, Role::Admin];
/// Who reads every team's requests and the audit log.
const READERS: &[Role] = &[Role::Approver, Role::Finance, Role::Admin];

/// The quota routes: a table, one row per route with who may call it, longer than a function
/// should be because a table reads better whole (the auth and fuzz tests enumerate it).
pub fn api() -> Api {
    let team_or_readers = Access::TeamOr(READERS);
    let team_or_admin = Access::TeamOr(ADMIN);
    let deciders = Access::Roles(DECIDERS);
    Api::default()
        .route(Method::GET, "/quota/world", Access::SignedIn, get_world)
        .route(
            Method::PUT,
            "/quota/flavors/{flavor}",
            Access::Roles(ADMIN),
            update_flavor,
        )
        .route(
            Method::PUT,
            "/quota/teams/{team}/queue",
            Access::Roles(ADMIN),
            update_queue,
        )
        .route(
            Method::GET,
            "/quota/requests",
            Access::Roles(READERS),
            list_requests,
        )
        .route(
            Method::GET,
            "/quota/teams/{team}/requests",
            team_or_readers,
            list_team_requests,
        )
        .route(
            Method::POST,
            "/quota/teams/{team}/requests",
            team_or_admin,
            create_request,
        )
        .route(
            Method::GET,
            "/quota/teams/{team}/requests/{id}",
            team_or_readers,
            show_request,
        )
        .route(
            Method::POST,
            "/quota/teams/{team}/preview",
            team_or_admin,
            preview_request,
        )
        .route(
            Method::PUT,
            "/quota/teams/{team}/requests/{id}",
            team_or_admin,
            edit_request,
        )
        .route(
            Method::POST,
            "/quota/teams/{team}/requests/{id}/submit",
            team_or_admin,
            |s, c, p, b| team_step(s, c, p, b, Action::Submit),
        )
        .route(
            Method::POST,
            "/quota/teams/{team}/requests/{id}/withdraw",
            team_or_admin,
            |s, c, p, b| team_step(s, c, p, b, Action::Withdraw),
        )
        .route(
            Method::POST,
            "/quota/teams/{team}/requests/{id}/approve",
            deciders,
            |s, c, p, b| decision(s, c, p, b, Action::Approve),
        )
        .route(
            Method::POST,
            "/quota/teams/{team}/requests/{id}/reject",
            deciders,
            |s, c, p, b| decision(s, c, p, b, Action::Reject),
        )
        .route(
            Method::POST,
            "/quota/teams/{team}/requests/{id}/revoke",
            deciders,
            |s, c, p, b| decision(s, c, p, b, Action::Revoke),
        )
        .route(
            Method::GET,
            "/quota/teams/{team}/requests/{id}/what-if",
            deciders,
            what_if,
        )
        .route(
            Method::GET,
            "/quota/teams/{team}/requests/{id}/what-if/input",
            deciders,
            what_if_input,
        )
        .route(Method::GET, "/quota/findings", deciders, findings::get)
        .route(
            Method::GET,
            "/quota/teams/{team}/standing",
            team_or_readers,
            findings::standing,
        )
        .route(
            Method::GET,
            "/quota/audit",
            Access::Roles(READERS),
            audit::page,
        )
        .route(
            Method::GET,
            "/quota/audit.csv",
            Access::Roles(READERS),
            audit::csv,
        )
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value).map_err(|err| Error::Internal(err.to_string()))
}

/// The flavors, the teams' queues and the approved requests, as the rules read them.
pub async fn world(db: &mut PgConnection) -> Result<QuotaWorld> {
    let flavors = db::flavors(&mut *db)
        .await?
        .into_iter()
        .map(|row| {
            Ok(Flavor {
                settings: row.settings.0,
                name: row.name,
                gpu_model: row.gpu_model,
                pools: row.pools,
                gpus: row.gpus,
                version: row.version,
                product_label: row.product_label,
            })
        })
        .collect::<Result<_>>()?;
    let teams = db::team_queues(&mut *db, None)
        .await?
        .into_iter()
        .map(team_queue)
        .collect();
    let approved = db::approved(&mut *db)
        .await?
        .into_iter()
        .map(|row| {
            Ok(Approved {
                spec: row.spec.0,
                id: row.id,
                team: row.team,
                order: row.approval_order,
            })
        })
        .collect::<Result<_>>()?;
    Ok(QuotaWorld {
        flavors,
        teams,
        approved,
        held: crate::chargeback::budget::held(db).await?,
    })
}

fn team_queue(row: db::TeamQueueRow) -> TeamQueue {
    TeamQueue {
        team: row.team,
        namespace: row.namespace,
        cluster_queue: row.cluster_queue,
        local_queue: row.local_queue,
        cohort: row.cohort,
    }
}

fn to_request(row: db::RequestRow, in_force: &BTreeSet<i64>) -> Result<QuotaRequest> {
    Ok(QuotaRequest {
        state: RequestState::parse(&row.state).ok_or_else(|| {
            Error::Internal(format!(
                "quota request {} is in state {:?}",
                row.id, row.state
            ))
        })?,
        spec: row.spec.0,
        in_force: in_force.contains(&row.id),
        id: row.id,
        team: row.team,
        version: row.version,
        created_by: row.created_by,
        created_at: clock::rfc3339(row.created_at),
        updated_at: clock::rfc3339(row.updated_at),
        submitted_at: row.submitted_at.map(clock::rfc3339),
        decided_by: row.decided_by,
        decided_at: row.decided_at.map(clock::rfc3339),
        comment: row.comment,
        applied_at: row.applied_at.map(clock::rfc3339),
        applied_to: row.applied_to,
        apply_error: row.apply_error,
        on_cluster: None,
    })
}

/// Whether Kueue's own metrics show a request in force that landed (applied, or written as
/// GitOps files): one read of the usage rows for each such request.
async fn on_cluster(
    db: &mut PgConnection,
    (world, writes_files): (&QuotaWorld, bool),
    request: &mut QuotaRequest,
    applied_at: Option<OffsetDateTime>,
) -> Result<()> {
    let Some(applied_at) = applied_at.filter(|_| request.in_force && request.apply_error.is_none())
    else {
        return Ok(());
    };
    let reported =
        crate::usage::db::reported_nominal(&mut *db, &request.team, clock::unix_ms(applied_at))
            .await?;
    request.on_cluster = match reported::seen_from(&request.spec, &world.flavors, &reported) {
        Some(ms) => Some(OnCluster::Reported {
            as_of: format_rfc3339(ms),
        }),
        None if writes_files => Some(OnCluster::WrittenNotSeen),
        None => None,
    };
    Ok(())
}

fn in_force(world: &QuotaWorld, today: Day) -> BTreeSet<i64> {
    world.effective_on(today).values().map(|a| a.id).collect()
}

/// Everyone signed in sees every team's approved quota (the Fleet page shows it); why another
/// team asked for it is for that team and the readers only.
async fn get_world(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<QuotaWorld>> {
    let mut tx = state.pool.begin().await?;
    let mut world = world(&mut tx).await?;
    tx.commit().await?;
    if !caller.has_any(READERS) {
        for a in &mut world.approved {
            if !caller.teams.contains(&a.team) {
                a.spec.justification.clear();
            }
        }
    }
    Ok(Json(world))
}

/// A flavor edit's settings as the rules read them, errors at their paths under `settings.`.
pub(crate) fn checked_settings(edit: &FlavorEdit, gpu_model: &str) -> Result<()> {
    edit.settings.validate(gpu_model).map_err(|errors| {
        Error::Invalid(
            errors
                .into_iter()
                .map(|e| FieldError {
                    path: format!("settings.{}", e.path),
                    message: e.message,
                })
                .collect(),
        )
    })
}

async fn update_flavor(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    ApiJson(edit): ApiJson<FlavorEdit>,
) -> Result<Json<Flavor>> {
    let mut tx = state.pool.begin().await?;
    db::lock_quota(&mut *tx).await?;
    let (settings, version, gpu_model) = db::lock_flavor(&mut *tx, &name)
        .await?
        .ok_or(Error::NotFound)?;
    if version != edit.version {
        return Err(stale("flavor", edit.version, version));
    }
    checked_settings(&edit, &gpu_model)?;
    let mut would_be = world(&mut tx).await?;
    if let Some(f) = would_be.flavors.iter_mut().find(|f| f.name == name) {
        f.settings = edit.settings.clone();
    }
    let problems = would_be.overcommitted(clock::today());
    if !problems.is_empty() {
        return Err(Error::Conflict(format!(
            "{}; revoke or supersede quota first",
            problems.join("; ")
        )));
    }
    let before = settings;
    let after = to_json(&edit.settings)?;
    db::update_flavor(&mut *tx, &name, &after).await?;
    audit::record(
        &mut *tx,
        Actor::User(&caller),
        Kind::Flavor,
        "update",
        &format!("flavor {name}"),
        None,
        Some(&before),
        Some(&after),
    )
    .await?;
    let flavor = world(&mut tx)
        .await?
        .flavors
        .into_iter()
        .find(|f| f.name == name)
        .ok_or(Error::NotFound)?;
    tx.commit().await?;
    tracing::info!(flavor = name, by = caller.username, "flavor updated");
    Ok(Json(flavor))
}

async fn update_queue(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(team): Path<String>,
    ApiJson(names): ApiJson<QueueNames>,
) -> Result<Json<TeamQueue>> {
    names.validate().map_err(Error::Invalid)?;
    let mut tx = state.pool.begin().await?;
    db::lock_quota(&mut *tx).await?;
    let before = db::team_queues(&mut *tx, Some(&team))
        .await?
        .pop()
        .map(team_queue)
        .ok_or(Error::NotFound)?;
    if names.cohort.is_none() {
        let world = world(&mut tx).await?;
        let limits = world.approved.iter().any(|a| {
            a.team == team
                && a.spec
                    .lines
                    .iter()
                    .any(|l| l.borrowing_limit.is_some() || l.lending_limit.is_some())
        });
        if limits {
            return Err(Error::Conflict(format!(
                "{team}'s approved quota has borrowing or lending limits, which need a cohort; revoke or supersede it first"
            )));
        }
    }
    db::update_team_queue(
        &mut *tx,
        &team,
        &names.cluster_queue,
        &names.local_queue,
        names.cohort.as_deref(),
    )
    .await
    .map_err(|err| match &err {
        sqlx::Error::Database(e) if e.is_unique_violation() => Error::Conflict(format!(
            "another team's ClusterQueue is named {:?}",
            names.cluster_queue
        )),
        _ => Error::Database(err),
    })?;
    let after = TeamQueue {
        cluster_queue: names.cluster_queue,
        local_queue: names.local_queue,
        cohort: names.cohort,
        ..before.clone()
    };
    audit::record(
        &mut *tx,
        Actor::User(&caller),
        Kind::TeamQueue,
        "update",
        &format!("team {team}"),
        Some(&team),
        Some(&to_json(&before)?),
        Some(&to_json(&after)?),
    )
    .await?;
    tx.commit().await?;
    Ok(Json(after))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    state: Option<String>,
}

async fn list(
    state: &AppState,
    team: Option<&str>,
    query: &ListQuery,
) -> Result<Json<Vec<QuotaRequest>>> {
    let wanted = match query.state.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => Some(RequestState::parse(s).ok_or_else(|| {
            let known: Vec<&str> = RequestState::ALL.iter().map(|s| s.as_str()).collect();
            Error::Invalid(vec![FieldError {
                path: "state".into(),
                message: format!("one of {}", known.join(", ")),
            }])
        })?),
        None => None,
    };
    let mut tx = state.pool.begin().await?;
    let world = world(&mut tx).await?;
    let rows = db::requests(&mut *tx, team, wanted.map(RequestState::as_str), None).await?;
    let live = in_force(&world, clock::today());
    let mode = (&world, state.cluster.writes_files());
    let mut requests = Vec::with_capacity(rows.len());
    for row in rows {
        let applied_at = row.applied_at;
        let mut request = to_request(row, &live)?;
        on_cluster(&mut tx, mode, &mut request, applied_at).await?;
        requests.push(request);
    }
    tx.commit().await?;
    Ok(Json(requests))
}

async fn list_requests(
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Vec<QuotaRequest>>> {
    list(&state, None, &query).await
}

async fn list_team_requests(
    State(state): State<AppState>,
    Path(team): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Vec<QuotaRequest>>> {
    let mut tx = state.pool.begin().await?;
    if db::team_queues(&mut *tx, Some(&team)).await?.is_empty() {
        return Err(Error::NotFound);
    }
    tx.commit().await?;
    list(&state, Some(&team), &query).await
}

/// A path's id; anything else names no request.
fn request_id(id: &str) -> Result<i64> {
    id.parse().map_err(|_| Error::NotFound)
}

/// The request with what the approver weighs, read inside `db`'s transaction.
async fn view(db: &mut PgConnection, team: &str, id: i64) -> Result<RequestView> {
    Ok(view_in(db, team, id).await?.1)
}

/// The quota world and the request's view in it.
async fn view_in(db: &mut PgConnection, team: &str, id: i64) -> Result<(QuotaWorld, RequestView)> {
    let world = world(&mut *db).await?;
    let row = db::requests(&mut *db, Some(team), None, Some(id))
        .await?
        .pop()
        .ok_or(Error::NotFound)?;
    let today = clock::today();
    let request = to_request(row, &in_force(&world, today))?;
    let view = world.review(request, today, KueueVersion::default());
    Ok((world, view))
}

/// The review's "in use today": the last day's whole hours.
const IN_USE_HOURS: i64 = 24;
const HOUR_MS: i64 = 3_600_000;

/// The review: the request as the rules see it, what it is worth at the flavors' rates against
/// the team's quota in force, and what the team used of its quota over the last day.
async fn show_request(
    State(state): State<AppState>,
    Path((team, id)): Path<(String, String)>,
) -> Result<Json<Review>> {
    let id = request_id(&id)?;
    let mut tx = state.pool.begin().await?;
    let (world, view) = view_in(&mut tx, &team, id).await?;
    let review = weighed(&mut tx, &world, view).await?;
    tx.commit().await?;
    Ok(Json(review))
}

/// `POST /api/quota/teams/{team}/preview`: what the approver will weigh for a spec before it
/// is sent — the rules' verdict, what it is worth, the team's use today and the cohort impact —
/// as `GET …/requests/{id}` answers for a saved one. Nothing is saved or audited.
async fn preview_request(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(team): Path<String>,
    ApiJson(new): ApiJson<NewRequest>,
) -> Result<Json<Review>> {
    let mut tx = state.pool.begin().await?;
    let world = world_taking(&mut tx, &team, &new.spec).await?;
    let now = format_rfc3339(clock::now_ms());
    let unsent = QuotaRequest {
        id: UNSENT,
        team,
        state: RequestState::Draft,
        version: 0,
        spec: new.spec,
        created_by: caller.username,
        created_at: now.clone(),
        updated_at: now,
        submitted_at: None,
        decided_by: None,
        decided_at: None,
        comment: None,
        in_force: false,
        applied_at: None,
        apply_error: None,
        applied_to: None,
        on_cluster: None,
    };
    let view = world.review(unsent, clock::today(), KueueVersion::default());
    let review = weighed(&mut tx, &world, view).await?;
    tx.commit().await?;
    Ok(Json(review))
}

/// The id of a request not yet saved: ids are numbered from 1, so it names none.
const UNSENT: i64 = 0;

/// A request's view with what the approver weighs beside it: its worth at the flavors' rates
/// against the team's quota in force (the request itself left out), and what the team used of
/// its quota over the last day.
async fn weighed(db: &mut PgConnection, world: &QuotaWorld, view: RequestView) -> Result<Review> {
    let team = &view.request.team;
    let rates = crate::chargeback::db::rates(&mut *db).await?;
    let this_hour = clock::now_ms() / HOUR_MS * HOUR_MS;
    let in_use = crate::usage::db::in_use(&mut *db, team, this_hour, IN_USE_HOURS).await?;
    let others = world.without(view.request.id);
    let worth = worth::worth(&others, team, &view.request.spec, clock::today(), &rates);
    Ok(Review {
        worth,
        in_use,
        view,
    })
}

/// `GET /api/quota/teams/{team}/requests/{id}/what-if?weeks=N`: the last N whole weeks' recorded
/// work replayed before and after the request's approval (`shared::planning::replay`).
async fn what_if(
    State(state): State<AppState>,
    Path(path): Path<(String, String)>,
    Query(query): Query<WhatIfQuery>,
) -> Result<Json<WhatIf>> {
    let ((id, team, spec), weeks) = what_if_asked(&state, path, &query).await?;
    Ok(Json(
        crate::planning::what_if(&state, (id, &team, spec), weeks).await?,
    ))
}

/// `GET /api/quota/teams/{team}/requests/{id}/what-if/input?weeks=N`: the same what-if, ready
/// for the approver's browser to replay (`shared::planning::replay::WhatIfInput`).
async fn what_if_input(
    State(state): State<AppState>,
    Path(path): Path<(String, String)>,
    Query(query): Query<WhatIfQuery>,
) -> Result<Json<WhatIfInput>> {
    let ((id, team, spec), weeks) = what_if_asked(&state, path, &query).await?;
    Ok(Json(
        crate::planning::what_if_input(&state, (id, &team, spec), weeks).await?,
    ))
}

/// The request a what-if is asked of (its id, team and stored spec), and its weeks.
async fn what_if_asked(
    state: &AppState,
    (team, id): (String, String),
    query: &WhatIfQuery,
) -> Result<((i64, String, QuotaSpec), u32)> {
    let id = request_id(&id)?;
    let weeks = query.checked().map_err(Error::Invalid)?;
    let mut conn = state.pool.acquire().await?;
    let spec = stored_spec(&mut conn, &team, id).await?;
    Ok(((id, team, spec), weeks))
}

/// The request's stored spec.
pub async fn stored_spec(db: &mut PgConnection, team: &str, id: i64) -> Result<QuotaSpec> {
    let row = db::requests(&mut *db, Some(team), None, Some(id))
        .await?
        .pop()
        .ok_or(Error::NotFound)?;
    Ok(row.spec.0)
}

/// The rules' errors for `spec`, as a 422 with field paths under `spec`.
/// The quota world, when `team` is in it and its rules take `spec` as a request of the team's
/// (`404` for no such team, `422` at the spec's fields).
async fn world_taking(db: &mut PgConnection, team: &str, spec: &QuotaSpec) -> Result<QuotaWorld> {
    let world = world(db).await?;
    if world.team(team).is_none() {
        return Err(Error::NotFound);
    }
    check(&world, team, spec)?;
    Ok(world)
}

fn check(world: &QuotaWorld, team: &str, spec: &QuotaSpec) -> Result<()> {
    let checked = world.check(team, spec, clock::today());
    if checked.errors.is_empty() {
        return Ok(());
    }
    Err(Error::Invalid(
        checked
            .errors
            .into_iter()
            .map(|e| FieldError {
                path: format!("spec.{}", e.path),
                message: e.message,
            })
            .collect(),
    ))
}

fn stale(what: &str, sent: i32, now: i32) -> Error {
    Error::Conflict(format!(
        "the {what} changed since you read it (you sent version {sent}, it is at {now}); reload it"
    ))
}

/// What the audit keeps of a request at one moment.
fn snapshot(
    state: RequestState,
    version: i32,
    spec: Option<&QuotaSpec>,
    comment: Option<&str>,
) -> Result<Value> {
    let mut value = json!({"state": state, "version": version});
    if let Some(spec) = spec {
        value["spec"] = to_json(spec)?;
    }
    if let Some(comment) = comment {
        value["comment"] = json!(comment);
    }
    Ok(value)
}

async fn create_request(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(team): Path<String>,
    ApiJson(new): ApiJson<NewRequest>,
) -> Result<(StatusCode, Json<RequestView>)> {
    let mut tx = state.pool.begin().await?;
    world_taking(&mut tx, &team, &new.spec).await?;
    let spec = to_json(&new.spec)?;
    let id = db::insert_request(&mut *tx, &team, &spec, caller.user_id)
        .await?
        .ok_or(Error::NotFound)?;
    audit::record(
        &mut *tx,
        Actor::User(&caller),
        Kind::QuotaRequest,
        "create",
        &format!("quota request {id}"),
        Some(&team),
        None,
        Some(&snapshot(RequestState::Draft, 1, Some(&new.spec), None)?),
    )
    .await?;
    let view = view(&mut tx, &team, id).await?;
    tx.commit().await?;
    tracing::info!(team, id, by = caller.username, "quota request drafted");
    Ok((StatusCode::CREATED, Json(view)))
}

/// Locks request `id` of `team` and checks that `action` is allowed from its state and that
/// the caller read its current version; its state and version before the change.
async fn lock_for(
    db: &mut PgConnection,
    team: &str,
    id: i64,
    version: i32,
    action: Action,
) -> Result<(RequestState, i32, RequestState)> {
    let (owner, state, now) = db::lock_request(&mut *db, id)
        .await?
        .ok_or(Error::NotFound)?;
    if owner != team {
        return Err(Error::NotFound);
    }
    let state = RequestState::parse(&state)
        .ok_or_else(|| Error::Internal(format!("quota request {id} is in state {state:?}")))?;
    let next = state.after(action).ok_or_else(|| {
        Error::Conflict(format!(
            "a {} request cannot be {}",
            state.as_str(),
            match action {
                Action::Edit => "edited",
                Action::Submit => "submitted",
                Action::Withdraw => "withdrawn",
                Action::Approve => "approved",
                Action::Reject => "rejected",
                Action::Revoke => "revoked",
                Action::Supersede => "superseded",
            }
        ))
    })?;
    if version != now {
        return Err(stale("request", version, now));
    }
    Ok((state, now, next))
}

async fn edit_request(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((team, id)): Path<(String, String)>,
    ApiJson(edit): ApiJson<EditRequest>,
) -> Result<Json<RequestView>> {
    let id = request_id(&id)?;
    let mut tx = state.pool.begin().await?;
    let (before_state, version, next) =
        lock_for(&mut tx, &team, id, edit.version, Action::Edit).await?;
    let world = world(&mut tx).await?;
    check(&world, &team, &edit.spec)?;
    let before = stored_spec(&mut tx, &team, id).await?;
    db::update_spec(&mut *tx, id, &to_json(&edit.spec)?, caller.user_id).await?;
    audit::record(
        &mut *tx,
        Actor::User(&caller),
        Kind::QuotaRequest,
        Action::Edit.as_str(),
        &format!("quota request {id}"),
        Some(&team),
        Some(&snapshot(before_state, version, Some(&before), None)?),
        Some(&snapshot(next, version + 1, Some(&edit.spec), None)?),
    )
    .await?;
    let view = view(&mut tx, &team, id).await?;
    tx.commit().await?;
    Ok(Json(view))
}

/// A team's own step on its request, `POST …/submit` or `…/withdraw` with `{version}`:
/// submitting checks the request against the rules as an approver will see it; withdrawing
/// takes a submitted request back to a draft, out of the approvers' inbox. Audited.
async fn team_step(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((team, id)): Path<(String, String)>,
    ApiJson(step): ApiJson<Submit>,
    action: Action,
) -> Result<Json<RequestView>> {
    let id = request_id(&id)?;
    let mut tx = state.pool.begin().await?;
    let (before_state, version, next) = lock_for(&mut tx, &team, id, step.version, action).await?;
    if action == Action::Submit {
        let spec = stored_spec(&mut tx, &team, id).await?;
        let world = world(&mut tx).await?;
        check(&world, &team, &spec)?;
        db::set_submitted(&mut *tx, id, caller.user_id).await?;
    } else {
        db::set_withdrawn(&mut *tx, id).await?;
    }
    audit::record(
        &mut *tx,
        Actor::User(&caller),
        Kind::QuotaRequest,
        action.as_str(),
        &format!("quota request {id}"),
        Some(&team),
        Some(&snapshot(before_state, version, None, None)?),
        Some(&snapshot(next, version + 1, None, None)?),
    )
    .await?;
    let view = view(&mut tx, &team, id).await?;
    tx.commit().await?;
    tracing::info!(
        team,
        id,
        by = caller.username,
        action = action.as_str(),
        "quota request moved"
    );
    Ok(Json(view))
}

/// One decision's handler body: `POST …/approve`, `…/reject` and `…/revoke` differ only in
/// their action.
async fn decision(
    state: State<AppState>,
    caller: Extension<Caller>,
    path: Path<(String, String)>,
    body: ApiJson<Decision>,
    action: Action,
) -> Result<Json<RequestView>> {
    let (State(state), Extension(caller), Path((team, id)), ApiJson(decision)) =
        (state, caller, path, body);
    decide(&state, &caller, &team, &id, &decision, action).await
}

/// Approve, reject or revoke, under the quota lock (see the module's invariants).
async fn decide(
    state: &AppState,
    caller: &Caller,
    team: &str,
    id: &str,
    decision: &Decision,
    action: Action,
) -> Result<Json<RequestView>> {
    let id = request_id(id)?;
    decision.validate().map_err(Error::Invalid)?;
    let comment = decision.comment.trim();
    let mut tx = state.pool.begin().await?;
    db::lock_quota(&mut *tx).await?;
    let (before_state, version, next) =
        lock_for(&mut tx, team, id, decision.version, action).await?;
    let row = db::requests(&mut *tx, Some(team), None, Some(id))
        .await?
        .pop()
        .ok_or(Error::NotFound)?;
    let subject = format!("quota request {id}");
    // Four eyes for every decision: approving, rejecting and revoking alike.
    if row.submitted_by_id == Some(caller.user_id)
        || db::wrote(&mut *tx, id, caller.user_id).await?
    {
        return Err(Error::Forbidden(
            "you wrote, edited or submitted this request; another approver must decide (four eyes)",
        ));
    }
    match action {
        Action::Approve => {
            let spec: QuotaSpec = row.spec.0.clone();
            let world = world(&mut tx).await?;
            check(&world, team, &spec)?;
            for old in world.superseded_by(team, &spec, clock::today()) {
                db::set_ended(&mut *tx, old, RequestState::Superseded.as_str()).await?;
                audit::record(
                    &mut *tx,
                    Actor::Console,
                    Kind::QuotaRequest,
                    Action::Supersede.as_str(),
                    &format!("quota request {old}"),
                    Some(team),
                    Some(&json!({"state": RequestState::Approved})),
                    Some(&json!({"state": RequestState::Superseded, "by": id})),
                )
                .await?;
            }
            db::set_decided(&mut *tx, id, next.as_str(), caller.user_id, comment).await?;
        }
        Action::Reject => {
            db::set_decided(&mut *tx, id, next.as_str(), caller.user_id, comment).await?;
        }
        _ => db::set_ended(&mut *tx, id, next.as_str()).await?,
    }
    audit::record(
        &mut *tx,
        Actor::User(caller),
        Kind::QuotaRequest,
        action.as_str(),
        &subject,
        Some(team),
        Some(&snapshot(before_state, version, None, None)?),
        Some(&snapshot(next, version + 1, None, Some(comment))?),
    )
    .await?;
    let view = view(&mut tx, team, id).await?;
    tx.commit().await?;
    if matches!(action, Action::Approve | Action::Revoke) {
        state.cluster.wake();
    }
    tracing::info!(
        team,
        id,
        action = action.as_str(),
        by = caller.username,
        "quota request decided"
    );
    Ok(Json(view))
}

/// The demo's quota, so a fresh console shows it at work, in force since the demo's workload
/// history begins: research holds 48 of the 96 H200s (requested by rita, approved by alex),
/// search serves on the 32 RTX GPUs and the MIG node's 56 instances (requested by sam, approved
/// by alex), and search asks for 32 of the 64 H100s besides (submitted by sam, waiting in the
/// inbox). The demo exporter's usage follows these quotas. Made only where no request exists
/// yet and the demo inventory and users are there; `false` when nothing was made. Each step is
/// audited as the console's.
pub async fn load_demo(pool: &PgPool) -> Result<bool> {
    let mut tx = pool.begin().await?;
    db::lock_quota(&mut *tx).await?;
    if !db::requests(&mut *tx, None, None, None).await?.is_empty() {
        return Ok(false);
    }
    let mut ids = Vec::new();
    for name in ["rita", "sam", "alex"] {
        match crate::accounts::db::user_id(&mut *tx, name).await? {
            Some(id) => ids.push(id),
            None => return Ok(false),
        }
    }
    let (rita, sam, alex) = (ids[0], ids[1], ids[2]);
    let today = clock::today();
    let world = world(&mut tx).await?;
    let [research, served, search] = demo_specs(today);
    let fits = |team: &str, s: &QuotaSpec| {
        world.team(team).is_some() && world.check(team, s, today).errors.is_empty()
    };
    if !fits("research", &research) || !fits("search", &served) || !fits("search", &search) {
        return Ok(false);
    }
    for (team, spec, by, approver) in [
        ("research", &research, rita, Some(alex)),
        ("search", &served, sam, Some(alex)),
        ("search", &search, sam, None),
    ] {
        file_demo_request(&mut tx, (team, spec, by), approver).await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// The demo's requests: research's 48 H200s and search's serving quota (32 RTX GPUs and the
/// MIG node's 56 instances), both in force since the demo's workload history begins, which the
/// teams' work ran under; and search's waiting request for the same plus 32 shared H100s.
fn demo_specs(today: Day) -> [QuotaSpec; 3] {
    let gpus = shared::quota::QuotaLine::nvidia_gpus;
    let spec = |lines: &[shared::quota::QuotaLine], why: &str| QuotaSpec {
        lines: lines.to_vec(),
        justification: why.to_owned(),
        ..QuotaSpec::blank(&[], today)
    };
    let since_history = |spec: QuotaSpec| QuotaSpec {
        starts_on: today.plus(-crate::cluster::history::DEMO_DAYS),
        ..spec
    };
    let mig = shared::quota::QuotaLine {
        resource: "nvidia.com/mig-1g.10gb".to_owned(),
        ..gpus("h100-mig", 56)
    };
    [
        since_history(spec(
            &[gpus("h200-train", 48)],
            "pre-training the 70B model",
        )),
        since_history(spec(
            &[gpus("rtx-inference", 32), mig.clone()],
            "serving the chat models, and the small models on MIG",
        )),
        spec(
            &[gpus("rtx-inference", 32), mig, gpus("h100-shared", 32)],
            "serving the new ranking model",
        ),
    ]
}

/// One demo request filed by `by` and submitted, and approved by `approver` when given, each
/// step audited as the console's.
async fn file_demo_request(
    tx: &mut PgConnection,
    (team, spec, by): (&str, &QuotaSpec, i64),
    approver: Option<i64>,
) -> Result<()> {
    let id = db::insert_request(&mut *tx, team, &to_json(spec)?, by)
        .await?
        .ok_or(Error::NotFound)?;
    db::set_submitted(&mut *tx, id, by).await?;
    let mut steps = vec![
        ("create", RequestState::Draft),
        ("submit", RequestState::Submitted),
    ];
    if let Some(alex) = approver {
        db::set_decided(
            &mut *tx,
            id,
            RequestState::Approved.as_str(),
            alex,
            "demo: fits the plan",
        )
        .await?;
        steps.push(("approve", RequestState::Approved));
    }
    for (action, state) in steps {
        audit::record(
            &mut *tx,
            Actor::Console,
            Kind::QuotaRequest,
            action,
            &format!("quota request {id}"),
            Some(team),
            None,
            Some(&json!({"state": state, "demo": true})),
        )
        .await?;
    }
    Ok(())
}
