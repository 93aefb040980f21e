//! Worlds: creation with a validated, locked profile; listing with stats; rename; delete with
//! every row and point.

use std::sync::Arc;

use super::{Conflict, Invalid, Missing, ServiceError, ServiceResult};
use crate::config::MAX_CONTEXT_TOKENS;
use crate::domain::{
    ChunkingProfile, EmbeddingProfile, Job, JobId, JobKind, NewWorld, ProviderKind, RunId, World, WorldId, WorldName,
    WorldStats, now,
};
use crate::jobs::JobEngine;
use crate::providers::scheduler::KeyScheduler;
use crate::providers::{ModelRegistry, ModelSpec};
use crate::store::{NewRun, Store};
use crate::vector::{CollectionSpec, PointFilter, VectorRepo};

/// Default chunk size when a world does not choose one.
pub const DEFAULT_MAX_TOKENS: u32 = 512;
/// Default overlap when a world does not choose one.
pub const DEFAULT_OVERLAP_TOKENS: u32 = 64;

/// An embedding profile as asked for: the provider parsed, the model and dimensions still to
/// be checked against the registry.
#[derive(Clone, Debug)]
pub struct ProfileRequest {
    pub provider: ProviderKind,
    pub model: String,
    pub dimensions: Option<i64>,
}

/// A world creation request, parsed at the edge (numbers not yet range-checked against the
/// model, which only the registry knows).
#[derive(Clone, Debug)]
pub struct CreateWorld {
    pub name: WorldName,
    pub embedding: ProfileRequest,
    pub max_tokens: Option<i64>,
    pub overlap_tokens: Option<i64>,
    pub parent_max_tokens: Option<i64>,
    /// Absent: [`DEFAULT_CONTEXT_PREFIX`].
    pub context_prefix: Option<bool>,
    pub hybrid: bool,
}

/// Whether a new world embeds its chunks with a context prefix when the request does not say:
/// off, as measured (`make bench-quality`, BENCHMARKS.md "A contextual prefix").
pub const DEFAULT_CONTEXT_PREFIX: bool = false;

/// A world with its counts.
#[derive(Clone, Debug)]
pub struct WorldView {
    pub world: World,
    pub stats: WorldStats,
}

/// A `PATCH` of a world, parsed.
#[derive(Debug, Default)]
pub struct WorldPatch {
    pub name: Option<WorldName>,
    pub hybrid: Option<bool>,
    /// The first locked field the request sent (`embedding`, `chunking`), if any.
    pub locked: Option<&'static str>,
}

/// What a `PATCH` did.
pub enum WorldUpdated {
    World(WorldView),
    /// The re-ingest that adds BM25 vectors to a dense world's points.
    Backfill(Job),
}

pub struct WorldService {
    store: Arc<dyn Store>,
    vectors: Arc<dyn VectorRepo>,
    registry: Arc<ModelRegistry>,
    scheduler: KeyScheduler,
    engine: JobEngine,
    /// The context budget by default (`retrieval.max_context_tokens`): the default
    /// `parent_max_tokens` never exceeds it.
    max_context_tokens: u32,
}

/// A re-ingest request: what is absent keeps the world's current profile.
#[derive(Clone, Debug, Default)]
pub struct Reingest {
    pub embedding: Option<ProfileRequest>,
    pub max_tokens: Option<i64>,
    pub overlap_tokens: Option<i64>,
    /// Absent: the world's own when neither `max_tokens` changes, else the default.
    pub parent_max_tokens: Option<i64>,
    /// Absent: the world's own.
    pub context_prefix: Option<bool>,
    /// Switch only if this gate's evaluation holds (see `service::evals::gate`).
    pub gate: Option<crate::domain::NewGate>,
}

impl WorldService {
    pub fn new(deps: &crate::deps::Deps, max_context_tokens: u32) -> Self {
        Self {
            store: deps.store.clone(),
            vectors: deps.vectors.clone(),
            registry: deps.registry.clone(),
            scheduler: deps.scheduler.clone(),
            engine: deps.engine.clone(),
            max_context_tokens,
        }
    }

