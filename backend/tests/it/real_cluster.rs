//! Approved quota on a real kube-apiserver with a real Kueue (`common::real_cluster`): what
//! gpufleet applies, what it calls drift, what the server's dry run and conflicts say, whether
//! a hold really stops admission, whether the Cluster page's "starts" is what Kueue does, and
//! whether the workload recorder keeps what Kueue really ran. The expectations are Kubernetes'
//! and Kueue's own behaviour, observed on the live objects; nothing here is the double.
//!
//! Each test names its flavors, queues, cohort and namespaces after itself (`Names`), so the
//! tests share the one cluster side by side; objects of other tests are, to each, ones gpufleet
//! did not approve.

use std::{sync::Arc, time::Duration};

use axum::http::{Method, StatusCode};
use backend::{
    AppState,
    audit::Actor,
    cluster::{Cluster, k8s::Connection},
};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use shared::{
    cluster::{ClusterView, DryRun, ObjectState},
    kueue::KueueVersion,
};
use sqlx::PgPool;

use crate::{
    cluster::{
        Rig, call, decide, dry_run, nominal_of, object, reapply, reconcile, signed_in, spec_of,
        submitted, submitted_spec,
    },
    common::real_cluster::{self, Names, eventually, real},
};

/// The demo inventory with every name the cluster sees made the test's own: flavors (and so
/// ResourceFlavors), the teams' namespaces, ClusterQueues and cohort.
fn inventory(names: &Names) -> shared::inventory::Inventory {
    let mut inventory = backend::fleet::demo_inventory().expect("demo inventory");
    for flavor in &mut inventory.flavors {
        flavor.name = names.of(&flavor.name);
    }
    for pool in &mut inventory.pools {
        pool.flavor = pool.flavor.as_ref().map(|f| names.of(f));
    }
    for team in &mut inventory.teams {
        team.namespace = names.of(&team.name);
        team.cluster_queue = Some(names.of(&team.name));
        team.cohort = Some(names.prefix.clone());
    }
    inventory
}

/// The console over a fresh database, its inventory named after the test, reconciling to the
/// real cluster through an ordinary kubeconfig.
pub(crate) async fn real_rig(pool: &PgPool, names: &Names) -> Rig {
    real_rig_with(
        pool,
        &inventory(names),
        real().kubeconfig(),
        KueueVersion::V1beta2,
    )
    .await
}

/// [`real_rig`] with this inventory, through the API server `kubeconfig` names, writing
/// Kueue's objects at `version`.
async fn real_rig_with(
    pool: &PgPool,
    inventory: &shared::inventory::Inventory,
    kubeconfig: std::path::PathBuf,
    version: KueueVersion,
) -> Rig {
    backend::fleet::inventory::apply(pool, inventory, Actor::Console, false)
        .await
        .expect("inventory");
    let cluster = real();
    for team in &inventory.teams {
        cluster.create_namespace(&team.namespace).await;
    }
    let connection = Connection {
        kubeconfig: Some(kubeconfig),
        context: None,
        timeout: Duration::from_secs(10),
    };
    let kube = Cluster::kube(&connection, version)
        .await
        .expect("connect")
        .every(Duration::from_millis(200));
    signed_in(
        pool,
        AppState::new(pool.clone()).with_cluster(Arc::new(kube)),
    )
    .await
}

/// The objects this test's console approves that are not in sync with the cluster (other
/// tests' queues on the shared cluster are, to it, not approved): kind, name, state, changes.
fn out_of_sync(view: &ClusterView, names: &Names) -> Vec<String> {
    view.objects
        .iter()
        .filter(|o| o.state != ObjectState::Unapproved || o.object.name.starts_with(&names.prefix))
        .filter(|o| o.state != ObjectState::InSync)
        .map(|o| {
            format!(
                "{} {}: {:?} {:?} {:?}",
                o.object.kind, o.object.name, o.state, o.changes, o.error
            )
        })
        .collect()
}

/// The nominal quota of `flavor` in the ClusterQueue `queue` as the server holds it, in GPUs.
async fn live_nominal(queue: &str, flavor: &str) -> Option<i128> {
    let cq = real()
        .object("ClusterQueue", None, queue)
        .await
        .expect("live queue");
    nominal_of(&cq, flavor)
}

