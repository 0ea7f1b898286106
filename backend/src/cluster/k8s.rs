//! The cluster through `kube`: discovery, GET, LIST, WATCH and server-side apply with the
//! field manager `gpufleet` (dry run and force on request), and every failure sorted into what
//! the reconciler does about it. Nothing here decides what to apply.

use std::{path::Path, pin::Pin, time::Duration};

use futures_util::{Stream, StreamExt};
use kube::{
    Client, Config,
    api::{
        Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, WatchEvent,
        WatchParams,
    },
    config::{KubeConfigOptions, Kubeconfig},
};
use serde_json::{Value, json};
use shared::{
    cluster::{ObjectRef, Target},
    kueue::KueueVersion,
};

pub const FIELD_MANAGER: &str = "gpufleet";
pub const GROUP: &str = "kueue.x-k8s.io";

/// Why a call did not succeed, sorted by what happens next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Kueue's API (this version) is not served: nothing can land until it is installed.
    NotInstalled(String),
    /// The console's identity may not do this: which verb on which resource.
    Forbidden(String),
    /// Another field manager owns fields we would set (409 from server-side apply).
    Conflict {
        message: String,
        /// `kubectl-edit: .spec.cohortName`
        fields: Vec<String>,
    },
    /// The server refused the object (409, 422, 400, 404 namespace): its own message.
    Refused(String),
    /// Unreachable, timed out, 429 or 5xx: tried again with backoff.
    Unavailable(String),
}

impl Failure {
    pub fn message(&self) -> &str {
        match self {
            Self::NotInstalled(m)
            | Self::Forbidden(m)
            | Self::Refused(m)
            | Self::Unavailable(m)
            | Self::Conflict { message: m, .. } => m,
        }
    }

    fn of(err: kube::Error, server: &str) -> Self {
        match err {
            kube::Error::Api(status) => {
                let message = status.message.clone();
                match status.code {
                    403 => Self::Forbidden(message),
                    401 => Self::Refused(format!(
                        "the cluster does not accept the console's credentials (401): {message}"
                    )),
                    409 if status.reason == "Conflict"
                        && status.details.as_ref().is_some_and(|d| {
                            d.causes.iter().any(|c| c.reason == "FieldManagerConflict")
                        }) =>
                    {
                        let fields = status
                            .details
                            .iter()
                            .flat_map(|d| &d.causes)
                            .map(|c| {
                                let manager =
                                    c.message.split('"').nth(1).unwrap_or(c.message.as_str());
                                format!("{manager}: {}", c.field)
                            })
                            .collect();
                        Self::Conflict { message, fields }
                    }
                    429 | 500..=599 => Self::Unavailable(format!(
                        "the cluster answered {}: {message}",
                        status.code
                    )),
                    _ => Self::Refused(message),
                }
            }
            other => Self::Unavailable(format!("cannot reach the cluster at {server}: {other}")),
        }
    }
}

/// What a watch saw.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Created or changed: the object as it is now.
    Applied(Value),
    /// Deleted: the object as it was last.
    Deleted(Value),
    /// Nothing watched changed up to this resource version.
    Bookmark(String),
    /// The server no longer holds the changes since the version watched from (410 Expired,
    /// after etcd's compaction): only a new listing is complete.
    Expired,
}

/// The changes one watch delivers until the server ends it.
pub type Changes = Pin<Box<dyn Stream<Item = Result<Change, Failure>> + Send>>;

/// How long one watch lasts before the server ends it and it is made again (kube's default);
/// the watching connection's read timeout is this and 5 s more.
pub const WATCH_SECONDS: u32 = 290;

/// One page of a listing: its objects, the token of the next page (None after the last) and
/// the resource version the listing is consistent at.
pub struct Page {
    pub items: Vec<Value>,
    pub next: Option<String>,
    pub version: String,
}

/// What the cluster's Kueue serves of one API version.
pub struct Served {
    api_version: &'static str,
    kinds: std::collections::BTreeSet<String>,
}

impl Served {
    /// Why `kind` cannot be written, if this Kueue does not serve it (an older release).
    pub fn lacks(&self, kind: &str) -> Option<Failure> {
        (!self.kinds.contains(kind)).then(|| {
            Failure::NotInstalled(format!(
                "this cluster's Kueue does not serve {kind} in {}: upgrade Kueue",
                self.api_version
            ))
        })
    }
}

