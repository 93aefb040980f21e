//! Evaluation test sets: questions asked of a world with what a good answer holds, to measure
//! retrieval on the user's own documents.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{ChunkId, EvalSetId, SourceId, WorldId};

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
