//! The request form: one row per flavor resource, the preemption and queueing terms, the
//! checkpoint interval, dates and a justification. Every keystroke runs the server's own rules
//! (`QuotaWorld::check`, in WASM): errors show at their field and block sending, warnings show
//! for the approver-to-be. A word where a number belongs is refused at the field and the
//! request keeps its last good value.

use gloo_net::http::Method;
use leptos::{prelude::*, task::spawn_local};
use shared::{
    ApiError, FieldError,
    common::day::Day,
    kueue::Queueing,
    kueue::{Reclaim, WithinQueue},
    quota::{Checked, EditRequest, NewRequest, QuotaRequest, QuotaSpec, QuotaWorld, Submit},
};

use super::{Editing, Notice, Sent, today, unit};
use crate::{api, ui::ErrorBox};
use gpufleet_web::js;

/// The team's terms in force as the starting point (from today, open-ended, no justification),
/// with a line for every flavor resource; a blank request when none is in force.
fn starting_spec(world: &QuotaWorld, team: &str, today: Day) -> QuotaSpec {
    let blank = QuotaSpec::blank(&world.flavors, today);
    let Some(current) = world.effective_on(today).get(team).map(|a| a.spec.clone()) else {
        return blank;
    };
    let lines = blank
        .lines
        .into_iter()
        .map(|line| {
            current
                .lines
                .iter()
                .find(|l| l.flavor == line.flavor && l.resource == line.resource)
                .cloned()
                .unwrap_or(line)
        })
        .collect();
    QuotaSpec {
        lines,
        justification: String::new(),
        starts_on: today,
        ends_on: None,
        ..current
    }
}

/// The message for `path` from the rules or the server's last answer (whose paths start with
/// `spec.`).
fn message_at(checked: &Checked, server: &Option<ApiError>, path: &str) -> Option<String> {
    checked
        .errors
        .iter()
        .find(|e| e.path == path)
        .map(|e| e.message.clone())
        .or_else(|| {
            server.as_ref().and_then(|s| {
                s.fields
                    .iter()
                    .find(|f| f.path.strip_prefix("spec.") == Some(path))
                    .map(|f| f.message.clone())
            })
        })
}

#[component]
pub fn RequestForm(
    world: QuotaWorld,
    team: String,
    /// A draft to edit; `None`: a new request.
    draft: Option<QuotaRequest>,
    changed: Callback<()>,
) -> impl IntoView {
    let today = today();
    let Editing(editing) = expect_context::<Editing>();
    let heading = draft.as_ref().map_or("Request quota".to_owned(), |d| {
        format!("Edit draft {}", d.id)
    });
    let editing_id = draft.as_ref().map(|d| (d.id, d.version));
    // A saved draft's open end was confirmed when it was saved.
    let open_end_meant = draft.is_some();
    let spec = RwSignal::new(draft.map_or_else(|| starting_spec(&world, &team, today), |d| d.spec));
    let world = StoredValue::new(world);
    let team = StoredValue::new(team);
    let verdicts = Verdicts {
        checked: Memo::new(move |_| {
            spec.with(|s| world.with_value(|w| team.with_value(|t| w.check(t, s, today))))
        }),
        server: RwSignal::new(None),
        bad: RwSignal::new(std::collections::BTreeSet::new()),
    };
    // The server's verdict is on what was sent: any change makes it stale.
    Effect::new(move |_| {
        spec.track();
        verdicts.server.set(None);
    });
    provide_context(verdicts);
    let sending = Sending {
        spec,
        team,
        editing_id,
        busy: RwSignal::new(false),
        server: verdicts.server,
        changed,
    };
    let problems = verdicts.problems();
    let blocked = move || sending.busy.get() || problems.with(|p| p.0 > 0);
    // What the approver will weigh, for the spec as it was when asked: cleared by any change.
    let preview = RwSignal::new(String::new());
    Effect::new(move |_| {
        spec.track();
        preview.set(String::new());
    });
    view! {
        <h2 data-test="request-heading">{heading}</h2>
        <form data-test="request-form" on:submit=|ev| ev.prevent_default()>
            <p class="muted" data-test="request-help">
                "A request replaces the team's whole quota from its start date: every flavor, a line left at 0 is none of it. "
                "On its end date the team's quota goes back to its latest approved request whose dates still hold, or to none. "
                "Borrowing, blank: no limit (the team may borrow all that the rest of its cohort lends); 0: never borrow. "
                "Lending, blank: all the team leaves unused; 0: never lend. Kueue's name for each answer is beside it."
            </p>
            <QuotaLines world spec/>
            <Terms spec open_end_meant/>
            <Warnings fields=Signal::derive(move || verdicts.checked.with(|c| c.warnings.clone()))/>
            <p data-test="request-problems" class=move || if problems.with(|p| p.0 == 0) { "ok" } else { "bad" }>
                {move || problems.with(|(n, elsewhere)| {
                    let count = match n {
                        0 => "Ready to send.".to_owned(),
                        1 => "1 problem to fix before sending.".to_owned(),
                        n => format!("{n} problems to fix before sending."),
                    };
                    [count, elsewhere.join(" ")].join(" ")
                })}
            </p>
            {move || verdicts.server.get().filter(|e| e.fields.is_empty()).map(|error| view! { <ErrorBox error/> })}
            <button type="button" data-test="preview-request" disabled=blocked on:click=move |_| sending.preview(preview)>"What the approver will see"</button>
            " "
            <button type="button" data-test="save-draft" disabled=blocked on:click=move |_| sending.send(false)>"Save as draft"</button>
            " "
            <button type="button" data-test="submit-request" disabled=blocked on:click=move |_| sending.send(true)>"Submit for approval"</button>
            {editing_id.map(|_| view! { " " <button type="button" data-test="cancel-edit" on:click=move |_| editing.set(None)>"Cancel editing"</button> })}
            <div data-test="request-preview" inner_html=preview></div>
        </form>
    }
}

