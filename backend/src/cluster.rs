//! Approved quota reaches the cluster (`/api/cluster/…`): a reconciler renders the Kueue
//! objects of the quota in force (`shared::quota` → `shared::kueue`, the one renderer) and
//! applies them by server-side apply (`k8s.rs`), or writes them as GitOps files, then records
//! what it saw of every object (`db.rs`). Approvers see a dry run before approving, drift,
//! conflicts and failures on the Cluster page, and re-apply or take ownership from there. What
//! ran comes back the other way: `history.rs` records Kueue's Workloads.
//!
//! Invariants:
//! - failures are states, never losses: an object that could not land stays `pending` (the
//!   cluster could not be reached, 429, 5xx: retried with backoff) or `failed` (403, 404, 422:
//!   retried every run, with the server's message) until it lands; approvals never wait on it;
//! - drift is reported, never silently reverted; fields another manager owns are taken only by
//!   an approver's explicit `force`, audited; objects nobody approved are reported, not deleted;
//! - one replica reconciles at a time (a PostgreSQL advisory lock); inside a replica, runs are
//!   serialised by a mutex, so the console scales out as stateless replicas.

pub mod db;
pub mod history;
pub mod k8s;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use axum::{
    Extension, Json,
    extract::{Path as UrlPath, State},
    http::{Method, header},
    response::IntoResponse,
};
use serde_json::{Value, json};
use shared::{
    accounts::Role,
    audit::Kind,
    cluster::{
        self as model, ClusterView, DryRun, KINDS, ObjectDiff, ObjectRef, ObjectState,
        ObjectStatus, Reapply, ReconcilerStatus, Target,
    },
    common::day::Day,
    kueue::KueueVersion,
    quota::{QuotaSpec, QuotaWorld},
};
use sqlx::PgConnection;
use tokio::sync::{Mutex, Notify};

use crate::{
    access::{Access, Caller},
    app::{Api, AppState},
    audit::{self, Actor},
    clock,
    error::{Error, Result},
    json::ApiJson,
    quota, retry,
};

use self::k8s::{Failure, Kube};

const DECIDERS: &[Role] = &[Role::Approver, Role::Admin];
/// Who reads every team's workload history (a team's members read their own).
const HISTORY_READERS: &[Role] = &[Role::Approver, Role::Finance, Role::Admin];

/// Where approved quota goes and how often the reconciler looks.
pub struct Cluster {
    sink: Sink,
    target: Target,
    pub version: KueueVersion,
    pub every: Duration,
    /// Workloads asked of the API server per page when recording the history: a cluster of
    /// any size is read in bounded memory.
    pub page: u32,
    wake: Notify,
    running: Mutex<()>,
}

enum Sink {
    Kube(Box<Kube>),
    Gitops(PathBuf),
    Off,
}

impl Cluster {
    /// Nothing configured: nothing leaves the console, and the Cluster page says so.
    pub fn off() -> Self {
        Self::with(Sink::Off, Target::Off, KueueVersion::default())
    }

    pub fn gitops(dir: PathBuf, version: KueueVersion) -> Self {
        let target = Target::Gitops {
            dir: dir.display().to_string(),
        };
        Self::with(Sink::Gitops(dir), target, version)
    }

    pub async fn kube(connection: &k8s::Connection, version: KueueVersion) -> anyhow::Result<Self> {
        let kube = Kube::connect(connection).await?;
        let target = kube.target().await;
        Ok(Self::with(Sink::Kube(Box::new(kube)), target, version))
    }

    fn with(sink: Sink, target: Target, version: KueueVersion) -> Self {
        Self {
            sink,
            target,
            version,
            every: Duration::from_secs(30),
            page: 500,
            wake: Notify::new(),
            running: Mutex::new(()),
        }
    }

    pub fn every(mut self, every: Duration) -> Self {
        self.every = every;
        self
    }

    pub fn page(mut self, page: u32) -> Self {
        self.page = page.max(1);
        self
    }

    /// Asks the reconciler to run now (after an approval or a revocation).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// The cluster's client, when a cluster (not GitOps, not off) is the target.
    pub fn client(&self) -> Option<&Kube> {
        match &self.sink {
            Sink::Kube(kube) => Some(kube),
            _ => None,
        }
    }

    /// Approved quota goes to GitOps files, which something else applies.
    pub fn writes_files(&self) -> bool {
        matches!(self.sink, Sink::Gitops(_))
    }

