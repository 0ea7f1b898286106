//! A real Prometheus (Debian's `prometheus` and `promtool`) on a free loopback port, its TSDB
//! filled with chosen samples by `promtool tsdb create-blocks-from openmetrics`: exact times
//! and values, and series that end without staleness markers, like an exporter that died.

use std::{
    fmt::Write as _,
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use backend::usage::prom::{PromSettings, Prometheus};
use shared::usage::Window;

/// One sample of one series, written in OpenMetrics.
pub struct Point {
    pub metric: &'static str,
    pub labels: Vec<(String, String)>,
    pub at_ms: i64,
    pub value: String,
}

pub fn point(
    metric: &'static str,
    labels: &[(&str, &str)],
    at_ms: i64,
    value: impl ToString,
) -> Point {
    Point {
        metric,
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        at_ms,
        value: value.to_string(),
    }
}

/// The points as an OpenMetrics text (families grouped, `# EOF` last).
pub fn openmetrics(points: &[Point]) -> String {
    let mut families: Vec<&str> = points.iter().map(|p| p.metric).collect();
    families.sort_unstable();
    families.dedup();
    let mut out = String::new();
    for family in families {
        let (name, kind) = match family.strip_suffix("_total") {
            Some(base) => (base, "counter"),
            None => (family, "gauge"),
        };
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for p in points.iter().filter(|p| p.metric == family) {
            let labels: Vec<String> = p
                .labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{v}\""))
                .collect();
            let _ = writeln!(
                out,
                "{}{{{}}} {} {}.{:03}",
                p.metric,
                labels.join(","),
                p.value,
                p.at_ms.div_euclid(1000),
                p.at_ms.rem_euclid(1000)
            );
        }
    }
    out.push_str("# EOF\n");
    out
}

fn binary(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "{name} is not installed: these tests need a real Prometheus \
             (./dev test installs Debian's `prometheus` package, which brings promtool)"
        )
    })
}

/// A folder for one test's TSDB.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpufleet-prom-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Writes the points into `dir/data` as TSDB blocks.
pub fn backfill(dir: &Path, points: &[Point]) {
    let input = dir.join("input.om");
    std::fs::write(&input, openmetrics(points)).expect("write openmetrics");
    backfill_file(dir, &input);
}