/// What the form knows of the request's problems: the rules' verdict (`QuotaWorld::check`, as
/// the server runs it), the server's answer to what was last sent, and the rule paths of the
/// boxes that hold text that is not a value (not sent; counted as problems).
#[derive(Clone, Copy)]
struct Verdicts {
    checked: Memo<Checked>,
    server: RwSignal<Option<ApiError>>,
    bad: RwSignal<std::collections::BTreeSet<String>>,
}

impl Verdicts {
    fn mark(self, path: &str, bad: bool) {
        self.bad.update(|b| {
            if bad {
                b.insert(path.to_owned());
            } else {
                b.remove(path);
            }
        });
    }

    /// The problems the form shows: each field with an error once, each box holding bad text,
    /// and the rules' errors that have no field here (listed under the count).
    fn problems(self) -> Memo<(usize, Vec<String>)> {
        Memo::new(move |_| {
            self.checked.with(|c| {
                self.bad.with(|b| {
                    let mut at_fields: Vec<&str> = c
                        .errors
                        .iter()
                        .map(|e| e.path.as_str())
                        .filter(|p| has_field(p) && !b.contains(*p))
                        .collect();
                    at_fields.sort_unstable();
                    at_fields.dedup();
                    let elsewhere: Vec<String> = c
                        .errors
                        .iter()
                        .filter(|e| !has_field(&e.path))
                        .map(|e| e.message.clone())
                        .collect();
                    (at_fields.len() + b.len() + elsewhere.len(), elsewhere)
                })
            })
        })
    }
}

/// The error at `path`, if any. Where the box holds text that is not a value, the box says so;
/// the rules' verdict is on the value it last held.
fn error_at(path: String) -> impl IntoView {
    let verdicts = expect_context::<Verdicts>();
    move || {
        if verdicts.bad.with(|b| b.contains(&path)) {
            return None;
        }
        let message = verdicts
            .checked
            .with(|c| verdicts.server.with(|s| message_at(c, s, &path)));
        message.map(|m| view! { <span class="field-error" role="alert">{m}</span> })
    }
}

/// Sending the request: as a draft, or a draft then submitted for approval.
#[derive(Clone, Copy)]
struct Sending {
    spec: RwSignal<QuotaSpec>,
    team: StoredValue<String>,
    /// The draft being edited: id and version.
    editing_id: Option<(i64, i32)>,
    busy: RwSignal<bool>,
    server: RwSignal<Option<ApiError>>,
    changed: Callback<()>,
}

