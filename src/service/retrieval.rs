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

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::{Conflict, Invalid, Missing, ServiceError, ServiceResult, Unprocessable};
use crate::domain::{ChunkId, ChunkView, RunId, SourceId, World, WorldId};
use crate::jobs::JobEngine;
use crate::providers::Providers;
use crate::providers::scheduler::{AcquireError, KeyScheduler, Lane, Outcome};
use crate::providers::{CountFailure, EmbedMode, EmbedRequest, ModelRegistry, ProviderError, fits_uncounted};
use crate::store::Store;
use crate::vector::{DenseSearch, HybridSearch, PointFilter, ScoredPoint, VectorRepo};

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
}

/// Validated retrieval settings (parsed from the request at the edge, `api::retrieve`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    pub top_k: u64,
    pub min_score: f32,
    pub mode: Mode,
    pub neighbors: u32,
    /// The context's token budget; `None`: the service's default (`retrieval.max_context_tokens`).
    pub max_context_tokens: Option<u32>,
}

/// One verified hit.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    pub chunk: ChunkView,
    pub score: f32,
}

/// A warning about the answer (`no_embedded_chunks`, `chunk_missing`, `stale_point`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pub code: &'static str,
    pub message: String,
}

/// A repair made while verifying (`stale_point_deleted`, `orphan_point_deleted`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    pub point_id: Uuid,
    pub kind: &'static str,
}

/// Milliseconds spent per phase.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timing {
    pub embed_ms: f64,
    pub search_ms: f64,
    pub verify_ms: f64,
    pub total_ms: f64,
}

/// The answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Retrieval {
    pub results: Vec<Hit>,
    /// Chunk texts for a model's context: the hits (with neighbours when asked) and nothing else.
    pub context: Vec<String>,
    pub requested_top_k: u64,
    pub effective_top_k: u64,
    pub warnings: Vec<Warning>,
    pub repairs: Vec<Repair>,
    pub timing: Timing,
}

impl Retrieval {
    /// The context chunks joined by a blank line.
    pub fn context_text(&self) -> String {
        self.context.join("\n\n")
    }
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
        }
    }
}

/// Embedding and search done for one world, with their times.
struct Found {
    hits: Vec<ScoredPoint>,
    embed_ms: f64,
    search_ms: f64,
}

/// Whether two readings of a world would embed and search the same way.
fn same_target(a: &World, b: &World) -> bool {
    a.embedding == b.embedding && a.collection == b.collection && a.active_run == b.active_run && a.hybrid == b.hybrid
}

