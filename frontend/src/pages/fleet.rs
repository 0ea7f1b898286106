//! The fleet inventory: pools, models, and GPUs by model as a chart; per flavor, capacity
//! against the approved quota of each team and what is left.

use leptos::{html::Div, prelude::*, task::spawn_local};
use plotly::{Bar, Layout, Plot, layout::BarMode};
use shared::{
    fleet::Fleet,
    money::dollars,
    quota::{Allocation, QuotaWorld},
};

use crate::{
    api,
    ui::{Chart, ErrorBox},
};

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
            <QuotaByFlavor/>
        </section>
    }
}

/// Per flavor resource: each team's approved nominal quota in force today, stacked against
/// capacity, and what is left unassigned and lendable.
#[component]
fn QuotaByFlavor() -> impl IntoView {
    let world = LocalResource::new(|| api::get::<QuotaWorld>("/api/quota/world"));
    move || match world.get() {
        None => ().into_any(),
        Some(Err(error)) => view! { <ErrorBox error/> }.into_any(),
        Some(Ok(world)) => {
            let allocation = world.allocation(super::quotas::today());
            let plot = allocation_plot(&allocation);
            view! {
                <h2>"Quota by flavor"</h2>
                <Chart id="quota-chart" plot=Box::new(move || Some(plot.clone()))/>
                <table data-test="quota-by-flavor">
                    <thead>
                        <tr>
                            <th>"Flavor"</th><th>"Resource"</th><th class="num">"Capacity"</th>
                            <th>"Approved, by team"</th><th class="num">"Approved"</th>
                            <th class="num">"Unassigned"</th><th class="num">"Lendable in cohorts"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {allocation
                            .into_iter()
                            .map(|a| {
                                let teams = a.teams.iter().map(|(t, n)| format!("{t} {n}")).collect::<Vec<_>>().join(", ");
                                view! {
                                    <tr>
                                        <td>{a.flavor.clone()}</td>
                                        <td>{super::quotas::unit(&a.resource)}</td>
                                        <td class="num">{a.capacity}</td>
                                        <td>{teams}</td>
                                        <td class="num">{a.nominal_total}</td>
                                        <td class="num">{a.unassigned}</td>
                                        <td class="num">{a.lendable}</td>
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            }
            .into_any()
        }
    }
}

fn allocation_plot(allocation: &[Allocation]) -> Plot {
    let names: Vec<String> = allocation
        .iter()
        .map(|a| format!("{} {}", a.flavor, super::quotas::unit(&a.resource)))
        .collect();
    let mut teams: Vec<&str> = allocation
        .iter()
        .flat_map(|a| a.teams.iter().map(|(t, _)| t.as_str()))
        .collect();
    teams.sort_unstable();
    teams.dedup();
    let mut plot = Plot::new();
    for team in teams {
        let quota: Vec<f64> = allocation
            .iter()
            .map(|a| {
                a.teams
                    .iter()
                    .find(|(t, _)| t == team)
                    .map_or(0.0, |(_, n)| *n as f64)
            })
            .collect();
        plot.add_trace(Bar::new(names.clone(), quota).name(team));
    }
    let unassigned: Vec<f64> = allocation
        .iter()
        .map(|a| a.unassigned.max(0) as f64)
        .collect();
    plot.add_trace(Bar::new(names, unassigned).name("unassigned"));
    plot.set_layout(
        Layout::new()
            .bar_mode(BarMode::Stack)
            .title("Approved quota against capacity")
            .height(300),
    );
    plot
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
