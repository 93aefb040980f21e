//! `POST /v1/worlds/{world_id}/retrieve`.
//!
//! Each field of the body is read as raw JSON so the settings can be judged before anything is
//! looked up: a boolean or string where a number belongs is `invalid_retrieval_settings` naming
//! the field (a typed body would turn it into a generic `invalid_request`); an explicit `null`
//! is "not set". Unknown or repeated fields, a body that is not an object and a missing or
//! non-string `query` are `invalid_request`.

use std::collections::BTreeMap;

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
use crate::domain::Metadata;
use crate::domain::SourceId;
use crate::domain::WorldId;
use crate::service::retrieval::{
    DEFAULT_RERANK_CANDIDATES, DEFAULT_TOP_K, Expand, FusionChoice, MAX_NEIGHBORS, MAX_RERANK_CANDIDATES, MAX_TOP_K,
    Mode, QualityLevel, Rerank, Retrieval, SearchUsed, Settings, SourceFilter,
};
use crate::state::AppState;
use crate::vector::Fusion;

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
    expand: Option<Value>,
    max_context_tokens: Option<Value>,
    filter: Option<Value>,
    fusion: Option<Value>,
    rerank: Option<Value>,
    explain: Option<Value>,
    hnsw_ef: Option<Value>,
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
        Some(Value::String(s)) if s == "auto" => Mode::Auto,
        Some(Value::String(s)) if s == "full" => Mode::Full,
        Some(_) => return Err(bad("mode", "mode must be `dense`, `hybrid`, `auto` or `full`")),
    };
    let neighbors = match &body.neighbors {
        None => 0,
        Some(v) => bounded_integer("neighbors", v, u64::from(MAX_NEIGHBORS))? as u32,
    };
    let expand = match &body.expand {
        None if neighbors > 0 => Expand::Neighbors(neighbors),
        // Chosen by bench_quality on three FAQs (BENCHMARKS.md, "Context that reads forward"):
        // the hit's section read forward puts more of the answer into the context than the
        // hits alone, at every budget measured.
        None => Expand::Parent,
        // The hits' neighbours: `neighbors` of them on each side (1 when not given).
        Some(Value::String(s)) if s == "neighbors" => Expand::Neighbors(neighbors.max(1)),
        Some(Value::String(s)) if s == "none" || s == "parent" => {
            if neighbors > 0 {
                return Err(bad("expand", format!("expand `{s}` contradicts neighbors > 0")));
            }
            if s == "parent" { Expand::Parent } else { Expand::None }
        }
        Some(_) => return Err(bad("expand", "expand must be `none`, `neighbors` or `parent`")),
    };
    let max_context_tokens = match &body.max_context_tokens {
        None => None,
        Some(v) => match bounded_integer("max_context_tokens", v, u64::from(MAX_CONTEXT_TOKENS))? {
            0 => return Err(bad("max_context_tokens", "max_context_tokens must be at least 1")),
            n => Some(n as u32),
        },
    };
    let filter = match &body.filter {
        None => None,
        Some(value) => Some(parse_filter(value)?),
    };
    let fusion = match &body.fusion {
        None => FusionChoice::Auto,
        Some(value) => {
            if !matches!(mode, Mode::Hybrid | Mode::Auto) {
                return Err(bad("fusion", "fusion applies to modes `hybrid` and `auto` only"));
            }
            parse_fusion(value)?
        }
    };
    let rerank = match &body.rerank {
        None => None,
        Some(value) => Some(parse_rerank(value)?),
    };
    let explain = match &body.explain {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("explain", "explain must be true or false")),
    };
    let hnsw_ef = match &body.hnsw_ef {
        None => None,
        // The configured bounds are checked by the service; this only keeps the number sane.
        Some(v) => match bounded_integer("hnsw_ef", v, 100_000)? {
            0 => return Err(bad("hnsw_ef", "hnsw_ef must be at least 1")),
            n => Some(n as u32),
        },
    };
    Ok(Settings {
        hnsw_ef,
        explain,
        rerank,
        top_k,
        min_score,
        mode,
        expand,
        max_context_tokens,
        filter,
        fusion,
    })
}

