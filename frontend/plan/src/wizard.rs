//! Plan: the managers' wizard. Start from a preset, the live inventory, a blank scenario or a
//! saved one; describe the fleet, the teams and their work, the constraints; read the results,
//! recomputed in the browser (the same `shared::planning` the API and the CLI run) shortly after
//! every change; export the manifests; save and share by URL.

mod evaluator;
mod export;
mod fields;
mod history;
mod inputs;
mod quotas;
mod report;
mod saved;

use std::time::Duration;

use leptos::{prelude::*, task::spawn_local, wasm_split::wasm_split};
use leptos_router::hooks::{use_navigate, use_params_map};
use shared::{
    ApiError, FieldError,
    common::day::Day,
    common::label::{Labelled, count},
    planning::saved::{SavedScenario, SavedSummary},
    planning::scenario::Scenario,
    planning::{self, Evaluation},
};

use self::fields::Draft;
use gpufleet_web::{api, ui::ErrorBox};

const PRESETS: [(&str, &str); 4] = [
    (
        "startup-40",
        include_str!("../../../shared/scenarios/startup-40.json"),
    ),
    (
        "aws-300",
        include_str!("../../../shared/scenarios/aws-300.json"),
    ),
    (
        "bank-10000",
        include_str!("../../../shared/scenarios/bank-10000.json"),
    ),
    (
        "no-own-model",
        include_str!("../../../shared/scenarios/no-own-model.json"),
    ),
];

/// How long the draft must rest before it is evaluated: typing a number runs one evaluation,
/// not one per key.
const SETTLE_MS: u64 = 300;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Start,
    Fleet,
    Teams,
    Constraints,
    Results,
    Quotas,
    Export,
    Json,
}

const STEPS: [(Step, &str, &str); 8] = [
    (Step::Start, "start", "1 Start"),
    (Step::Fleet, "fleet", "2 Fleet"),
    (Step::Teams, "teams", "3 Teams and workloads"),
    (Step::Constraints, "constraints", "4 Constraints"),
    (Step::Results, "results", "5 Results"),
    (Step::Quotas, "quotas", "6 Quotas"),
    (Step::Export, "export", "7 Export"),
    (Step::Json, "json", "Scenario as JSON"),
];

/// The step where a field lives, for the problem list's links.
fn step_of(path: &str) -> Step {
    if path.starts_with("fleet") {
        Step::Fleet
    } else if path.starts_with("teams") {
        Step::Teams
    } else if path.starts_with("weights") {
        Step::Results
    } else {
        Step::Constraints
    }
}

/// Where the wizard is: the saved scenario the URL names (`/plan/{id}`), and the router's
/// navigation (so the URL and the console's links agree).
#[derive(Clone, Copy)]
pub struct Route {
    pub saved: Memo<Option<String>>,
    navigate: StoredValue<Navigate, LocalStorage>,
}

/// The router's navigation to a path.
type Navigate = Box<dyn Fn(&str)>;

impl Route {
    fn from_router() -> Self {
        let params = use_params_map();
        let navigate = use_navigate();
        Self {
            saved: Memo::new(move |_| params.read().get("id")),
            navigate: StoredValue::new_local(Box::new(move |path: &str| {
                navigate(path, Default::default())
            })),
        }
    }

    /// Sends the console to `path`.
    pub fn go(&self, path: &str) {
        self.navigate.with_value(|navigate| navigate(path));
    }
}

/// The state of the evaluation that follows the draft.
#[derive(Clone, PartialEq)]
pub enum Run {
    /// Waiting for the draft to settle, or evaluating.
    Computing,
    /// The last evaluation is of the draft as it is; it took this long.
    Done { ms: f64 },
    /// The draft has problems; the results shown (if any) are of an earlier draft.
    Invalid { problems: usize },
    /// The planner itself failed (a bug, or the worker could not start).
    Failed(String),
}

/// The evaluation of the draft, shared by the steps.
#[derive(Clone, Copy)]
pub struct Results {
    /// The last good evaluation.
    pub evaluation: RwSignal<Option<Evaluation>>,
    pub run: RwSignal<Run>,
    /// Bumped each time the draft settles (charts of the inputs redraw then).
    pub settled: RwSignal<u64>,
}