    pub fn mode(&self) -> &'static str {
        match self.sink {
            Sink::Kube(_) => "cluster",
            Sink::Gitops(_) => "gitops",
            Sink::Off => "off",
        }
    }
}

pub fn version_warning(version: KueueVersion) -> Option<String> {
    (version == KueueVersion::V1beta1).then(|| {
        "kueue.x-k8s.io/v1beta1 is deprecated and stops being served in Kueue 0.20: \
         upgrade to Kueue 0.15 or later and switch to v1beta2 (GPUFLEET_KUEUE_VERSION)"
            .to_owned()
    })
}

pub fn api() -> Api {
    let deciders = Access::Roles(DECIDERS);
    Api::default()
        .route(Method::GET, "/cluster", Access::SignedIn, get_cluster)
        .route(Method::POST, "/cluster/reconcile", deciders, reconcile_now)
        .route(Method::POST, "/cluster/apply", deciders, reapply)
        .route(
            Method::GET,
            "/cluster/gitops.zip",
            Access::SignedIn,
            gitops_zip,
        )
        .route(
            Method::DELETE,
            "/cluster/queues/{kind}/{name}",
            Access::Roles(&[Role::Admin]),
            delete_queue,
        )
        .route(
            Method::GET,
            "/cluster/workloads",
            Access::Roles(HISTORY_READERS),
            history::all,
        )
        .route(
            Method::GET,
            "/cluster/teams/{team}/workloads",
            Access::TeamOr(HISTORY_READERS),
            history::of_team,
        )
        .route(
            Method::GET,
            "/quota/teams/{team}/requests/{id}/dry-run",
            Access::TeamOr(&[Role::Approver, Role::Finance, Role::Admin]),
            dry_run,
        )
        .route(
            Method::POST,
            "/quota/flavors/{flavor}/dry-run",
            Access::Roles(&[Role::Admin]),
            flavor_dry_run,
        )
}

/// Runs the reconciler every `every` (sooner when woken), backing off while runs fail.
pub fn spawn(state: AppState) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut failures = 0u32;
        loop {
            match reconcile(&state, None).await {
                Ok(Some(status)) if status.last_error.is_none() => failures = 0,
                Ok(None) => {}
                Ok(Some(_)) => failures = failures.saturating_add(1),
                Err(err) => {
                    tracing::warn!(%err, "reconcile failed");
                    failures = failures.saturating_add(1);
                }
            }
            let wait = retry::backoff(state.cluster.every, failures);
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = state.cluster.wake.notified() => {}
            }
        }
    })
}

/// One run, if no other replica is running one (`None` then).
pub async fn reconcile(
    state: &AppState,
    reapply: Option<&Reapply>,
) -> Result<Option<ReconcilerStatus>> {
    let _running = state.cluster.running.lock().await;
    let mut lock = state.pool.acquire().await?;
    if !db::try_lock(&mut lock).await? {
        return Ok(None);
    }
    let outcome = run(state, reapply).await;
    db::unlock(&mut lock).await?;
    outcome.map(Some)
}

/// What one run learned of one object.
struct Seen {
    object: ObjectRef,
    desired: Option<Value>,
    /// As the cluster last showed it, server fields left out.
    live: Option<Value>,
    state: ObjectState,
    changes: Vec<model::FieldChange>,
    error: Option<String>,
    conflicts: Vec<String>,
    applied: bool,
}

impl Seen {
    fn new(object: ObjectRef, desired: Option<Value>, state: ObjectState) -> Self {
        Self {
            object,
            desired,
            live: None,
            state,
            changes: Vec::new(),
            error: None,
            conflicts: Vec::new(),
            applied: false,
        }
    }

    fn failed(mut self, failure: &Failure) -> Self {
        self.state = match failure {
            Failure::Unavailable(_) => ObjectState::Pending,
            Failure::Conflict { .. } => ObjectState::Conflict,
            _ => ObjectState::Failed,
        };
        if let Failure::Conflict { fields, .. } = failure {
            self.conflicts = fields.clone();
        }
        self.error = Some(failure.message().to_owned());
        self
    }
}

