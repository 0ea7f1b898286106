//! Approved quota reaching the cluster, against a real PostgreSQL and the Kubernetes API
//! double (`tests/kube-double`) under the real `kube::Client`, through an ordinary kubeconfig:
//! apply and revoke, every failure mode as a state that lands once the fault clears (and
//! nothing applied twice), drift and conflicts, the dry run before approval, GitOps output,
//! one reconciler at a time, and the ClusterRole against the calls actually made.
//!
//! The fleet is the demo inventory's: flavors h100-shared (64 GPUs), h200-train (96),
//! rtx-inference (32) and h100-mig (8 H100s as 56 `1g.10gb` MIG instances); teams research and search (namespaces team-research, team-search,
//! ClusterQueues and LocalQueues named after the team, cohort gpufleet).

use std::{collections::BTreeSet, path::PathBuf, sync::Arc, time::Duration};

use crate::common::{PASSWORD, Reply, Session, login, public_fixture, request, send, user};
use axum::{
    Router,
    http::{Method, StatusCode},
};
use backend::{
    AppState,
    cluster::{self, Cluster, k8s::Connection},
    config::HttpSettings,
};
use kube_double::{Fault, KubeDouble};
use serde_json::{Value, json};
use shared::{
    accounts::Role,
    cluster::{ClusterView, DryRun, ObjectState, ObjectStatus},
    kueue::KueueVersion,
    quota::RequestView,
};
use sqlx::PgPool;

pub(crate) struct Rig {
    pub(crate) router: Router,
    pub(crate) state: AppState,
    pub(crate) rita: Session,
    pub(crate) sam: Session,
    pub(crate) alex: Session,
    pub(crate) ada: Session,
}

pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "gpufleet-cluster-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    dir
}

async fn rig(pool: &PgPool, name: &str, cluster: impl FnOnce(&PathBuf) -> Arc<Cluster>) -> Rig {
    backend::fleet::load_demo(pool).await.expect("demo fleet");
    let dir = scratch(name);
    signed_in(
        pool,
        AppState::new(pool.clone()).with_cluster(cluster(&dir)),
    )
    .await
}

/// The console over `state` and its four users (rita of research and sam of search,
/// requesters; alex, approver; ada, admin), each signed in.
pub(crate) async fn signed_in(pool: &PgPool, state: AppState) -> Rig {
    user(pool, "rita", &[Role::Requester], &["research"]).await;
    user(pool, "sam", &[Role::Requester], &["search"]).await;
    user(pool, "alex", &[Role::Approver], &[]).await;
    user(pool, "ada", &[Role::Admin], &[]).await;
    let router = backend::app(
        state.clone(),
        &HttpSettings {
            public_dir: public_fixture(),
            ..Default::default()
        },
    );
    Rig {
        rita: login(&router, "rita", PASSWORD).await,
        sam: login(&router, "sam", PASSWORD).await,
        alex: login(&router, "alex", PASSWORD).await,
        ada: login(&router, "ada", PASSWORD).await,
        router,
        state,
    }
}

/// The double with the teams' namespaces, and a cluster that reaches it through a kubeconfig.
async fn double_and_cluster(
    dir: &std::path::Path,
    timeout: Duration,
) -> (KubeDouble, Arc<Cluster>) {
    let double = KubeDouble::start().await.expect("double");
    double.create_namespace("team-research");
    double.create_namespace("team-search");
    let cluster = connect(&double, dir, timeout).await;
    (double, Arc::new(cluster))
}

/// A cluster that reaches `double` through a kubeconfig written in `dir`.
async fn connect(double: &KubeDouble, dir: &std::path::Path, timeout: Duration) -> Cluster {
    let kubeconfig = dir.join("kubeconfig");
    double.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let connection = Connection {
        kubeconfig: Some(kubeconfig),
        context: None,
        timeout,
    };
    Cluster::kube(&connection, KueueVersion::V1beta2)
        .await
        .expect("connect")
}

async fn kube_rig(pool: &PgPool, name: &str, timeout: Duration) -> (Rig, KubeDouble) {
    let dir = scratch(&format!("{name}-kube"));
    let (double, cluster) = double_and_cluster(&dir, timeout).await;
    let rig = rig(pool, name, |_| cluster).await;
    (rig, double)
}

pub(crate) async fn call(
    rig: &Rig,
    method: Method,
    uri: &str,
    who: &Session,
    body: Option<Value>,
) -> Reply {
    send(&rig.router, request(method, uri, Some(who), body)).await
}

/// A request of `nominal` GPUs of `flavor` for `team`, drafted and submitted by `who`; its id
/// and version.
pub(crate) async fn submitted(
    rig: &Rig,
    who: &Session,
    team: &str,
    flavor: &str,
    nominal: i64,
) -> (i64, i32) {
    let line = json!({"flavor": flavor, "resource": "nvidia.com/gpu", "nominal": nominal, "borrowing_limit": 8});
    submitted_lines(rig, who, team, json!([line])).await
}

/// A request of these quota `lines` for `team`, drafted and submitted by `who`; its id and
/// version.
pub(crate) async fn submitted_lines(
    rig: &Rig,
    who: &Session,
    team: &str,
    lines: Value,
) -> (i64, i32) {
    submitted_spec(rig, who, team, spec_of(lines)).await
}

/// A request's spec of `lines`, from 2026-01-01 on, for pre-training.
pub(crate) fn spec_of(lines: Value) -> Value {
    json!({
        "lines": lines,
        "checkpoint_interval_min": 20,
        "justification": "pre-training of the 8B model",
        "starts_on": "2026-01-01",
    })
}

