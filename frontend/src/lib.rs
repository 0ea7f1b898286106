//! gpufleet's console: a Leptos app rendered in the browser. It holds no business rules: the
//! math comes from `shared`, the data from `/api` (see `api.rs`).

mod api;
mod pages;
mod ui;

use leptos::prelude::*;
use leptos_router::{
    components::{A, Route, Router, Routes},
    path,
};
use wasm_bindgen::prelude::wasm_bindgen;

/// Entry point, called by the generated JS glue once the module is loaded.
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
    mount_to_body(App);
}

#[component]
fn App() -> impl IntoView {
    view! {
        <Router>
            <header class="top">
                <A href="/" attr:class="brand">"gpufleet"</A>
                <nav>
                    <A href="/plan">"Plan"</A>
                    <A href="/quotas">"Quotas"</A>
                    <A href="/chargeback">"Chargeback"</A>
                    <A href="/fleet">"Fleet"</A>
                </nav>
                <ui::HealthBadge/>
            </header>
            <main>
                <Routes fallback=pages::NotFound>
                    <Route path=path!("/") view=pages::Home/>
                    <Route path=path!("/plan") view=pages::Plan/>
                    <Route path=path!("/quotas") view=pages::Quotas/>
                    <Route path=path!("/chargeback") view=pages::Chargeback/>
                    <Route path=path!("/fleet") view=pages::FleetPage/>
                </Routes>
            </main>
        </Router>
    }
}