/// The field managers of an object's spec (status writers left out).
fn spec_managers(object: &Value) -> Vec<String> {
    object["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .filter(|m| m.get("subresource").is_none())
        .map(|m| m["manager"].as_str().expect("manager").to_owned())
        .collect()
}

/// Approval to live objects on real Kueue: the review's dry run is the server's own and stores
/// nothing; the approved ClusterQueue lands by server-side apply and reads back in sync (the
/// defaults the API server and Kueue's webhook add are not drift); a `kubectl patch` is drift,
/// re-applying it meets the server's own 409 naming kubectl's manager, and taking ownership
/// wins the field back; another manager applying our field gets the real 409 too.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn approved_quota_lands_on_real_kueue_and_drift_and_conflicts_are_the_servers(pool: PgPool) {
    let names = Names::new("apply");
    let rig = real_rig(&pool, &names).await;
    let (queue, flavor) = (names.of("search"), names.of("h100-shared"));
    let view = reconcile(&rig).await;
    assert_eq!(out_of_sync(&view, &names), Vec::<String>::new());
    assert_eq!(live_nominal(&queue, &flavor).await, Some(0));

    // The review's dry run, asked of the real server.
    let (id, version) = submitted(&rig, &rig.sam, "search", &flavor, 32).await;
    let reply = dry_run(&rig, &rig.alex, id).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let dry: DryRun = reply.json();
    assert_eq!(
        (dry.against.as_str(), dry.error.as_deref()),
        ("server", None)
    );
    let changed: Vec<(&str, &str)> = dry
        .objects
        .iter()
        .map(|o| (o.object.kind.as_str(), o.object.name.as_str()))
        .collect();
    assert_eq!(changed, [("ClusterQueue", queue.as_str())], "{dry:#?}");
    assert!(
        dry.objects[0]
            .changes
            .iter()
            .any(|c| c.path.ends_with("nominalQuota")
                && c.live.as_ref().and_then(shared::common::quantity::milli) == Some(0)
                && c.desired == Some(json!(32))),
        "{:#?}",
        dry.objects[0].changes
    );
    assert_eq!(
        live_nominal(&queue, &flavor).await,
        Some(0),
        "a dry run stores nothing"
    );

    decide(&rig, "search", id, "approve", version).await;
    let view = reconcile(&rig).await;
    assert_eq!(out_of_sync(&view, &names), Vec::<String>::new());
    assert_eq!(live_nominal(&queue, &flavor).await, Some(32));
    let live = real()
        .object("ClusterQueue", None, &queue)
        .await
        .expect("queue");
    assert_eq!(live["spec"]["cohortName"], json!(names.prefix));
    assert_eq!(spec_managers(&live), ["gpufleet"]);
    let again = reconcile(&rig).await;
    assert_eq!(
        object(&again, "ClusterQueue", &queue).state,
        ObjectState::InSync
    );

    // kubectl changes the nominal quota: drift, reported, not reverted.
    let group = live["spec"]["resourceGroups"]
        .as_array()
        .expect("groups")
        .iter()
        .position(|g| {
            g["flavors"]
                .as_array()
                .expect("flavors")
                .iter()
                .any(|f| f["name"] == json!(flavor))
        })
        .expect("the flavor's group");
    let at = live["spec"]["resourceGroups"][group]["flavors"]
        .as_array()
        .expect("flavors")
        .iter()
        .position(|f| f["name"] == json!(flavor))
        .expect("flavor");
    let path = format!("/spec/resourceGroups/{group}/flavors/{at}/resources/0/nominalQuota");
    real().kubectl_ok(&[
        "patch",
        "clusterqueue",
        &queue,
        "--type",
        "json",
        "-p",
        &json!([{"op": "replace", "path": path, "value": 80}]).to_string(),
    ]);
    let view = reconcile(&rig).await;
    let drifted = object(&view, "ClusterQueue", &queue);
    assert_eq!(drifted.state, ObjectState::Drifted, "{drifted:#?}");
    assert_eq!(drifted.changes.len(), 1, "{:#?}", drifted.changes);
    assert_eq!(
        (
            drifted.changes[0].live.clone(),
            drifted.changes[0].desired.clone()
        ),
        (Some(json!(80)), Some(json!(32)))
    );
    assert_eq!(live_nominal(&queue, &flavor).await, Some(80));

    // Re-applying meets kubectl's ownership: the server's 409, shown, nothing overwritten.
    let target = json!({"objects": [{"kind": "ClusterQueue", "name": queue}]});
    let view: ClusterView = reapply(&rig, &rig.alex, target.clone()).await.json();
    let conflict = object(&view, "ClusterQueue", &queue);
    assert_eq!(conflict.state, ObjectState::Conflict, "{conflict:#?}");
    assert!(
        conflict
            .conflicts
            .iter()
            .all(|c| c.starts_with("kubectl-patch: "))
            && !conflict.conflicts.is_empty(),
        "{:?}",
        conflict.conflicts
    );
    assert!(
        conflict.error.as_deref().is_some_and(
            |e| e.starts_with("Apply failed with 1 conflict: conflict with \"kubectl-patch\"")
        ),
        "{:?}",
        conflict.error
    );
    assert_eq!(live_nominal(&queue, &flavor).await, Some(80));

    // Take ownership: forced, and the field is gpufleet's again.
    let mut force = target;
    force["force"] = json!(true);
    let view: ClusterView = reapply(&rig, &rig.alex, force).await.json();
    assert_eq!(
        object(&view, "ClusterQueue", &queue).state,
        ObjectState::InSync
    );
    assert_eq!(live_nominal(&queue, &flavor).await, Some(32));
    let live = real()
        .object("ClusterQueue", None, &queue)
        .await
        .expect("queue");
    assert!(
        !spec_managers(&live).contains(&"kubectl-patch".to_owned()),
        "{:?}",
        spec_managers(&live)
    );

    // Another manager applying a field gpufleet owns: the server's own 409.
    let mut theirs = live.clone();
    theirs["metadata"] = json!({"name": queue});
    theirs.as_object_mut().expect("object").remove("status");
    theirs["spec"]["resourceGroups"][group]["flavors"][at]["resources"][0]["nominalQuota"] =
        json!(5);
    let err = real()
        .apply("someone-else", theirs)
        .await
        .expect_err("a conflict");
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains("conflict with \"gpufleet\""),
        "{}",
        status.message
    );
}

/// Submits `lines` for `team` as `who` and has alex approve them.
pub(crate) async fn approve(rig: &Rig, who: &crate::common::Session, team: &str, lines: Value) {
    approve_spec(rig, who, team, spec_of(lines)).await;
}

/// `spec` requested for `team` by `who`, submitted and approved.
async fn approve_spec(rig: &Rig, who: &crate::common::Session, team: &str, spec: Value) {
    let (id, version) = submitted_spec(rig, who, team, spec).await;
    decide(rig, team, id, "approve", version).await;
}

