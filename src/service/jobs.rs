//! Jobs: read, and the pause / resume / cancel transitions (409 for illegal ones).

use std::sync::Arc;

use super::{Conflict, Missing, ServiceError, ServiceResult};
use crate::domain::{Job, JobId, JobKind, JobStatus, RunStatus, WorldId};
use crate::store::Store;
use crate::workers::embedding::EmbeddingWorkers;

pub struct JobService {
    store: Arc<dyn Store>,
    workers: EmbeddingWorkers,
}

impl JobService {
    pub fn new(store: Arc<dyn Store>, workers: EmbeddingWorkers) -> Self {
        Self { store, workers }
    }

    pub async fn get(&self, id: JobId) -> ServiceResult<Job> {
        self.store
            .get_job(id)
            .await?
            .ok_or(ServiceError::NotFound(Missing::Job))
    }

    pub async fn list(&self, world: WorldId) -> ServiceResult<Vec<Job>> {
        if self.store.get_world(world).await?.is_none() {
            return Err(ServiceError::NotFound(Missing::World));
        }
        Ok(self.store.list_jobs(world).await?)
    }

    pub async fn pause(&self, id: JobId) -> ServiceResult<Job> {
        self.transition(id, &[JobStatus::Queued, JobStatus::Running], JobStatus::Paused)
            .await
    }

    pub async fn resume(&self, id: JobId) -> ServiceResult<Job> {
        let job = self.transition(id, &[JobStatus::Paused], JobStatus::Running).await?;
        self.workers.wake();
        if job.kind == JobKind::Reingest {
            // Its run may still lack sources (a re-ingest paused while they were chunked):
            // its completion step chunks them, which can take longer than a request may.
            self.workers.prepare(id);
            return Ok(job);
        }
        // A job paused after its last entry was embedded finishes now.
        self.workers.finish_job(id).await?;
        self.get(id).await
    }

    /// Cancels a job. Cancelling a re-ingest also removes the run it was building: the world
    /// keeps serving its active run.
    pub async fn cancel(&self, id: JobId) -> ServiceResult<Job> {
        let job = self
            .transition(
                id,
                &[JobStatus::Queued, JobStatus::Running, JobStatus::Paused],
                JobStatus::Cancelled,
            )
            .await?;
        if job.kind == JobKind::Reingest {
            let collection = self
                .store
                .world_runs(job.world_id)
                .await?
                .into_iter()
                .find(|r| r.id == job.run_id && r.status == RunStatus::Building)
                .map(|r| r.collection);
            // Only a run still being built: one the re-ingest switched to is the world's now.
            if let Some(collection) = collection
                && self.store.retire_run(job.run_id).await?
            {
                self.workers.remove_run(job.world_id, job.run_id, &collection).await?;
            }
        }
        Ok(job)
    }

    async fn transition(&self, id: JobId, from: &[JobStatus], to: JobStatus) -> ServiceResult<Job> {
        // The store records the status event with the change itself.
        match self.store.transition_job(id, from, to, super::worlds::now()).await? {
            Some(job) => Ok(job),
            None => {
                let job = self
                    .store
                    .get_job(id)
                    .await?
                    .ok_or(ServiceError::NotFound(Missing::Job))?;
                Err(ServiceError::conflict(
                    Conflict::JobState,
                    format!("a {} job cannot become {}", job.status, to),
                ))
            }
        }
    }
}
