//! The results: the recommendation and its reasons, the decision matrix with editable weights,
//! sizing side by side, the simulated week per team, the isolation plan grouped, the warnings
//! grouped, and the plots (plotly.js).

use gpufleet_web::figure::Figure;
use leptos::prelude::*;
use serde_json::json;
use shared::{
    common::label::{Labelled, UNALLOCATED},
    common::money::{thousands, whole_dollars},
    packing::mig::Instance,
    planning::Evaluation,
    planning::decision::Verdict,
    planning::isolation::{FlavorMig, WarningCode},
    planning::scenario::{HOURS_PER_WEEK, Scenario, Weights},
    planning::sizing::{Bar, Sizing, Waterfall},
    planning::terms::Architecture,
};

use super::{
    Results,
    fields::{Field, bind_decimal, use_draft},
};
use gpufleet_web::{js::escape, ui::Chart};

/// The week's demand per team, stacked, against the fleet and, once evaluated, against what
/// each option needs. Redrawn when the draft settles, not on every key.
#[component]
pub fn DemandChart() -> impl IntoView {
    let draft = use_draft();
    let results = expect_context::<Results>();
    view! {
        <Chart id="demand-chart" plot=Box::new(move || {
            results.settled.track();
            let sizing = results.evaluation.with_untracked(|e| e.as_ref().map(|e| e.sizing.clone()));
            Some(draft.scenario.with_untracked(|s| demand_plot(s, sizing.as_ref())))
        })/>
    }
}

fn demand_plot(s: &Scenario, sizing: Option<&Sizing>) -> String {
    let hours: Vec<usize> = (0..HOURS_PER_WEEK).collect();
    let mut figure = Figure::new();
    for team in &s.teams {
        let mut total = vec![0.0; HOURS_PER_WEEK];
        for w in &team.workloads {
            for (h, v) in w
                .demand
                .hourly()
                .into_iter()
                .enumerate()
                .take(HOURS_PER_WEEK)
            {
                total[h] += v;
            }
        }
        figure = figure.trace(json!({
            "type": "scatter", "mode": "lines", "stackgroup": "demand",
            "name": team.name, "x": hours, "y": total,
        }));
    }
    let line = |figure: Figure, name: &str, gpus: u64, dash: &str| {
        figure.trace(json!({
            "type": "scatter", "mode": "lines", "name": name,
            "x": [0, HOURS_PER_WEEK - 1], "y": [gpus, gpus],
            "line": {"dash": dash, "color": "#1d2330"},
        }))
    };
    figure = line(figure, "your fleet", s.total_gpus(), "solid");
    if let Some(sizing) = sizing {
        figure = line(
            figure,
            "separate pools need",
            sizing.separate_pools.gpus,
            "dash",
        );
        figure = line(
            figure,
            "a shared pool needs",
            sizing.shared_pool.gpus,
            "dot",
        );
    }
    figure.with_layout(json!({
        "title": {"text": "The week's demand per team (GPUs, from Monday 00:00 UTC)"},
        "height": 320,
        "xaxis": {"title": {"text": "hour of the week"}, "dtick": 24},
        "yaxis": {"title": {"text": "GPUs"}},
    }))
}

#[component]
pub fn Report(evaluation: Evaluation) -> impl IntoView {
    let sensitivity = sensitivity_plot(&evaluation);
    view! {
        {recommendation(&evaluation)}
        {sizing(&evaluation)}
        <h2>"Where the utilisation comes from"</h2>
        {utilisation_sources(&evaluation)}
        {week(&evaluation)}
        <h2>"Isolation"</h2>
        <div inner_html=isolation_html(&evaluation)></div>
        <MigLayouts mig=evaluation.mig.clone()/>
        <Warnings evaluation=evaluation.clone()/>
        <Chart id="sensitivity-chart" plot=Box::new(move || Some(sensitivity.clone()))/>
        <h2>"Adoption plan"</h2>
        {adoption(&evaluation)}
    }
}

