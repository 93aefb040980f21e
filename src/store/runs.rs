//! [`RunStore`] and [`RepairStore`]: a world's runs (re-ingest builds one beside the active one
//! and switches to it), and what repair reconciles against the points.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Executor;
use uuid::Uuid;

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::evals::{insert_gate, lock_gate, start_gate};
use super::jobs::{NewJobRow, add_job_total, lock_job_status, select_job, set_job_status};
use super::rows::{KeptRow, ManifestRow, corrupt, found, in_list, narrow, wide};
use super::sources::{ChunkPlacement, insert_chunks};
use super::worlds::lock_world;
use super::{NewRun, ReingestStep, RepairStore, Result, RunStore, SourceChunks};
use crate::domain::{
    ChunkId, ChunkingProfile, EmbeddedVector, EmbeddingProfile, GateState, Job, JobId, JobKind, JobStatus, KeptPoint,
    ManifestEntry, NewGate, RunId, RunInfo, RunStatus, SourceId, WorldId,
};

/// Locks run `id`'s row and reads its status (SQLite: takes the write lock before anything is
/// read, so the transaction never has to upgrade a read lock under a concurrent writer).
pub(super) async fn lock_run<'e, DB: Backend>(
    db: impl Executor<'e, Database = DB>,
    id: RunId,
) -> Result<Option<String>> {
    Ok(
        sqlx::query_scalar("UPDATE runs SET status = status WHERE id = $1 RETURNING status")
            .bind(id.0)
            .fetch_optional(db)
            .await?,
    )
}

/// The sources of `world` with no chunk in `run` yet, by book number.
async fn sources_missing<'e, DB: Backend>(
    db: impl Executor<'e, Database = DB>,
    world: WorldId,
    run: RunId,
) -> Result<Vec<(Uuid, i64)>> {
    Ok(sqlx::query_as(
        "SELECT s.id, s.book_number FROM sources s WHERE s.world_id = $1 AND s.replaces IS NULL \
         AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.run_id = $2 AND c.source_id = s.id) ORDER BY s.book_number",
    )
    .bind(world.0)
    .bind(run.0)
    .fetch_all(db)
    .await?)
}

fn source_numbers(rows: Vec<(Uuid, i64)>) -> Result<Vec<(SourceId, u32)>> {
    rows.into_iter()
        .map(|(id, book)| Ok((SourceId(id), narrow("sources", book)?)))
        .collect()
}

async fn set_run_status<'e, DB: Backend>(
    db: impl Executor<'e, Database = DB>,
    id: Uuid,
    status: RunStatus,
) -> Result<()> {
    sqlx::query("UPDATE runs SET status = $2 WHERE id = $1")
        .bind(id)
        .bind(status.as_str())
        .execute(db)
        .await?;
    Ok(())
}

async fn run_collection<'e, DB: Backend>(db: impl Executor<'e, Database = DB>, id: Uuid) -> Result<String> {
    Ok(sqlx::query_scalar("SELECT collection FROM runs WHERE id = $1")
        .bind(id)
        .fetch_one(db)
        .await?)
}

#[async_trait]
impl<DB: Backend> RunStore for SqlStore<DB> {
    async fn begin_reingest(&self, run: NewRun, job: JobId, gate: Option<&NewGate>, now: DateTime<Utc>) -> Result<Job> {
        let mut tx = self.begin().await?;
        // The world's row first (every writer of worlds and runs takes it first): the run the
        // world serves is the one a gate's run before measures.
        let served = found(lock_world(&mut *tx, run.world).await?)?;
        sqlx::query(
            "INSERT INTO runs (id, world_id, provider, model, dimensions, max_tokens, overlap_tokens, collection, \
             status, created_at, parent_max_tokens, context_prefix) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'building', $9, $10, $11)",
        )
        .bind(run.id.0)
        .bind(run.world.0)
        .bind(run.embedding.provider.as_str())
        .bind(&run.embedding.model)
        .bind(wide(run.embedding.dimensions))
        .bind(wide(run.chunking.max_tokens))
        .bind(wide(run.chunking.overlap_tokens))
        .bind(run.embedding.collection_name())
        .bind(now)
        .bind(wide(run.chunking.parent_max_tokens))
        .bind(run.chunking.context_prefix)
        .execute(&mut *tx)
        .await?;
        NewJobRow {
            id: job.0,
            world: run.world,
            kind: JobKind::Reingest,
            status: JobStatus::Queued,
            run: run.id,
            total: 0,
            created_at: now,
            // Started when its preparation is done and it becomes running.
            started_at: None,
            version_of: None,
        }
        .insert(&mut *tx)
        .await?;
        if let Some(gate) = gate {
            insert_gate(&mut tx, (job, run.world), (RunId(served), run.id), gate, now).await?;
        }
        let row = found(select_job(&mut *tx, job.0).await?)?;
        tx.commit().await?;
        row.into_job(Vec::new())
    }

