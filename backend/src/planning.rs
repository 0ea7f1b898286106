//! Planning: `POST /api/plan/evaluate`, `GET /api/plan/today` (the fleet, teams and quotas in
//! force today as a scenario), `GET /api/plan/from-history` (a scenario from what the
//! fleet did), `GET /api/plan/replay` (a recorded week replayed: planned vs measured), and saved scenarios (`/api/scenarios`: list, save,
//! open, replace, delete, duplicate); the `gpufleet plan evaluate | export | bench` commands are
//! in `cli.rs`, the SQL in `db.rs`. The math is `shared::planning`; the browser runs the same code in
//! WASM.
//!
//! Invariants: every planner sees every saved scenario; only its owner or an admin replaces or
//! deletes it; what is stored was valid when saved, and opens in this build's version.

pub mod cli;
pub mod db;

use std::collections::BTreeMap;

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
    http::{Method, StatusCode},
};
use shared::{
    accounts::{PLANNERS, Role},
    chargeback::{TokensHour, UsageDay},
    cluster::workload::HistoryQuery,
    planning::from_history::{Derivation, FromHistory, Measured},
    planning::replay::{self, Replay, ReplayQuery, Replayer},
    planning::saved::{self, SavedScenario, SavedSummary, ScenarioSave},
    planning::scenario::{SCENARIO_VERSION, Scenario},
    planning::{self, EvaluateError, Evaluation},
    quota::QuotaWorld,
};

use crate::{
    access::{Access, Caller},
    app::{Api, AppState},
    chargeback, clock, cluster,
    error::{Error, Result},
    json::ApiJson,
};

pub fn api() -> Api {
    let planners = Access::Roles(PLANNERS);
    Api::default()
        .route(Method::POST, "/plan/evaluate", planners, evaluate)
        .route(Method::GET, "/plan/today", planners, today)
        .route(Method::GET, "/plan/from-history", planners, from_history)
        .route(Method::GET, "/plan/replay", planners, replay)
        .route(Method::GET, "/scenarios", planners, list_saved)
        .route(Method::POST, "/scenarios", planners, save)
        .route(Method::GET, "/scenarios/{id}", planners, open)
        .route(Method::PUT, "/scenarios/{id}", planners, replace)
        .route(Method::DELETE, "/scenarios/{id}", planners, delete)
        .route(
            Method::POST,
            "/scenarios/{id}/duplicate",
            planners,
            duplicate,
        )
}

/// A path's id; anything else names no scenario.
fn scenario_id(id: &str) -> Result<i64> {
    id.parse().map_err(|_| Error::NotFound)
}

fn summary(row: &db::Row) -> SavedSummary {
    SavedSummary {
        id: row.id,
        name: row.name.clone(),
        owner: row.owner.clone(),
        version: u32::try_from(row.schema_version).unwrap_or(0),
        created_at: crate::clock::rfc3339(row.created_at),
        updated_at: crate::clock::rfc3339(row.updated_at),
    }
}

async fn load(state: &AppState, id: i64) -> Result<SavedScenario> {
    let row = db::get(&state.pool, id).await?.ok_or(Error::NotFound)?;
    let unreadable =
        |why: String| Error::Internal(format!("saved scenario {id} does not read: {why}"));
    let body = serde_json::from_str(&row.body).map_err(|err| unreadable(err.to_string()))?;
    let (scenario, migrated_from) = saved::read_stored(body)
        .map_err(|err| unreadable(format!("{}: {}", err.path, err.message)))?;
    Ok(SavedScenario {
        summary: summary(&row),
        scenario,
        migrated_from,
    })
}

/// The scenario as stored, once `save` passes its rules and its name the one text rule (checked
/// here, not in the shared `validate` the Plan page runs, whose download the rule would grow).
fn check_save(save: &ScenarioSave) -> Result<()> {
    let mut errors = save.validate().err().unwrap_or_default();
    shared::common::validate::validate_visible("name", save.name.trim(), &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Invalid(errors))
    }
}

/// Only the owner or an admin changes a saved scenario.
async fn check_owner(state: &AppState, caller: &Caller, id: i64) -> Result<()> {
    let row = db::get(&state.pool, id).await?.ok_or(Error::NotFound)?;
    if row.owner_id != caller.user_id && !caller.has_any(&[Role::Admin]) {
        return Err(Error::Forbidden(
            "only the scenario's owner or an admin may change it; duplicate it to make your own",
        ));
    }
    Ok(())
}

async fn list_saved(State(state): State<AppState>) -> Result<Json<Vec<SavedSummary>>> {
    Ok(Json(
        db::list(&state.pool).await?.iter().map(summary).collect(),
    ))
}

async fn save(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiJson(save): ApiJson<ScenarioSave>,
) -> Result<(StatusCode, Json<SavedScenario>)> {
    insert(&state, &caller, &save, "scenario saved").await
}

