//! The relational store: the authority for worlds, sources, chunk text, manifests, jobs and
//! provider keys (Qdrant is only an index over it).
//!
//! The services see narrow traits ([`WorldStore`], [`SourceStore`], [`JobStore`],
//! [`KeyStore`]) bundled as [`Store`]; two real implementations sit behind them, SQLite
//! ([`sqlite::SqliteStore`], the embedded default) and PostgreSQL ([`postgres::PgStore`]).
//! Both run the same SQL text where the dialects agree (it lives once, in [`sql`]) and their
//! own versioned migrations (`migrations/sqlite`, `migrations/postgres`). One conformance
//! suite (`tests/api/store_conformance.rs`) runs against both.

pub mod postgres;
mod sql;
pub mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;

use crate::domain::{
    Job, JobId, NewChunk, NewSource, NewWorld, ProviderKind, Source, SourceCounts, SourceId, World, WorldId, WorldStats,
};

/// Errors from a store backend.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database could not be reached or the connection broke: 503 upstream.
    #[error("store unavailable")]
    Unavailable(#[source] sqlx::Error),
    /// A row broke an invariant the schema does not enforce (e.g. an unknown enum string).
    #[error("corrupt row in `{table}`: {reason}")]
    Corrupt { table: &'static str, reason: String },
    /// Anything else the database reported.
    #[error("store query failed")]
    Query(#[source] sqlx::Error),
    #[error("applying migrations failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("preparing the database location failed: {0}")]
    Setup(String),
}

impl From<sqlx::Error> for Error {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => Error::Unavailable(err),
            other => Error::Query(other),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Worlds and their lifecycle.
#[async_trait]
pub trait WorldStore: Send + Sync {
    /// Inserts the world and its first (active) run in one transaction.
    async fn create_world(&self, world: NewWorld) -> Result<World>;
    async fn get_world(&self, id: WorldId) -> Result<Option<World>>;
    /// All worlds, oldest first.
    async fn list_worlds(&self) -> Result<Vec<World>>;
    /// Counts over the world's active run.
    async fn world_stats(&self, id: WorldId) -> Result<WorldStats>;
    /// Returns the updated world, `None` if it does not exist.
    async fn rename_world(&self, id: WorldId, name: &str, now: chrono::DateTime<chrono::Utc>) -> Result<Option<World>>;
    /// Deletes the world with its runs, sources, chunks, manifest entries, jobs and job events
    /// in one transaction. Returns whether it existed.
    async fn delete_world(&self, id: WorldId) -> Result<bool>;
    /// Every collection any run of the world writes to (more than one while a re-ingest into a
    /// new profile is under way).
    async fn world_collections(&self, id: WorldId) -> Result<Vec<String>>;
}

/// Sources, their chunks and manifest entries.
#[async_trait]
pub trait SourceStore: Send + Sync {
    /// Stores a source with its chunks (into the world's active run), one pending manifest entry
    /// per chunk and an `ingest` job, all in one transaction. `book_number` is assigned here.
    async fn add_source(&self, source: NewSource, chunks: Vec<NewChunk>, job: JobId) -> Result<(Source, Job)>;
    async fn get_source(&self, world: WorldId, id: SourceId) -> Result<Option<Source>>;
    /// Sources of a world by book number.
    async fn list_sources(&self, world: WorldId) -> Result<Vec<Source>>;
    /// Chunk state counts of one source in the world's active run.
    async fn source_counts(&self, world: WorldId, id: SourceId) -> Result<SourceCounts>;
}

/// Jobs.
#[async_trait]
pub trait JobStore: Send + Sync {
    async fn get_job(&self, id: JobId) -> Result<Option<Job>>;
    /// Jobs of a world, newest first.
    async fn list_jobs(&self, world: WorldId) -> Result<Vec<Job>>;
}

/// Provider keys kept in the store (keys from configuration are counted by the caller).
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Keys of `provider` that are enabled and not retired.
    async fn count_eligible_keys(&self, provider: ProviderKind) -> Result<u64>;
}

/// Everything the services need from the relational store.
#[async_trait]
pub trait Store: WorldStore + SourceStore + JobStore + KeyStore + Send + Sync + 'static {
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
