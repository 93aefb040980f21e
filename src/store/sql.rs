//! SQL shared by both backends, and the one implementation of the store traits.
//!
//! SQLite and PostgreSQL agree on everything quarry asks of them here (`$n` parameters,
//! `RETURNING`, `COUNT(*) FILTER`, cascading foreign keys), so the queries are written once
//! and [`impl_store!`] expands the trait implementations for each pool type. What differs
//! between the two (connection setup, claiming work) lives in `sqlite.rs` / `postgres.rs`.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Error, Result};
use crate::domain::{
    Chunk, ChunkId, ChunkState, ChunkView, ChunkingProfile, EmbeddingProfile, EntryError, GroupCooldown, Job,
    JobCounts, JobError, JobEvent, JobId, KeyId, KeyOrigin, ManifestEntry, RunId, SealedSecret, Source, SourceId,
    StoredKey, WorkItem, World, WorldId,
};

pub(super) const INSERT_WORLD: &str = "INSERT INTO worlds (id, name, provider, model, dimensions, max_tokens, \
     overlap_tokens, hybrid, active_run_id, collection, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)";

pub(super) const INSERT_RUN: &str = "INSERT INTO runs (id, world_id, provider, model, dimensions, max_tokens, \
     overlap_tokens, collection, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

/// Columns of a [`WorldRow`].
macro_rules! world_columns {
    () => {
        "id, name, provider, model, dimensions, max_tokens, overlap_tokens, hybrid, active_run_id, collection, \
         created_at, updated_at"
    };
}

pub(super) const SELECT_WORLD: &str = concat!("SELECT ", world_columns!(), " FROM worlds WHERE id = $1");

pub(super) const LIST_WORLDS: &str = concat!("SELECT ", world_columns!(), " FROM worlds ORDER BY created_at, id");

pub(super) const RENAME_WORLD: &str = concat!(
    "UPDATE worlds SET name = $2, updated_at = $3 WHERE id = $1 RETURNING ",
    world_columns!()
);

pub(super) const DELETE_WORLD: &str = "DELETE FROM worlds WHERE id = $1";

pub(super) const WORLD_COLLECTIONS: &str =
    "SELECT DISTINCT collection FROM runs WHERE world_id = $1 ORDER BY collection";

pub(super) const WORLD_STATS: &str = "SELECT \
     (SELECT COUNT(*) FROM sources WHERE world_id = $1) AS sources, \
     COUNT(m.chunk_id) AS chunks, \
     COUNT(m.chunk_id) FILTER (WHERE m.state = 'embedded') AS embedded, \
     COUNT(m.chunk_id) FILTER (WHERE m.state = 'pending') AS pending, \
     COUNT(m.chunk_id) FILTER (WHERE m.state = 'failed') AS failed \
     FROM worlds w LEFT JOIN manifest_entries m ON m.world_id = w.id AND m.run_id = w.active_run_id \
     WHERE w.id = $1";

/// Hands out the next book number and returns it with the active run (locks the world row on
/// Postgres, so concurrent uploads to one world serialise here).
pub(super) const NEXT_BOOK: &str = "UPDATE worlds SET next_book_number = next_book_number + 1 WHERE id = $1 \
     RETURNING next_book_number - 1 AS book_number, active_run_id";

pub(super) const INSERT_SOURCE: &str = "INSERT INTO sources (id, world_id, book_number, filename, content_type, \
     text, sha256, chars, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";

pub(super) const INSERT_CHUNK: &str = "INSERT INTO chunks (id, world_id, run_id, source_id, book_number, \
     chunk_number, char_start, char_end, token_count, chunk_text, overlap_text, text_sha256) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

pub(super) const INSERT_MANIFEST: &str = "INSERT INTO manifest_entries (chunk_id, world_id, run_id, source_id, \
     job_id, point_id, state, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7)";

pub(super) const INSERT_JOB: &str = "INSERT INTO jobs (id, world_id, kind, status, run_id, total, created_at, \
     started_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

pub(super) const SELECT_SOURCE: &str = "SELECT id, world_id, book_number, filename, content_type, sha256, chars, \
     created_at FROM sources WHERE world_id = $1 AND id = $2";

pub(super) const LIST_SOURCES: &str = "SELECT id, world_id, book_number, filename, content_type, sha256, chars, \
     created_at FROM sources WHERE world_id = $1 ORDER BY book_number";

pub(super) const SOURCE_COUNTS: &str = "SELECT COUNT(*) AS chunks, \
     COUNT(*) FILTER (WHERE m.state = 'embedded') AS embedded, \
     COUNT(*) FILTER (WHERE m.state = 'pending') AS pending, \
     COUNT(*) FILTER (WHERE m.state = 'failed') AS failed \
     FROM manifest_entries m JOIN worlds w ON w.id = m.world_id AND w.active_run_id = m.run_id \
     WHERE m.world_id = $1 AND m.source_id = $2";

pub(super) const SOURCE_TEXT: &str = "SELECT text FROM sources WHERE world_id = $1 AND id = $2";

/// Chunks of one source in the world's active run with their entries. `$1` world, `$2`
/// source, `$3` limit, `$4` offset.
pub(super) const LIST_CHUNKS: &str = "SELECT c.id, c.world_id, c.run_id, c.source_id, c.book_number, \
     c.chunk_number, c.char_start, c.char_end, c.token_count, c.chunk_text, c.overlap_text, c.text_sha256, \
     m.state, m.attempts, m.last_error_code, m.last_error_message \
     FROM chunks c JOIN worlds w ON w.id = c.world_id AND w.active_run_id = c.run_id \
     JOIN manifest_entries m ON m.chunk_id = c.id \
     WHERE c.world_id = $1 AND c.source_id = $2 ORDER BY c.chunk_number LIMIT $3 OFFSET $4";

pub(super) const COUNT_CHUNKS: &str = "SELECT COUNT(*) FROM chunks c \
     JOIN worlds w ON w.id = c.world_id AND w.active_run_id = c.run_id \
     JOIN manifest_entries m ON m.chunk_id = c.id WHERE c.world_id = $1 AND c.source_id = $2";

/// Removes a source's entries in every run, returning what each one meant to its job.
pub(super) const DELETE_SOURCE_ENTRIES: &str =
    "DELETE FROM manifest_entries WHERE world_id = $1 AND source_id = $2 RETURNING job_id, state";

pub(super) const DELETE_SOURCE_CHUNKS: &str = "DELETE FROM chunks WHERE world_id = $1 AND source_id = $2";

pub(super) const DELETE_SOURCE: &str = "DELETE FROM sources WHERE world_id = $1 AND id = $2";

/// Takes `$2` pending entries that no longer exist out of an unfinished job's `total`, so that
/// its `pending` (total − embedded − failed) counts only work that still exists.
pub(super) const DROP_JOB_PENDING: &str = "UPDATE jobs SET total = CASE WHEN total > $2 THEN total - $2 ELSE 0 END \
     WHERE id = $1 AND status IN ('queued', 'running', 'paused')";

/// Ends an unfinished job that has no entry left at all (its whole subject was deleted).
/// Not for re-ingests: one ends only through `finish_reingest`, which switches the world or
/// retires its run (a re-ingest whose sources were all deleted switches to an empty run).
pub(super) const CANCEL_EMPTIED_JOB: &str = "UPDATE jobs SET status = 'cancelled', finished_at = $2 \
     WHERE id = $1 AND kind <> 'reingest' AND status IN ('queued', 'running', 'paused') \
     AND NOT EXISTS (SELECT 1 FROM manifest_entries WHERE job_id = $1) RETURNING id";

pub(super) const SELECT_JOB: &str = "SELECT id, world_id, kind, status, run_id, total, embedded, failed, retries, \
     rate_limited, reused, created_at, started_at, finished_at FROM jobs WHERE id = $1";

pub(super) const LIST_JOBS: &str = "SELECT id, world_id, kind, status, run_id, total, embedded, failed, retries, \
     rate_limited, reused, created_at, started_at, finished_at FROM jobs WHERE world_id = $1 \
     ORDER BY created_at DESC, id";

/// The first [`MAX_JOB_ERRORS`](crate::domain::MAX_JOB_ERRORS) failed entries of `$1`, `$2`
/// being that limit.
pub(super) const JOB_ERRORS: &str = "SELECT c.book_number, c.chunk_number, m.last_error_code, \
     m.last_error_message FROM manifest_entries m JOIN chunks c ON c.id = m.chunk_id \
     WHERE m.job_id = $1 AND m.state = 'failed' ORDER BY c.book_number, c.chunk_number LIMIT $2";

/// The same for many jobs at once: `$1` the limit per job, then the job ids (see [`in_list`]),
/// then `) e WHERE e.n <= $1 ORDER BY …` from [`LIST_JOB_ERRORS_END`].
pub(super) const LIST_JOB_ERRORS: &str = "SELECT e.job_id, e.book_number, e.chunk_number, e.last_error_code, \
     e.last_error_message FROM (SELECT m.job_id, c.book_number, c.chunk_number, m.last_error_code, \
     m.last_error_message, ROW_NUMBER() OVER (PARTITION BY m.job_id ORDER BY c.book_number, c.chunk_number) AS n \
     FROM manifest_entries m JOIN chunks c ON c.id = m.chunk_id WHERE m.state = 'failed' AND m.job_id IN ";

pub(super) const LIST_JOB_ERRORS_END: &str = ") e WHERE e.n <= $1 ORDER BY e.job_id, e.book_number, e.chunk_number";

pub(super) const INSERT_KEY: &str = "INSERT INTO provider_keys (id, provider, label, origin, quota_group, \
     secret_ciphertext, secret_nonce, fingerprint, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) \
     RETURNING id, provider, label, origin, quota_group, secret_ciphertext, secret_nonce, fingerprint, \
     enabled, retired, retired_reason, cooldown_until, consecutive_failures, created_at, updated_at";

pub(super) const UPSERT_CONFIG_KEY: &str = "INSERT INTO provider_keys (id, provider, label, origin, quota_group, \
     secret_ciphertext, secret_nonce, fingerprint, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) \
     ON CONFLICT (provider, fingerprint) DO UPDATE SET label = excluded.label, \
     quota_group = excluded.quota_group, origin = excluded.origin, updated_at = excluded.updated_at \
     RETURNING id, provider, label, origin, quota_group, secret_ciphertext, secret_nonce, fingerprint, \
     enabled, retired, retired_reason, cooldown_until, consecutive_failures, created_at, updated_at";

pub(super) const SELECT_KEY: &str = "SELECT id, provider, label, origin, quota_group, secret_ciphertext, \
     secret_nonce, fingerprint, enabled, retired, retired_reason, cooldown_until, consecutive_failures, \
     created_at, updated_at FROM provider_keys WHERE id = $1";

pub(super) const LIST_KEYS: &str = "SELECT id, provider, label, origin, quota_group, secret_ciphertext, \
     secret_nonce, fingerprint, enabled, retired, retired_reason, cooldown_until, consecutive_failures, \
     created_at, updated_at FROM provider_keys ORDER BY created_at, id";

/// Enabling a key also lifts its retirement and cooldown: re-enabling is how an operator says
/// "try this key again".
pub(super) const SET_KEY_ENABLED: &str = "UPDATE provider_keys SET enabled = $2, \
     retired = CASE WHEN $2 THEN FALSE ELSE retired END, \
     retired_reason = CASE WHEN $2 THEN NULL ELSE retired_reason END, \
     cooldown_until = CASE WHEN $2 THEN NULL ELSE cooldown_until END, \
     consecutive_failures = CASE WHEN $2 THEN 0 ELSE consecutive_failures END, \
     updated_at = $3 WHERE id = $1 \
     RETURNING id, provider, label, origin, quota_group, secret_ciphertext, secret_nonce, fingerprint, \
     enabled, retired, retired_reason, cooldown_until, consecutive_failures, created_at, updated_at";