/// `spec` requested for `team` by `who` and submitted: its id and version.
pub(crate) async fn submitted_spec(
    rig: &Rig,
    who: &Session,
    team: &str,
    spec: Value,
) -> (i64, i32) {
    let reply = call(
        rig,
        Method::POST,
        &format!("/api/quota/teams/{team}/requests"),
        who,
        Some(json!({"spec": spec})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    let view: RequestView = reply.json();
    let id = view.request.id;
    let reply = call(
        rig,
        Method::POST,
        &format!("/api/quota/teams/{team}/requests/{id}/submit"),
        who,
        Some(json!({"version": view.request.version})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    (id, reply.json::<RequestView>().request.version)
}

pub(crate) async fn decide(
    rig: &Rig,
    team: &str,
    id: i64,
    verb: &str,
    version: i32,
) -> RequestView {
    let reply = call(
        rig,
        Method::POST,
        &format!("/api/quota/teams/{team}/requests/{id}/{verb}"),
        &rig.alex,
        Some(json!({"version": version, "comment": "fits the plan"})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    reply.json()
}

pub(crate) async fn reconcile(rig: &Rig) -> ClusterView {
    let reply = call(rig, Method::POST, "/api/cluster/reconcile", &rig.alex, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    reply.json()
}

pub(crate) async fn request_view(rig: &Rig, team: &str, id: i64) -> RequestView {
    let reply = call(
        rig,
        Method::GET,
        &format!("/api/quota/teams/{team}/requests/{id}"),
        &rig.ada,
        None,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    reply.json()
}

pub(crate) fn object<'a>(view: &'a ClusterView, kind: &str, name: &str) -> &'a ObjectStatus {
    view.objects
        .iter()
        .find(|o| o.object.kind == kind && o.object.name == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {:#?}", view.objects))
}

fn states(view: &ClusterView) -> BTreeSet<ObjectState> {
    view.objects.iter().map(|o| o.state).collect()
}

/// The live nominal quota of `flavor` in `queue`'s ClusterQueue on the double, in GPUs.
fn nominal(double: &KubeDouble, queue: &str, flavor: &str) -> Option<i128> {
    let cq = double
        .object("ClusterQueue", None, queue)
        .expect("live queue");
    nominal_of(&cq, flavor)
}

/// The nominal quota of `flavor` in a live ClusterQueue, in GPUs (Kueue's webhook stores it on
/// create as a quantity string, `"0"`).
pub(crate) fn nominal_of(cluster_queue: &Value, flavor: &str) -> Option<i128> {
    let quantity = cluster_queue["spec"]["resourceGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["flavors"].as_array().into_iter().flatten())
        .find(|f| f["name"] == flavor)
        .map(|f| &f["resources"][0]["nominalQuota"])?;
    Some(shared::common::quantity::milli(quantity)? / 1000)
}

/// 4 ResourceFlavors, the gpufleet Cohort, 2 × (ClusterQueue + LocalQueue), and the training
/// and inference WorkloadPriorityClasses.
const OBJECTS: usize = 4 + 1 + 2 * 2 + 2;

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn approved_quota_lands_by_server_side_apply_and_a_revocation_sets_it_to_zero(pool: PgPool) {
    let (rig, double) = kube_rig(&pool, "apply", Duration::from_secs(5)).await;
    let view = reconcile(&rig).await;
    assert_eq!(view.objects.len(), OBJECTS, "{:#?}", view.objects);
    assert_eq!(states(&view), BTreeSet::from([ObjectState::InSync]));
    assert_eq!(view.api_version, "kueue.x-k8s.io/v1beta2");
    assert_eq!(view.version_warning, None);
    match &view.target {
        shared::cluster::Target::Cluster {
            identity, context, ..
        } => {
            // The identity the server reports (SelfSubjectReview), not the kubeconfig's name.
            assert_eq!(identity, kube_double::USER);
            assert_eq!(context, "double");
        }
        other => panic!("{other:?}"),
    }
    // No quota in force: the queues exist with nothing of their own and nothing to borrow.
    assert_eq!(nominal(&double, "research", "h200-train"), Some(0));
    let cq = double.object("ClusterQueue", None, "research").expect("cq");
    assert_eq!(cq["spec"]["cohortName"], "gpufleet");
    assert_eq!(cq["metadata"]["managedFields"][0]["manager"], "gpufleet");
    assert_eq!(cq["metadata"]["managedFields"][0]["operation"], "Apply");
    let lq = double
        .object("LocalQueue", Some("team-research"), "research")
        .expect("lq");
    assert_eq!(lq["spec"]["clusterQueue"], "research");
    // Inference above training.
    let priorities: Vec<i64> = ["priority-10", "priority-100"]
        .iter()
        .map(|n| {
            double
                .object("WorkloadPriorityClass", None, n)
                .expect("class")["value"]
                .as_i64()
                .expect("value")
        })
        .collect();
    assert_eq!(priorities, [10, 100]);

    let (id, version) = submitted(&rig, &rig.rita, "research", "h200-train", 48).await;
    let approved = decide(&rig, "research", id, "approve", version).await;
    let view = reconcile(&rig).await;
    assert_eq!(states(&view), BTreeSet::from([ObjectState::InSync]));
    assert_eq!(nominal(&double, "research", "h200-train"), Some(48));
    let applied = request_view(&rig, "research", id).await.request;
    assert!(applied.applied_at.is_some(), "{applied:?}");
    assert_eq!(applied.apply_error, None);
    assert_eq!(
        applied.applied_to.as_deref(),
        Some("applied to the cluster")
    );

    // Nothing applied twice: a run with nothing new reads, and writes nothing.
    double.clear_calls();
    reconcile(&rig).await;
    let writes: Vec<_> = double
        .calls()
        .into_iter()
        .filter(|c| c.verb != "get" && c.verb != "list")
        .collect();
    assert_eq!(writes, [], "a settled run writes nothing");

    decide(&rig, "research", id, "revoke", approved.request.version).await;
    let view = reconcile(&rig).await;
    assert_eq!(states(&view), BTreeSet::from([ObjectState::InSync]));
    // The ClusterQueue stays, with nominal 0.
    assert_eq!(nominal(&double, "research", "h200-train"), Some(0));

    let health: shared::health::Health =
        send(&rig.router, request(Method::GET, "/api/health", None, None))
            .await
            .json();
    let cluster = health.cluster.expect("cluster health");
    assert_eq!(cluster.mode, "cluster");
    assert_eq!(cluster.reconciler.last_error, None);
    assert_eq!(cluster.reconciler.drift_count, 0);
    assert!(cluster.reconciler.last_run_at.is_some());
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn every_failure_is_a_state_and_lands_once_the_fault_clears(pool: PgPool) {
    let (rig, double) = kube_rig(&pool, "faults", Duration::from_secs(1)).await;
    let (id, version) = submitted(&rig, &rig.rita, "research", "h200-train", 48).await;

    // Kueue not installed.
    double.serve_versions("kueue.x-k8s.io", &[]);
    decide(&rig, "research", id, "approve", version).await;
    let view = reconcile(&rig).await;
    assert_eq!(states(&view), BTreeSet::from([ObjectState::Failed]));
    let message = "Kueue is not installed on this cluster (kueue.x-k8s.io/v1beta2 is not served)";
    assert_eq!(
        object(&view, "ClusterQueue", "research").error.as_deref(),
        Some(message)
    );
    let request = request_view(&rig, "research", id).await.request;
    assert_eq!(request.apply_error.as_deref(), Some(message));
    assert_eq!(request.applied_at, None);
    assert!(
        view.reconciler
            .last_error
            .as_deref()
            .is_some_and(|e| e.ends_with(message)),
        "{:?}",
        view.reconciler
    );
    double.serve_versions("kueue.x-k8s.io", &["v1beta2", "v1beta1"]);
    let view = reconcile(&rig).await;
    assert_eq!(states(&view), BTreeSet::from([ObjectState::InSync]));
    assert_eq!(nominal(&double, "research", "h200-train"), Some(48));
    assert!(
        request_view(&rig, "research", id)
            .await
            .request
            .applied_at
            .is_some()
    );

    // A Kueue release that lacks one kind: that object fails and says so; the rest land.
    double.serve_kind("Cohort", false);
    double.delete("Cohort", None, "gpufleet");
    let view = reconcile(&rig).await;
    let cohort = object(&view, "Cohort", "gpufleet");
    assert_eq!(cohort.state, ObjectState::Failed);
    assert_eq!(
        cohort.error.as_deref(),
        Some("this cluster's Kueue does not serve Cohort in kueue.x-k8s.io/v1beta2: upgrade Kueue")
    );
    assert_eq!(
        object(&view, "ClusterQueue", "research").state,
        ObjectState::InSync
    );
    double.serve_kind("Cohort", true);
    let view = reconcile(&rig).await;
    assert_eq!(states(&view), BTreeSet::from([ObjectState::InSync]));
    assert!(double.object("Cohort", None, "gpufleet").is_some());

    // Each remaining fault, with the state it must end in and the words it must say; then the
    // fault clears and the next run applies what is outstanding.
    let mut nominal_now = 48;
    let cases: Vec<(&str, ObjectState, &str)> = vec![
        (
            "forbidden",
            ObjectState::Failed,
            "clusterqueues.kueue.x-k8s.io \"research\" is forbidden: User \"system:serviceaccount:gpufleet:gpufleet\" cannot patch resource \"clusterqueues\" in API group \"kueue.x-k8s.io\" at the cluster scope",
        ),
        (
            "500",
            ObjectState::Pending,
            "the cluster answered 500: Internal error occurred",
        ),
        (
            "409",
            ObjectState::Failed,
            "Operation cannot be fulfilled on clusterqueues.kueue.x-k8s.io \"research\"",
        ),
        (
            "slow",
            ObjectState::Pending,
            "cannot reach the cluster at https://127.0.0.1:",
        ),
        (
            "refused",
            ObjectState::Pending,
            "cannot reach the cluster at https://127.0.0.1:",
        ),
    ];
    for (fault, state, words) in cases {
        // A new approval for research changes its ClusterQueue, which must now be applied.
        nominal_now += 4;
        let (id, version) = submitted(&rig, &rig.rita, "research", "h200-train", nominal_now).await;
        decide(&rig, "research", id, "approve", version).await;
        match fault {
            "forbidden" => double.forbid("patch", "clusterqueues"),
            "500" => double.set_fault(Some(Fault::Status(500))),
            "409" => double.set_fault(Some(Fault::Status(409))),
            "slow" => double.set_fault(Some(Fault::Slow(Duration::from_secs(3)))),
            _ => double.refuse_connections(),
        }
        let view = reconcile(&rig).await;
        let research = object(&view, "ClusterQueue", "research");
        assert_eq!(research.state, state, "{fault}: {research:#?}");
        let error = research.error.clone().unwrap_or_default();
        assert!(error.contains(words), "{fault}: {error}");
        let request = request_view(&rig, "research", id).await.request;
        assert_eq!(request.applied_at, None, "{fault}");
        assert!(
            request.apply_error.is_some_and(|e| e.contains(words)),
            "{fault}"
        );
        assert_eq!(
            request.state,
            shared::quota::State::Approved,
            "{fault}: approvals never wait"
        );
        match fault {
            "forbidden" => double.allow_all(),
            "refused" => double.accept_connections().await.expect("listen again"),
            _ => double.set_fault(None),
        }
        let view = reconcile(&rig).await;
        assert_eq!(
            states(&view),
            BTreeSet::from([ObjectState::InSync]),
            "{fault}: {:#?}",
            view.objects
        );
        assert_eq!(
            nominal(&double, "research", "h200-train"),
            Some(i128::from(nominal_now)),
            "{fault}"
        );
        let request = request_view(&rig, "research", id).await.request;
        assert!(request.applied_at.is_some(), "{fault}");
        assert_eq!(request.apply_error, None, "{fault}");
    }
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn drift_is_reported_and_ownership_is_taken_only_when_an_approver_says_so(pool: PgPool) {
    let (rig, double) = kube_rig(&pool, "drift", Duration::from_secs(5)).await;
    let (id, version) = submitted(&rig, &rig.rita, "research", "h200-train", 48).await;
    decide(&rig, "research", id, "approve", version).await;
    reconcile(&rig).await;

    // Someone edits the queue with kubectl edit: reported as drift, field by field.
    double
        .edit("kubectl-edit", "ClusterQueue", None, "research", |cq| {
            // group 0 covers the MIG flavor's nvidia.com/mig-1g.10gb, group 1 nvidia.com/gpu
            // (h100-shared, h200-train, rtx-inference)
            cq["spec"]["resourceGroups"][1]["flavors"][1]["resources"][0]["nominalQuota"] =
                json!(80);
        })
        .expect("edit");
    let view = reconcile(&rig).await;
    let research = object(&view, "ClusterQueue", "research");
    assert_eq!(research.state, ObjectState::Drifted, "{research:#?}");
    assert_eq!(research.team.as_deref(), Some("research"));
    assert_eq!(research.changes.len(), 1, "{:#?}", research.changes);
    assert!(research.changes[0].path.ends_with("nominalQuota"));
    assert_eq!(research.changes[0].live, Some(json!(80)));
    assert_eq!(research.changes[0].desired, Some(json!(48)));
    assert_eq!(view.reconciler.drift_count, 1);
    // Both objects, whole, for a person to compare (server fields left out).
    assert!(
        research.desired_yaml.contains("nominalQuota: 48"),
        "{}",
        research.desired_yaml
    );
    assert!(
        research.live_yaml.contains("nominalQuota: 80"),
        "{}",
        research.live_yaml
    );
    assert!(
        !research.live_yaml.contains("managedFields"),
        "{}",
        research.live_yaml
    );
    assert_eq!(
        nominal(&double, "research", "h200-train"),
        Some(80),
        "reported, not reverted"
    );

    // Re-applying meets kubectl-edit's ownership: a conflict, shown, not overwritten.
    let target = json!({"objects": [{"kind": "ClusterQueue", "name": "research"}]});
    let reply = reapply(&rig, &rig.alex, target.clone()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let view: ClusterView = reply.json();
    let research = object(&view, "ClusterQueue", "research");
    assert_eq!(research.state, ObjectState::Conflict, "{research:#?}");
    assert_eq!(research.conflicts, ["kubectl-edit: .spec.resourceGroups"]);
    assert_eq!(
        research.error.as_deref(),
        Some("Apply failed with 1 conflict: conflict with \"kubectl-edit\": .spec.resourceGroups")
    );
    assert_eq!(nominal(&double, "research", "h200-train"), Some(80));
    // A requester may not apply, let alone force.
    let reply = reapply(&rig, &rig.rita, target.clone()).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);

    let mut force = target.clone();
    force["force"] = json!(true);
    let reply = reapply(&rig, &rig.alex, force).await;
    let view: ClusterView = reply.json();
    assert_eq!(
        object(&view, "ClusterQueue", "research").state,
        ObjectState::InSync
    );
    assert_eq!(nominal(&double, "research", "h200-train"), Some(48));
    let cq = double.object("ClusterQueue", None, "research").expect("cq");
    let managers: Vec<&Value> = cq["metadata"]["managedFields"]
        .as_array()
        .expect("managed")
        .iter()
        .map(|m| &m["manager"])
        .collect();
    assert_eq!(managers, ["gpufleet"], "{cq:#}");
    let audit = cluster_audit(&rig).await;
    let actions: Vec<&str> = audit.entries.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["take_ownership", "reapply"]);
    assert_eq!(audit.entries[0].actor, "alex");
    assert_eq!(audit.entries[0].subject, "ClusterQueue research");

    // A LocalQueue deleted out of band is drift; re-applying everything brings it back.
    assert!(double.delete("LocalQueue", Some("team-search"), "search"));
    let view = reconcile(&rig).await;
    assert_eq!(
        object(&view, "LocalQueue", "search").state,
        ObjectState::Drifted
    );
    let reply = reapply(&rig, &rig.alex, json!({})).await;
    let view: ClusterView = reply.json();
    assert_eq!(states(&view), BTreeSet::from([ObjectState::InSync]));
    assert!(
        double
            .object("LocalQueue", Some("team-search"), "search")
            .is_some()
    );

    // A queue nobody approved is reported, never deleted.
    let shadow = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "shadow"}, "spec": {"resourceGroups": []}});
    let client = kube_client(&double).await;
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client, &cluster_queues());
    api.patch(
        "shadow",
        &kube::api::PatchParams::apply("someone"),
        &kube::api::Patch::Apply(&shadow),
    )
    .await
    .expect("applied by someone else");
    let view = reconcile(&rig).await;
    assert_eq!(
        object(&view, "ClusterQueue", "shadow").state,
        ObjectState::Unapproved
    );
    assert!(double.object("ClusterQueue", None, "shadow").is_some());
    let reply = call(&rig, Method::GET, "/api/cluster", &rig.sam, None).await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "everyone signed in sees the cluster page"
    );
}

fn cluster_queues() -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: "kueue.x-k8s.io".into(),
        version: "v1beta2".into(),
        api_version: "kueue.x-k8s.io/v1beta2".into(),
        kind: "ClusterQueue".into(),
        plural: "clusterqueues".into(),
    }
}

async fn kube_client(double: &KubeDouble) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&double.kubeconfig()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

/// The double validates: a ClusterQueue with a borrowing limit and no cohort is refused with
/// 422 and the CRD's own message, through the real client.
#[tokio::test]
async fn the_double_refuses_a_schema_invalid_cluster_queue_with_422() {
    let double = KubeDouble::start().await.expect("double");
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(kube_client(&double).await, &cluster_queues());
    let invalid = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "loner"}, "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
        "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 4}]}]}]}});
    let err = api
        .patch(
            "loner",
            &kube::api::PatchParams::apply("gpufleet"),
            &kube::api::Patch::Apply(&invalid),
        )
        .await
        .expect_err("invalid");
    let kube::Error::Api(status) = err else {
        panic!("{err:?}");
    };
    assert_eq!(status.code, 422);
    assert_eq!(status.reason, "Invalid");
    assert_eq!(
        status.message,
        "ClusterQueue.kueue.x-k8s.io \"loner\" is invalid: spec: Invalid value: borrowingLimit must be nil when cohort is empty"
    );
    assert!(double.object("ClusterQueue", None, "loner").is_none());
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn an_approver_sees_the_server_side_dry_run_before_approving(pool: PgPool) {
    let (rig, double) = kube_rig(&pool, "dry-run", Duration::from_secs(5)).await;
    reconcile(&rig).await;
    let (id, _) = submitted(&rig, &rig.sam, "search", "h100-shared", 32).await;
    double.clear_calls();
    let reply = dry_run(&rig, &rig.alex, id).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let dry: DryRun = reply.json();
    assert_eq!(dry.against, "server");
    assert_eq!(dry.error, None);
    assert_eq!(
        dry.objects.len(),
        1,
        "only search's ClusterQueue changes: {dry:#?}"
    );
    let search = &dry.objects[0];
    assert_eq!(
        (search.object.kind.as_str(), search.object.name.as_str()),
        ("ClusterQueue", "search")
    );
    assert_eq!(search.action, "update");
    let quota = search
        .changes
        .iter()
        .find(|c| c.path.ends_with("nominalQuota") && c.desired == Some(json!(32)))
        .unwrap_or_else(|| panic!("{:#?}", search.changes));
    // live as Kueue's webhook stored it on create: quantity strings
    assert_eq!(quota.live, Some(json!("0")));
    assert!(
        search
            .changes
            .iter()
            .any(|c| c.path.ends_with("borrowingLimit")
                && c.live == Some(json!("0"))
                && c.desired == Some(json!(8)))
    );
    // A dry run, really: asked of the server, nothing stored.
    assert!(
        double
            .calls()
            .iter()
            .any(|c| c.verb == "patch" && c.dry_run)
    );
    assert!(
        double
            .calls()
            .iter()
            .all(|c| c.verb != "patch" || c.dry_run)
    );
    assert_eq!(nominal(&double, "search", "h100-shared"), Some(0));
    // The team's own requester may look; another team's may not.
    let reply = dry_run(&rig, &rig.sam, id).await;
    assert_eq!(reply.status, StatusCode::OK);
    let reply = dry_run(&rig, &rig.rita, id).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    // Kueue gone: the approver still sees the change, against the approved objects, and why.
    double.serve_versions("kueue.x-k8s.io", &[]);
    let reply = dry_run(&rig, &rig.alex, id).await;
    let dry: DryRun = reply.json();
    assert_eq!(dry.against, "files");
    assert_eq!(dry.objects.len(), 1);
    assert_eq!(
        dry.error.as_deref(),
        Some("Kueue is not installed on this cluster (kueue.x-k8s.io/v1beta2 is not served)")
    );
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn gitops_mode_writes_one_valid_file_per_object_with_stable_bytes(pool: PgPool) {
    let mut gitops = PathBuf::new();
    let rig = rig(&pool, "gitops", |dir| {
        gitops = dir.join("gitops");
        Arc::new(Cluster::gitops(gitops.clone(), KueueVersion::V1beta2))
    })
    .await;
    std::fs::create_dir_all(&gitops).expect("dir");
    std::fs::write(gitops.join("clusterqueue-gone.yaml"), "stale").expect("stale file");
    let view = reconcile(&rig).await;
    assert_eq!(states(&view), BTreeSet::from([ObjectState::InSync]));
    assert!(matches!(
        view.target,
        shared::cluster::Target::Gitops { .. }
    ));
    let read = |dir: &PathBuf| -> Vec<(String, String)> {
        let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| {
                let path = e.expect("entry").path();
                (
                    path.file_name()
                        .expect("name")
                        .to_string_lossy()
                        .into_owned(),
                    std::fs::read_to_string(&path).expect("read"),
                )
            })
            .collect();
        files.sort();
        files
    };
    let first = read(&gitops);
    let names: Vec<&str> = first.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "clusterqueue-research.yaml",
            "clusterqueue-search.yaml",
            "cohort-gpufleet.yaml",
            "kustomization.yaml",
            "localqueue-team-research-research.yaml",
            "localqueue-team-search-search.yaml",
            "resourceflavor-h100-mig.yaml",
            "resourceflavor-h100-shared.yaml",
            "resourceflavor-h200-train.yaml",
            "resourceflavor-rtx-inference.yaml",
            "workloadpriorityclass-priority-10.yaml",
            "workloadpriorityclass-priority-100.yaml",
        ],
        "one file per object, the stale one removed"
    );
    // Every object file is valid against its CRD, as the API server would check it.
    let crds = kube_double::schema::crds();
    for (name, text) in first.iter().filter(|(n, _)| n != "kustomization.yaml") {
        let object: Value = serde_yaml::from_str(text).expect("yaml");
        let kind = object["kind"].as_str().expect("kind");
        let crd = crds.iter().find(|c| c.kind == kind).expect("crd");
        let mut causes = Vec::new();
        kube_double::schema::validate(
            crd.schema("v1beta2").expect("schema"),
            &object,
            "",
            &mut causes,
        );
        causes.extend(kube_double::schema::cel(kind, "v1beta2", &object, None));
        assert_eq!(causes, [], "{name}");
    }
    // The same state gives the same bytes; a change rewrites only what changed.
    reconcile(&rig).await;
    assert_eq!(read(&gitops), first);
    let (id, version) = submitted(&rig, &rig.rita, "research", "h200-train", 48).await;
    decide(&rig, "research", id, "approve", version).await;
    reconcile(&rig).await;
    let after = read(&gitops);
    let changed: Vec<&str> = first
        .iter()
        .zip(&after)
        .filter(|(a, b)| a != b)
        .map(|(a, _)| a.0.as_str())
        .collect();
    assert_eq!(changed, ["clusterqueue-research.yaml"]);
    // The request says where its queues went: files, not the cluster.
    let landed = request_view(&rig, "research", id).await.request;
    assert!(landed.applied_at.is_some());
    assert_eq!(
        landed.applied_to,
        Some(
            "written to clusterqueue-research.yaml and localqueue-team-research-research.yaml in the GitOps directory, for Argo CD or Flux to apply (gpufleet does not apply it)"
                .to_owned()
        )
    );
    // Where they went on the server is for those who run the cluster: the approver reads the
    // directory, a requester the mode alone.
    let target = |who| {
        let rig = &rig;
        async move {
            call(rig, Method::GET, "/api/cluster", who, None)
                .await
                .json::<Value>()["target"]
                .clone()
        }
    };
    assert_eq!(
        target(&rig.alex).await,
        json!({"gitops": {"dir": gitops.display().to_string()}})
    );
    assert_eq!(target(&rig.rita).await, json!({"gitops": {"dir": ""}}));
    // The same files as a zip from the Cluster page.
    let reply = call(&rig, Method::GET, "/api/cluster/gitops.zip", &rig.sam, None).await;
    assert_eq!(reply.status, StatusCode::OK);
    let zip = reply.body;
    for (name, text) in &after {
        let at = zip
            .windows(name.len())
            .position(|w| w == name.as_bytes())
            .unwrap_or_else(|| panic!("{name} in the zip"));
        assert!(
            zip[at..].windows(text.len()).any(|w| w == text.as_bytes()),
            "{name}'s bytes"
        );
    }
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn without_a_cluster_nothing_leaves_and_the_page_says_so(pool: PgPool) {
    let rig = rig(&pool, "off", |_| Arc::new(Cluster::off())).await;
    let (id, version) = submitted(&rig, &rig.rita, "research", "h200-train", 48).await;
    decide(&rig, "research", id, "approve", version).await;
    let view = reconcile(&rig).await;
    assert_eq!(view.target, shared::cluster::Target::Off);
    assert_eq!(states(&view), BTreeSet::from([ObjectState::Pending]));
    let request = request_view(&rig, "research", id).await.request;
    assert_eq!(request.applied_at, None);
    assert_eq!(
        request.apply_error.as_deref(),
        Some("no cluster and no GitOps directory is configured: nothing leaves the console")
    );
    assert!(
        cluster::version_warning(KueueVersion::V1beta1)
            .is_some_and(|w| w.contains("stops being served in Kueue 0.20"))
    );
}

/// The check the Cluster page shows, on the demo inventory: research's approved H200s and
/// search's H100s start, their flavors selecting the product labels GPU Feature Discovery
/// writes (`NVIDIA-H200`, `NVIDIA-H100-80GB-HBM3`); with the H100 flavor naming its model by
/// the catalogue's name, as the console did, search's pods never would.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_demo_fleets_approved_pods_start_where_their_flavors_put_them(pool: PgPool) {
    use shared::kueue::Admissible;
    let rig = rig(&pool, "admission", |_| Arc::new(Cluster::off())).await;
    for (who, team, flavor, gpus) in [
        (&rig.rita, "research", "h200-train", 48),
        (&rig.sam, "search", "h100-shared", 16),
    ] {
        let (id, version) = submitted(&rig, who, team, flavor, gpus).await;
        decide(&rig, team, id, "approve", version).await;
    }
    let view = reconcile(&rig).await;
    let verdicts: Vec<(String, Admissible)> = view
        .admission
        .iter()
        .map(|v| (v.subject.clone(), v.admissible))
        .collect();
    assert_eq!(
        verdicts,
        [
            (
                "research 1 nvidia.com/gpu on h200-train".to_owned(),
                Admissible::Yes
            ),
            (
                "search 1 nvidia.com/gpu on h100-shared".to_owned(),
                Admissible::Yes
            ),
        ],
        "{:#?}",
        view.admission
    );
    let world = backend::quota::world(&mut pool.acquire().await.expect("conn"))
        .await
        .expect("world");
    let mut named = world.clone();
    let h100 = named
        .flavors
        .iter_mut()
        .find(|f| f.name == "h100-shared")
        .expect("flavor");
    h100.settings.node_labels = [(
        "nvidia.com/gpu.product".to_owned(),
        "H100-SXM5-80GB".to_owned(),
    )]
    .into();
    let search = named
        .admission(backend::clock::today())
        .into_iter()
        .find(|v| v.subject.starts_with("search"))
        .expect("search");
    assert_eq!(search.admissible, Admissible::Never, "{search:?}");
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn one_replica_reconciles_at_a_time(pool: PgPool) {
    let rig = rig(&pool, "lock", |_| Arc::new(Cluster::off())).await;
    // Another replica holds the lock on its own session.
    let mut other = pool.acquire().await.expect("connection");
    assert!(
        backend::cluster::db::try_lock(&mut other)
            .await
            .expect("lock")
    );
    assert!(
        cluster::reconcile(&rig.state, None)
            .await
            .expect("run")
            .is_none()
    );
    backend::cluster::db::unlock(&mut other)
        .await
        .expect("unlock");
    assert!(
        cluster::reconcile(&rig.state, None)
            .await
            .expect("run")
            .is_some()
    );
    assert_eq!(
        backend::retry::backoff(Duration::from_secs(30), 0),
        Duration::from_secs(30)
    );
    assert_eq!(
        backend::retry::backoff(Duration::from_secs(30), 3),
        Duration::from_secs(120)
    );
    assert_eq!(
        backend::retry::backoff(Duration::from_secs(30), 9),
        Duration::from_secs(300)
    );
}

/// Renames search's queues (as an admin), so the old ClusterQueue and LocalQueue, applied by
/// gpufleet, are left behind on the cluster, unapproved.
async fn rename_search_queues(rig: &Rig) {
    let reply = call(
        rig,
        Method::PUT,
        "/api/quota/teams/search/queue",
        &rig.ada,
        Some(
            json!({"cluster_queue": "search-v2", "local_queue": "search-v2", "cohort": "gpufleet"}),
        ),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
}

/// The review's dry run of search's request `id` (`GET …/dry-run`) as `who`.
pub(crate) async fn dry_run(rig: &Rig, who: &Session, id: i64) -> Reply {
    let uri = format!("/api/quota/teams/search/requests/{id}/dry-run");
    call(rig, Method::GET, &uri, who, None).await
}

/// `POST /api/cluster/apply` as `who`.
pub(crate) async fn reapply(rig: &Rig, who: &Session, body: Value) -> Reply {
    call(rig, Method::POST, "/api/cluster/apply", who, Some(body)).await
}

/// The audit log's entries on cluster objects, newest first.
pub(crate) async fn cluster_audit(rig: &Rig) -> shared::audit::Page {
    call(
        rig,
        Method::GET,
        "/api/quota/audit?kind=cluster_object",
        &rig.ada,
        None,
    )
    .await
    .json()
}

async fn delete(rig: &Rig, path: &str) -> Reply {
    call(rig, Method::DELETE, path, &rig.ada, None).await
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn an_admin_deletes_only_a_queue_left_behind_and_never_one_with_admitted_workloads(
    pool: PgPool,
) {
    let (rig, double) = kube_rig(&pool, "delete", Duration::from_secs(5)).await;
    reconcile(&rig).await;
    // An approved queue: the reconciler would make it again.
    let reply = delete(&rig, "/api/cluster/queues/ClusterQueue/search").await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text());
    assert!(
        reply.text().contains("is approved for a team"),
        "{}",
        reply.text()
    );
    rename_search_queues(&rig).await;
    let view = reconcile(&rig).await;
    assert_eq!(
        object(&view, "ClusterQueue", "search").state,
        ObjectState::Unapproved
    );
    assert_eq!(
        object(&view, "ClusterQueue", "search-v2").state,
        ObjectState::InSync
    );
    // Kueue reports workloads admitted through the old queue: refused, kept.
    double.set_status(
        "ClusterQueue",
        None,
        "search",
        json!({"admittedWorkloads": 3}),
    );
    let reply = delete(&rig, "/api/cluster/queues/ClusterQueue/search").await;
    assert_eq!(reply.status, StatusCode::CONFLICT);
    let err: shared::ApiError = reply.json();
    assert_eq!(
        err.message,
        "ClusterQueue search has 3 admitted workloads: they must finish or be evicted before it is deleted"
    );
    assert!(double.object("ClusterQueue", None, "search").is_some());
    // Only admins; not a kind gpufleet deletes; not an object gpufleet never applied.
    let reply = call(
        &rig,
        Method::DELETE,
        "/api/cluster/queues/ClusterQueue/search",
        &rig.alex,
        None,
    )
    .await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    let reply = delete(&rig, "/api/cluster/queues/ResourceFlavor/h100-shared").await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let shadow = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "shadow"}, "spec": {"resourceGroups": []}});
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(kube_client(&double).await, &cluster_queues());
    api.patch(
        "shadow",
        &kube::api::PatchParams::apply("someone"),
        &kube::api::Patch::Apply(&shadow),
    )
    .await
    .expect("someone else's queue");
    let reply = delete(&rig, "/api/cluster/queues/ClusterQueue/shadow").await;
    assert_eq!(reply.status, StatusCode::CONFLICT);
    assert!(
        reply.text().contains("was not applied by gpufleet"),
        "{}",
        reply.text()
    );
    // Once its workloads are gone, it goes; the old LocalQueue too; both audited.
    double.set_status(
        "ClusterQueue",
        None,
        "search",
        json!({"admittedWorkloads": 0}),
    );
    let reply = delete(&rig, "/api/cluster/queues/ClusterQueue/search").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let reply = delete(
        &rig,
        "/api/cluster/queues/LocalQueue/search?namespace=team-search",
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let view: ClusterView = reply.json();
    assert!(double.object("ClusterQueue", None, "search").is_none());
    assert!(
        double
            .object("LocalQueue", Some("team-search"), "search")
            .is_none()
    );
    assert!(!view.objects.iter().any(|o| o.object.name == "search"));
    let audit = cluster_audit(&rig).await;
    let subjects: Vec<&str> = audit.entries.iter().map(|e| e.subject.as_str()).collect();
    assert_eq!(
        subjects,
        ["LocalQueue team-search/search", "ClusterQueue search"]
    );
}

/// The ClusterRole in `deploy/` grants exactly the verbs and resources the client uses: every
/// call a full scenario makes (apply, dry run, drift, re-apply, reports, the workload history)
/// is granted, and every grant is used.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_cluster_role_grants_exactly_what_the_client_calls(pool: PgPool) {
    let (rig, double) = kube_rig(&pool, "rbac", Duration::from_secs(5)).await;
    reconcile(&rig).await;
    let (id, version) = submitted(&rig, &rig.sam, "search", "h100-shared", 32).await;
    dry_run(&rig, &rig.alex, id).await;
    decide(&rig, "search", id, "approve", version).await;
    reconcile(&rig).await;
    reapply(&rig, &rig.alex, json!({"force": true})).await;
    rename_search_queues(&rig).await;
    reconcile(&rig).await;
    for path in [
        "/api/cluster/queues/ClusterQueue/search",
        "/api/cluster/queues/LocalQueue/search?namespace=team-search",
    ] {
        let reply = delete(&rig, path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.text());
    }
    // The recorder: a listing, then a watch.
    let recorder = cluster::history::spawn(rig.state.clone()).expect("a cluster is read");
    for _ in 0..200 {
        if asked(&double, "watch") > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    recorder.abort();
    let used: BTreeSet<(String, String)> = double
        .calls()
        .into_iter()
        .map(|c| (c.resource, c.verb))
        .collect();
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/rbac.yaml"))
        .expect("deploy/rbac.yaml");
    let mut granted = BTreeSet::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let doc: Value = serde::Deserialize::deserialize(doc).expect("yaml");
        if doc["kind"] != "ClusterRole" {
            continue;
        }
        for rule in doc["rules"].as_array().expect("rules") {
            if rule["apiGroups"] != json!(["kueue.x-k8s.io"]) {
                continue;
            }
            for resource in rule["resources"].as_array().expect("resources") {
                for verb in rule["verbs"].as_array().expect("verbs") {
                    granted.insert((
                        resource.as_str().expect("resource").to_owned(),
                        verb.as_str().expect("verb").to_owned(),
                    ));
                }
            }
        }
    }
    assert_eq!(used, granted);
}

