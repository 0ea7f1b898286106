//! Where the draft is evaluated: in a Web Worker (`public/plan-worker.js` with the planner's
//! own wasm, `frontend/planner`), so the page stays responsive however long the week takes to
//! simulate, and the console's first load carries no simulation. One evaluation runs at a time;
//! a draft that settles meanwhile waits, replacing any that waited before it, so the worker
//! never works through stale drafts. Each task (evaluate, suggest quotas) has its own worker,
//! so a quota suggestion that simulates several weeks never holds up the results.

use std::{
    cell::{Cell, RefCell},
    rc::Rc,
};

use gpufleet_web::planner;
use serde::de::DeserializeOwned;
use shared::{FieldError, planning::Evaluation};
use wasm_bindgen::{JsCast, JsValue, closure::Closure};
use web_sys::{MessageEvent, Worker};

/// What the planner answers (`gpufleet_planner::Outcome`, read back as the same type).
pub type Outcome<T = Evaluation> = Result<T, Vec<FieldError>>;

/// A task's answer: the outcome and how long it took, in milliseconds.
pub type Answer<T = Evaluation> = Result<(Outcome<T>, f64), String>;

/// A planner task in its worker: `"evaluate"` answers an [`Evaluation`], `"suggest"` a
/// `QuotaSuggestion` (the names `public/plan-worker.js` knows).
pub struct Evaluator<T = Evaluation> {
    task: &'static str,
    worker: Option<Worker>,
    in_flight: Rc<Cell<bool>>,
    waiting: Rc<RefCell<Option<(u64, String)>>>,
    on_answer: Rc<dyn Fn(u64, Answer<T>)>,
    _on_message: Option<Closure<dyn FnMut(MessageEvent)>>,
}

impl<T: DeserializeOwned + 'static> Evaluator<T> {
    pub fn new(task: &'static str, on_answer: impl Fn(u64, Answer<T>) + 'static) -> Evaluator<T> {
        let on_answer: Rc<dyn Fn(u64, Answer<T>)> = Rc::new(on_answer);
        let worker = planner::start();
        let in_flight = Rc::new(Cell::new(false));
        let waiting: Rc<RefCell<Option<(u64, String)>>> = Rc::new(RefCell::new(None));
        let on_message = worker.as_ref().map(|target| {
            let (worker, in_flight, waiting, on_answer) = (
                target.clone(),
                in_flight.clone(),
                waiting.clone(),
                on_answer.clone(),
            );
            let handler = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
                let (id, answer) = read_answer(&event.data());
                // The next draft goes before this answer is shown, so the worker is never idle
                // while one waits.
                match waiting.borrow_mut().take() {
                    Some((next, json)) => planner::post(&worker, task, next, &json),
                    None => in_flight.set(false),
                }
                on_answer(id, answer);
            });
            target.set_onmessage(Some(handler.as_ref().unchecked_ref()));
            handler
        });
        Evaluator {
            task,
            worker,
            in_flight,
            waiting,
            on_answer,
            _on_message: on_message,
        }
    }

    /// Evaluates the scenario `json` as draft number `id`.
    pub fn submit(&self, id: u64, json: String) {
        let Some(worker) = &self.worker else {
            (self.on_answer)(id, Err(planner::NO_WORKER.to_owned()));
            return;
        };
        if self.in_flight.replace(true) {
            *self.waiting.borrow_mut() = Some((id, json));
        } else {
            planner::post(worker, self.task, id, &json);
        }
    }
}

impl<T> Drop for Evaluator<T> {
    fn drop(&mut self) {
        if let Some(worker) = &self.worker {
            worker.terminate();
        }
    }
}

fn read_answer<T: DeserializeOwned>(data: &JsValue) -> (u64, Answer<T>) {
    let (id, answer) = planner::read(data);
    let answer = answer.and_then(|(json, ms)| {
        serde_json::from_str::<Outcome<T>>(&json)
            .map(|outcome| (outcome, ms))
            .map_err(|err| format!("the planner's answer did not read: {err}"))
    });
    (id, answer)
}