#[component]
pub fn Plan() -> impl IntoView {
    let start = stored_draft().unwrap_or_else(|| preset(PRESETS[0].1));
    // What the draft was when it was last started, opened or saved: edits since then are
    // asked about before another start replaces them.
    let baseline = RwSignal::new(start.clone());
    let draft = Draft::new(start);
    let results = Results {
        evaluation: RwSignal::new(None),
        run: RwSignal::new(Run::Computing),
        settled: RwSignal::new(0),
    };
    let route = Route::from_router();
    provide_context(route);
    provide_context(draft);
    provide_context(results);
    quotas::Suggestions::provide();
    evaluate_each_settled_draft(draft, results);
    let step = RwSignal::new(Step::Start);
    let list = saved::saved_list();
    let opened = RwSignal::new(None::<SavedSummary>);
    let notice = RwSignal::new(None::<ApiError>);
    // Where a scenario from history came from: its sources and problems.
    let derived = RwSignal::new(String::new());
    let replace = move |scenario: Scenario, summary: Option<SavedSummary>| {
        let edited = draft
            .scenario
            .with_untracked(|s| baseline.with_untracked(|b| s != b));
        if edited && !confirm("Replace the scenario you have edited? Unsaved changes are lost.") {
            return false;
        }
        baseline.set(scenario.clone());
        draft.scenario.set(scenario);
        opened.set(summary);
        notice.set(None);
        derived.set(String::new());
        true
    };
    open_saved_by_url(route, opened, notice, move |saved: SavedScenario| {
        if replace(saved.scenario, Some(saved.summary)) {
            step.set(Step::Results);
        }
    });
    let on_saved = Callback::new(move |()| baseline.set(draft.scenario.get_untracked()));
    let start = Callback::new(move |(s, summary): (Scenario, Option<SavedSummary>)| {
        let fresh = summary.is_none();
        if replace(s, summary) {
            // A new draft is no saved scenario: the URL says so, and the saved one's link
            // opens it again.
            if fresh && route.saved.get_untracked().is_some() {
                route.go("/plan");
            }
            step.set(Step::Fleet);
        }
    });
    // `/plan?from=DAY&to=DAY` (a re-plan finding's link) starts from that window's history.
    if let Some((from, to)) = history_window_in_url() {
        history::start(history::window_path(&from, &to), start, derived, notice);
    }
    view! {
        <section class="plan">
            <h1>"Plan"</h1>
            {steps_nav(step)}
            <Summary on_problem=Callback::new(move |path: String| step.set(step_of(&path)))/>
            {move || notice.get().map(|error| view! { <ErrorBox error/> })}
            <div inner_html=derived></div>
            // Above the step, so a step whose content grows (results from the worker, files
            // being written) never moves it.
            <saved::SaveForm opened list on_saved/>
            <div class="step">
                {move || step_view(step.get(), start, derived, notice, list)}
            </div>
        </section>
    }
}

/// The wizard's steps, the current one marked.
fn steps_nav(step: RwSignal<Step>) -> impl IntoView {
    view! {
        <nav class="steps" aria-label="Wizard steps">
            {STEPS.iter().map(|&(s, name, words)| view! {
                <button type="button" data-test=format!("step-{name}") aria-current=move || (step.get() == s).then_some("step")
                    on:click=move |_| step.set(s)>{words}</button>
            }).collect_view()}
        </nav>
    }
}

/// Step `s`'s page; the start step with what it starts a draft with.
fn step_view(
    s: Step,
    replace: Callback<(Scenario, Option<SavedSummary>)>,
    derived: RwSignal<String>,
    notice: RwSignal<Option<ApiError>>,
    list: saved::SavedList,
) -> AnyView {
    match s {
        Step::Start => view! { <StartStep replace derived notice list/> }.into_any(),
        Step::Fleet => view! { <inputs::FleetStep/> }.into_any(),
        Step::Results => view! { <ResultsStep/> }.into_any(),
        Step::Teams => Suspend::new(teams_step()).into_any(),
        Step::Constraints => Suspend::new(constraints_step()).into_any(),
        Step::Quotas => Suspend::new(quotas_step()).into_any(),
        Step::Export => Suspend::new(export_step()).into_any(),
        Step::Json => Suspend::new(json_step()).into_any(),
    }
}

