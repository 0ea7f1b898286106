//! Quotas: a team's quota, its request form (checked as you type by `shared::quota`, the code
//! the server runs) and its history; the approvers' inbox with the cohort impact and the
//! ClusterQueue before and after; and the audit log.

mod audit;
mod findings;
mod form;
mod review;

use gpufleet_web::js;
use leptos::{prelude::*, task::spawn_local};
use shared::{
    accounts::{Me, Role},
    common::day::Day,
    quota::{OnCluster, QuotaRequest, QuotaSpec, QuotaWorld, State},
};

use crate::{api, auth::use_me, ui::ErrorBox};
use wasm_bindgen::JsValue;

/// Today in UTC, by the browser's clock.
pub fn today() -> Day {
    Day::of_unix_seconds((js_sys::Date::now() / 1000.0) as i64)
}

/// `nvidia.com/gpu` → "GPUs", `nvidia.com/mig-1g.10gb` → "1g.10gb instances".
pub fn unit(resource: &str) -> String {
    match resource.split_once("/mig-") {
        Some((_, profile)) => format!("{profile} instances"),
        None => "GPUs".to_owned(),
    }
}

/// "What the team uses today": the last day's average GPUs per flavor, from the usage rows.
pub fn in_use_html(in_use: &js_sys::Array, team: &str) -> String {
    if in_use.length() == 0 {
        return format!(
            r#"<h3>What {team} uses today</h3><p data-test="in-use">No use by {team} is recorded in the last 24 whole hours.</p>"#
        );
    }
    let gpus = |v: &JsValue, key: &str| {
        let hours = js::at(v, "hours").as_f64().unwrap_or(1.0);
        js::at(v, key)
            .as_f64()
            .map_or("not reported every hour".to_owned(), |us| {
                format!("{:.1}", us / (hours * 3.6e9))
            })
    };
    let rows: String = in_use
        .iter()
        .map(|u| {
            format!(
                r#"<tr><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
                js::text(&u, "flavor"),
                gpus(&u, "nominal_gpu_microseconds"),
                gpus(&u, "allocated_gpu_microseconds"),
                gpus(&u, "busy_gpu_microseconds"),
            )
        })
        .collect();
    format!(
        r#"<h3>What {team} uses today</h3><table data-test="in-use"><caption>GPUs on average over the last 24 whole hours: Kueue's quota and allocation, DCGM's busy time</caption><thead><tr><th>Flavor</th><th class="num">Quota</th><th class="num">Allocated</th><th class="num">Busy</th></tr></thead><tbody>{rows}</tbody></table>"#
    )
}

/// A team's standing (`/api/quota/teams/{team}/standing`): what it used of its quota over the
/// last day and its queue's admission wait over the last week, as HTML.
fn standing_html(v: &JsValue, team: &str) -> String {
    let wait = js::at(v, "wait");
    let days = format!("{} to {}", js::text(v, "wait_from"), js::text(v, "wait_to"));
    let said = if wait.is_object() {
        let not_admitted = js::number(&wait, "not_admitted").unwrap_or(0.0);
        format!(
            "{} Workloads created {days} waited p50 {} min, p95 {} min for admission{} (from {}).",
            js::text(&wait, "workloads"),
            js::text(&wait, "p50_minutes"),
            js::text(&wait, "p95_minutes"),
            if not_admitted > 0.0 {
                format!(", {not_admitted} of them not admitted yet (counted at least)")
            } else {
                String::new()
            },
            js::text(&wait, "from")
        )
    } else {
        format!("No Workload of {team}'s was recorded or admitted {days}.")
    };
    let unrecorded = match js::text(v, "unrecorded") {
        why if why.is_empty() => why,
        why => format!(" {why}."),
    };
    format!(
        r#"{}<h3>{team}'s queue</h3><p data-test="queue-wait">{said}{unrecorded}</p>"#,
        in_use_html(&js::each(v, "in_use"), team)
    )
}

/// What a change of a request answers, as far as the console reads it.
#[derive(serde::Deserialize)]
pub struct Saved {
    pub request: SavedRequest,
}

#[derive(serde::Deserialize)]
pub struct SavedRequest {
    pub id: i64,
    pub version: i32,
}

/// Where a change says it was saved (a request drafted, submitted, decided).
#[derive(Clone, Copy)]
pub struct Notice(pub RwSignal<Option<String>>);

/// The team whose request was last saved or sent from the form, and what it says: shown in
/// the form's place until the team asks for another.
#[derive(Clone, Copy)]
pub struct Sent(pub RwSignal<Option<(String, String)>>);

