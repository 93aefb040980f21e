//! The HTTP layer: routers per resource, the middleware stack and the OpenAPI document.
//!
//! Handlers extract input with the wrappers of [`extract`] (so every rejection is the
//! contract's JSON error), call one service method and convert the result into a DTO. The
//! middleware stack, outermost first: request id → tracing span → JSON errors for anything
//! the router itself answers (unknown route, wrong method, timeout, body limit) → request
//! timeout → body limit; `/v1/*` additionally requires a bearer token.

pub mod cluster;
mod de;
pub mod error;
pub mod extract;
pub mod health;
pub mod jobs;
pub mod keys;
pub mod maintenance;
pub mod mcp;
pub mod models;
pub mod openapi;
pub mod retrieve;
pub mod sources;
pub mod webhooks;
pub mod worlds;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderName, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use self::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// Bearer tokens accepted on `/v1/*`, kept as digests so comparison time does not depend on
/// where a guess first differs.
#[derive(Clone)]
pub struct Auth {
    digests: Arc<Vec<[u8; 32]>>,
    disabled: bool,
}

/// The digest a token is kept and compared as.
pub fn token_digest(token: &SecretString) -> [u8; 32] {
    Sha256::digest(token.expose_secret().as_bytes()).into()
}

/// Whether `presented` is the token whose digest is `known`, in time independent of where they
/// first differ.
fn digest_matches(known: &[u8; 32], presented: &str) -> bool {
    let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
    known.iter().zip(digest.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// The bearer token of a request, if it has one.
fn bearer(req: &Request) -> Option<&str> {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
}

impl Auth {
    pub fn new(tokens: &[SecretString], disabled: bool) -> Self {
        let digests = tokens.iter().map(token_digest).collect();
        Self {
            digests: Arc::new(digests),
            disabled,
        }
    }

    fn accepts(&self, presented: &str) -> bool {
        (self.digests.iter()).fold(false, |found, known| found | digest_matches(known, presented))
    }
}

/// Limits applied to every request.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub request_timeout: Duration,
}

/// The whole router with its middleware.
pub fn router(state: AppState, auth: Auth, limits: Limits) -> Router {
    let v1 = Router::new()
        .merge(worlds::router())
        .merge(models::router())
        .merge(keys::router())
        .merge(sources::router())
        .merge(jobs::router())
        .merge(retrieve::router())
        .merge(maintenance::router())
        .merge(cluster::router())
        .merge(webhooks::router())
        .nest_service("/mcp", mcp::service(state.clone()))
        .route_layer(middleware::from_fn_with_state(auth, require_bearer));
    let request_id = HeaderName::from_static("x-request-id");
    let meters = state.meters.clone();
    let metrics_token = state.metrics_token.clone();
    Router::new()
        .merge(v1)
        .merge(health::router())
        .merge(keys::metrics_router().route_layer(middleware::from_fn_with_state(metrics_token, require_metrics_token)))
        .with_state(state)
        .merge(openapi::router())
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(RequestBodyLimitLayer::new(limits.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            limits.request_timeout,
        ))
        .layer(middleware::from_fn_with_state(limits, json_errors))
        .layer(middleware::from_fn_with_state(meters, http_metrics))
        .layer(middleware::from_fn(error::log_errors))
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request<Body>| {
            let id = req
                .headers()
                .get("x-request-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-");
            tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
        }))
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
}

/// 401 `unauthorized`, with the `WWW-Authenticate: Bearer` challenge.
fn unauthorized() -> Response {
    let mut response = ApiError::unauthorized().into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
    response
}

/// With `auth.metrics_token` set, `/metrics` answers only requests bearing it.
async fn require_metrics_token(State(token): State<Option<Arc<[u8; 32]>>>, req: Request, next: Next) -> Response {
    match (&token, bearer(&req)) {
        (None, _) => next.run(req).await,
        (Some(known), Some(presented)) if digest_matches(known, presented) => next.run(req).await,
        _ => unauthorized(),
    }
}

/// Counts every request by method, route template (`MatchedPath`; `unmatched` for none) and
/// final status, and records its duration. Labels come only from fixed sets — the standard
/// methods ([`method_label`]) and the router's own templates — so no client, authenticated or
/// not, can add a series by what it sends.
async fn http_metrics(State(meters): State<crate::meters::Metrics>, req: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let method = method_label(req.method());
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    meters
        .counter(
            "quarry_http_requests_total",
            &[("method", method), ("route", &route), ("status", &status)],
        )
        .increment(1);
    meters.observe(
        "quarry_http_request_duration_seconds",
        &[("method", method), ("route", &route)],
        started.elapsed(),
    );
    response
}

/// A request's method as a metric label: one of the nine standard methods, else `_OTHER` (as
/// OpenTelemetry's HTTP conventions record unknown methods), so invented methods cannot grow
/// the exposition.
pub fn method_label(method: &axum::http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        "TRACE" => "TRACE",
        "CONNECT" => "CONNECT",
        _ => "_OTHER",
    }
}

/// Rejects `/v1/*` requests without an accepted `Authorization: Bearer` token.
async fn require_bearer(State(auth): State<Auth>, req: Request, next: Next) -> Response {
    if auth.disabled {
        return next.run(req).await;
    }
    match bearer(&req) {
        Some(token) if auth.accepts(token) => next.run(req).await,
        _ => unauthorized(),
    }
}

/// Rewrites error responses that did not come from our handlers (axum's router, the timeout
/// and body-limit layers answer in plain text or with an empty body) into the contract's JSON.
async fn json_errors(State(limits): State<Limits>, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let response = next.run(req).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let error = match status {
        StatusCode::NOT_FOUND => ApiError::new(ErrorCode::NotFound, format!("no route for {method} {path}")),
        StatusCode::METHOD_NOT_ALLOWED => ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("{method} is not allowed on {path}"),
        ),
        StatusCode::REQUEST_TIMEOUT => ApiError::new(ErrorCode::RequestTimeout, "the request took too long"),
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::payload_too_large(limits.max_body_bytes),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            ApiError::new(ErrorCode::UnsupportedMediaType, "unsupported content type")
        }
        other if other.is_client_error() => {
            ApiError::new(ErrorCode::InvalidRequest, "the request was rejected").with_status(other)
        }
        other => ApiError::new(ErrorCode::InternalError, "internal error").with_status(other),
    };
    let mut rebuilt = error.into_response();
    for (name, value) in response.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rebuilt.headers_mut().insert(name.clone(), value.clone());
        }
    }
    rebuilt
}
