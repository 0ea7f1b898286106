//! Real GPU use into PostgreSQL: windows of raw Prometheus samples (DCGM busy time and who
//! shares each GPU, Kueue allocation, vLLM tokens and latency histograms) turned into exact
//! minute rows (`shared::usage`) and stored with their rollups (`db.rs`). The server ingests continuously; `gpufleet usage ingest` ingests a
//! chosen window on demand (`cli.rs`).
//!
//! Invariants:
//! - a window is stored whole or not at all, in one transaction, and ingesting it again gives
//!   the same rows (each source replaces its own columns of the window);
//! - a minute is ingested only once it lies `settle` in the past, so a minute is never stored
//!   while its samples are still arriving;
//! - failures are gaps, never losses: a window that fails is recorded with its error, the
//!   source's watermark stays at its start, and the next run (with backoff) tries again; after
//!   downtime the watermark's gap up to now is read back from Prometheus's retention;
//! - windows are chunked by time (at most an hour, never across an hour boundary) and DCGM's
//!   series by GPU UUID, so no single query reads a whole fleet's day;
//! - one replica ingests at a time (a PostgreSQL advisory lock).

pub mod cli;
pub mod db;
pub mod demo;
pub mod live;
pub mod prom;

use std::{collections::BTreeMap, time::Duration};

use shared::{
    common::utc::{HOUR_MS, MINUTE_MS, floor_minute},
    usage::{
        self as model, DECODE_SECONDS, DeviceSums, FB_USED, GENERATION_TOKENS, GPU_UTIL,
        GR_ENGINE_ACTIVE, KUEUE_NOMINAL, KUEUE_USAGE, PREFILL_SECONDS, PROMPT_TOKENS, Series,
        UsageHealth, Window,
        neighbours::{self, Latency},
        queues,
    },
};
use sqlx::PgPool;
use tokio::sync::Mutex;

use crate::{access::Access, app::Api, clock::Clock, config::UsageArgs};

use self::prom::{PromError, PromSettings, Prometheus};

pub fn api() -> Api {
    Api::default()
        .route(
            http::Method::GET,
            "/usage/stream",
            Access::SignedIn,
            live::stream,
        )
        .route(
            http::Method::GET,
            "/usage/queues",
            Access::Roles(&[
                shared::accounts::Role::Approver,
                shared::accounts::Role::Finance,
                shared::accounts::Role::Admin,
            ]),
            queue_report,
        )
}

/// `GET /api/usage/queues?from=DAY&to=DAY`: each ClusterQueue's admission waits, pending
/// Workloads and evictions as Kueue's own metrics recorded them (at most 92 days).
async fn queue_report(
    axum::extract::State(state): axum::extract::State<crate::app::AppState>,
    axum::extract::Query(query): axum::extract::Query<shared::cluster::workload::HistoryQuery>,
) -> crate::error::Result<axum::Json<queues::QueueReport>> {
    let (from, end) = query.checked().map_err(crate::error::Error::Invalid)?;
    Ok(axum::Json(queues::QueueReport {
        from,
        to: end.plus(-1),
        queues: db::queue_window(&state.pool, from, end).await?,
    }))
}

/// The sources, in the order a run ingests them (DCGM's check reads Kueue's allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Kueue,
    Dcgm,
    Vllm,
}

impl Source {
    pub const ALL: [Source; 3] = [Source::Kueue, Source::Dcgm, Source::Vllm];

    pub fn name(self) -> &'static str {
        match self {
            Source::Kueue => "kueue",
            Source::Dcgm => "dcgm",
            Source::Vllm => "vllm",
        }
    }
}

/// How the ingest runs.
#[derive(Debug, Clone)]
pub struct IngestSettings {
    /// Between runs of the continuous ingest.
    pub every: Duration,
    /// A minute is ingested once its end is this far in the past (scrapes still landing).
    pub settle: Duration,
    /// How far back the first run starts.
    pub backfill: Duration,
    /// DCGM's series are read in this many parts (1, 2, 4, 8 or 16), split by GPU UUID.
    pub shards: u32,
    /// Minute partitions wholly older than this are dropped (rollups stay); `None` keeps all.
    pub minute_retention: Option<Duration>,
    /// How far before a window the counters are read, for the sample before its first one.
    pub counter_lookback_ms: i64,
}

