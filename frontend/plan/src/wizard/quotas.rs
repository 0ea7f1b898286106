//! The quota suggestion: nominal quotas, borrowing and lending limits per team proposed from
//! the simulated week against each team's queue-wait target (`shared::planning::suggest`, run by the
//! planner in its own worker, several weeks long), beside today's quotas and the week under
//! each; one click puts them in the draft.

use std::rc::Rc;

use gloo_net::http::Method;
use gpufleet_web::api;
use gpufleet_web::figure::Figure;
use leptos::{prelude::*, task::spawn_local};
use serde_json::json;
use shared::{
    common::{day::Day, label::count},
    planning::SuggestRequest,
    planning::scenario::Scenario,
    planning::simulate::{Simulation, TeamStats},
    planning::suggest::{self, Limits, QuotaSuggestion},
};

use super::{Results, Run, evaluator::Evaluator, fields::use_draft};
use gpufleet_web::ui::Chart;

/// The suggestion and the scenario it was made for, shared by the Plan page's steps (so it
/// survives moving between them).
#[derive(Clone, Copy)]
pub struct Suggestions {
    made: RwSignal<Option<(Scenario, QuotaSuggestion)>>,
    /// `None` until the manager asks.
    run: RwSignal<Option<Run>>,
    asked: StoredValue<u64>,
    /// The scenario of the request in flight (its answer is shown against it).
    pending: StoredValue<Option<Scenario>>,
    /// Started on the first request, so a Plan page visit that never asks loads no second
    /// planner.
    worker: StoredValue<Option<Rc<Evaluator<QuotaSuggestion>>>, LocalStorage>,
}

impl Suggestions {
    pub fn provide() {
        provide_context(Suggestions {
            made: RwSignal::new(None),
            run: RwSignal::new(None),
            asked: StoredValue::new(0),
            pending: StoredValue::new(None),
            worker: StoredValue::new_local(None),
        });
    }

    fn ask(self, scenario: Scenario, today: Option<Simulation>, problems: usize) {
        if problems > 0 {
            self.run.set(Some(Run::Invalid { problems }));
            return;
        }
        let id = self.asked.get_value() + 1;
        self.asked.set_value(id);
        self.run.set(Some(Run::Computing));
        if self.worker.with_value(Option::is_none) {
            let this = self;
            let worker = Evaluator::new("suggest", move |id, answer| {
                if id != this.asked.get_value() {
                    return;
                }
                match answer {
                    Ok((Ok(suggestion), ms)) => {
                        let asked_for = this.pending.try_update_value(Option::take).flatten();
                        this.made.set(asked_for.map(|s| (s, suggestion)));
                        this.run.set(Some(Run::Done { ms }));
                    }
                    Ok((Err(problems), _)) => this.run.set(Some(Run::Invalid {
                        problems: problems.len(),
                    })),
                    Err(failure) => this.run.set(Some(Run::Failed(failure))),
                }
            });
            self.worker.set_value(Some(Rc::new(worker)));
        }
        self.pending.set_value(Some(scenario.clone()));
        let json = serde_json::to_string(&SuggestRequest { scenario, today }).unwrap_or_default();
        self.worker.with_value(|w| {
            if let Some(w) = w {
                w.submit(id, json);
            }
        });
    }
}