    /// Starts a re-ingest: validates the new profile like a creation (nothing is written when
    /// it fails), then creates an empty new run beside the active one and a `queued` `reingest`
    /// job, and answers; the stored sources are chunked into the run in the background, then the
    /// job runs and the workers embed it. When every chunk is embedded the world switches to
    /// the new run and profile in one transaction (see `RunStore::finish_reingest`), and until
    /// then retrieval keeps serving the old run.
    pub async fn reingest(&self, id: WorldId, req: Reingest) -> ServiceResult<Job> {
        let world = self
            .store
            .get_world(id)
            .await?
            .ok_or(ServiceError::NotFound(Missing::World))?;
        let (embedding, spec) = match &req.embedding {
            Some(profile) => self.embedding_profile(profile)?,
            None => {
                let profile = world.embedding.clone();
                let spec = self.registry.find(profile.provider, &profile.model).ok_or_else(|| {
                    ServiceError::invalid(
                        Invalid::EmbeddingProfile,
                        "embedding",
                        "the world's model is no longer configured; name a new embedding profile",
                    )
                })?;
                (profile, spec)
            }
        };
        let max_tokens = req.max_tokens.unwrap_or(i64::from(world.chunking.max_tokens));
        let parent_max_tokens = req.parent_max_tokens.or_else(|| {
            (max_tokens == i64::from(world.chunking.max_tokens)).then_some(i64::from(world.chunking.parent_max_tokens))
        });
        let chunking = chunking_profile(
            spec,
            ChunkingRequest {
                max_tokens: Some(max_tokens),
                overlap_tokens: Some(req.overlap_tokens.unwrap_or(i64::from(world.chunking.overlap_tokens))),
                parent_max_tokens,
                context_prefix: req.context_prefix.unwrap_or(world.chunking.context_prefix),
            },
            self.max_context_tokens,
        )?;
        super::require_key(&self.scheduler, embedding.provider).await?;
        let busy = || {
            ServiceError::conflict(
                Conflict::JobState,
                "a re-ingest of this world is already under way; wait for it or cancel it",
            )
        };
        if self
            .store
            .list_jobs(id, &[], crate::domain::Window::ALL)
            .await?
            .into_iter()
            .any(|j| j.kind == JobKind::Reingest && !j.status.is_terminal())
        {
            return Err(busy());
        }
        self.vectors
            .ensure_collection(&CollectionSpec::for_profile(&embedding))
            .await?;
        let run = NewRun {
            id: RunId::new(),
            world: id,
            embedding,
            chunking,
        };
        // Another request may have passed the check above meanwhile: the schema allows one
        // building run per world, and the loser gets the same 409.
        let job = match self
            .store
            .begin_reingest(run, JobId::new(), req.gate.as_ref(), now())
            .await
        {
            Err(crate::store::Error::Duplicate(_)) => return Err(busy()),
            other => other?,
        };
        // The sources are chunked into the new run in the background: a big world takes
        // longer than a request may.
        self.engine.prepare(job.id);
        Ok(job)
    }

    /// Validates everything, checks for a usable key, then creates the collection and the
    /// world. Nothing is written when validation or the key check fails.
    pub async fn create(&self, req: CreateWorld) -> ServiceResult<WorldView> {
        let name = req.name;
        let (embedding, spec) = self.embedding_profile(&req.embedding)?;
        let chunking = chunking_profile(
            spec,
            ChunkingRequest {
                max_tokens: req.max_tokens,
                overlap_tokens: req.overlap_tokens,
                parent_max_tokens: req.parent_max_tokens,
                context_prefix: req.context_prefix.unwrap_or(DEFAULT_CONTEXT_PREFIX),
            },
            self.max_context_tokens,
        )?;
        super::require_key(&self.scheduler, embedding.provider).await?;

        let collection = CollectionSpec::for_profile(&embedding);
        self.vectors.ensure_collection(&collection).await?;
        let world = self
            .store
            .create_world(NewWorld {
                id: WorldId::new(),
                name: name.into_inner(),
                embedding,
                chunking,
                hybrid: req.hybrid,
                run: RunId::new(),
                now: now(),
            })
            .await?;
        Ok(WorldView {
            world,
            stats: WorldStats::default(),
        })
    }

    pub async fn get(&self, id: WorldId) -> ServiceResult<WorldView> {
        let world = self
            .store
            .get_world(id)
            .await?
            .ok_or(ServiceError::NotFound(Missing::World))?;
        let stats = self.store.world_stats(id).await?;
        Ok(WorldView { world, stats })
    }