/// The draft open in the request form, if one is being edited.
#[derive(Clone, Copy)]
pub struct Editing(pub RwSignal<Option<QuotaRequest>>);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tab {
    Teams,
    Inbox,
    Findings,
    Audit,
}

fn is_reader(me: &Me) -> bool {
    [Role::Approver, Role::Finance, Role::Admin]
        .iter()
        .any(|r| me.roles.contains(r))
}

#[component]
pub fn Quotas() -> impl IntoView {
    let me = use_me();
    let me = Signal::derive(move || me.get());
    let version = RwSignal::new(0u32);
    let world = LocalResource::new(move || {
        version.track();
        api::get::<QuotaWorld>("/api/quota/world")
    });
    let changed = Callback::new(move |()| version.update(|v| *v += 1));
    let reader = move || me.with(|m| m.as_ref().is_some_and(is_reader));
    let decider = move || {
        me.with(|m| {
            m.as_ref().is_some_and(|m| {
                m.roles
                    .iter()
                    .any(|r| matches!(r, Role::Approver | Role::Admin))
            })
        })
    };
    let tab = RwSignal::new(Tab::Teams);
    // Kept here, above what a refresh redraws: the team shown and the last change's outcome.
    let chosen = RwSignal::new(None::<String>);
    let notice = RwSignal::new(None::<String>);
    provide_context(Notice(notice));
    provide_context(Editing(RwSignal::new(None)));
    provide_context(Sent(RwSignal::new(None)));
    let tab_button = move |which: Tab, label: &'static str, test: &'static str| {
        view! {
            <button
                type="button"
                data-test=test
                aria-current=move || (tab.get() == which).then_some("step")
                on:click=move |_| tab.set(which)
            >
                {label}
            </button>
        }
    };
    view! {
        <section>
            <h1>"Quotas"</h1>
            <nav class="steps" aria-label="Quota views">
                {tab_button(Tab::Teams, "Teams", "tab-teams")}
                <Show when=reader>
                    {tab_button(Tab::Inbox, "Requests to decide", "tab-inbox")}
                    {tab_button(Tab::Audit, "Audit log", "tab-audit")}
                </Show>
                <Show when=decider>{tab_button(Tab::Findings, "Findings", "tab-findings")}</Show>
            </nav>
            {move || notice.get().map(|m| view! { <p class="ok" role="status" data-test="quota-notice">{m}</p> })}
            {move || match world.get() {
                None => view! { <p class="muted">"loading…"</p> }.into_any(),
                Some(Err(err)) => view! { <ErrorBox error=err/> }.into_any(),
                Some(Ok(world)) => {
                    let Some(me) = me.get() else { return ().into_any() };
                    match tab.get() {
                        Tab::Teams => view! { <TeamsView world me chosen changed/> }.into_any(),
                        Tab::Inbox => view! { <review::Inbox me changed/> }.into_any(),
                        Tab::Findings => view! { <findings::FindingsView me changed/> }.into_any(),
                        Tab::Audit => {
                            let teams = world.teams.iter().map(|t| t.team.clone()).collect();
                            view! { <audit::AuditLog teams/> }.into_any()
                        }
                    }
                }
            }}
        </section>
    }
}

/// One team at a time: the teams the user belongs to, or every team for readers and admins.
#[component]
fn TeamsView(
    world: QuotaWorld,
    me: Me,
    chosen: RwSignal<Option<String>>,
    changed: Callback<()>,
) -> impl IntoView {
    let visible: Vec<String> = world
        .teams
        .iter()
        .map(|t| t.team.clone())
        .filter(|t| is_reader(&me) || me.teams.contains(t))
        .collect();
    if visible.is_empty() {
        return view! { <p>"You are in no team yet: an admin adds you to one."</p> }.into_any();
    }
    let first = visible[0].clone();
    let current = move || chosen.get().unwrap_or_else(|| first.clone());
    let world = StoredValue::new(world);
    let may_request =
        move |team: &str| me.teams.iter().any(|t| t == team) || me.roles.contains(&Role::Admin);
    view! {
        <p>
            <label for="quota-team">"Team "</label>
            <select id="quota-team" data-test="quota-team" on:change=move |ev| chosen.set(Some(event_target_value(&ev)))>
                {visible
                    .iter()
                    .map(|t| {
                        let selected = chosen.get_untracked().as_ref() == Some(t);
                        view! { <option value=t.clone() selected=selected>{t.clone()}</option> }
                    })
                    .collect_view()}
            </select>
        </p>
        {move || {
            let team = current();
            let world = world.get_value();
            let may = may_request(&team);
            let Editing(editing) = expect_context::<Editing>();
            let Sent(sent) = expect_context::<Sent>();
            let draft = editing.get().filter(|d| d.team == team);
            let just_sent = sent.get().filter(|(t, _)| draft.is_none() && *t == team);
            let form = match just_sent {
                Some((_, said)) => view! {
                    <p data-test="request-sent">{said}" "
                        <button type="button" data-test="request-more" on:click=move |_| sent.set(None)>"Request other quota"</button>
                    </p>
                }
                .into_any(),
                None => view! { <form::RequestForm world=world.clone() team=team.clone() draft changed/> }.into_any(),
            };
            view! {
                <CurrentQuota world=world.clone() team=team.clone()/>
                {may.then_some(form)}
                <History team ours=may changed/>
            }
        }}
    }
    .into_any()
}

