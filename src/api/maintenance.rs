//! `/v1/worlds/{world_id}/repair` (reconcile a world's manifests with its vector points) and
//! `/v1/worlds/{world_id}/reingest` (rebuild it under a new profile).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use serde::Deserialize;
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use super::extract::{ApiJson, ApiPath};
use super::jobs::JobDto;
use super::worlds::{ChunkingRequest, EmbeddingRequest};
use crate::api::AppState;
use crate::domain::WorldId;
use crate::service::worlds::Reingest;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/worlds/{world_id}/repair", post(repair_world))
        .route("/v1/worlds/{world_id}/reingest", post(reingest_world))
}

/// A re-ingest: the new embedding and/or chunking profile. What is absent stays as it is.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReingestRequest {
    #[serde(default, deserialize_with = "super::de::object")]
    pub embedding: Option<EmbeddingRequest>,
    #[serde(default, deserialize_with = "super::de::object")]
    pub chunking: Option<ChunkingRequest>,
}

/// Rebuild the world from its stored sources under a new embedding and/or chunking profile —
/// the only way to change a locked profile. A new run is chunked and embedded beside the
/// active one while retrieval keeps serving the active one; when every chunk is embedded the
/// world switches to the new run and profile in one step and the old run's points and rows are
/// deleted. A run with failed chunks is abandoned (the job fails, the world is unchanged);
/// cancelling the job abandons it too. One re-ingest at a time per world. The answer comes at
/// once with the job `queued`: the sources are chunked in the background, then it runs.
#[utoipa::path(post, path = "/v1/worlds/{world_id}/reingest", tag = "jobs",
    params(("world_id" = Uuid, Path)), request_body = ReingestRequest,
    responses(
        (status = 202, body = JobDto),
        (status = 400, description = "invalid_request, invalid_embedding_profile or invalid_chunking_profile", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found", body = ErrorBody),
        (status = 409, description = "no_eligible_provider_key, or job_state_conflict when a re-ingest is under way", body = ErrorBody),
        (status = 503, description = "store_unavailable or vector_store_unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn reingest_world(
    State(state): State<AppState>,
    ApiPath(world_id): ApiPath<WorldId>,
    ApiJson(req): ApiJson<ReingestRequest>,
) -> Result<(StatusCode, axum::Json<JobDto>), ApiError> {
    let chunking = req.chunking.unwrap_or(ChunkingRequest {
        max_tokens: None,
        overlap_tokens: None,
        parent_max_tokens: None,
        context_prefix: None,
    });
    let job = state
        .worlds
        .reingest(
            world_id,
            Reingest {
                embedding: req
                    .embedding
                    .map(|e| super::worlds::parse_profile(e.provider, e.model, e.dimensions))
                    .transpose()?,
                max_tokens: chunking.max_tokens,
                overlap_tokens: chunking.overlap_tokens,
                parent_max_tokens: chunking.parent_max_tokens,
                context_prefix: chunking.context_prefix,
            },
        )
        .await?;
    Ok((StatusCode::ACCEPTED, axum::Json(job.into())))
}

/// Start a `repair` job: a lost collection is created again, points without a chunk are
/// deleted, stale points are deleted and their chunks embedded again, embedded chunks without a
/// point get it back from the vector the store kept (no provider call; chunks embedded before
/// vectors were kept are embedded again), and pending chunks whose point is already right are
/// marked embedded without a provider call. The reconciliation runs in the background; follow
/// it with `GET /v1/jobs/{job_id}` or its events (its `progress` event counts what it found,
/// `points_restored` among them).
#[utoipa::path(post, path = "/v1/worlds/{world_id}/repair", tag = "jobs",
    params(("world_id" = Uuid, Path)),
    responses(
        (status = 202, body = JobDto),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found", body = ErrorBody),
        (status = 503, description = "store_unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn repair_world(
    State(state): State<AppState>,
    ApiPath(world_id): ApiPath<WorldId>,
) -> Result<(StatusCode, axum::Json<JobDto>), ApiError> {
    let job = state.repair.start(world_id).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(job.into())))
}
