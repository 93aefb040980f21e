//! Repair: reconcile a world's manifests with its chunks and live points.
//!
//! The relational store is the authority; repair makes the vector store agree with it again
//! after a crash, a lost or restored vector folder, a failed delete or a tampered row. For every
//! run of the world that is not retired, and every collection the world has used:
//! - a point with no manifest entry (its chunk or run is gone) is an orphan: deleted;
//! - a point whose payload does not match its slot (text hash, run, source or chunk number, or
//!   an unreadable payload) is stale: deleted, and the slot queued for embedding again;
//! - an entry marked embedded whose point is missing gets it back from the vector the store
//!   kept for it, without a provider call ("restored"; a lost collection, made again first, is
//!   refilled this way); only an entry with no usable kept vector (embedded before vectors were
//!   kept) is queued for embedding again;
//! - a pending entry (not held by a worker) whose point exists and matches is marked embedded
//!   without any provider call ("adopted"), and counted on its job if that job is still live.
//!
//! Entries are read before points are scrolled, and both kinds of deletion and requeue are
//! checked once more right before they happen, so work that lands meanwhile (a new source, a
//! worker's write) is never mistaken for damage. Requeued slots go to the repair job (an
//! explicit `POST /v1/worlds/{id}/repair` job, or one created on demand) or, for a run being
//! re-ingested, to the re-ingest job that owns it; the embedding workers do the rest.
//!
//! Repair runs at startup for every world (unless `embedding.repair_on_startup = false`; the
//! workers start once every world's collections exist, beside the reconciliation) and on demand;
//! both run in the background on the app's task tracker and stop at shutdown.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use super::{Missing, ServiceError, ServiceResult};
pub use crate::domain::RepairSummary;
use crate::domain::{
    ChunkId, Job, JobEventData, JobId, JobKind, JobStatus, ManifestEntry, ManifestState, RunId, RunInfo, RunStatus,
    World, WorldId, now,
};
use crate::jobs::JobEngine;
use crate::store::Store;
use crate::vector::{Point, PointFilter, PointPayload, VectorRepo};

/// Points read per scroll page.
const PAGE: usize = 512;
/// Lost points written again per vector-store write, from the vectors the store kept.
const RESTORE_BATCH: usize = 256;

struct Inner {
    meters: crate::meters::Metrics,
    store: Arc<dyn Store>,
    vectors: Arc<dyn VectorRepo>,
    engine: JobEngine,
    tracker: TaskTracker,
    cancel: CancellationToken,
    /// Worlds this process is reconciling for a repair request, with that request's job.
    reconciling: std::sync::Mutex<HashMap<WorldId, JobId>>,
}

/// What a reconciliation's read of a world's points found.
#[derive(Default)]
struct Scan {
    /// Points read.
    checked: u64,
    /// Points with a manifest entry of a kept run in their collection.
    seen: HashSet<Uuid>,
    /// Points without one, by collection.
    orphans: HashMap<String, Vec<Uuid>>,
    /// Points whose payload does not match their slot: collection, point, run and chunk.
    stale: Vec<(String, Uuid, RunId, ChunkId)>,
    /// Points of pending entries not held by a worker whose point is right, by run.
    adopt: HashMap<RunId, Vec<Uuid>>,
}

/// Cheap to clone.
#[derive(Clone)]
pub struct RepairService {
    inner: Arc<Inner>,
}

impl RepairService {
    pub fn new(deps: &crate::deps::Deps) -> Self {
        Self {
            inner: Arc::new(Inner {
                meters: deps.meters.clone(),
                store: deps.store.clone(),
                vectors: deps.vectors.clone(),
                engine: deps.engine.clone(),
                tracker: deps.tasks.clone(),
                cancel: deps.cancel.clone(),
                reconciling: std::sync::Mutex::new(HashMap::new()),
            }),
        }
    }

