//! Domain types shared by every layer. They carry no transport or storage concerns: the API
//! converts them into DTOs, the stores into rows.

pub mod ids;
pub mod job;
pub mod source;
pub mod world;

pub use ids::{ChunkId, JobId, KeyId, RunId, SourceId, WorldId, point_id};
pub use job::{Job, JobCounts, JobError, JobKind, JobStatus, ManifestState};
pub use source::{Chunk, NewChunk, NewSource, Source, SourceCounts};
pub use world::{ChunkingProfile, EmbeddingProfile, NewWorld, ProviderKind, World, WorldName, WorldStats};
