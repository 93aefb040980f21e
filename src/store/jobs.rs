//! [`JobStore`]: jobs and their event history, and the statements on a job's row that the
//! other aggregates share (inserting, reading, locking, finishing a job; appending an event).

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Executor;
use uuid::Uuid;

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::rows::{EventRow, JobErrorRow, JobRow, ListedJobErrorRow, corrupt, in_list, wide};
use super::worlds::lock_world;
use super::{FailedEntry, JobStore, Result, Retry};
use crate::domain::Window;
use crate::domain::{
    ChunkId, Job, JobEvent, JobEventKind, JobId, JobKind, JobStatus, MAX_JOB_ERRORS, RunId, SourceId, Waiting, WorldId,
};

/// Job `id`'s row.
pub(super) async fn select_job<'e, DB: Backend>(
    db: impl Executor<'e, Database = DB>,
    id: Uuid,
) -> Result<Option<JobRow>> {
    Ok(sqlx::query_as(
        "SELECT id, world_id, kind, status, run_id, total, embedded, failed, retries, rate_limited, reused, \
         created_at, started_at, finished_at, waiting_reason, waiting_until, version_of, \
         (SELECT g.state FROM reingest_gates g WHERE g.job_id = jobs.id) AS gate_state FROM jobs WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(db)
    .await?)
}

/// A job row to insert (its counters start at zero).
pub(super) struct NewJobRow {
    pub id: Uuid,
    pub world: WorldId,
    pub kind: JobKind,
    pub status: JobStatus,
    pub run: RunId,
    pub total: u64,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    /// A replace's source (stored as an `ingest` job with this column set: see migration 0018).
    pub version_of: Option<SourceId>,
}

impl NewJobRow {
    pub(super) async fn insert<'e, DB: Backend>(self, db: impl Executor<'e, Database = DB>) -> Result<()> {
        sqlx::query(
            "INSERT INTO jobs (id, world_id, kind, status, run_id, total, created_at, started_at, version_of) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(self.id)
        .bind(self.world.0)
        .bind(match self.kind {
            JobKind::Replace => JobKind::Ingest.as_str(),
            kind => kind.as_str(),
        })
        .bind(self.status.as_str())
        .bind(self.run.0)
        .bind(wide(self.total))
        .bind(self.created_at)
        .bind(self.started_at)
        .bind(self.version_of.map(|s| s.0))
        .execute(db)
        .await?;
        Ok(())
    }
}

/// Job `id`'s status as stored.
pub(super) async fn job_status_text<'e, DB: Backend>(
    db: impl Executor<'e, Database = DB>,
    id: Uuid,
) -> Result<Option<String>> {
    Ok(sqlx::query_scalar("SELECT status FROM jobs WHERE id = $1")
        .bind(id)
        .fetch_optional(db)
        .await?)
}

/// Moves job `id` from status `from` to `to`; returns how many rows changed (0 or 1).
pub(super) async fn set_job_status<'e, DB: Backend>(
    db: impl Executor<'e, Database = DB>,
    id: Uuid,
    from: JobStatus,
    to: JobStatus,
    finished_at: Option<DateTime<Utc>>,
) -> Result<u64> {
    let done = sqlx::query("UPDATE jobs SET status = $3, finished_at = $4 WHERE id = $1 AND status = $2")
        .bind(id)
        .bind(from.as_str())
        .bind(to.as_str())
        .bind(finished_at)
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}

/// Adds `n` entries to job `id`'s total.
pub(super) async fn add_job_total<'e, DB: Backend>(
    db: impl Executor<'e, Database = DB>,
    id: Uuid,
    n: u64,
) -> Result<()> {
    sqlx::query("UPDATE jobs SET total = total + $2 WHERE id = $1")
        .bind(id)
        .bind(wide(n))
        .execute(db)
        .await?;
    Ok(())
}

/// Locks job `id`'s row without changing it (and without firing the status trigger), and
/// returns its status as of the lock.
pub(super) async fn lock_job_status<'e, DB: Backend>(
    db: impl Executor<'e, Database = DB>,
    id: Uuid,
) -> Result<Option<String>> {
    Ok(
        sqlx::query_scalar("UPDATE jobs SET total = total WHERE id = $1 RETURNING status")
            .bind(id)
            .fetch_optional(db)
            .await?,
    )
}

