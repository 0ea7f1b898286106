//! The wizard's input steps: the fleet, the teams with their workload classes and demand, and
//! the constraints. Every input edits the draft scenario; the results follow on their own.

use std::sync::Arc;

use leptos::prelude::*;
use shared::{
    common::label::Labelled,
    common::money::{dollars_plain, parse_dollars},
    fleet::catalogue,
    fleet::sharing::Mechanism,
    kueue::{Queueing, Reclaim, WithinQueue},
    planning::scenario::{
        Accelerator, Demand, HOURS_PER_WEEK, Inference, Preset, Scenario, Team, UtilisationSource,
        Workload, WorkloadKind,
    },
};

use super::fields::{
    Check, Choice, Field, bind_decimal, bind_optional, bind_text, bind_whole, decimal, signed,
    use_draft,
};

fn acc_mut(s: &mut Scenario, i: usize) -> Option<&mut Accelerator> {
    s.fleet.get_mut(i)
}

fn team_mut(s: &mut Scenario, t: usize) -> Option<&mut Team> {
    s.teams.get_mut(t)
}

fn work(s: &Scenario, t: usize, w: usize) -> Option<&Workload> {
    s.teams.get(t)?.workloads.get(w)
}

fn work_mut(s: &mut Scenario, t: usize, w: usize) -> Option<&mut Workload> {
    s.teams.get_mut(t)?.workloads.get_mut(w)
}

fn inference_mut(s: &mut Scenario, t: usize, w: usize) -> Option<&mut Inference> {
    work_mut(s, t, w)?.inference.as_mut()
}

fn choices<T: Labelled>(
    all: impl IntoIterator<Item = T>,
    value: impl Fn(T) -> String,
) -> Signal<Vec<(String, String)>> {
    let list: Vec<(String, String)> = all
        .into_iter()
        .map(|v| (value(v), v.label().to_owned()))
        .collect();
    Signal::derive(move || list.clone())
}

/// The serde name of an enum value (`fine_tuning`), the value a select carries.
fn serde_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v)
        .map(|quoted| quoted.trim_matches('"').to_owned())
        .unwrap_or_default()
}

fn from_serde_name<T: serde::de::DeserializeOwned>(name: &str) -> Option<T> {
    serde_json::from_str(&serde_json::to_string(name).ok()?).ok()
}

#[component]
pub fn FleetStep() -> impl IntoView {
    let draft = use_draft();
    let count = Memo::new(move |_| draft.scenario.with(|s| s.fleet.len()));
    let add = move |_| {
        draft.edit(|s| {
            let (model, price) = s
                .fleet
                .last()
                .map_or(("H100-SXM5-80GB".to_owned(), 400), |a| {
                    (a.gpu_model.clone(), a.price_cents_per_gpu_hour)
                });
            let flavor = s.free_flavor("gpu");
            s.fleet.push(Accelerator::new(&flavor, &model, price));
        })
    };
    view! {
        <h2>"Fleet"</h2>
        <p class="muted">
            "Each accelerator type becomes one Kueue ResourceFlavor. Memory and MIG come from the catalogue; "
            "prices are what one GPU costs you an hour (on-demand, reserved or amortised)."
        </p>
        <div data-test="fleet-form">
            {move || (0..count.get()).map(|i| view! { <AcceleratorRow i/> }).collect_view()}
        </div>
        {move || draft.problem("fleet").filter(|_| count.get() == 0).map(|p| view! { <p class="problem" role="alert">{p}</p> })}
        <button type="button" data-test="add-accelerator" on:click=add>"Add an accelerator type"</button>
    }
}

