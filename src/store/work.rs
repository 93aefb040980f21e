//! [`WorkStore`]: the embedding queue, manifest entries leased to workers.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::rows::{ClaimedRow, in_list, wide};
use super::{Result, WorkStore, vectors};
use crate::domain::{ChunkId, EmbeddedVector, JobId, RunId, WorkItem};
use uuid::Uuid;

/// Leases entries of the running job claimed least recently. `$1` owner, `$2` limit, `$3` lease
/// end, `$4` now; returns the claimed entries' ids. SQLite's form (PostgreSQL's, where
/// [`Backend::OPEN_TABLE`], is [`CLAIM_OPEN`]): it reads the queue off the entries' own index,
/// and runs as one statement under SQLite's write lock, which keeps concurrent claimers apart.
pub const CLAIM: &str = "UPDATE manifest_entries SET lease_owner = $1, lease_expires_at = $3, updated_at = $4 \
     WHERE chunk_id IN (SELECT m.chunk_id FROM manifest_entries m \
     WHERE m.job_id = (SELECT j.id FROM jobs j WHERE j.status = 'running' AND EXISTS (\
     SELECT 1 FROM manifest_entries p WHERE p.job_id = j.id AND p.state = 'pending' \
     AND (p.lease_expires_at IS NULL OR p.lease_expires_at < $4)) \
     ORDER BY j.claimed_at NULLS FIRST, j.created_at, j.id LIMIT 1) \
     AND m.state = 'pending' AND (m.lease_expires_at IS NULL OR m.lease_expires_at < $4) \
     ORDER BY m.book_number, m.chunk_number LIMIT $2) RETURNING chunk_id";

/// [`CLAIM`] on PostgreSQL, whole. The queue is read from `manifest_open` (the entries still to
/// do, by job in reading order) and the lease from the entry, so that neither a claim nor a mark
/// changes an indexed column of the entry (migration 0028). `FOR UPDATE OF m SKIP LOCKED` locks
/// the chosen entries, skipping those another claimer holds, so concurrent claimers take disjoint
/// entries; the entry's `state` is tested as well because PostgreSQL re-reads a locked row that
/// changed meanwhile by its own conditions alone. Whether a job has anything to claim is a scalar
/// subquery with `LIMIT 1`, not `EXISTS`: PostgreSQL turns an `EXISTS` into a join it may plan
/// as a hash join, and once autovacuum had analyzed the tables it did, reading every entry of
/// the store for each claim (28 ms at 100,000 chunks) instead of the first of one job's queue.
pub const CLAIM_OPEN: &str = "UPDATE manifest_entries SET lease_owner = $1, lease_expires_at = $3, updated_at = $4 \
     WHERE chunk_id IN (SELECT m.chunk_id FROM manifest_open o JOIN manifest_entries m ON m.chunk_id = o.chunk_id \
     WHERE o.job_id = (SELECT j.id FROM jobs j WHERE j.status = 'running' AND (\
     SELECT 1 FROM manifest_open p JOIN manifest_entries q ON q.chunk_id = p.chunk_id \
     WHERE p.job_id = j.id AND p.state = 'pending' AND (q.lease_expires_at IS NULL OR q.lease_expires_at < $4) \
     LIMIT 1) IS NOT NULL ORDER BY j.claimed_at NULLS FIRST, j.created_at, j.id LIMIT 1) \
     AND o.state = 'pending' AND m.state = 'pending' AND (m.lease_expires_at IS NULL OR m.lease_expires_at < $4) \
     ORDER BY o.book_number, o.chunk_number LIMIT $2 FOR UPDATE OF m SKIP LOCKED) RETURNING chunk_id";

/// What a claim leased, read back by the ids its `RETURNING` gave (the list follows, `$1…`),
/// with each entry's lease holder and state, which the caller checks. By key alone, with no
/// condition another index could serve: every claim and mark leaves a dead version of the entry
/// until PostgreSQL vacuums, and the lease owner's index points at all of them (by 750,000
/// chunks of one load without autovacuum, reading a worker's claim back by its lease stepped
/// over 95,000 dead versions: 190 ms a claim, and the load slowed from 1,700 chunks/s to 750).
/// Sorted into reading order by the caller.
pub const CLAIM_READ: &str = "SELECT m.chunk_id, m.point_id, m.job_id, m.run_id, m.world_id, m.source_id, c.book_number, \
     c.chunk_number, c.token_count + c.embed_prefix_tokens AS token_count, \
     c.embed_prefix || c.chunk_text AS chunk_text, c.text_sha256, m.attempts, \
     r.provider, r.model, r.dimensions, r.collection, w.hybrid, m.lease_owner, m.state, \
     (s.replaces IS NOT NULL) AS staged \
     FROM manifest_entries m JOIN chunks c ON c.id = m.chunk_id JOIN runs r ON r.id = m.run_id \
     JOIN worlds w ON w.id = m.world_id JOIN sources s ON s.id = m.source_id WHERE m.chunk_id IN ";

