//! A Kubernetes API server double for the kinds gpufleet writes, because no kube-apiserver can
//! run here. It speaks the real protocol over HTTP, so the real `kube::Client` (and `kubectl`)
//! talk to it through an ordinary kubeconfig and nothing in the product knows:
//!
//! - discovery: `/version`, `/api`, `/api/v1`, `/apis`, each group and version;
//! - GET, LIST (also across namespaces, in pages by `limit` and `continue`), WATCH (`watch.rs`:
//!   from a resource version, bookmarks, 410 Expired after compaction), POST, PUT,
//!   DELETE, and PATCH as server-side apply (`application/apply-patch+yaml`, field managers,
//!   conflicts, `force`), JSON merge patch, with `resourceVersion`, `generation`,
//!   `managedFields` and `dryRun=All`;
//! - every object checked against the real CRD schemas and the CEL rules of `schema::cel`,
//!   refused with 422 and the API server's `Status` body;
//! - TLS with a certificate made at start (the kubeconfig carries its CA), bearer-token
//!   authentication (401), namespaces that must exist (404), Tables for `kubectl get`;
//! - faults on demand: Kueue not installed (its group not served: 404), forbidden verbs (403),
//!   any status (409, 500, 503, …), slow answers, refused connections;
//! - the CRDs' structural defaults; finalizers (a delete they hold marks the object, the last
//!   one removed deletes it); what Kueue's create webhooks write (a ClusterQueue's quotas as
//!   canonical quantity strings, a ResourceFlavor's empty `spec`);
//!
//! all checked against a real kube-apiserver with Kueue (`backend/tests/it/real_cluster.rs`, the
//! same calls answered alike). Not modelled: label and field selectors, conversion between
//! Kueue versions (an object is stored as written), Kueue's controller (tests write what it
//! would: `set_status`, `write_as_controller`).

pub mod schema;
mod watch;

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    path::Path,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use hyper_util::{rt::TokioIo, service::TowerToHyperService};
use serde_json::{Map, Value, json};
use tokio::{net::TcpListener, task::JoinHandle, task::JoinSet};

use crate::schema::{Cause, Crd, FieldPath};

/// The token the double's kubeconfig carries; any other is 401.
pub const TOKEN: &str = "gpufleet-double-token";
/// Whom the token authenticates, as a ServiceAccount would be named.
pub const USER: &str = "system:serviceaccount:gpufleet:gpufleet";

/// A fault every resource request meets until it is cleared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this status code and the API server's body for it.
    Status(u16),
    /// Answer correctly, but only after this long.
    Slow(Duration),
}

/// One request the double served, as RBAC names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Call {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub dry_run: bool,
}

#[derive(Debug, Clone)]
struct Manager {
    name: String,
    operation: &'static str,
    api_version: String,
    fields: BTreeSet<FieldPath>,
    time: String,
}

#[derive(Debug, Clone)]
struct Stored {
    object: Value,
    managers: Vec<Manager>,
}

type Key = (String, String, String, String); // group, plural, namespace, name

pub(crate) struct World {
    crds: Vec<Crd>,
    served: BTreeMap<String, Vec<String>>,
    namespaces: BTreeSet<String>,
    objects: BTreeMap<Key, Stored>,
    resource_version: u64,
    uids: u64,
    fault: Option<Fault>,
    forbidden: BTreeSet<(String, String)>,
    /// Kinds this server does not serve (as an older Kueue release lacks some).
    hidden: BTreeSet<String>,
    calls: Vec<Call>,
    /// Every write since the last compaction, for watches.
    log: watch::Log,
}

/// The API error as the server writes it: a `Status` object.
#[derive(Debug, Clone)]
pub struct Status {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Value,
    /// Answered as the server's plain-text "404 page not found", not a JSON Status.
    plain: bool,
}

impl Status {
    fn new(code: u16, reason: &'static str, message: String) -> Self {
        Self {
            code,
            reason,
            message,
            details: json!({}),
            plain: false,
        }
    }

    fn body(&self) -> Value {
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "details": self.details, "code": self.code,
        })
    }
}

impl IntoResponse for Status {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if self.plain {
            return (
                code,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                format!("{}\n", self.message),
            )
                .into_response();
        }
        (code, json_headers(), self.body().to_string()).into_response()
    }
}

