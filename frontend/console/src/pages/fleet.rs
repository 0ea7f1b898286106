//! The fleet inventory: pools, models, and GPUs by model as a chart; per flavor, capacity
//! against the approved quota of each team and what is left; for admins, the whole inventory
//! as code, checked and applied in the page.

use gloo_net::http::Method;
use gpufleet_web::{
    figure::{Bars, Figure},
    js,
};
use leptos::{html::Div, prelude::*, task::spawn_local};
use shared::{
    ApiError,
    accounts::Role,
    chargeback::{NewRate, Rate},
    cluster::DryRun,
    common::{
        label::count,
        money::{dollars, parse_dollars},
    },
    fleet::Fleet,
    quota::{Allocation, Flavor, FlavorEdit, QueueNames, QuotaWorld, SettingsText, TeamQueue},
};

use crate::{
    api,
    auth::use_me,
    ui::{Chart, ErrorBox},
};
use wasm_bindgen::JsValue;

#[component]
pub fn FleetPage() -> impl IntoView {
    // Bumped when the inventory is applied from the page: the tables read it again.
    let applied = InventoryApplied(RwSignal::new(0u32));
    provide_context(applied);
    let fleet = LocalResource::new(move || {
        applied.0.track();
        api::get::<Fleet>("/api/fleet")
    });
    let me = use_me();
    let admin = move || me.with(|m| m.as_ref().is_some_and(|m| m.roles.contains(&Role::Admin)));
    view! {
        <section>
            <h1>"Fleet"</h1>
            {move || match fleet.get() {
                None => view! { <p class="muted">"loading…"</p> }.into_any(),
                Some(Err(err)) => view! { <ErrorBox error=err/> }.into_any(),
                Some(Ok(fleet)) if fleet.pools.is_empty() => {
                    view! { <p>"No node pools yet."</p> }.into_any()
                }
                Some(Ok(fleet)) => view! { <FleetTables fleet/> }.into_any(),
            }}
            <QuotaByFlavor/>
            <Rates/>
            {move || admin().then(|| view! { <InventoryAsCode/> })}
        </section>
    }
}

/// The inventory applied from the page, counted.
#[derive(Clone, Copy)]
struct InventoryApplied(RwSignal<u32>);

/// Admins: the whole inventory as code, as `gpufleet fleet export` writes it (in JSON): loaded,
/// edited in place (a pool's nodes, a new pool, a price, a team), checked (the dry run's list
/// of changes) and applied, or downloaded. One HTML node and one click listener reading the
/// button's `data-act` (the console's download budget).
#[component]
fn InventoryAsCode() -> impl IntoView {
    let InventoryApplied(applied) = expect_context::<InventoryApplied>();
    let said = RwSignal::new(String::new());
    let on_click = move |ev: leptos::ev::MouseEvent| {
        let Some(act) = js::data_of(&ev, "act") else {
            return;
        };
        spawn_local(async move {
            let (html, changed) = inventory_step(&act).await;
            said.set(html);
            if changed {
                applied.update(|n| *n += 1);
            }
        });
    };
    view! {
        <div data-test="inventory" on:click=on_click inner_html=INVENTORY_HTML></div>
        <div data-test="inventory-result" inner_html=said></div>
    }
}

const INVENTORY_HTML: &str = r#"<h2>Inventory as code</h2><p class="muted">The inventory as <code>gpufleet fleet export</code> writes it (JSON): load, edit (a pool's nodes, a new pool), check, apply; or <a href="/api/inventory" download="inventory.json" data-test="inventory-export">download it</a>.</p><p><button type="button" data-act="load" data-test="inventory-load">Load the current inventory</button></p><p><label for="inventory-text">Inventory (JSON)</label><br><textarea id="inventory-text" data-test="inventory-text" rows="14" cols="72"></textarea></p><button type="button" data-act="check" data-test="inventory-check">Check what it changes</button> <button type="button" data-act="apply" data-test="inventory-apply">Apply</button>"#;

