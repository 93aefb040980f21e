//! PostgreSQL backend: for deployments where several quarry replicas share one database.

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;

use super::Result;
use super::backend::SqlStore;

/// The PostgreSQL store.
pub type PgStore = SqlStore<sqlx::Postgres>;

impl PgStore {
    /// Connects to `url` and applies the migrations. The database must exist.
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await?;
        sqlx::migrate!("migrations/postgres").run(&pool).await?;
        Ok(Self::new(pool))
    }
}