/// [`finish_if_done`]'s statement: `$1` job, `$2` now.
pub const FINISH_IF_DONE: &str = "UPDATE jobs SET status = CASE WHEN EXISTS (\
     SELECT 1 FROM manifest_open WHERE job_id = $1 AND state = 'failed') THEN 'failed' ELSE 'completed' END, \
     finished_at = $2 WHERE id = $1 AND kind <> 'reingest' AND status = 'running' \
     AND NOT EXISTS (SELECT 1 FROM manifest_open WHERE job_id = $1 AND state = 'pending') \
     AND (version_of IS NULL OR EXISTS (SELECT 1 FROM manifest_open WHERE job_id = $1 AND state = 'failed')) \
     RETURNING id";

/// Completes (or fails, when entries failed) running job `id` when no entry of it is pending;
/// returns whether it did. A replace only fails here: it completes by its switch
/// (`SourceStore::switch_version`). Not for re-ingests: one ends only through `finish_reingest`, which
/// switches the world or retires its run.
pub(super) async fn finish_if_done<'e, DB: Backend>(
    db: impl Executor<'e, Database = DB>,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<bool> {
    let finished: Option<Uuid> = sqlx::query_scalar(FINISH_IF_DONE)
        .bind(id)
        .bind(now)
        .fetch_optional(db)
        .await?;
    Ok(finished.is_some())
}

/// Appends an event to job `job`; returns its id. The caller holds the job's row lock (see
/// [`JobStore::append_job_event`]).
pub(super) async fn insert_event<'e, DB: Backend>(
    db: impl Executor<'e, Database = DB>,
    job: Uuid,
    kind: JobEventKind,
    data: &str,
    now: DateTime<Utc>,
) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "INSERT INTO job_events (job_id, kind, data, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
    )
    .bind(job)
    .bind(kind.as_str())
    .bind(data)
    .bind(now)
    .fetch_one(db)
    .await?)
}

/// `get_job`'s read of a job's first failed entries: `$1` job, `$2` how many.
pub const JOB_ERRORS: &str = "SELECT c.book_number, c.chunk_number, m.last_error_code, m.last_error_message \
     FROM manifest_open m JOIN chunks c ON c.id = m.chunk_id \
     WHERE m.job_id = $1 AND m.state = 'failed' ORDER BY m.book_number, m.chunk_number LIMIT $2";

#[async_trait]
impl<DB: Backend> JobStore for SqlStore<DB> {
    async fn get_job(&self, id: JobId) -> Result<Option<Job>> {
        let Some(row) = select_job(&self.pool, id.0).await? else {
            return Ok(None);
        };
        // The first `MAX_JOB_ERRORS` failed entries.
        let errors: Vec<JobErrorRow> = sqlx::query_as(JOB_ERRORS)
            .bind(id.0)
            .bind(wide(MAX_JOB_ERRORS))
            .fetch_all(&self.pool)
            .await?;
        row.into_job(errors).map(Some)
    }