fn json_headers() -> [(header::HeaderName, &'static str); 1] {
    [(header::CONTENT_TYPE, "application/json")]
}

fn ok(code: StatusCode, body: Value) -> Response {
    (code, json_headers(), body.to_string()).into_response()
}

/// A running double. Dropping it stops it.
pub struct KubeDouble {
    addr: SocketAddr,
    ca_pem: String,
    tls: Arc<rustls::ServerConfig>,
    world: Arc<Mutex<World>>,
    server: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for KubeDouble {
    fn drop(&mut self) {
        if let Some(task) = self.server.get_mut().ok().and_then(Option::take) {
            task.abort();
        }
    }
}

impl KubeDouble {
    /// Starts on a free loopback port, with Kueue's v1beta2 and v1beta1 and KEDA's v1alpha1
    /// served and the namespaces `default` and `kube-system`.
    pub async fn start() -> std::io::Result<Self> {
        let world = World {
            crds: schema::crds(),
            served: BTreeMap::from([
                (
                    "kueue.x-k8s.io".to_owned(),
                    vec!["v1beta2".to_owned(), "v1beta1".to_owned()],
                ),
                ("keda.sh".to_owned(), vec!["v1alpha1".to_owned()]),
            ]),
            namespaces: ["default", "kube-system"].map(String::from).into(),
            objects: BTreeMap::new(),
            resource_version: 1000,
            uids: 0,
            fault: None,
            forbidden: BTreeSet::new(),
            hidden: BTreeSet::new(),
            calls: Vec::new(),
            log: watch::Log::default(),
        };
        let (ca_pem, tls) = tls_config().map_err(std::io::Error::other)?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let double = Self {
            addr: listener.local_addr()?,
            ca_pem,
            tls,
            world: Arc::new(Mutex::new(world)),
            server: Mutex::new(None),
        };
        double.serve(listener);
        Ok(double)
    }

    fn serve(&self, listener: TcpListener) {
        let router = Router::new()
            .fallback(handle)
            .with_state(self.world.clone());
        let acceptor = tokio_rustls::TlsAcceptor::from(self.tls.clone());
        let task = tokio::spawn(async move {
            // Connections live in this set: aborting the task closes every one of them.
            let mut connections = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let service = TowerToHyperService::new(router.clone());
                let acceptor = acceptor.clone();
                connections.spawn(async move {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
                while connections.try_join_next().is_some() {}
            }
        });
        if let Ok(mut server) = self.server.lock() {
            *server = Some(task);
        }
    }

    fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The PEM of the certificate the double serves (its own CA).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A kubeconfig whose one context points at the double with its CA and token.
    pub fn kubeconfig(&self) -> String {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: double\n  cluster:\n    server: {}\n    \
             certificate-authority-data: {ca}\nusers:\n- name: gpufleet\n  user:\n    token: {TOKEN}\ncontexts:\n- name: double\n  \
             context:\n    cluster: double\n    user: gpufleet\ncurrent-context: double\n",
            self.url()
        )
    }

    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig())
    }

    pub fn create_namespace(&self, name: &str) {
        self.world().namespaces.insert(name.to_owned());
    }

    /// Serves only these versions of `group`; none means the group is not installed.
    pub fn serve_versions(&self, group: &str, versions: &[&str]) {
        let mut world = self.world();
        if versions.is_empty() {
            world.served.remove(group);
        } else {
            world.served.insert(
                group.to_owned(),
                versions.iter().map(|v| (*v).to_owned()).collect(),
            );
        }
    }

    /// Stops or starts serving one kind, as a Kueue release without it would.
    pub fn serve_kind(&self, kind: &str, served: bool) {
        let mut world = self.world();
        if served {
            world.hidden.remove(kind);
        } else {
            world.hidden.insert(kind.to_owned());
        }
    }

    pub fn set_fault(&self, fault: Option<Fault>) {
        self.world().fault = fault;
    }

    /// Refuses `verb` on `resource` (e.g. `patch`, `clusterqueues`) to the token's identity.
    pub fn forbid(&self, verb: &str, resource: &str) {
        self.world()
            .forbidden
            .insert((verb.to_owned(), resource.to_owned()));
    }

    pub fn allow_all(&self) {
        self.world().forbidden.clear();
    }

    /// Closes the port and every open connection: clients see "connection refused".
    pub fn refuse_connections(&self) {
        if let Some(task) = self.server.lock().ok().and_then(|mut s| s.take()) {
            task.abort();
        }
    }

    /// Listens again on the same port.
    pub async fn accept_connections(&self) -> std::io::Result<()> {
        let listener = TcpListener::bind(self.addr).await?;
        self.serve(listener);
        Ok(())
    }

    /// Every request served so far.
    pub fn calls(&self) -> Vec<Call> {
        self.world().calls.clone()
    }

    pub fn clear_calls(&self) {
        self.world().calls.clear();
    }

    /// An object as a GET would show it (with `managedFields`), by kind and name.
    pub fn object(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let world = self.world();
        let crd = world.crds.iter().find(|c| c.kind == kind)?;
        let key = (
            crd.group.clone(),
            crd.plural(),
            namespace.unwrap_or_default().to_owned(),
            name.to_owned(),
        );
        world.objects.get(&key).map(shown_object)
    }

    /// All objects of a kind, by name.
    pub fn names(&self, kind: &str) -> Vec<String> {
        let world = self.world();
        world
            .objects
            .values()
            .filter(|s| s.object["kind"] == kind)
            .filter_map(|s| s.object["metadata"]["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// An out-of-band edit, as `kubectl edit` makes it: an update by `manager` that takes the
    /// fields it changes.
    pub fn edit(
        &self,
        manager: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        change: impl FnOnce(&mut Value),
    ) -> Result<Value, Status> {
        let mut world = self.world();
        let crd = world.crd(kind)?;
        let key = (
            crd.group.clone(),
            crd.plural(),
            namespace.unwrap_or_default().to_owned(),
            name.to_owned(),
        );
        let stored = world
            .objects
            .get(&key)
            .ok_or_else(|| not_found(&crd, name))?;
        let mut object = stored.object.clone();
        change(&mut object);
        let version = api_version_of(&object).1;
        world.update(&crd, &version, key, manager, object, false)
    }

    /// Writes `object` as a controller does (Kueue making a Workload, then updating its status)
    /// as `manager`: checked like any write against its CRD's schema and CEL rules, status
    /// included. A `creationTimestamp` it carries is kept (an object made before anyone looked).
    pub fn write_as_controller(&self, manager: &str, object: Value) -> Result<Value, Status> {
        let mut world = self.world();
        let crd = world.crd(object["kind"].as_str().unwrap_or_default())?;
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let key = (
            crd.group.clone(),
            crd.plural(),
            text(&object["metadata"]["namespace"]),
            text(&object["metadata"]["name"]),
        );
        let created = object["metadata"]["creationTimestamp"].clone();
        let version = api_version_of(&object).1;
        let mut shown = world.update(&crd, &version, key.clone(), manager, object, false)?;
        if created.is_string() {
            if let Some(stored) = world.objects.get_mut(&key) {
                stored.object["metadata"]["creationTimestamp"] = created.clone();
            }
            if let Some(logged) = world.log.last_object_of(&key) {
                logged["metadata"]["creationTimestamp"] = created.clone();
            }
            shown["metadata"]["creationTimestamp"] = created;
        }
        Ok(shown)
    }

    /// Sets an object's status, as Kueue's controller would (e.g. `admittedWorkloads`), through
    /// the status subresource: a new resource version, and a change watches see.
    pub fn set_status(&self, kind: &str, namespace: Option<&str>, name: &str, status: Value) {
        let mut world = self.world();
        let Some(crd) = world.crds.iter().find(|c| c.kind == kind).cloned() else {
            return;
        };
        let key = (
            crd.group.clone(),
            crd.plural(),
            namespace.unwrap_or_default().to_owned(),
            name.to_owned(),
        );
        if !world.objects.contains_key(&key) {
            return;
        }
        let version = world.next_version();
        if let Some(stored) = world.objects.get_mut(&key) {
            stored.object["status"] = status;
            stored.object["metadata"]["resourceVersion"] = Value::from(version);
            let shown = shown_object(stored);
            world.log_change(watch::Event::Modified, key, shown);
        }
    }

    /// Deletes an object out of band, as an admin might.
    pub fn delete(&self, kind: &str, namespace: Option<&str>, name: &str) -> bool {
        let mut world = self.world();
        let Some(crd) = world.crds.iter().find(|c| c.kind == kind).cloned() else {
            return false;
        };
        let key = (
            crd.group.clone(),
            crd.plural(),
            namespace.unwrap_or_default().to_owned(),
            name.to_owned(),
        );
        world.remove(key).is_some()
    }

    /// Forgets every change so far, as etcd's compaction does: a watch from an older
    /// resource version is answered 410 Expired.
    pub fn compact(&self) {
        let mut world = self.world();
        let version = world.resource_version;
        world.log.compact(version);
    }

    /// Ends every open watch, as an API server's restart does (clients watch again).
    pub fn close_watches(&self) {
        self.world().log.close_watches();
    }

    /// Sends a bookmark at the current resource version to every watch that allows them.
    pub fn bookmark(&self) {
        let mut world = self.world();
        let version = world.resource_version;
        world.log.bookmark(version);
    }
}

/// A self-signed certificate for 127.0.0.1 and localhost, and the TLS settings serving it.
fn tls_config() -> Result<(String, Arc<rustls::ServerConfig>), String> {
    let made =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .map_err(|e| e.to_string())?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(made.signing_key.serialize_der().into());
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_no_client_auth()
    .with_single_cert(vec![made.cert.der().clone()], key)
    .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((made.cert.pem(), Arc::new(config)))
}

fn api_version_of(object: &Value) -> (String, String) {
    let text = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = text.split_once('/').unwrap_or(("", text));
    (group.to_owned(), version.to_owned())
}

fn now() -> String {
    // Kubernetes stamps whole seconds.
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    shared::common::utc::format_rfc3339(i64::try_from(seconds).unwrap_or(0) * 1_000)
}

fn shown_object(stored: &Stored) -> Value {
    let mut object = stored.object.clone();
    let managed: Vec<Value> = stored
        .managers
        .iter()
        .map(|m| {
            json!({
                "manager": m.name, "operation": m.operation, "apiVersion": m.api_version,
                "time": m.time, "fieldsType": "FieldsV1", "fieldsV1": schema::fields_v1(&m.fields),
            })
        })
        .collect();
    // The API server leaves the list out when no manager owns anything.
    if !managed.is_empty() {
        object["metadata"]["managedFields"] = Value::Array(managed);
    }
    object
}

fn not_found(crd: &Crd, name: &str) -> Status {
    let mut status = Status::new(
        404,
        "NotFound",
        format!("{}.{} \"{name}\" not found", crd.plural(), crd.group),
    );
    status.details = json!({"name": name, "group": crd.group, "kind": crd.plural()});
    status
}

fn invalid(crd: &Crd, name: &str, causes: &[Cause]) -> Status {
    let listed: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    let message = if listed.len() == 1 {
        listed[0].clone()
    } else {
        format!("[{}]", listed.join(", "))
    };
    let mut status = Status::new(
        422,
        "Invalid",
        format!(
            "{}.{} \"{name}\" is invalid: {message}",
            crd.kind, crd.group
        ),
    );
    status.details = json!({
        "name": name, "group": crd.group, "kind": crd.kind,
        "causes": causes.iter().map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field})).collect::<Vec<_>>(),
    });
    status
}