/// The recommended architecture with its reasons, what would change it, and each option's
/// score under the manager's weights.
fn recommendation(evaluation: &Evaluation) -> impl IntoView + use<> {
    let d = &evaluation.decision;
    let scores = score_plot(evaluation);
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
            {d.outscored_unnominated().into_iter().map(|text| view! { <li data-test="outscored">{text}</li> }).collect_view()}
        </ul>
        <h3>"What would change the answer"</h3>
        <ul class="reasons" data-test="changes">
            {d.changes.iter().map(|c| view! {
                <li>
                    <strong>{c.architecture.label()}</strong>
                    {if c.would_win.is_empty() {
                        " would not win through any one change of fleet size, platform team or constraint.".to_owned()
                    } else {
                        format!(" would win {}.", c.would_win.join("; or "))
                    }}
                </li>
            }).collect_view()}
        </ul>
        <div class="two">
            <div>
                <table data-test="scores">
                    <thead><tr><th>"Architecture"</th><th class="num">"Score"</th></tr></thead>
                    <tbody>
                        {d.options.iter().map(|o| view! {
                            <tr class:chosen=o.architecture == d.recommendation><td title=o.architecture.description()>{o.architecture.label()}</td>
                            <td class="num">{o.score.map_or("excluded".to_owned(), |s| format!("{s:.1}"))}</td></tr>
                        }).collect_view()}
                    </tbody>
                </table>
                <WeightsForm/>
            </div>
            <Chart id="scores-chart" plot=Box::new(move || Some(scores.clone()))/>
        </div>
    }
}

/// Separate pools against one shared pool: the cards, utilisation and cost of each, and the
/// gain in words.
fn sizing(evaluation: &Evaluation) -> impl IntoView + use<> {
    let (sep, shared_pool, gain) = (
        &evaluation.sizing.separate_pools,
        &evaluation.sizing.shared_pool,
        &evaluation.sizing.gain,
    );
    let row = |label: &'static str, a: String, b: String| view! { <tr><td>{label}</td><td class="num">{a}</td><td class="num">{b}</td></tr> };
    let cost_per_m = |v: Option<f64>| v.map_or("–".to_owned(), |c| format!("${:.2}", c / 100.0));
    let utilisation = utilisation_plot(evaluation);
    view! {
        <h2>"Sizing"</h2>
        <div class="two">
            <table data-test="sizing">
                <thead><tr><th></th><th class="num">"Separate pools"</th><th class="num">"Shared pool"</th></tr></thead>
                <tbody>
                    {row("GPUs needed", sep.gpus.to_string(), shared_pool.gpus.to_string())}
                    {row("Mean allocated", format!("{:.1}%", sep.mean_allocated_pct), format!("{:.1}%", shared_pool.mean_allocated_pct))}
                    {row("Mean busy (DCGM)", format!("{:.1}%", sep.mean_busy_pct), format!("{:.1}%", shared_pool.mean_busy_pct))}
                    <tr title=UNALLOCATED.1><td>"Unallocated GPU-hours a week"</td><td class="num">{format!("{:.0}", sep.unallocated_gpu_hours_per_week)}</td><td class="num">{format!("{:.0}", shared_pool.unallocated_gpu_hours_per_week)}</td></tr>
                    {row("Cost a year", whole_dollars(sep.cost_cents_per_year), whole_dollars(shared_pool.cost_cents_per_year))}
                    {row("The fleet's whole cost per million tokens served (training included; Chargeback prices each model's own share)", cost_per_m(sep.cost_cents_per_million_tokens), cost_per_m(shared_pool.cost_cents_per_million_tokens))}
                </tbody>
            </table>
            <Chart id="utilisation-chart" plot=Box::new(move || Some(utilisation.clone()))/>
        </div>
        <p data-test="gain">
            {format!(
                "Busy utilisation {:.1}% → {:.1}%: {:.2}x the work per fixed cost. On the {} cards of separate pools that is {:.0} more busy-GPU equivalents, or {:.0} of those cards to retire for the same work: worth {} a year at the fleet's mean price (the busy share gained on the cards you have). Sized for the same peaks instead, a shared pool needs {} cards fewer than separate pools: {} a year less (the table's cost rows: the cards the week's peaks need).",
                gain.from_pct, gain.to_pct, gain.work_per_cost_factor, thousands(gain.gpus as i64), gain.extra_busy_gpus, gain.retirable_gpus,
                whole_dollars(evaluation.decision.gain_value_cents_per_year),
                thousands(sep.gpus as i64 - shared_pool.gpus as i64),
                whole_dollars(sep.cost_cents_per_year - shared_pool.cost_cents_per_year),
            )}
        </p>
    }
}

