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

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::ReuseScope;
use crate::domain::{
    ChunkId, EmbeddedVector, JobEventData, JobId, JobStatus, ProviderKind, RunStatus, WaitReason, WarningCode,
    WorkItem, now,
};
use crate::jobs::{JobEngine, Notice};
use crate::providers::breaker::{Breakers, Gate, Verdict};
use crate::providers::scheduler::{AcquireError, BatchSizer, KeyScheduler, Lane, Outcome};
use crate::providers::{
    CountFailure, EmbedMode, EmbedRequest, EmbeddingProvider, ModelRegistry, ProviderError, ProviderLimits, Providers,
};
use crate::store::Store;
use crate::vector::{Error as VectorError, Point, PointPayload, VectorRepo};

use super::inflight::{InFlight, Leads};

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

    /// Spawns the configured number of workers on `tracker`; they stop when `cancel` fires.
    /// Their claims are owned by `{replica}-{n}`, so a replica found dead has exactly its
    /// claims given back (`crate::cluster`).
    pub fn spawn(&self, replica: &str, tracker: &TaskTracker, cancel: &CancellationToken) {
        for n in 0..self.shared.config.workers {
            let workers = self.clone();
            let owner = format!("{replica}-{n}");
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
        let engine = &self.shared.engine;
        loop {
            if cancel.is_cancelled() {
                return;
            }
            let woken = engine.woken();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let step = tokio::select! {
                () = cancel.cancelled() => return,
                step = self.run_once(owner) => step,
            };
            match step {
                Ok(step) if step.claimed > 0 => continue,
                Ok(_) => {
                    if let Err(err) = engine.finish_stalled_if_due().await {
                        tracing::warn!(error = %err, "finishing stalled jobs failed; retrying later");
                    }
                }
                Err(err) => tracing::warn!(error = %err, "embedding worker step failed; retrying"),
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = &mut woken => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// Waits for re-ingest preparations under way, then runs steps until no work is left that
    /// can be done now, then finishes stalled jobs (for tests).
    pub async fn drain(&self) -> crate::store::Result<u64> {
        self.shared.engine.prepared().await;
        let mut embedded = 0;
        loop {
            let step = self.run_once("drain").await?;
            embedded += step.embedded;
            if step.claimed == 0 {
                self.shared.engine.finish_stalled().await?;
                return Ok(embedded);
            }
        }
    }

    /// Claims one set of entries, processes it and reports to the job engine.
    pub async fn run_once(&self, owner: &str) -> crate::store::Result<Step> {
        let now = now();
        let lease_until = now + to_chrono(self.shared.config.lease);
        let items = self
            .shared
            .store
            .claim_work(owner, self.claim_limit(), lease_until, now)
            .await?;
        if items.is_empty() {
            return Ok(Step::default());
        }
        let claimed = items.len();
        let job = items[0].job_id;
        // The leases are renewed while the claim is worked on, so they can be short: a worker
        // that dies stops renewing, and its entries are claimable again within one lease.
        let embedded = tokio::select! {
            embedded = tracing::Instrument::instrument(
                self.process(owner, items),
                tracing::info_span!("worker.batch", owner = %owner, entries = claimed),
            ) => embedded?,
            never = self.heartbeat(owner) => match never {},
        };
        self.shared.engine.report_progress(job).await?;
        Ok(Step { claimed, embedded })
    }

    /// How many entries one claim takes: [`CLAIM_LIMIT`], or more where a provider's request
    /// budget counts texts (Google) and allows fuller batches, so batches fill the budget's
    /// window instead of leaving part of every one unused (up to Google's batch maximum).
    fn claim_limit(&self) -> u32 {
        let per_text = (self.shared.scheduler)
            .max_texts_per_request(ProviderKind::Google)
            .unwrap_or(0)
            .min(crate::providers::google::MAX_BATCH);
        CLAIM_LIMIT.max(u32::try_from(per_text).unwrap_or(CLAIM_LIMIT))
    }

    /// Renews `owner`'s leases every third of a lease, for as long as it is polled. A failed
    /// renewal is logged and tried again at the next beat: one missed beat leaves two thirds of
    /// the lease.
    async fn heartbeat(&self, owner: &str) -> std::convert::Infallible {
        let lease = self.shared.config.lease;
        let beat = lease / 3;
        loop {
            tokio::time::sleep(beat).await;
            let now = now();
            if let Err(err) = self.shared.store.renew_leases(owner, now + to_chrono(lease), now).await {
                tracing::warn!(%owner, error = %err, "renewing the worker's leases failed; trying again");
            }
        }
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

    /// The provider and limits a claim of `items` (one job, one profile) is embedded with;
    /// `None` when this process cannot run them (the items were given back to wait).
    async fn target(&self, owner: &str, items: &[WorkItem]) -> crate::store::Result<Option<Target>> {
        let (job, profile) = (items[0].job_id, &items[0].profile);
        let Some(provider) = self.shared.providers.get(profile.provider) else {
            let message = format!("no adapter for {} is configured in this process", profile.provider);
            self.wait_for_provider(owner, job, items, &message).await?;
            return Ok(None);
        };
        let Some(spec) = self.shared.registry.find(profile.provider, &profile.model) else {
            let message = format!(
                "the world's model {} {} is not in this process's configuration",
                profile.provider, profile.model
            );
            self.wait_for_provider(owner, job, items, &message).await?;
            return Ok(None);
        };
        let limits = provider.limits(spec);
        let sizer = self.sizer(profile.provider, limits.max_batch_size);
        Ok(Some(Target {
            provider,
            limits,
            sizer,
        }))
    }

    /// Embeds a claim: texts another claim of this process is sending already are waited for
    /// instead of sent (see [`super::inflight`]), texts with a vector already are reused, and
    /// the rest goes batch by batch. Returns how many entries were marked embedded.
    async fn process(&self, owner: &str, items: Vec<WorkItem>) -> crate::store::Result<u64> {
        let job = items[0].job_id;
        let Some(target) = self.target(owner, &items).await? else {
            return Ok(0);
        };
        let (items, following, leads) = match self.shared.config.reuse {
            ReuseScope::Off => (items, Vec::new(), None),
            scope => {
                let (sending, following, leads) = self.shared.inflight.split(items, scope == ReuseScope::World);
                (sending, following, Some(leads))
            }
        };
        let (items, mut embedded) = self.reuse(owner, items).await?;
        let (n, stopped) = self.send(owner, &target, items, leads.as_ref()).await?;
        embedded += n;
        // Every lead is let go before any wait: a claim never waits while holding a text.
        drop(leads);
        if stopped {
            let ids: Vec<ChunkId> = following.iter().map(|f| f.item.chunk_id).collect();
            if !ids.is_empty() {
                self.shared.engine.give_back(owner, job, &ids, None, false).await?;
            }
            return Ok(embedded);
        }
        if following.is_empty() {
            return Ok(embedded);
        }
        let patience = self.shared.config.lease / 2;
        let waited = futures_util::future::join_all(following.into_iter().map(|f| f.vector(patience))).await;
        let mut shared = Vec::new();
        let mut rest = Vec::new();
        for (item, vector) in waited {
            match vector {
                Some(vector) => shared.push((item, vector)),
                None => rest.push(item),
            }
        }
        let (rest, n) = self.adopt(owner, shared, rest).await?;
        embedded += n;
        // What a leader let go without a vector: the store may have it by now; else it is sent.
        let (rest, n) = self.reuse(owner, rest).await?;
        embedded += n;
        let (n, _) = self.send(owner, &target, rest, None).await?;
        Ok(embedded + n)
    }

    /// Sends `items` batch by batch, publishing each vector to the claims following it
    /// (`leads`). Returns how many entries were marked embedded, and whether the claim stopped
    /// (what was left of it is given back).
    async fn send(
        &self,
        owner: &str,
        target: &Target,
        items: Vec<WorkItem>,
        leads: Option<&Leads>,
    ) -> crate::store::Result<(u64, bool)> {
        let Some(first) = items.first() else {
            return Ok((0, false));
        };
        let (job, kind) = (first.job_id, first.profile.provider);
        let mut embedded = 0;
        let mut queue: VecDeque<WorkItem> = items.into();
        // Items of a batch the provider refused as a whole, at the front of the queue: each is
        // sent alone, so that only the one at fault fails and the others are sent once more.
        let mut singles = 0usize;
        while !queue.is_empty() {
            let take = if singles > 0 {
                singles -= 1;
                1
            } else {
                let mut max = target.limits.max_batch_size;
                if target.limits.requests_per_text
                    && let Some(cap) = self.shared.scheduler.max_texts_per_request(kind)
                {
                    max = max.min(cap);
                }
                target.sizer.size().min(max).max(1).min(queue.len())
            };
            let batch: Vec<WorkItem> = queue.drain(..take).collect();
            let rest = queue.len();
            match self.embed_batch(owner, target, batch, rest, leads).await? {
                BatchOutcome::Done { embedded: n } => embedded += n,
                BatchOutcome::SendAlone(items) => {
                    singles += items.len();
                    for item in items.into_iter().rev() {
                        queue.push_front(item);
                    }
                }
                BatchOutcome::Stop {
                    embedded: n,
                    mut batch,
                    not_before,
                } => {
                    batch.extend(queue.iter().map(|i| i.chunk_id));
                    self.shared
                        .engine
                        .give_back(owner, job, &batch, not_before, false)
                        .await?;
                    return Ok((embedded + n, true));
                }
            }
        }
        Ok((embedded, false))
    }

    /// One batch: key → exact token count → embedding → write → report. `rest` is how many
    /// items of the claim wait behind it (for the warnings' counts).
    async fn embed_batch(
        &self,
        owner: &str,
        target: &Target,
        batch: Vec<WorkItem>,
        rest: usize,
        leads: Option<&Leads>,
    ) -> crate::store::Result<BatchOutcome> {
        let engine = &self.shared.engine;
        let (job, profile) = (batch[0].job_id, batch[0].profile.clone());
        let (provider, limits) = (&target.provider, target.limits);
        let ids = |items: &[WorkItem]| items.iter().map(|i| i.chunk_id).collect::<Vec<_>>();
        let tokens: u32 = batch.iter().map(|i| i.token_count).sum();
        // A provider in an outage is not called: the work waits for its breaker, spending nothing.
        if let Gate::Wait { until } = self
            .shared
            .breakers
            .gate(profile.provider, &profile.model, Instant::now())
        {
            let wait = until.saturating_duration_since(Instant::now());
            self.provider_down(job, &profile, batch.len() + rest, wait, None)
                .await?;
            return Ok(BatchOutcome::Stop {
                embedded: 0,
                batch: ids(&batch),
                not_before: Some(now() + to_chrono(wait)),
            });
        }
        let lease = match self
            .shared
            .scheduler
            .acquire_for(
                profile.provider,
                Lane::Ingest(batch[0].world_id),
                if limits.requests_per_text {
                    batch.len() as u32
                } else {
                    1
                },
                tokens,
            )
            .await
        {
            Ok(lease) => {
                engine.clear_notice(job, Notice::NoKey);
                engine.clear_notice(job, Notice::Waiting(WaitReason::RateLimited));
                engine.clear_notice(job, Notice::Waiting(WaitReason::DailyQuota));
                lease
            }
            Err(err) => {
                self.shared.breakers.inconclusive(profile.provider, &profile.model);
                let retry = match err {
                    AcquireError::RateLimited { retry_after, daily } => {
                        // The job shows what it waits for, and says so once.
                        let until = now() + to_chrono(retry_after);
                        let (reason, code, why) = if daily {
                            (
                                WaitReason::DailyQuota,
                                WarningCode::DailyQuota,
                                "has spent its daily quota",
                            )
                        } else {
                            (WaitReason::RateLimited, WarningCode::RateLimited, "is rate limited")
                        };
                        engine.waiting(job, reason, Some(until)).await?;
                        let event = JobEventData::Warning {
                            code,
                            chunks: batch.len() + rest,
                            message: format!(
                                "every {} key {why}; the chunks wait (no attempt spent) until {} (in {})",
                                profile.provider,
                                until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                                eta(retry_after)
                            ),
                        };
                        engine.notify_once(job, Notice::Waiting(reason), event).await?;
                        retry_after
                    }
                    AcquireError::NoEligibleKey(provider) => {
                        engine.waiting(job, WaitReason::NoEligibleKey, None).await?;
                        // Said once per job (until a key serves it again): the job waits for a
                        // key to be added or enabled.
                        let event = JobEventData::Warning {
                            code: WarningCode::NoEligibleKey,
                            chunks: batch.len() + rest,
                            message: format!(
                                "no enabled {provider} key is left; the chunks wait until one is added \
                                 (POST /v1/provider-keys) or enabled"
                            ),
                        };
                        engine.notify_once(job, Notice::NoKey, event).await?;
                        NO_KEY_RETRY
                    }
                };
                tracing::info!(%job, error = %err, "no provider key available; entries given back");
                return Ok(BatchOutcome::Stop {
                    embedded: 0,
                    batch: ids(&batch),
                    not_before: Some(now() + to_chrono(retry)),
                });
            }
        };
        // Taking a key may have waited out a rate limit: a job paused or cancelled meanwhile
        // sends nothing more (its entries go back; a paused job's wait for its resume).
        if self.shared.store.job_status(job).await? != Some(JobStatus::Running) {
            self.shared.breakers.inconclusive(profile.provider, &profile.model);
            lease.finish(Outcome::Unused).await;
            return Ok(BatchOutcome::Stop {
                embedded: 0,
                batch: ids(&batch),
                not_before: None,
            });
        }
        let texts: Vec<String> = batch.iter().map(|i| i.chunk_text.clone()).collect();

        // Exact token check before dispatch.
        let (lease, counts) = match lease.count_tokens(provider.as_ref(), &profile.model, &texts).await {
            Ok(counted) => counted,
            Err(CountFailure::WrongLength) => {
                let message = "the provider returned the wrong number of counts";
                for item in &batch {
                    self.fail(owner, item, "token_count_failed", message, false).await?;
                }
                return Ok(BatchOutcome::Done { embedded: 0 });
            }
            Err(CountFailure::Provider(err)) => {
                self.handle_batch_error(owner, job, &batch, err, &target.sizer).await?;
                return Ok(BatchOutcome::Done { embedded: 0 });
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
            return Ok(BatchOutcome::Done { embedded: 0 });
        }
        let texts: Vec<String> = sendable.iter().map(|i| i.chunk_text.clone()).collect();
        let request = EmbedRequest {
            model: &profile.model,
            dimensions: profile.dimensions,
            mode: EmbedMode::Document,
            texts: &texts,
            token_counts: Some(&sendable_counts),
        };
        let vectors = match lease.embed(provider.as_ref(), request).await {
            Ok(vectors)
                if vectors.len() == sendable.len()
                    && vectors.iter().all(|v| v.len() == profile.dimensions as usize) =>
            {
                vectors
            }
            Ok(_) => {
                let message = "the provider returned vectors of the wrong shape";
                for item in &sendable {
                    self.fail(owner, item, "provider_error", message, false).await?;
                }
                return Ok(BatchOutcome::Done { embedded: 0 });
            }
            Err(ProviderError::Permanent { message }) if sendable.len() > 1 => {
                tracing::info!(%job, %message, items = sendable.len(), "batch refused; sending its items one by one");
                return Ok(BatchOutcome::SendAlone(sendable));
            }
            Err(err) => {
                self.handle_batch_error(owner, job, &sendable, err, &target.sizer)
                    .await?;
                return Ok(BatchOutcome::Done { embedded: 0 });
            }
        };
        target.sizer.grow();
        self.shared.breakers.success(profile.provider, &profile.model);
        engine.clear_notice(job, Notice::ProviderUnavailable);
        // The vectors are reported with the marks too (the store keeps them): the points get copies.
        let (done, points): (Vec<EmbeddedVector>, Vec<Point>) = sendable
            .iter()
            .zip(vectors)
            .map(|(item, dense)| (embedded(item, dense.clone()), point_of(item, dense)))
            .unzip();
        match self.write(&sendable[0].collection, points).await {
            Ok(()) => {}
            Err(err @ (VectorError::Unavailable(_) | VectorError::Io(_))) => {
                // An outage: nothing the chunks did. They go back without spending an attempt,
                // for a pause that doubles while the outage lasts, so that an outage does not
                // pay for the same embeddings every few seconds.
                let pause = self.infra_pause();
                tracing::warn!(%job, error = %err, retry_in_s = pause.as_secs(),
                    "vector store write failed; entries given back");
                let message = format!(
                    "writing vectors failed; the chunks will be embedded again in {} s: {err}",
                    pause.as_secs()
                );
                self.warn(job, WarningCode::VectorStoreUnavailable, sendable.len() + rest, message)
                    .await?;
                self.count_retried("vector_store_unavailable", sendable.len());
                let until = now() + to_chrono(pause);
                engine
                    .waiting(job, WaitReason::VectorStoreUnavailable, Some(until))
                    .await?;
                return Ok(BatchOutcome::Stop {
                    embedded: 0,
                    batch: ids(&sendable),
                    not_before: Some(now() + to_chrono(pause)),
                });
            }
            Err(err) => {
                // Refused (a lost collection, vectors that do not fit it): each chunk spends an
                // attempt, so a refusal that lasts fails them instead of looping.
                let message = err.to_string();
                tracing::warn!(%job, error = %message, "vector store refused a write");
                let warning = format!("the vector store refused the chunks' vectors; each spent an attempt: {message}");
                self.warn(job, WarningCode::VectorStoreRejected, sendable.len(), warning)
                    .await?;
                for item in &sendable {
                    self.fail(owner, item, "vector_store_rejected", &message, false).await?;
                }
                return Ok(BatchOutcome::Done { embedded: 0 });
            }
        }
        // Confirmed by the vector store: now, and only now, the entries are embedded.
        let marked = engine.report_embedded(owner, job, sendable[0].run_id, &done, 0).await?;
        self.count("quarry_chunks_embedded_total", &profile, marked);
        if marked < done.len() as u64 {
            self.drop_dead_points(&sendable).await?;
            // The job was paused or cancelled meanwhile: stop and give the rest back.
            return Ok(BatchOutcome::Stop {
                embedded: marked,
                batch: Vec::new(),
                not_before: None,
            });
        }
        if let Some(leads) = leads {
            for (item, vector) in sendable.iter().zip(&done) {
                leads.publish(item, &vector.dense);
            }
        }
        Ok(BatchOutcome::Done { embedded: marked })
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
        let engine = &self.shared.engine;
        let event = JobEventData::Warning {
            code: WarningCode::ProviderUnavailable,
            chunks: items.len(),
            message: format!(
                "{why}; the chunks wait (no attempt spent) and are tried again every {} s",
                UNAVAILABLE_RETRY.as_secs()
            ),
        };
        if engine.notify_once(job, Notice::ProviderUnavailable, event).await? {
            tracing::warn!(%job, reason = %why, "provider unavailable in this process; entries given back");
        } else {
            tracing::debug!(%job, reason = %why, "provider still unavailable; entries given back");
        }
        let ids: Vec<ChunkId> = items.iter().map(|i| i.chunk_id).collect();
        let not_before = now() + to_chrono(UNAVAILABLE_RETRY);
        engine
            .waiting(job, WaitReason::ProviderUnavailable, Some(not_before))
            .await?;
        engine.give_back(owner, job, &ids, Some(not_before), false).await
    }

    /// The job waits for the provider's breaker to let calls through again (`wait` from now):
    /// shown on the job, and said once with a `provider_unavailable` warning.
    async fn provider_down(
        &self,
        job: JobId,
        profile: &crate::domain::EmbeddingProfile,
        chunks: usize,
        wait: Duration,
        cause: Option<&str>,
    ) -> crate::store::Result<()> {
        let engine = &self.shared.engine;
        let until = now() + to_chrono(wait);
        engine
            .waiting(job, WaitReason::ProviderUnavailable, Some(until))
            .await?;
        let message = format!(
            "{} {} keeps failing; it is not called until {} (in {}) and the chunks wait, no attempt spent{}",
            profile.provider,
            profile.model,
            until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            eta(wait),
            cause.map(|c| format!(": {c}")).unwrap_or_default()
        );
        let event = JobEventData::Warning {
            code: WarningCode::ProviderUnavailable,
            chunks,
            message,
        };
        if engine.notify_once(job, Notice::ProviderUnavailable, event).await? {
            tracing::warn!(%job, provider = %profile.provider, model = %profile.model, wait_s = wait.as_secs(),
                "provider breaker open; the job's chunks wait");
        }
        Ok(())
    }

    /// Records a `warning` event on `job`: trouble the job recovers from by itself.
    async fn warn(&self, job: JobId, code: WarningCode, chunks: usize, message: String) -> crate::store::Result<()> {
        let event = JobEventData::Warning { code, chunks, message };
        self.shared.engine.record(job, event).await
    }

    /// Spends an attempt of `item` (all of them when `permanent`); the job engine records the
    /// chunk's failure once it has none left.
    async fn fail(
        &self,
        owner: &str,
        item: &WorkItem,
        code: &'static str,
        message: &str,
        permanent: bool,
    ) -> crate::store::Result<()> {
        let retry_at = now() + to_chrono(retry_backoff(item.attempts + 1));
        let max_attempts = self.shared.config.max_attempts;
        let failed = (self.shared.engine)
            .report_failure(owner, item, code, message, permanent, max_attempts, retry_at)
            .await?;
        if failed {
            self.count("quarry_chunks_failed_total", &item.profile, 1);
        }
        Ok(())
    }

    /// Adds `n` to chunk counter `name` for `profile`'s provider and model.
    fn count(&self, name: &'static str, profile: &crate::domain::EmbeddingProfile, n: u64) {
        let labels = [
            ("provider", profile.provider.as_str()),
            ("model", profile.model.as_str()),
        ];
        self.shared.meters.counter(name, &labels).increment(n);
    }

    /// Counts `n` chunks given back to the queue without spending an attempt, for `reason`.
    fn count_retried(&self, reason: &str, n: usize) {
        (self.shared.meters)
            .counter("quarry_chunks_retried_total", &[("reason", reason)])
            .increment(n as u64);
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
            _ if items.is_empty() => return Ok((items, 0)),
            ReuseScope::Off => return Ok((items, 0)),
            ReuseScope::World => Some(items[0].world_id),
            ReuseScope::Global => None,
        };
        let job = items[0].job_id;
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
        let mut reusable = Vec::new();
        let mut rest = Vec::new();
        for item in items {
            match by_hash.get(item.text_sha256.as_str()) {
                Some(vector) => reusable.push((item, (*vector).clone())),
                None => rest.push(item),
            }
        }
        self.adopt(owner, reusable, rest).await
    }

    /// Writes vectors made for the same texts onto `pairs`' own points and marks those entries
    /// embedded, counted as reused. Returns the items still to embed (`rest`; none when the job
    /// was paused or cancelled meanwhile, and the rest went back) and how many were marked. A
    /// failed write only means they are embedded instead.
    async fn adopt(
        &self,
        owner: &str,
        pairs: Vec<(WorkItem, Vec<f32>)>,
        rest: Vec<WorkItem>,
    ) -> crate::store::Result<(Vec<WorkItem>, u64)> {
        let Some((first, _)) = pairs.first() else {
            return Ok((rest, 0));
        };
        let (job, run, collection) = (first.job_id, first.run_id, first.collection.clone());
        let (done, new_points): (Vec<EmbeddedVector>, Vec<Point>) = pairs
            .iter()
            .map(|(item, dense)| (embedded(item, dense.clone()), point_of(item, dense.clone())))
            .unzip();
        let reusable: Vec<WorkItem> = pairs.into_iter().map(|(item, _)| item).collect();
        if let Err(err) = self.shared.vectors.upsert(&collection, new_points).await {
            tracing::warn!(%job, error = %err, "writing reused vectors failed; embedding instead");
            return Ok((reusable.into_iter().chain(rest).collect(), 0));
        }
        let marked = self
            .shared
            .engine
            .report_embedded(owner, job, run, &done, done.len() as u64)
            .await?;
        if marked < done.len() as u64 {
            // The job was paused or cancelled meanwhile (or slots deleted): as after an
            // embedding, no point is left behind for a slot that is gone, and the rest of the
            // claim goes back without a provider call.
            self.drop_dead_points(&reusable).await?;
            let ids: Vec<ChunkId> = rest.iter().map(|i| i.chunk_id).collect();
            self.shared.engine.give_back(owner, job, &ids, None, false).await?;
            return Ok((Vec::new(), marked));
        }
        tracing::debug!(%job, reused = marked, "vectors reused for identical text");
        if let Some(item) = reusable.first() {
            self.count("quarry_chunks_reused_total", &item.profile, marked);
        }
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
        let engine = &self.shared.engine;
        let ids: Vec<ChunkId> = batch.iter().map(|i| i.chunk_id).collect();
        let profile = &batch[0].profile;
        let verdict = match &err {
            ProviderError::Transient { .. } => {
                self.shared
                    .breakers
                    .failure(profile.provider, &profile.model, Instant::now(), Utc::now())
            }
            _ => {
                self.shared.breakers.inconclusive(profile.provider, &profile.model);
                Verdict::SpendAttempt
            }
        };
        match err {
            ProviderError::Transient { message } if verdict != Verdict::SpendAttempt => {
                // Not the chunks' fault: back to the queue after a backoff, no attempt spent.
                let Verdict::GiveBack { after, opened } = verdict else {
                    unreachable!("matched above")
                };
                if opened {
                    self.provider_down(job, profile, batch.len(), after, Some(&message))
                        .await?;
                } else {
                    let warning = format!(
                        "an embedding call failed; its {} chunk(s) are sent again in {} (no attempt spent): {message}",
                        batch.len(),
                        eta(after)
                    );
                    self.warn(job, WarningCode::ProviderError, batch.len(), warning).await?;
                }
                // The chunks say why they wait (their listing's `last_error`), with no attempt spent.
                self.shared
                    .store
                    .note_error(&ids, "provider_error", &message, now())
                    .await?;
                self.count_retried("provider_error", ids.len());
                engine
                    .give_back(owner, job, &ids, Some(now() + to_chrono(after)), false)
                    .await
            }
            ProviderError::RateLimited { .. } => {
                // Not the chunks' fault: no attempt spent. Google counts every text of a batch
                // against its quota, so smaller batches fit where a large one did not; request
                // quotas (OpenAI-style) count a request whatever its size, so a smaller batch
                // would only carry less per granted request.
                if batch[0].profile.provider == ProviderKind::Google {
                    sizer.shrink(batch.len());
                }
                self.count_retried("rate_limited", ids.len());
                engine.give_back(owner, job, &ids, None, true).await
            }
            ProviderError::KeyRejected { message } | ProviderError::QuotaExhausted { message } => {
                // The key is retired by the scheduler; another key takes the work.
                let warning = format!(
                    "a {} key was refused and is retired; its chunks go to the other keys: {message}",
                    batch[0].profile.provider
                );
                self.warn(job, WarningCode::KeyRetired, batch.len(), warning).await?;
                engine.give_back(owner, job, &ids, None, false).await
            }
            ProviderError::Permanent { message } if batch.len() > 1 => {
                // One item may be the cause: retry one by one to find it.
                sizer.shrink(2);
                tracing::info!(%job, %message, "batch refused; retrying its items one by one");
                engine.give_back(owner, job, &ids, None, false).await
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
                    let warning = format!(
                        "an embedding call failed and {retried} of its {} chunk(s) will be retried after a \
                         backoff (each spent an attempt): {message}",
                        batch.len()
                    );
                    self.warn(job, WarningCode::ProviderError, retried, warning).await?;
                }
                for item in batch {
                    self.fail(owner, item, "provider_error", &message, false).await?;
                }
                Ok(())
            }
        }
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
            .any(|r| r.id == run && r.status != RunStatus::Retired);
        let ids: Vec<uuid::Uuid> = items.iter().map(|i| i.point_id).collect();
        let alive: HashSet<uuid::Uuid> = if live {
            self.shared
                .store
                .chunks_by_points(world, run, &ids)
                .await?
                .into_iter()
                .map(|c| c.point_id)
                .collect()
        } else {
            HashSet::new()
        };
        let dead: Vec<uuid::Uuid> = ids.into_iter().filter(|id| !alive.contains(id)).collect();
        if !dead.is_empty()
            && let Err(err) = self.shared.vectors.delete_points(&items[0].collection, &dead).await
        {
            tracing::warn!(%world, %run, error = %err, "deleting points of vanished slots failed; repair will retry");
        }
        Ok(())
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
            // A staged version's points stay out of every search until its switch.
            run_id: if item.staged {
                crate::domain::staged_run(item.run_id)
            } else {
                item.run_id
            },
            source_id: item.source_id,
            book_number: item.book_number,
            chunk_number: item.chunk_number,
            text_sha256: item.text_sha256.clone(),
            token_count: item.token_count,
        },
    }
}

/// What a worker reports for `item` once `dense` is written to its point.
fn embedded(item: &WorkItem, dense: Vec<f32>) -> EmbeddedVector {
    EmbeddedVector {
        chunk_id: item.chunk_id,
        text_sha256: item.text_sha256.clone(),
        dense,
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

    #[test]
    fn outage_pauses_double_up_to_five_minutes() {
        let pauses: Vec<u64> = (0..9).map(|n| outage_pause(n).as_secs()).collect();
        assert_eq!(pauses, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(outage_pause(u32::MAX), INFRA_RETRY_MAX);
    }
}
