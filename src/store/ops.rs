//! [`OpsStore`]: what `/metrics` reads from the store when it is scraped.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::backend::{Backend, SqlStore};
use super::{OpsStore, QueueDepth, Result};
use crate::domain::{JobKind, JobStatus};

#[async_trait]
impl<DB: Backend> OpsStore for SqlStore<DB> {
    async fn job_counts(&self) -> Result<Vec<(String, String, u64)>> {
        let rows: Vec<(String, String, i64)> =
            sqlx::query_as("SELECT kind, status, COUNT(*) FROM jobs GROUP BY kind, status ORDER BY kind, status")
                .fetch_all(&self.pool)
                .await?;
        // Every kind and status is exported, 0 when no job has it.
        let mut counts: Vec<(String, String, u64)> = Vec::new();
        for kind in JobKind::ALL {
            for status in JobStatus::ALL {
                let n = (rows.iter())
                    .find(|(k, s, _)| k == kind.as_str() && s == status.as_str())
                    .map_or(0, |(_, _, n)| u64::try_from(*n).unwrap_or(0));
                counts.push((kind.as_str().to_owned(), status.as_str().to_owned(), n));
            }
        }
        Ok(counts)
    }

    async fn queue_depth(&self) -> Result<Vec<QueueDepth>> {
        // A pending entry waits since its job was created (a retry reuses its job, so a retried
        // chunk counts from the job's start: an upper bound).
        let rows: Vec<(uuid::Uuid, Option<String>, i64, Option<DateTime<Utc>>)> = sqlx::query_as(
            "SELECT m.world_id, r.provider, COUNT(*), MIN(j.created_at) FROM manifest_open m \
             LEFT JOIN runs r ON r.id = m.run_id LEFT JOIN jobs j ON j.id = m.job_id \
             WHERE m.state = 'pending' GROUP BY m.world_id, r.provider ORDER BY m.world_id",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut depths: Vec<QueueDepth> = rows
            .into_iter()
            .map(|(world, provider, pending, oldest)| QueueDepth {
                world: crate::domain::WorldId(world),
                provider: provider.unwrap_or_default(),
                pending: u64::try_from(pending).unwrap_or(0),
                oldest,
            })
            .collect();
        // Every world's queue is a known thing: an empty one is a 0, not a missing series
        // (an alert on the depth must not go blind when the queue drains).
        let queues: Vec<(uuid::Uuid, String)> =
            sqlx::query_as("SELECT world_id, provider FROM runs WHERE status <> 'retired' ORDER BY world_id")
                .fetch_all(&self.pool)
                .await?;
        let queued: std::collections::HashSet<(crate::domain::WorldId, String)> =
            depths.iter().map(|d| (d.world, d.provider.clone())).collect();
        for (world, provider) in queues {
            let world = crate::domain::WorldId(world);
            if !queued.contains(&(world, provider.clone())) {
                depths.push(QueueDepth {
                    world,
                    provider,
                    pending: 0,
                    oldest: None,
                });
            }
        }
        Ok(depths)
    }
}
