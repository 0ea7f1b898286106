//! The command line: one `gpufleet` binary with subcommands. Every option has an environment
//! variable, listed in the README. Secrets (the database URL's password) are never printed.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand};

use crate::{
    accounts::cli::UserCommand,
    auth::settings::{AuthSettings, ProxySettings, parse_networks, parse_role_groups},
    chargeback::cli::ChargebackCommand,
    error::CliError,
    fleet::cli::FleetCommand,
    packing::cli::PackingCommand,
    planning::cli::PlanCommand,
    quota::cli::QuotaCommand,
    usage::cli::UsageCommand,
};

#[derive(Debug, Parser)]
#[command(
    name = "gpufleet",
    version,
    about = "One GPU fleet for training, fine-tuning and inference"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply migrations and serve the console and its API.
    Serve(Box<ServeArgs>),
    /// Apply the database migrations, then exit.
    Migrate(DbArgs),
    /// Load the demo fleet, teams and one user per role into an empty database.
    Demo(DemoArgs),
    /// Manage users: create the first admin, reset a password, list users.
    #[command(subcommand)]
    User(UserCommand),
    /// Inventory as code: print the whole inventory, or apply a file of it.
    #[command(subcommand)]
    Fleet(FleetCommand),
    /// Planning, offline: evaluate a scenario, export its manifests, time the simulation.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// Packing, offline: replay openb lists, lay out MIG, run the FGD paper's protocol.
    #[command(subcommand)]
    Packing(PackingCommand),
    /// GPU use from Prometheus: ingest a window on demand, or show the ingest's state.
    #[command(subcommand)]
    Usage(UsageCommand),
    /// Chargeback: statements per team from measured use, and the flavors' rates.
    #[command(subcommand)]
    Chargeback(ChargebackCommand),
    /// Quota: re-plan findings from what the fleet did.
    #[command(subcommand)]
    Quota(QuotaCommand),
}

/// A run of whole UTC days.
#[derive(Debug, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Also write the demo users' passwords to this file (mode 600) when they are created.
    #[arg(long)]
    pub credentials_file: Option<PathBuf>,
    /// Leave the workload history empty: a real cluster's Kueue will fill it (`./dev run
    /// --cluster`) instead of the demo's four generated weeks.
    #[arg(long)]
    pub without_workload_history: bool,
}

#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// PostgreSQL URL, e.g. postgres://gpufleet@127.0.0.1:5432/gpufleet.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Most connections the server keeps open.
    #[arg(long, env = "GPUFLEET_DB_MAX_CONNECTIONS", default_value_t = 10)]
    pub db_max_connections: u32,
    /// Seconds to wait for a free connection before a request fails with 503.
    #[arg(long, env = "GPUFLEET_DB_ACQUIRE_TIMEOUT_S", default_value_t = 5)]
    pub db_acquire_timeout_s: u64,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Address and port to listen on.
    #[arg(long, env = "GPUFLEET_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Folder with index.html, the built pkg/ and vendored assets.
    #[arg(long, env = "GPUFLEET_PUBLIC_DIR", default_value = "public")]
    pub public_dir: PathBuf,
    /// Seconds a request may take before it is answered with 408.
    #[arg(long, env = "GPUFLEET_REQUEST_TIMEOUT_S", default_value_t = 30)]
    pub request_timeout_s: u64,
    /// Largest request body accepted, in bytes (413 above it).
    #[arg(long, env = "GPUFLEET_BODY_LIMIT_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub body_limit_bytes: usize,
    /// Open connections at most (fewer if the open-file limit holds fewer); past it only
    /// health and log-in are served, on 16 more.
    #[arg(long, env = "GPUFLEET_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,
    /// Open connections from one client address at most (--trusted-proxies are not held to
    /// it: every client comes through them).
    #[arg(
        long,
        env = "GPUFLEET_MAX_CONNECTIONS_PER_ADDRESS",
        default_value_t = 256
    )]
    pub max_connections_per_address: usize,
    /// Seconds a response may wait for its client to read any of it before the connection is
    /// dropped.
    #[arg(long, env = "GPUFLEET_WRITE_TIMEOUT_S", default_value_t = 30)]
    pub write_timeout_s: u64,
    #[command(flatten)]
    pub auth: AuthArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub usage: UsageArgs,
    /// Where budget alerts are POSTed as JSON (e.g. a Slack or Teams incoming webhook); unset:
    /// alerts show in the console only.
    #[arg(long, env = "GPUFLEET_BUDGET_WEBHOOK_URL", hide_env_values = true)]
    pub budget_webhook_url: Option<String>,
}