/// `{"candidates": n, "top_n": n}`: candidates 1 to 1000 (default 50), top_n 1 to candidates
/// (default `top_k`).
fn parse_rerank(value: &Value) -> Result<Rerank, ApiError> {
    let Value::Object(map) = value else {
        return Err(bad("rerank", "rerank must be an object"));
    };
    let mut rerank = Rerank {
        candidates: DEFAULT_RERANK_CANDIDATES,
        top_n: None,
    };
    for (key, value) in map {
        let field = format!("rerank.{key}");
        if value.is_null() {
            continue;
        }
        let n = match key.as_str() {
            "candidates" | "top_n" => bounded_integer(&field, value, MAX_RERANK_CANDIDATES)?,
            _ => {
                return Err(bad(
                    &field,
                    format!("unknown rerank key `{key}` (use candidates or top_n)"),
                ));
            }
        };
        if n == 0 {
            return Err(bad(&field, format!("{field} must be at least 1")));
        }
        match key.as_str() {
            "candidates" => rerank.candidates = n,
            _ => rerank.top_n = Some(n),
        }
    }
    if rerank.top_n.is_some_and(|n| n > rerank.candidates) {
        return Err(bad("rerank.top_n", "rerank.top_n must not exceed rerank.candidates"));
    }
    Ok(rerank)
}

/// Largest fusion weight taken.
const MAX_FUSION_WEIGHT: f64 = 100.0;

/// `{"method": "auto"|"rrf"|"dbsf", "dense_weight": w, "sparse_weight": w}`: weights (0 to
/// 100, not both 0, default 1) go with `rrf` only.
fn parse_fusion(value: &Value) -> Result<FusionChoice, ApiError> {
    let Value::Object(map) = value else {
        return Err(bad("fusion", "fusion must be an object"));
    };
    let mut method = None;
    let mut weights = [None, None];
    for (key, value) in map {
        let field = format!("fusion.{key}");
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "method" => match value.as_str() {
                Some(m @ ("auto" | "rrf" | "dbsf")) => method = Some(m),
                _ => return Err(bad(&field, "fusion.method must be `auto`, `rrf` or `dbsf`")),
            },
            "dense_weight" | "sparse_weight" => {
                let weight = value
                    .as_f64()
                    .filter(|w| (0.0..=MAX_FUSION_WEIGHT).contains(w))
                    .ok_or_else(|| {
                        bad(
                            &field,
                            format!("{field} must be a number from 0 to {MAX_FUSION_WEIGHT}"),
                        )
                    })?;
                weights[usize::from(key == "sparse_weight")] = Some(weight as f32);
            }
            _ => {
                return Err(bad(
                    &field,
                    format!("unknown fusion key `{key}` (use method, dense_weight or sparse_weight)"),
                ));
            }
        }
    }
    let weighted = weights.iter().any(Option::is_some);
    match method.unwrap_or(if weighted { "rrf" } else { "auto" }) {
        "rrf" => {
            let [dense_weight, sparse_weight] = weights.map(|w| w.unwrap_or(1.0));
            if dense_weight == 0.0 && sparse_weight == 0.0 {
                return Err(bad("fusion.dense_weight", "fusion weights must not both be 0"));
            }
            Ok(FusionChoice::Given(Fusion::Rrf {
                dense_weight,
                sparse_weight,
            }))
        }
        method if weighted => Err(bad(
            "fusion.method",
            format!("weights go with fusion.method `rrf`, not `{method}`"),
        )),
        "dbsf" => Ok(FusionChoice::Given(Fusion::Dbsf)),
        _ => Ok(FusionChoice::Auto),
    }
}

/// Most entries in one list of a filter.
const MAX_FILTER_ENTRIES: usize = 1000;

