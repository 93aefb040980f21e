//! A unit of embedding work as a worker sees it.

use super::ids::{ChunkId, JobId, RunId, SourceId, WorldId};
use super::job::{ManifestState, RunStatus};
use super::world::EmbeddingProfile;

/// One claimed manifest entry with everything needed to embed and index its chunk.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkItem {
    pub chunk_id: ChunkId,
    pub point_id: uuid::Uuid,
    pub job_id: JobId,
    pub run_id: RunId,
    pub world_id: WorldId,
    pub source_id: SourceId,
    pub book_number: u32,
    pub chunk_number: u32,
    /// Tokens of `chunk_text`.
    pub token_count: u32,
    /// The text to embed: the chunk's context prefix (in a world with
    /// `chunking.context_prefix`), then its stored text.
    pub chunk_text: String,
    /// Hash of `chunk_text`.
    pub text_sha256: String,
    pub attempts: u32,
    /// The profile of the entry's run (a re-ingest may embed into a new profile).
    pub profile: EmbeddingProfile,
    pub collection: String,
    pub hybrid: bool,
    /// The chunk belongs to a staged version: its point carries [`crate::domain::staged_run`]
    /// until the version is switched in.
    pub staged: bool,
}

/// A vector a worker wrote to a claimed entry's point, as it reports it: the store marks the
/// entry embedded and keeps the vector, so that the point can be written again without a
/// provider (repair).
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddedVector {
    pub chunk_id: ChunkId,
    /// Hash of the text the vector was made from.
    pub text_sha256: String,
    pub dense: Vec<f32>,
}

/// An embedded entry whose vector the store kept (made from the chunk's current text), with
/// everything its point carries: what repair writes a lost point again from.
#[derive(Clone, Debug, PartialEq)]
pub struct KeptPoint {
    pub chunk_id: ChunkId,
    pub point_id: uuid::Uuid,
    pub source_id: SourceId,
    pub book_number: u32,
    pub chunk_number: u32,
    pub token_count: u32,
    pub text_sha256: String,
    /// For the BM25 terms of a hybrid world's point, computed again from the text.
    pub chunk_text: String,
    pub dense: Vec<f32>,
    /// The chunk belongs to a staged version (its point carries the staged run).
    pub staged: bool,
}

/// A manifest entry as repair sees it: what the store says about one slot's vector.
#[derive(Clone, Debug, PartialEq)]
pub struct ManifestEntry {
    pub chunk_id: ChunkId,
    pub point_id: uuid::Uuid,
    pub run_id: RunId,
    pub source_id: SourceId,
    pub chunk_number: u32,
    pub state: ManifestState,
    /// The chunk's current text hash.
    pub text_sha256: String,
    /// A worker holds a live lease on it.
    pub leased: bool,
    /// The chunk belongs to a staged version (its point carries the staged run).
    pub staged: bool,
}

/// One run of a world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunInfo {
    pub id: RunId,
    /// The profile the run's vectors are made with (a re-ingest's may differ from the world's).
    pub embedding: super::EmbeddingProfile,
    pub collection: String,
    pub status: RunStatus,
}
