//! Retrieval: a query in, verified chunk text out.
//!
//! The order of work is fixed (`docs/DESIGN.md`, "Retrieval flow"): settings are validated before
//! anything is looked up (at the edge, by `api::retrieve`) → the world is loaded (with its active run's
//! embedded chunks counted up to `top_k` in the same store round trip) → a blank query is refused
//! → `top_k = 0` answers at once → no embedded chunks: an empty answer with a warning, no provider
//! call; otherwise `top_k` is clamped to that count → the stripped query is embedded in query mode
//! with the world's locked profile, through the key scheduler's priority lane (counted exactly
//! first, and refused over the model's limit, unless it is too short to be over it: see
//! [`fits_uncounted`]) → the profile's collection is searched, filtered by world and active run,
//! with `min_score` applied inside the query → every hit is verified against the store → results
//! are sorted and the context is built from chunk text only, within a token budget (hits first,
//! then their neighbours: see `fit_context`; the results are never cut).
//!
//! Verification trusts the vector store for candidates and scores only. A hit whose slot has
//! no chunk any more is an orphan point: it is skipped (warning `chunk_missing`) and deleted
//! (repair `orphan_point_deleted`; quarry's manifest entries live and die with their chunks,
//! so there is no entry left to mark). A hit whose chunk text hash differs from the point's
//! (or whose payload does not parse) is stale: it is skipped (warning `stale_point`), the
//! point is deleted and the slot's entry goes back to pending under the world's `repair` job
//! (repair `stale_point_deleted`), so the workers embed the current text again. Repairs never
//! touch chunk text, and failures of the repair itself never fail the query.
//!
//! **Head starts.** The service remembers, per world, what the store said at the previous
//! retrieval (the world row and whether it had embedded chunks). When it has such a hint and the
//! request would pass the checks on it, the query is embedded and searched with the remembered
//! world *while* the store is read again, instead of after: the store read leaves the critical
//! path (it was about a tenth of a request's time against the 100k-chunk benchmark world). The
//! store's answer still decides everything: the work done ahead is used only if the fresh row
//! names the same profile, collection, active run and hybrid flag and still has embedded chunks;
//! otherwise it is discarded and the request runs the ordinary way on the fresh row, and every
//! check (404, blank query, hybrid, `top_k = 0`, no embedded chunks, the clamp) runs on the
//! fresh row either way. Answers are therefore the same as without head starts; what can
//! differ is one provider call: the first query after a world lost all its embedded chunks, was
//! deleted, or switched to a new run (a re-ingest) makes one that is thrown away.
//! Nothing is cached across processes, so processes sharing a PostgreSQL store need no
//! invalidation. `/metrics` counts head starts used and discarded
//! (`quarry_retrieval_head_starts_total`).
//!
//! Hybrid mode fuses a dense and a BM25 prefetch by reciprocal rank fusion inside the vector
//! store. There `min_score` thresholds the dense candidates (cosine) while BM25 candidates
//! are not thresholded, and the returned `score` is the fused rank score, not a cosine.
//!
//! The files: this one holds the types, the service and the order of work; `search.rs` embeds
//! the query and searches; `verify.rs` checks hits against the store and repairs what it finds;
//! `context.rs` assembles the context within its token budget.

pub mod conditions;
mod context;
mod explain;
mod pipeline;

mod rerank;
mod search;
mod verify;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::{Conflict, Invalid, Missing, ServiceError, ServiceResult, Unprocessable};
use crate::chunking::TokenCounter;
use crate::domain::{ChunkId, ChunkView, Metadata, Parent, SourceDetails, SourceId, SourceSize, World, WorldId};
use crate::jobs::JobEngine;
use crate::providers::Providers;
use crate::providers::scheduler::{AcquireError, KeyScheduler, Lane, Outcome};
use crate::providers::{CountFailure, EmbedMode, EmbedRequest, ModelRegistry, ProviderError, fits_uncounted};
use crate::store::Store;
use crate::vector::{DenseSearch, Fusion, HybridSearch, PointFilter, ScoredPoint, VectorRepo};
pub use explain::{Explanation, HitExplain, Removed, Standing};
pub use search::has_literal_terms;

