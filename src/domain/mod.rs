//! Domain types shared by every layer. They carry no transport or storage concerns: the API
//! converts them into DTOs, the stores into rows.

pub mod audit;
pub mod cluster;
pub mod eval;
pub mod ids;
pub mod job;
pub mod key;
pub mod source;
pub mod source_details;
pub mod token;
pub mod webhook;
pub mod work;
pub mod world;

pub use audit::{Actor, AuditAction, AuditEvent, NewAuditEvent};
pub use cluster::{BudgetDraw, BudgetLimit, Drawn, Replica, ReplicaBeat, WindowRule};
pub use eval::{
    EvalItem, EvalRun, EvalRunStatus, EvalSet, EvalSetSummary, Expected, GateMetric, GateState, ItemRecord,
    MeasuredIndex, NewGate, ReingestGate,
};
pub use ids::{
    ChunkId, EvalRunId, EvalSetId, JobId, KeyId, RunId, SourceId, TokenId, WebhookId, WorldId, point_id, staged_run,
};
pub use job::{
    Job, JobCounts, JobError, JobEvent, JobEventData, JobEventKind, JobKind, JobStatus, MAX_JOB_ERRORS, ManifestState,
    RepairSummary, RunStatus, WaitReason, Waiting, WarningCode,
};
pub use key::{GroupCooldown, KeyOrigin, NewKey, SealedSecret, StoredKey};
pub use source::{
    Chunk, ChunkOutline, ChunkPage, ChunkState, ChunkView, EntryError, NewChunk, NewParent, NewSource, Parent,
    PendingVersion, Source, SourceCounts, SourceDeletion, SourceFormat, SourceKey, SourceSize, context_title,
    media_essence,
};
pub use source_details::{FieldError, Metadata, SourceDetails, SourceTitle, SourceUrl};
pub use token::{ApiToken, Scope, TokenCredentials};
pub use webhook::{Attempt, Delivery, DeliveryStatus, Webhook, WebhookEvent};
pub use work::{EmbeddedVector, KeptPoint, ManifestEntry, RunInfo, WorkItem};
pub use world::{
    BUILTIN_OPENAI_MODELS, ChunkingProfile, EmbeddingProfile, NewWorld, ProviderKind, World, WorldName, WorldStats,
};

/// The current time as the stores record it: whole microseconds, which both backends keep
/// exactly (a value read back equals the one written).
pub fn now() -> chrono::DateTime<chrono::Utc> {
    use chrono::SubsecRound as _;
    chrono::Utc::now().trunc_subsecs(6)
}

/// A slice of a listing: `limit` rows after skipping `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub offset: u64,
    pub limit: u64,
}

impl Window {
    /// Every row (for quarry's own passes over a listing).
    pub const ALL: Window = Window {
        offset: 0,
        limit: u64::MAX,
    };
}
