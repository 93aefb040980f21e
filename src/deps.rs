//! The dependency bundle: the shared components every service and worker is built from,
//! made once by the composition root ([`crate::app`]) and handed to each constructor by
//! reference. A constructor clones the handles it keeps (each is an `Arc` or a cheap
//! handle around one), so a new dependency is added here once instead of threaded
//! positionally through every constructor.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::crypto::SecretCipher;
use crate::jobs::JobEngine;
use crate::meters::Metrics;
use crate::providers::breaker::Breakers;
use crate::providers::scheduler::KeyScheduler;
use crate::providers::{ModelRegistry, Providers};
use crate::store::Store;
use crate::vector::VectorRepo;

/// Cheap to clone: everything inside is shared.
#[derive(Clone)]
pub struct Deps {
    pub store: Arc<dyn Store>,
    pub vectors: Arc<dyn VectorRepo>,
    pub registry: Arc<ModelRegistry>,
    pub providers: Providers,
    /// Every provider key and its budgets, leases and cooldowns.
    pub scheduler: KeyScheduler,
    /// The job lifecycle: the only writer of job states.
    pub engine: JobEngine,
    /// This process's circuit breakers, per provider and model.
    pub breakers: Arc<Breakers>,
    /// Seals provider-key and webhook secrets at rest (`None`: no master key configured).
    pub cipher: Option<SecretCipher>,
    /// This process's Prometheus series.
    pub meters: Metrics,
    /// Background tasks, waited for at shutdown.
    pub tasks: TaskTracker,
    /// Fires when shutdown begins; every background task watches it.
    pub cancel: CancellationToken,
}