#[component]
pub fn QuotasStep() -> impl IntoView {
    let draft = use_draft();
    let suggestions = expect_context::<Suggestions>();
    let results = expect_context::<Results>();
    let ask = move |_| {
        let scenario = draft.scenario.get_untracked();
        // The evaluation's week is this draft's when it is done: the worker need not simulate
        // it again.
        let today = matches!(results.run.get_untracked(), Run::Done { .. })
            .then(|| {
                results
                    .evaluation
                    .with_untracked(|e| e.as_ref().map(|e| e.simulation.clone()))
            })
            .flatten();
        suggestions.ask(scenario, today, draft.problems.with_untracked(Vec::len));
    };
    let stale = move || {
        suggestions
            .made
            .with(|m| m.as_ref().map(|(s, _)| draft.scenario.with(|d| d != s)))
            .unwrap_or(false)
    };
    let applied = RwSignal::new(false);
    view! {
        <h2>"Quota suggestion"</h2>
        <p class="muted">
            "Nominal quotas, borrowing and lending limits per team, proposed from the week's demand so that each team's "
            "queue-wait target (p95, set per team in step 3) holds and the cohort still has quota to lend; then the week is "
            {format!("simulated under them and quota moves to the teams that miss their target, up to {} weeks.", suggest::MAX_WEEKS)}
        </p>
        <button type="button" data-test="suggest" on:click=ask
            disabled=move || suggestions.run.with(|r| matches!(r, Some(Run::Computing)))>"Suggest quotas"</button>
        <span role="status" aria-live="polite" data-test="suggest-state">
            {move || match suggestions.run.get() {
                None => None,
                Some(Run::Computing) => Some(view! { <span class="muted">" Simulating weeks…"</span> }.into_any()),
                Some(Run::Done { ms }) => Some(view! { <span class="muted" data-test="suggest-took">{format!(" worked out in {ms:.0} ms")}</span> }.into_any()),
                Some(Run::Invalid { problems }) => Some(view! { <span class="problem">{format!(" fix the {problems} problem(s) in the scenario first")}</span> }.into_any()),
                Some(Run::Failed(failure)) => Some(view! { <span class="problem" role="alert">{failure}</span> }.into_any()),
            }}
        </span>
        {move || stale().then(|| view! {
            <p class="warning" data-test="suggestion-stale">"This suggestion is for the scenario before your last change."</p>
        })}
        {move || suggestions.made.get().map(|(scenario, suggestion)| {
            let apply = suggestion.clone();
            let for_drafts = (scenario.clone(), suggestion.clone());
            view! {
                <SuggestionTables suggestion/>
                <p>
                    <button type="button" data-test="use-suggestion" on:click=move |_| {
                        draft.edit(|s| apply.apply(s));
                        applied.set(true);
                    }>"Use these quotas in the scenario"</button>
                    {move || applied.get().then(|| view! {
                        <span class="muted" data-test="suggestion-applied">" Done: the Results and the Export now use them."</span>
                    })}
                </p>
                <DraftRequests made=for_drafts/>
            }
        })}
    }
}

/// `a`, or `a → b` where they differ.
fn change(a: String, b: String) -> String {
    if a == b { a } else { format!("{a} → {b}") }
}

fn limit(v: Option<u32>, none: &str) -> String {
    v.map_or(none.to_owned(), |v| v.to_string())
}

fn wait(s: &TeamStats) -> String {
    s.queue_wait_p95_min
        .map_or("–".to_owned(), |w| format!("{w:.0} min"))
}

fn unstarted(s: &TeamStats) -> String {
    (s.jobs_submitted - s.jobs_admitted.min(s.jobs_submitted)).to_string()
}

fn met(m: bool) -> &'static str {
    if m { "yes" } else { "no" }
}

/// A team's rows of the suggestion: one per flavor of its quota, its week's figures today
/// and with the suggestion beside the first.
fn team_rows(t: &suggest::TeamSuggestion) -> Vec<impl IntoView + use<>> {
    let rows = t.lines.len().max(1);
    let week = (
        format!(
            "{} ({} min)",
            change(wait(&t.today), wait(&t.suggested)),
            t.queue_wait_target_min
        ),
        change(unstarted(&t.today), unstarted(&t.suggested)),
        change(
            t.today.preemptions.to_string(),
            t.suggested.preemptions.to_string(),
        ),
        change(met(t.met_today).to_owned(), met(t.met_suggested).to_owned()),
    );
    let lines: Vec<(String, Option<(Limits, Limits)>)> = if t.lines.is_empty() {
        vec![("–".to_owned(), None)]
    } else {
        t.lines
            .iter()
            .map(|l| {
                (
                    l.flavor.clone(),
                    Some((l.today.clone(), l.suggested.clone())),
                )
            })
            .collect()
    };
    lines
        .into_iter()
        .enumerate()
        .map(|(i, (flavor, q))| {
            let first = i == 0;
            let (nominal, borrow, lend) = q.map_or_else(Default::default, |(a, b)| {
                (
                    change(a.nominal_gpus.to_string(), b.nominal_gpus.to_string()),
                    change(
                        limit(a.borrowing_limit_gpus, "no limit"),
                        limit(b.borrowing_limit_gpus, "no limit"),
                    ),
                    change(
                        limit(a.lending_limit_gpus, "all idle"),
                        limit(b.lending_limit_gpus, "all idle"),
                    ),
                )
            });
            let week = week.clone();
            view! {
                <tr data-test="suggestion-row">
                    {first.then(|| view! { <td rowspan=rows>{t.team.clone()}</td> })}
                    <td>{flavor}</td>
                    <td class="num" data-test="nominal">{nominal}</td>
                    <td class="num">{borrow}</td>
                    <td class="num">{lend}</td>
                    {first.then(|| view! {
                        <td class="num" rowspan=rows>{week.0}</td>
                        <td class="num" rowspan=rows>{week.1}</td>
                        <td class="num" rowspan=rows>{week.2}</td>
                        <td rowspan=rows>{week.3}</td>
                    })}
                </tr>
            }
        })
        .collect::<Vec<_>>()
}