/// The waterfall from separate pools to the shared fleet, and what the week's replicas and
/// evictions held.
fn utilisation_sources(evaluation: &Evaluation) -> impl IntoView + use<> {
    let sim = &evaluation.simulation.total;
    let waterfall = waterfall_plot(evaluation);
    view! {
        <div class="two">
            <div inner_html=waterfall_html(evaluation)></div>
            <Chart id="waterfall-chart" plot=Box::new(move || Some(waterfall.clone()))/>
        </div>
        <p class="muted" data-test="rework">
            {format!(
                "The last three bars come from the simulated week on your fleet: replicas held {:.0} GPU-hours loading their models (warm caches cut {:.0} more), and evicted work held {:.0} GPU-hours again (restarts and work since the last checkpoint). Cards held for those are cards the pool holds on top of its work.",
                sim.cold_start_gpu_minutes / 60.0,
                sim.cold_start_cut_by_cache_gpu_minutes / 60.0,
                sim.rework_gpu_hours + sim.backlog_rework_gpu_hours,
            )}
        </p>
    }
}

/// The demand, the fleet's flavors with their verdicts, and the simulated week in words and
/// per team.
fn week(evaluation: &Evaluation) -> impl IntoView + use<> {
    let sim = &evaluation.simulation.total;
    let teams = team_plot(evaluation);
    view! {
        <DemandChart/>
        <div inner_html=fleet_html(evaluation)></div>
        <ul class="warnings" data-test="fleet-verdicts">
            {evaluation.sizing.by_flavor.iter().flat_map(|f| f.verdicts()).map(|v| view! { <li>{v}</li> }).collect_view()}
        </ul>
        <h2>"The week under Kueue"</h2>
        <p data-test="simulation">
            {format!(
                "Batch: {:.0} GPU-hours wanted; {:.0} admitted (of which {:.0} rework), {:.0} left at the week's end; plus {:.0} for work running at the start and {:.0} of backlog. Inference: {:.0} GPU-hours of traffic, held by replicas for {:.0}. Allocated {:.1}%, busy {:.1}% of the fleet (the sizing's hourly estimate for this fleet: {:.1}%); queue wait p95 {} min; {:.0} GPU-hours admitted on quota but Pending for nodes; {} preemptions; elastic backlog reclaimed {} times ({:.0} GPU-hours lost); {} of inference traffic unserved; {} flapping cycles.",
                sim.wanted_batch_gpu_minutes / 60.0, sim.batch_gpu_minutes / 60.0, sim.rework_gpu_hours,
                sim.unfinished_gpu_minutes / 60.0, sim.warm_start_gpu_minutes / 60.0, sim.backlog_gpu_minutes / 60.0,
                sim.wanted_traffic_gpu_minutes / 60.0, sim.replica_gpu_minutes / 60.0,
                sim.allocated_pct.unwrap_or(0.0), sim.busy_pct.unwrap_or(0.0), evaluation.sizing.fleet_pool.mean_busy_pct,
                sim.queue_wait_p95_min.map_or("–".to_owned(), |w| format!("{w:.0}")),
                sim.pending_gpu_minutes / 60.0,
                sim.preemptions,
                sim.backlog_reclaims, sim.backlog_rework_gpu_hours,
                sim.unserved_inference_pct.map_or("none".to_owned(), |u| format!("{u:.2}%")),
                sim.flapping_cycles,
            )}
        </p>
        <Chart id="teams-chart" plot=Box::new(move || Some(teams.clone()))/>
    }
}

/// The adoption plan's steps, each with why and what it needs.
fn adoption(evaluation: &Evaluation) -> impl IntoView + use<> {
    view! {
        <ol class="adoption" data-test="adoption">
            {evaluation.adoption.iter().map(|step| view! {
                <li>
                    <strong>{step.title.clone()}</strong>
                    <p>{step.why.clone()}</p>
                    {(!step.needs.is_empty()).then(|| view! {
                        <ul class="muted">{step.needs.iter().map(|n| view! { <li>{n.clone()}</li> }).collect_view()}</ul>
                    })}
                </li>
            }).collect_view()}
        </ol>
    }
}

