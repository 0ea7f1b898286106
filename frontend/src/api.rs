//! The one place that talks to the backend: every non-2xx becomes the shared [`ApiError`].

use gloo_net::http::{Request, Response};
use serde::de::DeserializeOwned;
use shared::{ApiError, ErrorCode, health::Health};

pub type ApiResult<T> = Result<T, ApiError>;

/// `GET path`, decoded as `T`.
pub async fn get<T: DeserializeOwned>(path: &str) -> ApiResult<T> {
    let response = Request::get(path).send().await.map_err(network_error)?;
    if !response.ok() {
        return Err(error_of(response).await);
    }
    response.json().await.map_err(|err| decode_error(&err))
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

async fn error_of(response: Response) -> ApiError {
    let status = response.status();
    match response.json::<ApiError>().await {
        Ok(err) => err,
        Err(_) => ApiError::new(
            ErrorCode::from_http_status(status),
            format!("the server answered {status} {}", response.status_text()),
        ),
    }
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
