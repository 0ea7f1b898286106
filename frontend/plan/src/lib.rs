//! The Plan page (the managers' wizard) as its own wasm bundle. The console fetches it the
//! first time someone opens Plan (`public/plan-page.js`), so signing in and every other page
//! never download the wizard, and mounts it into its page with the signed-in user, its router's
//! navigation and the saved scenario the URL names ([`mount`]); it tells the wizard when the
//! URL names another ([`Mounted::open`]) and drops it on leaving (`free`).

mod wizard;

use gpufleet_web::api;
use leptos::{mount::mount_to, prelude::*};
use shared::accounts::Me;
use wasm_bindgen::prelude::wasm_bindgen;

/// The wizard on the page; dropping it (`free()` from JS) unmounts it.
#[wasm_bindgen]
pub struct Mounted {
    _view: Box<dyn std::any::Any>,
    saved: RwSignal<Option<String>>,
}

#[wasm_bindgen]
impl Mounted {
    /// The URL now names saved scenario `id` (`/plan/{id}`), or none (`/plan`).
    pub fn open(&self, id: Option<String>) {
        self.saved.set(id);
    }
}

/// Mounts the wizard into `root`. `me_json`: the signed-in user (`/api/auth/session`'s
/// answer); `navigate`: the console's navigation, called with a path; `saved`: the id in the
/// URL, if any.
#[wasm_bindgen]
pub fn mount(
    root: web_sys::HtmlElement,
    me_json: &str,
    navigate: js_sys::Function,
    saved: Option<String>,
) -> Mounted {
    console_error_panic_hook::set_once();
    let me: Option<Me> = serde_json::from_str(me_json).ok();
    let saved = RwSignal::new(saved);
    let view = mount_to(root, move || {
        let me = RwSignal::new(me);
        api::bind_session(me);
        provide_context(me);
        provide_context(wizard::Route {
            saved,
            navigate: StoredValue::new_local(navigate),
        });
        view! { <wizard::Plan/> }
    });
    Mounted {
        _view: Box::new(view),
        saved,
    }
}
