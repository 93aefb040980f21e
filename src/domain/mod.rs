//! Domain types shared by every layer. They carry no transport or storage concerns: the API
//! converts them into DTOs, the stores into rows.

pub mod ids;
pub mod job;
pub mod key;
pub mod source;
pub mod work;
pub mod world;

pub use ids::{ChunkId, JobId, KeyId, RunId, SourceId, WorldId, point_id};
pub use job::{
    Job, JobCounts, JobError, JobEvent, JobEventKind, JobKind, JobStatus, MAX_JOB_ERRORS, ManifestState, RunStatus,
};
pub use key::{GroupCooldown, KeyOrigin, NewKey, SealedSecret, StoredKey};
pub use source::{
    Chunk, ChunkPage, ChunkState, ChunkView, EntryError, NewChunk, NewSource, Source, SourceCounts, SourceDeletion,
};
pub use work::{ManifestEntry, RunInfo, WorkItem};
pub use world::{ChunkingProfile, EmbeddingProfile, NewWorld, ProviderKind, World, WorldName, WorldStats};