/// One reconciler run: the desired objects sent where the console's mode says (or not), what
/// was seen recorded, the requests that landed marked, and the run's summary kept.
async fn run(state: &AppState, reapply: Option<&Reapply>) -> Result<ReconcilerStatus> {
    let cluster = &state.cluster;
    let today = clock::today();
    let mut conn = state.pool.acquire().await?;
    let world = quota::world(&mut conn).await?;
    let desired = world.kueue_setup(today).objects(cluster.version);
    let previous = previous_objects(&mut conn).await?;
    // No database connection is held while the cluster is asked (slow answers, timeouts).
    drop(conn);
    let seen = match &cluster.sink {
        Sink::Off => nothing_leaves(&desired),
        Sink::Gitops(dir) => write_gitops(dir, &desired),
        Sink::Kube(kube) => apply_all(kube, cluster.version, &desired, &previous, reapply).await,
    };
    let mut tx = state.pool.begin().await?;
    record_seen(&mut tx, &world, &seen).await?;
    mark_landed(&mut tx, (&world, today), &seen, &cluster.sink).await?;
    let summary = Summary::of(&seen);
    db::record_run(
        &mut *tx,
        summary.error.as_deref(),
        summary.drift,
        summary.failed,
        summary.pending,
    )
    .await?;
    let status = reconciler_status(&mut *tx).await?;
    tx.commit().await?;
    tracing::info!(
        mode = cluster.mode(),
        objects = seen.len(),
        drift = summary.drift,
        failed = summary.failed,
        pending = summary.pending,
        "reconciled"
    );
    Ok(status)
}

/// What the last run saw of each object, by its reference.
async fn previous_objects(conn: &mut PgConnection) -> Result<BTreeMap<ObjectRef, db::ObjectRow>> {
    Ok(db::objects(&mut *conn)
        .await?
        .into_iter()
        .map(|row| {
            let id = ObjectRef {
                kind: row.kind.clone(),
                namespace: row.namespace.clone(),
                name: row.name.clone(),
            };
            (id, row)
        })
        .collect())
}

/// Without a cluster or a GitOps directory every desired object stays pending, and says why.
fn nothing_leaves(desired: &[Value]) -> Vec<Seen> {
    desired
        .iter()
        .map(|object| {
            let mut seen = Seen::new(
                ObjectRef::of(object),
                Some(object.clone()),
                ObjectState::Pending,
            );
            seen.error = Some(
                "no cluster and no GitOps directory is configured: nothing leaves the console"
                    .to_owned(),
            );
            seen
        })
        .collect()
}

/// Which team a queue belongs to, by its ClusterQueue or (namespace, LocalQueue) name.
fn team_of(world: &QuotaWorld, id: &ObjectRef) -> Option<String> {
    world
        .teams
        .iter()
        .find(|t| match id.kind.as_str() {
            "ClusterQueue" => t.cluster_queue == id.name,
            "LocalQueue" => t.namespace == id.namespace && t.local_queue == id.name,
            _ => false,
        })
        .map(|t| t.team.clone())
}

/// Each object as this run saw it, and no row for one no longer desired nor seen.
async fn record_seen(tx: &mut PgConnection, world: &QuotaWorld, seen: &[Seen]) -> Result<()> {
    let (mut kinds, mut namespaces, mut names) = (Vec::new(), Vec::new(), Vec::new());
    for s in seen {
        let team = team_of(world, &s.object);
        db::record(
            &mut *tx,
            &db::Seen {
                kind: &s.object.kind,
                namespace: &s.object.namespace,
                name: &s.object.name,
                team: team.as_deref(),
                desired: s.desired.as_ref(),
                live: s.live.as_ref(),
                state: s.state.as_str(),
                changes: &s.changes,
                error: s.error.as_deref(),
                conflicts: &s.conflicts,
                applied: s.applied,
            },
        )
        .await?;
        kinds.push(s.object.kind.clone());
        namespaces.push(s.object.namespace.clone());
        names.push(s.object.name.clone());
    }
    db::keep_only(&mut *tx, &kinds, &namespaces, &names).await?;
    Ok(())
}

