//! `/v1/worlds/{world_id}/repair`: reconcile a world's manifests with its vector points.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::extract::ApiPath;
use super::jobs::JobDto;
use crate::domain::WorldId;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/worlds/{world_id}/repair", post(repair_world))
}

/// Start a `repair` job: points without a chunk are deleted, stale points are deleted and their
/// chunks embedded again, embedded chunks without a point are embedded again, and pending
/// chunks whose point is already right are marked embedded without a provider call. The
/// reconciliation runs in the background; follow it with `GET /v1/jobs/{job_id}` or its events.
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
    ApiPath(world_id): ApiPath<Uuid>,
) -> Result<(StatusCode, axum::Json<JobDto>), ApiError> {
    let job = state.repair.start(WorldId(world_id)).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(job.into())))
}
