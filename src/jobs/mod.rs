//! # The job engine
//!
//! One home for a job's life. A job is the unit of embedding work a client watches: an
//! `ingest` (one upload), a `reingest` (a world's sources cut and embedded into a new run) or a
//! `repair` (slots requeued by a reconciliation). Its rows are the store's; everything that
//! *decides* about a job happens here:
//!
//! - **transitions**: pause, resume and cancel (asked for by clients through the job service),
//!   start (a re-ingest's preparation), finish (completed or failed, once nothing is pending),
//!   the switch of a world to a re-ingest's run and the removal of the run that lost;
//! - **events**: every event the application writes goes through [`JobEngine::record`] as a
//!   typed [`JobEventData`] (`status` events are written by the database with each status
//!   change, so that no crash can leave one without the other);
//! - **reports from workers**: batches embedded, chunks failed, entries given back, progress;
//! - **re-ingest preparation** ([`reingest`]): cutting the stored sources into the new run off
//!   the runtime, on the app's task tracker;
//! - **waking the workers** when work arrives.
//!
//! ## The loop and what wakes it
//! The embedding workers (`crate::workers`) loop: claim a few pending entries of one running job
//! → embed → write the points → report to the engine, which records progress and finishes the
//! job when its last entry is done. Idle workers sleep until [`JobEngine::wake`] (a service
//! wrote work: an upload, a resume, a repair's requeue, a re-ingest's chunks) or a poll interval
//! passes (work written by another replica). An idle worker also sweeps, every
//! [`SWEEP_INTERVAL`], for running jobs with nothing left to claim
//! ([`JobEngine::finish_stalled_if_due`]): a process that stopped between its last batch and the
//! finish leaves such a job, and nothing else would ever end it.
//!
//! The state machines (job, run, manifest entry) are drawn in `docs/DESIGN.md`.

pub mod parents;
pub mod reingest;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::domain::Window;
use crate::domain::{
    ChunkId, EmbeddedVector, Job, JobCounts, JobEventData, JobId, JobKind, JobStatus, RunId, RunStatus, WaitReason,
    Waiting, WorkItem, WorldId, now,
};
use crate::providers::Providers;
use crate::store::{ReingestStep, Retry, Store};
use crate::vector::{PointFilter, VectorRepo};

/// How often idle workers look for running jobs nothing is left to claim in.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(30);

/// Warnings a job is given once until the trouble ends (not once per batch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Notice {
    /// No enabled key is left for the job's provider.
    NoKey,
    /// This process cannot run the job's provider or model, or its provider keeps failing.
    ProviderUnavailable,
    /// Every key of the job's provider is cooling down (for this reason).
    Waiting(WaitReason),
}

/// What a client's transition request came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    /// The job moved; here it is, as it is now.
    Done(Job),
    /// No such job.
    Missing,
    /// The job's status does not allow the move.
    Refused { from: JobStatus, to: JobStatus },
}

struct Inner {
    store: Arc<dyn Store>,
    vectors: Arc<dyn VectorRepo>,
    providers: Providers,
    /// The app's background tasks: re-ingest preparations run on it, so shutdown waits for them.
    tracker: TaskTracker,
    /// The app's shutdown: ends preparations that are waiting to try again.
    stop: CancellationToken,
    wake: Notify,
    /// Re-ingest preparations under way, one per job.
    preparing: Mutex<HashMap<JobId, tokio::task::JoinHandle<()>>>,
    /// The counts of the last progress event this process wrote, per job.
    last_progress: Mutex<HashMap<JobId, JobCounts>>,
    /// Jobs told a [`Notice`] that still holds.
    notices: Mutex<HashSet<(JobId, Notice)>>,
    /// When an idle worker last looked for stalled jobs.
    last_sweep: Mutex<Option<Instant>>,
    /// Told when evaluation runs were queued (a gated re-ingest's): the evaluation runner
    /// waits on it.
    evaluations: Arc<Notify>,
}

