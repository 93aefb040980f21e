//! [`RetrievalStore`] and [`ReuseStore`]: what retrieval reads (worlds, chunks by point or by
//! window) and requeues, and where an identical text already has a vector.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::backend::{Backend, RowsAffected as _, SqlStore, shown};
use super::jobs::{NewJobRow, add_job_total};
use super::rows::{ChunkOutlineRow, ChunkViewRow, HitRow, WorldCountRow, in_list, narrow, wide};
use super::runs::lock_run;
use super::worlds::{lock_world, world_columns};
use super::{Result, RetrievalStore, ReuseStore};
use crate::domain::{
    ChunkId, ChunkOutline, ChunkView, JobId, JobKind, JobStatus, RunId, SourceDetails, SourceId, SourceSize, World,
    WorldId,
};

/// Columns of a [`ChunkViewRow`]; `m` is the manifest entry, `c` the chunk, `s` the source.
/// With a literal, more columns after the source's.
macro_rules! select_chunk_view {
    () => {
        select_chunk_view!("")
    };
    ($more:literal) => {
        concat!(
            "SELECT c.id, c.world_id, c.run_id, c.source_id, c.book_number, c.chunk_number, c.char_start, \
             c.char_end, c.token_count, c.chunk_text, c.overlap_text, c.text_sha256, c.page, c.version, \
             c.embed_prefix, m.point_id, s.filename, s.replaces",
            $more,
            " FROM manifest_entries m JOIN chunks c ON c.id = m.chunk_id JOIN sources s ON s.id = c.source_id "
        )
    };
}

/// One window of [`window_union`]: `$1` run, `$k` source, chunks `$k+1..=$k+2`. No world in
/// the condition (the caller drops another world's rows; a run is one world's): with
/// `c.world_id` there, PostgreSQL without statistics (a fresh world) reads every chunk of the
/// world by `chunks_world_run` for each window instead of seeking the window's key.
pub const CHUNK_WINDOW: &str = concat!(
    select_chunk_view!(),
    "WHERE c.run_id = $1 AND c.source_id = $k AND c.chunk_number BETWEEN $k1 AND $k2"
);

/// [`CHUNK_WINDOW`]'s lookup for a [`crate::domain::ChunkOutline`]: no texts, no source; the
/// world, for the caller to check.
pub const OUTLINE_WINDOW: &str = "SELECT c.id, c.world_id, c.source_id, c.book_number, c.chunk_number, \
     c.char_start, c.char_end, c.token_count, c.text_sha256, c.page, c.version \
     FROM manifest_entries m JOIN chunks c ON c.id = m.chunk_id \
     WHERE c.run_id = $1 AND c.source_id = $k AND c.chunk_number BETWEEN $k1 AND $k2";

/// [`CHUNK_WINDOW`]'s lookup for the texts a planned context keeps: a chunk's key, hash and text,
/// from the chunk's row alone (its place came with its outline, checked against the hash). `$1`
/// the run, then as [`CHUNK_WINDOW`], whose note on the world holds here too.
pub const TEXT_WINDOW: &str = "SELECT c.id, c.text_sha256, c.chunk_text FROM chunks c \
     WHERE c.run_id = $1 AND c.source_id = $k AND c.chunk_number BETWEEN $k1 AND $k2";

/// [`CHUNK_WINDOW`] for `n` windows whose parameters start at `$first`, as one `UNION ALL`:
/// each branch is a lookup in the `(run_id, source_id, chunk_number)` index. (Windows joined
/// by `OR` instead are one lookup each for two, but SQLite, without statistics, walks the whole
/// world for eight: 36 ms against 0.2 on 100,000 chunks.) No `ORDER BY`: the caller sorts.
pub fn window_union(branch: &str, first: usize, n: usize) -> String {
    let branches: Vec<String> = (0..n)
        .map(|i| {
            let k = first + 3 * i;
            branch
                .replace("$k2", &format!("${}", k + 2))
                .replace("$k1", &format!("${}", k + 1))
                .replace("$k", &format!("${k}"))
        })
        .collect();
    branches.join(" UNION ALL ")
}