/// Each team's request in force: landed once its ClusterQueue and LocalQueue did, applied to
/// the cluster or written to the GitOps files (which gpufleet does not apply itself); failed
/// with the first error of its objects.
async fn mark_landed(
    tx: &mut PgConnection,
    (world, today): (&QuotaWorld, Day),
    seen: &[Seen],
    sink: &Sink,
) -> Result<()> {
    for (team, approved) in world.effective_on(today) {
        let queue: Vec<&Seen> = seen
            .iter()
            .filter(|s| team_of(world, &s.object).as_deref() == Some(team))
            .collect();
        let applied_to = match sink {
            // the directory is the Cluster page's to name, to those who run the cluster
            Sink::Gitops(_) => {
                let files: Vec<String> = queue
                    .iter()
                    .map(|s| model::gitops_file(&s.object))
                    .collect();
                format!(
                    "written to {} in the GitOps directory, for Argo CD or Flux to apply (gpufleet does not apply it)",
                    files.join(" and "),
                )
            }
            _ => "applied to the cluster".to_owned(),
        };
        let mut error = None;
        let mut landed = true;
        for s in queue {
            match s.state {
                ObjectState::InSync => {}
                ObjectState::Drifted => landed = false,
                _ => {
                    landed = false;
                    error = error.or_else(|| s.error.clone());
                }
            }
        }
        if landed || error.is_some() {
            db::mark_request(&mut *tx, approved.id, error.as_deref(), &applied_to).await?;
        }
    }
    Ok(())
}

/// A run's counts, and its first error in words.
struct Summary {
    drift: i32,
    failed: i32,
    pending: i32,
    error: Option<String>,
}

impl Summary {
    fn of(seen: &[Seen]) -> Summary {
        let count = |states: &[ObjectState]| {
            let n = seen.iter().filter(|s| states.contains(&s.state)).count();
            i32::try_from(n).unwrap_or(i32::MAX)
        };
        let drift = count(&[ObjectState::Drifted, ObjectState::Unapproved]);
        let failed = count(&[ObjectState::Failed, ObjectState::Conflict]);
        let pending = count(&[ObjectState::Pending]);
        let error = seen
            .iter()
            .find(|s| matches!(s.state, ObjectState::Failed | ObjectState::Pending))
            .and_then(|s| s.error.as_ref())
            .map(|first| {
                let n = failed + pending;
                format!(
                    "{n} object{} not applied: {first}",
                    if n == 1 { "" } else { "s" }
                )
            });
        Summary {
            drift,
            failed,
            pending,
            error,
        }
    }
}

/// Applies what changed or has not landed yet; reports drift; finds objects nobody approved.
async fn apply_all(
    kube: &Kube,
    version: KueueVersion,
    desired: &[Value],
    previous: &BTreeMap<ObjectRef, db::ObjectRow>,
    reapply: Option<&Reapply>,
) -> Vec<Seen> {
    let served = match kube.served(version).await {
        Ok(served) => served,
        Err(failure) => {
            return desired
                .iter()
                .map(|o| {
                    Seen::new(ObjectRef::of(o), Some(o.clone()), ObjectState::Pending)
                        .failed(&failure)
                })
                .collect();
        }
    };
    let mut seen = Vec::new();
    for object in desired {
        let id = ObjectRef::of(object);
        let fresh = Seen::new(id.clone(), Some(object.clone()), ObjectState::InSync);
        seen.push(match served.lacks(&id.kind) {
            Some(failure) => fresh.failed(&failure),
            None => apply_one(kube, version, (object, fresh), previous.get(&id), reapply).await,
        });
    }
    seen.extend(unapproved(kube, version, &served, desired).await);
    seen
}

/// One desired object: applied when an approver asked to reapply it, its approved form
/// changed, or it never settled; otherwise only compared with what is live.
async fn apply_one(
    kube: &Kube,
    version: KueueVersion,
    (object, fresh): (&Value, Seen),
    before: Option<&db::ObjectRow>,
    reapply: Option<&Reapply>,
) -> Seen {
    let id = &fresh.object;
    let asked = reapply.is_some_and(|r| r.objects.as_ref().is_none_or(|list| list.contains(id)));
    let live = match kube.get(id, version).await {
        Ok(live) => live,
        Err(failure) => return fresh.failed(&failure),
    };
    let drift = model::drift(object, live.as_ref());
    let fresh = Seen {
        live: live.as_ref().map(model::without_server_fields),
        ..fresh
    };
    let approved_changed =
        before.and_then(|row| row.desired.as_ref()).map(|d| &d.0) != Some(object);
    let unsettled = before.is_none_or(|row| {
        matches!(
            ObjectState::parse(&row.state),
            Some(ObjectState::Pending | ObjectState::Failed) | None
        )
    });
    if !(asked || approved_changed || unsettled) {
        let mut s = fresh;
        if !drift.is_empty() {
            s.state = ObjectState::Drifted;
            s.changes = drift;
        }
        return s;
    }
    let force = asked && reapply.is_some_and(|r| r.force);
    match kube.apply(object, version, force, false).await {
        Ok(after) => {
            let mut s = fresh;
            s.live = Some(model::without_server_fields(&after));
            s.applied = true;
            s.changes = model::drift(object, Some(&after));
            if !s.changes.is_empty() {
                s.state = ObjectState::Drifted;
            }
            s
        }
        Err(failure) => {
            let mut s = fresh.failed(&failure);
            s.changes = drift;
            s
        }
    }
}

