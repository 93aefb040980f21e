//! Embedding workers: drain the queue of pending manifest entries.
//!
//! `embedding.workers` tokio tasks run [`EmbeddingWorkers::run`] on the app's task tracker
//! until the shutdown token fires. Each loop claims a few entries of one running job with a
//! lease (safe across processes, see `store::WorkStore`), then per batch: takes a key from the
//! scheduler (ingestion lane, fair between worlds) → counts tokens exactly and fails oversize or
//! uncountable chunks locally → embeds only `chunk_text` in document mode → upserts the points
//! and waits for the vector store's confirmation → marks the entries embedded, which the store
//! only does while the job is still running under the same run (so paused or cancelled jobs,
//! and responses that arrive after a cancel, never advance state).
//!
//! Failures: a rate limit cools the key down (scheduler) and gives the entries back without
//! spending an attempt, halving the batch size for Google (which counts every item of a batch
//! against the quota; request quotas elsewhere count requests, so batches stay full); a key rejection retires the key and gives the entries back; a transient or
//! malformed answer spends one attempt and retries later with backoff; a permanent refusal of
//! a multi-item batch is sent again item by item (each alone, once) to find the culprit, and a single item refused
//! permanently fails at once. Past `embedding.max_attempts` an entry is `failed` and the job
//! lists a structured error for it.
//!
//! A re-ingest's job starts `queued`: [`EmbeddingWorkers::prepare`] chunks the stored sources
//! into its new run in the background (off the runtime, source by source, stopping if the job
//! is paused or cancelled meanwhile), then starts the job. A paused preparation is finished by
//! the re-ingest's completion step once the job is resumed (it chunks sources its run lacks),
//! one that meets an unavailable store starts again after a pause, and one cut short by a crash
//! is taken up again by the startup pass.
//!
//! Workers wake when work arrives ([`EmbeddingWorkers::wake`]) and also poll, so work written
//! by another process is picked up too. [`EmbeddingWorkers::run_once`] and
//! [`EmbeddingWorkers::drain`] run the same steps deterministically for tests.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::chunking::{Cl100k, TokenCounter};
use crate::config::ReuseScope;
use crate::domain::{ChunkId, JobEventKind, JobId, JobKind, JobStatus, ProviderKind, WorkItem};
use crate::providers::scheduler::{AcquireError, BatchSizer, KeyScheduler, Lane, Outcome};
use crate::providers::{EmbedMode, EmbedRequest, EmbeddingProvider, ModelRegistry, ProviderError};
use crate::store::{ReingestStep, SourceChunks, Store};
use crate::vector::{Error as VectorError, Point, PointPayload, VectorRepo};

/// How often idle workers look for work written by other processes.
const POLL: Duration = Duration::from_secs(2);
/// How often idle workers look for running jobs nothing is left to claim in.
const SWEEP_INTERVAL: Duration = Duration::from_secs(30);
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
/// First pause before a re-ingest preparation that met an unavailable store starts again; each
/// further pause doubles, up to [`PREPARE_RETRY_MAX`].
const PREPARE_RETRY_FIRST: Duration = Duration::from_secs(1);
const PREPARE_RETRY_MAX: Duration = Duration::from_secs(60);

/// The embedding providers by kind.
#[derive(Clone, Default)]
pub struct Providers {
    map: HashMap<ProviderKind, Arc<dyn EmbeddingProvider>>,
}

impl Providers {
    pub fn with(mut self, provider: Arc<dyn EmbeddingProvider>) -> Self {
        self.map.insert(provider.kind(), provider);
        self
    }

    pub fn get(&self, kind: ProviderKind) -> Option<Arc<dyn EmbeddingProvider>> {
        self.map.get(&kind).cloned()
    }

    /// The tokenizer sources of `kind`'s worlds are chunked with: the model's own where quarry
    /// has it (the local model's WordPiece), else `cl100k_base`.
    pub async fn chunk_counter(&self, kind: ProviderKind) -> Result<Arc<dyn TokenCounter>, ProviderError> {
        let own = match self.get(kind) {
            Some(provider) => provider.chunk_counter().await?,
            None => None,
        };
        Ok(own.unwrap_or_else(|| Arc::new(Cl100k)))
    }
}

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
    store: Arc<dyn Store>,
    vectors: Arc<dyn VectorRepo>,
    providers: Providers,
    registry: Arc<ModelRegistry>,
    scheduler: KeyScheduler,
    config: WorkerConfig,
    wake: Notify,
    sizers: std::sync::Mutex<HashMap<ProviderKind, Arc<BatchSizer>>>,
    /// Re-ingest preparations under way ([`EmbeddingWorkers::prepare`]), one per job.
    preparing: std::sync::Mutex<HashMap<JobId, tokio::task::JoinHandle<()>>>,
    /// The app's shutdown: ends preparations that are waiting to try again.
    stop: CancellationToken,
    /// Vector writes in a row that failed for an outage (see [`EmbeddingWorkers::infra_pause`]).
    outages: AtomicU32,
    /// Jobs told (by a `no_eligible_key` warning) that no key is left to embed them.
    no_key_warned: std::sync::Mutex<std::collections::HashSet<JobId>>,
    /// The counts of the last progress event this process wrote, per job.
    last_progress: std::sync::Mutex<HashMap<JobId, crate::domain::JobCounts>>,
    /// Jobs told (by a `provider_unavailable` warning) that this process cannot embed them.
    unavailable_warned: std::sync::Mutex<std::collections::HashSet<JobId>>,
    /// When an idle worker last looked for stalled jobs ([`EmbeddingWorkers::finish_stalled`]).
    last_sweep: std::sync::Mutex<Option<std::time::Instant>>,
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