/// The status a fault answers with, in the API server's words for it.
fn fault_status(code: u16, crd: &Crd, name: &str) -> Status {
    let subject = format!("{}.{} \"{name}\"", crd.plural(), crd.group);
    let (reason, message) = match code {
        409 => (
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {subject}: the object has been modified; please apply your changes to the latest version and try again"
            ),
        ),
        429 => (
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later"
                .to_owned(),
        ),
        503 => (
            "ServiceUnavailable",
            "the server is currently unable to handle the request".to_owned(),
        ),
        504 => (
            "Timeout",
            "the server was unable to return a response in the time allotted, but may still be processing the request".to_owned(),
        ),
        _ => (
            "InternalError",
            format!(
                "Internal error occurred: etcdserver: request timed out while writing {subject}"
            ),
        ),
    };
    Status::new(code, reason, message)
}

impl World {
    /// The CRD of `kind`, or the 404 a request for an unknown kind gets.
    fn crd(&self, kind: &str) -> Result<Crd, Status> {
        self.crds
            .iter()
            .find(|c| c.kind == kind)
            .cloned()
            .ok_or_else(|| Status::new(404, "NotFound", format!("no kind {kind}")))
    }

    fn next_version(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    /// A write watches see, at the resource version it just made.
    fn log_change(&mut self, event: watch::Event, key: Key, object: Value) {
        self.log.push(self.resource_version, event, key, object);
    }

    /// Deletes the object at `key`: a new resource version, which its `DELETED` event carries.
    fn remove(&mut self, key: Key) -> Option<Stored> {
        let stored = self.objects.remove(&key)?;
        let version = self.next_version();
        let mut shown = shown_object(&stored);
        shown["metadata"]["resourceVersion"] = Value::from(version);
        self.log_change(watch::Event::Deleted, key, shown);
        Some(stored)
    }

    /// Server-side apply of `applied` by `manager` (see `schema::fields` for what a field is).
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        crd: &Crd,
        version: &str,
        key: Key,
        manager: &str,
        applied: Value,
        force: bool,
        dry_run: bool,
    ) -> Result<(StatusCode, Value), Status> {
        let name = key.3.clone();
        let schema = crd.schema(version).cloned().unwrap_or(Value::Null);
        let mut causes = Vec::new();
        schema::validate(&schema, &applied, "", &mut causes);
        if !causes.is_empty() {
            return Err(invalid(crd, &name, &causes));
        }
        let wanted = schema::fields(&schema, &applied);
        let existing = self.objects.get(&key).cloned();
        let api_version = format!("{}/{version}", crd.group);
        let (mut object, mut managers) = match &existing {
            Some(stored) => (stored.object.clone(), stored.managers.clone()),
            None => (Value::Object(Map::new()), Vec::new()),
        };
        // Conflicts: a field another manager owns, set here to a different value.
        let mut conflicts: Vec<(String, String, String)> = Vec::new();
        for other in managers.iter().filter(|m| m.name != manager) {
            for path in wanted.intersection(&other.fields) {
                if schema::get(&object, path) != schema::get(&applied, path) {
                    let field = schema::display(path);
                    conflicts.push((other.name.clone(), other.api_version.clone(), field));
                }
            }
        }
        if !conflicts.is_empty() && !force {
            return Err(conflict(&api_version, &conflicts));
        }
        if force {
            for other in managers.iter_mut().filter(|m| m.name != manager) {
                other.fields.retain(|p| !wanted.contains(p));
            }
        }
        // Fields this manager applied before and no longer does go, unless another owns them.
        let before = managers
            .iter()
            .find(|m| m.name == manager && m.operation == "Apply")
            .map(|m| m.fields.clone())
            .unwrap_or_default();
        let owned_elsewhere: BTreeSet<FieldPath> = managers
            .iter()
            .filter(|m| m.name != manager)
            .flat_map(|m| m.fields.iter().cloned())
            .collect();
        let dropped: Vec<&FieldPath> = before.difference(&wanted).collect();
        for path in dropped.into_iter().rev() {
            if !owned_elsewhere.contains(path) {
                schema::remove(&mut object, path);
            }
        }
        for path in &wanted {
            if let Some(value) = schema::get(&applied, path) {
                schema::set(&mut object, path, value.clone());
            }
        }
        object["apiVersion"] = Value::from(api_version.clone());
        object["kind"] = Value::from(crd.kind.clone());
        managers.retain(|m| !(m.name == manager && m.operation == "Apply"));
        managers.push(Manager {
            name: manager.to_owned(),
            operation: "Apply",
            api_version,
            fields: wanted,
            time: now(),
        });
        managers.retain(|m| !m.fields.is_empty());
        self.store(crd, version, key, object, managers, existing, dry_run)
    }