// The steps a first look at a plan's results does not pass through (a preset opens on the Fleet
// step, its results a click away): one chunk of their own (`plan_steps`), split off like the
// console's pages and fetched the first time someone opens one of them. One chunk, not one per
// step: each split point multiplies the chunks the code they share is cut into.

#[wasm_split(plan_steps, wasm_split_path = ::leptos::wasm_split)]
fn teams_step() -> AnyView {
    view! { <inputs::TeamsStep/> }.into_any()
}

#[wasm_split(plan_steps, wasm_split_path = ::leptos::wasm_split)]
fn constraints_step() -> AnyView {
    view! { <inputs::ConstraintsStep/> }.into_any()
}

#[wasm_split(plan_steps, wasm_split_path = ::leptos::wasm_split)]
fn quotas_step() -> AnyView {
    view! { <quotas::QuotasStep/> }.into_any()
}

#[wasm_split(plan_steps, wasm_split_path = ::leptos::wasm_split)]
fn export_step() -> AnyView {
    view! { <export::ExportStep/> }.into_any()
}

#[wasm_split(plan_steps, wasm_split_path = ::leptos::wasm_split)]
fn json_step() -> AnyView {
    view! { <JsonStep/> }.into_any()
}

/// Each draft, once it has settled (no edit for [`SETTLE_MS`]), is kept in the browser and
/// evaluated in the planner's worker; only the answer for the latest draft is shown.
fn evaluate_each_settled_draft(draft: Draft, results: Results) {
    // Each settled draft gets a number; only the answer for the latest is shown.
    let generation = StoredValue::new(0u64);
    let evaluator = std::rc::Rc::new(evaluator::Evaluator::new("evaluate", move |id, answer| {
        if id != generation.get_value() {
            return; // the draft changed since: its own answer follows
        }
        match answer {
            Ok((Ok(evaluation), ms)) => {
                results.evaluation.set(Some(evaluation));
                results.run.set(Run::Done { ms });
            }
            Ok((Err(problems), _)) => results.run.set(Run::Invalid {
                problems: problems.len(),
            }),
            Err(failure) => results.run.set(Run::Failed(failure)),
        }
        results.settled.update(|n| *n += 1);
    }));
    Effect::new(move |_| {
        draft.scenario.track();
        let mine = generation.get_value() + 1;
        generation.set_value(mine);
        results.run.set(Run::Computing);
        let evaluator = evaluator.clone();
        set_timeout(
            move || {
                if generation.get_value() != mine {
                    return; // edited again since: that edit's timer evaluates
                }
                let json = draft
                    .scenario
                    .with_untracked(serde_json::to_string)
                    .unwrap_or_default();
                keep_draft(&json);
                match draft.problems.with_untracked(Vec::len) {
                    0 => evaluator.submit(mine, json),
                    problems => {
                        results.run.set(Run::Invalid { problems });
                        results.settled.update(|n| *n += 1);
                    }
                }
            },
            Duration::from_millis(SETTLE_MS),
        );
    });
}

/// A saved scenario opened by its URL (`/plan/{id}`) is fetched and handed to `open`.
fn open_saved_by_url(
    route: Route,
    opened: RwSignal<Option<SavedSummary>>,
    notice: RwSignal<Option<ApiError>>,
    open: impl Fn(SavedScenario) + Copy + 'static,
) {
    Effect::new(move |_| {
        let Some(id) = route.saved.get() else {
            return;
        };
        if opened.with_untracked(|o| o.as_ref().is_some_and(|o| o.id.to_string() == id)) {
            return; // just saved: the draft is that scenario already
        }
        spawn_local(async move {
            match api::get::<SavedScenario>(&format!("/api/scenarios/{id}")).await {
                Ok(saved) => open(saved),
                Err(err) => notice.set(Some(err)),
            }
        });
    });
}

