//! Gated re-ingests: a re-ingest asked with a gate switches the world to its new run only if a
//! test set scores no worse on it than on the run served, by one metric and within a tolerance.
//!
//! The gate and its two evaluation runs are stored with the re-ingest ([`EvalService::plan_gate`]
//! checks what is asked), the runs `waiting`. When the new run is complete, the re-ingest's
//! completion step queues them instead of switching (`RunStore::finish_reingest`); the runner
//! scores them like any run, the "before" one on the run served and the "after" one on the new
//! run ([`crate::service::retrieval::Settings::on_run`]). Once both ended, [`settle`] decides:
//! passed (the completion step then switches), or held — the world keeps its run until the
//! re-ingest is promoted or discarded. A gate whose re-ingest ended otherwise (failed,
//! cancelled) is closed. Every step is a conditional write, so replicas deciding at once, or a
//! process stopping in between, decide once.

use serde_json::Value;

use super::report::report;
use super::{EvalService, invalid};
use crate::domain::{
    EvalRun, EvalRunStatus, EvalSetId, GateMetric, GateState, Job, JobEventData, JobId, JobKind, NewGate, ReingestGate,
    WorldId, now,
};
use crate::jobs::JobEngine;
use crate::service::{Conflict, Missing, ServiceError, ServiceResult};
use crate::store::{GateDecision, Store};

/// A gate as a client asks for it, not yet checked.
#[derive(Clone, Debug)]
pub struct GateRequest {
    pub eval_id: EvalSetId,
    /// A `/retrieve` body without `query` and `max_context_tokens`; none: the defaults.
    pub settings: Option<Value>,
    /// The context budget, in tokens; none: the service's default.
    pub budget: Option<u32>,
    pub metric: GateMetric,
    /// How far the metric may drop (0 to 1); none: 0.
    pub tolerance: Option<f64>,
}

