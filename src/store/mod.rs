//! The relational store: the authority for worlds, sources, chunk text, manifests, jobs and
//! provider keys (Qdrant is only an index over it).
//!
//! The services see narrow traits ([`WorldStore`], [`SourceStore`], [`JobStore`],
//! [`KeyStore`], …) bundled as [`Store`]; two real implementations sit behind them, SQLite
//! ([`sqlite::SqliteStore`], the embedded default) and PostgreSQL ([`postgres::PgStore`]), each
//! with its own versioned migrations (`migrations/sqlite`, `migrations/postgres`). One
//! conformance suite (`tests/api/store_conformance.rs`) runs against both.
//!
//! # How the two backends share the code
//!
//! Both stores are one generic struct, `SqlStore<DB>` (`backend.rs`), over `sqlx::Sqlite` or
//! `sqlx::Postgres`; `SqliteStore` and `PgStore` are its two instances. Every store trait is
//! implemented once, for `SqlStore<DB: Backend>`, and every query is written once, in the
//! function that runs it (a string literal, or a `const` just above it): the dialects agree on
//! everything quarry asks of them (`$n` parameters, `RETURNING`, `COUNT(*) FILTER`,
//! `UPDATE … FROM`, `ON CONFLICT`, cascading foreign keys). `Backend`, our trait implemented for
//! the two sqlx databases, carries the few pieces that differ:
//!
//! - the statement that opens a transaction: `BEGIN IMMEDIATE` on SQLite (take the write lock
//!   at once), `BEGIN` on PostgreSQL;
//! - the end of the claim statement: `FOR UPDATE OF m SKIP LOCKED` on PostgreSQL, nothing on
//!   SQLite (its write lock already keeps claimers apart);
//! - the kind name [`Store::kind`] answers;
//!
//! and, as supertraits, the sqlx bounds the generic code needs (the types it binds and reads,
//! executors for `&Pool` and a transaction's connection), so `DB: Backend` is the only bound
//! the implementations state. Connection setup and migrations stay per backend, in
//! `sqlite.rs` and `postgres.rs`.
//!
//! # Files
//!
//! - `backend.rs`: `Backend`, `SqlStore`, and [`Store`] (kind, ping, close).
//! - `worlds.rs`: [`WorldStore`], and the world row lock other writers take first.
//! - `sources.rs`: [`SourceStore`] (sources, chunks, manifest entries), and the multi-row insert
//!   of chunks and their entries that re-ingest shares.
//! - `jobs.rs`: [`JobStore`] (jobs, events), and the statements on a job's row the others share.
//! - `work.rs`: [`WorkStore`], the leased embedding queue.
//! - `keys.rs`: [`KeyStore`], provider keys and quota-group cooldowns.
//! - `cluster.rs`: [`ClusterStore`], the replica registry and the budgets replicas share.
//! - `ops.rs`: [`OpsStore`], what `/metrics` reads when scraped.
//! - `webhooks.rs`: [`WebhookStore`], webhook subscriptions and their deliveries (outbox and log).
//! - `tokens.rs`: [`TokenStore`], API tokens (digests of their secrets, scopes, world grants).
//! - `audit.rs`: [`AuditStore`], the audit log of administrative actions.
//! - `runs.rs`: [`RunStore`] (re-ingest's runs) and [`RepairStore`].
//! - `retrieval.rs`: [`RetrievalStore`] and [`ReuseStore`].
//! - `rows.rs`: the row structs (`sqlx::FromRow`) and their conversions to domain types.
//! - `vectors.rs`: the bytes a kept vector is stored as (`chunk_vectors`).
//! - `sqlite.rs`, `postgres.rs`: connecting, and the migrations.

mod audit;
mod backend;
mod cluster;
mod evals;
mod idempotency;
mod jobs;
mod keys;
mod ops;
mod parents;
#[cfg(test)]
mod plans;
pub mod postgres;
mod retrieval;
mod rows;
mod runs;
mod secrets;
mod sources;
pub mod sqlite;
mod tokens;
mod vectors;
mod webhooks;
mod work;
mod worlds;

/// The text of the statements on the hot paths (claims, retrieval's verification, listings,
/// counts), as the store runs them: `examples/bench_scale` prints their query plans at a million
/// chunks from these, not from copies that could drift. Not an API.
#[doc(hidden)]
pub mod statements {
    pub use super::backend::shown;
    pub use super::jobs::{FINISH_IF_DONE, JOB_ERRORS};
    pub use super::parents::parents_over_union;
    pub use super::retrieval::{
        CHUNK_WINDOW, CHUNKS_BY_POINTS, HITS_BY_POINTS, OUTLINE_WINDOW, REUSABLE, REUSABLE_TAIL, TEXT_WINDOW,
        WORLD_FOR_RETRIEVAL, window_union,
    };
    pub use super::sources::{LIST_CHUNKS, LIST_CHUNKS_TOTAL, LIST_SOURCES, OF_SOURCE, SOURCE_COUNTS};
    pub use super::work::{CLAIM, CLAIM_OPEN, CLAIM_READ, COMPLETE_MARK, complete_mark};
    pub use super::worlds::WORLD_STATS;
}

use std::sync::Arc;

use async_trait::async_trait;

use chrono::{DateTime, Utc};

use crate::domain::{ApiToken, TokenCredentials, TokenId, Waiting, Window};
use crate::domain::{Attempt, Delivery, Webhook, WebhookId};
use crate::domain::{AuditAction, AuditEvent, NewAuditEvent};
use crate::domain::{BudgetDraw, Drawn, Replica, ReplicaBeat};
use crate::domain::{
    ChunkId, ChunkOutline, ChunkPage, ChunkView, EmbeddedVector, GroupCooldown, Job, JobEvent, JobEventKind, JobId,
    JobKind, JobStatus, KeptPoint, KeyId, ManifestEntry, NewChunk, NewKey, NewParent, NewSource, NewWorld, Parent,
    ProviderKind, RunId, RunInfo, Source, SourceCounts, SourceDeletion, SourceDetails, SourceId, SourceKey, SourceSize,
    StoredKey, WorkItem, World, WorldId, WorldStats,
};
use crate::domain::{
    EvalRun, EvalRunId, EvalRunStatus, EvalSet, EvalSetId, EvalSetSummary, GateState, ItemRecord, MeasuredIndex,
    NewGate, ReingestGate,
};