/// The live objects of the kinds the console writes that no approval asks for.
async fn unapproved(
    kube: &Kube,
    version: KueueVersion,
    served: &k8s::Served,
    desired: &[Value],
) -> Vec<Seen> {
    let approved: BTreeSet<ObjectRef> = desired.iter().map(ObjectRef::of).collect();
    let mut seen = Vec::new();
    for kind in KINDS.into_iter().filter(|k| served.lacks(k).is_none()) {
        // A kind the identity may not list leaves nothing to report; its objects above say why.
        let Ok(live) = kube.list(kind, version).await else {
            continue;
        };
        for object in live {
            let id = ObjectRef::of(&object);
            if !approved.contains(&id) {
                let mut s = Seen::new(id, None, ObjectState::Unapproved);
                s.live = Some(model::without_server_fields(&object));
                seen.push(s);
            }
        }
    }
    seen
}

/// The GitOps directory holds exactly the approved objects: changed files rewritten (through a
/// temporary file, so a reader never sees half of one), files of removed objects deleted.
fn write_gitops(dir: &Path, desired: &[Value]) -> Vec<Seen> {
    let files = model::gitops_files(desired);
    let written = (|| -> std::io::Result<Vec<bool>> {
        std::fs::create_dir_all(dir)?;
        let keep: BTreeSet<&str> = files.iter().map(|(name, _)| name.as_str()).collect();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if name.ends_with(".yaml") && !keep.contains(name) {
                std::fs::remove_file(&path)?;
            }
        }
        files
            .iter()
            .map(|(name, text)| {
                let path = dir.join(name);
                if std::fs::read_to_string(&path).is_ok_and(|old| old == *text) {
                    return Ok(false);
                }
                let temporary = dir.join(format!(".{name}.tmp"));
                std::fs::write(&temporary, text)?;
                std::fs::rename(&temporary, &path)?;
                Ok(true)
            })
            .collect()
    })();
    desired
        .iter()
        .enumerate()
        .map(|(i, object)| {
            let mut s = Seen::new(
                ObjectRef::of(object),
                Some(object.clone()),
                ObjectState::InSync,
            );
            match &written {
                Ok(changed) => {
                    s.applied = changed.get(i).copied().unwrap_or(false);
                    // The file is what the GitOps tool will apply.
                    s.live = Some(object.clone());
                }
                Err(err) => {
                    s.state = ObjectState::Failed;
                    s.error = Some(format!("cannot write {}: {err}", dir.display()));
                }
            }
            s
        })
        .collect()
}

async fn reconciler_status(db: impl sqlx::PgExecutor<'_>) -> Result<ReconcilerStatus> {
    let row = db::reconciler(db).await?;
    Ok(ReconcilerStatus {
        last_run_at: row.last_run_at.map(clock::rfc3339),
        last_ok_at: row.last_ok_at.map(clock::rfc3339),
        last_error: row.last_error,
        drift_count: i64::from(row.drift_count),
        failed_count: i64::from(row.failed_count),
        pending_count: i64::from(row.pending_count),
    })
}

/// The reconciler's last run, for `/api/health`.
pub async fn health(state: &AppState) -> Result<shared::cluster::ClusterHealth> {
    Ok(shared::cluster::ClusterHealth {
        mode: state.cluster.mode().to_owned(),
        reconciler: reconciler_status(&state.pool).await?,
    })
}

/// The cluster view; its objects' YAML and the admission check are computed on the compute
/// pool (10,000 pools make tens of thousands of objects: rendering them must not hold up the
/// async runtime).
async fn view(state: &AppState) -> Result<ClusterView> {
    let mut conn = state.pool.acquire().await?;
    let rows = db::objects(&mut *conn).await?;
    let reconciler = reconciler_status(&mut *conn).await?;
    let world = quota::world(&mut conn).await?;
    drop(conn);
    let today = clock::today();
    let (objects, admission) = state
        .work
        .compute
        .run(move |stop| {
            let objects = rows
                .into_iter()
                .map(|row| {
                    if stop.fired() {
                        return Err(Error::Unavailable);
                    }
                    object_status(row)
                })
                .collect::<Result<_>>()?;
            Ok::<_, Error>((objects, world.admission(today)))
        })
        .await??;
    Ok(ClusterView {
        target: state.cluster.target.clone(),
        api_version: state.cluster.version.api_version().to_owned(),
        version_warning: version_warning(state.cluster.version),
        reconciler,
        objects,
        admission,
    })
}

