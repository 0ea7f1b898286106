//! The approvers' re-plan findings (`GET /api/quota/findings`): what the last four weeks of
//! measured use and recorded Workloads say about the quotas in force, each with its evidence.
//! A drafted request is saved as a draft for the team (by its members or an admin) and goes
//! through the normal approval; a window of history opens on the Plan page. Kept lean: the
//! console's download has a budget (docs/performance.md).

use gloo_net::http::Method;
use leptos::{prelude::*, task::spawn_local};
use shared::{
    accounts::{Me, Role},
    common::day::Day,
    planning::findings::{Kind, Window},
    quota::{NewRequest, QuotaSpec},
};

use super::Notice;
use crate::api;

/// The part of `shared::planning::findings::Findings` the page shows.
#[derive(Clone, serde::Deserialize)]
struct Findings {
    from: Day,
    to: Day,
    findings: Vec<Finding>,
    problems: Vec<String>,
    unrecorded: Option<String>,
}

#[derive(Clone, serde::Deserialize)]
struct Finding {
    kind: Kind,
    team: String,
    summary: String,
    draft: Option<QuotaSpec>,
    draft_problems: Vec<String>,
    scenario: Option<Window>,
}

fn label(kind: Kind) -> &'static str {
    match kind {
        Kind::UnusedQuota => "Unused quota: ",
        Kind::IdleAllocation => "Idle GPUs: ",
        Kind::Waiting => "Waiting work: ",
        Kind::WouldPack => "Would pack: ",
    }
}

#[component]
pub fn FindingsView(me: Me, changed: Callback<()>) -> impl IntoView {
    let found = LocalResource::new(|| api::get::<Findings>("/api/quota/findings"));
    let Notice(notice) = expect_context::<Notice>();
    let save = move |team: String, spec: QuotaSpec| {
        spawn_local(async move {
            let path = format!("/api/quota/teams/{team}/requests");
            let body = NewRequest { spec };
            let sent = api::send::<_, super::Saved>(Method::POST, &path, Some(&body));
            notice.set(Some(match sent.await {
                Ok(v) => format!(
                    "Draft {} saved for {team}: submit it from Teams.",
                    v.request.id
                ),
                Err(e) => e.message,
            }));
            changed.run(());
        });
    };
    let row = move |f: Finding| {
        // Offered to those who may draft for the team, when the rules take it as it is.
        let may = (me.teams.contains(&f.team) || me.roles.contains(&Role::Admin))
            && f.draft_problems.is_empty();
        let drafted = f.draft.as_ref().map(|s| {
            let lines: Vec<String> = s
                .lines
                .iter()
                .map(|l| format!("{} {}", l.flavor, l.nominal))
                .collect();
            format!(
                ". Drafted request: {}. {}",
                lines.join(", "),
                f.draft_problems.join("; ")
            )
        });
        let button = f.draft.filter(|_| may).map(|spec| {
            let team = f.team.clone();
            view! { <button type="button" data-test="save-finding-draft" on:click=move |_| save(team.clone(), spec.clone())>"Save as draft"</button> }
        });
        let plan = f.scenario.map(|w| view! { " " <a href=format!("/plan?from={}&to={}", w.from, w.to)>"Plan from this history"</a> });
        view! { <li data-test="finding"><strong>{label(f.kind)}</strong>{f.summary}{drafted}{button}{plan}</li> }
    };
    view! {
        <h2>"Findings"</h2>
        <p class="muted">"What the last four weeks of measured use and recorded Workloads say about the quotas in force. Nothing changes until a request is approved."</p>
        {move || found.get().map(|f| match f {
            Err(e) => view! { <p class="error">{e.message}</p> }.into_any(),
            Ok(f) => view! {
                <p>{format!("{} to {} (UTC). ", f.from, f.to)}{f.unrecorded}" "{f.problems.join("; ")}</p>
                <ul data-test="findings">{f.findings.into_iter().map(row.clone()).collect_view()}</ul>
            }.into_any(),
        })}
    }
}