/// Where GPU use is read from: a Prometheus scraping dcgm-exporter, Kueue and vLLM.
#[derive(Debug, Clone, Args)]
pub struct UsageArgs {
    /// Prometheus's URL, e.g. http://prometheus.monitoring:9090; unset: no usage ingest.
    #[arg(long, env = "GPUFLEET_PROMETHEUS_URL")]
    pub prometheus_url: Option<String>,
    /// A file holding a bearer token for Prometheus.
    #[arg(long, env = "GPUFLEET_PROMETHEUS_BEARER_TOKEN_FILE")]
    pub prometheus_bearer_token_file: Option<PathBuf>,
    /// user:password for Prometheus's basic auth.
    #[arg(long, env = "GPUFLEET_PROMETHEUS_BASIC_AUTH", hide_env_values = true)]
    pub prometheus_basic_auth: Option<String>,
    /// PEM file of the CAs that sign Prometheus's certificate (default: the system's).
    #[arg(long, env = "GPUFLEET_PROMETHEUS_CA_FILE")]
    pub prometheus_ca_file: Option<PathBuf>,
    /// Seconds one query to Prometheus may take.
    #[arg(
        long,
        env = "GPUFLEET_PROMETHEUS_TIMEOUT_SECONDS",
        default_value_t = 30
    )]
    pub prometheus_timeout_seconds: u64,
    /// Seconds between continuous-ingest runs.
    #[arg(long, env = "GPUFLEET_USAGE_EVERY_SECONDS", default_value_t = 60)]
    pub usage_every_seconds: u64,
    /// A minute is ingested once it ended this many seconds ago (scrapes still landing).
    #[arg(long, env = "GPUFLEET_USAGE_SETTLE_SECONDS", default_value_t = 120)]
    pub usage_settle_seconds: u64,
    /// How many hours back the first run starts.
    #[arg(long, env = "GPUFLEET_USAGE_BACKFILL_HOURS", default_value_t = 24)]
    pub usage_backfill_hours: u64,
    /// DCGM's series are read in this many parts by GPU UUID: 1, 2, 4, 8 or 16.
    #[arg(long, env = "GPUFLEET_USAGE_SHARDS", default_value_t = 16)]
    pub usage_shards: u32,
    /// Days of minute rows kept (whole months are dropped; hour and day rollups stay); 0 keeps all.
    #[arg(
        long,
        env = "GPUFLEET_USAGE_MINUTE_RETENTION_DAYS",
        default_value_t = 90
    )]
    pub usage_minute_retention_days: u32,
    /// Also serve the demo fleet's metrics (DCGM, Kueue, vLLM) at http://ADDR/metrics for a
    /// Prometheus to scrape; usage read back from it is shown as demo data.
    #[arg(long, env = "GPUFLEET_DEMO_EXPORTER_LISTEN")]
    pub demo_exporter_listen: Option<SocketAddr>,
}

/// Where approved quota goes: a GitOps directory, a cluster (kubeconfig or in-cluster), or
/// nowhere when neither is set.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// Write the Kueue objects here (one file per object) instead of applying them.
    #[arg(long, env = "GPUFLEET_GITOPS_DIR")]
    pub gitops_dir: Option<PathBuf>,
    /// Apply to the cluster of this kubeconfig (e.g. $KUBECONFIG).
    #[arg(long, env = "GPUFLEET_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long, env = "GPUFLEET_KUBE_CONTEXT")]
    pub kube_context: Option<String>,
    /// Apply to the cluster the console runs in, as its pod's service account.
    #[arg(long, env = "GPUFLEET_IN_CLUSTER", default_value_t = false)]
    pub in_cluster: bool,
    /// Kueue API version: v1beta2 (Kueue 0.15+) or v1beta1 (older; deprecated).
    #[arg(long, env = "GPUFLEET_KUEUE_VERSION", default_value = "v1beta2")]
    pub kueue_version: String,
    /// Seconds between reconciler runs (sooner after an approval).
    #[arg(long, env = "GPUFLEET_RECONCILE_SECONDS", default_value_t = 30)]
    pub reconcile_seconds: u64,
    /// Connect, read and write timeout of each call to the cluster, in seconds.
    #[arg(long, env = "GPUFLEET_KUBE_TIMEOUT_SECONDS", default_value_t = 10)]
    pub kube_timeout_seconds: u64,
}