    async fn list_jobs(&self, world: WorldId, statuses: &[JobStatus], window: Window) -> Result<Vec<Job>> {
        // `$4`…`$9`: the statuses kept (fewer are padded by repeating one; none means all).
        const LIST_JOBS: &str = "SELECT id, world_id, kind, status, run_id, total, embedded, failed, retries, \
             rate_limited, reused, created_at, started_at, finished_at, waiting_reason, waiting_until, version_of, \
             (SELECT g.state FROM reingest_gates g WHERE g.job_id = jobs.id) AS gate_state \
             FROM jobs WHERE world_id = $1 \
             AND status IN ($4, $5, $6, $7, $8, $9) ORDER BY created_at DESC, id LIMIT $2 OFFSET $3";
        // The first `MAX_JOB_ERRORS` failed entries of each job: `$1` that limit, then the job
        // ids, then the end.
        const LIST_JOB_ERRORS: &str = "SELECT e.job_id, e.book_number, e.chunk_number, e.last_error_code, \
             e.last_error_message FROM (SELECT m.job_id, c.book_number, c.chunk_number, m.last_error_code, \
             m.last_error_message, \
             ROW_NUMBER() OVER (PARTITION BY m.job_id ORDER BY c.book_number, c.chunk_number) AS n \
             FROM manifest_open m JOIN chunks c ON c.id = m.chunk_id WHERE m.state = 'failed' AND m.job_id IN ";
        const LIST_JOB_ERRORS_END: &str = ") e WHERE e.n <= $1 ORDER BY e.job_id, e.book_number, e.chunk_number";
        let kept: &[JobStatus] = if statuses.is_empty() { &JobStatus::ALL } else { statuses };
        let mut query = sqlx::query_as::<DB, JobRow>(LIST_JOBS)
            .bind(world.0)
            .bind(wide(window.limit))
            .bind(wide(window.offset));
        for i in 0..JobStatus::ALL.len() {
            query = query.bind(kept[i.min(kept.len() - 1)].as_str());
        }
        let rows: Vec<JobRow> = query.fetch_all(&self.pool).await?;
        // The errors of every listed job, a few hundred jobs per read.
        let mut errors: HashMap<Uuid, Vec<JobErrorRow>> = HashMap::new();
        let ids: Vec<Uuid> = rows.iter().map(|r| r.id_uuid()).collect();
        for batch in ids.chunks(500) {
            // Only generated `$n` placeholders are added to the constant text.
            let sql = sqlx::AssertSqlSafe(format!(
                "{LIST_JOB_ERRORS}{}{LIST_JOB_ERRORS_END}",
                in_list(2, batch.len())
            ));
            let mut query = sqlx::query_as::<DB, ListedJobErrorRow>(sql).bind(wide(MAX_JOB_ERRORS));
            for job in batch {
                query = query.bind(*job);
            }
            for row in query.fetch_all(&self.pool).await? {
                errors.entry(row.job_id).or_default().push(row.error);
            }
        }
        rows.into_iter()
            .map(|row| {
                let mine = errors.remove(&row.id_uuid()).unwrap_or_default();
                row.into_job(mine)
            })
            .collect()
    }