    /// Worlds by creation, in `window`.
    pub async fn list(&self, window: crate::domain::Window) -> ServiceResult<Vec<WorldView>> {
        let worlds = self.store.list_worlds(window).await?;
        let mut views = Vec::with_capacity(worlds.len());
        for world in worlds {
            let stats = self.store.world_stats(world.id).await?;
            views.push(WorldView { world, stats });
        }
        Ok(views)
    }

    /// Turns a dense world hybrid without a re-embedding: the world is marked hybrid, then a
    /// re-ingest with its own profile rebuilds its run, whose chunks are the same texts, so
    /// every vector is reused from the current run (`embedding.reuse`, on by default) and each
    /// point is written again with its BM25 terms, computed locally. `None` when the world is
    /// hybrid already. Until the new run is served, hybrid searches rank by the dense side.
    pub async fn enable_hybrid(&self, id: WorldId) -> ServiceResult<Option<Job>> {
        let world = self
            .store
            .get_world(id)
            .await?
            .ok_or(ServiceError::NotFound(Missing::World))?;
        if world.hybrid {
            return Ok(None);
        }
        if self
            .store
            .list_jobs(id, &[], crate::domain::Window::ALL)
            .await?
            .into_iter()
            .any(|j| j.kind == JobKind::Reingest && !j.status.is_terminal())
        {
            return Err(ServiceError::conflict(
                Conflict::JobState,
                "a re-ingest of this world is under way; enable hybrid search once it has ended",
            ));
        }
        self.store
            .enable_hybrid(id, now())
            .await?
            .ok_or(ServiceError::NotFound(Missing::World))?;
        Ok(Some(self.reingest(id, Reingest::default()).await?))
    }

    /// Applies a `PATCH`: `hybrid: true` alone on a dense world starts the backfill of its
    /// BM25 vectors (the job); a name renames it. The embedding and chunking profiles and the
    /// hybrid flag are otherwise locked (409 `profile_locked` naming the first field sent; a
    /// missing world is 404 first).
    pub async fn update(&self, id: WorldId, patch: WorldPatch) -> ServiceResult<WorldUpdated> {
        let WorldPatch { name, hybrid, locked } = patch;
        if hybrid == Some(true) && name.is_none() && locked.is_none() {
            return Ok(match self.enable_hybrid(id).await? {
                Some(job) => WorldUpdated::Backfill(job),
                None => WorldUpdated::World(self.get(id).await?),
            });
        }
        if let Some(field) = locked.or(hybrid.map(|_| "hybrid")) {
            self.get(id).await?;
            return Err(ServiceError::conflict_on(
                Conflict::ProfileLocked,
                field,
                "a world's embedding profile, chunking and hybrid flag are locked; \
                 use POST /v1/worlds/{world_id}/reingest to rebuild it with new ones",
            ));
        }
        let Some(name) = name else {
            return Err(ServiceError::invalid(
                Invalid::Request,
                "name",
                "nothing to update: send {\"name\": \"...\"}",
            ));
        };
        Ok(WorldUpdated::World(self.rename(id, name).await?))
    }

    /// The row of the world whose id (a UUID) or name is `key` and that `visible` lets the
    /// caller see; its counts are not read.
    pub async fn find_row(&self, key: &str, visible: impl Fn(WorldId) -> bool) -> ServiceResult<Option<World>> {
        if let Ok(id) = uuid::Uuid::try_parse(key) {
            let id = WorldId(id);
            return Ok(self.store.get_world(id).await?.filter(|_| visible(id)));
        }
        let worlds = self.store.list_worlds(crate::domain::Window::ALL).await?;
        Ok(worlds.into_iter().find(|w| w.name.as_str() == key && visible(w.id)))
    }

    pub async fn rename(&self, id: WorldId, name: WorldName) -> ServiceResult<WorldView> {
        self.store
            .rename_world(id, &name.into_inner(), now())
            .await?
            .ok_or(ServiceError::NotFound(Missing::World))?;
        self.get(id).await
    }

