//! The vector repository: Qdrant as an index over the relational store.
//!
//! [`VectorRepo`] is the narrow boundary the services use. Two real implementations:
//! [`edge::EdgeRepo`] runs Qdrant's engine in-process (`qdrant-edge`, the default) and
//! [`server::ServerRepo`] talks gRPC to a Qdrant server. Both pass one conformance suite
//! (`tests/api/vector_conformance.rs`).
//!
//! Points carry ids and a small payload (world, run, source, slot, text hash) — never chunk
//! text: text always comes from the store, and a hit is only trusted after it was checked
//! against it. Every query is filtered by world (a tenant-indexed UUID) and usually by run.

pub mod edge;
mod rules;
pub mod server;
pub mod settings;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::{RunId, SourceId, WorldId};

/// Name of the dense vector in every chunk collection.
pub const DENSE: &str = "dense";
/// Name of the sparse BM25 vector (IDF modifier) in every chunk collection.
pub const SPARSE: &str = "bm25";

/// Errors from a vector backend. `Unavailable` means "try again later" (503 upstream);
/// everything else is a bug or a misconfiguration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("vector store unavailable: {0}")]
    Unavailable(String),
    #[error("collection `{0}` does not exist")]
    MissingCollection(String),
    #[error("collection `{name}` exists with an incompatible configuration: {reason}")]
    Incompatible { name: String, reason: String },
    #[error("vector store rejected the request: {0}")]
    Rejected(String),
    #[error("vector store I/O failed")]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a chunk collection looks like. Collections are created on demand and never change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CollectionSpec {
    pub name: String,
    /// Size of the named dense vector `dense` (cosine distance).
    pub dimensions: u32,
    /// Whether the collection carries the sparse vector `bm25` (IDF modifier).
    pub sparse: bool,
}

impl CollectionSpec {
    /// The chunk collection of an embedding profile: every world on the profile shares it, and
    /// it always carries `bm25` so that any of them can be hybrid.
    pub fn for_profile(profile: &crate::domain::EmbeddingProfile) -> Self {
        Self {
            name: profile.collection_name(),
            dimensions: profile.dimensions,
            sparse: true,
        }
    }
}

/// Payload stored with every chunk point. Never chunk text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointPayload {
    pub world_id: WorldId,
    pub run_id: RunId,
    pub source_id: SourceId,
    pub book_number: u32,
    pub chunk_number: u32,
    pub text_sha256: String,
    pub token_count: u32,
}

/// Where a point is filed: the payload fields [`VectorRepo::move_points`] sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointHome {
    pub run_id: RunId,
    pub source_id: SourceId,
    pub book_number: u32,
}

impl PointHome {
    /// The payload fields, as JSON.
    pub fn to_json(self) -> serde_json::Map<String, serde_json::Value> {
        let mut map = serde_json::Map::new();
        map.insert(RUN_FIELD.into(), self.run_id.0.to_string().into());
        map.insert(SOURCE_FIELD.into(), self.source_id.0.to_string().into());
        map.insert(BOOK_FIELD.into(), self.book_number.into());
        map
    }
}

/// Payload keys [`PointHome`] sets (as [`PointPayload`] serialises them).
const RUN_FIELD: &str = "run_id";
const SOURCE_FIELD: &str = "source_id";
const BOOK_FIELD: &str = "book_number";

/// A sparse vector: parallel arrays of term ids and weights.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SparseVector {
    pub indices: Vec<u32>,
    pub values: Vec<f32>,
}

/// A point to upsert.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub id: Uuid,
    pub dense: Vec<f32>,
    /// Only for collections created with `sparse: true`.
    pub sparse: Option<SparseVector>,
    pub payload: PointPayload,
}

/// A point read back (retrieve or scroll); vectors are not returned.
#[derive(Clone, Debug, PartialEq)]
pub struct PointRecord {
    pub id: Uuid,
    /// `None` when the stored payload does not parse as [`PointPayload`] (a stale or foreign
    /// point: repair deletes it).
    pub payload: Option<PointPayload>,
}

