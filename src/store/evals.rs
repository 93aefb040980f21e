//! [`EvalStore`]: evaluation test sets. The items are one JSON column (a set is read and
//! written whole); `item_count` beside it lets a listing skip them.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use sqlx::{AssertSqlSafe, Executor};

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::rows::{corrupt, narrow, wide};
use super::{EvalRunProgress, EvalStore, GateDecision, Result};
use crate::domain::{
    EvalItem, EvalRun, EvalRunId, EvalRunStatus, EvalSet, EvalSetId, EvalSetSummary, GateState, ItemRecord, JobId,
    MeasuredIndex, NewGate, ReingestGate, RunId, Window, WorldId,
};

const TABLE: &str = "eval_sets";

#[derive(sqlx::FromRow)]
struct SetRow {
    id: Uuid,
    world_id: Uuid,
    name: String,
    items: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<SetRow> for EvalSet {
    type Error = super::Error;

    fn try_from(row: SetRow) -> Result<EvalSet> {
        let items: Vec<EvalItem> =
            serde_json::from_str(&row.items).map_err(|err| corrupt(TABLE, format!("items: {err}")))?;
        Ok(EvalSet {
            id: EvalSetId(row.id),
            world_id: WorldId(row.world_id),
            name: row.name,
            items,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

#[derive(sqlx::FromRow)]
struct SummaryRow {
    id: Uuid,
    world_id: Uuid,
    name: String,
    item_count: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

fn items_column(set: &EvalSet) -> Result<String> {
    json_column(&set.items)
}

fn json_column<T: serde::Serialize + ?Sized>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|err| super::Error::Internal(format!("eval column: {err}")))
}

fn from_json<T: serde::de::DeserializeOwned>(column: &'static str, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|err| corrupt(RUNS, format!("{column}: {err}")))
}

const RUNS: &str = "eval_runs";

/// The columns of a run but its items and scores (`''` and `'[]'` in their place).
const RUN_HEAD: &str = "id, world_id, eval_id, eval_name, status, settings, budgets, measured, attempts, error, \
                        created_at, started_at, finished_at, item_count, done, target_run_id, gate_job_id";
/// Every column of a run.
const RUN_ALL: &str = "id, world_id, eval_id, eval_name, status, settings, budgets, measured, attempts, error, \
                       created_at, started_at, finished_at, item_count, done, target_run_id, gate_job_id, items, scores";

#[derive(sqlx::FromRow)]
struct RunRow {
    id: Uuid,
    world_id: Uuid,
    eval_id: Uuid,
    eval_name: String,
    status: String,
    settings: String,
    budgets: String,
    measured: Option<String>,
    attempts: i64,
    error: Option<String>,
    created_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    item_count: i64,
    done: i64,
    target_run_id: Option<Uuid>,
    gate_job_id: Option<Uuid>,
    #[sqlx(default)]
    items: Option<String>,
    #[sqlx(default)]
    scores: Option<String>,
}

impl RunRow {
    fn progress(&self) -> Result<EvalRunProgress> {
        Ok(EvalRunProgress {
            done: narrow(RUNS, self.done)?,
            total: narrow(RUNS, self.item_count)?,
        })
    }

    fn into_run(self) -> Result<(EvalRun, EvalRunProgress)> {
        let progress = self.progress()?;
        let items: Vec<EvalItem> = match &self.items {
            Some(text) => from_json("items", text)?,
            None => Vec::new(),
        };
        let scores: Vec<ItemRecord> = match &self.scores {
            Some(text) => from_json("scores", text)?,
            None => Vec::new(),
        };
        let run = EvalRun {
            id: EvalRunId(self.id),
            world_id: WorldId(self.world_id),
            eval_id: EvalSetId(self.eval_id),
            eval_name: self.eval_name,
            status: self.status.parse().map_err(|err: String| corrupt(RUNS, err))?,
            settings: from_json("settings", &self.settings)?,
            budgets: from_json("budgets", &self.budgets)?,
            items,
            scores,
            measured: self.measured.as_deref().map(|m| from_json("measured", m)).transpose()?,
            target_run: self.target_run_id.map(RunId),
            gate_job: self.gate_job_id.map(JobId),
            attempts: narrow(RUNS, self.attempts)?,
            error: self.error,
            created_at: self.created_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
        };
        Ok((run, progress))
    }
}

/// Inserts an evaluation run (with no scores yet).
pub(super) async fn insert_run<'e, DB: Backend>(db: impl Executor<'e, Database = DB>, run: &EvalRun) -> Result<()> {
    sqlx::query(
        "INSERT INTO eval_runs (id, world_id, eval_id, eval_name, status, settings, budgets, items, item_count, \
         done, scores, attempts, created_at, target_run_id, gate_job_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
    )
    .bind(run.id.0)
    .bind(run.world_id.0)
    .bind(run.eval_id.0)
    .bind(run.eval_name.clone())
    .bind(run.status.as_str().to_owned())
    .bind(json_column(&run.settings)?)
    .bind(json_column(&run.budgets)?)
    .bind(json_column(&run.items)?)
    .bind(wide(run.items.len() as u64))
    .bind(wide(run.scores.len() as u64))
    .bind(json_column(&run.scores)?)
    .bind(i64::from(run.attempts))
    .bind(run.created_at)
    .bind(run.target_run.map(|r| r.0))
    .bind(run.gate_job.map(|j| j.0))
    .execute(db)
    .await?;
    Ok(())
}

const GATES: &str = "reingest_gates";

/// Every column of a gate.
const GATE_ALL: &str = "g.job_id, g.world_id, g.eval_id, g.metric, g.tolerance, g.state, g.before_run_id, \
                        g.after_run_id, g.before_value, g.after_value, g.reason, g.created_at, g.decided_at";

#[derive(sqlx::FromRow)]
struct GateRow {
    job_id: Uuid,
    world_id: Uuid,
    eval_id: Uuid,
    metric: String,
    tolerance: f64,
    state: String,
    before_run_id: Uuid,
    after_run_id: Uuid,
    before_value: Option<f64>,
    after_value: Option<f64>,
    reason: Option<String>,
    created_at: DateTime<Utc>,
    decided_at: Option<DateTime<Utc>>,
}

impl TryFrom<GateRow> for ReingestGate {
    type Error = super::Error;

    fn try_from(row: GateRow) -> Result<ReingestGate> {
        Ok(ReingestGate {
            job_id: JobId(row.job_id),
            world_id: WorldId(row.world_id),
            eval_id: EvalSetId(row.eval_id),
            metric: row.metric.parse().map_err(|err: String| corrupt(GATES, err))?,
            tolerance: row.tolerance,
            state: row.state.parse().map_err(|err: String| corrupt(GATES, err))?,
            before_run: EvalRunId(row.before_run_id),
            after_run: EvalRunId(row.after_run_id),
            before_value: row.before_value,
            after_value: row.after_value,
            reason: row.reason,
            created_at: row.created_at,
            decided_at: row.decided_at,
        })
    }
}

/// Inserts a re-ingest's gate and its two runs, `waiting`: the run before measures `runs.0`
/// (served), the run after `runs.1` (being built).
pub(super) async fn insert_gate<DB: Backend>(
    tx: &mut sqlx::Transaction<'_, DB>,
    (job, world): (JobId, WorldId),
    runs: (RunId, RunId),
    gate: &NewGate,
    now: DateTime<Utc>,
) -> Result<()> {
    let mut before = gate.before.clone();
    before.target_run = Some(runs.0);
    before.gate_job = Some(job);
    let mut after = gate.after.clone();
    after.target_run = Some(runs.1);
    after.gate_job = Some(job);
    insert_run(&mut **tx, &before).await?;
    insert_run(&mut **tx, &after).await?;
    sqlx::query(
        "INSERT INTO reingest_gates (job_id, world_id, eval_id, metric, tolerance, state, before_run_id, \
         after_run_id, created_at) VALUES ($1, $2, $3, $4, $5, 'waiting', $6, $7, $8)",
    )
    .bind(job.0)
    .bind(world.0)
    .bind(gate.eval_id.0)
    .bind(gate.metric.as_str())
    .bind(gate.tolerance)
    .bind(before.id.0)
    .bind(after.id.0)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A re-ingest's gate state, its row locked for the transaction (SQLite: the write lock).
pub(super) async fn lock_gate<'e, DB: Backend>(
    db: impl Executor<'e, Database = DB>,
    job: JobId,
) -> Result<Option<GateState>> {
    let state: Option<String> =
        sqlx::query_scalar("UPDATE reingest_gates SET state = state WHERE job_id = $1 RETURNING state")
            .bind(job.0)
            .fetch_optional(db)
            .await?;
    state
        .map(|s| s.parse().map_err(|err: String| corrupt(GATES, err)))
        .transpose()
}

/// Moves a `waiting` gate to `evaluating` and queues its two runs.
pub(super) async fn start_gate<DB: Backend>(tx: &mut sqlx::Transaction<'_, DB>, job: JobId) -> Result<()> {
    sqlx::query("UPDATE reingest_gates SET state = 'evaluating' WHERE job_id = $1 AND state = 'waiting'")
        .bind(job.0)
        .execute(&mut **tx)
        .await?;
    sqlx::query("UPDATE eval_runs SET status = 'queued' WHERE gate_job_id = $1 AND status = 'waiting'")
        .bind(job.0)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[async_trait]
impl<DB: Backend> EvalStore for SqlStore<DB> {
    async fn insert_eval_set(&self, set: &EvalSet) -> Result<()> {
        sqlx::query(
            "INSERT INTO eval_sets (id, world_id, name, items, item_count, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(set.id.0)
        .bind(set.world_id.0)
        .bind(set.name.clone())
        .bind(items_column(set)?)
        .bind(wide(set.items.len() as u64))
        .bind(set.created_at)
        .bind(set.updated_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn get_eval_set(&self, world: WorldId, id: EvalSetId) -> Result<Option<EvalSet>> {
        let row: Option<SetRow> = sqlx::query_as(
            "SELECT id, world_id, name, items, created_at, updated_at FROM eval_sets WHERE id = $1 AND world_id = $2",
        )
        .bind(id.0)
        .bind(world.0)
        .fetch_optional(&self.pool)
        .await?;
        row.map(EvalSet::try_from).transpose()
    }

    async fn eval_set_exists(&self, world: WorldId, id: EvalSetId) -> Result<bool> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM eval_sets WHERE id = $1 AND world_id = $2")
            .bind(id.0)
            .bind(world.0)
            .fetch_one(&self.pool)
            .await?;
        Ok(n > 0)
    }

    async fn list_eval_sets(&self, world: WorldId, window: Window) -> Result<Vec<EvalSetSummary>> {
        let rows: Vec<SummaryRow> = sqlx::query_as(
            "SELECT id, world_id, name, item_count, created_at, updated_at FROM eval_sets WHERE world_id = $1 \
             ORDER BY created_at, id LIMIT $2 OFFSET $3",
        )
        .bind(world.0)
        .bind(wide(window.limit))
        .bind(wide(window.offset))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|row| {
                Ok(EvalSetSummary {
                    id: EvalSetId(row.id),
                    world_id: WorldId(row.world_id),
                    name: row.name,
                    item_count: narrow(TABLE, row.item_count)?,
                    created_at: row.created_at,
                    updated_at: row.updated_at,
                })
            })
            .collect()
    }

    async fn count_eval_sets(&self, world: WorldId) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM eval_sets WHERE world_id = $1")
            .bind(world.0)
            .fetch_one(&self.pool)
            .await?;
        narrow(TABLE, n)
    }

    async fn replace_eval_set(&self, set: &EvalSet) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE eval_sets SET name = $1, items = $2, item_count = $3, updated_at = $4 \
             WHERE id = $5 AND world_id = $6",
        )
        .bind(set.name.clone())
        .bind(items_column(set)?)
        .bind(wide(set.items.len() as u64))
        .bind(set.updated_at)
        .bind(set.id.0)
        .bind(set.world_id.0)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn delete_eval_set(&self, world: WorldId, id: EvalSetId) -> Result<bool> {
        let done = sqlx::query("DELETE FROM eval_sets WHERE id = $1 AND world_id = $2")
            .bind(id.0)
            .bind(world.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn insert_eval_run(&self, run: &EvalRun) -> Result<()> {
        insert_run(&self.pool, run).await
    }

    async fn get_eval_run(&self, world: WorldId, id: EvalRunId) -> Result<Option<EvalRun>> {
        let sql = format!("SELECT {RUN_ALL} FROM eval_runs WHERE id = $1 AND world_id = $2");
        let row: Option<RunRow> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(id.0)
            .bind(world.0)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(RunRow::into_run).transpose()?.map(|(run, _)| run))
    }

    async fn list_eval_runs(&self, eval: EvalSetId, window: Window) -> Result<Vec<(EvalRun, EvalRunProgress)>> {
        let sql =
            format!("SELECT {RUN_HEAD} FROM eval_runs WHERE eval_id = $1 ORDER BY created_at, id LIMIT $2 OFFSET $3");
        let rows: Vec<RunRow> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(eval.0)
            .bind(wide(window.limit))
            .bind(wide(window.offset))
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(RunRow::into_run).collect()
    }

    async fn eval_run_progress(&self, id: EvalRunId) -> Result<Option<(EvalRunStatus, EvalRunProgress)>> {
        let row: Option<(String, i64, i64)> =
            sqlx::query_as("SELECT status, done, item_count FROM eval_runs WHERE id = $1")
                .bind(id.0)
                .fetch_optional(&self.pool)
                .await?;
        row.map(|(status, done, total)| {
            Ok((
                status.parse().map_err(|err: String| corrupt(RUNS, err))?,
                EvalRunProgress {
                    done: narrow(RUNS, done)?,
                    total: narrow(RUNS, total)?,
                },
            ))
        })
        .transpose()
    }

    async fn count_open_eval_runs(&self, world: WorldId) -> Result<u64> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM eval_runs WHERE world_id = $1 AND status IN ('queued', 'running')",
        )
        .bind(world.0)
        .fetch_one(&self.pool)
        .await?;
        narrow(RUNS, n)
    }

    async fn count_eval_runs(&self, world: WorldId) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM eval_runs WHERE world_id = $1")
            .bind(world.0)
            .fetch_one(&self.pool)
            .await?;
        narrow(RUNS, n)
    }

    async fn claim_eval_run(&self, owner: &str, lease_s: f64) -> Result<Option<EvalRun>> {
        let sql = format!(
            "UPDATE eval_runs SET status = 'running', owner = $1, lease_until_s = {now} + $2, \
             attempts = attempts + 1, started_at = COALESCE(started_at, $3) \
             WHERE id IN (SELECT m.id FROM eval_runs m WHERE m.status = 'queued' \
             OR (m.status = 'running' AND (m.lease_until_s IS NULL OR m.lease_until_s < {now})) \
             ORDER BY m.created_at, m.id LIMIT 1 {lock}) RETURNING {RUN_ALL}",
            now = DB::NOW_S,
            lock = DB::CLAIM_LOCK,
        );
        let row: Option<RunRow> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(owner.to_owned())
            .bind(lease_s)
            .bind(crate::domain::now())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(RunRow::into_run).transpose()?.map(|(run, _)| run))
    }

