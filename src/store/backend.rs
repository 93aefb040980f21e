//! What the generic store code needs from a database: [`Backend`], implemented for
//! [`sqlx::Sqlite`] and [`sqlx::Postgres`], and [`SqlStore`], the one store struct both backends
//! share.
//!
//! `Backend` carries the few pieces of SQL that differ between the dialects (the statement that
//! begins a transaction, the lock suffix of the claim statement, the clock, the kind name) and, as its
//! supertraits, every sqlx bound the queries need, so that generic code needs no `where` clause
//! beyond `DB: Backend` (see [`Is`] for how a bound on another type is written as one on `DB`).

use chrono::{DateTime, Utc};
use sqlx::decode::Decode;
use sqlx::encode::Encode;
use sqlx::{ColumnIndex, Database, Executor, IntoArguments, Pool, Postgres, Sqlite, Transaction, Type};
use uuid::Uuid;

use super::Result;

/// A database the store runs on, with its dialect's differences.
///
/// Rust only infers the bounds of a trait's *supertraits* (and of their associated types)
/// from `DB: Backend`, never other `where` clauses, and a bound such as
/// `Uuid: Encode<'q, DB>` is about `Uuid`, not `DB`. Each such bound is therefore written as
/// one on the associated type of [`Is`], which names the type and is equal to it:
/// `Is<Uuid, T = Uuid, T: Column<Self>>` is `Uuid: Column<Self>`, and is implied wherever
/// `DB: Backend` is. A query that binds or reads a type not listed here fails to compile until
/// the type gets its line.
pub trait Backend:
    Database<Arguments: IntoArguments<Self>, QueryResult: RowsAffected>
    // Every `&mut` connection (a transaction's) runs queries; a `&Pool` then does too.
    + for<'c> Is<&'c mut Self::Connection, T = &'c mut Self::Connection, T: Executor<'c, Database = Self>>
    // Row structs (`sqlx::FromRow`) find their columns by name, tuples by position.
    + for<'s> Is<&'s str, T = &'s str, T: ColumnIndex<Self::Row> + Bind<Self>>
    + Is<usize, T = usize, T: ColumnIndex<Self::Row>>
    // The Rust types of the columns, bound as parameters and read back.
    + Is<Uuid, T = Uuid, T: Column<Self>>
    + Is<i64, T = i64, T: Column<Self>>
    + Is<f64, T = f64, T: Column<Self>>
    + Is<bool, T = bool, T: Column<Self>>
    + Is<String, T = String, T: Column<Self>>
    + Is<Vec<u8>, T = Vec<u8>, T: Column<Self>>
    + Is<DateTime<Utc>, T = DateTime<Utc>, T: Column<Self>>
    // Nullable parameters (reading an `Option` needs nothing more; binding one does).
    + Is<Option<String>, T = Option<String>, T: Bind<Self>>
    + Is<Option<Vec<u8>>, T = Option<Vec<u8>>, T: Bind<Self>>
    + Is<Option<DateTime<Utc>>, T = Option<DateTime<Utc>>, T: Bind<Self>>
    + Is<Option<Uuid>, T = Option<Uuid>, T: Bind<Self>>
    + Is<Option<i64>, T = Option<i64>, T: Bind<Self>>
    + Is<Option<f64>, T = Option<f64>, T: Bind<Self>>
{
    /// What [`crate::store::Store::kind`] answers.
    const KIND: &'static str;
    /// The statement that opens the store's transactions.
    const BEGIN: &'static str;
    /// The statement that opens a read-only transaction whose statements all see one snapshot.
    const BEGIN_SNAPSHOT: &'static str;
    /// The end of a claim's subquery, which locks the rows it chose (`m`) on PostgreSQL.
    const CLAIM_LOCK: &'static str;
    /// Whether `manifest_open` is a table of its own, kept by triggers (PostgreSQL, migration
    /// 0028), rather than a view of the entries: the claim then reads its queue from it (see
    /// `work.rs`).
    const OPEN_TABLE: bool;
    /// The database's clock as seconds since the Unix epoch (a double): what replicas on
    /// machines whose clocks disagree agree on (see `cluster.rs`).
    const NOW_S: &'static str;
    /// Whether the backend keeps `manifest_counts` as deltas to fold (migration 0014; the fold's
    /// statements, PostgreSQL's own, are in `worlds.rs`).
    const FOLDS_COUNTS: bool;
    /// How retrieval's reads join a chunk's source (`s`), for [`SOURCES_JOIN`] to be replaced
    /// by: on SQLite through the covering index `sources_shown` (migration 0029), which its
    /// planner, without statistics, would pass over for the primary key's.
    const SOURCES_SHOWN: &'static str;
}

/// The join of a chunk (`c`) to its source (`s`) in retrieval's reads, as written in their
/// statements: [`Backend::SOURCES_SHOWN`] says how each backend runs it.
pub const SOURCES_JOIN: &str = "JOIN sources s ON s.id = c.source_id";

/// `sql` as `DB` runs it: its [`SOURCES_JOIN`] replaced by [`Backend::SOURCES_SHOWN`].
pub fn shown<DB: Backend>(sql: &str) -> String {
    sql.replace(SOURCES_JOIN, DB::SOURCES_SHOWN)
}

