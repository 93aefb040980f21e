//! [`SourceStore`]: sources, their chunks and the chunks' manifest entries; also how chunks are
//! inserted (multi-row statements), which re-ingest shares.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sha2::Digest as _;
use sqlx::{QueryBuilder, Transaction};
use uuid::Uuid;

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::jobs::{NewJobRow, finish_if_done, insert_event, job_status_text, lock_job_status, select_job};
use super::rows::{ChunkStateRow, CountsRow, SourceRow, corrupt, found, narrow, wide};
use super::worlds::lock_world;
use super::{Error, Result, SourceStore, StageVersion, StagedVersion, Staging, Switched};
use crate::domain::Window;
use crate::domain::{
    ChunkPage, Job, JobEventData, JobId, JobKind, JobStatus, NewChunk, NewSource, RunId, Source, SourceCounts,
    SourceDeletion, SourceId, SourceKey, WorldId, point_id,
};

/// Columns of a [`SourceRow`]: the source `s` and its staged version `p`, if any
/// ([`SOURCES_FROM`]).
macro_rules! source_columns {
    () => {
        "s.id, s.world_id, s.book_number, s.filename, s.content_type, s.sha256, s.chars, s.title, s.url, s.metadata, \
         s.created_at, s.source_key, s.version, s.updated_at, p.id AS pending_id, p.version AS pending_version, \
         p.staged_job AS pending_job, p.created_at AS pending_created_at"
    };
}

/// What [`source_columns`] reads from: a source and the staged version that replaces it.
macro_rules! sources_from {
    () => {
        " FROM sources s LEFT JOIN sources p ON p.replaces = s.id "
    };
}

/// Chunks per insert statement: 12 parameters each, 2,400 a statement, well under the
/// parameter limits (32,766 in SQLite, 65,535 in PostgreSQL).
const CHUNKS_PER_STATEMENT: usize = 200;

/// Where [`insert_chunks`] puts chunks: one source's, in one run, held by one job.
pub(super) struct ChunkPlacement {
    pub world: WorldId,
    pub run: RunId,
    pub source: SourceId,
    pub book_number: i64,
    pub job: JobId,
    /// The version of the text the chunks were cut from.
    pub version: u32,
    /// A staged version's chunks are not counted in `run_sources` until the switch.
    pub staged: bool,
}

