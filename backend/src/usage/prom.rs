//! The Prometheus HTTP API client: raw samples of a window through a range selector, never an
//! instant-style evaluation (which would answer for a vanished series for the whole lookback).
//!
//! `selector[d]` evaluated at `t` holds the samples in `[t - d, t]` in Prometheus 2.x and in
//! `(t - d, t]` in 3.x. A gauge's window is asked at `t = to - 1 ms` with `d = to - from` and
//! `[from, to)` is kept; a counter's at `t = to` with `d = to - from + lookback`, keeping the
//! increases of the samples in `(from, to]` (in `shared::usage`): every sample counts once on
//! either version.

use std::{path::PathBuf, sync::Arc, time::Duration};

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderValue, Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};
use serde::Deserialize;
use shared::usage::{Labels, Sample, Series, Window, parse_micro};

/// How to reach Prometheus.
#[derive(Debug, Clone, Default)]
pub struct PromSettings {
    /// e.g. `http://prometheus.monitoring:9090` (a path prefix is kept).
    pub url: String,
    pub bearer_token_file: Option<PathBuf>,
    /// `user:password` for basic auth.
    pub basic_auth: Option<String>,
    /// PEM bundle of the CAs to trust for https (default: the system's).
    pub ca_file: Option<PathBuf>,
    pub timeout: Duration,
}

/// Why a query got no answer. `retryable` ones are recorded as gaps and tried again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromError {
    #[error("Prometheus at {url} cannot be reached: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("Prometheus did not answer within {0} s")]
    Timeout(u64),
    #[error("Prometheus answered {status}: {message}")]
    Server { status: u16, message: String },
    #[error(
        "Prometheus refused the credentials ({status}): check GPUFLEET_PROMETHEUS_BEARER_TOKEN_FILE or GPUFLEET_PROMETHEUS_BASIC_AUTH"
    )]
    Refused { status: u16 },
    #[error("Prometheus refused the query ({status}, {kind}): {message}")]
    Query {
        status: u16,
        kind: String,
        message: String,
    },
    #[error("Prometheus's answer could not be read: {0}")]
    Answer(String),
}

impl PromError {
    /// Down, slow, overloaded: worth trying again. Refused credentials and refused queries
    /// are configuration to fix, yet they are retried too (with backoff) so nothing is lost
    /// once they are fixed.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            PromError::Unreachable { .. } | PromError::Timeout(_) | PromError::Server { .. }
        )
    }
}

#[derive(Clone)]
pub struct Prometheus {
    base: String,
    client: HttpsClient,
    authorization: Option<HeaderValue>,
    timeout: Duration,
}

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prometheus")
            .field("url", &self.base)
            .finish()
    }
}

impl Prometheus {
    /// Checks the settings (URL, files) without connecting.
    pub fn new(settings: &PromSettings) -> Result<Prometheus, String> {
        let base = settings.url.trim_end_matches('/').to_owned();
        let uri: Uri = base
            .parse()
            .map_err(|err| format!("GPUFLEET_PROMETHEUS_URL {base:?} is not a URL: {err}"))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(format!(
                "GPUFLEET_PROMETHEUS_URL {base:?} must be an http:// or https:// URL with a host"
            ));
        }
        let authorization = match (&settings.bearer_token_file, &settings.basic_auth) {
            (Some(_), Some(_)) => {
                return Err(
                    "give a bearer token file or basic auth for Prometheus, not both".to_owned(),
                );
            }
            (Some(file), None) => {
                let token = std::fs::read_to_string(file).map_err(|err| {
                    format!(
                        "cannot read the Prometheus token file {}: {err}",
                        file.display()
                    )
                })?;
                Some(secret(&format!("Bearer {}", token.trim()))?)
            }
            (None, Some(user_password)) => {
                if !user_password.contains(':') {
                    return Err("Prometheus basic auth is written user:password".to_owned());
                }
                let encoded = base64::engine::general_purpose::STANDARD.encode(user_password);
                Some(secret(&format!("Basic {encoded}"))?)
            }
            (None, None) => None,
        };
        let client = https_client(settings.ca_file.as_ref(), settings.timeout)?;
        Ok(Prometheus {
            base,
            client,
            authorization,
            timeout: settings.timeout,
        })
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    /// A gauge's raw samples in `[from, to)` (a little more at the start: callers keep what
    /// they need).
    pub async fn gauge_samples(
        &self,
        selector: &str,
        window: Window,
    ) -> Result<Vec<Series>, PromError> {
        self.range(selector, window.to_ms - window.from_ms, window.to_ms - 1)
            .await
    }