/// Errors from a store backend.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database could not be reached, the connection broke, or the database said "not now"
    /// (busy, locked, shutting down, out of connections): 503 upstream, worth a retry.
    #[error("store unavailable")]
    Unavailable(#[source] sqlx::Error),
    /// A row broke an invariant the schema does not enforce (e.g. an unknown enum string).
    #[error("corrupt row in `{table}`: {reason}")]
    Corrupt { table: &'static str, reason: String },
    /// A unique constraint refused the write (e.g. the same provider key twice).
    #[error("duplicate row")]
    Duplicate(#[source] sqlx::Error),
    /// Anything else the database reported.
    #[error("store query failed")]
    Query(#[source] sqlx::Error),
    #[error("applying migrations failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("preparing the database location failed: {0}")]
    Setup(String),
    /// The world switched to another run between reading it and writing to it (a re-ingest
    /// finished meanwhile): what was prepared for the old run is refused; prepare it again.
    #[error("the world switched to another run meanwhile")]
    RunChanged,
    /// A conditional write found the source at another version.
    #[error("the source is at version {current}")]
    VersionMismatch { current: u32 },
    /// Work around the store failed in a way no input explains (a panicked chunking task).
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<sqlx::Error> for Error {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => Error::Unavailable(err),
            sqlx::Error::Database(ref db) if db.is_unique_violation() => Error::Duplicate(err),
            sqlx::Error::Database(ref db) if transient(db.as_ref()) => Error::Unavailable(err),
            other => Error::Query(other),
        }
    }
}

/// Database errors that mean "not now" rather than "never".
fn transient(db: &dyn sqlx::error::DatabaseError) -> bool {
    let Some(code) = db.code() else {
        return false;
    };
    if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
        // An extended result code; its low byte is the primary one: SQLITE_BUSY (5) after the
        // busy timeout ran out, or SQLITE_LOCKED (6).
        return code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6));
    }
    // PostgreSQL SQLSTATE: connection exceptions (08), insufficient resources (53, e.g. too
    // many connections), the server shutting down or starting (57P01-57P03), and the two
    // outcomes of concurrent transactions that a retry resolves (40001, 40P01).
    code.starts_with("08")
        || code.starts_with("53")
        || matches!(&*code, "57P01" | "57P02" | "57P03" | "40001" | "40P01")
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Worlds and their lifecycle.
#[async_trait]
pub trait WorldStore: Send + Sync {
    /// Inserts the world and its first (active) run in one transaction.
    async fn create_world(&self, world: NewWorld) -> Result<World>;
    async fn get_world(&self, id: WorldId) -> Result<Option<World>>;
    /// All worlds, oldest first.
    /// Worlds by creation, the rows of `window`.
    async fn list_worlds(&self, window: Window) -> Result<Vec<World>>;
    /// Counts over the world's active run.
    async fn world_stats(&self, id: WorldId) -> Result<WorldStats>;
    /// Returns the updated world, `None` if it does not exist.
    async fn rename_world(&self, id: WorldId, name: &str, now: chrono::DateTime<chrono::Utc>) -> Result<Option<World>>;
    /// Deletes the world with its runs, sources, chunks, manifest entries, jobs and job events
    /// in one transaction. Returns whether it existed.
    async fn delete_world(&self, id: WorldId) -> Result<bool>;
    /// Marks the world hybrid: points written from now on carry BM25 vectors too. `None` when
    /// there is no such world.
    async fn enable_hybrid(&self, id: WorldId, now: DateTime<Utc>) -> Result<Option<World>>;
    /// Every collection any run of the world writes to (more than one while a re-ingest into a
    /// new profile is under way).
    async fn world_collections(&self, id: WorldId) -> Result<Vec<String>>;
    /// Folds the counts a backend keeps as deltas (PostgreSQL, migration 0014) into one row per
    /// run and state, for every run that has more; each replica's heartbeat calls it, so a
    /// world's counts stay a handful of rows to read, and vacuums the table (the folded rows
    /// stay behind as dead rows until then). Nothing to do on SQLite.
    async fn fold_counts(&self) -> Result<()>;
}

/// Sources, their chunks and manifest entries.
#[async_trait]
pub trait SourceStore: Send + Sync {
    /// Stores a source with its chunks (into the world's active run), one pending manifest entry
    /// per chunk and an `ingest` job, all in one transaction. `book_number` is assigned here.
    async fn add_source(&self, source: &NewSource, chunks: Vec<NewChunk>, job: JobId) -> Result<(Source, Job)>;
    async fn get_source(&self, world: WorldId, id: SourceId) -> Result<Option<Source>>;
    /// Sources of a world by book number.
    async fn list_sources(&self, world: WorldId, window: Window) -> Result<Vec<Source>>;
    /// Chunk state counts of one source in the world's active run.
    async fn source_counts(&self, world: WorldId, id: SourceId) -> Result<SourceCounts>;
    /// The stored text of a source; `None` when the world has no such source.
    async fn source_text(&self, world: WorldId, id: SourceId) -> Result<Option<String>>;
    /// Up to `limit` chunks of a source in the world's active run from position `offset`, in
    /// chunk-number order, with their manifest entries' state, and the source's chunk total.
    async fn list_chunks(&self, world: WorldId, id: SourceId, offset: u64, limit: u32) -> Result<ChunkPage>;
    /// Deletes a source with its chunks and manifest entries (in every run) in one transaction;
    /// `None` when the world has no such source. Jobs stay, kept coherent: an unfinished job
    /// drops the deleted pending entries from its `total`; one left with no entry at all is
    /// `cancelled`, and a running one left with nothing pending finishes as the workers would
    /// finish it (`completed`, or `failed` when failed entries remain). Finished jobs keep their
    /// counters as history. The world's `next_book_number` is untouched: numbers are not reused.
    /// With `expect`, only a source at that version: `VersionMismatch` otherwise.
    async fn delete_source(
        &self,
        world: WorldId,
        id: SourceId,
        expect: Option<u32>,
        now: DateTime<Utc>,
    ) -> Result<Option<SourceDeletion>>;
    /// The source of `world` that carries `key`.
    async fn source_by_key(&self, world: WorldId, key: &SourceKey) -> Result<Option<Source>>;
    /// Stages a new version of source `stage.source` in one transaction: a hidden source row
    /// (`stage.new`, its id the staged version's) with its chunks, pending entries and a
    /// `replace` job. A staged version of the source not switched yet is superseded: its job
    /// cancelled (with a `superseded` event) and its rows deleted; the caller deletes its
    /// points. Refused when the source's version is not `stage.expect` (if given), while the
    /// world is re-ingested, and for the world's previous run (`RunChanged`).
    async fn stage_version(&self, stage: &StageVersion, chunks: Vec<NewChunk>, job: JobId) -> Result<Staging>;
    /// The staged version a running replace job `job` builds, with its chunks' state; `None`
    /// when the job is not running or has no staged version.
    async fn staged_version(&self, job: JobId) -> Result<Option<StagedVersion>>;
    /// Switches a source to the version replace job `job` staged, in one transaction: the old
    /// version's chunks, entries and parents are deleted, the staged ones become the source's,
    /// its text and details are the new version's, its version goes up by one, and the job
    /// completes with a `replaced` event. `None` (nothing done) unless the job is running with
    /// every entry embedded.
    async fn switch_version(&self, job: JobId, now: DateTime<Utc>) -> Result<Option<Switched>>;
    /// Deletes the staged version of a replace job that ended without switching (cancelled);
    /// returns the staged id, whose points the caller deletes.
    async fn discard_version(&self, job: JobId) -> Result<Option<SourceId>>;
}