/// Inserts `chunks` with one pending manifest entry each (held by the placement's job) in the
/// transaction `tx`: a multi-row statement per [`CHUNKS_PER_STATEMENT`] chunks, then one for
/// their entries.
pub(super) async fn insert_chunks<DB: Backend>(
    tx: &mut Transaction<'_, DB>,
    at: &ChunkPlacement,
    chunks: &[NewChunk],
    now: DateTime<Utc>,
) -> Result<()> {
    let rows: Vec<(Uuid, String, &NewChunk)> = chunks
        .iter()
        .map(|chunk| {
            // The hash of what is embedded (the prefix too): a vector is reused, kept or
            // verified only for exactly the text it was made from.
            let text_sha = hex::encode(sha2::Sha256::digest(chunk.embed_text().as_bytes()));
            (Uuid::new_v4(), text_sha, chunk)
        })
        .collect();
    for batch in rows.chunks(CHUNKS_PER_STATEMENT) {
        let mut insert = QueryBuilder::<DB>::new(
            "INSERT INTO chunks (id, world_id, run_id, source_id, book_number, chunk_number, char_start, \
             char_end, token_count, chunk_text, overlap_text, text_sha256, page, version, embed_prefix, \
             embed_prefix_tokens) ",
        );
        insert.push_values(batch, |mut row, (id, text_sha, chunk)| {
            row.push_bind(*id)
                .push_bind(at.world.0)
                .push_bind(at.run.0)
                .push_bind(at.source.0)
                .push_bind(at.book_number)
                .push_bind(wide(chunk.chunk_number))
                .push_bind(wide(chunk.char_start))
                .push_bind(wide(chunk.char_end))
                .push_bind(wide(chunk.token_count))
                .push_bind(&chunk.chunk_text)
                .push_bind(&chunk.overlap_text)
                .push_bind(text_sha)
                .push_bind(chunk.page.map(i64::from))
                .push_bind(i64::from(at.version))
                .push_bind(&chunk.embed_prefix)
                .push_bind(wide(chunk.embed_prefix_tokens));
        });
        insert.build().execute(&mut **tx).await?;
        let mut insert = QueryBuilder::<DB>::new(
            "INSERT INTO manifest_entries (chunk_id, world_id, run_id, source_id, job_id, point_id, state, \
             updated_at, book_number, chunk_number) ",
        );
        insert.push_values(batch, |mut row, (id, _, chunk)| {
            row.push_bind(*id)
                .push_bind(at.world.0)
                .push_bind(at.run.0)
                .push_bind(at.source.0)
                .push_bind(at.job.0)
                .push_bind(point_id(at.world, at.run, at.source, chunk.chunk_number))
                .push("'pending'")
                .push_bind(now)
                .push_bind(at.book_number)
                .push_bind(wide(chunk.chunk_number));
        });
        insert.build().execute(&mut **tx).await?;
    }
    // The source's size in the run, which `mode: auto` reads instead of grouping the chunks.
    if !chunks.is_empty() && !at.staged {
        let tokens: u64 = chunks.iter().map(|c| u64::from(c.token_count)).sum();
        sqlx::query(
            "INSERT INTO run_sources (run_id, source_id, world_id, book_number, chunks, tokens) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, source_id) DO UPDATE \
             SET chunks = run_sources.chunks + excluded.chunks, tokens = run_sources.tokens + excluded.tokens",
        )
        .bind(at.run.0)
        .bind(at.source.0)
        .bind(at.world.0)
        .bind(at.book_number)
        .bind(wide(chunks.len() as u64))
        .bind(wide(tokens))
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// `list_sources`'s statement: `$1` world, `$2` limit, `$3` offset.
pub const LIST_SOURCES: &str = concat!(
    "SELECT ",
    source_columns!(),
    sources_from!(),
    "WHERE s.world_id = $1 AND s.replaces IS NULL ORDER BY s.book_number LIMIT $2 OFFSET $3"
);

// A source's rows are found by the source and the world's active run (a run belongs to one
// world), never by the world's own column: with `world_id = $1` in the condition, PostgreSQL
// without statistics also read the world's index and intersected the two (every entry of a
// million-chunk world for each page of one source's chunks: 124 ms instead of 9).

/// `source_counts`'s statement: `$1` world, `$2` source.
pub const SOURCE_COUNTS: &str = "SELECT COUNT(*) AS chunks, \
     COUNT(*) FILTER (WHERE m.state = 'embedded') AS embedded, \
     COUNT(*) FILTER (WHERE m.state = 'pending') AS pending, \
     COUNT(*) FILTER (WHERE m.state = 'failed') AS failed \
     FROM manifest_entries m JOIN worlds w ON w.id = $1 AND w.active_run_id = m.run_id \
     WHERE m.source_id = $2";

/// `list_chunks`'s page: `$1` world, `$2` source, `$3` limit, `$4` offset.
pub const LIST_CHUNKS: &str = "SELECT c.id, c.world_id, c.run_id, c.source_id, c.book_number, c.chunk_number, c.char_start, \
     c.char_end, c.token_count, c.chunk_text, c.overlap_text, c.text_sha256, c.page, c.version, c.embed_prefix, \
     m.state, m.attempts, m.last_error_code, m.last_error_message \
     FROM chunks c JOIN worlds w ON w.id = $1 AND w.active_run_id = c.run_id \
     JOIN manifest_entries m ON m.chunk_id = c.id \
     WHERE c.source_id = $2 ORDER BY c.chunk_number LIMIT $3 OFFSET $4";

/// `list_chunks`'s total: `$1` world, `$2` source.
pub const LIST_CHUNKS_TOTAL: &str = "SELECT COUNT(*) FROM manifest_entries m JOIN worlds w ON w.id = $1 AND w.active_run_id = m.run_id \
     WHERE m.source_id = $2";

#[async_trait]
impl<DB: Backend> SourceStore for SqlStore<DB> {
    async fn add_source(&self, source: &NewSource, chunks: Vec<NewChunk>, job: JobId) -> Result<(Source, Job)> {
        let mut tx = self.begin().await?;
        // Hands out the next book number and returns it with the active run (locks the world
        // row on Postgres, so concurrent uploads to one world serialise here).
        let (book_number, run_id): (i64, Uuid) = sqlx::query_as(
            "UPDATE worlds SET next_book_number = next_book_number + 1 WHERE id = $1 \
             RETURNING next_book_number - 1 AS book_number, active_run_id",
        )
        .bind(source.world_id.0)
        .fetch_one(&mut *tx)
        .await?;
        let run = RunId(run_id);
        if run != source.run {
            // Cut with another run's profile (a re-ingest switched the world meanwhile).
            tx.rollback().await?;
            return Err(Error::RunChanged);
        }
        let sha256 = hex::encode(sha2::Sha256::digest(source.text.as_bytes()));
        let chars = source.text.chars().count() as u64;
        sqlx::query(
            "INSERT INTO sources (id, world_id, book_number, filename, content_type, text, sha256, chars, \
             title, url, metadata, created_at, source_key, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $12)",
        )
        .bind(source.id.0)
        .bind(source.world_id.0)
        .bind(book_number)
        .bind(&source.filename)
        .bind(&source.content_type)
        .bind(&source.text)
        .bind(&sha256)
        .bind(wide(chars))
        .bind(source.details.title.clone())
        .bind(source.details.url.clone())
        .bind(source.details.metadata.to_json())
        .bind(source.now)
        .bind(source.key.as_ref().map(|k| k.as_str().to_owned()))
        .execute(&mut *tx)
        .await?;
        let at = ChunkPlacement {
            world: source.world_id,
            run,
            source: source.id,
            book_number,
            job,
            version: 1,
            staged: false,
        };
        insert_chunks(&mut tx, &at, &chunks, source.now).await?;
        NewJobRow {
            id: job.0,
            world: source.world_id,
            kind: JobKind::Ingest,
            status: JobStatus::Running,
            run,
            total: chunks.len() as u64,
            created_at: source.now,
            started_at: Some(source.now),
            version_of: None,
        }
        .insert(&mut *tx)
        .await?;
        let source_row = found(select_source(&mut *tx, source.world_id, source.id).await?)?;
        let job_row = found(select_job(&mut *tx, job.0).await?)?;
        tx.commit().await?;
        Ok((source_row.try_into()?, job_row.into_job(Vec::new())?))
    }

    async fn get_source(&self, world: WorldId, id: SourceId) -> Result<Option<Source>> {
        select_source(&self.pool, world, id)
            .await?
            .map(TryInto::try_into)
            .transpose()
    }

    async fn list_sources(&self, world: WorldId, window: Window) -> Result<Vec<Source>> {
        let rows: Vec<SourceRow> = sqlx::query_as(LIST_SOURCES)
            .bind(world.0)
            .bind(wide(window.limit))
            .bind(wide(window.offset))
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn source_counts(&self, world: WorldId, id: SourceId) -> Result<SourceCounts> {
        let row: CountsRow = sqlx::query_as(SOURCE_COUNTS)
            .bind(world.0)
            .bind(id.0)
            .fetch_one(&self.pool)
            .await?;
        Ok(SourceCounts {
            chunks: narrow("manifest_entries", row.chunks)?,
            embedded: narrow("manifest_entries", row.embedded)?,
            pending: narrow("manifest_entries", row.pending)?,
            failed: narrow("manifest_entries", row.failed)?,
        })
    }

    async fn source_text(&self, world: WorldId, id: SourceId) -> Result<Option<String>> {
        Ok(
            sqlx::query_scalar("SELECT text FROM sources WHERE world_id = $1 AND id = $2 AND replaces IS NULL")
                .bind(world.0)
                .bind(id.0)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn list_chunks(&self, world: WorldId, id: SourceId, offset: u64, limit: u32) -> Result<ChunkPage> {
        // Chunks of one source in the world's active run, with their entries.
        let rows: Vec<ChunkStateRow> = sqlx::query_as(LIST_CHUNKS)
            .bind(world.0)
            .bind(id.0)
            .bind(i64::from(limit))
            .bind(wide(offset))
            .fetch_all(&self.pool)
            .await?;
        // One entry per chunk of the run: counted from the entries' source index alone.
        let total: i64 = sqlx::query_scalar(LIST_CHUNKS_TOTAL)
            .bind(world.0)
            .bind(id.0)
            .fetch_one(&self.pool)
            .await?;
        Ok(ChunkPage {
            chunks: rows.into_iter().map(TryInto::try_into).collect::<Result<_>>()?,
            total: narrow("chunks", total)?,
        })
    }

    async fn delete_source(
        &self,
        world: WorldId,
        id: SourceId,
        expect: Option<u32>,
        now: DateTime<Utc>,
    ) -> Result<Option<SourceDeletion>> {
        let mut tx = self.begin().await?;
        // The world's row first (see `requeue_entries`), then the entries, then jobs.
        if lock_world(&mut *tx, world).await?.is_none() {
            tx.rollback().await?;
            return Ok(None);
        }
        // The source (never a staged version's hidden row by its own id) and its staged version.
        let rows: Vec<(Uuid, Option<Uuid>, i64)> = sqlx::query_as(
            "SELECT id, replaces, version FROM sources WHERE world_id = $1 AND (id = $2 OR replaces = $2)",
        )
        .bind(world.0)
        .bind(id.0)
        .fetch_all(&mut *tx)
        .await?;
        let Some((_, _, version)) = rows
            .iter()
            .find(|(row, replaces, _)| *row == id.0 && replaces.is_none())
        else {
            tx.rollback().await?;
            return Ok(None);
        };
        let current: u32 = narrow("sources", *version)?;
        if expect.is_some_and(|expected| expected != current) {
            tx.rollback().await?;
            return Err(Error::VersionMismatch { current });
        }
        let staged = rows
            .iter()
            .find(|(_, replaces, _)| replaces.is_some())
            .map(|(row, _, _)| *row);
        // What each removed entry (in every run) meant to its job, read from the delete itself
        // so a worker's concurrent completion is counted once, on whichever side it landed. A
        // staged version's entries go too: its job, left with none, is cancelled below.
        let removed: Vec<(Option<Uuid>, String)> = sqlx::query_as(
            "DELETE FROM manifest_entries WHERE world_id = $1 AND (source_id = $2 OR source_id = $3) \
             RETURNING job_id, state",
        )
        .bind(world.0)
        .bind(id.0)
        .bind(staged)
        .fetch_all(&mut *tx)
        .await?;
        let mut chunks = 0;
        // Only the constant condition is put into the text.
        let sql = format!("DELETE FROM chunks WHERE {OF_SOURCE} IN ($2, $3)");
        for run in world_runs(&mut tx, world).await? {
            chunks += sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .bind(run)
                .bind(id.0)
                .bind(staged)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        sqlx::query("DELETE FROM sources WHERE world_id = $1 AND (id = $2 OR replaces = $2)")
            .bind(world.0)
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        // Pending entries removed per job; a sorted map so concurrent deletes lock job rows in
        // the same order.
        let mut jobs: BTreeMap<Uuid, u64> = BTreeMap::new();
        for (job, state) in removed {
            if let Some(job) = job {
                *jobs.entry(job).or_default() += u64::from(state == "pending");
            }
        }
        let mut finished_jobs = Vec::new();
        for (job, pending) in jobs {
            if pending > 0 && drop_job_pending(&mut *tx, job, pending).await? > 0 {
                // Before any status event the job gets below, so a stream shows why the job
                // ended before it ends.
                let event = JobEventData::SourceDeleted {
                    source: id,
                    dropped: pending,
                };
                insert_event(&mut *tx, job, event.kind(), &event.to_json(), now).await?;
            }
            // Ends an unfinished job that has no entry left at all (its whole subject was
            // deleted). Not for re-ingests: one ends only through `finish_reingest`, which
            // switches the world or retires its run (a re-ingest whose sources were all deleted
            // switches to an empty run).
            let cancelled: Option<Uuid> = sqlx::query_scalar(
                "UPDATE jobs SET status = 'cancelled', finished_at = $2 \
                 WHERE id = $1 AND kind <> 'reingest' AND status IN ('queued', 'running', 'paused') \
                 AND NOT EXISTS (SELECT 1 FROM manifest_entries WHERE job_id = $1) RETURNING id",
            )
            .bind(job)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            if cancelled.is_some() {
                finished_jobs.push((JobId(job), JobStatus::Cancelled));
                continue;
            }
            if finish_if_done(&mut *tx, job, now).await? {
                let status = found(job_status_text(&mut *tx, job).await?)?;
                let status = status.parse().map_err(|reason| corrupt("jobs", reason))?;
                finished_jobs.push((JobId(job), status));
            }
        }
        tx.commit().await?;
        Ok(Some(SourceDeletion {
            chunks,
            finished_jobs,
            staged: staged.map(SourceId),
        }))
    }
    async fn source_by_key(&self, world: WorldId, key: &SourceKey) -> Result<Option<Source>> {
        const BY_KEY: &str = concat!(
            "SELECT ",
            source_columns!(),
            sources_from!(),
            "WHERE s.world_id = $1 AND s.source_key = $2 AND s.replaces IS NULL"
        );
        let row: Option<SourceRow> = sqlx::query_as(BY_KEY)
            .bind(world.0)
            .bind(key.as_str())
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn stage_version(&self, stage: &StageVersion, chunks: Vec<NewChunk>, job: JobId) -> Result<Staging> {
        let new = &stage.new;
        let world = new.world_id;
        let mut tx = self.begin().await?;
        // The world's row first (as every writer of these rows), with a book number for the
        // staged row: `(world_id, book_number)` is unique, and numbers are never reused.
        let Some((book_number, run_id)): Option<(i64, Uuid)> = sqlx::query_as(
            "UPDATE worlds SET next_book_number = next_book_number + 1 WHERE id = $1 \
             RETURNING next_book_number - 1 AS book_number, active_run_id",
        )
        .bind(world.0)
        .fetch_optional(&mut *tx)
        .await?
        else {
            tx.rollback().await?;
            return Ok(Staging::Missing);
        };
        let run = RunId(run_id);
        if run != new.run {
            tx.rollback().await?;
            return Err(Error::RunChanged);
        }
        let current: Option<(i64, Option<Uuid>)> =
            sqlx::query_as("SELECT version, replaces FROM sources WHERE world_id = $1 AND id = $2")
                .bind(world.0)
                .bind(stage.source.0)
                .fetch_optional(&mut *tx)
                .await?;
        let current: u32 = match current {
            Some((version, None)) => narrow("sources", version)?,
            _ => {
                tx.rollback().await?;
                return Ok(Staging::Missing);
            }
        };
        if stage.expect.is_some_and(|expected| expected != current) {
            tx.rollback().await?;
            return Ok(Staging::VersionMismatch { current });
        }
        let building: Option<Uuid> =
            sqlx::query_scalar("SELECT id FROM runs WHERE world_id = $1 AND status = 'building'")
                .bind(world.0)
                .fetch_optional(&mut *tx)
                .await?;
        if building.is_some() {
            tx.rollback().await?;
            return Ok(Staging::Reingesting);
        }
        // A staged version not switched yet is superseded: its job cancelled, its rows gone.
        let older: Option<(Uuid, Option<Uuid>)> =
            sqlx::query_as("SELECT id, staged_job FROM sources WHERE replaces = $1")
                .bind(stage.source.0)
                .fetch_optional(&mut *tx)
                .await?;
        let superseded = match older {
            Some((staged, older_job)) => {
                delete_staged_rows(&mut tx, world, staged).await?;
                if let Some(older_job) = older_job {
                    let event = JobEventData::Superseded {
                        source: stage.source,
                        by: job,
                    };
                    insert_event(&mut *tx, older_job, event.kind(), &event.to_json(), new.now).await?;
                    sqlx::query(
                        "UPDATE jobs SET status = 'cancelled', finished_at = $2 \
                         WHERE id = $1 AND status IN ('queued', 'running', 'paused', 'failed')",
                    )
                    .bind(older_job)
                    .bind(new.now)
                    .execute(&mut *tx)
                    .await?;
                }
                Some(SourceId(staged))
            }
            None => None,
        };
        let version = current + 1;
        let sha256 = hex::encode(sha2::Sha256::digest(new.text.as_bytes()));
        let chars = new.text.chars().count() as u64;
        sqlx::query(
            "INSERT INTO sources (id, world_id, book_number, filename, content_type, text, sha256, chars, \
             title, url, metadata, created_at, updated_at, version, replaces, staged_job) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13, $14, $15)",
        )
        .bind(new.id.0)
        .bind(world.0)
        .bind(book_number)
        .bind(&new.filename)
        .bind(&new.content_type)
        .bind(&new.text)
        .bind(&sha256)
        .bind(wide(chars))
        .bind(new.details.title.clone())
        .bind(new.details.url.clone())
        .bind(new.details.metadata.to_json())
        .bind(new.now)
        .bind(i64::from(version))
        .bind(stage.source.0)
        .bind(job.0)
        .execute(&mut *tx)
        .await?;
        let at = ChunkPlacement {
            world,
            run,
            source: new.id,
            book_number,
            job,
            version,
            staged: true,
        };
        insert_chunks(&mut tx, &at, &chunks, new.now).await?;
        NewJobRow {
            id: job.0,
            world,
            kind: JobKind::Replace,
            status: JobStatus::Running,
            run,
            total: chunks.len() as u64,
            created_at: new.now,
            started_at: Some(new.now),
            version_of: Some(stage.source),
        }
        .insert(&mut *tx)
        .await?;
        let source_row = found(select_source(&mut *tx, world, stage.source).await?)?;
        let job_row = found(select_job(&mut *tx, job.0).await?)?;
        tx.commit().await?;
        Ok(Staging::Staged {
            source: Box::new(source_row.try_into()?),
            job: Box::new(job_row.into_job(Vec::new())?),
            superseded,
        })
    }

    async fn staged_version(&self, job: JobId) -> Result<Option<StagedVersion>> {
        let row: Option<(Uuid, Uuid, Uuid, Uuid, String, i64, String)> = sqlx::query_as(
            "SELECT p.id, p.replaces, p.world_id, j.run_id, r.collection, s.book_number, j.status \
             FROM sources p JOIN jobs j ON j.id = p.staged_job JOIN runs r ON r.id = j.run_id \
             JOIN sources s ON s.id = p.replaces WHERE p.staged_job = $1",
        )
        .bind(job.0)
        .fetch_optional(&self.pool)
        .await?;
        let Some((staged, source, world, run, collection, book_number, status)) = row else {
            return Ok(None);
        };
        if status != "running" {
            return Ok(None);
        }
        let entries: Vec<(Uuid, String)> =
            sqlx::query_as("SELECT point_id, state FROM manifest_entries WHERE source_id = $1 AND run_id = $2")
                .bind(staged)
                .bind(run)
                .fetch_all(&self.pool)
                .await?;
        let pending = entries.iter().filter(|(_, state)| state == "pending").count() as u64;
        let failed = entries.iter().filter(|(_, state)| state == "failed").count() as u64;
        Ok(Some(StagedVersion {
            world: WorldId(world),
            run: RunId(run),
            collection,
            source: SourceId(source),
            staged: SourceId(staged),
            book_number: narrow("sources", book_number)?,
            points: entries.into_iter().map(|(point, _)| point).collect(),
            pending,
            failed,
        }))
    }

    async fn switch_version(&self, job: JobId, now: DateTime<Utc>) -> Result<Option<Switched>> {
        let mut tx = self.begin().await?;
        // World, then job (the order every writer takes).
        let world: Option<Uuid> = sqlx::query_scalar("SELECT world_id FROM jobs WHERE id = $1")
            .bind(job.0)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(world) = world.map(WorldId) else {
            tx.rollback().await?;
            return Ok(None);
        };
        if lock_world(&mut *tx, world).await?.is_none()
            || lock_job_status(&mut *tx, job.0).await?.as_deref() != Some("running")
        {
            tx.rollback().await?;
            return Ok(None);
        }
        let staged: Option<(Uuid, Uuid, i64)> =
            sqlx::query_as("SELECT id, replaces, version FROM sources WHERE staged_job = $1 AND replaces IS NOT NULL")
                .bind(job.0)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((staged, source, version)) = staged else {
            tx.rollback().await?;
            return Ok(None);
        };
        let unfinished: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM manifest_open WHERE source_id = $1")
            .bind(staged)
            .fetch_one(&mut *tx)
            .await?;
        if unfinished > 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        let book_number: i64 = sqlx::query_scalar("SELECT book_number FROM sources WHERE id = $1")
            .bind(source)
            .fetch_one(&mut *tx)
            .await?;
        // The old version out: its entries (their points are deleted after the commit), chunks,
        // parents and size.
        let old_points: Vec<Uuid> = sqlx::query_scalar(
            "DELETE FROM manifest_entries WHERE world_id = $1 AND source_id = $2 RETURNING point_id",
        )
        .bind(world.0)
        .bind(source)
        .fetch_all(&mut *tx)
        .await?;
        let runs = world_runs(&mut tx, world).await?;
        delete_run_rows(&mut tx, &runs, source).await?;
        // The staged version in: its rows become the source's.
        sqlx::query(
            "UPDATE manifest_entries SET source_id = $2, book_number = $3 WHERE world_id = $1 AND source_id = $4",
        )
        .bind(world.0)
        .bind(source)
        .bind(book_number)
        .bind(staged)
        .execute(&mut *tx)
        .await?;
        // Only the constant condition is put into the texts.
        let chunks = format!("UPDATE chunks SET source_id = $2, book_number = $3 WHERE {OF_SOURCE} = $4");
        let parents = format!("UPDATE parents SET source_id = $2 WHERE {OF_SOURCE} = $3");
        let sizes = format!(
            "INSERT INTO run_sources (run_id, source_id, world_id, book_number, chunks, tokens) \
             SELECT run_id, source_id, world_id, MIN(book_number), COUNT(*), COALESCE(SUM(token_count), 0) \
             FROM chunks WHERE {OF_SOURCE} = $2 GROUP BY run_id, source_id, world_id"
        );
        for run in &runs {
            sqlx::query(sqlx::AssertSqlSafe(chunks.clone()))
                .bind(*run)
                .bind(source)
                .bind(book_number)
                .bind(staged)
                .execute(&mut *tx)
                .await?;
            sqlx::query(sqlx::AssertSqlSafe(parents.clone()))
                .bind(*run)
                .bind(source)
                .bind(staged)
                .execute(&mut *tx)
                .await?;
            sqlx::query(sqlx::AssertSqlSafe(sizes.clone()))
                .bind(*run)
                .bind(source)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "UPDATE sources SET (filename, content_type, text, sha256, chars, title, url, metadata, version) = \
             (SELECT filename, content_type, text, sha256, chars, title, url, metadata, version \
             FROM sources WHERE id = $2), updated_at = $3 WHERE id = $1",
        )
        .bind(source)
        .bind(staged)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM sources WHERE id = $1")
            .bind(staged)
            .execute(&mut *tx)
            .await?;
        let (total, reused): (i64, i64) = sqlx::query_as("SELECT total, reused FROM jobs WHERE id = $1")
            .bind(job.0)
            .fetch_one(&mut *tx)
            .await?;
        let version: u32 = narrow("sources", version)?;
        let event = JobEventData::Replaced {
            source: SourceId(source),
            version,
            added: narrow("jobs", total)?,
            reused: narrow("jobs", reused)?,
            removed: old_points.len() as u64,
        };
        insert_event(&mut *tx, job.0, event.kind(), &event.to_json(), now).await?;
        sqlx::query("UPDATE jobs SET status = 'completed', finished_at = $2 WHERE id = $1")
            .bind(job.0)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(Switched {
            world,
            source: SourceId(source),
            version,
            old_points,
        }))
    }

    async fn discard_version(&self, job: JobId) -> Result<Option<SourceId>> {
        let mut tx = self.begin().await?;
        let staged: Option<(Uuid, Uuid)> = sqlx::query_as(
            "SELECT s.id, s.world_id FROM sources s JOIN jobs j ON j.id = s.staged_job \
             WHERE s.staged_job = $1 AND s.replaces IS NOT NULL AND j.status = 'cancelled'",
        )
        .bind(job.0)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((staged, world)) = staged else {
            tx.rollback().await?;
            return Ok(None);
        };
        if lock_world(&mut *tx, WorldId(world)).await?.is_none() {
            tx.rollback().await?;
            return Ok(None);
        }
        delete_staged_rows(&mut tx, WorldId(world), staged).await?;
        tx.commit().await?;
        Ok(Some(SourceId(staged)))
    }
}

/// The rows of one source in one run, in the tables keyed by run and source (`chunks`,
/// `parents`, `run_sources`): `$1` the run, then the source's condition; run once for each of the
/// world's runs ([`world_runs`]), each a seek in the `(run_id, source_id, …)` key. By `world_id`
/// instead, both databases walk every chunk of the world (deleting a source's thousand chunks
/// from a world of a million on SQLite: 0.20 s against 0.07 warm, up to 2.0 s cold), and a
/// condition on the runs by subquery leaves PostgreSQL's plan to its statistics.
pub const OF_SOURCE: &str = "run_id = $1 AND source_id";

/// Every run of `world`, whatever its status: what [`OF_SOURCE`] statements are run for.
async fn world_runs<DB: Backend>(tx: &mut Transaction<'_, DB>, world: WorldId) -> Result<Vec<Uuid>> {
    Ok(sqlx::query_scalar("SELECT id FROM runs WHERE world_id = $1")
        .bind(world.0)
        .fetch_all(&mut **tx)
        .await?)
}

/// Deletes `source`'s chunks, parents and run sizes in each of `runs`.
async fn delete_run_rows<DB: Backend>(tx: &mut Transaction<'_, DB>, runs: &[Uuid], source: Uuid) -> Result<()> {
    for table in ["chunks", "parents", "run_sources"] {
        // Only the constant table names above and the constant condition are put into the text.
        let sql = format!("DELETE FROM {table} WHERE {OF_SOURCE} = $2");
        for run in runs {
            sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .bind(*run)
                .bind(source)
                .execute(&mut **tx)
                .await?;
        }
    }
    Ok(())
}

/// Deletes a staged version's rows: entries, chunks, parents and its hidden source row.
async fn delete_staged_rows<DB: Backend>(tx: &mut Transaction<'_, DB>, world: WorldId, staged: Uuid) -> Result<()> {
    sqlx::query("DELETE FROM manifest_entries WHERE world_id = $1 AND source_id = $2")
        .bind(world.0)
        .bind(staged)
        .execute(&mut **tx)
        .await?;
    let runs = world_runs(tx, world).await?;
    delete_run_rows(tx, &runs, staged).await?;
    sqlx::query("DELETE FROM sources WHERE id = $1 AND replaces IS NOT NULL")
        .bind(staged)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Source `id` of world `world`.
async fn select_source<'e, DB: Backend>(
    db: impl sqlx::Executor<'e, Database = DB>,
    world: WorldId,
    id: SourceId,
) -> Result<Option<SourceRow>> {
    const SELECT_SOURCE: &str = concat!(
        "SELECT ",
        source_columns!(),
        sources_from!(),
        "WHERE s.world_id = $1 AND s.id = $2 AND s.replaces IS NULL"
    );
    Ok(sqlx::query_as(SELECT_SOURCE)
        .bind(world.0)
        .bind(id.0)
        .fetch_optional(db)
        .await?)
}

/// Takes `pending` entries that no longer exist out of unfinished job `job`'s `total`, so that
/// its `pending` (total − embedded − failed) counts only work that still exists. Returns how
/// many rows changed (0 when the job has ended).
async fn drop_job_pending<'e, DB: Backend>(
    db: impl sqlx::Executor<'e, Database = DB>,
    job: Uuid,
    pending: u64,
) -> Result<u64> {
    let done = sqlx::query(
        "UPDATE jobs SET total = CASE WHEN total > $2 THEN total - $2 ELSE 0 END \
         WHERE id = $1 AND status IN ('queued', 'running', 'paused')",
    )
    .bind(job)
    .bind(wide(pending))
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, SubsecRound, Utc};
    use sha2::Digest as _;

    use super::CHUNKS_PER_STATEMENT;
    use crate::domain::{
        ChunkingProfile, EmbeddingProfile, JobId, ManifestState, NewChunk, NewSource, NewWorld, ProviderKind, RunId,
        SourceId, WorldId, point_id,
    };
    use crate::store::{NewRun, SourceChunks, Store};

    /// Two full statements and one more chunk: every batch boundary is crossed.
    const N: usize = 2 * CHUNKS_PER_STATEMENT + 1;

    fn new_chunks() -> Vec<NewChunk> {
        (0..N as u32)
            .map(|i| NewChunk {
                chunk_number: i,
                char_start: u64::from(i) * 10,
                char_end: u64::from(i) * 10 + 9,
                token_count: i % 7 + 1,
                chunk_text: format!("chunk {i:04}."),
                overlap_text: if i == 0 { String::new() } else { format!("tail {i}") },
                page: (i % 2 == 0).then_some(i / 2 + 1),
                embed_prefix: if i % 3 == 0 {
                    format!("Doc\nPart {i}\n\n")
                } else {
                    String::new()
                },
                embed_prefix_tokens: if i % 3 == 0 { 4 } else { 0 },
            })
            .collect()
    }

    /// Every chunk of `source` in `run` is stored once, with its values, and has one pending
    /// entry with its point id.
    async fn assert_stored(store: &dyn Store, world: WorldId, run: RunId, source: SourceId, now: DateTime<Utc>) {
        let chunks = new_chunks();
        let mut entries = store.manifest_entries(world, run, now).await.unwrap();
        entries.sort_by_key(|e| e.chunk_number);
        assert_eq!(entries.len(), N);
        for (entry, chunk) in entries.iter().zip(&chunks) {
            assert_eq!(entry.chunk_number, chunk.chunk_number);
            assert_eq!(entry.point_id, point_id(world, run, source, chunk.chunk_number));
            assert_eq!(entry.source_id, source);
            assert_eq!(entry.state, ManifestState::Pending);
            assert_eq!(
                entry.text_sha256,
                hex::encode(sha2::Sha256::digest(chunk.embed_text().as_bytes())),
                "the hash is of the text embedded, prefix and all"
            );
            assert!(!entry.leased);
        }
        let mut ids: Vec<_> = entries.iter().map(|e| e.chunk_id).collect();
        ids.sort_by_key(|id| id.0);
        ids.dedup();
        assert_eq!(ids.len(), N, "a chunk id each");
    }

    async fn chunks_are_inserted_in_batches(store: &dyn Store) {
        let now = Utc::now().trunc_subsecs(6);
        let world = NewWorld {
            id: WorldId::new(),
            name: "batches".into(),
            embedding: EmbeddingProfile {
                provider: ProviderKind::Local,
                model: "all-MiniLM-L6-v2".into(),
                dimensions: 384,
            },
            chunking: ChunkingProfile {
                max_tokens: 192,
                overlap_tokens: 48,
                parent_max_tokens: 768,
                context_prefix: false,
            },
            hybrid: false,
            run: RunId::new(),
            now,
        };
        store.create_world(world.clone()).await.unwrap();
        let source = NewSource {
            key: None,
            id: SourceId::new(),
            world_id: world.id,
            run: world.run,
            filename: "book.md".into(),
            content_type: "text/markdown".into(),
            text: "text".into(),
            details: Default::default(),
            now,
        };
        let (stored, job) = store.add_source(&source, new_chunks(), JobId::new()).await.unwrap();
        assert_eq!(job.counts.total, N as u64);
        assert_stored(store, world.id, world.run, source.id, now).await;
        let page = store.list_chunks(world.id, source.id, 0, 1000).await.unwrap();
        assert_eq!(page.total, N as u64);
        for (state, chunk) in page.chunks.iter().zip(new_chunks()) {
            let c = &state.chunk;
            assert_eq!((c.world_id, c.run_id, c.source_id), (world.id, world.run, source.id));
            assert_eq!(
                (c.book_number, c.chunk_number),
                (stored.book_number, chunk.chunk_number)
            );
            assert_eq!(
                (c.char_start, c.char_end, c.token_count),
                (chunk.char_start, chunk.char_end, chunk.token_count)
            );
            assert_eq!(
                (&c.chunk_text, &c.overlap_text, c.page),
                (&chunk.chunk_text, &chunk.overlap_text, chunk.page)
            );
        }

        let run = NewRun {
            id: RunId::new(),
            world: world.id,
            embedding: world.embedding.clone(),
            chunking: world.chunking,
        };
        let reingest = store
            .begin_reingest(run.clone(), JobId::new(), None, now)
            .await
            .unwrap();
        let source_chunks = SourceChunks {
            source: source.id,
            book_number: stored.book_number,
            chunks: new_chunks(),
        };
        let added = store
            .add_run_chunks(world.id, run.id, reingest.id, source_chunks, now)
            .await
            .unwrap();
        assert_eq!(added, N as u64);
        assert_eq!(
            store.get_job(reingest.id).await.unwrap().unwrap().counts.total,
            N as u64
        );
        assert_stored(store, world.id, run.id, source.id, now).await;
    }

    #[tokio::test]
    async fn sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("quarry.db").display());
        let store = crate::store::connect(&url).await.unwrap();
        chunks_are_inserted_in_batches(store.as_ref()).await;
        store.close().await;
    }

    /// On a fresh database of the server at `QUARRY_TEST_POSTGRES_URL`, as the conformance
    /// suite does; skipped without one, unless `QUARRY_TEST_REQUIRE_POSTGRES=1`.
    #[tokio::test]
    async fn postgres() {
        use sqlx::Connection as _;
        let required = std::env::var("QUARRY_TEST_REQUIRE_POSTGRES").is_ok_and(|v| v == "1");
        let Some(admin_url) = std::env::var("QUARRY_TEST_POSTGRES_URL").ok().filter(|u| !u.is_empty()) else {
            assert!(!required, "QUARRY_TEST_POSTGRES_URL is not set");
            return;
        };
        let mut admin = sqlx::PgConnection::connect(&admin_url).await.unwrap();
        let name = format!("quarry_test_{}", uuid::Uuid::new_v4().simple());
        let create = sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"));
        sqlx::raw_sql(create).execute(&mut admin).await.unwrap();
        let after_scheme = admin_url.find("://").map_or(0, |i| i + 3);
        let base = match admin_url[after_scheme..].find('/') {
            Some(i) => &admin_url[..after_scheme + i],
            None => admin_url.as_str(),
        };
        let store = crate::store::connect(&format!("{base}/{name}")).await.unwrap();
        chunks_are_inserted_in_batches(store.as_ref()).await;
        store.close().await;
        let drop = sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
        sqlx::raw_sql(drop).execute(&mut admin).await.unwrap();
    }
}
