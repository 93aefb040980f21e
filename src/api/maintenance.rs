//! `/v1/worlds/{world_id}/repair` (reconcile a world's manifests with its vector points) and
//! `/v1/worlds/{world_id}/reingest` (rebuild it under a new profile).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::eval_runs::EvalRunSetting;
use super::extract::{ApiJson, ApiPath};
use super::jobs::{GateMetricDto, JobDto, with_gate};
use super::worlds::{ChunkingRequest, EmbeddingRequest};
use crate::api::AppState;
use crate::domain::{EvalSetId, JobId, WorldId};
use crate::service::evals::gate::GateRequest;
use crate::service::worlds::Reingest;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/worlds/{world_id}/repair", post(repair_world))
        .route("/v1/worlds/{world_id}/reingest", post(reingest_world))
        .route(
            "/v1/worlds/{world_id}/reingest/{job_id}/promote",
            post(promote_reingest),
        )
        .route(
            "/v1/worlds/{world_id}/reingest/{job_id}/discard",
            post(discard_reingest),
        )
}

/// A re-ingest: the new embedding and/or chunking profile. What is absent stays as it is.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReingestRequest {
    #[serde(default, deserialize_with = "super::de::object")]
    pub embedding: Option<EmbeddingRequest>,
    #[serde(default, deserialize_with = "super::de::object")]
    pub chunking: Option<ChunkingRequest>,
    /// Switch only if a test set scores no worse on the new run than on the run served.
    /// Absent: the world switches as soon as the new run is embedded.
    #[serde(default, deserialize_with = "super::de::object")]
    pub gate: Option<GateRequestDto>,
}

/// A re-ingest's gate: when the new run is embedded, test set `eval_id` is scored on it and
/// on the run served (one setting, one budget), and the world switches only if `metric` did
/// not drop by more than `tolerance`. Otherwise the job is `held` and the world keeps its run
/// until `POST /v1/worlds/{world_id}/reingest/{job_id}/promote` or `/discard`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ReingestGateRequest)]
pub struct GateRequestDto {
    /// A test set of the world (`/v1/worlds/{world_id}/evals`). Its items are copied when the
    /// re-ingest is asked for.
    pub eval_id: Uuid,
    /// One retrieval setting, as a run's (`EvalRunSetting`). Absent: the defaults.
    #[serde(default)]
    #[schema(value_type = Option<EvalRunSetting>)]
    pub settings: Option<Value>,
    /// The context budget, in tokens. Absent: the server's default
    /// (`retrieval.max_context_tokens`).
    #[serde(default, deserialize_with = "super::de::integer")]
    #[schema(example = 1024, minimum = 1, maximum = 1048576)]
    pub budget: Option<i64>,
    pub metric: GateMetricDto,
    /// How far the metric (0 to 1) may drop, 0 to 1. Absent: 0 (it must not drop).
    #[schema(minimum = 0.0, maximum = 1.0, example = 0.02)]
    pub tolerance: Option<f64>,
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
        (status = 400, description = "invalid_request, invalid_embedding_profile or invalid_chunking_profile; for a gate, invalid_request or invalid_retrieval_settings naming `gate.<field>`", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found, or eval_not_found for a gate's test set", body = ErrorBody),
        (status = 409, description = "no_eligible_provider_key, job_state_conflict when a re-ingest is under way, or eval_limit_reached when the world keeps too many evaluation runs for a gate's two", body = ErrorBody),
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
    // The gate is checked (and its runs prepared) before anything is written.
    let gate = match req.gate {
        Some(gate) => Some(
            state
                .evals
                .plan_gate(
                    world_id,
                    GateRequest {
                        eval_id: EvalSetId(gate.eval_id),
                        settings: gate.settings,
                        // Out of range: the service names `gate.budget`.
                        budget: gate.budget.map(|b| u32::try_from(b).unwrap_or(0)),
                        metric: gate.metric.into(),
                        tolerance: gate.tolerance,
                    },
                )
                .await?,
        ),
        None => None,
    };
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
                gate,
            },
        )
        .await?;
    Ok((StatusCode::ACCEPTED, axum::Json(with_gate(&state, job).await?)))
}

/// Switch the world to a gated re-ingest's run whatever its evaluation says: at once when the
/// run is embedded (`completed` in the answer), else as soon as it is. The gate becomes
/// `promoted` and its evaluation runs not yet ended are cancelled.
#[utoipa::path(post, path = "/v1/worlds/{world_id}/reingest/{job_id}/promote", tag = "jobs",
    params(("world_id" = Uuid, Path), ("job_id" = Uuid, Path)),
    responses(
        (status = 200, body = JobDto),
        (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found or job_not_found (no re-ingest of this world)", body = ErrorBody),
        (status = 409, description = "job_state_conflict: the re-ingest has no gate, or its gate was decided (or the job ended)", body = ErrorBody),
        (status = 503, description = "store_unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn promote_reingest(
    State(state): State<AppState>,
    ApiPath((world_id, job_id)): ApiPath<(WorldId, JobId)>,
) -> Result<axum::Json<JobDto>, ApiError> {
    let job = state.evals.promote(world_id, job_id).await?;
    Ok(axum::Json(with_gate(&state, job).await?))
}

/// Abandon a gated re-ingest: the job is cancelled and its run removed; the world keeps
/// serving its run. The gate becomes `discarded`.
#[utoipa::path(post, path = "/v1/worlds/{world_id}/reingest/{job_id}/discard", tag = "jobs",
    params(("world_id" = Uuid, Path), ("job_id" = Uuid, Path)),
    responses(
        (status = 200, body = JobDto),
        (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found or job_not_found (no re-ingest of this world)", body = ErrorBody),
        (status = 409, description = "job_state_conflict: the re-ingest has no gate, or its gate was decided (or the job ended)", body = ErrorBody),
        (status = 503, description = "store_unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn discard_reingest(
    State(state): State<AppState>,
    ApiPath((world_id, job_id)): ApiPath<(WorldId, JobId)>,
) -> Result<axum::Json<JobDto>, ApiError> {
    let job = state.evals.discard(world_id, job_id).await?;
    Ok(axum::Json(with_gate(&state, job).await?))
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