impl Default for IngestSettings {
    fn default() -> Self {
        Self {
            every: Duration::from_secs(60),
            settle: Duration::from_secs(120),
            backfill: Duration::from_secs(24 * 3600),
            shards: 16,
            minute_retention: Some(Duration::from_secs(90 * 24 * 3600)),
            counter_lookback_ms: 10 * MINUTE_MS,
        }
    }
}

/// Where usage comes from. `prom` is `None` when no Prometheus is configured.
pub struct Usage {
    prom: Option<Prometheus>,
    pub settings: IngestSettings,
    /// The metrics come from the demo exporter: every figure is demo data.
    pub demo: bool,
    /// What the continuous ingest takes for now (the wall clock but in tests).
    pub clock: Clock,
    running: Mutex<()>,
}

impl Usage {
    pub fn off() -> Self {
        Self {
            prom: None,
            settings: IngestSettings::default(),
            demo: false,
            clock: Clock::system(),
            running: Mutex::new(()),
        }
    }

    pub fn new(prom: Prometheus, settings: IngestSettings) -> Self {
        Self {
            prom: Some(prom),
            settings,
            demo: false,
            clock: Clock::system(),
            running: Mutex::new(()),
        }
    }

    /// The ingest the options describe; an option that cannot work is bad input.
    pub fn from_args(args: &UsageArgs) -> Result<Self, crate::error::CliError> {
        use crate::error::CliError;
        let Some(url) = &args.prometheus_url else {
            return Ok(Self::off());
        };
        let prom = Prometheus::new(&PromSettings {
            url: url.clone(),
            bearer_token_file: args.prometheus_bearer_token_file.clone(),
            basic_auth: args.prometheus_basic_auth.clone(),
            ca_file: args.prometheus_ca_file.clone(),
            timeout: Duration::from_secs(args.prometheus_timeout_seconds.max(1)),
        })
        .map_err(CliError::Input)?;
        if ![1, 2, 4, 8, 16].contains(&args.usage_shards) {
            return Err(CliError::Input(
                "GPUFLEET_USAGE_SHARDS is 1, 2, 4, 8 or 16".to_owned(),
            ));
        }
        let usage = Self::new(
            prom,
            IngestSettings {
                every: Duration::from_secs(args.usage_every_seconds.max(1)),
                settle: Duration::from_secs(args.usage_settle_seconds),
                backfill: Duration::from_secs(args.usage_backfill_hours * 3600),
                shards: args.usage_shards,
                minute_retention: (args.usage_minute_retention_days > 0).then(|| {
                    Duration::from_secs(u64::from(args.usage_minute_retention_days) * 86_400)
                }),
                ..IngestSettings::default()
            },
        );
        Ok(Self {
            demo: args.demo_exporter_listen.is_some(),
            ..usage
        })
    }

    pub fn prometheus(&self) -> Option<&Prometheus> {
        self.prom.as_ref()
    }
}

/// Why a window was not stored.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Prometheus(#[from] PromError),
    /// The metrics cannot be attributed as they are; a person must change a setting.
    #[error("{0}")]
    Config(String),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// What one window of one source gave.
#[derive(Debug, Clone, Default)]
pub struct Landed {
    pub series: usize,
    pub samples: usize,
    pub rows: usize,
    pub note: Option<String>,
}

