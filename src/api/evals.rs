//! `/v1/worlds/{world_id}/evals`: evaluation test sets — questions with what a good answer
//! holds, kept per world to measure retrieval on the world's own documents.

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use crate::api::AppState;
use crate::domain::{ChunkId, EvalItem, EvalSet, EvalSetId, EvalSetSummary, SourceId, WorldId};
use crate::service::evals::{DraftItem, NewEvalSet};

/// The largest test set body: a thousand items with long answers fit.
pub const MAX_EVAL_BODY_BYTES: usize = 4 * 1024 * 1024;

pub fn router() -> Router<AppState> {
    let limit = || DefaultBodyLimit::max(MAX_EVAL_BODY_BYTES);
    Router::new()
        .route(
            "/v1/worlds/{world_id}/evals",
            get(list_evals).post(create_eval).layer(limit()),
        )
        .route("/v1/worlds/{world_id}/evals/suggest", post(suggest_eval))
        .route(
            "/v1/worlds/{world_id}/evals/{eval_id}",
            get(get_eval).put(replace_eval).delete(delete_eval).layer(limit()),
        )
}

/// What a good answer to one question holds; at least one field. A result from a named source
/// (by id or key) or a named chunk is a hit; the answer text is looked for in the context.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Expected)]
pub struct ExpectedBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_items = 1, max_items = 100)]
    pub sources: Option<Vec<Uuid>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_items = 1, max_items = 100)]
    pub source_keys: Option<Vec<SourceKeyText>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_items = 1, max_items = 100)]
    pub chunks: Option<Vec<Uuid>>,
    /// The answer's text: scored by the share of its word 4-grams found in `context.text`
    /// (an answer without letters or digits counts toward nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        example = "The keeper climbs the tower every evening.",
        min_length = 1,
        max_length = 20000,
        pattern = r"[^\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
    )]
    pub answer: Option<String>,
}

/// A source's key, as the source was written with (`PUT …/sources/by-key?key=`).
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(transparent)]
#[schema(
    example = "guides/isles.md",
    min_length = 1,
    max_length = 1024,
    pattern = r"^[^\u0000-\u001f\u007f-\u009f]+$"
)]
pub struct SourceKeyText(pub String);

/// One question of a test set.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = EvalItem)]
pub struct EvalItemBody {
    /// The question, as a `/retrieve` query (surrounding whitespace is stripped).
    #[schema(
        example = "Who keeps the tower?",
        min_length = 1,
        max_length = 4000,
        pattern = r"[^\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
    )]
    pub query: String,
    pub expected: ExpectedBody,
}

/// A test set as sent to create or replace one.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalSetRequest {
    /// As a world's name.
    #[schema(
        example = "FAQ questions",
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub name: String,
    #[schema(min_items = 1, max_items = 1000)]
    pub items: Vec<EvalItemBody>,
}

impl From<EvalSetRequest> for NewEvalSet {
    fn from(req: EvalSetRequest) -> Self {
        NewEvalSet {
            name: req.name,
            items: (req.items.into_iter())
                .map(|item| DraftItem {
                    query: item.query,
                    sources: (item.expected.sources).map(|v| v.into_iter().map(SourceId).collect()),
                    source_keys: (item.expected.source_keys).map(|keys| keys.into_iter().map(|k| k.0).collect()),
                    chunks: (item.expected.chunks).map(|v| v.into_iter().map(ChunkId).collect()),
                    answer: item.expected.answer,
                })
                .collect(),
        }
    }
}

impl From<EvalItem> for EvalItemBody {
    fn from(item: EvalItem) -> Self {
        let some = |v: Vec<Uuid>| (!v.is_empty()).then_some(v);
        let e = item.expected;
        EvalItemBody {
            query: item.query,
            expected: ExpectedBody {
                sources: some(e.sources.into_iter().map(|s| s.0).collect()),
                source_keys: (!e.source_keys.is_empty())
                    .then(|| e.source_keys.into_iter().map(SourceKeyText).collect()),
                chunks: some(e.chunks.into_iter().map(|c| c.0).collect()),
                answer: e.answer,
            },
        }
    }
}

