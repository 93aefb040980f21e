//! The rows the store reads (`sqlx::FromRow`, generic over the database) and their conversion
//! into domain types, with the integer helpers every query uses.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Error, Result};
use crate::domain::{
    Chunk, ChunkId, ChunkOutline, ChunkState, ChunkView, ChunkingProfile, EmbeddingProfile, EntryError, GroupCooldown,
    Job, JobCounts, JobError, JobEvent, JobId, JobKind, KeptPoint, KeyId, KeyOrigin, ManifestEntry, Metadata,
    PendingVersion, RunId, SealedSecret, Source, SourceDetails, SourceId, StoredKey, WorkItem, World, WorldId,
};

/// `($first, $first+1, …)` for `n` parameters: an `IN` list both dialects accept.
pub(super) fn in_list(first: usize, n: usize) -> String {
    let params: Vec<String> = (first..first + n).map(|i| format!("${i}")).collect();
    format!("({})", params.join(", "))
}

#[derive(sqlx::FromRow)]
pub(super) struct ManifestRow {
    chunk_id: Uuid,
    point_id: Uuid,
    run_id: Uuid,
    source_id: Uuid,
    chunk_number: i64,
    state: String,
    text_sha256: String,
    leased: bool,
    /// The entry's source is a staged version (its point carries the staged run).
    staged: bool,
}

impl TryFrom<ManifestRow> for ManifestEntry {
    type Error = Error;

    fn try_from(r: ManifestRow) -> Result<ManifestEntry> {
        Ok(ManifestEntry {
            chunk_id: ChunkId(r.chunk_id),
            point_id: r.point_id,
            run_id: RunId(r.run_id),
            source_id: SourceId(r.source_id),
            chunk_number: narrow("chunks", r.chunk_number)?,
            state: r.state.parse().map_err(|reason| corrupt("manifest_entries", reason))?,
            text_sha256: r.text_sha256,
            leased: r.leased,
            staged: r.staged,
        })
    }
}

/// An embedded entry with its kept vector (`RepairStore::kept_points`).
#[derive(sqlx::FromRow)]
pub(super) struct KeptRow {
    chunk_id: Uuid,
    point_id: Uuid,
    source_id: Uuid,
    book_number: i64,
    chunk_number: i64,
    token_count: i64,
    text_sha256: String,
    chunk_text: String,
    dense: Vec<u8>,
    staged: bool,
}

impl KeptRow {
    /// The point to write again; `None` when the kept bytes are not a vector (the chunk is
    /// then embedded again, as one without a kept vector would be).
    pub(super) fn into_point(self) -> Result<Option<KeptPoint>> {
        let Some(dense) = super::vectors::decode(&self.dense) else {
            tracing::warn!(chunk = %self.chunk_id, bytes = self.dense.len(), "a kept vector does not decode; ignored");
            return Ok(None);
        };
        Ok(Some(KeptPoint {
            chunk_id: ChunkId(self.chunk_id),
            point_id: self.point_id,
            source_id: SourceId(self.source_id),
            book_number: narrow("chunks", self.book_number)?,
            chunk_number: narrow("chunks", self.chunk_number)?,
            token_count: narrow("chunks", self.token_count)?,
            text_sha256: self.text_sha256,
            chunk_text: self.chunk_text,
            dense,
            staged: self.staged,
        }))
    }
}

/// The columns of a chunk, shared by the rows that carry one.
#[derive(sqlx::FromRow)]
pub(super) struct ChunkRow {
    id: Uuid,
    world_id: Uuid,
    run_id: Uuid,
    source_id: Uuid,
    book_number: i64,
    chunk_number: i64,
    char_start: i64,
    char_end: i64,
    token_count: i64,
    chunk_text: String,
    overlap_text: String,
    text_sha256: String,
    page: Option<i64>,
    version: i64,
    embed_prefix: String,
}

impl TryFrom<ChunkRow> for Chunk {
    type Error = Error;

