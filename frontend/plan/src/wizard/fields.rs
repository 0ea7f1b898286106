//! The wizard's inputs: each is bound to one field of the draft scenario by a getter and a
//! setter, checks what is typed (a word that is not a number never reaches the scenario), and
//! shows the first problem the scenario's own validation names at its path.

use std::sync::Arc;

use leptos::prelude::*;
use shared::{FieldError, planning::scenario::Scenario};

/// The scenario being planned and what its validation says about it, shared by every step.
#[derive(Clone, Copy)]
pub struct Draft {
    pub scenario: RwSignal<Scenario>,
    pub problems: Memo<Vec<FieldError>>,
}

impl Draft {
    pub fn new(scenario: Scenario) -> Draft {
        let scenario = RwSignal::new(scenario);
        let problems =
            Memo::new(move |_| scenario.with(|s| s.validate().err().unwrap_or_default()));
        Draft { scenario, problems }
    }

    /// The first problem at `path` or below it.
    pub fn problem(&self, path: &str) -> Option<String> {
        self.problems.with(|all| {
            all.iter()
                .find(|e| {
                    e.path == path
                        || e.path
                            .strip_prefix(path)
                            .is_some_and(|rest| rest.starts_with(['.', '[']))
                })
                .map(|e| e.message.clone())
        })
    }

    pub fn edit(&self, change: impl FnOnce(&mut Scenario)) {
        self.scenario.update(change);
    }
}

pub fn use_draft() -> Draft {
    expect_context::<Draft>()
}

pub type Getter = Arc<dyn Fn(&Scenario) -> Option<String> + Send + Sync>;
pub type Setter = Arc<dyn Fn(&mut Scenario, &str) -> Result<(), String> + Send + Sync>;
pub type Toggle = Arc<dyn Fn(&mut Scenario, bool) + Send + Sync>;
pub type Pick = Arc<dyn Fn(&mut Scenario, &str) + Send + Sync>;

/// A text input bound to the scenario. `path` is where validation names the field.
#[component]
pub fn Field(
    label: &'static str,
    path: String,
    /// The getter and setter, from one of the `bind_*` helpers.
    bind: (Getter, Setter),
    /// Shown after the label: the unit (`GPUs`, `min`, `$/GPU-hour`).
    #[prop(optional)]
    unit: &'static str,
    /// `numeric` or `decimal` to bring up a number pad; text otherwise.
    #[prop(optional)]
    mode: &'static str,
    #[prop(optional)] placeholder: &'static str,
) -> impl IntoView {
    let draft = use_draft();
    let (get, set) = bind;
    let shown = Memo::new(move |_| draft.scenario.with(|s| get(s)).unwrap_or_default());
    // What was typed and refused, until the next good value.
    let refused = RwSignal::new(None::<String>);
    let problem = {
        let path = path.clone();
        move || refused.get().or_else(|| draft.problem(&path))
    };
    let invalid = {
        let problem = problem.clone();
        move || problem().is_some().then_some("true")
    };
    let on_input = move |ev| {
        let text = event_target_value(&ev);
        let mut outcome = Ok(());
        draft.scenario.update(|s| outcome = set(s, &text));
        refused.set(outcome.err());
    };
    view! {
        <label class="field" data-path=path.clone()>
            <span>{label}{(!unit.is_empty()).then(|| view! { <span class="unit">" ("{unit}")"</span> })}</span>
            <input type="text" inputmode=(!mode.is_empty()).then_some(mode) placeholder=placeholder
                prop:value=shown aria-invalid=invalid on:input=on_input/>
            {move || problem().map(|p| view! { <span class="problem" role="alert">{p}</span> })}
        </label>
    }
}

/// A check box bound to the scenario.
#[component]
pub fn Check(
    label: &'static str,
    get: Arc<dyn Fn(&Scenario) -> bool + Send + Sync>,
    set: Toggle,
    #[prop(optional)] title: &'static str,
) -> impl IntoView {
    let draft = use_draft();
    let checked = Memo::new(move |_| draft.scenario.with(|s| get(s)));
    view! {
        <label class="check" title=title>
            <input type="checkbox" prop:checked=checked
                on:change=move |ev| { let on = event_target_checked(&ev); draft.edit(|s| set(s, on)) }/>
            {label}
        </label>
    }
}