/// `top_k` when the request does not say.
pub const DEFAULT_TOP_K: u64 = 8;
/// The largest `top_k` accepted: more is a bulk export, not a retrieval.
pub const MAX_TOP_K: u64 = 1000;
/// The most neighbours stitched on each side of a hit.
pub const MAX_NEIGHBORS: u32 = 3;
/// Candidates each hybrid prefetch contributes at least.
const MIN_PREFETCH: usize = 20;
/// Query embedding attempts when keys fail one after another (each on a fresh key).
const EMBED_ATTEMPTS: usize = 3;
/// Longest query taken, in UTF-8 bytes: no model here takes more than 8,192 tokens, which is
/// about 35 kB of English. A longer one is refused (422 `input_too_large`) before it is
/// tokenized, so a huge query costs no CPU on the runtime and no provider quota.
pub const MAX_QUERY_BYTES: usize = 64 * 1024;

/// How hits are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Dense,
    Hybrid,
    /// The whole corpus as the context when it fits `retrieval.full_context_threshold` (and
    /// the budget), else the world's search (hybrid with fusion by the query on a hybrid
    /// world, dense otherwise).
    Auto,
    /// The whole corpus as the context, in reading order, whatever its size (cut to the
    /// budget); no query embedding, no search.
    Full,
}

/// Validated retrieval settings (parsed from the request at the edge, `api::retrieve`).
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub top_k: u64,
    pub min_score: f32,
    pub mode: Mode,
    /// How hits are widened in the context.
    pub expand: Expand,
    /// The context's token budget; `None`: the service's default (`retrieval.max_context_tokens`).
    pub max_context_tokens: Option<u32>,
    /// Only chunks of the sources this matches; `None`: the whole world.
    pub filter: Option<SourceFilter>,
    /// How a hybrid search fuses (ignored by dense searches).
    pub fusion: FusionChoice,
    /// Rerank the search's candidates (needs `providers.rerank`).
    pub rerank: Option<Rerank>,
    /// Explain the answer: each hit's standing in the dense and BM25 rankings, and why other
    /// candidates are not in it.
    pub explain: bool,
    /// The HNSW beam width of this search (`None`: `vectors.search.hnsw_ef`); must lie within
    /// `vectors.search.min_hnsw_ef` and `max_hnsw_ef`.
    pub hnsw_ef: Option<u32>,
    /// Background work (an evaluation run), not a caller waiting: the query is embedded in the
    /// world's ingestion lane of the key scheduler, taking its turn with the world's ingestion
    /// instead of going first, so that a long evaluation cannot starve it. Never set from a
    /// request.
    pub background: bool,
    /// Search this run of the world (one served or being built) instead of the one it serves:
    /// a gated re-ingest's evaluation of its new index. Never set from a request.
    pub on_run: Option<crate::domain::RunId>,
}

/// Reranking: how many candidates the search hands the reranker, and how many it keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rerank {
    pub candidates: u64,
    /// `None`: `top_k`.
    pub top_n: Option<u64>,
}

/// Most candidates one rerank takes.
pub const MAX_RERANK_CANDIDATES: u64 = 1000;
/// Candidates when the request does not say.
pub const DEFAULT_RERANK_CANDIDATES: u64 = 50;

/// How each hit is widened in the context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Expand {
    /// The hit alone.
    #[default]
    None,
    /// Up to this many chunks of the same source on each side.
    Neighbors(u32),
    /// The hit's parent (small-to-large): the run of chunks it was partitioned into, cut
    /// around the matched chunks when it does not fit.
    Parent,
}

/// The fusion a hybrid retrieval asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum FusionChoice {
    /// By the query: distribution-based score fusion when it carries literal terms
    /// (identifiers, codes, paths, quotes: [`has_literal_terms`]), the dense ranking alone when
    /// it is plain words. Chosen by `make bench-quality` (BENCHMARKS.md).
    #[default]
    Auto,
    Given(Fusion),
}