/// A new version of a source to stage ([`SourceStore::stage_version`]).
#[derive(Clone, Debug)]
pub struct StageVersion {
    /// The source it will become.
    pub source: SourceId,
    /// The version the caller saw (`If-Match`); `None`: whatever it is.
    pub expect: Option<u32>,
    /// The staged row: its own id, the world's active run, the new text and details.
    pub new: NewSource,
}

/// What [`SourceStore::stage_version`] did.
#[derive(Clone, Debug)]
pub enum Staging {
    Staged {
        /// The source as it now reads (still the old version, with `pending` set).
        source: Box<Source>,
        job: Box<Job>,
        /// A staged version superseded by this one (its job cancelled), whose points the
        /// caller deletes.
        superseded: Option<SourceId>,
    },
    /// The world has no such source.
    Missing,
    /// The source is at another version than the one expected.
    VersionMismatch { current: u32 },
    /// A re-ingest is building the world's next run.
    Reingesting,
}

/// A staged version as its replace job's completion reads it.
#[derive(Clone, Debug)]
pub struct StagedVersion {
    pub world: WorldId,
    pub run: RunId,
    pub collection: String,
    pub source: SourceId,
    pub staged: SourceId,
    /// The source's book number, which the staged chunks take at the switch.
    pub book_number: u32,
    /// The staged chunks' points.
    pub points: Vec<uuid::Uuid>,
    pub pending: u64,
    pub failed: u64,
}

/// What [`SourceStore::switch_version`] did.
#[derive(Clone, Debug)]
pub struct Switched {
    pub world: WorldId,
    pub source: SourceId,
    pub version: u32,
    /// The old version's points, to delete.
    pub old_points: Vec<uuid::Uuid>,
}

/// Jobs and their event history.
#[async_trait]
pub trait JobStore: Send + Sync {
    async fn get_job(&self, id: JobId) -> Result<Option<Job>>;
    /// Jobs of a world, newest first.
    /// Jobs of `world` newest first, those with one of `statuses` (all when empty), the rows of
    /// `window`.
    async fn list_jobs(&self, world: WorldId, statuses: &[JobStatus], window: Window) -> Result<Vec<Job>>;
    /// Moves a job to `to` if its status is one of `from` (setting `finished_at` for terminal
    /// statuses). Returns the updated job, or `None` when the job is missing or in another
    /// status (the caller tells the two apart).
    async fn transition_job(
        &self,
        id: JobId,
        from: &[JobStatus],
        to: JobStatus,
        now: DateTime<Utc>,
    ) -> Result<Option<Job>>;
    /// Completes (or fails, when entries failed) a running job with no pending entry left.
    /// Returns the job when this call finished it.
    async fn finish_job_if_done(&self, id: JobId, now: DateTime<Utc>) -> Result<Option<Job>>;
    /// A job's status alone (`None`: no such job): cheaper than [`JobStore::get_job`], which
    /// also reads the job's failed chunks.
    async fn job_status(&self, id: JobId) -> Result<Option<JobStatus>>;
    /// Running ingest and re-ingest jobs with no pending entry (at most 100): nothing is left
    /// for a worker to claim, so only a completion step ends them. Repair jobs are left out:
    /// one has nothing pending while its reconciliation runs, and finishes itself after it.
    async fn running_jobs_with_nothing_pending(&self) -> Result<Vec<JobId>>;
    /// Puts job `id`'s failed entries (those in a run the world serves or is building) back in
    /// the queue: pending, attempts and errors cleared, due at once. The job's `failed` count
    /// drops by as many and a failed job runs again (its `status` event written with the
    /// change). A cancelled job is refused, and so is a failed re-ingest (its run was retired).
    async fn retry_failed(&self, id: JobId, now: DateTime<Utc>) -> Result<Retry>;
    /// Records why running job `id` is not moving (`None`: it is not waiting). A job that is not
    /// running keeps nothing.
    async fn set_job_waiting(&self, id: JobId, waiting: Option<&Waiting>) -> Result<()>;
    /// The failed entries of `world` in runs it serves or is building, in reading order.
    async fn failed_entries(&self, world: WorldId) -> Result<Vec<FailedEntry>>;
    /// Appends an event; returns its id.
    async fn append_job_event(&self, job: JobId, kind: JobEventKind, data: &str, now: DateTime<Utc>) -> Result<i64>;
    /// Events of a job with id greater than `after`, oldest first.
    async fn job_events_after(&self, job: JobId, after: i64, limit: u32) -> Result<Vec<JobEvent>>;
}