impl EmbeddingWorkers {
    pub fn new(
        store: Arc<dyn Store>,
        vectors: Arc<dyn VectorRepo>,
        providers: Providers,
        registry: Arc<ModelRegistry>,
        scheduler: KeyScheduler,
        config: WorkerConfig,
        stop: CancellationToken,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                store,
                vectors,
                providers,
                registry,
                scheduler,
                config,
                wake: Notify::new(),
                sizers: std::sync::Mutex::new(HashMap::new()),
                preparing: std::sync::Mutex::new(HashMap::new()),
                stop,
                outages: AtomicU32::new(0),
                no_key_warned: std::sync::Mutex::new(std::collections::HashSet::new()),
                unavailable_warned: std::sync::Mutex::new(std::collections::HashSet::new()),
                last_progress: std::sync::Mutex::new(HashMap::new()),
                last_sweep: std::sync::Mutex::new(None),
            }),
        }
    }

    /// Wakes idle workers (new work was written).
    pub fn wake(&self) {
        self.shared.wake.notify_waiters();
    }

    /// Prepares a queued re-ingest job in the background: see [`EmbeddingWorkers::prepare_now`].
    /// A store that is unavailable (a connection lost, a database busy past its timeout) is
    /// waited out: the preparation starts again after 1 s, 2 s, 4 s … (at most a minute apart)
    /// until it gets through, the job leaves `queued` or the workers stop. Any other failure
    /// leaves the job queued; pausing and resuming it, or a restart, tries again.
    pub fn prepare(&self, job: JobId) {
        let mut preparing = self
            .shared
            .preparing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        preparing.retain(|_, h| !h.is_finished());
        if preparing.contains_key(&job) {
            // One preparation per job: pausing and resuming a re-ingest again and again must
            // not start a full chunking of the world each time. The one under way sees the
            // job's status before each source and carries on or stops.
            return;
        }
        let this = self.clone();
        let handle = tokio::spawn(async move {
            let mut pause = PREPARE_RETRY_FIRST;
            loop {
                match this.prepare_now(job).await {
                    Ok(()) => return,
                    Err(err @ crate::store::Error::Unavailable(_)) => {
                        tracing::warn!(%job, error = %err, retry_in_s = pause.as_secs(),
                            "preparing a re-ingest met an unavailable store; trying again");
                    }
                    Err(err) => {
                        tracing::warn!(%job, error = %err,
                            "preparing a re-ingest failed; it stays queued: pause and resume it (or restart) to try again");
                        return;
                    }
                }
                tokio::select! {
                    () = this.shared.stop.cancelled() => return,
                    () = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(PREPARE_RETRY_MAX);
            }
        });
        preparing.insert(job, handle);
    }

    /// Chunks every stored source the queued re-ingest `job`'s run lacks into it, one source
    /// at a time and off the runtime, then starts the job (queued → running), wakes the workers
    /// and finishes it at once when there is nothing to embed. Stops quietly when the job is
    /// no longer queued (paused or cancelled meanwhile). A running job (a resumed one) goes to
    /// its completion step instead, which chunks what its run still lacks.
    async fn prepare_now(&self, job: JobId) -> crate::store::Result<()> {
        let store = &self.shared.store;
        let Some(current) = store.get_job(job).await? else {
            return Ok(());
        };
        if current.status == JobStatus::Running {
            self.wake();
            return self.finish_job(job).await;
        }
        if current.kind != JobKind::Reingest || current.status != JobStatus::Queued {
            return Ok(());
        }
        let (world, run) = (current.world_id, current.run_id);
        let Some(chunking) = store.run_chunking(job).await? else {
            return Ok(());
        };
        let counter = self.run_counter(world, run).await?;
        let mut added = 0;
        for (source, book_number) in store.sources_missing_from_run(world, run).await? {
            if store.get_job(job).await?.map(|j| j.status) != Some(JobStatus::Queued) {
                tracing::info!(%job, "re-ingest paused or cancelled while its sources were chunked");
                return Ok(());
            }
            added += self
                .chunk_into_run(job, world, run, (chunking, &counter), source, book_number)
                .await?;
        }
        if store
            .transition_job(job, &[JobStatus::Queued], JobStatus::Running, now())
            .await?
            .is_some()
        {
            tracing::info!(%job, chunks = added, "re-ingest chunked; embedding starts");
            self.wake();
            // A world without sources has nothing to embed: switch at once.
            self.finish_job(job).await?;
        }
        Ok(())
    }

    /// Spawns the configured number of workers on `tracker`; they stop when `cancel` fires.
    pub fn spawn(&self, tracker: &TaskTracker, cancel: &CancellationToken) {
        let process = uuid::Uuid::new_v4().simple().to_string();
        for n in 0..self.shared.config.workers {
            let workers = self.clone();
            let owner = format!("{}-{n}", &process[..12]);
            tracker.spawn(workers.run(owner, cancel.clone()));
        }
    }

    /// One worker's loop. When `cancel` fires, the step under way is dropped and the entries
    /// it held are given back at once.
    pub async fn run(self, owner: String, cancel: CancellationToken) {
        self.work(&owner, &cancel).await;
        match self.shared.store.release_owner(&owner, now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(%owner, entries = n, "worker stopped; its claimed entries were given back"),
            Err(err) => {
                tracing::warn!(%owner, error = %err, "giving back claimed entries failed; their leases run out instead")
            }
        }
    }

    async fn work(&self, owner: &str, cancel: &CancellationToken) {
        loop {
            if cancel.is_cancelled() {
                return;
            }
            let notified = self.shared.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let step = tokio::select! {
                () = cancel.cancelled() => return,
                step = self.run_once(owner) => step,
            };
            match step {
                Ok(step) if step.claimed > 0 => continue,
                Ok(_) => {
                    if self.sweep_due()
                        && let Err(err) = self.finish_stalled().await
                    {
                        tracing::warn!(error = %err, "finishing stalled jobs failed; retrying later");
                    }
                }
                Err(err) => tracing::warn!(error = %err, "embedding worker step failed; retrying"),
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = &mut notified => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// Chunks one stored source into a re-ingest's run (off the runtime) under `job`. Returns
    /// how many chunks were added: none when the source is gone, is already in the run (another
    /// task chunked it first) or the run is no longer being built.
    async fn chunk_into_run(
        &self,
        job: JobId,
        world: crate::domain::WorldId,
        run: crate::domain::RunId,
        (chunking, counter): (crate::domain::ChunkingProfile, &Arc<dyn TokenCounter>),
        source: crate::domain::SourceId,
        book_number: u32,
    ) -> crate::store::Result<u64> {
        let store = &self.shared.store;
        let Some(text) = store.source_text(world, source).await? else {
            return Ok(0);
        };
        let chunks = split_off_runtime(text, chunking, counter.clone()).await?;
        let source = SourceChunks {
            source,
            book_number,
            chunks,
        };
        match store.add_run_chunks(world, run, job, source, now()).await {
            Err(crate::store::Error::Duplicate(_)) => Ok(0),
            other => other,
        }
    }

    /// The tokenizer a run's chunks are cut with: its own profile's (a re-ingest may change the
    /// provider). A model that cannot be read now (local files missing) fails the preparation,
    /// which leaves the job queued (see [`EmbeddingWorkers::prepare`]).
    async fn run_counter(
        &self,
        world: crate::domain::WorldId,
        run: crate::domain::RunId,
    ) -> crate::store::Result<Arc<dyn TokenCounter>> {
        let runs = self.shared.store.world_runs(world).await?;
        let Some(info) = runs.into_iter().find(|r| r.id == run) else {
            return Ok(Arc::new(Cl100k));
        };
        self.shared
            .providers
            .chunk_counter(info.embedding.provider)
            .await
            .map_err(|err| crate::store::Error::Internal(format!("the run's tokenizer is not available: {err}")))
    }

    /// Waits for the re-ingest preparations under way (for tests).
    pub async fn prepared(&self) {
        let preparing: HashMap<_, _> = std::mem::take(
            &mut *self
                .shared
                .preparing
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for handle in preparing.into_values() {
            let _ = handle.await;
        }
    }

    /// Waits for re-ingest preparations under way, then runs steps until no work is left that
    /// can be done now, then finishes stalled jobs (for tests).
    pub async fn drain(&self) -> crate::store::Result<u64> {
        self.prepared().await;
        let mut embedded = 0;
        loop {
            let step = self.run_once("drain").await?;
            embedded += step.embedded;
            if step.claimed == 0 {
                self.finish_stalled().await?;
                return Ok(embedded);
            }
        }
    }

    /// Finishes running jobs that have nothing left to claim. Workers finish a job after its
    /// last batch; a process that stopped between marking that batch and finishing the job
    /// (or a completion step that failed) leaves a job that no worker would ever look at
    /// again, in this process or any other. Idle workers look for such jobs every
    /// [`SWEEP_INTERVAL`].
    async fn finish_stalled(&self) -> crate::store::Result<()> {
        for job in self.shared.store.running_jobs_with_nothing_pending().await? {
            self.finish_job(job).await?;
        }
        Ok(())
    }

    /// Whether an idle worker should look for stalled jobs now (once per [`SWEEP_INTERVAL`]
    /// per process, whichever worker comes first).
    fn sweep_due(&self) -> bool {
        let mut last = self
            .shared
            .last_sweep
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let due = last.is_none_or(|at| at.elapsed() >= SWEEP_INTERVAL);
        if due {
            *last = Some(std::time::Instant::now());
        }
        due
    }

    /// Claims one set of entries and processes it.
    pub async fn run_once(&self, owner: &str) -> crate::store::Result<Step> {
        let now = now();
        let lease_until = now + to_chrono(self.shared.config.lease);
        let items = self
            .shared
            .store
            .claim_work(owner, CLAIM_LIMIT, lease_until, now)
            .await?;
        if items.is_empty() {
            return Ok(Step::default());
        }
        let claimed = items.len();
        let job = items[0].job_id;
        let embedded = self.process(owner, items).await?;
        self.after_batch(job).await?;
        Ok(Step { claimed, embedded })
    }

    fn sizer(&self, provider: ProviderKind, max: usize) -> Arc<BatchSizer> {
        let mut sizers = self
            .shared
            .sizers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        sizers
            .entry(provider)
            .or_insert_with(|| Arc::new(BatchSizer::new(max)))
            .clone()
    }

    async fn process(&self, owner: &str, items: Vec<WorkItem>) -> crate::store::Result<u64> {
        let store = &self.shared.store;
        let job = items[0].job_id;
        let profile = items[0].profile.clone();
        let Some(provider) = self.shared.providers.get(profile.provider) else {
            let message = format!("no adapter for {} is configured in this process", profile.provider);
            self.wait_for_provider(owner, job, &items, &message).await?;
            return Ok(0);
        };
        let Some(spec) = self.shared.registry.find(profile.provider, &profile.model).cloned() else {
            let message = format!(
                "the world's model {} {} is not in this process's configuration",
                profile.provider, profile.model
            );
            self.wait_for_provider(owner, job, &items, &message).await?;
            return Ok(0);
        };
        let limits = provider.limits(&spec);
        let sizer = self.sizer(profile.provider, limits.max_batch_size);
        let (items, mut embedded) = self.reuse(owner, items).await?;
        let mut queue: std::collections::VecDeque<WorkItem> = items.into();
        // Items of a batch the provider refused as a whole, at the front of the queue: each is
        // sent alone, so that only the one at fault fails and the others are sent once more.
        let mut singles = 0usize;
        while !queue.is_empty() {
            let take = if singles > 0 {
                singles -= 1;
                1
            } else {
                sizer.size().min(limits.max_batch_size).max(1).min(queue.len())
            };
            let batch: Vec<WorkItem> = queue.drain(..take).collect();
            let tokens: u32 = batch.iter().map(|i| i.token_count).sum();
            let lease = match self
                .shared
                .scheduler
                .acquire(profile.provider, Lane::Ingest(batch[0].world_id), tokens)
                .await
            {
                Ok(lease) => {
                    self.no_key_warned(job, false);
                    lease
                }
                Err(err) => {
                    let retry = match err {
                        AcquireError::RateLimited { retry_after } => retry_after,
                        AcquireError::NoEligibleKey(provider) => {
                            // Said once per job (until a key serves it again): the job waits
                            // for a key to be added or enabled.
                            if self.no_key_warned(job, true) {
                                self.warn(
                                    job,
                                    json!({"code": "no_eligible_key", "chunks": batch.len() + queue.len(),
                                    "message": format!(
                                        "no enabled {provider} key is left; the chunks wait until one is \
                                         added (POST /v1/provider-keys) or enabled"
                                    )}),
                                )
                                .await?;
                            }
                            NO_KEY_RETRY
                        }
                    };
                    let rest: Vec<ChunkId> = batch.iter().chain(queue.iter()).map(|i| i.chunk_id).collect();
                    store
                        .release_work(owner, job, &rest, Some(now() + to_chrono(retry)), false, now())
                        .await?;
                    tracing::info!(%job, error = %err, "no provider key available; entries given back");
                    return Ok(embedded);
                }
            };
            // Taking a key may have waited out a rate limit: a job paused or cancelled meanwhile
            // sends nothing more (its entries go back; a paused job's wait for its resume).
            if store.job_status(job).await? != Some(JobStatus::Running) {
                lease.finish(Outcome::Unused).await;
                let rest: Vec<ChunkId> = batch.iter().chain(queue.iter()).map(|i| i.chunk_id).collect();
                store.release_work(owner, job, &rest, None, false, now()).await?;
                return Ok(embedded);
            }
            let texts: Vec<String> = batch.iter().map(|i| i.chunk_text.clone()).collect();

            // Exact token check before dispatch.
            let counts = provider.count_tokens(lease.key(), &profile.model, &texts).await;
            let counts = match counts {
                Ok(counts) if counts.len() == batch.len() => counts,
                Ok(_) => {
                    lease.finish(Outcome::Failed).await;
                    for item in &batch {
                        self.fail(
                            owner,
                            item,
                            "token_count_failed",
                            "the provider returned the wrong number of counts",
                            false,
                        )
                        .await?;
                    }
                    continue;
                }
                Err(err) => {
                    let outcome = Outcome::of::<()>(&Err(err.clone()));
                    lease.finish(outcome).await;
                    self.handle_batch_error(owner, job, &batch, err, &sizer).await?;
                    continue;
                }
            };
            let mut sendable = Vec::with_capacity(batch.len());
            let mut sendable_counts = Vec::with_capacity(batch.len());
            for (item, count) in batch.into_iter().zip(counts) {
                if count > limits.max_input_tokens {
                    let message = format!(
                        "chunk has {count} tokens, over the model's limit of {}; it was not sent",
                        limits.max_input_tokens
                    );
                    self.fail(owner, &item, "input_too_large", &message, true).await?;
                } else {
                    sendable.push(item);
                    sendable_counts.push(count);
                }
            }
            if sendable.is_empty() {
                lease.finish(Outcome::Unused).await;
                continue;
            }
            let texts: Vec<String> = sendable.iter().map(|i| i.chunk_text.clone()).collect();
            let request = EmbedRequest {
                model: &profile.model,
                dimensions: profile.dimensions,
                mode: EmbedMode::Document,
                texts: &texts,
                token_counts: Some(&sendable_counts),
            };
            let result = provider.embed(lease.key(), request).await;
            let outcome = Outcome::of(&result);
            lease.finish(outcome).await;
            let vectors = match result {
                Ok(vectors)
                    if vectors.len() == sendable.len()
                        && vectors.iter().all(|v| v.len() == profile.dimensions as usize) =>
                {
                    vectors
                }
                Ok(_) => {
                    for item in &sendable {
                        self.fail(
                            owner,
                            item,
                            "provider_error",
                            "the provider returned vectors of the wrong shape",
                            false,
                        )
                        .await?;
                    }
                    continue;
                }
                Err(ProviderError::Permanent { message }) if sendable.len() > 1 => {
                    tracing::info!(%job, %message, items = sendable.len(), "batch refused; sending its items one by one");
                    singles += sendable.len();
                    for item in sendable.into_iter().rev() {
                        queue.push_front(item);
                    }
                    continue;
                }
                Err(err) => {
                    self.handle_batch_error(owner, job, &sendable, err, &sizer).await?;
                    continue;
                }
            };
            sizer.grow();
            self.shared
                .unavailable_warned
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&job);
            let points: Vec<Point> = sendable
                .iter()
                .zip(vectors)
                .map(|(item, dense)| point_of(item, dense))
                .collect();
            match self.write(&sendable[0].collection, points).await {
                Ok(()) => {}
                Err(err @ (VectorError::Unavailable(_) | VectorError::Io(_))) => {
                    // An outage: nothing the chunks did. They go back without spending an
                    // attempt, for a pause that doubles while the outage lasts, so that an
                    // outage does not pay for the same embeddings every few seconds.
                    let pause = self.infra_pause();
                    tracing::warn!(%job, error = %err, retry_in_s = pause.as_secs(),
                        "vector store write failed; entries given back");
                    self.warn(
                        job,
                        json!({"code": "vector_store_unavailable", "chunks": sendable.len() + queue.len(),
                        "message": format!(
                            "writing vectors failed; the chunks will be embedded again in {} s: {err}",
                            pause.as_secs()
                        )}),
                    )
                    .await?;
                    let ids: Vec<ChunkId> = sendable.iter().chain(queue.iter()).map(|i| i.chunk_id).collect();
                    store
                        .release_work(owner, job, &ids, Some(now() + to_chrono(pause)), false, now())
                        .await?;
                    return Ok(embedded);
                }
                Err(err) => {
                    // Refused (a lost collection, vectors that do not fit it): each chunk spends
                    // an attempt, so a refusal that lasts fails them instead of looping.
                    let message = err.to_string();
                    tracing::warn!(%job, error = %message, "vector store refused a write");
                    self.warn(
                        job,
                        json!({"code": "vector_store_rejected", "chunks": sendable.len(), "message": format!(
                            "the vector store refused the chunks' vectors; each spent an attempt: {message}"
                        )}),
                    )
                    .await?;
                    for item in &sendable {
                        self.fail(owner, item, "vector_store_rejected", &message, false).await?;
                    }
                    continue;
                }
            }
            // Confirmed by the vector store: now, and only now, the entries are embedded.
            let done: Vec<(ChunkId, String)> = sendable.iter().map(|i| (i.chunk_id, i.text_sha256.clone())).collect();
            let marked = store
                .complete_work(owner, job, sendable[0].run_id, &done, 0, now())
                .await?;
            embedded += marked;
            if marked < done.len() as u64 {
                self.drop_dead_points(&sendable).await?;
                // The job was paused or cancelled meanwhile: stop and give the rest back.
                let ids: Vec<ChunkId> = queue.iter().map(|i| i.chunk_id).collect();
                store.release_work(owner, job, &ids, None, false, now()).await?;
                return Ok(embedded);
            }
        }
        Ok(embedded)
    }

    /// Gives `items` back for [`UNAVAILABLE_RETRY`] without spending an attempt, because this
    /// process cannot run their provider or model at all (`why`); the job is told once, with a
    /// `provider_unavailable` warning, until one of its batches is embedded again.
    async fn wait_for_provider(
        &self,
        owner: &str,
        job: JobId,
        items: &[WorkItem],
        why: &str,
    ) -> crate::store::Result<()> {
        let first = self
            .shared
            .unavailable_warned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(job);
        if first {
            self.warn(
                job,
                json!({"code": "provider_unavailable", "chunks": items.len(), "message": format!(
                    "{why}; the chunks wait (no attempt spent) and are tried again every {} s",
                    UNAVAILABLE_RETRY.as_secs()
                )}),
            )
            .await?;
        }
        if first {
            tracing::warn!(%job, reason = %why, "provider unavailable in this process; entries given back");
        } else {
            tracing::debug!(%job, reason = %why, "provider still unavailable; entries given back");
        }
        let ids: Vec<ChunkId> = items.iter().map(|i| i.chunk_id).collect();
        self.shared
            .store
            .release_work(
                owner,
                job,
                &ids,
                Some(now() + to_chrono(UNAVAILABLE_RETRY)),
                false,
                now(),
            )
            .await
    }

    /// Marks `job` as told that no key is left (`waiting`) or as served again; returns whether
    /// the mark is new.
    fn no_key_warned(&self, job: JobId, waiting: bool) -> bool {
        let mut warned = self
            .shared
            .no_key_warned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match waiting {
            true => warned.insert(job),
            false => warned.remove(&job),
        }
    }

    /// Writes `points` to `collection` and waits for the confirmation. A write that meets an
    /// outage is tried again with the same vectors after [`WRITE_RETRIES`] pauses, so a short
    /// blip costs no new embedding. A confirmed write ends the outage pause ([`Self::infra_pause`]).
    async fn write(&self, collection: &str, points: Vec<Point>) -> crate::vector::Result<()> {
        let mut pauses = WRITE_RETRIES.iter();
        loop {
            match self.shared.vectors.upsert(collection, points.clone()).await {
                Ok(()) => {
                    self.shared.outages.store(0, Ordering::Relaxed);
                    return Ok(());
                }
                Err(err @ (VectorError::Unavailable(_) | VectorError::Io(_))) => match pauses.next() {
                    Some(pause) => tokio::time::sleep(*pause).await,
                    None => return Err(err),
                },
                Err(err) => return Err(err),
            }
        }
    }

    /// How long entries given back after a failed write wait: [`INFRA_RETRY`], doubling with
    /// every such failure in a row (up to [`INFRA_RETRY_MAX`]) until a write gets through.
    fn infra_pause(&self) -> Duration {
        let failures = self.shared.outages.fetch_add(1, Ordering::Relaxed);
        outage_pause(failures)
    }

    /// Embeds nothing for items whose exact text already has a vector of the same profile (in
    /// the same world, or anywhere with `embedding.reuse = "global"`): that vector is written to
    /// the item's own point and the entry marked embedded, counted as reused. Returns the items
    /// still to embed and how many were marked. A failure here only means no reuse.
    async fn reuse(&self, owner: &str, items: Vec<WorkItem>) -> crate::store::Result<(Vec<WorkItem>, u64)> {
        let world = match self.shared.config.reuse {
            ReuseScope::Off => return Ok((items, 0)),
            ReuseScope::World => Some(items[0].world_id),
            ReuseScope::Global => None,
        };
        let (job, run) = (items[0].job_id, items[0].run_id);
        let collection = items[0].collection.clone();
        let dimensions = items[0].profile.dimensions as usize;
        let mut hashes: Vec<String> = items.iter().map(|i| i.text_sha256.clone()).collect();
        hashes.sort_unstable();
        hashes.dedup();
        let found = match self.shared.store.find_reusable(&collection, world, &hashes).await {
            Ok(found) if !found.is_empty() => found,
            Ok(_) => return Ok((items, 0)),
            Err(err) => {
                tracing::warn!(%job, error = %err, "looking up reusable vectors failed; embedding instead");
                return Ok((items, 0));
            }
        };
        let points: Vec<uuid::Uuid> = found.iter().map(|(_, p)| *p).collect();
        let vectors = match self.shared.vectors.dense_vectors(&collection, &points).await {
            Ok(vectors) => vectors,
            Err(err) => {
                tracing::warn!(%job, error = %err, "reading reusable vectors failed; embedding instead");
                return Ok((items, 0));
            }
        };
        let by_point: HashMap<uuid::Uuid, Vec<f32>> = vectors
            .into_iter()
            .filter(|(_, v)| v.len() == dimensions && v.iter().all(|x| x.is_finite()))
            .collect();
        let by_hash: HashMap<&str, &Vec<f32>> = found
            .iter()
            .filter_map(|(hash, point)| Some((hash.as_str(), by_point.get(point)?)))
            .collect();
        let (reusable, rest): (Vec<WorkItem>, Vec<WorkItem>) = items
            .into_iter()
            .partition(|i| by_hash.contains_key(i.text_sha256.as_str()));
        if reusable.is_empty() {
            return Ok((rest, 0));
        }
        let new_points: Vec<Point> = reusable
            .iter()
            .filter_map(|item| Some(point_of(item, (*by_hash.get(item.text_sha256.as_str())?).clone())))
            .collect();
        if let Err(err) = self.shared.vectors.upsert(&collection, new_points).await {
            tracing::warn!(%job, error = %err, "writing reused vectors failed; embedding instead");
            return Ok((reusable.into_iter().chain(rest).collect(), 0));
        }
        let done: Vec<(ChunkId, String)> = reusable.iter().map(|i| (i.chunk_id, i.text_sha256.clone())).collect();
        let marked = self
            .shared
            .store
            .complete_work(owner, job, run, &done, done.len() as u64, now())
            .await?;
        if marked < done.len() as u64 {
            // The job was paused or cancelled meanwhile (or slots deleted): as after an
            // embedding, no point is left behind for a slot that is gone, and the rest of the
            // claim goes back without a provider call.
            self.drop_dead_points(&reusable).await?;
            let ids: Vec<ChunkId> = rest.iter().map(|i| i.chunk_id).collect();
            self.shared
                .store
                .release_work(owner, job, &ids, None, false, now())
                .await?;
            return Ok((Vec::new(), marked));
        }
        tracing::debug!(%job, reused = marked, "vectors reused for identical text");
        Ok((rest, marked))
    }

    async fn handle_batch_error(
        &self,
        owner: &str,
        job: JobId,
        batch: &[WorkItem],
        err: ProviderError,
        sizer: &BatchSizer,
    ) -> crate::store::Result<()> {
        let store = &self.shared.store;
        let ids: Vec<ChunkId> = batch.iter().map(|i| i.chunk_id).collect();
        match err {
            ProviderError::RateLimited { .. } => {
                // Not the chunks' fault: no attempt spent. Google counts every text of a batch
                // against its quota, so smaller batches fit where a large one did not; request
                // quotas (OpenAI-style) count a request whatever its size, so a smaller batch
                // would only carry less per granted request.
                if batch[0].profile.provider == ProviderKind::Google {
                    sizer.shrink(batch.len());
                }
                store.release_work(owner, job, &ids, None, true, now()).await
            }
            ProviderError::KeyRejected { message } | ProviderError::QuotaExhausted { message } => {
                // The key is retired by the scheduler; another key takes the work.
                self.warn(
                    job,
                    json!({"code": "key_retired", "chunks": batch.len(), "message": format!(
                        "a {} key was refused and is retired; its chunks go to the other keys: {message}",
                        batch[0].profile.provider
                    )}),
                )
                .await?;
                store.release_work(owner, job, &ids, None, false, now()).await
            }
            ProviderError::Permanent { message } if batch.len() > 1 => {
                // One item may be the cause: retry one by one to find it.
                sizer.shrink(2);
                tracing::info!(%job, %message, "batch refused; retrying its items one by one");
                store.release_work(owner, job, &ids, None, false, now()).await
            }
            ProviderError::Permanent { message } => self.fail(owner, &batch[0], "provider_error", &message, true).await,
            ProviderError::InputTooLarge { tokens, limit } => {
                let message = format!("input of {tokens} tokens exceeds the limit of {limit}");
                for item in batch {
                    self.fail(owner, item, "input_too_large", &message, true).await?;
                }
                Ok(())
            }
            ProviderError::TokenCountFailed { message } => {
                for item in batch {
                    self.fail(owner, item, "token_count_failed", &message, true).await?;
                }
                Ok(())
            }
            ProviderError::Unavailable { message } => self.wait_for_provider(owner, job, batch, &message).await,
            ProviderError::Transient { message } | ProviderError::Malformed { message } => {
                // Chunks on their last attempt fail now, each with an `error` event: the warning
                // speaks only of those that will be tried again.
                let max = self.shared.config.max_attempts;
                let retried = batch.iter().filter(|i| i.attempts.saturating_add(1) < max).count();
                if retried > 0 {
                    self.warn(
                        job,
                        json!({"code": "provider_error", "chunks": retried, "message": format!(
                            "an embedding call failed and {retried} of its {} chunk(s) will be retried after a \
                             backoff (each spent an attempt): {message}",
                            batch.len()
                        )}),
                    )
                    .await?;
                }
                for item in batch {
                    self.fail(owner, item, "provider_error", &message, false).await?;
                }
                Ok(())
            }
        }
    }

    /// Records a `warning` event on `job`: trouble the job recovers from by itself.
    async fn warn(&self, job: JobId, data: serde_json::Value) -> crate::store::Result<()> {
        self.shared
            .store
            .append_job_event(job, JobEventKind::Warning, &data.to_string(), now())
            .await?;
        Ok(())
    }

    /// Spends an attempt (or fails at once when `permanent`) and records an error event when
    /// the entry is now failed.
    async fn fail(
        &self,
        owner: &str,
        item: &WorkItem,
        code: &str,
        message: &str,
        permanent: bool,
    ) -> crate::store::Result<()> {
        let retry_at = now() + to_chrono(retry_backoff(item.attempts + 1));
        let failed = self
            .shared
            .store
            .fail_work(
                owner,
                item.job_id,
                item.chunk_id,
                code,
                message,
                self.shared.config.max_attempts,
                permanent,
                retry_at,
                now(),
            )
            .await?;
        if failed {
            let data = json!({
                "book_number": item.book_number, "chunk_number": item.chunk_number, "code": code, "message": message,
            });
            self.shared
                .store
                .append_job_event(item.job_id, JobEventKind::Error, &data.to_string(), now())
                .await?;
        }
        Ok(())
    }

    /// Records progress (when the counts moved since this process last did) and finishes the
    /// job when nothing is pending.
    async fn after_batch(&self, job: JobId) -> crate::store::Result<()> {
        let store = &self.shared.store;
        if let Some(current) = store.get_job(job).await?
            && !current.status.is_terminal()
            && self.progress_moved(job, current.counts)
        {
            let c = current.counts;
            let data = json!({"total": c.total, "embedded": c.embedded, "pending": c.pending, "failed": c.failed,
                "retries": c.retries, "rate_limited": c.rate_limited, "reused": c.reused});
            store
                .append_job_event(job, JobEventKind::Progress, &data.to_string(), now())
                .await?;
        }
        self.finish_job(job).await
    }

    /// Whether `counts` move on from the last progress this process claimed for `job`, claiming
    /// them if so: a batch whose completion a pause refused changes nothing and says nothing,
    /// and of two workers that read the counts at about the same time only the one with the
    /// later counts writes, so a job's progress never goes backwards in this process.
    fn progress_moved(&self, job: JobId, counts: crate::domain::JobCounts) -> bool {
        let mut last = self
            .shared
            .last_progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let done = |c: &crate::domain::JobCounts| (c.embedded + c.failed, c.retries + c.rate_limited, c.total);
        if last.get(&job).is_some_and(|seen| done(seen) >= done(&counts)) {
            return false;
        }
        if last.len() >= 10_000 {
            last.clear();
        }
        last.insert(job, counts);
        true
    }

    /// Finishes `job` if nothing is pending. An ingest or repair job completes (or fails); a
    /// re-ingest first gets the sources added since it began, then switches the world to its
    /// run (or, with failed chunks, fails and leaves the world on its old run), and the run that
    /// lost is removed: points first, then rows (a failed point delete leaves the run retired,
    /// and startup repair removes it later).
    pub async fn finish_job(&self, job: JobId) -> crate::store::Result<()> {
        let store = &self.shared.store;
        let Some(current) = store.get_job(job).await? else {
            return Ok(());
        };
        if current.kind != JobKind::Reingest {
            if let Some(finished) = store.finish_job_if_done(job, now()).await? {
                self.log_finished(job, finished.status);
                debug_assert!(matches!(finished.status, JobStatus::Completed | JobStatus::Failed));
            }
            return Ok(());
        }
        match store.finish_reingest(job, now()).await? {
            ReingestStep::NotDone => Ok(()),
            ReingestStep::MissingSources { world, run, sources } => {
                let Some(chunking) = store.run_chunking(job).await? else {
                    return Ok(());
                };
                let counter = self.run_counter(world, run).await?;
                for (source, book_number) in sources {
                    let added = self
                        .chunk_into_run(job, world, run, (chunking, &counter), source, book_number)
                        .await?;
                    tracing::info!(%job, %source, added, "source added during the re-ingest chunked into the new run");
                }
                self.wake();
                Ok(())
            }
            ReingestStep::Failed { world, run, collection } => {
                // The run's rows stay (retired) so the job keeps listing its failed chunks.
                self.log_finished(job, JobStatus::Failed);
                if let Err(err) = self
                    .shared
                    .vectors
                    .delete_by_filter(&collection, crate::vector::PointFilter::world(world).run(run))
                    .await
                {
                    tracing::warn!(%world, %run, error = %err, "deleting an abandoned run's points failed; repair will retry");
                }
                Ok(())
            }
            ReingestStep::Switched {
                world,
                old_run,
                old_collection,
            } => {
                self.log_finished(job, JobStatus::Completed);
                tracing::info!(%job, %world, "re-ingest complete: the world now serves its new run");
                self.remove_run(world, old_run, &old_collection).await
            }
        }
    }

    /// Logs a job's end (the store recorded its status event with the change).
    fn log_finished(&self, job: JobId, status: JobStatus) {
        self.no_key_warned(job, false);
        self.shared
            .last_progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&job);
        self.shared
            .unavailable_warned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&job);
        tracing::info!(%job, %status, "job finished");
    }

    /// After a refused completion (job paused or cancelled, source or run deleted meanwhile):
    /// deletes the points just written for slots that no longer exist or whose run is no longer
    /// live, so a late answer never leaves a point behind that nothing accounts for. Slots that
    /// still exist keep their point (a paused job, or repair, picks them up).
    async fn drop_dead_points(&self, items: &[WorkItem]) -> crate::store::Result<()> {
        let (world, run) = (items[0].world_id, items[0].run_id);
        let live = self
            .shared
            .store
            .world_runs(world)
            .await?
            .iter()
            .any(|r| r.id == run && r.status != crate::domain::RunStatus::Retired);
        let ids: Vec<uuid::Uuid> = items.iter().map(|i| i.point_id).collect();
        let alive: std::collections::HashSet<uuid::Uuid> = if live {
            self.shared
                .store
                .chunks_by_points(world, run, &ids)
                .await?
                .into_iter()
                .map(|c| c.point_id)
                .collect()
        } else {
            std::collections::HashSet::new()
        };
        let dead: Vec<uuid::Uuid> = ids.into_iter().filter(|id| !alive.contains(id)).collect();
        if !dead.is_empty()
            && let Err(err) = self.shared.vectors.delete_points(&items[0].collection, &dead).await
        {
            tracing::warn!(%world, %run, error = %err, "deleting points of vanished slots failed; repair will retry");
        }
        Ok(())
    }

    /// Deletes a retired run's points, then its rows.
    pub async fn remove_run(
        &self,
        world: crate::domain::WorldId,
        run: crate::domain::RunId,
        collection: &str,
    ) -> crate::store::Result<()> {
        match self
            .shared
            .vectors
            .delete_by_filter(collection, crate::vector::PointFilter::world(world).run(run))
            .await
        {
            Ok(()) => self.shared.store.delete_run(run).await,
            Err(err) => {
                tracing::warn!(%world, %run, error = %err, "deleting a retired run's points failed; repair will retry");
                Ok(())
            }
        }
    }
}

/// The point of a work item's slot with its vector (and BM25 terms for hybrid worlds).
fn point_of(item: &WorkItem, dense: Vec<f32>) -> Point {
    Point {
        id: item.point_id,
        dense,
        sparse: item.hybrid.then(|| crate::sparse::document(&item.chunk_text)),
        payload: PointPayload {
            world_id: item.world_id,
            run_id: item.run_id,
            source_id: item.source_id,
            book_number: item.book_number,
            chunk_number: item.chunk_number,
            text_sha256: item.text_sha256.clone(),
            token_count: item.token_count,
        },
    }
}

/// The pause after `failures` earlier failed writes in a row: 5 s, 10 s, 20 s … 5 min.
fn outage_pause(failures: u32) -> Duration {
    INFRA_RETRY.saturating_mul(1 << failures.min(6)).min(INFRA_RETRY_MAX)
}

/// 2 s, 4 s, 8 s … (capped at 5 min) before a failed entry is tried again.
fn retry_backoff(attempt: u32) -> Duration {
    Duration::from_secs(2u64.saturating_pow(attempt.min(8))).min(Duration::from_secs(300))
}

fn to_chrono(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or_else(|_| chrono::Duration::minutes(5))
}

/// Splits `text` on the blocking pool: a long source takes seconds to chunk.
async fn split_off_runtime(
    text: String,
    chunking: crate::domain::ChunkingProfile,
    counter: Arc<dyn TokenCounter>,
) -> crate::store::Result<Vec<crate::domain::NewChunk>> {
    tokio::task::spawn_blocking(move || crate::chunking::split_with(&text, chunking, counter.as_ref()))
        .await
        .map_err(|e| crate::store::Error::Internal(format!("chunking a source failed: {e}")))
}

fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outage_pauses_double_up_to_five_minutes() {
        let pauses: Vec<u64> = (0..9).map(|n| outage_pause(n).as_secs()).collect();
        assert_eq!(pauses, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(outage_pause(u32::MAX), INFRA_RETRY_MAX);
    }
}