    /// Deletes the world's points first (in every collection its runs use), then its rows. If
    /// the vector store is down nothing is deleted; if the row delete fails after the points
    /// are gone, the world is still there and a repair re-embeds it. Once the rows are gone the
    /// points are deleted once more: a worker whose write landed between the two deletes has
    /// nothing left to account for its point, and repair never visits a deleted world. A failure
    /// of that last pass is logged (such a point is never served: searches filter by world).
    pub async fn delete(&self, id: WorldId) -> ServiceResult<()> {
        if self.store.get_world(id).await?.is_none() {
            return Err(ServiceError::NotFound(Missing::World));
        }
        let collections = self.store.world_collections(id).await?;
        for collection in &collections {
            self.vectors
                .delete_by_filter(collection, PointFilter::world(id))
                .await?;
        }
        if !self.store.delete_world(id).await? {
            return Err(ServiceError::NotFound(Missing::World));
        }
        for collection in &collections {
            if let Err(err) = self.vectors.delete_by_filter(collection, PointFilter::world(id)).await {
                tracing::warn!(world = %id, %collection, error = %err,
                    "deleting a deleted world's late points failed; they are never served");
            }
        }
        Ok(())
    }

    fn embedding_profile(&self, requested: &ProfileRequest) -> ServiceResult<(EmbeddingProfile, &ModelSpec)> {
        let invalid = |field: &str, msg: String| ServiceError::invalid(Invalid::EmbeddingProfile, field, msg);
        let (provider, model, dimensions) = (requested.provider, requested.model.as_str(), requested.dimensions);
        let spec = self.registry.find(provider, model).ok_or_else(|| {
            let known: Vec<&str> = self
                .registry
                .all()
                .iter()
                .filter(|m| m.provider == provider)
                .map(|m| m.model.as_str())
                .collect();
            invalid(
                "embedding.model",
                format!(
                    "unknown {provider} model `{model}` (known: {}); see GET /v1/models",
                    known.join(", ")
                ),
            )
        })?;
        let dimensions = match dimensions {
            None => spec.default_dimensions,
            Some(d) => u32::try_from(d)
                .ok()
                .filter(|d| spec.allows_dimensions(*d))
                .ok_or_else(|| {
                    invalid(
                        "embedding.dimensions",
                        format!(
                            "{provider}/{model} supports dimensions {}..={}, not {d}",
                            spec.min_dimensions, spec.max_dimensions
                        ),
                    )
                })?,
        };
        Ok((
            EmbeddingProfile {
                provider,
                model: spec.model.clone(),
                dimensions,
            },
            spec,
        ))
    }
}

/// Range-checks the chunking profile against the model's input limit.
///
/// Defaults: 512 / 64 tokens, but never more than three quarters of the model's limit (Google
/// chunks are counted in cl100k tokens, and Gemini's own tokenizer may count more: the exact
/// check at dispatch rejects what does not fit), and an overlap of at most a quarter. The local
/// model's chunks are counted in its own WordPiece tokens, without the two it adds, so they may
/// be up to its limit less two ([`ModelSpec::max_chunk_tokens`]).
fn chunking_profile(spec: &ModelSpec, req: ChunkingRequest, max_context_tokens: u32) -> ServiceResult<ChunkingProfile> {
    let ChunkingRequest {
        max_tokens,
        overlap_tokens: overlap,
        parent_max_tokens,
        context_prefix,
    } = req;
    let invalid = |field: &str, msg: String| ServiceError::invalid(Invalid::ChunkingProfile, field, msg);
    // A chunk and its prefix together stay within the model's limit.
    let limit = if context_prefix {
        spec.max_chunk_tokens()
            .saturating_sub(ChunkingProfile::CONTEXT_PREFIX_MAX_TOKENS)
            .max(ChunkingProfile::MIN_MAX_TOKENS)
    } else {
        spec.max_chunk_tokens()
    };
    let max_tokens = match max_tokens {
        None => DEFAULT_MAX_TOKENS.min(spec.max_input_tokens * 3 / 4).min(limit),
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| (ChunkingProfile::MIN_MAX_TOKENS..=limit).contains(n))
            .ok_or_else(|| {
                invalid(
                    "chunking.max_tokens",
                    format!(
                        "max_tokens must be between {} and {limit} (the chunk limit of {}/{}{}), not {n}",
                        ChunkingProfile::MIN_MAX_TOKENS,
                        spec.provider,
                        spec.model,
                        if context_prefix {
                            format!(
                                ", less {} for the context prefix",
                                ChunkingProfile::CONTEXT_PREFIX_MAX_TOKENS
                            )
                        } else {
                            String::new()
                        }
                    ),
                )
            })?,
    };
    let overlap_tokens = match overlap {
        None => DEFAULT_OVERLAP_TOKENS.min(max_tokens / 4),
        Some(n) => u32::try_from(n).ok().filter(|n| *n <= max_tokens / 2).ok_or_else(|| {
            invalid(
                "chunking.overlap_tokens",
                format!(
                    "overlap_tokens must be between 0 and half of max_tokens ({}), not {n}",
                    max_tokens / 2
                ),
            )
        })?,
    };
    let parent_max_tokens = match parent_max_tokens {
        // Four chunks, within the default context budget (and never below one chunk).
        None => ChunkingProfile::default_parent_max_tokens(max_tokens)
            .min(max_context_tokens)
            .max(max_tokens),
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| (max_tokens..=MAX_CONTEXT_TOKENS).contains(n))
            .ok_or_else(|| {
                invalid(
                    "chunking.parent_max_tokens",
                    format!(
                        "parent_max_tokens must be between max_tokens ({max_tokens}) and {MAX_CONTEXT_TOKENS}, not {n}"
                    ),
                )
            })?,
    };
    Ok(ChunkingProfile {
        max_tokens,
        overlap_tokens,
        parent_max_tokens,
        context_prefix,
    })
}

