//! What the fleet is and did, on the Plan page: a scenario of the fleet today
//! (`/api/plan/today`) or derived from the history (`/api/plan/from-history`) with where each
//! figure came from, and planned vs measured
//! (`/api/plan/replay`: a recorded week replayed through the week engine beside what the fleet
//! measured, per team and figure, with the error: how far to trust the planner).
//!
//! Both answers are parsed by the browser (`api::get_js`) and shown as escaped HTML: the page
//! carries no decoder and no view per cell for them (its download budget).

use leptos::{prelude::*, task::spawn_local, wasm_split::wasm_split};
use shared::{
    ApiError, ErrorCode,
    planning::{saved::SavedSummary, scenario::Scenario},
};
use wasm_bindgen::JsValue;

use gpufleet_web::{
    api,
    js::{at, each, problems, text},
};

/// Where the server derives a scenario from what the fleet did on the days `from` to `to`.
pub fn window_path(from: &str, to: &str) -> String {
    format!("/api/plan/from-history?from={from}&to={to}")
}

/// Starts from the scenario the server derives at `path` (`/api/plan/today`, or
/// `/api/plan/from-history` for what the fleet did on some days), keeping where each figure
/// came from in `derived` (as HTML). Its code comes with the Plan page's rarer steps
/// (`plan_steps`, fetched on the first call): a first look at a preset's results never needs it.
pub fn start(
    path: String,
    start: Callback<(Scenario, Option<SavedSummary>)>,
    derived: RwSignal<String>,
    notice: RwSignal<Option<ApiError>>,
) {
    spawn_local(start_split(path, start, derived, notice));
}

#[wasm_split(plan_steps, wasm_split_path = ::leptos::wasm_split)]
fn start_split(
    path: String,
    start: Callback<(Scenario, Option<SavedSummary>)>,
    derived: RwSignal<String>,
    notice: RwSignal<Option<ApiError>>,
) {
    spawn_local(async move {
        let answer = api::get_js(&path).await.and_then(|d| {
            let json = js_sys::JSON::stringify(&at(&d, "scenario"))
                .ok()
                .and_then(|s| s.as_string())
                .unwrap_or_default();
            let scenario = super::scenario_from(&json).ok_or_else(|| {
                ApiError::new(
                    ErrorCode::Internal,
                    "unexpected answer from the server: no scenario",
                )
            })?;
            Ok((scenario, d))
        });
        match answer {
            Ok((scenario, d)) => {
                notice.set(None);
                start.run((scenario, None));
                derived.set(sources_html(&d));
            }
            Err(err) => notice.set(Some(err)),
        }
    });
}

/// The derived figures' sources and the derivation's problems.
fn sources_html(d: &JsValue) -> String {
    let sources = each(d, "sources");
    let mut out = format!(
        "<details class=muted data-test=from-history><summary>Where its figures came from: {} figures from the inventory, the quotas and what the fleet recorded. {}</summary><ul>",
        sources.length(),
        problems(d)
    );
    for s in sources.iter() {
        out += &format!("<li>{}: {}</li>", text(&s, "path"), text(&s, "from"));
    }
    out + "</ul></details>"
}

/// Replays the week of 7 days from `from` into `table` (as HTML), or says why not in `notice`;
/// with the rarer steps too.
pub fn replay(from: String, table: RwSignal<String>, notice: RwSignal<Option<ApiError>>) {
    spawn_local(replay_split(from, table, notice));
}

#[wasm_split(plan_steps, wasm_split_path = ::leptos::wasm_split)]
fn replay_split(from: String, table: RwSignal<String>, notice: RwSignal<Option<ApiError>>) {
    spawn_local(async move {
        match api::get_js(&format!("/api/plan/replay?from={from}")).await {
            Ok(r) => {
                notice.set(None);
                table.set(html(&r));
            }
            Err(err) => notice.set(Some(err)),
        }
    });
}

/// The table as HTML, every text escaped: one node for the page to build, not one per cell.
fn html(r: &JsValue) -> String {
    let mut out = format!(
        "<p>{} to {}: {} Workloads replayed. {}</p><table><thead><tr><th>Team</th><th>Figure</th><th>Planned</th><th>Measured</th><th>Error</th></tr></thead><tbody>",
        text(r, "from"),
        text(r, "to"),
        text(r, "workloads"),
        problems(r)
    );
    let teams = each(r, "teams");
    teams.push(&at(r, "total"));
    for c in teams.iter() {
        for f in each(&c, "figures").iter() {
            let number = |key: &str| at(&f, key).as_f64();
            let pct = number("error_pct")
                .map(|p| format!(" ({p:+.0}%)"))
                .unwrap_or_default();
            out += &format!(
                "<tr><td>{}</td><td>{}</td><td class=num>{}</td><td class=num>{}</td><td class=num>{}</td></tr>",
                text(&c, "team"),
                text(&f, "figure").replace('_', " "),
                shown(number("planned"), None),
                shown(number("measured"), None),
                shown(number("error"), Some(&pct)),
            );
        }
    }
    out + "</tbody></table>"
}

/// A figure with one decimal (an error signed, with its percent), or "—" where there is none
/// (no job admitted, or not measured: the line above says which).
fn shown(x: Option<f64>, error_pct: Option<&str>) -> String {
    match (x, error_pct) {
        (Some(x), None) => format!("{x:.1}"),
        (Some(x), Some(pct)) => format!("{x:+.1}{pct}"),
        (None, _) => "—".to_owned(),
    }
}