/// A select bound to the scenario: `options` are (value, words) pairs.
#[component]
pub fn Choice(
    label: &'static str,
    path: String,
    options: Signal<Vec<(String, String)>>,
    get: Arc<dyn Fn(&Scenario) -> String + Send + Sync>,
    set: Pick,
) -> impl IntoView {
    let draft = use_draft();
    let current = Memo::new(move |_| draft.scenario.with(|s| get(s)));
    let problem = {
        let path = path.clone();
        move || draft.problem(&path)
    };
    view! {
        <label class="field" data-path=path.clone()>
            <span>{label}</span>
            <select on:change=move |ev| { let v = event_target_value(&ev); draft.edit(|s| set(s, &v)) }>
                {move || {
                    let now = current.get();
                    options.get().into_iter().map(|(value, words)| {
                        let selected = value == now;
                        view! { <option value=value selected=selected>{words}</option> }
                    }).collect_view()
                }}
            </select>
            {move || problem().map(|p| view! { <span class="problem" role="alert">{p}</span> })}
        </label>
    }
}

/// A whole number as typed: thousands separators allowed.
pub fn whole(text: &str) -> Result<u32, String> {
    let digits: String = text
        .trim()
        .chars()
        .filter(|c| !matches!(c, ',' | '_'))
        .collect();
    digits
        .parse()
        .map_err(|_| "a whole number, like 8".to_owned())
}

/// A whole number that may be negative (priorities).
pub fn signed(text: &str) -> Result<i32, String> {
    text.trim()
        .parse()
        .map_err(|_| "a whole number, like 100 or -5".to_owned())
}

pub fn decimal(text: &str) -> Result<f64, String> {
    let digits: String = text.trim().chars().filter(|c| *c != ',').collect();
    digits
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| "a number, like 2.5".to_owned())
}

/// A whole-number field: `get` reads it, `put` writes it.
pub fn bind_whole(
    get: impl Fn(&Scenario) -> Option<u32> + Send + Sync + 'static,
    put: impl Fn(&mut Scenario, u32) + Send + Sync + 'static,
) -> (Getter, Setter) {
    (
        Arc::new(move |s| get(s).map(|v| v.to_string())),
        Arc::new(move |s, text| whole(text).map(|v| put(s, v))),
    )
}

/// A whole-number field that may be left blank (`None`).
pub fn bind_optional(
    get: impl Fn(&Scenario) -> Option<Option<u32>> + Send + Sync + 'static,
    put: impl Fn(&mut Scenario, Option<u32>) + Send + Sync + 'static,
) -> (Getter, Setter) {
    (
        Arc::new(move |s| get(s).map(|v| v.map(|v| v.to_string()).unwrap_or_default())),
        Arc::new(move |s, text| {
            let value = if text.trim().is_empty() {
                None
            } else {
                Some(whole(text)?)
            };
            put(s, value);
            Ok(())
        }),
    )
}

pub fn bind_decimal(
    get: impl Fn(&Scenario) -> Option<f64> + Send + Sync + 'static,
    put: impl Fn(&mut Scenario, f64) + Send + Sync + 'static,
) -> (Getter, Setter) {
    (
        Arc::new(move |s| get(s).map(|v| v.to_string())),
        Arc::new(move |s, text| decimal(text).map(|v| put(s, v))),
    )
}

pub fn bind_text(
    get: impl Fn(&Scenario) -> Option<String> + Send + Sync + 'static,
    put: impl Fn(&mut Scenario, &str) + Send + Sync + 'static,
) -> (Getter, Setter) {
    (
        Arc::new(get),
        Arc::new(move |s, text| {
            put(s, text);
            Ok(())
        }),
    )
}