#[component]
fn AcceleratorRow(i: usize) -> impl IntoView {
    let draft = use_draft();
    let p = move |f: &str| format!("fleet[{i}].{f}");
    let models = Signal::derive(|| {
        catalogue::models()
            .iter()
            .map(|m| {
                let mig = if m.supports_mig() { ", MIG" } else { "" };
                (
                    m.name.clone(),
                    format!(
                        "{} ({} {} MiB{mig})",
                        m.name,
                        m.vendor.label(),
                        shared::common::money::thousands(i64::from(m.mem_mib))
                    ),
                )
            })
            .collect()
    });
    let flavor: super::fields::Getter =
        Arc::new(move |s: &Scenario| s.fleet.get(i).map(|a| a.flavor.clone()));
    // Renaming follows the flavor into every quota and class (`Scenario::rename_flavor`).
    let rename: super::fields::Setter = Arc::new(move |s: &mut Scenario, new: &str| {
        let old = s.fleet.get(i).map(|a| a.flavor.clone()).unwrap_or_default();
        s.rename_flavor(&old, new)
    });
    let price: super::fields::Setter = Arc::new(move |s: &mut Scenario, text: &str| {
        let cents = parse_dollars(text).map_err(str::to_owned)?;
        if let Some(a) = acc_mut(s, i) {
            a.price_cents_per_gpu_hour = cents;
        }
        Ok(())
    });
    view! {
        <fieldset class="row" data-test="accelerator">
            <Field label="Flavor" path=p("flavor") bind=(flavor, rename)/>
            <Choice label="Model" path=p("gpu_model") options=models
                get=Arc::new(move |s| s.fleet.get(i).map(|a| a.gpu_model.clone()).unwrap_or_default())
                set=Arc::new(move |s, v| if let Some(a) = acc_mut(s, i) { v.clone_into(&mut a.gpu_model) })/>
            <Field label="GPUs" path=p("count") mode="numeric"
                bind=bind_whole(move |s| s.fleet.get(i).map(|a| a.count), move |s, v| if let Some(a) = acc_mut(s, i) { a.count = v })/>
            <Field label="Per node" unit="GPUs" path=p("gpus_per_node") mode="numeric"
                bind=bind_whole(move |s| s.fleet.get(i).map(|a| a.gpus_per_node), move |s, v| if let Some(a) = acc_mut(s, i) { a.gpus_per_node = v })/>
            <Field label="Price" unit="$ per GPU-hour" path=p("price_cents_per_gpu_hour") mode="decimal"
                bind=(Arc::new(move |s: &Scenario| s.fleet.get(i).map(|a| dollars_plain(a.price_cents_per_gpu_hour))), price)/>
            <button type="button" class="link" on:click=move |_| draft.edit(|s| s.remove_flavor(i))>"Remove"</button>
        </fieldset>
    }
}

#[component]
pub fn TeamsStep() -> impl IntoView {
    let draft = use_draft();
    let count = Memo::new(move |_| draft.scenario.with(|s| s.teams.len()));
    // The team open (one at a time), kept here: adding or removing a team draws the teams'
    // forms again, and the open one opens as it was.
    let opened = RwSignal::new(None::<usize>);
    let add = move |_| {
        draft.edit(|s| {
            let name = s.free_team("team");
            let mut team = Team::new(&name);
            if let Some(flavor) = s.fleet.first().map(|a| a.flavor.clone()) {
                team.workloads
                    .push(Workload::new("training", WorkloadKind::FineTuning, &flavor));
            }
            s.teams.push(team);
        })
    };
    view! {
        <h2>"Teams and workloads"</h2>
        <p class="muted">
            "Each team gets a Kueue ClusterQueue with a nominal quota per flavor; its workload classes say what it runs, "
            "how much of it (a demand shape and its peak, or 168 hourly values from Monday 00:00 UTC), and how it may be preempted."
        </p>
        <super::report::DemandChart/>
        <div data-test="teams-form">
            {move || (0..count.get()).map(|t| view! { <TeamForm t opened/> }).collect_view()}
        </div>
        {move || draft.problem("teams").filter(|_| count.get() == 0).map(|p| view! { <p class="problem" role="alert">{p}</p> })}
        <button type="button" data-test="add-team" on:click=add>"Add a team"</button>
    }
}

/// A closed team in one line: its classes and its nominal quota.
fn team_summary(team: &Team) -> String {
    let nominal: u32 = team.nominal_gpus.values().sum();
    format!(
        "{} — {} workload classes, {} GPUs of nominal quota",
        team.name,
        team.workloads.len(),
        nominal
    )
}

