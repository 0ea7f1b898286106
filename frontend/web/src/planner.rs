//! The planner's Web Worker (`public/plan-worker.js` with its own wasm, `frontend/planner`): its
//! message protocol, spoken by the Plan page's evaluator and (through `public/planner-client.js`)
//! the console's review of a quota request. Only a page that uses it downloads the planner.

use wasm_bindgen::{JsValue, prelude::wasm_bindgen};
use web_sys::{Worker, WorkerOptions, WorkerType};

use crate::ui::load_script;

/// A planner worker, started as a module.
pub fn start() -> Option<Worker> {
    let options = WorkerOptions::new();
    options.set_type(WorkerType::Module);
    Worker::new_with_options("/plan-worker.js", &options).ok()
}

/// What a browser without module workers is told.
pub const NO_WORKER: &str =
    "this browser did not start the planner's Web Worker (module workers are needed)";

/// Asks `worker` for `task` on `json` (a scenario, or a task's own input), as request `id`.
pub fn post(worker: &Worker, task: &str, id: u64, json: &str) {
    let message = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&message, &"id".into(), &JsValue::from_f64(id as f64));
    let _ = js_sys::Reflect::set(&message, &"task".into(), &JsValue::from_str(task));
    let _ = js_sys::Reflect::set(&message, &"scenario".into(), &JsValue::from_str(json));
    let _ = worker.post_message(&message);
}

/// A worker's message: the request's id, and its outcome's JSON with the milliseconds it took,
/// or why there is none.
pub fn read(data: &JsValue) -> (u64, Result<(String, f64), String>) {
    let field = |name: &str| js_sys::Reflect::get(data, &name.into()).unwrap_or(JsValue::UNDEFINED);
    let id = field("id").as_f64().unwrap_or(0.0) as u64;
    if let Some(failed) = field("failed").as_string() {
        return (id, Err(format!("the planner stopped: {failed}")));
    }
    let answer = field("outcome")
        .as_string()
        .ok_or_else(|| "the planner answered nothing".to_owned())
        .map(|json| (json, field("ms").as_f64().unwrap_or(0.0)));
    (id, answer)
}

#[wasm_bindgen]
extern "C" {
    /// `public/planner-client.js`: one task in a worker of its own, ended once it answers.
    #[wasm_bindgen(js_namespace = gpufleetPlanner, js_name = ask)]
    async fn ask_once(task: &str, json: &str) -> JsValue;
}

/// Loads `public/planner-client.js`, which starts its workers as it loads, without waiting: a
/// page that will ask soon calls this as it starts fetching the task's input, so the workers
/// load the planner meanwhile.
pub fn preload() {
    wasm_bindgen_futures::spawn_local(async {
        let _ = load_client().await;
    });
}

async fn load_client() -> Result<(), JsValue> {
    load_script(
        "planner-client-js",
        "/planner-client.js",
        "gpufleetPlanner",
        None,
    )
    .await
}

/// `task` on `json` in a worker of its own (for a page that asks once: the worker and its
/// client are loaded the first time, the page's bundle carries none of it).
pub async fn ask(task: &str, json: &str) -> Result<(String, f64), String> {
    load_client().await.map_err(|_| NO_WORKER.to_owned())?;
    read(&ask_once(task, json).await).1
}