    /// A counter's raw samples in `[from - lookback, to]`: the sample before the window's first
    /// increase, and the one stamped `to`, which counts the window's last minute.
    pub async fn counter_samples(
        &self,
        selector: &str,
        window: Window,
        lookback_ms: i64,
    ) -> Result<Vec<Series>, PromError> {
        let range_ms = window.to_ms - window.from_ms + lookback_ms;
        self.range(selector, range_ms, window.to_ms).await
    }

    /// `selector[range]` evaluated at `at_ms`.
    async fn range(
        &self,
        selector: &str,
        range_ms: i64,
        at_ms: i64,
    ) -> Result<Vec<Series>, PromError> {
        let query = format!("{selector}[{range_ms}ms]");
        let time = format!("{}.{:03}", at_ms.div_euclid(1000), at_ms.rem_euclid(1000));
        let body: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("query", &query)
            .append_pair("time", &time)
            .finish();
        let answer = self.post("/api/v1/query", body).await?;
        matrix(&answer)
    }

    async fn post(&self, path: &str, body: String) -> Result<Bytes, PromError> {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(format!("{}{path}", self.base))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json");
        if let Some(value) = &self.authorization {
            request = request.header(header::AUTHORIZATION, value.clone());
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|err| PromError::Answer(err.to_string()))?;
        let call = async {
            let response =
                self.client
                    .request(request)
                    .await
                    .map_err(|err| PromError::Unreachable {
                        url: self.base.clone(),
                        reason: describe(&err),
                    })?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|err| PromError::Unreachable {
                    url: self.base.clone(),
                    reason: format!("the answer broke off: {err}"),
                })?
                .to_bytes();
            Ok::<_, PromError>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| PromError::Timeout(self.timeout.as_secs()))??;
        match status {
            StatusCode::OK => Ok(bytes),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(PromError::Refused {
                status: status.as_u16(),
            }),
            StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => {
                let (kind, message) = error_of(&bytes);
                Err(PromError::Query {
                    status: status.as_u16(),
                    kind,
                    message,
                })
            }
            _ => Err(PromError::Server {
                status: status.as_u16(),
                message: error_of(&bytes).1,
            }),
        }
    }
}

/// An HTTP/1 client for http:// and https:// (rustls; the system's CAs, or those of `ca_file`).
pub type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// An [`HttpsClient`] that gives up connecting after `timeout`.
pub fn https_client(ca_file: Option<&PathBuf>, timeout: Duration) -> Result<HttpsClient, String> {
    let tls = tls_config(ca_file)?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(timeout));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

fn secret(value: &str) -> Result<HeaderValue, String> {
    let mut value = HeaderValue::from_str(value)
        .map_err(|_| "the Prometheus credentials hold characters a header cannot".to_owned())?;
    value.set_sensitive(true);
    Ok(value)
}

fn tls_config(ca_file: Option<&PathBuf>) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("TLS set-up: {err}"))?;
    let config = match ca_file {
        Some(file) => {
            use rustls_pki_types::{CertificateDer, pem::PemObject};
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(file)
                .map_err(|err| format!("cannot read the CA file {}: {err}", file.display()))?;
            for cert in certs {
                let cert = cert
                    .map_err(|err| format!("the CA file {} is not PEM: {err}", file.display()))?;
                roots
                    .add(cert)
                    .map_err(|err| format!("a CA in {} is not usable: {err}", file.display()))?;
            }
            if roots.is_empty() {
                return Err(format!(
                    "the CA file {} holds no certificate",
                    file.display()
                ));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => {
            use rustls_platform_verifier::BuilderVerifierExt;
            builder
                .with_platform_verifier()
                .map_err(|err| format!("TLS set-up: {err}"))?
                .with_no_client_auth()
        }
    };
    Ok(config)
}

/// The innermost cause, which is the one a person can act on ("Connection refused").
fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause: &dyn std::error::Error = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<RawSeries>,
}