/// `find_reusable`'s statement, up to the world's condition: `$1` collection, (`$2` world,) then
/// the hashes; [`REUSABLE_TAIL`] and the hashes' list follow. Only runs served or being built: a
/// retired run's points are being deleted (or were, by a repair that left its rows).
///
/// The chunks are found by their text hash and each one's entry by its key, in a correlated
/// subquery neither database can turn into a join: as a join, SQLite (no statistics) walked every
/// entry of the world for each batch, and so did PostgreSQL while a fresh world had none yet
/// (1.7 s a batch at 600,000 chunks): loads slowed from about 1,800 chunks/s to 250.
pub const REUSABLE: &str = "SELECT c.text_sha256, (SELECT m.point_id FROM manifest_entries m \
     JOIN runs r ON r.id = m.run_id WHERE m.chunk_id = c.id AND m.state = 'embedded' \
     AND m.embedded_text_sha256 = c.text_sha256 AND r.collection = $1 AND r.status IN ('active', 'building')";
/// Closes [`REUSABLE`]'s subquery; the hashes' list follows. A chunk without a reusable point
/// comes back with a NULL point.
pub const REUSABLE_TAIL: &str = ") FROM chunks c WHERE c.text_sha256 IN ";

/// `world_for_retrieval`'s statement: `$1` world, `$2` how many embedded entries to count at most.
pub const WORLD_FOR_RETRIEVAL: &str = concat!(
    "SELECT ",
    world_columns!(),
    ", (SELECT COUNT(*) FROM (SELECT 1 FROM manifest_entries m WHERE m.world_id = $1 \
     AND m.run_id = (SELECT active_run_id FROM worlds WHERE id = $1) AND m.state = 'embedded' LIMIT $2) AS e) \
     AS embedded FROM worlds WHERE id = $1"
);

/// `run_for_retrieval`'s statement: `$1` world, `$2` how many embedded entries to count at most,
/// `$3` the run. The world's columns with the run's profile, collection and id in place of the
/// active run's, for a run served or being built.
pub const RUN_FOR_RETRIEVAL: &str = "SELECT w.id, w.name, r.provider, r.model, r.dimensions, r.max_tokens, \
     r.overlap_tokens, r.parent_max_tokens, r.context_prefix, w.hybrid, r.id AS active_run_id, r.collection, \
     w.created_at, w.updated_at, (SELECT COUNT(*) FROM (SELECT 1 FROM manifest_entries m WHERE m.world_id = $1 \
     AND m.run_id = $3 AND m.state = 'embedded' LIMIT $2) AS e) AS embedded \
     FROM worlds w JOIN runs r ON r.world_id = w.id WHERE w.id = $1 AND r.id = $3 AND r.status IN ('active', 'building')";

/// `chunks_by_points`'s statement; the point ids' list follows. Each table is read by a unique
/// index (the point's, then the chunk's and the source's keys), so both databases plan one row
/// per hit without statistics (see migration 0017).
pub const CHUNKS_BY_POINTS: &str = concat!(select_chunk_view!(), "WHERE m.point_id IN ");

/// `hits_by_points`'s statement: [`CHUNKS_BY_POINTS`] with each chunk's source's title, URL and
/// metadata, which retrieval shows on its hits (one statement where there were two).
pub const HITS_BY_POINTS: &str = concat!(
    select_chunk_view!(", s.title, s.url, s.metadata"),
    "WHERE m.point_id IN "
);

impl<DB: Backend> SqlStore<DB> {
    /// The rows `statement` (ending in `IN `) reads for `points`, each kept as `keep` says.
    /// Only the point index may serve it: with world and run in the condition too, SQLite
    /// (without statistics) walks every entry of the world instead, so `keep` drops the rows of
    /// other worlds and runs.
    async fn by_points<R, T>(
        &self,
        statement: &str,
        points: &[Uuid],
        keep: impl Fn(R) -> Result<Option<T>> + Send,
    ) -> Result<Vec<T>>
    where
        R: for<'r> sqlx::FromRow<'r, DB::Row> + Send + Unpin,
        T: Send,
    {
        let mut found = Vec::with_capacity(points.len());
        // Bounded parameter lists: SQLite caps the number of parameters per statement. Several
        // statements read one snapshot, so that an answer never holds hits from both sides of
        // a commit (a source's version switching in).
        let mut snapshot = match points.len() > 500 {
            true => Some(self.begin_snapshot().await?),
            false => None,
        };
        for batch in points.chunks(500) {
            // Only generated `$n` placeholders are added to the constant text.
            let sql = sqlx::AssertSqlSafe(shown::<DB>(&format!("{statement}{}", in_list(1, batch.len()))));
            let mut query = sqlx::query_as::<DB, R>(sql);
            for point in batch {
                query = query.bind(*point);
            }
            let rows = match snapshot.as_mut() {
                Some(tx) => query.fetch_all(&mut **tx).await?,
                None => query.fetch_all(&self.reads).await?,
            };
            for row in rows {
                found.extend(keep(row)?);
            }
        }
        if let Some(tx) = snapshot {
            tx.commit().await?;
        }
        Ok(found)
    }

