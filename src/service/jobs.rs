//! Jobs: read, and the pause / resume / cancel transitions a client asks for (404 for a job
//! that does not exist, 409 for a move its status does not allow). What each transition
//! entails is the job engine's ([`crate::jobs`]).

use std::sync::Arc;

use super::{Conflict, Missing, ServiceError, ServiceResult};
use crate::domain::{Job, JobId, WorldId};
use crate::jobs::{JobEngine, Transition};
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