#[component]
fn SuggestionTables(suggestion: QuotaSuggestion) -> impl IntoView {
    let plot = wait_plot(&suggestion);
    let (today, after) = (&suggestion.today, &suggestion.suggested);
    view! {
        <p data-test="suggestion-summary">
            {format!(
                "Targets met: {} of {} today, {} with the suggestion. Fleet: allocated {:.1}% → {:.1}%, busy {:.1}% → {:.1}%, queue wait p95 {} → {}, {} → {} preemptions ({} simulated).",
                suggestion.targets_met_today(), count(suggestion.teams.len() as u64, "team"), suggestion.targets_met_suggested(),
                today.allocated_pct.unwrap_or(0.0), after.allocated_pct.unwrap_or(0.0),
                today.busy_pct.unwrap_or(0.0), after.busy_pct.unwrap_or(0.0),
                wait(today), wait(after), today.preemptions, after.preemptions,
                count(u64::from(suggestion.weeks_simulated), "week"),
            )}
        </p>
        <table data-test="suggestion">
            <thead><tr>
                <th>"Team"</th><th>"Flavor"</th><th class="num">"Nominal (GPUs)"</th><th class="num">"Borrowing limit"</th>
                <th class="num">"Lending limit"</th><th class="num">"Queue wait p95 (target)"</th><th class="num">"Jobs not started"</th>
                <th class="num">"Preemptions"</th><th>"Target met"</th>
            </tr></thead>
            <tbody>
                {suggestion.teams.iter().flat_map(team_rows).collect_view()}
            </tbody>
        </table>
        <table data-test="suggestion-flavors">
            <thead><tr><th>"Flavor"</th><th class="num">"GPUs"</th><th class="num">"In quotas today"</th><th class="num">"Suggested"</th><th class="num">"Lendable in the cohort"</th></tr></thead>
            <tbody>
                {suggestion.flavors.iter().map(|f| view! {
                    <tr><td>{f.flavor.clone()}</td><td class="num">{f.capacity_gpus}</td><td class="num">{f.nominal_today_gpus}</td>
                    <td class="num">{f.nominal_suggested_gpus}</td><td class="num">{f.lendable_suggested_gpus}</td></tr>
                }).collect_view()}
            </tbody>
        </table>
        <ul class="warnings" data-test="suggestion-notes">
            {suggestion.notes.iter().map(|n| view! { <li>{n.clone()}</li> }).collect_view()}
        </ul>
        <Chart id="suggestion-chart" plot=Box::new(move || Some(plot.clone()))/>
    }
}

/// Each team's p95 queue wait today and with the suggestion, beside its target.
fn wait_plot(suggestion: &QuotaSuggestion) -> String {
    let names: Vec<String> = suggestion.teams.iter().map(|t| t.team.clone()).collect();
    let series = |pick: &dyn Fn(&suggest::TeamSuggestion) -> f64| -> Vec<f64> {
        suggestion.teams.iter().map(pick).collect()
    };
    let mut figure = Figure::new();
    for (name, values) in [
        (
            "today",
            series(&|t| t.today.queue_wait_p95_min.unwrap_or(0.0)),
        ),
        (
            "suggested",
            series(&|t| t.suggested.queue_wait_p95_min.unwrap_or(0.0)),
        ),
        ("target", series(&|t| f64::from(t.queue_wait_target_min))),
    ] {
        figure = figure.bars(name, &names, &values);
    }
    figure.with_layout(json!({
        "title": {"text": "Queue wait p95 per team: today's quotas, the suggestion, the target"},
        "height": 320,
        "yaxis": {"title": {"text": "minutes"}},
    }))
}

