//! Re-ingest preparation: a re-ingest's job starts `queued` while the world's stored sources
//! are cut into its new run, off the runtime and source by source, stopping if the job is
//! paused or cancelled meanwhile; then the job starts and the workers embed the new run.
//!
//! A paused preparation is finished by the re-ingest's completion step once the job is resumed
//! (it chunks the sources its run lacks, [`JobEngine::finish`]), one that meets an unavailable
//! store starts again after a pause, and one cut short by a crash is taken up again by the
//! startup pass ([`JobEngine::resume_world`]).

use std::sync::Arc;
use std::time::Duration;

use super::{JobEngine, lock};
use crate::chunking::{Cl100k, TokenCounter};
use crate::domain::{
    ChunkingProfile, JobId, JobKind, JobStatus, NewChunk, NewParent, RunId, SourceFormat, SourceId, WorldId, now,
};
use crate::store::SourceChunks;

/// First pause before a preparation that met an unavailable store starts again; each further
/// pause doubles, up to [`PREPARE_RETRY_MAX`].
const PREPARE_RETRY_FIRST: Duration = Duration::from_secs(1);
const PREPARE_RETRY_MAX: Duration = Duration::from_secs(60);

impl JobEngine {
    /// Prepares a queued re-ingest job in the background, on the app's task tracker (shutdown
    /// waits for it): see [`JobEngine::prepare_now`]. A store that is unavailable (a connection
    /// lost, a database busy past its timeout) is waited out: the preparation starts again
    /// after 1 s, 2 s, 4 s … (at most a minute apart) until it gets through, the job leaves
    /// `queued` or the app stops. Any other failure leaves the job queued; pausing and
    /// resuming it, or a restart, tries again.
    pub fn prepare(&self, job: JobId) {
        let mut preparing = lock(&self.inner.preparing);
        preparing.retain(|_, h| !h.is_finished());
        if preparing.contains_key(&job) {
            // One preparation per job: pausing and resuming a re-ingest again and again must
            // not start a full chunking of the world each time. The one under way sees the
            // job's status before each source and carries on or stops.
            return;
        }
        let this = self.clone();
        let handle = self.inner.tracker.spawn(async move {
            let mut pause = PREPARE_RETRY_FIRST;
            loop {
                let attempt = tokio::select! {
                    () = this.inner.stop.cancelled() => return,
                    attempt = this.prepare_now(job) => attempt,
                };
                match attempt {
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
                    () = this.inner.stop.cancelled() => return,
                    () = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(PREPARE_RETRY_MAX);
            }
        });
        preparing.insert(job, handle);
    }

    /// Waits for the re-ingest preparations under way (for tests).
    pub async fn prepared(&self) {
        let preparing = std::mem::take(&mut *lock(&self.inner.preparing));
        for handle in preparing.into_values() {
            let _ = handle.await;
        }
    }

    /// Chunks every stored source the queued re-ingest `job`'s run lacks into it, one source
    /// at a time and off the runtime, then starts the job (queued → running), wakes the workers
    /// and finishes it at once when there is nothing to embed. Stops quietly when the job is
    /// no longer queued (paused or cancelled meanwhile). A running job (a resumed one) goes to
    /// its completion step instead, which chunks what its run still lacks.
    async fn prepare_now(&self, job: JobId) -> crate::store::Result<()> {
        let store = self.store();
        let Some(current) = store.get_job(job).await? else {
            return Ok(());
        };
        if current.status == JobStatus::Running {
            self.wake();
            return self.finish(job).await;
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
            if store.job_status(job).await? != Some(JobStatus::Queued) {
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
            self.finish(job).await?;
        }
        Ok(())
    }

    /// The completion step of a re-ingest whose run lacks sources added since it began: cuts
    /// them into the run and wakes the workers.
    pub(super) async fn chunk_missing_sources(
        &self,
        job: JobId,
        world: WorldId,
        run: RunId,
        sources: Vec<(SourceId, u32)>,
    ) -> crate::store::Result<()> {
        let Some(chunking) = self.store().run_chunking(job).await? else {
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

    /// Chunks one stored source into a re-ingest's run (off the runtime) under `job`. Returns
    /// how many chunks were added: none when the source is gone, is already in the run (another
    /// task chunked it first) or the run is no longer being built.
    async fn chunk_into_run(
        &self,
        job: JobId,
        world: WorldId,
        run: RunId,
        (chunking, counter): (ChunkingProfile, &Arc<dyn TokenCounter>),
        source: SourceId,
        book_number: u32,
    ) -> crate::store::Result<u64> {
        let store = self.store();
        let Some(text) = store.source_text(world, source).await? else {
            return Ok(0);
        };
        // A PDF's chunks are told their page again (its text keeps the page breaks); parents
        // follow the sections of the source's format.
        let row = store.get_source(world, source).await?;
        let format = (row.as_ref())
            .and_then(|s| SourceFormat::of(&s.content_type))
            .unwrap_or(SourceFormat::Plain);
        let title = row.as_ref().map(|s| s.context_title().to_owned()).unwrap_or_default();
        let (chunks, parents) = split_off_runtime(text, chunking, counter.clone(), format, title).await?;
        let chunks = SourceChunks {
            source,
            book_number,
            chunks,
        };
        let added = match store.add_run_chunks(world, run, job, chunks, now()).await {
            Err(crate::store::Error::Duplicate(_)) => return Ok(0),
            other => other?,
        };
        if added > 0 {
            store.add_parents(world, run, source, &parents).await?;
        }
        Ok(added)
    }

    /// The tokenizer a run's chunks are cut with: its own profile's (a re-ingest may change the
    /// provider). A model that cannot be read now (local files missing) fails the preparation,
    /// which leaves the job queued (see [`JobEngine::prepare`]).
    async fn run_counter(&self, world: WorldId, run: RunId) -> crate::store::Result<Arc<dyn TokenCounter>> {
        let runs = self.store().world_runs(world).await?;
        let Some(info) = runs.into_iter().find(|r| r.id == run) else {
            return Ok(Arc::new(Cl100k));
        };
        self.inner
            .providers
            .chunk_counter(info.embedding.provider)
            .await
            .map_err(|err| crate::store::Error::Internal(format!("the run's tokenizer is not available: {err}")))
    }
}

/// Splits `text` on the blocking pool: a long source takes seconds to chunk.
async fn split_off_runtime(
    text: String,
    chunking: ChunkingProfile,
    counter: Arc<dyn TokenCounter>,
    format: SourceFormat,
    title: String,
) -> crate::store::Result<(Vec<NewChunk>, Vec<NewParent>)> {
    tokio::task::spawn_blocking(move || {
        let mut chunks = crate::chunking::split_source(&text, format, chunking, counter.as_ref());
        if format == SourceFormat::Pdf {
            crate::chunking::pdf::number_pages(&text, &mut chunks);
        }
        if chunking.context_prefix {
            crate::chunking::add_context_prefixes(&text, format, &title, &mut chunks, counter.as_ref());
        }
        let parents = crate::chunking::parents_of(&text, format, &chunks, chunking.parent_max_tokens);
        (chunks, parents)
    })
    .await
    .map_err(|e| crate::store::Error::Internal(format!("chunking a source failed: {e}")))
}