    fn reconciling(&self) -> std::sync::MutexGuard<'_, HashMap<WorldId, JobId>> {
        // A map of plain values: a panic elsewhere cannot leave it half-written.
        self.inner
            .reconciling
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts a `repair` job for the world and reconciles in the background. While this
    /// process is still reconciling the world for an earlier request, that request's job is
    /// the answer: a second full pass at once would find nothing the first does not, and a
    /// client repeating the request cannot pile up passes (each reads all of the world's
    /// manifest entries and points).
    pub async fn start(&self, world_id: WorldId) -> ServiceResult<Job> {
        let store = &self.inner.store;
        let world = store
            .get_world(world_id)
            .await?
            .ok_or(ServiceError::NotFound(Missing::World))?;
        let under_way = self.reconciling().get(&world_id).copied();
        if let Some(job) = under_way
            && let Some(job) = store.get_job(job).await?
        {
            return Ok(job);
        }
        let job = store
            .create_job(world.id, world.active_run, JobKind::Repair, now())
            .await?;
        let job_id = job.id;
        let earlier = {
            let mut reconciling = self.reconciling();
            match reconciling.get(&world_id) {
                Some(&earlier) => Some(earlier),
                None => {
                    reconciling.insert(world_id, job_id);
                    None
                }
            }
        };
        if let Some(earlier) = earlier {
            // Another request got here first, meanwhile: its pass covers this one.
            self.inner.engine.withdraw(job_id).await?;
            return store
                .get_job(earlier)
                .await?
                .ok_or(ServiceError::NotFound(Missing::Job));
        }
        let this = self.clone();
        self.inner.tracker.spawn(async move {
            let cancel = this.inner.cancel.clone();
            tokio::select! {
                () = cancel.cancelled() => {}
                () = this.run_job(world, job_id) => {}
            }
            this.reconciling().remove(&world_id);
        });
        Ok(job)
    }

    /// At startup, in the background: makes every world's collections exist (a wiped vector
    /// folder, a new server), then runs `then` (starting this process's embedding workers, which
    /// must not write into a missing collection), then reconciles every world once and finishes
    /// running jobs that have nothing left to do (e.g. after a crash between the last write and
    /// the finish). The workers run during the reconciliation, as they do during a requested
    /// repair: a process restarted again and again still gets work done between restarts.
    pub fn spawn_startup(&self, then: impl FnOnce() + Send + 'static) {
        let this = self.clone();
        self.inner.tracker.spawn(async move {
            let cancel = this.inner.cancel.clone();
            tokio::select! {
                () = cancel.cancelled() => {}
                () = this.startup(then) => {}
            }
        });
    }