/// `{"source_ids": [uuid…], "book_numbers": [n…], "filenames": [name…], "metadata": {k: v…}}`:
/// each list optional, non-empty when given, at most 1000 entries; `metadata` 1 to 64 keys with
/// string values, as sources take them; any other key is refused.
fn parse_filter(value: &Value) -> Result<SourceFilter, ApiError> {
    let Value::Object(map) = value else {
        return Err(bad("filter", "filter must be an object"));
    };
    let mut filter = SourceFilter::default();
    for (key, value) in map {
        let field = format!("filter.{key}");
        if value.is_null() {
            continue;
        }
        if key == "metadata" {
            let metadata = Metadata::parse(value, &field).map_err(|e| bad(&e.field, e.message))?;
            if metadata.is_empty() {
                return Err(bad(
                    &field,
                    format!("{field} must hold 1 to {} keys", Metadata::MAX_KEYS),
                ));
            }
            filter.metadata = Some(metadata);
            continue;
        }
        let Value::Array(items) = value else {
            return Err(bad(&field, format!("{field} must be an array")));
        };
        if items.is_empty() || items.len() > MAX_FILTER_ENTRIES {
            return Err(bad(
                &field,
                format!("{field} must hold 1 to {MAX_FILTER_ENTRIES} entries"),
            ));
        }
        match key.as_str() {
            "source_ids" => {
                let ids = items
                    .iter()
                    .map(|v| v.as_str().and_then(|s| s.parse::<Uuid>().ok()).map(SourceId))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| bad(&field, format!("{field} must hold source ids (UUIDs)")))?;
                filter.source_ids = Some(ids);
            }
            "book_numbers" => {
                let numbers = items
                    .iter()
                    .map(|v| natural(v).and_then(|n| u32::try_from(n).ok()).filter(|n| *n >= 1))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| bad(&field, format!("{field} must hold book numbers (integers ≥ 1)")))?;
                filter.book_numbers = Some(numbers);
            }
            "filenames" => {
                let names = items
                    .iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| bad(&field, format!("{field} must hold file names (strings)")))?;
                filter.filenames = Some(names);
            }
            _ => {
                return Err(bad(
                    &field,
                    format!("unknown filter key `{key}` (use source_ids, book_numbers, filenames or metadata)"),
                ));
            }
        }
    }
    Ok(filter)
}

/// `value` as a non-negative integer: a JSON integer, or a number with no fractional part.
fn natural(value: &Value) -> Option<u64> {
    let Value::Number(n) = value else { return None };
    n.as_u64().or_else(|| {
        // 2^64 is exactly representable; every non-negative f64 below it with no fractional
        // part is a u64.
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(f))
            .map(|f| f as u64)
    })
}

fn bad(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::InvalidRetrievalSettings, message).with_details(json!({ "field": field }))
}