    /// An update (PUT, merge patch, `kubectl edit`): `manager` takes every field it changes.
    fn update(
        &mut self,
        crd: &Crd,
        version: &str,
        key: Key,
        manager: &str,
        object: Value,
        dry_run: bool,
    ) -> Result<Value, Status> {
        let existing = self.objects.get(&key).cloned();
        let schema = crd.schema(version).cloned().unwrap_or(Value::Null);
        let before = existing
            .as_ref()
            .map(|s| s.object.clone())
            .unwrap_or_default();
        let mut changed: BTreeSet<FieldPath> = schema::fields(&schema, &object);
        changed.extend(schema::fields(&schema, &before));
        changed.retain(|p| schema::get(&before, p) != schema::get(&object, p));
        let mut managers = existing
            .as_ref()
            .map(|s| s.managers.clone())
            .unwrap_or_default();
        for m in &mut managers {
            m.fields.retain(|p| !changed.contains(p));
        }
        let mine: BTreeSet<FieldPath> = changed
            .into_iter()
            .filter(|p| schema::get(&object, p).is_some())
            .collect();
        match managers
            .iter_mut()
            .find(|m| m.name == manager && m.operation == "Update")
        {
            Some(m) => m.fields.extend(mine),
            None => managers.push(Manager {
                name: manager.to_owned(),
                operation: "Update",
                api_version: format!("{}/{version}", crd.group),
                fields: mine,
                time: now(),
            }),
        }
        managers.retain(|m| !m.fields.is_empty());
        self.store(crd, version, key, object, managers, existing, dry_run)
            .map(|(_, object)| object)
    }

    #[allow(clippy::too_many_arguments)]
    fn store(
        &mut self,
        crd: &Crd,
        version: &str,
        key: Key,
        object: Value,
        managers: Vec<Manager>,
        existing: Option<Stored>,
        dry_run: bool,
    ) -> Result<(StatusCode, Value), Status> {
        let name = key.3.clone();
        if crd.namespaced && !self.namespaces.contains(&key.2) {
            let mut status = Status::new(
                404,
                "NotFound",
                format!("namespaces \"{}\" not found", key.2),
            );
            status.details = json!({"name": key.2, "kind": "namespaces"});
            return Err(status);
        }
        // What the server owns in metadata comes from the server, not the request.
        let old = existing.as_ref().map(|s| &s.object);
        let mut object = strip_server_fields(&object);
        let mut metadata = object["metadata"].as_object().cloned().unwrap_or_default();
        metadata.insert("name".into(), Value::from(name.clone()));
        if crd.namespaced {
            metadata.insert("namespace".into(), Value::from(key.2.clone()));
        }
        object["metadata"] = Value::Object(metadata);
        let schema = crd.schema(version).cloned().unwrap_or(Value::Null);
        schema::default(&schema, &mut object);
        if old.is_none() {
            kueue_create_webhook(&crd.kind, &mut object);
        }
        let mut causes = Vec::new();
        schema::validate(&schema, &object, "", &mut causes);
        causes.extend(schema::cel(&crd.kind, version, &object, old));
        if !causes.is_empty() {
            return Err(invalid(crd, &name, &causes));
        }
        let (uid, created, generation) = match old {
            Some(old) => {
                let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
                // as the API server counts: the spec changed, or deletion began
                let spec_changed = old.get("spec") != object.get("spec")
                    || old["metadata"].get("deletionTimestamp")
                        != object["metadata"].get("deletionTimestamp");
                (
                    old["metadata"]["uid"].clone(),
                    old["metadata"]["creationTimestamp"].clone(),
                    generation + i64::from(spec_changed),
                )
            }
            None => {
                self.uids += 1;
                (
                    Value::from(format!("00000000-0000-4000-8000-{:012}", self.uids)),
                    Value::from(now()),
                    1,
                )
            }
        };
        let unchanged = old.is_some_and(|old| {
            strip_server_fields(old) == strip_server_fields(&object)
                && existing
                    .as_ref()
                    .is_some_and(|s| same_managers(&s.managers, &managers))
        });
        let resource_version = match (unchanged, old) {
            (true, Some(old)) => old["metadata"]["resourceVersion"].clone(),
            _ if dry_run => Value::from(""),
            _ => Value::from(self.next_version()),
        };
        object["metadata"]["uid"] = uid;
        object["metadata"]["creationTimestamp"] = created;
        object["metadata"]["generation"] = Value::from(generation);
        object["metadata"]["resourceVersion"] = resource_version;
        let stored = Stored { object, managers };
        let shown = shown_object(&stored);
        let code = if existing.is_some() {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        };
        if !dry_run && !unchanged {
            if stored.object["metadata"].get("deletionTimestamp").is_some()
                && !has_finalizers(&stored.object)
            {
                // The last finalizer gone: the object goes.
                self.objects.insert(key.clone(), stored);
                self.remove(key);
                return Ok((code, shown));
            }
            self.objects.insert(key.clone(), stored);
            let event = match existing {
                Some(_) => watch::Event::Modified,
                None => watch::Event::Added,
            };
            self.log_change(event, key, shown.clone());
        }
        Ok((code, shown))
    }
}

