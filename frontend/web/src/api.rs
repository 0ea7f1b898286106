//! The one place that talks to the backend: every non-2xx becomes the shared [`ApiError`];
//! state-changing requests carry the session's CSRF token; a 401 signs the console out.

use std::cell::RefCell;

use gloo_net::http::{Method, Request, RequestBuilder, Response};
use leptos::prelude::*;
use serde::{Serialize, de::DeserializeOwned};
use shared::{ApiError, ErrorCode, accounts::Me, health::Health};

pub type ApiResult<T> = Result<T, ApiError>;

thread_local! {
    /// The signed-in user; `None` shows the log-in page.
    static SESSION: RefCell<Option<RwSignal<Option<Me>>>> = const { RefCell::new(None) };
}

/// Registers the signal that holds the signed-in user (once, at start).
pub fn bind_session(me: RwSignal<Option<Me>>) {
    SESSION.with(|s| *s.borrow_mut() = Some(me));
}

fn session() -> Option<RwSignal<Option<Me>>> {
    SESSION.with(|s| *s.borrow())
}

fn csrf_token() -> String {
    session()
        .and_then(|me| me.with_untracked(|m| m.as_ref().map(|m| m.csrf_token.clone())))
        .unwrap_or_default()
}

/// `GET path`, decoded as `T`.
pub async fn get<T: DeserializeOwned>(path: &str) -> ApiResult<T> {
    read(&get_text(path).await?)
}

/// `GET path`, parsed by the browser's own `JSON.parse` and read with `js_sys`: for a view that
/// shows a few fields of a large answer, without a serde decoder compiled for it.
pub async fn get_js(path: &str) -> ApiResult<wasm_bindgen::JsValue> {
    parse_js(&get_text(path).await?)
}

/// `GET path`'s JSON as text, unread: for an answer handed on whole (to the planner's worker).
pub async fn get_text(path: &str) -> ApiResult<String> {
    text_of(Request::get(path).send().await.map_err(network_error)?).await
}

/// A state-changing request whose answer the browser parses, as [`get_js`] reads it.
pub async fn send_js<B: Serialize>(
    method: Method,
    path: &str,
    body: Option<&B>,
) -> ApiResult<wasm_bindgen::JsValue> {
    parse_js(&text_of(send_raw(method, path, json_of(body)?.as_deref()).await?).await?)
}

/// A state-changing request whose body is JSON text as a person typed it (the server names
/// where it does not read), its answer parsed by the browser.
pub async fn send_text_js(
    method: Method,
    path: &str,
    json: &str,
) -> ApiResult<wasm_bindgen::JsValue> {
    parse_js(&text_of(send_raw(method, path, Some(json)).await?).await?)
}

/// A state-changing request with an optional JSON body, decoded as `T`.
pub async fn send<B: Serialize, T: DeserializeOwned>(
    method: Method,
    path: &str,
    body: Option<&B>,
) -> ApiResult<T> {
    read(&text_of(send_raw(method, path, json_of(body)?.as_deref()).await?).await?)
}

/// A state-changing request whose answer has no body (204).
pub async fn send_no_content<B: Serialize>(
    method: Method,
    path: &str,
    body: Option<&B>,
) -> ApiResult<()> {
    let response = send_raw(method, path, json_of(body)?.as_deref()).await?;
    if response.ok() {
        Ok(())
    } else {
        Err(error_of(response).await)
    }
}

// What follows is written once for every type the bundle reads or sends: only [`read`] and
// [`json_of`] are compiled for each.

/// A successful answer's body; an error's [`ApiError`].
async fn text_of(response: Response) -> ApiResult<String> {
    if !response.ok() {
        return Err(error_of(response).await);
    }
    response.text().await.map_err(|err| unexpected(&err))
}

/// An answer's JSON, decoded as `T`.
fn read<T: DeserializeOwned>(text: &str) -> ApiResult<T> {
    serde_json::from_str(text).map_err(|err| unexpected(&err))
}

fn parse_js(text: &str) -> ApiResult<wasm_bindgen::JsValue> {
    js_sys::JSON::parse(text).map_err(|_| unexpected(&"not JSON"))
}

/// A request's body as JSON text.
fn json_of<B: Serialize>(body: Option<&B>) -> ApiResult<Option<String>> {
    body.map(serde_json::to_string)
        .transpose()
        .map_err(|err| unexpected(&err))
}

/// A state-changing request carrying the session's CSRF token and `json`, if any.
async fn send_raw(method: Method, path: &str, json: Option<&str>) -> ApiResult<Response> {
    let builder = RequestBuilder::new(path)
        .method(method)
        .header("X-CSRF-Token", &csrf_token());
    let request = match json {
        Some(json) => builder
            .header("Content-Type", "application/json")
            .body(json),
        None => builder.build(),
    };
    request
        .map_err(|err| unexpected(&err))?
        .send()
        .await
        .map_err(network_error)
}

/// `GET /api/health`: its 503 carries a [`Health`] body too, so decode either.
pub async fn health() -> ApiResult<Health> {
    let response = Request::get("/api/health")
        .send()
        .await
        .map_err(network_error)?;
    if response.ok() || response.status() == 503 {
        let text = response.text().await.map_err(|err| unexpected(&err))?;
        return read(&text);
    }
    Err(error_of(response).await)
}

async fn error_of(response: Response) -> ApiError {
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    let error = match read::<ApiError>(&body) {
        Ok(err) => err,
        Err(_) => ApiError::new(
            ErrorCode::from_http_status(status),
            format!("the server answered {status} {}", response.status_text()),
        ),
    };
    // The session ended (expired, logged out elsewhere): back to the log-in page.
    if error.code == ErrorCode::Unauthenticated
        && !response.url().ends_with("/api/auth/login")
        && let Some(me) = session()
    {
        me.set(None);
    }
    error
}

fn network_error(err: gloo_net::Error) -> ApiError {
    ApiError::new(
        ErrorCode::Unavailable,
        format!("cannot reach the server: {err}"),
    )
}

fn unexpected(err: &dyn std::fmt::Display) -> ApiError {
    ApiError::new(
        ErrorCode::Internal,
        format!("unexpected answer from the server: {err}"),
    )
}
