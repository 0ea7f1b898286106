//! gpufleet's console: a Leptos app rendered in the browser. It holds no business rules: the
//! math and the access rules come from `shared`, the data from `/api` (see `api.rs`).

mod auth;
mod pages;
mod ui;

use gpufleet_web::api;
use leptos::prelude::*;
use leptos_router::{
    Lazy,
    components::{A, Route, Router, Routes},
    path,
};
use shared::{
    accounts::{Me, Page},
    common::label::Labelled,
};
use wasm_bindgen::prelude::wasm_bindgen;

/// Entry point, called by the generated JS glue once the module is loaded.
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
    mount_to_body(App);
}

/// Whether the first `/api/auth/me` has answered yet.
#[derive(Clone, Copy, PartialEq)]
enum Boot {
    Checking,
    Ready,
}

#[component]
fn App() -> impl IntoView {
    let me = RwSignal::new(None::<Me>);
    let boot = RwSignal::new(Boot::Checking);
    api::bind_session(me);
    provide_context(me);
    leptos::task::spawn_local(async move {
        // `null` means "not signed in": the log-in page shows.
        if let Ok(Some(user)) = api::get::<Option<Me>>("/api/auth/session").await {
            me.set(Some(user));
        }
        boot.set(Boot::Ready);
    });
    view! {
        <Router>
            {move || match (boot.get(), me.get()) {
                (Boot::Checking, _) => view! { <p class="muted boot">"Loading…"</p> }.into_any(),
                (Boot::Ready, None) => view! { <auth::Login/> }.into_any(),
                (Boot::Ready, Some(user)) => view! { <Shell me=user/> }.into_any(),
            }}
        </Router>
    }
}

/// The signed-in console: navigation for the user's roles, and the pages.
#[component]
fn Shell(me: Me) -> impl IntoView {
    let links = Page::ALL
        .into_iter()
        .filter(|page| page.visible_to(&me.roles))
        .map(|page| view! { <A href=page.path()>{page.title()}</A> })
        .collect_view();
    let roles = me
        .roles
        .iter()
        .map(|r| r.label())
        .collect::<Vec<_>>()
        .join(", ");
    let name = if me.display_name.is_empty() {
        me.username.clone()
    } else {
        me.display_name.clone()
    };
    view! {
        <header class="top">
            <A href="/" attr:class="brand">"gpufleet"</A>
            <nav data-test="nav">{links}</nav>
            <ui::HealthBadge/>
            <span class="who" data-test="user">
                <strong data-test="user-name">{name}</strong>
                " "
                <span class="muted" data-test="user-roles">{roles}</span>
            </span>
            <auth::LogoutButton/>
        </header>
        <main>
            <Routes fallback=pages::NotFound>
                <Route path=path!("/") view=pages::Home/>
                <Route path=path!("/login") view=pages::Home/>
                <Route path=path!("/plan/:id?") view={Lazy::<pages::PlanRoute>::new()}/>
                <Route path=path!("/quotas") view={Lazy::<pages::QuotasRoute>::new()}/>
                // Deep links into sections still being built land on the section, which says so.
                <Route path=path!("/quotas/*any") view={Lazy::<pages::QuotasRoute>::new()}/>
                <Route path=path!("/chargeback") view={Lazy::<pages::ChargebackRoute>::new()}/>
                <Route path=path!("/chargeback/*any") view={Lazy::<pages::ChargebackRoute>::new()}/>
                <Route path=path!("/cluster") view={Lazy::<pages::ClusterRoute>::new()}/>
                <Route path=path!("/fleet") view={Lazy::<pages::FleetRoute>::new()}/>
                <Route path=path!("/admin") view={Lazy::<pages::AdminRoute>::new()}/>
            </Routes>
        </main>
    }
}
