//! Application state and the router with its layers (serving it: `server`).

use std::{path::Path, sync::Arc};

use axum::{
    Router,
    extract::{DefaultBodyLimit, Request},
    handler::Handler,
    http::{HeaderName, HeaderValue, Method, StatusCode, Uri, header},
    middleware::{self, Next},
    response::{Html, IntoResponse, Response},
    routing::{MethodFilter, on},
};
use sqlx::PgPool;
use tower_http::{
    compression::CompressionLayer,
    limit::RequestBodyLimitLayer,
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    services::ServeDir,
    set_header::SetResponseHeaderLayer,
    timeout::TimeoutLayer,
    trace::TraceLayer,
};

use crate::{
    access::{self, Access},
    accounts,
    auth::{self, settings::AuthSettings},
    cluster::{self, Cluster},
    config::HttpSettings,
    error, fleet, health, packing, planning, quota,
    usage::Usage,
    work::{Deadline, Work},
};

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub auth: Arc<AuthSettings>,
    /// The bounded pools that heavy work runs on.
    pub work: Work,
    /// Where approved quota goes (a cluster, a GitOps directory, or nowhere).
    pub cluster: Arc<Cluster>,
    /// Where GPU use is read from (a Prometheus, or nowhere).
    pub usage: Arc<Usage>,
    /// The live view's broadcast of newly ingested minutes.
    pub live: Arc<crate::usage::live::Live>,
    /// The month's statement budgets read, made once for many requests.
    pub month_to_date: Arc<crate::chargeback::budget::MonthToDate>,
}

impl AppState {
    /// State with the default auth settings (sessions only, no auth proxy).
    pub fn new(pool: PgPool) -> Self {
        Self::with_auth(pool, AuthSettings::default())
    }

    pub fn with_auth(pool: PgPool, auth: AuthSettings) -> Self {
        Self::with_work(pool, auth, Work::for_this_machine())
    }

    pub fn with_work(pool: PgPool, auth: AuthSettings, work: Work) -> Self {
        Self {
            pool,
            auth: Arc::new(auth),
            work,
            cluster: Arc::new(Cluster::off()),
            usage: Arc::new(Usage::off()),
            live: Arc::new(crate::usage::live::Live::default()),
            month_to_date: Arc::default(),
        }
    }

    pub fn with_cluster(self, cluster: Arc<Cluster>) -> Self {
        Self { cluster, ..self }
    }

    pub fn with_usage(self, usage: Arc<Usage>) -> Self {
        Self { usage, ..self }
    }

    pub fn with_live(self, live: Arc<crate::usage::live::Live>) -> Self {
        Self { live, ..self }
    }
}

/// One `/api` route and what it needs from the caller.
#[derive(Debug, Clone)]
pub struct Rule {
    pub method: Method,
    /// Relative to `/api`, with axum's `{param}` placeholders.
    pub path: &'static str,
    pub access: Access,
}

/// The `/api` router, built so that every route carries its [`Access`] rule: the only way to
/// add a route is [`Api::route`], which installs the check and records the rule for the
/// authorisation tests.
#[derive(Default)]
pub struct Api {
    router: Router<AppState>,
    rules: Vec<Rule>,
}

impl Api {
    pub fn route<H, T>(
        mut self,
        method: Method,
        path: &'static str,
        access: Access,
        handler: H,
    ) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        let filter = MethodFilter::try_from(method.clone())
            .unwrap_or_else(|_| panic!("{method} {path}: not a routable method"));
        let check = middleware::from_fn(move |request: Request, next: Next| {
            access::authorize(access, request, next)
        });
        self.router = self
            .router
            .route(path, on(filter, handler).route_layer(check));
        self.rules.push(Rule {
            method,
            path,
            access,
        });
        self
    }

    pub fn merge(mut self, other: Api) -> Self {
        self.router = self.router.merge(other.router);
        self.rules.extend(other.rules);
        self
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }
}