/// The search a retrieval ran.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum SearchUsed {
    #[default]
    Dense,
    Hybrid(Fusion),
    /// No search: the whole corpus is the context.
    FullContext,
}

/// A parent that holds hits (`expand: parent`).
#[derive(Clone, Debug, PartialEq)]
pub struct MatchedParent {
    pub parent: Parent,
    pub book_number: u32,
    /// The best score of its hits.
    pub score: f32,
    /// Its hits: their indexes in `results` and chunk ids, best first.
    pub result_indexes: Vec<usize>,
    pub children: Vec<ChunkId>,
}

/// The corpus a full-context decision looked at: the world's active run, or the sources a
/// filter keeps. Chunks count whatever their embedding state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CorpusStats {
    pub sources: u64,
    pub chunks: u64,
    /// The chunks' `token_count`s summed.
    pub tokens: u64,
}

/// Which sources a retrieval searches. Each given part must match (a source is kept when it is
/// in every list given and has the metadata); within a list, any entry matches, while every key
/// of `metadata` must have its value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceFilter {
    pub source_ids: Option<Vec<SourceId>>,
    pub book_numbers: Option<Vec<u32>>,
    pub filenames: Option<Vec<String>>,
    pub metadata: Option<Metadata>,
    /// Conditions on the metadata beyond exact values (Dify's `metadata_condition`).
    pub conditions: Option<conditions::Conditions>,
}

impl SourceFilter {
    pub fn matches(&self, source: &crate::domain::Source) -> bool {
        self.source_ids.as_ref().is_none_or(|ids| ids.contains(&source.id))
            && self
                .book_numbers
                .as_ref()
                .is_none_or(|n| n.contains(&source.book_number))
            && self.filenames.as_ref().is_none_or(|f| f.contains(&source.filename))
            && self
                .metadata
                .as_ref()
                .is_none_or(|m| m.is_within(&source.details.metadata))
            && self
                .conditions
                .as_ref()
                .is_none_or(|c| c.holds(&source.details.metadata))
    }
}

/// One verified hit.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    pub chunk: ChunkView,
    /// Its source's title, URL and metadata (shared by the hits of one source).
    pub source: Arc<SourceDetails>,
    pub score: f32,
    /// The reranker's relevance score, when the hits were reranked.
    pub rerank_score: Option<f32>,
    /// Other hits with exactly the same text (same hash), folded into this one: their chunks.
    pub duplicates: Vec<ChunkId>,
}

/// Where one chunk of the context comes from. `n` is the number of its passage in the context
/// text (`[n]`); `result_index` the hit it is, or, for a neighbour, its passage's best hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Citation {
    pub n: u32,
    /// `None` in full-context answers, which have no results.
    pub result_index: Option<usize>,
    pub chunk_id: ChunkId,
    pub source_id: SourceId,
    pub book_number: u32,
    pub chunk_number: u32,
    /// The cited text's span in the source's stored text, in chars (a chunk cut to fit the
    /// budget ends where the cut does).
    pub char_start: u64,
    pub char_end: u64,
    /// For a PDF's chunk, the page it starts on.
    pub page: Option<u32>,
}

/// How much the answer is worth trusting, for the caller to tell its model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QualityLevel {
    /// A dense best hit of cosine ≥ [`HIGH_SCORE`], or ≥ [`LOW_SCORE`] and clear of the next
    /// hit by [`CLEAR_GAP`].
    High,
    /// Hits, but none of them convincing by the rule above.
    Low,
    /// No hits.
    None,
    /// Fused scores are not similarities, and a full-context answer has no hits: not judged.
    Unrated,
}

/// A best dense score at least this high makes an answer `high` quality.
pub const HIGH_SCORE: f32 = 0.5;
/// A best dense score at least this high, clear of the second by [`CLEAR_GAP`], does too.
pub const LOW_SCORE: f32 = 0.3;
pub const CLEAR_GAP: f32 = 0.1;

/// The quality signal: the level, and the figures it was judged from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quality {
    pub level: QualityLevel,
    pub best_score: Option<f32>,
    /// Best score less the second best (`None` with fewer than two hits).
    pub score_gap: Option<f32>,
}