/// The chunking fields of a request, not yet checked.
struct ChunkingRequest {
    max_tokens: Option<i64>,
    overlap_tokens: Option<i64>,
    parent_max_tokens: Option<i64>,
    context_prefix: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(
        spec: &ModelSpec,
        max: Option<i64>,
        overlap: Option<i64>,
        parent: Option<i64>,
    ) -> ServiceResult<ChunkingProfile> {
        let req = ChunkingRequest {
            max_tokens: max,
            overlap_tokens: overlap,
            parent_max_tokens: parent,
            context_prefix: false,
        };
        chunking_profile(spec, req, 32_768)
    }

    #[test]
    fn chunking_defaults_fit_the_model() {
        let registry = ModelRegistry::builtin();
        let local = registry.find(ProviderKind::Local, "all-MiniLM-L6-v2").unwrap();
        let p = profile(local, None, None, None).unwrap();
        assert_eq!((p.max_tokens, p.overlap_tokens, p.parent_max_tokens), (192, 48, 768));
        let google = registry.find(ProviderKind::Google, "gemini-embedding-001").unwrap();
        let p = profile(google, None, None, None).unwrap();
        assert_eq!((p.max_tokens, p.overlap_tokens, p.parent_max_tokens), (512, 64, 2048));
        assert!(profile(local, Some(257), None, None).is_err());
        assert!(profile(google, Some(100), Some(51), None).is_err());
        assert!(profile(google, Some(100), Some(50), None).is_ok());
        assert!(profile(google, Some(-1), None, None).is_err());
        assert!(profile(google, Some(15), None, None).is_err());
        // Parents: at least one chunk, at most the largest budget; the default stays within
        // the configured budget.
        assert_eq!(
            profile(google, Some(100), None, Some(100)).unwrap().parent_max_tokens,
            100
        );
        assert!(profile(google, Some(100), None, Some(99)).is_err());
        assert!(profile(google, Some(100), None, Some(1 << 21)).is_err());
        let req = ChunkingRequest {
            max_tokens: Some(6000),
            overlap_tokens: None,
            parent_max_tokens: None,
            context_prefix: false,
        };
        let openai = registry.find(ProviderKind::OpenAi, "text-embedding-3-small").unwrap();
        assert_eq!(chunking_profile(openai, req, 8000).unwrap().parent_max_tokens, 8000);
    }

    #[test]
    fn a_context_prefix_keeps_chunks_under_the_limit_by_its_bound() {
        let registry = ModelRegistry::builtin();
        let local = registry.find(ProviderKind::Local, "all-MiniLM-L6-v2").unwrap();
        let with = |max: Option<i64>| {
            chunking_profile(
                local,
                ChunkingRequest {
                    max_tokens: max,
                    overlap_tokens: None,
                    parent_max_tokens: None,
                    context_prefix: true,
                },
                32_768,
            )
        };
        // The default (192) already leaves room: 192 + 48 <= 254.
        let p = with(None).unwrap();
        assert_eq!((p.max_tokens, p.context_prefix), (192, true));
        assert_eq!(with(Some(206)).unwrap().max_tokens, 206);
        let err = with(Some(207)).unwrap_err().to_string();
        assert!(err.contains("less 48 for the context prefix"), "{err}");
        // Without a prefix the whole limit is there.
        assert!(profile(local, Some(254), None, None).is_ok());
    }
}
