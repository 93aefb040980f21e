//! The `/retrieve` request: one type, [`RetrieveRequest`], that parses a body — every bound
//! checked here, once, and a refusal naming the field — and documents it in the OpenAPI
//! document. `POST /retrieve`, MCP's `retrieve` tool and the Dify endpoint all build one;
//! [`RetrieveRequest::settings`] hands the service its typed [`Settings`].
//!
//! # Decisions
//! - **Settings are judged by value, not by serde's type errors**: a boolean or string where a
//!   number belongs is `invalid_retrieval_settings` naming the field (serde would make it a
//!   generic `invalid_request`), so a body is read as its entries ([`Entries`]) and each entry
//!   by its field's parser. Unknown or repeated fields, a body that is not an object and a
//!   missing or non-string `query` are `invalid_request`.
//! - **`null` is "not set"**, what generated clients send for an unset optional field: the
//!   default applies.
//! - Cross-field rules (`expand` against `neighbors`, `fusion` only with a hybrid mode, rerank's
//!   `top_n` within `candidates`) are checked with the fields, so a request that parsed is one
//!   the service can run as it stands.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::api::error::{ApiError, ErrorCode};
use crate::config::MAX_CONTEXT_TOKENS;
use crate::domain::{Metadata, SourceId};
use crate::service::retrieval::{
    DEFAULT_RERANK_CANDIDATES, DEFAULT_TOP_K, Expand, FusionChoice, MAX_NEIGHBORS, MAX_RERANK_CANDIDATES, MAX_TOP_K,
    Mode, Rerank, Settings, SourceFilter,
};
use crate::vector::Fusion;

/// A retrieval request.
#[derive(Clone, Debug, Default, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u64>,
    /// Lowest score kept (0.0–1.0, default 0.0), applied inside the vector search. In hybrid mode
    /// it thresholds the dense candidates only.
    #[schema(example = 0.35, minimum = 0.0, maximum = 1.0)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f64>,
    /// `dense` (default); `hybrid` (dense + BM25, fused as `fusion` says; hybrid worlds
    /// only); `full` (no search: the whole corpus — the world, or the sources `filter` keeps —
    /// in reading order as the context, cut to the budget; no provider call); `auto` (`full`
    /// when the corpus has at most `retrieval.full_context_threshold` tokens, 30,000 by
    /// default, and fits the budget; else `hybrid` on a hybrid world, `dense` otherwise).
    #[schema(example = "dense")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<RetrieveMode>,
    /// How a hybrid search fuses its dense and BM25 rankings (modes `hybrid` and `auto`;
    /// default `auto`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fusion: Option<RetrieveFusion>,
    /// Chunks of the same source stitched into the context on each side of a hit (0–3, default 0).
    #[schema(example = 0, minimum = 0, maximum = 3)]
    #[serde(skip_serializing_if = "Option::is_none")]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expand: Option<RetrieveExpand>,
    /// The context's token budget (1 to 1048576; default `retrieval.max_context_tokens`,
    /// 32768). The best hits are expanded first: in rank order, each hit and then its window
    /// (read forward, see `expand`), before the next hit; what does not fit is left out with the
    /// warning `context_truncated`. A best hit larger than the whole budget is cut at a sentence
    /// boundary (warning `context_cut`). `results` are never cut.
    #[schema(example = 8000, minimum = 1, maximum = 1048576)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_context_tokens: Option<u32>,
    /// Rerank the search's candidates with the configured reranker (`providers.rerank`; 400
    /// when none is): the search fetches `candidates`, the reranker orders them and `top_n`
    /// are kept. A rerank that fails or times out leaves the search's order, with the warning
    /// `rerank_unavailable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank: Option<RetrieveRerank>,
    /// Explain the answer (default false): each result gets `explain` (its rank and score in
    /// the dense and the BM25 ranking, its fused and rerank scores), and the answer's `explain`
    /// lists the other candidates of both rankings with the reason each is not in the answer.
    /// Costs two more searches; for tuning, not for every query.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<bool>,
    /// The HNSW beam width of this search (default `vectors.search.hnsw_ef`, else Qdrant's):
    /// higher finds the exact nearest neighbours more often and costs more time. Must lie
    /// within `vectors.search.min_hnsw_ef` and `max_hnsw_ef` (16 and 1024 by default: the
    /// bounds shown here; a deployment may configure others).
    #[schema(example = 128, minimum = 16, maximum = 1024)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hnsw_ef: Option<u32>,
    /// Only search these sources. Each list given must match (any entry of it); an empty match
    /// answers no results with the warning `filter_matched_nothing`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<RetrieveFilter>,
}

