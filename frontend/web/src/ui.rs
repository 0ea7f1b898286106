//! The widgets every page uses: an error as a person reads it, and charts (plotly.js, loaded
//! only by the pages that draw one).

use leptos::{html::Div, prelude::*, task::spawn_local};
use shared::ApiError;
use wasm_bindgen::{JsCast, JsValue, prelude::wasm_bindgen};

/// An error as a person should see it.
#[component]
pub fn ErrorBox(error: ApiError) -> impl IntoView {
    let id = error
        .request_id
        .clone()
        .map(|id| format!(" (request {id})"));
    view! { <p class="error" role="alert">{error.to_string()}{id}</p> }
}

/// A plotly chart that redraws whenever `plot` reads a signal that changed. `plot` gives the
/// figure as plotly JSON ([`crate::figure::Figure`]), written once where it is built.
#[component]
pub fn Chart(id: &'static str, plot: Box<dyn Fn() -> Option<String>>) -> impl IntoView {
    let node = NodeRef::<Div>::new();
    Effect::new(move |_| {
        // The element itself, taken now: by the time plotly.js has loaded, the page may have
        // moved on (another step of the wizard) and no element may have this id; a figure
        // drawn into a div that left the page harms nothing.
        let Some(div) = node.get() else {
            return;
        };
        if let Some(plot) = plot() {
            spawn_local(async move { draw_chart(&div.into(), &plot).await });
        }
    });
    view! { <div id=id class="chart" data-test=id node_ref=node></div> }
}

/// Where ./dev puts the partial plotly.js bundle (from npm; no CDN).
const PLOTLY_JS: &str = "/vendor/plotly-basic.min.js";

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(catch, js_namespace = Plotly, js_name = newPlot)]
    async fn new_plot(target: &JsValue, figure: &JsValue) -> Result<JsValue, JsValue>;
}

/// Draws the figure `plot` (plotly JSON) into `target`: an element, or an element's id.
/// plotly.js (~450 KB gzip) is fetched the first time a page draws a chart, so the log-in page
/// and the pages without charts never load it.
pub async fn draw_chart(target: &JsValue, plot: &str) {
    let drawn = async {
        load_plotly().await?;
        new_plot(target, &js_sys::JSON::parse(plot)?).await
    };
    if let Err(err) = drawn.await {
        leptos::logging::error!("a chart was not drawn: {err:?}");
    }
}

async fn load_plotly() -> Result<(), JsValue> {
    load_script("plotly-js", PLOTLY_JS, "Plotly", None).await
}

/// Makes sure the script at `src` has run and defined `window[global]`: it is added once (as
/// element `id`; a second caller waits for the same element) and awaited until it has loaded,
/// or, for a module whose work goes on after loading, until it fires `ready_event` on `window`.
pub async fn load_script(
    id: &str,
    src: &str,
    global: &str,
    ready_event: Option<&str>,
) -> Result<(), JsValue> {
    let window = web_sys::window().ok_or("no window")?;
    let defined = || js_sys::Reflect::has(&window, &JsValue::from_str(global));
    if defined()? {
        return Ok(());
    }
    let document = window.document().ok_or("no document")?;
    let script: web_sys::HtmlScriptElement = match document.get_element_by_id(id) {
        // Another caller started the load: wait for the same script.
        Some(script) => script.dyn_into()?,
        None => {
            let script: web_sys::HtmlScriptElement =
                document.create_element("script")?.dyn_into()?;
            script.set_id(id);
            if ready_event.is_some() {
                script.set_type("module");
            }
            script.set_src(src);
            document.head().ok_or("no head")?.append_child(&script)?;
            script
        }
    };
    let loaded = js_sys::Promise::new(&mut |resolve, reject| {
        let _ = match ready_event {
            Some(event) => window.add_event_listener_with_callback(event, &resolve),
            None => script.add_event_listener_with_callback("load", &resolve),
        };
        let _ = script.add_event_listener_with_callback("error", &reject);
    });
    // It may have finished between the check above and the listeners.
    if defined()? {
        return Ok(());
    }
    wasm_bindgen_futures::JsFuture::from(loaded)
        .await
        .map(|_| ())
}