/// research's quota of `gpus` H200s (its flavor named after the test), approved.
async fn research_gets(rig: &Rig, names: &Names, gpus: u32) {
    let line =
        json!({"flavor": names.of("h200-train"), "resource": "nvidia.com/gpu", "nominal": gpus});
    approve(rig, &rig.rita, "research", json!([line])).await;
}

/// A Workload of one pod set (`count` pods, each asking `requests`: resource and quantity in
/// Kubernetes' notation), at `priority`, in `queue`.
fn workload(
    namespace: &str,
    name: &str,
    queue: &str,
    count: u32,
    requests: Value,
    priority: i32,
) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"queueName": queue, "priority": priority, "podSets": [{"name": "main", "count": count,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "probe",
                "resources": {"requests": requests, "limits": requests}}]}}}]}})
}

/// What Kueue decided of a Workload: `Ok` with the flavor of each resource it reserved quota
/// on, or `Err` with its reason to keep it pending (`QuotaReserved` False).
async fn decided(namespace: &str, name: &str) -> Result<Value, String> {
    eventually(30, &format!("{name} decided by Kueue"), async || {
        let wl = real().object("Workload", Some(namespace), name).await?;
        let reserved = wl["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "QuotaReserved")?
            .clone();
        if reserved["status"] == "True" {
            Some(Ok(
                wl["status"]["admission"]["podSetAssignments"][0]["flavors"].clone(),
            ))
        } else {
            reserved["message"]
                .as_str()
                .filter(|m| !m.is_empty())
                .map(|m| Err(m.to_owned()))
        }
    })
    .await
}

/// Waits until Kueue reports the ClusterQueue stopped (`Active` False, reason `Stopped`), or
/// active again.
async fn stopped(queue: &str, held: bool) {
    eventually(30, &format!("{queue} seen held: {held}"), async || {
        let cq = real().object("ClusterQueue", None, queue).await?;
        let active = cq["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Active")?
            .clone();
        let seen = active["status"] == "False" && active["reason"] == "Stopped";
        (seen == held).then_some(())
    })
    .await;
}

/// Whether the Workload holds quota now (`QuotaReserved` True).
async fn holds_quota(namespace: &str, name: &str) -> bool {
    let wl = real()
        .object("Workload", Some(namespace), name)
        .await
        .expect("workload");
    wl["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "QuotaReserved" && c["status"] == "True")
}

/// A hold is Kueue's `stopPolicy: Hold`: once an approver confirms it, real Kueue admits no new
/// Workload into the team's queue while the one it admitted before keeps its quota; releasing
/// it admits the waiting one (Kueue's ClusterQueue docs, "StopPolicy": Hold stops admitting,
/// HoldAndDrain would also evict).
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_confirmed_hold_stops_real_kueue_admitting_and_release_resumes(pool: PgPool) {
    use backend::chargeback::budget;
    let names = Names::new("hold");
    let rig = real_rig(&pool, &names).await;
    let (ns, queue) = (names.of("research"), "research");
    research_gets(&rig, &names, 48).await;
    reconcile(&rig).await;
    let gpus = json!({"nvidia.com/gpu": "8"});
    real()
        .apply(
            "test",
            workload(&ns, "before-hold", queue, 1, gpus.clone(), 10),
        )
        .await
        .expect("workload");
    assert!(decided(&ns, "before-hold").await.is_ok());

    // November burnt past a $700.00 budget: a hold proposed, then confirmed.
    crate::cluster::research_over_budget(&rig, &pool, &names.of("h100-shared")).await;
    assert_eq!(
        budget::evaluate(&pool, crate::budgets::NOV_10)
            .await
            .expect("evaluate")
            .holds,
        1
    );
    let hold: shared::chargeback::budget::Budgets = call(
        &rig,
        Method::GET,
        "/api/chargeback/budgets?month=2026-11",
        &rig.alex,
        None,
    )
    .await
    .json();
    let id = hold.holds[0].id;
    let confirmed = crate::cluster::decide_hold(&rig, &rig.alex, id, "confirm").await;
    assert_eq!(confirmed.status, StatusCode::OK, "{}", confirmed.text());
    reconcile(&rig).await;
    let live = real()
        .object("ClusterQueue", None, &names.of("research"))
        .await
        .expect("queue");
    assert_eq!(live["spec"]["stopPolicy"], "Hold");
    // Kueue says so on the queue (condition Active False, reason Stopped) once it has seen it.
    stopped(&names.of("research"), true).await;

    // Held: a new Workload waits with quota to spare; the admitted one keeps its quota.
    real()
        .apply("test", workload(&ns, "during-hold", queue, 1, gpus, 10))
        .await
        .expect("workload");
    let waiting = decided(&ns, "during-hold").await;
    assert!(waiting.is_err(), "{waiting:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !holds_quota(&ns, "during-hold").await,
        "nothing admitted while held"
    );
    assert!(
        holds_quota(&ns, "before-hold").await,
        "admitted work keeps running"
    );

    let released = crate::cluster::decide_hold(&rig, &rig.alex, id, "release").await;
    assert_eq!(released.status, StatusCode::OK, "{}", released.text());
    reconcile(&rig).await;
    eventually(30, "admitted after the release", async || {
        holds_quota(&ns, "during-hold").await.then_some(())
    })
    .await;
}

/// Quantities of a trial pod in Kubernetes' notation (cpu in millicores, the rest in units).
fn quantities(pod: &shared::kueue::PodRequest) -> Value {
    pod.requests
        .iter()
        .map(|(resource, amount)| {
            let quantity = if resource == "cpu" {
                format!("{amount}m")
            } else {
                amount.to_string()
            };
            (resource.clone(), json!(quantity))
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// The Cluster page's "starts" / "never starts" against real Kueue: for every team × flavor
/// line of quota in force on the demo fleet (whole H200s and H100s, MIG instances, and a flavor
/// shared by HAMi, whose per-vGPU resources the queues do not cover), the pod the check puts
/// through Kueue's rules is created as a probe Workload in the team's LocalQueue: Kueue
/// reserves quota on exactly the flavor the check names, or keeps it pending where the check
/// says Kueue refuses it.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn would_pods_start_is_what_real_kueue_does_with_the_same_pod(pool: PgPool) {
    let names = Names::new("admission");
    let mut inventory = inventory(&names);
    let rtx = names.of("rtx-inference");
    let hami = inventory
        .flavors
        .iter_mut()
        .find(|f| f.name == rtx)
        .expect("rtx");
    hami.settings.sharing = Some(shared::fleet::sharing::Mechanism::HamiFractions);
    let rig = real_rig_with(
        &pool,
        &inventory,
        real().kubeconfig(),
        KueueVersion::V1beta2,
    )
    .await;
    // each team's declared largest job is tried too, on its whole GPUs: research's 32 fits its
    // 48 H200s; search's 24 is more than its cohort holds of H100s (16), with no borrowing
    // limit: Kueue's "maximum capacity"
    let mut research = spec_of(json!([
        {"flavor": names.of("h200-train"), "resource": "nvidia.com/gpu", "nominal": 48},
        {"flavor": names.of("h100-mig"), "resource": "nvidia.com/mig-1g.10gb", "nominal": 14}]));
    research["largest_job_gpus"] = json!(32);
    approve_spec(&rig, &rig.rita, "research", research).await;
    let mut search = spec_of(json!([
        {"flavor": names.of("h100-shared"), "resource": "nvidia.com/gpu", "nominal": 16},
        {"flavor": rtx, "resource": "nvidia.com/gpu", "nominal": 8}]));
    search["largest_job_gpus"] = json!(24);
    approve_spec(&rig, &rig.sam, "search", search).await;
    let view = reconcile(&rig).await;
    let world = backend::quota::world(&mut pool.acquire().await.expect("conn"))
        .await
        .expect("world");
    let trials = world.admission_trials(backend::clock::today());
    assert_eq!(trials.len(), 6);
    assert_eq!(view.admission.len(), trials.len());
    let mut table = Vec::new();
    for (i, (trial, verdict)) in trials.iter().zip(&view.admission).enumerate() {
        assert_eq!(trial.subject, verdict.subject);
        let pod = &trial.pod;
        let name = format!("probe-{i}");
        let queue = pod.queue_name.as_deref().expect("queue");
        let mut probe = workload(&pod.namespace, &name, queue, 1, quantities(pod), 0);
        probe["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] =
            serde_json::to_value(&pod.node_selector).expect("selector");
        assert!(pod.tolerations.is_empty());
        real().apply("test", probe).await.expect("probe");
        let kueue = decided(&pod.namespace, &name).await;
        let gpu = &pod.requests[0].0;
        let on = kueue
            .as_ref()
            .ok()
            .and_then(|f| f[gpu].as_str().map(str::to_owned));
        table.push((
            trial.subject.clone(),
            verdict.flavor.clone(),
            on,
            format!("{verdict:?} / {kueue:?}"),
        ));
    }
    let agree = table.iter().all(|(_, check, kueue, _)| check == kueue);
    assert!(
        agree,
        "subject, the check's flavor, Kueue's flavor:\n{table:#?}"
    );
    let refused: Vec<&str> = table
        .iter()
        .filter(|row| row.2.is_none())
        .map(|row| row.0.as_str())
        .collect();
    assert_eq!(
        refused,
        [
            format!(
                "search 24 nvidia.com/gpu on {} (its largest job)",
                names.of("h100-shared")
            ),
            format!("search 1 nvidia.com/gpu on {rtx}"),
        ],
        "search's largest job is more than its cohort holds; the HAMi flavor's pod asks what \
         no queue covers: {table:#?}"
    );
}

/// A Job of one pod asking `gpus` GPUs in the LocalQueue `queue`, for Kueue's Job integration:
/// created unsuspended and suspended by Kueue's webhook, its Workload made by Kueue.
pub(crate) fn job(
    namespace: &str,
    queue: &str,
    name: &str,
    gpus: u32,
    priority_class: &str,
) -> Value {
    let gpus = json!({"nvidia.com/gpu": gpus.to_string()});
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {
            "kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/priority-class": priority_class}},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "train", "image": "train", "resources": {"requests": gpus, "limits": gpus}}]}}}})
}

