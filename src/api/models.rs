//! `GET /v1/models`: the embedding models a world can be locked to.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ErrorBody;
use crate::api::AppState;
use crate::providers::ModelSpec;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/models", get(list_models))
}

/// Inclusive range of output sizes a model supports.
#[derive(Debug, Serialize, ToSchema)]
pub struct DimensionRange {
    pub min: u32,
    pub max: u32,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Model)]
pub struct ModelDto {
    #[schema(example = "google")]
    pub provider: String,
    #[schema(example = "gemini-embedding-001")]
    pub model: String,
    pub default_dimensions: u32,
    pub allowed_dimensions: DimensionRange,
    /// Exact per-input limit in the provider's own tokens.
    pub max_input_tokens: u32,
    /// Largest `chunking.max_tokens` a world on this model accepts: `max_input_tokens`, less
    /// what the model adds to every input (the local model's `[CLS]` and `[SEP]`).
    pub max_chunk_tokens: u32,
    /// How queries are marked for the provider (`null`: symmetric model).
    pub query_mode: Option<String>,
    /// How documents are marked for the provider (`null`: symmetric model).
    pub document_mode: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ModelList {
    pub models: Vec<ModelDto>,
}

impl From<&ModelSpec> for ModelDto {
    fn from(m: &ModelSpec) -> Self {
        ModelDto {
            provider: m.provider.as_str().to_owned(),
            model: m.model.clone(),
            default_dimensions: m.default_dimensions,
            allowed_dimensions: DimensionRange {
                min: m.min_dimensions,
                max: m.max_dimensions,
            },
            max_input_tokens: m.max_input_tokens,
            max_chunk_tokens: m.max_chunk_tokens(),
            query_mode: m.query_mode.map(str::to_owned),
            document_mode: m.document_mode.map(str::to_owned),
        }
    }
}

/// Embedding models known to this server (built in, plus configured OpenAI-compatible ones).
#[utoipa::path(get, path = "/v1/models", tag = "models",
    responses((status = 200, body = ModelList), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_models(State(state): State<AppState>) -> axum::Json<ModelList> {
    axum::Json(ModelList {
        models: state.registry.all().iter().map(Into::into).collect(),
    })
}