#[derive(Debug, Clone, Args)]
pub struct AuthArgs {
    /// Minutes without a request after which a session ends.
    #[arg(long, env = "GPUFLEET_SESSION_IDLE_MIN", default_value_t = 30)]
    pub session_idle_min: u64,
    /// Hours after log-in at which a session ends, however active.
    #[arg(long, env = "GPUFLEET_SESSION_ABSOLUTE_H", default_value_t = 12)]
    pub session_absolute_h: u64,
    /// Always mark the session cookie Secure (it is when a trusted proxy forwards https).
    #[arg(long, env = "GPUFLEET_SECURE_COOKIES", default_value_t = false)]
    pub secure_cookies: bool,
    /// Trust X-Forwarded-User/-Groups from the proxies in --trusted-proxies (e.g. oauth2-proxy).
    #[arg(long, env = "GPUFLEET_AUTH_PROXY", default_value_t = false)]
    pub auth_proxy: bool,
    /// Proxy addresses or networks, comma-separated (e.g. 10.0.0.5,10.1.0.0/16).
    #[arg(long, env = "GPUFLEET_TRUSTED_PROXIES", default_value = "")]
    pub trusted_proxies: String,
    /// How proxy groups map to roles: role=group pairs, comma-separated.
    #[arg(
        long,
        env = "GPUFLEET_PROXY_ROLE_GROUPS",
        default_value = "requester=gpufleet-requesters,approver=gpufleet-approvers,finance=gpufleet-finance,admin=gpufleet-admins"
    )]
    pub proxy_role_groups: String,
    /// Proxy groups named <prefix><team> make their members members of the team.
    #[arg(
        long,
        env = "GPUFLEET_PROXY_TEAM_GROUP_PREFIX",
        default_value = "gpufleet-team-"
    )]
    pub proxy_team_group_prefix: String,
    /// Key of the auth-proxy users' CSRF tokens, shared by every replica (32+ characters);
    /// unset: one kept in the database, made by the first replica that starts.
    #[arg(long, env = "GPUFLEET_CSRF_SECRET", hide_env_values = true)]
    pub csrf_secret: Option<String>,
}

impl AuthArgs {
    pub fn settings(&self) -> Result<AuthSettings, CliError> {
        let trusted_proxies = parse_networks(&self.trusted_proxies)?;
        if self.auth_proxy && trusted_proxies.is_empty() {
            return Err(CliError::Input(
                "--auth-proxy needs --trusted-proxies (GPUFLEET_TRUSTED_PROXIES)".to_owned(),
            ));
        }
        let proxy = if self.auth_proxy {
            Some(ProxySettings {
                role_groups: parse_role_groups(&self.proxy_role_groups)?,
                team_group_prefix: self.proxy_team_group_prefix.clone(),
            })
        } else {
            None
        };
        if self.csrf_secret.as_ref().is_some_and(|s| s.len() < 32) {
            return Err(CliError::Input(
                "--csrf-secret (GPUFLEET_CSRF_SECRET) needs at least 32 characters".to_owned(),
            ));
        }
        if self.session_idle_min == 0 || self.session_absolute_h == 0 {
            return Err(CliError::Input(
                "session lifetimes must be positive".to_owned(),
            ));
        }
        Ok(AuthSettings {
            session_idle: Duration::from_secs(self.session_idle_min * 60),
            session_absolute: Duration::from_secs(self.session_absolute_h * 3600),
            secure_cookies: self.secure_cookies,
            trusted_proxies,
            proxy,
            csrf_secret: self
                .csrf_secret
                .clone()
                .unwrap_or_else(|| AuthSettings::default().csrf_secret),
        })
    }
}

/// What the HTTP layer needs, apart from state. Tests build it directly.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub public_dir: PathBuf,
    pub request_timeout: Duration,
    pub body_limit_bytes: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            public_dir: PathBuf::from("public"),
            request_timeout: Duration::from_secs(30),
            body_limit_bytes: 16 * 1024 * 1024,
        }
    }
}

impl From<&ServeArgs> for HttpSettings {
    fn from(args: &ServeArgs) -> Self {
        Self {
            public_dir: args.public_dir.clone(),
            request_timeout: Duration::from_secs(args.request_timeout_s),
            body_limit_bytes: args.body_limit_bytes,
        }
    }
}

/// The database URL without its password, for logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<unparsable database url>".to_owned();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_owned(),
    };
    let tail = tail.split('?').next().unwrap_or_default();
    format!("{scheme}://{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_hides_passwords_and_query_secrets() {
        let cases = [
            (
                "postgres://u:secret@h:5432/db",
                "postgres://u:***@h:5432/db",
            ),
            ("postgres://u@h/db?password=secret", "postgres://u@h/db"),
            ("postgres://u:p@ss@h/db", "postgres://u:***@h/db"),
            ("postgres://h:1/db?sslmode=require", "postgres://h:1/db"),
            ("postgres:///db?host=/tmp", "postgres:///db"),
            ("nonsense", "<unparsable database url>"),
        ];
        for (url, want) in cases {
            let got = redact_url(url);
            assert_eq!(got, want, "{url}");
            assert!(!got.contains("secret"));
        }
    }

    #[test]
    fn the_cli_parses() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