/// A JSON integer in `0..=max`, or the error naming `field`. A number with no fractional part
/// (`8.0`) is the integer it is, as JSON Schema counts it (see [`super::de`]).
fn bounded_integer(field: &str, value: &Value, max: u64) -> Result<u64, ApiError> {
    let n = natural(value).ok_or_else(|| bad(field, format!("{field} must be a non-negative integer")))?;
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
    /// The question: not only whitespace (a blank query is `empty_query`); surrounding
    /// whitespace is stripped. At most 65536 bytes of UTF-8, and no more tokens than the
    /// world's model takes (`input_too_large`, 422).
    #[schema(
        example = "who rules the northern isles?",
        min_length = 1,
        pattern = r"[^\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
    )]
    pub query: String,
    /// Results wanted (integer ≥ 0, at most 1000, default 8), clamped to the number of embedded
    /// chunks. 0 returns the empty answer without any provider or vector store call.
    #[schema(example = 8, minimum = 0, maximum = 1000)]
    pub top_k: Option<u64>,
    /// Lowest score kept (0.0–1.0, default 0.0), applied inside the vector search. In hybrid mode
    /// it thresholds the dense candidates only.
    #[schema(example = 0.35, minimum = 0.0, maximum = 1.0)]
    pub min_score: Option<f64>,
    /// `dense` (default); `hybrid` (dense + BM25, fused as `fusion` says; hybrid worlds
    /// only); `full` (no search: the whole corpus — the world, or the sources `filter` keeps —
    /// in reading order as the context, cut to the budget; no provider call); `auto` (`full`
    /// when the corpus has at most `retrieval.full_context_threshold` tokens, 30,000 by
    /// default, and fits the budget; else `hybrid` on a hybrid world, `dense` otherwise).
    #[schema(example = "dense")]
    pub mode: Option<RetrieveMode>,
    /// How a hybrid search fuses its dense and BM25 rankings (modes `hybrid` and `auto`;
    /// default `auto`).
    pub fusion: Option<RetrieveFusion>,
    /// Chunks of the same source stitched into the context on each side of a hit (0–3, default 0).
    #[schema(example = 0, minimum = 0, maximum = 3)]
    pub neighbors: Option<u32>,
    /// How hits are widened in the context: `neighbors` (the hits' neighbours, `neighbors` of
    /// them on each side, 1 when `neighbors` is not given), `parent` (small-to-large: each
    /// hit's parent — its section of the source, cut at paragraphs when over the world's
    /// `chunking.parent_max_tokens` — once per parent, listed in `parents`; the default unless
    /// `neighbors` > 0) or `none` (the hits alone; `none` and `parent` with `neighbors` > 0
    /// contradict each other). A window is read forward from its hit: the chunks after it in its section, then
    /// back toward the section's start; from the section's start when the section does not fit
    /// but its start through the hit does; chunks beyond the section only once every hit has
    /// had its own.
    #[schema(example = "parent")]
    pub expand: Option<RetrieveExpand>,
    /// The context's token budget (1 to 1048576; default `retrieval.max_context_tokens`,
    /// 32768). The best hits are expanded first: in rank order, each hit and then its window
    /// (read forward, see `expand`), before the next hit; what does not fit is left out with the
    /// warning `context_truncated`. A best hit larger than the whole budget is cut at a sentence
    /// boundary (warning `context_cut`). `results` are never cut.
    #[schema(example = 8000, minimum = 1, maximum = 1048576)]
    pub max_context_tokens: Option<u32>,
    /// Rerank the search's candidates with the configured reranker (`providers.rerank`; 400
    /// when none is): the search fetches `candidates`, the reranker orders them and `top_n`
    /// are kept. A rerank that fails or times out leaves the search's order, with the warning
    /// `rerank_unavailable`.
    pub rerank: Option<RetrieveRerank>,
    /// Explain the answer (default false): each result gets `explain` (its rank and score in
    /// the dense and the BM25 ranking, its fused and rerank scores), and the answer's `explain`
    /// lists the other candidates of both rankings with the reason each is not in the answer.
    /// Costs two more searches; for tuning, not for every query.
    pub explain: Option<bool>,
    /// The HNSW beam width of this search (default `vectors.search.hnsw_ef`, else Qdrant's):
    /// higher finds the exact nearest neighbours more often and costs more time. Must lie
    /// within `vectors.search.min_hnsw_ef` and `max_hnsw_ef` (16 and 1024 by default: the
    /// bounds shown here; a deployment may configure others).
    #[schema(example = 128, minimum = 16, maximum = 1024)]
    pub hnsw_ef: Option<u32>,
    /// Only search these sources. Each list given must match (any entry of it); an empty match
    /// answers no results with the warning `filter_matched_nothing`.
    pub filter: Option<RetrieveFilter>,
}

/// How a retrieval searches (`mode`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)] // documents the body; the handler reads it as raw JSON
pub enum RetrieveMode {
    Dense,
    Hybrid,
    Auto,
    Full,
}

/// How hits are widened in the context (`expand`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)] // documents the body; the handler reads it as raw JSON
pub enum RetrieveExpand {
    None,
    Neighbors,
    Parent,
}

/// How a hybrid search fuses its rankings (`fusion.method`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)] // documents the body; the handler reads it as raw JSON
pub enum RetrieveFusionMethod {
    Auto,
    Rrf,
    Dbsf,
}

/// Reranking settings.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // documents the body; the handler reads it as raw JSON
pub struct RetrieveRerank {
    /// Candidates handed to the reranker (1 to 1000, default 50; at least the results kept).
    #[schema(example = 50, minimum = 1, maximum = 1000)]
    pub candidates: Option<u64>,
    /// Results kept after reranking (1 to `candidates`; default `top_k`).
    #[schema(example = 8, minimum = 1, maximum = 1000)]
    pub top_n: Option<u64>,
}

