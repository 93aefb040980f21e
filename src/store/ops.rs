//! [`OpsStore`]: what `/metrics` reads from the store when it is scraped.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::backend::{Backend, SqlStore};
use super::{OpsStore, QueueDepth, Result};

#[async_trait]
impl<DB: Backend> OpsStore for SqlStore<DB> {
    async fn job_counts(&self) -> Result<Vec<(String, String, u64)>> {
        let rows: Vec<(String, String, i64)> =
            sqlx::query_as("SELECT kind, status, COUNT(*) FROM jobs GROUP BY kind, status ORDER BY kind, status")
                .fetch_all(&self.pool)
                .await?;
        Ok(rows
            .into_iter()
            .map(|(kind, status, n)| (kind, status, u64::try_from(n).unwrap_or(0)))
            .collect())
    }

    async fn queue_depth(&self) -> Result<Vec<QueueDepth>> {
        // A pending entry waits since its job was created (a retry reuses its job, so a retried
        // chunk counts from the job's start: an upper bound).
        let rows: Vec<(uuid::Uuid, Option<String>, i64, Option<DateTime<Utc>>)> = sqlx::query_as(
            "SELECT m.world_id, r.provider, COUNT(*), MIN(j.created_at) FROM manifest_entries m \
             LEFT JOIN runs r ON r.id = m.run_id LEFT JOIN jobs j ON j.id = m.job_id \
             WHERE m.state = 'pending' GROUP BY m.world_id, r.provider ORDER BY m.world_id",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(world, provider, pending, oldest)| QueueDepth {
                world: crate::domain::WorldId(world),
                provider: provider.unwrap_or_default(),
                pending: u64::try_from(pending).unwrap_or(0),
                oldest,
            })
            .collect())
    }
}