/// Reads one window of one source from Prometheus and stores it (replacing what the window
/// held), moving the watermark and closing gaps; a failure is recorded as a gap.
pub async fn ingest(
    pool: &PgPool,
    prom: &Prometheus,
    settings: &IngestSettings,
    source: Source,
    window: Window,
) -> Result<Landed, IngestError> {
    if let Some(retention) = settings.minute_retention {
        let keep_ms = millis(retention);
        if window.from_ms < crate::clock::now_ms().saturating_sub(keep_ms) {
            // its minutes would be dropped again, and rewriting its hours from them would
            // lose the rollups that outlive them
            return Err(IngestError::Config(format!(
                "{} is older than the minute retention ({} days, GPUFLEET_USAGE_MINUTE_RETENTION_DAYS): its hour and day rollups are kept as they are",
                shared::common::utc::format_rfc3339(window.from_ms),
                retention.as_secs() / 86_400
            )));
        }
    }
    let outcome = read_and_store(pool, prom, settings, source, window).await;
    if let Err(err) = &outcome {
        tracing::warn!(source = source.name(), from = %shared::common::utc::format_rfc3339(window.from_ms), %err, "usage window failed");
        db::failed(pool, source.name(), window, &err.to_string()).await?;
    }
    outcome
}

async fn read_and_store(
    pool: &PgPool,
    prom: &Prometheus,
    settings: &IngestSettings,
    source: Source,
    window: Window,
) -> Result<Landed, IngestError> {
    let who = db::attribution(pool).await?;
    let mut landed = Landed::default();
    let lookback = settings.counter_lookback_ms;
    let rows = match source {
        Source::Kueue => read_kueue(prom, (window, lookback), &who, &mut landed).await?,
        Source::Dcgm => read_dcgm(pool, prom, settings, window, &who, &mut landed).await?,
        Source::Vllm => read_vllm(prom, (window, lookback), &mut landed).await?,
    };
    // the window whole, or not at all
    let mut tx = pool.begin().await?;
    landed.rows = match &rows {
        Rows::Allocation(rows, lending, queue_rows) => {
            db::write_allocation(&mut tx, window, rows, lending, &who.teams).await?;
            db::write_queues(&mut tx, window, queue_rows).await?;
            rows.len() + queue_rows.len()
        }
        Rows::Devices(rows, pods) => {
            db::write_devices(&mut tx, window, rows, &who.teams).await?;
            db::write_pods(&mut tx, window, pods).await?;
            rows.len() + pods.len()
        }
        Rows::Tokens(rows, latency) => {
            db::write_tokens(&mut tx, window, rows, &who.teams).await?;
            db::write_latency(&mut tx, window, latency).await?;
            rows.len() + latency.len()
        }
    };
    db::succeeded(&mut tx, source.name(), window, landed.note.as_deref()).await?;
    tx.commit().await?;
    Ok(landed)
}

/// Counts what a read brought: series and samples.
fn count(series: &[Series], landed: &mut Landed) {
    landed.series += series.len();
    landed.samples += series.iter().map(|s| s.samples.len()).sum::<usize>();
}

/// Kueue's quota in use and nominal quota per queue and flavor (else kube-state-metrics'
/// requests of running pods), lending, and its queue metrics.
async fn read_kueue(
    prom: &Prometheus,
    (window, lookback): (Window, i64),
    who: &db::Attribution,
    landed: &mut Landed,
) -> Result<Rows, IngestError> {
    let (usage, nominal, waits, pending, evicted) = tokio::try_join!(
        prom.gauge_samples(KUEUE_USAGE, window),
        prom.gauge_samples(KUEUE_NOMINAL, window),
        prom.counter_samples(queues::ADMISSION_WAIT_BUCKET, window, lookback),
        prom.gauge_samples(queues::PENDING, window),
        prom.counter_samples(queues::EVICTED, window, lookback),
    )?;
    for part in [&usage, &nominal, &waits, &pending, &evicted] {
        count(part, landed);
    }
    let queue_rows = queues::queue_minutes(&waits, &pending, &evicted, window);
    let (mut rows, _known) = model::allocation_minutes(&usage, window, &who.owners);
    let lending = model::lending_minutes(&usage, &nominal, window, &who.owners, &mut rows);
    if usage.is_empty() {
        let (requests, phases) = tokio::try_join!(
            prom.gauge_samples(KSM_REQUESTS, window),
            prom.gauge_samples(KSM_RUNNING, window),
        )?;
        count(&requests, landed);
        count(&phases, landed);
        if requests.is_empty() {
            landed.note = Some(KUEUE_ABSENT.to_owned());
        } else {
            rows = model::requested_minutes(&requests, &phases, window);
            landed.note = Some(KUEUE_FALLBACK.to_owned());
        }
    }
    Ok(Rows::Allocation(rows, lending, queue_rows))
}