/// How a hybrid retrieval fuses the dense and the BM25 ranking.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // documents the body; the handler reads it as raw JSON
pub struct RetrieveFusion {
    /// `auto` (the default): by the query — a query carrying literal terms (identifiers,
    /// codes, paths, quoted strings) is fused by DBSF, a question in plain words is ranked by
    /// the dense search alone (chosen by measurement on real FAQs, see BENCHMARKS.md). `rrf`: weighted reciprocal rank fusion. `dbsf`: Qdrant's distribution-based
    /// score fusion. Weights alone mean `rrf`.
    #[schema(example = "rrf")]
    pub method: Option<RetrieveFusionMethod>,
    /// The dense ranking's weight in `rrf` (0 to 100, default 1; not both 0). Qdrant's weighted
    /// RRF (k 60): a list's positions count as divided by its weight, so weight 3 makes its
    /// third hit score like an unweighted first; 0 leaves the list out.
    #[schema(example = 1.0, minimum = 0.0, maximum = 100.0)]
    pub dense_weight: Option<f64>,
    /// The BM25 ranking's weight in `rrf` (0 to 100, default 1; not both 0), as `dense_weight`.
    #[schema(example = 1.0, minimum = 0.0, maximum = 100.0)]
    pub sparse_weight: Option<f64>,
}

/// Which sources a retrieval searches.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // documents the body; the handler reads it as raw JSON
pub struct RetrieveFilter {
    /// Source ids (1 to 1000).
    #[schema(min_items = 1, max_items = 1000)]
    pub source_ids: Option<Vec<Uuid>>,
    /// Book numbers (1 to 1000 of them, each at least 1).
    #[schema(value_type = Option<Vec<BookNumber>>, min_items = 1, max_items = 1000)]
    pub book_numbers: Option<Vec<u32>>,
    /// Exact file names as stored (1 to 1000).
    #[schema(min_items = 1, max_items = 1000)]
    pub filenames: Option<Vec<String>>,
    /// Metadata a source must have: every key given, each with exactly this value (1 to 64
    /// keys, with the limits of a source's `metadata`).
    #[schema(value_type = Option<MetadataFilter>, example = json!({"lang": "en"}))]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// A source's book number: 1 to 2^32 - 1.
pub struct BookNumber;

impl utoipa::PartialSchema for BookNumber {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(1))
            .maximum(Some(u32::MAX))
            .build()
            .into()
    }
}

impl utoipa::ToSchema for BookNumber {}

/// The metadata a retrieval filter asks for: a source's metadata rules, 1 key at least.
pub struct MetadataFilter;

impl utoipa::PartialSchema for MetadataFilter {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        super::sources::metadata_schema(1).into()
    }
}

impl utoipa::ToSchema for MetadataFilter {}

/// One verified hit. Text comes from the store, never from the vector store.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalResult {
    pub chunk_id: Uuid,
    pub point_id: Uuid,
    /// Cosine similarity (dense) or the fused rank score (hybrid).
    pub score: f32,
    /// The reranker's relevance score, when the results were reranked (their order).
    pub rerank_score: Option<f32>,
    /// With `explain: true`.
    pub explain: Option<HitExplanation>,
    pub source_id: Uuid,
    pub source_filename: String,
    /// The source's title as given at upload (`null` when none was).
    pub title: Option<String>,
    /// The source's URL as given at upload (`null` when none was).
    pub url: Option<String>,
    /// The source's metadata as given at upload (`{}` when none was).
    pub metadata: BTreeMap<String, String>,
    pub book_number: u32,
    pub chunk_number: u32,
    pub char_start: u64,
    pub char_end: u64,
    /// For a PDF's chunk, the page (1-based) it starts on; `null` for other formats.
    pub page: Option<u32>,
    pub chunk_text: String,
    pub overlap_text: String,
    /// Other hits with exactly the same text, folded into this one (their chunk ids).
    pub duplicates: Vec<Uuid>,
}

