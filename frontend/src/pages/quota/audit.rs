//! The audit log: filters by team, user, kind and dates; paged, newest first; the same
//! selection as CSV.

use leptos::prelude::*;
use shared::audit::{DEFAULT_PER_PAGE, Kind, Page};

use crate::{api, ui::ErrorBox};

fn encode(value: &str) -> String {
    js_sys::encode_uri_component(value).into()
}

#[component]
pub fn AuditLog(teams: Vec<String>) -> impl IntoView {
    let team = RwSignal::new(String::new());
    let actor = RwSignal::new(String::new());
    let kind = RwSignal::new(String::new());
    let from = RwSignal::new(String::new());
    let to = RwSignal::new(String::new());
    let page = RwSignal::new(1u32);
    let filters = Memo::new(move |_| {
        [
            ("team", team.get()),
            ("actor", actor.get()),
            ("kind", kind.get()),
            ("from", from.get()),
            ("to", to.get()),
        ]
        .into_iter()
        .filter(|(_, v)| !v.trim().is_empty())
        .map(|(k, v)| format!("{k}={}", encode(v.trim())))
        .collect::<Vec<_>>()
        .join("&")
    });
    let entries = LocalResource::new(move || {
        let query = format!(
            "{}&page={}&per_page={DEFAULT_PER_PAGE}",
            filters.get(),
            page.get()
        );
        async move { api::get::<Page>(&format!("/api/quota/audit?{query}")).await }
    });
    // A new filter starts again at the first page.
    let set = move |signal: RwSignal<String>| {
        move |ev| {
            signal.set(event_target_value(&ev));
            page.set(1);
        }
    };
    view! {
        <h2>"Audit log"</h2>
        <form class="filters" data-test="audit-filters" on:submit=|ev| ev.prevent_default()>
            <label for="audit-team">"Team "</label>
            <select id="audit-team" on:change=set(team)>
                <option value="">"every team"</option>
                {teams.into_iter().map(|t| view! { <option value=t.clone()>{t.clone()}</option> }).collect_view()}
            </select>
            " "
            <label for="audit-actor">"User "</label>
            <input id="audit-actor" size="10" on:change=set(actor)/>
            " "
            <label for="audit-kind">"Kind "</label>
            <select id="audit-kind" on:change=set(kind)>
                <option value="">"every kind"</option>
                {Kind::ALL.into_iter().map(|k| view! { <option value=k.as_str()>{k.as_str().replace('_', " ")}</option> }).collect_view()}
            </select>
            " "
            <label for="audit-from">"From "</label>
            <input id="audit-from" size="10" placeholder="YYYY-MM-DD" on:change=set(from)/>
            " "
            <label for="audit-to">"to "</label>
            <input id="audit-to" size="10" placeholder="YYYY-MM-DD" on:change=set(to)/>
            " "
            <a data-test="audit-csv" href=move || format!("/api/quota/audit.csv?{}", filters.get()) download="gpufleet-audit.csv">"Download CSV"</a>
        </form>
        {move || match entries.get() {
            None => view! { <p class="muted">"loading…"</p> }.into_any(),
            Some(Err(error)) => view! { <ErrorBox error/> }.into_any(),
            Some(Ok(p)) => {
                let per_page = i64::from(p.per_page);
                let pages = u32::try_from((p.total.max(1) + per_page - 1) / per_page).unwrap_or(1);
                let current = p.page;
                view! {
                    <p data-test="audit-count">{format!("{} entries; page {current} of {pages}", p.total)}</p>
                    <table data-test="audit">
                        <thead>
                            <tr><th>"When (UTC)"</th><th>"Who"</th><th>"What"</th><th>"Subject"</th><th>"Team"</th><th>"Before"</th><th>"After"</th></tr>
                        </thead>
                        <tbody>
                            {p.entries
                                .into_iter()
                                .map(|e| {
                                    let json = |v: &Option<serde_json::Value>| v.as_ref().map(|v| v.to_string()).unwrap_or_default();
                                    view! {
                                        <tr>
                                            <td>{e.at.clone()}</td>
                                            <td>{e.actor.clone()}</td>
                                            <td>{e.action.clone()}</td>
                                            <td>{e.subject.clone()}</td>
                                            <td>{e.team.clone().unwrap_or_default()}</td>
                                            <td><code>{json(&e.before)}</code></td>
                                            <td><code>{json(&e.after)}</code></td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                    <p data-test="audit-pager">
                        <button type="button" disabled={current <= 1} on:click=move |_| page.update(|p| *p -= 1)>"Previous page"</button>
                        " "
                        <button type="button" disabled={current >= pages} on:click=move |_| page.update(|p| *p += 1)>"Next page"</button>
                    </p>
                }
                .into_any()
            }
        }}
    }
}
