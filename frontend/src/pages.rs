//! One page per domain. Pages that are not built yet say so.

mod admin;
mod chargeback;
mod cluster;
mod fleet;
mod planning;
mod quota;

pub use admin::Admin;
pub use chargeback::Chargeback;
pub use cluster::{ClusterPage, DryRunDiff};
pub use fleet::FleetPage;
use leptos::prelude::*;
use leptos_router::components::A;
pub use planning::Plan;
pub use quota::Quotas;
use shared::accounts::Page;

use crate::auth::use_me;

/// The start page: a card for each page the signed-in user may open, and no others.
#[component]
pub fn Home() -> impl IntoView {
    let me = use_me();
    let cards = move || {
        let roles = me.with(|m| m.as_ref().map(|m| m.roles.clone()).unwrap_or_default());
        Page::ALL
            .into_iter()
            .filter(|page| page.visible_to(&roles))
            .map(|page| {
                view! { <li><A href=page.path()>{page.title()}</A>" — "{page.summary()}</li> }
            })
            .collect_view()
    };
    view! {
        <section>
            <h1>"One GPU fleet for training, fine-tuning and inference"</h1>
            <p>
                "Separate pools pay for the sum of their peaks; a shared pool with queues, "
                "quotas that lend inside a cohort, preemption and fractional GPUs pays for the "
                "peak of the sum."
            </p>
            <ul class="cards" data-test="cards">{cards}</ul>
        </section>
    }
}

#[component]
pub fn NotFound() -> impl IntoView {
    view! {
        <section>
            <h1>"Page not found"</h1>
            <p><A href="/">"Back to the start"</A></p>
        </section>
    }
}