/// One step of [`InventoryAsCode`]: the editor loaded, or its text checked or applied. Says
/// what happened as HTML, and whether the inventory changed.
async fn inventory_step(act: &str) -> (String, bool) {
    let editor = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id("inventory-text"))
        .map(JsValue::from)
        .unwrap_or(JsValue::NULL);
    let value = JsValue::from_str("value");
    let answer = match act {
        "load" => api::get_js("/api/inventory").await.map(|v| {
            let pretty = js_sys::JSON::stringify_with_replacer_and_space(
                &v,
                &JsValue::NULL,
                &JsValue::from(2),
            );
            let _ = js_sys::Reflect::set(&editor, &value, &pretty.unwrap_or_default().into());
            "<p>Loaded: edit it, then check what it changes.</p>".to_owned()
        }),
        _ => {
            let text = js::at(&editor, "value").as_string().unwrap_or_default();
            let dry_run = act == "check";
            let path = format!("/api/inventory?dry_run={dry_run}");
            api::send_text_js(Method::POST, &path, &text)
                .await
                .map(|v| inventory_changes_html(&v, dry_run))
        }
    };
    match answer {
        Ok(html) => (html, act == "apply"),
        Err(err) => (
            format!(
                r#"<p class="error" role="alert">{}</p>"#,
                js::escape(&err.to_string())
            ),
            false,
        ),
    }
}

/// The import's answer: what it changes (a dry run) or changed.
fn inventory_changes_html(v: &JsValue, dry_run: bool) -> String {
    let changes = js::each(v, "changes");
    let changing: Vec<String> = changes
        .iter()
        .filter_map(|c| c.as_string())
        .filter(|c| !c.starts_with("keep "))
        .collect();
    if changing.is_empty() {
        return "<p>Nothing to change: the inventory is already this.</p>".to_owned();
    }
    let head = match (dry_run, js::at(v, "applied").as_bool() == Some(true)) {
        (true, _) => "Applying it would",
        (false, true) => "Applied:",
        (false, false) => "Not applied; it would",
    };
    let items: String = changing
        .iter()
        .map(|c| format!("<li>{}</li>", js::escape(c)))
        .collect();
    format!("<p>{head}</p><ul>{items}</ul>")
}

/// Per flavor resource: each team's approved nominal quota in force today, stacked against
/// capacity, and what is left unassigned and lendable.
#[component]
fn QuotaByFlavor() -> impl IntoView {
    let version = RwSignal::new(0u32);
    let InventoryApplied(applied) = expect_context::<InventoryApplied>();
    let world = LocalResource::new(move || {
        version.track();
        applied.track();
        api::get::<QuotaWorld>("/api/quota/world")
    });
    let me = use_me();
    let admin = move || me.with(|m| m.as_ref().is_some_and(|m| m.roles.contains(&Role::Admin)));
    let saved = Callback::new(move |()| version.update(|v| *v += 1));
    let last = RwSignal::new(None::<Result<String, ApiError>>);
    provide_context(last);
    move || match world.get() {
        None => ().into_any(),
        Some(Err(error)) => view! { <ErrorBox error/> }.into_any(),
        Some(Ok(world)) => {
            let allocation = world.allocation(super::quota::today());
            let plot = allocation_plot(&allocation);
            view! {
                <h2>"Quota by flavor"</h2>
                <Chart id="quota-chart" plot=Box::new(move || Some(plot.clone()))/>
                <div inner_html=quota_by_flavor_html(&allocation)></div>
                {admin().then(|| view! { <FleetSettings world=world.clone() saved/> })}
            }
            .into_any()
        }
    }
}

/// Each flavor resource's capacity, approved quota by team, unassigned and lendable, as one
/// HTML node.
fn quota_by_flavor_html(allocation: &[Allocation]) -> String {
    let rows: String = allocation
        .iter()
        .map(|a| {
            let teams: Vec<String> = a.teams.iter().map(|(t, n)| format!("{t} {n}")).collect();
            format!(
                r#"<tr><td>{}</td><td>{}</td><td class="num">{}</td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
                js::escape(&a.flavor),
                super::quota::unit(&a.resource),
                a.capacity,
                js::escape(&teams.join(", ")),
                a.nominal_total,
                a.unassigned,
                a.lendable
            )
        })
        .collect();
    format!(
        r#"<table data-test="quota-by-flavor"><thead><tr><th>Flavor</th><th>Resource</th><th class="num">Capacity</th><th>Approved, by team</th><th class="num">Approved</th><th class="num">Unassigned</th><th class="num">Lendable in cohorts</th></tr></thead><tbody>{rows}</tbody></table>"#
    )
}

