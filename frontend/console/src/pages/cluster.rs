//! The Cluster page: where approved quota goes (a cluster, GitOps files, or nowhere), the
//! reconciler's last run, and every Kueue object gpufleet owns — desired against live, the
//! last apply and its error — with check-now, re-apply and take-ownership for approvers. Also
//! the approver's dry-run diff, shown in the quota review.

use gloo_net::http::Method;
use leptos::{prelude::*, task::spawn_local};
use shared::{
    ApiError,
    accounts::Role,
    cluster::{
        ClusterView, DryRun, FieldChange, ObjectRef, ObjectState, ObjectStatus, Reapply, Target,
    },
};

use crate::{api, auth::use_me, ui::ErrorBox};

fn changes_list(changes: &[FieldChange]) -> impl IntoView + use<> {
    let items: Vec<_> = changes
        .iter()
        .map(|c| {
            view! {
                <li><code>{c.path.clone()}</code>": "{FieldChange::shown(c.live.as_ref())}" → "{FieldChange::shown(c.desired.as_ref())}</li>
            }
        })
        .collect();
    view! { <ul class="changes">{items}</ul> }
}

fn state_label(state: ObjectState) -> &'static str {
    match state {
        ObjectState::InSync => "in sync",
        ObjectState::Pending => "pending",
        ObjectState::Drifted => "drifted",
        ObjectState::Conflict => "conflict",
        ObjectState::Failed => "failed",
        ObjectState::Unapproved => "not approved",
    }
}

#[component]
pub fn ClusterPage() -> impl IntoView {
    let me = use_me();
    let can_act = move || {
        me.with(|m| {
            m.as_ref().is_some_and(|m| {
                m.roles.contains(&Role::Approver) || m.roles.contains(&Role::Admin)
            })
        })
    };
    let is_admin = move || me.with(|m| m.as_ref().is_some_and(|m| m.roles.contains(&Role::Admin)));
    let latest = RwSignal::new(None::<ClusterView>);
    let failure = RwSignal::new(None::<ApiError>);
    let busy = RwSignal::new(false);
    let loaded = LocalResource::new(|| api::get::<ClusterView>("/api/cluster"));
    Effect::new(move || {
        if let Some(result) = loaded.get() {
            match result {
                Ok(view) => latest.set(Some(view)),
                Err(err) => failure.set(Some(err)),
            }
        }
    });
    let post = poster(latest, failure, busy);
    let reapply = move |object: Option<ObjectRef>, force: bool| {
        post(
            Method::POST,
            "/api/cluster/apply".to_owned(),
            Some(Reapply {
                objects: object.map(|o| vec![o]),
                force,
            }),
        );
    };
    // A queue left behind (not approved, applied by gpufleet); the server refuses the rest.
    let remove = move |o: ObjectRef| {
        let mut path = format!("/api/cluster/queues/{}/{}", o.kind, o.name);
        if o.namespaced() {
            path.push_str(&format!("?namespace={}", o.namespace));
        }
        post(Method::DELETE, path, None);
    };
    view! {
        <section>
            <h1>"Cluster"</h1>
            {move || failure.get().map(|error| view! { <ErrorBox error/> })}
            {move || latest.with(|v| v.as_ref().map(target_and_reconciler))}
            // Outside the part each answer redraws, so a click never lands on a stale button.
            <p>
                {move || can_act().then(|| view! {
                    <button type="button" data-test="check-now" disabled=move || busy.get()
                        on:click=move |_| post(Method::POST, "/api/cluster/reconcile".to_owned(), None)>"Check now"</button>
                    " "
                    <button type="button" data-test="reapply-all" disabled=move || busy.get()
                        on:click=move |_| reapply(None, false)>"Re-apply all"</button>
                    " "
                })}
                <a href="/api/cluster/gitops.zip" download="gpufleet-kueue.zip" data-test="gitops-zip">"Download as GitOps files (zip)"</a>
            </p>
            {move || latest.get().map(|v| view! { <Admission verdicts=v.admission/> })}
            {move || latest.get().map(|v| view! {
                <ObjectTable objects=v.objects gitops=matches!(v.target, Target::Gitops { .. })
                    can_act=Signal::derive(can_act)
                    can_delete=Signal::derive(is_admin) busy reapply remove/>
            })}
        </section>
    }
}

