//! One page per domain. The start page is in the console's first download; every other page is
//! a lazy route, its code split by `./dev build` into a chunk the browser fetches the first time
//! someone opens the page (code two pages share goes to a chunk of its own, loaded with either).

mod admin;
mod chargeback;
mod cluster;
mod fleet;
mod quota;

pub use cluster::DryRunDiff;
use leptos::prelude::*;
use leptos_router::{LazyRoute, components::A, lazy_route};
use shared::accounts::Page;

use crate::{auth::use_me, ui::Guard};

/// `lazy_page!(Route => view)`: a lazy route named `Route` whose view is `view`.
macro_rules! lazy_page {
    ($route:ident => $view:expr) => {
        pub struct $route;

        #[lazy_route]
        impl LazyRoute for $route {
            fn data() -> Self {
                $route
            }

            fn view(this: Self) -> AnyView {
                let $route = this;
                $view.into_any()
            }
        }
    };
}

lazy_page!(PlanRoute => view! { <Guard page=Page::Plan><gpufleet_plan::Plan/></Guard> });
lazy_page!(QuotasRoute => view! { <Guard page=Page::Quotas><quota::Quotas/></Guard> });
lazy_page!(ChargebackRoute => view! { <Guard page=Page::Chargeback><chargeback::Chargeback/></Guard> });
lazy_page!(ClusterRoute => view! { <cluster::ClusterPage/> });
lazy_page!(FleetRoute => view! { <fleet::FleetPage/> });
lazy_page!(AdminRoute => view! { <Guard page=Page::Admin><admin::Admin/></Guard> });

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