/// The chunks waiting for one world's provider.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueDepth {
    pub world: WorldId,
    /// The provider of the run the chunks belong to.
    pub provider: String,
    pub pending: u64,
    /// When the oldest of them began waiting (its job's creation).
    pub oldest: Option<DateTime<Utc>>,
}

/// What operations read: counts for `/metrics`.
#[async_trait]
pub trait OpsStore: Send + Sync {
    /// Jobs per (kind, status).
    async fn job_counts(&self) -> Result<Vec<(String, String, u64)>>;
    /// Pending chunks per world and provider.
    async fn queue_depth(&self) -> Result<Vec<QueueDepth>>;
}

/// The replicas working on this store, and the provider budgets they share (see `cluster.rs`).
#[async_trait]
pub trait ClusterStore: Send + Sync {
    /// Writes (or renews) a replica's row, stamped with the store's clock.
    async fn heartbeat(&self, beat: &ReplicaBeat) -> Result<()>;
    /// Every replica with a row, oldest first, with the age of its last heartbeat.
    async fn list_replicas(&self) -> Result<Vec<Replica>>;
    /// Deletes replica `id` if its last heartbeat is older than `dead_after_s`, and gives every
    /// entry its workers still hold back to the queue, due at once. `None`: it is alive (or
    /// another replica reaped it first); else how many entries were given back.
    async fn reap_replica(&self, id: &str, dead_after_s: f64, now: DateTime<Utc>) -> Result<Option<u64>>;
    /// Deletes replica `id`'s row (it is stopping).
    async fn leave(&self, id: &str) -> Result<()>;
    /// Draws from a shared budget, atomically: granted, or refused with the wait.
    async fn draw_budget(&self, draw: &BudgetDraw) -> Result<Drawn>;
    /// Forgets per-day spending of days before `before`. Returns how many rows went.
    async fn forget_budget_days(&self, before: &str) -> Result<u64>;
}

/// Evaluation test sets, per world (deleted with it).
#[async_trait]
pub trait EvalStore: Send + Sync {
    async fn insert_eval_set(&self, set: &EvalSet) -> Result<()>;
    async fn get_eval_set(&self, world: WorldId, id: EvalSetId) -> Result<Option<EvalSet>>;
    /// Whether `world` has test set `id` (its items not read).
    async fn eval_set_exists(&self, world: WorldId, id: EvalSetId) -> Result<bool>;
    /// A world's test sets by creation, the rows of `window`, their items counted.
    async fn list_eval_sets(&self, world: WorldId, window: Window) -> Result<Vec<EvalSetSummary>>;
    async fn count_eval_sets(&self, world: WorldId) -> Result<u64>;
    /// Replaces a test set's name and items (and `updated_at`); false when there was none.
    async fn replace_eval_set(&self, set: &EvalSet) -> Result<bool>;
    async fn delete_eval_set(&self, world: WorldId, id: EvalSetId) -> Result<bool>;

    async fn insert_eval_run(&self, run: &EvalRun) -> Result<()>;
    /// A run with its items and scores.
    async fn get_eval_run(&self, world: WorldId, id: EvalRunId) -> Result<Option<EvalRun>>;
    /// A test set's runs by creation, the rows of `window`: `items` and `scores` left empty
    /// (`EvalRunProgress` counts them).
    async fn list_eval_runs(&self, eval: EvalSetId, window: Window) -> Result<Vec<(EvalRun, EvalRunProgress)>>;
    /// A run's status and how far it got, without its items.
    async fn eval_run_progress(&self, id: EvalRunId) -> Result<Option<(EvalRunStatus, EvalRunProgress)>>;
    /// A world's runs not yet ended (queued or running).
    async fn count_open_eval_runs(&self, world: WorldId) -> Result<u64>;
    async fn count_eval_runs(&self, world: WorldId) -> Result<u64>;
    /// Holds the oldest run that is queued, or running with its lease run out (its process
    /// stopped), for `owner` during `lease_s` seconds: `running`, `attempts` one more.
    async fn claim_eval_run(&self, owner: &str, lease_s: f64) -> Result<Option<EvalRun>>;
    /// Writes the scores so far (and the index measured, the first time) and renews the lease;
    /// false when `owner` no longer holds the run (cancelled, deleted, taken over).
    async fn save_eval_scores(
        &self,
        id: EvalRunId,
        owner: &str,
        scores: &[ItemRecord],
        measured: &MeasuredIndex,
        lease_s: f64,
    ) -> Result<bool>;
    /// Ends a run `owner` holds (completed or failed, with an error); false when it does not.
    async fn finish_eval_run(
        &self,
        id: EvalRunId,
        owner: &str,
        status: EvalRunStatus,
        error: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool>;
    /// Lets go of a run without ending it (the process is stopping): the next claim takes it
    /// up at once.
    async fn release_eval_run(&self, id: EvalRunId, owner: &str) -> Result<()>;
    /// Cancels a run not yet ended; false when there is none such.
    async fn cancel_eval_run(&self, world: WorldId, id: EvalRunId, at: DateTime<Utc>) -> Result<bool>;
    async fn delete_eval_run(&self, world: WorldId, id: EvalRunId) -> Result<bool>;

    /// A re-ingest's gate, if it has one.
    async fn get_gate(&self, job: JobId) -> Result<Option<ReingestGate>>;
    /// The gates that need the runner: `evaluating` ones (to decide once both runs ended), and
    /// open ones whose re-ingest ended without them (to close) — each with whether its job ended.
    async fn gates_to_settle(&self) -> Result<Vec<(ReingestGate, bool)>>;
    /// Moves a gate from one of `from` to `to.state` (with the figures and reason given), and
    /// cancels its runs not yet ended when the new state is final; false when the gate was not
    /// in one of `from` (another hand decided first).
    async fn decide_gate(
        &self,
        job: JobId,
        from: &[GateState],
        to: GateDecision<'_>,
        at: DateTime<Utc>,
    ) -> Result<bool>;
}

/// A gate's new state, with what decided it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GateDecision<'a> {
    pub state: GateState,
    pub before: Option<f64>,
    pub after: Option<f64>,
    pub reason: Option<&'a str>,
}

