//! Saved scenarios: save the draft (as new, or over the opened one when it is yours or you are
//! an admin), and the list of saved ones, each opened by its URL (`/plan/{id}`), duplicated,
//! deleted, or compared with another side by side.

use gloo_net::http::Method;
use leptos::{prelude::*, task::spawn_local};
use shared::{
    ApiError, FieldError,
    common::money::{thousands, whole_dollars},
    planning::saved::{SavedScenario, SavedSummary, ScenarioSave},
};

use super::{Route, fields::use_draft};
use gpufleet_web::{api, js, ui::ErrorBox, use_me};
use wasm_bindgen::JsValue;

pub type SavedList = LocalResource<api::ApiResult<Vec<SavedSummary>>>;

pub fn saved_list() -> SavedList {
    LocalResource::new(|| api::get::<Vec<SavedSummary>>("/api/scenarios"))
}

#[component]
pub fn SaveForm(
    opened: RwSignal<Option<SavedSummary>>,
    list: SavedList,
    /// Called with what was saved, so the page knows its draft is saved.
    on_saved: Callback<()>,
) -> impl IntoView {
    let draft = use_draft();
    let me = use_me();
    let name = RwSignal::new(String::new());
    Effect::new(move |_| {
        if let Some(summary) = opened.get() {
            name.set(summary.name);
        }
    });
    let outcome = RwSignal::new(None::<Result<String, Vec<FieldError>>>);
    let route = expect_context::<Route>();
    let mine = move || {
        let (Some(summary), Some(me)) = (opened.get(), me.get()) else {
            return None;
        };
        let may = summary.owner == me.username || me.roles.contains(&shared::accounts::Role::Admin);
        may.then_some(summary.id)
    };
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        // the scenario takes the name it is saved under, so its JSON says it too
        let mut scenario = draft.scenario.get_untracked();
        scenario.name = name.get_untracked();
        let body = ScenarioSave {
            name: scenario.name.clone(),
            scenario,
        };
        if let Err(errors) = body.validate() {
            outcome.set(Some(Err(errors)));
            return;
        }
        draft.scenario.set(body.scenario.clone());
        let (method, path) = match mine() {
            Some(id) => (Method::PUT, format!("/api/scenarios/{id}")),
            None => (Method::POST, "/api/scenarios".to_owned()),
        };
        spawn_local(async move {
            match api::send::<_, SavedScenario>(method, &path, Some(&body)).await {
                Ok(saved) => {
                    let summary = saved.summary;
                    let id = summary.id;
                    outcome.set(Some(Ok(format!("saved as “{}”", summary.name))));
                    opened.set(Some(summary));
                    on_saved.run(());
                    list.refetch();
                    route.go(&format!("/plan/{id}"));
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
            <label>"Save as "<input type="text" maxlength="100" prop:value=name placeholder="a name for this scenario"
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
    }
}

/// The saved scenarios, each with Duplicate (a copy owned by you) and, for its owner or an
/// admin, Delete (asked first); any two ticked are compared side by side. The rows are one
/// HTML node; one click listener reads each control's `data-act` and `data-id`.
#[component]
pub fn SavedTable(list: SavedList) -> impl IntoView {
    let me = use_me();
    let failure = RwSignal::new(None::<ApiError>);
    let ticked = RwSignal::new(Vec::<i64>::new());
    let act = move |method: Method, path: String| {
        spawn_local(async move {
            match api::send_no_content::<()>(method, &path, None).await {
                Ok(()) => {
                    failure.set(None);
                    list.refetch();
                }
                Err(err) => failure.set(Some(err)),
            }
        });
    };
    let on_click = move |ev: leptos::ev::MouseEvent| {
        let (Some(what), Some(id)) = (
            js::data_of(&ev, "act"),
            js::data_of(&ev, "id").and_then(|i| i.parse::<i64>().ok()),
        ) else {
            return;
        };
        match what.as_str() {
            "tick" => ticked.update(|t| tick(t, id)),
            "duplicate" => act(Method::POST, format!("/api/scenarios/{id}/duplicate")),
            "delete" => {
                let name = js::data_of(&ev, "name").unwrap_or_default();
                let asked = web_sys::window()
                    .and_then(|w| {
                        w.confirm_with_message(&format!("Delete the saved scenario “{name}”?"))
                            .ok()
                    })
                    .unwrap_or(false);
                if asked {
                    ticked.update(|t| t.retain(|x| *x != id));
                    act(Method::DELETE, format!("/api/scenarios/{id}"));
                }
            }
            _ => {}
        }
    };
    let rows = move || match list.get() {
        None => r#"<p class="muted">Loading…</p>"#.to_owned(),
        Some(Err(error)) => format!(r#"<p class="error">{}</p>"#, js::escape(&error.to_string())),
        Some(Ok(rows)) if rows.is_empty() => r#"<p class="muted">None saved yet.</p>"#.to_owned(),
        Some(Ok(rows)) => me.with_untracked(|me| {
            ticked.with_untracked(|ticked| saved_html(&rows, me.as_ref(), ticked))
        }),
    };
    view! {
        <div data-test="saved-scenarios" on:click=on_click>
            {move || failure.get().map(|error| view! { <ErrorBox error/> })}
            <div inner_html=rows></div>
            {move || match ticked.get()[..] {
                [a, b] => view! { <Compare a b/> }.into_any(),
                _ => view! { <p class="muted">"Tick two to compare them side by side."</p> }.into_any(),
            }}
        </div>
    }
}

/// Ticks `id` for comparison, or unticks it; at most the last two stay ticked.
fn tick(ticked: &mut Vec<i64>, id: i64) {
    if let Some(i) = ticked.iter().position(|x| *x == id) {
        ticked.remove(i);
    } else {
        ticked.push(id);
        if ticked.len() > 2 {
            ticked.remove(0);
        }
    }
}

/// The saved scenarios as one table: each to tick for comparison, open, duplicate, and delete
/// (its owner and admins).
fn saved_html(rows: &[SavedSummary], me: Option<&shared::accounts::Me>, ticked: &[i64]) -> String {
    let body: String = rows
        .iter()
        .map(|r| {
            let name = js::escape(&r.name);
            let may_delete = me.is_some_and(|m| {
                m.username == r.owner || m.roles.contains(&shared::accounts::Role::Admin)
            });
            let checked = if ticked.contains(&r.id) { " checked" } else { "" };
            let delete = if may_delete {
                format!(r#" <button type="button" data-test="delete" data-act="delete" data-id="{}" data-name="{name}">Delete</button>"#, r.id)
            } else {
                String::new()
            };
            format!(
                r#"<tr data-test="saved-{id}"><td><input type="checkbox" aria-label="Compare {name}" data-act="tick" data-id="{id}"{checked}></td><td><a href="/plan/{id}">{name}</a></td><td>{}</td><td>{}</td><td><button type="button" data-test="duplicate" data-act="duplicate" data-id="{id}">Duplicate</button>{delete}</td></tr>"#,
                js::escape(&r.owner),
                js::escape(&r.updated_at),
                id = r.id,
            )
        })
        .collect();
    format!(
        r#"<table><thead><tr><th>Compare</th><th>Name</th><th>Owner</th><th>Updated (UTC)</th><th></th></tr></thead><tbody>{body}</tbody></table>"#
    )
}

/// Two saved scenarios side by side, each evaluated by the server (`POST /api/plan/evaluate`;
/// its answer read by the browser's `JSON.parse` into one HTML table).
#[component]
fn Compare(a: i64, b: i64) -> impl IntoView {
    let shown = RwSignal::new(r#"<p class="muted">Evaluating both…</p>"#.to_owned());
    spawn_local(async move {
        let both = async { Ok::<_, ApiError>((evaluated(a).await?, evaluated(b).await?)) };
        shown.set(match both.await {
            Ok((a, b)) => compare_html(&a, &b),
            Err(err) => format!(r#"<p class="error">{}</p>"#, js::escape(&err.to_string())),
        });
    });
    view! { <div inner_html=move || shown.get()></div> }
}

/// A saved scenario's name and its evaluation as the browser parsed it.
async fn evaluated(id: i64) -> api::ApiResult<(String, JsValue)> {
    let saved: SavedScenario = api::get(&format!("/api/scenarios/{id}")).await?;
    let evaluation =
        api::send_js(Method::POST, "/api/plan/evaluate", Some(&saved.scenario)).await?;
    Ok((saved.summary.name, evaluation))
}

/// How one row of the comparison reads an evaluation.
type Figure<'a> = dyn Fn(&JsValue) -> String + 'a;

fn compare_html(a: &(String, JsValue), b: &(String, JsValue)) -> String {
    let pct = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.1}%"));
    let recommendation = |e: &JsValue| {
        let pick = js::at(&js::at(e, "decision"), "recommendation");
        js::each(&js::at(e, "decision"), "options")
            .iter()
            .find(|o| js::at(o, "architecture") == pick)
            .map_or_else(String::new, |o| js::text(&o, "title"))
    };
    let rows: [(&str, &Figure<'_>); 10] = [
        ("Recommendation", &recommendation),
        ("GPUs in the fleet", &|e| {
            thousands(js::number(e, "simulation.capacity_gpus").unwrap_or(0.0) as i64)
        }),
        ("Separate pools need", &|e| {
            thousands(js::number(e, "sizing.separate_pools.gpus").unwrap_or(0.0) as i64)
        }),
        ("A shared pool needs", &|e| {
            thousands(js::number(e, "sizing.shared_pool.gpus").unwrap_or(0.0) as i64)
        }),
        ("Busy, separate → shared", &|e| {
            format!(
                "{} → {}",
                pct(js::number(e, "sizing.gain.from_pct")),
                pct(js::number(e, "sizing.gain.to_pct"))
            )
        }),
        ("Shared pool, a year", &|e| {
            whole_dollars(
                js::number(e, "sizing.shared_pool.cost_cents_per_year").unwrap_or(0.0) as i64,
            )
        }),
        ("The week: busy", &|e| {
            pct(js::number(e, "simulation.total.busy_pct"))
        }),
        ("The week: queue wait p95 (min)", &|e| {
            js::number(e, "simulation.total.queue_wait_p95_min")
                .map_or("–".to_owned(), |w| format!("{w:.0}"))
        }),
        ("The week: preemptions", &|e| {
            thousands(js::number(e, "simulation.total.preemptions").unwrap_or(0.0) as i64)
        }),
        ("The week: inference unserved", &|e| {
            pct(js::number(e, "simulation.total.unserved_inference_pct"))
        }),
    ];
    let body: String = rows
        .iter()
        .map(|(label, f)| {
            format!(
                r#"<tr><td>{label}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
                f(&a.1),
                f(&b.1)
            )
        })
        .collect();
    format!(
        r#"<table data-test="compare"><thead><tr><th></th><th class="num">{}</th><th class="num">{}</th></tr></thead><tbody>{body}</tbody></table>"#,
        js::escape(&a.0),
        js::escape(&b.0)
    )
}