impl Backend for Sqlite {
    const KIND: &'static str = "sqlite";
    /// Transactions take the write lock when they begin: one that read first and wrote later
    /// would otherwise fail at once with SQLITE_BUSY, without waiting, whenever another
    /// connection wrote in between (SQLite cannot upgrade a stale read snapshot). Waiting is
    /// what busy_timeout does.
    const BEGIN: &'static str = "BEGIN IMMEDIATE";
    /// A deferred transaction: its first read takes a snapshot (WAL) that the rest share.
    const BEGIN_SNAPSHOT: &'static str = "BEGIN";
    /// Nothing to add: the single statement runs under the database's write lock, which keeps
    /// concurrent claimers apart.
    const CLAIM_LOCK: &'static str = "";
    const OPEN_TABLE: bool = false;
    const NOW_S: &'static str = "((julianday('now') - 2440587.5) * 86400.0)";
    /// Nothing to fold: the triggers keep one row per (run, state) up to date.
    const FOLDS_COUNTS: bool = false;
    /// In the table, the columns retrieval shows lie after the document's text: reading them
    /// from the row walks the text's overflow pages.
    const SOURCES_SHOWN: &'static str = "JOIN sources s INDEXED BY sources_shown ON s.id = c.source_id";
}

impl Backend for Postgres {
    const KIND: &'static str = "postgres";
    const BEGIN: &'static str = "BEGIN";
    /// Read committed would give each statement a snapshot of its own.
    const BEGIN_SNAPSHOT: &'static str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
    /// Locks the chosen rows, skipping those another claimer holds, so that concurrent
    /// claimers take disjoint entries.
    const CLAIM_LOCK: &'static str = "FOR UPDATE OF m SKIP LOCKED";
    const OPEN_TABLE: bool = true;
    /// `clock_timestamp()`, not `now()`: the time the statement runs, not its transaction's start.
    const NOW_S: &'static str = "EXTRACT(EPOCH FROM clock_timestamp())::float8";
    /// The counts are deltas to fold (see [`super::worlds`]'s `fold_counts`).
    const FOLDS_COUNTS: bool = true;
    /// Long texts are kept out of line (TOAST): the row is short.
    const SOURCES_SHOWN: &'static str = SOURCES_JOIN;
}

/// `Is<X, T = X>` names the type `X` as an associated type of every type, so that a bound on
/// `X` can be stated as a bound on `<Self as Is<X>>::T` in [`Backend`]'s supertraits.
pub trait Is<X: ?Sized> {
    type T: ?Sized;
}

impl<S: ?Sized, X: ?Sized> Is<X> for S {
    type T = X;
}

/// A type that can be bound as a parameter of `DB`'s statements.
pub trait Bind<DB: Database>: for<'q> Encode<'q, DB> + Type<DB> + Send {}

impl<DB: Database, T> Bind<DB> for T where T: for<'q> Encode<'q, DB> + Type<DB> + Send {}

/// A type stored in `DB`'s columns: bound as a parameter and read back from rows.
pub trait Column<DB: Database>: Bind<DB> + for<'r> Decode<'r, DB> {}

impl<DB: Database, T> Column<DB> for T where T: Bind<DB> + for<'r> Decode<'r, DB> {}

/// How many rows a statement changed (sqlx has it on each backend's result type, not on a trait).
pub trait RowsAffected {
    fn rows_affected(&self) -> u64;
}

impl RowsAffected for sqlx::sqlite::SqliteQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

impl RowsAffected for sqlx::postgres::PgQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

/// The relational store over one database; [`SqliteStore`](super::sqlite::SqliteStore) and
/// [`PgStore`](super::postgres::PgStore) are this over SQLite and PostgreSQL. The store traits
/// are implemented once, for every `SqlStore<DB: Backend>`, one aggregate per file.
pub struct SqlStore<DB: Backend> {
    pub(super) pool: Pool<DB>,
    /// What a retrieval reads by key (the world, the hits' chunks and sources, their windows and
    /// parents): on PostgreSQL, sessions that plan each statement once and reuse the plan
    /// (`plan_cache_mode = force_generic_plan`, see [`super::postgres`]); on SQLite, `pool`.
    pub(super) reads: Pool<DB>,
}

impl<DB: Backend> SqlStore<DB> {
    pub(super) fn new(pool: Pool<DB>) -> Self {
        Self {
            reads: pool.clone(),
            pool,
        }
    }

    pub(super) fn with_reads(pool: Pool<DB>, reads: Pool<DB>) -> Self {
        Self { pool, reads }
    }

    /// Opens a transaction with the backend's [`Backend::BEGIN`].
    pub(super) async fn begin(&self) -> Result<Transaction<'static, DB>> {
        Ok(self.pool.begin_with(DB::BEGIN).await?)
    }

    /// A read-only transaction whose statements see one snapshot of the store.
    pub(super) async fn begin_snapshot(&self) -> Result<Transaction<'static, DB>> {
        Ok(self.pool.begin_with(DB::BEGIN_SNAPSHOT).await?)
    }
}

#[async_trait::async_trait]
impl<DB: Backend> super::Store for SqlStore<DB> {
    fn kind(&self) -> &'static str {
        DB::KIND
    }

    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn close(&self) {
        self.reads.close().await;
        self.pool.close().await;
    }
}