/// A v1beta2 Workload as Kueue makes it for a Job of `pods` pods of `gpus` H100s each in
/// `namespace`, submitted to LocalQueue `queue` at `created`; `status` as Kueue's controller
/// last wrote it.
fn workload(
    namespace: &str,
    name: &str,
    queue: Option<&str>,
    created: &str,
    status: Value,
) -> Value {
    let mut spec = json!({"priority": 0, "active": true, "podSets": [{"name": "main", "count": 4,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "train",
            "image": "registry.example/train:1",
            "resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "8"}}}]}}}]});
    if let Some(queue) = queue {
        spec["queueName"] = json!(queue);
    }
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
        "spec": spec, "status": status})
}

fn condition(kind: &str, status: &str, reason: &str, at: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": "", "lastTransitionTime": at})
}

/// Admitted to ClusterQueue `queue` at `admitted` on flavor h100-shared (4 pods × 8 GPUs), with
/// `more` conditions and `evictions` so far.
fn admitted(queue: &str, admitted: &str, more: Vec<Value>, evictions: u32) -> Value {
    let mut conditions = vec![
        condition("QuotaReserved", "True", "QuotaReserved", admitted),
        condition("Admitted", "True", "Admitted", admitted),
    ];
    conditions.extend(more);
    let mut status = json!({"conditions": conditions, "admission": {"clusterQueue": queue,
        "podSetAssignments": [{"name": "main", "count": 4,
            "flavors": {"nvidia.com/gpu": "h100-shared"},
            "resourceUsage": {"cpu": "32", "nvidia.com/gpu": "32"}}]}});
    if evictions > 0 {
        status["schedulingStats"] = json!({"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": evictions}]});
    }
    status
}