    /// The rows `branch` (one window of [`window_union`], `$1` the run) reads for `windows`
    /// `(source, from, to)`, each kept as `keep` says, in no particular order. One statement per
    /// hundred windows: SQLite takes at most 500 branches in a compound select.
    pub(super) async fn by_windows<R, T>(
        &self,
        branch: &str,
        run: RunId,
        windows: &[(SourceId, u32, u32)],
        keep: impl Fn(R) -> Result<Option<T>> + Send,
    ) -> Result<Vec<T>>
    where
        R: for<'r> sqlx::FromRow<'r, DB::Row> + Send + Unpin,
        T: Send,
    {
        let mut found = Vec::new();
        for batch in windows.chunks(100) {
            // Only generated `$n` placeholders are put into the constant text.
            let sql = sqlx::AssertSqlSafe(shown::<DB>(&window_union(branch, 2, batch.len())));
            let mut query = sqlx::query_as::<DB, R>(sql).bind(run.0);
            for (source, from, to) in batch {
                query = query.bind(source.0).bind(wide(*from)).bind(wide(*to));
            }
            for row in query.fetch_all(&self.reads).await? {
                found.extend(keep(row)?);
            }
        }
        Ok(found)
    }
}

#[async_trait]
impl<DB: Backend> RetrievalStore for SqlStore<DB> {
    async fn world_for_retrieval(&self, id: WorldId, at_most: u64) -> Result<Option<(World, u64)>> {
        // The world and its active run's embedded entries counted up to `$2`, in one round trip:
        // retrieval needs both before anything else.
        let row: Option<WorldCountRow> = sqlx::query_as(WORLD_FOR_RETRIEVAL)
            .bind(id.0)
            .bind(wide(at_most))
            .fetch_optional(&self.reads)
            .await?;
        match row {
            None => Ok(None),
            Some(row) => Ok(Some((row.world.try_into()?, narrow("manifest_entries", row.embedded)?))),
        }
    }

    async fn run_for_retrieval(&self, id: WorldId, run: RunId, at_most: u64) -> Result<Option<(World, u64)>> {
        let row: Option<WorldCountRow> = sqlx::query_as(RUN_FOR_RETRIEVAL)
            .bind(id.0)
            .bind(wide(at_most))
            .bind(run.0)
            .fetch_optional(&self.reads)
            .await?;
        match row {
            None => Ok(None),
            Some(row) => Ok(Some((row.world.try_into()?, narrow("manifest_entries", row.embedded)?))),
        }
    }

    async fn chunks_by_points(&self, world: WorldId, run: RunId, points: &[Uuid]) -> Result<Vec<ChunkView>> {
        self.by_points(CHUNKS_BY_POINTS, points, |row: ChunkViewRow| {
            let view: ChunkView = row.try_into()?;
            Ok((view.chunk.world_id == world && view.chunk.run_id == run).then_some(view))
        })
        .await
    }

    async fn hits_by_points(
        &self,
        world: WorldId,
        run: RunId,
        points: &[Uuid],
    ) -> Result<Vec<(ChunkView, SourceDetails)>> {
        self.by_points(HITS_BY_POINTS, points, |row: HitRow| {
            let view: ChunkView = row.view.try_into()?;
            match view.chunk.world_id == world && view.chunk.run_id == run {
                true => Ok(Some((view, row.details.try_into()?))),
                false => Ok(None),
            }
        })
        .await
    }

    async fn chunk_windows(
        &self,
        world: WorldId,
        run: RunId,
        windows: &[(SourceId, u32, u32)],
    ) -> Result<Vec<ChunkView>> {
        let mut found = self
            .by_windows(CHUNK_WINDOW, run, windows, |row: ChunkViewRow| {
                let view: ChunkView = row.try_into()?;
                Ok((view.chunk.world_id == world).then_some(view))
            })
            .await?;
        // Windows of different batches may overlap.
        found.sort_by_key(|v| (v.chunk.source_id.0, v.chunk.chunk_number));
        found.dedup_by_key(|v| v.chunk.id);
        Ok(found)
    }