/// `complete_work`'s mark of a batch, in one statement: `$1` owner, `$2` now, `$3` job (still
/// running), `$4` its run; then the `CASE`'s `WHEN` and `THEN` (each chunk's id, and the hash of
/// the text its vector was made from), and [`MARK_TAIL`] with the list of ids (built by
/// [`complete_mark`]). Changes no indexed column of the entry (see [`CLAIM`]).
pub const COMPLETE_MARK: &str = "UPDATE manifest_entries SET state = 'embedded', lease_owner = NULL, \
     lease_expires_at = NULL, last_error_code = NULL, last_error_message = NULL, updated_at = $2, \
     embedded_text_sha256 = CASE chunk_id ";
/// Closes [`COMPLETE_MARK`]'s `CASE`; the list of chunk ids follows, then `RETURNING chunk_id`.
pub const MARK_TAIL: &str = "END WHERE lease_owner = $1 AND state = 'pending' \
     AND EXISTS (SELECT 1 FROM jobs WHERE id = $3 AND status = 'running' AND run_id = $4) AND chunk_id IN ";

/// The most entries one mark statement names (two parameters each, within SQLite's limit).
const MARK_BATCH: usize = 500;

/// The statement marking `n` entries: [`COMPLETE_MARK`], the `CASE` and the list, with
/// placeholders from `$5`.
pub fn complete_mark(n: usize) -> String {
    let mut sql = String::from(COMPLETE_MARK);
    for i in 0..n {
        let id = 5 + 2 * i;
        sql.push_str(&format!("WHEN ${id} THEN ${} ", id + 1));
    }
    sql.push_str(MARK_TAIL);
    sql.push_str(&in_list(5 + 2 * n, n));
    sql.push_str(" RETURNING chunk_id");
    sql
}