impl RetrievalService {
    pub fn new(
        store: Arc<dyn Store>,
        vectors: Arc<dyn VectorRepo>,
        registry: Arc<ModelRegistry>,
        scheduler: KeyScheduler,
        providers: Providers,
        engine: JobEngine,
        limits: RetrievalLimits,
    ) -> Self {
        Self {
            store,
            vectors,
            registry,
            scheduler,
            providers,
            engine,
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

    /// Runs one retrieval with settings already validated at the edge (`api::retrieve`).
    pub async fn retrieve(&self, world_id: WorldId, query: &str, settings: Settings) -> ServiceResult<Retrieval> {
        let started = Instant::now();
        let (answer, used) = self.retrieve_once(world_id, query, settings, started).await?;
        // A re-ingest may have switched the world to its new run while this query ran on the
        // old one, whose points and rows go right after the switch: the search or its
        // verification then comes up short. Then the query runs once more, on the run the world
        // serves now, so that an answer comes from one run or the other, never from a run
        // half gone. (An answer short for other reasons, `min_score` say, costs one read.)
        let Some(run) = used else { return Ok(answer) };
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

    /// One retrieval on the world as read now; also the run searched, when one was.
    async fn retrieve_once(
        &self,
        world_id: WorldId,
        query: &str,
        settings: Settings,
        started: Instant,
    ) -> ServiceResult<(Retrieval, Option<RunId>)> {
        let stripped = query.trim();
        // A head start only where the checks below would pass on the remembered world.
        let hint = self
            .hints()
            .get(&world_id)
            .filter(|h| {
                !stripped.is_empty()
                    && settings.top_k > 0
                    && h.embedded > 0
                    && (settings.mode == Mode::Dense || h.world.hybrid)
            })
            .cloned();
        // The world and its embedded chunks (up to `top_k`, and at least one so that the hint
        // knows whether there are any) come in one store round trip; the count is only looked
        // at after the checks below. With a hint, the query is embedded and searched
        // (unclamped: the count may have grown) meanwhile.
        let count_to = settings.top_k.max(1);
        let (read, ahead) = match hint {
            Some(hint) => {
                let (read, found) = tokio::join!(
                    self.store.world_for_retrieval(world_id, count_to),
                    self.embed_and_search(&hint.world, stripped, settings.top_k, settings)
                );
                (read, Some((hint.world, found)))
            }
            None => (self.store.world_for_retrieval(world_id, count_to).await, None),
        };
        let read = read?;
        self.remember(world_id, read.as_ref());
        // What was done ahead stands only if the store confirms the world it was done for;
        // every check below then still runs on the confirmed world.
        let ahead = ahead.and_then(|(guess, found)| {
            let confirmed = read
                .as_ref()
                .is_some_and(|(world, embedded)| *embedded > 0 && same_target(&guess, world));
            let counter = match confirmed {
                true => &self.head_starts.used,
                false => &self.head_starts.discarded,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            confirmed.then_some(found)
        });
        let (world, embedded) = read.ok_or(ServiceError::NotFound(Missing::World))?;
        let query = stripped;
        if query.is_empty() {
            return Err(ServiceError::invalid(
                Invalid::EmptyQuery,
                "query",
                "query must contain non-whitespace text",
            ));
        }
        if settings.mode == Mode::Hybrid && !world.hybrid {
            return Err(ServiceError::invalid(
                Invalid::RetrievalSettings,
                "mode",
                "mode `hybrid` needs a world created with `hybrid: true`; this world stores dense vectors only",
            ));
        }
        let mut answer = Retrieval {
            requested_top_k: settings.top_k,
            ..Retrieval::default()
        };
        if settings.top_k == 0 {
            answer.timing.total_ms = ms(started.elapsed());
            return Ok((answer, None));
        }
        if embedded == 0 {
            answer.warnings.push(Warning {
                code: "no_embedded_chunks",
                message: "the world has no embedded chunks yet; nothing was searched".into(),
            });
            answer.timing.total_ms = ms(started.elapsed());
            return Ok((answer, None));
        }
        let limit = settings.top_k.min(embedded);
        answer.effective_top_k = limit;

        let found = match ahead {
            Some(found) => found?,
            None => self.embed_and_search(&world, query, limit, settings).await?,
        };
        answer.timing.embed_ms = found.embed_ms;
        answer.timing.search_ms = found.search_ms;
        let hits = found.hits;

        let phase = Instant::now();
        self.verify(&world, hits, &mut answer).await?;
        answer.results.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.chunk.chunk.book_number.cmp(&b.chunk.chunk.book_number))
                .then(a.chunk.chunk.chunk_number.cmp(&b.chunk.chunk.chunk_number))
        });
        answer.results.truncate(limit as usize);
        let budget = settings.max_context_tokens.unwrap_or(self.limits.max_context_tokens);
        let passages = self.passages(&world, &answer.results, settings.neighbors).await?;
        let (context, left_out) = fit_context(passages, budget);
        if left_out > 0 {
            answer.warnings.push(Warning {
                code: "context_truncated",
                message: format!(
                    "{left_out} chunk(s) were left out of the context to keep it within {budget} tokens \
                     (max_context_tokens); the results are complete"
                ),
            });
        }
        answer.context = context;
        answer.timing.verify_ms = ms(phase.elapsed());
        answer.timing.total_ms = ms(started.elapsed());
        Ok((answer, Some(world.active_run)))
    }

    /// Embeds the query and searches the world for `limit` hits.
    async fn embed_and_search(
        &self,
        world: &World,
        query: &str,
        limit: u64,
        settings: Settings,
    ) -> ServiceResult<Found> {
        let phase = Instant::now();
        let budget = self.limits.query_budget;
        let vector = tokio::time::timeout(budget, self.embed_query(world, query))
            .await
            .map_err(|_| ServiceError::Provider {
                message: format!(
                    "the query was not embedded within {:.1} s (the part of server.request_timeout_s \
                     left for it): the provider is slow or unreachable, or every key is busy",
                    budget.as_secs_f64()
                ),
            })??;
        let embed_ms = ms(phase.elapsed());
        let phase = Instant::now();
        let hits = self.search(world, query, vector, limit as usize, settings).await?;
        Ok(Found {
            hits,
            embed_ms,
            search_ms: ms(phase.elapsed()),
        })
    }

    /// Embeds the query with the world's profile in query mode, on the scheduler's priority
    /// lane. A key that fails (rate limit, rejection, fault) is reported to the scheduler and
    /// the next usable key is tried, a few times at most.
    async fn embed_query(&self, world: &World, query: &str) -> ServiceResult<Vec<f32>> {
        let profile = &world.embedding;
        let provider = self
            .providers
            .get(profile.provider)
            .ok_or_else(|| ServiceError::Provider {
                message: format!("no {} adapter is configured in this process", profile.provider),
            })?;
        let spec = self
            .registry
            .find(profile.provider, &profile.model)
            .ok_or_else(|| ServiceError::Provider {
                message: format!(
                    "the world's model `{}` is no longer configured for {}",
                    profile.model, profile.provider
                ),
            })?;
        let limits = provider.limits(spec);
        if query.len() > MAX_QUERY_BYTES {
            return Err(ServiceError::Unprocessable {
                kind: Unprocessable::InputTooLarge,
                message: format!(
                    "the query is {} bytes long; queries of at most {MAX_QUERY_BYTES} bytes are taken",
                    query.len()
                ),
            });
        }
        let texts = vec![query.to_owned()];
        // For the scheduler's token budgets only, and never above what the model takes (a
        // query over it is refused below and must not leave the key's budget in debt).
        let estimate = u32::try_from(query.len().div_ceil(4))
            .unwrap_or(u32::MAX)
            .clamp(1, limits.max_input_tokens.max(1));
        let mut last = None;
        for _ in 0..EMBED_ATTEMPTS {
            let lease = self
                .scheduler
                .acquire(profile.provider, Lane::Query, estimate)
                .await
                .map_err(|err| match err {
                    AcquireError::RateLimited { retry_after } => ServiceError::RateLimited { retry_after },
                    AcquireError::NoEligibleKey(provider) => ServiceError::conflict(
                        Conflict::NoEligibleProviderKey,
                        format!("no enabled {provider} key is available to embed the query"),
                    ),
                })?;
            let lease = if fits_uncounted(query, limits.max_input_tokens) {
                lease
            } else {
                let (lease, tokens) = match lease.count_tokens(provider.as_ref(), &profile.model, &texts).await {
                    Ok((lease, counts)) => (lease, counts[0]),
                    Err(CountFailure::WrongLength) => {
                        return Err(ServiceError::Unprocessable {
                            kind: Unprocessable::TokenCountFailed,
                            message: "the provider returned the wrong number of token counts".into(),
                        });
                    }
                    Err(CountFailure::Provider(err)) => {
                        last = Some(query_error(err)?);
                        continue;
                    }
                };
                if tokens > limits.max_input_tokens {
                    lease.finish(Outcome::Unused).await;
                    return Err(ServiceError::Unprocessable {
                        kind: Unprocessable::InputTooLarge,
                        message: format!(
                            "the query has {tokens} tokens, over the model's limit of {}",
                            limits.max_input_tokens
                        ),
                    });
                }
                lease
            };
            let request = EmbedRequest {
                model: &profile.model,
                dimensions: profile.dimensions,
                mode: EmbedMode::Query,
                texts: &texts,
                token_counts: None,
            };
            match lease.embed(provider.as_ref(), request).await {
                Ok(mut vectors) if vectors.len() == 1 && vectors[0].len() == profile.dimensions as usize => {
                    return Ok(vectors.remove(0));
                }
                Ok(_) => {
                    return Err(ServiceError::Provider {
                        message: "the provider returned a query vector of the wrong shape".into(),
                    });
                }
                Err(err) => last = Some(query_error(err)?),
            }
        }
        Err(last.unwrap_or(ServiceError::Provider {
            message: "the query could not be embedded".into(),
        }))
    }

    async fn search(
        &self,
        world: &World,
        query: &str,
        vector: Vec<f32>,
        limit: usize,
        settings: Settings,
    ) -> ServiceResult<Vec<ScoredPoint>> {
        let filter = PointFilter::world(world.id).run(world.active_run);
        // Always sent, 0.0 included: with cosine a hit can score below zero, and the default
        // `min_score` of 0.0 keeps such hits out. Qdrant keeps scores strictly above its
        // threshold; `min_score` keeps a score equal to it, so the threshold is the float just
        // below.
        let threshold = Some(settings.min_score.next_down());
        let hits = match settings.mode {
            Mode::Dense => {
                self.vectors
                    .search(
                        &world.collection,
                        DenseSearch {
                            vector,
                            filter,
                            limit,
                            score_threshold: threshold,
                        },
                    )
                    .await?
            }
            Mode::Hybrid => {
                self.vectors
                    .hybrid_search(
                        &world.collection,
                        HybridSearch {
                            dense: vector,
                            sparse: crate::sparse::query(query),
                            filter,
                            limit,
                            prefetch_limit: (limit * 2).max(MIN_PREFETCH),
                            dense_score_threshold: threshold,
                        },
                    )
                    .await?
            }
        };
        Ok(hits)
    }

    /// Keeps the hits the store confirms; deletes orphan and stale points and requeues the
    /// slots of stale ones.
    async fn verify(&self, world: &World, hits: Vec<ScoredPoint>, answer: &mut Retrieval) -> ServiceResult<()> {
        let ids: Vec<Uuid> = hits.iter().map(|h| h.id).collect();
        let mut chunks: HashMap<Uuid, ChunkView> = self
            .store
            .chunks_by_points(world.id, world.active_run, &ids)
            .await?
            .into_iter()
            .map(|c| (c.point_id, c))
            .collect();
        let mut orphans = Vec::new();
        let mut stale: Vec<(Uuid, ChunkId)> = Vec::new();
        for hit in hits {
            let Some(chunk) = chunks.remove(&hit.id) else {
                orphans.push(hit.id);
                continue;
            };
            let current = hit.payload.as_ref().is_some_and(|p| {
                p.text_sha256 == chunk.chunk.sha256
                    && p.run_id == chunk.chunk.run_id
                    && p.source_id == chunk.chunk.source_id
                    && p.chunk_number == chunk.chunk.chunk_number
            });
            if current {
                answer.results.push(Hit {
                    chunk,
                    score: hit.score,
                });
            } else {
                stale.push((hit.id, chunk.chunk.id));
            }
        }
        if !orphans.is_empty() {
            answer.warnings.push(Warning {
                code: "chunk_missing",
                message: format!(
                    "{} hit(s) pointed at chunks that no longer exist; they were skipped",
                    orphans.len()
                ),
            });
            match self.vectors.delete_points(&world.collection, &orphans).await {
                Ok(()) => answer.repairs.extend(orphans.iter().map(|&point_id| Repair {
                    point_id,
                    kind: "orphan_point_deleted",
                })),
                Err(err) => tracing::warn!(world = %world.id, error = %err, "deleting orphan points failed"),
            }
        }
        if !stale.is_empty() {
            answer.warnings.push(Warning {
                code: "stale_point",
                message: format!(
                    "{} hit(s) were made from text that has since changed; they were skipped and queued for embedding again",
                    stale.len()
                ),
            });
            let points: Vec<Uuid> = stale.iter().map(|(p, _)| *p).collect();
            match self.vectors.delete_points(&world.collection, &points).await {
                Ok(()) => {
                    answer.repairs.extend(points.iter().map(|&point_id| Repair {
                        point_id,
                        kind: "stale_point_deleted",
                    }));
                    // The answer stands whatever happens here: an entry left `embedded` without
                    // its point is found by the next repair (startup or on demand).
                    let chunk_ids: Vec<ChunkId> = stale.iter().map(|(_, c)| *c).collect();
                    match self
                        .store
                        .requeue_entries(
                            world.id,
                            world.active_run,
                            &chunk_ids,
                            "stale_point",
                            None,
                            crate::domain::now(),
                        )
                        .await
                    {
                        Ok(Some(_)) => self.engine.wake(),
                        Ok(None) => {}
                        Err(err) => {
                            tracing::warn!(world = %world.id, error = %err, "requeueing stale chunks failed; a repair will");
                        }
                    }
                }
                Err(err) => tracing::warn!(world = %world.id, error = %err, "deleting stale points failed"),
            }
        }
        Ok(())
    }

    /// The context's passages in rank order: each hit alone, or with `neighbors` chunks of its
    /// source on each side, windows that overlap or touch merged into one passage (placed at
    /// its best hit) in reading order, no chunk twice.
    async fn passages(&self, world: &World, results: &[Hit], neighbors: u32) -> ServiceResult<Vec<Vec<Piece>>> {
        let piece = |view: &ChunkView, rank: Option<usize>| Piece {
            text: view.chunk.chunk_text.clone(),
            tokens: view.chunk.token_count,
            rank,
            number: view.chunk.chunk_number,
        };
        if neighbors == 0 {
            return Ok(results
                .iter()
                .enumerate()
                .map(|(rank, h)| vec![piece(&h.chunk, Some(rank))])
                .collect());
        }
        let ranks: HashMap<ChunkId, usize> = results
            .iter()
            .enumerate()
            .map(|(rank, h)| (h.chunk.chunk.id, rank))
            .collect();
        let mut windows: Vec<(SourceId, u32, u32)> = Vec::new();
        for hit in results {
            let c = &hit.chunk.chunk;
            let mut window = (
                c.source_id,
                c.chunk_number.saturating_sub(neighbors),
                c.chunk_number.saturating_add(neighbors),
            );
            // Absorb every earlier window this one overlaps or touches, keeping the earliest slot.
            let mut slot = None;
            let mut i = 0;
            while i < windows.len() {
                let (source, lo, hi) = windows[i];
                if source == window.0 && lo <= window.2.saturating_add(1) && window.1 <= hi.saturating_add(1) {
                    window.1 = window.1.min(lo);
                    window.2 = window.2.max(hi);
                    match slot {
                        None => {
                            slot = Some(i);
                            i += 1;
                        }
                        Some(_) => {
                            windows.remove(i);
                        }
                    }
                } else {
                    i += 1;
                }
            }
            match slot {
                Some(i) => windows[i] = window,
                None => windows.push(window),
            }
        }
        // One read for every window; the windows are disjoint, and the chunks come back ordered
        // by source and chunk number, so each window is a contiguous run of them.
        let chunks = self.store.chunk_windows(world.id, world.active_run, &windows).await?;
        let mut seen = HashSet::new();
        let mut passages = Vec::with_capacity(windows.len());
        for (source, from, to) in windows {
            let start = chunks.partition_point(|v| (v.chunk.source_id.0, v.chunk.chunk_number) < (source.0, from));
            let passage: Vec<Piece> = chunks[start..]
                .iter()
                .take_while(|v| v.chunk.source_id == source && v.chunk.chunk_number <= to)
                .filter(|view| seen.insert(view.chunk.id))
                .map(|view| piece(view, ranks.get(&view.chunk.id).copied()))
                .collect();
            passages.push(passage);
        }
        Ok(passages)
    }
}

/// One chunk of a context passage.
#[derive(Debug)]
struct Piece {
    text: String,
    tokens: u32,
    /// The hit's rank; `None` for a neighbour.
    rank: Option<usize>,
    number: u32,
}

/// The context within `budget` tokens, and how many chunks were left out for want of room. Hits
/// come first: each, in rank order, is kept if it fits. Then each passage with a kept hit gets
/// its neighbours, nearest to a kept hit first, until one does not fit. A chunk whose text is
/// already in the context (the same text in two sources, say) is not repeated, and does not
/// count as left out, nor do the neighbours of a hit that was only a repeat. Kept chunks stay
/// in passage order and, within a passage, in reading order. Counts are each chunk's
/// `token_count`.
fn fit_context(passages: Vec<Vec<Piece>>, budget: u32) -> (Vec<String>, usize) {
    let mut keep: Vec<Vec<bool>> = passages.iter().map(|p| vec![false; p.len()]).collect();
    let mut placed: HashSet<&str> = HashSet::new();
    // Repeats, and neighbours of hits that were only repeats: not left out for want of room.
    let mut repeated: Vec<Vec<bool>> = passages.iter().map(|p| vec![false; p.len()]).collect();
    let mut room = u64::from(budget);
    let mut hits: Vec<(usize, usize, usize)> = passages
        .iter()
        .enumerate()
        .flat_map(|(p, passage)| {
            passage
                .iter()
                .enumerate()
                .filter_map(move |(i, piece)| piece.rank.map(|rank| (rank, p, i)))
        })
        .collect();
    hits.sort_unstable();
    for (_, p, i) in hits {
        let piece = &passages[p][i];
        if placed.contains(piece.text.as_str()) {
            repeated[p][i] = true;
            continue;
        }
        let tokens = u64::from(piece.tokens);
        if tokens <= room {
            room -= tokens;
            keep[p][i] = true;
            placed.insert(&piece.text);
        }
    }
    for (p, passage) in passages.iter().enumerate() {
        let kept: Vec<u32> = passage
            .iter()
            .zip(&keep[p])
            .filter(|(_, k)| **k)
            .map(|(piece, _)| piece.number)
            .collect();
        if kept.is_empty() {
            let only_repeats = passage
                .iter()
                .zip(&repeated[p])
                .all(|(piece, repeat)| piece.rank.is_none() || *repeat);
            if only_repeats {
                repeated[p].fill(true);
            }
            continue;
        }
        let mut neighbours: Vec<(u32, usize)> = passage
            .iter()
            .enumerate()
            .filter(|(_, piece)| piece.rank.is_none())
            .map(|(i, piece)| {
                let distance = kept.iter().map(|n| n.abs_diff(piece.number)).min().unwrap_or(u32::MAX);
                (distance, i)
            })
            .collect();
        neighbours.sort_unstable();
        for (_, i) in neighbours {
            let piece = &passage[i];
            if placed.contains(piece.text.as_str()) {
                repeated[p][i] = true;
                continue;
            }
            let tokens = u64::from(piece.tokens);
            if tokens > room {
                break;
            }
            room -= tokens;
            keep[p][i] = true;
            placed.insert(&piece.text);
        }
    }
    let left_out = keep
        .iter()
        .zip(&repeated)
        .flat_map(|(keep, repeated)| keep.iter().zip(repeated))
        .filter(|(kept, repeat)| !**kept && !**repeat)
        .count();
    let context: Vec<String> = passages
        .into_iter()
        .zip(keep)
        .flat_map(|(passage, keep)| {
            passage
                .into_iter()
                .zip(keep)
                .filter(|(_, k)| *k)
                .map(|(piece, _)| piece.text)
        })
        .collect();
    (context, left_out)
}

/// What a failed query embedding means for the caller: `Ok` carries an error worth trying
/// another key for (the caller keeps the last one), `Err` one to return at once.
fn query_error(err: ProviderError) -> ServiceResult<ServiceError> {
    match err {
        ProviderError::RateLimited { retry_after, .. } => Ok(ServiceError::RateLimited {
            retry_after: retry_after.unwrap_or(Duration::from_secs(1)),
        }),
        ProviderError::KeyRejected { message } | ProviderError::QuotaExhausted { message } => {
            Ok(ServiceError::Provider { message })
        }
        ProviderError::Transient { message } => Ok(ServiceError::Provider { message }),
        ProviderError::InputTooLarge { tokens, limit } => Err(ServiceError::Unprocessable {
            kind: Unprocessable::InputTooLarge,
            message: format!("the query has {tokens} tokens, over the model's limit of {limit}"),
        }),
        ProviderError::TokenCountFailed { message } => Err(ServiceError::Unprocessable {
            kind: Unprocessable::TokenCountFailed,
            message: format!("the query's tokens could not be counted exactly, so it was not sent: {message}"),
        }),
        ProviderError::Permanent { message }
        | ProviderError::Malformed { message }
        | ProviderError::Unavailable { message } => Err(ServiceError::Provider { message }),
    }
}

#[cfg(test)]
mod tests {
    use super::{Piece, fit_context};

