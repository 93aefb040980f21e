//! The evaluation runner: takes queued runs one at a time and scores every item of each under
//! every setting and budget, through [`RetrievalService::retrieve`] like any `/retrieve`, one
//! retrieval at a time. Its queries are background work (`Settings::background`): the key
//! scheduler serves them in the world's ingestion lane, in turn with the world's ingestion and
//! within the keys' quotas, so an evaluation can neither starve ingestion nor pass a quota, and
//! callers' own queries still go first.
//!
//! A run is held in the store (an owner and a lease, renewed at each save). The scores are
//! saved every [`SAVE_EVERY_ITEMS`] items or [`SAVE_EVERY`]: a process that stops lets go of
//! its run (graceful) or its lease runs out (a crash), and the next claim — by this process
//! after a restart or by another replica — goes on from the last save. A run taken up more
//! than [`MAX_ATTEMPTS`] times fails, with that said. A run measures one index: if the world
//! switches to a new run (a re-ingest) meanwhile, the run fails rather than mix two.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::SettingsParser;
use super::score::{Found, answer_share};
use crate::domain::{
    EvalItem, EvalRun, EvalRunStatus, Expected, ItemRecord, MeasuredIndex, SourceKey, World, WorldId, now,
};
use crate::service::ServiceError;
use crate::service::retrieval::{Hit, RetrievalService, Settings};
use crate::store::Store;

/// How long a run is held without a save before another process may take it up.
const LEASE_S: f64 = 60.0;
/// Scores are saved after this many items…
const SAVE_EVERY_ITEMS: usize = 10;
/// …or this long, whichever comes first.
const SAVE_EVERY: Duration = Duration::from_secs(2);
/// How often an idle runner looks for runs queued by other replicas.
const POLL: Duration = Duration::from_secs(5);
/// A run taken up this many times (each restart mid-run is one) fails.
const MAX_ATTEMPTS: u32 = 5;
/// Tries of one retrieval that failed for a reason worth a retry (a provider, a store).
const TRIES: u32 = 3;

pub(super) struct Runner {
    pub store: Arc<dyn Store>,
    pub retrieval: Arc<RetrievalService>,
    pub parse: SettingsParser,
    pub wake: Arc<Notify>,
    pub engine: crate::jobs::JobEngine,
    pub owner: String,
}

/// Why a run stopped before its end.
enum Stop {
    /// The process is stopping: the run is let go, to be taken up again.
    Shutdown,
    /// Another hand ended or took the run (cancelled, deleted, lease lost).
    Lost,
    /// The run cannot go on: it fails with this message.
    Fail(String),
}

impl From<crate::store::Error> for Stop {
    fn from(err: crate::store::Error) -> Self {
        Stop::Fail(format!("the store failed: {err}"))
    }
}

