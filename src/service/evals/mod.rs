//! Evaluation test sets: per world, a named list of questions, each with what a good answer
//! holds (sources by id or key, chunks, or an answer text). They are checked here, bounded in
//! items and sizes, and kept whole; [`score`] judges one retrieval's answer against an item.

pub mod gate;
pub mod report;
mod runner;
pub mod runs;
pub mod score;
pub mod suggest;

use std::sync::Arc;

use tokio::sync::Notify;

use super::{Conflict, Invalid, Missing, ServiceError, ServiceResult};
use crate::domain::{
    ChunkId, EvalItem, EvalSet, EvalSetId, EvalSetSummary, Expected, FieldError, SourceId, SourceKey, Window, WorldId,
    WorldName, now,
};
use crate::service::retrieval::{RetrievalService, Settings};
use crate::store::Store;

/// The most items one test set holds.
pub const MAX_ITEMS: usize = 1000;
/// The most test sets one world keeps.
pub const MAX_SETS_PER_WORLD: u64 = 100;
/// The longest question, in characters.
pub const MAX_QUERY_CHARS: usize = 4000;
/// The longest expected answer text, in characters.
pub const MAX_ANSWER_CHARS: usize = 20_000;
/// The most sources, source keys or chunks one item names (each).
pub const MAX_EXPECTED_IDS: usize = 100;

/// A test set as a client sends it, not yet checked.
#[derive(Clone, Debug, Default)]
pub struct NewEvalSet {
    pub name: String,
    pub items: Vec<DraftItem>,
}

/// One item as sent.
#[derive(Clone, Debug, Default)]
pub struct DraftItem {
    pub query: String,
    /// Each list, when sent, holds 1 to [`MAX_EXPECTED_IDS`] entries.
    pub sources: Option<Vec<SourceId>>,
    pub source_keys: Option<Vec<String>>,
    pub chunks: Option<Vec<ChunkId>>,
    pub answer: Option<String>,
}

/// Turns one run setting (a `/retrieve` body without `query`) into the settings retrieval
/// runs, or names the field refused: the API's own rules (`api::retrieve::eval_setting`).
pub type SettingsParser = fn(&serde_json::Value) -> Result<Settings, FieldError>;

pub struct EvalService {
    store: Arc<dyn Store>,
    parse: SettingsParser,
    /// The context budget a run measures when it names none (`retrieval.max_context_tokens`).
    default_budget: u32,
    /// Wakes the runner when a run is queued.
    wake: Arc<Notify>,
    /// What runs retrieve through (and check their settings against).
    retrieval: Arc<RetrievalService>,
    /// What finishes and cancels gated re-ingests.
    engine: crate::jobs::JobEngine,
}

impl EvalService {
    pub fn new(
        deps: &crate::deps::Deps,
        retrieval: Arc<RetrievalService>,
        parse: SettingsParser,
        default_budget: u32,
    ) -> Self {
        Self {
            store: deps.store.clone(),
            parse,
            default_budget,
            wake: deps.engine.evaluations(),
            retrieval,
            engine: deps.engine.clone(),
        }
    }

    /// Runs queued evaluations in the background, one at a time, as `owner`, until `cancel`.
    pub fn spawn_runner(
        &self,
        owner: String,
        tracker: &tokio_util::task::TaskTracker,
        cancel: &tokio_util::sync::CancellationToken,
    ) {
        let runner = runner::Runner {
            store: self.store.clone(),
            retrieval: self.retrieval.clone(),
            parse: self.parse,
            wake: self.wake.clone(),
            engine: self.engine.clone(),
            owner,
        };
        tracker.spawn(runner.run(cancel.clone()));
    }

    /// 404 unless `world` has test set `id`.
    async fn require_set(&self, world: WorldId, id: EvalSetId) -> ServiceResult<()> {
        if self.store.eval_set_exists(world, id).await? {
            return Ok(());
        }
        self.require_world(world).await?;
        Err(ServiceError::NotFound(Missing::EvalSet))
    }

    /// Stores a new test set of `world` (404 for a missing world, 409 past
    /// [`MAX_SETS_PER_WORLD`]).
    pub async fn create(&self, world: WorldId, new: NewEvalSet) -> ServiceResult<EvalSet> {
        let (name, items) = check(new)?;
        self.require_world(world).await?;
        if self.store.count_eval_sets(world).await? >= MAX_SETS_PER_WORLD {
            return Err(ServiceError::conflict(
                Conflict::EvalLimit,
                format!(
                    "the world has {MAX_SETS_PER_WORLD} evaluation test sets, the most quarry keeps; delete one first"
                ),
            ));
        }
        let at = now();
        let set = EvalSet {
            id: EvalSetId::new(),
            world_id: world,
            name,
            items,
            created_at: at,
            updated_at: at,
        };
        self.store.insert_eval_set(&set).await?;
        Ok(set)
    }

