//! `POST /v1/worlds/{world_id}/retrieve`: the request ([`request`]: one type that parses and
//! documents the body), the answer ([`response`]), and [`answer`], which MCP's `retrieve` tool
//! and the Dify endpoint call too.

pub mod request;
pub mod response;

use axum::Router;
use axum::extract::State;
use axum::routing::post;

use super::error::{ApiError, ErrorBody};
use super::extract::{ApiJson, ApiPath};
use crate::api::AppState;
use crate::domain::WorldId;
use crate::service::retrieval::Settings;

pub use request::{Entries, RetrieveRequest};
pub use response::RetrieveResponse;

/// Largest `/retrieve` body: room for the longest query taken
/// ([`crate::service::retrieval::MAX_QUERY_BYTES`]) escaped, and the settings. Bigger is 413
/// before anything is parsed.
pub const MAX_RETRIEVE_BODY_BYTES: usize = 4 * crate::service::retrieval::MAX_QUERY_BYTES;

pub fn router() -> Router<AppState> {
    Router::new().route(
        "/v1/worlds/{world_id}/retrieve",
        post(retrieve).layer(axum::extract::DefaultBodyLimit::max(MAX_RETRIEVE_BODY_BYTES)),
    )
}

/// Retrieve verified chunks for a query, with context text for a model.
#[utoipa::path(post, path = "/v1/worlds/{world_id}/retrieve", tag = "retrieval",
    params(("world_id" = Uuid, Path)), request_body = RetrieveRequest,
    responses(
        (status = 200, body = RetrieveResponse),
        (status = 400, description = "invalid_request, invalid_retrieval_settings (checked before the world is looked up) or empty_query", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found", body = ErrorBody),
        (status = 409, description = "no_eligible_provider_key", body = ErrorBody),
        (status = 413, description = "payload_too_large (a body over 256 KiB)", body = ErrorBody),
        (status = 422, description = "input_too_large (over the model's token limit, or longer than 64 KiB) or token_count_failed", body = ErrorBody),
        (status = 429, description = "provider_rate_limited, with details.retry_after_s", body = ErrorBody),
        (status = 502, description = "provider_error", body = ErrorBody),
        (status = 503, description = "store_unavailable or vector_store_unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn retrieve(
    State(state): State<AppState>,
    ApiPath(world_id): ApiPath<WorldId>,
    body: Result<ApiJson<Entries>, ApiError>,
) -> Result<axum::Json<RetrieveResponse>, ApiError> {
    let entries = match body {
        Ok(ApiJson(entries)) => entries,
        Err(err) if err.status == axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
            return Err(ApiError::payload_too_large(MAX_RETRIEVE_BODY_BYTES));
        }
        Err(err) => return Err(err),
    };
    let request = RetrieveRequest::parse(entries)?;
    answer(&state, world_id, &request).await.map(axum::Json)
}

/// Answers `request` for `world_id`, as `POST …/retrieve` does.
pub async fn answer(
    state: &AppState,
    world_id: WorldId,
    request: &RetrieveRequest,
) -> Result<RetrieveResponse, ApiError> {
    answer_with(state, world_id, &request.query, &request.settings()).await
}

/// Runs a retrieval of `query` with `settings` for `world_id` and times its phases into the
/// metrics (the Dify endpoint adds a filter of its own to a request's settings).
pub async fn answer_with(
    state: &AppState,
    world_id: WorldId,
    query: &str,
    settings: &Settings,
) -> Result<RetrieveResponse, ApiError> {
    let answer = state.retrieval.retrieve(world_id, query, settings).await?;
    let t = &answer.timing;
    for (phase, ms) in [
        ("embed", t.embed_ms),
        ("search", t.search_ms),
        ("verify", t.verify_ms),
        ("rerank", t.rerank_ms),
        ("total", t.total_ms),
    ] {
        (state.meters)
            .histogram("quarry_retrieval_phase_duration_seconds", &[("phase", phase)])
            .record(ms / 1000.0);
    }
    Ok(answer.into())
}
