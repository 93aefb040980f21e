//! [`EvalStore`]: evaluation test sets. The items are one JSON column (a set is read and
//! written whole); `item_count` beside it lets a listing skip them.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use sqlx::AssertSqlSafe;

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::rows::{corrupt, narrow, wide};
use super::{EvalRunProgress, EvalStore, Result};
use crate::domain::{
    EvalItem, EvalRun, EvalRunId, EvalRunStatus, EvalSet, EvalSetId, EvalSetSummary, ItemRecord, MeasuredIndex, Window,
    WorldId,
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
                        created_at, started_at, finished_at, item_count, done";
/// Every column of a run.
const RUN_ALL: &str = "id, world_id, eval_id, eval_name, status, settings, budgets, measured, attempts, error, \
                       created_at, started_at, finished_at, item_count, done, items, scores";

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
            attempts: narrow(RUNS, self.attempts)?,
            error: self.error,
            created_at: self.created_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
        };
        Ok((run, progress))
    }
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
        sqlx::query(
            "INSERT INTO eval_runs (id, world_id, eval_id, eval_name, status, settings, budgets, items, item_count, \
             done, scores, attempts, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
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
        .execute(&self.pool)
        .await?;
        Ok(())
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
             WHERE id = $1 AND world_id = $2 AND status IN ('queued', 'running')",
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
}