#[component]
fn TeamForm(t: usize, opened: RwSignal<Option<usize>>) -> impl IntoView {
    let draft = use_draft();
    // Only an open team renders its inputs: the bank's 90 classes would be 1,500 of them.
    let open = Memo::new(move |_| opened.get() == Some(t));
    let summary = Memo::new(move |_| draft.scenario.with(|s| s.teams.get(t).map(team_summary)));
    let bad = move || {
        draft.problems.with(|all| {
            let prefix = format!("teams[{t}]");
            all.iter().filter(|e| e.path.starts_with(&prefix)).count()
        })
    };
    let classes = Memo::new(move |_| {
        draft
            .scenario
            .with(|s| s.teams.get(t).map_or(0, |team| team.workloads.len()))
    });
    let flavors = Memo::new(move |_| {
        draft
            .scenario
            .with(|s| s.fleet.iter().map(|a| a.flavor.clone()).collect::<Vec<_>>())
    });
    let add = move |_| {
        draft.edit(|s| {
            let flavor = s
                .fleet
                .first()
                .map(|a| a.flavor.clone())
                .unwrap_or_default();
            if let Some(team) = team_mut(s, t) {
                let name = format!("class-{}", team.workloads.len() + 1);
                team.workloads
                    .push(Workload::new(&name, WorkloadKind::Batch, &flavor));
            }
        })
    };
    view! {
        <details class="team" data-test="team" prop:open=open on:toggle=move |ev| {
            use wasm_bindgen::JsCast;
            let open_now = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlDetailsElement>().ok()).is_some_and(|d| d.open());
            if open_now {
                opened.set(Some(t));
            } else if open.get_untracked() {
                opened.set(None);
            }
        }>
            <summary>
                {summary}
                {move || match bad() { 0 => None, n => Some(view! { <span class="problem">{format!(" · {n} to fix")}</span> }) }}
            </summary>
            {move || open.get().then(|| view! {
                <div class="team-body">
                    <fieldset class="row">
                        <Field label="Team" path=format!("teams[{t}].name")
                            bind=bind_text(move |s| s.teams.get(t).map(|x| x.name.clone()), move |s, v| if let Some(x) = team_mut(s, t) { v.clone_into(&mut x.name) })/>
                        <Field label="Queue-wait target (p95)" unit="min" path=format!("teams[{t}].queue_wait_target_min") mode="numeric"
                            bind=bind_whole(move |s| s.teams.get(t).map(|x| x.queue_wait_target_min), move |s, v| if let Some(x) = team_mut(s, t) { x.queue_wait_target_min = v })/>
                        <button type="button" class="link" on:click=move |_| {
                            draft.edit(|s| { if t < s.teams.len() { s.teams.remove(t); } });
                            opened.set(None);
                        }>"Remove team"</button>
                    </fieldset>
                    <h4>"Quota per flavor"</h4>
                    {move || flavors.get().into_iter().map(|flavor| view! { <QuotaRow t flavor/> }).collect_view()}
                    <h4>"Workload classes"</h4>
                    {move || (0..classes.get()).map(|w| view! { <WorkloadForm t w/> }).collect_view()}
                    <button type="button" data-test="add-workload" on:click=add>"Add a workload class"</button>
                </div>
            })}
        </details>
    }
}

