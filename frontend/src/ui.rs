//! Small generic widgets.

use leptos::prelude::*;
use shared::{
    ApiError,
    health::{DatabaseStatus, Status},
};

use crate::api;

/// The backend's version and database status, from `/api/health`.
#[component]
pub fn HealthBadge() -> impl IntoView {
    let health = LocalResource::new(api::health);
    view! {
        <div class="health" data-test="health">
            {move || match health.get() {
                None => view! { <span class="muted">"checking backend…"</span> }.into_any(),
                Some(Err(err)) => view! {
                    <span class="bad" title=err.message.clone()>"backend unreachable"</span>
                }
                .into_any(),
                Some(Ok(h)) => {
                    let db = match h.database.status {
                        DatabaseStatus::Up => "database up",
                        DatabaseStatus::Down => "database down",
                    };
                    let class = if h.status == Status::Ok { "ok" } else { "bad" };
                    view! {
                        <span class=class data-test="health-status">
                            {format!("backend {} · {db}", h.build.version)}
                        </span>
                    }
                    .into_any()
                }
            }}
        </div>
    }
}

/// An error as a person should see it.
#[component]
pub fn ErrorBox(error: ApiError) -> impl IntoView {
    let id = error
        .request_id
        .clone()
        .map(|id| format!(" (request {id})"));
    view! { <p class="error" role="alert">{error.to_string()}{id}</p> }
}

/// A page that is planned but not built yet, saying so plainly.
#[component]
pub fn NotYet(title: &'static str, what: &'static str) -> impl IntoView {
    view! {
        <section>
            <h1>{title}</h1>
            <p class="notyet">"Not built yet. " {what}</p>
        </section>
    }
}

/// Shows `children` only to roles that may use `page` (the server refuses the data anyway).
#[component]
pub fn Guard(page: shared::auth::Page, children: ChildrenFn) -> impl IntoView {
    let me = crate::auth::use_me();
    move || {
        let allowed = me.with(|m| m.as_ref().is_some_and(|m| page.visible_to(&m.roles)));
        if allowed {
            children().into_any()
        } else {
            view! {
                <section>
                    <h1>{page.title()}</h1>
                    <p class="error" role="alert">"You do not have access to this page."</p>
                </section>
            }
            .into_any()
        }
    }
}