/// Chunk text for a model's context: no scores, filenames or overlap text.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalContext {
    /// The selected chunk texts, in passage order (passages by their best hit's rank), reading
    /// order within a passage.
    pub chunks: Vec<String>,
    /// The passages, each marked `[n] ` (its citation number) and apart by a blank line; the
    /// chunks of a passage are apart by a blank line too.
    pub text: String,
    /// One per entry of `chunks`, in the same order: where it comes from.
    pub citations: Vec<RetrievalCitation>,
}

/// Where one context chunk comes from, for citing it.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalCitation {
    /// The passage's number in `context.text` (`[n]`).
    pub n: u32,
    /// Index in `results` of the hit this chunk is, or of its passage's best hit (a
    /// neighbour); `null` in a full-context answer, which has no results.
    pub result_index: Option<usize>,
    pub chunk_id: Uuid,
    pub source_id: Uuid,
    pub book_number: u32,
    pub chunk_number: u32,
    /// The cited span of the source's stored text, in chars (a chunk cut to fit the budget
    /// ends where the cut does).
    pub char_start: u64,
    pub char_end: u64,
    /// For a PDF's chunk, the page (1-based) it starts on: cite it as "p. N".
    pub page: Option<u32>,
}

/// How far to trust the answer, for the caller to tell its model.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalQuality {
    /// `high` (dense: best score ≥ 0.5, or ≥ 0.3 and ahead of the second by ≥ 0.1), `low`
    /// (hits, none convincing), `none` (no hits) or `unrated` (a fused search: fused scores are not similarities).
    pub level: String,
    pub best_score: Option<f32>,
    /// Best score less the second best.
    pub score_gap: Option<f32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalWarning {
    /// `no_embedded_chunks`, `filter_matched_nothing`, `chunk_missing`, `stale_point`,
    /// `context_truncated`, `context_cut`, `parents_missing` or `rerank_unavailable`.
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

/// A parent holding hits (`expand: parent`).
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalParent {
    pub source_id: Uuid,
    pub book_number: u32,
    /// 0-based order of the parent in its source.
    pub parent_number: u32,
    /// Its chunks, `first_chunk..=last_chunk` by chunk number.
    pub first_chunk: u32,
    pub last_chunk: u32,
    /// Its span of the source's stored text, in chars (its first chunk's start to its last
    /// chunk's end).
    pub char_start: u64,
    pub char_end: u64,
    /// Its chunks' token counts summed.
    pub token_count: u64,
    /// The best score of its hits.
    pub score: f32,
    /// Its hits, best first: their indexes in `results` (whose entries carry each matched
    /// chunk's exact offsets) and chunk ids.
    pub result_indexes: Vec<usize>,
    pub children: Vec<Uuid>,
}

/// A rank (1-based) and score in one ranking.
#[derive(Debug, Serialize, ToSchema)]
pub struct RankStanding {
    pub rank: u32,
    pub score: f32,
}

impl From<crate::service::retrieval::Standing> for RankStanding {
    fn from(s: crate::service::retrieval::Standing) -> Self {
        Self {
            rank: s.rank,
            score: s.score,
        }
    }
}

/// One result, explained.
#[derive(Debug, Serialize, ToSchema)]
pub struct HitExplanation {
    /// Its standing in the dense ranking (cosine), without threshold or filter.
    pub dense: Option<RankStanding>,
    /// Its standing in the BM25 ranking (hybrid worlds; `null` when BM25 did not find it).
    pub sparse: Option<RankStanding>,
    /// The fused score, in a fused search.
    pub fused_score: Option<f32>,
    pub rerank_score: Option<f32>,
}

/// A candidate not in the answer, and why.
#[derive(Debug, Serialize, ToSchema)]
pub struct RemovedCandidate {
    pub point_id: Uuid,
    pub source_id: Option<Uuid>,
    pub book_number: Option<u32>,
    pub chunk_number: Option<u32>,
    pub dense: Option<RankStanding>,
    pub sparse: Option<RankStanding>,
    /// `filter`, `min_score`, `bm25_not_used` (BM25 found it, but the search ran dense),
    /// `verification` (its chunk is gone or changed), `duplicate` (same text as a result) or
    /// `ranked_out` (below the cut: `top_k`, the fusion or the reranker).
    pub reason: String,
}

/// How the answer came about (`explain: true`).
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalExplanation {
    /// Candidates of the explaining dense and BM25 searches (2 × the search's limit, at least 20).
    pub dense_candidates: usize,
    pub sparse_candidates: usize,
    pub removed: Vec<RemovedCandidate>,
}

/// The size of a corpus.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalCorpus {
    pub sources: u64,
    /// Chunks, whatever their embedding state.
    pub chunks: u64,
    /// The chunks' token counts summed.
    pub tokens: u64,
}