/// Each MIG flavor's GPUs at the peak, drawn by memory slice: one row per distinct layout,
/// with how many GPUs have it.
#[component]
fn MigLayouts(mig: Vec<FlavorMig>) -> impl IntoView {
    const SHOWN: usize = 12;
    mig.into_iter().map(|m| {
        let body = match m.layout {
            Err(why) => view! { <p class="problem">{why}</p> }.into_any(),
            Ok(plan) => {
                let inferred = plan.placement_inferred();
                let mut layouts: Vec<(Vec<Instance>, usize)> = Vec::new();
                for gpu in plan.gpus {
                    match layouts.iter_mut().find(|(i, _)| *i == gpu.instances) {
                        Some((_, n)) => *n += 1,
                        None => layouts.push((gpu.instances, 1)),
                    }
                }
                let more = layouts.len().saturating_sub(SHOWN);
                let slices = plan.total_memory_slices;
                view! {
                    <p class="muted">{format!("{} GPUs ({} at least, by memory and compute slices); memory {}.{}",
                        layouts.iter().map(|(_, n)| n).sum::<usize>(), plan.lower_bound_gpus,
                        if plan.usable_memory_measured { "as the driver reports it" } else { "nominal" },
                        if inferred { " Placement inferred from the geometry (unpublished)." } else { "" })}</p>
                    {layouts.into_iter().take(SHOWN).map(|(instances, gpus)| view! {
                        <div class="mig-row">
                            <div class="mig-gpu" style=format!("grid-template-columns: repeat({slices}, 1fr)")>
                                {instances.into_iter().map(|i| view! {
                                    <div class="mig-slice" title=format!("{} MiB", i.mem_mib)
                                        style=format!("grid-column: {} / span {}", i.start_slice + 1, i.size_slices)>
                                        <strong>{i.profile}</strong><br/>{i.replica}
                                    </div>
                                }).collect_view()}
                            </div>
                            <span class="muted">{format!("× {gpus} GPU{}", if gpus == 1 { "" } else { "s" })}</span>
                        </div>
                    }).collect_view()}
                    {(more > 0).then(|| view! { <p class="muted">{format!("and {more} more layouts")}</p> })}
                }.into_any()
            }
        };
        view! {
            <section data-test="mig-layout" data-flavor=m.flavor.clone()>
                <h3>{format!("MIG on {} at the peak", m.flavor)}</h3>
                {body}
            </section>
        }
    }).collect_view()
}

/// The warnings, one group per anti-pattern with how often it occurs and whom it concerns.
#[component]
fn Warnings(evaluation: Evaluation) -> impl IntoView {
    let mut groups: Vec<(WarningCode, Vec<(String, String)>)> = Vec::new();
    for w in &evaluation.isolation.warnings {
        let item = (w.subject.clone(), w.message.clone());
        match groups.iter_mut().find(|(code, _)| *code == w.code) {
            Some((_, items)) => items.push(item),
            None => groups.push((w.code, vec![item])),
        }
    }
    (!groups.is_empty()).then(|| view! {
        <h2>"Warnings"</h2>
        <div class="warnings" data-test="warnings">
            {groups.into_iter().map(|(code, items)| view! {
                <details>
                    <summary><strong>{code.label()}</strong>{format!(" — {} ({})", items.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>().join(", "), items.len())}</summary>
                    <ul>{items.into_iter().map(|(subject, message)| view! { <li><strong>{subject}</strong>": "{message}</li> }).collect_view()}</ul>
                </details>
            }).collect_view()}
        </div>
    })
}

/// The decision criteria's weights (0-10): a change re-ranks the options at once.
#[component]
fn WeightsForm() -> impl IntoView {
    type Pick = fn(&mut Weights) -> &mut f64;
    let weight = |label: &'static str, name: &'static str, pick: Pick| {
        let bind = bind_decimal(
            move |s: &Scenario| {
                let mut w = s.weights.clone();
                Some(*pick(&mut w))
            },
            move |s, v| *pick(&mut s.weights) = v,
        );
        view! { <Field label path=format!("weights.{name}") mode="decimal" bind/> }
    };
    view! {
        <fieldset class="row" data-test="weights">
            <legend>"Weights (0-10)"</legend>
            {weight("Arbitration", "arbitration", |w| &mut w.arbitration)}
            {weight("Granularity", "granularity", |w| &mut w.granularity)}
            {weight("Isolation", "isolation", |w| &mut w.isolation)}
            {weight("Cost to maintain", "cost_to_maintain", |w| &mut w.cost_to_maintain)}
            {weight("Utilisation", "utilisation", |w| &mut w.utilisation)}
        </fieldset>
    }
}

