//! PostgreSQL backend: for deployments where several quarry replicas share one database.

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::Result;
use super::backend::SqlStore;

/// The PostgreSQL store.
pub type PgStore = SqlStore<sqlx::Postgres>;

impl PgStore {
    /// Connects to `url` and applies the migrations. The database must exist.
    ///
    /// Sessions run with PostgreSQL's JIT compilation off (unless the URL's `options` set
    /// `jit`): quarry's statements are short, and a planner that overestimates a fresh table
    /// (before autovacuum has analyzed it) would otherwise spend a second compiling a statement
    /// that runs in a millisecond.
    pub async fn connect(url: &str) -> Result<Self> {
        let mut options = PgConnectOptions::from_str(url)?;
        if !options.get_options().is_some_and(|o| o.contains("jit")) {
            options = options.options([("jit", "off")]);
        }
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        sqlx::migrate!("migrations/postgres").run(&pool).await?;
        Ok(Self::new(pool))
    }
}