    fn try_from(r: ChunkRow) -> Result<Chunk> {
        Ok(Chunk {
            id: ChunkId(r.id),
            world_id: WorldId(r.world_id),
            run_id: RunId(r.run_id),
            source_id: SourceId(r.source_id),
            book_number: narrow("chunks", r.book_number)?,
            chunk_number: narrow("chunks", r.chunk_number)?,
            char_start: narrow("chunks", r.char_start)?,
            char_end: narrow("chunks", r.char_end)?,
            token_count: narrow("chunks", r.token_count)?,
            chunk_text: r.chunk_text,
            overlap_text: r.overlap_text,
            sha256: r.text_sha256,
            embed_prefix: r.embed_prefix,
            page: r.page.map(|p| narrow("chunks", p)).transpose()?,
            version: narrow("chunks", r.version)?,
        })
    }
}

/// A [`ChunkOutline`]'s columns.
#[derive(sqlx::FromRow)]
pub(super) struct ChunkOutlineRow {
    id: Uuid,
    /// Checked by the reader, not kept.
    pub(super) world_id: Uuid,
    source_id: Uuid,
    book_number: i64,
    chunk_number: i64,
    char_start: i64,
    char_end: i64,
    token_count: i64,
    text_sha256: String,
    page: Option<i64>,
    version: i64,
}

impl TryFrom<ChunkOutlineRow> for ChunkOutline {
    type Error = Error;