impl Default for Quality {
    fn default() -> Self {
        Quality {
            level: QualityLevel::None,
            best_score: None,
            score_gap: None,
        }
    }
}

impl Quality {
    fn judge(results: &[Hit], used: SearchUsed) -> Quality {
        let best_score = results.first().map(|h| h.score);
        let score_gap = match results {
            [first, second, ..] => Some(first.score - second.score),
            _ => None,
        };
        let level = match (best_score, used) {
            (None, _) => QualityLevel::None,
            (Some(_), SearchUsed::Hybrid(_) | SearchUsed::FullContext) => QualityLevel::Unrated,
            (Some(best), SearchUsed::Dense) => {
                let clear = score_gap.is_none_or(|gap| gap >= CLEAR_GAP);
                if best >= HIGH_SCORE || (best >= LOW_SCORE && clear) {
                    QualityLevel::High
                } else {
                    QualityLevel::Low
                }
            }
        };
        Quality {
            level,
            best_score,
            score_gap,
        }
    }
}

/// Why an answer warns: every code a retrieval answers with, in one table (beside the job
/// warnings' [`crate::domain::WarningCode`]). The answer is still an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WarningCode {
    /// The world has nothing embedded yet: nothing was searched.
    NoEmbeddedChunks,
    /// No source matches the filter: nothing was searched.
    FilterMatchedNothing,
    /// Hits pointed at chunks that no longer exist (skipped; their points deleted).
    ChunkMissing,
    /// Hits pointed at chunks whose text changed (skipped; queued for embedding again).
    StalePoint,
    /// Chunks were left out of the context to keep it within the budget.
    ContextTruncated,
    /// The best hit was larger than the budget and is cut at a sentence boundary.
    ContextCut,
    /// Parents could not be built for some hits: those hits stand alone.
    ParentsMissing,
    /// The reranker failed or timed out: the search's order stands.
    RerankUnavailable,
}

impl WarningCode {
    pub const ALL: [WarningCode; 8] = [
        WarningCode::NoEmbeddedChunks,
        WarningCode::FilterMatchedNothing,
        WarningCode::ChunkMissing,
        WarningCode::StalePoint,
        WarningCode::ContextTruncated,
        WarningCode::ContextCut,
        WarningCode::ParentsMissing,
        WarningCode::RerankUnavailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WarningCode::NoEmbeddedChunks => "no_embedded_chunks",
            WarningCode::FilterMatchedNothing => "filter_matched_nothing",
            WarningCode::ChunkMissing => "chunk_missing",
            WarningCode::StalePoint => "stale_point",
            WarningCode::ContextTruncated => "context_truncated",
            WarningCode::ContextCut => "context_cut",
            WarningCode::ParentsMissing => "parents_missing",
            WarningCode::RerankUnavailable => "rerank_unavailable",
        }
    }
}

/// A warning about the answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pub code: WarningCode,
    pub message: String,
}

/// What a retrieval repaired while verifying its hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepairKind {
    /// The point's chunk changed: the point is deleted and the slot queued for embedding again.
    StalePointDeleted,
    /// The point's chunk no longer exists: the point is deleted.
    OrphanPointDeleted,
}

impl RepairKind {
    pub const ALL: [RepairKind; 2] = [RepairKind::StalePointDeleted, RepairKind::OrphanPointDeleted];

    pub fn as_str(self) -> &'static str {
        match self {
            RepairKind::StalePointDeleted => "stale_point_deleted",
            RepairKind::OrphanPointDeleted => "orphan_point_deleted",
        }
    }
}

/// A repair made while verifying.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    pub point_id: Uuid,
    pub kind: RepairKind,
}

/// Milliseconds spent per phase.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timing {
    pub embed_ms: f64,
    pub search_ms: f64,
    pub verify_ms: f64,
    pub rerank_ms: f64,
    pub total_ms: f64,
}

