//! Evaluation runs, as clients ask for them: started (checked, bounded, and queued for the
//! runner), read, listed, cancelled, deleted, compared, and watched as events.

use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::report::{Comparison, compare};
use super::{EvalService, invalid};
use crate::domain::{EvalRun, EvalRunId, EvalRunStatus, EvalSetId, Window, WorldId, now};
use crate::service::{Conflict, Invalid, Missing, ServiceError, ServiceResult};
use crate::store::EvalRunProgress;

/// The most settings one run compares.
pub const MAX_SETTINGS: usize = 8;
/// The most context budgets one run measures.
pub const MAX_BUDGETS: usize = 4;
/// Runs of one world queued or running at once.
pub const MAX_OPEN_RUNS_PER_WORLD: u64 = 2;
/// Runs one world keeps (each holds a copy of its set's items: up to 4 MiB).
pub const MAX_RUNS_PER_WORLD: u64 = 100;

/// A run as a client asks for it, not yet checked.
#[derive(Clone, Debug, Default)]
pub struct NewRun {
    /// Each a `/retrieve` body without `query` and `max_context_tokens`; none: the defaults.
    pub settings: Option<Vec<Value>>,
    /// Context budgets in tokens; none: the service's default budget.
    pub budgets: Option<Vec<u32>>,
}

/// What a run's event stream tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEvent {
    Status(EvalRunStatus),
    Progress(EvalRunProgress),
}

/// How often a run's event stream looks at the run.
const EVENT_POLL: Duration = Duration::from_millis(300);

impl EvalService {
    /// Checks one run setting as `/retrieve` would (its fields named under `at`), and against
    /// what the configuration allows (`hnsw_ef`'s bounds, a reranker) now rather than when the
    /// run is under way.
    pub(super) fn check_setting(&self, setting: &Value, at: &str) -> ServiceResult<()> {
        let name = |field: &str| match field {
            "" => at.to_owned(),
            field => format!("{at}.{field}"),
        };
        let parsed = (self.parse)(setting)
            .map_err(|err| ServiceError::invalid(Invalid::RetrievalSettings, name(&err.field), err.message))?;
        self.retrieval.check_settings(&parsed).map_err(|err| match err {
            ServiceError::Invalid { kind, message, field } => ServiceError::Invalid {
                kind,
                message,
                field: Some(name(field.as_deref().unwrap_or_default())),
            },
            other => other,
        })
    }

    /// 400 naming `field` unless every budget is 1 to the service's maximum.
    pub(super) fn check_budget(budget: u32, field: &str) -> ServiceResult<()> {
        let max = crate::config::MAX_CONTEXT_TOKENS;
        if !(1..=max).contains(&budget) {
            return Err(invalid(field, format!("a budget is 1 to {max} tokens")));
        }
        Ok(())
    }

    /// Queues a run of test set `eval` on `world`: 400 for a setting or budget refused (the
    /// field named `settings[i].<field>` or `budgets`), 404 for a missing world or set, 409 past
    /// the open runs or the runs of a world.
    pub async fn start_run(&self, world: WorldId, eval: EvalSetId, new: NewRun) -> ServiceResult<EvalRun> {
        let settings = new
            .settings
            .unwrap_or_else(|| vec![Value::Object(serde_json::Map::new())]);
        if settings.is_empty() || settings.len() > MAX_SETTINGS {
            return Err(invalid(
                "settings",
                format!(
                    "settings must hold 1 to {MAX_SETTINGS} settings, not {}",
                    settings.len()
                ),
            ));
        }
        for (i, setting) in settings.iter().enumerate() {
            self.check_setting(setting, &format!("settings[{i}]"))?;
        }
        let budgets = new.budgets.unwrap_or_else(|| vec![self.default_budget]);
        let max = crate::config::MAX_CONTEXT_TOKENS;
        if budgets.is_empty() || budgets.len() > MAX_BUDGETS || budgets.iter().any(|b| !(1..=max).contains(b)) {
            return Err(invalid(
                "budgets",
                format!("budgets must hold 1 to {MAX_BUDGETS} token counts, each 1 to {max}"),
            ));
        }
        let set = self.get(world, eval).await?;
        if self.store.count_open_eval_runs(world).await? >= MAX_OPEN_RUNS_PER_WORLD {
            return Err(ServiceError::conflict(
                Conflict::EvalLimit,
                format!(
                    "the world has {MAX_OPEN_RUNS_PER_WORLD} evaluation runs under way, the most quarry runs at once; wait for one to end or cancel it"
                ),
            ));
        }
        if self.store.count_eval_runs(world).await? >= MAX_RUNS_PER_WORLD {
            return Err(ServiceError::conflict(
                Conflict::EvalLimit,
                format!("the world has {MAX_RUNS_PER_WORLD} evaluation runs, the most quarry keeps; delete one first"),
            ));
        }
        let run = EvalRun::new(&set, EvalRunStatus::Queued, settings, budgets);
        self.store.insert_eval_run(&run).await?;
        self.wake.notify_one();
        Ok(run)
    }