    async fn sources_missing_from_run(&self, world: WorldId, run: RunId) -> Result<Vec<(SourceId, u32)>> {
        source_numbers(sources_missing(&self.pool, world, run).await?)
    }

    async fn add_run_chunks(
        &self,
        world: WorldId,
        run: RunId,
        job: JobId,
        source: SourceChunks,
        now: DateTime<Utc>,
    ) -> Result<u64> {
        let mut tx = self.begin().await?;
        if lock_run(&mut *tx, run).await?.as_deref() != Some("building") {
            // The re-ingest was cancelled (or replaced): the run takes nothing more.
            tx.rollback().await?;
            return Ok(0);
        }
        let missing = sources_missing(&mut *tx, world, run).await?;
        if !missing.iter().any(|(id, _)| *id == source.source.0) {
            // Chunked meanwhile, or deleted: nothing to add.
            tx.rollback().await?;
            return Ok(0);
        }
        let version: i64 = sqlx::query_scalar("SELECT version FROM sources WHERE id = $1")
            .bind(source.source.0)
            .fetch_one(&mut *tx)
            .await?;
        let at = ChunkPlacement {
            world,
            run,
            source: source.source,
            book_number: wide(source.book_number),
            job,
            version: narrow("sources", version)?,
            staged: false,
        };
        insert_chunks(&mut tx, &at, &source.chunks, now).await?;
        let n = source.chunks.len() as u64;
        add_job_total(&mut *tx, job.0, n).await?;
        tx.commit().await?;
        Ok(n)
    }

