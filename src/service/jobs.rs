//! Jobs: read, and the pause / resume / cancel transitions a client asks for (404 for a job
//! that does not exist, 409 for a move its status does not allow). What each transition
//! entails is the job engine's ([`crate::jobs`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Conflict, Missing, ServiceError, ServiceResult};
use crate::domain::{Job, JobEvent, JobId, JobKind, JobStatus, WorldId};
use crate::jobs::{JobEngine, Transition};
use crate::store::Retry;
use crate::store::Store;

pub struct JobService {
    store: Arc<dyn Store>,
    engine: JobEngine,
}

impl JobService {
    pub fn new(deps: &crate::deps::Deps) -> Self {
        Self {
            store: deps.store.clone(),
            engine: deps.engine.clone(),
        }
    }

    /// The events of job `id` after event `after` (0: all), as they are written: ends after a
    /// terminal status that nothing follows (a retried job goes on past its `failed`), when the
    /// store cannot be read, or when `stop` fires (at shutdown: the client resumes from the last
    /// id it received and misses nothing). 404 for a job that does not exist.
    pub async fn events(
        &self,
        id: JobId,
        after: i64,
        stop: CancellationToken,
    ) -> ServiceResult<impl futures_util::Stream<Item = JobEvent> + Send + use<>> {
        let job = self.get(id).await?;
        let cursor = EventCursor {
            store: self.store.clone(),
            stop,
            job: job.id,
            last: after,
            pending: VecDeque::new(),
            done: false,
            over: false,
        };
        Ok(futures_util::stream::unfold(cursor, |mut cursor| async move {
            let event = cursor.next().await?;
            Some((event, cursor))
        }))
    }

    /// How many jobs there are of each kind and status: `(kind, status, count)`.
    pub async fn counts(&self) -> ServiceResult<Vec<(String, String, u64)>> {
        Ok(self.store.job_counts().await?)
    }

    /// The entries waiting to be embedded, per world and provider.
    pub async fn queue_depth(&self) -> ServiceResult<Vec<crate::store::QueueDepth>> {
        Ok(self.store.queue_depth().await?)
    }

    pub async fn get(&self, id: JobId) -> ServiceResult<Job> {
        self.store
            .get_job(id)
            .await?
            .ok_or(ServiceError::NotFound(Missing::Job))
    }

    /// Jobs of `world` newest first, with one of `statuses` (all when empty), in `window`.
    pub async fn list(
        &self,
        world: WorldId,
        statuses: &[crate::domain::JobStatus],
        window: crate::domain::Window,
    ) -> ServiceResult<Vec<Job>> {
        if self.store.get_world(world).await?.is_none() {
            return Err(ServiceError::NotFound(Missing::World));
        }
        Ok(self.store.list_jobs(world, statuses, window).await?)
    }

    pub async fn pause(&self, id: JobId) -> ServiceResult<Job> {
        answer(self.engine.pause(id).await?)
    }

    pub async fn resume(&self, id: JobId) -> ServiceResult<Job> {
        answer(self.engine.resume(id).await?)
    }

    /// Cancels a job. Cancelling a re-ingest also removes the run it was building: the world
    /// keeps serving its active run.
    pub async fn cancel(&self, id: JobId) -> ServiceResult<Job> {
        answer(self.engine.cancel(id).await?)
    }
}

impl JobService {
    /// Puts a job's failed chunks back in the queue; a failed job runs again.
    pub async fn retry(&self, id: JobId) -> ServiceResult<Job> {
        match self.engine.retry(id).await? {
            Retry::Missing => Err(ServiceError::NotFound(Missing::Job)),
            Retry::Refused { status, kind } => Err(ServiceError::conflict(
                Conflict::JobState,
                if kind == JobKind::Reingest && status == JobStatus::Failed {
                    "a failed re-ingest's run was retired; start a new re-ingest of the world".to_owned()
                } else {
                    format!(
                        "a {status} job is not retried; POST /v1/worlds/{{world_id}}/retry-failed puts its failed chunks under a repair job"
                    )
                },
            )),
            Retry::Nothing => Err(ServiceError::conflict(
                Conflict::NothingToRetry,
                "the job has no failed chunk in a run its world serves or is building",
            )),
            Retry::Requeued(_) => self.get(id).await,
        }
    }

    /// Puts every failed chunk of a world back in the queue: how many, and the jobs that
    /// took them, as they are now.
    pub async fn retry_world(&self, world: WorldId) -> ServiceResult<(u64, Vec<Job>)> {
        if self.store.get_world(world).await?.is_none() {
            return Err(ServiceError::NotFound(Missing::World));
        }
        let took = self.engine.retry_world(world).await?;
        if took.is_empty() {
            return Err(ServiceError::conflict(
                Conflict::NothingToRetry,
                "the world has no failed chunk in a run it serves or is building",
            ));
        }
        let mut jobs = Vec::with_capacity(took.len());
        for (job, _) in &took {
            if let Some(job) = self.store.get_job(*job).await? {
                jobs.push(job);
            }
        }
        Ok((took.iter().map(|(_, n)| n).sum(), jobs))
    }
}

pub(super) fn answer(transition: Transition) -> ServiceResult<Job> {
    match transition {
        Transition::Done(job) => Ok(job),
        Transition::Missing => Err(ServiceError::NotFound(Missing::Job)),
        Transition::Refused { from, to } => Err(ServiceError::conflict(
            Conflict::JobState,
            format!("a {from} job cannot become {to}"),
        )),
    }
}

/// How often an event stream looks for new events of a job that has not ended.
const EVENT_POLL: Duration = Duration::from_millis(300);

/// Where a job's event stream is: what was read and not yet handed out, and whether the job
/// was seen ending.
struct EventCursor {
    store: Arc<dyn Store>,
    stop: CancellationToken,
    job: JobId,
    /// The id of the last event handed out.
    last: i64,
    pending: VecDeque<JobEvent>,
    /// The last status event handed out was terminal (the stream ends unless more follows).
    done: bool,
    /// The job was seen finished; the next empty read ends the stream.
    over: bool,
}

impl EventCursor {
    async fn next(&mut self) -> Option<JobEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                self.last = event.id;
                // A terminal status ends the stream unless more follows it (a retried job runs
                // again after `failed`).
                if let Some(status) = event.status() {
                    self.done = status.is_terminal();
                }
                return Some(event);
            }
            if self.stop.is_cancelled() {
                return None;
            }
            match self.store.job_events_after(self.job, self.last, 100).await {
                Ok(events) if !events.is_empty() => self.pending.extend(events),
                // The last event handed out was a terminal status and nothing followed it; or
                // this read came after the job was seen finished (its final status event,
                // written with the status itself, predates `after`).
                Ok(_) if self.done || self.over => return None,
                Ok(_) => {
                    // Nothing new: if the job is over, read once more (its final status event
                    // may have landed since the read above), else wait.
                    match self.store.job_status(self.job).await {
                        Ok(Some(status)) if status.is_terminal() => self.over = true,
                        Ok(Some(_)) => {
                            tokio::select! {
                                () = tokio::time::sleep(EVENT_POLL) => {}
                                () = self.stop.cancelled() => return None,
                            }
                        }
                        Ok(None) | Err(_) => return None,
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "reading job events failed; ending the stream");
                    return None;
                }
            }
        }
    }
}