    /// A run of set `eval` with its items and scores.
    pub async fn get_run(&self, world: WorldId, eval: EvalSetId, id: EvalRunId) -> ServiceResult<EvalRun> {
        self.require_set(world, eval).await?;
        match self.store.get_eval_run(world, id).await? {
            Some(run) if run.eval_id == eval => Ok(run),
            _ => Err(ServiceError::NotFound(Missing::EvalRun)),
        }
    }

    /// The runs of set `eval` by creation, in `window`, without items and scores.
    pub async fn list_runs(
        &self,
        world: WorldId,
        eval: EvalSetId,
        window: Window,
    ) -> ServiceResult<Vec<(EvalRun, EvalRunProgress)>> {
        self.require_set(world, eval).await?;
        Ok(self.store.list_eval_runs(eval, window).await?)
    }

    /// Cancels a run not yet ended (409 for one that has).
    pub async fn cancel_run(&self, world: WorldId, eval: EvalSetId, id: EvalRunId) -> ServiceResult<EvalRun> {
        let run = self.get_run(world, eval, id).await?;
        if !self.store.cancel_eval_run(world, run.id, now()).await? {
            return Err(ServiceError::conflict(
                Conflict::EvalRunState,
                format!(
                    "the run is {}; only a queued or running run is cancelled",
                    run.status.as_str()
                ),
            ));
        }
        self.get_run(world, eval, id).await
    }

    /// Deletes an ended run (409 for one under way: cancel it first).
    pub async fn delete_run(&self, world: WorldId, eval: EvalSetId, id: EvalRunId) -> ServiceResult<()> {
        let run = self.get_run(world, eval, id).await?;
        if !run.status.is_terminal() {
            return Err(ServiceError::conflict(
                Conflict::EvalRunState,
                format!("the run is {}; cancel it before deleting it", run.status.as_str()),
            ));
        }
        if !self.store.delete_eval_run(world, id).await? {
            return Err(ServiceError::NotFound(Missing::EvalRun));
        }
        Ok(())
    }

    /// How run `b` differs from run `a`, both of set `eval` and both completed (409 else).
    pub async fn compare_runs(
        &self,
        world: WorldId,
        eval: EvalSetId,
        a: EvalRunId,
        b: EvalRunId,
    ) -> ServiceResult<Comparison> {
        let (a, b) = (self.get_run(world, eval, a).await?, self.get_run(world, eval, b).await?);
        for run in [&a, &b] {
            if run.status != EvalRunStatus::Completed {
                return Err(ServiceError::conflict(
                    Conflict::EvalRunState,
                    format!(
                        "run {} is {}; only completed runs are compared",
                        run.id,
                        run.status.as_str()
                    ),
                ));
            }
        }
        Ok(compare(&a, &b))
    }

    /// A run's status and progress as they change: the current ones first, then each change,
    /// ending after a terminal status, when the store cannot be read, or when `stop` fires.
    pub async fn run_events(
        &self,
        world: WorldId,
        eval: EvalSetId,
        id: EvalRunId,
        stop: CancellationToken,
    ) -> ServiceResult<impl futures_util::Stream<Item = RunEvent> + Send + use<>> {
        self.get_run(world, eval, id).await?;
        let store = self.store.clone();
        let state = (
            None::<(EvalRunStatus, EvalRunProgress)>,
            false,
            std::collections::VecDeque::new(),
        );
        Ok(futures_util::stream::unfold(
            state,
            move |(mut last, mut ended, mut queue)| {
                let (store, stop) = (store.clone(), stop.clone());
                async move {
                    loop {
                        if let Some(event) = queue.pop_front() {
                            return Some((event, (last, ended, queue)));
                        }
                        if ended || stop.is_cancelled() {
                            return None;
                        }
                        if last.is_some() {
                            tokio::select! {
                                () = tokio::time::sleep(EVENT_POLL) => {}
                                () = stop.cancelled() => return None,
                            }
                        }
                        let (status, progress) = match store.eval_run_progress(id).await {
                            Ok(Some(now)) => now,
                            Ok(None) => return None,
                            Err(err) => {
                                tracing::warn!(error = %err, "reading an evaluation run failed; ending its stream");
                                return None;
                            }
                        };
                        if last.is_none_or(|(_, p)| p != progress) {
                            queue.push_back(RunEvent::Progress(progress));
                        }
                        if last.is_none_or(|(s, _)| s != status) {
                            queue.push_back(RunEvent::Status(status));
                        }
                        ended = status.is_terminal();
                        last = Some((status, progress));
                    }
                }
            },
        ))
    }
}
