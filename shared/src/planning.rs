//! The whole planning evaluation of a scenario: sizing, the week's simulation, the decision
//! matrix and the isolation plan. The browser, the API and the CLI all call [`evaluate`], so
//! they give the same answer, byte for byte.

pub mod adoption;
pub mod decision;
pub mod findings;
pub mod from_history;
pub mod isolation;
pub mod manifests;
pub mod replay;
pub mod saved;
pub mod scenario;
pub mod simulate;
pub mod sizing;
pub mod suggest;
pub mod terms;

use serde::{Deserialize, Serialize};

use crate::common::{
    error::FieldError,
    interrupt::{Interrupt, Interrupted, Never},
};
use decision::Decision;
use isolation::{FlavorMig, IsolationPlan};
use scenario::Scenario;
use simulate::Simulation;
use sizing::{Sizing, Waterfall};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub scenario: String,
    pub seed: u64,
    pub sizing: Sizing,
    /// Where the shared pool's utilisation comes from, one mechanism at a time.
    pub waterfall: Waterfall,
    pub simulation: Simulation,
    pub decision: Decision,
    pub isolation: IsolationPlan,
    /// The MIG layout of each flavor the isolation plan puts classes on MIG.
    pub mig: Vec<FlavorMig>,
    /// The HAMi classes' container limits, as YAML; `None` without HAMi classes.
    pub hami_limits: Option<String>,
    /// How to get there, step by step.
    pub adoption: Vec<adoption::Step>,
}

/// Validates, then evaluates. Errors name every bad field by its path.
pub fn evaluate(scenario: &Scenario) -> Result<Evaluation, Vec<FieldError>> {
    evaluate_until(scenario, &Never).map_err(|err| match err {
        EvaluateError::Invalid(fields) => fields,
        EvaluateError::Interrupted => Vec::new(),
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvaluateError {
    Invalid(Vec<FieldError>),
    Interrupted,
}

/// [`evaluate`], stopping when `stop` fires.
pub fn evaluate_until(
    scenario: &Scenario,
    stop: &dyn Interrupt,
) -> Result<Evaluation, EvaluateError> {
    scenario.validate().map_err(EvaluateError::Invalid)?;
    let sizing = sizing::size(scenario);
    let decision = decision::evaluate(scenario, &sizing);
    let isolation = isolation::plan(scenario, decision.recommendation);
    let simulation = simulate::simulate_until(scenario, &isolation, stop)
        .map_err(|Interrupted| EvaluateError::Interrupted)?;
    let mig = isolation::mig_layouts(scenario, &isolation);
    Ok(Evaluation {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        adoption: adoption::plan(scenario, decision.recommendation, &isolation, &mig),
        hami_limits: isolation::hami_limits(scenario, &isolation),
        mig,
        isolation,
        decision,
        waterfall: sizing::waterfall(scenario, &sizing).with_week(held_on_top(&simulation)),
        sizing,
        simulation,
    })
}

/// What the week held on top of its work (the waterfall's last bars).
fn held_on_top(simulation: &Simulation) -> sizing::HeldOnTop {
    let week = &simulation.total;
    sizing::HeldOnTop {
        loading: week.cold_start_gpu_minutes,
        cut_by_cache: week.cold_start_cut_by_cache_gpu_minutes,
        rework: (week.rework_gpu_hours + week.backlog_rework_gpu_hours) * 60.0,
        fleet: simulation.capacity_gpus as f64 * f64::from(simulation.minutes),
    }
}

/// The isolation plan under the architecture the decision recommends: what the export's
/// objects follow and how the week packs each class, without the week's simulation. The
/// scenario must be valid.
pub fn isolation_plan(scenario: &Scenario) -> IsolationPlan {
    let sizing = sizing::size(scenario);
    isolation::plan(
        scenario,
        decision::evaluate(scenario, &sizing).recommendation,
    )
}

/// Validates, simulates the week under today's quotas, then suggests quotas
/// ([`crate::planning::suggest`]). The browser's worker and the CLI both call this.
pub fn suggest_quotas(
    scenario: &Scenario,
) -> Result<crate::planning::suggest::QuotaSuggestion, Vec<FieldError>> {
    suggest_quotas_with(scenario, None)
}

/// What the Plan page asks its worker for: the scenario and, when the page has evaluated it,
/// its week under today's quotas (the evaluation's, the same week for the same scenario), so
/// the worker need not simulate that week again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuggestRequest {
    pub scenario: Scenario,
    #[serde(default)]
    pub today: Option<Simulation>,
}

/// [`suggest_quotas`], with today's week when the caller has it.
pub fn suggest_quotas_with(
    scenario: &Scenario,
    today: Option<Simulation>,
) -> Result<crate::planning::suggest::QuotaSuggestion, Vec<FieldError>> {
    scenario.validate()?;
    let isolation = isolation_plan(scenario);
    let today = today.unwrap_or_else(|| simulate::simulate(scenario, &isolation));
    Ok(crate::planning::suggest::suggest(
        scenario, &isolation, &today,
    ))
}

/// Reads a scenario from JSON, naming the field path of a type error (`fleet[0].count`).
pub fn parse_scenario(json: &str) -> Result<Scenario, Vec<FieldError>> {
    crate::common::error::from_json(json).map_err(|err| vec![err.into_field_error()])
}
