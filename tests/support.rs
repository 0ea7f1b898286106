//! Helpers for the end-to-end tests: the real server on a free port, and headless Chromium
//! driven through ChromeDriver (WebDriver). Anything missing fails loudly with what to install.

use std::{
    net::{SocketAddr, TcpListener as StdListener},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use backend::{AppState, config::HttpSettings};
use fantoccini::{Client, ClientBuilder, Locator, elements::Element};
use hyper_util::client::legacy::connect::HttpConnector;
use sqlx::PgPool;
use tokio::sync::oneshot;

/// The repository root (this crate lives in `tests/`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The running console: stops when dropped.
pub struct Server {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
}

impl Server {
    /// Serves the built console from `public/` against `pool` on a free loopback port, with no
    /// cluster configured.
    pub async fn start(pool: PgPool) -> Self {
        Self::start_with_cluster(pool, std::sync::Arc::new(backend::cluster::Cluster::off())).await
    }

    /// The same with approved quota going to `cluster`, and its reconciler running, as
    /// `gpufleet serve` runs it.
    pub async fn start_with_cluster(
        pool: PgPool,
        cluster: std::sync::Arc<backend::cluster::Cluster>,
    ) -> Self {
        let public_dir = repo_root().join("public");
        let wasm = public_dir.join("pkg/gpufleet_bg.wasm");
        assert!(
            wasm.exists(),
            "{} is missing: build the frontend first (./dev test does)",
            wasm.display()
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = AppState::new(pool.clone()).with_cluster(cluster);
        let reconciler = backend::cluster::spawn(state.clone());
        let live = backend::usage::live::spawn(pool, state.live.clone());
        let work = state.work.clone();
        let router = backend::app(
            state,
            &HttpSettings {
                public_dir,
                ..Default::default()
            },
        );
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(backend::serve(
            listener,
            router,
            async move {
                let _ = stopped.await;
                reconciler.abort();
                live.abort();
            },
            work,
            backend::Connections::within(10_000, backend::server::raise_open_file_limit()),
        ));
        Self {
            addr,
            stop: Some(stop),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Headless Chromium behind its own ChromeDriver, with a fresh profile.
pub struct Browser {
    pub client: Client,
    driver: Child,
    profile: PathBuf,
}

fn executable(env: &str, default: &str) -> String {
    let path = std::env::var(env).unwrap_or_else(|_| default.to_owned());
    assert!(
        std::path::Path::new(&path).exists(),
        "{path} is missing: install Debian's chromium and chromium-driver (./dev test does), or set {env}"
    );
    path
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

impl Browser {
    pub async fn start() -> Self {
        let chromium = executable("CHROMIUM", "/usr/bin/chromium");
        let chromedriver = executable("CHROMEDRIVER", "/usr/bin/chromedriver");
        let port = free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let profile =
            std::env::temp_dir().join(format!("gpufleet-chromium-{}-{port}", std::process::id()));
        let capabilities = serde_json::json!({
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.display()),
                ],
                // Downloads land where `downloads()` finds them.
                "prefs": {
                    "download.default_directory": profile.join("downloads"),
                    "download.prompt_for_download": false,
                },
            }
        });
        let serde_json::Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let client = loop {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(err) if started.elapsed() < Duration::from_secs(20) => {
                    let _ = err;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(err) => panic!("cannot start headless Chromium through ChromeDriver: {err}"),
            }
        };
        Self {
            client,
            driver,
            profile,
        }
    }

    /// Waits for the element, then for its text to contain `text`. Runs of white space (table
    /// cells come back tab-separated) compare as one space.
    pub async fn wait_for_text(&self, css: &str, text: &str) -> Element {
        let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let want = squash(text);
        let started = Instant::now();
        loop {
            if let Ok(element) = self.client.find(Locator::Css(css)).await
                && let Ok(got) = element.text().await
                && squash(&got).contains(&want)
            {
                return element;
            }
            if started.elapsed() > Duration::from_secs(30) {
                let page = self.client.source().await.unwrap_or_default();
                panic!("no `{css}` containing {text:?} after 30 s; the page was:\n{page}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for the script (a JavaScript function body) to return `true`: for what a page
    /// shows that no text says, such as a box ticked or how many rows there are.
    pub async fn wait_for_script(&self, script: &str, what: &str) {
        let started = Instant::now();
        loop {
            let got = self.client.execute(script, vec![]).await;
            if matches!(got, Ok(serde_json::Value::Bool(true))) {
                return;
            }
            if started.elapsed() > Duration::from_secs(30) {
                panic!("{what}: still not so after 30 s (the script last returned {got:?})");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the link with this text.
    pub async fn click(&self, link_text: &str) {
        self.click_found(Locator::LinkText(link_text), link_text)
            .await;
    }

    /// Clicks the element matching `css`.
    pub async fn click_css(&self, css: &str) {
        self.click_found(Locator::Css(css), css).await;
    }

    /// Clicks what `locator` finds, as a person would once it shows. The page may not show it yet
    /// (a page or a step whose chunk is still loading), or render it anew between finding and
    /// clicking it (WebDriver's "stale element reference": a reactive view replaced the node);
    /// then it is looked for again, for up to 5 s.
    async fn click_found(&self, locator: Locator<'_>, what: &str) {
        let started = Instant::now();
        let patient = || started.elapsed() < Duration::from_secs(5);
        loop {
            let element = match self.client.find(locator).await {
                Ok(element) => element,
                Err(e) if e.is_no_such_element() && patient() => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(e) => panic!("{what}: {e}"),
            };
            match element.click().await {
                Ok(_) => return,
                Err(e) if e.is_stale_element_reference() && patient() => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("click {what}: {e}"),
            }
        }
    }

    /// Types into the fields of the form at `form_css` (each field by CSS selector), then submits it.
    pub async fn fill_and_submit(&self, form_css: &str, fields: &[(&str, &str)]) {
        let form = self
            .client
            .find(Locator::Css(form_css))
            .await
            .expect("the form");
        for (css, text) in fields {
            let field = form
                .find(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("{css}: {e}"));
            field.send_keys(text).await.expect("type");
        }
        form.find(Locator::Css("button[type=submit]"))
            .await
            .expect("submit")
            .click()
            .await
            .expect("click");
    }

    /// Waits for the file `name` to be downloaded completely, and returns its bytes.
    pub async fn downloaded(&self, name: &str) -> Vec<u8> {
        let path = self.profile.join("downloads").join(name);
        let started = Instant::now();
        loop {
            // Chromium writes `name.crdownload` and renames it when done.
            if let Ok(bytes) = std::fs::read(&path) {
                return bytes;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{name} was not downloaded into {}",
                path.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Saves a PNG of the viewport under `target/e2e/` for people to look at.
    /// Sets the value of the input or select `css` finds and fires its `change` event, as a
    /// person's edit would.
    pub async fn set_value(&self, css: &str, value: &str) {
        self.client
            .execute(
                "const el = document.querySelector(arguments[0]); el.value = arguments[1]; \
                 el.dispatchEvent(new Event('change', {bubbles: true}));",
                vec![css.into(), value.into()],
            )
            .await
            .unwrap_or_else(|err| panic!("set {css}: {err}"));
    }

    /// Opens `url` in the window.
    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|err| panic!("open {url}: {err}"));
    }

    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("screenshot");
        let dir = repo_root().join("target/e2e");
        std::fs::create_dir_all(&dir).expect("target/e2e");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write screenshot");
        path
    }

    /// Ends the WebDriver session; dropping the browser then stops the driver.
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

/// Also runs when a test panics, so no driver or browser outlives its test.
impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // A killed driver leaves Chromium running: end it by its profile folder, ours alone.
        let pattern = format!("user-data-dir={}", self.profile.display());
        let _ = Command::new("pkill")
            .args(["-KILL", "-f", &pattern])
            .status();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