/// The job engine (cheap to clone).
#[derive(Clone)]
pub struct JobEngine {
    inner: Arc<Inner>,
}

/// Locks a map of plain values: a panic elsewhere cannot leave one half-written.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl JobEngine {
    pub fn new(
        store: Arc<dyn Store>,
        vectors: Arc<dyn VectorRepo>,
        providers: Providers,
        tracker: TaskTracker,
        stop: CancellationToken,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                vectors,
                providers,
                tracker,
                stop,
                wake: Notify::new(),
                preparing: Mutex::new(HashMap::new()),
                last_progress: Mutex::new(HashMap::new()),
                notices: Mutex::new(HashSet::new()),
                last_sweep: Mutex::new(None),
                evaluations: Arc::new(Notify::new()),
            }),
        }
    }

    fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// What the evaluation runner waits on when idle: told when a gated re-ingest queues its
    /// evaluation runs.
    pub fn evaluations(&self) -> Arc<Notify> {
        self.inner.evaluations.clone()
    }

    /// Wakes idle workers: new work was written.
    pub fn wake(&self) {
        self.inner.wake.notify_waiters();
    }

    /// Completes at the next [`JobEngine::wake`]; enable it before looking for work, so that
    /// a wake in between is not missed.
    pub fn woken(&self) -> tokio::sync::futures::Notified<'_> {
        self.inner.wake.notified()
    }

    /// Appends an event to `job`'s history.
    pub async fn record(&self, job: JobId, event: JobEventData) -> crate::store::Result<()> {
        self.store()
            .append_job_event(job, event.kind(), &event.to_json(), now())
            .await?;
        Ok(())
    }

    /// Records `event` unless `job` was already told `notice` (and it still holds); returns
    /// whether it was recorded.
    pub async fn notify_once(&self, job: JobId, notice: Notice, event: JobEventData) -> crate::store::Result<bool> {
        if !lock(&self.inner.notices).insert((job, notice)) {
            return Ok(false);
        }
        self.record(job, event).await?;
        Ok(true)
    }

    /// Records why running `job` is not moving (shown on the job until a chunk of it is
    /// embedded or `until` passes).
    pub async fn waiting(
        &self,
        job: JobId,
        reason: WaitReason,
        until: Option<DateTime<Utc>>,
    ) -> crate::store::Result<()> {
        self.store()
            .set_job_waiting(job, Some(&Waiting { reason, until }))
            .await
    }

    /// The trouble behind `notice` is over for `job`: the next occurrence is told again.
    pub fn clear_notice(&self, job: JobId, notice: Notice) {
        lock(&self.inner.notices).remove(&(job, notice));
    }

    // ----- client transitions ---------------------------------------------------------------

    /// Pauses a queued or running job: workers stop claiming its entries and give back what
    /// they hold after the batch in flight.
    pub async fn pause(&self, id: JobId) -> crate::store::Result<Transition> {
        self.transition(id, &[JobStatus::Queued, JobStatus::Running], JobStatus::Paused)
            .await
    }

    /// Resumes a paused job and wakes the workers. A re-ingest's run may still lack sources
    /// (one paused while they were chunked): its preparation carries on in the background. Any
    /// other job paused after its last entry was embedded finishes now.
    pub async fn resume(&self, id: JobId) -> crate::store::Result<Transition> {
        let transition = self.transition(id, &[JobStatus::Paused], JobStatus::Running).await?;
        let Transition::Done(job) = transition else {
            return Ok(transition);
        };
        self.wake();
        if job.kind == JobKind::Reingest {
            self.prepare(id);
            return Ok(Transition::Done(job));
        }
        self.finish(id).await?;
        Ok(match self.store().get_job(id).await? {
            Some(job) => Transition::Done(job),
            None => Transition::Missing,
        })
    }

    /// Cancels a job that has not ended. Cancelling a re-ingest also retires and removes the
    /// run it was building: the world keeps serving its active run.
    pub async fn cancel(&self, id: JobId) -> crate::store::Result<Transition> {
        let transition = self
            .transition(
                id,
                &[JobStatus::Queued, JobStatus::Running, JobStatus::Paused],
                JobStatus::Cancelled,
            )
            .await?;
        if let Transition::Done(job) = &transition
            && job.kind == JobKind::Replace
        {
            self.discard_version(job).await?;
        }
        if let Transition::Done(job) = &transition
            && job.kind == JobKind::Reingest
        {
            let collection = self
                .store()
                .world_runs(job.world_id)
                .await?
                .into_iter()
                .find(|r| r.id == job.run_id && r.status == RunStatus::Building)
                .map(|r| r.collection);
            // Only a run still being built: one the re-ingest switched to is the world's now.
            if let Some(collection) = collection
                && self.store().retire_run(job.run_id).await?
            {
                self.remove_run(job.world_id, job.run_id, &collection).await?;
            }
        }
        Ok(transition)
    }

    /// Puts `id`'s failed chunks back in the queue (see [`crate::store::JobStore::retry_failed`]),
    /// records the job's counts and wakes the workers.
    pub async fn retry(&self, id: JobId) -> crate::store::Result<Retry> {
        let retry = self.store().retry_failed(id, now()).await?;
        if let Retry::Requeued(_) = retry {
            self.retried(id).await?;
            self.wake();
        }
        Ok(retry)
    }

    /// Puts every failed chunk of `world` (in a run it serves or is building) back in the
    /// queue: each under its own job when that job can run again, the others (their job
    /// cancelled, or a failed re-ingest's) under a repair job. Returns the jobs that took
    /// chunks and how many each; empty when nothing had failed.
    pub async fn retry_world(&self, world: WorldId) -> crate::store::Result<Vec<(JobId, u64)>> {
        let store = self.store();
        let failed = store.failed_entries(world).await?;
        let mut jobs: Vec<JobId> = failed.iter().filter_map(|e| e.job).collect();
        jobs.sort_by_key(|j| j.0);
        jobs.dedup();
        let mut took = Vec::new();
        let mut own: HashSet<JobId> = HashSet::new();
        for job in jobs {
            if let Retry::Requeued(n) = store.retry_failed(job, now()).await? {
                self.retried(job).await?;
                took.push((job, n));
                own.insert(job);
            }
        }
        // What no job of its own runs again goes to a repair job (or the run's live re-ingest).
        let mut loose: HashMap<RunId, Vec<ChunkId>> = HashMap::new();
        for entry in failed.into_iter().filter(|e| e.job.is_none_or(|j| !own.contains(&j))) {
            loose.entry(entry.run).or_default().push(entry.chunk);
        }
        for (run, chunks) in loose {
            if let Some((job, n)) = store
                .requeue_entries(world, run, &chunks, "retried", None, now())
                .await?
            {
                self.retried(job).await?;
                match took.iter_mut().find(|(j, _)| *j == job) {
                    Some((_, count)) => *count += n,
                    None => took.push((job, n)),
                }
            }
        }
        if !took.is_empty() {
            self.wake();
        }
        Ok(took)
    }

    /// After a retry: the job's counts went back, so its next progress is recorded whatever
    /// this process recorded before; this one is recorded now.
    async fn retried(&self, job: JobId) -> crate::store::Result<()> {
        lock(&self.inner.last_progress).remove(&job);
        lock(&self.inner.notices).retain(|(j, _)| *j != job);
        self.report_progress(job).await
    }

    /// Cancels a job that was created but turned out not to be needed (a repair request that
    /// another one covers).
    pub async fn withdraw(&self, id: JobId) -> crate::store::Result<()> {
        self.store()
            .transition_job(id, &[JobStatus::Running], JobStatus::Cancelled, now())
            .await?;
        Ok(())
    }

    async fn transition(&self, id: JobId, from: &[JobStatus], to: JobStatus) -> crate::store::Result<Transition> {
        // The store records the status event with the change itself.
        if let Some(job) = self.store().transition_job(id, from, to, now()).await? {
            return Ok(Transition::Done(job));
        }
        Ok(match self.store().job_status(id).await? {
            Some(status) => Transition::Refused { from: status, to },
            None => Transition::Missing,
        })
    }

    // ----- reports from the workers ---------------------------------------------------------

    /// Marks `done` (chunk, the text hash its vector was made from, the vector) embedded for
    /// `owner` and keeps the vectors, `reused` of them reused for identical text. The store refuses entries
    /// whose job is no longer running under `run` (paused, cancelled, switched): returns how
    /// many were marked.
    pub async fn report_embedded(
        &self,
        owner: &str,
        job: JobId,
        run: RunId,
        done: &[EmbeddedVector],
        reused: u64,
    ) -> crate::store::Result<u64> {
        self.store().complete_work(owner, job, run, done, reused, now()).await
    }

    /// Gives entries back without spending an attempt, claimable again from `not_before`
    /// (none: at once); `rate_limited` counts them on the job as rate limited.
    pub async fn give_back(
        &self,
        owner: &str,
        job: JobId,
        chunks: &[ChunkId],
        not_before: Option<DateTime<Utc>>,
        rate_limited: bool,
    ) -> crate::store::Result<()> {
        if chunks.is_empty() {
            return Ok(());
        }
        self.store()
            .release_work(owner, job, chunks, not_before, rate_limited, now())
            .await
    }

    /// Spends an attempt of `item` (all of them when `permanent`), to be tried again from
    /// `retry_at`; past `max_attempts` the chunk is failed and the job gets an `error` event.
    /// Returns whether the chunk is now failed.
    #[allow(clippy::too_many_arguments)]
    pub async fn report_failure(
        &self,
        owner: &str,
        item: &WorkItem,
        code: &'static str,
        message: &str,
        permanent: bool,
        max_attempts: u32,
        retry_at: DateTime<Utc>,
    ) -> crate::store::Result<bool> {
        let failed = self
            .store()
            .fail_work(
                owner,
                item.job_id,
                item.chunk_id,
                code,
                message,
                max_attempts,
                permanent,
                retry_at,
                now(),
            )
            .await?;
        if failed {
            let event = JobEventData::ChunkFailed {
                book_number: item.book_number,
                chunk_number: item.chunk_number,
                code,
                message: message.to_owned(),
            };
            self.record(item.job_id, event).await?;
        }
        Ok(failed)
    }

    /// After a worker's claim: records progress (when the counts moved since this process last
    /// did) and finishes the job when nothing is pending.
    pub async fn report_progress(&self, job: JobId) -> crate::store::Result<()> {
        if let Some(current) = self.store().get_job(job).await?
            && !current.status.is_terminal()
            && self.progress_moved(job, current.counts)
        {
            self.record(job, JobEventData::Progress(current.counts)).await?;
        }
        self.finish(job).await
    }

    /// Whether `counts` move on from the last progress this process claimed for `job`, claiming
    /// them if so: a batch whose completion a pause refused changes nothing and says nothing,
    /// and of two workers that read the counts at about the same time only the one with the
    /// later counts writes, so a job's progress never goes backwards in this process.
    fn progress_moved(&self, job: JobId, counts: JobCounts) -> bool {
        let mut last = lock(&self.inner.last_progress);
        let done = |c: &JobCounts| (c.embedded + c.failed, c.retries + c.rate_limited, c.total);
        if last.get(&job).is_some_and(|seen| done(seen) >= done(&counts)) {
            return false;
        }
        if last.len() >= 10_000 {
            last.clear();
        }
        last.insert(job, counts);
        true
    }

    // ----- finishing ------------------------------------------------------------------------

    /// Finishes `job` if nothing is pending. An ingest or repair job completes (or fails); a
    /// re-ingest first gets the sources added since it began, then switches the world to its
    /// run (or, with failed chunks, fails and leaves the world on its old run), and the run that
    /// lost is removed: points first, then rows (a failed point delete leaves the run retired,
    /// and startup repair removes it later).
    pub async fn finish(&self, job: JobId) -> crate::store::Result<()> {
        let store = self.store();
        let Some(current) = store.get_job(job).await? else {
            return Ok(());
        };
        if current.kind == JobKind::Replace {
            return self.finish_replace(&current).await;
        }
        if current.kind != JobKind::Reingest {
            if let Some(finished) = store.finish_job_if_done(job, now()).await? {
                self.finished(job, finished.status);
                debug_assert!(matches!(finished.status, JobStatus::Completed | JobStatus::Failed));
            }
            return Ok(());
        }
        match store.finish_reingest(job, now()).await? {
            ReingestStep::NotDone => Ok(()),
            ReingestStep::Evaluating => {
                tracing::info!(%job, "re-ingest embedded; its gate evaluates the new run before the world switches");
                self.inner.evaluations.notify_one();
                Ok(())
            }
            ReingestStep::MissingSources { world, run, sources } => {
                self.chunk_missing_sources(job, world, run, sources).await
            }
            ReingestStep::Failed { world, run, collection } => {
                // The run's rows stay (retired) so the job keeps listing its failed chunks.
                self.finished(job, JobStatus::Failed);
                if let Err(err) = self
                    .inner
                    .vectors
                    .delete_by_filter(&collection, PointFilter::world(world).run(run))
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
                self.finished(job, JobStatus::Completed);
                tracing::info!(%job, %world, "re-ingest complete: the world now serves its new run");
                self.remove_run(world, old_run, &old_collection).await
            }
        }
    }

    /// Finishes a replace with nothing pending: with failed chunks it fails (the source keeps
    /// serving its current version; a retry takes the job up again); otherwise its staged
    /// points are filed under the source (so that they are found the moment the switch
    /// commits; until then the store does not serve them), the store switches the source to the
    /// new version in one transaction, and the old version's points are deleted.
    async fn finish_replace(&self, job: &crate::domain::Job) -> crate::store::Result<()> {
        // Called after every worker claim: the job's own counts say whether anything is left
        // before the staged version's entries are read.
        if job.counts.pending > 0 {
            return Ok(());
        }
        let store = self.store();
        let Some(staged) = store.staged_version(job.id).await? else {
            return Ok(());
        };
        if staged.pending > 0 {
            return Ok(());
        }
        if staged.failed > 0 {
            if let Some(finished) = store.finish_job_if_done(job.id, now()).await? {
                self.finished(job.id, finished.status);
            }
            return Ok(());
        }
        let home = crate::vector::PointHome {
            run_id: staged.run,
            source_id: staged.source,
            book_number: staged.book_number,
        };
        if let Err(err) = self
            .inner
            .vectors
            .move_points(&staged.collection, &staged.points, home)
            .await
        {
            // The job stays running; the next sweep of stalled jobs tries again.
            tracing::warn!(job = %job.id, error = %err, "filing a staged version's points failed; the switch waits");
            return Ok(());
        }
        let Some(switched) = store.switch_version(job.id, now()).await? else {
            return Ok(());
        };
        self.finished(job.id, JobStatus::Completed);
        tracing::info!(job = %job.id, source = %switched.source, version = switched.version, "source replaced");
        if let Err(err) = self
            .inner
            .vectors
            .delete_points(&staged.collection, &switched.old_points)
            .await
        {
            tracing::warn!(job = %job.id, error = %err,
                "deleting a replaced version's points failed; retrieval skips them and repair deletes them");
        }
        Ok(())
    }

    /// Deletes the staged version of a cancelled replace: rows, then points (the staged
    /// version was never served).
    async fn discard_version(&self, job: &crate::domain::Job) -> crate::store::Result<()> {
        let Some(staged) = self.store().discard_version(job.id).await? else {
            return Ok(());
        };
        let collection = self
            .store()
            .world_runs(job.world_id)
            .await?
            .into_iter()
            .find(|r| r.id == job.run_id)
            .map(|r| r.collection);
        if let Some(collection) = collection
            && let Err(err) = self
                .inner
                .vectors
                .delete_by_filter(&collection, PointFilter::world(job.world_id).source(staged))
                .await
        {
            tracing::warn!(job = %job.id, error = %err, "deleting a cancelled replace's points failed; repair will");
        }
        Ok(())
    }

    /// A repair job whose reconciliation failed: an `error` event, then `failed`.
    pub async fn fail_repair(&self, job: JobId, message: String) -> crate::store::Result<()> {
        self.record(job, JobEventData::RepairFailed { message }).await?;
        self.store()
            .transition_job(job, &[JobStatus::Running], JobStatus::Failed, now())
            .await?;
        Ok(())
    }

    /// Forgets what this process noted about a job that ended, and logs the end (the store
    /// recorded its status event with the change).
    fn finished(&self, job: JobId, status: JobStatus) {
        lock(&self.inner.notices).retain(|(j, _)| *j != job);
        lock(&self.inner.last_progress).remove(&job);
        tracing::info!(%job, %status, "job finished");
    }

    /// Finishes running jobs that have nothing left to claim, when an idle worker last looked
    /// more than [`SWEEP_INTERVAL`] ago in this process (see the module docs).
    pub async fn finish_stalled_if_due(&self) -> crate::store::Result<()> {
        let due = {
            let mut last = lock(&self.inner.last_sweep);
            let due = last.is_none_or(|at| at.elapsed() >= SWEEP_INTERVAL);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if due { self.finish_stalled().await } else { Ok(()) }
    }

    /// Finishes running jobs that have nothing left to claim.
    pub async fn finish_stalled(&self) -> crate::store::Result<()> {
        for job in self.store().running_jobs_with_nothing_pending().await? {
            self.finish(job).await?;
        }
        Ok(())
    }

    /// Finishes every running job of `world` that has nothing pending, and takes up the
    /// preparation of its queued re-ingest (a process that stopped while the sources were
    /// chunked): in the background, so that a big world does not hold up the caller.
    pub async fn resume_world(&self, world: WorldId) -> crate::store::Result<()> {
        for job in self.store().list_jobs(world, &[], Window::ALL).await? {
            match job.status {
                JobStatus::Running => self.finish(job.id).await?,
                JobStatus::Queued => self.prepare(job.id),
                _ => {}
            }
        }
        Ok(())
    }

    /// Ends the running re-ingests of `world` whose remaining work went with a deleted source:
    /// through their own completion step (the switch). Jobs are only looked up while a run is
    /// being built (the job list grows with the world's history).
    pub async fn after_source_deleted(&self, world: WorldId) -> crate::store::Result<()> {
        let runs = self.store().world_runs(world).await?;
        if runs.iter().any(|r| r.status == RunStatus::Building) {
            for job in self.store().list_jobs(world, &[], Window::ALL).await? {
                if job.kind == JobKind::Reingest && job.status == JobStatus::Running {
                    self.finish(job.id).await?;
                }
            }
        }
        Ok(())
    }

    /// Deletes a retired run's points, then its rows.
    pub async fn remove_run(&self, world: WorldId, run: RunId, collection: &str) -> crate::store::Result<()> {
        match self
            .inner
            .vectors
            .delete_by_filter(collection, PointFilter::world(world).run(run))
            .await
        {
            Ok(()) => self.store().delete_run(run).await,
            Err(err) => {
                tracing::warn!(%world, %run, error = %err, "deleting a retired run's points failed; repair will retry");
                Ok(())
            }
        }
    }
}
