//! The planner off the page's thread. `public/plan-worker.js` loads this module (its own wasm,
//! fetched only by the Plan page, so the console's first load does not carry the simulation)
//! in a Web Worker and calls [`evaluate_scenario`] with each settled draft, or
//! [`suggest_quotas`] when the manager asks: a 10,000-GPU week that takes seconds to simulate
//! never freezes the page. The console's review of a quota request starts it too, in two
//! workers at once (`public/planner-client.js`), each with [`replay_what_if_side`]: the
//! request's what-if replayed in the approver's browser, before and after the approval.
//!
//! The exports' comments are `//`, not `///`: wasm-bindgen copies doc comments into the
//! worker's JS, which the browser downloads.

use serde::{Serialize, de::DeserializeOwned};
use shared::{
    FieldError,
    common::interrupt::{Interrupted, Never},
    planning::replay::{Side, SideReplayed, WhatIfReplay},
    planning::suggest::QuotaSuggestion,
    planning::{self, Evaluation},
};
use wasm_bindgen::prelude::wasm_bindgen;

/// Talc, not Rust's default dlmalloc: smaller in the bundle and as fast
/// (docs/performance.md, "Download sizes").
#[cfg(target_family = "wasm")]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

/// What the worker answers for one scenario; the page reads it back with the same type.
pub type Outcome<T = Evaluation> = Result<T, Vec<FieldError>>;

// Scenario JSON in, [`Outcome`] JSON out.
#[wasm_bindgen]
pub fn evaluate_scenario(scenario_json: &str) -> String {
    answer(read::<planning::scenario::Scenario>(scenario_json).and_then(|s| planning::evaluate(&s)))
}

// [`planning::SuggestRequest`] JSON in, `Outcome<QuotaSuggestion>` JSON out.
#[wasm_bindgen]
pub fn suggest_quotas(request_json: &str) -> String {
    let outcome: Outcome<QuotaSuggestion> = read::<planning::SuggestRequest>(request_json)
        .and_then(|r| planning::suggest_quotas_with(&r.scenario, r.today));
    answer(outcome)
}

// A what-if's input JSON in (`GET …/what-if/input`, of which it reads the [`WhatIfReplay`]),
// `Outcome<SideReplayed>` JSON out: every week replayed under the quotas in force today or,
// with `after`, with the request approved, as the server replays them. The client joins the
// two sides as `Replayed::join` does.
#[wasm_bindgen]
pub fn replay_what_if_side(input_json: &str, after: bool) -> String {
    let side = if after { Side::After } else { Side::Before };
    let outcome: Outcome<SideReplayed> = read::<WhatIfReplay>(input_json)
        .and_then(WhatIfReplay::checked)
        .and_then(|input| {
            input
                .replay_side(side, &Never)
                .map_err(|Interrupted| Vec::new())
        });
    answer(outcome)
}

/// The worker's input: JSON the page or the server wrote from the same types, so a failure is
/// a bug to report, not a person's typing to point at: read by serde_json alone, without the
/// path tracking that the API's and the JSON step's reading carries (`common::error::
/// from_json`), which would put a second copy of every type's reader in this bundle.
fn read<T: DeserializeOwned>(json: &str) -> Outcome<T> {
    serde_json::from_str(json).map_err(|err| {
        vec![FieldError {
            path: String::new(),
            message: format!("the worker could not read its input: {err}"),
        }]
    })
}

fn answer<T: Serialize>(outcome: Outcome<T>) -> String {
    serde_json::to_string(&outcome).unwrap_or_else(unserialised)
}