/// Sends a method to a cluster path (with a re-apply's body, if any): the answer is the page's
/// view, or the failure shown; `busy` while it is under way.
fn poster(
    latest: RwSignal<Option<ClusterView>>,
    failure: RwSignal<Option<ApiError>>,
    busy: RwSignal<bool>,
) -> impl Fn(Method, String, Option<Reapply>) + Copy + Send + Sync + 'static {
    move |method: Method, path: String, body: Option<Reapply>| {
        busy.set(true);
        spawn_local(async move {
            let result: Result<ClusterView, ApiError> = match body {
                Some(b) => api::send(method, &path, Some(&b)).await,
                None => api::send::<(), _>(method, &path, None).await,
            };
            busy.set(false);
            match result {
                Ok(view) => {
                    failure.set(None);
                    latest.set(Some(view));
                }
                Err(err) => failure.set(Some(err)),
            }
        });
    }
}

/// Where approved quota goes, the Kueue API version, and the reconciler's last check.
fn target_and_reconciler(v: &ClusterView) -> impl IntoView + use<> {
    // where it is on the server is shown to those who run the cluster only (empty for others)
    let target = match &v.target {
        Target::Cluster { server, .. } if server.is_empty() => {
            "Applying approved quota to the cluster by server-side apply.".to_owned()
        }
        Target::Cluster {
            server,
            context,
            identity,
        } => format!(
            "Applying approved quota to {server} (context {context}) as {identity}, by server-side apply."
        ),
        Target::Gitops { dir } if dir.is_empty() => {
            "GitOps mode: approved quota is written as files, one per object, for Argo CD or Flux to apply.".to_owned()
        }
        Target::Gitops { dir } => format!(
            "GitOps mode: approved quota is written to {dir}, one file per object, for Argo CD or Flux to apply."
        ),
        Target::Off => {
            "No cluster and no GitOps directory is configured: approved quota stays in the console."
                .to_owned()
        }
    };
    let r = v.reconciler.clone();
    view! {
        <p data-test="cluster-target">{target}</p>
        <p>"Kueue API: "<code>{v.api_version.clone()}</code></p>
        {v.version_warning.clone().map(|w| view! { <p class="warning" data-test="version-warning">{w}</p> })}
        <p data-test="reconciler">
            {format!(
                "Last checked {}; {} drifted, {} failed, {} pending.",
                r.last_run_at.clone().unwrap_or_else(|| "never".to_owned()),
                r.drift_count, r.failed_count, r.pending_count
            )}
            {r.last_error.clone().map(|e| view! { <br/><span class="error">{e}</span> })}
        </p>
    }
}