pub(crate) async fn history(rig: &Rig, path: &str, who: &Session) -> Reply {
    call(rig, Method::GET, path, who, None).await
}

const NOV_30: &str = "/api/cluster/workloads?from=2026-11-30&to=2026-11-30";

/// The workload history against the API double serving Workloads under the real CRD schema:
/// what Kueue wrote is recorded page by page; a re-admission keeps the first admission and an
/// eviction is counted once however often it is listed; a cluster that is down loses nothing
/// and marks nothing gone; a Workload Kueue deleted is kept and marked; a restarted console
/// counts nothing twice; each reader sees what their role allows.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_workload_history_keeps_what_kueue_ran_through_deletions_outages_and_restarts(
    pool: PgPool,
) {
    let dir = scratch("history-kube");
    let (double, _) = double_and_cluster(&dir, Duration::from_secs(5)).await;
    let cluster = connect(&double, &dir, Duration::from_secs(5)).await.page(2);
    let rig = rig(&pool, "history", |_| Arc::new(cluster)).await;
    let kueue = |object: Value| double.write_as_controller("kueue-controller", object);
    let preempted = vec![
        condition("Evicted", "True", "Preempted", "2026-11-30T10:30:00Z"),
        condition(
            "Preempted",
            "True",
            "InCohortReclamation",
            "2026-11-30T10:30:00Z",
        ),
    ];
    let train = |status| {
        workload(
            "team-research",
            "job-train",
            Some("research"),
            "2026-11-30T08:00:00Z",
            status,
        )
    };
    kueue(train(admitted(
        "research",
        "2026-11-30T08:04:00Z",
        preempted.clone(),
        1,
    )))
    .expect("train");
    kueue(workload(
        "team-search",
        "job-index",
        Some("search"),
        "2026-11-30T09:00:00Z",
        json!({}),
    ))
    .expect("index");
    kueue(workload(
        "team-search",
        "job-lost",
        None,
        "2026-11-30T09:30:00Z",
        json!({}),
    ))
    .expect("lost");
    // The real schema's CEL rule: quota reserved for one pod set of a Workload that has two.
    let mut two_sets = train(admitted("research", "2026-11-30T08:04:00Z", vec![], 0));
    two_sets["metadata"]["name"] = json!("two-sets");
    let second = two_sets["spec"]["podSets"][0].clone();
    two_sets["spec"]["podSets"]
        .as_array_mut()
        .expect("sets")
        .push(json!({"name": "launcher",
        "count": 1, "template": second["template"].clone()}));
    let refused = kueue(two_sets).expect_err("422");
    assert_eq!(refused.code, 422, "{}", refused.message);
    assert!(
        refused
            .message
            .contains("podSetAssignments must have the same number of podSets")
    );

    assert_eq!(
        cluster::history::record(&rig.state).await.expect("record"),
        Some(3)
    );
    let seen: shared::cluster::workload::WorkloadHistory =
        history(&rig, NOV_30, &rig.alex).await.json();
    assert_eq!(
        (
            seen.unrecorded.as_deref(),
            seen.recorder.listed,
            seen.truncated
        ),
        (None, Some(3), false)
    );
    let names: Vec<&str> = seen
        .workloads
        .iter()
        .map(|w| w.workload.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["job-train", "job-index", "job-lost"],
        "oldest first"
    );
    let train_seen = &seen.workloads[0];
    assert_eq!(train_seen.team.as_deref(), Some("research"));
    assert_eq!(
        train_seen.workload.cluster_queue.as_deref(),
        Some("research")
    );
    assert_eq!(
        train_seen.workload.pod_sets[0].flavors["nvidia.com/gpu"],
        "h100-shared"
    );
    assert_eq!(
        train_seen.workload.resources(),
        [("nvidia.com/gpu", 32)].into()
    );
    // 2026-11-30T08:04:00Z: 1,796,025,600 s + 240 s after the epoch.
    assert_eq!(train_seen.workload.admitted_at_ms, Some(1_796_025_840_000));
    assert_eq!(train_seen.evictions_seen.len(), 1);
    assert_eq!(
        train_seen.evictions_seen[0].detail.as_deref(),
        Some("InCohortReclamation")
    );
    assert_eq!(
        seen.workloads[1].workload.resources(),
        [("nvidia.com/gpu", 32)].into(),
        "4 pods × 8, pending"
    );
    assert_eq!(
        seen.workloads[2].workload.problems,
        ["no spec.queueName: Kueue queues it nowhere"]
    );

    // Re-admitted, then evicted again: the first admission stays, each eviction counts once.
    let readmitted = vec![condition(
        "Evicted",
        "False",
        "Preempted",
        "2026-11-30T10:45:00Z",
    )];
    kueue(train(admitted(
        "research",
        "2026-11-30T10:45:00Z",
        readmitted,
        1,
    )))
    .expect("readmitted");
    cluster::history::record(&rig.state).await.expect("record");
    let again = vec![
        condition("Evicted", "True", "Preempted", "2026-11-30T11:00:00Z"),
        condition(
            "Preempted",
            "True",
            "InClusterQueue",
            "2026-11-30T11:00:00Z",
        ),
    ];
    kueue(train(admitted(
        "research",
        "2026-11-30T10:45:00Z",
        again,
        2,
    )))
    .expect("evicted again");
    for _ in 0..2 {
        cluster::history::record(&rig.state).await.expect("record");
    }
    let seen: shared::cluster::workload::WorkloadHistory =
        history(&rig, NOV_30, &rig.alex).await.json();
    let train_seen = &seen.workloads[0];
    assert_eq!(
        train_seen.workload.admitted_at_ms,
        Some(1_796_025_840_000),
        "the first admission"
    );
    let reasons: Vec<_> = train_seen
        .evictions_seen
        .iter()
        .map(|e| e.detail.as_deref())
        .collect();
    assert_eq!(
        reasons,
        [Some("InCohortReclamation"), Some("InClusterQueue")]
    );
    assert_eq!(train_seen.workload.evictions[0].count, 2);

    // The demo's history beside the cluster's: never on the cluster, so never marked gone.
    let mut demo = workload(
        "team-search",
        "demo-job",
        Some("search"),
        "2026-11-30T09:45:00Z",
        admitted("search", "2026-11-30T09:50:00Z", vec![], 0),
    );
    demo["metadata"]["uid"] = json!("demo-team-search-0");
    let demo = shared::cluster::workload::read(&demo).expect("a demo Workload");
    let rows = serde_json::to_string(&[demo]).expect("json");
    cluster::db::record_workloads(&pool, &rows, 0, true)
        .await
        .expect("demo row");
    // The cluster is down while Kueue deletes a finished Workload: nothing is marked gone.
    assert!(double.delete("Workload", Some("team-search"), "job-index"));
    double.set_fault(Some(Fault::Status(503)));
    assert!(cluster::history::record(&rig.state).await.is_err());
    let seen: shared::cluster::workload::WorkloadHistory =
        history(&rig, NOV_30, &rig.alex).await.json();
    assert!(
        seen.recorder
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("503")),
        "{:?}",
        seen.recorder
    );
    assert!(seen.workloads.iter().all(|w| w.gone_at_ms.is_none()));
    double.set_fault(None);
    assert_eq!(
        cluster::history::record(&rig.state).await.expect("record"),
        Some(2)
    );
    let seen: shared::cluster::workload::WorkloadHistory =
        history(&rig, NOV_30, &rig.alex).await.json();
    assert_eq!(seen.recorder.last_error, None);
    let gone: Vec<&str> = seen
        .workloads
        .iter()
        .filter(|w| w.gone_at_ms.is_some())
        .map(|w| w.workload.name.as_str())
        .collect();
    assert_eq!(gone, ["job-index"], "kept, and marked gone");

    // A restarted console (a new connection, the same database) counts nothing twice.
    let restarted = connect(&double, &scratch("history-restart"), Duration::from_secs(5)).await;
    let state = AppState::new(pool.clone()).with_cluster(Arc::new(restarted));
    assert_eq!(
        cluster::history::record(&state)
            .await
            .expect("record after restart"),
        Some(2)
    );
    let again: shared::cluster::workload::WorkloadHistory =
        history(&rig, NOV_30, &rig.alex).await.json();
    assert_eq!(again.workloads, seen.workloads);

    // Who sees what; a window that is not one.
    let own = history(
        &rig,
        "/api/cluster/teams/research/workloads?from=2026-11-30&to=2026-11-30",
        &rig.rita,
    )
    .await;
    assert_eq!(own.status, StatusCode::OK, "{}", own.text());
    let own: shared::cluster::workload::WorkloadHistory = own.json();
    assert_eq!(own.workloads.len(), 1);
    for path in [
        NOV_30,
        "/api/cluster/teams/search/workloads?from=2026-11-30&to=2026-11-30",
    ] {
        assert_eq!(
            history(&rig, path, &rig.rita).await.status,
            StatusCode::FORBIDDEN,
            "{path}"
        );
    }
    // The planner reads the same record: research's one job, still running at the window's
    // end, is a class of 32-GPU jobs at least 956 minutes long (08:04 to midnight), wanted
    // from its creation at 08:00 (hours 8 to 22 whole, 56 minutes of hour 23).
    // And search served: DCGM saw 2 GPU-hours of its namespace on RTX GPUs and vLLM counted
    // 5,040,000 generated tokens at 10:00, 700 a GPU-second, so at least 1,000 tokens/s a GPU
    // over KEDA's 70% threshold; 10:00's 1,400 tokens/s are 1.4 GPUs, ⌈1.4 ÷ 0.7⌉ = 2 replicas.
    search_served_on_november_30(&pool).await;
    let derived = history(
        &rig,
        "/api/plan/from-history?from=2026-11-30&to=2026-11-30",
        &rig.alex,
    )
    .await;
    assert_eq!(derived.status, StatusCode::OK, "{}", derived.text());
    let derived: shared::planning::from_history::FromHistory = derived.json();
    let research = derived
        .scenario
        .teams
        .iter()
        .position(|t| t.name == "research")
        .expect("research");
    assert!(
        derived.scenario.validate().is_ok(),
        "{:?}",
        derived.scenario.validate()
    );
    let class = &derived.scenario.teams[research].workloads[0];
    assert_eq!(
        (class.flavor.as_str(), class.gpus_per_job, class.job_minutes),
        ("h100-shared", 32, 956)
    );
    let hourly = class.demand.hourly();
    assert_eq!((hourly[7], hourly[8], hourly[22]), (0.0, 32.0, 32.0));
    assert!((hourly[23] - 32.0 * 56.0 / 60.0).abs() < 1e-9);
    assert!(
        derived
            .problems
            .contains(&"2 Workloads left out: never admitted, so on no flavor yet".to_owned()),
        "{:?}",
        derived.problems
    );
    let search = (derived.scenario.teams.iter())
        .find(|t| t.name == "search")
        .expect("search");
    let serving = (search.workloads.iter())
        .find(|w| w.kind == shared::planning::scenario::WorkloadKind::Inference)
        .unwrap_or_else(|| panic!("an inference class: {search:?}"));
    let inference = serving.inference.as_ref().expect("its settings");
    assert_eq!(
        (serving.flavor.as_str(), inference.tokens_per_s_per_gpu),
        ("rtx-inference", 1_000)
    );
    let hourly = serving.demand.hourly();
    assert_eq!((hourly[10], inference.max_replicas), (1.4, 2));
    let length = derived
        .sources
        .iter()
        .find(|s| s.path == format!("teams[{research}].workloads[0].job_minutes"));
    assert!(
        length.is_some_and(|s| s.from.starts_with("at least")),
        "{length:?}"
    );
    assert_eq!(
        history(
            &rig,
            "/api/plan/from-history?from=2026-11-30&to=2026-11-30",
            &rig.rita
        )
        .await
        .status,
        StatusCode::FORBIDDEN
    );
    let bad = history(
        &rig,
        "/api/cluster/workloads?from=2026-12-01&to=2026-11-30",
        &rig.alex,
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    let err: shared::ApiError = bad.json();
    assert_eq!(err.fields[0].message, "2026-11-30 is before 2026-12-01");
}

