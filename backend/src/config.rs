//! The command line: one `gpufleet` binary with subcommands. Every option has an environment
//! variable, listed in the README. Secrets (the database URL's password) are never printed.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand};

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
    Serve(ServeArgs),
    /// Apply the database migrations, then exit.
    Migrate(DbArgs),
    /// Load the demo fleet into an empty database (does nothing when a fleet exists).
    Demo(DbArgs),
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