/// What Kueue's mutating webhooks do on create (`mclusterqueue.kb.io`,
/// `mresourceflavor.kb.io`, CREATE only): the object is decoded into Kueue's Go types and
/// written back, so a ResourceFlavor gains an empty `spec` and each ClusterQueue quota, a
/// `resource.Quantity`, is stored in its canonical string form (`8` → `"8"`, `2000` → `"2k"`),
/// as a real kube-apiserver with Kueue v0.17.0 stores them.
fn kueue_create_webhook(kind: &str, object: &mut Value) {
    if kind == "ResourceFlavor" && object.get("spec").is_none() {
        object["spec"] = json!({});
    }
    if kind != "ClusterQueue" {
        return;
    }
    let resources = object["spec"]["resourceGroups"]
        .as_array_mut()
        .into_iter()
        .flatten()
        .flat_map(|g| g["flavors"].as_array_mut().into_iter().flatten())
        .flat_map(|f| f["resources"].as_array_mut().into_iter().flatten());
    for resource in resources {
        for field in ["nominalQuota", "borrowingLimit", "lendingLimit"] {
            if let Some(n) = resource.get(field).and_then(Value::as_i64) {
                resource[field] = Value::from(canonical_quantity(n));
            }
        }
    }
}

/// A whole number as `resource.Quantity` writes it in decimal SI (`2000` → `"2k"`).
fn canonical_quantity(mut n: i64) -> String {
    let mut suffixes = ["", "k", "M", "G", "T", "P", "E"].into_iter();
    let mut suffix = suffixes.next().unwrap_or_default();
    while n != 0 && n % 1000 == 0 {
        let Some(next) = suffixes.next() else { break };
        n /= 1000;
        suffix = next;
    }
    format!("{n}{suffix}")
}

fn has_finalizers(object: &Value) -> bool {
    object["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty())
}

fn same_managers(a: &[Manager], b: &[Manager]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.name == y.name && x.operation == y.operation && x.fields == y.fields)
}

fn strip_server_fields(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object["metadata"].as_object_mut() {
        for k in [
            "managedFields",
            "resourceVersion",
            "uid",
            "generation",
            "creationTimestamp",
        ] {
            metadata.remove(k);
        }
    }
    object
}

/// The 409 of a server-side apply, worded as kube-apiserver words it: `conflict with "m"`,
/// and ` using <apiVersion>` only where the other manager wrote another version than this
/// request's (a real server, `backend/tests/it/real_cluster.rs`). `conflicts`: the other
/// manager, the version it wrote, the field.
fn conflict(api_version: &str, conflicts: &[(String, String, String)]) -> Status {
    let with = |manager: &str, version: &str| {
        if version == api_version {
            format!("\"{manager}\"")
        } else {
            format!("\"{manager}\" using {version}")
        }
    };
    let mut by_manager: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (manager, version, field) in conflicts {
        by_manager
            .entry(with(manager, version))
            .or_default()
            .push(field);
    }
    let parts: Vec<String> = by_manager
        .iter()
        .map(|(manager, fields)| {
            if fields.len() == 1 {
                format!("conflict with {manager}: {}", fields[0])
            } else {
                format!("conflicts with {manager}:\n- {}", fields.join("\n- "))
            }
        })
        .collect();
    let n = conflicts.len();
    let mut status = Status::new(
        409,
        "Conflict",
        format!(
            "Apply failed with {n} conflict{}: {}",
            if n == 1 { "" } else { "s" },
            parts.join("\n")
        ),
    );
    status.details = json!({"causes": conflicts.iter().map(|(manager, version, field)| json!({
        "reason": "FieldManagerConflict",
        "message": format!("conflict with {}", with(manager, version)),
        "field": field,
    })).collect::<Vec<_>>()});
    status
}

/// RFC 7386: `patch` merged into `target`.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Some(patch) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    for (key, value) in patch {
        if value.is_null() {
            if let Some(map) = target.as_object_mut() {
                map.remove(key);
            }
        } else {
            merge_patch(&mut target[key.as_str()], value);
        }
    }
}

fn query(uri: &Uri) -> BTreeMap<String, String> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_owned(), v.replace("%2F", "/").replace("%3A", ":")))
        .collect()
}

