//! The real cluster the tests share: etcd, kube-apiserver v1.36.3 and Kueue v0.17.0 built from
//! Go modules and started by `./dev test` (`tests/cluster/cluster up DIR`, its folder in
//! `GPUFLEET_TEST_CLUSTER`), reached as `system:masters` through its kubeconfig.
//!
//! Tests share it side by side, so each names what it makes after itself ([`Names`]): its own
//! namespaces, ResourceFlavors, ClusterQueues and cohort. Only the WorkloadPriorityClasses are
//! common, and every test applies them alike.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::OnceLock,
    time::Duration,
};

use kube::{
    Client, Config,
    api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde_json::{Value, json};

pub struct RealCluster {
    dir: PathBuf,
}

/// The cluster `./dev test` started. A test run without one fails here, saying how to start
/// one: these tests are never skipped.
pub fn real() -> &'static RealCluster {
    static CLUSTER: OnceLock<RealCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let dir = std::env::var_os("GPUFLEET_TEST_CLUSTER").map(PathBuf::from).expect(
            "GPUFLEET_TEST_CLUSTER is not set: run the tests through ./dev test, which starts a \
             real kube-apiserver with Kueue (or start one with `tests/cluster/cluster up DIR` \
             and set GPUFLEET_TEST_CLUSTER=DIR)",
        );
        assert!(
            dir.join("kubeconfig").is_file(),
            "no kubeconfig in GPUFLEET_TEST_CLUSTER={}",
            dir.display()
        );
        RealCluster { dir }
    })
}

/// The API resource of a Kueue kind (`ClusterQueue` → `clusterqueues`) at v1beta2.
pub fn kueue(kind: &str) -> ApiResource {
    resource("kueue.x-k8s.io/v1beta2", kind)
}

/// The API resource of a kind, its plural as Kubernetes forms it for every kind these tests
/// touch (Kueue's, `Job`, `Namespace`).
pub fn resource(api_version: &str, kind: &str) -> ApiResource {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: shared::cluster::plural(kind),
    }
}

impl RealCluster {
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// The kubeconfig of the spare kube-apiserver (the same etcd), the one
    /// [`RealCluster::restart_apiserver`] restarts.
    pub fn spare_kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig-spare")
    }

    /// A value from the cluster's `env` file (its ports and pids).
    pub fn env(&self, key: &str) -> String {
        let env = std::fs::read_to_string(self.dir.join("env")).expect("the cluster's env file");
        env.lines()
            .filter_map(|line| line.strip_prefix(key)?.strip_prefix('='))
            .next_back()
            .unwrap_or_else(|| panic!("no {key} in the cluster's env file"))
            .to_owned()
    }

    pub async fn client(&self) -> Client {
        let kubeconfig = Kubeconfig::read_from(self.kubeconfig()).expect("kubeconfig");
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("config");
        Client::try_from(config).expect("client")
    }

    /// `kubectl` against the cluster: the second, independent client.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    /// `kubectl`, which must succeed; its standard output.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub async fn create_namespace(&self, name: &str) {
        let api: Api<DynamicObject> =
            Api::all_with(self.client().await, &resource("v1", "Namespace"));
        let namespace: DynamicObject =
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name}}))
            .expect("namespace");
        match api.create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(err) => panic!("creating namespace {name}: {err}"),
        }
    }

    /// A Kueue object as the server holds it now.
    pub async fn object(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        self.get("kueue.x-k8s.io/v1beta2", kind, namespace, name)
            .await
    }

    /// An object as the server holds it now.
    pub async fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let mut of = json!({"apiVersion": api_version, "kind": kind, "metadata": {}});
        if let Some(ns) = namespace {
            of["metadata"]["namespace"] = json!(ns);
        }
        let found = self.api_of(&of).await.get_opt(name).await.expect("get");
        found.map(|o| serde_json::to_value(o).expect("json"))
    }

    /// The API of `object`'s kind, in its namespace if it has one.
    async fn api_of(&self, object: &Value) -> Api<DynamicObject> {
        let client = self.client().await;
        let resource = resource(
            object["apiVersion"].as_str().expect("apiVersion"),
            object["kind"].as_str().expect("kind"),
        );
        match object["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client, ns, &resource),
            None => Api::all_with(client, &resource),
        }
    }

    /// Server-side applies `object` as `manager`.
    pub async fn apply(&self, manager: &str, object: Value) -> Result<Value, kube::Error> {
        let name = object["metadata"]["name"].as_str().expect("name");
        let applied = (self.api_of(&object).await)
            .patch(name, &PatchParams::apply(manager), &Patch::Apply(&object))
            .await?;
        Ok(serde_json::to_value(applied).expect("json"))
    }

    /// Merges `status` into the status of the object `of` names (its status subresource), as
    /// the controller that owns it would.
    pub async fn patch_status(&self, of: &Value, status: Value) -> Result<Value, kube::Error> {
        let name = of["metadata"]["name"].as_str().expect("name");
        let patched = (self.api_of(of).await)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
        Ok(serde_json::to_value(patched).expect("json"))
    }

    /// What Kueue's metrics endpoint serves now (HTTPS, as the cluster's admin: Kueue checks
    /// the bearer token with a TokenReview and a SubjectAccessReview).
    pub fn kueue_metrics(&self) -> String {
        let token = std::fs::read_to_string(self.dir.join("pki/admin.token")).expect("token");
        let url = format!(
            "https://127.0.0.1:{}/metrics",
            self.env("KUEUE_METRICS_PORT")
        );
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "10", "--cacert"])
            .arg(self.env("METRICS_CA"))
            .arg("-H")
            .arg(format!("Authorization: Bearer {}", token.trim()))
            .arg(url)
            .output()
            .expect("curl runs");
        assert!(
            out.status.success(),
            "Kueue's metrics: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Stops the spare kube-apiserver and starts it again on the same port and etcd (its
    /// watches end, its clients see it gone for a few seconds; the first one, and Kueue, carry
    /// on).
    pub fn restart_apiserver(&self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/cluster/cluster");
        let out = Command::new(script)
            .arg("restart-apiserver")
            .arg(&self.dir)
            .output()
            .expect("the cluster script runs");
        assert!(
            out.status.success(),
            "restarting kube-apiserver: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// What one test names on the shared cluster, all from its own prefix.
pub struct Names {
    pub prefix: String,
}

impl Names {
    /// `prefix` must be unique among the tests (lower-case letters and `-`, at most 20); the
    /// test process's id follows it, so a second run on the same cluster meets nothing of the
    /// first's.
    pub fn new(prefix: &str) -> Self {
        assert!(
            prefix.len() <= 20 && prefix.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
            "{prefix}"
        );
        Self {
            prefix: format!("{prefix}-{}", std::process::id()),
        }
    }

    pub fn of(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }
}

/// Polls `check` every 100 ms for at most `seconds`; its last answer.
pub async fn eventually<T>(
    seconds: u64,
    what: &str,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "after {seconds} s still not {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