    pub async fn get(&self, world: WorldId, id: EvalSetId) -> ServiceResult<EvalSet> {
        self.require_world(world).await?;
        self.store
            .get_eval_set(world, id)
            .await?
            .ok_or(ServiceError::NotFound(Missing::EvalSet))
    }

    /// The world's test sets by creation, in `window`.
    pub async fn list(&self, world: WorldId, window: Window) -> ServiceResult<Vec<EvalSetSummary>> {
        self.require_world(world).await?;
        Ok(self.store.list_eval_sets(world, window).await?)
    }

    /// Replaces a test set's name and items whole.
    pub async fn replace(&self, world: WorldId, id: EvalSetId, new: NewEvalSet) -> ServiceResult<EvalSet> {
        let (name, items) = check(new)?;
        let mut set = self.get(world, id).await?;
        set.name = name;
        set.items = items;
        set.updated_at = now();
        if !self.store.replace_eval_set(&set).await? {
            return Err(ServiceError::NotFound(Missing::EvalSet));
        }
        Ok(set)
    }

    pub async fn delete(&self, world: WorldId, id: EvalSetId) -> ServiceResult<()> {
        self.require_world(world).await?;
        if !self.store.delete_eval_set(world, id).await? {
            return Err(ServiceError::NotFound(Missing::EvalSet));
        }
        Ok(())
    }

    async fn require_world(&self, world: WorldId) -> ServiceResult<()> {
        match self.store.get_world(world).await? {
            Some(_) => Ok(()),
            None => Err(ServiceError::NotFound(Missing::World)),
        }
    }
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> ServiceError {
    ServiceError::invalid(Invalid::Request, field, message)
}

/// A name and items that keep every rule, or the first rule broken with its field (`name`,
/// `items`, `items[3].query`, `items[3].expected`, …).
fn check(new: NewEvalSet) -> ServiceResult<(String, Vec<EvalItem>)> {
    // A test set's name follows a world's rules.
    let name = WorldName::parse(&new.name).map_err(|message| invalid("name", message))?;
    if new.items.is_empty() || new.items.len() > MAX_ITEMS {
        return Err(invalid(
            "items",
            format!("items must hold 1 to {MAX_ITEMS} questions, not {}", new.items.len()),
        ));
    }
    let items = (new.items.into_iter().enumerate())
        .map(|(i, item)| check_item(&format!("items[{i}]"), item))
        .collect::<ServiceResult<Vec<_>>>()?;
    Ok((name.into_inner(), items))
}

fn check_item(at: &str, item: DraftItem) -> ServiceResult<EvalItem> {
    let query = item.query.trim();
    if query.is_empty() || item.query.chars().count() > MAX_QUERY_CHARS {
        return Err(invalid(
            format!("{at}.query"),
            format!("a query must be 1 to {MAX_QUERY_CHARS} characters and not blank"),
        ));
    }
    let expected = format!("{at}.expected");
    for (what, n) in [
        ("sources", item.sources.as_ref().map(Vec::len)),
        ("source_keys", item.source_keys.as_ref().map(Vec::len)),
        ("chunks", item.chunks.as_ref().map(Vec::len)),
    ] {
        if let Some(n) = n
            && !(1..=MAX_EXPECTED_IDS).contains(&n)
        {
            return Err(invalid(
                format!("{expected}.{what}"),
                format!("{what}, when sent, names 1 to {MAX_EXPECTED_IDS}, not {n}"),
            ));
        }
    }
    for key in item.source_keys.iter().flatten() {
        SourceKey::parse(key).map_err(|message| invalid(format!("{expected}.source_keys"), message))?;
    }
    let answer = match &item.answer {
        Some(answer) if answer.trim().is_empty() || answer.chars().count() > MAX_ANSWER_CHARS => {
            return Err(invalid(
                format!("{expected}.answer"),
                format!("an answer must be 1 to {MAX_ANSWER_CHARS} characters and not blank"),
            ));
        }
        answer => answer.as_deref().map(|a| a.trim().to_owned()),
    };
    let expected_value = Expected {
        sources: item.sources.unwrap_or_default(),
        source_keys: item.source_keys.unwrap_or_default(),
        chunks: item.chunks.unwrap_or_default(),
        answer,
    };
    if !expected_value.names_hits() && expected_value.answer.is_none() {
        return Err(invalid(
            expected,
            "expected must name sources, source_keys, chunks or an answer: what a good answer holds",
        ));
    }
    Ok(EvalItem {
        query: query.to_owned(),
        expected: expected_value,
    })
}
