//! Plan: the managers' wizard lives in its own bundle (`frontend/plan`), fetched the first time
//! someone opens this page (`public/plan-page.js`), so signing in and the other pages never
//! download it. This page mounts it with the signed-in user and the router's navigation, tells
//! it which saved scenario the URL names (`/plan/{id}`), and drops it on leaving.

use gpufleet_web::ui::load_script;
use leptos::{html::Div, prelude::*, task::spawn_local};
use leptos_router::hooks::{use_navigate, use_params_map};
use wasm_bindgen::{JsCast, JsValue, closure::Closure};

use crate::auth::use_me;

#[component]
pub fn Plan() -> impl IntoView {
    let me = use_me();
    let params = use_params_map();
    let navigate = use_navigate();
    let node = NodeRef::<Div>::new();
    let failed = RwSignal::new(None::<String>);
    let ready = RwSignal::new(false);
    let go = Closure::<dyn Fn(String)>::new(move |path: String| {
        navigate(&path, Default::default());
    });
    // The wizard's handle and the navigation it calls; freed when the page goes.
    let held = StoredValue::new_local((None::<JsValue>, go));
    Effect::new(move |_| {
        let Some(root) = node.get() else {
            return;
        };
        let saved = params.get_untracked().get("id");
        let me_json = me.with_untracked(serde_json::to_string).unwrap_or_default();
        let navigate = held.with_value(|(_, go)| go.as_ref().clone());
        spawn_local(async move {
            match mount(root.unchecked_into(), &me_json, navigate, saved).await {
                Ok(handle) => {
                    held.update_value(|(h, _)| *h = Some(handle));
                    ready.set(true);
                }
                Err(err) => failed.set(Some(err)),
            }
        });
    });
    // The URL names another saved scenario (a link on the Start step, or after saving).
    Effect::new(move |_| {
        let saved = params.read().get("id");
        held.with_value(|(handle, _)| {
            if let Some(handle) = handle {
                let _ = call(
                    handle,
                    "open",
                    &[saved.map_or(JsValue::UNDEFINED, JsValue::from)],
                );
            }
        });
    });
    on_cleanup(move || {
        if let Some(Some(handle)) = held.try_update_value(|(handle, _)| handle.take()) {
            let _ = call(&handle, "free", &[]);
        }
    });
    view! {
        {move || match (ready.get(), failed.get()) {
            (_, Some(err)) => Some(view! { <p class="error" role="alert">{format!("The planner did not load: {err}")}</p> }.into_any()),
            (false, None) => Some(view! { <p class="muted boot">"Loading the planner…"</p> }.into_any()),
            (true, None) => None,
        }}
        <div node_ref=node></div>
    }
}

/// Loads the wizard's bundle (once per page load) and mounts it into `root`.
async fn mount(
    root: web_sys::HtmlElement,
    me_json: &str,
    navigate: JsValue,
    saved: Option<String>,
) -> Result<JsValue, String> {
    let words = |err: JsValue| err.as_string().unwrap_or_else(|| format!("{err:?}"));
    let window = web_sys::window().ok_or("no window")?;
    let failure = || {
        js_sys::Reflect::get(&window, &"gpufleetPlanFailed".into())
            .ok()
            .and_then(|f| f.as_string())
    };
    // A failed load stays failed until the page is reloaded (it announces itself once).
    if let Some(failure) = failure() {
        return Err(failure);
    }
    load_script(
        "plan-page-js",
        "/plan-page.js",
        "gpufleetPlan",
        Some("gpufleet-plan-ready"),
    )
    .await
    .map_err(words)?;
    if let Some(failure) = failure() {
        return Err(failure);
    }
    let page = js_sys::Reflect::get(&window, &"gpufleetPlan".into()).map_err(words)?;
    call(
        &page,
        "mount",
        &[
            root.into(),
            JsValue::from_str(me_json),
            navigate,
            saved.map_or(JsValue::UNDEFINED, JsValue::from),
        ],
    )
    .map_err(words)
}

/// `target[method](...args)`.
fn call(target: &JsValue, method: &str, args: &[JsValue]) -> Result<JsValue, JsValue> {
    let function: js_sys::Function = js_sys::Reflect::get(target, &method.into())?.dyn_into()?;
    function.apply(target, &args.iter().collect::<js_sys::Array>())
}