/// Admins: each flavor's node labels, taints, tolerations and MIG layout, and each team's
/// queue names, saved one at a time; the last save's outcome above the tables.
#[component]
fn FleetSettings(world: QuotaWorld, saved: Callback<()>) -> impl IntoView {
    let last = expect_context::<RwSignal<Option<Result<String, ApiError>>>>();
    view! {
        <h2>"Flavor and queue settings"</h2>
        {move || last.get().map(|outcome| match outcome {
            Ok(message) => view! { <p class="ok" role="status" data-test="settings-saved">{message}</p> }.into_any(),
            Err(error) => {
                let fields = error.fields.clone();
                view! {
                    <ErrorBox error/>
                    <ul class="errors" data-test="settings-errors">
                        {fields.into_iter().map(|f| view! { <li class="problem">{format!("{}: {}", f.path, f.message)}</li> }).collect_view()}
                    </ul>
                }
                .into_any()
            }
        })}
        <p class="muted">
            "One entry per line. Labels "<code>"key=value"</code>"; taints "<code>"key=value:Effect"</code>" or "
            <code>"key:Effect"</code>"; tolerations "<code>"key=value:Effect"</code>", "<code>"key:Effect"</code>", "
            <code>"key"</code>" or "<code>"*"</code>"; MIG layout "<code>"profile=instances per GPU"</code>" (blank: whole GPUs)."
        </p>
        {world.flavors.into_iter().map(|flavor| view! { <FlavorForm flavor saved/> }).collect_view()}
        <table data-test="team-queues">
            <thead>
                <tr><th>"Team"</th><th>"Namespace"</th><th>"ClusterQueue"</th><th>"LocalQueue"</th><th>"Cohort (blank: none)"</th><th></th></tr>
            </thead>
            <tbody>
                {world.teams.into_iter().map(|team| view! { <QueueRow team saved/> }).collect_view()}
            </tbody>
        </table>
    }
}

/// One of a flavor's settings as lines of text, read by `get` and written by `set`.
fn settings_area(
    id: String,
    label: &'static str,
    text: RwSignal<SettingsText>,
    get: fn(&SettingsText) -> String,
    set: fn(&mut SettingsText, String),
) -> impl IntoView {
    view! {
        <p class="field">
            <label for=id.clone()>{label}</label>
            <textarea id=id rows="3" cols="40"
                prop:value=move || text.with(get)
                on:input=move |ev| { let v = event_target_value(&ev); text.update(|t| set(t, v)); }
            ></textarea>
        </p>
    }
}

/// How pods share a device of the flavor.
fn sharing_choice(id: String, text: RwSignal<SettingsText>) -> impl IntoView {
    view! {
        <p class="field">
            <label for=id.clone()>"Pods share a device by"</label>
            <select id=id
                prop:value=move || text.with(|t| t.sharing.clone())
                on:change=move |ev| { let v = event_target_value(&ev); text.update(|t| t.sharing = v); }
            >
                <option value="">"— (not shared, or not said)"</option>
                <option value="time_slicing">"time-slicing"</option>
                <option value="mps">"MPS"</option>
                <option value="hami_fractions">"HAMi fractions"</option>
            </select>
        </p>
    }
}