fn object_status(row: db::ObjectRow) -> Result<ObjectStatus> {
    Ok(ObjectStatus {
        state: ObjectState::parse(&row.state)
            .ok_or_else(|| Error::Internal(format!("object state {:?}", row.state)))?,
        changes: row.changes.0,
        conflicts: row.conflicts.0,
        object: ObjectRef {
            kind: row.kind,
            namespace: row.namespace,
            name: row.name,
        },
        desired_yaml: yaml_of(row.desired),
        live_yaml: yaml_of(row.live),
        team: row.team,
        error: row.error,
        applied_at: row.applied_at.map(clock::rfc3339),
        checked_at: Some(clock::rfc3339(row.checked_at)),
    })
}

fn yaml_of(stored: Option<sqlx::types::Json<Value>>) -> String {
    stored.map_or_else(String::new, |object| {
        shared::common::yaml::to_yaml(&object.0)
    })
}

async fn get_cluster(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<ClusterView>> {
    let mut view = view(&state).await?;
    if !caller.has_any(DECIDERS) {
        view.target = for_readers(view.target);
    }
    Ok(Json(view))
}

/// The target as those who do not run the cluster see it: the mode, not where it is on the
/// server (a directory, an API server, the console's identity), which stay empty.
fn for_readers(target: Target) -> Target {
    match target {
        Target::Cluster { .. } => Target::Cluster {
            server: String::new(),
            context: String::new(),
            identity: String::new(),
        },
        Target::Gitops { .. } => Target::Gitops { dir: String::new() },
        Target::Off => Target::Off,
    }
}

/// Runs now, waiting (briefly) for another replica's run to finish.
async fn run_now(state: &AppState, reapply: Option<&Reapply>) -> Result<()> {
    for _ in 0..20 {
        if reconcile(state, reapply).await?.is_some() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(Error::Conflict(
        "another replica is reconciling the cluster; try again in a moment".to_owned(),
    ))
}

async fn reconcile_now(State(state): State<AppState>) -> Result<Json<ClusterView>> {
    run_now(&state, None).await?;
    Ok(Json(view(&state).await?))
}

/// Applies again (some objects or all); with `force`, takes the fields other managers hold.
async fn reapply(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<Reapply>,
) -> Result<Json<ClusterView>> {
    let subject = match &body.objects {
        None => "every object".to_owned(),
        Some(list) if list.is_empty() => {
            return Err(Error::Invalid(vec![shared::FieldError {
                path: "objects".to_owned(),
                message: "name at least one object, or leave the list out for all".to_owned(),
            }]));
        }
        Some(list) => list
            .iter()
            .map(ObjectRef::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    };
    let mut conn = state.pool.acquire().await?;
    audit::record(
        &mut *conn,
        Actor::User(&caller),
        Kind::ClusterObject,
        if body.force {
            "take_ownership"
        } else {
            "reapply"
        },
        &subject,
        None,
        None,
        Some(&json!({"force": body.force, "target": state.cluster.mode()})),
    )
    .await?;
    drop(conn);
    run_now(&state, Some(&body)).await?;
    Ok(Json(view(&state).await?))
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Scope {
    /// The LocalQueue's namespace.
    namespace: Option<String>,
}

/// Deletes a ClusterQueue or LocalQueue that gpufleet applied and no longer approves (one left
/// behind when a team's queue was renamed). Refused for an approved queue (the reconciler would
/// make it again), for one gpufleet never applied, and while Kueue reports workloads admitted
/// through it (`status.admittedWorkloads`). Audited with the object as it was.
async fn delete_queue(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    UrlPath((kind, name)): UrlPath<(String, String)>,
    axum::extract::Query(scope): axum::extract::Query<Scope>,
) -> Result<Json<ClusterView>> {
    let id = queue_ref(kind, name, scope)?;
    let Sink::Kube(kube) = &state.cluster.sink else {
        return Err(Error::Conflict(
            "no cluster is configured: there is nothing to delete".to_owned(),
        ));
    };
    let version = state.cluster.version;
    let mut conn = state.pool.acquire().await?;
    let world = quota::world(&mut conn).await?;
    if world
        .kueue_setup(clock::today())
        .objects(version)
        .iter()
        .any(|o| ObjectRef::of(o) == id)
    {
        return Err(Error::Conflict(format!(
            "{id} is approved for a team; rename the team's queue or revoke its quota instead (the reconciler would make it again)"
        )));
    }
    let cluster_error = |failure: Failure| match failure {
        Failure::Unavailable(_) => Error::Unavailable,
        other => Error::Conflict(other.message().to_owned()),
    };
    let live = kube
        .get(&id, version)
        .await
        .map_err(cluster_error)?
        .ok_or(Error::NotFound)?;
    ours_and_idle(&id, &live)?;
    kube.delete(&id, version).await.map_err(cluster_error)?;
    audit::record(
        &mut *conn,
        Actor::User(&caller),
        Kind::ClusterObject,
        "delete",
        &id.to_string(),
        None,
        Some(&json!({"spec": live["spec"]})),
        None,
    )
    .await?;
    drop(conn);
    run_now(&state, None).await?;
    Ok(Json(view(&state).await?))
}

/// The queue a delete names: a ClusterQueue, or a LocalQueue in `scope`'s namespace.
fn queue_ref(kind: String, name: String, scope: Scope) -> Result<ObjectRef> {
    if kind != "ClusterQueue" && kind != "LocalQueue" {
        return Err(Error::Invalid(vec![shared::FieldError {
            path: "kind".to_owned(),
            message: "only a ClusterQueue or a LocalQueue can be deleted here".to_owned(),
        }]));
    }
    Ok(ObjectRef {
        namespace: if kind == "LocalQueue" {
            scope.namespace.unwrap_or_default()
        } else {
            String::new()
        },
        kind,
        name,
    })
}

/// Refuses to delete `live` unless gpufleet applied it (its managed fields name our field
/// manager) and Kueue reports no workload admitted through it.
fn ours_and_idle(id: &ObjectRef, live: &Value) -> Result<()> {
    let ours = live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| m["manager"] == k8s::FIELD_MANAGER);
    if !ours {
        return Err(Error::Conflict(format!(
            "{id} was not applied by gpufleet; delete it with kubectl if you mean to"
        )));
    }
    let admitted = live["status"]["admittedWorkloads"].as_i64().unwrap_or(0);
    if admitted > 0 {
        return Err(Error::Conflict(format!(
            "{id} has {admitted} admitted workload{}: they must finish or be evicted before it is deleted",
            if admitted == 1 { "" } else { "s" }
        )));
    }
    Ok(())
}

/// The approved objects as GitOps files, zipped on the compute pool.
async fn gitops_zip(State(state): State<AppState>) -> Result<impl IntoResponse> {
    let mut conn = state.pool.acquire().await?;
    let world = quota::world(&mut conn).await?;
    drop(conn);
    let (version, today) = (state.cluster.version, clock::today());
    let zip = state
        .work
        .compute
        .run(move |_| {
            let objects = world.kueue_setup(today).objects(version);
            let files = model::gitops_files(&objects);
            let entries: Vec<(&str, &[u8])> = files
                .iter()
                .map(|(name, text)| (name.as_str(), text.as_bytes()))
                .collect();
            shared::common::zip::store(&entries)
        })
        .await?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/zip"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"gpufleet-kueue.zip\"",
            ),
        ],
        zip,
    ))
}