/// Every `/api` route of the product.
pub fn api() -> Api {
    Api::default()
        .merge(health::api())
        .merge(auth::api())
        .merge(accounts::api())
        .merge(fleet::api())
        .merge(packing::api())
        .merge(planning::api())
        .merge(quota::api())
        .merge(cluster::api())
        .merge(crate::chargeback::api())
        .merge(crate::usage::api())
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The whole HTTP surface: `/api/*` and the console's static files.
pub fn app(state: AppState, settings: &HttpSettings) -> Router {
    let api = api()
        .router
        .fallback(error::api_not_found)
        .layer(middleware::from_fn(refuse_nul_in_paths))
        // answers name people and carry the CSRF token: never kept by a cache
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::identify,
        ))
        .with_state(state.clone());

    let index = Arc::new(settings.public_dir.join("index.html"));
    let spa = move |uri: Uri| {
        let index = Arc::clone(&index);
        async move { spa_fallback(&uri, &index).await }
    };
    // The built pkg/ keeps the same file names between builds: make browsers revalidate.
    let assets = Router::new()
        .fallback_service(
            ServeDir::new(&settings.public_dir)
                .precompressed_gzip()
                .fallback(axum::handler::HandlerWithoutStateExt::into_service(spa)),
        )
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache"),
        ));

    let timeout = settings.request_timeout;
    let deadline = middleware::from_fn(move |mut request: Request, next: Next| {
        request.extensions_mut().insert(Deadline::after(timeout));
        next.run(request)
    });
    Router::new()
        .nest("/api", api)
        .merge(assets)
        .layer(deadline)
        .layer(DefaultBodyLimit::max(settings.body_limit_bytes))
        .layer(RequestBodyLimitLayer::new(settings.body_limit_bytes))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, settings.request_timeout))
        .layer(middleware::from_fn(error::json_errors))
        .layer(CompressionLayer::new())
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(TraceLayer::new_for_http().make_span_with(|request: &Request| {
            let header = |name| request.headers().get(name).and_then(|v: &HeaderValue| v.to_str().ok());
            let (id, client_id) = (header(REQUEST_ID), header(CLIENT_REQUEST_ID));
            tracing::info_span!("http", method = %request.method(), path = %request.uri().path(), id, client_id)
        }))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .layer(middleware::from_fn(set_aside_client_request_id))
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ))
        .layer(middleware::from_fn_with_state(state, strict_transport))
}

/// What the console may load: its own scripts and the WASM they compile (no inline script),
/// its own styles plus the inline ones plotly.js sets on its charts, images from itself or
/// data URLs, requests to its own API; never framed, no plugins, forms only to itself.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// A client's own request id, kept for the log; ours is always generated by the server.
const CLIENT_REQUEST_ID: HeaderName = HeaderName::from_static("x-client-request-id");

/// Moves a client's `X-Request-Id` aside, so the id we log and answer with is one we made.
async fn set_aside_client_request_id(mut request: Request, next: middleware::Next) -> Response {
    if let Some(theirs) = request.headers_mut().remove(REQUEST_ID) {
        request.headers_mut().insert(CLIENT_REQUEST_ID, theirs);
    }
    next.run(request).await
}

/// Over https (TLS here, or a trusted proxy's `X-Forwarded-Proto`: [`auth::scheme`]), every
/// response — the API's, the console's files, errors — tells browsers to use https only for a
/// year (HSTS).
async fn strict_transport(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: Request,
    next: middleware::Next,
) -> Response {
    let https = auth::scheme(&state, &request) == "https";
    let mut response = next.run(request).await;
    if https {
        response.headers_mut().insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    response
}

/// A path segment holding a NUL character (`%00`) names nothing that can exist: PostgreSQL
/// cannot store one. Such a request is a 404 before any handler or SQL sees it.
async fn refuse_nul_in_paths(request: Request, next: middleware::Next) -> Response {
    if request.uri().path().to_ascii_lowercase().contains("%00") {
        return error::Error::NotFound.into_response();
    }
    next.run(request).await
}

/// Client-side routes (`/quotas`, `/plan/...`) get index.html; a missing file (`/pkg/x.js`)
/// and anything under `/api` that the API router did not take stay 404, so a broken build or a
/// wrong API path is never answered with a page.
async fn spa_fallback(uri: &Uri, index: &Path) -> Response {
    let path = uri.path();
    let last = path.rsplit('/').next().unwrap_or_default();
    if last.contains('.') || path == "/api" || path.starts_with("/api/") {
        return StatusCode::NOT_FOUND.into_response();
    }
    match tokio::fs::read_to_string(index).await {
        Ok(html) => Html(html).into_response(),
        Err(err) => {
            tracing::error!(path = %index.display(), %err, "index.html is missing: build the frontend");
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
    }
}
