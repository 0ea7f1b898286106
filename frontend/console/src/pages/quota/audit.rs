//! The audit log: filters by team, user, kind and dates; paged, newest first, each entry with
//! the fields it changed; the same selection as CSV.

use gpufleet_web::js;
use leptos::prelude::*;
use shared::audit::{DEFAULT_PER_PAGE, Kind};
use wasm_bindgen::{JsCast, JsValue};

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
        async move { api::get_js(&format!("/api/quota/audit?{query}")).await }
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
            Some(Ok(p)) => entries_page(&p, page).into_any(),
        }}
    }
}

/// A page of entries with its count and the buttons to the pages either side.
fn entries_page(p: &JsValue, page: RwSignal<u32>) -> impl IntoView {
    let number = |key: &str| js::at(p, key).as_f64().unwrap_or(0.0) as i64;
    let (total, per_page) = (number("total"), number("per_page").max(1));
    let pages = u32::try_from((total.max(1) + per_page - 1) / per_page).unwrap_or(1);
    let current = u32::try_from(number("page")).unwrap_or(1);
    view! {
        <p data-test="audit-count">{format!("{total} entries; page {current} of {pages}")}</p>
        <div inner_html=entries_html(p)/>
        <p data-test="audit-pager">
            <button type="button" disabled={current <= 1} on:click=move |_| page.update(|p| *p -= 1)>"Previous page"</button>
            " "
            <button type="button" disabled={current >= pages} on:click=move |_| page.update(|p| *p += 1)>"Next page"</button>
        </p>
    }
}

/// A page of entries as one table: when, who, what, of what, and the fields it changed.
fn entries_html(page: &JsValue) -> String {
    let rows: String = js::each(page, "entries")
        .iter()
        .map(|e| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><ul class=\"changes\">{}</ul></td></tr>",
                js::text(&e, "at"),
                js::text(&e, "actor"),
                js::text(&e, "action"),
                js::text(&e, "subject"),
                js::text(&e, "team"),
                changes(&js::at(&e, "before"), &js::at(&e, "after")),
            )
        })
        .collect();
    format!(
        "<table data-test=\"audit\"><thead><tr><th>When (UTC)</th><th>Who</th><th>What</th><th>Subject</th><th>Team</th><th>Changed</th></tr></thead><tbody>{rows}</tbody></table>"
    )
}

/// What an entry changed, one field a line: `field: before → after` for each field whose
/// value differs (`—` where a side has none), nested objects by their dotted path
/// (`spec.justification`); a value that is not an object, whole.
fn changes(before: &JsValue, after: &JsValue) -> String {
    let mut lines = String::new();
    diff("", before, after, &mut lines);
    lines
}

fn diff(path: &str, before: &JsValue, after: &JsValue, lines: &mut String) {
    let json = |v: &JsValue| {
        if v.is_undefined() || v.is_null() {
            "—".to_owned()
        } else {
            js::escape(
                &js_sys::JSON::stringify(v)
                    .map(String::from)
                    .unwrap_or_default(),
            )
        }
    };
    let object = |v: &JsValue| v.is_object() && !js_sys::Array::is_array(v);
    let plain = |v: &JsValue| !(v.is_null() || v.is_undefined() || object(v));
    // into both sides' fields when both are objects, or at the top when a side is absent (a
    // creation or a removal lists each field)
    let descend =
        object(before) && object(after) || path.is_empty() && !plain(before) && !plain(after);
    if !descend {
        let (b, a) = (json(before), json(after));
        if b != a {
            let field = if path.is_empty() {
                String::new()
            } else {
                format!("{}: ", js::escape(path))
            };
            lines.push_str(&format!("<li>{field}{b} → {a}</li>"));
        }
        return;
    }
    let mut fields: Vec<String> = Vec::new();
    for side in [before, after].into_iter().filter(|v| object(v)) {
        for key in js_sys::Object::keys(side.unchecked_ref::<js_sys::Object>()).iter() {
            let key = key.as_string().unwrap_or_default();
            if !fields.contains(&key) {
                fields.push(key);
            }
        }
    }
    for field in fields {
        let nested = if path.is_empty() {
            field.clone()
        } else {
            format!("{path}.{field}")
        };
        diff(
            &nested,
            &js::at(before, &field),
            &js::at(after, &field),
            lines,
        );
    }
}