pub(super) const DELETE_KEY: &str = "DELETE FROM provider_keys WHERE id = $1";

pub(super) const SET_KEY_COOLDOWN: &str =
    "UPDATE provider_keys SET cooldown_until = $2, consecutive_failures = $3, updated_at = $4 WHERE id = $1";

pub(super) const RETIRE_KEY: &str =
    "UPDATE provider_keys SET retired = TRUE, retired_reason = $2, updated_at = $3 WHERE id = $1";

pub(super) const EXTEND_GROUP_COOLDOWN: &str = "INSERT INTO quota_group_cooldowns (provider, quota_group, \
     cooldown_until) VALUES ($1, $2, $3) ON CONFLICT (provider, quota_group) DO UPDATE SET cooldown_until = \
     CASE WHEN excluded.cooldown_until > quota_group_cooldowns.cooldown_until \
     THEN excluded.cooldown_until ELSE quota_group_cooldowns.cooldown_until END";

pub(super) const LIST_GROUP_COOLDOWNS: &str =
    "SELECT provider, quota_group, cooldown_until FROM quota_group_cooldowns ORDER BY provider, quota_group";

pub(super) const COUNT_ELIGIBLE_KEYS: &str =
    "SELECT COUNT(*) FROM provider_keys WHERE provider = $1 AND enabled AND NOT retired";

/// Leases entries of the running job claimed least recently. `$1` owner, `$2` limit, `$3`
/// lease end, `$4` now. The Postgres form locks the chosen rows with `SKIP LOCKED`, so
/// concurrent claimers take disjoint entries; SQLite runs the single statement under its
/// database write lock, which gives the same guarantee.
macro_rules! claim_sql {
    ($lock:literal) => {
        concat!(
            "UPDATE manifest_entries SET lease_owner = $1, lease_expires_at = $3, updated_at = $4 ",
            "WHERE chunk_id IN (SELECT m.chunk_id FROM manifest_entries m JOIN chunks c ON c.id = m.chunk_id ",
            "WHERE m.job_id = (SELECT j.id FROM jobs j WHERE j.status = 'running' AND EXISTS (",
            "SELECT 1 FROM manifest_entries p WHERE p.job_id = j.id AND p.state = 'pending' ",
            "AND (p.lease_expires_at IS NULL OR p.lease_expires_at < $4)) ",
            "ORDER BY j.claimed_at NULLS FIRST, j.created_at, j.id LIMIT 1) ",
            "AND m.state = 'pending' AND (m.lease_expires_at IS NULL OR m.lease_expires_at < $4) ",
            "ORDER BY c.book_number, c.chunk_number LIMIT $2 ",
            $lock,
            ")"
        )
    };
}

pub(super) const CLAIM_SQLITE: &str = claim_sql!("");
pub(super) const CLAIM_POSTGRES: &str = claim_sql!("FOR UPDATE OF m SKIP LOCKED");

pub(super) const CLAIMED_ITEMS: &str = "SELECT m.chunk_id, m.point_id, m.job_id, m.run_id, m.world_id, \
     m.source_id, c.book_number, c.chunk_number, c.token_count, c.chunk_text, c.text_sha256, m.attempts, \
     r.provider, r.model, r.dimensions, r.collection, w.hybrid \
     FROM manifest_entries m JOIN chunks c ON c.id = m.chunk_id JOIN runs r ON r.id = m.run_id \
     JOIN worlds w ON w.id = m.world_id \
     WHERE m.lease_owner = $1 AND m.lease_expires_at = $2 AND m.state = 'pending' \
     ORDER BY c.book_number, c.chunk_number";

pub(super) const BUMP_CLAIMED_JOB: &str = "UPDATE jobs SET claimed_at = $2 WHERE id = $1";

pub(super) const COMPLETE_ENTRY: &str = "UPDATE manifest_entries SET state = 'embedded', \
     embedded_text_sha256 = $3, lease_owner = NULL, lease_expires_at = NULL, last_error_code = NULL, \
     last_error_message = NULL, updated_at = $4 \
     WHERE chunk_id = $1 AND lease_owner = $2 AND state = 'pending' \
     AND EXISTS (SELECT 1 FROM jobs WHERE id = $5 AND status = 'running' AND run_id = $6)";

pub(super) const COUNT_EMBEDDED: &str = "UPDATE jobs SET embedded = embedded + $2, reused = reused + $3 WHERE id = $1";

pub(super) const RELEASE_ENTRY: &str = "UPDATE manifest_entries SET lease_owner = NULL, lease_expires_at = $3, \
     updated_at = $4 WHERE chunk_id = $1 AND lease_owner = $2 AND state = 'pending'";

pub(super) const RELEASE_OWNER: &str = "UPDATE manifest_entries SET lease_owner = NULL, lease_expires_at = NULL, \
     updated_at = $2 WHERE lease_owner = $1 AND state = 'pending'";

pub(super) const COUNT_RATE_LIMITED: &str = "UPDATE jobs SET rate_limited = rate_limited + $2 WHERE id = $1";

pub(super) const FAIL_ENTRY: &str = "UPDATE manifest_entries SET attempts = attempts + 1, \
     last_error_code = $3, last_error_message = $4, \
     state = CASE WHEN $5 OR attempts + 1 >= $6 THEN 'failed' ELSE 'pending' END, \
     lease_owner = NULL, \
     lease_expires_at = CASE WHEN $5 OR attempts + 1 >= $6 THEN NULL ELSE $7 END, updated_at = $8 \
     WHERE chunk_id = $1 AND lease_owner = $2 AND state = 'pending' RETURNING state";

pub(super) const COUNT_FAILED: &str = "UPDATE jobs SET failed = failed + 1 WHERE id = $1";
pub(super) const COUNT_RETRY: &str = "UPDATE jobs SET retries = retries + 1 WHERE id = $1";

/// Not for re-ingests, as [`CANCEL_EMPTIED_JOB`].
pub(super) const FINISH_JOB_IF_DONE: &str = "UPDATE jobs SET status = CASE WHEN EXISTS (\
     SELECT 1 FROM manifest_entries WHERE job_id = $1 AND state = 'failed') THEN 'failed' ELSE 'completed' END, \
     finished_at = $2 WHERE id = $1 AND kind <> 'reingest' AND status = 'running' \
     AND NOT EXISTS (SELECT 1 FROM manifest_entries WHERE job_id = $1 AND state = 'pending') RETURNING id";

pub(super) const JOB_STATUS: &str = "SELECT status FROM jobs WHERE id = $1";

/// Not repair jobs: one is running with nothing pending while its reconciliation is under way,
/// and finishes itself when that ends.
pub(super) const RUNNING_JOBS_WITH_NOTHING_PENDING: &str = "SELECT j.id FROM jobs j WHERE j.status = 'running' \
     AND j.kind <> 'repair' AND NOT EXISTS (SELECT 1 FROM manifest_entries m WHERE m.job_id = j.id AND m.state = 'pending') \
     ORDER BY j.created_at LIMIT 100";

pub(super) const SET_JOB_STATUS: &str = "UPDATE jobs SET status = $3, finished_at = $4 WHERE id = $1 AND status = $2";

/// A job that was queued (a re-ingest being prepared) starts when it first runs.
pub(super) const MARK_JOB_STARTED: &str = "UPDATE jobs SET started_at = $2 WHERE id = $1 AND started_at IS NULL";

/// Locks a job's row without changing it (and without firing the status trigger).
pub(super) const LOCK_JOB: &str = "UPDATE jobs SET total = total WHERE id = $1";

/// [`LOCK_JOB`], returning the job's status as of the lock.
pub(super) const LOCK_JOB_STATUS: &str = "UPDATE jobs SET total = total WHERE id = $1 RETURNING status";

/// Retires a run only while it is being built (a cancelled re-ingest's), never an active one.
pub(super) const RETIRE_BUILDING_RUN: &str = "UPDATE runs SET status = 'retired' WHERE id = $1 AND status = 'building'";

pub(super) const INSERT_EVENT: &str =
    "INSERT INTO job_events (job_id, kind, data, created_at) VALUES ($1, $2, $3, $4) RETURNING id";

pub(super) const EVENTS_AFTER: &str = "SELECT id, job_id, kind, data, created_at FROM job_events \
     WHERE job_id = $1 AND id > $2 ORDER BY id LIMIT $3";

/// The world (as [`SELECT_WORLD`]) and its active run's embedded entries counted up to `$2`, in one
/// round trip: retrieval needs both before anything else.
pub(super) const WORLD_FOR_RETRIEVAL: &str = concat!(
    "SELECT ",
    world_columns!(),
    ", (SELECT COUNT(*) FROM (SELECT 1 FROM manifest_entries m WHERE m.world_id = $1 \
     AND m.run_id = (SELECT active_run_id FROM worlds WHERE id = $1) AND m.state = 'embedded' LIMIT $2) AS e) \
     AS embedded FROM worlds WHERE id = $1"
);

/// Columns of a [`ChunkViewRow`]; `m` is the manifest entry, `c` the chunk, `s` the source.
macro_rules! chunk_view_columns {
    () => {
        "SELECT c.id, c.world_id, c.run_id, c.source_id, c.book_number, c.chunk_number, c.char_start, \
         c.char_end, c.token_count, c.chunk_text, c.overlap_text, c.text_sha256, m.point_id, s.filename \
         FROM manifest_entries m JOIN chunks c ON c.id = m.chunk_id JOIN sources s ON s.id = c.source_id "
    };
}

/// The point ids as `$1…` (see [`in_list`]). Only the point index may serve this: with world and
/// run in the condition too, SQLite (without statistics) walks every entry of the world instead;
/// the caller keeps the rows of its world and run.
pub(super) const CHUNKS_BY_POINTS: &str = concat!(chunk_view_columns!(), "WHERE m.point_id IN ");

/// One window of [`window_union`]: `$1` world, `$2` run, `$k` source, chunks `$k+1..=$k+2`.
pub(super) const CHUNK_WINDOW: &str = concat!(
    chunk_view_columns!(),
    "WHERE c.world_id = $1 AND c.run_id = $2 AND c.source_id = $k AND c.chunk_number BETWEEN $k1 AND $k2"
);

/// [`CHUNK_WINDOW`] for `n` windows whose parameters start at `$first`, as one `UNION ALL`:
/// each branch is a lookup in the `(run_id, source_id, chunk_number)` index. (Windows joined
/// by `OR` instead are one lookup each for two, but SQLite, without statistics, walks the whole
/// world for eight: 36 ms against 0.2 on 100,000 chunks.) No `ORDER BY`: the caller sorts.
pub(super) fn window_union(first: usize, n: usize) -> String {
    let branches: Vec<String> = (0..n)
        .map(|i| {
            let k = first + 3 * i;
            CHUNK_WINDOW
                .replace("$k2", &format!("${}", k + 2))
                .replace("$k1", &format!("${}", k + 1))
                .replace("$k", &format!("${k}"))
        })
        .collect();
    branches.join(" UNION ALL ")
}

/// `$1` collection, then the hashes (see [`in_list`]). Only runs served or being built: a
/// retired run's points are being deleted (or were, by a repair that left its rows).
pub(super) const REUSABLE_ANY_WORLD: &str = "SELECT c.text_sha256, m.point_id FROM chunks c \
     JOIN manifest_entries m ON m.chunk_id = c.id JOIN runs r ON r.id = m.run_id \
     WHERE m.state = 'embedded' AND m.embedded_text_sha256 = c.text_sha256 AND r.collection = $1 \
     AND r.status IN ('active', 'building') AND c.text_sha256 IN ";