/// DCGM's busy and framebuffer per device, read in shards, with each device's co-tenants.
async fn read_dcgm(
    pool: &PgPool,
    prom: &Prometheus,
    settings: &IngestSettings,
    window: Window,
    who: &db::Attribution,
    landed: &mut Landed,
) -> Result<Rows, IngestError> {
    // what Kueue said each namespace held tells a device's flavor where its model does not
    let kueue = prom.gauge_samples(KUEUE_USAGE, window).await?;
    count(&kueue, landed);
    let flavors = model::DeviceFlavors::new(who.owners.flavors.clone()).held_by_kueue(
        &kueue,
        window,
        &who.owners,
    );
    let mut sums = DeviceSums::default();
    let mut pods: BTreeMap<neighbours::PodKey, neighbours::PodMinute> = BTreeMap::new();
    let mut attributed = false;
    let mut any = false;
    for shard in shard_matchers(settings.shards) {
        let selectors = [GPU_UTIL, GR_ENGINE_ACTIVE, FB_USED].map(|m| format!("{m}{shard}"));
        let (util, engine, fb) = tokio::try_join!(
            prom.gauge_samples(&selectors[0], window),
            prom.gauge_samples(&selectors[1], window),
            prom.gauge_samples(&selectors[2], window),
        )?;
        for part in [&util, &engine, &fb] {
            count(part, landed);
            any |= !part.is_empty();
            attributed |= part.iter().any(|s| !model::namespace(&s.labels).is_empty());
        }
        sums.add(model::device_sums(&util, &engine, &fb, window, &flavors));
        // a pod whose GPUs lie in several shards: its figures add up
        for (key, row) in neighbours::cotenancy(&util, &engine, window, &flavors) {
            pods.entry(key)
                .and_modify(|p| {
                    p.neighbours += row.neighbours;
                    p.neighbour_busy_gpu_us += row.neighbour_busy_gpu_us;
                    p.neighbour_observed_gpu_us += row.neighbour_observed_gpu_us;
                })
                .or_insert(row);
        }
    }
    if any && !attributed {
        match db::allocated_in(pool, window).await? {
            Some(allocated) if allocated > 0 => {
                return Err(IngestError::Config(format!(
                    "no DCGM series carries a namespace label while Kueue reports {:.1} GPU-hours allocated in this window: run dcgm-exporter with --kubernetes (-k) and the kubelet's pod-resources socket so it labels each GPU with its pod",
                    allocated as f64 / 3.6e9
                )));
            }
            _ => landed.note = Some(DCGM_UNLABELLED.to_owned()),
        }
    }
    Ok(Rows::Devices(sums.rows(), pods))
}

/// vLLM's tokens and serving time per model, and its latency histograms.
async fn read_vllm(
    prom: &Prometheus,
    (window, lookback): (Window, i64),
    landed: &mut Landed,
) -> Result<Rows, IngestError> {
    let (prompt, generation, prefill, decode, ttft, queue) = tokio::try_join!(
        prom.counter_samples(PROMPT_TOKENS, window, lookback),
        prom.counter_samples(GENERATION_TOKENS, window, lookback),
        prom.counter_samples(PREFILL_SECONDS, window, lookback),
        prom.counter_samples(DECODE_SECONDS, window, lookback),
        prom.counter_samples(Latency::Ttft.metric(), window, lookback),
        prom.counter_samples(Latency::Queue.metric(), window, lookback),
    )?;
    for part in [&prompt, &generation, &prefill, &decode, &ttft, &queue] {
        count(part, landed);
    }
    let latency = neighbours::latency_minutes(
        &[(Latency::Ttft, &ttft[..]), (Latency::Queue, &queue[..])],
        window,
    );
    let served = model::Served {
        prompt: &prompt,
        generation: &generation,
        prefill_seconds: &prefill,
        decode_seconds: &decode,
    };
    Ok(Rows::Tokens(model::token_minutes(&served, window), latency))
}