/// How far an evaluation run got: items scored of all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EvalRunProgress {
    pub done: u32,
    pub total: u32,
}

/// Webhook subscriptions and their deliveries. Deliveries are written by the store itself
/// (triggers on `jobs`), in the statement that ends a job or makes it wait.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    async fn insert_webhook(&self, hook: &Webhook) -> Result<()>;
    async fn get_webhook(&self, id: WebhookId) -> Result<Option<Webhook>>;
    /// Subscriptions by creation, the rows of `window`.
    async fn list_webhooks(&self, window: Window) -> Result<Vec<Webhook>>;
    async fn count_webhooks(&self) -> Result<u64>;
    /// Deletes a subscription and its deliveries; false when there was none.
    async fn delete_webhook(&self, id: WebhookId) -> Result<bool>;
    /// Holds up to `limit` due pending deliveries that nobody else holds for `owner`, for
    /// `lease_s` seconds, oldest due first.
    async fn claim_deliveries(&self, owner: &str, limit: u32, lease_s: f64) -> Result<Vec<Delivery>>;
    /// Records an attempt at a delivery `owner` holds (and lets it go): delivered, due again in
    /// `retry_in_s`, or failed for good. False when `owner` no longer held it.
    async fn record_attempt(&self, id: i64, owner: &str, attempt: &Attempt) -> Result<bool>;
    /// A subscription's deliveries, newest first, the rows of `window`.
    async fn list_deliveries(&self, webhook: WebhookId, window: Window) -> Result<Vec<Delivery>>;
    /// Forgets settled (delivered or failed) deliveries older than `older_than_s`; returns how many.
    async fn forget_deliveries(&self, older_than_s: f64) -> Result<u64>;
}

/// Which table a sealed secret is stored in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretKind {
    ProviderKey,
    Webhook,
}

/// A secret as stored: its row and its sealed bytes (the row id is the associated data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedRow {
    pub kind: SecretKind,
    pub id: uuid::Uuid,
    pub sealed: crate::crypto::Sealed,
}

/// The secrets sealed with the master key, for its rotation, and the value that checks it.
#[async_trait]
pub trait SecretStore: Send + Sync {
    /// The check value, if one was stored.
    async fn master_key_check(&self) -> Result<Option<crate::crypto::Sealed>>;
    /// Stores the check value unless one is there; whether it was stored.
    async fn set_master_key_check(&self, check: &crate::crypto::Sealed) -> Result<bool>;
    /// Every sealed secret: provider keys (those with a secret), then webhook signing secrets.
    async fn sealed_secrets(&self) -> Result<Vec<SealedRow>>;
    /// In one transaction, writes `resealed` over `expected` (the same rows, in order) and the
    /// new check value. `false`, and nothing changed, when any row differs from what was read
    /// or a secret was added since.
    async fn reseal(
        &self,
        expected: &[SealedRow],
        resealed: &[SealedRow],
        check: &crate::crypto::Sealed,
    ) -> Result<bool>;
}

/// What holds an `Idempotency-Key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Idempotent {
    /// Nothing did: it is now reserved for this request, which records its answer or releases it.
    Reserved,
    /// A request with the same key and another fingerprint.
    Mismatch,
    /// A request with the same fingerprint is still running.
    InProgress,
    /// The first request's answer.
    Done { status: u16, response: String },
}

/// `Idempotency-Key`s of source writes, per world.
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Reserves `key` in `world` for a request with `fingerprint`, or says what holds it.
    /// Answers expire after `keep_s`; a reservation never answered is dropped after
    /// `abandoned_s`; past `max_per_world` keys in a world the oldest are forgotten.
    async fn reserve_idempotency(
        &self,
        world: WorldId,
        key: &str,
        fingerprint: &str,
        keep_s: f64,
        abandoned_s: f64,
        max_per_world: u32,
    ) -> Result<Idempotent>;
    /// Keeps the answer of the request that reserved `key`.
    async fn record_idempotency(&self, world: WorldId, key: &str, status: u16, response: &str) -> Result<()>;
    /// Lets go of a reservation whose request failed, so that a retry runs again.
    async fn release_idempotency(&self, world: WorldId, key: &str) -> Result<()>;
}