/// What this page reads of the API's answer to a new request (a `RequestView`).
#[derive(serde::Deserialize)]
struct Created {
    request: CreatedId,
}

#[derive(serde::Deserialize)]
struct CreatedId {
    id: i64,
}

fn today() -> Day {
    Day::of_unix_seconds((js_sys::Date::now() / 1000.0) as i64)
}

/// What drafting reads of `GET /api/quota/world`: each flavor's MIG layout (the rest of the
/// world stays unread, so the page carries no code to read it).
#[derive(serde::Deserialize)]
struct FlavorsOfWorld {
    flavors: Vec<FlavorOfWorld>,
}

#[derive(serde::Deserialize)]
struct FlavorOfWorld {
    name: String,
    settings: MigOfFlavor,
}

#[derive(serde::Deserialize)]
struct MigOfFlavor {
    #[serde(default)]
    mig_layout: std::collections::BTreeMap<String, u32>,
}

/// The suggestion as draft quota requests, one per team, for the live fleet's teams and
/// flavors (a scenario started from "our fleet today"): each drafted through the quota API,
/// which checks it as it checks a request typed on the Quotas page; each team's outcome shown.
/// The cluster's flavors are read first, so a flavor split into MIG instances is requested in
/// its instances.
#[component]
fn DraftRequests(made: (Scenario, QuotaSuggestion)) -> impl IntoView {
    let outcomes = RwSignal::new(Vec::<(String, Result<i64, String>)>::new());
    let busy = RwSignal::new(false);
    // the quota API takes a team's drafts from its members and admins only
    let me = gpufleet_web::use_me();
    let may_draft =
        move |team: &str| me.with(|m| m.as_ref().is_some_and(|m| m.may_draft_for(team)));
    let teams: Vec<String> = made.1.teams.iter().map(|t| t.team.clone()).collect();
    let none_mine = Memo::new(move |_| !teams.iter().any(|t| may_draft(t)));
    let create = move |_| {
        let (scenario, suggestion) = made.clone();
        busy.set(true);
        outcomes.set(Vec::new());
        spawn_local(async move {
            let layouts = match api::get::<FlavorsOfWorld>("/api/quota/world").await {
                // Inserted one by one: collecting a map sorts, and each sort is code in the wasm.
                Ok(world) => {
                    let mut layouts = std::collections::BTreeMap::new();
                    for f in world.flavors {
                        layouts.insert(f.name, f.settings.mig_layout);
                    }
                    layouts
                }
                Err(err) => {
                    let why = format!("the cluster's flavors cannot be read: {err}");
                    outcomes.set(vec![("every team".to_owned(), Err(why))]);
                    busy.set(false);
                    return;
                }
            };
            for (team, request) in suggestion.draft_requests(&scenario, today(), &layouts) {
                if !may_draft(&team) {
                    let why = "not drafted: only its members and admins may draft its requests";
                    outcomes.update(|all| all.push((team, Err(why.to_owned()))));
                    continue;
                }
                let path = format!("/api/quota/teams/{team}/requests");
                let outcome = api::send::<_, Created>(Method::POST, &path, Some(&request))
                    .await
                    .map(|created| created.request.id)
                    .map_err(|err| err.to_string());
                outcomes.update(|all| all.push((team, outcome)));
            }
            busy.set(false);
        });
    };
    view! {
        <p>
            <button type="button" data-test="draft-requests" on:click=create disabled=move || busy.get() || none_mine.get()>
                "Draft these quotas as requests"
            </button>
            <span class="muted">{move || if none_mine.get() {
                " You are a member of none of these teams: their members or an admin draft their requests."
            } else {
                " One draft per team on the Quotas page, from today, for the team to submit (team members and admins may draft)."
            }}</span>
        </p>
        <ul data-test="draft-outcomes">
            {move || outcomes.get().into_iter().map(|(team, outcome)| match outcome {
                Ok(id) => view! { <li class="ok">{format!("{team}: draft request {id} created")}</li> }.into_any(),
                Err(err) => view! { <li class="problem">{format!("{team}: {err}")}</li> }.into_any(),
            }).collect_view()}
        </ul>
    }
}
