//! The chunk collections' layout against `[vectors.collection]`: which collections are in use,
//! how they differ from the configuration (reported at startup, in the log and in `/readyz`),
//! and the explicit step that changes what can change in place (`quarry vectors
//! apply-settings`).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::Serialize;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use crate::domain::{RunStatus, Window};
use crate::store::Store;
use crate::vector::VectorRepo;
use crate::vector::settings::SettingDrift;

/// How often a running service compares the collections with the configuration again (another
/// replica or `quarry vectors apply-settings` may have changed them).
const RECHECK: Duration = Duration::from_secs(300);

/// One collection whose layout differs from the configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct CollectionDrift {
    #[schema(example = "chunks_local_all_minilm_l6_v2_384")]
    pub collection: String,
    pub settings: Vec<SettingDrift>,
}

/// The chunk collections in use, sorted: every world's and those of re-ingests building into
/// another profile.
pub async fn collections_in_use(store: &dyn Store) -> crate::store::Result<Vec<String>> {
    let mut names = Vec::new();
    for world in store.list_worlds(Window::ALL).await? {
        names.push(world.embedding.collection_name());
        for run in store.world_runs(world.id).await? {
            if run.status != RunStatus::Retired {
                names.push(run.collection);
            }
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// What differs, per collection in use (collections that match, or do not exist yet, are left
/// out).
pub async fn drift_report(store: &dyn Store, vectors: &dyn VectorRepo) -> Result<Vec<CollectionDrift>, String> {
    let mut report = Vec::new();
    for collection in collections_in_use(store).await.map_err(|e| e.to_string())? {
        let settings = vectors.drift(&collection).await.map_err(|e| e.to_string())?;
        if !settings.is_empty() {
            report.push(CollectionDrift { collection, settings });
        }
    }
    Ok(report)
}

/// Applies `[vectors.collection]` to every collection in use where it can change in place;
/// answers what still differs (shard count and replication, which cannot).
pub async fn apply_settings(store: &dyn Store, vectors: &dyn VectorRepo) -> Result<Vec<CollectionDrift>, String> {
    let mut remaining = Vec::new();
    for collection in collections_in_use(store).await.map_err(|e| e.to_string())? {
        let settings = vectors
            .apply_settings(&collection)
            .await
            .map_err(|e| format!("collection `{collection}`: {e}"))?;
        if !settings.is_empty() {
            remaining.push(CollectionDrift { collection, settings });
        }
    }
    Ok(remaining)
}

/// The last drift report, for `/readyz`; refreshed at startup and every few minutes.
#[derive(Debug, Default)]
pub struct DriftWatch {
    last: RwLock<Vec<CollectionDrift>>,
}

impl DriftWatch {
    pub fn current(&self) -> Vec<CollectionDrift> {
        self.last
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Compares now; logs a warning when the answer changed and is not empty.
    pub async fn check(&self, store: &dyn Store, vectors: &dyn VectorRepo) {
        match drift_report(store, vectors).await {
            Ok(report) => {
                let mut last = self.last.write().unwrap_or_else(std::sync::PoisonError::into_inner);
                if report != *last {
                    for collection in &report {
                        for d in &collection.settings {
                            tracing::warn!(
                                collection = %collection.collection,
                                setting = %d.setting,
                                configured = %d.configured,
                                actual = %d.actual,
                                in_place = d.in_place,
                                "collection layout differs from the configuration{}",
                                if d.in_place {
                                    " (run `quarry vectors apply-settings` to change it)"
                                } else {
                                    " (fixed at creation: see the operations guide)"
                                }
                            );
                        }
                    }
                    *last = report;
                }
            }
            Err(err) => tracing::warn!(error = %err, "comparing the collections with [vectors.collection] failed"),
        }
    }

    /// Checks at once, then every few minutes until `cancel`.
    pub async fn run(self: Arc<Self>, store: Arc<dyn Store>, vectors: Arc<dyn VectorRepo>, cancel: CancellationToken) {
        loop {
            self.check(store.as_ref(), vectors.as_ref()).await;
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(RECHECK) => {}
            }
        }
    }
}