/// What one source's window gives, before it is stored.
enum Rows {
    Allocation(
        BTreeMap<model::UsageKey, i64>,
        BTreeMap<model::UsageKey, model::Lending>,
        BTreeMap<queues::QueueKey, queues::QueueMinute>,
    ),
    Devices(
        BTreeMap<model::UsageKey, model::DeviceMinute>,
        BTreeMap<neighbours::PodKey, neighbours::PodMinute>,
    ),
    Tokens(
        BTreeMap<model::TokenKey, model::Tokens>,
        BTreeMap<neighbours::LatencyKey, neighbours::ServiceMinute>,
    ),
}

/// kube-state-metrics' GPU requests and running pods: the stand-in when Kueue's are absent.
const KSM_REQUESTS: &str = r#"kube_pod_container_resource_requests{resource=~"nvidia_com_gpu|amd_com_gpu|nvidia_com_mig_.+"}"#;
const KSM_RUNNING: &str = r#"kube_pod_status_phase{phase="Running"}"#;
const KUEUE_FALLBACK: &str = "Kueue's ClusterQueue resource metrics are absent (set metrics.enableClusterQueueResources: true in Kueue's configuration): allocation is read from kube-state-metrics' GPU requests of running pods instead, by namespace, without the flavor.";
const KUEUE_ABSENT: &str = "Kueue's ClusterQueue resource metrics (kueue_cluster_queue_resource_usage) are absent: set metrics.enableClusterQueueResources: true in Kueue's configuration. Allocation is unknown for these minutes, not zero.";
const DCGM_UNLABELLED: &str = "no DCGM series carries a namespace label, so every GPU counts as unassigned: run dcgm-exporter with --kubernetes (-k) so it labels each GPU with its pod.";

/// Label matchers that split DCGM's series into `shards` disjoint parts covering them all:
/// by the first hex digit of the GPU UUID, the last part taking everything the others do not
/// match (another first digit, no UUID label).
pub fn shard_matchers(shards: u32) -> Vec<String> {
    const HEX: &str = "0123456789abcdef";
    if shards <= 1 {
        return vec![String::new()];
    }
    let per = HEX.len() / shards as usize;
    let groups: Vec<&str> = (0..shards as usize)
        .map(|i| &HEX[i * per..(i + 1) * per])
        .collect();
    let first = &groups[..groups.len() - 1];
    let mut matchers: Vec<String> = first
        .iter()
        .map(|g| format!("{{UUID=~\"GPU-[{g}].*\"}}"))
        .collect();
    matchers.push(format!("{{UUID!~\"GPU-[{}].*\"}}", first.concat()));
    matchers
}

