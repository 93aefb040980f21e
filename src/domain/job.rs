//! Jobs and manifest states.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::ids::{JobId, RunId, SourceId, WorldId};

macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(format!(concat!("unknown ", stringify!($name), " `{}`"), other)),
                }
            }
        }
    };
}

string_enum!(
    /// What a job does.
    JobKind { Ingest => "ingest", Reingest => "reingest", Repair => "repair", Replace => "replace" }
);

impl JobKind {
    pub const ALL: [JobKind; 4] = [JobKind::Ingest, JobKind::Reingest, JobKind::Repair, JobKind::Replace];
}

string_enum!(
    /// A run's place in its world: the one retrieval serves, one a re-ingest is building, or an
    /// old one whose points and rows are being removed.
    RunStatus { Building => "building", Active => "active", Retired => "retired" }
);

string_enum!(
    /// Where a job is in its life.
    JobStatus {
        Queued => "queued",
        Running => "running",
        Paused => "paused",
        Cancelled => "cancelled",
        Completed => "completed",
        Failed => "failed",
    }
);

impl JobStatus {
    pub const ALL: [JobStatus; 6] = [
        JobStatus::Queued,
        JobStatus::Running,
        JobStatus::Paused,
        JobStatus::Cancelled,
        JobStatus::Completed,
        JobStatus::Failed,
    ];

    /// Terminal statuses never change again.
    pub fn is_terminal(self) -> bool {
        match self {
            JobStatus::Cancelled | JobStatus::Completed | JobStatus::Failed => true,
            JobStatus::Queued | JobStatus::Running | JobStatus::Paused => false,
        }
    }
}

string_enum!(
    /// State of one manifest entry (one chunk slot).
    ManifestState { Pending => "pending", Embedded => "embedded", Failed => "failed" }
);

/// Job counters (serialized as a `progress` event's data and a webhook payload's `counts`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobCounts {
    pub total: u64,
    pub embedded: u64,
    pub pending: u64,
    pub failed: u64,
    pub retries: u64,
    pub rate_limited: u64,
    pub reused: u64,
}

/// A structured per-chunk error recorded on a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobError {
    pub book_number: u32,
    pub chunk_number: u32,
    pub code: String,
    pub message: String,
}

/// How many failed chunks a job object lists in `errors` at most.
pub const MAX_JOB_ERRORS: u32 = 100;

/// A job as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub id: JobId,
    pub world_id: WorldId,
    pub kind: JobKind,
    pub status: JobStatus,
    pub run_id: RunId,
    pub counts: JobCounts,
    /// The first [`MAX_JOB_ERRORS`] failed chunks, by book and chunk number; `counts.failed`
    /// has them all, and each chunk's own `last_error` is in the source's chunk listing.
    pub errors: Vec<JobError>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Why the job is not moving, as the workers last found (see [`Waiting`]).
    pub waiting: Option<Waiting>,
    /// For a replace: the source it makes a new version of.
    pub source: Option<SourceId>,
    /// For a gated re-ingest: where its gate's decision is.
    pub gate: Option<super::GateState>,
}

impl Job {
    /// Whether the job is a re-ingest held by its gate: running (sources added meanwhile are
    /// still cut into its run) but switching only when promoted.
    pub fn is_held(&self) -> bool {
        self.status == JobStatus::Running && self.gate == Some(super::GateState::Held)
    }

    /// What the job waits for now: only a running job waits, and only until the time given.
    pub fn waiting_at(&self, now: DateTime<Utc>) -> Option<&Waiting> {
        self.waiting
            .as_ref()
            .filter(|w| self.status == JobStatus::Running && w.until.is_none_or(|until| until > now))
    }
}

string_enum!(
    /// Why a running job is not moving.
    WaitReason {
        RateLimited => "rate_limited",
        DailyQuota => "daily_quota",
        NoEligibleKey => "no_eligible_key",
        ProviderUnavailable => "provider_unavailable",
        VectorStoreUnavailable => "vector_store_unavailable",
    }
);

/// Why a running job is not moving and until when (`None`: until something changes, e.g. a
/// key is added).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    pub reason: WaitReason,
    pub until: Option<DateTime<Utc>>,
}

string_enum!(
    /// Kinds of job events (the SSE event names).
    JobEventKind { Progress => "progress", Warning => "warning", Error => "error", Status => "status" }
);

/// One entry of a job's append-only history.
#[derive(Clone, Debug, PartialEq)]
pub struct JobEvent {
    /// Increasing per database; the SSE event id.
    pub id: i64,
    pub job_id: JobId,
    pub kind: JobEventKind,
    /// JSON text.
    pub data: String,
    pub created_at: DateTime<Utc>,
}

impl JobEvent {
    /// The status a `status` event records, when it is one (the SQL triggers write these).
    pub fn status(&self) -> Option<JobStatus> {
        if self.kind != JobEventKind::Status {
            return None;
        }
        let value: serde_json::Value = serde_json::from_str(&self.data).ok()?;
        value.get("status")?.as_str()?.parse().ok()
    }
}