/// How to reach the cluster.
#[derive(Debug, Clone)]
pub struct Connection {
    /// A kubeconfig file; None: the pod's service account (in-cluster).
    pub kubeconfig: Option<std::path::PathBuf>,
    pub context: Option<String>,
    /// Connect, read and write timeout of every call.
    pub timeout: Duration,
}

pub struct Kube {
    client: Client,
    /// The same connection settings but a read timeout that outlasts a watch.
    watcher: Client,
    server: String,
    context: String,
    user: String,
}

impl Kube {
    pub async fn connect(connection: &Connection) -> anyhow::Result<Self> {
        let (mut config, context, user) = match &connection.kubeconfig {
            Some(path) => from_kubeconfig(path, connection.context.as_deref()).await?,
            None => (
                Config::incluster()?,
                "in-cluster".to_owned(),
                "the pod's service account".to_owned(),
            ),
        };
        config.connect_timeout = Some(connection.timeout);
        config.read_timeout = Some(connection.timeout);
        config.write_timeout = Some(connection.timeout);
        // The reconciler retries across runs, with each failure a visible state; retries
        // inside one call would only hide them.
        config.default_retry = false;
        let server = config.cluster_url.to_string();
        let mut watching = config.clone();
        watching.read_timeout = Some(Duration::from_secs(u64::from(WATCH_SECONDS) + 5));
        Ok(Self {
            client: Client::try_from(config)?,
            watcher: Client::try_from(watching)?,
            server: server.trim_end_matches('/').to_owned(),
            context,
            user,
        })
    }

    /// The target as the Cluster page shows it, with the identity the server reports
    /// (SelfSubjectReview, Kubernetes 1.28+) or else the kubeconfig's user.
    pub async fn target(&self) -> Target {
        let review = http_post(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
        );
        let identity = match review {
            Some(request) => self
                .client
                .request::<Value>(request)
                .await
                .ok()
                .and_then(|v| {
                    v["status"]["userInfo"]["username"]
                        .as_str()
                        .map(str::to_owned)
                }),
            None => None,
        };
        Target::Cluster {
            server: self.server.clone(),
            context: self.context.clone(),
            identity: identity.unwrap_or_else(|| self.user.clone()),
        }
    }

