//! `/v1/worlds`: create, list, get, rename, delete.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Extension, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::audit::AuditTarget;
use super::error::{ApiError, ErrorBody, ErrorCode};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use crate::api::AppState;
use crate::domain::{WorldId, WorldName};
use crate::service::tokens::Principal;
use crate::service::worlds::{CreateWorld, ProfileRequest, WorldPatch, WorldUpdated, WorldView};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/worlds", get(list_worlds).post(create_world))
        .route(
            "/v1/worlds/{world_id}",
            get(get_world).patch(update_world).delete(delete_world),
        )
}

super::openapi::names_schema!(
    /// The providers a world can embed with: [`ProviderKind::ALL`], as `provider` is parsed.
    EmbeddingProvider,
    "The providers a world can embed with.",
    crate::domain::ProviderKind::ALL.map(crate::domain::ProviderKind::as_str)
);

/// The embedding profile of a new world.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingRequest {
    #[schema(value_type = EmbeddingProvider, example = "google")]
    pub provider: String,
    /// A model of the provider, as `GET /v1/models` lists them (`invalid_embedding_profile`
    /// otherwise).
    #[schema(example = "gemini-embedding-001")]
    pub model: String,
    /// Output size, within the model's `allowed_dimensions`; defaults to the model's default.
    #[schema(example = 768, minimum = 1)]
    #[serde(default, deserialize_with = "super::de::integer")]
    pub dimensions: Option<i64>,
}

/// How sources are split into chunks.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChunkingRequest {
    /// Largest chunk, in the model's tokens: 16 up to the model's chunk limit (254 for the local
    /// model, its input limit for the others). Default 512, capped at three quarters of the limit.
    #[schema(example = 512, minimum = 16)]
    #[serde(default, deserialize_with = "super::de::integer")]
    pub max_tokens: Option<i64>,
    /// Tokens of context carried from the previous chunk (default 64, at most half of max_tokens).
    #[schema(example = 64, minimum = 0)]
    #[serde(default, deserialize_with = "super::de::integer")]
    pub overlap_tokens: Option<i64>,
    /// Largest parent (a run of consecutive chunks that `expand: parent` retrieves), in the
    /// same tokens: max_tokens up to 1048576. Default four times max_tokens, at most
    /// `retrieval.max_context_tokens`. Parents are not embedded.
    #[schema(example = 2048, minimum = 16, maximum = 1048576)]
    #[serde(default, deserialize_with = "super::de::integer")]
    pub parent_max_tokens: Option<i64>,
    /// Embed each chunk after a short line naming its source's title and the headings of the
    /// sections it sits in (the stored text, and what retrieval returns, are unchanged). Part
    /// of the locked profile: every vector changes with it. Takes up to 48 tokens, so
    /// max_tokens may then be at most the model's chunk limit less 48. Default false for a new
    /// world (on the measured corpora it did not win everywhere: BENCHMARKS.md); a re-ingest
    /// keeps the world's own.
    #[serde(default)]
    pub context_prefix: Option<bool>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWorldRequest {
    /// 1 to 200 characters as sent, not only whitespace, no control characters (it is one
    /// line); stored without surrounding whitespace.
    #[schema(
        example = "Aerth",
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub name: String,
    #[serde(deserialize_with = "super::de::required_object")]
    pub embedding: EmbeddingRequest,
    #[serde(default, deserialize_with = "super::de::object")]
    pub chunking: Option<ChunkingRequest>,
    /// Store BM25 sparse vectors too, enabling `mode: hybrid` retrieval.
    #[serde(default)]
    pub hybrid: bool,
}

/// `PATCH` body. Only `name` can change; sending the profile fields is 409 `profile_locked`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateWorldRequest {
    /// The new name, as `name` of a new world.
    #[schema(
        example = "Aerth",
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub name: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub embedding: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub chunking: Option<Value>,
    /// `true` alone turns a dense world hybrid.
    pub hybrid: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = EmbeddingProfile)]
pub struct EmbeddingProfileDto {
    pub provider: String,
    pub model: String,
    pub dimensions: u32,
    /// Always `cosine`.
    pub distance: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ChunkingProfile)]
pub struct ChunkingProfileDto {
    pub max_tokens: u32,
    pub overlap_tokens: u32,
    pub parent_max_tokens: u32,
    /// Whether chunks are embedded after their title and section path.
    pub context_prefix: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = WorldStats)]
pub struct WorldStatsDto {
    pub sources: u64,
    pub chunks: u64,
    pub embedded: u64,
    pub pending: u64,
    pub failed: u64,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = World)]
