//! The replica registry: every quarry process working on a store heartbeats into it, lists the
//! live ones (`GET /v1/cluster`), and removes the dead ones, giving their claimed work back.
//!
//! A replica's id is random at each start; its embedding workers claim work as `{id}-{n}`, so
//! when a replica is found dead (no heartbeat for `cluster.dead_after_s`, by the store's clock)
//! the first replica to notice deletes its row and releases exactly its leases, at once rather
//! than when they would run out. A replica wrongly taken for dead (a long pause) loses nothing
//! but its claims: its writes are refused where it no longer holds a lease, and its next
//! heartbeat brings its row back. Budgets need no release: shared budgets live in the store's
//! ledger and refill by time, whoever drew from them (`providers/budget.rs`).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::domain::{Replica, ReplicaBeat, now};
use crate::providers::scheduler::KeyScheduler;
use crate::store::{self, Store};

/// How this replica takes part.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    pub address: String,
    pub workers: u32,
    pub heartbeat: Duration,
    pub dead_after: Duration,
    /// Whether provider budgets are shared through the store.
    pub shared_budgets: bool,
}

/// This replica's membership. Cheap to share.
pub struct Cluster {
    store: Arc<dyn Store>,
    scheduler: KeyScheduler,
    id: String,
    started_at: chrono::DateTime<chrono::Utc>,
    config: ClusterConfig,
}

impl Cluster {
    pub fn new(deps: &crate::deps::Deps, config: ClusterConfig) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string()[..16].to_owned();
        Self {
            store: deps.store.clone(),
            scheduler: deps.scheduler.clone(),
            id,
            started_at: now(),
            config,
        }
    }

    /// This replica's id (the prefix of its workers' lease owners).
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// Writes this replica's heartbeat, then removes replicas found dead and gives their
    /// claimed work back; also the store's housekeeping (old budget days, counts to fold).
    /// Returns how many entries were given back.
    pub async fn beat(&self) -> store::Result<u64> {
        self.store
            .heartbeat(&ReplicaBeat {
                id: self.id.clone(),
                address: self.config.address.clone(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                started_at: self.started_at,
                workers: self.config.workers,
                in_flight: u32::try_from(self.scheduler.in_flight()).unwrap_or(u32::MAX),
            })
            .await?;
        let dead_after = self.config.dead_after.as_secs_f64();
        let mut released = 0;
        for replica in self.store.list_replicas().await? {
            if replica.beat.id == self.id || replica.heartbeat_age_s <= dead_after {
                continue;
            }
            if let Some(n) = self.store.reap_replica(&replica.beat.id, dead_after, now()).await? {
                tracing::warn!(
                    replica = %replica.beat.id, address = %replica.beat.address,
                    silent_s = replica.heartbeat_age_s, entries = n,
                    "a replica stopped heartbeating: removed it and gave its claimed work back"
                );
                released += n;
            }
        }
        let old = crate::providers::budget::provider_day(chrono::Utc::now() - chrono::Duration::days(2));
        self.store.forget_budget_days(&old).await?;
        self.store.fold_counts().await?;
        Ok(released)
    }

    /// The live replicas (heartbeat within `dead_after`), oldest first.
    pub async fn replicas(&self) -> store::Result<Vec<Replica>> {
        let dead_after = self.config.dead_after.as_secs_f64();
        Ok(self
            .store
            .list_replicas()
            .await?
            .into_iter()
            .filter(|r| r.heartbeat_age_s <= dead_after)
            .collect())
    }

    /// Heartbeats every `heartbeat` until `cancel` fires, then leaves the registry.
    pub fn spawn(self: &Arc<Self>, tracker: &TaskTracker, cancel: &CancellationToken) {
        let (cluster, cancel) = (self.clone(), cancel.clone());
        tracker.spawn(async move {
            loop {
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep(cluster.config.heartbeat) => {}
                }
                if let Err(err) = cluster.beat().await {
                    tracing::warn!(error = %crate::telemetry::error_chain(&err), "the replica heartbeat failed; trying again");
                }
            }
            if let Err(err) = cluster.store.leave(&cluster.id).await {
                tracing::warn!(error = %err, "leaving the replica registry failed; the row expires instead");
            }
        });
    }
}
