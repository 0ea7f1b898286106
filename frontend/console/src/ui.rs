//! The console's own widgets; the shared ones (errors, charts) come from `gpufleet-web`.

pub use gpufleet_web::ui::{Chart, ErrorBox, draw_chart};
use leptos::prelude::*;
use shared::health::{DatabaseStatus, Status};

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

/// Shows `children` only to roles that may use `page` (the server refuses the data anyway).
#[component]
pub fn Guard(page: shared::accounts::Page, children: ChildrenFn) -> impl IntoView {
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
