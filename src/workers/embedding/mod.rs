//! Embedding workers: drain the queue of pending manifest entries.
//!
//! `embedding.workers` tokio tasks run [`EmbeddingWorkers::run`] on the app's task tracker
//! until the shutdown token fires. A worker only claims → embeds → writes → reports; what a
//! report means for the job (progress, failure, the finish, a re-ingest's switch) is the job
//! engine's ([`crate::jobs`]). Each loop claims a few entries of one running job with a lease
//! (safe across processes, see `store::WorkStore`), reuses vectors of identical text, then per
//! batch ([`EmbeddingWorkers::embed_batch`], which returns a [`BatchOutcome`]): takes a key from
//! the scheduler (ingestion lane, fair between worlds) → counts tokens exactly and fails
//! oversize or uncountable chunks locally → embeds only `chunk_text` in document mode → upserts
//! the points and waits for the vector store's confirmation → reports the entries embedded,
//! which the store only records while the job is still running under the same run (so paused
//! or cancelled jobs, and responses that arrive after a cancel, never advance state).
//!
//! Failures: a rate limit cools the key down (scheduler) and gives the entries back without
//! spending an attempt, halving the batch size for Google (which counts every item of a batch
//! against the quota; request quotas elsewhere count requests, so batches stay full); a key
//! rejection retires the key and gives the entries back; a transient or malformed answer spends
//! one attempt and retries later with backoff; a permanent refusal of a multi-item batch is sent
//! again item by item (each alone, once) to find the culprit, and a single item refused
//! permanently fails at once. Past `embedding.max_attempts` an entry is `failed` and the job
//! lists a structured error for it.
//!
//! Workers wake when the job engine says work arrived and also poll, so work written by another
//! process is picked up too. [`EmbeddingWorkers::run_once`] and [`EmbeddingWorkers::drain`] run
//! the same steps deterministically for tests.

mod batch;
mod claim;
mod report;
mod reuse;
mod worker;
mod write;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::config::ReuseScope;
use crate::domain::{ChunkId, ProviderKind, WorkItem};
use crate::jobs::JobEngine;
use crate::providers::breaker::Breakers;
use crate::providers::scheduler::{BatchSizer, KeyScheduler};
use crate::providers::{EmbeddingProvider, ModelRegistry, ProviderLimits, Providers};
use crate::store::Store;
use crate::vector::VectorRepo;
use crate::workers::inflight::InFlight;

/// How often idle workers look for work written by other processes.
const POLL: Duration = Duration::from_secs(2);
/// Most entries claimed at once.
const CLAIM_LIMIT: u32 = 32;
/// Pause before entries given back for an infrastructure problem are tried again; it doubles
/// with each such failure in a row, up to [`INFRA_RETRY_MAX`].
const INFRA_RETRY: Duration = Duration::from_secs(5);
const INFRA_RETRY_MAX: Duration = Duration::from_secs(300);
/// Pause before entries given back for want of a usable key are tried again.
const NO_KEY_RETRY: Duration = Duration::from_secs(30);
/// How long chunks wait when this process cannot run the world's provider or model at all
/// (local model files missing, the model gone from the configuration): an operator's fix, a
/// restart or another replica that can serve it takes them; none of their attempts is spent.
const UNAVAILABLE_RETRY: Duration = Duration::from_secs(60);
/// Pauses before a vector write that met an outage is tried again with the same vectors.
const WRITE_RETRIES: [Duration; 2] = [Duration::from_millis(250), Duration::from_secs(1)];

/// Settings the workers need.
#[derive(Clone, Copy, Debug)]
pub struct WorkerConfig {
    pub workers: usize,
    pub max_attempts: u32,
    /// Where an existing vector of identical text may be reused instead of a provider call.
    pub reuse: ReuseScope,
    /// How long a claim is held before another worker may take the entries over.
    pub lease: Duration,
}

struct Shared {
    meters: crate::meters::Metrics,
    store: Arc<dyn Store>,
    vectors: Arc<dyn VectorRepo>,
    providers: Providers,
    registry: Arc<ModelRegistry>,
    scheduler: KeyScheduler,
    engine: JobEngine,
    breakers: Arc<Breakers>,
    config: WorkerConfig,
    sizers: std::sync::Mutex<HashMap<ProviderKind, Arc<BatchSizer>>>,
    /// Vector writes in a row that failed for an outage (see [`EmbeddingWorkers::infra_pause`]).
    outages: AtomicU32,
    /// Texts this process's claims are sending now.
    inflight: Arc<InFlight>,
}

/// The worker pool (cheap to clone).
#[derive(Clone)]
pub struct EmbeddingWorkers {
    shared: Arc<Shared>,
}

/// What one step did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Entries claimed.
    pub claimed: usize,
    /// Entries marked embedded.
    pub embedded: u64,
}

/// What one batch of a claim came to.
#[derive(Debug)]
pub enum BatchOutcome {
    /// The batch is dealt with (embedded, failed, or given back item by item); go on.
    Done { embedded: u64 },
    /// The provider refused the batch as a whole: send each of these again, alone, so that
    /// only the item at fault fails.
    SendAlone(Vec<WorkItem>),
    /// Stop working on this claim: `batch` and the rest of the claim go back, claimable again
    /// from `not_before` (none: at once).
    Stop {
        embedded: u64,
        batch: Vec<ChunkId>,
        not_before: Option<DateTime<Utc>>,
    },
}

/// The provider, model limits and batch sizer a claim is embedded with.
struct Target {
    provider: Arc<dyn EmbeddingProvider>,
    limits: ProviderLimits,
    sizer: Arc<BatchSizer>,
}

impl EmbeddingWorkers {
    #[allow(clippy::too_many_arguments)]
    pub fn new(deps: &crate::deps::Deps, config: WorkerConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                meters: deps.meters.clone(),
                store: deps.store.clone(),
                vectors: deps.vectors.clone(),
                providers: deps.providers.clone(),
                registry: deps.registry.clone(),
                scheduler: deps.scheduler.clone(),
                engine: deps.engine.clone(),
                breakers: deps.breakers.clone(),
                config,
                sizers: std::sync::Mutex::new(HashMap::new()),
                outages: AtomicU32::new(0),
                inflight: Arc::default(),
            }),
        }
    }
}

/// The chunk ids of `items`.
fn chunk_ids(items: &[WorkItem]) -> Vec<ChunkId> {
    items.iter().map(|i| i.chunk_id).collect()
}

fn to_chrono(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or_else(|_| chrono::Duration::minutes(5))
}

/// A wait as people say it: "40 s", "12 min", "5 h 12 min".
fn eta(wait: Duration) -> String {
    let secs = wait.as_secs();
    match secs {
        0..120 => format!("{secs} s"),
        120..7200 => format!("{} min", secs.div_ceil(60)),
        _ => format!("{} h {} min", secs / 3600, (secs % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_read_as_people_say_them() {
        assert_eq!(eta(Duration::from_secs(42)), "42 s");
        assert_eq!(eta(Duration::from_secs(121)), "3 min");
        assert_eq!(eta(Duration::from_secs(5 * 3600 + 12 * 60 + 5)), "5 h 12 min");
    }
}
