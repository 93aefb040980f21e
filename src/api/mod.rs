//! The HTTP layer: routers per resource, the middleware stack and the OpenAPI document.
//!
//! Handlers extract input with the wrappers of [`extract`] (so every rejection is the
//! contract's JSON error), call one service method and convert the result into a DTO. The
//! middleware stack, outermost first: request id → tracing span → error logging → HTTP metrics
//! → JSON errors for anything the router itself answers (unknown route, wrong method, timeout,
//! body limit) → request timeout → body limit; `/v1/*` and `/mcp` additionally require a
//! bearer token (the console's pages under `/console/` need none: they hold no data, and every
//! call they make carries the user's token). `docs/DESIGN.md`, "How a request flows", follows
//! an upload, a retrieval and an MCP call through these layers.

pub mod audit;
pub mod cluster;
pub mod console;
mod de;
pub mod dify;
pub mod error;
pub mod eval_runs;
pub mod evals;
pub mod extract;
pub mod health;
pub mod jobs;
pub mod keys;
pub mod maintenance;
pub mod mcp;
pub mod metrics;
pub mod models;
pub mod openapi;
pub mod retrieve;
pub mod scopes;
pub mod sources;
mod state;
pub mod tokens;
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
pub use self::state::AppState;
use crate::service::tokens::Principal;

/// Who may call `/v1/*`: the bootstrap tokens of `auth.tokens` (kept as digests so comparison
/// time does not depend on where a guess first differs; every scope, every world), and the
/// tokens managed through `/v1/tokens`.
#[derive(Clone)]
pub struct Auth {
    digests: Arc<Vec<[u8; 32]>>,
    disabled: bool,
    tokens: Arc<crate::service::tokens::TokenService>,
    store: Arc<dyn crate::store::Store>,
    audit: Arc<crate::service::audit::AuditLog>,
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
    pub fn new(
        tokens: &[SecretString],
        disabled: bool,
        managed: Arc<crate::service::tokens::TokenService>,
        store: Arc<dyn crate::store::Store>,
        audit: Arc<crate::service::audit::AuditLog>,
    ) -> Self {
        let digests = tokens.iter().map(token_digest).collect();
        Self {
            digests: Arc::new(digests),
            disabled,
            tokens: managed,
            store,
            audit,
        }
    }

    /// Who presents `bearer`: a bootstrap token, a managed one that is valid now, or nobody.
    async fn principal(&self, bearer: Option<&str>) -> Result<Option<Principal>, ApiError> {
        if self.disabled {
            return Ok(Some(Principal::Bootstrap));
        }
        let Some(presented) = bearer else {
            return Ok(None);
        };
        if self.accepts(presented) {
            return Ok(Some(Principal::Bootstrap));
        }
        Ok(self.tokens.verify(presented).await?.map(Principal::Token))
    }

