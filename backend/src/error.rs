//! The backend's one error type and the HTTP error contract.
//!
//! Handlers return [`Result`]. [`Error::into_response`] only attaches the shared
//! [`ApiError`] to the response; [`json_errors`] (a middleware over the whole router) is the one
//! place that renders error bodies, logs server errors once with the request id, and turns the
//! bare errors of lower layers (body limit, timeout, method routing, extractor rejections) into
//! the same JSON. A 5xx body never carries internals: it says "internal error" and the id.

use axum::{
    Json,
    body::to_bytes,
    extract::Request,
    http::{StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use shared::{ApiError, ErrorCode, FieldError};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unauthenticated: {0}")]
    Unauthenticated(&'static str),
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    #[error("a dependency is unavailable")]
    Unavailable,
    /// A limit was reached: the caller's own (`429`) or the server's (`503`), with
    /// `Retry-After`; the message says which limit and what to do.
    #[error("throttled: {message}")]
    Throttled {
        whose: Whose,
        message: String,
        retry_after_s: u64,
    },
    #[error("not found")]
    NotFound,
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("unsupported media type")]
    UnsupportedMediaType,
    #[error("invalid input")]
    Invalid(Vec<FieldError>),
    #[error("conflict: {0}")]
    Conflict(String),
    /// Allowed once confirmed (`confirmation_required`): the message says what to confirm.
    #[error("{0}")]
    Unconfirmed(String),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("internal: {0}")]
    Internal(String),
}

/// Whose limit a [`Error::Throttled`] request reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    /// The caller's own (failed log-ins, their share of a pool, their open streams): `429`.
    Caller,
    /// What the server holds in all: `503`.
    Server,
}

impl Error {
    /// The caller reached a limit of their own; `message` says what to do.
    pub fn caller_limit(message: impl Into<String>, retry_after_s: u64) -> Self {
        Self::Throttled {
            whose: Whose::Caller,
            message: message.into(),
            retry_after_s,
        }
    }

    /// The server holds as much as it serves; `message` says of what.
    pub fn server_full(message: impl Into<String>, retry_after_s: u64) -> Self {
        Self::Throttled {
            whose: Whose::Server,
            message: message.into(),
            retry_after_s,
        }
    }
}

/// What a `gpufleet` command fails with: bad input (exit status 2; the message names the file,
/// line, column or field and the problem), or anything else (exit status 1).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Failed(String),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Input(_) => 2,
            CliError::Failed(_) => 1,
        }
    }
}

impl From<Error> for CliError {
    fn from(err: Error) -> Self {
        match err {
            Error::Invalid(fields) => {
                let lines: Vec<String> = fields
                    .iter()
                    .map(|f| format!("{}: {}", f.path, f.message))
                    .collect();
                CliError::Input(format!("invalid input: {}", lines.join("; ")))
            }
            Error::Conflict(message) | Error::Unconfirmed(message) => CliError::Input(message),
            other => CliError::Failed(other.to_string()),
        }
    }
}

impl From<sqlx::Error> for CliError {
    fn from(err: sqlx::Error) -> Self {
        CliError::Failed(format!("database: {err}"))
    }
}

