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
    let response = Request::get(path).send().await.map_err(network_error)?;
    decode(response).await
}

/// `GET path`, parsed by the browser's own `JSON.parse` and read with `js_sys`: for a view that
/// shows a few fields of a large answer, without a serde decoder compiled for it.
pub async fn get_js(path: &str) -> ApiResult<wasm_bindgen::JsValue> {
    let response = Request::get(path).send().await.map_err(network_error)?;
    parse_js(response).await
}

/// A state-changing request whose answer the browser parses, as [`get_js`] reads it.
pub async fn send_js<B: Serialize>(
    method: Method,
    path: &str,
    body: Option<&B>,
) -> ApiResult<wasm_bindgen::JsValue> {
    parse_js(send_raw(method, path, body).await?).await
}

async fn parse_js(response: Response) -> ApiResult<wasm_bindgen::JsValue> {
    if !response.ok() {
        return Err(error_of(response).await);
    }
    let text = response.text().await.map_err(|err| decode_error(&err))?;
    js_sys::JSON::parse(&text).map_err(|_| {
        ApiError::new(
            ErrorCode::Internal,
            "unexpected answer from the server: not JSON",
        )
    })
}

/// A state-changing request whose body is JSON text as a person typed it (the server names
/// where it does not read), its answer parsed by the browser.
pub async fn send_text_js(
    method: Method,
    path: &str,
    json: &str,
) -> ApiResult<wasm_bindgen::JsValue> {
    let request = RequestBuilder::new(path)
        .method(method)
        .header("X-CSRF-Token", &csrf_token())
        .header("Content-Type", "application/json")
        .body(json)
        .map_err(|err| decode_error(&err))?;
    parse_js(request.send().await.map_err(network_error)?).await
}

/// A state-changing request with an optional JSON body, decoded as `T`.
pub async fn send<B: Serialize, T: DeserializeOwned>(
    method: Method,
    path: &str,
    body: Option<&B>,
) -> ApiResult<T> {
    decode(send_raw(method, path, body).await?).await
}

/// A state-changing request whose answer has no body (204).
pub async fn send_no_content<B: Serialize>(
    method: Method,
    path: &str,
    body: Option<&B>,
) -> ApiResult<()> {
    let response = send_raw(method, path, body).await?;
    if response.ok() {
        Ok(())
    } else {
        Err(error_of(response).await)
    }
}

async fn send_raw<B: Serialize>(
    method: Method,
    path: &str,
    body: Option<&B>,
) -> ApiResult<Response> {
    let builder = RequestBuilder::new(path)
        .method(method)
        .header("X-CSRF-Token", &csrf_token());
    let request = match body {
        Some(body) => builder.json(body).map_err(|err| decode_error(&err))?,
        None => builder.build().map_err(|err| decode_error(&err))?,
    };
    request.send().await.map_err(network_error)
}

/// `GET /api/health`: its 503 carries a [`Health`] body too, so decode either.
pub async fn health() -> ApiResult<Health> {
    let response = Request::get("/api/health")
        .send()
        .await
        .map_err(network_error)?;
    if response.ok() || response.status() == 503 {
        return response.json().await.map_err(|err| decode_error(&err));
    }
    Err(error_of(response).await)
}

async fn decode<T: DeserializeOwned>(response: Response) -> ApiResult<T> {
    if !response.ok() {
        return Err(error_of(response).await);
    }
    response.json().await.map_err(|err| decode_error(&err))
}

async fn error_of(response: Response) -> ApiError {
    let status = response.status();
    let error = match response.json::<ApiError>().await {
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

fn decode_error(err: &gloo_net::Error) -> ApiError {
    ApiError::new(
        ErrorCode::Internal,
        format!("unexpected answer from the server: {err}"),
    )
}