#[component]
fn QuotaRow(t: usize, flavor: String) -> impl IntoView {
    type Map = std::collections::BTreeMap<String, u32>;
    let limit = |pick: fn(&Team) -> &Map, pick_mut: fn(&mut Team) -> &mut Map, flavor: String| {
        let f2 = flavor.clone();
        bind_optional(
            move |s| s.teams.get(t).map(|x| pick(x).get(&flavor).copied()),
            move |s, v| {
                if let Some(x) = team_mut(s, t) {
                    match v {
                        Some(v) => pick_mut(x).insert(f2.clone(), v),
                        None => pick_mut(x).remove(&f2),
                    };
                }
            },
        )
    };
    let p = |field: &str| format!("teams[{t}].{field}.{flavor}");
    view! {
        <fieldset class="row" data-test="quota">
            <span class="row-label">{flavor.clone()}</span>
            <Field label="Nominal quota" unit="GPUs" path=p("nominal_gpus") mode="numeric" placeholder="0"
                bind=limit(|x| &x.nominal_gpus, |x| &mut x.nominal_gpus, flavor.clone())/>
            <Field label="Borrowing limit" unit="GPUs" path=p("borrowing_limit_gpus") mode="numeric" placeholder="no limit"
                bind=limit(|x| &x.borrowing_limit_gpus, |x| &mut x.borrowing_limit_gpus, flavor.clone())/>
            <Field label="Lending limit" unit="GPUs" path=p("lending_limit_gpus") mode="numeric" placeholder="all it leaves idle"
                bind=limit(|x| &x.lending_limit_gpus, |x| &mut x.lending_limit_gpus, flavor.clone())/>
        </fieldset>
    }
}

/// What the demand select offers: the preset shapes, and hourly values.
const HOURLY: &str = "hourly";

#[component]
fn WorkloadForm(t: usize, w: usize) -> impl IntoView {
    let draft = use_draft();
    let p = move |f: &str| format!("teams[{t}].workloads[{w}].{f}");
    let kind = Memo::new(move |_| draft.scenario.with(|s| work(s, t, w).map(|x| x.kind)));
    let hourly = Memo::new(move |_| {
        draft
            .scenario
            .with(|s| work(s, t, w).is_some_and(|x| matches!(x.demand, Demand::Hourly { .. })))
    });
    let flavors = Signal::derive(move || {
        draft.scenario.with(|s| {
            s.fleet
                .iter()
                .map(|a| (a.flavor.clone(), format!("{} ({})", a.flavor, a.gpu_model)))
                .collect()
        })
    });
    let shapes = demand_shapes();
    let shapes = Signal::derive(move || shapes.clone());
    view! {
        <fieldset class="workload" data-test="workload">
            <legend>{move || draft.scenario.with(|s| work(s, t, w).map(|x| x.name.clone()))}</legend>
            <div class="row">
                <Field label="Name" path=p("name") bind=bind_text(move |s| work(s, t, w).map(|x| x.name.clone()), move |s, v| if let Some(x) = work_mut(s, t, w) { v.clone_into(&mut x.name) })/>
                <Choice label="Kind" path=p("kind") options=choices(WorkloadKind::ALL, |k| serde_name(&k))
                    get=Arc::new(move |s| work(s, t, w).map(|x| serde_name(&x.kind)).unwrap_or_default()) set=Arc::new(move |s, v| set_kind(s, (t, w), v))/>
                <Choice label="Runs on" path=p("flavor") options=flavors
                    get=Arc::new(move |s| work(s, t, w).map(|x| x.flavor.clone()).unwrap_or_default())
                    set=Arc::new(move |s, v| if let Some(x) = work_mut(s, t, w) { v.clone_into(&mut x.flavor) })/>
                <button type="button" class="link" on:click=move |_| draft.edit(|s| if let Some(x) = team_mut(s, t) && w < x.workloads.len() { x.workloads.remove(w); })>"Remove"</button>
            </div>
            <div class="row">
                <Choice label="Demand" path=p("demand") options=shapes
                    get=Arc::new(move |s| work(s, t, w).map(|x| match &x.demand { Demand::Preset { preset, .. } => serde_name(preset), Demand::Hourly { .. } => HOURLY.to_owned() }).unwrap_or_default())
                    set=Arc::new(move |s, v| set_shape(s, (t, w), v))/>
                {move || if hourly.get() { view! { <HourlyField t w/> }.into_any() } else { view! {
                    <Field label="Peak" unit="GPUs" path=p("demand") mode="decimal"
                        bind=bind_decimal(move |s| work(s, t, w).and_then(|x| match x.demand { Demand::Preset { peak_gpus, .. } => Some(peak_gpus), Demand::Hourly { .. } => None }),
                            move |s, v| if let Some(Demand::Preset { peak_gpus, .. }) = work_mut(s, t, w).map(|x| &mut x.demand) { *peak_gpus = v })/>
                }.into_any() }}
                <Field label="Per job" unit="GPUs" path=p("gpus_per_job") mode="numeric"
                    bind=bind_whole(move |s| work(s, t, w).map(|x| x.gpus_per_job), move |s, v| if let Some(x) = work_mut(s, t, w) { x.gpus_per_job = v })/>
                <Field label="Memory per job" unit="MiB, blank: whole cards" path=p("mem_mib_per_job") mode="numeric" placeholder="whole cards"
                    bind=bind_optional(move |s| work(s, t, w).map(|x| x.mem_mib_per_job), move |s, v| if let Some(x) = work_mut(s, t, w) { x.mem_mib_per_job = v })/>
                <Field label="Busy while held" unit="%" path=p("busy_pct") mode="numeric"
                    bind=bind_whole(move |s| work(s, t, w).map(|x| x.busy_pct), move |s, v| if let Some(x) = work_mut(s, t, w) { x.busy_pct = v })/>
                <Field label="Priority" path=p("priority") mode="numeric"
                    bind=(Arc::new(move |s: &Scenario| work(s, t, w).map(|x| x.priority.to_string())) as super::fields::Getter,
                          Arc::new(move |s: &mut Scenario, text: &str| signed(text).map(|v| if let Some(x) = work_mut(s, t, w) { x.priority = v })) as super::fields::Setter)/>
                <Field label="Tenants" path=p("tenants") mode="numeric"
                    bind=bind_whole(move |s| work(s, t, w).map(|x| x.tenants), move |s, v| if let Some(x) = work_mut(s, t, w) { x.tenants = v })/>
            </div>
            {move || match kind.get() {
                Some(WorkloadKind::Inference) => view! { <InferenceFields t w/> }.into_any(),
                _ => view! { <BatchFields t w/> }.into_any(),
            }}
            <Traits t w/>
        </fieldset>
    }
}