/// A test set as listed: its items counted.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = EvalSetSummary)]
pub struct EvalSetSummaryDto {
    pub eval_id: Uuid,
    pub world_id: Uuid,
    pub name: String,
    pub item_count: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<EvalSetSummary> for EvalSetSummaryDto {
    fn from(s: EvalSetSummary) -> Self {
        EvalSetSummaryDto {
            eval_id: s.id.0,
            world_id: s.world_id.0,
            name: s.name,
            item_count: s.item_count,
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

/// A test set with its items.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = EvalSet)]
pub struct EvalSetDto {
    #[serde(flatten)]
    pub summary: EvalSetSummaryDto,
    pub items: Vec<EvalItemBody>,
}

impl From<EvalSet> for EvalSetDto {
    fn from(set: EvalSet) -> Self {
        EvalSetDto {
            summary: EvalSetSummaryDto {
                eval_id: set.id.0,
                world_id: set.world_id.0,
                name: set.name,
                item_count: u32::try_from(set.items.len()).unwrap_or(u32::MAX),
                created_at: set.created_at,
                updated_at: set.updated_at,
            },
            items: set.items.into_iter().map(Into::into).collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EvalSetList {
    /// Oldest first, without their items.
    pub evals: Vec<EvalSetSummaryDto>,
    /// The `offset` of the next page; `null` on the last one.
    pub next_offset: Option<u64>,
}

/// The body, or why not: a 413 names this route's own limit.
fn body(sent: Result<ApiJson<EvalSetRequest>, ApiError>) -> Result<EvalSetRequest, ApiError> {
    match sent {
        Ok(ApiJson(body)) => Ok(body),
        Err(err) if err.status == StatusCode::PAYLOAD_TOO_LARGE => {
            Err(ApiError::payload_too_large(MAX_EVAL_BODY_BYTES))
        }
        Err(err) => Err(err),
    }
}

/// Create a test set: up to 1,000 questions, each with what a good answer holds. The CLI
/// imports one from JSON Lines (`quarry eval`).
#[utoipa::path(post, path = "/v1/worlds/{world_id}/evals", tag = "evaluation",
    params(("world_id" = Uuid, Path)), request_body = EvalSetRequest,
    responses((status = 201, body = EvalSetDto),
        (status = 400, description = "invalid_request (`details.field`: `name`, `items`, `items[i].query`, `items[i].expected…`)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, description = "world_not_found", body = ErrorBody),
        (status = 409, description = "eval_limit_reached", body = ErrorBody),
        (status = 413, description = "payload_too_large (over 4 MiB)", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn create_eval(
    State(state): State<AppState>,
    ApiPath(world): ApiPath<WorldId>,
    sent: Result<ApiJson<EvalSetRequest>, ApiError>,
) -> Result<(StatusCode, axum::Json<EvalSetDto>), ApiError> {
    let request = body(sent)?;
    let set = state.evals.create(world, request.into()).await?;
    Ok((StatusCode::CREATED, axum::Json(set.into())))
}

/// A world's test sets, oldest first, without their items.
#[utoipa::path(get, path = "/v1/worlds/{world_id}/evals", tag = "evaluation",
    params(("world_id" = Uuid, Path),
        ("offset" = Option<u64>, Query, description = "test sets to skip (default 0)", minimum = 0, maximum = 9223372036854775807_i64),
        ("limit" = Option<u32>, Query, description = "test sets to return, 1 to 1000 (default 100)", minimum = 1, maximum = 1000)),
    responses((status = 200, body = EvalSetList),
        (status = 400, description = "invalid_request (`details.field`: `offset`, `limit` or an unknown parameter)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, description = "world_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_evals(
    State(state): State<AppState>,
    ApiPath(world): ApiPath<WorldId>,
    ApiQuery(query): ApiQuery<Vec<(String, String)>>,
) -> Result<axum::Json<EvalSetList>, ApiError> {
    let paging = super::extract::list_query(&query, &[])?;
    let sets = state.evals.list(world, super::extract::window(paging)).await?;
    let (sets, next_offset) = super::extract::page(sets, paging);
    Ok(axum::Json(EvalSetList {
        evals: sets.into_iter().map(Into::into).collect(),
        next_offset,
    }))
}

/// One test set with its items.
#[utoipa::path(get, path = "/v1/worlds/{world_id}/evals/{eval_id}", tag = "evaluation",
    params(("world_id" = Uuid, Path), ("eval_id" = Uuid, Path)),
    responses((status = 200, body = EvalSetDto), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found or eval_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_eval(
    State(state): State<AppState>,
    ApiPath((world, id)): ApiPath<(WorldId, EvalSetId)>,
) -> Result<axum::Json<EvalSetDto>, ApiError> {
    Ok(axum::Json(state.evals.get(world, id).await?.into()))
}

/// Replace a test set's name and items whole.
#[utoipa::path(put, path = "/v1/worlds/{world_id}/evals/{eval_id}", tag = "evaluation",
    params(("world_id" = Uuid, Path), ("eval_id" = Uuid, Path)), request_body = EvalSetRequest,
    responses((status = 200, body = EvalSetDto),
        (status = 400, description = "invalid_request (`details.field` as when creating)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, description = "world_not_found or eval_not_found", body = ErrorBody),
        (status = 413, description = "payload_too_large (over 4 MiB)", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn replace_eval(
    State(state): State<AppState>,
    ApiPath((world, id)): ApiPath<(WorldId, EvalSetId)>,
    sent: Result<ApiJson<EvalSetRequest>, ApiError>,
) -> Result<axum::Json<EvalSetDto>, ApiError> {
    let request = body(sent)?;
    Ok(axum::Json(state.evals.replace(world, id, request.into()).await?.into()))
}

/// Delete a test set.
#[utoipa::path(delete, path = "/v1/worlds/{world_id}/evals/{eval_id}", tag = "evaluation",
    params(("world_id" = Uuid, Path), ("eval_id" = Uuid, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found or eval_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete_eval(
    State(state): State<AppState>,
    ApiPath((world, id)): ApiPath<(WorldId, EvalSetId)>,
) -> Result<StatusCode, ApiError> {
    state.evals.delete(world, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What to draft.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SuggestRequest {
    /// Questions to draft at most, 1 to 1000 (default 50).
    #[serde(default, deserialize_with = "super::de::integer")]
    #[schema(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// A drafted test set: read it, correct it, then create it with `POST …/evals`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SuggestedEvalSet {
    pub name: String,
    /// Always true: nothing was stored, and no model judged these questions.
    pub draft: bool,
    /// Each a section heading that asks a question, with the start of the text under it as
    /// the answer and its source as the expected hit.
    pub items: Vec<EvalItemBody>,
    /// Sources read (at most 2,000, or 32 Mi chars of text, in reading order).
    pub sources_read: u64,
    /// Sections seen in them.
    pub sections_seen: u64,
}

/// Draft a test set from the world's own sections: each heading that is a question becomes a
/// query, the start of the text under it the expected answer. A starter for FAQ-shaped
/// documents, to be reviewed before use; nothing is stored.
#[utoipa::path(post, path = "/v1/worlds/{world_id}/evals/suggest", tag = "evaluation",
    params(("world_id" = Uuid, Path)), request_body = SuggestRequest,
    responses((status = 200, body = SuggestedEvalSet),
        (status = 400, description = "invalid_request (`details.field`: `limit`)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, description = "world_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn suggest_eval(
    State(state): State<AppState>,
    ApiPath(world): ApiPath<WorldId>,
    ApiJson(request): ApiJson<SuggestRequest>,
) -> Result<axum::Json<SuggestedEvalSet>, ApiError> {
    // Out of range (the document forbids it): the service names `limit`.
    let limit = request.limit.map(|n| usize::try_from(n).unwrap_or(0));
    let found = state.evals.suggest(world, limit).await?;
    Ok(axum::Json(SuggestedEvalSet {
        name: "Suggested questions".to_owned(),
        draft: true,
        items: found.items.into_iter().map(Into::into).collect(),
        sources_read: found.sources_read,
        sections_seen: found.sections_seen,
    }))
}