fn discovery(world: &World, segments: &[&str]) -> Option<Value> {
    let group_json = |group: &str, versions: &[String]| {
        let versions: Vec<Value> = versions
            .iter()
            .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
            .collect();
        json!({"name": group, "versions": versions, "preferredVersion": versions[0]})
    };
    match segments {
        ["version"] => Some(json!({
            "major": "1", "minor": "32", "gitVersion": "v1.32.0-gpufleet-double",
            "platform": "linux/amd64",
        })),
        ["api"] => Some(json!({
            "kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        })),
        ["api", "v1"] => Some(json!({
            "kind": "APIResourceList", "groupVersion": "v1",
            "resources": [{"name": "namespaces", "singularName": "namespace", "namespaced": false,
                "kind": "Namespace", "verbs": ["get", "list"], "shortNames": ["ns"]}],
        })),
        ["openapi", "v3"] => Some(json!({
            "paths": world.served.iter().flat_map(|(g, vs)| vs.iter().map(move |v| {
                let path = format!("apis/{g}/{v}");
                (path.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash=0")}))
            })).collect::<Map<String, Value>>(),
        })),
        ["openapi", "v3", "apis", group, version] => openapi(world, group, version),
        ["apis"] => Some(json!({
            "kind": "APIGroupList", "apiVersion": "v1",
            "groups": world.served.iter().map(|(g, v)| group_json(g, v)).collect::<Vec<_>>(),
        })),
        ["apis", group] => world.served.get(*group).map(|v| {
            let mut g = group_json(group, v);
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            g
        }),
        ["apis", group, version] => {
            if !world
                .served
                .get(*group)
                .is_some_and(|v| v.iter().any(|x| x == version))
            {
                return None;
            }
            let resources: Vec<Value> = world
                .crds
                .iter()
                .filter(|c| {
                    c.group == *group && c.schema(version).is_some() && !world.hidden.contains(&c.kind)
                })
                .map(|c| {
                    json!({
                        "name": c.plural(), "singularName": c.kind.to_lowercase(),
                        "namespaced": c.namespaced, "kind": c.kind,
                        "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
                    })
                })
                .collect();
            Some(json!({
                "kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": format!("{group}/{version}"), "resources": resources,
            }))
        }
        _ => None,
    }
}

/// The OpenAPI v3 document of one group version: each kind's schema and its PATCH operation
/// with the `fieldValidation` parameter, which tells `kubectl` to leave validation to the
/// server (strict).
fn openapi(world: &World, group: &str, version: &str) -> Option<Value> {
    if !world
        .served
        .get(group)
        .is_some_and(|v| v.iter().any(|x| x == version))
    {
        return None;
    }
    let reversed: Vec<&str> = group.split('.').rev().collect();
    let mut schemas = Map::new();
    let mut paths = Map::new();
    for crd in world.crds.iter().filter(|c| c.group == group) {
        let Some(schema) = crd.schema(version) else {
            continue;
        };
        let gvk = json!({"group": group, "version": version, "kind": crd.kind});
        let mut schema = schema.clone();
        schema["x-kubernetes-group-version-kind"] = json!([gvk]);
        schemas.insert(
            format!("{}.{version}.{}", reversed.join("."), crd.kind),
            schema,
        );
        let scope = if crd.namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        let parameters: Vec<Value> = ["dryRun", "fieldManager", "fieldValidation", "force"]
            .iter()
            .map(|p| json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
            .collect();
        paths.insert(
            format!("/apis/{group}/{version}/{scope}{}/{{name}}", crd.plural()),
            json!({"patch": {
                "operationId": format!("patch{}", crd.kind), "parameters": parameters,
                "x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk,
                "responses": {"200": {"description": "OK"}},
            }}),
        );
    }
    Some(json!({
        "openapi": "3.0.0", "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": paths, "components": {"schemas": schemas},
    }))
}

/// A Table for `kubectl get`: Name and Age, as for a CRD without printer columns.
fn table(objects: &[Value]) -> Value {
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            json!({
                "cells": [o["metadata"]["name"], o["metadata"]["creationTimestamp"]],
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]},
            })
        })
        .collect();
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
            {"name": "Age", "type": "date", "format": "", "description": "", "priority": 0},
        ],
        "rows": rows,
    })
}

async fn handle(
    State(world): State<Arc<Mutex<World>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let authorised = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {TOKEN}"));
    if !authorised {
        return Status::new(401, "Unauthorized", "Unauthorized".to_owned()).into_response();
    }
    let path = uri.path().trim_matches('/').to_owned();
    let segments: Vec<&str> = path.split('/').collect();
    if method == Method::POST && path == "apis/authentication.k8s.io/v1/selfsubjectreviews" {
        return ok(
            StatusCode::CREATED,
            json!({
                "kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": null},
                "status": {"userInfo": {"username": USER, "groups": [
                    "system:serviceaccounts", "system:serviceaccounts:gpufleet", "system:authenticated"]}},
            }),
        );
    }
    let slow = {
        let world = world.lock().unwrap_or_else(|e| e.into_inner());
        if method == Method::GET
            && let Some(found) = discovery(&world, &segments)
        {
            return ok(StatusCode::OK, found);
        }
        match &world.fault {
            Some(Fault::Slow(d)) => Some(*d),
            _ => None,
        }
    };
    if let Some(delay) = slow {
        tokio::time::sleep(delay).await;
    }
    let shared = world.clone();
    let mut world = world.lock().unwrap_or_else(|e| e.into_inner());
    resource(
        &shared, &mut world, &method, &uri, &headers, &body, &segments,
    )
    .unwrap_or_else(IntoResponse::into_response)
}

fn page_not_found() -> Status {
    Status {
        plain: true,
        ..Status::new(404, "NotFound", "404 page not found".to_owned())
    }
}