impl Sending {
    /// Asks the server what the approver will weigh for the spec as it is (`POST …/preview`:
    /// nothing saved) and shows it as the approver's review shows it, into `into`.
    fn preview(self, into: RwSignal<String>) {
        let team = self.team.get_value();
        let body = NewRequest {
            spec: self.spec.get_untracked(),
        };
        let server = self.server;
        spawn_local(async move {
            let path = format!("/api/quota/teams/{team}/preview");
            match api::send_js(Method::POST, &path, Some(&body)).await {
                Ok(v) => into.set(format!(
                    "<h3>What the approver will see</h3>{}",
                    super::review::weighed_html(&v, &js::escape(&team))
                )),
                Err(err) => server.set(Some(err)),
            }
        });
    }

    fn send(self, and_submit: bool) {
        let Sending {
            spec,
            team,
            editing_id,
            busy,
            server,
            changed,
        } = self;
        let Notice(saved) = expect_context::<Notice>();
        let Sent(sent) = expect_context::<Sent>();
        let Editing(editing) = expect_context::<Editing>();
        busy.set(true);
        saved.set(None);
        let spec = spec.get_untracked();
        let team = team.get_value();
        let summary = format!("{}, from {}", super::spec_summary(&spec), spec.starts_on);
        spawn_local(async move {
            let path = format!("/api/quota/teams/{team}/requests");
            let result = async {
                let view: super::Saved = match editing_id {
                    Some((id, version)) => {
                        let body = EditRequest { version, spec };
                        api::send(Method::PUT, &format!("{path}/{id}"), Some(&body)).await?
                    }
                    None => api::send(Method::POST, &path, Some(&NewRequest { spec })).await?,
                };
                if !and_submit {
                    return Ok(format!("Draft {} saved.", view.request.id));
                }
                let id = view.request.id;
                let submit = Submit {
                    version: view.request.version,
                };
                let _: super::Saved =
                    api::send(Method::POST, &format!("{path}/{id}/submit"), Some(&submit)).await?;
                Ok::<_, ApiError>(format!("Request {id} submitted for approval."))
            }
            .await;
            busy.set(false);
            match result {
                Ok(message) => {
                    server.set(None);
                    sent.set(Some((team, format!("{message} {summary}."))));
                    saved.set(Some(message));
                    editing.set(None);
                    changed.run(());
                }
                Err(err) => server.set(Some(err)),
            }
        });
    }
}