    async fn finish_reingest(&self, job: JobId, now: DateTime<Utc>) -> Result<ReingestStep> {
        let Some(row) = select_job(&self.pool, job.0).await? else {
            return Ok(ReingestStep::NotDone);
        };
        let current = row.into_job(Vec::new())?;
        if current.kind != JobKind::Reingest || current.status != JobStatus::Running {
            return Ok(ReingestStep::NotDone);
        }
        let (world, run) = (current.world_id, current.run_id);
        let mut tx = self.begin().await?;
        let Some(old) = lock_world(&mut *tx, world).await? else {
            tx.rollback().await?;
            return Ok(ReingestStep::NotDone);
        };
        // Judged again under locks (world, then run, then job, the order every writer of these
        // rows takes): the job read above may be stale. Another caller may have switched the
        // world already (the run is active now, and `old` is this very run), or the job been
        // paused or cancelled meanwhile. Locking the run also keeps a source from being chunked
        // into it between the checks below.
        let run_status = lock_run(&mut *tx, run).await?;
        let job_status = lock_job_status(&mut *tx, job.0).await?;
        if run_status.as_deref() != Some("building") || job_status.as_deref() != Some("running") || old == run.0 {
            tx.rollback().await?;
            return Ok(ReingestStep::NotDone);
        }
        // Gives the re-ingest the pending entries of its run that no live job holds (left by
        // code before requeues went to the re-ingest job, or by an older replica): nobody else
        // would ever embed them, and the run switches only once they are.
        let stranded = sqlx::query(
            "UPDATE manifest_entries SET job_id = $3 WHERE state = 'pending' AND chunk_id IN \
             (SELECT chunk_id FROM manifest_open WHERE world_id = $1 AND run_id = $2 AND state = 'pending' \
             AND (job_id IS NULL OR job_id IN \
             (SELECT id FROM jobs WHERE world_id = $1 AND status IN ('completed', 'cancelled', 'failed'))))",
        )
        .bind(world.0)
        .bind(run.0)
        .bind(job.0)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if stranded > 0 {
            add_job_total(&mut *tx, job.0, stranded).await?;
            tx.commit().await?;
            return Ok(ReingestStep::NotDone);
        }
        // Every entry of the run counts, not only the job's own: the run is what the world will
        // serve.
        let pending: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM manifest_open WHERE world_id = $1 AND run_id = $2 AND state = 'pending')",
        )
        .bind(world.0)
        .bind(run.0)
        .fetch_one(&mut *tx)
        .await?;
        if pending {
            tx.rollback().await?;
            return Ok(ReingestStep::NotDone);
        }
        let collection = run_collection(&mut *tx, run.0).await?;
        let failed: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM manifest_open WHERE world_id = $1 AND run_id = $2 AND state = 'failed')",
        )
        .bind(world.0)
        .bind(run.0)
        .fetch_one(&mut *tx)
        .await?;
        if failed {
            set_job_status(&mut *tx, job.0, JobStatus::Running, JobStatus::Failed, Some(now)).await?;
            set_run_status(&mut *tx, run.0, RunStatus::Retired).await?;
            tx.commit().await?;
            return Ok(ReingestStep::Failed { world, run, collection });
        }
        let missing = sources_missing(&mut *tx, world, run).await?;
        if !missing.is_empty() {
            tx.rollback().await?;
            let sources = source_numbers(missing)?;
            return Ok(ReingestStep::MissingSources { world, run, sources });
        }
        // A gate decides first: the switch waits for its evaluation of the complete run (or
        // for the re-ingest to be promoted).
        match lock_gate(&mut *tx, job).await? {
            Some(GateState::Waiting) => {
                start_gate(&mut tx, job).await?;
                tx.commit().await?;
                return Ok(ReingestStep::Evaluating);
            }
            Some(state) if !state.lets_switch() => {
                tx.rollback().await?;
                return Ok(ReingestStep::NotDone);
            }
            _ => {}
        }
        let old_collection = run_collection(&mut *tx, old).await?;
        sqlx::query(
            "UPDATE worlds SET active_run_id = r.id, provider = r.provider, model = r.model, \
             dimensions = r.dimensions, max_tokens = r.max_tokens, overlap_tokens = r.overlap_tokens, \
             parent_max_tokens = r.parent_max_tokens, context_prefix = r.context_prefix, \
             collection = r.collection, updated_at = $3 FROM runs r WHERE r.id = $2 AND worlds.id = $1",
        )
        .bind(world.0)
        .bind(run.0)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        set_run_status(&mut *tx, old, RunStatus::Retired).await?;
        set_run_status(&mut *tx, run.0, RunStatus::Active).await?;
        // Jobs still filling the run being replaced: their sources are part of the new run.
        sqlx::query(
            "UPDATE jobs SET status = 'completed', finished_at = $3 \
             WHERE world_id = $1 AND run_id = $2 AND status IN ('queued', 'running', 'paused')",
        )
        .bind(world.0)
        .bind(old)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let completed = set_job_status(&mut *tx, job.0, JobStatus::Running, JobStatus::Completed, Some(now)).await?;
        if completed != 1 {
            // Cannot happen under the job's lock; never switch without completing it.
            tx.rollback().await?;
            return Ok(ReingestStep::NotDone);
        }
        tx.commit().await?;
        Ok(ReingestStep::Switched {
            world,
            old_run: RunId(old),
            old_collection,
        })
    }

    async fn run_chunking(&self, job: JobId) -> Result<Option<ChunkingProfile>> {
        let row: Option<(i64, i64, i64, bool)> = sqlx::query_as(
            "SELECT r.max_tokens, r.overlap_tokens, r.parent_max_tokens, r.context_prefix \
             FROM jobs j JOIN runs r ON r.id = j.run_id \
             WHERE j.id = $1",
        )
        .bind(job.0)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|(max, overlap, parent_max, context_prefix)| {
            Ok(ChunkingProfile {
                max_tokens: narrow("runs", max)?,
                overlap_tokens: narrow("runs", overlap)?,
                parent_max_tokens: narrow("runs", parent_max)?,
                context_prefix,
            })
        })
        .transpose()
    }

    async fn retire_run(&self, run: RunId) -> Result<bool> {
        // Only while it is being built (a cancelled re-ingest's), never an active one.
        let done = sqlx::query("UPDATE runs SET status = 'retired' WHERE id = $1 AND status = 'building'")
            .bind(run.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn delete_run(&self, run: RunId) -> Result<()> {
        // Only a retired run: never the one a world serves, nor one being built.
        sqlx::query("DELETE FROM runs WHERE id = $1 AND status = 'retired'")
            .bind(run.0)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl<DB: Backend> RepairStore for SqlStore<DB> {
    async fn world_runs(&self, world: WorldId) -> Result<Vec<RunInfo>> {
        let rows: Vec<(Uuid, String, String, i64, String, String)> = sqlx::query_as(
            "SELECT id, provider, model, dimensions, collection, status FROM runs WHERE world_id = $1 \
             ORDER BY created_at, id",
        )
        .bind(world.0)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(id, provider, model, dimensions, collection, status)| {
                Ok(RunInfo {
                    id: RunId(id),
                    embedding: EmbeddingProfile {
                        provider: provider.parse().map_err(|reason| corrupt("runs", reason))?,
                        model,
                        dimensions: narrow("runs", dimensions)?,
                    },
                    collection,
                    status: status.parse().map_err(|reason| corrupt("runs", reason))?,
                })
            })
            .collect()
    }

    async fn manifest_entries(&self, world: WorldId, run: RunId, now: DateTime<Utc>) -> Result<Vec<ManifestEntry>> {
        let rows: Vec<ManifestRow> = sqlx::query_as(
            "SELECT m.chunk_id, m.point_id, m.run_id, m.source_id, c.chunk_number, m.state, c.text_sha256, \
             (m.lease_owner IS NOT NULL AND m.lease_expires_at >= $3) AS leased, (s.replaces IS NOT NULL) AS staged \
             FROM manifest_entries m JOIN chunks c ON c.id = m.chunk_id JOIN sources s ON s.id = m.source_id \
             WHERE m.world_id = $1 AND m.run_id = $2",
        )
        .bind(world.0)
        .bind(run.0)
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn adopt_entries(
        &self,
        world: WorldId,
        run: RunId,
        points: &[EmbeddedVector],
        now: DateTime<Utc>,
    ) -> Result<(u64, Vec<JobId>)> {
        let mut jobs: Vec<JobId> = Vec::new();
        let mut marked: Vec<&EmbeddedVector> = Vec::new();
        let mut tx = self.begin().await?;
        for point in points {
            let chunk = &point.chunk_id;
            // A pending entry no worker holds (an entry given back with a "not before" time has
            // no owner) whose point is known good: embedded, no provider call.
            let job: Option<Option<Uuid>> = sqlx::query_scalar(
                "UPDATE manifest_entries SET state = 'embedded', \
                 embedded_text_sha256 = (SELECT c.text_sha256 FROM chunks c WHERE c.id = manifest_entries.chunk_id), \
                 lease_owner = NULL, lease_expires_at = NULL, last_error_code = NULL, last_error_message = NULL, \
                 updated_at = $4 WHERE chunk_id = $1 AND world_id = $2 AND run_id = $3 AND state = 'pending' \
                 AND (lease_owner IS NULL OR lease_expires_at < $4) RETURNING job_id",
            )
            .bind(chunk.0)
            .bind(world.0)
            .bind(run.0)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            if job.is_some() {
                marked.push(point);
            }
            if let Some(Some(job)) = job {
                // Jobs that ended keep their counts: only a live job counts an adopted entry.
                sqlx::query(
                    "UPDATE jobs SET embedded = embedded + 1 WHERE id = $1 AND status IN ('queued', 'running', 'paused')",
                )
                .bind(job)
                .execute(&mut *tx)
                .await?;
                let job = JobId(job);
                if !jobs.contains(&job) {
                    jobs.push(job);
                }
            }
        }
        // Each adopted entry keeps its point's vector, as a worker's mark keeps the one it made.
        marked.sort_by_key(|p| p.chunk_id.0);
        marked.dedup_by_key(|p| p.chunk_id);
        super::vectors::keep(&mut tx, &marked).await?;
        tx.commit().await?;
        Ok((marked.len() as u64, jobs))
    }

    async fn kept_points(&self, world: WorldId, run: RunId, chunks: &[ChunkId]) -> Result<Vec<KeptPoint>> {
        // Looked up by chunk id (every join is on a primary key); `$1`, `$2` world and run, then
        // the chunk ids. A vector made from other text than the chunk has now is not its vector.
        const KEPT: &str = "SELECT m.chunk_id, m.point_id, m.source_id, c.book_number, c.chunk_number, \
             c.token_count + c.embed_prefix_tokens AS token_count, c.text_sha256, \
             c.embed_prefix || c.chunk_text AS chunk_text, v.dense, (s.replaces IS NOT NULL) AS staged \
             FROM manifest_entries m JOIN chunks c ON c.id = m.chunk_id JOIN chunk_vectors v ON v.chunk_id = m.chunk_id \
             JOIN sources s ON s.id = m.source_id \
             WHERE m.world_id = $1 AND m.run_id = $2 AND m.state = 'embedded' AND v.text_sha256 = c.text_sha256 \
             AND m.chunk_id IN ";
        let mut kept = Vec::with_capacity(chunks.len());
        for batch in chunks.chunks(100) {
            // Only generated `$n` placeholders are added to the constant text.
            let sql = sqlx::AssertSqlSafe(format!("{KEPT}{}", in_list(3, batch.len())));
            let mut query = sqlx::query_as::<DB, KeptRow>(sql).bind(world.0).bind(run.0);
            for chunk in batch {
                query = query.bind(chunk.0);
            }
            for row in query.fetch_all(&self.pool).await? {
                kept.extend(row.into_point()?);
            }
        }
        Ok(kept)
    }

    async fn create_job(&self, world: WorldId, run: RunId, kind: JobKind, now: DateTime<Utc>) -> Result<Job> {
        let id = Uuid::new_v4();
        NewJobRow {
            id,
            world,
            kind,
            status: JobStatus::Running,
            run,
            total: 0,
            created_at: now,
            started_at: Some(now),
            version_of: None,
        }
        .insert(&self.pool)
        .await?;
        let row = found(select_job(&self.pool, id).await?)?;
        row.into_job(Vec::new())
    }
}