/// The embedding queue: manifest entries claimed with leases, so several workers and several
/// processes can share it safely. Expired leases count as pending again.
#[async_trait]
pub trait WorkStore: Send + Sync {
    /// Leases up to `limit` pending entries of one running job (the job claimed least
    /// recently, so work rotates between jobs and worlds) to `owner` until `lease_until`.
    async fn claim_work(
        &self,
        owner: &str,
        limit: u32,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<WorkItem>>;
    /// Marks leased entries embedded with the text hash their vector was made from — only if
    /// `owner` still holds them and their job is still running under `run` — and keeps each
    /// marked entry's vector (replacing one kept before), in the same transaction. Adds
    /// `embedded` (and `reused`) to the job's counters. Returns how many were marked.
    async fn complete_work(
        &self,
        owner: &str,
        job: JobId,
        run: RunId,
        done: &[EmbeddedVector],
        reused: u64,
        now: DateTime<Utc>,
    ) -> Result<u64>;
    /// Gives leased entries back without spending an attempt (rate limits, shutdown); they may
    /// be claimed again from `not_before`. Counts `rate_limited` on the job when asked.
    async fn release_work(
        &self,
        owner: &str,
        job: JobId,
        chunks: &[ChunkId],
        not_before: Option<DateTime<Utc>>,
        rate_limited: bool,
        now: DateTime<Utc>,
    ) -> Result<()>;
    /// Gives back the entries of `chunks` that `owner` still holds, due at once (a worker
    /// stopping with its claim: another process, or this one after a restart, takes them without
    /// waiting for the lease to run out). Entries given back with a "not before" time are not
    /// held, so they keep it. Returns how many were given back.
    async fn release_owner(&self, owner: &str, chunks: &[ChunkId], now: DateTime<Utc>) -> Result<u64>;
    /// Records why pending `chunks` went back to the queue without spending an attempt (a
    /// provider outage): their `last_error`, shown in the chunk listing until they are embedded.
    async fn note_error(&self, chunks: &[ChunkId], code: &str, message: &str, now: DateTime<Utc>) -> Result<()>;
    /// Extends the leases `owner` still holds on `chunks` to `until` (a worker's heartbeat while
    /// it works on its claim). By the claim's ids, not by owner: no index names the lease's owner
    /// (PostgreSQL's claims are HOT updates, migration 0028). Returns how many were extended.
    async fn renew_leases(
        &self,
        owner: &str,
        chunks: &[ChunkId],
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<u64>;
    /// Gives back every lease any owner holds, due at once: for a process that knows it is the
    /// only one working on this store (embedded vectors, whose folder one process locks), at
    /// startup, so it does not wait out the leases of its own previous life. Entries given back
    /// with a "not before" time keep it. Returns how many were given back.
    async fn release_all_leases(&self, now: DateTime<Utc>) -> Result<u64>;
    /// Records a failed attempt. With `max_attempts` reached (or `permanent`), the entry is
    /// `failed` and counted on the job; otherwise it returns to pending from `retry_at`.
    /// Returns whether the entry is now failed.
    #[allow(clippy::too_many_arguments)]
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
    ) -> Result<bool>;
}

/// What retrieval reads and repairs. Text always comes from here, never from the vector store.
#[async_trait]
pub trait RetrievalStore: Send + Sync {
    /// The world, with the entries of its active run marked embedded counted up to `at_most`
    /// (retrieval only needs to know whether there are `top_k`; counting stops there), in one
    /// round trip. `None` when there is no such world.
    async fn world_for_retrieval(&self, world: WorldId, at_most: u64) -> Result<Option<(World, u64)>>;
    /// [`RetrievalStore::world_for_retrieval`] as if `world` served `run` (served or being
    /// built): its profile, collection and embedded entries. `None` when the world or such a
    /// run is missing.
    async fn run_for_retrieval(&self, world: WorldId, run: RunId, at_most: u64) -> Result<Option<(World, u64)>>;
    /// The chunks of `run` in `world` whose slots have these point ids (missing ones are simply
    /// absent), in no particular order.
    async fn chunks_by_points(&self, world: WorldId, run: RunId, points: &[uuid::Uuid]) -> Result<Vec<ChunkView>>;
    /// [`RetrievalStore::chunks_by_points`] with each chunk's source's title, URL and metadata
    /// (what retrieval shows on its hits), in one round trip.
    async fn hits_by_points(
        &self,
        world: WorldId,
        run: RunId,
        points: &[uuid::Uuid],
    ) -> Result<Vec<(ChunkView, SourceDetails)>>;
    /// The chunks of `run` in `world` that fall in any of the windows `(source, from, to)`
    /// (chunk numbers `from..=to` of that source), each once, ordered by source and then
    /// chunk number. One round trip per hundred windows, however many there are.
    async fn chunk_windows(
        &self,
        world: WorldId,
        run: RunId,
        windows: &[(SourceId, u32, u32)],
    ) -> Result<Vec<ChunkView>>;
    /// [`RetrievalStore::chunk_windows`] without the chunks' texts: what a context is planned on.
    async fn chunk_outlines(
        &self,
        world: WorldId,
        run: RunId,
        windows: &[(SourceId, u32, u32)],
    ) -> Result<Vec<ChunkOutline>>;
    /// The key, text hash and text of each chunk of `run` in any of the windows, in no
    /// particular order (a chunk in two windows comes twice): what a planned context reads of
    /// the chunks it keeps, from their rows alone. One round trip per hundred windows.
    async fn chunk_texts(&self, run: RunId, windows: &[(SourceId, u32, u32)])
    -> Result<Vec<(ChunkId, String, String)>>;
    /// Every source with chunks in `run` of `world`: how many, and their tokens (each chunk's
    /// `token_count`), whatever their embedding state. One aggregate over the run's chunks.
    async fn source_sizes(&self, world: WorldId, run: RunId) -> Result<Vec<SourceSize>>;
    /// Marks embedded or failed entries of `run` pending again (no attempts spent, embedded
    /// hash cleared, `warning` recorded) under a job that has not ended, so that they are worked
    /// on and counted before it can end:
    /// - a run being built: its re-ingest job, whatever its status (paused, its entries wait),
    ///   so that the world switches to the run only once they are embedded again; `job` is
    ///   ignored, and nothing is requeued when the run has no live re-ingest job;
    /// - the active run: `job` when given and not ended, else the newest running `repair` or
    ///   `reingest` job of that world and run, else a new running `repair` job.
    ///
    /// The chosen job's row is locked first, so it cannot end meanwhile; an entry that it
    /// already counted as embedded or failed moves back to pending in its counts, not twice
    /// into its total. Entries already pending are left to the job that holds them; a run that
    /// is neither active nor being built gets nothing. Returns the job and how many entries
    /// were requeued, when at least one was.
    async fn requeue_entries(
        &self,
        world: WorldId,
        run: RunId,
        chunks: &[ChunkId],
        warning: &str,
        job: Option<JobId>,
        now: DateTime<Utc>,
    ) -> Result<Option<(JobId, u64)>>;
}

/// What repair reconciles: runs and manifest entries against the points.
#[async_trait]
pub trait RepairStore: Send + Sync {
    /// The world's runs, oldest first.
    async fn world_runs(&self, world: WorldId) -> Result<Vec<RunInfo>>;
    /// Every manifest entry of `run`; `leased` is judged against `now`.
    async fn manifest_entries(&self, world: WorldId, run: RunId, now: DateTime<Utc>) -> Result<Vec<ManifestEntry>>;
    /// Marks pending, unleased entries embedded because a point made from their current text
    /// exists (each given with the point's vector, which is kept as a worker's mark keeps it);
    /// counts them as embedded on the live jobs holding them. Returns how many were marked and
    /// the jobs holding them (to be finished if they are done).
    async fn adopt_entries(
        &self,
        world: WorldId,
        run: RunId,
        points: &[EmbeddedVector],
        now: DateTime<Utc>,
    ) -> Result<(u64, Vec<JobId>)>;
    /// The kept vectors of those of `chunks` whose entries in `run` of `world` are embedded and
    /// whose vector was made from the chunk's current text, with what their points carry. A
    /// chunk embedded before vectors were kept, or whose kept bytes do not decode, is absent
    /// (repair embeds it again). One round trip per hundred chunks.
    async fn kept_points(&self, world: WorldId, run: RunId, chunks: &[ChunkId]) -> Result<Vec<KeptPoint>>;
    /// Creates a running job with no entries yet.
    async fn create_job(&self, world: WorldId, run: RunId, kind: JobKind, now: DateTime<Utc>) -> Result<Job>;
}

/// Where an identical text already has a vector.
#[async_trait]
pub trait ReuseStore: Send + Sync {
    /// For each hash that has one, a point holding a vector made from exactly that text in
    /// `collection` (an embedded entry whose embedded hash equals its chunk's hash), searched in
    /// `world` only, or in every world when `world` is `None`.
    async fn find_reusable(
        &self,
        collection: &str,
        world: Option<WorldId>,
        hashes: &[String],
    ) -> Result<Vec<(String, uuid::Uuid)>>;
}

/// A run to build beside the active one (a re-ingest).
#[derive(Clone, Debug)]
pub struct NewRun {
    pub id: RunId,
    pub world: WorldId,
    pub embedding: crate::domain::EmbeddingProfile,
    pub chunking: crate::domain::ChunkingProfile,
}

/// The chunks of one stored source, cut for a run.
#[derive(Clone, Debug)]
pub struct SourceChunks {
    pub source: SourceId,
    pub book_number: u32,
    pub chunks: Vec<NewChunk>,
}

/// What [`JobStore::retry_failed`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// No such job.
    Missing,
    /// The job's status (or, for a failed re-ingest, its retired run) does not allow it.
    Refused { status: JobStatus, kind: JobKind },
    /// The job has no failed entry in a run the world serves or is building.
    Nothing,
    /// This many entries are pending again.
    Requeued(u64),
}