    async fn startup(&self, then: impl FnOnce()) {
        let worlds = match self.inner.store.list_worlds(crate::domain::Window::ALL).await {
            Ok(worlds) => worlds,
            Err(err) => {
                tracing::warn!(error = %err, "startup repair could not list worlds");
                then();
                return;
            }
        };
        for world in &worlds {
            // Collections first (workers must not write into a missing one), then what a crash
            // left written but unmarked (workers would embed it again).
            match self.ensure_collections(world).await {
                Ok(runs) => {
                    if let Err(err) = self.adopt_pending(world, &runs).await {
                        tracing::warn!(world = %world.id, error = %err, "adopting written points failed");
                    }
                }
                Err(err) => tracing::warn!(world = %world.id, error = %err, "making the world's collections failed"),
            }
        }
        then();
        for world in worlds {
            if let Err(err) = self.remove_retired_runs(world.id).await {
                tracing::warn!(world = %world.id, error = %err, "removing retired runs failed");
            }
            match self.reconcile(&world, None).await {
                Ok(summary) if summary.changed_anything() => {
                    tracing::info!(world = %world.id, ?summary, "startup repair fixed the world's index");
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(world = %world.id, error = %err, "startup repair failed"),
            }
            if let Err(err) = self.inner.engine.resume_world(world.id).await {
                tracing::warn!(world = %world.id, error = %err, "finishing idle jobs failed");
            }
        }
        self.inner.engine.wake();
    }

    async fn run_job(&self, world: World, job: JobId) {
        let engine = &self.inner.engine;
        let result = match self.reconcile(&world, Some(job)).await {
            Ok(summary) => match engine.record(job, JobEventData::Repaired(summary)).await {
                // Completes the job once nothing it requeued is pending.
                Ok(()) => engine.finish(job).await,
                Err(err) => Err(err),
            },
            Err(err) => {
                tracing::warn!(world = %world.id, %job, error = %err, "repair failed");
                engine.fail_repair(job, err.to_string()).await
            }
        };
        if let Err(err) = result {
            tracing::warn!(%job, error = %err, "recording the repair outcome failed");
        }
        engine.wake();
    }

    /// Runs a re-ingest replaced or abandoned whose points or rows are still there. The rows of
    /// a run whose re-ingest failed stay, so that job keeps listing its failed chunks.
    async fn remove_retired_runs(&self, world: WorldId) -> crate::store::Result<()> {
        let jobs = self
            .inner
            .store
            .list_jobs(world, &[], crate::domain::Window::ALL)
            .await?;
        for run in self.inner.store.world_runs(world).await? {
            if run.status != RunStatus::Retired {
                continue;
            }
            let failed = jobs
                .iter()
                .any(|j| j.run_id == run.id && j.kind == JobKind::Reingest && j.status == JobStatus::Failed);
            if failed {
                self.inner
                    .vectors
                    .delete_by_filter(&run.collection, PointFilter::world(world).run(run.id))
                    .await
                    .map_err(|err| {
                        tracing::warn!(%world, run = %run.id, error = %err, "deleting an abandoned run's points failed");
                    })
                    .ok();
            } else {
                self.inner.engine.remove_run(world, run.id, &run.collection).await?;
            }
        }
        Ok(())
    }

    /// Makes the collections of `world`'s runs exist: the world's and that of a re-ingest
    /// building into another profile. Returns the runs.
    async fn ensure_collections(&self, world: &World) -> ServiceResult<Vec<RunInfo>> {
        let runs = self.inner.store.world_runs(world.id).await?;
        let mut profiles = vec![&world.embedding];
        profiles.extend(
            runs.iter()
                .filter(|r| r.status == RunStatus::Building)
                .map(|r| &r.embedding),
        );
        profiles.dedup_by(|a, b| a.collection_name() == b.collection_name());
        for profile in profiles {
            self.inner
                .vectors
                .ensure_collection(&crate::vector::CollectionSpec::for_profile(profile))
                .await?;
        }
        Ok(runs)
    }

    /// One reconciliation of `world` (see the module docs). Requeued slots of the active run go
    /// to `job` when given.
    pub async fn reconcile(&self, world: &World, job: Option<JobId>) -> ServiceResult<RepairSummary> {
        let mut summary = RepairSummary::default();
        // A collection the vector store lost (a wiped folder, a new server) is made again first:
        // its embedded entries then miss their points below and get them back from the kept
        // vectors.
        let runs = self.ensure_collections(world).await?;
        let kept: HashMap<RunId, String> = runs
            .iter()
            .filter(|r| r.status != RunStatus::Retired)
            .map(|r| (r.id, r.collection.clone()))
            .collect();
        // Entries first, then points: a point written after this read belongs to an entry that
        // is either in it already or re-checked below.
        let entries = self.read_entries(world.id, &kept).await?;
        summary.failed_chunks = entries.values().filter(|e| e.state == ManifestState::Failed).count() as u64;
        let scan = self.scan_points(world.id, &runs, &kept, &entries).await?;
        summary.points_checked = scan.checked;
        summary.orphan_points_deleted = self.delete_orphans(world.id, scan.orphans).await?;
        summary.stale_points_deleted = self.delete_stale(world, &scan.stale, job).await?;
        let (restored, requeued) = self.restore_missing(world, &runs, &entries, &scan.seen, job).await?;
        summary.points_restored = restored;
        summary.missing_points_requeued = requeued;

        // Pending entries whose point is already right: embedded, no provider call.
        for (run, points) in scan.adopt {
            let Some(collection) = kept.get(&run) else { continue };
            let wanted: Vec<&ManifestEntry> = points.iter().filter_map(|p| entries.get(p)).collect();
            summary.entries_adopted += self.adopt(world, run, collection, &wanted).await?;
        }
        if summary.changed_anything() {
            self.inner.engine.wake();
        }
        self.show_drift(world.id, &summary);
        Ok(summary)
    }

    /// The manifest entries of the runs in `kept`, by point id, as they are now.
    async fn read_entries(
        &self,
        world: WorldId,
        kept: &HashMap<RunId, String>,
    ) -> ServiceResult<HashMap<Uuid, ManifestEntry>> {
        let read_at = now();
        let mut entries: HashMap<Uuid, ManifestEntry> = HashMap::new();
        for run in kept.keys() {
            for entry in self.inner.store.manifest_entries(world, *run, read_at).await? {
                entries.insert(entry.point_id, entry);
            }
        }
        Ok(entries)
    }

    /// Reads every point of `world` in the collections of its `runs` and sorts each against
    /// `entries`: an orphan (no entry of a kept run in that collection), stale (its payload does
    /// not match its slot), or a pending entry's to adopt.
    async fn scan_points(
        &self,
        world: WorldId,
        runs: &[RunInfo],
        kept: &HashMap<RunId, String>,
        entries: &HashMap<Uuid, ManifestEntry>,
    ) -> ServiceResult<Scan> {
        let mut collections: Vec<String> = runs.iter().map(|r| r.collection.clone()).collect();
        collections.sort();
        collections.dedup();
        let mut scan = Scan::default();
        for collection in &collections {
            let mut offset = None;
            loop {
                let page = (self.inner.vectors)
                    .scroll(collection, PointFilter::world(world), offset, PAGE)
                    .await?;
                for point in page.points {
                    scan.checked += 1;
                    let Some(entry) = entries
                        .get(&point.id)
                        .filter(|e| kept.get(&e.run_id) == Some(collection))
                    else {
                        scan.orphans.entry(collection.clone()).or_default().push(point.id);
                        continue;
                    };
                    scan.seen.insert(point.id);
                    if !payload_matches(world, entry, point.payload.as_ref()) {
                        scan.stale
                            .push((collection.clone(), point.id, entry.run_id, entry.chunk_id));
                    } else if entry.state == ManifestState::Pending && !entry.leased {
                        scan.adopt.entry(entry.run_id).or_default().push(point.id);
                    }
                }
                match page.next {
                    Some(next) => offset = Some(next),
                    None => break,
                }
            }
        }
        Ok(scan)
    }

    /// Orphans: deletes only what still has no entry now, in any run the world has now (a
    /// re-ingest begun since the runs were read writes into the same collection). Returns how
    /// many points were deleted.
    async fn delete_orphans(&self, world: WorldId, orphans: HashMap<String, Vec<Uuid>>) -> ServiceResult<u64> {
        let store = &self.inner.store;
        let live: Vec<(RunId, String)> = store
            .world_runs(world)
            .await?
            .into_iter()
            .filter(|r| r.status != RunStatus::Retired)
            .map(|r| (r.id, r.collection))
            .collect();
        let mut deleted = 0;
        for (collection, points) in orphans {
            let mut still: HashSet<Uuid> = points.iter().copied().collect();
            for (run, run_collection) in &live {
                if *run_collection == collection {
                    for found in store.chunks_by_points(world, *run, &points).await? {
                        still.remove(&found.point_id);
                    }
                }
            }
            let still: Vec<Uuid> = still.into_iter().collect();
            if !still.is_empty() {
                self.inner.vectors.delete_points(&collection, &still).await?;
                deleted += still.len() as u64;
            }
        }
        Ok(deleted)
    }

    /// Stale points: deletes them, then requeues their slots. Returns how many points were
    /// deleted.
    async fn delete_stale(
        &self,
        world: &World,
        stale: &[(String, Uuid, RunId, ChunkId)],
        job: Option<JobId>,
    ) -> ServiceResult<u64> {
        let mut requeue: HashMap<RunId, Vec<ChunkId>> = HashMap::new();
        let mut by_collection: HashMap<String, Vec<Uuid>> = HashMap::new();
        for (collection, point, run, chunk) in stale {
            by_collection.entry(collection.clone()).or_default().push(*point);
            requeue.entry(*run).or_default().push(*chunk);
        }
        let mut deleted = 0;
        for (collection, points) in by_collection {
            self.inner.vectors.delete_points(&collection, &points).await?;
            deleted += points.len() as u64;
        }
        for (run, chunks) in requeue {
            self.requeue(world, run, &chunks, "stale_point", job).await?;
        }
        Ok(deleted)
    }

    /// Embedded entries without a point (not `seen`), still missing now: written again from
    /// the vectors the store kept; those without one (embedded before vectors were kept) are
    /// requeued. Returns how many points were restored and how many slots requeued.
    async fn restore_missing(
        &self,
        world: &World,
        runs: &[RunInfo],
        entries: &HashMap<Uuid, ManifestEntry>,
        seen: &HashSet<Uuid>,
        job: Option<JobId>,
    ) -> ServiceResult<(u64, u64)> {
        let mut missing: HashMap<RunId, Vec<&ManifestEntry>> = HashMap::new();
        for entry in entries.values() {
            if entry.state == ManifestState::Embedded && !seen.contains(&entry.point_id) {
                missing.entry(entry.run_id).or_default().push(entry);
            }
        }
        let (mut restored_points, mut requeued) = (0, 0);
        for (run, lost) in missing {
            let Some(info) = runs.iter().find(|r| r.id == run && r.status != RunStatus::Retired) else {
                continue;
            };
            let ids: Vec<Uuid> = lost.iter().map(|e| e.point_id).collect();
            let present: HashSet<Uuid> = (self.inner.vectors)
                .retrieve(&info.collection, &ids)
                .await?
                .into_iter()
                .map(|p| p.id)
                .collect();
            let chunks: Vec<ChunkId> = lost
                .iter()
                .filter(|e| !present.contains(&e.point_id))
                .map(|e| e.chunk_id)
                .collect();
            let restored = self.restore(world, info, &chunks).await?;
            restored_points += restored.len() as u64;
            let chunks: Vec<ChunkId> = chunks.into_iter().filter(|c| !restored.contains(c)).collect();
            requeued += self.requeue(world, run, &chunks, "point_missing", job).await?;
        }
        Ok((restored_points, requeued))
    }

    /// Shows what a reconciliation of `world` found out of step on `quarry_drift_points`.
    fn show_drift(&self, world: WorldId, summary: &RepairSummary) {
        let world_id = world.to_string();
        for (kind, n) in [
            ("orphan", summary.orphan_points_deleted),
            ("stale", summary.stale_points_deleted),
            ("missing", summary.missing_points_requeued + summary.points_restored),
        ] {
            (self.inner.meters)
                .gauge("quarry_drift_points", &[("world", world_id.as_str()), ("kind", kind)])
                .set(n as f64);
        }
    }

    /// Audits every world every `interval` until shutdown: the startup pass's reconciliation
    /// (what it finds out of step it also fixes), whose counts `quarry_drift_points` shows.
    pub fn spawn_audits(&self, interval: std::time::Duration) {
        let this = self.clone();
        self.inner.tracker.spawn(async move {
            let cancel = this.inner.cancel.clone();
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(interval) => {}
                }
                let worlds = match this.inner.store.list_worlds(crate::domain::Window::ALL).await {
                    Ok(worlds) => worlds,
                    Err(err) => {
                        tracing::warn!(error = %err, "the periodic audit could not list worlds");
                        continue;
                    }
                };
                for world in worlds {
                    if cancel.is_cancelled() {
                        return;
                    }
                    match this.reconcile(&world, None).await {
                        Ok(summary) if summary.changed_anything() => {
                            tracing::warn!(world = %world.id, ?summary, "the periodic audit found and fixed drift");
                        }
                        Ok(_) => {}
                        Err(err) => tracing::warn!(world = %world.id, error = %err, "the periodic audit failed"),
                    }
                }
            }
        });
    }

    /// Marks `wanted` (pending entries of `run` whose point in `collection` is right) embedded
    /// with the point's vector, kept as a worker keeps the one it made: no provider call. An
    /// entry whose vector cannot be read back is left to the workers. Returns how many were
    /// marked; finishes the jobs that held them when they are done.
    async fn adopt(
        &self,
        world: &World,
        run: RunId,
        collection: &str,
        wanted: &[&ManifestEntry],
    ) -> ServiceResult<u64> {
        let mut points = Vec::with_capacity(wanted.len());
        for batch in wanted.chunks(RESTORE_BATCH) {
            let ids: Vec<Uuid> = batch.iter().map(|e| e.point_id).collect();
            let dense: HashMap<Uuid, Vec<f32>> = self
                .inner
                .vectors
                .dense_vectors(collection, &ids)
                .await?
                .into_iter()
                .collect();
            points.extend(batch.iter().filter_map(|entry| {
                let dense = dense.get(&entry.point_id)?.clone();
                dense
                    .iter()
                    .all(|x| x.is_finite())
                    .then(|| crate::domain::EmbeddedVector {
                        chunk_id: entry.chunk_id,
                        text_sha256: entry.text_sha256.clone(),
                        dense,
                    })
            }));
        }
        let (adopted, jobs) = self.inner.store.adopt_entries(world.id, run, &points, now()).await?;
        for held_by in jobs {
            self.inner.engine.finish(held_by).await?;
        }
        Ok(adopted)
    }

    /// Adopts the pending entries of `world` whose points already stand (a process that died
    /// between writing points and marking them leaves such entries), looking up only their
    /// points: done at startup before the workers start, so that they do not embed those again.
    async fn adopt_pending(&self, world: &World, runs: &[RunInfo]) -> ServiceResult<u64> {
        let mut adopted = 0;
        for run in runs.iter().filter(|r| r.status != RunStatus::Retired) {
            let entries = self.inner.store.manifest_entries(world.id, run.id, now()).await?;
            let pending: Vec<&ManifestEntry> = entries
                .iter()
                .filter(|e| e.state == ManifestState::Pending && !e.leased)
                .collect();
            for batch in pending.chunks(RESTORE_BATCH) {
                let ids: Vec<Uuid> = batch.iter().map(|e| e.point_id).collect();
                let found: HashMap<Uuid, Option<PointPayload>> = self
                    .inner
                    .vectors
                    .retrieve(&run.collection, &ids)
                    .await?
                    .into_iter()
                    .map(|p| (p.id, p.payload))
                    .collect();
                let right: Vec<&ManifestEntry> = batch
                    .iter()
                    .copied()
                    .filter(|e| {
                        found
                            .get(&e.point_id)
                            .is_some_and(|p| payload_matches(world.id, e, p.as_ref()))
                    })
                    .collect();
                if !right.is_empty() {
                    adopted += self.adopt(world, run.id, &run.collection, &right).await?;
                }
            }
        }
        Ok(adopted)
    }

    /// Writes the points of `chunks` (embedded entries of `run` whose points are missing) again
    /// from the vectors the store kept, with BM25 terms computed from their text when the world
    /// is hybrid: no provider call. Returns the chunks whose points now stand; the others have
    /// no usable kept vector (none kept, or not of the run's dimensions).
    ///
    /// A slot deleted meanwhile (its source, its run retired by a switch) must not keep a point
    /// written after its deletion removed the others: as after a worker's refused completion,
    /// the points written are checked against the store once more and those of vanished slots
    /// deleted.
    async fn restore(&self, world: &World, run: &RunInfo, chunks: &[ChunkId]) -> ServiceResult<HashSet<ChunkId>> {
        let (store, vectors) = (&self.inner.store, &self.inner.vectors);
        let dimensions = run.embedding.dimensions as usize;
        let mut restored = HashSet::new();
        for batch in chunks.chunks(RESTORE_BATCH) {
            let kept = store.kept_points(world.id, run.id, batch).await?;
            let points: Vec<Point> = kept
                .into_iter()
                .filter(|k| k.dense.len() == dimensions && k.dense.iter().all(|x| x.is_finite()))
                .map(|k| Point {
                    id: k.point_id,
                    sparse: world.hybrid.then(|| crate::sparse::document(&k.chunk_text)),
                    dense: k.dense,
                    payload: PointPayload {
                        world_id: world.id,
                        run_id: if k.staged {
                            crate::domain::staged_run(run.id)
                        } else {
                            run.id
                        },
                        source_id: k.source_id,
                        book_number: k.book_number,
                        chunk_number: k.chunk_number,
                        text_sha256: k.text_sha256,
                        token_count: k.token_count,
                    },
                })
                .collect();
            if points.is_empty() {
                continue;
            }
            let ids: Vec<Uuid> = points.iter().map(|p| p.id).collect();
            vectors.upsert(&run.collection, points).await?;
            let live = store
                .world_runs(world.id)
                .await?
                .iter()
                .any(|r| r.id == run.id && r.status != RunStatus::Retired);
            let standing: HashMap<Uuid, ChunkId> = if live {
                store
                    .chunks_by_points(world.id, run.id, &ids)
                    .await?
                    .into_iter()
                    .map(|c| (c.point_id, c.chunk.id))
                    .collect()
            } else {
                HashMap::new()
            };
            let vanished: Vec<Uuid> = ids.iter().filter(|id| !standing.contains_key(id)).copied().collect();
            if !vanished.is_empty() {
                vectors.delete_points(&run.collection, &vanished).await?;
            }
            restored.extend(standing.into_values());
        }
        Ok(restored)
    }

    /// Requeues `chunks` of `run`; the active run's go to `job` when given. Returns how many.
    async fn requeue(
        &self,
        world: &World,
        run: RunId,
        chunks: &[ChunkId],
        warning: &str,
        job: Option<JobId>,
    ) -> ServiceResult<u64> {
        if chunks.is_empty() {
            return Ok(0);
        }
        let target = if run == world.active_run { job } else { None };
        let requeued = self
            .inner
            .store
            .requeue_entries(world.id, run, chunks, warning, target, now())
            .await?;
        Ok(requeued.map_or(0, |(_, n)| n))
    }
}

/// Whether a point's payload is the one `entry`'s slot would carry now.
fn payload_matches(world: WorldId, entry: &ManifestEntry, payload: Option<&PointPayload>) -> bool {
    payload.is_some_and(|p| {
        let run = if entry.staged {
            crate::domain::staged_run(entry.run_id)
        } else {
            entry.run_id
        };
        p.world_id == world
            && p.run_id == run
            && p.source_id == entry.source_id
            && p.chunk_number == entry.chunk_number
            && p.text_sha256 == entry.text_sha256
    })
}