/// The demand shapes a class may follow: the presets, and hourly values.
fn demand_shapes() -> Vec<(String, String)> {
    let mut shapes: Vec<(String, String)> = [
        Preset::Flat,
        Preset::BusinessHoursDiurnal,
        Preset::WeeklyBatch,
    ]
    .into_iter()
    .map(|p| {
        (
            serde_name(&p),
            format!("{}: {}", p.label(), p.description()),
        )
    })
    .collect();
    shapes.push((HOURLY.to_owned(), "168 hourly values".to_owned()));
    shapes
}

/// A class becomes batch or inference: inference gets typical serving settings and no backlog.
fn set_kind(s: &mut Scenario, (t, w): (usize, usize), v: &str) {
    let Some(kind) = from_serde_name::<WorkloadKind>(v) else {
        return;
    };
    if let Some(x) = work_mut(s, t, w) {
        x.kind = kind;
        if kind == WorkloadKind::Inference {
            x.inference.get_or_insert_with(Inference::typical);
            x.backlog_gpus = 0.0;
        } else {
            x.inference = None;
        }
    }
}

/// A class's demand takes a preset shape (peaking at its hourly values' peak) or becomes its
/// hourly values.
fn set_shape(s: &mut Scenario, (t, w): (usize, usize), v: &str) {
    let Some(x) = work_mut(s, t, w) else { return };
    let values = x.demand.hourly();
    x.demand = match from_serde_name::<Preset>(v) {
        Some(preset) => Demand::Preset {
            preset,
            peak_gpus: values.iter().copied().fold(0.0, f64::max),
        },
        None => Demand::Hourly {
            hourly_gpus: values,
        },
    };
}