/// `$1` collection, `$2` world, then the hashes.
pub(super) const REUSABLE_IN_WORLD: &str = "SELECT c.text_sha256, m.point_id FROM chunks c \
     JOIN manifest_entries m ON m.chunk_id = c.id JOIN runs r ON r.id = m.run_id \
     WHERE m.state = 'embedded' AND m.embedded_text_sha256 = c.text_sha256 AND r.collection = $1 \
     AND r.status IN ('active', 'building') AND m.world_id = $2 AND c.text_sha256 IN ";

/// Locks and returns the newest running repair or re-ingest job of world `$1` and run `$2`. The
/// status is checked again on the locked row (Postgres re-evaluates an `UPDATE`'s condition on
/// a row changed meanwhile), so a job that ended between the choice and the lock is not taken.
pub(super) const LOCK_RUNNING_REPAIR_JOB: &str = "UPDATE jobs SET total = total WHERE id = (SELECT id FROM jobs \
     WHERE world_id = $1 AND run_id = $2 AND kind IN ('repair', 'reingest') AND status = 'running' \
     ORDER BY created_at DESC, id LIMIT 1) AND status = 'running' RETURNING id";

/// Locks job `$3` when it belongs to world `$1` and run `$2` and has not ended.
pub(super) const LOCK_LIVE_JOB: &str = "UPDATE jobs SET total = total WHERE id = $3 AND world_id = $1 \
     AND run_id = $2 AND status IN ('queued', 'running', 'paused') RETURNING id";

/// Locks the re-ingest job building run `$2` of world `$1`, unless it has ended.
pub(super) const LOCK_LIVE_REINGEST_JOB: &str = "UPDATE jobs SET total = total WHERE world_id = $1 \
     AND run_id = $2 AND kind = 'reingest' AND status IN ('queued', 'running', 'paused') RETURNING id";

/// The job and state of an entry about to be requeued (`REQUEUE_ENTRY`'s condition).
pub(super) const REQUEUE_CANDIDATE: &str = "SELECT job_id, state FROM manifest_entries \
     WHERE chunk_id = $1 AND world_id = $2 AND run_id = $3 AND state <> 'pending'";

/// Entries the job had counted as embedded (`$2`) or failed (`$3`) that are pending again.
/// `reused` gives back as many as it can of the embedded ones (which of them were reused is not
/// recorded), so that it never exceeds `embedded`.
pub(super) const UNCOUNT_JOB_ENTRIES: &str = "UPDATE jobs SET embedded = CASE WHEN embedded > $2 THEN embedded - $2 ELSE 0 END, \
     reused = CASE WHEN reused > $2 THEN reused - $2 ELSE 0 END, \
     failed = CASE WHEN failed > $3 THEN failed - $3 ELSE 0 END WHERE id = $1";

/// Jobs that ended keep their counts: only a live job counts an adopted entry.
pub(super) const COUNT_ADOPTED: &str = "UPDATE jobs SET embedded = embedded + 1 \
     WHERE id = $1 AND status IN ('queued', 'running', 'paused')";

pub(super) const INSERT_BUILDING_RUN: &str = "INSERT INTO runs (id, world_id, provider, model, dimensions, \
     max_tokens, overlap_tokens, collection, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'building', $9)";

/// Takes the world row's write lock first (Postgres row lock; SQLite's write lock), so source
/// uploads and a run switch serialise.
pub(super) const LOCK_WORLD: &str = "UPDATE worlds SET updated_at = updated_at WHERE id = $1 RETURNING active_run_id";

pub(super) const SOURCES_MISSING_FROM_RUN: &str = "SELECT s.id, s.book_number FROM sources s WHERE s.world_id = $1 \
     AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.run_id = $2 AND c.source_id = s.id) ORDER BY s.book_number";

/// Gives re-ingest `$3` the pending entries of its run `$2` (world `$1`) that no live job holds
/// (left by code before requeues went to the re-ingest job, or by an older replica): nobody
/// else would ever embed them, and the run switches only once they are.
pub(super) const ADOPT_STRANDED_PENDING: &str = "UPDATE manifest_entries SET job_id = $3 \
     WHERE world_id = $1 AND run_id = $2 AND state = 'pending' AND (job_id IS NULL OR job_id IN \
     (SELECT id FROM jobs WHERE world_id = $1 AND status IN ('completed', 'cancelled', 'failed')))";

/// Whether any entry of world `$1`'s run `$2` is pending, whichever job holds it.
pub(super) const RUN_HAS_PENDING: &str =
    "SELECT EXISTS (SELECT 1 FROM manifest_entries WHERE world_id = $1 AND run_id = $2 AND state = 'pending')";

pub(super) const RUN_HAS_FAILED: &str =
    "SELECT EXISTS (SELECT 1 FROM manifest_entries WHERE world_id = $1 AND run_id = $2 AND state = 'failed')";

pub(super) const SWITCH_WORLD: &str = "UPDATE worlds SET active_run_id = r.id, provider = r.provider, \
     model = r.model, dimensions = r.dimensions, max_tokens = r.max_tokens, overlap_tokens = r.overlap_tokens, \
     collection = r.collection, updated_at = $3 FROM runs r WHERE r.id = $2 AND worlds.id = $1";

pub(super) const SET_RUN_STATUS: &str = "UPDATE runs SET status = $2 WHERE id = $1";

/// Locks a run's row (SQLite: takes the write lock before anything is read, so the
/// transaction never has to upgrade a read lock under a concurrent writer) and reads its status.
pub(super) const LOCK_RUN: &str = "UPDATE runs SET status = status WHERE id = $1 RETURNING status";

pub(super) const SELECT_RUN_COLLECTION: &str = "SELECT collection FROM runs WHERE id = $1";

/// Jobs still filling a run that is being replaced: their sources are part of the new run.
pub(super) const COMPLETE_RUN_JOBS: &str = "UPDATE jobs SET status = 'completed', finished_at = $3 \
     WHERE world_id = $1 AND run_id = $2 AND status IN ('queued', 'running', 'paused')";

/// Only a retired run: never the one a world serves, nor one being built.
pub(super) const DELETE_RUN: &str = "DELETE FROM runs WHERE id = $1 AND status = 'retired'";

pub(super) const JOB_RUN_CHUNKING: &str =
    "SELECT r.max_tokens, r.overlap_tokens FROM jobs j JOIN runs r ON r.id = j.run_id WHERE j.id = $1";

pub(super) const WORLD_RUNS: &str = "SELECT id, provider, model, dimensions, collection, status FROM runs WHERE world_id = $1 \
     ORDER BY created_at, id";

pub(super) const RUN_MANIFEST: &str = "SELECT m.chunk_id, m.point_id, m.run_id, m.source_id, c.chunk_number, \
     m.state, c.text_sha256, (m.lease_owner IS NOT NULL AND m.lease_expires_at >= $3) AS leased \
     FROM manifest_entries m JOIN chunks c ON c.id = m.chunk_id WHERE m.world_id = $1 AND m.run_id = $2";

/// A pending entry no worker holds (an entry given back with a "not before" time has no owner)
/// whose point is known good: embedded, no provider call.
pub(super) const ADOPT_ENTRY: &str = "UPDATE manifest_entries SET state = 'embedded', \
     embedded_text_sha256 = (SELECT c.text_sha256 FROM chunks c WHERE c.id = manifest_entries.chunk_id), \
     lease_owner = NULL, lease_expires_at = NULL, last_error_code = NULL, last_error_message = NULL, \
     updated_at = $4 WHERE chunk_id = $1 AND world_id = $2 AND run_id = $3 AND state = 'pending' \
     AND (lease_owner IS NULL OR lease_expires_at < $4) RETURNING job_id";

/// Puts an embedded or failed entry back in the queue under job `$4`, spending nothing.
pub(super) const REQUEUE_ENTRY: &str = "UPDATE manifest_entries SET state = 'pending', job_id = $4, \
     attempts = 0, embedded_text_sha256 = NULL, warning_code = $5, last_error_code = NULL, \
     last_error_message = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = $6 \
     WHERE chunk_id = $1 AND world_id = $2 AND run_id = $3 AND state <> 'pending'";

pub(super) const ADD_JOB_TOTAL: &str = "UPDATE jobs SET total = total + $2 WHERE id = $1";

/// `($first, $first+1, …)` for `n` parameters: an `IN` list both dialects accept.
pub(super) fn in_list(first: usize, n: usize) -> String {
    let params: Vec<String> = (first..first + n).map(|i| format!("${i}")).collect();
    format!("({})", params.join(", "))
}

#[derive(sqlx::FromRow)]
pub(super) struct ManifestRow {
    chunk_id: Uuid,
    point_id: Uuid,
    run_id: Uuid,
    source_id: Uuid,
    chunk_number: i64,
    state: String,
    text_sha256: String,
    leased: bool,
}

impl TryFrom<ManifestRow> for ManifestEntry {
    type Error = Error;

    fn try_from(r: ManifestRow) -> Result<ManifestEntry> {
        Ok(ManifestEntry {
            chunk_id: ChunkId(r.chunk_id),
            point_id: r.point_id,
            run_id: RunId(r.run_id),
            source_id: SourceId(r.source_id),
            chunk_number: narrow("chunks", r.chunk_number)?,
            state: r.state.parse().map_err(|reason| corrupt("manifest_entries", reason))?,
            text_sha256: r.text_sha256,
            leased: r.leased,
        })
    }
}

/// The columns of a chunk, shared by the rows that carry one.
#[derive(sqlx::FromRow)]
pub(super) struct ChunkRow {
    id: Uuid,
    world_id: Uuid,
    run_id: Uuid,
    source_id: Uuid,
    book_number: i64,
    chunk_number: i64,
    char_start: i64,
    char_end: i64,
    token_count: i64,
    chunk_text: String,
    overlap_text: String,
    text_sha256: String,
}

impl TryFrom<ChunkRow> for Chunk {
    type Error = Error;