/// How a retrieval searches (`mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RetrieveMode {
    Dense,
    Hybrid,
    Auto,
    Full,
}

/// How hits are widened in the context (`expand`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RetrieveExpand {
    None,
    Neighbors,
    Parent,
}

/// How a hybrid search fuses its rankings (`fusion.method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RetrieveFusionMethod {
    Auto,
    Rrf,
    Dbsf,
}

/// Reranking settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrieveRerank {
    /// Candidates handed to the reranker (1 to 1000, default 50; at least the results kept).
    #[schema(example = 50, minimum = 1, maximum = 1000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<u64>,
    /// Results kept after reranking (1 to `candidates`; default `top_k`).
    #[schema(example = 8, minimum = 1, maximum = 1000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_n: Option<u64>,
}

/// How a hybrid retrieval fuses the dense and the BM25 ranking.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrieveFusion {
    /// `auto` (the default): by the query — a query carrying literal terms (identifiers,
    /// codes, paths, quoted strings) is fused by DBSF, a question in plain words is ranked by
    /// the dense search alone (chosen by measurement on real FAQs, see BENCHMARKS.md). `rrf`: weighted reciprocal rank fusion. `dbsf`: Qdrant's distribution-based
    /// score fusion. Weights alone mean `rrf`.
    #[schema(example = "rrf")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<RetrieveFusionMethod>,
    /// The dense ranking's weight in `rrf` (0 to 100, default 1; not both 0). Qdrant's weighted
    /// RRF (k 60): a list's positions count as divided by its weight, so weight 3 makes its
    /// third hit score like an unweighted first; 0 leaves the list out.
    #[schema(example = 1.0, minimum = 0.0, maximum = 100.0)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dense_weight: Option<f64>,
    /// The BM25 ranking's weight in `rrf` (0 to 100, default 1; not both 0), as `dense_weight`.
    #[schema(example = 1.0, minimum = 0.0, maximum = 100.0)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sparse_weight: Option<f64>,
}

/// Which sources a retrieval searches.
#[derive(Clone, Debug, Default, PartialEq, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrieveFilter {
    /// Source ids (1 to 1000).
    #[schema(min_items = 1, max_items = 1000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_ids: Option<Vec<Uuid>>,
    /// Book numbers (1 to 1000 of them, each at least 1).
    #[schema(value_type = Option<Vec<BookNumber>>, min_items = 1, max_items = 1000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub book_numbers: Option<Vec<u32>>,
    /// Exact file names as stored (1 to 1000).
    #[schema(min_items = 1, max_items = 1000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filenames: Option<Vec<String>>,
    /// Metadata a source must have: every key given, each with exactly this value (1 to 64
    /// keys, with the limits of a source's `metadata`).
    #[schema(value_type = Option<MetadataFilter>, example = json!({"lang": "en"}))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
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
        crate::api::sources::metadata_schema(1).into()
    }
}

impl utoipa::ToSchema for MetadataFilter {}

/// A JSON object's entries in the order sent, a repeated key refused (`duplicate field`), as
/// every derived body does. Anything but an object is refused too (serde would read a struct
/// from an array, field by position).
#[derive(Debug, Default)]
pub struct Entries(pub Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectOnly;
        impl<'de> Visitor<'de> for ObjectOnly {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries: Vec<(String, Value)> = Vec::new();
                // A hashed set: a hostile body of many keys costs linear time, not quadratic.
                let mut seen = std::collections::HashSet::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !seen.insert(key.clone()) {
                        return Err(serde::de::Error::custom(format_args!("duplicate field `{key}`")));
                    }
                    let value = map.next_value::<Value>()?;
                    entries.push((key, value));
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(ObjectOnly)
    }
}

impl From<Map<String, Value>> for Entries {
    fn from(map: Map<String, Value>) -> Self {
        Entries(map.into_iter().collect())
    }
}

impl RetrieveRequest {
    /// The fields a body may have, in the order of the document.
    pub const FIELDS: [&'static str; 12] = [
        "query",
        "top_k",
        "min_score",
        "mode",
        "fusion",
        "neighbors",
        "expand",
        "max_context_tokens",
        "rerank",
        "explain",
        "hnsw_ef",
        "filter",
    ];