/// A batch class's job length, checkpoints, restart and backlog.
#[component]
fn BatchFields(t: usize, w: usize) -> impl IntoView {
    let p = move |f: &str| format!("teams[{t}].workloads[{w}].{f}");
    view! {
        <div class="row">
            <Field label="Job length" unit="min" path=p("job_minutes") mode="numeric"
                bind=bind_whole(move |s| work(s, t, w).map(|x| x.job_minutes), move |s, v| if let Some(x) = work_mut(s, t, w) { x.job_minutes = v })/>
            <Field label="Checkpoint every" unit="min, 0: never" path=p("checkpoint_minutes") mode="numeric"
                bind=bind_whole(move |s| work(s, t, w).map(|x| x.checkpoint_minutes), move |s, v| if let Some(x) = work_mut(s, t, w) { x.checkpoint_minutes = v })/>
            <Field label="Restart after eviction" unit="min (image, checkpoint)" path=p("restart_minutes") mode="numeric"
                bind=bind_whole(move |s| work(s, t, w).map(|x| x.restart_minutes), move |s, v| if let Some(x) = work_mut(s, t, w) { x.restart_minutes = v })/>
            <Field label="Backlog" unit="GPUs always waiting" path=p("backlog_gpus") mode="decimal"
                bind=bind_decimal(move |s| work(s, t, w).map(|x| x.backlog_gpus), move |s, v| if let Some(x) = work_mut(s, t, w) { x.backlog_gpus = v })/>
        </div>
    }
}

/// What a class is like: preemptible, under a latency SLO, throughput before isolation, and
/// how it is isolated today.
#[component]
fn Traits(t: usize, w: usize) -> impl IntoView {
    let p = move |f: &str| format!("teams[{t}].workloads[{w}].{f}");
    let mut isolation: Vec<(String, String)> = vec![(String::new(), "not known".to_owned())];
    isolation.extend(
        Mechanism::ALL
            .into_iter()
            .map(|m| (serde_name(&m), m.label().to_owned())),
    );
    let isolation = Signal::derive(move || isolation.clone());
    view! {
        <div class="row">
            <Check label="Preemptible" title="It expects to be evicted (borrowed quota, lower priority) and is checked for checkpoints."
                get=Arc::new(move |s| work(s, t, w).is_some_and(|x| x.preemptible)) set=Arc::new(move |s, on| if let Some(x) = work_mut(s, t, w) { x.preemptible = on })/>
            <Check label="Latency SLO"
                get=Arc::new(move |s| work(s, t, w).is_some_and(|x| x.slo)) set=Arc::new(move |s, on| if let Some(x) = work_mut(s, t, w) { x.slo = on })/>
            <Check label="Throughput over isolation (MPS)" title="One trusted team's work smaller than a GPU."
                get=Arc::new(move |s| work(s, t, w).is_some_and(|x| x.throughput)) set=Arc::new(move |s, on| if let Some(x) = work_mut(s, t, w) { x.throughput = on })/>
            <Choice label="Isolated today by" path=p("current_isolation") options=isolation
                get=Arc::new(move |s| work(s, t, w).and_then(|x| x.current_isolation).map(|m| serde_name(&m)).unwrap_or_default())
                set=Arc::new(move |s, v| if let Some(x) = work_mut(s, t, w) { x.current_isolation = from_serde_name(v) })/>
        </div>
    }
}