/// What a Job controller and kubelet would write when its one pod succeeded (there is neither
/// here): `SuccessCriteriaMet`, then `Complete` (batch/v1's rules since Kubernetes 1.31).
pub(crate) async fn complete(job: &Value) {
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        real().client().await,
        job["metadata"]["namespace"].as_str().expect("namespace"),
        &real_cluster::resource("batch/v1", "Job"),
    );
    complete_in(&jobs, job["metadata"]["name"].as_str().expect("name")).await;
}

/// [`complete`] for the Job `name` of `jobs`.
pub(crate) async fn complete_in(jobs: &Api<DynamicObject>, name: &str) {
    let now = k8s_now();
    let condition = |kind: &str| {
        json!({"type": kind, "status": "True", "reason": "CompletionsReached",
        "message": "Reached expected number of succeeded pods", "lastTransitionTime": now, "lastProbeTime": now})
    };
    let live = jobs.get(name).await.expect("job");
    let started = live.data["status"]["startTime"]
        .as_str()
        .map_or(now.clone(), str::to_owned);
    let status = json!({"status": {"startTime": started, "completionTime": now, "succeeded": 1,
        "conditions": [condition("SuccessCriteriaMet"), condition("Complete")]}});
    jobs.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("the Job completed");
}

/// Now, as Kubernetes writes times (whole seconds, UTC).
fn k8s_now() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    shared::common::utc::format_rfc3339(i64::try_from(ms / 1000 * 1000).expect("ms"))
}