/// A failed manifest entry (see [`JobStore::failed_entries`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailedEntry {
    pub job: Option<JobId>,
    pub run: RunId,
    pub chunk: ChunkId,
}

/// Where a re-ingest stands once its queue is empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReingestStep {
    /// Entries are still pending, or the job is not a running re-ingest.
    NotDone,
    /// Sources added since the run began have no chunks in it yet: cut them and carry on.
    MissingSources {
        world: WorldId,
        run: RunId,
        sources: Vec<(SourceId, u32)>,
    },
    /// Some chunks failed: the job failed, the new run is retired (its points and rows are to
    /// be removed) and the world keeps serving its old run.
    Failed {
        world: WorldId,
        run: RunId,
        collection: String,
    },
    /// The world now serves the new run and profile; the old run is retired (its points and
    /// rows are to be removed).
    Switched {
        world: WorldId,
        old_run: RunId,
        old_collection: String,
    },
    /// The new run is complete and the job's gate now evaluates it: its two runs are queued.
    Evaluating,
}

/// Runs (generations) of a world: re-ingest builds one beside the active one and switches.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// Inserts an empty `building` run and a `queued` `reingest` job to fill it, in one
    /// transaction (the sources are chunked into it afterwards, see [`RunStore::add_run_chunks`]),
    /// with the job's gate and its two `waiting` evaluation runs when one is given (the run
    /// before measures the run the world serves at that moment).
    async fn begin_reingest(&self, run: NewRun, job: JobId, gate: Option<&NewGate>, now: DateTime<Utc>) -> Result<Job>;
    /// The world's sources with no chunk in `run` yet, by book number.
    async fn sources_missing_from_run(&self, world: WorldId, run: RunId) -> Result<Vec<(SourceId, u32)>>;
    /// Adds a source's chunks to `run` under `job` (counted in its total) unless the source
    /// already has chunks there or no longer exists, or the run is no longer being built
    /// (its re-ingest was cancelled). Returns how many were added.
    async fn add_run_chunks(
        &self,
        world: WorldId,
        run: RunId,
        job: JobId,
        source: SourceChunks,
        now: DateTime<Utc>,
    ) -> Result<u64>;
    /// With nothing pending: fails the job (some entry failed), asks for missing sources, or
    /// switches the world to the job's run in one transaction (profile, chunking, collection,
    /// run statuses, the old run's unfinished jobs completed, this job completed).
    async fn finish_reingest(&self, job: JobId, now: DateTime<Utc>) -> Result<ReingestStep>;
    /// The chunking profile of the run `job` fills.
    async fn run_chunking(&self, job: JobId) -> Result<Option<crate::domain::ChunkingProfile>>;
    /// Retires `run` if it is still being built (a cancelled re-ingest's); returns whether it
    /// did. An active or already retired run is left alone.
    async fn retire_run(&self, run: RunId) -> Result<bool>;
    /// Deletes a run with its chunks and manifest entries.
    async fn delete_run(&self, run: RunId) -> Result<()>;
}

/// Provider keys: API keys (secret sealed) and mirrors of configuration keys, with the state
/// the key scheduler persists so restarts and other replicas respect it.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Keys of `provider` that are enabled and not retired.
    async fn count_eligible_keys(&self, provider: ProviderKind) -> Result<u64>;
    /// Inserts an API key; [`Error::Duplicate`] when the provider already has this secret.
    async fn insert_key(&self, key: NewKey) -> Result<StoredKey>;
    /// Inserts or refreshes the mirror of a configuration key (matched by provider and
    /// fingerprint), keeping its persisted state.
    async fn upsert_config_key(&self, key: NewKey) -> Result<StoredKey>;
    async fn get_key(&self, id: KeyId) -> Result<Option<StoredKey>>;
    /// Every key, oldest first.
    async fn list_keys(&self, window: Window) -> Result<Vec<StoredKey>>;
    /// Enables or disables a key; enabling also lifts a retirement. `None` if missing.
    async fn set_key_enabled(&self, id: KeyId, enabled: bool, now: DateTime<Utc>) -> Result<Option<StoredKey>>;
    async fn delete_key(&self, id: KeyId) -> Result<bool>;
    /// Persists a key's cooldown and failure streak.
    async fn set_key_cooldown(
        &self,
        id: KeyId,
        until: Option<DateTime<Utc>>,
        consecutive_failures: u32,
        now: DateTime<Utc>,
    ) -> Result<()>;
    /// Retires a key (invalid, leaked, no quota) until it is re-enabled.
    async fn retire_key(&self, id: KeyId, reason: &str, now: DateTime<Utc>) -> Result<()>;
    /// Extends a quota group's cooldown to `until` (never shortens it).
    async fn extend_group_cooldown(&self, provider: ProviderKind, group: &str, until: DateTime<Utc>) -> Result<()>;
    async fn list_group_cooldowns(&self) -> Result<Vec<GroupCooldown>>;
}