    async fn save_eval_scores(
        &self,
        id: EvalRunId,
        owner: &str,
        scores: &[ItemRecord],
        measured: &MeasuredIndex,
        lease_s: f64,
    ) -> Result<bool> {
        let sql = format!(
            "UPDATE eval_runs SET scores = $3, done = $4, measured = COALESCE(measured, $5), \
             lease_until_s = {now} + $6 WHERE id = $1 AND owner = $2 AND status = 'running'",
            now = DB::NOW_S,
        );
        let done = sqlx::query(AssertSqlSafe(sql))
            .bind(id.0)
            .bind(owner.to_owned())
            .bind(json_column(scores)?)
            .bind(wide(scores.len() as u64))
            .bind(json_column(measured)?)
            .bind(lease_s)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn finish_eval_run(
        &self,
        id: EvalRunId,
        owner: &str,
        status: EvalRunStatus,
        error: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE eval_runs SET status = $3, error = $4, finished_at = $5, owner = NULL, lease_until_s = NULL \
             WHERE id = $1 AND owner = $2 AND status = 'running'",
        )
        .bind(id.0)
        .bind(owner.to_owned())
        .bind(status.as_str().to_owned())
        .bind(error.map(str::to_owned))
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn release_eval_run(&self, id: EvalRunId, owner: &str) -> Result<()> {
        sqlx::query(
            "UPDATE eval_runs SET owner = NULL, lease_until_s = NULL WHERE id = $1 AND owner = $2 AND status = 'running'",
        )
        .bind(id.0)
        .bind(owner.to_owned())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn cancel_eval_run(&self, world: WorldId, id: EvalRunId, at: DateTime<Utc>) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE eval_runs SET status = 'cancelled', finished_at = $3, owner = NULL, lease_until_s = NULL \
             WHERE id = $1 AND world_id = $2 AND status IN ('waiting', 'queued', 'running')",
        )
        .bind(id.0)
        .bind(world.0)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn delete_eval_run(&self, world: WorldId, id: EvalRunId) -> Result<bool> {
        let done = sqlx::query("DELETE FROM eval_runs WHERE id = $1 AND world_id = $2")
            .bind(id.0)
            .bind(world.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn get_gate(&self, job: JobId) -> Result<Option<ReingestGate>> {
        let sql = format!("SELECT {GATE_ALL} FROM reingest_gates g WHERE g.job_id = $1");
        let row: Option<GateRow> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(job.0)
            .fetch_optional(&self.pool)
            .await?;
        row.map(ReingestGate::try_from).transpose()
    }

    async fn gates_to_settle(&self) -> Result<Vec<(ReingestGate, bool)>> {
        #[derive(sqlx::FromRow)]
        struct Row {
            #[sqlx(flatten)]
            gate: GateRow,
            ended: bool,
        }
        let sql = format!(
            "SELECT {GATE_ALL}, (j.status IN ('completed', 'failed', 'cancelled')) AS ended \
             FROM reingest_gates g JOIN jobs j ON j.id = g.job_id \
             WHERE g.state = 'evaluating' OR (g.state IN ('waiting', 'held') \
             AND j.status IN ('completed', 'failed', 'cancelled')) ORDER BY g.created_at"
        );
        let rows: Vec<Row> = sqlx::query_as(AssertSqlSafe(sql)).fetch_all(&self.pool).await?;
        rows.into_iter()
            .map(|row| Ok((row.gate.try_into()?, row.ended)))
            .collect()
    }

    async fn decide_gate(
        &self,
        job: JobId,
        from: &[GateState],
        to: GateDecision<'_>,
        at: DateTime<Utc>,
    ) -> Result<bool> {
        let mut tx = self.begin().await?;
        let now = lock_gate(&mut *tx, job).await?;
        if !now.is_some_and(|state| from.contains(&state)) {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query(
            "UPDATE reingest_gates SET state = $2, before_value = COALESCE($3, before_value), \
             after_value = COALESCE($4, after_value), reason = COALESCE($5, reason), decided_at = $6 WHERE job_id = $1",
        )
        .bind(job.0)
        .bind(to.state.as_str())
        .bind(to.before)
        .bind(to.after)
        .bind(to.reason.map(str::to_owned))
        .bind(at)
        .execute(&mut *tx)
        .await?;
        if !to.state.is_open() {
            // A gate decided has no use for runs still waiting or under way.
            sqlx::query(
                "UPDATE eval_runs SET status = 'cancelled', finished_at = $2, owner = NULL, lease_until_s = NULL \
                 WHERE gate_job_id = $1 AND status IN ('waiting', 'queued', 'running')",
            )
            .bind(job.0)
            .bind(at)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }
}