impl Error {
    fn to_api_error(&self) -> ApiError {
        match self {
            Self::Unauthenticated(message) => ApiError::new(ErrorCode::Unauthenticated, *message),
            Self::Forbidden(message) => ApiError::new(ErrorCode::Forbidden, *message),
            Self::Unavailable => ApiError::from_code(ErrorCode::Unavailable),
            Self::Throttled { whose, message, .. } => ApiError::new(
                match whose {
                    Whose::Caller => ErrorCode::TooManyRequests,
                    Whose::Server => ErrorCode::Unavailable,
                },
                message.clone(),
            ),
            Self::NotFound => ApiError::from_code(ErrorCode::NotFound),
            Self::BadRequest(message) => ApiError::new(ErrorCode::BadRequest, message.clone()),
            Self::UnsupportedMediaType => ApiError::from_code(ErrorCode::UnsupportedMediaType),
            Self::Invalid(fields) => ApiError {
                fields: fields.clone(),
                ..ApiError::from_code(ErrorCode::Invalid)
            },
            Self::Conflict(message) => ApiError::new(ErrorCode::Conflict, message.clone()),
            Self::Unconfirmed(message) => {
                ApiError::new(ErrorCode::ConfirmationRequired, message.clone())
            }
            Self::Database(sqlx::Error::RowNotFound) => ApiError::from_code(ErrorCode::NotFound),
            Self::Database(
                sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed,
            ) => ApiError::new(
                ErrorCode::Unavailable,
                "the database is unavailable; try again",
            ),
            Self::Database(_) | Self::Internal(_) => ApiError::from_code(ErrorCode::Internal),
        }
    }
}

/// `900` → "15 minutes", `1` → "1 second".
pub fn wait_in_words(seconds: u64) -> String {
    let (n, unit) = if seconds >= 60 {
        (seconds.div_ceil(60), "minute")
    } else {
        (seconds.max(1), "second")
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

/// The detail of a server error, kept out of the body and logged once by [`json_errors`].
#[derive(Clone)]
struct ErrorDetail(String);

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let body = self.to_api_error();
        let mut response = StatusCode::from_u16(body.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            .into_response();
        if let Self::Throttled { retry_after_s, .. } = self {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, retry_after_s.into());
        }
        response
            .extensions_mut()
            .insert(ErrorDetail(self.to_string()));
        response.extensions_mut().insert(body);
        response
    }
}

/// Largest plain-text rejection we read back to reuse its message.
const REJECTION_TEXT_LIMIT: usize = 4096;

/// Renders every error response as an [`ApiError`] JSON body; see the module doc.
pub async fn json_errors(request: Request, next: Next) -> Response {
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let mut api_error = match parts.extensions.remove::<ApiError>() {
        Some(api_error) => api_error,
        None if is_json(&parts.headers) => return Response::from_parts(parts, body),
        None => {
            let code = ErrorCode::from_http_status(status.as_u16());
            let mut api_error = ApiError::from_code(code);
            // Extractor rejections (bad JSON, wrong content type) explain themselves well.
            if matches!(status.as_u16(), 400 | 415 | 422)
                && let Ok(bytes) = to_bytes(body, REJECTION_TEXT_LIMIT).await
            {
                let text = String::from_utf8_lossy(&bytes).trim().to_owned();
                if !text.is_empty() {
                    api_error.message = text;
                }
            }
            api_error
        }
    };
    if status.is_server_error() {
        let detail = parts
            .extensions
            .get::<ErrorDetail>()
            .map_or("-", |d| d.0.as_str());
        tracing::error!(status = status.as_u16(), request_id = ?request_id, detail, "server error");
        api_error.request_id = request_id;
    }
    // Keep what the original said about itself (Allow, Retry-After, the request id), not what
    // described its old body.
    for name in [
        header::CONTENT_TYPE,
        header::CONTENT_LENGTH,
        header::CONTENT_ENCODING,
    ] {
        parts.headers.remove(name);
    }
    let mut response = (status, Json(api_error)).into_response();
    response.headers_mut().extend(parts.headers);
    response
}

fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// A handler's last resort for unknown `/api` routes.
pub async fn api_not_found() -> Error {
    Error::NotFound
}

#[cfg(test)]
mod tests {
    #[test]
    fn waits_are_said_in_minutes_or_seconds() {
        assert_eq!(super::wait_in_words(900), "15 minutes");
        assert_eq!(super::wait_in_words(61), "2 minutes");
        assert_eq!(super::wait_in_words(60), "1 minute");
        assert_eq!(super::wait_in_words(30), "30 seconds");
        assert_eq!(super::wait_in_words(0), "1 second");
    }
}