/// Whether each team's pods start under the quota in force: Kueue's rules on these objects,
/// and the flavors' labels against those GPU Feature Discovery writes on their nodes.
#[component]
fn Admission(verdicts: Vec<shared::kueue::Verdict>) -> impl IntoView {
    let rows = verdicts
        .into_iter()
        .map(|v| {
            let class = if v.admissible == shared::kueue::Admissible::Yes {
                ""
            } else {
                "error"
            };
            view! {
                <tr data-test="admission-row">
                    <td>{v.subject}</td>
                    <td class=class>{v.admissible.word()}</td>
                    <td>{v.message}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h3>"Would each team's pods start?"</h3>
        <table data-test="admission">
            <thead><tr><th>"Team, resource, flavor"</th><th>"Pods"</th><th>"Why"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
}

/// An object's changes against what is approved, both as YAML, and what went wrong.
fn object_details(o: &ObjectStatus, gitops: bool) -> impl IntoView + use<> {
    view! {
        {changes_list(&o.changes)}
        <details>
            <summary>{if gitops { "Approved and written" } else { "Approved and live" }}</summary>
            <div class="two">
                <div><h4>"Approved"</h4><pre class="yaml">{o.desired_yaml.clone()}</pre></div>
                <div><h4>{if gitops { "In the GitOps directory" } else { "Live" }}</h4><pre class="yaml">{
                    if o.live_yaml.is_empty() { "(not on the cluster)".to_owned() } else { o.live_yaml.clone() }
                }</pre></div>
            </div>
        </details>
        {o.error.clone().map(|e| view! { <p class="error">{e}</p> })}
        {(!o.conflicts.is_empty()).then(|| view! {
            <p>"Owned by another manager: "{o.conflicts.join(", ")}</p>
        })}
    }
}

#[component]
fn ObjectTable(
    objects: Vec<ObjectStatus>,
    /// GitOps mode: objects are written to files for Argo CD or Flux, never applied here.
    gitops: bool,
    can_act: Signal<bool>,
    can_delete: Signal<bool>,
    busy: RwSignal<bool>,
    reapply: impl Fn(Option<ObjectRef>, bool) + Copy + Send + Sync + 'static,
    remove: impl Fn(ObjectRef) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    if objects.is_empty() {
        return view! { <p data-test="objects">"Nothing checked yet."</p> }.into_any();
    }
    let rows: Vec<_> = objects
        .into_iter()
        .map(|o| {
            let id = o.object.clone();
            let test = format!("object-{}-{}", o.object.kind.to_ascii_lowercase(), o.object.name);
            let can_reapply = !matches!(o.state, ObjectState::InSync | ObjectState::Unapproved);
            let conflict = o.state == ObjectState::Conflict;
            let deletable = o.state == ObjectState::Unapproved
                && matches!(o.object.kind.as_str(), "ClusterQueue" | "LocalQueue");
            let (a, b, c) = (id.clone(), id.clone(), id.clone());
            view! {
                <tr data-test=test>
                    <td>{o.object.to_string()}</td>
                    <td>{o.team.clone().unwrap_or_default()}</td>
                    <td class=format!("state {}", o.state.as_str())>{
                        if gitops && o.state == ObjectState::InSync { "written, not applied by gpufleet" } else { state_label(o.state) }
                    }</td>
                    <td>{object_details(&o, gitops)}</td>
                    <td>{o.applied_at.clone().unwrap_or_default()}</td>
                    <td>
                        {move || (can_act.get() && can_reapply).then(|| {
                            let (a, b) = (a.clone(), b.clone());
                            view! {
                                <button type="button" class="reapply" disabled=move || busy.get()
                                    on:click=move |_| reapply(Some(a.clone()), false)>"Re-apply"</button>
                                {conflict.then(|| view! {
                                    " "
                                    <button type="button" class="take-ownership" disabled=move || busy.get()
                                        title="Apply with force: gpufleet takes the fields the other manager holds"
                                        on:click=move |_| reapply(Some(b.clone()), true)>"Take ownership"</button>
                                })}
                            }
                        })}
                        {move || (can_delete.get() && deletable).then(|| {
                            let c = c.clone();
                            view! {
                                <button type="button" class="delete" disabled=move || busy.get()
                                    title="Delete this queue gpufleet applied and no longer approves (refused while workloads are admitted)"
                                    on:click=move |_| remove(c.clone())>"Delete"</button>
                            }
                        })}
                    </td>
                </tr>
            }
        })
        .collect();
    view! {
        <table data-test="objects">
            <thead>
                <tr><th>"Object"</th><th>"Team"</th><th>"State"</th><th>{if gitops { "Written against approved" } else { "Live against approved" }}</th><th>{if gitops { "Last written" } else { "Last applied" }}</th><th></th></tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

/// What approving a request would change on the cluster (`…/dry-run`), object by object.
#[component]
pub fn DryRunDiff(path: String) -> impl IntoView {
    let path = StoredValue::new(path);
    let dry =
        LocalResource::new(move || async move { api::get::<DryRun>(&path.get_value()).await });
    view! {
        <div data-test="dry-run">
            {move || match dry.get() {
                None => view! { <p class="muted">"asking the cluster for a dry run…"</p> }.into_any(),
                Some(answer) => dry_run_view(answer),
            }}
        </div>
    }
}

/// A dry run's answer (a request's approval, a flavor's settings), object by object.
pub fn dry_run_view(answer: Result<DryRun, ApiError>) -> AnyView {
    let d = match answer {
        Ok(d) => d,
        Err(error) => return view! { <ErrorBox error/> }.into_any(),
    };
    let source = if d.against == "server" {
        "The cluster's own dry run (dryRun=All), live against would-be:"
    } else {
        "Compared with the approved objects (no cluster answered):"
    };
    let objects: Vec<_> = d
        .objects
        .iter()
        .map(|o| {
            view! {
                <li>
                    <strong>{format!("{} ({})", o.object, o.action)}</strong>
                    {changes_list(&o.changes)}
                </li>
            }
        })
        .collect();
    view! {
        <p>{source}</p>
        {d.error.clone().map(|e| view! { <p class="warning">{e}</p> })}
        {if d.objects.is_empty() {
            view! { <p>"Nothing on the cluster would change."</p> }.into_any()
        } else {
            view! { <ul>{objects}</ul> }.into_any()
        }}
    }
    .into_any()
}
