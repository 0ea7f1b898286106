//! The approvers' inbox: submitted requests; for the one opened, the rules' verdict today, the
//! cohort impact per flavor (table and chart) and the team's ClusterQueue as it is and as the
//! approval would make it, side by side; approve or reject with a comment.

use gloo_net::http::Method;
use leptos::{prelude::*, task::spawn_local};
use plotly::{Bar, Layout, Plot, layout::BarMode};
use shared::{
    ApiError,
    accounts::{Me, Role},
    quota::{Decision, Impact, QuotaRequest, RequestView},
};

use super::{form::Warnings, lines_summary, unit};
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
    let open = RwSignal::new(None::<(String, i64)>);
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
                                let key = (r.team.clone(), r.id);
                                view! {
                                    <tr>
                                        <td class="num">{r.id}</td>
                                        <td>{r.team.clone()}</td>
                                        <td>{lines_summary(&r)}</td>
                                        <td>{r.spec.starts_on.to_string()}</td>
                                        <td>{r.created_by.clone()}</td>
                                        <td>
                                            <button type="button" data-test=format!("review-{}", r.id) on:click=move |_| open.set(Some(key.clone()))>
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
        {move || open.get().map(|(team, id)| view! { <Review team id can_decide decided/> })}
    }
}

#[component]
fn Review(team: String, id: i64, can_decide: bool, decided: Callback<()>) -> impl IntoView {
    let path = format!("/api/quota/teams/{team}/requests/{id}");
    let path = StoredValue::new(path);
    let view =
        LocalResource::new(move || async move { api::get::<RequestView>(&path.get_value()).await });
    view! {
        {move || match view.get() {
            None => view! { <p class="muted">"loading…"</p> }.into_any(),
            Some(Err(error)) => view! { <ErrorBox error/> }.into_any(),
            Some(Ok(v)) => view! { <Verdict view=v path=path.get_value() can_decide decided/> }.into_any(),
        }}
    }
}

#[component]
fn Verdict(
    view: RequestView,
    path: String,
    can_decide: bool,
    decided: Callback<()>,
) -> impl IntoView {
    let r = view.request.clone();
    let errors = view.checked.errors.clone();
    let warnings = view.checked.warnings.clone();
    let impact = view.impact.clone();
    let plot = impact_plot(&impact, &r.team).to_json();
    let comment = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let failure = RwSignal::new(None::<ApiError>);
    let path = StoredValue::new(path);
    let version = r.version;
    let super::Notice(notice) = expect_context::<super::Notice>();
    let id = r.id;
    let decide = move |verb: &'static str| {
        busy.set(true);
        let body = Decision {
            version,
            comment: comment.get_untracked(),
        };
        spawn_local(async move {
            let result: Result<RequestView, ApiError> = api::send(
                Method::POST,
                &format!("{}/{verb}", path.get_value()),
                Some(&body),
            )
            .await;
            busy.set(false);
            match result {
                Ok(v) => {
                    notice.set(Some(format!("Request {id} {}.", v.request.state.as_str())));
                    decided.run(());
                }
                Err(err) => failure.set(Some(err)),
            }
        });
    };
    let blocked = move || busy.get() || comment.with(|c| c.trim().is_empty());
    let team = r.team.clone();
    view! {
        <section class="review" data-test="review">
            <h2>{format!("Request {} of {}", r.id, r.team)}</h2>
            <p>{format!("{} — from {}{}, by {}.", lines_summary(&r), r.spec.starts_on, r.spec.ends_on.map_or(String::new(), |d| format!(" until {d}")), r.created_by)}</p>
            <p><em>{r.spec.justification.clone()}</em></p>
            {(!errors.is_empty()).then(|| view! {
                <ul class="errors" data-test="review-errors">
                    {errors.iter().map(|e| view! { <li class="error">{e.message.clone()}</li> }).collect_view()}
                </ul>
            })}
            <Warnings fields=Signal::derive(move || warnings.clone())/>
            <h3>"Cohort impact"</h3>
            <table data-test="impact">
                <thead>
                    <tr>
                        <th>"Flavor"</th><th>"Resource"</th><th class="num">"Capacity"</th>
                        <th class="num">"Nominal, all teams"</th><th class="num">"Unassigned"</th>
                        <th class="num">"Cohort can lend"</th><th class="num">{format!("{team} may borrow")}</th>
                    </tr>
                </thead>
                <tbody>
                    {impact
                        .iter()
                        .map(|i| {
                            let borrow = |s: &shared::quota::Side| s.teams.iter().find(|t| t.team == r.team).map_or(0, |t| t.most_borrowable);
                            let change = |a: i64, b: i64| if a == b { a.to_string() } else { format!("{a} → {b}") };
                            view! {
                                <tr>
                                    <td>{i.flavor.clone()}</td>
                                    <td>{unit(&i.resource)}</td>
                                    <td class="num">{i.capacity}</td>
                                    <td class="num">{change(i.before.nominal_total, i.after.nominal_total)}</td>
                                    <td class="num">{change(i.before.unassigned, i.after.unassigned)}</td>
                                    <td class="num">{change(i.before.cohort_lendable, i.after.cohort_lendable)}</td>
                                    <td class="num">{change(borrow(&i.before), borrow(&i.after))}</td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
            <Chart id="impact-chart" plot=Box::new(move || Some(plot.clone()))/>
            <h3>"The team's ClusterQueue"</h3>
            <div class="two">
                <div><h4>"Now"</h4><pre class="yaml" data-test="queue-now">{view.queue_now_yaml.clone()}</pre></div>
                <div><h4>"After approval"</h4><pre class="yaml" data-test="queue-after">{view.queue_after_yaml.clone()}</pre></div>
            </div>
            <h3>"What the cluster would change"</h3>
            <crate::pages::DryRunDiff path=format!("{}/dry-run", path.get_value())/>
            {can_decide.then(|| view! {
                <p>
                    <label for="decision-comment">"Comment (required)"</label>
                    <textarea id="decision-comment" data-test="decision-comment" rows="2"
                        on:input=move |ev| comment.set(event_target_value(&ev))></textarea>
                </p>
                {move || failure.get().map(|error| view! { <ErrorBox error/> })}
                <button type="button" data-test="approve" disabled=blocked on:click=move |_| decide("approve")>"Approve"</button>
                " "
                <button type="button" data-test="reject" disabled=blocked on:click=move |_| decide("reject")>"Reject"</button>
            })}
        </section>
    }
}

/// Per flavor resource: every team's nominal quota before and after, against capacity.
fn impact_plot(impact: &[Impact], team: &str) -> Plot {
    let names: Vec<String> = impact
        .iter()
        .map(|i| format!("{} {}", i.flavor, unit(&i.resource)))
        .collect();
    let series =
        |f: &dyn Fn(&Impact) -> i64| -> Vec<f64> { impact.iter().map(|i| f(i) as f64).collect() };
    let mut plot = Plot::new();
    plot.add_trace(Bar::new(names.clone(), series(&|i| i.capacity)).name("capacity"));
    plot.add_trace(
        Bar::new(names.clone(), series(&|i| i.before.nominal_total)).name("nominal now"),
    );
    plot.add_trace(
        Bar::new(names.clone(), series(&|i| i.after.nominal_total))
            .name(format!("nominal with {team}'s request")),
    );
    plot.add_trace(
        Bar::new(names, series(&|i| i.after.cohort_lendable)).name("cohort can lend after"),
    );
    plot.set_layout(
        Layout::new()
            .bar_mode(BarMode::Group)
            .title("Cohort impact")
            .height(300),
    );
    plot
}