/// The answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Retrieval {
    pub results: Vec<Hit>,
    /// Chunk texts for a model's context: the hits (with neighbours when asked) and nothing else.
    pub context: Vec<String>,
    /// The context as one text: each passage marked `[n] `, passages apart by a blank line.
    pub context_text: String,
    /// One per context chunk, in the same order.
    pub citations: Vec<Citation>,
    pub quality: Quality,
    /// The search that ran (`None`: none did).
    pub search_used: Option<SearchUsed>,
    /// The corpus's size, in `auto` and `full` modes.
    pub corpus: Option<CorpusStats>,
    /// With `expand: parent`: each parent a hit belongs to, once, best first.
    pub parents: Vec<MatchedParent>,
    /// With `explain: true`, when a search ran.
    pub explain: Option<Explanation>,
    pub requested_top_k: u64,
    pub effective_top_k: u64,
    pub warnings: Vec<Warning>,
    pub repairs: Vec<Repair>,
    pub timing: Timing,
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// The most worlds [`RetrievalService`] remembers for head starts; past it the memory starts over.
const MAX_HINTS: usize = 4096;

/// What the previous retrieval of a world read from the store: enough to embed and search
/// while the store is asked again.
#[derive(Clone)]
struct Hint {
    world: World,
    embedded: u64,
}

/// How often retrievals started ahead of the store, and how that ended.
#[derive(Debug, Default)]
struct HeadStarts {
    /// The store confirmed the remembered world: the work done ahead was the answer.
    used: AtomicU64,
    /// The world had changed (or gone, or lost its embedded chunks): the work was thrown away.
    discarded: AtomicU64,
}

/// Counts of retrievals that started ahead of the store (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeadStartCounts {
    pub used: u64,
    pub discarded: u64,
}

pub struct RetrievalService {
    store: Arc<dyn Store>,
    vectors: Arc<dyn VectorRepo>,
    registry: Arc<ModelRegistry>,
    scheduler: KeyScheduler,
    providers: Providers,
    engine: JobEngine,
    /// The last store answer per world, for head starts.
    hints: Mutex<HashMap<WorldId, Hint>>,
    head_starts: HeadStarts,
    limits: RetrievalLimits,
}

/// Bounds a retrieval works within.
#[derive(Clone, Copy, Debug)]
pub struct RetrievalLimits {
    /// The context's token budget when a request names none (`retrieval.max_context_tokens`).
    pub max_context_tokens: u32,
    /// Longest the query's embedding may take, key waits and retries included; past it the
    /// answer is 502 `provider_error`. See [`RetrievalLimits::for_request_timeout`].
    pub query_budget: Duration,
    /// `mode: auto` answers with the whole corpus at most this many tokens (and the budget).
    pub full_context_threshold: u32,
    /// The bounds of a request's `hnsw_ef` (`vectors.search.min_hnsw_ef`, `max_hnsw_ef`).
    pub hnsw_ef_range: (u32, u32),
}

impl RetrievalLimits {
    /// Limits that leave room, inside a request timeout of `request_timeout`, to answer a
    /// query whose embedding is too slow with a clear 502 instead of the server's generic 408:
    /// the embedding gets the timeout less a quarter of it, or less 2 s when that is smaller.
    pub fn for_request_timeout(max_context_tokens: u32, request_timeout: Duration) -> Self {
        let margin = (request_timeout / 4).min(Duration::from_secs(2));
        Self {
            max_context_tokens,
            query_budget: request_timeout.saturating_sub(margin),
            full_context_threshold: 30_000,
            hnsw_ef_range: (16, 1024),
        }
    }

    #[must_use]
    pub fn with_hnsw_ef_range(self, min: u32, max: u32) -> Self {
        Self {
            hnsw_ef_range: (min, max),
            ..self
        }
    }

    #[must_use]
    pub fn with_full_context_threshold(self, full_context_threshold: u32) -> Self {
        Self {
            full_context_threshold,
            ..self
        }
    }
}

/// Embedding and search done for one world, with their times.
struct Found {
    hits: Vec<ScoredPoint>,
    used: SearchUsed,
    /// The query's vector (for `explain`, and for a deeper search).
    vector: Vec<f32>,
    /// What was searched.
    plan: search::SearchPlan,
    embed_ms: f64,
    search_ms: f64,
}

