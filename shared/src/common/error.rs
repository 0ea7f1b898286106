//! The HTTP error contract: every non-2xx response of `/api` carries an [`ApiError`] body.
//!
//! Codes are stable strings (`not_found`, `invalid`, ...) that clients may match on; the
//! message is for people. The HTTP status of each code is defined here, once.

use serde::{Deserialize, Serialize, de::DeserializeOwned};

/// A stable, machine-readable error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request is malformed (bad JSON, bad query string).
    BadRequest,
    /// The request is well-formed but some fields are wrong; see `fields`.
    Invalid,
    Unauthenticated,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    Timeout,
    Conflict,
    /// The change is allowed but out of the ordinary (a month with unobserved hours, a rate
    /// far from the one before): the message says what, and how to send it again confirmed.
    ConfirmationRequired,
    PayloadTooLarge,
    UnsupportedMediaType,
    /// Too many attempts (failed log-ins); retry after the `Retry-After` header's seconds.
    TooManyRequests,
    /// A dependency (the database, Prometheus, the cluster) cannot be reached right now.
    Unavailable,
    Internal,
    /// A code this build does not know (sent by a newer server).
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    /// The HTTP status code that carries this error.
    pub fn http_status(self) -> u16 {
        match self {
            Self::BadRequest => 400,
            Self::Unauthenticated => 401,
            Self::Forbidden => 403,
            Self::NotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::Timeout => 408,
            Self::Conflict | Self::ConfirmationRequired => 409,
            Self::PayloadTooLarge => 413,
            Self::UnsupportedMediaType => 415,
            Self::TooManyRequests => 429,
            Self::Invalid => 422,
            Self::Unavailable => 503,
            Self::Internal | Self::Unknown => 500,
        }
    }

    /// The code for a bare HTTP status, for errors raised below the application (body limits,
    /// timeouts, method routing) that arrive without a body of ours.
    pub fn from_http_status(status: u16) -> Self {
        match status {
            400 => Self::BadRequest,
            401 => Self::Unauthenticated,
            403 => Self::Forbidden,
            404 => Self::NotFound,
            405 => Self::MethodNotAllowed,
            408 => Self::Timeout,
            409 => Self::Conflict,
            413 => Self::PayloadTooLarge,
            415 => Self::UnsupportedMediaType,
            429 => Self::TooManyRequests,
            422 => Self::Invalid,
            503 => Self::Unavailable,
            _ => Self::Internal,
        }
    }

    /// A default message a person can act on.
    pub fn default_message(self) -> &'static str {
        match self {
            Self::BadRequest => "the request could not be read",
            Self::Invalid => "some fields are invalid",
            Self::Unauthenticated => "please log in",
            Self::Forbidden => "you are not allowed to do this",
            Self::NotFound => "no such resource",
            Self::MethodNotAllowed => "this method is not allowed on this resource",
            Self::Timeout => "the request took too long and was stopped",
            Self::Conflict => "the resource changed or already exists",
            Self::ConfirmationRequired => "this change needs an explicit confirmation",
            Self::PayloadTooLarge => "the request body is too large",
            Self::UnsupportedMediaType => "unsupported content type; send application/json",
            Self::TooManyRequests => "too many attempts; wait and try again",
            Self::Unavailable => "a service this request needs is unavailable; try again shortly",
            Self::Internal | Self::Unknown => "internal error",
        }
    }
}

/// One invalid field: a path into the request (`teams[2].workloads[0].gpus_per_job`) and the
/// problem with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

/// The JSON body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldError>,
    /// Set on 5xx responses so a person can quote it and an operator can find the log line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            fields: Vec::new(),
            request_id: None,
        }
    }

    /// An error with the code's default message.
    pub fn from_code(code: ErrorCode) -> Self {
        Self::new(code, code.default_message())
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        for field in &self.fields {
            write!(f, "; {}: {}", field.path, field.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiError {}

/// Why JSON could not be read: it is not well-formed (the path names the line and column), or
/// a field has the wrong type or is missing (the path names the field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    Syntax(FieldError),
    Data(FieldError),
}

impl JsonError {
    pub fn into_field_error(self) -> FieldError {
        match self {
            JsonError::Syntax(field) | JsonError::Data(field) => field,
        }
    }
}

/// Reads JSON into `T`. A type error names its field path (`fleet[0].count`) exactly as
/// validation errors do, and says what was expected in words, not in Rust types; a syntax
/// error names its line and column.
pub fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, JsonError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut deserializer).map_err(json_error)
}