/// search's vLLM tokens and DCGM time on 2026-11-30, as the usage ingest rolls them up.
async fn search_served_on_november_30(pool: &PgPool) {
    for statement in [
        "insert into usage_rollups (grain, period, namespace, cluster_queue, flavor, team_id,
             allocated_gpu_microseconds, busy_gpu_microseconds, observed_gpu_microseconds,
             fb_used_mib_minutes, minutes)
         select 'day', '2026-11-30', t.namespace, '', 'rtx-inference', t.id, 2 * 3600000000::bigint,
                3600000000::bigint, 2 * 3600000000::bigint, 0, 1440
         from teams t where t.name = 'search'",
        "insert into usage_token_rollups (grain, period, namespace, model, team_id, prompt_tokens,
             generation_tokens, prefill_microseconds, decode_microseconds)
         select 'hour', '2026-11-30 10:00Z', t.namespace, 'llama', t.id, 0, 5040000, 0, 0
         from teams t where t.name = 'search'",
    ] {
        sqlx::query(statement).execute(pool).await.expect("rollups");
    }
}

/// `gpufleet demo`'s workload history: four weeks of research's jobs up to now (the team whose
/// request the demo approves), marked demo, each preemption recorded once, written only into
/// an empty history; shown without a cluster, and read by the planner as demo data.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_demo_records_four_weeks_of_history_marked_demo_once(pool: PgPool) {
    let rig = rig(&pool, "demo-history", |_| Arc::new(Cluster::off())).await;
    assert!(backend::quota::load_demo(&pool).await.expect("demo quota"));
    demo_usage_follows_its_quotas(&pool).await;
    let written = cluster::history::load_demo(&pool)
        .await
        .expect("demo history")
        .expect("an empty history");
    assert_eq!(
        cluster::history::load_demo(&pool).await.expect("again"),
        None
    );
    let today = backend::clock::today();
    let window = format!("from={}&to={today}", today.plus(-28));
    let seen: shared::cluster::workload::WorkloadHistory =
        history(&rig, &format!("/api/cluster/workloads?{window}"), &rig.alex)
            .await
            .json();
    assert_eq!(seen.workloads.len(), written);
    // Research trains on its 48 H200s around the clock, as the demo exporter shows: six
    // one-node jobs at once of 2 to 6 hours' work each, so 28 days bring between 28 × 24 × 6 / 6
    // = 672 and 29 × 24 × 6 / 2 = 2,088 of them, and an evaluation job each weekday.
    assert!((672..=2_088 + 21).contains(&written), "{written}");
    assert!(seen.unrecorded.is_some(), "no cluster: said so");
    for w in &seen.workloads {
        assert!(w.demo && w.team.as_deref() == Some("research"), "{w:?}");
        let counted: u32 = w.workload.evictions.iter().map(|e| e.count).sum();
        assert_eq!(w.evictions_seen.len() as u32, counted, "{w:?}");
    }
    assert!(seen.workloads.iter().any(|w| !w.evictions_seen.is_empty()));
    let derived: shared::planning::from_history::FromHistory =
        history(&rig, &format!("/api/plan/from-history?{window}"), &rig.alex)
            .await
            .json();
    assert!(
        derived
            .problems
            .iter()
            .any(|p| p.starts_with("demo data: ")),
        "{:?}",
        derived.problems
    );
    let research = derived
        .scenario
        .teams
        .iter()
        .find(|t| t.name == "research")
        .expect("research");
    assert_ne!(research.workloads[0].name, "no-recorded-work");
    assert!(derived.scenario.validate().is_ok());
    // The re-plan findings read it too. Research asks for more than its quota (the exporter's
    // training demand, 77 to 91 of the pool's 96 GPUs, 84 on average, against 48 held), so
    // about 36 GPUs' worth waits, kept as whole 8-GPU jobs: at most 8 more. By Little's law
    // its jobs wait on average (GPUs waiting) × (mean work, 240 min) / (GPUs held, 48): 180
    // to 220 minutes, the backlog's waits alike, so its p50 is near that and its p95 above the
    // 30-minute target.
    let found: shared::planning::findings::Findings =
        history(&rig, "/api/quota/findings", &rig.alex).await.json();
    assert!(found.demo_workloads > 0 && found.demo_workloads == found.workloads_read);
    assert!(found.unrecorded.is_some(), "no cluster: said so");
    let waiting = found
        .findings
        .iter()
        .find(|f| f.kind == shared::planning::findings::Kind::Waiting)
        .expect("research waits");
    assert_eq!(waiting.team, "research");
    let wait = waiting.wait.as_ref().expect("figures");
    let mean_gpus_waiting = wait.mean_gpus_waiting.expect("measured");
    assert!((36.0..=44.0).contains(&mean_gpus_waiting), "{wait:?}");
    assert!((150..=250).contains(&wait.p50_minutes), "{wait:?}");
    assert!(wait.p95_minutes >= 30, "{wait:?}");
    assert!(waiting.draft.is_some(), "{waiting:?}");
    demo_week_replayed(&rig, today).await;
    search_request_what_if(&rig, &pool, today).await;
    search_standing(&rig, &pool, today).await;
}