#[component]
fn FlavorForm(flavor: Flavor, saved: Callback<()>) -> impl IntoView {
    let last = expect_context::<RwSignal<Option<Result<String, ApiError>>>>();
    let text = RwSignal::new(SettingsText::of(&flavor.settings));
    let name = StoredValue::new(flavor.name.clone());
    let version = flavor.version;
    // The edit as typed, or why its lines do not read.
    let edit = move || {
        text.get_untracked()
            .parse()
            .map(|settings| FlavorEdit { version, settings })
            .map_err(|fields| ApiError {
                fields,
                ..ApiError::new(
                    shared::ErrorCode::Invalid,
                    format!("flavor {}: some lines do not read", name.get_value()),
                )
            })
    };
    let preview = RwSignal::new(None::<Result<DryRun, ApiError>>);
    let ask = move |_| match edit() {
        Err(error) => preview.set(Some(Err(error))),
        Ok(body) => leptos::task::spawn_local(async move {
            let path = format!("/api/quota/flavors/{}/dry-run", name.get_value());
            preview.set(Some(api::send(Method::POST, &path, Some(&body)).await));
        }),
    };
    let save = move |_| {
        let name = name.get_value();
        let body = match edit() {
            Ok(body) => body,
            Err(error) => {
                last.set(Some(Err(error)));
                return;
            }
        };
        leptos::task::spawn_local(async move {
            let result: Result<Flavor, ApiError> = api::send(
                Method::PUT,
                &format!("/api/quota/flavors/{name}"),
                Some(&body),
            )
            .await;
            last.set(Some(result.map(|f| {
                format!("flavor {} saved (version {})", f.name, f.version)
            })));
            saved.run(());
        });
    };
    let id = |what: &str| format!("flavor-{}-{what}", flavor.name);
    let area = move |what: &'static str,
                     label: &'static str,
                     get: fn(&SettingsText) -> String,
                     set: fn(&mut SettingsText, String)| {
        settings_area(id(what), label, text, get, set)
    };
    view! {
        <details class="team" data-test=format!("flavor-{}", flavor.name)>
            <summary>{format!("{} — {} × {} ({})", flavor.name, flavor.gpus, flavor.gpu_model, count(flavor.pools.len() as u64, "pool"))}</summary>
            <div class="row">
                {area("labels", "Node labels", |t| t.node_labels.clone(), |t, v| t.node_labels = v)}
                {area("taints", "Node taints", |t| t.node_taints.clone(), |t, v| t.node_taints = v)}
                {area("tolerations", "Tolerations", |t| t.tolerations.clone(), |t, v| t.tolerations = v)}
                {area("mig", "MIG layout", |t| t.mig_layout.clone(), |t, v| t.mig_layout = v)}
                {sharing_choice(id("sharing"), text)}
            </div>
            <button type="button" data-test="preview-flavor" on:click=ask>"Show what it changes on the cluster"</button>
            " "
            <button type="button" data-test="save-flavor" on:click=save>"Save flavor"</button>
            <div data-test="flavor-dry-run">{move || preview.get().map(super::cluster::dry_run_view)}</div>
        </details>
    }
}

#[component]
fn QueueRow(team: TeamQueue, saved: Callback<()>) -> impl IntoView {
    let last = expect_context::<RwSignal<Option<Result<String, ApiError>>>>();
    let cluster_queue = RwSignal::new(team.cluster_queue.clone());
    let local_queue = RwSignal::new(team.local_queue.clone());
    let cohort = RwSignal::new(team.cohort.clone().unwrap_or_default());
    let name = team.team.clone();
    let save = move |_| {
        let name = name.clone();
        let body = QueueNames {
            cluster_queue: cluster_queue.get_untracked().trim().to_owned(),
            local_queue: local_queue.get_untracked().trim().to_owned(),
            cohort: Some(cohort.get_untracked().trim().to_owned()).filter(|c| !c.is_empty()),
        };
        leptos::task::spawn_local(async move {
            let result: Result<TeamQueue, ApiError> = api::send(
                Method::PUT,
                &format!("/api/quota/teams/{name}/queue"),
                Some(&body),
            )
            .await;
            last.set(Some(
                result.map(|t| format!("team {}'s queues saved", t.team)),
            ));
            saved.run(());
        });
    };
    let team_name = team.team.clone();
    let input = move |what: &'static str, label: String, value: RwSignal<String>| {
        let id = format!("queue-{team_name}-{what}");
        view! {
            <td>
                <label class="sr-only" for=id.clone()>{label}</label>
                <input id=id size="14" prop:value=move || value.get() on:input=move |ev| value.set(event_target_value(&ev))/>
            </td>
        }
    };
    view! {
        <tr data-test=format!("queue-{}", team.team)>
            <td>{team.team.clone()}</td>
            <td>{team.namespace.clone()}</td>
            {input("cq", format!("{}'s ClusterQueue", team.team), cluster_queue)}
            {input("lq", format!("{}'s LocalQueue", team.team), local_queue)}
            {input("cohort", format!("{}'s cohort, blank for none", team.team), cohort)}
            <td><button type="button" data-test="save-queue" on:click=save>"Save"</button></td>
        </tr>
    }
}

