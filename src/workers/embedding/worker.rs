//! The worker loop: spawning the workers, waking or polling for work, claiming entries with a
//! lease and renewing it while the claim is worked on, and the deterministic steps for tests.

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::domain::{ChunkId, ProviderKind, now};

use super::{CLAIM_LIMIT, EmbeddingWorkers, POLL, Step, to_chrono};

impl EmbeddingWorkers {
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
        let held = Held::default();
        self.work(&owner, &held, &cancel).await;
        let held = std::mem::take(&mut *held.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        if held.is_empty() {
            return;
        }
        match self.shared.store.release_owner(&owner, &held, now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(%owner, entries = n, "worker stopped; its claimed entries were given back"),
            Err(err) => {
                tracing::warn!(%owner, error = %err, "giving back claimed entries failed; their leases run out instead")
            }
        }
    }

    async fn work(&self, owner: &str, held: &Held, cancel: &CancellationToken) {
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
                step = self.step(owner, held) => step,
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
        self.step(owner, &Held::default()).await
    }

    /// [`Self::run_once`], keeping the ids of the claim under way in `held` until it is done,
    /// for the worker's loop to give back when the step is dropped (a claim whose ids never
    /// came back is given back by its lease running out).
    async fn step(&self, owner: &str, held: &Held) -> crate::store::Result<Step> {
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
        let ids: Vec<ChunkId> = items.iter().map(|item| item.chunk_id).collect();
        set_held(held, ids.clone());
        // The leases are renewed while the claim is worked on, so they can be short: a worker
        // that dies stops renewing, and its entries are claimable again within one lease.
        let embedded = tokio::select! {
            embedded = tracing::Instrument::instrument(
                self.process(owner, items),
                tracing::info_span!("worker.batch", owner = %owner, entries = claimed),
            ) => embedded?,
            never = self.heartbeat(owner, &ids) => match never {},
        };
        set_held(held, Vec::new());
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
    async fn heartbeat(&self, owner: &str, chunks: &[ChunkId]) -> std::convert::Infallible {
        let lease = self.shared.config.lease;
        let beat = lease / 3;
        loop {
            tokio::time::sleep(beat).await;
            let now = now();
            if let Err(err) = self
                .shared
                .store
                .renew_leases(owner, chunks, now + to_chrono(lease), now)
                .await
            {
                tracing::warn!(%owner, error = %err, "renewing the worker's leases failed; trying again");
            }
        }
    }
}

/// The chunk ids of the claim a worker's step is working on: what it gives back if it stops.
type Held = std::sync::Mutex<Vec<ChunkId>>;

fn set_held(held: &Held, ids: Vec<ChunkId>) {
    *held.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = ids;
}
