//! SQLite backend: the embedded default. One file in WAL mode; the file and its folders are
//! created when missing.

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::Result;
use super::backend::SqlStore;

/// How much of the database file SQLite reads through a memory map (`PRAGMA mmap_size`): 1 GiB,
/// about a million chunks with their sources. Mapped pages are the kernel's page cache, shared by
/// every connection, where each connection's own page cache (2 MB) holds little of a large
/// database: reading a retrieval's hits from the map took 0.16–0.20 ms instead of 0.28–0.32 ms in
/// the benchmark (BENCHMARKS.md). The cost is the one the vector store's memory-mapped segments
/// already carry: an I/O error on the file becomes a SIGBUS rather than an error return.
const MMAP_BYTES: u64 = 1 << 30;

/// The SQLite store.
pub type SqliteStore = SqlStore<sqlx::Sqlite>;

impl SqliteStore {
    /// Opens (creating when missing) the database at `url` and applies the migrations.
    pub async fn connect(url: &str) -> Result<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|err| super::Error::Setup(format!("store.url is not a valid sqlite url: {err}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // WAL + NORMAL is durable across process crashes and only risks the last
            // transactions on power loss, the usual trade for an embedded service.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true)
            .pragma("mmap_size", MMAP_BYTES.to_string());
        let path = options.get_filename();
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
            && path.as_os_str() != ":memory:"
        {
            std::fs::create_dir_all(dir).map_err(|err| {
                super::Error::Setup(format!(
                    "cannot create the folder {} for the database: {err}",
                    dir.display()
                ))
            })?;
        }
        // A local file has no connection to go stale: no pings before use and no reaper, which
        // also keeps the pool free of timers (tests drive the clock with tokio::time::pause()).
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .test_before_acquire(false)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await?;
        sqlx::migrate!("migrations/sqlite").run(&pool).await?;
        Ok(Self::new(pool))
    }
}