/// A fusion as run.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalFusion {
    /// `rrf` or `dbsf`.
    pub method: String,
    /// `rrf` only.
    pub dense_weight: Option<f32>,
    /// `rrf` only.
    pub sparse_weight: Option<f32>,
}

impl From<Fusion> for RetrievalFusion {
    fn from(fusion: Fusion) -> Self {
        match fusion {
            Fusion::Rrf {
                dense_weight,
                sparse_weight,
            } => RetrievalFusion {
                method: "rrf".into(),
                dense_weight: Some(dense_weight),
                sparse_weight: Some(sparse_weight),
            },
            Fusion::Dbsf => RetrievalFusion {
                method: "dbsf".into(),
                dense_weight: None,
                sparse_weight: None,
            },
        }
    }
}

/// Milliseconds per phase.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalTiming {
    pub embed_ms: f64,
    pub search_ms: f64,
    pub verify_ms: f64,
    pub rerank_ms: f64,
    pub total_ms: f64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RetrieveResponse {
    /// Sorted by score descending, then book_number, then chunk_number.
    pub results: Vec<RetrievalResult>,
    pub context: RetrievalContext,
    pub quality: RetrievalQuality,
    /// What ran: `dense`, `hybrid` or `full` (the whole corpus as the context); `null` when
    /// nothing did (top_k 0, nothing embedded, a filter matching nothing).
    pub mode_used: Option<String>,
    /// With `expand: parent`: each parent holding hits, once, best first (empty otherwise).
    pub parents: Vec<RetrievalParent>,
    /// With `explain: true`, when a search ran.
    pub explain: Option<RetrievalExplanation>,
    /// The corpus a `full`/`auto` request looked at (the world's served run, or the sources
    /// the filter keeps); `null` in the other modes.
    pub corpus: Option<RetrievalCorpus>,
    /// The fusion a `hybrid` search used (`null` otherwise).
    pub fusion_used: Option<RetrievalFusion>,
    pub requested_top_k: u64,
    /// `top_k` clamped to the number of embedded chunks.
    pub effective_top_k: u64,
    pub warnings: Vec<RetrievalWarning>,
    pub repairs: Vec<RetrievalRepair>,
    pub timing: RetrievalTiming,
}