    /// Parses a body's entries: `invalid_request` for an unknown field or a missing or
    /// non-string `query` (named in `details.field`), `invalid_retrieval_settings` naming the
    /// first setting of the wrong type, out of range or contradicting another. The settings
    /// are judged before the query is: a caller learns of a bad setting whatever the query.
    ///
    /// # Errors
    /// As above.
    pub fn parse(entries: Entries) -> Result<Self, ApiError> {
        // The shape first, as a derived body would: an unknown field whatever else is wrong.
        if let Some((other, _)) = entries.0.iter().find(|(k, _)| !Self::FIELDS.contains(&k.as_str())) {
            return Err(ApiError::invalid_request(format!(
                "invalid request body: unknown field `{other}`, expected one of {}",
                Self::FIELDS.map(|f| format!("`{f}`")).join(", ")
            ))
            .with_details(json!({ "field": other })));
        }
        let mut request = RetrieveRequest::default();
        let mut query = None;
        for (key, value) in entries.0 {
            if value.is_null() && key != "query" {
                continue;
            }
            match key.as_str() {
                "query" => query = Some(value),
                "top_k" => request.top_k = Some(bounded_integer("top_k", &value, MAX_TOP_K)?),
                "min_score" => request.min_score = Some(min_score(&value)?),
                "mode" => request.mode = Some(RetrieveMode::parse(&value)?),
                "fusion" => request.fusion = Some(RetrieveFusion::parse(&value)?),
                "neighbors" => {
                    request.neighbors = Some(bounded_integer("neighbors", &value, u64::from(MAX_NEIGHBORS))? as u32);
                }
                "expand" => request.expand = Some(RetrieveExpand::parse(&value)?),
                "max_context_tokens" => {
                    request.max_context_tokens = Some(
                        match bounded_integer("max_context_tokens", &value, u64::from(MAX_CONTEXT_TOKENS))? {
                            0 => return Err(bad("max_context_tokens", "max_context_tokens must be at least 1")),
                            n => n as u32,
                        },
                    );
                }
                "rerank" => request.rerank = Some(RetrieveRerank::parse(&value)?),
                "explain" => {
                    request.explain = Some(
                        value
                            .as_bool()
                            .ok_or_else(|| bad("explain", "explain must be true or false"))?,
                    );
                }
                // The configured bounds are checked by the service; this only keeps the
                // number sane.
                "hnsw_ef" => {
                    request.hnsw_ef = Some(match bounded_integer("hnsw_ef", &value, 100_000)? {
                        0 => return Err(bad("hnsw_ef", "hnsw_ef must be at least 1")),
                        n => n as u32,
                    });
                }
                "filter" => request.filter = Some(RetrieveFilter::parse(&value)?),
                _ => {} // refused above
            }
        }
        request.check()?;
        request.query = match query {
            Some(Value::String(q)) => q,
            Some(_) => {
                return Err(
                    ApiError::invalid_request("query must be a string").with_details(json!({ "field": "query" }))
                );
            }
            None => {
                return Err(ApiError::invalid_request("query is required").with_details(json!({ "field": "query" })));
            }
        };
        Ok(request)
    }

    /// The rules between fields.
    fn check(&self) -> Result<(), ApiError> {
        let neighbors = self.neighbors.unwrap_or(0);
        if let Some(expand @ (RetrieveExpand::None | RetrieveExpand::Parent)) = self.expand
            && neighbors > 0
        {
            let name = if expand == RetrieveExpand::Parent {
                "parent"
            } else {
                "none"
            };
            return Err(bad("expand", format!("expand `{name}` contradicts neighbors > 0")));
        }
        if self.fusion.is_some() && !matches!(self.mode, Some(RetrieveMode::Hybrid | RetrieveMode::Auto)) {
            return Err(bad("fusion", "fusion applies to modes `hybrid` and `auto` only"));
        }
        Ok(())
    }

