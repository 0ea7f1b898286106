//! Small generic widgets, and charts (plotly.js, loaded only by the pages that draw one).

use leptos::{html::Div, prelude::*, task::spawn_local};
use plotly::Plot;
use shared::{
    ApiError,
    health::{DatabaseStatus, Status},
};
use wasm_bindgen::{JsCast, JsValue};

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

/// A plotly chart that redraws whenever `plot` reads a signal that changed.
#[component]
pub fn Chart(id: &'static str, plot: Box<dyn Fn() -> Option<Plot>>) -> impl IntoView {
    let node = NodeRef::<Div>::new();
    Effect::new(move |_| {
        if node.get().is_none() {
            return;
        }
        if let Some(plot) = plot() {
            spawn_local(async move { draw_chart(id, &plot).await });
        }
    });
    view! { <div id=id class="chart" data-test=id node_ref=node></div> }
}

/// Where ./dev puts the partial plotly.js bundle (from npm; no CDN).
const PLOTLY_JS: &str = "/vendor/plotly-cartesian.min.js";

/// Draws `plot` into the element `id`. plotly.js (~450 KB gzip) is fetched the first time a
/// page draws a chart, so the log-in page and the pages without charts never load it.
pub async fn draw_chart(id: &str, plot: &plotly::Plot) {
    match load_plotly().await {
        Ok(()) => plotly::bindings::new_plot(id, plot).await,
        Err(err) => leptos::logging::error!("plotly.js did not load: {err:?}"),
    }
}

async fn load_plotly() -> Result<(), JsValue> {
    let window = web_sys::window().ok_or("no window")?;
    if js_sys::Reflect::has(&window, &JsValue::from_str("Plotly"))? {
        return Ok(());
    }
    let document = window.document().ok_or("no document")?;
    let script = match document.get_element_by_id("plotly-js") {
        // Another chart started the load: wait for the same script.
        Some(script) => script,
        None => {
            let script: web_sys::HtmlScriptElement =
                document.create_element("script")?.dyn_into()?;
            script.set_id("plotly-js");
            script.set_src(PLOTLY_JS);
            document.head().ok_or("no head")?.append_child(&script)?;
            script.into()
        }
    };
    let loaded = js_sys::Promise::new(&mut |resolve, reject| {
        let _ = script.add_event_listener_with_callback("load", &resolve);
        let _ = script.add_event_listener_with_callback("error", &reject);
    });
    // It may have finished between the check above and the listeners.
    if js_sys::Reflect::has(&window, &JsValue::from_str("Plotly"))? {
        return Ok(());
    }
    wasm_bindgen_futures::JsFuture::from(loaded)
        .await
        .map(|_| ())
}