#[async_trait]
impl<DB: Backend> WorkStore for SqlStore<DB> {
    async fn claim_work(
        &self,
        owner: &str,
        limit: u32,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<WorkItem>> {
        let claim = if DB::OPEN_TABLE { CLAIM_OPEN } else { CLAIM };
        let claimed: Vec<Uuid> = sqlx::query_scalar::<DB, Uuid>(claim)
            .bind(owner)
            .bind(i64::from(limit))
            .bind(lease_until)
            .bind(now)
            .fetch_all(&self.pool)
            .await?;
        let mut items: Vec<WorkItem> = Vec::with_capacity(claimed.len());
        // Bounded parameter lists: SQLite caps the number of parameters per statement.
        for batch in claimed.chunks(500) {
            // Only generated `$n` placeholders are added to the constant text.
            let sql = sqlx::AssertSqlSafe(format!("{CLAIM_READ}{}", in_list(1, batch.len())));
            let mut query = sqlx::query_as::<DB, ClaimedRow>(sql);
            for chunk in batch {
                query = query.bind(*chunk);
            }
            for row in query.fetch_all(&self.pool).await? {
                // Just leased by this statement's owner; checked all the same.
                if row.lease_owner.as_deref() == Some(owner) && row.state == "pending" {
                    items.push(row.work.try_into()?);
                }
            }
        }
        items.sort_by_key(|item| (item.book_number, item.chunk_number));
        if let Some(first) = items.first() {
            sqlx::query("UPDATE jobs SET claimed_at = $2 WHERE id = $1")
                .bind(first.job_id.0)
                .bind(now)
                .execute(&self.pool)
                .await?;
        }
        Ok(items)
    }

    async fn complete_work(
        &self,
        owner: &str,
        job: JobId,
        run: RunId,
        done: &[EmbeddedVector],
        reused: u64,
        now: DateTime<Utc>,
    ) -> Result<u64> {
        let mut tx = self.begin().await?;
        let mut kept: Vec<&EmbeddedVector> = Vec::with_capacity(done.len());
        for batch in done.chunks(MARK_BATCH) {
            // Only generated `$n` placeholders are added to the constant text.
            let sql = sqlx::AssertSqlSafe(complete_mark(batch.len()));
            let mut query = sqlx::query_scalar::<DB, Uuid>(sql)
                .bind(owner)
                .bind(now)
                .bind(job.0)
                .bind(run.0);
            for embedded in batch {
                query = query.bind(embedded.chunk_id.0).bind(&embedded.text_sha256);
            }
            for embedded in batch {
                query = query.bind(embedded.chunk_id.0);
            }
            let mut marked: std::collections::HashSet<Uuid> = query.fetch_all(&mut *tx).await?.into_iter().collect();
            // Each marked entry once, even when `done` names a chunk twice.
            kept.extend(batch.iter().filter(|e| marked.remove(&e.chunk_id.0)));
        }
        // The vectors of the entries just marked, and only those (each once).
        vectors::keep(&mut tx, &kept).await?;
        let marked = kept.len() as u64;
        if marked > 0 {
            // A job that gets chunks embedded is no longer waiting.
            sqlx::query(
                "UPDATE jobs SET embedded = embedded + $2, reused = reused + $3, waiting_reason = NULL, \
                 waiting_until = NULL WHERE id = $1",
            )
            .bind(job.0)
            .bind(wide(marked))
            .bind(wide(reused.min(marked)))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(marked)
    }

    async fn release_work(
        &self,
        owner: &str,
        job: JobId,
        chunks: &[ChunkId],
        not_before: Option<DateTime<Utc>>,
        rate_limited: bool,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        let mut released = 0u64;
        for chunk in chunks {
            let result = sqlx::query(
                "UPDATE manifest_entries SET lease_owner = NULL, lease_expires_at = $3, updated_at = $4 \
                 WHERE chunk_id = $1 AND lease_owner = $2 AND state = 'pending'",
            )
            .bind(chunk.0)
            .bind(owner)
            .bind(not_before)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            released += result.rows_affected();
        }
        if rate_limited && released > 0 {
            sqlx::query("UPDATE jobs SET rate_limited = rate_limited + $2 WHERE id = $1")
                .bind(job.0)
                .bind(wide(released))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn release_owner(&self, owner: &str, chunks: &[ChunkId], now: DateTime<Utc>) -> Result<u64> {
        const RELEASE: &str = "UPDATE manifest_entries SET lease_owner = NULL, lease_expires_at = NULL, updated_at = $2 \
             WHERE lease_owner = $1 AND state = 'pending' AND chunk_id IN ";
        let mut released = 0;
        for batch in chunks.chunks(500) {
            // Only generated `$n` placeholders are added to the constant text.
            let sql = sqlx::AssertSqlSafe(format!("{RELEASE}{}", in_list(3, batch.len())));
            let mut query = sqlx::query::<DB>(sql).bind(owner).bind(now);
            for chunk in batch {
                query = query.bind(chunk.0);
            }
            released += query.execute(&self.pool).await?.rows_affected();
        }
        Ok(released)
    }

    async fn note_error(&self, chunks: &[ChunkId], code: &str, message: &str, now: DateTime<Utc>) -> Result<()> {
        let mut tx = self.begin().await?;
        for chunk in chunks {
            sqlx::query(
                "UPDATE manifest_entries SET last_error_code = $2, last_error_message = $3, updated_at = $4 \
                 WHERE chunk_id = $1 AND state = 'pending'",
            )
            .bind(chunk.0)
            .bind(code)
            .bind(message)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn renew_leases(
        &self,
        owner: &str,
        chunks: &[ChunkId],
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<u64> {
        const RENEW: &str = "UPDATE manifest_entries SET lease_expires_at = $2, updated_at = $3 \
             WHERE lease_owner = $1 AND state = 'pending' AND chunk_id IN ";
        let mut renewed = 0;
        for batch in chunks.chunks(500) {
            // Only generated `$n` placeholders are added to the constant text.
            let sql = sqlx::AssertSqlSafe(format!("{RENEW}{}", in_list(4, batch.len())));
            let mut query = sqlx::query::<DB>(sql).bind(owner).bind(until).bind(now);
            for chunk in batch {
                query = query.bind(chunk.0);
            }
            renewed += query.execute(&self.pool).await?.rows_affected();
        }
        Ok(renewed)
    }

    async fn release_all_leases(&self, now: DateTime<Utc>) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE manifest_entries SET lease_owner = NULL, lease_expires_at = NULL, updated_at = $1 \
             WHERE lease_owner IS NOT NULL AND state = 'pending'",
        )
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn fail_work(
        &self,
        owner: &str,
        job: JobId,
        chunk: ChunkId,
        code: &str,
        message: &str,
        max_attempts: u32,
        permanent: bool,
        retry_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let mut tx = self.begin().await?;
        let state: Option<String> = sqlx::query_scalar(
            "UPDATE manifest_entries SET attempts = attempts + 1, last_error_code = $3, last_error_message = $4, \
             state = CASE WHEN $5 OR attempts + 1 >= $6 THEN 'failed' ELSE 'pending' END, lease_owner = NULL, \
             lease_expires_at = CASE WHEN $5 OR attempts + 1 >= $6 THEN NULL ELSE $7 END, updated_at = $8 \
             WHERE chunk_id = $1 AND lease_owner = $2 AND state = 'pending' RETURNING state",
        )
        .bind(chunk.0)
        .bind(owner)
        .bind(code)
        .bind(message)
        .bind(permanent)
        .bind(i64::from(max_attempts))
        .bind(retry_at)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        let failed = state.as_deref() == Some("failed");
        let count = match state {
            None => None,
            Some(_) if failed => Some("UPDATE jobs SET failed = failed + 1 WHERE id = $1"),
            Some(_) => Some("UPDATE jobs SET retries = retries + 1 WHERE id = $1"),
        };
        if let Some(count) = count {
            sqlx::query(count).bind(job.0).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(failed)
    }
}