impl EvalService {
    /// Checks a gate asked for with a re-ingest of `world` and prepares its two runs: 400 for a
    /// setting, budget, tolerance or metric refused (the field named under `gate.`), 404 for a
    /// missing world or test set, 409 when the world keeps too many runs to add two.
    pub async fn plan_gate(&self, world: WorldId, gate: GateRequest) -> ServiceResult<NewGate> {
        let setting = gate.settings.unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        self.check_setting(&setting, "gate.settings")?;
        let budget = gate.budget.unwrap_or(self.default_budget);
        Self::check_budget(budget, "gate.budget")?;
        let tolerance = gate.tolerance.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&tolerance) {
            return Err(invalid(
                "gate.tolerance",
                "tolerance is how far the metric (0 to 1) may drop: 0 to 1",
            ));
        }
        let set = self.get(world, gate.eval_id).await?;
        let judged = if gate.metric.on_answers() {
            set.items.iter().any(|i| i.expected.answer.is_some())
        } else {
            set.items.iter().any(|i| i.expected.names_hits())
        };
        if !judged {
            let needs = match gate.metric.on_answers() {
                true => "an answer",
                false => "sources, source keys or chunks",
            };
            return Err(invalid(
                "gate.metric",
                format!(
                    "{} is judged on items that name {needs}; no item of this test set does",
                    gate.metric.as_str()
                ),
            ));
        }
        if self.store.count_eval_runs(world).await? + 2 > super::runs::MAX_RUNS_PER_WORLD {
            return Err(ServiceError::conflict(
                Conflict::EvalLimit,
                format!(
                    "a gate adds two evaluation runs and the world keeps {} at most; delete some first",
                    super::runs::MAX_RUNS_PER_WORLD
                ),
            ));
        }
        let run = || EvalRun::new(&set, EvalRunStatus::Waiting, vec![setting.clone()], vec![budget]);
        Ok(NewGate {
            eval_id: set.id,
            metric: gate.metric,
            tolerance,
            before: run(),
            after: run(),
        })
    }

    /// The gate of re-ingest `job`, if it has one.
    pub async fn gate(&self, job: JobId) -> ServiceResult<Option<ReingestGate>> {
        Ok(self.store.get_gate(job).await?)
    }

    /// The gated re-ingest `job` of `world`, with its gate: 404 for another world's job or
    /// none, 409 for a re-ingest without a gate or one already decided.
    async fn open_gate(&self, world: WorldId, job: JobId) -> ServiceResult<(Job, ReingestGate)> {
        let found = self.store.get_job(job).await?;
        let Some(found) = found.filter(|j| j.world_id == world && j.kind == JobKind::Reingest) else {
            return Err(ServiceError::NotFound(Missing::Job));
        };
        let Some(gate) = self.store.get_gate(job).await? else {
            return Err(ServiceError::conflict(
                Conflict::JobState,
                "this re-ingest has no gate: it switches when its run is embedded (cancel it to abandon it)",
            ));
        };
        if !gate.state.is_open() || found.status.is_terminal() {
            return Err(ServiceError::conflict(
                Conflict::JobState,
                format!("the re-ingest's gate was decided already: {}", gate.state.as_str()),
            ));
        }
        Ok((found, gate))
    }

    /// Switches `world` to the gated re-ingest `job`'s run whatever its evaluation says (or
    /// will say): at once when the run is complete, else as soon as it is.
    pub async fn promote(&self, world: WorldId, job: JobId) -> ServiceResult<Job> {
        let (_, gate) = self.open_gate(world, job).await?;
        let decision = GateDecision {
            state: GateState::Promoted,
            before: None,
            after: None,
            reason: Some("promoted on request"),
        };
        if !self.store.decide_gate(job, OPEN, decision, now()).await? {
            return Err(ServiceError::conflict(
                Conflict::JobState,
                "the re-ingest's gate was decided meanwhile",
            ));
        }
        tracing::info!(%job, %world, from = gate.state.as_str(), "gated re-ingest promoted");
        self.engine.finish(job).await?;
        self.store
            .get_job(job)
            .await?
            .ok_or(ServiceError::NotFound(Missing::Job))
    }

    /// Abandons the gated re-ingest `job`: it is cancelled (its run removed) and the world
    /// keeps serving its run.
    pub async fn discard(&self, world: WorldId, job: JobId) -> ServiceResult<Job> {
        self.open_gate(world, job).await?;
        let cancelled = crate::service::jobs::answer(self.engine.cancel(job).await?)?;
        let decision = GateDecision {
            state: GateState::Discarded,
            before: None,
            after: None,
            reason: Some("discarded on request"),
        };
        // The runner may have closed the gate of the cancelled job first: either way it is.
        self.store.decide_gate(job, OPEN, decision, now()).await?;
        tracing::info!(%job, %world, "gated re-ingest discarded");
        Ok(cancelled)
    }
}

/// The states a gate is open in.
const OPEN: &[GateState] = &[GateState::Waiting, GateState::Evaluating, GateState::Held];

/// Closes the gates whose re-ingest ended without them, and decides those whose two runs
/// ended: passed (then the re-ingest's completion step switches the world) or held.
pub(super) async fn settle(store: &dyn Store, engine: &JobEngine) -> crate::store::Result<()> {
    for (gate, ended) in store.gates_to_settle().await? {
        let job = gate.job_id;
        if ended {
            let decision = GateDecision {
                state: GateState::Discarded,
                before: None,
                after: None,
                reason: Some("the re-ingest ended (failed or cancelled) before the gate decided"),
            };
            store.decide_gate(job, OPEN, decision, now()).await?;
            continue;
        }
        let Some(decision) = judge(store, &gate).await? else {
            continue;
        };
        let reason = decision.reason.clone();
        let to = GateDecision {
            state: decision.state,
            before: decision.before,
            after: decision.after,
            reason: Some(&reason),
        };
        if !store.decide_gate(job, &[GateState::Evaluating], to, now()).await? {
            continue;
        }
        tracing::info!(%job, state = decision.state.as_str(), reason = %reason, "re-ingest gate decided");
        if decision.state == GateState::Held {
            engine
                .record(
                    job,
                    JobEventData::Held {
                        metric: gate.metric.as_str(),
                        before: decision.before,
                        after: decision.after,
                        message: reason,
                    },
                )
                .await?;
        } else {
            engine.finish(job).await?;
        }
    }
    Ok(())
}