string_enum!(
    /// Why a job warns: trouble it recovers from by itself.
    WarningCode {
        NoEligibleKey => "no_eligible_key",
        KeyRetired => "key_retired",
        ProviderError => "provider_error",
        ProviderUnavailable => "provider_unavailable",
        VectorStoreUnavailable => "vector_store_unavailable",
        VectorStoreRejected => "vector_store_rejected",
        RateLimited => "rate_limited",
        DailyQuota => "daily_quota",
    }
);

/// What a reconciliation of a world found and did (a repair job's `progress` event).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RepairSummary {
    pub points_checked: u64,
    pub orphan_points_deleted: u64,
    pub stale_points_deleted: u64,
    pub missing_points_requeued: u64,
    /// Missing points written again from the vectors the store kept (no provider call).
    pub points_restored: u64,
    pub entries_adopted: u64,
    /// Chunks of the world's runs that failed for good and stay failed: a repair does not
    /// retry them (`POST /v1/worlds/{world_id}/retry-failed` does).
    pub failed_chunks: u64,
}

impl RepairSummary {
    pub fn changed_anything(&self) -> bool {
        self.orphan_points_deleted
            + self.stale_points_deleted
            + self.missing_points_requeued
            + self.points_restored
            + self.entries_adopted
            > 0
    }
}

/// Every job event the application writes, typed. [`JobEventData::to_json`] is the one place
/// their JSON is written (`status` events come from the database's triggers in the same
/// shape, `{"status": …}`, see `migrations/*/0004_job_status_events.sql`).
#[derive(Clone, Debug, PartialEq)]
pub enum JobEventData {
    /// The job's counters after a batch.
    Progress(JobCounts),
    /// A repair job's reconciliation.
    Repaired(RepairSummary),
    /// Trouble the job recovers from by itself; `chunks` is how many it concerns.
    Warning {
        code: WarningCode,
        chunks: usize,
        message: String,
    },
    /// A source deleted while the job still had pending chunks of it.
    SourceDeleted { source: super::SourceId, dropped: u64 },
    /// A chunk that failed for good.
    ChunkFailed {
        book_number: u32,
        chunk_number: u32,
        code: &'static str,
        message: String,
    },
    /// A repair that could not finish its reconciliation.
    RepairFailed { message: String },
    /// A replace switched its source to the new version: `added` chunks (of which `reused`
    /// took a vector already made for the same text), `removed` chunks of the old version.
    Replaced {
        source: super::SourceId,
        version: u32,
        added: u64,
        reused: u64,
        removed: u64,
    },
    /// A replace cancelled because a newer one of the same source arrived.
    Superseded { source: super::SourceId, by: JobId },
    /// A gated re-ingest held: its metric dropped past the tolerance on the new run (`before`
    /// and `after`), or its evaluation could not finish (no figures).
    Held {
        metric: &'static str,
        before: Option<f64>,
        after: Option<f64>,
        message: String,
    },
}

impl JobEventData {
    pub fn kind(&self) -> JobEventKind {
        match self {
            JobEventData::Progress(_) | JobEventData::Repaired(_) | JobEventData::Replaced { .. } => {
                JobEventKind::Progress
            }
            JobEventData::Warning { .. }
            | JobEventData::SourceDeleted { .. }
            | JobEventData::Superseded { .. }
            | JobEventData::Held { .. } => JobEventKind::Warning,
            JobEventData::ChunkFailed { .. } | JobEventData::RepairFailed { .. } => JobEventKind::Error,
        }
    }

    /// The event's JSON text, as stored and streamed.
    pub fn to_json(&self) -> String {
        let value = match self {
            JobEventData::Progress(counts) => serde_json::to_value(counts).unwrap_or_default(),
            JobEventData::Repaired(summary) => serde_json::to_value(summary).unwrap_or_default(),
            JobEventData::Warning { code, chunks, message } => {
                serde_json::json!({"code": code.as_str(), "chunks": chunks, "message": message})
            }
            JobEventData::SourceDeleted { source, dropped } => serde_json::json!({
                "code": "source_deleted",
                "message": format!(
                    "source {} was deleted; {dropped} of this job's pending chunks were dropped with it", source.0
                ),
                "source_id": source.0,
                "dropped": dropped,
            }),
            JobEventData::ChunkFailed {
                book_number,
                chunk_number,
                code,
                message,
            } => serde_json::json!({
                "book_number": book_number, "chunk_number": chunk_number, "code": code, "message": message,
            }),
            JobEventData::RepairFailed { message } => serde_json::json!({"code": "repair_failed", "message": message}),
            JobEventData::Replaced {
                source,
                version,
                added,
                reused,
                removed,
            } => serde_json::json!({
                "code": "replaced", "source_id": source.0, "version": version,
                "added": added, "reused": reused, "removed": removed,
            }),
            JobEventData::Superseded { source, by } => serde_json::json!({
                "code": "superseded",
                "message": format!("a newer replace of source {} (job {}) superseded this one; nothing of it was served", source.0, by.0),
                "source_id": source.0,
                "by": by.0,
            }),
            JobEventData::Held {
                metric,
                before,
                after,
                message,
            } => serde_json::json!({
                "code": "reingest_held",
                "message": message,
                "metric": metric,
                "before": before,
                "after": after,
            }),
        };
        value.to_string()
    }
}