/// A search hit.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoredPoint {
    pub id: Uuid,
    pub score: f32,
    pub payload: Option<PointPayload>,
}

/// Which points an operation applies to. `world` is always required: no query ever spans
/// worlds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointFilter {
    pub world: WorldId,
    pub run: Option<RunId>,
    pub source: Option<SourceId>,
}

impl PointFilter {
    pub fn world(world: WorldId) -> Self {
        Self {
            world,
            run: None,
            source: None,
        }
    }

    pub fn run(mut self, run: RunId) -> Self {
        self.run = Some(run);
        self
    }

    pub fn source(mut self, source: SourceId) -> Self {
        self.source = Some(source);
        self
    }
}

/// A dense nearest-neighbour search.
#[derive(Clone, Debug, PartialEq)]
pub struct DenseSearch {
    pub vector: Vec<f32>,
    pub filter: PointFilter,
    /// Only points of these sources (any of them), when given: a retrieval's filter.
    pub sources: Option<Vec<SourceId>>,
    pub limit: usize,
    /// Applied inside the query: only hits scoring above it come back.
    pub score_threshold: Option<f32>,
    /// The HNSW beam width for this search (`None`: `vectors.search.hnsw_ef`).
    pub hnsw_ef: Option<u32>,
}

/// A BM25 search alone (what a hybrid search's sparse prefetch finds), for explaining.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseSearch {
    pub sparse: SparseVector,
    pub filter: PointFilter,
    pub sources: Option<Vec<SourceId>>,
    pub limit: usize,
}

/// How a hybrid search fuses its dense and sparse candidates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fusion {
    /// Weighted reciprocal rank fusion, Qdrant's formula with k = 60: a candidate at 0-based
    /// position `p` of a list of weight `w` scores `1 / ((p + 1) / w + k - 1)`, summed over the
    /// lists it is in. A weight divides its list's positions; weight 0 leaves the list out.
    Rrf { dense_weight: f32, sparse_weight: f32 },
    /// Distribution-based score fusion: each list's scores normalised by their spread, summed.
    Dbsf,
}

impl Default for Fusion {
    fn default() -> Self {
        Fusion::Rrf {
            dense_weight: 1.0,
            sparse_weight: 1.0,
        }
    }
}

/// A hybrid search: dense and sparse prefetches fused by `fusion`.
#[derive(Clone, Debug, PartialEq)]
pub struct HybridSearch {
    pub dense: Vec<f32>,
    pub sparse: SparseVector,
    pub filter: PointFilter,
    /// Only points of these sources (any of them), when given: a retrieval's filter.
    pub sources: Option<Vec<SourceId>>,
    pub limit: usize,
    /// How many candidates each prefetch contributes to the fusion.
    pub prefetch_limit: usize,
    /// Applied inside the dense prefetch: only dense candidates scoring above it take part in
    /// the fusion (BM25 candidates are not thresholded; fused scores are ranks, not cosines).
    pub dense_score_threshold: Option<f32>,
    pub fusion: Fusion,
    /// The HNSW beam width of the dense prefetch (`None`: `vectors.search.hnsw_ef`).
    pub hnsw_ef: Option<u32>,
}

/// One page of a scroll.
#[derive(Clone, Debug, PartialEq)]
pub struct ScrollPage {
    pub points: Vec<PointRecord>,
    /// Pass back as `offset` for the next page; `None` at the end.
    pub next: Option<Uuid>,
}

/// One configured Qdrant node, as `/readyz` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct NodeState {
    /// Position in `vectors.urls` (0-based; addresses are not shown to unauthenticated callers).
    pub index: usize,
    /// Whether the node answered its health check.
    pub ok: bool,
    /// Whether requests go to this node first (the last one that answered).
    pub preferred: bool,
}

