//! Evaluation test sets: questions asked of a world with what a good answer holds, to measure
//! retrieval on the user's own documents.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{ChunkId, EvalRunId, EvalSetId, JobId, RunId, SourceId, WorldId};

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
    /// A gated re-ingest's run, waiting for the new index to be embedded.
    Waiting,
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl EvalRunStatus {
    pub const ALL: [EvalRunStatus; 6] = [
        EvalRunStatus::Waiting,
        EvalRunStatus::Queued,
        EvalRunStatus::Running,
        EvalRunStatus::Completed,
        EvalRunStatus::Failed,
        EvalRunStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EvalRunStatus::Waiting => "waiting",
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
    /// The index (the world's run) measured: `None`, whatever the world serves; a gated
    /// re-ingest's runs name the run being built and the one served when it was asked for.
    pub target_run: Option<RunId>,
    /// The gated re-ingest this run decides, if any.
    pub gate_job: Option<JobId>,
    /// Times the run was taken up (more than one: it was resumed after a restart).
    pub attempts: u32,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl EvalRun {
    /// A new run of `set` on `world`, not yet started: its items copied, no scores.
    pub fn new(set: &EvalSet, status: EvalRunStatus, settings: Vec<serde_json::Value>, budgets: Vec<u32>) -> Self {
        EvalRun {
            id: EvalRunId::new(),
            world_id: set.world_id,
            eval_id: set.id,
            eval_name: set.name.clone(),
            status,
            settings,
            budgets,
            items: set.items.clone(),
            scores: Vec::new(),
            measured: None,
            target_run: None,
            gate_job: None,
            attempts: 0,
            error: None,
            created_at: super::now(),
            started_at: None,
            finished_at: None,
        }
    }
}

/// What a gated re-ingest compares (setting 0 at the run's one budget): the hit figures on the
/// items that name sources or chunks, the answer figures on those with an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateMetric {
    #[serde(rename = "hit_at_1")]
    HitAt1,
    #[serde(rename = "hit_at_5")]
    HitAt5,
    #[serde(rename = "mrr_at_10")]
    MrrAt10,
    AnswerShare,
    Fully,
}

impl GateMetric {
    pub const ALL: [GateMetric; 5] = [
        GateMetric::HitAt1,
        GateMetric::HitAt5,
        GateMetric::MrrAt10,
        GateMetric::AnswerShare,
        GateMetric::Fully,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GateMetric::HitAt1 => "hit_at_1",
            GateMetric::HitAt5 => "hit_at_5",
            GateMetric::MrrAt10 => "mrr_at_10",
            GateMetric::AnswerShare => "answer_share",
            GateMetric::Fully => "fully",
        }
    }

    /// Whether the metric is judged on answers (else on hits).
    pub fn on_answers(self) -> bool {
        matches!(self, GateMetric::AnswerShare | GateMetric::Fully)
    }
}

impl std::str::FromStr for GateMetric {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("unknown gate metric `{s}`"))
    }
}

/// Where a gated re-ingest's decision is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateState {
    /// The new run is being built.
    Waiting,
    /// The new run is embedded; the test set is being scored on both runs.
    Evaluating,
    /// The metric dropped past the tolerance, or the evaluation could not finish: the world
    /// keeps serving its run until the re-ingest is promoted or discarded.
    Held,
    /// The metric held: the world switches.
    Passed,
    /// Switched on request, whatever the evaluation said.
    Promoted,
    /// Discarded on request, or the re-ingest ended without switching (failed, cancelled).
    Discarded,
}

impl GateState {
    pub const ALL: [GateState; 6] = [
        GateState::Waiting,
        GateState::Evaluating,
        GateState::Held,
        GateState::Passed,
        GateState::Promoted,
        GateState::Discarded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GateState::Waiting => "waiting",
            GateState::Evaluating => "evaluating",
            GateState::Held => "held",
            GateState::Passed => "passed",
            GateState::Promoted => "promoted",
            GateState::Discarded => "discarded",
        }
    }

    /// Whether the re-ingest may still switch only on a decision (promote, or a pass).
    pub fn is_open(self) -> bool {
        matches!(self, GateState::Waiting | GateState::Evaluating | GateState::Held)
    }

    /// Whether the gate lets the world switch.
    pub fn lets_switch(self) -> bool {
        matches!(self, GateState::Passed | GateState::Promoted)
    }
}

impl std::str::FromStr for GateState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| format!("unknown gate state `{s}`"))
    }
}

/// A re-ingest's gate: the world switches to the new run only if `metric`, measured on
/// `after_run` (the new index), is not below its value on `before_run` (the index served) by
/// more than `tolerance`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReingestGate {
    pub job_id: JobId,
    pub world_id: WorldId,
    pub eval_id: EvalSetId,
    pub metric: GateMetric,
    pub tolerance: f64,
    pub state: GateState,
    pub before_run: EvalRunId,
    pub after_run: EvalRunId,
    /// The metric on each run, once both completed.
    pub before_value: Option<f64>,
    pub after_value: Option<f64>,
    /// Why the gate held or passed, in words.
    pub reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
}

/// A gate asked for with a re-ingest: its two runs (status `waiting`), the `before` one's
/// target left for the store to fill with the run the world serves.
#[derive(Clone, Debug, PartialEq)]
pub struct NewGate {
    pub eval_id: EvalSetId,
    pub metric: GateMetric,
    pub tolerance: f64,
    pub before: EvalRun,
    pub after: EvalRun,
}