/// What approving a request would change on the cluster: a server-side dry run of each object
/// that changes, live against would-be; without a cluster (or when it cannot be asked), the
/// approved objects against the objects after approval.
async fn dry_run(
    State(state): State<AppState>,
    UrlPath((team, id)): UrlPath<(String, String)>,
) -> Result<Json<DryRun>> {
    let id: i64 = id.parse().map_err(|_| Error::NotFound)?;
    let mut conn = state.pool.acquire().await?;
    let world = quota::world(&mut conn).await?;
    let spec: QuotaSpec = quota::stored_spec(&mut conn, &team, id).await?;
    drop(conn);
    let version = state.cluster.version;
    let on = spec.starts_on.max(clock::today());
    let now = world.kueue_setup(on).objects(version);
    let after = world.with(&team, &spec).kueue_setup(on).objects(version);
    Ok(Json(compare(&state, &now, &after).await))
}

/// What saving a flavor's settings would change on the cluster (`POST
/// /api/quota/flavors/{flavor}/dry-run`, the edit as the body; nothing is saved): the same dry
/// run as a request's, the objects today against the objects with the new settings.
async fn flavor_dry_run(
    State(state): State<AppState>,
    UrlPath(name): UrlPath<String>,
    crate::json::ApiJson(edit): crate::json::ApiJson<shared::quota::FlavorEdit>,
) -> Result<Json<DryRun>> {
    let world = {
        let mut conn = state.pool.acquire().await?;
        quota::world(&mut conn).await?
    };
    let flavor = world.flavor(&name).ok_or(Error::NotFound)?;
    quota::checked_settings(&edit, &flavor.gpu_model)?;
    let mut edited = world.clone();
    if let Some(f) = edited.flavors.iter_mut().find(|f| f.name == name) {
        f.settings = edit.settings;
    }
    let (version, today) = (state.cluster.version, clock::today());
    let now = world.kueue_setup(today).objects(version);
    let after = edited.kueue_setup(today).objects(version);
    Ok(Json(compare(&state, &now, &after).await))
}