/// The vector store boundary. Every write returns only after the backend confirmed it.
#[async_trait]
pub trait VectorRepo: Send + Sync + 'static {
    /// Which backend this is, for logs and `/readyz` ("embedded" or "qdrant").
    fn kind(&self) -> &'static str;

    /// Cheap reachability check for `/readyz`.
    async fn health(&self) -> Result<()>;

    /// Creates the collection if it is missing (with the `world_id` tenant index, and
    /// `run_id`/`source_id` keyword indexes); checks it against `spec` if it exists.
    async fn ensure_collection(&self, spec: &CollectionSpec) -> Result<()>;

    /// Upserts points and waits until the backend confirms the write.
    async fn upsert(&self, collection: &str, points: Vec<Point>) -> Result<()>;

    /// Dense search filtered by `filter`, best first. A collection that does not exist is
    /// [`Error::MissingCollection`], not an empty answer: a search is always of a world's own
    /// collection, so a missing one is damage (other reads of a missing collection are empty).
    /// A `limit` of 0 answers empty without looking.
    async fn search(&self, collection: &str, search: DenseSearch) -> Result<Vec<ScoredPoint>>;
    /// The BM25 ranking alone, scored with IDF over the world's points (as a hybrid search's
    /// sparse prefetch is). A missing collection is an error, as for [`VectorRepo::search`].
    async fn sparse_search(&self, collection: &str, search: SparseSearch) -> Result<Vec<ScoredPoint>>;

    /// Hybrid search (dense + sparse prefetch, RRF fusion), best first; a missing collection as
    /// in [`VectorRepo::search`].
    async fn hybrid_search(&self, collection: &str, search: HybridSearch) -> Result<Vec<ScoredPoint>>;

    /// Points by id; missing ids are skipped. Order follows `ids`.
    async fn retrieve(&self, collection: &str, ids: &[Uuid]) -> Result<Vec<PointRecord>>;

    /// The dense vectors of points by id (missing ids are skipped), for reusing an embedding
    /// instead of asking a provider again. Vectors come back as stored (unit length: cosine
    /// collections normalise on write).
    async fn dense_vectors(&self, collection: &str, ids: &[Uuid]) -> Result<Vec<(Uuid, Vec<f32>)>>;

    /// Deletes points by id (missing ids are fine) and waits for confirmation.
    async fn delete_points(&self, collection: &str, ids: &[Uuid]) -> Result<()>;

    /// Files the points `ids` under `to` (their payload's run, source and book number; the
    /// rest of the payload and the vectors stay) and waits for confirmation: a staged
    /// version's points, switched in. Missing ids are fine.
    async fn move_points(&self, collection: &str, ids: &[Uuid], to: PointHome) -> Result<()>;

    /// Deletes every point matching `filter` and waits for confirmation. A missing collection
    /// is not an error (there is nothing to delete).
    async fn delete_by_filter(&self, collection: &str, filter: PointFilter) -> Result<()>;

    /// Exact count of points matching `filter`; 0 when the collection does not exist.
    async fn count(&self, collection: &str, filter: PointFilter) -> Result<u64>;

    /// One page of points matching `filter`, ordered by id, starting at `offset`.
    async fn scroll(
        &self,
        collection: &str,
        filter: PointFilter,
        offset: Option<Uuid>,
        limit: usize,
    ) -> Result<ScrollPage>;

    /// How the existing `collection` differs from `[vectors.collection]` (empty when it matches
    /// or does not exist).
    async fn drift(&self, collection: &str) -> Result<Vec<settings::SettingDrift>>;

    /// Changes what can change in place (quantization, HNSW, on-disk placement, write
    /// consistency) to match `[vectors.collection]`; answers what still differs.
    async fn apply_settings(&self, collection: &str) -> Result<Vec<settings::SettingDrift>>;

    /// Each configured node's state (a server backend); empty for the embedded store.
    async fn nodes(&self) -> Vec<NodeState> {
        Vec::new()
    }

    /// Persists everything written so far and stops background maintenance. Called once at
    /// shutdown after the workers have stopped.
    async fn close(&self) -> Result<()>;
}