/// One row per flavor resource: its hardware and capacity, and the nominal quota, borrowing
/// and lending limits asked for.
#[component]
fn QuotaLines(world: StoredValue<QuotaWorld>, spec: RwSignal<QuotaSpec>) -> impl IntoView {
    let lines = spec.with_untracked(|s| s.lines.len());
    view! {
        <table>
            <thead>
                <tr>
                    <th>"Flavor"</th><th>"Unit"</th><th>"Capacity"</th><th>"We need (nominal quota)"</th>
                    <th>"We may borrow up to (borrowingLimit)"</th><th>"Others may borrow ours, up to (lendingLimit)"</th>
                </tr>
            </thead>
            <tbody>
                {(0..lines)
                    .map(|i| {
                        let line = spec.with_untracked(|s| s.lines[i].clone());
                        let capacity = world.with_value(|w| {
                            w.flavors
                                .iter()
                                .find(|f| f.name == line.flavor)
                                .and_then(|f| f.capacity(&line.resource))
                                .unwrap_or(0)
                        });
                        let id = |what: &str| format!("line-{i}-{what}");
                        let hardware = world.with_value(|w| w.flavors.iter().find(|f| f.name == line.flavor).map(hardware)).unwrap_or_default();
                        view! {
                            <tr>
                                <td>{line.flavor.clone()}<br/><small class="muted">{hardware}</small></td>
                                <td>{unit(&line.resource)}</td>
                                <td class="num">{capacity}</td>
                                <td>
                                    <label class="sr-only" for=id("nominal")>{format!("Nominal {} of {}", unit(&line.resource), line.flavor)}</label>
                                    <Amount
                                        id=id("nominal")
                                        path=format!("lines[{i}].nominal")
                                        value=Some(line.nominal)
                                        optional=false
                                        set=Callback::new(move |v: Option<i64>| spec.update(|s| s.lines[i].nominal = v.unwrap_or(0)))
                                    />
                                    {error_at(format!("lines[{i}].nominal"))}
                                </td>
                                <td>
                                    <label class="sr-only" for=id("borrowing")>{format!("Most of {} to borrow: blank for no limit, 0 to never borrow", line.flavor)}</label>
                                    <Amount
                                        id=id("borrowing")
                                        path=format!("lines[{i}].borrowing_limit")
                                        blank="no limit"
                                        value=line.borrowing_limit
                                        optional=true
                                        set=Callback::new(move |v| spec.update(|s| s.lines[i].borrowing_limit = v))
                                    />
                                    {error_at(format!("lines[{i}].borrowing_limit"))}
                                </td>
                                <td>
                                    <label class="sr-only" for=id("lending")>{format!("Most of {} to lend: blank for all unused, 0 to never lend", line.flavor)}</label>
                                    <Amount
                                        id=id("lending")
                                        path=format!("lines[{i}].lending_limit")
                                        blank="all unused"
                                        value=line.lending_limit
                                        optional=true
                                        set=Callback::new(move |v| spec.update(|s| s.lines[i].lending_limit = v))
                                    />
                                    {error_at(format!("lines[{i}].lending_limit"))}
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}

/// Kueue's preemption and queueing terms of the team's ClusterQueue.
fn kueue_terms(spec: RwSignal<QuotaSpec>) -> impl IntoView {
    view! {
        <Choice
            id="reclaim"
            label="When other teams borrowed our idle GPUs and we want them back"
            help="Kueue's reclaimWithinCohort: Never, LowerPriority or Any."
            options=&[
                (Reclaim::Never, "wait until their jobs end (Never)"),
                (Reclaim::LowerPriority, "stop their lower-priority jobs (LowerPriority)"),
                (Reclaim::Any, "stop any of their jobs (Any)"),
            ]
            selected=spec.with_untracked(|s| s.reclaim_within_cohort)
            set=Callback::new(move |v| spec.update(|s| s.reclaim_within_cohort = v))
        />
        <Choice
            id="within"
            label="May urgent work of ours push out our own running jobs?"
            help="Kueue's withinClusterQueue: a job that does not fit our quota may evict our jobs of lower priority (LowerPriority), and also newer ones of its own priority (LowerOrNewerEqualPriority)."
            options=&[
                (WithinQueue::Never, "no (Never)"),
                (WithinQueue::LowerPriority, "yes, our lower-priority jobs (LowerPriority)"),
                (WithinQueue::LowerOrNewerEqualPriority, "yes, lower-priority and newer equal-priority jobs (LowerOrNewerEqualPriority)"),
            ]
            selected=spec.with_untracked(|s| s.within_cluster_queue)
            set=Callback::new(move |v| spec.update(|s| s.within_cluster_queue = v))
        />
        <Choice
            id="queueing"
            label="When our next job does not fit yet"
            help="Kueue's queueingStrategy. BestEffortFIFO: a job that does not fit yet lets the jobs behind it start; StrictFIFO: jobs start strictly in order, so a large one holds back the rest."
            options=&[
                (Queueing::BestEffortFifo, "let the jobs behind it start (BestEffortFIFO)"),
                (Queueing::StrictFifo, "keep strict order (StrictFIFO)"),
            ]
            selected=spec.with_untracked(|s| s.queueing)
            set=Callback::new(move |v| spec.update(|s| s.queueing = v))
        />
    }
}

/// Kueue's preemption and queueing terms, the checkpoint interval, the dates (an open end
/// confirmed), the project, the largest job and the justification.
#[component]
fn Terms(spec: RwSignal<QuotaSpec>, open_end_meant: bool) -> impl IntoView {
    view! {
        <div class="fields">
            {kueue_terms(spec)}
            <p>
                <label for="checkpoint">"Checkpoint interval of preemptible training (minutes)"</label>
                <Amount
                    id="checkpoint".to_owned()
                    path="checkpoint_interval_min".to_owned()
                    blank="none"
                    value=spec.with_untracked(|s| s.checkpoint_interval_min.map(i64::from))
                    optional=true
                    set=Callback::new(move |v: Option<i64>| spec.update(|s| s.checkpoint_interval_min = v.and_then(|v| u32::try_from(v).ok())))
                />
                {error_at("checkpoint_interval_min".to_owned())}
            </p>
            <p>
                <label for="starts-on">"Starts on (UTC, YYYY-MM-DD)"</label>
                <DayInput id="starts-on" path="starts_on" value=spec.with_untracked(|s| Some(s.starts_on)) optional=false set=Callback::new(move |d: Option<Day>| if let Some(d) = d { spec.update(|s| s.starts_on = d) })/>
                {error_at("starts_on".to_owned())}
            </p>
            <p>
                <label for="ends-on">"Ends on (inclusive, UTC; blank: until withdrawn)"</label>
                <DayInput id="ends-on" path="ends_on" value=spec.with_untracked(|s| s.ends_on) optional=true set=Callback::new(move |d| spec.update(|s| s.ends_on = d))/>
                {error_at("ends_on".to_owned())}
            </p>
            <UntilWithdrawn spec meant=open_end_meant/>
            <p>
                <label for="project">"Project (optional)"</label>
                <input
                    id="project"
                    data-test="project"
                    size="40"
                    placeholder="what the quota is for: a model, a product"
                    prop:value=spec.with_untracked(|s| s.project.clone().unwrap_or_default())
                    on:input=move |ev| {
                        let text = event_target_value(&ev);
                        spec.update(|s| s.project = (!text.trim().is_empty()).then_some(text));
                    }
                />
                {error_at("project".to_owned())}
            </p>
            <p>
                <label for="largest-job">"Largest job (GPUs at once, optional)"</label>
                <Amount
                    id="largest-job".to_owned()
                    path="largest_job_gpus".to_owned()
                    blank="not known"
                    value=spec.with_untracked(|s| s.largest_job_gpus.map(i64::from))
                    optional=true
                    set=Callback::new(move |v: Option<i64>| spec.update(|s| s.largest_job_gpus = v.map(|v| u32::try_from(v.max(0)).unwrap_or(u32::MAX))))
                />
                <span class="muted">" Kueue starts a job only when all its GPUs fit the queue's quota at once."</span>
                {error_at("largest_job_gpus".to_owned())}
            </p>
            <p>
                <label for="justification">"Justification"</label>
                <textarea
                    id="justification"
                    data-test="justification"
                    rows="3"
                    prop:value=spec.with_untracked(|s| s.justification.clone())
                    on:input=move |ev| {
                        let text = event_target_value(&ev);
                        spec.update(|s| s.justification = text);
                    }
                ></textarea>
                {error_at("justification".to_owned())}
            </p>
        </div>
    }
}

/// Warnings in words (each names its flavor or field; the path is its tooltip).
#[component]
fn Warnings(fields: Signal<Vec<FieldError>>) -> impl IntoView {
    move || {
        let list = fields.get();
        (!list.is_empty()).then(|| {
            view! {
                <ul class="warnings" data-test="warnings">
                    {list
                        .into_iter()
                        .map(|w| view! { <li title=w.path>{w.message}</li> })
                        .collect_view()}
                </ul>
            }
        })
    }
}

/// Whether the form has a box for an error at `path` (where the error is shown).
fn has_field(path: &str) -> bool {
    matches!(
        path,
        "checkpoint_interval_min"
            | "starts_on"
            | "ends_on"
            | "justification"
            | "project"
            | "largest_job_gpus"
    ) || (path.starts_with("lines[")
        && [".nominal", ".borrowing_limit", ".lending_limit"]
            .iter()
            .any(|f| path.ends_with(f)))
}

/// A quota with no end date holds until someone withdraws it, and is priced a year at a time:
/// the requester says so, or the form counts a problem.
#[component]
fn UntilWithdrawn(spec: RwSignal<QuotaSpec>, meant: bool) -> impl IntoView {
    let meant = RwSignal::new(meant);
    let open = move || spec.with(|s| s.ends_on.is_none());
    let bad = expect_context::<Verdicts>();
    Effect::new(move |_| bad.mark(UNTIL_WITHDRAWN, open() && !meant.get()));
    move || {
        open().then(|| {
            view! {
                <p data-test="until-withdrawn">
                    <input type="checkbox" id="until-withdrawn" prop:checked=meant on:change=move |ev| meant.set(event_target_checked(&ev))/>
                    <label for="until-withdrawn">" Until withdrawn: the quota holds with no end date, and costs what the approver will see per year."</label>
                    {move || (!meant.get()).then(|| view! { <span class="field-error" role="alert">" Tick it, or give an end date."</span> })}
                </p>
            }
        })
    }
}

/// The problem an open end not yet confirmed counts as (not a rule's path: the form's own).
const UNTIL_WITHDRAWN: &str = "until_withdrawn";

/// A whole number; blank is `None` when `optional`. Bad text is refused here, in words.
#[component]
fn Amount(
    id: String,
    path: String,
    value: Option<i64>,
    optional: bool,
    /// What a blank box means (optional boxes only).
    #[prop(optional)]
    blank: &'static str,
    set: Callback<Option<i64>>,
) -> impl IntoView {
    let wrong = RwSignal::new(None::<&'static str>);
    let bad = expect_context::<Verdicts>();
    Effect::new(move |_| bad.mark(&path, wrong.get().is_some()));
    let placeholder = blank;
    view! {
        <input
            id=id
            inputmode="numeric"
            size="6"
            placeholder=placeholder
            value=value.map(|v| v.to_string()).unwrap_or_default()
            on:input=move |ev| {
                let text = event_target_value(&ev);
                let text = text.trim();
                if text.is_empty() && optional {
                    wrong.set(None);
                    set.run(None);
                } else if let Ok(v) = text.parse::<i64>() {
                    wrong.set(None);
                    set.run(Some(v));
                } else {
                    wrong.set(Some("a whole number"));
                }
            }
        />
        {move || wrong.get().map(|m| view! { <span class="field-error" role="alert">{m}</span> })}
    }
}

#[component]
fn DayInput(
    id: &'static str,
    path: &'static str,
    value: Option<Day>,
    optional: bool,
    set: Callback<Option<Day>>,
) -> impl IntoView {
    let wrong = RwSignal::new(false);
    let bad = expect_context::<Verdicts>();
    Effect::new(move |_| bad.mark(path, wrong.get()));
    view! {
        <input
            id=id
            size="10"
            placeholder="YYYY-MM-DD"
            value=value.map(|d| d.to_string()).unwrap_or_default()
            on:input=move |ev| {
                let text = event_target_value(&ev);
                let text = text.trim();
                match Day::parse(text) {
                    Some(d) => {
                        wrong.set(false);
                        set.run(Some(d));
                    }
                    None if text.is_empty() && optional => {
                        wrong.set(false);
                        set.run(None);
                    }
                    None => wrong.set(true),
                }
            }
        />
        {move || wrong.get().then(|| view! { <span class="field-error" role="alert">"a date written YYYY-MM-DD"</span> })}
    }
}

#[component]
fn Choice<T: Copy + PartialEq + Send + Sync + 'static>(
    id: &'static str,
    label: &'static str,
    /// What the choice does, in words.
    help: &'static str,
    /// Each value with Kueue's word for it.
    options: &'static [(T, &'static str)],
    selected: T,
    set: Callback<T>,
) -> impl IntoView {
    view! {
        <p>
            <label for=id>{label}</label>
            <select id=id on:change=move |ev| {
                if let Some((value, _)) = event_target_value(&ev).parse::<usize>().ok().and_then(|i| options.get(i)) {
                    set.run(*value);
                }
            }>
                {options
                    .iter()
                    .enumerate()
                    .map(|(i, (value, text))| view! { <option value=i.to_string() selected=*value == selected>{*text}</option> })
                    .collect_view()}
            </select>
            <br/><small class="muted">{help}</small>
        </p>
    }
}

/// A flavor's hardware in words: its model and memory, whole GPUs or MIG instances.
fn hardware(flavor: &shared::quota::Flavor) -> String {
    let memory = shared::fleet::catalogue::find(&flavor.gpu_model)
        .map(|m| format!(", {} GiB", m.mem_mib / 1024))
        .unwrap_or_default();
    let split = if flavor.settings.mig_layout.is_empty() {
        "whole GPUs".to_owned()
    } else {
        format!(
            "MIG instances ({} a GPU)",
            flavor
                .settings
                .mig_layout
                .iter()
                .map(|(p, n)| format!("{n} × {p}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!("{}{memory}: {split}", flavor.gpu_model)
}