/// The objects of `after` that differ from `now`, each as the cluster's own server-side dry
/// run would change its live object; without a cluster (or when it cannot be asked), against
/// the objects of `now`.
async fn compare(state: &AppState, now: &[Value], after: &[Value]) -> DryRun {
    let changed: Vec<&Value> = after.iter().filter(|o| !now.contains(o)).collect();
    let offline = |error: Option<String>| DryRun {
        against: "files".to_owned(),
        objects: changed
            .iter()
            .map(|object| {
                let id = ObjectRef::of(object);
                let before = now.iter().find(|o| ObjectRef::of(o) == id);
                diff(id, before, object)
            })
            .collect(),
        error,
    };
    let Sink::Kube(kube) = &state.cluster.sink else {
        return offline(None);
    };
    let version = state.cluster.version;
    let served = match kube.served(version).await {
        Ok(served) => served,
        Err(failure) => return offline(Some(failure.message().to_owned())),
    };
    let mut objects = Vec::new();
    for object in changed.iter().copied() {
        let id = ObjectRef::of(object);
        if let Some(failure) = served.lacks(&id.kind) {
            return offline(Some(failure.message().to_owned()));
        }
        let live = match kube.get(&id, version).await {
            Ok(live) => live,
            Err(failure) => return offline(Some(failure.message().to_owned())),
        };
        match kube.apply(object, version, false, true).await {
            Ok(would_be) => objects.push(diff(id, live.as_ref(), &would_be)),
            Err(failure) => return offline(Some(failure.message().to_owned())),
        }
    }
    DryRun {
        against: "server".to_owned(),
        objects,
        error: None,
    }
}

fn diff(object: ObjectRef, before: Option<&Value>, after: &Value) -> ObjectDiff {
    let changes = model::changes(before, after);
    let action = match (before, changes.is_empty()) {
        (None, _) => "create",
        (Some(_), true) => "unchanged",
        (Some(_), false) => "update",
    };
    ObjectDiff {
        object,
        action: action.to_owned(),
        changes,
    }
}

/// The cluster settings from the command line and environment.
pub async fn from_args(args: &crate::config::ClusterArgs) -> anyhow::Result<Arc<Cluster>> {
    let version = KueueVersion::parse(&args.kueue_version).ok_or_else(|| {
        anyhow::anyhow!(
            "GPUFLEET_KUEUE_VERSION: {:?} is not v1beta2 or v1beta1",
            args.kueue_version
        )
    })?;
    let every = Duration::from_secs(args.reconcile_seconds.max(1));
    let cluster = if let Some(dir) = &args.gitops_dir {
        Cluster::gitops(dir.clone(), version)
    } else if args.kubeconfig.is_some() || args.in_cluster {
        let connection = k8s::Connection {
            kubeconfig: args.kubeconfig.clone(),
            context: args.kube_context.clone(),
            timeout: Duration::from_secs(args.kube_timeout_seconds.max(1)),
        };
        Cluster::kube(&connection, version).await?
    } else {
        Cluster::off()
    };
    if let Some(warning) = version_warning(version) {
        tracing::warn!("{warning}");
    }
    Ok(Arc::new(cluster.every(every)))
}