    async fn transition_job(
        &self,
        id: JobId,
        from: &[JobStatus],
        to: JobStatus,
        now: DateTime<Utc>,
    ) -> Result<Option<Job>> {
        let mut tx = self.begin().await?;
        let Some(status) = job_status_text(&mut *tx, id.0).await? else {
            return Ok(None);
        };
        let current: JobStatus = status.parse().map_err(|r| corrupt("jobs", r))?;
        if !from.contains(&current) {
            return Ok(None);
        }
        let finished = if to.is_terminal() { Some(now) } else { None };
        if set_job_status(&mut *tx, id.0, current, to, finished).await? == 0 {
            return Ok(None);
        }
        if to == JobStatus::Running {
            // A job that was queued (a re-ingest being prepared) starts when it first runs.
            sqlx::query("UPDATE jobs SET started_at = $2 WHERE id = $1 AND started_at IS NULL")
                .bind(id.0)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.get_job(id).await
    }

    async fn finish_job_if_done(&self, id: JobId, now: DateTime<Utc>) -> Result<Option<Job>> {
        // The job's row is locked by a statement of its own first: a requeue holding it may be
        // adding pending entries, and Postgres would judge `finish_if_done`'s "nothing
        // pending" on a snapshot taken before that requeue committed. The next statement's
        // snapshot sees them.
        let mut tx = self.begin().await?;
        if lock_job_status(&mut *tx, id.0).await?.as_deref() != Some("running") {
            tx.rollback().await?;
            return Ok(None);
        }
        let finished = finish_if_done(&mut *tx, id.0, now).await?;
        tx.commit().await?;
        if finished { self.get_job(id).await } else { Ok(None) }
    }

    async fn job_status(&self, id: JobId) -> Result<Option<JobStatus>> {
        job_status_text(&self.pool, id.0)
            .await?
            .map(|s| s.parse().map_err(|reason| corrupt("jobs", reason)))
            .transpose()
    }

    async fn running_jobs_with_nothing_pending(&self) -> Result<Vec<JobId>> {
        // Not repair jobs: one is running with nothing pending while its reconciliation is
        // under way, and finishes itself when that ends.
        let ids: Vec<Uuid> = sqlx::query_scalar(
            "SELECT j.id FROM jobs j WHERE j.status = 'running' AND j.kind <> 'repair' \
             AND NOT EXISTS (SELECT 1 FROM manifest_open m WHERE m.job_id = j.id AND m.state = 'pending') \
             ORDER BY j.created_at LIMIT 100",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(ids.into_iter().map(JobId).collect())
    }

    async fn retry_failed(&self, id: JobId, now: DateTime<Utc>) -> Result<Retry> {
        let Some(row) = select_job(&self.pool, id.0).await? else {
            return Ok(Retry::Missing);
        };
        let job = row.into_job(Vec::new())?;
        let mut tx = self.begin().await?;
        // World first, then job (the order every writer of these rows takes).
        if lock_world(&mut *tx, job.world_id).await?.is_none() {
            tx.rollback().await?;
            return Ok(Retry::Missing);
        }
        let Some(status) = lock_job_status(&mut *tx, id.0).await? else {
            tx.rollback().await?;
            return Ok(Retry::Missing);
        };
        let status: JobStatus = status.parse().map_err(|r| corrupt("jobs", r))?;
        let allowed = match status {
            JobStatus::Running | JobStatus::Paused => true,
            JobStatus::Failed => job.kind != JobKind::Reingest,
            JobStatus::Queued | JobStatus::Completed => {
                tx.rollback().await?;
                return Ok(Retry::Nothing);
            }
            JobStatus::Cancelled => false,
        };
        if !allowed {
            tx.rollback().await?;
            return Ok(Retry::Refused { status, kind: job.kind });
        }
        let requeued = sqlx::query(
            "UPDATE manifest_entries SET state = 'pending', attempts = 0, last_error_code = NULL, \
             last_error_message = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = $2 \
             WHERE chunk_id IN (SELECT chunk_id FROM manifest_open WHERE job_id = $1 AND state = 'failed') \
             AND state = 'failed' AND run_id IN \
             (SELECT id FROM runs WHERE world_id = $3 AND status IN ('active', 'building'))",
        )
        .bind(id.0)
        .bind(now)
        .bind(job.world_id.0)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if requeued == 0 {
            tx.rollback().await?;
            return Ok(Retry::Nothing);
        }
        // A failed job runs again (the status trigger records the change); a running or paused
        // one keeps its status.
        sqlx::query(
            "UPDATE jobs SET failed = CASE WHEN failed > $2 THEN failed - $2 ELSE 0 END, \
             finished_at = CASE WHEN status = 'failed' THEN NULL ELSE finished_at END, \
             status = CASE WHEN status = 'failed' THEN 'running' ELSE status END WHERE id = $1",
        )
        .bind(id.0)
        .bind(wide(requeued))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Retry::Requeued(requeued))
    }

    async fn set_job_waiting(&self, id: JobId, waiting: Option<&Waiting>) -> Result<()> {
        sqlx::query("UPDATE jobs SET waiting_reason = $2, waiting_until = $3 WHERE id = $1 AND status = 'running'")
            .bind(id.0)
            .bind(waiting.map(|w| w.reason.as_str().to_owned()))
            .bind(waiting.and_then(|w| w.until))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn failed_entries(&self, world: WorldId) -> Result<Vec<FailedEntry>> {
        let rows: Vec<(Option<Uuid>, Uuid, Uuid)> = sqlx::query_as(
            "SELECT m.job_id, m.run_id, m.chunk_id FROM manifest_open m JOIN chunks c ON c.id = m.chunk_id \
             WHERE m.world_id = $1 AND m.state = 'failed' AND m.run_id IN \
             (SELECT id FROM runs WHERE world_id = $1 AND status IN ('active', 'building')) \
             ORDER BY c.book_number, c.chunk_number",
        )
        .bind(world.0)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(job, run, chunk)| FailedEntry {
                job: job.map(JobId),
                run: RunId(run),
                chunk: ChunkId(chunk),
            })
            .collect())
    }

    async fn append_job_event(&self, job: JobId, kind: JobEventKind, data: &str, now: DateTime<Utc>) -> Result<i64> {
        // Under the job's row lock, as every other event of the job is written (the status
        // trigger and the source-delete warning run inside updates of that row): Postgres hands
        // out ids when rows are inserted, not when they commit, and a stream reading "after id
        // N" would pass over an event committed after a later one. Serialised per job, a job's
        // events commit in id order.
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE jobs SET total = total WHERE id = $1")
            .bind(job.0)
            .execute(&mut *tx)
            .await?;
        let id = insert_event(&mut *tx, job.0, kind, data, now).await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn job_events_after(&self, job: JobId, after: i64, limit: u32) -> Result<Vec<JobEvent>> {
        let rows: Vec<EventRow> = sqlx::query_as(
            "SELECT id, job_id, kind, data, created_at FROM job_events \
             WHERE job_id = $1 AND id > $2 ORDER BY id LIMIT $3",
        )
        .bind(job.0)
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }
}