    /// The world a request's path names: `{world_id}`, or the world of `{job_id}` (with the
    /// error a missing job gets). `None` when it names neither, or one that does not parse
    /// (the handler answers that).
    async fn world_of(&self, req: &mut Request) -> Result<Option<(crate::domain::WorldId, ErrorCode)>, ApiError> {
        use axum::RequestExt as _;
        let Ok(params) = req.extract_parts::<axum::extract::RawPathParams>().await else {
            return Ok(None);
        };
        let param = |name: &str| {
            params
                .iter()
                .find(|(key, _)| *key == name)
                .and_then(|(_, value)| uuid::Uuid::try_parse(value).ok())
        };
        if let Some(world) = param("world_id") {
            return Ok(Some((crate::domain::WorldId(world), ErrorCode::WorldNotFound)));
        }
        if let Some(job) = param("job_id") {
            let job = self
                .store
                .get_job(crate::domain::JobId(job))
                .await
                .map_err(crate::service::ServiceError::from)?;
            return Ok(job.map(|job| (job.world_id, ErrorCode::JobNotFound)));
        }
        Ok(None)
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
        .merge(evals::router())
        .merge(eval_runs::router())
        .merge(tokens::router())
        .merge(audit::router())
        .nest_service("/mcp", mcp::service(state.clone()))
        .route_layer(middleware::from_fn_with_state(auth.clone(), require_bearer));
    let dify = dify::router(state.clone(), auth);
    let request_id = HeaderName::from_static("x-request-id");
    let meters = state.meters.clone();
    let metrics_token = (state.metrics_token.clone(), state.tokens.clone());
    Router::new()
        .merge(v1)
        .merge(health::router())
        .merge(metrics::router().route_layer(middleware::from_fn_with_state(metrics_token, require_metrics_token)))
        .with_state(state)
        .merge(dify)
        .merge(openapi::router())
        .merge(console::router())
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
            let span =
                tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id);
            // A caller's W3C trace context (`traceparent`) makes this request part of its trace.
            crate::telemetry::continue_trace(&span, req.headers());
            span
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

/// Who may scrape `/metrics`: anyone while `auth.metrics_token` is unset; else that token, or a
/// managed token with the `metrics` scope.
type MetricsAuth = (Option<Arc<[u8; 32]>>, Arc<crate::service::tokens::TokenService>);

/// With `auth.metrics_token` set, `/metrics` answers only requests bearing it or a managed token
/// with the `metrics` scope.
async fn require_metrics_token(State((token, tokens)): State<MetricsAuth>, req: Request, next: Next) -> Response {
    let Some(known) = &token else {
        return next.run(req).await;
    };
    let Some(presented) = bearer(&req) else {
        return unauthorized();
    };
    if digest_matches(known, presented) {
        return next.run(req).await;
    }
    match tokens.verify(presented).await {
        Ok(Some(managed)) if managed.grants(crate::domain::Scope::Metrics) => next.run(req).await,
        Ok(Some(_)) => ApiError::insufficient_scope(
            crate::domain::Scope::Metrics,
            "this route needs a token with the `metrics` scope",
        )
        .into_response(),
        Ok(None) => unauthorized(),
        Err(err) => ApiError::from(err).into_response(),
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

/// Rejects `/v1/*` requests without an accepted `Authorization: Bearer` token (401), or whose
/// token lacks the route's scope or reaches only some worlds where the route concerns them all
/// (403 `insufficient_scope`), or another world than the path's (404, as a missing world or
/// job); hands the handlers the [`Principal`].
async fn require_bearer(State(auth): State<Auth>, mut req: Request, next: Next) -> Response {
    let principal = match auth.principal(bearer(&req)).await {
        Ok(Some(principal)) => principal,
        Ok(None) => return unauthorized(),
        Err(err) => return err.into_response(),
    };
    let template = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let (scope, reach) = scopes::needed(req.method(), &template);
    if !principal.grants(scope) {
        let message = format!("this route needs a token with the `{}` scope", scope.as_str());
        return ApiError::insufficient_scope(scope, message).into_response();
    }
    match reach {
        scopes::Reach::Global if !principal.sees_every_world() => {
            let message = "this route concerns every world; the token reaches only some";
            return ApiError::insufficient_scope(scope, message).into_response();
        }
        // Only a token limited to some worlds needs the path's world (a job's is a store read).
        scopes::Reach::World if !principal.sees_every_world() => match auth.world_of(&mut req).await {
            Ok(Some((world, missing))) if !principal.sees(world) => {
                let message = if missing == ErrorCode::JobNotFound {
                    "job not found"
                } else {
                    "world not found"
                };
                return ApiError::new(missing, message).into_response();
            }
            Ok(_) => {}
            Err(err) => return err.into_response(),
        },
        _ => {}
    }
    if let Principal::Token(token) = &principal
        && let Err(wait) = auth.tokens.admit(token)
    {
        return ApiError::token_rate_limited(wait).into_response();
    }
    let Some(action) = scopes::audited(req.method(), &template) else {
        req.extensions_mut().insert(principal);
        return next.run(req).await;
    };
    let address = crate::serve::peer(req.extensions()).map(|peer| peer.ip().to_string());
    let named = path_target(&mut req).await;
    let actor = crate::service::audit::AuditLog::actor(&principal);
    req.extensions_mut().insert(principal);
    let response = next.run(req).await;
    if response.status().is_success() {
        let made = response
            .extensions()
            .get::<audit::AuditTarget>()
            .map(|t| t.0.to_string());
        let event = crate::domain::NewAuditEvent {
            at: crate::domain::now(),
            actor,
            action,
            target: made.or(named),
            address,
        };
        // In a task of its own: a client hanging up now cannot cancel the entry.
        let log = auth.audit.clone();
        let _ = tokio::spawn(async move { log.record(event).await }).await;
    }
    response
}

/// The id an audited route's path names last (`/v1/tokens/{token_id}/rotate`: the token's).
async fn path_target(req: &mut Request) -> Option<String> {
    use axum::RequestExt as _;
    let params = req.extract_parts::<axum::extract::RawPathParams>().await.ok()?;
    params.iter().last().map(|(_, value)| value.to_owned())
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
