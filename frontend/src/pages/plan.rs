//! Plan: evaluate a scenario in the browser (WASM, the same `shared::plan` the API runs) and
//! read the sizing, the decision with its reasons, the sensitivity series and the warnings.
//! The step-by-step wizard and the manifest download build on this page.

use gloo_net::http::Method;
use leptos::{html::Div, prelude::*, task::spawn_local};
use leptos_router::hooks::{use_navigate, use_params_map};
use plotly::{Layout, Plot, Scatter, common::Mode};
use shared::{
    ApiError, FieldError,
    decision::Verdict,
    label::Labelled,
    money::dollars,
    plan::{self, Evaluation},
    saved::{SavedSummary, ScenarioSave},
};
// The browser never serialises a `Scenario` nor builds JSON values (that code would cost
// ~30 KB of wasm): it sends the text it has, and shows the stored JSON as the browser's own
// `JSON.stringify` prints it.

use wasm_bindgen::JsValue;

use crate::{api, auth::use_me, ui::ErrorBox};

const EXAMPLES: [(&str, &str); 4] = [
    (
        "aws-300",
        include_str!("../../../shared/scenarios/aws-300.json"),
    ),
    (
        "startup-40",
        include_str!("../../../shared/scenarios/startup-40.json"),
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

#[component]
pub fn Plan() -> impl IntoView {
    let text = RwSignal::new(draft().unwrap_or_else(|| EXAMPLES[0].1.to_owned()));
    // The draft survives a reload (this browser's local storage) until it is saved or replaced.
    Effect::new(move |_| keep_draft(&text.get()));
    let result = RwSignal::new(None::<Result<Evaluation, Vec<FieldError>>>);
    // The text the results are for: after an edit they are stale, and say so.
    let evaluated = RwSignal::new(None::<String>);
    let evaluate = move |_| {
        let scenario = text.get();
        let outcome = plan::parse_scenario(&scenario).and_then(|s| plan::evaluate(&s));
        result.set(Some(outcome));
        evaluated.set(Some(scenario));
    };
    let stale = move || {
        result.with(Option::is_some) && evaluated.with(|e| e.as_deref() != Some(&*text.read()))
    };
    // A saved scenario opened by its URL (`/plan/{id}`) replaces the text.
    let params = use_params_map();
    let opened = RwSignal::new(None::<SavedSummary>);
    let open_error = RwSignal::new(None::<ApiError>);
    Effect::new(move |_| {
        let Some(id) = params.read().get("id") else {
            opened.set(None);
            return;
        };
        spawn_local(async move {
            let opened_text = api::get_text(&format!("/api/scenarios/{id}")).await;
            match opened_text.and_then(|json| Ok((summary_of(&json)?, scenario_of(&json)?))) {
                Ok((summary, scenario)) => {
                    text.set(scenario);
                    result.set(None);
                    opened.set(Some(summary));
                    open_error.set(None);
                }
                Err(err) => open_error.set(Some(err)),
            }
        });
    });
    view! {
        <section>
            <h1>"Plan"</h1>
            <p class="muted">
                "Evaluated in your browser (WebAssembly): sizing, a week simulated minute by minute under Kueue quotas, "
                "the decision matrix and isolation advice. Edit the scenario JSON or start from an example."
            </p>
            <div class="inline">
                <label>"Example "
                    <select data-test="example" on:change=move |ev| {
                        let name = event_target_value(&ev);
                        if let Some((_, json)) = EXAMPLES.iter().find(|(n, _)| *n == name) {
                            text.set((*json).to_owned());
                            result.set(None);
                        }
                    }>
                        {EXAMPLES.iter().map(|(name, _)| view! { <option value=*name>{*name}</option> }).collect_view()}
                    </select>
                </label>
                <button type="submit" data-test="evaluate" on:click=evaluate>"Evaluate"</button>
            </div>
            {move || open_error.get().map(|error| view! { <ErrorBox error/> })}
            <textarea class="scenario" aria-label="Scenario (JSON)" spellcheck="false" prop:value=text on:input=move |ev| text.set(event_target_value(&ev))></textarea>
            <SaveForm text opened/>
            {move || stale().then(|| view! {
                <p class="warning" data-test="stale" role="status">"The scenario changed since these results: evaluate again."</p>
            })}
            {move || match result.get() {
                None => ().into_any(),
                Some(Err(errors)) => view! {
                    <ul class="error" data-test="scenario-errors">
                        {errors.into_iter().map(|e| view! { <li><code>{e.path}</code>": "{e.message}</li> }).collect_view()}
                    </ul>
                }
                .into_any(),
                Some(Ok(evaluation)) => view! { <Report evaluation/> }.into_any(),
            }}
        </section>
    }
}

const DRAFT_KEY: &str = "gpufleet.plan.draft";

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

/// The scenario text left in this browser, if any.
fn draft() -> Option<String> {
    storage()?
        .get_item(DRAFT_KEY)
        .ok()
        .flatten()
        .filter(|d| !d.trim().is_empty())
}

fn keep_draft(text: &str) {
    if let Some(storage) = storage() {
        // A full or disabled storage only loses the draft, never the page.
        let _ = storage.set_item(DRAFT_KEY, text);
    }
}

/// The saved scenario's summary from the API's JSON (the scenario itself is skipped).
fn summary_of(json: &str) -> Result<SavedSummary, ApiError> {
    serde_json::from_str(json).map_err(|err| {
        ApiError::new(
            shared::ErrorCode::Internal,
            format!("the server's answer did not read: {err}"),
        )
    })
}

/// The saved scenario's JSON, indented by the browser.
fn scenario_of(json: &str) -> Result<String, ApiError> {
    let unreadable = || {
        ApiError::new(
            shared::ErrorCode::Internal,
            "the server's answer did not read as a saved scenario",
        )
    };
    let value = js_sys::JSON::parse(json).map_err(|_| unreadable())?;
    let scenario = js_sys::Reflect::get(&value, &"scenario".into()).map_err(|_| unreadable())?;
    js_sys::JSON::stringify_with_replacer_and_space(&scenario, &JsValue::NULL, &2.into())
        .ok()
        .and_then(|s| s.as_string())
        .ok_or_else(unreadable)
}

/// Save the scenario (a new one, or the opened one when it is yours or you are an admin), and
/// the list of saved scenarios, each opened by its URL.
#[component]
fn SaveForm(text: RwSignal<String>, opened: RwSignal<Option<SavedSummary>>) -> impl IntoView {
    let me = use_me();
    let list = LocalResource::new(|| api::get::<Vec<SavedSummary>>("/api/scenarios"));
    let name = RwSignal::new(String::new());
    Effect::new(move |_| {
        if let Some(summary) = opened.get() {
            name.set(summary.name);
        }
    });
    let outcome = RwSignal::new(None::<Result<String, Vec<FieldError>>>);
    let navigate = use_navigate();
    let mine = move || {
        let (Some(summary), Some(me)) = (opened.get(), me.get()) else {
            return None;
        };
        let may = summary.owner == me.username || me.roles.contains(&shared::auth::Role::Admin);
        may.then_some(summary.id)
    };
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let text = text.get_untracked();
        let scenario = match plan::parse_scenario(&text) {
            Ok(scenario) => scenario,
            Err(errors) => {
                outcome.set(Some(Err(errors)));
                return;
            }
        };
        let check = ScenarioSave {
            name: name.get_untracked(),
            scenario,
        };
        if let Err(errors) = check.validate() {
            outcome.set(Some(Err(errors)));
            return;
        }
        let body = format!(
            r#"{{"name":{},"scenario":{text}}}"#,
            serde_json::to_string(&check.name).unwrap_or_default()
        );
        let (method, path) = match mine() {
            Some(id) => (Method::PUT, format!("/api/scenarios/{id}")),
            None => (Method::POST, "/api/scenarios".to_owned()),
        };
        let navigate = navigate.clone();
        spawn_local(async move {
            let saved = api::send_text(method, &path, body)
                .await
                .and_then(|json| summary_of(&json));
            match saved {
                Ok(summary) => {
                    let id = summary.id;
                    outcome.set(Some(Ok(format!("saved as “{}”", summary.name))));
                    opened.set(Some(summary));
                    list.refetch();
                    navigate(&format!("/plan/{id}"), Default::default());
                }
                Err(err) => outcome.set(Some(Err(if err.fields.is_empty() {
                    vec![FieldError {
                        path: "save".into(),
                        message: err.to_string(),
                    }]
                } else {
                    err.fields
                }))),
            }
        });
    };
    view! {
        <form class="inline" data-test="save-scenario" on:submit=submit>
            <label>"Name "<input type="text" maxlength="100" prop:value=name
                on:input=move |ev| name.set(event_target_value(&ev))/></label>
            <button type="submit">{move || if mine().is_some() { "Save changes" } else { "Save as new" }}</button>
            {move || match outcome.get() {
                None => ().into_any(),
                Some(Ok(done)) => view! { <span class="ok" data-test="save-status">{done}</span> }.into_any(),
                Some(Err(errors)) => view! {
                    <ul class="error" data-test="save-errors">
                        {errors.into_iter().map(|e| view! { <li><code>{e.path}</code>": "{e.message}</li> }).collect_view()}
                    </ul>
                }.into_any(),
            }}
        </form>
        <details data-test="saved-scenarios">
            <summary>"Saved scenarios"</summary>
            {move || match list.get() {
                None => view! { <p class="muted">"Loading…"</p> }.into_any(),
                Some(Err(error)) => view! { <ErrorBox error/> }.into_any(),
                Some(Ok(rows)) if rows.is_empty() => view! { <p class="muted">"None saved yet."</p> }.into_any(),
                Some(Ok(rows)) => view! {
                    <table>
                        <thead><tr><th>"Name"</th><th>"Owner"</th><th>"Updated (UTC)"</th></tr></thead>
                        <tbody>
                            {rows.into_iter().map(|r| view! {
                                <tr><td><a href=format!("/plan/{}", r.id)>{r.name}</a></td><td>{r.owner}</td><td>{r.updated_at}</td></tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any(),
            }}
        </details>
    }
}

#[component]
fn Report(evaluation: Evaluation) -> impl IntoView {
    let d = &evaluation.decision;
    let (sep, shared_pool, gain) = (
        &evaluation.sizing.separate_pools,
        &evaluation.sizing.shared_pool,
        &evaluation.sizing.gain,
    );
    let sim = &evaluation.simulation.total;
    let chart = NodeRef::<Div>::new();
    let plot = sensitivity_plot(&evaluation);
    Effect::new(move |_| {
        if chart.get().is_some() {
            let plot = plot.clone();
            spawn_local(async move { crate::ui::draw_chart("sensitivity-chart", &plot).await });
        }
    });
    let row = |label: &'static str, a: String, b: String| view! { <tr><td>{label}</td><td class="num">{a}</td><td class="num">{b}</td></tr> };
    let cost_per_m = |v: Option<f64>| v.map_or("–".to_owned(), |c| format!("${:.2}", c / 100.0));
    view! {
        <h2>"Recommendation: " <span data-test="recommendation" title=d.recommendation.description()>{d.recommendation.label()}</span></h2>
        <ul class="reasons" data-test="reasons">
            {d.reasons.iter().map(|r| {
                let outweighed = r.verdict == Verdict::Outweighed;
                view! {
                    <li class:outweighed=outweighed>
                        {outweighed.then(|| view! { <em>"Outweighed: "</em> })}
                        {r.text.clone()}
                    </li>
                }
            }).collect_view()}
        </ul>
        <table>
            <thead><tr><th>"Architecture"</th><th class="num">"Score"</th></tr></thead>
            <tbody>
                {d.options.iter().map(|o| view! {
                    <tr><td title=o.architecture.description()>{o.architecture.label()}</td>
                    <td class="num">{o.score.map_or("excluded".to_owned(), |s| format!("{s:.1}"))}</td></tr>
                }).collect_view()}
            </tbody>
        </table>
        <div id="sensitivity-chart" class="chart" node_ref=chart></div>
        <h2>"Sizing"</h2>
        <table data-test="sizing">
            <thead><tr><th></th><th class="num">"Separate pools"</th><th class="num">"Shared pool"</th></tr></thead>
            <tbody>
                {row("GPUs needed", sep.gpus.to_string(), shared_pool.gpus.to_string())}
                {row("Mean allocated", format!("{:.1}%", sep.mean_allocated_pct), format!("{:.1}%", shared_pool.mean_allocated_pct))}
                {row("Mean busy (DCGM)", format!("{:.1}%", sep.mean_busy_pct), format!("{:.1}%", shared_pool.mean_busy_pct))}
                {row("Idle GPU-hours a week", format!("{:.0}", sep.idle_gpu_hours_per_week), format!("{:.0}", shared_pool.idle_gpu_hours_per_week))}
                {row("Cost a year", dollars(sep.cost_cents_per_year), dollars(shared_pool.cost_cents_per_year))}
                {row("Cost per million tokens", cost_per_m(sep.cost_cents_per_million_tokens), cost_per_m(shared_pool.cost_cents_per_million_tokens))}
            </tbody>
        </table>
        <p data-test="gain">
            {format!(
                "Busy utilisation {:.1}% → {:.1}%: {:.2}x the work per fixed cost; {:.0} extra busy-GPU equivalents on the {} cards of separate pools; or {:.0} of those cards to retire for the same work. Worth {} a year.",
                gain.from_pct, gain.to_pct, gain.work_per_cost_factor, gain.extra_busy_gpus, gain.gpus, gain.retirable_gpus,
                dollars(d.gain_value_cents_per_year),
            )}
        </p>
        <table data-test="fleet">
            <thead><tr><th>"Flavor"</th><th class="num">"Your fleet"</th><th class="num">"Separate pools need"</th><th class="num">"Shared pool needs"</th><th class="num">"Outside every quota"</th></tr></thead>
            <tbody>
                {evaluation.sizing.by_flavor.iter().map(|f| view! {
                    <tr><td>{f.flavor.clone()}</td><td class="num">{f.fleet_gpus}</td>
                    <td class="num">{format!("{} ({})", f.separate_gpus, f.separate_fit.label())}</td>
                    <td class="num">{format!("{} ({})", f.shared_gpus, f.shared_fit.label())}</td>
                    <td class="num">{f.outside_quota_gpus}</td></tr>
                }).collect_view()}
            </tbody>
        </table>
        <ul class="warnings" data-test="fleet-verdicts">
            {evaluation.sizing.by_flavor.iter().filter_map(|f| f.verdict()).map(|v| view! { <li>{v}</li> }).collect_view()}
        </ul>
        <h2>"The week under Kueue"</h2>
        <p data-test="simulation">
            {format!(
                "Batch: {:.0} GPU-hours wanted; {:.0} admitted (of which {:.0} rework), {:.0} left at the week's end; plus {:.0} for work running at the start and {:.0} of backlog. Inference: {:.0} GPU-hours of traffic, held by replicas for {:.0}. Allocated {:.1}%, busy {:.1}% of the fleet; queue wait p95 {} min; {} preemptions; {} of inference traffic unserved; {} flapping cycles.",
                sim.wanted_batch_gpu_minutes / 60.0, sim.batch_gpu_minutes / 60.0, sim.rework_gpu_hours,
                sim.unfinished_gpu_minutes / 60.0, sim.warm_start_gpu_minutes / 60.0, sim.backlog_gpu_minutes / 60.0,
                sim.wanted_traffic_gpu_minutes / 60.0, sim.replica_gpu_minutes / 60.0,
                sim.allocated_pct.unwrap_or(0.0), sim.busy_pct.unwrap_or(0.0),
                sim.queue_wait_p95_min.map_or("–".to_owned(), |w| format!("{w:.0}")),
                sim.preemptions,
                sim.unserved_inference_pct.map_or("none".to_owned(), |u| format!("{u:.2}%")),
                sim.flapping_cycles,
            )}
        </p>
        <h2>"Isolation"</h2>
        <table data-test="isolation">
            <thead><tr><th>"Team"</th><th>"Workload"</th><th>"Mechanism"</th><th>"Why"</th></tr></thead>
            <tbody>
                {evaluation.isolation.classes.iter().map(|c| view! {
                    <tr><td>{c.team.clone()}</td><td>{c.workload.clone()}</td><td title=c.mechanism.description()>{c.mechanism.label()}</td><td>{c.reasons.join(" ")}</td></tr>
                }).collect_view()}
            </tbody>
        </table>
        {(!evaluation.isolation.warnings.is_empty()).then(|| view! {
            <h2>"Warnings"</h2>
            <ul class="warnings">
                {evaluation.isolation.warnings.iter().map(|w| view! { <li><strong>{w.code.label()}</strong>" ("<code>{w.path.clone()}</code>"): "{w.message.clone()}</li> }).collect_view()}
            </ul>
        })}
    }
}

fn sensitivity_plot(evaluation: &Evaluation) -> Plot {
    let points = &evaluation.decision.sensitivity;
    let gpus: Vec<u64> = points.iter().map(|p| p.gpus).collect();
    let picks: Vec<String> = points
        .iter()
        .map(|p| p.recommendation.label().to_owned())
        .collect();
    let mut plot = Plot::new();
    plot.add_trace(
        Scatter::new(gpus, picks)
            .mode(Mode::LinesMarkers)
            .name("recommendation"),
    );
    plot.set_layout(
        Layout::new()
            .title("Recommendation as the fleet grows")
            .height(260)
            .x_axis(
                plotly::layout::Axis::new()
                    .type_(plotly::layout::AxisType::Log)
                    .title("GPUs"),
            )
            .y_axis(
                plotly::layout::Axis::new()
                    .category_order(plotly::layout::CategoryOrder::CategoryAscending),
            ),
    );
    plot
}