/// The history of today as alex reads it, once `check` holds of it (at most 30 s).
async fn recorded(
    rig: &Rig,
    what: &str,
    check: impl Fn(&shared::cluster::workload::WorkloadHistory) -> bool,
) -> shared::cluster::workload::WorkloadHistory {
    let today = backend::clock::today();
    let path = format!("/api/cluster/workloads?from={today}&to={today}");
    eventually(30, what, async || {
        let seen: shared::cluster::workload::WorkloadHistory =
            call(rig, Method::GET, &path, &rig.alex, None).await.json();
        check(&seen).then_some(seen)
    })
    .await
}

/// The recorded Workload of the Job `job` (Kueue names it `job-<name>-<hash>`).
fn of_job<'a>(
    history: &'a shared::cluster::workload::WorkloadHistory,
    namespace: &str,
    job: &str,
) -> Option<&'a shared::cluster::workload::HistoryEntry> {
    let prefix = format!("job-{job}-");
    history
        .workloads
        .iter()
        .find(|w| w.workload.namespace == namespace && w.workload.name.starts_with(&prefix))
}

/// The recorder on real Kueue: a training Job admitted, preempted inside its ClusterQueue by an
/// evaluation Job of priority 100 (Kueue evicts it, suspends the Job and requeues it), then
/// re-admitted when the evaluation completes; each admission, the eviction with Kueue's own
/// reasons, and each finish recorded once, through a kube-apiserver restart (watches end, and a
/// watch from before it may be answered 410 Gone) and a Job made while the console looked away.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_recorder_keeps_what_real_kueue_ran_through_preemption_and_an_apiserver_restart(
    pool: PgPool,
) {
    let names = Names::new("history");
    // Through the spare API server, the one this test restarts.
    let rig = real_rig_with(
        &pool,
        &inventory(&names),
        real().spare_kubeconfig(),
        KueueVersion::V1beta2,
    )
    .await;
    let ns = names.of("research");
    approve(&rig, &rig.rita, "research",
        json!([{"flavor": names.of("h200-train"), "resource": "nvidia.com/gpu", "nominal": 8, "borrowing_limit": 0}])).await;
    reconcile(&rig).await;
    let recorder = backend::cluster::history::spawn(rig.state.clone()).expect("a cluster is read");

    let train = job(&ns, "research", "train", 8, "priority-10");
    real().apply("test", train.clone()).await.expect("train");
    let seen = recorded(&rig, "train admitted", |h| {
        of_job(h, &ns, "train").is_some_and(|w| w.workload.admitted_at_ms.is_some())
    })
    .await;
    let first_admission = of_job(&seen, &ns, "train")
        .expect("train")
        .workload
        .admitted_at_ms;

    let eval = job(&ns, "research", "eval", 8, "priority-100");
    real().apply("test", eval.clone()).await.expect("eval");
    let seen = recorded(&rig, "train preempted and eval admitted", |h| {
        of_job(h, &ns, "train").is_some_and(|w| w.evictions_seen.len() == 1)
            && of_job(h, &ns, "eval").is_some_and(|w| w.workload.admitted_at_ms.is_some())
    })
    .await;
    let evicted = &of_job(&seen, &ns, "train").expect("train").evictions_seen[0];
    assert_eq!(
        (evicted.reason.as_str(), evicted.detail.as_deref()),
        ("Preempted", Some("InClusterQueue"))
    );
    let eval_wl = of_job(&seen, &ns, "eval").expect("eval");
    assert_eq!(eval_wl.workload.priority, 100);
    assert_eq!(
        eval_wl.workload.pod_sets[0].resources.get("nvidia.com/gpu"),
        Some(&8)
    );
    assert_eq!(
        eval_wl.workload.pod_sets[0].flavors.get("nvidia.com/gpu"),
        Some(&names.of("h200-train"))
    );

    // kube-apiserver restarts: the recorder's watch ends, and it carries on.
    real().restart_apiserver();
    complete(&eval).await;
    let seen = recorded(&rig, "eval finished, train admitted again", |h| {
        of_job(h, &ns, "eval").is_some_and(|w| w.workload.finished.is_some())
            && of_job(h, &ns, "train").is_some_and(|w| {
                w.workload.quota_reserved_at_ms.is_some() && w.workload.evicted.is_none()
            })
    })
    .await;
    let train_wl = of_job(&seen, &ns, "train").expect("train");
    assert_eq!(
        train_wl.workload.admitted_at_ms, first_admission,
        "the first admission is kept"
    );
    assert_eq!(
        of_job(&seen, &ns, "eval")
            .expect("eval")
            .workload
            .finished
            .as_ref()
            .map(|f| f.reason.as_str()),
        Some("Succeeded")
    );

    // The console away while a Job runs and finishes; back, it lists and loses nothing.
    recorder.abort();
    complete(&train).await;
    let late = job(&ns, "research", "late", 8, "priority-10");
    real().apply("test", late.clone()).await.expect("late");
    eventually(30, "late admitted", async || {
        let wl = real().get("batch/v1", "Job", Some(&ns), "late").await?;
        (wl["spec"]["suspend"] == json!(false)).then_some(())
    })
    .await;
    let recorder = backend::cluster::history::spawn(rig.state.clone()).expect("a cluster is read");
    let seen = recorded(&rig, "train finished and late admitted", |h| {
        of_job(h, &ns, "train").is_some_and(|w| w.workload.finished.is_some())
            && of_job(h, &ns, "late").is_some_and(|w| w.workload.admitted_at_ms.is_some())
    })
    .await;
    let ours: Vec<&str> = seen
        .workloads
        .iter()
        .filter(|w| w.workload.namespace == ns)
        .map(|w| w.workload.name.as_str())
        .collect();
    assert_eq!(ours.len(), 3, "one row per Workload: {ours:?}");
    let train_wl = of_job(&seen, &ns, "train").expect("train");
    assert_eq!(
        train_wl.evictions_seen.len(),
        1,
        "the eviction counted once"
    );
    assert_eq!(
        train_wl
            .workload
            .evictions
            .iter()
            .map(|e| e.count)
            .sum::<u32>(),
        1,
        "{:?}",
        train_wl.workload.evictions
    );
    recorder.abort();
}

