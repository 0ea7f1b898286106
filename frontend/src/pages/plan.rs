//! Plan: evaluate a scenario in the browser (WASM, the same `shared::plan` the API runs) and
//! read the sizing, the decision with its reasons, the sensitivity series and the warnings.
//! The step-by-step wizard and the manifest download build on this page.

use leptos::{html::Div, prelude::*, task::spawn_local};
use plotly::{Layout, Plot, Scatter, common::Mode};
use shared::{
    FieldError,
    decision::Verdict,
    label::Labelled,
    money::dollars,
    plan::{self, Evaluation},
};

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
    let text = RwSignal::new(EXAMPLES[0].1.to_owned());
    let result = RwSignal::new(None::<Result<Evaluation, Vec<FieldError>>>);
    let evaluate = move |_| {
        let outcome = plan::parse_scenario(&text.get()).and_then(|s| plan::evaluate(&s));
        result.set(Some(outcome));
    };
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
            <textarea class="scenario" spellcheck="false" prop:value=text on:input=move |ev| text.set(event_target_value(&ev))></textarea>
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