/// Whether two readings of a world would embed and search the same way.
fn same_target(a: &World, b: &World) -> bool {
    a.embedding == b.embedding && a.collection == b.collection && a.active_run == b.active_run && a.hybrid == b.hybrid
}

impl RetrievalService {
    pub fn new(deps: &crate::deps::Deps, limits: RetrievalLimits) -> Self {
        Self {
            store: deps.store.clone(),
            vectors: deps.vectors.clone(),
            registry: deps.registry.clone(),
            scheduler: deps.scheduler.clone(),
            providers: deps.providers.clone(),
            engine: deps.engine.clone(),
            hints: Mutex::new(HashMap::new()),
            head_starts: HeadStarts::default(),
            limits,
        }
    }

    /// How many retrievals started ahead of the store so far, used and discarded.
    pub fn head_starts(&self) -> HeadStartCounts {
        HeadStartCounts {
            used: self.head_starts.used.load(Ordering::Relaxed),
            discarded: self.head_starts.discarded.load(Ordering::Relaxed),
        }
    }

    fn hints(&self) -> MutexGuard<'_, HashMap<WorldId, Hint>> {
        // A map of plain values: a panic elsewhere cannot leave it half-written.
        self.hints.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers what the store said about `world_id` (`None`: it does not exist).
    fn remember(&self, world_id: WorldId, found: Option<&(World, u64)>) {
        let mut hints = self.hints();
        match found {
            Some((world, embedded)) => {
                if hints.len() >= MAX_HINTS && !hints.contains_key(&world_id) {
                    hints.clear();
                }
                hints.insert(
                    world_id,
                    Hint {
                        world: world.clone(),
                        embedded: *embedded,
                    },
                );
            }
            None => {
                hints.remove(&world_id);
            }
        }
    }

    /// The checks of `settings` against this server's configuration (the `hnsw_ef` bounds, a
    /// reranker configured), which the edge cannot make.
    pub fn check_settings(&self, settings: &Settings) -> ServiceResult<()> {
        let (min_ef, max_ef) = self.limits.hnsw_ef_range;
        if let Some(ef) = settings.hnsw_ef
            && !(min_ef..=max_ef).contains(&ef)
        {
            return Err(ServiceError::invalid(
                Invalid::RetrievalSettings,
                "hnsw_ef",
                format!("hnsw_ef must be between {min_ef} and {max_ef} (vectors.search.min_hnsw_ef and max_hnsw_ef)"),
            ));
        }
        if settings.rerank.is_some() && self.providers.reranker().is_none() {
            return Err(ServiceError::invalid(
                Invalid::RetrievalSettings,
                "rerank",
                "no reranker is configured (providers.rerank.base_url)",
            ));
        }
        Ok(())
    }

    /// Runs one retrieval with settings already validated at the edge (`api::retrieve`).
    pub async fn retrieve(&self, world_id: WorldId, query: &str, settings: &Settings) -> ServiceResult<Retrieval> {
        self.check_settings(settings)?;
        let started = Instant::now();
        let (answer, used) = self.retrieve_once(world_id, query, settings, started).await?;
        // A re-ingest may have switched the world to its new run while this query ran on the
        // old one, whose points and rows go right after the switch: the search or its
        // verification then comes up short. Then the query runs once more, on the run the world
        // serves now, so that an answer comes from one run or the other, never from a run
        // half gone. (An answer short for other reasons, `min_score` say, costs one read.)
        let Some(run) = used else { return Ok(answer) };
        if settings.on_run.is_some() {
            // A run named is searched as it is, switched to or not.
            return Ok(answer);
        }
        if (answer.results.len() as u64) >= answer.effective_top_k {
            return Ok(answer);
        }
        match self.store.world_for_retrieval(world_id, 1).await? {
            Some((now, _)) if now.active_run != run => {
                tracing::debug!(world = %world_id, "the world switched runs during a retrieval; asking again");
                Ok(self.retrieve_once(world_id, query, settings, started).await?.0)
            }
            _ => Ok(answer),
        }
    }
}