/// The windows from `from_ms` to `to_ms`: at most an hour each, never across an hour boundary.
pub fn windows(from_ms: i64, to_ms: i64) -> Vec<Window> {
    let mut out = Vec::new();
    let mut at = from_ms;
    while at < to_ms {
        let end = ((at.div_euclid(HOUR_MS) + 1) * HOUR_MS).min(to_ms);
        if let Ok(window) = Window::new(at, end) {
            out.push(window);
        }
        at = end;
    }
    out
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// One continuous-ingest run: each source from its watermark up to `now - settle`. Returns
/// `None` when another replica holds the lock, else whether every source caught up.
pub async fn run_once(pool: &PgPool, usage: &Usage) -> Result<Option<bool>, IngestError> {
    let Some(prom) = usage.prometheus() else {
        return Ok(Some(true));
    };
    let _running = usage.running.lock().await;
    let mut lock = pool.acquire().await?;
    if !db::try_lock(&mut lock).await? {
        return Ok(None);
    }
    let outcome = catch_up(pool, prom, &usage.settings, usage.clock.now_ms()).await;
    db::unlock(&mut lock).await?;
    outcome.map(Some)
}

async fn catch_up(
    pool: &PgPool,
    prom: &Prometheus,
    settings: &IngestSettings,
    now_ms: i64,
) -> Result<bool, IngestError> {
    let settle_ms = millis(settings.settle);
    let backfill_ms = millis(settings.backfill);
    let until = floor_minute(now_ms.saturating_sub(settle_ms));
    let mut caught_up = true;
    for source in Source::ALL {
        let from = db::watermark(pool, source.name())
            .await?
            .unwrap_or_else(|| floor_minute(now_ms.saturating_sub(backfill_ms)));
        for window in windows(floor_minute(from), until) {
            match ingest(pool, prom, settings, source, window).await {
                Ok(_) => {}
                Err(IngestError::Database(err)) => return Err(IngestError::Database(err)),
                Err(_) => {
                    caught_up = false;
                    break;
                }
            }
        }
    }
    if let Some(retention) = settings.minute_retention {
        let keep_ms = millis(retention);
        let dropped = db::drop_old_minutes(pool, now_ms.saturating_sub(keep_ms)).await?;
        if dropped > 0 {
            tracing::info!(dropped, "usage: dropped minute partitions past retention");
        }
    }
    Ok(caught_up)
}

/// Runs the ingest every `every`, backing off (doubling, at most 5 minutes) while it fails.
pub fn spawn(pool: PgPool, usage: std::sync::Arc<Usage>) -> Option<tokio::task::JoinHandle<()>> {
    usage.prometheus()?;
    Some(tokio::spawn(async move {
        let mut failures = 0u32;
        loop {
            match run_once(&pool, &usage).await {
                Ok(Some(true)) | Ok(None) => failures = 0,
                Ok(Some(false)) => failures = failures.saturating_add(1),
                Err(err) => {
                    tracing::warn!(%err, "usage ingest failed");
                    failures = failures.saturating_add(1);
                }
            }
            tokio::time::sleep(crate::retry::backoff(usage.settings.every, failures)).await;
        }
    }))
}

/// The ingest's state, for `/api/health` and `gpufleet usage status`.
pub async fn health(pool: &PgPool, usage: &Usage) -> sqlx::Result<UsageHealth> {
    let sources = db::sources(pool).await?;
    let open_gaps = db::open_gaps(pool).await?;
    Ok(UsageHealth {
        prometheus: usage
            .prometheus()
            .map(|p| crate::config::redact_url(p.url())),
        demo: usage.demo,
        sources,
        open_gaps,
        unattributed: db::unattributed(pool).await?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_uuid_once() {
        assert_eq!(shard_matchers(1), vec![String::new()]);
        assert_eq!(
            shard_matchers(2),
            vec![
                r#"{UUID=~"GPU-[01234567].*"}"#.to_owned(),
                r#"{UUID!~"GPU-[01234567].*"}"#.to_owned(),
            ]
        );
        let sixteen = shard_matchers(16);
        assert_eq!(sixteen.len(), 16);
        assert_eq!(sixteen[0], r#"{UUID=~"GPU-[0].*"}"#);
        assert_eq!(sixteen[15], r#"{UUID!~"GPU-[0123456789abcde].*"}"#);
    }

    #[test]
    fn windows_stop_at_hour_boundaries() {
        let h = HOUR_MS;
        let got = windows(10 * MINUTE_MS, 2 * h + 5 * MINUTE_MS);
        let bounds: Vec<(i64, i64)> = got.iter().map(|w| (w.from_ms, w.to_ms)).collect();
        assert_eq!(
            bounds,
            vec![
                (10 * MINUTE_MS, h),
                (h, 2 * h),
                (2 * h, 2 * h + 5 * MINUTE_MS)
            ]
        );
        assert!(windows(h, h).is_empty());
    }
}