/// The waterfall in order: separate pools, the sizing's levers, the shared pool as sized, the
/// week's levers, the shared pool in the week. `Err` is a lever's bar, `Ok` a total.
fn waterfall_steps(w: &Waterfall) -> Vec<Result<(&'static str, f64), &Bar>> {
    let (sized, week): (Vec<&Bar>, Vec<&Bar>) = w.bars.iter().partition(|b| !b.lever.in_week());
    let mut steps = vec![Ok(("Separate pools", w.from_pct))];
    steps.extend(sized.into_iter().map(Err));
    steps.push(Ok(("Shared pool, as sized", w.sized_pct)));
    steps.extend(week.into_iter().map(Err));
    steps.push(Ok(("Shared pool, in the week", w.to_pct)));
    steps
}

/// The waterfall's table (one HTML node: static once evaluated).
fn waterfall_html(evaluation: &Evaluation) -> String {
    let rows: String = waterfall_steps(&evaluation.waterfall)
        .into_iter()
        .map(|step| match step {
            Ok((label, pct)) => {
                format!(r#"<tr><th>{label}</th><td class="num">{pct:.1}%</td><td></td></tr>"#)
            }
            Err(b) => format!(
                r#"<tr><td>{}</td><td class="num">{:+.2} points</td><td class="muted">{}</td></tr>"#,
                b.lever.label(),
                b.points,
                b.lever.description()
            ),
        })
        .collect();
    format!(
        r#"<table data-test="waterfall"><thead><tr><th></th><th class="num">Busy utilisation</th><th>How</th></tr></thead><tbody>{rows}</tbody></table>"#
    )
}

/// The fleet per flavor against what each option needs.
fn fleet_html(evaluation: &Evaluation) -> String {
    let rows: String = evaluation
        .sizing
        .by_flavor
        .iter()
        .map(|f| {
            format!(
                r#"<tr><td>{}</td><td class="num">{}</td><td class="num">{} ({})</td><td class="num">{} ({})</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
                escape(&f.flavor),
                f.fleet_gpus,
                f.separate_gpus,
                f.separate_fit.label(),
                f.shared_gpus,
                f.shared_fit.label(),
                f.outside_quota_gpus,
                f.overbooked_gpus
            )
        })
        .collect();
    format!(
        r#"<table data-test="fleet"><thead><tr><th>Flavor</th><th class="num">Your fleet</th><th class="num">Separate pools need</th><th class="num">Shared pool needs</th><th class="num">Outside every quota</th><th class="num">Quota beyond the cards</th></tr></thead><tbody>{rows}</tbody></table>"#
    )
}

/// The isolation plan grouped by mechanism and reason.
fn isolation_html(evaluation: &Evaluation) -> String {
    let rows: String = evaluation
        .isolation
        .groups()
        .into_iter()
        .map(|g| {
            let jobs = match g.jobs_per_card_range() {
                (few, most) if few == most => few.to_string(),
                (few, most) => format!("{few}–{most}"),
            };
            format!(
                r#"<tr><td title="{}">{} ({})</td><td class="num">{}</td><td class="num">{jobs}</td><td class="names">{}</td><td>{}</td></tr>"#,
                escape(g.mechanism.description()),
                g.mechanism.label(),
                g.allocation_base.label(),
                g.classes.len(),
                escape(&g.classes.join(", ")),
                escape(&g.reasons.join(" "))
            )
        })
        .collect();
    format!(
        r#"<table data-test="isolation"><thead><tr><th>Mechanism</th><th class="num">Classes</th><th class="num" title="How many of a class's jobs share one card in the week: what its mechanism offers a card, within what its memory and busy time allow">Jobs a card</th><th>Which</th><th>Why</th></tr></thead><tbody>{rows}</tbody></table>"#
    )
}

/// [`waterfall_steps`] as bars: each lever's bar floats on an invisible one that lifts it to
/// where the previous bar ended (plotly's basic bundle has no waterfall trace).
fn waterfall_plot(evaluation: &Evaluation) -> String {
    let (mut names, mut lifts, mut heights, mut texts) = (vec![], vec![], vec![], vec![]);
    let mut level = 0.0;
    for step in waterfall_steps(&evaluation.waterfall) {
        match step {
            Ok((label, pct)) => {
                names.push(label);
                lifts.push(0.0);
                heights.push(pct);
                texts.push(format!("{pct:.1}%"));
                level = pct;
            }
            Err(bar) => {
                names.push(bar.lever.label());
                lifts.push(level.min(level + bar.points));
                heights.push(bar.points.abs());
                texts.push(format!("{:+.2}", bar.points));
                level += bar.points;
            }
        }
    }
    Figure::new()
        .trace(json!({
            "type": "bar", "x": names, "y": lifts, "showlegend": false,
            "marker": {"color": "rgba(0,0,0,0)"}, "hoverinfo": "skip",
        }))
        .trace(json!({
            "type": "bar", "x": names, "y": heights, "text": texts,
            "name": "busy utilisation", "showlegend": false,
        }))
        .with_layout(json!({
            "title": {"text": "Separate pools to a shared pool (busy %)"},
            "height": 300,
            "barmode": "stack",
            "yaxis": {"range": [0, 100]},
        }))
}

fn score_plot(evaluation: &Evaluation) -> String {
    let options = &evaluation.decision.options;
    let names: Vec<&str> = options.iter().map(|o| o.architecture.label()).collect();
    let scores: Vec<f64> = options.iter().map(|o| o.score.unwrap_or(0.0)).collect();
    let text: Vec<String> = options
        .iter()
        .map(|o| o.score.map_or("excluded".to_owned(), |s| format!("{s:.1}")))
        .collect();
    Figure::new()
        .trace(json!({"type": "bar", "name": "score", "x": names, "y": scores, "text": text}))
        .with_layout(json!({
            "title": {"text": "Decision scores (weighted)"},
            "height": 300,
            "showlegend": false,
        }))
}

fn utilisation_plot(evaluation: &Evaluation) -> String {
    let (sep, shared_pool, sim) = (
        &evaluation.sizing.separate_pools,
        &evaluation.sizing.shared_pool,
        &evaluation.simulation.total,
    );
    let names = [
        "Separate pools".to_owned(),
        "Shared pool".to_owned(),
        "The week simulated".to_owned(),
    ];
    let allocated = [
        sep.mean_allocated_pct,
        shared_pool.mean_allocated_pct,
        sim.allocated_pct.unwrap_or(0.0),
    ];
    let busy = [
        sep.mean_busy_pct,
        shared_pool.mean_busy_pct,
        sim.busy_pct.unwrap_or(0.0),
    ];
    let figure =
        Figure::new()
            .bars("allocated", &names, &allocated)
            .bars("busy (DCGM)", &names, &busy);
    figure.with_layout(json!({
        "title": {"text": "Utilisation per option (%)"},
        "height": 300,
        "barmode": "group",
        "yaxis": {"range": [0, 100]},
    }))
}

fn team_plot(evaluation: &Evaluation) -> String {
    let teams = &evaluation.simulation.teams;
    let names: Vec<&str> = teams.iter().map(|t| t.team.as_str()).collect();
    let waits: Vec<f64> = teams
        .iter()
        .map(|t| t.queue_wait_p95_min.unwrap_or(0.0))
        .collect();
    let evictions: Vec<u64> = teams.iter().map(|t| t.preemptions).collect();
    Figure::new()
        .trace(json!({
            "type": "bar", "name": "queue wait p95 (min)", "x": names, "y": waits,
            "offsetgroup": "wait",
        }))
        .trace(json!({
            "type": "bar", "name": "preemptions", "x": names, "y": evictions,
            "yaxis": "y2", "offsetgroup": "evictions",
        }))
        .with_layout(json!({
            "title": {"text": "The simulated week per team"},
            "height": 320,
            "yaxis": {"title": {"text": "minutes"}},
            "yaxis2": {"title": {"text": "preemptions"}, "overlaying": "y", "side": "right"},
        }))
}

fn sensitivity_plot(evaluation: &Evaluation) -> String {
    let points = &evaluation.decision.sensitivity;
    // The architectures as numbers on a y axis labelled with their names.
    let gpus: Vec<u64> = points.iter().map(|p| p.gpus).collect();
    let index = |a| Architecture::ALL.iter().position(|x| *x == a).unwrap_or(0);
    let picks: Vec<usize> = points.iter().map(|p| index(p.recommendation)).collect();
    let ticks: Vec<usize> = Architecture::ALL.iter().map(|a| index(*a)).collect();
    let names: Vec<&str> = Architecture::ALL.iter().map(|a| a.label()).collect();
    Figure::new()
        .trace(json!({
            "type": "scatter", "mode": "lines+markers", "name": "recommendation",
            "x": gpus, "y": picks,
        }))
        .with_layout(json!({
            "title": {"text": "Recommendation as the fleet grows"},
            "height": 260,
            "xaxis": {"type": "log", "title": {"text": "GPUs"}},
            "yaxis": {"tickvals": ticks, "ticktext": names},
        }))
}