/// Unreachable for these types; said rather than answering nothing (one copy for every type).
fn unserialised(err: serde_json::Error) -> String {
    let failure: Outcome<()> = Err(vec![FieldError {
        path: String::new(),
        message: format!("the result did not serialise: {err}"),
    }]);
    serde_json::to_string(&failure).unwrap_or_default()
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

    /// A what-if's input as the server sends it (`GET …/what-if/input`): the two workers'
    /// answers, joined as the client joins them, read back as the server's own replay of it;
    /// a week naming no class of the scenario is said on both sides, not guessed; an input
    /// that is not one, or whose two scenarios differ in their classes, is refused by path.
    #[test]
    fn the_what_if_reads_back_as_the_native_replay() {
        use shared::{
            common::day::Day,
            planning::{
                replay::{RecordedWeeks, Replayed, WhatIfInput},
                simulate::Recorded,
            },
        };
        let before = planning::parse_scenario(&preset("startup-40")).expect("parses");
        let mut after = before.clone();
        after.teams[0].nominal_gpus.insert("h100".to_owned(), 40);
        let job = |class, minute| Recorded {
            class,
            gpus: 16,
            minute,
            length_min: 60,
            running: false,
        };
        let from = Day::parse("2026-11-02").expect("a day");
        let mut input = WhatIfInput {
            request: 7,
            team: "research".to_owned(),
            from,
            to: from.plus(6),
            workloads: 3,
            problems: vec!["a problem of the derivation".to_owned()],
            replay: WhatIfReplay {
                before,
                after,
                weeks: RecordedWeeks(vec![vec![job(0, 600), job(0, 600), job(1, 660)]]),
            },
        };
        let side = |json: &str, after| -> Outcome<SideReplayed> {
            serde_json::from_str(&replay_what_if_side(json, after)).expect("the answer reads")
        };
        let read = |input: &WhatIfInput| -> Outcome<Replayed> {
            let json = serde_json::to_string(input).expect("JSON");
            Ok(Replayed::join(side(&json, false)?, side(&json, true)?))
        };
        let native = input.replay.replay(&Never).expect("never stopped");
        assert_eq!(native.teams.len(), 2);
        assert!(native.problems.is_empty());
        assert_eq!(read(&input), Ok(native));
        input.replay.weeks.0[0].push(job(99, 0));
        let json = serde_json::to_string(&input).expect("JSON");
        for after in [false, true] {
            let answer = side(&json, after).expect("replayed");
            assert!(
                answer.problems[0].starts_with("week 1 of 1 could not be replayed"),
                "{answer:?}"
            );
        }
        // Input no server writes: said, with where serde_json stopped.
        let refused = side(r#"{"before": 3}"#, false).expect_err("refused");
        assert!(
            refused[0]
                .message
                .starts_with("the worker could not read its input: invalid type")
                && refused[0].message.contains("at line 1 column"),
            "{refused:?}"
        );
        input.replay.after.teams[0].workloads.pop();
        let json = serde_json::to_string(&input).expect("JSON");
        assert_eq!(side(&json, true).expect_err("refused")[0].path, "after");
    }

    /// A scenario that reads but breaks the rules answers its problems by path; one that does
    /// not read (no page writes it: the JSON step reads a person's typing itself, by path)
    /// says what and where serde_json stopped.
    #[test]
    fn a_bad_scenario_answers_what_is_wrong() {
        let mut scenario = planning::parse_scenario(&preset("startup-40")).expect("parses");
        scenario.fleet[0].count = 0;
        let json = serde_json::to_string(&scenario).expect("JSON");
        let answer: Outcome = serde_json::from_str(&evaluate_scenario(&json)).expect("reads");
        let problems = answer.expect_err("refused");
        assert!(
            problems.iter().any(|p| p.path == "fleet[0].count"),
            "{problems:?}"
        );
        let answer: Outcome = serde_json::from_str(&evaluate_scenario(
            r#"{"version": 3, "name": "x", "fleet": [{"flavor": "a", "gpu_model": "H100-SXM5-80GB", "count": "forty", "gpus_per_node": 8, "price_cents_per_gpu_hour": 1}]}"#,
        ))
        .expect("the answer reads");
        let problems = answer.expect_err("refused");
        assert!(
            problems[0]
                .message
                .contains("invalid type: string \"forty\", expected u32 at line 1"),
            "{problems:?}"
        );
    }
}
