//! Jobs: read, and the pause / resume / cancel transitions a client asks for (404 for a job
//! that does not exist, 409 for a move its status does not allow). What each transition
//! entails is the job engine's ([`crate::jobs`]).

use std::sync::Arc;

use super::{Conflict, Missing, ServiceError, ServiceResult};
use crate::domain::{Job, JobId, JobKind, JobStatus, WorldId};
use crate::jobs::{JobEngine, Transition};
use crate::store::Retry;
use crate::store::Store;

pub struct JobService {
    store: Arc<dyn Store>,
    engine: JobEngine,
}

impl JobService {
    pub fn new(store: Arc<dyn Store>, engine: JobEngine) -> Self {
        Self { store, engine }
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

fn answer(transition: Transition) -> ServiceResult<Job> {
    match transition {
        Transition::Done(job) => Ok(job),
        Transition::Missing => Err(ServiceError::NotFound(Missing::Job)),
        Transition::Refused { from, to } => Err(ServiceError::conflict(
            Conflict::JobState,
            format!("a {from} job cannot become {to}"),
        )),
    }
}