fn preset(json: &str) -> Scenario {
    // The presets are part of the build and tested to parse (shared's planning tests).
    scenario_from(json).unwrap_or_else(Scenario::blank)
}

/// A scenario from JSON no person typed (a preset, the draft this browser kept, the server's
/// answer): nobody reads why it would not parse, so it is read without the field paths the JSON
/// step names (their code stays out of the chunks a first look at the results loads).
fn scenario_from(json: &str) -> Option<Scenario> {
    serde_json::from_str(json).ok()
}

fn confirm(question: &str) -> bool {
    web_sys::window().is_some_and(|w| w.confirm_with_message(question).unwrap_or(true))
}

/// One line on every step: what the draft comes to, or that it is being worked out.
#[component]
fn Summary(on_problem: Callback<String>) -> impl IntoView {
    let results = expect_context::<Results>();
    let draft = fields::use_draft();
    view! {
        <div class="summary" data-test="summary" role="status" aria-live="polite">
            {move || match results.run.get() {
                Run::Computing => view! { <span class="muted" data-test="computing">"Computing…"</span> }.into_any(),
                Run::Invalid { problems } => view! {
                    <details data-test="problems">
                        <summary class="problem">{format!("{problems} problem{} to fix before the results follow", if problems == 1 { "" } else { "s" })}</summary>
                        <ul>
                            {draft.problems.get().into_iter().map(|FieldError { path, message }| {
                                let at = path.clone();
                                view! { <li><button type="button" class="link" on:click=move |_| on_problem.run(at.clone())>{path}</button>": "{message}</li> }
                            }).collect_view()}
                        </ul>
                    </details>
                }.into_any(),
                Run::Failed(failure) => view! { <span class="problem" role="alert">{failure}</span> }.into_any(),
                Run::Done { ms } => results.evaluation.with(|e| e.as_ref().map(|e| {
                    let (sep, shared_pool) = (&e.sizing.separate_pools, &e.sizing.shared_pool);
                    view! {
                        <span>
                            <strong data-test="summary-recommendation">{e.decision.recommendation.label()}</strong>
                            {format!(
                                " · separate pools {} GPUs at {:.1}% busy → shared {} GPUs at {:.1}% · ",
                                sep.gpus, sep.mean_busy_pct, shared_pool.gpus, shared_pool.mean_busy_pct
                            )}
                            <span class="muted" data-test="took">{format!("evaluated in {ms:.0} ms")}</span>
                        </span>
                    }
                })).into_any(),
            }}
        </div>
    }
}

#[component]
fn StartStep(
    replace: Callback<(Scenario, Option<SavedSummary>)>,
    derived: RwSignal<String>,
    notice: RwSignal<Option<ApiError>>,
    list: saved::SavedList,
) -> impl IntoView {
    let today = Day::of_unix_seconds((js_sys::Date::now() / 1000.0) as i64);
    let (from, to) = (
        RwSignal::new(today.plus(-28).to_string()),
        RwSignal::new(today.plus(-1).to_string()),
    );
    let replayed = RwSignal::new(String::new());
    view! {
        <h2>"Start from"</h2>
        <ul class="cards starts">
            {PRESETS.iter().map(|&(name, json)| {
                let scenario = preset(json);
                let title = scenario.name.clone();
                let gpus = scenario.total_gpus();
                let teams = scenario.teams.len();
                view! {
                    <li>
                        <button type="button" data-test=format!("start-{name}") on:click=move |_| replace.run((preset(json), None))>{title}</button>
                        <p class="muted">{format!("{}, {}", count(gpus, "GPU"), count(teams as u64, "team"))}</p>
                    </li>
                }
            }).collect_view()}
            <li>
                <button type="button" data-test="start-inventory" on:click=move |_| history::start("/api/plan/today".to_owned(), replace, derived, notice)>"Our fleet today"</button>
                <p class="muted">"The inventory's flavors and rates, the teams and the quotas in force today, each team's work a starter at its quota to edit."</p>
            </li>
            <li>
                <button type="button" data-test="start-history" on:click=move |_| history::start(history::window_path(&from.get(), &to.get()), replace, derived, notice)>"What the fleet did"</button>
                <p class="muted">
                    "The inventory, the quotas in force and classes from the Workloads Kueue ran, "
                    <input aria-label="First day" data-test="history-from" size="10" prop:value=from on:change=move |ev| from.set(event_target_value(&ev))/>
                    " to "
                    <input aria-label="Last day" data-test="history-to" size="10" prop:value=to on:change=move |ev| to.set(event_target_value(&ev))/>
                    " (UTC). "
                    <button type="button" data-test="replay" on:click=move |_| history::replay(from.get(), replayed, notice)>"Planned vs measured"</button>
                    " replays its first 7 days under the quotas in force, beside what Kueue and DCGM measured: how far to trust the planner."
                </p>
            </li>
            <li>
                <button type="button" data-test="start-blank" on:click=move |_| replace.run((Scenario::blank(), None))>"Blank"</button>
                <p class="muted">"One node of eight H100s and one team."</p>
            </li>
        </ul>
        <div data-test="replayed" inner_html=replayed></div>
        <h3>"Saved scenarios"</h3>
        <saved::SavedTable list/>
    }
}