/// What the team holds today: its approved request in force, per flavor.
#[component]
fn CurrentQuota(world: QuotaWorld, team: String) -> impl IntoView {
    let today = today();
    let effective = world.effective_on(today);
    let queue = world.team(&team).cloned();
    let Some(current) = effective.get(team.as_str()) else {
        return view! {
            <h2>"Current quota"</h2>
            <p data-test="current-quota">
                "No approved quota in force: the team's queue admits nothing new until a request is approved."
            </p>
        }
        .into_any();
    };
    let cohort = queue
        .and_then(|q| q.cohort)
        .map_or("in no cohort (hard quota)".to_owned(), |c| {
            format!("in cohort {c}")
        });
    let until = current
        .spec
        .ends_on
        .map_or("open-ended".to_owned(), |d| format!("until {d}"));
    let standing = RwSignal::new(String::new());
    spawn_local(async move {
        let path = format!("/api/quota/teams/{team}/standing");
        standing.set(match api::get_js(&path).await {
            Ok(v) => standing_html(&v, &js::escape(&team)),
            Err(err) => format!(r#"<p class="muted">{}</p>"#, js::escape(&err.message)),
        });
    });
    view! {
        <h2>"Current quota"</h2>
        <p>{format!("Request {}, {until}; the queue is {cohort}.", current.id)}</p>
        <table data-test="current-quota">
            <thead>
                <tr>
                    <th>"Flavor"</th><th>"Resource"</th><th class="num">"Nominal"</th>
                    <th class="num">"May borrow up to"</th><th class="num">"May lend up to"</th>
                </tr>
            </thead>
            <tbody>
                {current
                    .spec
                    .lines
                    .iter()
                    .map(|l| {
                        let limit = |v: Option<i64>, none: &str| v.map_or(none.to_owned(), |v| v.to_string());
                        view! {
                            <tr>
                                <td>{l.flavor.clone()}</td>
                                <td>{unit(&l.resource)}</td>
                                <td class="num">{l.nominal}</td>
                                <td class="num">{limit(l.borrowing_limit, "no limit")}</td>
                                <td class="num">{limit(l.lending_limit, "all unused")}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
        <div data-test="standing" inner_html=standing></div>
    }
    .into_any()
}

/// "h100-shared: 24 GPUs; rtx-inference: 4 GPUs" (lines with quota only).
pub fn spec_summary(spec: &QuotaSpec) -> String {
    let parts: Vec<String> = spec
        .lines
        .iter()
        .filter(|l| l.nominal > 0 || l.borrowing_limit.is_some_and(|b| b > 0))
        .map(|l| format!("{}: {} {}", l.flavor, l.nominal, unit(&l.resource)))
        .collect();
    if parts.is_empty() {
        "no quota".to_owned()
    } else {
        parts.join("; ")
    }
}

/// A request's state in words; an approved one in force says whether it is on the cluster,
/// and whether Kueue's own metrics show it.
fn request_state(r: &QuotaRequest) -> String {
    let landed = r.applied_to.as_deref().unwrap_or("applied");
    match (r.in_force, &r.applied_at, &r.apply_error) {
        (true, _, Some(error)) => format!("approved, in force; not on the cluster yet: {error}"),
        (true, Some(at), None) => match &r.on_cluster {
            Some(OnCluster::WrittenNotSeen) => format!(
                "approved, written, not yet seen on the cluster: {landed} {at}; Kueue's metrics do not show it yet"
            ),
            Some(OnCluster::Reported { as_of }) => {
                format!("approved, in force; {landed} {at}; Kueue's metrics show it ({as_of})")
            }
            None => format!("approved, in force; {landed} {at}"),
        },
        (true, None, None) => "approved, in force; applying…".to_owned(),
        _ => r.state.as_str().to_owned(),
    }
}

/// One request of the history, with the team's own steps on it (`step(request, action)`) for
/// those who may take them (its members and admins, as the API allows).
fn history_row(
    r: QuotaRequest,
    ours: bool,
    step: impl Fn(QuotaRequest, &'static str) + Copy + 'static,
) -> impl IntoView {
    let state = request_state(&r);
    let draft = (ours && r.state == State::Draft).then(|| {
        let (r, open) = (r.clone(), r.clone());
        let Editing(editing) = expect_context::<Editing>();
        view! {
            <button type="button" data-test="edit-draft" on:click=move |_| editing.set(Some(open.clone()))>"Edit"</button>
            " "
            <button type="button" data-test="submit-draft" on:click=move |_| step(r.clone(), "submit")>"Submit"</button>
        }
    });
    let submitted = (ours && r.state == State::Submitted).then(|| {
        let r = r.clone();
        view! {
            <button type="button" data-test="withdraw" title="Back to a draft, out of the approvers' inbox"
                on:click=move |_| step(r.clone(), "withdraw")>"Withdraw"</button>
        }
    });
    view! {
        <tr data-test=format!("request-{}", r.id)>
            <td class="num">{r.id}</td>
            <td>{state}</td>
            <td>{spec_summary(&r.spec)}</td>
            <td>{r.spec.starts_on.to_string()}</td>
            <td>{r.spec.ends_on.map_or("—".to_owned(), |d| d.to_string())}</td>
            <td>{r.created_by.clone()}</td>
            <td>{r.decided_by.clone().unwrap_or_default()}</td>
            <td>{r.comment.clone().unwrap_or_default()}</td>
            <td>{draft}{submitted}</td>
        </tr>
    }
}

/// The team's requests, newest first; its members (`ours`) submit drafts and withdraw
/// requests from here.
#[component]
fn History(team: String, ours: bool, changed: Callback<()>) -> impl IntoView {
    let path = format!("/api/quota/teams/{team}/requests");
    let requests = LocalResource::new(move || {
        let path = path.clone();
        async move { api::get::<Vec<QuotaRequest>>(&path).await }
    });
    let error = RwSignal::new(None);
    let Sent(sent) = expect_context::<Sent>();
    // the team's own steps: a draft submitted, a submitted request withdrawn to a draft; what
    // the form's place said of the request follows
    let step = move |request: QuotaRequest, action: &'static str| {
        leptos::task::spawn_local(async move {
            let path = format!(
                "/api/quota/teams/{}/requests/{}/{action}",
                request.team, request.id
            );
            let body = shared::quota::Submit {
                version: request.version,
            };
            match api::send::<_, Saved>(gloo_net::http::Method::POST, &path, Some(&body)).await {
                Ok(_) => {
                    error.set(None);
                    let said = if action == "withdraw" {
                        format!(
                            "Request {} withdrawn: a draft again, out of the approvers' inbox.",
                            request.id
                        )
                    } else {
                        format!("Request {} submitted to the approvers.", request.id)
                    };
                    sent.set(Some((request.team.clone(), said)));
                    requests.refetch();
                    changed.run(());
                }
                Err(err) => error.set(Some(err)),
            }
        });
    };
    view! {
        <h2>"History"</h2>
        {move || error.get().map(|error| view! { <ErrorBox error/> })}
        {move || match requests.get() {
            None => view! { <p class="muted">"loading…"</p> }.into_any(),
            Some(Err(error)) => view! { <ErrorBox error/> }.into_any(),
            Some(Ok(list)) if list.is_empty() => view! { <p data-test="history">"No requests yet."</p> }.into_any(),
            Some(Ok(list)) => view! {
                <table data-test="history">
                    <thead>
                        <tr>
                            <th>"Request"</th><th>"State"</th><th>"Quota"</th><th>"From"</th>
                            <th>"Until"</th><th>"By"</th><th>"Decided by"</th><th>"Comment"</th><th></th>
                        </tr>
                    </thead>
                    <tbody>
                        {list.into_iter().map(|r| history_row(r, ours, step)).collect_view()}
                    </tbody>
                </table>
            }
            .into_any(),
        }}
    }
}