    fn hit(text: &str, number: u32, tokens: u32, rank: usize) -> Piece {
        Piece {
            text: text.into(),
            tokens,
            rank: Some(rank),
            number,
        }
    }

    fn near(text: &str, number: u32, tokens: u32) -> Piece {
        Piece {
            text: text.into(),
            tokens,
            rank: None,
            number,
        }
    }

    /// Passage one: a hit (rank 0) between two neighbours; passage two: a lone hit (rank 1).
    fn two_passages() -> Vec<Vec<Piece>> {
        vec![
            vec![near("a3", 3, 5), hit("a4", 4, 10, 0), near("a5", 5, 5)],
            vec![hit("b9", 9, 10, 1)],
        ]
    }

    #[test]
    fn everything_fits_in_passage_and_reading_order() {
        let (context, left_out) = fit_context(two_passages(), 30);
        assert_eq!(context, ["a3", "a4", "a5", "b9"]);
        assert_eq!(left_out, 0);
    }

    #[test]
    fn hits_take_the_budget_before_any_neighbour() {
        let (context, left_out) = fit_context(two_passages(), 20);
        assert_eq!(
            context,
            ["a4", "b9"],
            "the second hit outranks the first hit's neighbours"
        );
        assert_eq!(left_out, 2);
        let (context, left_out) = fit_context(two_passages(), 25);
        assert_eq!(
            context,
            ["a3", "a4", "b9"],
            "then neighbours, nearest (then earliest) first"
        );
        assert_eq!(left_out, 1);
    }