#[component]
fn ResultsStep() -> impl IntoView {
    let results = expect_context::<Results>();
    let stale = move || !matches!(results.run.get(), Run::Done { .. });
    // Always one line, whatever it says, so the results below never jump when it changes.
    view! {
        {move || results.evaluation.with(Option::is_some).then(|| view! {
            <p class=move || if stale() { "warning" } else { "muted" } data-test="freshness" role="status">
                {move || if stale() {
                    "These results are for the scenario before your last change."
                } else {
                    "These results follow your last change."
                }}
            </p>
        })}
        {move || match results.evaluation.get() {
            None => view! { <p class="muted">"No results yet."</p> }.into_any(),
            Some(evaluation) => view! { <report::Report evaluation/> }.into_any(),
        }}
    }
}

/// The draft as JSON: for those who paste a scenario, or keep one in git.
#[component]
fn JsonStep() -> impl IntoView {
    let draft = fields::use_draft();
    let text = RwSignal::new(
        draft
            .scenario
            .with_untracked(|s| serde_json::to_string_pretty(s).unwrap_or_default()),
    );
    let errors = RwSignal::new(Vec::<FieldError>::new());
    view! {
        <h2>"Scenario as JSON"</h2>
        <p class="muted">"Version " {shared::planning::scenario::SCENARIO_VERSION} " of the format; the other steps edit the same scenario."</p>
        <textarea class="scenario" aria-label="Scenario (JSON)" spellcheck="false" prop:value=text on:input=move |ev| {
            let typed = event_target_value(&ev);
            match planning::parse_scenario(&typed) {
                Ok(scenario) => {
                    errors.set(Vec::new());
                    draft.scenario.set(scenario);
                }
                Err(found) => errors.set(found),
            }
            text.set(typed);
        }></textarea>
        {move || (!errors.with(Vec::is_empty)).then(|| view! {
            <ul class="error" data-test="scenario-errors">
                {errors.get().into_iter().map(|e| view! { <li><code>{e.path}</code>": "{e.message}</li> }).collect_view()}
            </ul>
        })}
    }
}

const DRAFT_KEY: &str = "gpufleet.plan.draft";

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

/// The draft left in this browser, if it still reads.
fn stored_draft() -> Option<Scenario> {
    let text = storage()?.get_item(DRAFT_KEY).ok().flatten()?;
    scenario_from(&text)
}

fn keep_draft(json: &str) {
    if let Some(storage) = storage() {
        // A full or disabled storage only loses the draft, never the page.
        let _ = storage.set_item(DRAFT_KEY, json);
    }
}

/// `?from=DAY&to=DAY` in the page's address, both real days.
fn history_window_in_url() -> Option<(String, String)> {
    let search = web_sys::window()?.location().search().ok()?;
    let day = |key: &str| {
        search
            .trim_start_matches('?')
            .split('&')
            .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
            .and_then(Day::parse)
            .map(|d| d.to_string())
    };
    Some((day("from")?, day("to")?))
}