    /// The kinds this Kueue version serves (an error when the version is not served at all).
    pub async fn served(&self, version: KueueVersion) -> Result<Served, Failure> {
        match self
            .client
            .list_api_group_resources(version.api_version())
            .await
        {
            Ok(list) => Ok(Served {
                api_version: version.api_version(),
                kinds: list
                    .resources
                    .into_iter()
                    .filter(|r| !r.name.contains('/'))
                    .map(|r| r.kind)
                    .collect(),
            }),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                Err(Failure::NotInstalled(format!(
                    "Kueue is not installed on this cluster ({} is not served)",
                    version.api_version()
                )))
            }
            Err(err) => Err(Failure::of(err, &self.server)),
        }
    }

    fn api(&self, object: &ObjectRef, version: KueueVersion) -> Api<DynamicObject> {
        self.api_through(&self.client, object, version)
    }

    fn api_through(
        &self,
        client: &Client,
        object: &ObjectRef,
        version: KueueVersion,
    ) -> Api<DynamicObject> {
        let v = version.api_version().rsplit('/').next().unwrap_or_default();
        let resource = ApiResource {
            group: GROUP.to_owned(),
            version: v.to_owned(),
            api_version: version.api_version().to_owned(),
            kind: object.kind.clone(),
            plural: object.plural(),
        };
        if object.namespaced() {
            Api::namespaced_with(client.clone(), &object.namespace, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        }
    }

    pub async fn get(
        &self,
        object: &ObjectRef,
        version: KueueVersion,
    ) -> Result<Option<Value>, Failure> {
        self.api(object, version)
            .get_opt(&object.name)
            .await
            .map_err(|e| Failure::of(e, &self.server))?
            .map(to_value)
            .transpose()
    }

    /// Every object of `kind` (across namespaces for namespaced kinds).
    pub async fn list(&self, kind: &str, version: KueueVersion) -> Result<Vec<Value>, Failure> {
        let list = self
            .api(&every(kind), version)
            .list(&Default::default())
            .await
            .map_err(|e| Failure::of(e, &self.server))?;
        list.items.into_iter().map(to_value).collect()
    }

    /// One page of at most `limit` objects of `kind` across namespaces, from `from` (the
    /// previous page's continue token).
    pub async fn list_page(
        &self,
        kind: &str,
        version: KueueVersion,
        limit: u32,
        from: Option<String>,
    ) -> Result<Page, Failure> {
        let mut params = ListParams::default().limit(limit);
        params.continue_token = from;
        let list = self
            .api(&every(kind), version)
            .list(&params)
            .await
            .map_err(|e| Failure::of(e, &self.server))?;
        Ok(Page {
            next: list.metadata.continue_.filter(|t| !t.is_empty()),
            version: list.metadata.resource_version.unwrap_or_default(),
            items: list
                .items
                .into_iter()
                .map(to_value)
                .collect::<Result<_, _>>()?,
        })
    }

    /// The changes to objects of `kind` across namespaces after resource version `from`, with
    /// bookmarks, for [`WATCH_SECONDS`]. A 410 is [`Change::Expired`] whether the server
    /// answers it at once or as the stream's error event.
    pub async fn watch(
        &self,
        kind: &str,
        version: KueueVersion,
        from: &str,
    ) -> Result<Changes, Failure> {
        let params = WatchParams::default().timeout(WATCH_SECONDS);
        let server = self.server.clone();
        let events = match self
            .api_through(&self.watcher, &every(kind), version)
            .watch(&params, from)
            .await
        {
            Ok(events) => events,
            Err(kube::Error::Api(status)) if status.code == 410 => {
                return Ok(Box::pin(futures_util::stream::iter([Ok(Change::Expired)])));
            }
            Err(err) => return Err(Failure::of(err, &server)),
        };
        Ok(Box::pin(events.map(move |event| match event {
            Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => to_value(o).map(Change::Applied),
            Ok(WatchEvent::Deleted(o)) => to_value(o).map(Change::Deleted),
            Ok(WatchEvent::Bookmark(b)) => Ok(Change::Bookmark(b.metadata.resource_version)),
            Ok(WatchEvent::Error(status)) if status.code == 410 => Ok(Change::Expired),
            Ok(WatchEvent::Error(status)) => Err(Failure::of(kube::Error::Api(status), &server)),
            Err(err) => Err(Failure::of(err, &server)),
        })))
    }

    /// Server-side apply of `object` as `gpufleet`; the object as the server left it (or
    /// would leave it, on a dry run).
    pub async fn apply(
        &self,
        object: &Value,
        version: KueueVersion,
        force: bool,
        dry_run: bool,
    ) -> Result<Value, Failure> {
        let id = ObjectRef::of(object);
        let mut params = PatchParams::apply(FIELD_MANAGER);
        if force {
            params = params.force();
        }
        if dry_run {
            params = params.dry_run();
        }
        let applied = self
            .api(&id, version)
            .patch(&id.name, &params, &Patch::Apply(object))
            .await
            .map_err(|e| Failure::of(e, &self.server))?;
        to_value(applied)
    }
}

impl Kube {
    /// Deletes the object (the server's default propagation).
    pub async fn delete(&self, object: &ObjectRef, version: KueueVersion) -> Result<(), Failure> {
        self.api(object, version)
            .delete(&object.name, &DeleteParams::default())
            .await
            .map(|_| ())
            .map_err(|e| Failure::of(e, &self.server))
    }
}

/// Every object of `kind`: across namespaces for a namespaced kind.
fn every(kind: &str) -> ObjectRef {
    ObjectRef {
        kind: kind.to_owned(),
        namespace: String::new(),
        name: String::new(),
    }
}

fn to_value(object: DynamicObject) -> Result<Value, Failure> {
    serde_json::to_value(object)
        .map_err(|e| Failure::Unavailable(format!("the cluster's answer does not read: {e}")))
}

fn http_post(path: &str, body: &Value) -> Option<http::Request<Vec<u8>>> {
    http::Request::post(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body.to_string().into_bytes())
        .ok()
}

async fn from_kubeconfig(
    path: &Path,
    context: Option<&str>,
) -> anyhow::Result<(Config, String, String)> {
    let kubeconfig = Kubeconfig::read_from(path)
        .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
    let context = context
        .map(str::to_owned)
        .or_else(|| kubeconfig.current_context.clone())
        .unwrap_or_default();
    let user = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .and_then(|c| c.user.clone())
        .unwrap_or_default();
    let options = KubeConfigOptions {
        context: Some(context.clone()),
        ..Default::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
    Ok((config, context, user))
}