/// The demo exporter's figures follow the demo's approved quotas, so the Quotas, Cluster and
/// Chargeback pages agree. At 16:00 UTC (full traffic): research trains on its 48 H200s (it
/// asks round(0.8 × 96) = 77; nobody else holds H200 quota to lend); search serves on
/// round(0.9 × 32) = 29 RTX GPUs and round(0.85 × 56) = 48 MIG instances, and on none of the
/// shared H100s, where nobody holds quota until its waiting request is approved.
async fn demo_usage_follows_its_quotas(pool: &PgPool) {
    use shared::usage::{GPU_UTIL, GR_ENGINE_ACTIVE, KUEUE_NOMINAL, KUEUE_USAGE, demo};
    let (pools, teams) = backend::usage::demo::fleet(pool).await.expect("demo fleet");
    let at = backend::clock::now_ms().div_euclid(86_400_000) * 86_400_000 + 16 * 3_600_000;
    let samples = demo::samples(&pools, &teams, at);
    let label = |s: &demo::DemoSample, key: &str| {
        s.labels
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(String::new(), |(_, v)| v.clone())
    };
    let kueue = |metric: &str, cq: &str, flavor: &str| -> i64 {
        samples
            .iter()
            .filter(|s| s.metric == metric)
            .filter(|s| label(s, "cluster_queue") == cq && label(s, "flavor") == flavor)
            .map(|s| s.value.parse::<i64>().expect("a count"))
            .sum()
    };
    let held = |ns: &str, flavor: &str| {
        samples
            .iter()
            .filter(|s| s.metric == GPU_UTIL || s.metric == GR_ENGINE_ACTIVE)
            .filter(|s| label(s, "namespace") == ns && label(s, "Hostname").starts_with(flavor))
            .count() as i64
    };
    for (cq, flavor, nominal, used) in [
        ("research", "h200-train", 48, 48),
        ("research", "h100-shared", 0, 0),
        ("search", "rtx-inference", 32, 29),
        ("search", "h100-mig", 56, 48),
        ("search", "h100-shared", 0, 0),
    ] {
        assert_eq!(kueue(KUEUE_NOMINAL, cq, flavor), nominal, "{cq} {flavor}");
        assert_eq!(kueue(KUEUE_USAGE, cq, flavor), used, "{cq} {flavor}");
        assert_eq!(held(&format!("team-{cq}"), flavor), used, "{cq} {flavor}");
    }
}