#[component]
fn InferenceFields(t: usize, w: usize) -> impl IntoView {
    let p = move |f: &str| format!("teams[{t}].workloads[{w}].inference.{f}");
    let get = move |s: &Scenario, f: fn(&Inference) -> u32| {
        work(s, t, w).and_then(|x| x.inference.as_ref()).map(f)
    };
    view! {
        <div class="row">
            <Field label="Tokens per second per GPU" path=p("tokens_per_s_per_gpu") mode="numeric"
                bind=bind_whole(move |s| get(s, |i| i.tokens_per_s_per_gpu), move |s, v| if let Some(i) = inference_mut(s, t, w) { i.tokens_per_s_per_gpu = v })/>
            <Field label="Cold start" unit="s" path=p("cold_start_s") mode="numeric"
                bind=bind_whole(move |s| get(s, |i| i.cold_start_s), move |s, v| if let Some(i) = inference_mut(s, t, w) { i.cold_start_s = v })/>
            <Field label="From a warm cache" unit="s, blank: no cache" path=p("warm_cache_cold_start_s") mode="numeric" placeholder="no cache"
                bind=bind_optional(move |s| work(s, t, w).and_then(|x| x.inference.as_ref()).map(|i| i.warm_cache_cold_start_s),
                    move |s, v| if let Some(i) = inference_mut(s, t, w) { i.warm_cache_cold_start_s = v })/>
            <Field label="Min replicas" path=p("min_replicas") mode="numeric"
                bind=bind_whole(move |s| get(s, |i| i.min_replicas), move |s, v| if let Some(i) = inference_mut(s, t, w) { i.min_replicas = v })/>
            <Field label="Max replicas" path=p("max_replicas") mode="numeric"
                bind=bind_whole(move |s| get(s, |i| i.max_replicas), move |s, v| if let Some(i) = inference_mut(s, t, w) { i.max_replicas = v })/>
            <Field label="KEDA threshold" unit="% of a replica" path=p("threshold_pct") mode="numeric"
                bind=bind_whole(move |s| get(s, |i| i.threshold_pct), move |s, v| if let Some(i) = inference_mut(s, t, w) { i.threshold_pct = v })/>
            <Field label="Activation threshold" unit="% of a replica" path=p("activation_threshold_pct") mode="numeric"
                bind=bind_whole(move |s| get(s, |i| i.activation_threshold_pct), move |s, v| if let Some(i) = inference_mut(s, t, w) { i.activation_threshold_pct = v })/>
            <Field label="Cooldown" unit="s" path=p("cooldown_s") mode="numeric"
                bind=bind_whole(move |s| get(s, |i| i.cooldown_s), move |s, v| if let Some(i) = inference_mut(s, t, w) { i.cooldown_s = v })/>
        </div>
    }
}

/// 168 hourly values, pasted: commas, spaces or new lines between them.
#[component]
fn HourlyField(t: usize, w: usize) -> impl IntoView {
    let path = format!("teams[{t}].workloads[{w}].demand");
    let get: super::fields::Getter = Arc::new(move |s| {
        work(s, t, w).map(|x| {
            x.demand
                .hourly()
                .iter()
                .map(f64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        })
    });
    let set: super::fields::Setter = Arc::new(move |s, text| {
        let values = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|v| !v.is_empty())
            .map(|v| decimal(v).map_err(|_| format!("{v:?} is not a number")))
            .collect::<Result<Vec<f64>, String>>()?;
        if values.len() != HOURS_PER_WEEK {
            return Err(format!(
                "give {HOURS_PER_WEEK} values, one per hour from Monday 00:00 UTC; found {}",
                values.len()
            ));
        }
        if let Some(x) = work_mut(s, t, w) {
            x.demand = Demand::Hourly {
                hourly_gpus: values,
            };
        }
        Ok(())
    });
    view! { <Field label="GPUs each hour" unit="168 values" path bind=(get, set)/> }
}