/// One call of the protocol sequence: method, path, content type and body.
struct Step {
    what: &'static str,
    method: &'static str,
    path: String,
    content_type: &'static str,
    body: Option<Value>,
}

impl Step {
    /// A call without a body (GET, DELETE) of `path`.
    fn bare(what: &'static str, method: &'static str, path: &str) -> Self {
        let content_type = "application/json";
        let path = path.to_owned();
        Self {
            what,
            method,
            path,
            content_type,
            body: None,
        }
    }

    /// Server-side apply of a Kueue `object` by `manager` (`extra`: more query parameters).
    fn apply(what: &'static str, object: Value, manager: &str, extra: &str) -> Self {
        let resource = real_cluster::kueue(object["kind"].as_str().expect("kind"));
        let name = object["metadata"]["name"].as_str().expect("name");
        let namespace = object["metadata"]["namespace"].as_str();
        let within = namespace.map_or_else(String::new, |ns| format!("/namespaces/{ns}"));
        Self {
            what,
            method: "PATCH",
            path: format!(
                "/apis/kueue.x-k8s.io/v1beta2{within}/{}/{name}?fieldManager={manager}{extra}",
                resource.plural
            ),
            content_type: "application/apply-patch+yaml",
            body: Some(object),
        }
    }
}

/// Sends a step raw (any status is an answer): its status code and JSON body (a watch's
/// events, one JSON object a line, as an array).
async fn send_raw(client: &kube::Client, step: &Step) -> (u16, Value) {
    let body = step
        .body
        .as_ref()
        .map_or_else(Vec::new, |b| b.to_string().into_bytes());
    let request = http::Request::builder()
        .method(step.method)
        .uri(&step.path)
        .header(http::header::CONTENT_TYPE, step.content_type)
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::from(body))
        .expect("request");
    let response = client.send(request).await.expect("an answer");
    let status = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("body")
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    let lines: Option<Vec<Value>> = text
        .lines()
        .map(|line| serde_json::from_str(line).ok())
        .collect();
    let body = serde_json::from_slice(&bytes)
        .ok()
        .or_else(|| lines.map(Value::from))
        .unwrap_or_else(|| json!(text));
    (status, body)
}

/// A watch's events with its bookmarks as one, last, of the kind's `kind` and `apiVersion`
/// alone: whether a server sends bookmarks, not how many or with which annotations.
fn one_bookmark(body: Value) -> Value {
    let Value::Array(events) = body else {
        return body;
    };
    let (bookmarks, mut events): (Vec<Value>, Vec<Value>) =
        events.into_iter().partition(|e| e["type"] == "BOOKMARK");
    if let Some(bookmark) = bookmarks.first() {
        let object = &bookmark["object"];
        events.push(json!({"type": "BOOKMARK",
            "object": {"kind": object["kind"], "apiVersion": object["apiVersion"]}}));
    }
    Value::Array(events)
}

/// A watch's events less each MODIFIED that changes nothing `comparable` keeps: Kueue's
/// controller writes a LocalQueue's status whenever its reconciler runs, so the real server
/// sends such an event within the watch or not, as the machine's load decides.
fn visible_changes(body: Value) -> Value {
    let Value::Array(events) = body else {
        return body;
    };
    let mut kept: Vec<Value> = Vec::new();
    for event in events {
        let same_as_before = event["type"] == "MODIFIED"
            && kept
                .iter()
                .rev()
                .find(|e| e["object"]["metadata"]["name"] == event["object"]["metadata"]["name"])
                .is_some_and(|e| e["object"] == event["object"]);
        if !same_as_before {
            kept.push(event);
        }
    }
    Value::Array(kept)
}

/// What two servers may answer differently and still agree: identities, times, versions, the
/// status a controller writes, the finalizers Kueue's controller adds.
fn comparable(mut body: Value) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for key in [
                    "uid",
                    "resourceVersion",
                    "creationTimestamp",
                    "time",
                    "deletionTimestamp",
                    "status",
                ] {
                    if key != "status" || map.contains_key("spec") {
                        map.remove(key);
                    }
                }
                // The test's own managers' entries (Kueue's controller writes status and its
                // finalizers, which leaves an entry of its own)
                if let Some(Value::Array(managers)) = map.get_mut("managedFields") {
                    managers
                        .retain(|m| m["manager"] == "gpufleet" || m["manager"] == "someone-else");
                    if managers.is_empty() {
                        map.remove("managedFields");
                    }
                }
                if let Some(Value::Array(finalizers)) = map.get_mut("finalizers") {
                    finalizers
                        .retain(|f| !f.as_str().is_some_and(|f| f.starts_with("kueue.x-k8s.io/")));
                    if finalizers.is_empty() {
                        map.remove("finalizers");
                    }
                }
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut body);
    body
}