    #[test]
    fn a_hit_too_big_is_skipped_and_its_neighbours_with_it() {
        let passages = vec![vec![near("a3", 3, 1), hit("a4", 4, 50, 0)], vec![hit("b9", 9, 10, 1)]];
        let (context, left_out) = fit_context(passages, 20);
        assert_eq!(context, ["b9"]);
        assert_eq!(left_out, 2);
    }

    #[test]
    fn neighbours_stop_at_the_first_that_does_not_fit() {
        let passage = vec![
            near("n1", 1, 1),
            near("n2", 2, 8),
            hit("h3", 3, 1, 0),
            near("n4", 4, 1),
            near("n5", 5, 1),
        ];
        // Nearest first: n2 and n4 (distance 1), then n1 and n5. n2 does not fit, and the
        // passage stops there rather than skipping to farther chunks.
        let (context, left_out) = fit_context(vec![passage], 5);
        assert_eq!(context, ["h3"]);
        assert_eq!(left_out, 4);
    }

    #[test]
    fn a_text_already_in_the_context_is_not_repeated_nor_counted_as_left_out() {
        // The same sentence in two sources: the better-ranked copy is kept, with its neighbours.
        let passages = vec![
            vec![near("before", 1, 1), hit("same", 2, 3, 1)],
            vec![hit("same", 7, 3, 0), near("after", 8, 1)],
            vec![hit("other", 4, 2, 2)],
        ];
        let (context, left_out) = fit_context(passages, 100);
        assert_eq!(context, ["same", "after", "other"]);
        assert_eq!(left_out, 0);
        // Repeated neighbours too; a budget that leaves one out still says so.
        let passages = vec![
            vec![hit("h1", 1, 1, 0), near("shared", 2, 1)],
            vec![near("shared", 5, 1), hit("h6", 6, 1, 1), near("n7", 7, 5)],
        ];
        let (context, left_out) = fit_context(passages, 4);
        assert_eq!(context, ["h1", "shared", "h6"]);
        assert_eq!(left_out, 1);
    }
}