    /// The settings the service runs, defaults applied.
    #[must_use]
    pub fn settings(&self) -> Settings {
        let neighbors = self.neighbors.unwrap_or(0);
        let expand = match self.expand {
            // Chosen by bench_quality on three FAQs (BENCHMARKS.md, "Context that reads
            // forward"): the hit's section read forward puts more of the answer into the
            // context than the hits alone, at every budget measured.
            None if neighbors > 0 => Expand::Neighbors(neighbors),
            None | Some(RetrieveExpand::Parent) => Expand::Parent,
            // The hits' neighbours: `neighbors` of them on each side (1 when not given).
            Some(RetrieveExpand::Neighbors) => Expand::Neighbors(neighbors.max(1)),
            Some(RetrieveExpand::None) => Expand::None,
        };
        Settings {
            top_k: self.top_k.unwrap_or(DEFAULT_TOP_K),
            min_score: self.min_score.unwrap_or(0.0) as f32,
            mode: match self.mode.unwrap_or(RetrieveMode::Dense) {
                RetrieveMode::Dense => Mode::Dense,
                RetrieveMode::Hybrid => Mode::Hybrid,
                RetrieveMode::Auto => Mode::Auto,
                RetrieveMode::Full => Mode::Full,
            },
            expand,
            max_context_tokens: self.max_context_tokens,
            filter: self.filter.clone().map(RetrieveFilter::into_filter),
            fusion: self.fusion.map_or(FusionChoice::Auto, RetrieveFusion::choice),
            rerank: self.rerank.map(|r| Rerank {
                candidates: r.candidates.unwrap_or(DEFAULT_RERANK_CANDIDATES),
                top_n: r.top_n,
            }),
            explain: self.explain.unwrap_or(false),
            hnsw_ef: self.hnsw_ef,
            background: false,
            on_run: None,
        }
    }
}

/// One retrieval setting of an evaluation run: a `/retrieve` body without `query` (the test
/// set's items are the queries) nor `max_context_tokens` (the run's `budgets` are), judged by
/// the same rules. The field named in a refusal is the setting's own (`mode`, `fusion.method`).
///
/// # Errors
/// The first field refused, and why.
pub fn eval_setting(value: &Value) -> Result<Settings, crate::domain::FieldError> {
    let refuse = |field: &str, message: String| crate::domain::FieldError {
        field: field.to_owned(),
        message,
    };
    let Value::Object(map) = value else {
        return Err(refuse(
            "",
            "a setting must be an object: a /retrieve body without query".to_owned(),
        ));
    };
    for taken in ["query", "max_context_tokens"] {
        if map.contains_key(taken) {
            let why = if taken == "query" {
                "the test set's items are the queries"
            } else {
                "the run's budgets set it"
            };
            return Err(refuse(taken, format!("a run's setting takes no `{taken}`: {why}")));
        }
    }
    let mut entries = Entries::from(map.clone());
    entries.0.push(("query".to_owned(), Value::String("?".to_owned())));
    let request = RetrieveRequest::parse(entries).map_err(|err| {
        let field = (err.details.as_deref())
            .and_then(|d| d.get("field"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        crate::domain::FieldError {
            field,
            message: err.message,
        }
    })?;
    Ok(request.settings())
}

impl<'de> Deserialize<'de> for RetrieveRequest {
    /// As [`RetrieveRequest::parse`], its refusal as the message.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let entries = Entries::deserialize(deserializer)?;
        RetrieveRequest::parse(entries).map_err(|err| serde::de::Error::custom(err.message))
    }
}

impl RetrieveMode {
    fn parse(value: &Value) -> Result<Self, ApiError> {
        match value.as_str() {
            Some("dense") => Ok(Self::Dense),
            Some("hybrid") => Ok(Self::Hybrid),
            Some("auto") => Ok(Self::Auto),
            Some("full") => Ok(Self::Full),
            _ => Err(bad("mode", "mode must be `dense`, `hybrid`, `auto` or `full`")),
        }
    }
}

impl RetrieveExpand {
    fn parse(value: &Value) -> Result<Self, ApiError> {
        match value.as_str() {
            Some("none") => Ok(Self::None),
            Some("neighbors") => Ok(Self::Neighbors),
            Some("parent") => Ok(Self::Parent),
            _ => Err(bad("expand", "expand must be `none`, `neighbors` or `parent`")),
        }
    }
}

impl RetrieveRerank {
    /// `{"candidates": n, "top_n": n}`: candidates 1 to 1000 (default 50), top_n 1 to
    /// candidates (default `top_k`).
    fn parse(value: &Value) -> Result<Self, ApiError> {
        let Value::Object(map) = value else {
            return Err(bad("rerank", "rerank must be an object"));
        };
        let mut rerank = RetrieveRerank::default();
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
                "candidates" => rerank.candidates = Some(n),
                _ => rerank.top_n = Some(n),
            }
        }
        if rerank
            .top_n
            .is_some_and(|n| n > rerank.candidates.unwrap_or(DEFAULT_RERANK_CANDIDATES))
        {
            return Err(bad("rerank.top_n", "rerank.top_n must not exceed rerank.candidates"));
        }
        Ok(rerank)
    }
}