/// The double against the real server: the same sequence of calls — apply (create, then the
/// same again), another manager's conflicting apply, a dry run and a read after it, an object
/// the CRD's CEL rules refuse, a namespace that does not exist, a delete that a finalizer holds,
/// a watch with bookmarks, the finalizer removed, the object gone — answered alike, status codes and bodies, but for
/// identities, times and what Kueue's controller writes (status, its finalizers).
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn the_double_answers_the_protocol_as_the_real_server_does(_pool: PgPool) {
    let names = Names::new("double");
    let double = kube_double::KubeDouble::start().await.expect("double");
    let dir = crate::cluster::scratch("double-vs-real");
    double
        .write_kubeconfig(&dir.join("kubeconfig"))
        .expect("kubeconfig");
    let double_client = {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(dir.join("kubeconfig")).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("config");
        kube::Client::try_from(config).expect("client")
    };
    let ns = names.of("team");
    double.create_namespace(&ns);
    real().create_namespace(&ns).await;
    let (flavor, queue, lq) = (names.of("f1"), names.of("cq"), names.of("lq"));
    let v1beta2 = "kueue.x-k8s.io/v1beta2";
    let rf = json!({"apiVersion": v1beta2, "kind": "ResourceFlavor", "metadata": {"name": flavor}});
    let cq = |name: &str, cohort: Option<&str>, nominal: u32, borrowing: u32| {
        json!({"apiVersion": v1beta2, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"cohortName": cohort, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": flavor, "resources": [{"name": "nvidia.com/gpu",
                    "nominalQuota": nominal, "borrowingLimit": borrowing}]}]}]}})
    };
    let ours = Some(names.prefix.as_str());
    let local_queue = |namespace: &str, finalizers: Value| {
        json!({"apiVersion": v1beta2, "kind": "LocalQueue", "metadata": {"name": lq,
            "namespace": namespace, "finalizers": finalizers}, "spec": {"clusterQueue": queue}})
    };
    let lq_path = format!("/apis/{v1beta2}/namespaces/{ns}/localqueues/{lq}");
    let cq_path = format!("/apis/{v1beta2}/clusterqueues/{queue}");
    let mut no_cohort = cq(&names.of("loner"), None, 8, 4);
    no_cohort["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("cohortName");
    let elsewhere = local_queue(&names.of("nowhere"), json!([]));
    let steps = [
        Step::apply("apply ResourceFlavor (create)", rf.clone(), "gpufleet", ""),
        Step::apply("apply ResourceFlavor (unchanged)", rf, "gpufleet", ""),
        Step::apply("apply ClusterQueue", cq(&queue, ours, 8, 2), "gpufleet", ""),
        Step::apply(
            "apply it as another manager",
            cq(&queue, ours, 5, 2),
            "someone-else",
            "",
        ),
        Step::apply("dry run", cq(&queue, ours, 9, 2), "gpufleet", "&dryRun=All"),
        Step::bare("read after the dry run", "GET", &cq_path),
        Step::apply("apply an invalid ClusterQueue", no_cohort, "gpufleet", ""),
        Step::apply(
            "apply into a namespace that does not exist",
            elsewhere,
            "gpufleet",
            "",
        ),
        Step::apply(
            "apply a LocalQueue with a finalizer",
            local_queue(&ns, json!(["gpufleet.test/keep"])),
            "gpufleet",
            "",
        ),
        Step::bare("delete it: held by its finalizer", "DELETE", &lq_path),
        Step::bare("read it while held", "GET", &lq_path),
        // Bookmarks come at the server's discretion (the Kubernetes API concepts, "Watch
        // bookmarks"): kube-apiserver v1.36 sends one or two in these 4 s, one of them at times
        // annotated `k8s.io/initial-events-end` (k8s.io/apiserver pkg/storage/cacher,
        // `nextBookmarkTime`, `isListWatchRequest`), so they are compared as one.
        Step::bare(
            "watch the namespace's LocalQueues, with bookmarks, for 4 s",
            "GET",
            &format!(
                "/apis/{v1beta2}/namespaces/{ns}/localqueues?watch=true&allowWatchBookmarks=true&timeoutSeconds=4"
            ),
        ),
        Step {
            what: "remove the finalizer",
            method: "PATCH",
            path: lq_path.clone(),
            content_type: "application/merge-patch+json",
            body: Some(json!({"metadata": {"finalizers": null}})),
        },
        Step::bare("read it once gone", "GET", &lq_path),
    ];
    let client = real().client().await;
    let mut differences = Vec::new();
    for step in &steps {
        let (real_code, real_body) = send_raw(&client, step).await;
        let (double_code, double_body) = send_raw(&double_client, step).await;
        let (real_body, double_body) = (
            visible_changes(comparable(one_bookmark(real_body))),
            visible_changes(comparable(one_bookmark(double_body))),
        );
        if (real_code, &real_body) != (double_code, &double_body) {
            differences.push(format!(
                "{}: the real server answered {real_code} {real_body:#}\nthe double {double_code} {double_body:#}",
                step.what
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
}

/// The lines of Kueue's exposition for one metric and ClusterQueue: their labels, verbatim, and
/// value.
fn exposed<'a>(text: &'a str, metric: &str, queue: &str) -> Vec<(&'a str, &'a str)> {
    let queue = format!("cluster_queue=\"{queue}\"");
    text.lines()
        .filter_map(|line| line.strip_prefix(metric)?.strip_prefix('{'))
        .filter_map(|rest| rest.split_once("} "))
        .filter(|(labels, _)| labels.contains(&queue))
        .collect()
}

/// Kueue's own queue metrics, through a real Prometheus, into the usage rows: with two 8-GPU
/// Workloads admitted into research's queue of 48 H200s, real Kueue exposes
/// `kueue_cluster_queue_resource_usage` 16 and `kueue_cluster_queue_nominal_quota` 48 (its
/// labels as it writes them); those series, stamped every 15 s over ten past minutes, loaded
/// into Prometheus (`promtool tsdb create-blocks-from openmetrics`) and ingested, give every
/// minute 16 GPU-minutes allocated and 48 nominal for the team (its namespace, the queue's
/// owner) and flavor: what was admitted and approved.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn kueues_own_queue_metrics_flow_through_prometheus_into_the_usage_rows(pool: PgPool) {
    use crate::common::prometheus::{PromServer, backfill_file, scratch};
    use shared::common::utc::MINUTE_MS;
    let names = Names::new("metrics");
    let rig = real_rig(&pool, &names).await;
    let (ns, queue, flavor) = (
        names.of("research"),
        names.of("research"),
        names.of("h200-train"),
    );
    research_gets(&rig, &names, 48).await;
    reconcile(&rig).await;
    for name in ["train-a", "train-b"] {
        let gpus = json!({"nvidia.com/gpu": "8"});
        real()
            .apply("test", workload(&ns, name, "research", 1, gpus, 10))
            .await
            .expect("workload");
        assert!(decided(&ns, name).await.is_ok());
    }
    let usage = "kueue_cluster_queue_resource_usage";
    let nominal = "kueue_cluster_queue_nominal_quota";
    let text = eventually(30, "Kueue's metrics at 16 GPUs in use", async || {
        let text = real().kueue_metrics();
        let gpus = exposed(&text, usage, &queue)
            .into_iter()
            .any(|(labels, value)| labels.contains("resource=\"nvidia.com/gpu\"") && value == "16");
        gpus.then_some(text)
    })
    .await;
    let series: Vec<(&str, (&str, &str))> = [usage, nominal]
        .into_iter()
        .flat_map(|metric| {
            exposed(&text, metric, &queue)
                .into_iter()
                .map(move |s| (metric, s))
        })
        // the queue's series of the approved flavor's GPUs (Kueue exposes every flavor it lists)
        .filter(|(_, (labels, _))| {
            labels.contains(&format!("flavor=\"{flavor}\""))
                && labels.contains("resource=\"nvidia.com/gpu\"")
        })
        .collect();
    assert_eq!(series.len(), 2, "{series:?}");

    let t0 = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("now")
        .as_millis() as i64)
        / MINUTE_MS
        * MINUTE_MS
        - 12 * MINUTE_MS;
    let mut om = String::new();
    for metric in [usage, nominal] {
        om.push_str(&format!("# TYPE {metric} gauge\n"));
        for k in -1..40_i64 {
            for (_, (labels, value)) in series.iter().filter(|(m, _)| *m == metric) {
                let at = t0 + k * 15_000;
                om.push_str(&format!(
                    "{metric}{{{labels}}} {value} {}.{:03}\n",
                    at.div_euclid(1000),
                    at.rem_euclid(1000)
                ));
            }
        }
    }
    om.push_str("# EOF\n");
    let dir = scratch(&names.prefix);
    let input = dir.join("kueue.om");
    std::fs::write(&input, om).expect("openmetrics");
    backfill_file(&dir, &input);
    let prom = PromServer::start(&dir, &[]).await;
    let window = shared::usage::Window::new(t0, t0 + 10 * MINUTE_MS).expect("window");
    let settings = backend::usage::IngestSettings::default();
    backend::usage::ingest(
        &pool,
        &prom.client(),
        &settings,
        backend::usage::Source::Kueue,
        window,
    )
    .await
    .expect("ingest");
    let rows: Vec<(i64, Option<i64>, Option<i64>)> = sqlx::query_as(
        "select (extract(epoch from minute) * 1000)::bigint, allocated_gpu_microseconds, nominal_gpu_microseconds
         from usage_minutes where namespace = $1 and flavor = $2 order by minute",
    )
    .bind(&ns)
    .bind(&flavor)
    .fetch_all(&pool)
    .await
    .expect("rows");
    let gpu_minute = 60_000_000_i64;
    let expected: Vec<(i64, Option<i64>, Option<i64>)> = (0..10)
        .map(|m| {
            (
                t0 + m * MINUTE_MS,
                Some(16 * gpu_minute),
                Some(48 * gpu_minute),
            )
        })
        .collect();
    assert_eq!(rows, expected);
}

/// `GPUFLEET_KUEUE_VERSION=v1beta1`, for clusters whose Kueue predates v1beta2: on a Kueue that
/// stores v1beta2 (v0.17.0), what gpufleet applies at v1beta1 goes through Kueue's conversion
/// webhook, is stored as v1beta2 (the cohort as `cohortName`) and reads back in sync.
#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn v1beta1_goes_through_kueues_conversion_webhook_and_reads_back_in_sync(pool: PgPool) {
    let names = Names::new("vbeta");
    let kubeconfig = real().kubeconfig();
    let rig = real_rig_with(&pool, &inventory(&names), kubeconfig, KueueVersion::V1beta1).await;
    let flavor = names.of("h200-train");
    research_gets(&rig, &names, 48).await;
    let view = reconcile(&rig).await;
    assert_eq!(view.api_version, "kueue.x-k8s.io/v1beta1");
    assert_eq!(out_of_sync(&view, &names), Vec::<String>::new());
    let again = reconcile(&rig).await;
    assert_eq!(out_of_sync(&again, &names), Vec::<String>::new());
    let stored = real()
        .object("ClusterQueue", None, &names.of("research"))
        .await
        .expect("stored");
    assert_eq!(stored["spec"]["cohortName"], json!(names.prefix));
    assert_eq!(nominal_of(&stored, &flavor), Some(48));
}
