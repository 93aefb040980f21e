//! Jobs and manifest states.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::ids::{JobId, RunId, WorldId};

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
    JobKind { Ingest => "ingest", Reingest => "reingest", Repair => "repair" }
);

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

/// Job counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