/// Largest fusion weight taken.
const MAX_FUSION_WEIGHT: f64 = 100.0;

impl RetrieveFusion {
    /// `{"method": "auto"|"rrf"|"dbsf", "dense_weight": w, "sparse_weight": w}`: weights (0 to
    /// 100, not both 0, default 1) go with `rrf` only.
    fn parse(value: &Value) -> Result<Self, ApiError> {
        let Value::Object(map) = value else {
            return Err(bad("fusion", "fusion must be an object"));
        };
        let mut fusion = RetrieveFusion::default();
        for (key, value) in map {
            let field = format!("fusion.{key}");
            if value.is_null() {
                continue;
            }
            match key.as_str() {
                "method" => {
                    fusion.method = Some(match value.as_str() {
                        Some("auto") => RetrieveFusionMethod::Auto,
                        Some("rrf") => RetrieveFusionMethod::Rrf,
                        Some("dbsf") => RetrieveFusionMethod::Dbsf,
                        _ => return Err(bad(&field, "fusion.method must be `auto`, `rrf` or `dbsf`")),
                    });
                }
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
                    if key == "dense_weight" {
                        fusion.dense_weight = Some(weight);
                    } else {
                        fusion.sparse_weight = Some(weight);
                    }
                }
                _ => {
                    return Err(bad(
                        &field,
                        format!("unknown fusion key `{key}` (use method, dense_weight or sparse_weight)"),
                    ));
                }
            }
        }
        let weighted = fusion.dense_weight.is_some() || fusion.sparse_weight.is_some();
        match fusion.method {
            None | Some(RetrieveFusionMethod::Rrf) if weighted => {
                if fusion.dense_weight.unwrap_or(1.0) == 0.0 && fusion.sparse_weight.unwrap_or(1.0) == 0.0 {
                    return Err(bad("fusion.dense_weight", "fusion weights must not both be 0"));
                }
            }
            Some(method) if weighted => {
                let name = if method == RetrieveFusionMethod::Dbsf {
                    "dbsf"
                } else {
                    "auto"
                };
                return Err(bad(
                    "fusion.method",
                    format!("weights go with fusion.method `rrf`, not `{name}`"),
                ));
            }
            _ => {}
        }
        Ok(fusion)
    }

    /// The fusion the service runs: weights alone mean `rrf`.
    fn choice(self) -> FusionChoice {
        let weighted = self.dense_weight.is_some() || self.sparse_weight.is_some();
        match self.method {
            Some(RetrieveFusionMethod::Rrf) => FusionChoice::Given(self.rrf()),
            None if weighted => FusionChoice::Given(self.rrf()),
            Some(RetrieveFusionMethod::Dbsf) => FusionChoice::Given(Fusion::Dbsf),
            _ => FusionChoice::Auto,
        }
    }

    fn rrf(self) -> Fusion {
        Fusion::Rrf {
            dense_weight: self.dense_weight.unwrap_or(1.0) as f32,
            sparse_weight: self.sparse_weight.unwrap_or(1.0) as f32,
        }
    }
}

/// Most entries in one list of a filter.
const MAX_FILTER_ENTRIES: usize = 1000;