#[derive(Deserialize)]
struct RawSeries {
    metric: Labels,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

fn error_of(bytes: &[u8]) -> (String, String) {
    match serde_json::from_slice::<Answer>(bytes) {
        Ok(answer) => (
            answer.error_type.unwrap_or_default(),
            answer.error.unwrap_or_default(),
        ),
        Err(_) => (
            String::new(),
            String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
                .trim()
                .to_owned(),
        ),
    }
}

fn matrix(bytes: &[u8]) -> Result<Vec<Series>, PromError> {
    let answer: Answer = serde_json::from_slice(bytes)
        .map_err(|err| PromError::Answer(format!("not the query API's JSON: {err}")))?;
    if answer.status != "success" {
        return Err(PromError::Answer(answer.error.unwrap_or(answer.status)));
    }
    let data = answer
        .data
        .ok_or_else(|| PromError::Answer("no data".to_owned()))?;
    if data.result_type != "matrix" {
        return Err(PromError::Answer(format!(
            "a {} where raw samples (a matrix) were asked for",
            data.result_type
        )));
    }
    data.result
        .into_iter()
        .map(|raw| {
            let samples = raw
                .values
                .iter()
                .filter_map(|(at, value)| {
                    // NaN and infinities say nothing about use: skipped like missing samples
                    parse_micro(value).map(|micro| Sample {
                        // seconds with millisecond digits; rounding undoes the binary fraction
                        at_ms: (at * 1000.0).round() as i64,
                        micro,
                    })
                })
                .collect();
            Ok(Series {
                labels: raw.metric,
                samples,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matrix_answer_reads_exactly() {
        let body = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","namespace":"a"},
             "values":[[1796000303.398,"87"],[1796000304.4,"NaN"],[1796000305.401,"0.913305"]]}]}}"#;
        let series = matrix(body).expect("a matrix");
        assert_eq!(series.len(), 1);
        assert_eq!(
            series[0].samples,
            vec![
                Sample {
                    at_ms: 1_796_000_303_398,
                    micro: 87_000_000
                },
                Sample {
                    at_ms: 1_796_000_305_401,
                    micro: 913_305
                },
            ]
        );
    }

    #[test]
    fn other_answers_are_errors_with_their_words() {
        let vector = br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert!(matches!(matrix(vector), Err(PromError::Answer(m)) if m.contains("vector")));
        assert!(matches!(matrix(b"<html>"), Err(PromError::Answer(_))));
        let refused = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert_eq!(
            error_of(refused),
            ("bad_data".to_owned(), "parse error".to_owned())
        );
    }

    #[test]
    fn settings_are_checked_before_any_call() {
        let settings = |url: &str| PromSettings {
            url: url.to_owned(),
            timeout: Duration::from_secs(1),
            ..PromSettings::default()
        };
        assert!(Prometheus::new(&settings("http://127.0.0.1:9090")).is_ok());
        for bad in ["127.0.0.1:9090", "ftp://x", "not a url"] {
            let err = Prometheus::new(&settings(bad)).expect_err(bad);
            assert!(err.contains("GPUFLEET_PROMETHEUS_URL"), "{err}");
        }
        let both = PromSettings {
            bearer_token_file: Some("/nonexistent".into()),
            basic_auth: Some("u:p".into()),
            ..settings("http://127.0.0.1:9090")
        };
        assert!(
            Prometheus::new(&both)
                .expect_err("both")
                .contains("not both")
        );
        let missing = PromSettings {
            bearer_token_file: Some("/nonexistent/token".into()),
            ..settings("http://127.0.0.1:9090")
        };
        assert!(
            Prometheus::new(&missing)
                .expect_err("missing")
                .contains("/nonexistent/token")
        );
    }
}