/// Writes an OpenMetrics file's samples into `dir/data` as TSDB blocks (more blocks when the
/// folder has some already).
pub fn backfill_file(dir: &Path, input: &Path) {
    let out = Command::new(binary("promtool"))
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(input)
        .arg(dir.join("data"))
        .output()
        .expect("run promtool");
    assert!(
        out.status.success(),
        "promtool failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub struct PromServer {
    child: Child,
    pub url: String,
    pub dir: PathBuf,
    /// The CA to trust when it serves https.
    pub ca_file: Option<PathBuf>,
}

impl PromServer {
    /// Starts Prometheus on `dir/data` (scraping nothing) and waits until it answers queries.
    pub async fn start(dir: &Path, extra: &[&str]) -> PromServer {
        Self::scraping(dir, extra, None).await
    }

    /// Starts Prometheus scraping `target` (`host:port`, path `/metrics`) every second.
    pub async fn scraping(dir: &Path, extra: &[&str], target: Option<&str>) -> PromServer {
        let config = dir.join("prometheus.yml");
        let mut yaml = String::from("global:\n  scrape_interval: 15s\n");
        if let Some(target) = target {
            yaml.push_str(&format!(
                "scrape_configs:\n  - job_name: test-exporter\n    scrape_interval: 1s\n    static_configs:\n      - targets: ['{target}']\n"
            ));
        }
        std::fs::write(&config, yaml).expect("write config");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let log = std::fs::File::create(dir.join("prometheus.log")).expect("log file");
        let child = Command::new(binary("prometheus"))
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--storage.tsdb.retention.time=30d")
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        // a web config with tls_server_config (see `tls_web_config`) makes it serve https
        let tls = dir.join("ca.pem");
        let https = extra.iter().any(|a| a.starts_with("--web.config.file")) && tls.exists();
        let server = PromServer {
            child,
            url: format!(
                "{}://127.0.0.1:{port}",
                if https { "https" } else { "http" }
            ),
            dir: dir.to_owned(),
            ca_file: https.then_some(tls),
        };
        server.wait_ready(extra).await;
        server
    }

    async fn wait_ready(&self, extra: &[&str]) {
        let started = Instant::now();
        let probe = self.client_with(|s| {
            // with basic auth on, readiness shows as a refusal: Prometheus answered
            s.basic_auth = extra
                .iter()
                .any(|a| a.starts_with("--web.config.file"))
                .then(|| "probe:probe".to_owned());
        });
        let window = Window::new(60_000, 120_000).expect("window");
        loop {
            match probe.gauge_samples("up", window).await {
                Ok(_) | Err(backend::usage::prom::PromError::Refused { .. }) => return,
                Err(err) if started.elapsed() > Duration::from_secs(60) => {
                    let log = std::fs::read_to_string(self.dir.join("prometheus.log"))
                        .unwrap_or_default();
                    panic!("Prometheus did not start: {err}\n{log}");
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    pub fn client(&self) -> Prometheus {
        self.client_with(|_| {})
    }

    pub fn client_with(&self, change: impl FnOnce(&mut PromSettings)) -> Prometheus {
        let mut settings = PromSettings {
            url: self.url.clone(),
            timeout: Duration::from_secs(10),
            ca_file: self.ca_file.clone(),
            ..PromSettings::default()
        };
        change(&mut settings);
        Prometheus::new(&settings).expect("prometheus settings")
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PromServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A test exporter on a free loopback port, on a clock the test moves: each scrape answers
/// `body(t)` in the text format (as dcgm-exporter and Kueue's metrics endpoint do) with every
/// sample stamped `t`, the clock's time, and then moves the clock on by `step_ms`, never past
/// `until_ms`, which the test raises. Prometheus keeps an exporter's own timestamps, so a test
/// goes through minutes of scrapes `step_ms` apart in seconds, and the ingest reading the same
/// clock sees them settle as it would. Returns `host:port`.
pub struct StampedExporter {
    pub target: String,
    pub clock: backend::clock::Clock,
    until_ms: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

impl StampedExporter {
    pub async fn start(
        start_ms: i64,
        step_ms: i64,
        body: impl Fn(i64) -> String + Send + Sync + 'static,
    ) -> Self {
        use std::sync::{Arc, atomic::AtomicI64, atomic::Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("exporter port");
        let target = listener.local_addr().expect("addr").to_string();
        let clock = backend::clock::Clock::manual(start_ms);
        let until_ms = Arc::new(AtomicI64::new(start_ms));
        let (moved, until) = (clock.clone(), until_ms.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let at = moved.now_ms();
                let text = stamped(&body(at), at);
                moved.set_ms((at + step_ms).min(until.load(Ordering::SeqCst)).max(at));
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            }
        });
        Self {
            target,
            clock,
            until_ms,
        }
    }

    /// Lets the clock run on to `ms` and waits until the scrapes have taken it there (a scrape
    /// a second, `step_ms` each).
    pub async fn run_until(&self, ms: i64) {
        self.until_ms.store(ms, std::sync::atomic::Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.clock.now_ms() < ms {
            assert!(
                Instant::now() < deadline,
                "the exporter's clock stopped at {}",
                self.clock.now_ms()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Every sample line of a text-format body with ` {at_ms}` appended.
fn stamped(body: &str, at_ms: i64) -> String {
    body.lines()
        .map(|line| {
            if line.is_empty() || line.starts_with('#') {
                format!("{line}\n")
            } else {
                format!("{line} {at_ms}\n")
            }
        })
        .collect()
}

/// Writes a self-signed certificate for 127.0.0.1 (`ca.pem`, which also serves as the CA to
/// trust) and its key into `dir`, and a Prometheus web config serving https with them; returns
/// the `--web.config.file=` argument.
pub fn tls_web_config(dir: &Path) -> String {
    let made =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).expect("a certificate");
    std::fs::write(dir.join("ca.pem"), made.cert.pem()).expect("write cert");
    std::fs::write(dir.join("key.pem"), made.signing_key.serialize_pem()).expect("write key");
    let web = dir.join("web-tls.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
            dir.join("ca.pem").display(),
            dir.join("key.pem").display()
        ),
    )
    .expect("web config");
    format!("--web.config.file={}", web.display())
}

/// Prometheus's own answer to an instant query at `at_ms` (`/api/v1/query`), as JSON: what
/// tests compare gpufleet's arithmetic with.
pub async fn instant(url: &str, expr: &str, at_ms: i64) -> serde_json::Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = url.trim_start_matches("http://");
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("query", expr)
        .append_pair(
            "time",
            &format!("{}.{:03}", at_ms.div_euclid(1000), at_ms.rem_euclid(1000)),
        )
        .finish();
    let mut stream = tokio::net::TcpStream::connect(host)
        .await
        .expect("connect to Prometheus");
    let request = format!("GET /api/v1/query?{query} HTTP/1.0\r\nHost: {host}\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the query");
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .await
        .expect("read the answer");
    let (_, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    serde_json::from_str(body).unwrap_or_else(|err| panic!("{err}: {body}"))
}
