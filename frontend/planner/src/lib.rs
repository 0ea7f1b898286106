//! The planner off the page's thread. `public/plan-worker.js` loads this module (its own wasm,
//! fetched only by the Plan page, so the console's first load does not carry the simulation)
//! in a Web Worker and calls [`evaluate_scenario`] with each settled draft, or
//! [`suggest_quotas`] when the manager asks: a 10,000-GPU week that takes seconds to simulate
//! never freezes the page.

use serde::Serialize;
use shared::{
    FieldError,
    planning::suggest::QuotaSuggestion,
    planning::{self, Evaluation},
};
use wasm_bindgen::prelude::wasm_bindgen;

/// Talc, not Rust's default dlmalloc: smaller in the bundle and as fast
/// (docs/performance.md, "Download budgets").
#[cfg(target_family = "wasm")]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

/// What the worker answers for one scenario; the page reads it back with the same type.
pub type Outcome<T = Evaluation> = Result<T, Vec<FieldError>>;

/// Scenario JSON in, [`Outcome`] JSON out.
#[wasm_bindgen]
pub fn evaluate_scenario(scenario_json: &str) -> String {
    answer(planning::parse_scenario(scenario_json).and_then(|s| planning::evaluate(&s)))
}

/// [`planning::SuggestRequest`] JSON in, `Outcome<QuotaSuggestion>` JSON out.
#[wasm_bindgen]
pub fn suggest_quotas(request_json: &str) -> String {
    let outcome: Outcome<QuotaSuggestion> =
        shared::common::error::from_json::<planning::SuggestRequest>(request_json)
            .map_err(|err| vec![err.into_field_error()])
            .and_then(|r| planning::suggest_quotas_with(&r.scenario, r.today));
    answer(outcome)
}

fn answer<T: Serialize>(outcome: Outcome<T>) -> String {
    serde_json::to_string(&outcome).unwrap_or_else(|err| {
        // Unreachable for these types; say so rather than answer nothing.
        let failure: Outcome<()> = Err(vec![FieldError {
            path: String::new(),
            message: format!("the result did not serialise: {err}"),
        }]);
        serde_json::to_string(&failure).unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(name: &str) -> String {
        let path = format!(
            "{}/../../shared/scenarios/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"))
    }

    /// The page reads the worker's answer back as exactly the evaluation the API and the CLI
    /// give: every figure survives the trip through JSON bit for bit.
    #[test]
    fn the_answer_reads_back_as_the_native_evaluation() {
        for name in ["startup-40", "bank-10000"] {
            let json = preset(name);
            let native = planning::parse_scenario(&json).and_then(|s| planning::evaluate(&s));
            let answer: Outcome =
                serde_json::from_str(&evaluate_scenario(&json)).expect("the answer reads");
            assert_eq!(answer, native, "{name}");
        }
    }

    /// The page's request, with and without the evaluation's week: the same suggestion as
    /// the native one (which simulates that week itself).
    #[test]
    fn the_suggestion_reads_back_as_the_native_one() {
        let scenario = planning::parse_scenario(&preset("aws-300")).expect("parses");
        let native = planning::suggest_quotas(&scenario);
        let today = planning::evaluate(&scenario).expect("evaluates").simulation;
        for today in [None, Some(today)] {
            let request = planning::SuggestRequest {
                scenario: scenario.clone(),
                today,
            };
            let json = serde_json::to_string(&request).expect("json");
            let answer: Outcome<QuotaSuggestion> =
                serde_json::from_str(&suggest_quotas(&json)).expect("the answer reads");
            assert_eq!(answer, native);
        }
    }

    #[test]
    fn a_bad_scenario_answers_its_problems_by_path() {
        let answer: Outcome = serde_json::from_str(&evaluate_scenario(
            r#"{"version": 2, "name": "x", "fleet": [{"flavor": "a", "gpu_model": "H100-SXM5-80GB", "count": "forty", "gpus_per_node": 8, "price_cents_per_gpu_hour": 1}]}"#,
        ))
        .expect("the answer reads");
        let problems = answer.expect_err("refused");
        assert!(
            problems[0].path.starts_with("fleet[0].count"),
            "{problems:?}"
        );
    }
}
