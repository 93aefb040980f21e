//! PostgreSQL backend: for deployments where several quarry replicas share one database.

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::Result;
use super::backend::SqlStore;

/// The PostgreSQL store.
pub type PgStore = SqlStore<sqlx::Postgres>;

/// Most sessions a store opens for retrieval's reads, beside the 16 of its main pool.
///
/// A retrieval reads its hits, their windows and parents by key, as a handful of statements
/// whose text varies with the number of hits; PostgreSQL planned each execution afresh (a
/// prepared statement gets a plan of its own for its first five executions, and these rarely
/// reach six on one session), and planning a hit's three-table join cost more than running it:
/// 5.9 of the 7.8 ms a retrieval spent in the store at 100,000 chunks. On these sessions every
/// statement is planned once, for any values: the plans are lookups by unique keys whatever the
/// values are, so nothing is lost.
const READ_CONNECTIONS: u32 = 8;

impl PgStore {
    /// Connects to `url` and applies the migrations. The database must exist.
    ///
    /// Sessions run with PostgreSQL's JIT compilation and parallel query off (unless the URL's
    /// `options` set `jit` or `max_parallel_workers_per_gather`): quarry's statements are short
    /// lookups by key, and a planner that overestimates a fresh table (before autovacuum has
    /// analyzed it) would otherwise spend a second compiling a statement that runs in a
    /// millisecond, or start worker processes for one: a retrieval's parents, read by one
    /// branch per hit, were planned as a parallel append once autovacuum had analyzed the table,
    /// and a retrieval spent most of its time starting and waiting for the workers.
    pub async fn connect(url: &str) -> Result<Self> {
        let mut options = PgConnectOptions::from_str(url)?;
        let given = options.get_options().unwrap_or_default().to_owned();
        for (name, value) in [("jit", "off"), ("max_parallel_workers_per_gather", "0")] {
            if !given.contains(name) {
                options = options.options([(name, value)]);
            }
        }
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options.clone())
            .await?;
        sqlx::migrate!("migrations/postgres").run(&pool).await?;
        // Opened as they are needed, and closed when idle.
        let reads = PgPoolOptions::new()
            .max_connections(READ_CONNECTIONS)
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy_with(options.options([("plan_cache_mode", "force_generic_plan")]));
        Ok(Self::with_reads(pool, reads))
    }
}