impl RetrieveFilter {
    /// `{"source_ids": [uuid…], "book_numbers": [n…], "filenames": [name…], "metadata": {k: v…}}`:
    /// each list optional, non-empty when given, at most 1000 entries; `metadata` 1 to 64 keys
    /// with string values, as sources take them; any other key is refused.
    fn parse(value: &Value) -> Result<Self, ApiError> {
        let Value::Object(map) = value else {
            return Err(bad("filter", "filter must be an object"));
        };
        let mut filter = RetrieveFilter::default();
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
                        .map(|v| v.as_str().and_then(|s| s.parse::<Uuid>().ok()))
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

    fn into_filter(self) -> SourceFilter {
        SourceFilter {
            source_ids: self.source_ids.map(|ids| ids.into_iter().map(SourceId).collect()),
            book_numbers: self.book_numbers,
            filenames: self.filenames,
            metadata: self.metadata,
            ..SourceFilter::default()
        }
    }
}

fn min_score(value: &Value) -> Result<f64, ApiError> {
    let Value::Number(n) = value else {
        return Err(bad("min_score", "min_score must be a number between 0.0 and 1.0"));
    };
    let score = n
        .as_f64()
        .ok_or_else(|| bad("min_score", "min_score must be a number between 0.0 and 1.0"))?;
    if !(0.0..=1.0).contains(&score) {
        return Err(bad("min_score", "min_score must be between 0.0 and 1.0"));
    }
    Ok(score)
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
/// (`8.0`) is the integer it is, as JSON Schema counts it (see [`super::super::de`]).
fn bounded_integer(field: &str, value: &Value, max: u64) -> Result<u64, ApiError> {
    let n = natural(value).ok_or_else(|| bad(field, format!("{field} must be a non-negative integer")))?;
    if n > max {
        return Err(bad(field, format!("{field} must be at most {max}")));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: Value) -> Result<RetrieveRequest, ApiError> {
        let Value::Object(map) = body else { panic!("an object") };
        RetrieveRequest::parse(map.into())
    }

    #[test]
    fn defaults_and_each_setting_reach_the_service() {
        let plain = parse(json!({"query": "q"})).unwrap().settings();
        assert_eq!(plain.top_k, DEFAULT_TOP_K);
        assert!(matches!(plain.expand, Expand::Parent));
        assert!(matches!(plain.mode, Mode::Dense));
        assert!(matches!(plain.fusion, FusionChoice::Auto));
        let s = parse(json!({"query": "q", "top_k": 3.0, "mode": "hybrid", "neighbors": 2,
                             "fusion": {"sparse_weight": 2}, "rerank": {"top_n": 4}, "explain": true,
                             "filter": {"book_numbers": [2]}, "hnsw_ef": 64, "max_context_tokens": 900}))
        .unwrap()
        .settings();
        assert_eq!(s.top_k, 3);
        assert!(matches!(s.expand, Expand::Neighbors(2)));
        assert!(matches!(
            s.fusion,
            FusionChoice::Given(Fusion::Rrf { dense_weight, sparse_weight }) if dense_weight == 1.0 && sparse_weight == 2.0
        ));
        let rerank = s.rerank.unwrap();
        assert_eq!((rerank.candidates, rerank.top_n), (DEFAULT_RERANK_CANDIDATES, Some(4)));
        assert!(s.explain);
        assert_eq!(s.filter.unwrap().book_numbers, Some(vec![2]));
        assert_eq!((s.hnsw_ef, s.max_context_tokens), (Some(64), Some(900)));
    }

    #[test]
    fn refusals_name_their_field_and_say_which_kind() {
        for (body, code, field) in [
            (
                json!({"query": "q", "top_k": "8"}),
                ErrorCode::InvalidRetrievalSettings,
                "top_k",
            ),
            (
                json!({"query": "q", "fusion": {"k": 60}, "mode": "hybrid"}),
                ErrorCode::InvalidRetrievalSettings,
                "fusion.k",
            ),
            (
                json!({"query": "q", "fusion": {"method": "rrf"}}),
                ErrorCode::InvalidRetrievalSettings,
                "fusion",
            ),
            (
                json!({"query": "q", "expand": "none", "neighbors": 1}),
                ErrorCode::InvalidRetrievalSettings,
                "expand",
            ),
            (
                json!({"query": "q", "rerank": {"candidates": 5, "top_n": 6}}),
                ErrorCode::InvalidRetrievalSettings,
                "rerank.top_n",
            ),
            (json!({"query": "q", "topk": 1}), ErrorCode::InvalidRequest, "topk"),
            (json!({"top_k": 1}), ErrorCode::InvalidRequest, "query"),
            (json!({"query": 1}), ErrorCode::InvalidRequest, "query"),
            // A setting is judged before the query.
            (
                json!({"query": 1, "top_k": -1}),
                ErrorCode::InvalidRetrievalSettings,
                "top_k",
            ),
        ] {
            let err = parse(body.clone()).unwrap_err();
            assert_eq!(err.code, code, "{body}");
            assert_eq!(err.details.as_ref().unwrap()["field"], field, "{body}");
        }
    }
}