fn resource(
    shared: &Arc<Mutex<World>>,
    world: &mut World,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
    segments: &[&str],
) -> Result<Response, Status> {
    let (group, version, namespace, plural, name) = match segments {
        ["api", "v1", "namespaces"] => {
            let items: Vec<Value> = world.namespaces.iter().map(|n| namespace_json(n)).collect();
            return Ok(ok(
                StatusCode::OK,
                json!({"kind": "NamespaceList", "apiVersion": "v1", "metadata": {}, "items": items}),
            ));
        }
        ["api", "v1", "namespaces", ns] => {
            return if world.namespaces.contains(*ns) {
                Ok(ok(StatusCode::OK, namespace_json(ns)))
            } else {
                Err(Status::new(
                    404,
                    "NotFound",
                    format!("namespaces \"{ns}\" not found"),
                ))
            };
        }
        ["apis", g, v, plural] => (*g, *v, None, *plural, None),
        ["apis", g, v, plural, name] => (*g, *v, None, *plural, Some(*name)),
        ["apis", g, v, "namespaces", ns, plural] => (*g, *v, Some(*ns), *plural, None),
        ["apis", g, v, "namespaces", ns, plural, name] => (*g, *v, Some(*ns), *plural, Some(*name)),
        _ => return Err(page_not_found()),
    };
    // An API group that is not served has no paths at all: the server's plain 404.
    if !world
        .served
        .get(group)
        .is_some_and(|vs| vs.iter().any(|v| v == version))
    {
        return Err(page_not_found());
    }
    let crd = world
        .crds
        .iter()
        .find(|c| {
            c.group == group
                && c.plural() == plural
                && c.schema(version).is_some()
                && !world.hidden.contains(&c.kind)
        })
        .cloned()
        .ok_or_else(page_not_found)?;
    if crd.namespaced != namespace.is_some() && !(namespace.is_none() && name.is_none()) {
        return Err(page_not_found());
    }
    let params = query(uri);
    let dry_run = params.get("dryRun").is_some_and(|v| v == "All");
    let watching = params.get("watch").is_some_and(|v| v == "true" || v == "1");
    let verb = match (method.as_str(), name) {
        ("GET", Some(_)) => "get",
        ("GET", None) if watching => "watch",
        ("GET", None) => "list",
        ("POST", None) => "create",
        ("PUT", Some(_)) => "update",
        ("PATCH", Some(_)) => "patch",
        ("DELETE", Some(_)) => "delete",
        _ => {
            return Err(Status::new(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource".to_owned(),
            ));
        }
    };
    world.calls.push(Call {
        verb: verb.to_owned(),
        group: group.to_owned(),
        resource: plural.to_owned(),
        dry_run,
    });
    if world
        .forbidden
        .contains(&(verb.to_owned(), plural.to_owned()))
    {
        let subject = match name {
            Some(n) => format!("{plural}.{group} \"{n}\""),
            None => format!("{plural}.{group}"),
        };
        let scope = match namespace {
            Some(ns) => format!("in the namespace \"{ns}\""),
            None => "at the cluster scope".to_owned(),
        };
        let mut status = Status::new(
            403,
            "Forbidden",
            format!(
                "{subject} is forbidden: User \"{USER}\" cannot {verb} resource \"{plural}\" in API group \"{group}\" {scope}"
            ),
        );
        status.details = json!({"name": name.unwrap_or_default(), "group": group, "kind": plural});
        return Err(status);
    }
    if let Some(Fault::Status(code)) = world.fault {
        return Err(fault_status(code, &crd, name.unwrap_or_default()));
    }
    let ns = namespace.unwrap_or_default().to_owned();
    let key = |name: &str| {
        (
            group.to_owned(),
            plural.to_owned(),
            ns.clone(),
            name.to_owned(),
        )
    };
    let wants_table = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"));
    let of_kind =
        |(g, p, n, _): &Key| g == group && p == plural && (namespace.is_none() || *n == ns);
    let Some(name) = name else {
        if verb == "create" {
            let object = parse_body(headers, body)?;
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if world.objects.contains_key(&key(&name)) {
                let mut status = Status::new(
                    409,
                    "AlreadyExists",
                    format!("{plural}.{group} \"{name}\" already exists"),
                );
                status.details = json!({"name": name, "group": group, "kind": plural});
                return Err(status);
            }
            let manager = manager_of(&params, headers);
            let created = world.update(&crd, version, key(&name), &manager, object, dry_run)?;
            return Ok(ok(StatusCode::CREATED, created));
        }
        if verb == "watch" {
            let current = || {
                (world.objects.iter())
                    .filter(|(key, _)| of_kind(key))
                    .map(|(_, s)| shown_object(s))
                    .collect()
            };
            let follow = watch::Watch {
                group: group.to_owned(),
                plural: plural.to_owned(),
                namespace: namespace.map(str::to_owned),
                kind: crd.kind.clone(),
                api_version: format!("{group}/{version}"),
                bookmarks: params
                    .get("allowWatchBookmarks")
                    .is_some_and(|v| v == "true"),
                timeout: params
                    .get("timeoutSeconds")
                    .and_then(|t| t.parse().ok())
                    .map(Duration::from_secs),
            };
            let from = params.get("resourceVersion").and_then(|v| v.parse().ok());
            return Ok(watch::start(shared, world, follow, from, current));
        }
        // Pages as the API server hands them out: `limit` objects, then a `continue` token
        // (here how many were handed out before) from which the next page starts.
        let limit = params
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0);
        let skip = params
            .get("continue")
            .and_then(|t| t.parse::<usize>().ok())
            .unwrap_or(0);
        let mut page: Vec<&Stored> = world
            .objects
            .iter()
            .filter(|(key, _)| of_kind(key))
            .map(|(_, s)| s)
            .skip(skip)
            .take(limit.map_or(usize::MAX, |l| l + 1))
            .collect();
        let next = limit.filter(|l| page.len() > *l).map(|l| {
            page.truncate(l);
            (skip + l).to_string()
        });
        let items: Vec<Value> = page.into_iter().map(shown_object).collect();
        if wants_table {
            return Ok(ok(StatusCode::OK, table(&items)));
        }
        let mut metadata = json!({"resourceVersion": world.resource_version.to_string()});
        if let Some(next) = next {
            metadata["continue"] = Value::from(next);
        }
        return Ok(ok(
            StatusCode::OK,
            json!({
                "apiVersion": format!("{group}/{version}"), "kind": format!("{}List", crd.kind),
                "metadata": metadata, "items": items,
            }),
        ));
    };
    let key = key(name);
    match verb {
        "get" => {
            let stored = world
                .objects
                .get(&key)
                .ok_or_else(|| not_found(&crd, name))?;
            let object = shown_object(stored);
            Ok(ok(
                StatusCode::OK,
                if wants_table {
                    table(&[object])
                } else {
                    object
                },
            ))
        }
        "delete" => {
            let stored = world
                .objects
                .get(&key)
                .cloned()
                .ok_or_else(|| not_found(&crd, name))?;
            if has_finalizers(&stored.object) {
                // Held: marked for deletion (a new generation), deleted once the last
                // finalizer goes.
                let mut object = stored.object.clone();
                if object["metadata"].get("deletionTimestamp").is_none() {
                    object["metadata"]["deletionTimestamp"] = Value::from(now());
                    object["metadata"]["deletionGracePeriodSeconds"] = Value::from(0);
                }
                let managers = stored.managers.clone();
                let (_, shown) =
                    world.store(&crd, version, key, object, managers, Some(stored), dry_run)?;
                return Ok(ok(StatusCode::OK, shown));
            }
            if !dry_run {
                world.remove(key);
            }
            Ok(ok(StatusCode::OK, shown_object(&stored)))
        }
        "update" => {
            let object = parse_body(headers, body)?;
            if let Some(stored) = world.objects.get(&key)
                && let Some(sent) = object["metadata"]["resourceVersion"].as_str()
                && Some(sent) != stored.object["metadata"]["resourceVersion"].as_str()
            {
                return Err(fault_status(409, &crd, name));
            }
            let manager = manager_of(&params, headers);
            let updated = world.update(&crd, version, key, &manager, object, dry_run)?;
            Ok(ok(StatusCode::OK, updated))
        }
        _ => {
            let content_type = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let patch = parse_body(headers, body)?;
            match content_type.split(';').next().unwrap_or_default() {
                "application/apply-patch+yaml" => {
                    let Some(manager) = params.get("fieldManager").filter(|m| !m.is_empty()) else {
                        return Err(Status::new(
                            422,
                            "Invalid",
                            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".to_owned(),
                        ));
                    };
                    if patch["metadata"]["name"].as_str() != Some(name) {
                        return Err(Status::new(
                            400,
                            "BadRequest",
                            format!(
                                "the name of the object ({}) does not match the name on the URL ({name})",
                                patch["metadata"]["name"].as_str().unwrap_or_default()
                            ),
                        ));
                    }
                    let force = params.get("force").is_some_and(|v| v == "true");
                    let manager = manager.clone();
                    let (code, object) =
                        world.apply(&crd, version, key, &manager, patch, force, dry_run)?;
                    Ok(ok(code, object))
                }
                "application/merge-patch+json" => {
                    let mut object = world
                        .objects
                        .get(&key)
                        .map(|s| s.object.clone())
                        .ok_or_else(|| not_found(&crd, name))?;
                    merge_patch(&mut object, &patch);
                    let manager = manager_of(&params, headers);
                    let updated = world.update(&crd, version, key, &manager, object, dry_run)?;
                    Ok(ok(StatusCode::OK, updated))
                }
                other => Err(Status::new(
                    415,
                    "UnsupportedMediaType",
                    format!(
                        "{other} is not supported by {}, Kind={}: the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                        format_args!("{group}/{version}"),
                        crd.kind
                    ),
                )),
            }
        }
    }
}

