//! `POST /v1/worlds/{world_id}/retrieve`.
//!
//! Each field of the body is read as raw JSON so the settings can be judged before anything is
//! looked up: a boolean or string where a number belongs is `invalid_retrieval_settings` naming
//! the field (a typed body would turn it into a generic `invalid_request`); an explicit `null`
//! is "not set". Unknown or repeated fields, a body that is not an object and a missing or
//! non-string `query` are `invalid_request`.

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody, ErrorCode};
use super::extract::{ApiJson, ApiPath};
use crate::config::MAX_CONTEXT_TOKENS;
use crate::domain::WorldId;
use crate::service::retrieval::{DEFAULT_TOP_K, MAX_NEIGHBORS, MAX_TOP_K, Mode, Retrieval, Settings};
use crate::state::AppState;

/// Largest `/retrieve` body: room for the longest query taken
/// ([`crate::service::retrieval::MAX_QUERY_BYTES`]) escaped, and the settings. Bigger is 413
/// before anything is parsed (the body is read as free-form JSON to judge its fields in order).
pub const MAX_RETRIEVE_BODY_BYTES: usize = 4 * crate::service::retrieval::MAX_QUERY_BYTES;

pub fn router() -> Router<AppState> {
    Router::new().route(
        "/v1/worlds/{world_id}/retrieve",
        post(retrieve).layer(axum::extract::DefaultBodyLimit::max(MAX_RETRIEVE_BODY_BYTES)),
    )
}

/// The body as read: each field free-form, so that the retrieval code judges the settings
/// (a boolean where a number goes is `invalid_retrieval_settings`, not a type error). Unknown
/// and repeated fields are refused as everywhere; an explicit `null` reads as absent (what
/// generated clients send for an unset optional field), so the default applies.
/// Only a JSON object is taken (a derived struct would also take an array, field by position).
#[derive(Debug)]
pub struct RawRequest(RawFields);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFields {
    query: Option<Value>,
    top_k: Option<Value>,
    min_score: Option<Value>,
    mode: Option<Value>,
    neighbors: Option<Value>,
    max_context_tokens: Option<Value>,
}

impl<'de> Deserialize<'de> for RawRequest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectOnly;
        impl<'de> serde::de::Visitor<'de> for ObjectOnly {
            type Value = RawRequest;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawRequest, A::Error> {
                RawFields::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(RawRequest)
            }
        }
        deserializer.deserialize_map(ObjectOnly)
    }
}

/// The retrieval settings of a body, validated: nothing else is looked at yet. A value of the
/// wrong type or out of range is `invalid_retrieval_settings` naming its field.
fn parse_settings(body: &RawFields) -> Result<Settings, ApiError> {
    let top_k = match &body.top_k {
        None => DEFAULT_TOP_K,
        Some(v) => bounded_integer("top_k", v, MAX_TOP_K)?,
    };
    let min_score = match &body.min_score {
        None => 0.0,
        Some(Value::Number(n)) => {
            let score = n
                .as_f64()
                .ok_or_else(|| bad("min_score", "min_score must be a number between 0.0 and 1.0"))?;
            if !(0.0..=1.0).contains(&score) {
                return Err(bad("min_score", "min_score must be between 0.0 and 1.0"));
            }
            score as f32
        }
        Some(_) => return Err(bad("min_score", "min_score must be a number between 0.0 and 1.0")),
    };
    let mode = match &body.mode {
        None => Mode::Dense,
        Some(Value::String(s)) if s == "dense" => Mode::Dense,
        Some(Value::String(s)) if s == "hybrid" => Mode::Hybrid,
        Some(_) => return Err(bad("mode", "mode must be `dense` or `hybrid`")),
    };
    let neighbors = match &body.neighbors {
        None => 0,
        Some(v) => bounded_integer("neighbors", v, u64::from(MAX_NEIGHBORS))? as u32,
    };
    let max_context_tokens = match &body.max_context_tokens {
        None => None,
        Some(v) => match bounded_integer("max_context_tokens", v, u64::from(MAX_CONTEXT_TOKENS))? {
            0 => return Err(bad("max_context_tokens", "max_context_tokens must be at least 1")),
            n => Some(n as u32),
        },
    };
    Ok(Settings {
        top_k,
        min_score,
        mode,
        neighbors,
        max_context_tokens,
    })
}

fn bad(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidRetrievalSettings, message).with_details(json!({ "field": field }))
}

/// A JSON integer in `0..=max`, or the error naming `field`.
fn bounded_integer(field: &str, value: &Value, max: u64) -> Result<u64, ApiError> {
    let n = match value {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| bad(field, format!("{field} must be a non-negative integer")))?,
        _ => return Err(bad(field, format!("{field} must be a non-negative integer"))),
    };
    if n > max {
        return Err(bad(field, format!("{field} must be at most {max}")));
    }
    Ok(n)
}

