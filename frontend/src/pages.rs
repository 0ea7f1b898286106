//! One page per domain. Pages that are not built yet say so.

mod admin;
mod fleet;
mod plan;

pub use admin::Admin;
pub use fleet::FleetPage;
use leptos::prelude::*;
use leptos_router::components::A;
pub use plan::Plan;

use crate::ui::NotYet;

#[component]
pub fn Home() -> impl IntoView {
    view! {
        <section>
            <h1>"One GPU fleet for training, fine-tuning and inference"</h1>
            <p>
                "Separate pools pay for the sum of their peaks; a shared pool with queues, "
                "quotas that lend inside a cohort, preemption and fractional GPUs pays for the "
                "peak of the sum."
            </p>
            <ul class="cards">
                <li><A href="/plan">"Plan"</A>" — size the fleet and choose an architecture."</li>
                <li><A href="/quotas">"Quotas"</A>" — request and approve GPU quota."</li>
                <li><A href="/chargeback">"Chargeback"</A>" — cost by allocation and by use."</li>
                <li><A href="/fleet">"Fleet"</A>" — the accelerators you have."</li>
            </ul>
        </section>
    }
}

#[component]
pub fn Quotas() -> impl IntoView {
    view! {
        <NotYet
            title="Quotas"
            what="Teams will request GPU quota here; approved quota is applied to the cluster as Kueue objects."
        />
    }
}

#[component]
pub fn Chargeback() -> impl IntoView {
    view! {
        <NotYet
            title="Chargeback"
            what="Cost by allocation and by measured use (DCGM via Prometheus), and monthly statements."
        />
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
