//! Planned vs measured (`/api/plan/replay`): a recorded week replayed through the week engine
//! beside what the fleet measured, per team and figure, with the error: how far a manager can
//! trust the planner's figures.

use leptos::{prelude::*, task::spawn_local};
use serde::Deserialize;
use shared::ApiError;

use gpufleet_web::{api, ui::ErrorBox};

/// The answer, read only as far as the table shows it (`shared::planning::replay::Replay`).
#[derive(Clone, Deserialize)]
struct Replay {
    from: String,
    to: String,
    workloads: u64,
    teams: Vec<Comparison>,
    total: Comparison,
    problems: Vec<String>,
}

#[derive(Clone, Deserialize)]
struct Comparison {
    team: String,
    figures: Vec<Compared>,
}

#[derive(Clone, Deserialize)]
struct Compared {
    figure: String,
    planned: Option<f64>,
    measured: Option<f64>,
    error: Option<f64>,
    error_pct: Option<f64>,
}

/// A replay asked for on the start card and shown below the cards, full width.
#[derive(Clone, Copy)]
pub struct Replayed {
    replay: RwSignal<Option<Replay>>,
    error: RwSignal<Option<ApiError>>,
}

impl Replayed {
    pub fn new() -> Self {
        Replayed {
            replay: RwSignal::new(None),
            error: RwSignal::new(None),
        }
    }
}

/// The start card: the week's first day, and the button that replays it.
#[component]
pub fn ReplayCard(replayed: Replayed, from: String) -> impl IntoView {
    let from = RwSignal::new(from);
    let run = move |_| {
        spawn_local(async move {
            let path = format!("/api/plan/replay?from={}", from.get_untracked());
            match api::get::<Replay>(&path).await {
                Ok(r) => {
                    replayed.error.set(None);
                    replayed.replay.set(Some(r));
                }
                Err(err) => replayed.error.set(Some(err)),
            }
        });
    };
    view! {
        <button type="button" data-test="replay" on:click=run>"Planned vs measured"</button>
        <p class="muted">
            "The week from "
            <input aria-label="Week's first day" data-test="replay-from" size="10" prop:value=from on:change=move |ev| from.set(event_target_value(&ev))/>
            " (UTC) replayed under the quotas in force, beside what Kueue and DCGM measured: how far to trust the planner."
        </p>
    }
}

/// The replay's table, or why there is none.
#[component]
pub fn ReplayTable(replayed: Replayed) -> impl IntoView {
    view! {
        {move || replayed.error.get().map(|error| view! { <ErrorBox error/> })}
        {move || replayed.replay.get().map(table)}
    }
}

fn table(r: Replay) -> impl IntoView {
    let rows = r.teams.into_iter().chain([r.total]).flat_map(|c| {
        let team = c.team;
        c.figures.into_iter().map(move |f| {
            let pct = f.error_pct.map(|p| format!(" ({p:+.0}%)")).unwrap_or_default();
            view! {
                <tr>
                    <td>{team.clone()}</td>
                    <td>{f.figure.replace('_', " ")}</td>
                    <td class="num">{number(f.planned)}</td>
                    <td class="num">{number(f.measured)}</td>
                    <td class="num">{f.error.map(|e| format!("{e:+.1}{pct}")).unwrap_or_else(|| "—".to_owned())}</td>
                </tr>
            }
        })
    });
    view! {
        <div data-test="replayed">
            <p>{format!("{} to {}: {} Workloads replayed. {}", r.from, r.to, r.workloads, r.problems.join("; "))}</p>
            <table>
                <thead><tr><th>"Team"</th><th>"Figure"</th><th>"Planned"</th><th>"Measured"</th><th>"Error"</th></tr></thead>
                <tbody>{rows.collect_view()}</tbody>
            </table>
        </div>
    }
}

/// A figure, or "—" where there is none (no job admitted, or not measured: the line above says
/// which).
fn number(x: Option<f64>) -> String {
    x.map_or_else(|| "—".to_owned(), |x| format!("{x:.1}"))
}
