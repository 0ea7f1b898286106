//! The approvers' inbox: submitted requests; for the one opened, the rules' verdict today,
//! what the quota is worth against the quota in force, what the team uses today, the cohort
//! impact per flavor (table and chart) and each other team's consequence, the last weeks'
//! recorded work replayed before and after, and the team's ClusterQueue as it is and as the
//! approval would make it, side by side; approve or reject with a comment.

use gloo_net::http::Method;
use gpufleet_web::{
    figure::{Bars, Figure},
    js, planner,
};
use leptos::{prelude::*, task::spawn_local};
use shared::{
    ApiError,
    accounts::{Me, Role},
    chargeback::worth::PRICED_DAYS_AT_MOST,
    common::money::dollars,
    quota::{Decision, QuotaRequest},
};
use wasm_bindgen::JsValue;

use super::{Saved, in_use_html, spec_summary, unit};
use crate::{
    api,
    ui::{Chart, ErrorBox},
};

#[component]
pub fn Inbox(me: Me, changed: Callback<()>) -> impl IntoView {
    let version = RwSignal::new(0u32);
    let pending = LocalResource::new(move || {
        version.track();
        api::get::<Vec<QuotaRequest>>("/api/quota/requests?state=submitted")
    });
    let open = RwSignal::new(None::<QuotaRequest>);
    let decided = Callback::new(move |()| {
        open.set(None);
        version.update(|v| *v += 1);
        changed.run(());
    });
    let can_decide = me.roles.contains(&Role::Approver) || me.roles.contains(&Role::Admin);
    view! {
        <h2>"Requests to decide"</h2>
        {move || match pending.get() {
            None => view! { <p class="muted">"loading…"</p> }.into_any(),
            Some(Err(error)) => view! { <ErrorBox error/> }.into_any(),
            Some(Ok(list)) if list.is_empty() => view! { <p data-test="inbox">"Nothing waits for a decision."</p> }.into_any(),
            Some(Ok(list)) => view! {
                <table data-test="inbox">
                    <thead>
                        <tr><th>"Request"</th><th>"Team"</th><th>"Quota"</th><th>"From"</th><th>"By"</th><th></th></tr>
                    </thead>
                    <tbody>
                        {list
                            .into_iter()
                            .map(|r| {
                                let opened = r.clone();
                                view! {
                                    <tr>
                                        <td class="num">{r.id}</td>
                                        <td>{r.team.clone()}</td>
                                        <td>{spec_summary(&r.spec)}</td>
                                        <td>{r.spec.starts_on.to_string()}</td>
                                        <td>{r.created_by.clone()}</td>
                                        <td>
                                            <button type="button" data-test=format!("review-{}", r.id) on:click=move |_| open.set(Some(opened.clone()))>
                                                "Review"
                                            </button>
                                        </td>
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            }
            .into_any(),
        }}
        {move || open.get().map(|request| view! { <Review request can_decide decided/> })}
    }
}

/// The request opened from the inbox: what the server weighs for it (read by the browser's
/// `JSON.parse` into HTML: no decoder for the review's many figures in the bundle), the
/// what-if of its last weeks, the cluster's dry run, and the decision.
#[component]
fn Review(request: QuotaRequest, can_decide: bool, decided: Callback<()>) -> impl IntoView {
    let path = format!("/api/quota/teams/{}/requests/{}", request.team, request.id);
    let path = StoredValue::new(path);
    let (weighed, queues) = (RwSignal::new(String::new()), RwSignal::new(String::new()));
    let what_if = RwSignal::new(r#"<p class="muted">replaying the recorded weeks…</p>"#.to_owned());
    let plot = RwSignal::new(None::<String>);
    let failure = RwSignal::new(None::<ApiError>);
    let team = request.team.clone();
    spawn_local(async move {
        let path = path.get_value();
        match api::get_js(&path).await {
            Ok(v) => {
                let impact = js::each(&v, "impact");
                weighed.set(weighed_html(&v, &team));
                plot.set(Some(impact_plot(&impact, &team)));
                queues.set(queues_html(&v));
            }
            Err(err) => failure.set(Some(err)),
        }
    });
    spawn_local(async move {
        let input = format!("{}/what-if/input", path.get_value());
        what_if.set(replayed_html(&input).await);
    });
    let comment = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let super::Notice(notice) = expect_context::<super::Notice>();
    let (id, version) = (request.id, request.version);
    let decide = move |verb: &'static str| {
        busy.set(true);
        let body = Decision {
            version,
            comment: comment.get_untracked(),
        };
        spawn_local(async move {
            let url = format!("{}/{verb}", path.get_value());
            let result: Result<Saved, ApiError> = api::send(Method::POST, &url, Some(&body)).await;
            busy.set(false);
            match result {
                Ok(_) => {
                    notice.set(Some(format!("Request {id} {verb}d.")));
                    decided.run(());
                }
                Err(err) => failure.set(Some(err)),
            }
        });
    };
    let blocked = move || busy.get() || comment.with(|c| c.trim().is_empty());
    let r = request;
    view! {
        <section class="review" data-test="review">
            <h2>{format!("Request {} of {}", r.id, r.team)}</h2>
            <p>{format!("{} — from {}{}, by {}.", spec_summary(&r.spec), r.spec.starts_on, r.spec.ends_on.map_or(String::new(), |d| format!(" until {d}")), r.created_by)}</p>
            <p data-test="terms">
                {r.spec.project.as_ref().map(|p| format!("Project: {p}. "))}
                {r.spec.largest_job_gpus.map(|g| format!("Largest job: {g} GPUs at once. "))}
                <em>{r.spec.justification.clone()}</em>
            </p>
            <div inner_html=move || weighed.get()></div>
            <Chart id="impact-chart" plot=Box::new(move || plot.get())/>
            <h3>"The last weeks replayed"</h3>
            <div data-test="what-if" inner_html=move || what_if.get()></div>
            <div inner_html=move || queues.get()></div>
            <h3>"What the cluster would change"</h3>
            <crate::pages::DryRunDiff path=format!("{}/dry-run", path.get_value())/>
            {move || failure.get().map(|error| view! { <ErrorBox error/> })}
            {can_decide.then(|| view! {
                <p>
                    <label for="decision-comment">"Comment (required)"</label>
                    <textarea id="decision-comment" data-test="decision-comment" rows="2"
                        on:input=move |ev| comment.set(event_target_value(&ev))></textarea>
                </p>
                <button type="button" data-test="approve" disabled=blocked on:click=move |_| decide("approve")>"Approve"</button>
                " "
                <button type="button" data-test="reject" disabled=blocked on:click=move |_| decide("reject")>"Reject"</button>
            })}
        </section>
    }
}

/// The rules' errors and warnings, what the quota is worth, what the team uses today, the
/// cohort impact per flavor and each other team's consequence: from a `RequestView`.
pub(super) fn weighed_html(v: &JsValue, team: &str) -> String {
    let checked = js::at(v, "checked");
    let list = |key: &str, class: &str, test: &str| {
        let items: String = js::each(&checked, key)
            .iter()
            .map(|e| {
                format!(
                    r#"<li title="{}">{}</li>"#,
                    js::text(&e, "path"),
                    js::text(&e, "message")
                )
            })
            .collect();
        if items.is_empty() {
            String::new()
        } else {
            format!(r#"<ul class="{class}" data-test="{test}">{items}</ul>"#)
        }
    };
    let impact = js::each(v, "impact");
    [
        list("errors", "errors", "review-errors"),
        list("warnings", "warnings", "warnings"),
        worth_html(&js::at(v, "worth"), team),
        in_use_html(&js::each(v, "in_use"), team),
        impact_html(&impact, team),
        others_html(&impact, team),
    ]
    .concat()
}

fn cents(v: &JsValue, key: &str) -> String {
    dollars(js::at(v, key).as_f64().unwrap_or(0.0) as i64)
}

/// "What it is worth": the quota asked for and the quota in force over the days priced.
fn worth_html(worth: &JsValue, team: &str) -> String {
    let days = format!(
        "{} to {}{}",
        js::text(worth, "from"),
        js::text(worth, "to"),
        if js::at(worth, "runs_on").is_truthy() {
            format!(" (its first {PRICED_DAYS_AT_MOST} days; it runs on after)")
        } else {
            String::new()
        }
    );
    let rows: String = js::each(worth, "flavors")
        .iter()
        .map(|f| {
            let rate = js::at(&f, "cents_per_gpu_hour").as_f64();
            format!(
                r#"<tr><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
                js::text(&f, "flavor"),
                rate.map_or("no rate".to_owned(), |r| dollars(r as i64)),
                cents(&f, "in_force_cents"),
                cents(&f, "asked_cents"),
            )
        })
        .collect();
    format!(
        r#"<h3>What it is worth</h3><p data-test="worth">Held all day, every day from {days}, at each flavor's rate per GPU-hour (a MIG instance at its share of a GPU): the quota asked for is worth {}, <span data-test="worth-per-month">{} a month</span> of 30 days; {team}'s quota in force, {} over the same days. A team is charged for what it uses, so this is the most it could cost.</p><table data-test="worth-table"><thead><tr><th>Flavor</th><th class="num">Rate per GPU-hour</th><th class="num">Quota in force</th><th class="num">Asked for</th></tr></thead><tbody>{rows}</tbody></table>"#,
        cents(worth, "asked_cents"),
        cents(worth, "asked_per_month_cents"),
        cents(worth, "in_force_cents"),
    )
}

/// `a`, or `a → b` when it changes.
fn change(a: i64, b: i64) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a} → {b}")
    }
}

/// `team`'s figure on one side of an impact row: (nominal, most it may borrow).
fn team_side(side: &JsValue, team: &str) -> (i64, i64) {
    js::each(side, "teams")
        .iter()
        .find(|t| js::at(t, "team").as_string().as_deref() == Some(team))
        .map_or((0, 0), |t| {
            (whole(&t, "nominal"), whole(&t, "most_borrowable"))
        })
}

fn whole(v: &JsValue, key: &str) -> i64 {
    js::number(v, key).unwrap_or(0.0) as i64
}

fn impact_html(impact: &js_sys::Array, team: &str) -> String {
    let rows: String = impact
        .iter()
        .map(|i| {
            let (before, after) = (js::at(&i, "before"), js::at(&i, "after"));
            let both = |key: &str| change(whole(&before, key), whole(&after, key));
            let borrow = change(team_side(&before, team).1, team_side(&after, team).1);
            let why = js::text(&i, "why_no_borrowing");
            let why = if why.is_empty() { why } else { format!(": none, {why}") };
            format!(
                r#"<tr><td>{}</td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{borrow}{why}</td></tr>"#,
                js::text(&i, "flavor"),
                unit(&js::text(&i, "resource")),
                whole(&i, "capacity"),
                both("nominal_total"),
                both("unassigned"),
                both("cohort_lendable"),
            )
        })
        .collect();
    format!(
        r#"<h3>Cohort impact</h3><table data-test="impact"><thead><tr><th>Flavor</th><th>Resource</th><th class="num">Capacity</th><th class="num">Nominal, all teams</th><th class="num">Unassigned</th><th class="num">Cohort can lend</th><th class="num">{team} may borrow</th></tr></thead><tbody>{rows}</tbody></table>"#
    )
}

/// Every other team whose quota or borrowing the approval changes, per flavor resource.
fn others_html(impact: &js_sys::Array, team: &str) -> String {
    let mut rows = String::new();
    for i in impact.iter() {
        let (before, after) = (js::at(&i, "before"), js::at(&i, "after"));
        for t in js::each(&before, "teams").iter() {
            let name = js::at(&t, "team").as_string().unwrap_or_default();
            let ((n0, b0), (n1, b1)) = (team_side(&before, &name), team_side(&after, &name));
            if name != team && (n0, b0) != (n1, b1) {
                rows += &format!(
                    r#"<tr><td>{}</td><td>{} {}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
                    js::escape(&name),
                    js::text(&i, "flavor"),
                    unit(&js::text(&i, "resource")),
                    change(n0, n1),
                    change(b0, b1),
                );
            }
        }
    }
    if rows.is_empty() {
        return r#"<p data-test="others">No other team's quota or borrowing changes.</p>"#
            .to_owned();
    }
    format!(
        r#"<table data-test="others"><caption>Each other team it changes</caption><thead><tr><th>Team</th><th>Flavor</th><th class="num">Nominal</th><th class="num">May borrow</th></tr></thead><tbody>{rows}</tbody></table>"#
    )
}

/// The team's ClusterQueue now and after approval, from a `RequestView`.
fn queues_html(v: &JsValue) -> String {
    format!(
        r#"<h3>The team's ClusterQueue</h3><div class="two"><div><h4>Now</h4><pre class="yaml" data-test="queue-now">{}</pre></div><div><h4>After approval</h4><pre class="yaml" data-test="queue-after">{}</pre></div></div>"#,
        js::text(v, "queue_now_yaml"),
        js::text(v, "queue_after_yaml")
    )
}

/// The what-if at `path` replayed in this browser, as HTML: its table, or why there is none.
async fn replayed_html(path: &str) -> String {
    match replay_what_if(path).await {
        Ok((v, ms)) => what_if_html(&v, ms),
        Err(why) => format!(r#"<p class="muted">{}</p>"#, js::escape(&why)),
    }
}

/// The what-if read from `path` (`WhatIfInput`) and replayed in two of the planner's workers
/// (started as the input downloads), as `GET …/what-if` answers it (`WhatIf`, parsed by the
/// browser): the input's own account of its weeks with the replay's teams and problems; and
/// the milliseconds the replay took.
async fn replay_what_if(path: &str) -> Result<(JsValue, f64), String> {
    planner::preload();
    let input = api::get_text(path).await.map_err(|err| err.message)?;
    let (answer, ms) = planner::ask("what_if", &input).await?;
    let outcome = js_sys::JSON::parse(&answer).unwrap_or(JsValue::NULL);
    let replayed = js::at(&outcome, "Ok");
    if !replayed.is_object() {
        let said: Vec<String> = js::each(&outcome, "Err")
            .iter()
            .map(|e| js::at(&e, "message").as_string().unwrap_or_default())
            .collect();
        return Err(format!(
            "the weeks could not be replayed: {}",
            said.join("; ")
        ));
    }
    let what_if = js_sys::JSON::parse(&input).unwrap_or(JsValue::NULL);
    let problems = js::each(&what_if, "problems").concat(&js::each(&replayed, "problems"));
    let _ = js_sys::Reflect::set(&what_if, &"teams".into(), &js::at(&replayed, "teams"));
    let _ = js_sys::Reflect::set(&what_if, &"problems".into(), &problems);
    Ok((what_if, ms))
}

/// The what-if answer: per team of the cohort, the replayed weeks before → after.
fn what_if_html(v: &JsValue, ms: f64) -> String {
    let side = |c: &JsValue, key: &str, f: &dyn Fn(&JsValue) -> String| {
        let (a, b) = (
            f(&js::at(&js::at(c, "before"), key)),
            f(&js::at(&js::at(c, "after"), key)),
        );
        if a == b { a } else { format!("{a} → {b}") }
    };
    let number = |decimals: usize| {
        move |x: &JsValue| {
            x.as_f64()
                .map_or("—".to_owned(), |n| format!("{n:.decimals$}"))
        }
    };
    let rows: String = js::each(v, "teams")
        .iter()
        .map(|c| {
            format!(
                r#"<tr><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
                js::text(&c, "team"),
                side(&c, "wait_p95_minutes", &number(1)),
                side(&c, "evictions", &number(0)),
                side(&c, "admitted_gpu_hours", &number(0)),
            )
        })
        .collect();
    let problems = js::problems(v);
    format!(
        r#"<p>{} recorded workloads of {} to {} replayed through the week engine under the quotas in force today, then with this request approved (in this browser, <span data-test="what-if-ms">{ms:.0}</span> ms).</p>{}{}"#,
        js::text(v, "workloads"),
        js::text(v, "from"),
        js::text(v, "to"),
        if rows.is_empty() {
            String::new()
        } else {
            format!(
                r#"<table><thead><tr><th>Team</th><th class="num">Wait p95, minutes</th><th class="num">Evictions</th><th class="num">GPU-hours admitted</th></tr></thead><tbody>{rows}</tbody></table>"#
            )
        },
        if problems.is_empty() {
            String::new()
        } else {
            format!(r#"<p class="muted">{problems}</p>"#)
        }
    )
}

/// Per flavor resource: every team's nominal quota before and after, against capacity.
fn impact_plot(impact: &js_sys::Array, team: &str) -> String {
    let names: Vec<String> = impact
        .iter()
        .map(|i| {
            format!(
                "{} {}",
                js::text(&i, "flavor"),
                unit(&js::text(&i, "resource"))
            )
        })
        .collect();
    let series = |side: &str, key: &str| -> Vec<f64> {
        impact
            .iter()
            .map(|i| {
                let at = if side.is_empty() { i } else { js::at(&i, side) };
                whole(&at, key) as f64
            })
            .collect()
    };
    Figure::new()
        .bars("capacity", &names, &series("", "capacity"))
        .bars("nominal now", &names, &series("before", "nominal_total"))
        .bars(
            &format!("nominal with {team}'s request"),
            &names,
            &series("after", "nominal_total"),
        )
        .bars(
            "cohort can lend after",
            &names,
            &series("after", "cohort_lendable"),
        )
        .to_json("Cohort impact", 300, Some(Bars::Group))
}