/// Search's standing, as its members read it on the Quotas page: its two jobs of the what-if
/// waited 0 minutes; one more, created two days ago, waits 45. By nearest rank over [0, 0, 45]
/// p50 is the 2nd (0) and p95 the 3rd (45), from the workload history of the last 7 days.
async fn search_standing(rig: &Rig, pool: &PgPool, today: shared::common::day::Day) {
    let created = (i64::from(today.plus(-2).days_since_epoch()) * 24 + 10) * 3_600_000;
    let admitted = created + 45 * 60_000;
    let job = json!([{
        "uid": "search-standing", "namespace": "team-search", "name": "job-late",
        "local_queue": "search", "cluster_queue": "search", "priority": 0, "priority_class": null,
        "pod_sets": [{"name": "main", "count": 1, "resources": {"nvidia.com/gpu": 8},
            "flavors": {"nvidia.com/gpu": "h100-shared"}}],
        "created_at_ms": created, "quota_reserved_at_ms": admitted, "admitted_at_ms": admitted,
        "evicted": null, "finished": null, "evictions": [], "problems": []
    }]);
    cluster::db::record_workloads(pool, &job.to_string(), admitted, false)
        .await
        .expect("search's late job");
    let reply = history(rig, "/api/quota/teams/search/standing", &rig.alex).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let standing: Value = reply.json();
    let wait = &standing["wait"];
    assert_eq!(
        (
            &wait["workloads"],
            &wait["p50_minutes"],
            &wait["p95_minutes"]
        ),
        (&json!(3), &json!(0), &json!(45)),
        "{standing}"
    );
    assert!(
        wait["from"]
            .as_str()
            .is_some_and(|f| f.starts_with("the workload history"))
    );
    assert_eq!(standing["wait_from"], json!(today.plus(-7).to_string()));
    assert!(standing["unrecorded"].is_string(), "no cluster: said so");
    // Research's members read their own team's, not search's; a team that does not exist is
    // not found.
    assert_eq!(
        history(rig, "/api/quota/teams/search/standing", &rig.rita)
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        history(rig, "/api/quota/teams/nobody/standing", &rig.alex)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

/// The what-if of the demo's pending request (search asks for 32 of the 64 H100s): search ran
/// two 8-GPU one-hour jobs on h100-shared three days ago, where no team holds quota today.
/// Kueue admits a ClusterQueue's work only within its nominal quota or by borrowing the
/// cohort's unused nominal quota (Kueue's concepts, "Cohort"): there is none on h100-shared,
/// so before the approval nothing of search's is admitted; after it both run at once, 2 × 8 ×
/// 1 = 16 GPU-hours, waiting 0. Research (on its H200s) is the same before and after.
async fn search_request_what_if(rig: &Rig, pool: &PgPool, today: shared::common::day::Day) {
    use shared::{
        common::interrupt::Never,
        planning::replay::{WhatIf, WhatIfInput},
    };
    let created = (i64::from(today.plus(-3).days_since_epoch()) * 24 + 10) * 3_600_000;
    let jobs: Vec<Value> = (0..2)
        .map(|i| {
            json!({
                "uid": format!("search-what-if-{i}"), "namespace": "team-search", "name": format!("job-{i}"),
                "local_queue": "search", "cluster_queue": "search", "priority": 0, "priority_class": null,
                "pod_sets": [{"name": "main", "count": 1, "resources": {"nvidia.com/gpu": 8},
                    "flavors": {"nvidia.com/gpu": "h100-shared"}}],
                "created_at_ms": created, "quota_reserved_at_ms": created, "admitted_at_ms": created,
                "evicted": null, "finished": {"at_ms": created + 3_600_000, "reason": "Succeeded", "detail": null},
                "evictions": [], "problems": []
            })
        })
        .collect();
    cluster::db::record_workloads(pool, &Value::from(jobs).to_string(), created, false)
        .await
        .expect("search's history");
    let pending: Vec<shared::quota::QuotaRequest> =
        history(rig, "/api/quota/requests?state=submitted", &rig.alex)
            .await
            .json();
    let id = pending
        .iter()
        .find(|r| r.team == "search")
        .expect("search's request")
        .id;
    let path = format!("/api/quota/teams/search/requests/{id}/what-if");
    let reply = history(rig, &path, &rig.alex).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let what_if: WhatIf = reply.json();
    assert_eq!((what_if.weeks, what_if.from), (4, today.plus(-28)));
    let team = |name: &str| {
        what_if
            .teams
            .iter()
            .find(|t| t.team == name)
            .unwrap_or_else(|| panic!("{name}: {what_if:?}"))
    };
    let search = team("search");
    assert_eq!(
        (
            search.before.wait_p95_minutes,
            search.before.admitted_gpu_hours
        ),
        (None, 0.0)
    );
    assert_eq!(
        (
            search.after.wait_p95_minutes,
            search.after.admitted_gpu_hours
        ),
        (Some(0.0), 16.0)
    );
    let research = team("research");
    assert_eq!(research.before, research.after);
    // What the approver's browser replays: the same weeks, the two sides' scenarios, search's
    // two recorded jobs among the demo's (8 GPUs, created at 10:00 of the last week's fifth
    // day, an hour's run), and replayed as the browser's planner does it, the same answer.
    let reply = history(rig, &format!("{path}/input"), &rig.alex).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let input: WhatIfInput = reply.json();
    let classes = |team: &str| -> std::ops::Range<usize> {
        let teams = &input.replay.before.teams;
        let at = teams.iter().position(|t| t.name == team);
        let at = at.expect("the team's classes");
        let first = teams[..at].iter().map(|t| t.workloads.len()).sum();
        first..first + teams[at].workloads.len()
    };
    let minute = (today.plus(-3).days_since_epoch() - what_if.from.days_since_epoch()) % 7;
    let minute = (minute * 24 + 10) as u32 * 60;
    let jobs: Vec<(u32, u32, u32, bool)> = input
        .replay
        .weeks
        .0
        .iter()
        .flatten()
        .filter(|j| classes("search").contains(&j.class))
        .map(|j| (j.gpus, j.minute, j.length_min, j.running))
        .collect();
    assert_eq!(jobs, [(8, minute, 60, false); 2]);
    assert_eq!(input.replay.weeks.0.len(), 4);
    let replayed = input.replay.replay(&Never).expect("never stopped");
    assert_eq!(input.answer(replayed), what_if);
    // Bad weeks, and who may ask.
    for path in [path.clone(), format!("{path}/input")] {
        let bad = history(rig, &format!("{path}?weeks=9"), &rig.alex).await;
        assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
        let err: shared::ApiError = bad.json();
        assert_eq!(err.fields[0].path, "weeks");
        assert_eq!(
            history(rig, &path, &rig.rita).await.status,
            StatusCode::FORBIDDEN
        );
    }
    // The CLI prints the same what-if, and names a bad flag.
    let cli = |args: &[&str]| {
        let mut all = vec!["quota", "what-if", "--team", "search"];
        all.extend(args);
        crate::common::gpufleet(pool, &all, None)
    };
    let out = cli(&["--request", &id.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: WhatIf = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(printed.teams, what_if.teams);
    let out = cli(&["--request", &id.to_string(), "--weeks", "9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--weeks: \"9\""));
    let out = cli(&["--request", "999999"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("team search has no request 999999"));
}

/// Planned vs measured on the demo's last whole week: the measured side read by hand here from
/// the raw history (`/api/cluster/workloads`), as `shared::planning::replay` defines it; the
/// planned side is the week engine's, set beside it with its error.
async fn demo_week_replayed(rig: &Rig, today: shared::common::day::Day) {
    use shared::planning::replay::{Figure, Replay};
    let from = today.plus(-7);
    let reply = history(rig, "/api/plan/replay", &rig.alex).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let replay: Replay = reply.json();
    assert_eq!((replay.from, replay.to), (from, today.plus(-1)));
    let window = format!(
        "/api/cluster/workloads?from={}&to={}",
        from.plus(-7),
        today.plus(-1)
    );
    let seen: shared::cluster::workload::WorkloadHistory =
        history(rig, &window, &rig.alex).await.json();
    let (start, end) = (
        i64::from(from.days_since_epoch()) * 86_400_000,
        i64::from(today.days_since_epoch()) * 86_400_000,
    );
    let (mut waits, mut gpu_minutes, mut evictions, mut replayed) = (Vec::new(), 0, 0, 0);
    for w in &seen.workloads {
        let r = &w.workload;
        let ended = r.finished.as_ref().map(|f| f.at_ms).or(w.gone_at_ms);
        if r.created_at_ms >= end || ended.is_some_and(|e| e <= start) {
            continue;
        }
        replayed += 1;
        let in_week = |t: &&shared::cluster::workload::Transition| (start..end).contains(&t.at_ms);
        evictions += w.evictions_seen.iter().filter(in_week).count();
        let Some(admitted) = r.admitted_at_ms.filter(|a| *a < end) else {
            continue;
        };
        let gpus = r.pod_sets[0].resources["nvidia.com/gpu"] as i64;
        // Held from the first admission to the first eviction, and from the last admission on.
        let stop = ended.unwrap_or(end).min(end);
        let held = |from: i64, to: i64| (to.min(stop) - from.max(start)).max(0);
        let evicted = (w.evictions_seen.iter().map(|t| t.at_ms)).find(|&at| at >= admitted);
        let last = w.last_admitted_at_ms.unwrap_or(admitted);
        gpu_minutes +=
            gpus * match evicted {
                Some(evicted) if last > evicted => held(admitted, evicted) + held(last, stop),
                Some(evicted) => held(admitted, evicted),
                None => held(admitted, stop),
            } / 60_000;
        waits.push((admitted - r.created_at_ms.max(start)).max(0) / 60_000);
    }
    waits.sort_unstable();
    let p95 = waits[((waits.len() - 1) as f64 * 0.95).round() as usize] as f64;
    let research = replay
        .teams
        .iter()
        .find(|c| c.team == "research")
        .expect("research");
    let figure = |f: Figure| {
        research
            .figures
            .iter()
            .find(|c| c.figure == f)
            .expect("a figure")
    };
    assert_eq!(replay.workloads, replayed);
    assert_eq!(figure(Figure::WaitP95Minutes).measured, Some(p95));
    assert!(p95 >= 30.0, "research's backlog waits: {p95}");
    assert_eq!(
        figure(Figure::AdmittedGpuHours).measured,
        Some(gpu_minutes as f64 / 60.0)
    );
    assert_eq!(figure(Figure::Evictions).measured, Some(evictions as f64));
    let wait = figure(Figure::WaitP95Minutes);
    let planned = wait
        .planned
        .unwrap_or_else(|| panic!("the week admits research's jobs: {replay:#?}"));
    assert_eq!(wait.error, Some(planned - p95));
    assert!(replay.problems.iter().any(|p| p.starts_with("demo data: ")));
    assert!(
        replay
            .problems
            .iter()
            .any(|p| p.contains("busy GPU-hours are not measured")),
        "a day of demo usage is not a week: {:?}",
        replay.problems
    );
    // A week that has not ended, a day that is not one, and who may ask.
    for (query, said) in [
        (format!("from={}", today.plus(-6)), "has not ended"),
        ("from=last-monday".to_owned(), "YYYY-MM-DD"),
    ] {
        let bad = history(rig, &format!("/api/plan/replay?{query}"), &rig.alex).await;
        assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{query}");
        let err: shared::ApiError = bad.json();
        assert!(err.fields[0].message.contains(said), "{query}: {err:?}");
    }
    assert_eq!(
        history(rig, "/api/plan/replay", &rig.rita).await.status,
        StatusCode::FORBIDDEN
    );
}

/// research's budget burnt whole proposes a hold; nothing is held until an approver confirms
/// it. Then its ClusterQueue carries `spec.stopPolicy: Hold` on the cluster (the CRD's enum
/// value, checked by the double against the real schema) and keeps its quota; released, the
/// field goes again (server-side apply drops a field its manager no longer sets: Kueue's
/// default, `None`, is back). Requesters cannot decide; a second decision is a conflict; each
/// step is audited.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_budget_burnt_whole_holds_the_queue_once_an_approver_confirms(pool: PgPool) {
    use backend::chargeback::budget;
    use shared::chargeback::budget::{Budgets, Hold, HoldState};
    let (rig, double) = kube_rig(&pool, "hold", Duration::from_secs(5)).await;
    let (id, version) = submitted(&rig, &rig.rita, "research", "h200-train", 48).await;
    decide(&rig, "research", id, "approve", version).await;
    research_over_budget(&rig, &pool, "h100-shared").await;
    let stop_policy = |queue: &str| {
        double.object("ClusterQueue", None, queue).expect("queue")["spec"]["stopPolicy"].clone()
    };
    reconcile(&rig).await;
    assert_eq!(stop_policy("research"), json!("None"));

    let raised = budget::evaluate(&pool, crate::budgets::NOV_10)
        .await
        .expect("evaluate");
    assert_eq!(raised.holds, 1);
    let again = budget::evaluate(&pool, crate::budgets::NOV_10)
        .await
        .expect("again");
    assert_eq!(again.holds, 0, "proposed once");
    // the team's requester sees it proposed; nothing is held yet
    let seen: Budgets = call(
        &rig,
        Method::GET,
        "/api/chargeback/budgets?month=2026-11",
        &rig.rita,
        None,
    )
    .await
    .json();
    let [proposed] = seen.holds.as_slice() else {
        panic!("{:?}", seen.holds)
    };
    assert_eq!(proposed.state, HoldState::Proposed);
    assert_eq!(
        proposed.reason,
        "research has used 110.57% of its 2026-11 budget of $700.00 (by allocation). Holding its ClusterQueue (stopPolicy: Hold) stops new admissions; admitted work runs to completion."
    );
    reconcile(&rig).await;
    assert_eq!(
        stop_policy("research"),
        json!("None"),
        "a proposal holds nothing"
    );

    let hold = proposed.id;
    assert_eq!(
        decide_hold(&rig, &rig.rita, hold, "confirm").await.status,
        StatusCode::FORBIDDEN
    );
    let bad = decide_hold(&rig, &rig.alex, hold, "hold").await;
    assert_eq!(
        bad.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        bad.text()
    );
    assert!(
        bad.text().contains("confirm, dismiss or release"),
        "{}",
        bad.text()
    );
    let confirmed = decide_hold(&rig, &rig.alex, hold, "confirm").await;
    assert_eq!(confirmed.status, StatusCode::OK, "{}", confirmed.text());
    let confirmed: Hold = confirmed.json();
    assert_eq!(confirmed.state, HoldState::Held);
    assert_eq!(confirmed.decided_by.as_deref(), Some("alex"));
    let twice = decide_hold(&rig, &rig.alex, hold, "confirm").await;
    assert_eq!(twice.status, StatusCode::CONFLICT, "{}", twice.text());
    assert!(
        twice
            .text()
            .contains("this hold of research's ClusterQueue is held, not proposed"),
        "{}",
        twice.text()
    );

    let view = reconcile(&rig).await;
    assert_eq!(
        object(&view, "ClusterQueue", "research").state,
        ObjectState::InSync
    );
    assert_eq!(stop_policy("research"), json!("Hold"));
    assert_eq!(nominal(&double, "research", "h200-train"), Some(48));
    assert_eq!(
        stop_policy("search"),
        json!("None"),
        "only research is held"
    );

    // four eyes: an approver in research may not lift research's hold
    user(&pool, "rhea", &[Role::Approver], &["research"]).await;
    let rhea = login(&rig.router, "rhea", PASSWORD).await;
    let own = decide_hold(&rig, &rhea, hold, "release").await;
    assert_eq!(own.status, StatusCode::FORBIDDEN, "{}", own.text());
    assert!(own.text().contains("four eyes"), "{}", own.text());
    let released = decide_hold(&rig, &rig.alex, hold, "release").await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.text());
    assert_eq!(released.json::<Hold>().released_by.as_deref(), Some("alex"));
    let view = reconcile(&rig).await;
    assert_eq!(
        object(&view, "ClusterQueue", "research").state,
        ObjectState::InSync
    );
    assert_eq!(stop_policy("research"), json!("None"));
    assert_eq!(nominal(&double, "research", "h200-train"), Some(48));
    // the same budget proposes no hold again
    let after = budget::evaluate(&pool, crate::budgets::NOV_10)
        .await
        .expect("after");
    assert_eq!(after.holds, 0);

    let audited: Vec<(String, String)> = sqlx::query_as(
        "select actor, action from audit_log where subject = 'ClusterQueue of research' order by id",
    )
    .fetch_all(&pool)
    .await
    .expect("audit");
    let audited: Vec<(&str, &str)> = audited
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(
        audited,
        [
            ("gpufleet", "propose hold"),
            ("alex", "hold ClusterQueue"),
            ("alex", "release ClusterQueue")
        ]
    );
}

/// research's November on `flavor` costs $774.00 by allocation by November 10, and ada sets a
/// budget of $700.00 (110.57%).
pub(crate) async fn research_over_budget(rig: &Rig, pool: &PgPool, flavor: &str) {
    crate::budgets::research_burns_november_on(pool, flavor).await;
    let reply = call(
        rig,
        Method::PUT,
        "/api/chargeback/budgets/research/2026-11",
        &rig.ada,
        Some(json!({"limit_cents": 70_000})),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
}

pub(crate) async fn decide_hold(rig: &Rig, who: &Session, id: i64, action: &str) -> Reply {
    let uri = format!("/api/chargeback/holds/{id}/{action}");
    call(rig, Method::POST, &uri, who, None).await
}

/// Polls the history alex reads of November 30 (every 50 ms, at most 10 s) until `check`
/// holds of it.
pub(crate) async fn history_until(
    rig: &Rig,
    what: &str,
    check: impl Fn(&shared::cluster::workload::WorkloadHistory) -> bool,
) -> shared::cluster::workload::WorkloadHistory {
    for _ in 0..200 {
        let seen = history(rig, NOV_30, &rig.alex).await.json();
        if check(&seen) {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the history never showed {what}");
}

/// How many times the recorder asked the double to `verb` Workloads.
fn asked(double: &KubeDouble, verb: &str) -> usize {
    (double.calls().iter())
        .filter(|c| c.resource == "workloads" && c.verb == verb)
        .count()
}

pub(crate) fn named<'a>(
    seen: &'a shared::cluster::workload::WorkloadHistory,
    name: &str,
) -> Option<&'a shared::cluster::workload::HistoryEntry> {
    seen.workloads.iter().find(|w| w.workload.name == name)
}

/// The recorder as client-go's reflector works: one listing, then a watch from its resource
/// version. What Kueue writes afterwards arrives as changes (no second listing); a deletion
/// marks the row gone; a cluster that is down is watched again from where the watch was, so
/// the deletion and the Workload made meanwhile arrive as changes; a bookmark moves the
/// watch's version past other kinds' writes, so a compaction after it costs nothing; a watch
/// from a version the server compacted away (410 Expired) lists once more. Nothing twice.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_workload_recorder_follows_kueue_by_watch_through_outages_bookmarks_and_compaction(
    pool: PgPool,
) {
    let dir = scratch("history-watch");
    let (double, _) = double_and_cluster(&dir, Duration::from_secs(5)).await;
    let cluster = connect(&double, &dir, Duration::from_secs(5))
        .await
        .every(Duration::from_millis(100));
    let rig = rig(&pool, "history-watch", |_| Arc::new(cluster)).await;
    let kueue = |object: Value| {
        double
            .write_as_controller("kueue-controller", object)
            .expect("a Workload as Kueue writes it");
    };
    let job = |name: &str, status: Value| {
        workload(
            "team-research",
            name,
            Some("research"),
            "2026-11-30T08:00:00Z",
            status,
        )
    };
    kueue(job("job-a", json!({})));
    let recorder = cluster::history::spawn(rig.state.clone()).expect("a cluster is read");
    history_until(&rig, "job-a listed", |h| named(h, "job-a").is_some()).await;

    let preempted = vec![condition(
        "Evicted",
        "True",
        "Preempted",
        "2026-11-30T10:30:00Z",
    )];
    kueue(job(
        "job-a",
        admitted("research", "2026-11-30T08:04:00Z", preempted, 1),
    ));
    kueue(job("job-b", json!({})));
    // the recorder stores a change, then marks itself current: wait for both
    history_until(&rig, "job-a evicted and job-b, by watch", |h| {
        named(h, "job-a").is_some_and(|w| w.evictions_seen.len() == 1)
            && named(h, "job-b").is_some()
            && h.recorder.watched_at_ms.is_some()
    })
    .await;
    assert!(double.delete("Workload", Some("team-research"), "job-b"));
    history_until(&rig, "job-b gone", |h| {
        named(h, "job-b").is_some_and(|w| w.gone_at_ms.is_some())
    })
    .await;
    assert_eq!(asked(&double, "list"), 1, "changes came by watch");

    // The cluster down: Kueue deletes job-a and makes job-c meanwhile.
    double.set_fault(Some(Fault::Status(503)));
    double.close_watches();
    let down = history_until(&rig, "the outage", |h| h.recorder.last_error.is_some()).await;
    assert!(
        down.recorder
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("503")),
        "{:?}",
        down.recorder
    );
    assert_eq!(down.recorder.watched_at_ms, None);
    assert!(double.delete("Workload", Some("team-research"), "job-a"));
    kueue(job("job-c", json!({})));
    double.set_fault(None);
    let back = history_until(&rig, "job-a gone and job-c", |h| {
        named(h, "job-a").is_some_and(|w| w.gone_at_ms.is_some()) && named(h, "job-c").is_some()
    })
    .await;
    assert_eq!(asked(&double, "list"), 1, "watched again from where it was");
    assert_eq!(back.recorder.last_error, None);

    // Another kind's write, then a bookmark: the watch's version moves past it, so compacting
    // the server's log up to now costs no listing.
    double
        .write_as_controller(
            "kueue-controller",
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                "metadata": {"name": "elsewhere"}, "spec": {"resourceGroups": [{
                "coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "h100-shared",
                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}),
        )
        .expect("a ClusterQueue");
    let before = back.recorder.watched_at_ms;
    double.bookmark();
    history_until(&rig, "the bookmark", |h| h.recorder.watched_at_ms > before).await;
    double.compact();
    double.close_watches();
    kueue(job("job-d", json!({})));
    history_until(&rig, "job-d", |h| named(h, "job-d").is_some()).await;
    assert_eq!(asked(&double, "list"), 1, "the bookmark's version was kept");

    // A watch from a version compacted away: 410 Expired, one listing, nothing lost.
    double.set_fault(Some(Fault::Status(503)));
    double.close_watches();
    history_until(&rig, "the second outage", |h| {
        h.recorder.last_error.is_some()
    })
    .await;
    kueue(job("job-e", json!({})));
    assert!(double.delete("Workload", Some("team-research"), "job-c"));
    double.compact();
    double.set_fault(None);
    let relisted = history_until(&rig, "job-e and job-c gone", |h| {
        named(h, "job-e").is_some() && named(h, "job-c").is_some_and(|w| w.gone_at_ms.is_some())
    })
    .await;
    assert_eq!(asked(&double, "list"), 2, "listed again after 410 Expired");
    let names: Vec<&str> = (relisted.workloads.iter())
        .map(|w| w.workload.name.as_str())
        .collect();
    assert_eq!(names, ["job-a", "job-b", "job-c", "job-d", "job-e"]);
    let a = named(&relisted, "job-a").expect("job-a");
    assert_eq!(a.evictions_seen.len(), 1, "counted once");
    recorder.abort();
}
