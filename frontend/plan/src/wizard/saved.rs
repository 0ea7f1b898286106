//! Saved scenarios: save the draft (as new, or over the opened one when it is yours or you are
//! an admin), and the list of saved ones, each opened by its URL (`/plan/{id}`).

use gloo_net::http::Method;
use leptos::{prelude::*, task::spawn_local};
use shared::{
    FieldError,
    planning::saved::{SavedScenario, SavedSummary, ScenarioSave},
};

use super::{Route, fields::use_draft};
use gpufleet_web::{api, ui::ErrorBox, use_me};

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

#[component]
pub fn SavedTable(list: SavedList) -> impl IntoView {
    view! {
        <div data-test="saved-scenarios">
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
        </div>
    }
}