/// A retrieval request.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // documents the body; the handler reads it as raw JSON
pub struct RetrieveRequest {
    /// The question; surrounding whitespace is stripped, and a blank query is `empty_query`.
    #[schema(example = "who rules the northern isles?")]
    pub query: String,
    /// Results wanted (integer ≥ 0, at most 1000, default 8), clamped to the number of embedded
    /// chunks. 0 returns the empty answer without any provider or vector store call.
    #[schema(example = 8, minimum = 0, maximum = 1000)]
    pub top_k: Option<u64>,
    /// Lowest score kept (0.0–1.0, default 0.0), applied inside the vector search. In hybrid mode
    /// it thresholds the dense candidates only.
    #[schema(example = 0.35, minimum = 0.0, maximum = 1.0)]
    pub min_score: Option<f64>,
    /// `dense` (default) or `hybrid` (dense + BM25 fused by reciprocal rank; hybrid worlds only).
    #[schema(example = "dense")]
    pub mode: Option<String>,
    /// Chunks of the same source stitched into the context on each side of a hit (0–3, default 0).
    #[schema(example = 0, minimum = 0, maximum = 3)]
    pub neighbors: Option<u32>,
    /// The context's token budget (1 to 1048576; default `retrieval.max_context_tokens`,
    /// 32768). Hits are kept first, in rank order, then their neighbours; what does not fit is
    /// left out with the warning `context_truncated`. `results` are never cut.
    #[schema(example = 8000, minimum = 1, maximum = 1048576)]
    pub max_context_tokens: Option<u32>,
}

/// One verified hit. Text comes from the store, never from the vector store.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalResult {
    pub chunk_id: Uuid,
    pub point_id: Uuid,
    /// Cosine similarity (dense) or the fused rank score (hybrid).
    pub score: f32,
    pub source_id: Uuid,
    pub source_filename: String,
    pub book_number: u32,
    pub chunk_number: u32,
    pub char_start: u64,
    pub char_end: u64,
    pub chunk_text: String,
    pub overlap_text: String,
}

/// Chunk text for a model's context: no scores, filenames or overlap text.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalContext {
    /// The selected chunk texts, hits in rank order, each widened by its neighbours in reading order.
    pub chunks: Vec<String>,
    /// `chunks` joined by a blank line.
    pub text: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalWarning {
    /// `no_embedded_chunks`, `chunk_missing`, `stale_point` or `context_truncated`.
    pub code: String,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalRepair {
    pub point_id: Uuid,
    /// `stale_point_deleted` (the slot is queued for embedding again) or `orphan_point_deleted`
    /// (the point's chunk no longer exists).
    pub kind: String,
}

/// Milliseconds per phase.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalTiming {
    pub embed_ms: f64,
    pub search_ms: f64,
    pub verify_ms: f64,
    pub total_ms: f64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RetrieveResponse {
    /// Sorted by score descending, then book_number, then chunk_number.
    pub results: Vec<RetrievalResult>,
    pub context: RetrievalContext,
    pub requested_top_k: u64,
    /// `top_k` clamped to the number of embedded chunks.
    pub effective_top_k: u64,
    pub warnings: Vec<RetrievalWarning>,
    pub repairs: Vec<RetrievalRepair>,
    pub timing: RetrievalTiming,
}

impl From<Retrieval> for RetrieveResponse {
    fn from(r: Retrieval) -> Self {
        let text = r.context_text();
        RetrieveResponse {
            results: r
                .results
                .into_iter()
                .map(|hit| {
                    let c = hit.chunk.chunk;
                    RetrievalResult {
                        chunk_id: c.id.0,
                        point_id: hit.chunk.point_id,
                        score: hit.score,
                        source_id: c.source_id.0,
                        source_filename: hit.chunk.source_filename,
                        book_number: c.book_number,
                        chunk_number: c.chunk_number,
                        char_start: c.char_start,
                        char_end: c.char_end,
                        chunk_text: c.chunk_text,
                        overlap_text: c.overlap_text,
                    }
                })
                .collect(),
            context: RetrievalContext {
                chunks: r.context,
                text,
            },
            requested_top_k: r.requested_top_k,
            effective_top_k: r.effective_top_k,
            warnings: r
                .warnings
                .into_iter()
                .map(|w| RetrievalWarning {
                    code: w.code.to_owned(),
                    message: w.message,
                })
                .collect(),
            repairs: r
                .repairs
                .into_iter()
                .map(|r| RetrievalRepair {
                    point_id: r.point_id,
                    kind: r.kind.to_owned(),
                })
                .collect(),
            timing: RetrievalTiming {
                embed_ms: r.timing.embed_ms,
                search_ms: r.timing.search_ms,
                verify_ms: r.timing.verify_ms,
                total_ms: r.timing.total_ms,
            },
        }
    }
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
    body: Result<ApiJson<RawRequest>, ApiError>,
) -> Result<axum::Json<RetrieveResponse>, ApiError> {
    let body = match body {
        Ok(ApiJson(RawRequest(body))) => body,
        Err(err) if err.status == axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
            return Err(ApiError::payload_too_large(MAX_RETRIEVE_BODY_BYTES));
        }
        Err(err) => return Err(err),
    };
    let query = match &body.query {
        Some(Value::String(q)) => q.as_str(),
        Some(_) => {
            return Err(ApiError::invalid_request("query must be a string").with_details(json!({ "field": "query" })));
        }
        None => {
            return Err(ApiError::invalid_request("query is required").with_details(json!({ "field": "query" })));
        }
    };
    let settings = parse_settings(&body)?;
    let answer = state.retrieval.retrieve(world_id, query, settings).await?;
    Ok(axum::Json(answer.into()))
}