/// Stores `save` as a new scenario owned by the caller: 201 and the scenario as it now reads.
async fn insert(
    state: &AppState,
    caller: &Caller,
    save: &ScenarioSave,
    what: &str,
) -> Result<(StatusCode, Json<SavedScenario>)> {
    check_save(save)?;
    let id = db::insert(
        &state.pool,
        save.name.trim(),
        caller.user_id,
        SCENARIO_VERSION as i32,
        &save.scenario,
    )
    .await?;
    tracing::info!(id, by = caller.username, "{what}");
    Ok((StatusCode::CREATED, Json(load(state, id).await?)))
}

async fn open(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SavedScenario>> {
    Ok(Json(load(&state, scenario_id(&id)?).await?))
}

async fn replace(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    ApiJson(save): ApiJson<ScenarioSave>,
) -> Result<Json<SavedScenario>> {
    let id = scenario_id(&id)?;
    check_owner(&state, &caller, id).await?;
    check_save(&save)?;
    if !db::update(
        &state.pool,
        id,
        save.name.trim(),
        SCENARIO_VERSION as i32,
        &save.scenario,
    )
    .await?
    {
        return Err(Error::NotFound);
    }
    tracing::info!(id, by = caller.username, "scenario replaced");
    Ok(Json(load(&state, id).await?))
}

async fn delete(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    let id = scenario_id(&id)?;
    check_owner(&state, &caller, id).await?;
    if !db::delete(&state.pool, id).await? {
        return Err(Error::NotFound);
    }
    tracing::info!(id, by = caller.username, "scenario deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// A copy owned by the caller, named "<name> (copy)".
async fn duplicate(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<SavedScenario>)> {
    let original = load(&state, scenario_id(&id)?).await?;
    let mut name = format!("{} (copy)", original.summary.name);
    if name.chars().count() > saved::MAX_NAME_CHARS {
        name = name.chars().take(saved::MAX_NAME_CHARS).collect();
    }
    let copy = ScenarioSave {
        name,
        scenario: original.scenario,
    };
    insert(&state, &caller, &copy, "scenario duplicated").await
}

/// A bad scenario is answered with its field paths (422), as the CLI does.
/// The cost limits are checked before the work takes a slot of the compute pool.
async fn evaluate(
    State(state): State<AppState>,
    ApiJson(scenario): ApiJson<Scenario>,
) -> Result<Json<Evaluation>> {
    scenario.validate().map_err(Error::Invalid)?;
    let evaluation = state
        .work
        .compute
        .run(move |stop| planning::evaluate_until(&scenario, stop))
        .await?
        .map_err(|err| match err {
            EvaluateError::Invalid(fields) => Error::Invalid(fields),
            EvaluateError::Interrupted => Error::Unavailable,
        })?;
    Ok(Json(evaluation))
}

/// `GET /api/plan/today`: the fleet today as a scenario: the inventory, the teams and the
/// quotas in force today, each team a starter class at its quota
/// (`shared::planning::from_history::today`), with where each figure came from.
async fn today(State(state): State<AppState>) -> Result<Json<FromHistory>> {
    let day = clock::today();
    let read = Read::of(&state, day, day.plus(1)).await?;
    let today = shared::planning::from_history::today(&read.measured());
    if today.scenario.fleet.is_empty() {
        return Err(Error::Conflict(
            "the inventory has no node pools with GPUs yet: add them on the Fleet page".to_owned(),
        ));
    }
    Ok(Json(today))
}

/// `GET /api/plan/from-history?from=DAY&to=DAY`: a scenario from the inventory, the quotas in
/// force on the window's last day and the Workloads recorded in it, with each derived figure's
/// source (`shared::planning::from_history`).
async fn from_history(
    State(state): State<AppState>,
    Query(query): Query<HistoryQuery>,
) -> Result<Json<FromHistory>> {
    let (from, end) = query.checked().map_err(Error::Invalid)?;
    Ok(Json(measured(&state, from, end).await?))
}

/// The most Workloads one derivation reads: four weeks of a 10,000-GPU fleet running
/// ~100,000 jobs a week hold ~400,000 (each kept as a run of a few dozen bytes).
pub(crate) const MAX_DERIVED_WORKLOADS: usize = 2_000_000;

/// [`from_history`]'s work, for the API and the CLI: the Workloads are read a page at a time.
pub async fn measured(
    state: &AppState,
    from: shared::common::day::Day,
    end: shared::common::day::Day,
) -> Result<FromHistory> {
    let (_, derived, ()) = derive(state, (from, end), |_| (), |(), _| {}).await?;
    Ok(derived)
}

/// `GET /api/plan/replay?from=DAY`: the recorded week from `from` replayed through the week
/// engine, beside what was measured (`shared::planning::replay`).
async fn replay(
    State(state): State<AppState>,
    Query(query): Query<ReplayQuery>,
) -> Result<Json<Replay>> {
    let from = query.checked(clock::today()).map_err(Error::Invalid)?;
    Ok(Json(replayed(&state, from).await?))
}

/// [`replay`]'s work, for the API and the CLI: the week and the one before it are read a page
/// at a time, and the week is replayed on the compute pool (bounded by its deadline).
pub async fn replayed(state: &AppState, from: shared::common::day::Day) -> Result<Replay> {
    let (read, derived, replayer) = derive(
        state,
        replay::window(from),
        |world| Replayer::new(from, world),
        Replayer::add,
    )
    .await?;
    let mut replay = state
        .work
        .compute
        .run(move |stop| replayer.finish(&derived, &read.measured(), stop))
        .await?
        .map_err(|_| Error::Unavailable)?;
    if let Some(why) = cluster::history::unrecorded(state.cluster.mode()) {
        replay.problems.insert(0, why);
    }
    Ok(replay)
}

/// A quota request's what-if (`shared::planning::replay::WhatIf`): the last `weeks` whole
/// weeks' recorded work replayed under the quotas in force today and with `spec` approved for
/// `team`, on the compute pool.
pub async fn what_if(
    state: &AppState,
    request: (i64, &str, shared::quota::QuotaSpec),
    weeks: u32,
) -> Result<replay::WhatIf> {
    let input = what_if_input(state, request, weeks).await?;
    state
        .work
        .compute
        .run(move |stop| {
            let replayed = input.replay.replay(stop)?;
            Ok(input.answer(replayed))
        })
        .await?
        .map_err(|_: shared::common::interrupt::Interrupted| Error::Unavailable)
}

/// [`what_if`] ready to replay, with nothing more to read: what the approver's browser replays
/// in the planner's worker.
pub async fn what_if_input(
    state: &AppState,
    (id, team, spec): (i64, &str, shared::quota::QuotaSpec),
    weeks: u32,
) -> Result<replay::WhatIfInput> {
    let (first, start, end) = replay::what_if_window(weeks, clock::today());
    let (_, derived, run) = derive(
        state,
        (start, end),
        |world| replay::WhatIfRun::new(first, weeks, world),
        replay::WhatIfRun::add,
    )
    .await?;
    let mut input = run.prepare(&derived, (id, team, &spec));
    if let Some(why) = cluster::history::unrecorded(state.cluster.mode()) {
        input.problems.insert(0, why);
    }
    Ok(input)
}

/// The days `from` to `end` read once, a page at a time: what the derivation reads besides the
/// Workloads, the scenario derived from them, and `sink` (made from the quotas' world) fed each
/// Workload too.
async fn derive<S>(
    state: &AppState,
    (from, end): (shared::common::day::Day, shared::common::day::Day),
    make: impl FnOnce(&QuotaWorld) -> S,
    add: impl Fn(&mut S, &shared::cluster::workload::HistoryEntry),
) -> Result<(Read, FromHistory, S)> {
    let read = Read::of(state, from, end).await?;
    let mut sink = make(&read.world);
    let measured = read.measured();
    let mut derivation = Derivation::new(&measured);
    let truncated =
        cluster::history::each_in_window(state, from, end, MAX_DERIVED_WORKLOADS, |e| {
            derivation.add(e);
            add(&mut sink, e);
        })
        .await?;
    let mut derived = derivation.finish();
    say_truncated(truncated, &mut derived.problems);
    Ok((read, derived, sink))
}

fn say_truncated(truncated: bool, problems: &mut Vec<String>) {
    if truncated {
        problems.push(format!(
            "the window held more than {MAX_DERIVED_WORKLOADS} Workloads: only the oldest are read; ask for fewer days"
        ));
    }
}

/// What a derivation reads from the database besides the Workloads.
struct Read {
    world: QuotaWorld,
    prices: BTreeMap<String, i64>,
    usage: Vec<UsageDay>,
    tokens: Vec<TokensHour>,
    from: shared::common::day::Day,
    end: shared::common::day::Day,
}

impl Read {
    async fn of(
        state: &AppState,
        from: shared::common::day::Day,
        end: shared::common::day::Day,
    ) -> Result<Read> {
        let world = {
            let mut conn = state.pool.acquire().await?;
            crate::quota::world(&mut conn).await?
        };
        let rates = chargeback::db::rates(&state.pool).await?;
        let last = end.plus(-1);
        let prices = world
            .flavors
            .iter()
            .filter_map(|f| {
                let rate = shared::chargeback::rate_on(&rates, &f.name, last)?;
                Some((f.name.clone(), rate))
            })
            .collect();
        let usage = chargeback::db::usage_days(&state.pool, from, end).await?;
        let tokens = chargeback::db::token_hours(&state.pool, from, end).await?;
        Ok(Read {
            world,
            prices,
            usage,
            tokens,
            from,
            end,
        })
    }

    fn measured(&self) -> Measured<'_> {
        Measured {
            world: &self.world,
            prices: &self.prices,
            usage: &self.usage,
            tokens: &self.tokens,
            from: self.from,
            end: self.end,
        }
    }
}
