//! The one way `/api` handlers read a JSON body: [`ApiJson`]. It refuses a body that is not
//! JSON (415), not UTF-8 or not well-formed (400), and text PostgreSQL cannot store (a NUL
//! character, 422 naming the field) before any handler or SQL sees it; a wrong type or a
//! missing field is a 422 naming the field's path, in words rather than Rust type names.

use axum::{
    body::Bytes,
    extract::{FromRequest, Request},
    http::header,
    response::{IntoResponse, Response},
};
use serde::de::DeserializeOwned;
use serde_json::Value;
use shared::{FieldError, common::error::JsonError};

use crate::error::Error;

/// A JSON request body, checked as the module says.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| {
                let v = v.trim();
                v == "application/json" || (v.starts_with("application/") && v.ends_with("+json"))
            });
        if !is_json {
            return Err(Error::UnsupportedMediaType.into_response());
        }
        // Body-limit and read errors answer as they are (413, 400).
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        read(&bytes)
            .map(ApiJson)
            .map_err(IntoResponse::into_response)
    }
}

/// Reads a JSON body as `T` (see the module doc).
pub fn read<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| Error::BadRequest("the body is not UTF-8 text".to_owned()))?;
    // JSON must escape NUL as \u0000; only then can a string hold one.
    if text.contains("\\u0000") {
        let value: Value = serde_json::from_str(text).map_err(|err| syntax(&err))?;
        let mut fields = Vec::new();
        find_nul("", &value, &mut fields);
        if !fields.is_empty() {
            return Err(Error::Invalid(fields));
        }
    }
    shared::common::error::from_json(text).map_err(|err| match err {
        JsonError::Syntax(field) => Error::BadRequest(format!(
            "the body is not valid JSON ({}: {})",
            field.path, field.message
        )),
        JsonError::Data(field) => Error::Invalid(vec![field]),
    })
}

fn syntax(err: &serde_json::Error) -> Error {
    Error::BadRequest(format!(
        "the body is not valid JSON (line {} column {})",
        err.line(),
        err.column()
    ))
}

/// Every string (key or value) holding a NUL character, by its path.
fn find_nul(path: &str, value: &Value, out: &mut Vec<FieldError>) {
    let bad = |path: &str| FieldError {
        path: if path.is_empty() {
            "(top level)".to_owned()
        } else {
            path.to_owned()
        },
        message: "text must not contain NUL characters".to_owned(),
    };
    match value {
        Value::String(s) if s.contains('\0') => out.push(bad(path)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                find_nul(&format!("{path}[{i}]"), item, out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let at = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                if key.contains('\0') {
                    out.push(bad(&at));
                }
                find_nul(&at, item, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Login {
        username: String,
        password: String,
    }

    fn fields(err: Error) -> Vec<FieldError> {
        match err {
            Error::Invalid(fields) => fields,
            other => panic!("not invalid: {other}"),
        }
    }

    #[test]
    fn nul_characters_are_refused_by_field() {
        let err = read::<Login>(br#"{"username": "a\u0000b", "password": "p"}"#).expect_err("NUL");
        let fields = fields(err);
        assert_eq!(fields[0].path, "username");
        assert_eq!(fields[0].message, "text must not contain NUL characters");
    }

    #[test]
    fn errors_name_fields_not_rust_types() {
        let err = read::<Login>(br#"{"username": 7, "password": "p"}"#).expect_err("type");
        let field = &fields(err)[0];
        assert_eq!(field.path, "username");
        assert!(!field.message.contains("String"), "{}", field.message);
        let err = read::<Login>(br#"[1]"#).expect_err("not an object");
        let field = &fields(err)[0];
        assert!(!field.message.contains("struct"), "{}", field.message);
        assert!(!field.message.contains("Login"), "{}", field.message);
        assert!(matches!(
            read::<Login>(b"{\"username\": "),
            Err(Error::BadRequest(_))
        ));
        assert!(matches!(
            read::<Login>(&[0xff, 0xfe]),
            Err(Error::BadRequest(_))
        ));
    }
}