/// [`from_json`]'s error, said once for every type it reads (the browser's bundles carry one
/// copy).
fn json_error(err: serde_path_to_error::Error<serde_json::Error>) -> JsonError {
    let path = err.path().to_string();
    let inner = err.into_inner();
    let message = inner.to_string();
    let position = format!(" at line {} column {}", inner.line(), inner.column());
    let message = in_words(message.strip_suffix(&position).unwrap_or(&message));
    match inner.classify() {
        serde_json::error::Category::Data => JsonError::Data(FieldError {
            path: if path == "." {
                "(top level)".to_owned()
            } else {
                path
            },
            message,
        }),
        _ => JsonError::Syntax(FieldError {
            path: format!("line {} column {}", inner.line(), inner.column()),
            message,
        }),
    }
}

/// serde's message (without its position), with Rust type names said as a person would.
fn in_words(message: &str) -> String {
    let mut out = message.to_owned();
    for (rust, words) in [
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65,535"),
        (
            "expected u32",
            "expected a whole number from 0 to 4,294,967,295",
        ),
        ("expected u64", "expected a whole number of 0 or more"),
        ("expected usize", "expected a whole number of 0 or more"),
        ("expected i32", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a boolean", "expected true or false"),
    ] {
        out = out.replace(rust, words);
    }
    if let Some(at) = out.find("expected struct ") {
        out.replace_range(at.., "expected an object");
    }
    if let Some(at) = out.find("expected a sequence") {
        out.replace_range(at.., "expected a list");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_status() {
        let codes = [
            ErrorCode::BadRequest,
            ErrorCode::Invalid,
            ErrorCode::Unauthenticated,
            ErrorCode::Forbidden,
            ErrorCode::NotFound,
            ErrorCode::MethodNotAllowed,
            ErrorCode::Timeout,
            ErrorCode::Conflict,
            ErrorCode::PayloadTooLarge,
            ErrorCode::UnsupportedMediaType,
            ErrorCode::TooManyRequests,
            ErrorCode::Unavailable,
            ErrorCode::Internal,
        ];
        for code in codes {
            assert_eq!(
                ErrorCode::from_http_status(code.http_status()),
                code,
                "{code:?}"
            );
        }
    }

    #[test]
    fn wire_format_is_stable() {
        let mut err = ApiError::new(ErrorCode::Invalid, "bad scenario");
        err.fields.push(FieldError {
            path: "fleet[0].count".into(),
            message: "must be > 0".into(),
        });
        let json = serde_json::to_string(&err).expect("serialises");
        assert_eq!(
            json,
            r#"{"code":"invalid","message":"bad scenario","fields":[{"path":"fleet[0].count","message":"must be > 0"}]}"#
        );
        let plain = serde_json::to_string(&ApiError::from_code(ErrorCode::NotFound)).expect("ok");
        assert_eq!(
            plain,
            r#"{"code":"not_found","message":"no such resource"}"#
        );
    }

    #[test]
    fn type_errors_name_the_path_in_words() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Fleet {
            fleet: Vec<Item>,
        }
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Item {
            count: u32,
        }
        let err = from_json::<Fleet>(r#"{"fleet": [{"count": 1}, {"count": -3}]}"#)
            .expect_err("negative count")
            .into_field_error();
        assert_eq!(err.path, "fleet[1].count");
        assert_eq!(
            err.message,
            "invalid value: integer `-3`, expected a whole number from 0 to 4,294,967,295"
        );
        let err = from_json::<Fleet>(r#"{"fleet": 3}"#)
            .expect_err("not a list")
            .into_field_error();
        assert_eq!(
            (err.path.as_str(), err.message.as_str()),
            ("fleet", "invalid type: integer `3`, expected a list")
        );
        let err = from_json::<Fleet>("[]").expect_err("not an object");
        let JsonError::Data(err) = err else {
            panic!("a type error: {err:?}")
        };
        assert_eq!(err.path, "(top level)");
        assert!(!err.message.contains("struct"), "{}", err.message);
        let err = from_json::<Fleet>("{\n\"fleet\": [").expect_err("cut short");
        let JsonError::Syntax(err) = err else {
            panic!("a syntax error: {err:?}")
        };
        assert!(err.path.starts_with("line 2 column"), "{}", err.path);
    }

    #[test]
    fn unknown_codes_from_a_newer_server_still_decode() {
        let err: ApiError =
            serde_json::from_str(r#"{"code":"quota_exhausted","message":"m"}"#).expect("decodes");
        assert_eq!(err.code, ErrorCode::Unknown);
        assert_eq!(err.code.http_status(), 500);
    }
}
