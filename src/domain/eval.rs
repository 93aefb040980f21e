//! Evaluation test sets: questions asked of a world with what a good answer holds, to measure
//! retrieval on the user's own documents.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{ChunkId, EvalRunId, EvalSetId, RunId, SourceId, WorldId};

/// What a good answer to one question holds: any of the named sources (by id or key) or chunks
/// among the results, and the answer text in the context. At least one is given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expected {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_keys: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<ChunkId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl Expected {
    /// Whether a hit on sources or chunks can be judged (else only the answer text can).
    pub fn names_hits(&self) -> bool {
        !(self.sources.is_empty() && self.source_keys.is_empty() && self.chunks.is_empty())
    }
}

/// One question of a test set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvalItem {
    pub query: String,
    pub expected: Expected,
}

/// A test set of a world.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalSet {
    pub id: EvalSetId,
    pub world_id: WorldId,
    pub name: String,
    pub items: Vec<EvalItem>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A test set as listed: its items counted, not read.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalSetSummary {
    pub id: EvalSetId,
    pub world_id: WorldId,
    pub name: String,
    pub item_count: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Where an evaluation run is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvalRunStatus {
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl EvalRunStatus {
    pub const ALL: [EvalRunStatus; 5] = [
        EvalRunStatus::Queued,
        EvalRunStatus::Running,
        EvalRunStatus::Completed,
        EvalRunStatus::Failed,
        EvalRunStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EvalRunStatus::Queued => "queued",
            EvalRunStatus::Running => "running",
            EvalRunStatus::Completed => "completed",
            EvalRunStatus::Failed => "failed",
            EvalRunStatus::Cancelled => "cancelled",
        }
    }

    /// Terminal statuses never change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            EvalRunStatus::Completed | EvalRunStatus::Failed | EvalRunStatus::Cancelled
        )
    }
}

impl std::str::FromStr for EvalRunStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| format!("unknown evaluation run status `{s}`"))
    }
}

/// The index an evaluation run measured: the world's run (its chunks and vectors) and the
/// profiles it was built with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeasuredIndex {
    pub run_id: RunId,
    pub provider: String,
    pub model: String,
    pub dimensions: u32,
    pub max_tokens: u32,
    pub overlap_tokens: u32,
    pub parent_max_tokens: u32,
    pub context_prefix: bool,
    pub hybrid: bool,
}

/// One item's scores in a run: per setting (in the run's order), and per budget within it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ItemRecord {
    /// Whether the item names sources or chunks (so hits are judged).
    pub hit_judged: bool,
    /// Whether the item has an answer with words (so the context is judged).
    pub answer_judged: bool,
    /// Per setting: the rank (from 1) of the first expected result, if any.
    pub first_hit: Vec<Option<u32>>,
    /// Per setting, per budget: the share of the answer's grams in the context.
    pub answer_share: Vec<Vec<Option<f64>>>,
    /// Per setting, per budget: the retrieval's time in the service, in milliseconds.
    pub ms: Vec<Vec<f64>>,
}

/// An evaluation run as stored: what it measures (a snapshot of the test set's items, the
/// settings as sent, the budgets) and how far it got.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalRun {
    pub id: EvalRunId,
    pub world_id: WorldId,
    pub eval_id: EvalSetId,
    pub eval_name: String,
    pub status: EvalRunStatus,
    /// Each a `/retrieve` body without `query` and `max_context_tokens`, as sent.
    pub settings: Vec<serde_json::Value>,
    /// Context budgets, in tokens: every setting runs at each.
    pub budgets: Vec<u32>,
    pub items: Vec<EvalItem>,
    /// The scores of the first `scores.len()` items.
    pub scores: Vec<ItemRecord>,
    /// Set when the run starts.
    pub measured: Option<MeasuredIndex>,
    /// Times the run was taken up (more than one: it was resumed after a restart).
    pub attempts: u32,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}