pub struct WorldDto {
    pub id: Uuid,
    pub name: String,
    pub embedding: EmbeddingProfileDto,
    pub chunking: ChunkingProfileDto,
    pub hybrid: bool,
    /// The vector collection holding this world's chunk vectors.
    pub collection: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub stats: WorldStatsDto,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WorldList {
    pub worlds: Vec<WorldDto>,
    /// The `offset` of the next page; `null` on the last one.
    pub next_offset: Option<u64>,
}

impl From<WorldView> for WorldDto {
    fn from(view: WorldView) -> Self {
        let WorldView { world, stats } = view;
        WorldDto {
            id: world.id.0,
            name: world.name,
            embedding: EmbeddingProfileDto {
                provider: world.embedding.provider.as_str().to_owned(),
                model: world.embedding.model,
                dimensions: world.embedding.dimensions,
                distance: "cosine".to_owned(),
            },
            chunking: ChunkingProfileDto {
                max_tokens: world.chunking.max_tokens,
                overlap_tokens: world.chunking.overlap_tokens,
                parent_max_tokens: world.chunking.parent_max_tokens,
                context_prefix: world.chunking.context_prefix,
            },
            hybrid: world.hybrid,
            collection: world.collection,
            created_at: world.created_at,
            updated_at: world.updated_at,
            stats: WorldStatsDto {
                sources: stats.sources,
                chunks: stats.chunks,
                embedded: stats.embedded,
                pending: stats.pending,
                failed: stats.failed,
            },
        }
    }
}

/// Create a world with a locked embedding profile.
#[utoipa::path(post, path = "/v1/worlds", tag = "worlds", request_body = CreateWorldRequest,
    responses(
        (status = 201, body = WorldDto),
        (status = 400, description = "invalid_request, invalid_embedding_profile or invalid_chunking_profile", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 409, description = "no_eligible_provider_key", body = ErrorBody),
        (status = 503, description = "store_unavailable or vector_store_unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn create_world(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiJson(req): ApiJson<CreateWorldRequest>,
) -> Result<(StatusCode, Extension<AuditTarget>, axum::Json<WorldDto>), ApiError> {
    let chunking = req.chunking.unwrap_or(ChunkingRequest {
        max_tokens: None,
        overlap_tokens: None,
        parent_max_tokens: None,
        context_prefix: None,
    });
    let view = state
        .worlds
        .create(CreateWorld {
            name: parse_name(&req.name)?,
            embedding: parse_profile(req.embedding.provider, req.embedding.model, req.embedding.dimensions)?,
            max_tokens: chunking.max_tokens,
            overlap_tokens: chunking.overlap_tokens,
            parent_max_tokens: chunking.parent_max_tokens,
            context_prefix: chunking.context_prefix,
            hybrid: req.hybrid,
        })
        .await?;
    // A token limited to some worlds reaches the worlds it creates.
    state.tokens.grant_world(&principal, view.world.id).await?;
    Ok((
        StatusCode::CREATED,
        Extension(AuditTarget(view.world.id.0)),
        axum::Json(view.into()),
    ))
}

/// List every world with its counts (or those of one name).
#[utoipa::path(get, path = "/v1/worlds", tag = "worlds",
    params(("offset" = Option<u64>, Query, description = "worlds to skip (default 0)", minimum = 0, maximum = 9223372036854775807_i64),
        ("limit" = Option<u32>, Query, description = "worlds to return, 1 to 1000 (default 100)", minimum = 1, maximum = 1000),
        ("name" = Option<String>, Query, description = "only the worlds with exactly this name (names are not unique)", example = "Handbook")),
    responses((status = 200, body = WorldList), (status = 400, description = "invalid_request (`details.field`: `offset`, `limit`, `name` or an unknown parameter)", body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_worlds(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiQuery(query): ApiQuery<Vec<(String, String)>>,
) -> Result<axum::Json<WorldList>, ApiError> {
    let paging = super::extract::list_query(&query, &["name"])?;
    let name = query
        .iter()
        .find(|(key, _)| key == "name")
        .map(|(_, value)| value.trim());
    let window = super::extract::window(paging);
    let worlds = if name.is_none() && principal.sees_every_world() {
        state.worlds.list(window).await?
    } else {
        listed(&state, &principal, name, window).await?
    };
    let (worlds, next_offset) = super::extract::page(worlds, paging);
    Ok(axum::Json(WorldList {
        worlds: worlds.into_iter().map(Into::into).collect(),
        next_offset,
    }))
}

/// The worlds `principal` reaches (of one name, when given), the rows of `window`, each with
/// its counts: the rows are read without counts, filtered, then only the kept ones counted.
pub(super) async fn listed(
    state: &AppState,
    principal: &Principal,
    name: Option<&str>,
    window: crate::domain::Window,
) -> Result<Vec<WorldView>, ApiError> {
    let rows = state
        .store
        .list_worlds(crate::domain::Window::ALL)
        .await
        .map_err(crate::service::ServiceError::from)?;
    let mut views = Vec::new();
    for world in rows
        .into_iter()
        .filter(|w| principal.sees(w.id) && name.is_none_or(|name| w.name.as_str() == name))
        .skip(usize::try_from(window.offset).unwrap_or(usize::MAX))
        .take(usize::try_from(window.limit).unwrap_or(usize::MAX))
    {
        views.push(state.worlds.get(world.id).await?);
    }
    Ok(views)
}

/// One world with its counts.
#[utoipa::path(get, path = "/v1/worlds/{world_id}", tag = "worlds",
    params(("world_id" = Uuid, Path)),
    responses((status = 200, body = WorldDto), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_world(
    State(state): State<AppState>,
    ApiPath(world_id): ApiPath<WorldId>,
) -> Result<axum::Json<WorldDto>, ApiError> {
    Ok(axum::Json(state.worlds.get(world_id).await?.into()))
}

/// Rename a world, or turn a dense world hybrid. The embedding and chunking profiles are
/// locked: change them with `POST /v1/worlds/{world_id}/reingest`. `{"hybrid": true}` (alone)
/// on a dense world answers 202 with the `reingest` job that adds BM25 vectors to its points,
/// reusing every dense vector (no provider call with `embedding.reuse` on, the default); on a
/// hybrid world it answers 200 with the world. `hybrid: false` stays locked.
#[utoipa::path(patch, path = "/v1/worlds/{world_id}", tag = "worlds",
    params(("world_id" = Uuid, Path)), request_body = UpdateWorldRequest,
    responses((status = 200, body = WorldDto), (status = 202, description = "the backfill job", body = super::jobs::JobDto),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found", body = ErrorBody),
        (status = 409, description = "profile_locked, or job_state_conflict when a re-ingest is under way", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn update_world(
    State(state): State<AppState>,
    ApiPath(world_id): ApiPath<WorldId>,
    ApiJson(req): ApiJson<UpdateWorldRequest>,
) -> Result<(StatusCode, axum::Json<WorldUpdate>), ApiError> {
    let patch = WorldPatch {
        name: req.name.as_deref().map(parse_name).transpose()?,
        hybrid: req.hybrid,
        locked: [
            ("embedding", req.embedding.is_some()),
            ("chunking", req.chunking.is_some()),
        ]
        .into_iter()
        .find_map(|(field, sent)| sent.then_some(field)),
    };
    Ok(match state.worlds.update(world_id, patch).await? {
        WorldUpdated::World(world) => (StatusCode::OK, axum::Json(WorldUpdate::World(Box::new(world.into())))),
        WorldUpdated::Backfill(job) => (StatusCode::ACCEPTED, axum::Json(WorldUpdate::Job(Box::new(job.into())))),
    })
}

/// What a `PATCH` answers: the world (200), or the backfill job that turns it hybrid (202).
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum WorldUpdate {
    World(Box<WorldDto>),
    Job(Box<super::jobs::JobDto>),
}

/// A world's name, trimmed and checked (`invalid_request` naming `name`).
fn parse_name(raw: &str) -> Result<WorldName, ApiError> {
    WorldName::parse(raw).map_err(|m| ApiError::invalid_request(m).with_details(serde_json::json!({ "field": "name" })))
}

/// An embedding profile as asked for, its provider parsed (`invalid_embedding_profile` naming
/// `embedding.provider`); the model and dimensions are the registry's to judge.
pub(super) fn parse_profile(
    provider: String,
    model: String,
    dimensions: Option<i64>,
) -> Result<ProfileRequest, ApiError> {
    let provider = provider.parse().map_err(|m: String| {
        ApiError::new(ErrorCode::InvalidEmbeddingProfile, m)
            .with_details(serde_json::json!({ "field": "embedding.provider" }))
    })?;
    Ok(ProfileRequest {
        provider,
        model,
        dimensions,
    })
}

/// Delete a world with its sources, chunks, manifests, jobs and vectors.
#[utoipa::path(delete, path = "/v1/worlds/{world_id}", tag = "worlds",
    params(("world_id" = Uuid, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found", body = ErrorBody),
        (status = 503, description = "store_unavailable or vector_store_unavailable", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete_world(
    State(state): State<AppState>,
    ApiPath(world_id): ApiPath<WorldId>,
) -> Result<StatusCode, ApiError> {
    state.worlds.delete(world_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