fn allocation_plot(allocation: &[Allocation]) -> String {
    let names: Vec<String> = allocation
        .iter()
        .map(|a| format!("{} {}", a.flavor, super::quota::unit(&a.resource)))
        .collect();
    let mut teams: Vec<&str> = allocation
        .iter()
        .flat_map(|a| a.teams.iter().map(|(t, _)| t.as_str()))
        .collect();
    teams.sort_unstable();
    teams.dedup();
    let mut figure = Figure::new();
    for team in teams {
        let quota: Vec<f64> = allocation
            .iter()
            .map(|a| {
                a.teams
                    .iter()
                    .find(|(t, _)| t == team)
                    .map_or(0.0, |(_, n)| *n as f64)
            })
            .collect();
        figure = figure.bars(team, &names, &quota);
    }
    let unassigned: Vec<f64> = allocation
        .iter()
        .map(|a| a.unassigned.max(0) as f64)
        .collect();
    figure.bars("unassigned", &names, &unassigned).to_json(
        "Approved quota against capacity",
        300,
        Some(Bars::Stack),
    )
}

#[component]
fn FleetTables(fleet: Fleet) -> impl IntoView {
    let totals = fleet.totals_by_model();
    let chart = NodeRef::<Div>::new();
    let plot = gpus_by_model_plot(&fleet);
    Effect::new(move |_| {
        if let Some(div) = chart.get() {
            let plot = plot.clone();
            spawn_local(async move { crate::ui::draw_chart(&div.into(), &plot).await });
        }
    });
    view! {
        <p data-test="fleet-total">
            {format!(
                "{} GPUs in {} pools, {} per hour at on-demand prices",
                fleet.total_gpus(),
                fleet.pools.len(),
                dollars(fleet.cost_cents_per_hour()),
            )}
        </p>
        <div id="fleet-chart" class="chart" node_ref=chart></div>
        <table>
            <thead>
                <tr>
                    <th>"Pool"</th><th>"GPU model"</th><th class="num">"Nodes"</th>
                    <th class="num">"GPUs per node"</th><th class="num">"GPUs"</th>
                </tr>
            </thead>
            <tbody>
                {fleet
                    .pools
                    .iter()
                    .map(|p| {
                        view! {
                            <tr>
                                <td>{p.name.clone()}</td>
                                <td>{p.gpu_model.clone()}</td>
                                <td class="num">{p.nodes}</td>
                                <td class="num">{p.gpus_per_node}</td>
                                <td class="num">{p.gpus()}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
        <table>
            <thead>
                <tr>
                    <th>"GPU model"</th><th class="num">"Memory (GiB)"</th>
                    <th class="num">"MIG instances"</th><th class="num">"$ per GPU-hour"</th>
                    <th class="num">"GPUs"</th><th class="num">"$ per hour"</th>
                </tr>
            </thead>
            <tbody>
                {fleet
                    .models
                    .iter()
                    .zip(totals)
                    .map(|(m, t)| {
                        view! {
                            <tr>
                                <td>{m.name.clone()}</td>
                                <td class="num">{m.mem_mib / 1024}</td>
                                <td class="num">{if m.supports_mig() { m.mig_max_instances.to_string() } else { "—".to_owned() }}</td>
                                <td class="num">{dollars(m.price_cents_per_gpu_hour)}</td>
                                <td class="num">{t.gpus}</td>
                                <td class="num">{dollars(t.cost_cents_per_hour)}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}

fn gpus_by_model_plot(fleet: &Fleet) -> String {
    let totals = fleet.totals_by_model();
    let names: Vec<String> = totals.iter().map(|t| t.gpu_model.clone()).collect();
    let gpus: Vec<f64> = totals.iter().map(|t| t.gpus as f64).collect();
    Figure::new()
        .bars("GPUs", &names, &gpus)
        .to_json("GPUs by model", 280, None)
}

/// Chargeback rates per flavor (cents per GPU-hour from a UTC day): shown to approvers, finance
/// and admins; admins add one.
#[component]
fn Rates() -> impl IntoView {
    let me = use_me();
    let has = move |roles: &[Role]| {
        me.with(|m| {
            m.as_ref()
                .is_some_and(|m| roles.iter().any(|r| m.roles.contains(r)))
        })
    };
    let book = RateBook {
        rates: RwSignal::new(Vec::new()),
        failure: RwSignal::new(None),
        saved: RwSignal::new(None),
        pending: RwSignal::new(None),
    };
    Effect::new(move || {
        if has(&[Role::Approver, Role::Finance, Role::Admin]) {
            spawn_local(async move {
                match api::get::<Vec<Rate>>("/api/chargeback/rates").await {
                    Ok(list) => book.rates.set(list),
                    Err(err) => book.failure.set(Some(err)),
                }
            });
        }
    });
    move || {
        has(&[Role::Approver, Role::Finance, Role::Admin]).then(|| {
            let admin = has(&[Role::Admin]);
            let rows: Vec<_> = book
                .rates
                .get()
                .into_iter()
                .map(|r| {
                    let start = r.effective_from.to_string() == "1970-01-01";
                    let from = if start {
                        "the start (the model's price)".to_owned()
                    } else {
                        r.effective_from.to_string()
                    };
                    let (flavor, cents) = (r.flavor.clone(), r.cents_per_gpu_hour);
                    let button = (admin && !start).then(|| view! {
                        <button type="button" class="remove-rate" on:click=move |_| book.remove(r.clone())>"Remove"</button>
                    });
                    view! { <tr><td>{flavor}</td><td>{from}</td><td class="num">{dollars(cents)}</td><td>{button}</td></tr> }
                })
                .collect();
            view! {
                <h2>"Chargeback rates"</h2>
                {move || book.failure.get().map(|error| view! { <ErrorBox error/> })}
                <table data-test="rates">
                    <thead><tr><th>"Flavor"</th><th>"From (UTC)"</th><th>"Per GPU-hour"</th><th></th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
                {move || book.pending.get().map(|pending| {
                    let (question, yes) = pending.words();
                    view! {
                        <p data-test="rate-confirm">{question}" "
                            <button type="button" data-test="rate-confirm-yes" on:click=move |_| book.go_ahead()>{yes}</button>
                            " " <button type="button" data-test="rate-confirm-no" on:click=move |_| book.pending.set(None)>"Cancel"</button></p>
                    }
                })}
                {admin.then(|| view! { <RateForm book/> })}
            }
        })
    }
}

/// The rates per flavor and day, what the last change answered, and a change waiting for the
/// admin to confirm it.
#[derive(Clone, Copy)]
struct RateBook {
    rates: RwSignal<Vec<Rate>>,
    failure: RwSignal<Option<ApiError>>,
    saved: RwSignal<Option<String>>,
    pending: RwSignal<Option<Pending>>,
}

/// A rate change that asks first.
#[derive(Clone)]
enum Pending {
    /// A rate far from the one it follows or the catalogue's price: the server's words.
    Far {
        flavor: String,
        rate: NewRate,
        why: String,
    },
    /// A rate to remove, and what removing it changes.
    Removal { rate: Rate, change: String },
}

impl Pending {
    /// The question, and the button that goes ahead.
    fn words(&self) -> (String, String) {
        match self {
            Pending::Far { why, .. } => (why.clone(), "Set it anyway".to_owned()),
            Pending::Removal { change, .. } => (change.clone(), "Remove it".to_owned()),
        }
    }
}

impl RateBook {
    /// Sets `flavor`'s rate from `day` to `text` dollars per GPU-hour (said in words when
    /// either does not read).
    fn save(self, flavor: String, day: &str, text: &str) {
        let cents = match parse_dollars(text) {
            Ok(cents) => cents,
            Err(why) => {
                self.saved.set(Some(format!("Not saved: {why}")));
                return;
            }
        };
        let Some(day) = shared::common::day::Day::parse(day) else {
            self.saved
                .set(Some("Not saved: choose the day it applies from".to_owned()));
            return;
        };
        self.put(
            flavor,
            NewRate {
                effective_from: day,
                cents_per_gpu_hour: cents,
                confirm: false,
            },
        );
    }

    /// Sends a rate; one far from the usual waits for the admin's confirmation.
    fn put(self, flavor: String, rate: NewRate) {
        let path = format!("/api/chargeback/rates/{flavor}");
        let done = format!(
            "Saved: {flavor} at {} per GPU-hour from {}.",
            dollars(rate.cents_per_gpu_hour),
            rate.effective_from
        );
        spawn_local(async move {
            match api::send(Method::PUT, &path, Some(&rate)).await {
                Err(err) if err.code == shared::ErrorCode::ConfirmationRequired => {
                    self.pending.set(Some(Pending::Far {
                        flavor,
                        rate,
                        why: err.message,
                    }))
                }
                result => self.answered(result, done),
            }
        });
    }

    /// Asks before removing a rate entered by mistake, saying what the flavor costs without it.
    fn remove(self, rate: Rate) {
        let change = self
            .rates
            .with_untracked(|rates| removal_words(rates, &rate));
        self.pending.set(Some(Pending::Removal { rate, change }));
    }

    /// Goes ahead with the change waiting for confirmation.
    fn go_ahead(self) {
        match self.pending.get_untracked() {
            Some(Pending::Far {
                flavor, mut rate, ..
            }) => {
                rate.confirm = true;
                self.put(flavor, rate);
            }
            Some(Pending::Removal { rate, .. }) => {
                let path = format!(
                    "/api/chargeback/rates/{}/{}",
                    rate.flavor, rate.effective_from
                );
                let done = format!(
                    "Removed: {}'s rate from {}.",
                    rate.flavor, rate.effective_from
                );
                spawn_local(async move {
                    self.answered(api::send::<(), _>(Method::DELETE, &path, None).await, done);
                });
            }
            None => {}
        }
    }

    fn answered(self, result: Result<Vec<Rate>, ApiError>, done: String) {
        self.pending.set(None);
        match result {
            Ok(list) => {
                self.rates.set(list);
                self.failure.set(None);
                self.saved.set(Some(done));
            }
            Err(err) => self.failure.set(Some(err)),
        }
    }
}

/// "Remove h100-shared's $9.25 from 2026-12-01? From then until 2027-01-01 it costs $8.60
/// (the model's price) again; open months' statements change with it."
fn removal_words(rates: &[Rate], rate: &Rate) -> String {
    let same = || rates.iter().filter(|r| r.flavor == rate.flavor);
    let before = same()
        .filter(|r| r.effective_from < rate.effective_from)
        .max_by_key(|r| r.effective_from);
    let next = same()
        .filter(|r| r.effective_from > rate.effective_from)
        .min_by_key(|r| r.effective_from);
    let until = next.map_or(String::new(), |n| format!(" until {}", n.effective_from));
    let instead = before.map_or("no rate (unpriced)".to_owned(), |b| {
        let whose = if b.effective_from.days_since_epoch() == 0 {
            " (the model's price)".to_owned()
        } else {
            format!(" (the rate from {})", b.effective_from)
        };
        format!("{}{whose}", dollars(b.cents_per_gpu_hour))
    });
    format!(
        "Remove {}'s {} per GPU-hour from {}? From then{until} it costs {instead} again; the statements of open months change with it.",
        rate.flavor,
        dollars(rate.cents_per_gpu_hour),
        rate.effective_from
    )
}

/// An admin's new rate: a flavor, the day it applies from and its price per GPU-hour.
#[component]
fn RateForm(book: RateBook) -> impl IntoView {
    let (flavor, from, dollars_text) = (
        RwSignal::new(String::new()),
        RwSignal::new(String::new()),
        RwSignal::new(String::new()),
    );
    let flavors: Vec<String> = {
        let mut names: Vec<String> = book.rates.get().into_iter().map(|r| r.flavor).collect();
        names.dedup();
        names
    };
    view! {
        <form data-test="new-rate" on:submit=move |ev| {
            ev.prevent_default();
            book.save(flavor.get_untracked(), &from.get_untracked(), &dollars_text.get_untracked());
        }>
            <label>"Flavor " <select name="flavor" on:change=move |ev| flavor.set(event_target_value(&ev))>
                <option value="">"choose"</option>
                {flavors.into_iter().map(|f| view! { <option value=f.clone()>{f.clone()}</option> }).collect_view()}
            </select></label>
            <label>" from " <input type="text" placeholder="YYYY-MM-DD" name="from" title="A day that has a rate already: its rate is corrected" on:change=move |ev| from.set(event_target_value(&ev))/></label>
            <label>" at $ " <input type="text" name="price" placeholder="per GPU-hour"
                on:input=move |ev| dollars_text.set(event_target_value(&ev))/></label>
            " " <button type="submit">"Set the rate"</button>
            {move || book.saved.get().map(|text| view! { <span class="saved" data-test="rate-saved">" "{text}</span> })}
        </form>
    }
}