impl From<Retrieval> for RetrieveResponse {
    fn from(r: Retrieval) -> Self {
        let mut explained = r.explain.as_ref().map(|e| e.hits.clone().into_iter());
        RetrieveResponse {
            explain: r.explain.map(|e| RetrievalExplanation {
                dense_candidates: e.dense_candidates,
                sparse_candidates: e.sparse_candidates,
                removed: e
                    .removed
                    .into_iter()
                    .map(|c| RemovedCandidate {
                        point_id: c.point_id,
                        source_id: c.source_id.map(|s| s.0),
                        book_number: c.book_number,
                        chunk_number: c.chunk_number,
                        dense: c.dense.map(Into::into),
                        sparse: c.sparse.map(Into::into),
                        reason: c.reason.to_owned(),
                    })
                    .collect(),
            }),
            results: r
                .results
                .into_iter()
                .map(|hit| {
                    let explain = explained.as_mut().and_then(Iterator::next).map(|e| HitExplanation {
                        dense: e.dense.map(Into::into),
                        sparse: e.sparse.map(Into::into),
                        fused_score: e.fused_score,
                        rerank_score: e.rerank_score,
                    });
                    let c = hit.chunk.chunk;
                    RetrievalResult {
                        chunk_id: c.id.0,
                        point_id: hit.chunk.point_id,
                        score: hit.score,
                        rerank_score: hit.rerank_score,
                        explain,
                        source_id: c.source_id.0,
                        source_filename: hit.chunk.source_filename,
                        title: hit.source.title.clone(),
                        url: hit.source.url.clone(),
                        metadata: hit.source.metadata.clone().into_map(),
                        book_number: c.book_number,
                        chunk_number: c.chunk_number,
                        char_start: c.char_start,
                        char_end: c.char_end,
                        page: c.page,
                        chunk_text: c.chunk_text,
                        overlap_text: c.overlap_text,
                        duplicates: hit.duplicates.into_iter().map(|id| id.0).collect(),
                    }
                })
                .collect(),
            context: RetrievalContext {
                chunks: r.context,
                text: r.context_text,
                citations: r
                    .citations
                    .into_iter()
                    .map(|c| RetrievalCitation {
                        n: c.n,
                        result_index: c.result_index,
                        chunk_id: c.chunk_id.0,
                        source_id: c.source_id.0,
                        book_number: c.book_number,
                        chunk_number: c.chunk_number,
                        char_start: c.char_start,
                        char_end: c.char_end,
                        page: c.page,
                    })
                    .collect(),
            },
            quality: RetrievalQuality {
                level: match r.quality.level {
                    QualityLevel::High => "high",
                    QualityLevel::Low => "low",
                    QualityLevel::None => "none",
                    QualityLevel::Unrated => "unrated",
                }
                .to_owned(),
                best_score: r.quality.best_score,
                score_gap: r.quality.score_gap,
            },
            mode_used: r.search_used.map(|used| {
                match used {
                    SearchUsed::Dense => "dense",
                    SearchUsed::Hybrid(_) => "hybrid",
                    SearchUsed::FullContext => "full",
                }
                .to_owned()
            }),
            parents: r
                .parents
                .into_iter()
                .map(|m| RetrievalParent {
                    source_id: m.parent.source_id.0,
                    book_number: m.book_number,
                    parent_number: m.parent.parent.parent_number,
                    first_chunk: m.parent.parent.first_chunk,
                    last_chunk: m.parent.parent.last_chunk,
                    char_start: m.parent.parent.char_start,
                    char_end: m.parent.parent.char_end,
                    token_count: m.parent.parent.token_count,
                    score: m.score,
                    result_indexes: m.result_indexes,
                    children: m.children.into_iter().map(|c| c.0).collect(),
                })
                .collect(),
            corpus: r.corpus.map(|c| RetrievalCorpus {
                sources: c.sources,
                chunks: c.chunks,
                tokens: c.tokens,
            }),
            fusion_used: match r.search_used {
                Some(SearchUsed::Hybrid(fusion)) => Some(fusion.into()),
                _ => None,
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
                rerank_ms: r.timing.rerank_ms,
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
    answer(&state, world_id, &body).await.map(axum::Json)
}

/// Answers a retrieval body for `world_id`, as `POST …/retrieve` does (the MCP `retrieve` tool
/// too): the query and settings validated, the retrieval run, its phases timed into the metrics.
pub async fn answer(state: &AppState, world_id: WorldId, body: &RawFields) -> Result<RetrieveResponse, ApiError> {
    answer_filtered(state, world_id, body, None).await
}

/// [`answer`], with `filter` in place of the body's (Dify's metadata conditions).
pub async fn answer_filtered(
    state: &AppState,
    world_id: WorldId,
    body: &RawFields,
    filter: Option<SourceFilter>,
) -> Result<RetrieveResponse, ApiError> {
    let query = match &body.query {
        Some(Value::String(q)) => q.as_str(),
        Some(_) => {
            return Err(ApiError::invalid_request("query must be a string").with_details(json!({ "field": "query" })));
        }
        None => {
            return Err(ApiError::invalid_request("query is required").with_details(json!({ "field": "query" })));
        }
    };
    let mut settings = parse_settings(body)?;
    if filter.is_some() {
        settings.filter = filter;
    }
    let answer = state.retrieval.retrieve(world_id, query, &settings).await?;
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