#[component]
pub fn ConstraintsStep() -> impl IntoView {
    let queueing = choices([Queueing::BestEffortFifo, Queueing::StrictFifo], |q| {
        serde_name(&q)
    });
    let reclaim = choices(
        [Reclaim::Any, Reclaim::LowerPriority, Reclaim::Never],
        |r| serde_name(&r),
    );
    let within = choices(
        [
            WithinQueue::LowerPriority,
            WithinQueue::LowerOrNewerEqualPriority,
            WithinQueue::Never,
        ],
        |w| serde_name(&w),
    );
    let sources = choices(
        [UtilisationSource::Dcgm, UtilisationSource::Requests],
        |u| serde_name(&u),
    );
    let engineer: super::fields::Setter = Arc::new(|s: &mut Scenario, text: &str| {
        s.constraints.platform_engineer_cost_cents_per_year =
            parse_dollars(text).map_err(str::to_owned)?;
        Ok(())
    });
    view! {
        <h2>"Constraints"</h2>
        <fieldset class="row">
            <legend>"Scenario"</legend>
            <Field label="Name" path="name".to_owned() bind=bind_text(|s| Some(s.name.clone()), |s, v| v.clone_into(&mut s.name))/>
            <Field label="Simulation seed" path="seed".to_owned() mode="numeric"
                bind=(Arc::new(|s: &Scenario| Some(s.seed.to_string())) as super::fields::Getter,
                      Arc::new(|s: &mut Scenario, text: &str| text.trim().parse().map(|v| s.seed = v).map_err(|_| "a whole number".to_owned())) as super::fields::Setter)/>
        </fieldset>
        <fieldset class="row">
            <legend>"Compliance and scope"</legend>
            <Check label="Hardware isolation between tenants (e.g. PCI-DSS)"
                get=Arc::new(|s| s.constraints.hardware_isolation_between_tenants) set=Arc::new(|s, on| s.constraints.hardware_isolation_between_tenants = on)/>
            <Check label="AWS only" get=Arc::new(|s| s.constraints.aws_only) set=Arc::new(|s, on| s.constraints.aws_only = on)/>
            <Check label="Heterogeneous or on-prem fleet" get=Arc::new(|s| s.constraints.heterogeneous) set=Arc::new(|s, on| s.constraints.heterogeneous = on)/>
            <Check label="Runs its own models" get=Arc::new(|s| s.constraints.runs_own_models) set=Arc::new(|s, on| s.constraints.runs_own_models = on)/>
            <Check label="Needs software GPU fractions (HAMi)" get=Arc::new(|s| s.constraints.needs_software_fractions) set=Arc::new(|s, on| s.constraints.needs_software_fractions = on)/>
        </fieldset>
        <fieldset class="row">
            <legend>"Platform"</legend>
            <Field label="Kubernetes version" path="constraints.kubernetes_version".to_owned() placeholder="1.34"
                bind=bind_text(|s| Some(s.constraints.kubernetes_version.clone()), |s, v| v.clone_into(&mut s.constraints.kubernetes_version))/>
            <Field label="Platform team" unit="engineers" path="constraints.platform_team_size".to_owned() mode="numeric"
                bind=bind_whole(|s| Some(s.constraints.platform_team_size), |s, v| s.constraints.platform_team_size = v)/>
            <Field label="Cost of an engineer" unit="$ a year" path="constraints.platform_engineer_cost_cents_per_year".to_owned() mode="decimal"
                bind=(Arc::new(|s: &Scenario| Some(dollars_plain(s.constraints.platform_engineer_cost_cents_per_year))) as super::fields::Getter, engineer)/>
            <Choice label="Utilisation measured by" path="constraints.utilisation_measured_by".to_owned() options=sources
                get=Arc::new(|s| serde_name(&s.constraints.utilisation_measured_by))
                set=Arc::new(|s, v| if let Some(u) = from_serde_name(v) { s.constraints.utilisation_measured_by = u })/>
        </fieldset>
        <fieldset class="row">
            <legend>"Kueue"</legend>
            <Check label="Teams share one cohort (lend and borrow idle quota)" get=Arc::new(|s| s.quota.cohort) set=Arc::new(|s, on| s.quota.cohort = on)/>
            <Choice label="Owners reclaim lent quota (reclaimWithinCohort)" path="quota.reclaim_within_cohort".to_owned() options=reclaim
                get=Arc::new(|s| serde_name(&s.quota.reclaim_within_cohort)) set=Arc::new(|s, v| if let Some(r) = from_serde_name(v) { s.quota.reclaim_within_cohort = r })/>
            <Choice label="Jobs preempt in their own queue (withinClusterQueue)" path="quota.within_cluster_queue".to_owned() options=within
                get=Arc::new(|s| serde_name(&s.quota.within_cluster_queue)) set=Arc::new(|s, v| if let Some(w) = from_serde_name(v) { s.quota.within_cluster_queue = w })/>
            <Choice label="Queueing" path="quota.queueing".to_owned() options=queueing
                get=Arc::new(|s| serde_name(&s.quota.queueing)) set=Arc::new(|s, v| if let Some(q) = from_serde_name(v) { s.quota.queueing = q })/>
        </fieldset>
    }
}