impl Runner {
    pub async fn run(self, cancel: CancellationToken) {
        loop {
            if cancel.is_cancelled() {
                return;
            }
            // Gated re-ingests whose runs ended are decided before the next run is taken.
            if let Err(err) = super::gate::settle(self.store.as_ref(), &self.engine).await {
                tracing::warn!(error = %err, "settling re-ingest gates failed; the next look tries again");
            }
            match self.store.claim_eval_run(&self.owner, LEASE_S).await {
                Ok(Some(run)) => self.take(run, &cancel).await,
                Ok(None) => {
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = self.wake.notified() => {}
                        () = tokio::time::sleep(POLL) => {}
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "claiming an evaluation run failed");
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = tokio::time::sleep(POLL) => {}
                    }
                }
            }
        }
    }

    /// Runs `run` to its end, or lets it go.
    async fn take(&self, run: EvalRun, cancel: &CancellationToken) {
        let id = run.id;
        tracing::info!(run = %id, world = %run.world_id, attempt = run.attempts, from = run.scores.len(), "evaluation run taken up");
        let outcome = if run.attempts > MAX_ATTEMPTS {
            Err(Stop::Fail(format!(
                "the run was interrupted {} times (restarts mid-run); start a new one",
                run.attempts - 1
            )))
        } else {
            self.score(run, cancel).await
        };
        let (status, error) = match outcome {
            Ok(()) => (EvalRunStatus::Completed, None),
            Err(Stop::Fail(message)) => (EvalRunStatus::Failed, Some(message)),
            Err(Stop::Lost) => return,
            Err(Stop::Shutdown) => {
                if let Err(err) = self.store.release_eval_run(id, &self.owner).await {
                    tracing::warn!(run = %id, error = %err, "letting go of an evaluation run failed; its lease will run out");
                }
                return;
            }
        };
        match self
            .store
            .finish_eval_run(id, &self.owner, status, error.as_deref(), now())
            .await
        {
            Ok(true) => {
                tracing::info!(run = %id, status = status.as_str(), error = error.as_deref(), "evaluation run ended")
            }
            Ok(false) => {}
            Err(err) => {
                tracing::warn!(run = %id, error = %err, "ending an evaluation run failed; it will be taken up again")
            }
        }
    }

    /// Scores the items not yet scored, saving as it goes.
    async fn score(&self, mut run: EvalRun, cancel: &CancellationToken) -> Result<(), Stop> {
        let settings = (run.settings.iter().enumerate())
            .map(|(i, value)| (self.parse)(value).map_err(|err| Stop::Fail(format!("settings[{i}]: {}", err.message))))
            .collect::<Result<Vec<_>, _>>()?;
        let world = self.index(&run).await?;
        let measured = measured(&world);
        if let Some(before) = &run.measured
            && before.run_id != measured.run_id
        {
            return Err(switched());
        }
        let expected = self.resolve_keys(run.world_id, &run.items).await?;
        let mut saved = Instant::now();
        let mut unsaved = 0;
        while run.scores.len() < run.items.len() {
            let i = run.scores.len();
            let record = tokio::select! {
                () = cancel.cancelled() => return Err(Stop::Shutdown),
                record = self.score_item(&run, &settings, &run.items[i].query, &expected[i]) => record?,
            };
            run.scores.push(record);
            unsaved += 1;
            if unsaved >= SAVE_EVERY_ITEMS || saved.elapsed() >= SAVE_EVERY {
                self.save(&run, &measured).await?;
                (saved, unsaved) = (Instant::now(), 0);
            }
        }
        self.save(&run, &measured).await
    }

    async fn world(&self, id: WorldId) -> Result<World, Stop> {
        self.store
            .get_world(id)
            .await?
            .ok_or_else(|| Stop::Fail("the world is gone".to_owned()))
    }

    /// The world as the run measures it: serving the run it names (a gate's), or its own.
    async fn index(&self, run: &EvalRun) -> Result<World, Stop> {
        let Some(target) = run.target_run else {
            return self.world(run.world_id).await;
        };
        match self.store.run_for_retrieval(run.world_id, target, 1).await? {
            Some((world, _)) => Ok(world),
            None => Err(gone()),
        }
    }

    /// Saves the scores so far, after checking the index measured is still there: the run
    /// the world serves, or the run named.
    async fn save(&self, run: &EvalRun, measured: &MeasuredIndex) -> Result<(), Stop> {
        if run.target_run.is_some() {
            self.index(run).await?;
        } else if self.world(run.world_id).await?.active_run != measured.run_id {
            return Err(switched());
        }
        if self
            .store
            .save_eval_scores(run.id, &self.owner, &run.scores, measured, LEASE_S)
            .await?
        {
            Ok(())
        } else {
            Err(Stop::Lost)
        }
    }

    /// Each item's expected hits with its source keys turned into the sources that carry them
    /// now (a key that names none stays unmatched).
    async fn resolve_keys(&self, world: WorldId, items: &[EvalItem]) -> Result<Vec<Expected>, Stop> {
        let mut known: HashMap<String, Option<crate::domain::SourceId>> = HashMap::new();
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let mut expected = item.expected.clone();
            for key in &item.expected.source_keys {
                if !known.contains_key(key) {
                    let source = match SourceKey::parse(key) {
                        Ok(parsed) => self.store.source_by_key(world, &parsed).await?.map(|s| s.id),
                        Err(_) => None,
                    };
                    known.insert(key.clone(), source);
                }
                if let Some(Some(source)) = known.get(key) {
                    expected.sources.push(*source);
                }
            }
            out.push(expected);
        }
        Ok(out)
    }

    /// One item under every setting and budget.
    async fn score_item(
        &self,
        run: &EvalRun,
        settings: &[Settings],
        query: &str,
        expected: &Expected,
    ) -> Result<ItemRecord, Stop> {
        let answer_judged = (expected.answer.as_deref()).is_some_and(|a| !super::score::words(a).is_empty());
        let mut record = ItemRecord {
            hit_judged: expected.names_hits(),
            answer_judged,
            ..ItemRecord::default()
        };
        for (s, setting) in settings.iter().enumerate() {
            let mut shares = Vec::with_capacity(run.budgets.len());
            let mut ms = Vec::with_capacity(run.budgets.len());
            for (b, &budget) in run.budgets.iter().enumerate() {
                let mut at = setting.clone();
                at.max_context_tokens = Some(budget);
                at.background = true;
                at.on_run = run.target_run;
                let answer = self.retrieve(run.world_id, query, &at, s).await?;
                if b == 0 {
                    record.first_hit.push(first_hit(expected, &answer.results));
                }
                shares.push(
                    (expected.answer.as_deref())
                        .filter(|_| answer_judged)
                        .and_then(|a| answer_share(a, &answer.context_text)),
                );
                ms.push(answer.timing.total_ms);
            }
            record.answer_share.push(shares);
            record.ms.push(ms);
        }
        Ok(record)
    }

    /// One retrieval, tried again (after 1 s, then 2 s) when it failed for a reason that may
    /// pass; a refusal of the setting fails the run.
    async fn retrieve(
        &self,
        world: WorldId,
        query: &str,
        settings: &Settings,
        s: usize,
    ) -> Result<crate::service::retrieval::Retrieval, Stop> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.retrieval.retrieve(world, query, settings).await {
                Ok(answer) => return Ok(answer),
                Err(err) if tries < TRIES && passing(&err) => {
                    tracing::debug!(error = %err, "an evaluation retrieval failed; trying again");
                    tokio::time::sleep(Duration::from_secs(1 << (tries - 1))).await;
                }
                Err(ServiceError::NotFound(_)) => return Err(Stop::Fail("the world is gone".to_owned())),
                Err(ServiceError::Conflict { message, .. }) if settings.on_run.is_some() => {
                    return Err(Stop::Fail(message));
                }
                Err(err) => return Err(Stop::Fail(format!("settings[{s}]: {err}"))),
            }
        }
    }
}