    fn try_from(r: ChunkRow) -> Result<Chunk> {
        Ok(Chunk {
            id: ChunkId(r.id),
            world_id: WorldId(r.world_id),
            run_id: RunId(r.run_id),
            source_id: SourceId(r.source_id),
            book_number: narrow("chunks", r.book_number)?,
            chunk_number: narrow("chunks", r.chunk_number)?,
            char_start: narrow("chunks", r.char_start)?,
            char_end: narrow("chunks", r.char_end)?,
            token_count: narrow("chunks", r.token_count)?,
            chunk_text: r.chunk_text,
            overlap_text: r.overlap_text,
            sha256: r.text_sha256,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct ChunkViewRow {
    #[sqlx(flatten)]
    chunk: ChunkRow,
    point_id: Uuid,
    filename: String,
}

impl TryFrom<ChunkViewRow> for ChunkView {
    type Error = Error;

    fn try_from(r: ChunkViewRow) -> Result<ChunkView> {
        Ok(ChunkView {
            chunk: r.chunk.try_into()?,
            source_filename: r.filename,
            point_id: r.point_id,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct ChunkStateRow {
    #[sqlx(flatten)]
    chunk: ChunkRow,
    state: String,
    attempts: i64,
    last_error_code: Option<String>,
    last_error_message: Option<String>,
}

impl TryFrom<ChunkStateRow> for ChunkState {
    type Error = Error;

    fn try_from(r: ChunkStateRow) -> Result<ChunkState> {
        Ok(ChunkState {
            chunk: r.chunk.try_into()?,
            state: r.state.parse().map_err(|reason| corrupt("manifest_entries", reason))?,
            attempts: narrow("manifest_entries", r.attempts)?,
            // Both columns are written together; a code is what makes an error.
            last_error: r.last_error_code.map(|code| EntryError {
                code,
                message: r.last_error_message.unwrap_or_default(),
            }),
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct WorkRow {
    chunk_id: Uuid,
    point_id: Uuid,
    job_id: Uuid,
    run_id: Uuid,
    world_id: Uuid,
    source_id: Uuid,
    book_number: i64,
    chunk_number: i64,
    token_count: i64,
    chunk_text: String,
    text_sha256: String,
    attempts: i64,
    provider: String,
    model: String,
    dimensions: i64,
    collection: String,
    hybrid: bool,
}

impl TryFrom<WorkRow> for WorkItem {
    type Error = Error;

    fn try_from(r: WorkRow) -> Result<WorkItem> {
        Ok(WorkItem {
            chunk_id: ChunkId(r.chunk_id),
            point_id: r.point_id,
            job_id: JobId(r.job_id),
            run_id: RunId(r.run_id),
            world_id: WorldId(r.world_id),
            source_id: SourceId(r.source_id),
            book_number: narrow("chunks", r.book_number)?,
            chunk_number: narrow("chunks", r.chunk_number)?,
            token_count: narrow("chunks", r.token_count)?,
            chunk_text: r.chunk_text,
            text_sha256: r.text_sha256,
            attempts: narrow("manifest_entries", r.attempts)?,
            profile: EmbeddingProfile {
                provider: r.provider.parse().map_err(|reason| corrupt("runs", reason))?,
                model: r.model,
                dimensions: narrow("runs", r.dimensions)?,
            },
            collection: r.collection,
            hybrid: r.hybrid,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct EventRow {
    id: i64,
    job_id: Uuid,
    kind: String,
    data: String,
    created_at: DateTime<Utc>,
}

impl TryFrom<EventRow> for JobEvent {
    type Error = Error;

    fn try_from(r: EventRow) -> Result<JobEvent> {
        Ok(JobEvent {
            id: r.id,
            job_id: JobId(r.job_id),
            kind: r.kind.parse().map_err(|reason| corrupt("job_events", reason))?,
            data: r.data,
            created_at: r.created_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct WorldCountRow {
    #[sqlx(flatten)]
    pub(super) world: WorldRow,
    pub(super) embedded: i64,
}

#[derive(sqlx::FromRow)]
pub(super) struct WorldRow {
    id: Uuid,
    name: String,
    provider: String,
    model: String,
    dimensions: i64,
    max_tokens: i64,
    overlap_tokens: i64,
    hybrid: bool,
    active_run_id: Uuid,
    collection: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<WorldRow> for World {
    type Error = Error;

    fn try_from(row: WorldRow) -> Result<World> {
        Ok(World {
            id: WorldId(row.id),
            name: row.name,
            embedding: EmbeddingProfile {
                provider: row.provider.parse().map_err(|reason| corrupt("worlds", reason))?,
                model: row.model,
                dimensions: narrow("worlds", row.dimensions)?,
            },
            chunking: ChunkingProfile {
                max_tokens: narrow("worlds", row.max_tokens)?,
                overlap_tokens: narrow("worlds", row.overlap_tokens)?,
            },
            hybrid: row.hybrid,
            active_run: RunId(row.active_run_id),
            collection: row.collection,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct KeyRow {
    id: Uuid,
    provider: String,
    label: String,
    origin: String,
    quota_group: Option<String>,
    secret_ciphertext: Option<Vec<u8>>,
    secret_nonce: Option<Vec<u8>>,
    fingerprint: String,
    enabled: bool,
    retired: bool,
    retired_reason: Option<String>,
    cooldown_until: Option<DateTime<Utc>>,
    consecutive_failures: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<KeyRow> for StoredKey {
    type Error = Error;

    fn try_from(row: KeyRow) -> Result<StoredKey> {
        let sealed = match (row.secret_ciphertext, row.secret_nonce) {
            (Some(ciphertext), Some(nonce)) => Some(SealedSecret { ciphertext, nonce }),
            _ => None,
        };
        Ok(StoredKey {
            id: KeyId(row.id),
            provider: row
                .provider
                .parse()
                .map_err(|reason| corrupt("provider_keys", reason))?,
            label: row.label,
            origin: KeyOrigin::parse(&row.origin)
                .ok_or_else(|| corrupt("provider_keys", format!("unknown origin `{}`", row.origin)))?,
            quota_group: row.quota_group,
            sealed,
            fingerprint: row.fingerprint,
            enabled: row.enabled,
            retired: row.retired,
            retired_reason: row.retired_reason,
            cooldown_until: row.cooldown_until,
            consecutive_failures: narrow("provider_keys", row.consecutive_failures)?,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct GroupCooldownRow {
    provider: String,
    quota_group: String,
    cooldown_until: DateTime<Utc>,
}

impl TryFrom<GroupCooldownRow> for GroupCooldown {
    type Error = Error;

    fn try_from(row: GroupCooldownRow) -> Result<GroupCooldown> {
        Ok(GroupCooldown {
            provider: row
                .provider
                .parse()
                .map_err(|reason| corrupt("quota_group_cooldowns", reason))?,
            quota_group: row.quota_group,
            until: row.cooldown_until,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct StatsRow {
    pub sources: i64,
    pub chunks: i64,
    pub embedded: i64,
    pub pending: i64,
    pub failed: i64,
}

#[derive(sqlx::FromRow)]
pub(super) struct SourceRow {
    id: Uuid,
    world_id: Uuid,
    book_number: i64,
    filename: String,
    content_type: String,
    sha256: String,
    chars: i64,
    created_at: DateTime<Utc>,
}

impl TryFrom<SourceRow> for Source {
    type Error = Error;

    fn try_from(row: SourceRow) -> Result<Source> {
        Ok(Source {
            id: SourceId(row.id),
            world_id: WorldId(row.world_id),
            book_number: narrow("sources", row.book_number)?,
            filename: row.filename,
            content_type: row.content_type,
            sha256: row.sha256,
            chars: narrow("sources", row.chars)?,
            created_at: row.created_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct CountsRow {
    pub chunks: i64,
    pub embedded: i64,
    pub pending: i64,
    pub failed: i64,
}

#[derive(sqlx::FromRow)]
pub(super) struct JobRow {
    id: Uuid,
    world_id: Uuid,
    kind: String,
    status: String,
    run_id: Uuid,
    total: i64,
    embedded: i64,
    failed: i64,
    retries: i64,
    rate_limited: i64,
    reused: i64,
    created_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
}

/// A [`JobErrorRow`] with its job, from [`LIST_JOB_ERRORS`].
#[derive(sqlx::FromRow)]
pub(super) struct ListedJobErrorRow {
    pub(super) job_id: Uuid,
    #[sqlx(flatten)]
    pub(super) error: JobErrorRow,
}

#[derive(sqlx::FromRow)]
pub(super) struct JobErrorRow {
    book_number: i64,
    chunk_number: i64,
    last_error_code: Option<String>,
    last_error_message: Option<String>,
}

impl JobRow {
    pub(super) fn into_job(self, errors: Vec<JobErrorRow>) -> Result<Job> {
        let total: u64 = narrow("jobs", self.total)?;
        let embedded: u64 = narrow("jobs", self.embedded)?;
        let failed: u64 = narrow("jobs", self.failed)?;
        let errors = errors
            .into_iter()
            .map(|e| {
                Ok(JobError {
                    book_number: narrow("manifest_entries", e.book_number)?,
                    chunk_number: narrow("manifest_entries", e.chunk_number)?,
                    code: e.last_error_code.unwrap_or_else(|| "unknown".to_owned()),
                    message: e.last_error_message.unwrap_or_default(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Job {
            id: JobId(self.id),
            world_id: WorldId(self.world_id),
            kind: self.kind.parse().map_err(|reason| corrupt("jobs", reason))?,
            status: self.status.parse().map_err(|reason| corrupt("jobs", reason))?,
            run_id: RunId(self.run_id),
            counts: JobCounts {
                total,
                embedded,
                pending: total.saturating_sub(embedded + failed),
                failed,
                retries: narrow("jobs", self.retries)?,
                rate_limited: narrow("jobs", self.rate_limited)?,
                reused: narrow("jobs", self.reused)?,
            },
            errors,
            created_at: self.created_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
        })
    }
}

pub(super) fn corrupt(table: &'static str, reason: String) -> Error {
    Error::Corrupt { table, reason }
}

/// Converts a stored integer into the domain's unsigned type; out of range is corruption.
pub(super) fn narrow<T: TryFrom<i64>>(table: &'static str, value: i64) -> Result<T> {
    T::try_from(value).map_err(|_| corrupt(table, format!("integer {value} out of range")))
}

/// Widens a domain integer for binding (every column is 64-bit).
pub(super) fn wide<T: Into<u64>>(value: T) -> i64 {
    i64::try_from(value.into()).unwrap_or(i64::MAX)
}

/// Takes world `$world`'s row lock in the transaction `tx` (the first lock of the order world →
/// run → job), or rolls back and returns `Ok(None)` from the enclosing function when there is
/// no such world.
macro_rules! lock_world_or_none {
    ($tx:ident, $world:expr) => {
        let exists: Option<uuid::Uuid> = sqlx::query_scalar(LOCK_WORLD)
            .bind($world.0)
            .fetch_optional(&mut *$tx)
            .await?;
        if exists.is_none() {
            $tx.rollback().await?;
            return Ok(None);
        }
    };
}

/// Inserts `chunks` of one source into `run` with one pending manifest entry each, held by
/// `job`, inside the transaction `tx`.
macro_rules! insert_chunks {
    ($tx:ident, $world:expr, $run:expr, $source:expr, $book:expr, $chunks:expr, $job:expr, $now:expr) => {
        for chunk in $chunks {
            use sha2::Digest as _;
            let chunk_id = uuid::Uuid::new_v4();
            let text_sha = hex::encode(sha2::Sha256::digest(chunk.chunk_text.as_bytes()));
            sqlx::query(INSERT_CHUNK)
                .bind(chunk_id)
                .bind($world.0)
                .bind($run.0)
                .bind($source.0)
                .bind($book)
                .bind(wide(chunk.chunk_number))
                .bind(wide(chunk.char_start))
                .bind(wide(chunk.char_end))
                .bind(wide(chunk.token_count))
                .bind(&chunk.chunk_text)
                .bind(&chunk.overlap_text)
                .bind(&text_sha)
                .execute(&mut *$tx)
                .await?;
            let point = $crate::domain::point_id($world, $run, $source, chunk.chunk_number);
            sqlx::query(INSERT_MANIFEST)
                .bind(chunk_id)
                .bind($world.0)
                .bind($run.0)
                .bind($source.0)
                .bind($job.0)
                .bind(point)
                .bind($now)
                .execute(&mut *$tx)
                .await?;
        }
    };
}

/// Expands the store traits for a backend struct with a `pool` field; `$begin` is the
/// statement that opens its transactions.
macro_rules! impl_store {
    ($store:ty, $kind:literal, $claim:expr, $begin:literal) => {
        #[async_trait::async_trait]
        impl $crate::store::WorldStore for $store {
            async fn create_world(&self, w: $crate::domain::NewWorld) -> $crate::store::Result<$crate::domain::World> {
                use $crate::store::sql::*;
                let collection = w.embedding.collection_name();
                let mut tx = self.pool.begin_with($begin).await?;
                sqlx::query(INSERT_WORLD)
                    .bind(w.id.0)
                    .bind(&w.name)
                    .bind(w.embedding.provider.as_str())
                    .bind(&w.embedding.model)
                    .bind(wide(w.embedding.dimensions))
                    .bind(wide(w.chunking.max_tokens))
                    .bind(wide(w.chunking.overlap_tokens))
                    .bind(w.hybrid)
                    .bind(w.run.0)
                    .bind(&collection)
                    .bind(w.now)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(INSERT_RUN)
                    .bind(w.run.0)
                    .bind(w.id.0)
                    .bind(w.embedding.provider.as_str())
                    .bind(&w.embedding.model)
                    .bind(wide(w.embedding.dimensions))
                    .bind(wide(w.chunking.max_tokens))
                    .bind(wide(w.chunking.overlap_tokens))
                    .bind(&collection)
                    .bind("active")
                    .bind(w.now)
                    .execute(&mut *tx)
                    .await?;
                let row: WorldRow = sqlx::query_as(SELECT_WORLD)
                    .bind(w.id.0)
                    .fetch_one(&mut *tx)
                    .await?;
                tx.commit().await?;
                row.try_into()
            }

            async fn get_world(
                &self,
                id: $crate::domain::WorldId,
            ) -> $crate::store::Result<Option<$crate::domain::World>> {
                use $crate::store::sql::*;
                let row: Option<WorldRow> = sqlx::query_as(SELECT_WORLD)
                    .bind(id.0)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(TryInto::try_into).transpose()
            }

            async fn list_worlds(&self) -> $crate::store::Result<Vec<$crate::domain::World>> {
                use $crate::store::sql::*;
                let rows: Vec<WorldRow> = sqlx::query_as(LIST_WORLDS).fetch_all(&self.pool).await?;
                rows.into_iter().map(TryInto::try_into).collect()
            }

            async fn world_stats(
                &self,
                id: $crate::domain::WorldId,
            ) -> $crate::store::Result<$crate::domain::WorldStats> {
                use $crate::store::sql::*;
                let row: Option<StatsRow> = sqlx::query_as(WORLD_STATS)
                    .bind(id.0)
                    .fetch_optional(&self.pool)
                    .await?;
                let Some(row) = row else {
                    return Ok($crate::domain::WorldStats::default());
                };
                Ok($crate::domain::WorldStats {
                    sources: narrow("sources", row.sources)?,
                    chunks: narrow("chunks", row.chunks)?,
                    embedded: narrow("manifest_entries", row.embedded)?,
                    pending: narrow("manifest_entries", row.pending)?,
                    failed: narrow("manifest_entries", row.failed)?,
                })
            }

            async fn rename_world(
                &self,
                id: $crate::domain::WorldId,
                name: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<Option<$crate::domain::World>> {
                use $crate::store::sql::*;
                let row: Option<WorldRow> = sqlx::query_as(RENAME_WORLD)
                    .bind(id.0)
                    .bind(name)
                    .bind(now)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(TryInto::try_into).transpose()
            }

            async fn delete_world(&self, id: $crate::domain::WorldId) -> $crate::store::Result<bool> {
                use $crate::store::sql::*;
                let done = sqlx::query(DELETE_WORLD).bind(id.0).execute(&self.pool).await?;
                Ok(done.rows_affected() > 0)
            }

            async fn world_collections(&self, id: $crate::domain::WorldId) -> $crate::store::Result<Vec<String>> {
                use $crate::store::sql::*;
                Ok(sqlx::query_scalar(WORLD_COLLECTIONS)
                    .bind(id.0)
                    .fetch_all(&self.pool)
                    .await?)
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::SourceStore for $store {
            async fn add_source(
                &self,
                source: &$crate::domain::NewSource,
                chunks: Vec<$crate::domain::NewChunk>,
                job: $crate::domain::JobId,
            ) -> $crate::store::Result<($crate::domain::Source, $crate::domain::Job)> {
                use sha2::Digest as _;
                use $crate::store::sql::*;
                let mut tx = self.pool.begin_with($begin).await?;
                let (book_number, run_id): (i64, uuid::Uuid) = sqlx::query_as(NEXT_BOOK)
                    .bind(source.world_id.0)
                    .fetch_one(&mut *tx)
                    .await?;
                let run = $crate::domain::RunId(run_id);
                if run != source.run {
                    // Cut with another run's profile (a re-ingest switched the world meanwhile).
                    tx.rollback().await?;
                    return Err($crate::store::Error::RunChanged);
                }
                let sha256 = hex::encode(sha2::Sha256::digest(source.text.as_bytes()));
                let chars = source.text.chars().count() as u64;
                sqlx::query(INSERT_SOURCE)
                    .bind(source.id.0)
                    .bind(source.world_id.0)
                    .bind(book_number)
                    .bind(&source.filename)
                    .bind(&source.content_type)
                    .bind(&source.text)
                    .bind(&sha256)
                    .bind(wide(chars))
                    .bind(source.now)
                    .execute(&mut *tx)
                    .await?;
                insert_chunks!(
                    tx,
                    source.world_id,
                    run,
                    source.id,
                    book_number,
                    &chunks,
                    job,
                    source.now
                );
                sqlx::query(INSERT_JOB)
                    .bind(job.0)
                    .bind(source.world_id.0)
                    .bind($crate::domain::JobKind::Ingest.as_str())
                    .bind($crate::domain::JobStatus::Running.as_str())
                    .bind(run_id)
                    .bind(wide(chunks.len() as u64))
                    .bind(source.now)
                    .bind(source.now)
                    .execute(&mut *tx)
                    .await?;
                let source_row: SourceRow = sqlx::query_as(SELECT_SOURCE)
                    .bind(source.world_id.0)
                    .bind(source.id.0)
                    .fetch_one(&mut *tx)
                    .await?;
                let job_row: JobRow = sqlx::query_as(SELECT_JOB).bind(job.0).fetch_one(&mut *tx).await?;
                tx.commit().await?;
                Ok((source_row.try_into()?, job_row.into_job(Vec::new())?))
            }

            async fn get_source(
                &self,
                world: $crate::domain::WorldId,
                id: $crate::domain::SourceId,
            ) -> $crate::store::Result<Option<$crate::domain::Source>> {
                use $crate::store::sql::*;
                let row: Option<SourceRow> = sqlx::query_as(SELECT_SOURCE)
                    .bind(world.0)
                    .bind(id.0)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(TryInto::try_into).transpose()
            }

            async fn list_sources(
                &self,
                world: $crate::domain::WorldId,
            ) -> $crate::store::Result<Vec<$crate::domain::Source>> {
                use $crate::store::sql::*;
                let rows: Vec<SourceRow> = sqlx::query_as(LIST_SOURCES)
                    .bind(world.0)
                    .fetch_all(&self.pool)
                    .await?;
                rows.into_iter().map(TryInto::try_into).collect()
            }

            async fn source_counts(
                &self,
                world: $crate::domain::WorldId,
                id: $crate::domain::SourceId,
            ) -> $crate::store::Result<$crate::domain::SourceCounts> {
                use $crate::store::sql::*;
                let row: CountsRow = sqlx::query_as(SOURCE_COUNTS)
                    .bind(world.0)
                    .bind(id.0)
                    .fetch_one(&self.pool)
                    .await?;
                Ok($crate::domain::SourceCounts {
                    chunks: narrow("manifest_entries", row.chunks)?,
                    embedded: narrow("manifest_entries", row.embedded)?,
                    pending: narrow("manifest_entries", row.pending)?,
                    failed: narrow("manifest_entries", row.failed)?,
                })
            }
            async fn source_text(
                &self,
                world: $crate::domain::WorldId,
                id: $crate::domain::SourceId,
            ) -> $crate::store::Result<Option<String>> {
                use $crate::store::sql::*;
                Ok(sqlx::query_scalar(SOURCE_TEXT)
                    .bind(world.0)
                    .bind(id.0)
                    .fetch_optional(&self.pool)
                    .await?)
            }

            async fn list_chunks(
                &self,
                world: $crate::domain::WorldId,
                id: $crate::domain::SourceId,
                offset: u64,
                limit: u32,
            ) -> $crate::store::Result<$crate::domain::ChunkPage> {
                use $crate::store::sql::*;
                let rows: Vec<ChunkStateRow> = sqlx::query_as(LIST_CHUNKS)
                    .bind(world.0)
                    .bind(id.0)
                    .bind(i64::from(limit))
                    .bind(wide(offset))
                    .fetch_all(&self.pool)
                    .await?;
                let total: i64 = sqlx::query_scalar(COUNT_CHUNKS)
                    .bind(world.0)
                    .bind(id.0)
                    .fetch_one(&self.pool)
                    .await?;
                Ok($crate::domain::ChunkPage {
                    chunks: rows
                        .into_iter()
                        .map(TryInto::try_into)
                        .collect::<$crate::store::Result<_>>()?,
                    total: narrow("chunks", total)?,
                })
            }

            async fn delete_source(
                &self,
                world: $crate::domain::WorldId,
                id: $crate::domain::SourceId,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<Option<$crate::domain::SourceDeletion>> {
                use $crate::store::sql::*;
                let mut tx = self.pool.begin_with($begin).await?;
                // The world's row first (see `requeue_entries`), then the entries, then jobs.
                lock_world_or_none!(tx, world);
                // What each removed entry meant to its job, read from the delete itself so a
                // worker's concurrent completion is counted once, on whichever side it landed.
                let removed: Vec<(Option<uuid::Uuid>, String)> = sqlx::query_as(DELETE_SOURCE_ENTRIES)
                    .bind(world.0)
                    .bind(id.0)
                    .fetch_all(&mut *tx)
                    .await?;
                let chunks = sqlx::query(DELETE_SOURCE_CHUNKS)
                    .bind(world.0)
                    .bind(id.0)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                let deleted = sqlx::query(DELETE_SOURCE)
                    .bind(world.0)
                    .bind(id.0)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if deleted == 0 {
                    tx.rollback().await?;
                    return Ok(None);
                }
                // Pending entries removed per job; a sorted map so concurrent deletes lock
                // job rows in the same order.
                let mut jobs: std::collections::BTreeMap<uuid::Uuid, u64> = std::collections::BTreeMap::new();
                for (job, state) in removed {
                    if let Some(job) = job {
                        *jobs.entry(job).or_default() += u64::from(state == "pending");
                    }
                }
                let mut finished_jobs = Vec::new();
                for (job, pending) in jobs {
                    if pending > 0 {
                        let dropped = sqlx::query(DROP_JOB_PENDING)
                            .bind(job)
                            .bind(wide(pending))
                            .execute(&mut *tx)
                            .await?
                            .rows_affected();
                        if dropped > 0 {
                            // Before any status event the job gets below, so a stream shows
                            // why the job ended before it ends.
                            let data = serde_json::json!({
                                "code": "source_deleted",
                                "message": format!("source {} was deleted; {pending} of this job's pending chunks were dropped with it", id.0),
                                "source_id": id.0,
                                "dropped": pending,
                            });
                            sqlx::query(INSERT_EVENT)
                                .bind(job)
                                .bind($crate::domain::JobEventKind::Warning.as_str())
                                .bind(data.to_string())
                                .bind(now)
                                .execute(&mut *tx)
                                .await?;
                        }
                    }
                    let cancelled: Option<uuid::Uuid> = sqlx::query_scalar(CANCEL_EMPTIED_JOB)
                        .bind(job)
                        .bind(now)
                        .fetch_optional(&mut *tx)
                        .await?;
                    if cancelled.is_some() {
                        finished_jobs.push(($crate::domain::JobId(job), $crate::domain::JobStatus::Cancelled));
                        continue;
                    }
                    let done: Option<uuid::Uuid> = sqlx::query_scalar(FINISH_JOB_IF_DONE)
                        .bind(job)
                        .bind(now)
                        .fetch_optional(&mut *tx)
                        .await?;
                    if done.is_some() {
                        let status: String = sqlx::query_scalar(JOB_STATUS)
                            .bind(job)
                            .fetch_one(&mut *tx)
                            .await?;
                        let status = status.parse().map_err(|reason| corrupt("jobs", reason))?;
                        finished_jobs.push(($crate::domain::JobId(job), status));
                    }
                }
                tx.commit().await?;
                Ok(Some($crate::domain::SourceDeletion {
                    chunks,
                    finished_jobs,
                }))
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::JobStore for $store {
            async fn get_job(&self, id: $crate::domain::JobId) -> $crate::store::Result<Option<$crate::domain::Job>> {
                use $crate::store::sql::*;
                let row: Option<JobRow> = sqlx::query_as(SELECT_JOB)
                    .bind(id.0)
                    .fetch_optional(&self.pool)
                    .await?;
                let Some(row) = row else { return Ok(None) };
                let errors: Vec<JobErrorRow> = sqlx::query_as(JOB_ERRORS)
                    .bind(id.0)
                    .bind(wide($crate::domain::MAX_JOB_ERRORS))
                    .fetch_all(&self.pool)
                    .await?;
                row.into_job(errors).map(Some)
            }

            async fn list_jobs(
                &self,
                world: $crate::domain::WorldId,
            ) -> $crate::store::Result<Vec<$crate::domain::Job>> {
                use $crate::store::sql::*;
                let rows: Vec<JobRow> = sqlx::query_as(LIST_JOBS)
                    .bind(world.0)
                    .fetch_all(&self.pool)
                    .await?;
                // The errors of every listed job, a few hundred jobs per read.
                let mut errors: std::collections::HashMap<uuid::Uuid, Vec<JobErrorRow>> =
                    std::collections::HashMap::new();
                let ids: Vec<uuid::Uuid> = rows.iter().map(|r| r.id_uuid()).collect();
                for batch in ids.chunks(500) {
                    // Only generated `$n` placeholders are added to the constant text.
                    let sql = sqlx::AssertSqlSafe(format!(
                        "{LIST_JOB_ERRORS}{}{LIST_JOB_ERRORS_END}",
                        in_list(2, batch.len())
                    ));
                    let mut query = sqlx::query_as::<_, ListedJobErrorRow>(sql).bind(wide($crate::domain::MAX_JOB_ERRORS));
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
                id: $crate::domain::JobId,
                from: &[$crate::domain::JobStatus],
                to: $crate::domain::JobStatus,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<Option<$crate::domain::Job>> {
                use $crate::store::sql::*;
                let mut tx = self.pool.begin_with($begin).await?;
                let status: Option<String> = sqlx::query_scalar(JOB_STATUS)
                    .bind(id.0)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(status) = status else { return Ok(None) };
                let current: $crate::domain::JobStatus = status.parse().map_err(|r| corrupt("jobs", r))?;
                if !from.contains(&current) {
                    return Ok(None);
                }
                let finished = if to.is_terminal() { Some(now) } else { None };
                let done = sqlx::query(SET_JOB_STATUS)
                    .bind(id.0)
                    .bind(current.as_str())
                    .bind(to.as_str())
                    .bind(finished)
                    .execute(&mut *tx)
                    .await?;
                if done.rows_affected() == 0 {
                    return Ok(None);
                }
                if to == $crate::domain::JobStatus::Running {
                    sqlx::query(MARK_JOB_STARTED).bind(id.0).bind(now).execute(&mut *tx).await?;
                }
                tx.commit().await?;
                $crate::store::JobStore::get_job(self, id).await
            }

            async fn finish_job_if_done(
                &self,
                id: $crate::domain::JobId,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<Option<$crate::domain::Job>> {
                use $crate::store::sql::*;
                // The job's row is locked by a statement of its own first: a requeue holding it
                // may be adding pending entries, and Postgres would judge `FINISH_JOB_IF_DONE`'s
                // "nothing pending" on a snapshot taken before that requeue committed. The next
                // statement's snapshot sees them.
                let mut tx = self.pool.begin_with($begin).await?;
                let locked: Option<String> = sqlx::query_scalar(LOCK_JOB_STATUS)
                    .bind(id.0)
                    .fetch_optional(&mut *tx)
                    .await?;
                if locked.as_deref() != Some("running") {
                    tx.rollback().await?;
                    return Ok(None);
                }
                let finished: Option<uuid::Uuid> = sqlx::query_scalar(FINISH_JOB_IF_DONE)
                    .bind(id.0)
                    .bind(now)
                    .fetch_optional(&mut *tx)
                    .await?;
                tx.commit().await?;
                match finished {
                    Some(_) => $crate::store::JobStore::get_job(self, id).await,
                    None => Ok(None),
                }
            }

            async fn job_status(
                &self,
                id: $crate::domain::JobId,
            ) -> $crate::store::Result<Option<$crate::domain::JobStatus>> {
                use $crate::store::sql::*;
                let status: Option<String> = sqlx::query_scalar(JOB_STATUS)
                    .bind(id.0)
                    .fetch_optional(&self.pool)
                    .await?;
                status
                    .map(|s| s.parse().map_err(|reason| corrupt("jobs", reason)))
                    .transpose()
            }

            async fn running_jobs_with_nothing_pending(
                &self,
            ) -> $crate::store::Result<Vec<$crate::domain::JobId>> {
                use $crate::store::sql::*;
                let ids: Vec<uuid::Uuid> = sqlx::query_scalar(RUNNING_JOBS_WITH_NOTHING_PENDING)
                    .fetch_all(&self.pool)
                    .await?;
                Ok(ids.into_iter().map($crate::domain::JobId).collect())
            }

            async fn append_job_event(
                &self,
                job: $crate::domain::JobId,
                kind: $crate::domain::JobEventKind,
                data: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<i64> {
                use $crate::store::sql::*;
                // Under the job's row lock, as every other event of the job is written (the
                // status trigger and the source-delete warning run inside updates of that row):
                // Postgres hands out ids when rows are inserted, not when they commit, and a
                // stream reading "after id N" would pass over an event committed after a later
                // one. Serialised per job, a job's events commit in id order.
                let mut tx = self.pool.begin_with($begin).await?;
                sqlx::query(LOCK_JOB).bind(job.0).execute(&mut *tx).await?;
                let id = sqlx::query_scalar(INSERT_EVENT)
                    .bind(job.0)
                    .bind(kind.as_str())
                    .bind(data)
                    .bind(now)
                    .fetch_one(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(id)
            }

            async fn job_events_after(
                &self,
                job: $crate::domain::JobId,
                after: i64,
                limit: u32,
            ) -> $crate::store::Result<Vec<$crate::domain::JobEvent>> {
                use $crate::store::sql::*;
                let rows: Vec<EventRow> = sqlx::query_as(EVENTS_AFTER)
                    .bind(job.0)
                    .bind(after)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await?;
                rows.into_iter().map(TryInto::try_into).collect()
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::WorkStore for $store {
            async fn claim_work(
                &self,
                owner: &str,
                limit: u32,
                lease_until: chrono::DateTime<chrono::Utc>,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<Vec<$crate::domain::WorkItem>> {
                use $crate::store::sql::*;
                let claimed = sqlx::query($claim)
                    .bind(owner)
                    .bind(i64::from(limit))
                    .bind(lease_until)
                    .bind(now)
                    .execute(&self.pool)
                    .await?;
                if claimed.rows_affected() == 0 {
                    return Ok(Vec::new());
                }
                let rows: Vec<WorkRow> = sqlx::query_as(CLAIMED_ITEMS)
                    .bind(owner)
                    .bind(lease_until)
                    .fetch_all(&self.pool)
                    .await?;
                let items: Vec<$crate::domain::WorkItem> = rows
                    .into_iter()
                    .map(TryInto::try_into)
                    .collect::<$crate::store::Result<_>>()?;
                if let Some(first) = items.first() {
                    sqlx::query(BUMP_CLAIMED_JOB)
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
                job: $crate::domain::JobId,
                run: $crate::domain::RunId,
                done: &[($crate::domain::ChunkId, String)],
                reused: u64,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<u64> {
                use $crate::store::sql::*;
                let mut tx = self.pool.begin_with($begin).await?;
                let mut marked = 0u64;
                for (chunk, hash) in done {
                    let result = sqlx::query(COMPLETE_ENTRY)
                        .bind(chunk.0)
                        .bind(owner)
                        .bind(hash)
                        .bind(now)
                        .bind(job.0)
                        .bind(run.0)
                        .execute(&mut *tx)
                        .await?;
                    marked += result.rows_affected();
                }
                if marked > 0 {
                    sqlx::query(COUNT_EMBEDDED)
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
                job: $crate::domain::JobId,
                chunks: &[$crate::domain::ChunkId],
                not_before: Option<chrono::DateTime<chrono::Utc>>,
                rate_limited: bool,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<()> {
                use $crate::store::sql::*;
                let mut tx = self.pool.begin_with($begin).await?;
                let mut released = 0u64;
                for chunk in chunks {
                    let result = sqlx::query(RELEASE_ENTRY)
                        .bind(chunk.0)
                        .bind(owner)
                        .bind(not_before)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                    released += result.rows_affected();
                }
                if rate_limited && released > 0 {
                    sqlx::query(COUNT_RATE_LIMITED)
                        .bind(job.0)
                        .bind(wide(released))
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn release_owner(&self, owner: &str, now: chrono::DateTime<chrono::Utc>) -> $crate::store::Result<u64> {
                use $crate::store::sql::*;
                let done = sqlx::query(RELEASE_OWNER).bind(owner).bind(now).execute(&self.pool).await?;
                Ok(done.rows_affected())
            }

            async fn fail_work(
                &self,
                owner: &str,
                job: $crate::domain::JobId,
                chunk: $crate::domain::ChunkId,
                code: &str,
                message: &str,
                max_attempts: u32,
                permanent: bool,
                retry_at: chrono::DateTime<chrono::Utc>,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<bool> {
                use $crate::store::sql::*;
                let mut tx = self.pool.begin_with($begin).await?;
                let state: Option<String> = sqlx::query_scalar(FAIL_ENTRY)
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
                match state {
                    None => {}
                    Some(_) if failed => {
                        sqlx::query(COUNT_FAILED).bind(job.0).execute(&mut *tx).await?;
                    }
                    Some(_) => {
                        sqlx::query(COUNT_RETRY).bind(job.0).execute(&mut *tx).await?;
                    }
                }
                tx.commit().await?;
                Ok(failed)
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::KeyStore for $store {
            async fn count_eligible_keys(&self, provider: $crate::domain::ProviderKind) -> $crate::store::Result<u64> {
                use $crate::store::sql::*;
                let n: i64 = sqlx::query_scalar(COUNT_ELIGIBLE_KEYS)
                    .bind(provider.as_str())
                    .fetch_one(&self.pool)
                    .await?;
                narrow("provider_keys", n)
            }

            async fn insert_key(
                &self,
                key: $crate::domain::NewKey,
            ) -> $crate::store::Result<$crate::domain::StoredKey> {
                self.write_key($crate::store::sql::INSERT_KEY, key).await
            }

            async fn upsert_config_key(
                &self,
                key: $crate::domain::NewKey,
            ) -> $crate::store::Result<$crate::domain::StoredKey> {
                self.write_key($crate::store::sql::UPSERT_CONFIG_KEY, key).await
            }

            async fn get_key(
                &self,
                id: $crate::domain::KeyId,
            ) -> $crate::store::Result<Option<$crate::domain::StoredKey>> {
                use $crate::store::sql::*;
                let row: Option<KeyRow> = sqlx::query_as(SELECT_KEY)
                    .bind(id.0)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(TryInto::try_into).transpose()
            }

            async fn list_keys(&self) -> $crate::store::Result<Vec<$crate::domain::StoredKey>> {
                use $crate::store::sql::*;
                let rows: Vec<KeyRow> = sqlx::query_as(LIST_KEYS).fetch_all(&self.pool).await?;
                rows.into_iter().map(TryInto::try_into).collect()
            }

            async fn set_key_enabled(
                &self,
                id: $crate::domain::KeyId,
                enabled: bool,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<Option<$crate::domain::StoredKey>> {
                use $crate::store::sql::*;
                let row: Option<KeyRow> = sqlx::query_as(SET_KEY_ENABLED)
                    .bind(id.0)
                    .bind(enabled)
                    .bind(now)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(TryInto::try_into).transpose()
            }

            async fn delete_key(&self, id: $crate::domain::KeyId) -> $crate::store::Result<bool> {
                use $crate::store::sql::*;
                Ok(sqlx::query(DELETE_KEY)
                    .bind(id.0)
                    .execute(&self.pool)
                    .await?
                    .rows_affected()
                    > 0)
            }

            async fn set_key_cooldown(
                &self,
                id: $crate::domain::KeyId,
                until: Option<chrono::DateTime<chrono::Utc>>,
                consecutive_failures: u32,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<()> {
                use $crate::store::sql::*;
                sqlx::query(SET_KEY_COOLDOWN)
                    .bind(id.0)
                    .bind(until)
                    .bind(i64::from(consecutive_failures))
                    .bind(now)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn retire_key(
                &self,
                id: $crate::domain::KeyId,
                reason: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<()> {
                use $crate::store::sql::*;
                sqlx::query(RETIRE_KEY)
                    .bind(id.0)
                    .bind(reason)
                    .bind(now)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn extend_group_cooldown(
                &self,
                provider: $crate::domain::ProviderKind,
                group: &str,
                until: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<()> {
                use $crate::store::sql::*;
                sqlx::query(EXTEND_GROUP_COOLDOWN)
                    .bind(provider.as_str())
                    .bind(group)
                    .bind(until)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn list_group_cooldowns(&self) -> $crate::store::Result<Vec<$crate::domain::GroupCooldown>> {
                use $crate::store::sql::*;
                let rows: Vec<GroupCooldownRow> = sqlx::query_as(LIST_GROUP_COOLDOWNS).fetch_all(&self.pool).await?;
                rows.into_iter().map(TryInto::try_into).collect()
            }
        }

        impl $store {
            async fn write_key(
                &self,
                sql: &'static str,
                key: $crate::domain::NewKey,
            ) -> $crate::store::Result<$crate::domain::StoredKey> {
                use $crate::store::sql::*;
                let (ciphertext, nonce) = match key.sealed {
                    Some(s) => (Some(s.ciphertext), Some(s.nonce)),
                    None => (None, None),
                };
                let row: KeyRow = sqlx::query_as(sql)
                    .bind(key.id.0)
                    .bind(key.provider.as_str())
                    .bind(&key.label)
                    .bind(key.origin.as_str())
                    .bind(&key.quota_group)
                    .bind(ciphertext)
                    .bind(nonce)
                    .bind(&key.fingerprint)
                    .bind(key.now)
                    .fetch_one(&self.pool)
                    .await?;
                row.try_into()
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::RetrievalStore for $store {
            async fn world_for_retrieval(
                &self,
                id: $crate::domain::WorldId,
                at_most: u64,
            ) -> $crate::store::Result<Option<($crate::domain::World, u64)>> {
                use $crate::store::sql::*;
                let row: Option<WorldCountRow> = sqlx::query_as(WORLD_FOR_RETRIEVAL)
                    .bind(id.0)
                    .bind(wide(at_most))
                    .fetch_optional(&self.pool)
                    .await?;
                match row {
                    None => Ok(None),
                    Some(row) => Ok(Some((
                        row.world.try_into()?,
                        narrow("manifest_entries", row.embedded)?,
                    ))),
                }
            }

            async fn chunks_by_points(
                &self,
                world: $crate::domain::WorldId,
                run: $crate::domain::RunId,
                points: &[uuid::Uuid],
            ) -> $crate::store::Result<Vec<$crate::domain::ChunkView>> {
                use $crate::store::sql::*;
                let mut found = Vec::with_capacity(points.len());
                // Bounded parameter lists: SQLite caps the number of parameters per statement.
                for batch in points.chunks(500) {
                    // Only generated `$n` placeholders are added to the constant text.
                    let sql = sqlx::AssertSqlSafe(format!("{CHUNKS_BY_POINTS}{}", in_list(1, batch.len())));
                    let mut query = sqlx::query_as::<_, ChunkViewRow>(sql);
                    for point in batch {
                        query = query.bind(*point);
                    }
                    for row in query.fetch_all(&self.pool).await? {
                        let view: $crate::domain::ChunkView = row.try_into()?;
                        if view.chunk.world_id == world && view.chunk.run_id == run {
                            found.push(view);
                        }
                    }
                }
                Ok(found)
            }

            async fn chunk_windows(
                &self,
                world: $crate::domain::WorldId,
                run: $crate::domain::RunId,
                windows: &[($crate::domain::SourceId, u32, u32)],
            ) -> $crate::store::Result<Vec<$crate::domain::ChunkView>> {
                use $crate::store::sql::*;
                let mut found: Vec<$crate::domain::ChunkView> = Vec::new();
                // Bounded statements: SQLite takes at most 500 branches in a compound select.
                for batch in windows.chunks(100) {
                    // Only generated `$n` placeholders are put into the constant text.
                    let sql = sqlx::AssertSqlSafe(window_union(3, batch.len()));
                    let mut query = sqlx::query_as::<_, ChunkViewRow>(sql).bind(world.0).bind(run.0);
                    for (source, from, to) in batch {
                        query = query.bind(source.0).bind(wide(*from)).bind(wide(*to));
                    }
                    for row in query.fetch_all(&self.pool).await? {
                        found.push(row.try_into()?);
                    }
                }
                // Windows of different batches may overlap.
                found.sort_by_key(|v| (v.chunk.source_id.0, v.chunk.chunk_number));
                found.dedup_by_key(|v| v.chunk.id);
                Ok(found)
            }

            async fn requeue_entries(
                &self,
                world: $crate::domain::WorldId,
                run: $crate::domain::RunId,
                chunks: &[$crate::domain::ChunkId],
                warning: &str,
                job: Option<$crate::domain::JobId>,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<Option<($crate::domain::JobId, u64)>> {
                use $crate::store::sql::*;
                if chunks.is_empty() {
                    return Ok(None);
                }
                let mut tx = self.pool.begin_with($begin).await?;
                // World first, then run, then job (the order every writer of these rows takes):
                // a source delete, which takes the world and then the source's entries and their
                // jobs, never waits on this one while holding what it waits for.
                lock_world_or_none!(tx, world);
                // Only into a run that is served or being built: a retired run is on its way
                // out, and work queued for it would leave points nothing uses.
                let run_status: Option<String> = sqlx::query_scalar(LOCK_RUN)
                    .bind(run.0)
                    .fetch_optional(&mut *tx)
                    .await?;
                if !matches!(run_status.as_deref(), Some("active" | "building")) {
                    tx.rollback().await?;
                    return Ok(None);
                }
                // The job the entries go to, its row locked (see the trait's documentation).
                let existing: Option<uuid::Uuid> = if run_status.as_deref() == Some("building") {
                    let reingest: Option<uuid::Uuid> = sqlx::query_scalar(LOCK_LIVE_REINGEST_JOB)
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
                    let given: Option<uuid::Uuid> = match job {
                        Some(job) => {
                            sqlx::query_scalar(LOCK_LIVE_JOB)
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
                        None => {
                            sqlx::query_scalar(LOCK_RUNNING_REPAIR_JOB)
                                .bind(world.0)
                                .bind(run.0)
                                .fetch_optional(&mut *tx)
                                .await?
                        }
                    }
                };
                let job = existing.unwrap_or_else(uuid::Uuid::new_v4);
                let (mut requeued, mut added, mut own_embedded, mut own_failed) = (0u64, 0u64, 0u64, 0u64);
                for chunk in chunks {
                    let prior: Option<(Option<uuid::Uuid>, String)> = sqlx::query_as(REQUEUE_CANDIDATE)
                        .bind(chunk.0)
                        .bind(world.0)
                        .bind(run.0)
                        .fetch_optional(&mut *tx)
                        .await?;
                    let Some((held_by, state)) = prior else { continue };
                    let done = sqlx::query(REQUEUE_ENTRY)
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
                    sqlx::query(ADD_JOB_TOTAL)
                        .bind(job)
                        .bind(wide(added))
                        .execute(&mut *tx)
                        .await?;
                    if own_embedded + own_failed > 0 {
                        sqlx::query(UNCOUNT_JOB_ENTRIES)
                            .bind(job)
                            .bind(wide(own_embedded))
                            .bind(wide(own_failed))
                            .execute(&mut *tx)
                            .await?;
                    }
                } else {
                    sqlx::query(INSERT_JOB)
                        .bind(job)
                        .bind(world.0)
                        .bind($crate::domain::JobKind::Repair.as_str())
                        .bind($crate::domain::JobStatus::Running.as_str())
                        .bind(run.0)
                        .bind(wide(requeued))
                        .bind(now)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(Some(($crate::domain::JobId(job), requeued)))
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::ReuseStore for $store {
            async fn find_reusable(
                &self,
                collection: &str,
                world: Option<$crate::domain::WorldId>,
                hashes: &[String],
            ) -> $crate::store::Result<Vec<(String, uuid::Uuid)>> {
                use $crate::store::sql::*;
                let mut found: Vec<(String, uuid::Uuid)> = Vec::new();
                let first = if world.is_some() { 3 } else { 2 };
                for batch in hashes.chunks(500) {
                    let base = if world.is_some() {
                        REUSABLE_IN_WORLD
                    } else {
                        REUSABLE_ANY_WORLD
                    };
                    // Only generated `$n` placeholders are added to the constant text.
                    let sql = sqlx::AssertSqlSafe(format!("{base}{}", in_list(first, batch.len())));
                    let mut query = sqlx::query_as::<_, (String, uuid::Uuid)>(sql).bind(collection);
                    if let Some(world) = world {
                        query = query.bind(world.0);
                    }
                    for hash in batch {
                        query = query.bind(hash);
                    }
                    for row in query.fetch_all(&self.pool).await? {
                        if !found.iter().any(|(h, _)| *h == row.0) {
                            found.push(row);
                        }
                    }
                }
                Ok(found)
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::RepairStore for $store {
            async fn world_runs(
                &self,
                world: $crate::domain::WorldId,
            ) -> $crate::store::Result<Vec<$crate::domain::RunInfo>> {
                use $crate::store::sql::*;
                let rows: Vec<(uuid::Uuid, String, String, i64, String, String)> = sqlx::query_as(WORLD_RUNS)
                    .bind(world.0)
                    .fetch_all(&self.pool)
                    .await?;
                rows.into_iter()
                    .map(|(id, provider, model, dimensions, collection, status)| {
                        Ok($crate::domain::RunInfo {
                            id: $crate::domain::RunId(id),
                            embedding: $crate::domain::EmbeddingProfile {
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

            async fn manifest_entries(
                &self,
                world: $crate::domain::WorldId,
                run: $crate::domain::RunId,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<Vec<$crate::domain::ManifestEntry>> {
                use $crate::store::sql::*;
                let rows: Vec<ManifestRow> = sqlx::query_as(RUN_MANIFEST)
                    .bind(world.0)
                    .bind(run.0)
                    .bind(now)
                    .fetch_all(&self.pool)
                    .await?;
                rows.into_iter().map(TryInto::try_into).collect()
            }

            async fn adopt_entries(
                &self,
                world: $crate::domain::WorldId,
                run: $crate::domain::RunId,
                chunks: &[$crate::domain::ChunkId],
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<(u64, Vec<$crate::domain::JobId>)> {
                use $crate::store::sql::*;
                let mut jobs: Vec<$crate::domain::JobId> = Vec::new();
                let mut adopted = 0u64;
                let mut tx = self.pool.begin_with($begin).await?;
                for chunk in chunks {
                    let job: Option<Option<uuid::Uuid>> = sqlx::query_scalar(ADOPT_ENTRY)
                        .bind(chunk.0)
                        .bind(world.0)
                        .bind(run.0)
                        .bind(now)
                        .fetch_optional(&mut *tx)
                        .await?;
                    if job.is_some() {
                        adopted += 1;
                    }
                    if let Some(Some(job)) = job {
                        sqlx::query(COUNT_ADOPTED).bind(job).execute(&mut *tx).await?;
                        let job = $crate::domain::JobId(job);
                        if !jobs.contains(&job) {
                            jobs.push(job);
                        }
                    }
                }
                tx.commit().await?;
                Ok((adopted, jobs))
            }

            async fn create_job(
                &self,
                world: $crate::domain::WorldId,
                run: $crate::domain::RunId,
                kind: $crate::domain::JobKind,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<$crate::domain::Job> {
                use $crate::store::sql::*;
                let id = uuid::Uuid::new_v4();
                sqlx::query(INSERT_JOB)
                    .bind(id)
                    .bind(world.0)
                    .bind(kind.as_str())
                    .bind($crate::domain::JobStatus::Running.as_str())
                    .bind(run.0)
                    .bind(0i64)
                    .bind(now)
                    .bind(now)
                    .execute(&self.pool)
                    .await?;
                let row: JobRow = sqlx::query_as(SELECT_JOB).bind(id).fetch_one(&self.pool).await?;
                row.into_job(Vec::new())
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::RunStore for $store {
            async fn begin_reingest(
                &self,
                run: $crate::store::NewRun,
                job: $crate::domain::JobId,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<$crate::domain::Job> {
                use $crate::store::sql::*;
                let mut tx = self.pool.begin_with($begin).await?;
                sqlx::query(INSERT_BUILDING_RUN)
                    .bind(run.id.0)
                    .bind(run.world.0)
                    .bind(run.embedding.provider.as_str())
                    .bind(&run.embedding.model)
                    .bind(wide(run.embedding.dimensions))
                    .bind(wide(run.chunking.max_tokens))
                    .bind(wide(run.chunking.overlap_tokens))
                    .bind(run.embedding.collection_name())
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(INSERT_JOB)
                    .bind(job.0)
                    .bind(run.world.0)
                    .bind($crate::domain::JobKind::Reingest.as_str())
                    .bind($crate::domain::JobStatus::Queued.as_str())
                    .bind(run.id.0)
                    .bind(0i64)
                    .bind(now)
                    // Started when its preparation is done and it becomes running.
                    .bind(None::<chrono::DateTime<chrono::Utc>>)
                    .execute(&mut *tx)
                    .await?;
                let row: JobRow = sqlx::query_as(SELECT_JOB).bind(job.0).fetch_one(&mut *tx).await?;
                tx.commit().await?;
                row.into_job(Vec::new())
            }

            async fn sources_missing_from_run(
                &self,
                world: $crate::domain::WorldId,
                run: $crate::domain::RunId,
            ) -> $crate::store::Result<Vec<($crate::domain::SourceId, u32)>> {
                use $crate::store::sql::*;
                let rows: Vec<(uuid::Uuid, i64)> = sqlx::query_as(SOURCES_MISSING_FROM_RUN)
                    .bind(world.0)
                    .bind(run.0)
                    .fetch_all(&self.pool)
                    .await?;
                rows.into_iter()
                    .map(|(id, book)| Ok(($crate::domain::SourceId(id), narrow("sources", book)?)))
                    .collect()
            }

            async fn add_run_chunks(
                &self,
                world: $crate::domain::WorldId,
                run: $crate::domain::RunId,
                job: $crate::domain::JobId,
                source: $crate::store::SourceChunks,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<u64> {
                use $crate::store::sql::*;
                let mut tx = self.pool.begin_with($begin).await?;
                let building: Option<String> = sqlx::query_scalar(LOCK_RUN)
                    .bind(run.0)
                    .fetch_optional(&mut *tx)
                    .await?;
                if building.as_deref() != Some("building") {
                    // The re-ingest was cancelled (or replaced): the run takes nothing more.
                    tx.rollback().await?;
                    return Ok(0);
                }
                let missing: Vec<(uuid::Uuid, i64)> = sqlx::query_as(SOURCES_MISSING_FROM_RUN)
                    .bind(world.0)
                    .bind(run.0)
                    .fetch_all(&mut *tx)
                    .await?;
                if !missing.iter().any(|(id, _)| *id == source.source.0) {
                    // Chunked meanwhile, or deleted: nothing to add.
                    tx.rollback().await?;
                    return Ok(0);
                }
                insert_chunks!(
                    tx,
                    world,
                    run,
                    source.source,
                    wide(source.book_number),
                    &source.chunks,
                    job,
                    now
                );
                let n = source.chunks.len() as u64;
                sqlx::query(ADD_JOB_TOTAL)
                    .bind(job.0)
                    .bind(wide(n))
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(n)
            }

            async fn finish_reingest(
                &self,
                job: $crate::domain::JobId,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<$crate::store::ReingestStep> {
                use $crate::store::ReingestStep;
                use $crate::store::sql::*;
                let Some(row) = sqlx::query_as::<_, JobRow>(SELECT_JOB)
                    .bind(job.0)
                    .fetch_optional(&self.pool)
                    .await?
                else {
                    return Ok(ReingestStep::NotDone);
                };
                let current = row.into_job(Vec::new())?;
                if current.kind != $crate::domain::JobKind::Reingest
                    || current.status != $crate::domain::JobStatus::Running
                {
                    return Ok(ReingestStep::NotDone);
                }
                let (world, run) = (current.world_id, current.run_id);
                let mut tx = self.pool.begin_with($begin).await?;
                let old: Option<uuid::Uuid> = sqlx::query_scalar(LOCK_WORLD)
                    .bind(world.0)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(old) = old else {
                    tx.rollback().await?;
                    return Ok(ReingestStep::NotDone);
                };
                // Judged again under locks (world, then run, then job, the order every writer
                // of these rows takes): the job read above may be stale. Another caller may
                // have switched the world already (the run is active now, and `old` is this
                // very run), or the job been paused or cancelled meanwhile. Locking the run
                // also keeps a source from being chunked into it between the checks below.
                let run_status: Option<String> = sqlx::query_scalar(LOCK_RUN)
                    .bind(run.0)
                    .fetch_optional(&mut *tx)
                    .await?;
                let job_status: Option<String> = sqlx::query_scalar(LOCK_JOB_STATUS)
                    .bind(job.0)
                    .fetch_optional(&mut *tx)
                    .await?;
                if run_status.as_deref() != Some("building")
                    || job_status.as_deref() != Some("running")
                    || old == run.0
                {
                    tx.rollback().await?;
                    return Ok(ReingestStep::NotDone);
                }
                let stranded = sqlx::query(ADOPT_STRANDED_PENDING)
                    .bind(world.0)
                    .bind(run.0)
                    .bind(job.0)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if stranded > 0 {
                    sqlx::query(ADD_JOB_TOTAL).bind(job.0).bind(wide(stranded)).execute(&mut *tx).await?;
                    tx.commit().await?;
                    return Ok(ReingestStep::NotDone);
                }
                // Every entry of the run counts, not only the job's own: the run is what the
                // world will serve.
                let pending: bool = sqlx::query_scalar(RUN_HAS_PENDING)
                    .bind(world.0)
                    .bind(run.0)
                    .fetch_one(&mut *tx)
                    .await?;
                if pending {
                    tx.rollback().await?;
                    return Ok(ReingestStep::NotDone);
                }
                let collection: String = sqlx::query_scalar(SELECT_RUN_COLLECTION)
                    .bind(run.0)
                    .fetch_one(&mut *tx)
                    .await?;
                let failed: bool = sqlx::query_scalar(RUN_HAS_FAILED)
                    .bind(world.0)
                    .bind(run.0)
                    .fetch_one(&mut *tx)
                    .await?;
                if failed {
                    sqlx::query(SET_JOB_STATUS)
                        .bind(job.0)
                        .bind($crate::domain::JobStatus::Running.as_str())
                        .bind($crate::domain::JobStatus::Failed.as_str())
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                    sqlx::query(SET_RUN_STATUS)
                        .bind(run.0)
                        .bind($crate::domain::RunStatus::Retired.as_str())
                        .execute(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    return Ok(ReingestStep::Failed {
                        world,
                        run,
                        collection,
                    });
                }
                let missing: Vec<(uuid::Uuid, i64)> = sqlx::query_as(SOURCES_MISSING_FROM_RUN)
                    .bind(world.0)
                    .bind(run.0)
                    .fetch_all(&mut *tx)
                    .await?;
                if !missing.is_empty() {
                    tx.rollback().await?;
                    let sources = missing
                        .into_iter()
                        .map(|(id, book)| Ok(($crate::domain::SourceId(id), narrow("sources", book)?)))
                        .collect::<$crate::store::Result<Vec<_>>>()?;
                    return Ok(ReingestStep::MissingSources { world, run, sources });
                }
                let old_collection: String = sqlx::query_scalar(SELECT_RUN_COLLECTION)
                    .bind(old)
                    .fetch_one(&mut *tx)
                    .await?;
                sqlx::query(SWITCH_WORLD)
                    .bind(world.0)
                    .bind(run.0)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(SET_RUN_STATUS)
                    .bind(old)
                    .bind($crate::domain::RunStatus::Retired.as_str())
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(SET_RUN_STATUS)
                    .bind(run.0)
                    .bind($crate::domain::RunStatus::Active.as_str())
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(COMPLETE_RUN_JOBS)
                    .bind(world.0)
                    .bind(old)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                let completed = sqlx::query(SET_JOB_STATUS)
                    .bind(job.0)
                    .bind($crate::domain::JobStatus::Running.as_str())
                    .bind($crate::domain::JobStatus::Completed.as_str())
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                if completed.rows_affected() != 1 {
                    // Cannot happen under the job's lock; never switch without completing it.
                    tx.rollback().await?;
                    return Ok(ReingestStep::NotDone);
                }
                tx.commit().await?;
                Ok(ReingestStep::Switched {
                    world,
                    old_run: $crate::domain::RunId(old),
                    old_collection,
                })
            }

            async fn run_chunking(
                &self,
                job: $crate::domain::JobId,
            ) -> $crate::store::Result<Option<$crate::domain::ChunkingProfile>> {
                use $crate::store::sql::*;
                let row: Option<(i64, i64)> = sqlx::query_as(JOB_RUN_CHUNKING)
                    .bind(job.0)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(|(max, overlap)| {
                    Ok($crate::domain::ChunkingProfile {
                        max_tokens: narrow("runs", max)?,
                        overlap_tokens: narrow("runs", overlap)?,
                    })
                })
                .transpose()
            }

            async fn retire_run(&self, run: $crate::domain::RunId) -> $crate::store::Result<bool> {
                use $crate::store::sql::*;
                let done = sqlx::query(RETIRE_BUILDING_RUN).bind(run.0).execute(&self.pool).await?;
                Ok(done.rows_affected() > 0)
            }

            async fn delete_run(&self, run: $crate::domain::RunId) -> $crate::store::Result<()> {
                use $crate::store::sql::*;
                sqlx::query(DELETE_RUN).bind(run.0).execute(&self.pool).await?;
                Ok(())
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn kind(&self) -> &'static str {
                $kind
            }

            async fn ping(&self) -> $crate::store::Result<()> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            async fn close(&self) {
                self.pool.close().await;
            }
        }
    };
}

pub(crate) use impl_store;
pub(crate) use insert_chunks;
pub(crate) use lock_world_or_none;

impl JobRow {
    pub(super) fn id_uuid(&self) -> Uuid {
        self.id
    }
}