/// A gate's decision, once made.
struct Decision {
    state: GateState,
    before: Option<f64>,
    after: Option<f64>,
    reason: String,
}

/// What an `evaluating` gate's runs say: nothing while one is under way.
async fn judge(store: &dyn Store, gate: &ReingestGate) -> crate::store::Result<Option<Decision>> {
    // The runs' statuses first (no items, no scores): the runner looks every few seconds while
    // they are under way, and each run holds a copy of its set (up to 4 MiB).
    let ended = |read: Option<(EvalRunStatus, _)>| read.is_none_or(|(status, _)| status.is_terminal());
    if !(ended(store.eval_run_progress(gate.before_run).await?)
        && ended(store.eval_run_progress(gate.after_run).await?))
    {
        return Ok(None);
    }
    let before = store.get_eval_run(gate.world_id, gate.before_run).await?;
    let after = store.get_eval_run(gate.world_id, gate.after_run).await?;
    let held = |reason: String, before, after| Decision {
        state: GateState::Held,
        before,
        after,
        reason,
    };
    let (Some(before), Some(after)) = (before, after) else {
        return Ok(Some(held(
            "an evaluation run of the gate was deleted (with its test set?): promote or discard the re-ingest".into(),
            None,
            None,
        )));
    };
    if !(before.status.is_terminal() && after.status.is_terminal()) {
        return Ok(None);
    }
    for (which, run) in [("the run served", &before), ("the new run", &after)] {
        if run.status != EvalRunStatus::Completed {
            let why = run.error.as_deref().unwrap_or("cancelled");
            return Ok(Some(held(
                format!(
                    "the evaluation on {which} did not complete ({}: {why}): promote or discard the re-ingest",
                    run.status.as_str()
                ),
                None,
                None,
            )));
        }
    }
    let metric = gate.metric;
    let (Some(b), Some(a)) = (value(&before, metric), value(&after, metric)) else {
        return Ok(Some(held(
            format!(
                "no item was judged on {}: promote or discard the re-ingest",
                metric.as_str()
            ),
            None,
            None,
        )));
    };
    let name = metric.as_str();
    let tolerance = gate.tolerance;
    // A drop within the tolerance passes; a float's last bit does not hold a re-ingest.
    if a >= b - tolerance - 1e-9 {
        return Ok(Some(Decision {
            state: GateState::Passed,
            before: Some(b),
            after: Some(a),
            reason: format!("{name} went from {b:.4} to {a:.4}, within the tolerance {tolerance}"),
        }));
    }
    Ok(Some(held(
        format!(
            "{name} dropped from {b:.4} to {a:.4}, more than the tolerance {tolerance}: the world keeps its run; promote or discard the re-ingest"
        ),
        Some(b),
        Some(a),
    )))
}

/// `metric` on a gate's run: its one setting at its one budget.
fn value(run: &EvalRun, metric: GateMetric) -> Option<f64> {
    let figures = report(run);
    let setting = figures.settings.first()?;
    let answers = &setting.budgets.first()?.1;
    match metric {
        GateMetric::HitAt1 => setting.hits.hit_at_1,
        GateMetric::HitAt5 => setting.hits.hit_at_5,
        GateMetric::MrrAt10 => setting.hits.mrr_at_10,
        GateMetric::AnswerShare => answers.answer_share,
        GateMetric::Fully => answers.fully,
    }
}