fn gone() -> Stop {
    Stop::Fail(
        "the index measured is neither served nor being built any more (its re-ingest ended or was discarded)"
            .to_owned(),
    )
}

fn switched() -> Stop {
    Stop::Fail(
        "the world switched to a new index (a re-ingest completed) during the run; a run measures one index: start a new one"
            .to_owned(),
    )
}

/// Errors that may pass on their own.
fn passing(err: &ServiceError) -> bool {
    matches!(
        err,
        ServiceError::RateLimited { .. } | ServiceError::Provider { .. } | ServiceError::Unavailable { .. }
    )
}

/// The rank (from 1) of the first hit `expected` names: its source, its chunk, or a chunk of
/// the same text folded into it.
fn first_hit(expected: &Expected, results: &[Hit]) -> Option<u32> {
    let position = results.iter().position(|hit| {
        let found = Found {
            source: hit.chunk.chunk.source_id,
            source_key: None,
            chunk: hit.chunk.chunk.id,
        };
        super::score::first_hit(expected, &[found]).is_some()
            || hit.duplicates.iter().any(|d| expected.chunks.contains(d))
    })?;
    u32::try_from(position + 1).ok()
}

/// The index `world` serves now, as a run records it.
fn measured(world: &World) -> MeasuredIndex {
    MeasuredIndex {
        run_id: world.active_run,
        provider: world.embedding.provider.as_str().to_owned(),
        model: world.embedding.model.clone(),
        dimensions: world.embedding.dimensions,
        max_tokens: world.chunking.max_tokens,
        overlap_tokens: world.chunking.overlap_tokens,
        parent_max_tokens: world.chunking.parent_max_tokens,
        context_prefix: world.chunking.context_prefix,
        hybrid: world.hybrid,
    }
}
