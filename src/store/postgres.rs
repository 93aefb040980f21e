//! PostgreSQL backend: for deployments where several quarry replicas share one database.

use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};

use super::Result;
use super::sql::impl_store;

/// The PostgreSQL store.
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects to `url` and applies the migrations. The database must exist.
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await?;
        sqlx::migrate!("migrations/postgres").run(&pool).await?;
        Ok(Self { pool })
    }
}

impl_store!(PgStore, "postgres", super::sql::CLAIM_POSTGRES, "BEGIN");