    async fn chunk_outlines(
        &self,
        world: WorldId,
        run: RunId,
        windows: &[(SourceId, u32, u32)],
    ) -> Result<Vec<ChunkOutline>> {
        let mut found = self
            .by_windows(OUTLINE_WINDOW, run, windows, |row: ChunkOutlineRow| {
                match row.world_id == world.0 {
                    true => Ok(Some(ChunkOutline::try_from(row)?)),
                    false => Ok(None),
                }
            })
            .await?;
        found.sort_by_key(|o| (o.source_id.0, o.chunk_number));
        found.dedup_by_key(|o| o.id);
        Ok(found)
    }

    async fn chunk_texts(
        &self,
        run: RunId,
        windows: &[(SourceId, u32, u32)],
    ) -> Result<Vec<(ChunkId, String, String)>> {
        self.by_windows(TEXT_WINDOW, run, windows, |(id, sha, text): (Uuid, String, String)| {
            Ok(Some((ChunkId(id), sha, text)))
        })
        .await
    }

    async fn source_sizes(&self, world: WorldId, run: RunId) -> Result<Vec<SourceSize>> {
        let rows: Vec<(Uuid, i64, i64, i64)> = sqlx::query_as(
            "SELECT source_id, book_number, chunks, tokens FROM run_sources WHERE world_id = $1 AND run_id = $2",
        )
        .bind(world.0)
        .bind(run.0)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(source, book, chunks, tokens)| {
                Ok(SourceSize {
                    source_id: SourceId(source),
                    book_number: narrow("chunks", book)?,
                    chunks: narrow("chunks", chunks)?,
                    tokens: narrow("chunks", tokens)?,
                })
            })
            .collect()
    }

    async fn requeue_entries(
        &self,
        world: WorldId,
        run: RunId,
        chunks: &[ChunkId],
        warning: &str,
        job: Option<JobId>,
        now: DateTime<Utc>,
    ) -> Result<Option<(JobId, u64)>> {
        if chunks.is_empty() {
            return Ok(None);
        }
        let mut tx = self.begin().await?;
        // World first, then run, then job (the order every writer of these rows takes): a
        // source delete, which takes the world and then the source's entries and their jobs,
        // never waits on this one while holding what it waits for.
        if lock_world(&mut *tx, world).await?.is_none() {
            tx.rollback().await?;
            return Ok(None);
        }
        // Only into a run that is served or being built: a retired run is on its way out, and
        // work queued for it would leave points nothing uses.
        let run_status = lock_run(&mut *tx, run).await?;
        if !matches!(run_status.as_deref(), Some("active" | "building")) {
            tx.rollback().await?;
            return Ok(None);
        }
        // The job the entries go to, its row locked (see the trait's documentation).
        let existing: Option<Uuid> = if run_status.as_deref() == Some("building") {
            // The re-ingest job building the run, unless it has ended.
            let reingest: Option<Uuid> = sqlx::query_scalar(
                "UPDATE jobs SET total = total WHERE world_id = $1 AND run_id = $2 AND kind = 'reingest' \
                 AND status IN ('queued', 'running', 'paused') RETURNING id",
            )
            .bind(world.0)
            .bind(run.0)
            .fetch_optional(&mut *tx)
            .await?;
            if reingest.is_none() {
                tx.rollback().await?;
                return Ok(None);
            }
            reingest
        } else {
            // The given job when it belongs to this world and run and has not ended.
            let given: Option<Uuid> = match job {
                Some(job) => {
                    sqlx::query_scalar(
                        "UPDATE jobs SET total = total WHERE id = $3 AND world_id = $1 AND run_id = $2 \
                         AND status IN ('queued', 'running', 'paused') RETURNING id",
                    )
                    .bind(world.0)
                    .bind(run.0)
                    .bind(job.0)
                    .fetch_optional(&mut *tx)
                    .await?
                }
                None => None,
            };
            match given {
                Some(job) => Some(job),
                // Else the newest running repair or re-ingest job of the world and run. The
                // status is checked again on the locked row (Postgres re-evaluates an
                // `UPDATE`'s condition on a row changed meanwhile), so a job that ended between
                // the choice and the lock is not taken.
                None => {
                    sqlx::query_scalar(
                        "UPDATE jobs SET total = total WHERE id = (SELECT id FROM jobs \
                         WHERE world_id = $1 AND run_id = $2 AND kind IN ('repair', 'reingest') AND status = 'running' \
                         ORDER BY created_at DESC, id LIMIT 1) AND status = 'running' RETURNING id",
                    )
                    .bind(world.0)
                    .bind(run.0)
                    .fetch_optional(&mut *tx)
                    .await?
                }
            }
        };
        let job = existing.unwrap_or_else(Uuid::new_v4);
        let (mut requeued, mut added, mut own_embedded, mut own_failed) = (0u64, 0u64, 0u64, 0u64);
        for chunk in chunks {
            // The entry's job and state, under the condition of the requeue below.
            let prior: Option<(Option<Uuid>, String)> = sqlx::query_as(
                "SELECT job_id, state FROM manifest_entries \
                 WHERE chunk_id = $1 AND world_id = $2 AND run_id = $3 AND state <> 'pending'",
            )
            .bind(chunk.0)
            .bind(world.0)
            .bind(run.0)
            .fetch_optional(&mut *tx)
            .await?;
            let Some((held_by, state)) = prior else { continue };
            // Back in the queue under `job`, spending nothing.
            let done = sqlx::query(
                "UPDATE manifest_entries SET state = 'pending', job_id = $4, attempts = 0, \
                 embedded_text_sha256 = NULL, warning_code = $5, last_error_code = NULL, last_error_message = NULL, \
                 lease_owner = NULL, lease_expires_at = NULL, updated_at = $6 \
                 WHERE chunk_id = $1 AND world_id = $2 AND run_id = $3 AND state <> 'pending'",
            )
            .bind(chunk.0)
            .bind(world.0)
            .bind(run.0)
            .bind(job)
            .bind(warning)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                continue;
            }
            requeued += 1;
            match (held_by == Some(job), state.as_str()) {
                (true, "embedded") => own_embedded += 1,
                (true, _) => own_failed += 1,
                (false, _) => added += 1,
            }
        }
        if requeued == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        if existing.is_some() {
            add_job_total(&mut *tx, job, added).await?;
            if own_embedded + own_failed > 0 {
                // Entries the job had counted as embedded or failed are pending again. `reused`
                // gives back as many as it can of the embedded ones (which of them were reused
                // is not recorded), so that it never exceeds `embedded`.
                sqlx::query(
                    "UPDATE jobs SET embedded = CASE WHEN embedded > $2 THEN embedded - $2 ELSE 0 END, \
                     reused = CASE WHEN reused > $2 THEN reused - $2 ELSE 0 END, \
                     failed = CASE WHEN failed > $3 THEN failed - $3 ELSE 0 END WHERE id = $1",
                )
                .bind(job)
                .bind(wide(own_embedded))
                .bind(wide(own_failed))
                .execute(&mut *tx)
                .await?;
            }
        } else {
            NewJobRow {
                id: job,
                world,
                kind: JobKind::Repair,
                status: JobStatus::Running,
                run,
                total: requeued,
                created_at: now,
                started_at: Some(now),
                version_of: None,
            }
            .insert(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(Some((JobId(job), requeued)))
    }
}

#[async_trait]
impl<DB: Backend> ReuseStore for SqlStore<DB> {
    async fn find_reusable(
        &self,
        collection: &str,
        world: Option<WorldId>,
        hashes: &[String],
    ) -> Result<Vec<(String, Uuid)>> {
        let mut found: Vec<(String, Uuid)> = Vec::new();
        let (in_world, first) = if world.is_some() {
            (" AND m.world_id = $2", 3)
        } else {
            ("", 2)
        };
        for batch in hashes.chunks(500) {
            // Only generated `$n` placeholders are added to the constant text.
            let sql = sqlx::AssertSqlSafe(format!(
                "{REUSABLE}{in_world}{REUSABLE_TAIL}{}",
                in_list(first, batch.len())
            ));
            let mut query = sqlx::query_as::<DB, (String, Option<Uuid>)>(sql).bind(collection);
            if let Some(world) = world {
                query = query.bind(world.0);
            }
            for hash in batch {
                query = query.bind(hash);
            }
            for (hash, point) in query.fetch_all(&self.pool).await? {
                if let Some(point) = point
                    && !found.iter().any(|(h, _)| *h == hash)
                {
                    found.push((hash, point));
                }
            }
        }
        Ok(found)
    }
}
