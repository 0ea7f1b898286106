//! The fleet inventory: pools, models, and GPUs by model as a chart.

use leptos::{html::Div, prelude::*, task::spawn_local};
use plotly::{Bar, Layout, Plot};
use shared::{fleet::Fleet, money::dollars};

use crate::{api, ui::ErrorBox};

#[component]
pub fn FleetPage() -> impl IntoView {
    let fleet = LocalResource::new(|| api::get::<Fleet>("/api/fleet"));
    view! {
        <section>
            <h1>"Fleet"</h1>
            {move || match fleet.get() {
                None => view! { <p class="muted">"loading…"</p> }.into_any(),
                Some(Err(err)) => view! { <ErrorBox error=err/> }.into_any(),
                Some(Ok(fleet)) if fleet.pools.is_empty() => {
                    view! { <p>"No node pools yet."</p> }.into_any()
                }
                Some(Ok(fleet)) => view! { <FleetTables fleet/> }.into_any(),
            }}
        </section>
    }
}

#[component]
fn FleetTables(fleet: Fleet) -> impl IntoView {
    let totals = fleet.totals_by_model();
    let chart = NodeRef::<Div>::new();
    let plot = gpus_by_model_plot(&fleet);
    Effect::new(move |_| {
        if chart.get().is_some() {
            let plot = plot.clone();
            spawn_local(async move { crate::ui::draw_chart("fleet-chart", &plot).await });
        }
    });
    view! {
        <p data-test="fleet-total">
            {format!(
                "{} GPUs in {} pools, {} per hour at on-demand prices",
                fleet.total_gpus(),
                fleet.pools.len(),
                dollars(fleet.cost_cents_per_hour()),
            )}
        </p>
        <div id="fleet-chart" class="chart" node_ref=chart></div>
        <table>
            <thead>
                <tr>
                    <th>"Pool"</th><th>"GPU model"</th><th class="num">"Nodes"</th>
                    <th class="num">"GPUs per node"</th><th class="num">"GPUs"</th>
                </tr>
            </thead>
            <tbody>
                {fleet
                    .pools
                    .iter()
                    .map(|p| {
                        view! {
                            <tr>
                                <td>{p.name.clone()}</td>
                                <td>{p.gpu_model.clone()}</td>
                                <td class="num">{p.nodes}</td>
                                <td class="num">{p.gpus_per_node}</td>
                                <td class="num">{p.gpus()}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
        <table>
            <thead>
                <tr>
                    <th>"GPU model"</th><th class="num">"Memory (GiB)"</th>
                    <th class="num">"MIG instances"</th><th class="num">"$ per GPU-hour"</th>
                    <th class="num">"GPUs"</th><th class="num">"$ per hour"</th>
                </tr>
            </thead>
            <tbody>
                {fleet
                    .models
                    .iter()
                    .zip(totals)
                    .map(|(m, t)| {
                        view! {
                            <tr>
                                <td>{m.name.clone()}</td>
                                <td class="num">{m.mem_mib / 1024}</td>
                                <td class="num">{if m.supports_mig() { m.mig_max_instances.to_string() } else { "—".to_owned() }}</td>
                                <td class="num">{dollars(m.price_cents_per_gpu_hour)}</td>
                                <td class="num">{t.gpus}</td>
                                <td class="num">{dollars(t.cost_cents_per_hour)}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}

fn gpus_by_model_plot(fleet: &Fleet) -> Plot {
    let totals = fleet.totals_by_model();
    let names: Vec<String> = totals.iter().map(|t| t.gpu_model.clone()).collect();
    // f64, as every bar chart of the console: one copy of plotly's serialising code.
    let gpus: Vec<f64> = totals.iter().map(|t| t.gpus as f64).collect();
    let mut plot = Plot::new();
    plot.add_trace(Bar::new(names, gpus).name("GPUs"));
    plot.set_layout(Layout::new().title("GPUs by model").height(280));
    plot
}