fn namespace_json(name: &str) -> Value {
    json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": name}, "status": {"phase": "Active"}})
}

/// The field manager of a non-apply write: the `fieldManager` parameter, else the user
/// agent's first word, as the API server derives it (`kubectl-edit/v1.32 …` → `kubectl-edit`).
fn manager_of(params: &BTreeMap<String, String>, headers: &HeaderMap) -> String {
    params
        .get("fieldManager")
        .filter(|m| !m.is_empty())
        .cloned()
        .unwrap_or_else(|| {
            headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .and_then(|ua| ua.split('/').next())
                .unwrap_or("unknown")
                .to_owned()
        })
}

fn parse_body(headers: &HeaderMap, body: &Bytes) -> Result<Value, Status> {
    let is_yaml = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.contains("yaml"));
    let parsed = if is_yaml {
        serde_yaml::from_slice::<Value>(body).map_err(|e| e.to_string())
    } else {
        serde_json::from_slice::<Value>(body).map_err(|e| e.to_string())
    };
    parsed.map_err(|err| {
        Status::new(
            400,
            "BadRequest",
            format!("the body of the request was in an unknown format: {err}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applying_the_same_object_again_changes_nothing() {
        let mut world = World {
            crds: schema::crds(),
            served: BTreeMap::new(),
            namespaces: BTreeSet::new(),
            objects: BTreeMap::new(),
            resource_version: 1,
            uids: 0,
            fault: None,
            forbidden: BTreeSet::new(),
            hidden: BTreeSet::new(),
            calls: Vec::new(),
            log: watch::Log::default(),
        };
        let crd = world
            .crds
            .iter()
            .find(|c| c.kind == "ClusterQueue")
            .cloned()
            .expect("crd");
        let object = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "a"}, "spec": {"cohortName": "g", "resourceGroups": [{
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}});
        let key = (
            "kueue.x-k8s.io".to_owned(),
            "clusterqueues".to_owned(),
            String::new(),
            "a".to_owned(),
        );
        let apply = |world: &mut World, manager: &str, force: bool| {
            world.apply(
                &crd,
                "v1beta2",
                key.clone(),
                manager,
                object.clone(),
                force,
                false,
            )
        };
        let (created, first) = apply(&mut world, "gpufleet", false).expect("created");
        assert_eq!(created, StatusCode::CREATED);
        // Kueue's create webhook stored the quota as "8"; the first apply again writes the
        // number once (generation 2, as a real kube-apiserver with Kueue answers), the next
        // changes nothing.
        assert_eq!(
            first["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"],
            "8"
        );
        let (_, first) = apply(&mut world, "gpufleet", false).expect("the number");
        assert_eq!(first["metadata"]["generation"], 2);
        let (_, again) = apply(&mut world, "gpufleet", false).expect("again");
        assert_eq!(
            again["metadata"]["resourceVersion"],
            first["metadata"]["resourceVersion"]
        );
        assert_eq!(again["metadata"]["generation"], 2);
        // The same values from a second manager: shared ownership, no conflict.
        let (_, shared) = apply(&mut world, "other", false).expect("shared");
        let managers: Vec<&Value> = shared["metadata"]["managedFields"]
            .as_array()
            .expect("managed")
            .iter()
            .map(|m| &m["manager"])
            .collect();
        assert_eq!(managers, ["gpufleet", "other"]);
        assert_eq!(shared["metadata"]["generation"], 2);
    }

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut target = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut target, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(target, json!({"a": "z", "c": {"d": "e"}}));
    }
}