/// Parents for small-to-large retrieval (see [`crate::chunking::parents`]).
#[async_trait]
pub trait ParentStore: Send + Sync {
    /// Stores the parents of `source` in `run`, once: `false` (nothing written) when the
    /// source already has parents there, the source or world is gone, or the run is neither
    /// active nor being built.
    async fn add_parents(&self, world: WorldId, run: RunId, source: SourceId, parents: &[NewParent]) -> Result<bool>;
    /// The parents of `run` that overlap these windows (`(source, from, to)`: chunk numbers
    /// `from..=to` of that source), each once, ordered by source and parent number; a source
    /// whose parents are not built yet finds none. One round trip per hundred windows, each
    /// window a seek and at most its width in rows, however many parents its source has.
    async fn parents_over(&self, run: RunId, windows: &[(SourceId, u32, u32)]) -> Result<Vec<Parent>>;
    /// Sources with chunks but no parents in an active or building run, with that run's
    /// `parent_max_tokens`: what the startup pass builds parents for.
    async fn sources_without_parents(&self) -> Result<Vec<(WorldId, RunId, SourceId, u32)>>;
}

/// API tokens managed through the API: only digests of their secrets are stored.
#[async_trait]
pub trait TokenStore: Send + Sync {
    async fn insert_token(&self, token: &ApiToken, secret_sha256: &[u8; 32]) -> Result<()>;
    /// A token with what verifying its secret needs; `None` when there is none (revoked).
    async fn token_credentials(&self, id: TokenId) -> Result<Option<TokenCredentials>>;
    /// Tokens by creation, the rows of `window`.
    async fn list_tokens(&self, window: Window) -> Result<Vec<ApiToken>>;
    /// Revokes (deletes) a token; false when there was none.
    async fn delete_token(&self, id: TokenId) -> Result<bool>;
    /// A new secret; the current one stays accepted until `previous_until`. False when there
    /// is no such token.
    async fn rotate_token(&self, id: TokenId, secret_sha256: &[u8; 32], previous_until: DateTime<Utc>) -> Result<bool>;
    /// Records a use at `at`, unless one was recorded within the minute before.
    async fn touch_token(&self, id: TokenId, at: DateTime<Utc>) -> Result<()>;
    /// Adds `world` to a token limited to some worlds (a token for every world is unchanged).
    async fn grant_world(&self, id: TokenId, world: WorldId) -> Result<()>;
}

/// The audit log of administrative actions.
#[async_trait]
pub trait AuditStore: Send + Sync {
    async fn record_audit(&self, event: &NewAuditEvent) -> Result<()>;
    /// Entries newest first (of one action when given), the rows of `window`.
    async fn list_audit(&self, action: Option<AuditAction>, window: Window) -> Result<Vec<AuditEvent>>;
    /// Deletes the entries older than `cutoff`; returns how many.
    async fn forget_audit(&self, cutoff: DateTime<Utc>) -> Result<u64>;
}

/// Everything the services need from the relational store.
#[async_trait]
pub trait Store:
    WorldStore
    + SourceStore
    + JobStore
    + WorkStore
    + KeyStore
    + RetrievalStore
    + ReuseStore
    + RepairStore
    + RunStore
    + ParentStore
    + ClusterStore
    + OpsStore
    + WebhookStore
    + EvalStore
    + IdempotencyStore
    + SecretStore
    + TokenStore
    + AuditStore
    + Send
    + Sync
    + 'static
{
    /// Which backend this is ("sqlite" or "postgres").
    fn kind(&self) -> &'static str;
    /// A trivial round trip, for `/readyz`.
    async fn ping(&self) -> Result<()>;
    /// Closes the pool (waits for connections to be returned).
    async fn close(&self);
}

/// Connects to `url` (`sqlite:` or `postgres:`), creating what is missing, and applies the
/// migrations.
pub async fn connect(url: &str) -> Result<Arc<dyn Store>> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(sqlite::SqliteStore::connect(url).await?))
    } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        Ok(Arc::new(postgres::PgStore::connect(url).await?))
    } else {
        Err(Error::Setup(
            "store.url must start with sqlite: or postgres: (the rest is not shown: it may hold a password)".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

    use super::Error;

    /// A write that meets another connection's exclusive lock, once the busy timeout is over,
    /// is "unavailable" (503, retry), not a failed query (500).
    #[tokio::test]
    async fn a_locked_sqlite_database_is_unavailable_not_a_failed_query() {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("locked.db"))
            .create_if_missing(true)
            .busy_timeout(Duration::from_millis(50));
        let pool = SqlitePoolOptions::new()
            .max_connections(2)
            .connect_with(options)
            .await
            .unwrap();
        sqlx::query("CREATE TABLE t (x INTEGER)").execute(&pool).await.unwrap();
        let mut holder = pool.acquire().await.unwrap();
        sqlx::query("BEGIN EXCLUSIVE").execute(&mut *holder).await.unwrap();
        let err = sqlx::query("INSERT INTO t VALUES (1)")
            .execute(&pool)
            .await
            .map_err(Error::from)
            .unwrap_err();
        assert!(matches!(err, Error::Unavailable(_)), "{err:?}");
        sqlx::query("ROLLBACK").execute(&mut *holder).await.unwrap();

        let err = sqlx::query("INSERT INTO missing VALUES (1)")
            .execute(&pool)
            .await
            .map_err(Error::from)
            .unwrap_err();
        assert!(matches!(err, Error::Query(_)), "a real query error stays one: {err:?}");
    }
}