    fn try_from(r: ChunkOutlineRow) -> Result<ChunkOutline> {
        Ok(ChunkOutline {
            id: ChunkId(r.id),
            source_id: SourceId(r.source_id),
            book_number: narrow("chunks", r.book_number)?,
            chunk_number: narrow("chunks", r.chunk_number)?,
            char_start: narrow("chunks", r.char_start)?,
            char_end: narrow("chunks", r.char_end)?,
            token_count: narrow("chunks", r.token_count)?,
            sha256: r.text_sha256,
            page: r.page.map(|p| narrow("chunks", p)).transpose()?,
            version: narrow("chunks", r.version)?,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct ChunkViewRow {
    #[sqlx(flatten)]
    chunk: ChunkRow,
    point_id: Uuid,
    filename: String,
    /// The source a staged version's row replaces (`sources.replaces`).
    replaces: Option<Uuid>,
}

impl TryFrom<ChunkViewRow> for ChunkView {
    type Error = Error;

    fn try_from(r: ChunkViewRow) -> Result<ChunkView> {
        Ok(ChunkView {
            chunk: r.chunk.try_into()?,
            source_filename: r.filename,
            point_id: r.point_id,
            staged_for: r.replaces.map(SourceId),
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct ChunkStateRow {
    #[sqlx(flatten)]
    chunk: ChunkRow,
    state: String,
    attempts: i64,
    last_error_code: Option<String>,
    last_error_message: Option<String>,
}

impl TryFrom<ChunkStateRow> for ChunkState {
    type Error = Error;

    fn try_from(r: ChunkStateRow) -> Result<ChunkState> {
        Ok(ChunkState {
            chunk: r.chunk.try_into()?,
            state: r.state.parse().map_err(|reason| corrupt("manifest_entries", reason))?,
            attempts: narrow("manifest_entries", r.attempts)?,
            // Both columns are written together; a code is what makes an error.
            last_error: r.last_error_code.map(|code| EntryError {
                code,
                message: r.last_error_message.unwrap_or_default(),
            }),
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct WorkRow {
    chunk_id: Uuid,
    point_id: Uuid,
    job_id: Uuid,
    run_id: Uuid,
    world_id: Uuid,
    source_id: Uuid,
    book_number: i64,
    chunk_number: i64,
    token_count: i64,
    chunk_text: String,
    text_sha256: String,
    attempts: i64,
    provider: String,
    model: String,
    dimensions: i64,
    collection: String,
    hybrid: bool,
    staged: bool,
}

/// A [`WorkRow`] read back after a claim, with what the claim set.
#[derive(sqlx::FromRow)]
pub(super) struct ClaimedRow {
    #[sqlx(flatten)]
    pub(super) work: WorkRow,
    pub(super) lease_owner: Option<String>,
    pub(super) state: String,
}

impl TryFrom<WorkRow> for WorkItem {
    type Error = Error;

    fn try_from(r: WorkRow) -> Result<WorkItem> {
        Ok(WorkItem {
            chunk_id: ChunkId(r.chunk_id),
            point_id: r.point_id,
            job_id: JobId(r.job_id),
            run_id: RunId(r.run_id),
            world_id: WorldId(r.world_id),
            source_id: SourceId(r.source_id),
            book_number: narrow("chunks", r.book_number)?,
            chunk_number: narrow("chunks", r.chunk_number)?,
            token_count: narrow("chunks", r.token_count)?,
            chunk_text: r.chunk_text,
            text_sha256: r.text_sha256,
            attempts: narrow("manifest_entries", r.attempts)?,
            profile: EmbeddingProfile {
                provider: r.provider.parse().map_err(|reason| corrupt("runs", reason))?,
                model: r.model,
                dimensions: narrow("runs", r.dimensions)?,
            },
            collection: r.collection,
            hybrid: r.hybrid,
            staged: r.staged,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct EventRow {
    id: i64,
    job_id: Uuid,
    kind: String,
    data: String,
    created_at: DateTime<Utc>,
}

impl TryFrom<EventRow> for JobEvent {
    type Error = Error;

    fn try_from(r: EventRow) -> Result<JobEvent> {
        Ok(JobEvent {
            id: r.id,
            job_id: JobId(r.job_id),
            kind: r.kind.parse().map_err(|reason| corrupt("job_events", reason))?,
            data: r.data,
            created_at: r.created_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct WorldCountRow {
    #[sqlx(flatten)]
    pub(super) world: WorldRow,
    pub(super) embedded: i64,
}

#[derive(sqlx::FromRow)]
pub(super) struct WorldRow {
    id: Uuid,
    name: String,
    provider: String,
    model: String,
    dimensions: i64,
    max_tokens: i64,
    overlap_tokens: i64,
    parent_max_tokens: i64,
    context_prefix: bool,
    hybrid: bool,
    active_run_id: Uuid,
    collection: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<WorldRow> for World {
    type Error = Error;

    fn try_from(row: WorldRow) -> Result<World> {
        Ok(World {
            id: WorldId(row.id),
            name: row.name,
            embedding: EmbeddingProfile {
                provider: row.provider.parse().map_err(|reason| corrupt("worlds", reason))?,
                model: row.model,
                dimensions: narrow("worlds", row.dimensions)?,
            },
            chunking: ChunkingProfile {
                max_tokens: narrow("worlds", row.max_tokens)?,
                overlap_tokens: narrow("worlds", row.overlap_tokens)?,
                parent_max_tokens: narrow("worlds", row.parent_max_tokens)?,
                context_prefix: row.context_prefix,
            },
            hybrid: row.hybrid,
            active_run: RunId(row.active_run_id),
            collection: row.collection,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct KeyRow {
    id: Uuid,
    provider: String,
    label: String,
    origin: String,
    quota_group: Option<String>,
    secret_ciphertext: Option<Vec<u8>>,
    secret_nonce: Option<Vec<u8>>,
    fingerprint: String,
    enabled: bool,
    retired: bool,
    retired_reason: Option<String>,
    cooldown_until: Option<DateTime<Utc>>,
    consecutive_failures: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<KeyRow> for StoredKey {
    type Error = Error;

    fn try_from(row: KeyRow) -> Result<StoredKey> {
        let sealed = match (row.secret_ciphertext, row.secret_nonce) {
            (Some(ciphertext), Some(nonce)) => Some(SealedSecret { ciphertext, nonce }),
            _ => None,
        };
        Ok(StoredKey {
            id: KeyId(row.id),
            provider: row
                .provider
                .parse()
                .map_err(|reason| corrupt("provider_keys", reason))?,
            label: row.label,
            origin: KeyOrigin::parse(&row.origin)
                .ok_or_else(|| corrupt("provider_keys", format!("unknown origin `{}`", row.origin)))?,
            quota_group: row.quota_group,
            sealed,
            fingerprint: row.fingerprint,
            enabled: row.enabled,
            retired: row.retired,
            retired_reason: row.retired_reason,
            cooldown_until: row.cooldown_until,
            consecutive_failures: narrow("provider_keys", row.consecutive_failures)?,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct GroupCooldownRow {
    provider: String,
    quota_group: String,
    cooldown_until: DateTime<Utc>,
}

impl TryFrom<GroupCooldownRow> for GroupCooldown {
    type Error = Error;

    fn try_from(row: GroupCooldownRow) -> Result<GroupCooldown> {
        Ok(GroupCooldown {
            provider: row
                .provider
                .parse()
                .map_err(|reason| corrupt("quota_group_cooldowns", reason))?,
            quota_group: row.quota_group,
            until: row.cooldown_until,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct StatsRow {
    pub sources: i64,
    pub chunks: i64,
    pub embedded: i64,
    pub pending: i64,
    pub failed: i64,
}

#[derive(sqlx::FromRow)]
pub(super) struct SourceRow {
    id: Uuid,
    world_id: Uuid,
    book_number: i64,
    filename: String,
    content_type: String,
    sha256: String,
    chars: i64,
    #[sqlx(flatten)]
    details: DetailsColumns,
    created_at: DateTime<Utc>,
    source_key: Option<String>,
    version: i64,
    updated_at: Option<DateTime<Utc>>,
    pending_id: Option<Uuid>,
    pending_version: Option<i64>,
    pending_job: Option<Uuid>,
    pending_created_at: Option<DateTime<Utc>>,
}

impl TryFrom<SourceRow> for Source {
    type Error = Error;

    fn try_from(row: SourceRow) -> Result<Source> {
        Ok(Source {
            id: SourceId(row.id),
            world_id: WorldId(row.world_id),
            book_number: narrow("sources", row.book_number)?,
            filename: row.filename,
            content_type: row.content_type,
            sha256: row.sha256,
            chars: narrow("sources", row.chars)?,
            details: row.details.try_into()?,
            created_at: row.created_at,
            key: row.source_key,
            version: narrow("sources", row.version)?,
            updated_at: row.updated_at.unwrap_or(row.created_at),
            pending: match (
                row.pending_id,
                row.pending_version,
                row.pending_job,
                row.pending_created_at,
            ) {
                (Some(id), Some(version), Some(job), Some(at)) => Some(PendingVersion {
                    staged_id: SourceId(id),
                    version: narrow("sources", version)?,
                    job_id: JobId(job),
                    created_at: at,
                }),
                _ => None,
            },
        })
    }
}

/// A source's title, URL and metadata columns.
#[derive(sqlx::FromRow)]
pub(super) struct DetailsColumns {
    title: Option<String>,
    url: Option<String>,
    metadata: String,
}

impl TryFrom<DetailsColumns> for SourceDetails {
    type Error = Error;

    fn try_from(row: DetailsColumns) -> Result<SourceDetails> {
        Ok(SourceDetails {
            title: row.title,
            url: row.url,
            metadata: Metadata::from_json(&row.metadata).map_err(|reason| corrupt("sources", reason))?,
        })
    }
}

/// A hit as retrieval verifies it: its chunk's view with its source's details.
#[derive(sqlx::FromRow)]
pub(super) struct HitRow {
    #[sqlx(flatten)]
    pub(super) view: ChunkViewRow,
    #[sqlx(flatten)]
    pub(super) details: DetailsColumns,
}

#[derive(sqlx::FromRow)]
pub(super) struct CountsRow {
    pub chunks: i64,
    pub embedded: i64,
    pub pending: i64,
    pub failed: i64,
}

#[derive(sqlx::FromRow)]
pub(super) struct JobRow {
    id: Uuid,
    world_id: Uuid,
    kind: String,
    status: String,
    run_id: Uuid,
    total: i64,
    embedded: i64,
    failed: i64,
    retries: i64,
    rate_limited: i64,
    reused: i64,
    created_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    waiting_reason: Option<String>,
    waiting_until: Option<DateTime<Utc>>,
    version_of: Option<Uuid>,
    /// A gated re-ingest's gate state.
    gate_state: Option<String>,
}

/// A [`JobErrorRow`] with its job, as `list_jobs` reads them.
#[derive(sqlx::FromRow)]
pub(super) struct ListedJobErrorRow {
    pub(super) job_id: Uuid,
    #[sqlx(flatten)]
    pub(super) error: JobErrorRow,
}

#[derive(sqlx::FromRow)]
pub(super) struct JobErrorRow {
    book_number: i64,
    chunk_number: i64,
    last_error_code: Option<String>,
    last_error_message: Option<String>,
}

impl JobRow {
    pub(super) fn id_uuid(&self) -> Uuid {
        self.id
    }

    pub(super) fn into_job(self, errors: Vec<JobErrorRow>) -> Result<Job> {
        let total: u64 = narrow("jobs", self.total)?;
        let embedded: u64 = narrow("jobs", self.embedded)?;
        let failed: u64 = narrow("jobs", self.failed)?;
        let errors = errors
            .into_iter()
            .map(|e| {
                Ok(JobError {
                    book_number: narrow("manifest_entries", e.book_number)?,
                    chunk_number: narrow("manifest_entries", e.chunk_number)?,
                    code: e.last_error_code.unwrap_or_else(|| "unknown".to_owned()),
                    message: e.last_error_message.unwrap_or_default(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Job {
            id: JobId(self.id),
            world_id: WorldId(self.world_id),
            kind: match self.version_of {
                Some(_) => JobKind::Replace,
                None => self.kind.parse().map_err(|reason| corrupt("jobs", reason))?,
            },
            status: self.status.parse().map_err(|reason| corrupt("jobs", reason))?,
            run_id: RunId(self.run_id),
            counts: JobCounts {
                total,
                embedded,
                pending: total.saturating_sub(embedded + failed),
                failed,
                retries: narrow("jobs", self.retries)?,
                rate_limited: narrow("jobs", self.rate_limited)?,
                reused: narrow("jobs", self.reused)?,
            },
            errors,
            created_at: self.created_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            waiting: match self.waiting_reason {
                Some(reason) => Some(crate::domain::Waiting {
                    reason: reason.parse().map_err(|reason| corrupt("jobs", reason))?,
                    until: self.waiting_until,
                }),
                None => None,
            },
            source: self.version_of.map(SourceId),
            gate: (self.gate_state.as_deref())
                .map(|state| state.parse().map_err(|reason| corrupt("reingest_gates", reason)))
                .transpose()?,
        })
    }
}

pub(super) fn corrupt(table: &'static str, reason: String) -> Error {
    Error::Corrupt { table, reason }
}

/// Converts a stored integer into the domain's unsigned type; out of range is corruption.
pub(super) fn narrow<T: TryFrom<i64>>(table: &'static str, value: i64) -> Result<T> {
    T::try_from(value).map_err(|_| corrupt(table, format!("integer {value} out of range")))
}

/// Widens a domain integer for binding (every column is 64-bit).
pub(super) fn wide<T: Into<u64>>(value: T) -> i64 {
    i64::try_from(value.into()).unwrap_or(i64::MAX)
}

/// The row a statement must find (as `fetch_one` would: none is a failed query).
pub(super) fn found<T>(row: Option<T>) -> Result<T> {
    row.ok_or(Error::Query(sqlx::Error::RowNotFound))
}
