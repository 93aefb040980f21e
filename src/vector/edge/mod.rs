//! [`EdgeRepo`]: the embedded vector store, Qdrant's own engine (`qdrant-edge`) run in-process.
//!
//! One directory holds every collection; each collection is one `EdgeShard` in a subfolder
//! named after it, opened lazily on first use and shared as an `Arc`. The engine is synchronous
//! (parking_lot locks, rayon pools, mmap I/O), so every call goes through
//! `tokio::task::spawn_blocking` and never runs on a runtime worker.
//!
//! **Locking.** The engine has no directory lock and two owners of one shard corrupt it, so
//! [`EdgeRepo::open`] takes an exclusive `flock` (`File::try_lock`) on `.quarry-vectors.lock`
//! in the directory; a second open — from this process or another — fails with the path in the
//! message. Every open shard holds a reference to the lock, so it is only released once the last
//! shard has been dropped (and flushed), never while an engine thread might still write. Opening
//! and creating shards run as their own tasks under one mutex, so a caller that gives up halfway
//! cannot leave a second engine on the same folder.
//!
//! **Maintenance.** The engine never flushes or builds HNSW by itself: without `flush()` its WAL
//! only grows (≈205 MiB per 100k×384-d points) and restarts replay all of it; without
//! `optimize()` every search stays a brute-force scan of the appendable segment. One background
//! task (spawned by `open`, stopped by [`close`](VectorRepo::close)) therefore flushes a dirty
//! shard once writes have settled for [`FLUSH_DEBOUNCE`] (500 ms), and at least every
//! [`FLUSH_MAX_DELAY`] (5 s) under continuous writes; it runs `optimize()` once
//! [`OPTIMIZE_AFTER_POINTS`] (5,000) points were written since the last one and writes have
//! settled for [`OPTIMIZE_SETTLE`] (2 s) — or after [`OPTIMIZE_MAX_DELAY`] (2 min) of unbroken
//! writing — and, for smaller trickles and deletes (vacuum), every [`OPTIMIZE_IDLE_INTERVAL`]
//! (10 min). At most one optimize runs at a time (it is CPU-heavy: HNSW on ~all cores); flushes
//! keep running beside it. Both run on the blocking pool, never on a request path. Writes are
//! durable against a process crash as soon as they return (WAL replay on load); the flush adds
//! power-loss durability and bounds replay time. `close()` stops the task and flushes every shard;
//! dropping the repo without it still flushes (the engine's `Drop`), on the dropping thread.
//!
//! Index choices: `world_id` is a tenant index (points grouped per world at optimize, per-world
//! HNSW links); `run_id` and `source_id` are indexed with `enable_hnsw=false` — they narrow
//! filters and deletes, and extra HNSW links per index would double optimize time. All three
//! are UUID indexes, not keyword indexes: the payload holds the ids as strings either way, but
//! a UUID index keeps each point's value as a 128-bit integer in one flat array, so the filter
//! check on every point a search visits is an integer compare instead of a string compare
//! behind a pointer to its own heap allocation. A collection opened with indexes of another
//! type (keyword, from older versions) has them rebuilt as UUID indexes from the stored
//! payloads, once, when it is first opened.

mod collection;
mod convert;
mod engine;
mod indexes;
mod maintenance;
mod query;
mod shards;
mod writes;

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use qdrant_edge::EdgeShard;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::settings::{Layout, SettingDrift, drift};
use super::{
    CollectionSpec, DenseSearch, Error, HybridSearch, Point, PointFilter, PointHome, PointRecord, Result, ScoredPoint,
    ScrollPage, SparseSearch, VectorRepo,
};
use collection::{ensure, observed, reload_with_layout};
use engine::{blocking, detached, engine_error};
use maintenance::{flush, maintain};
use shards::{shard, validate_name};

/// Lock file inside the vector directory. The leading dot keeps it out of the collection
/// namespace (collection names may not start with a dot).
const LOCK_FILE: &str = ".quarry-vectors.lock";
/// Written by `EdgeShard::new`; its presence means "this subfolder is a collection".
const EDGE_CONFIG_FILE: &str = "edge_config.json";

/// Flush a dirty shard once no write arrived for this long.
pub const FLUSH_DEBOUNCE: Duration = Duration::from_millis(500);
/// ... but never leave a shard dirty longer than this under continuous writes.
pub const FLUSH_MAX_DELAY: Duration = Duration::from_secs(5);
/// Optimize (build HNSW, merge segments) after this many points were written since the last one.
/// About where HNSW starts to pay off: the engine indexes segments above ~6.7k 384-d vectors.
pub const OPTIMIZE_AFTER_POINTS: u64 = 5_000;
/// ... once writes settled for this long (an ingest in full swing would otherwise trigger it
/// batch after batch) ...
pub const OPTIMIZE_SETTLE: Duration = Duration::from_secs(2);
/// ... or, under writes that never settle, at the latest this long after the last optimize.
pub const OPTIMIZE_MAX_DELAY: Duration = Duration::from_secs(120);
/// Any write or delete since the last optimize (too few points for the threshold above) is
/// optimized after this long, so deletes get vacuumed and small worlds get their index.
pub const OPTIMIZE_IDLE_INTERVAL: Duration = Duration::from_secs(600);
/// How often the maintenance task looks at the shards.
const MAINTENANCE_TICK: Duration = Duration::from_millis(250);
/// Points per engine update (one WAL record each).
const UPSERT_BATCH: usize = 1_000;

const WORLD_ID: &str = "world_id";
const RUN_ID: &str = "run_id";
const SOURCE_ID: &str = "source_id";
/// Reciprocal rank fusion constant, the usual default (Qdrant's too).
const RRF_K: usize = 60;

/// The embedded vector store. See the module docs for locking and maintenance.
pub struct EdgeRepo {
    inner: Arc<Inner>,
    cancel: CancellationToken,
    maintenance: Mutex<Option<JoinHandle<()>>>,
}

struct Inner {
    root: PathBuf,
    /// Open shards by collection name. Read on every request (clone an `Arc`), written only when
    /// a shard is opened or created.
    shards: RwLock<HashMap<String, Arc<Shard>>>,
    /// Serialises opening and creating shards: two `EdgeShard`s on one folder corrupt it.
    open_lock: tokio::sync::Mutex<()>,
    /// Search threads per shard (the engine's default is 4 × CPUs per shard).
    search_threads: usize,
    /// `[vectors.collection]` (for new collections) and `[vectors.search]`.
    layout: Layout,
    /// Declared last: dropped after the shards.
    lock: Arc<DirLock>,
}

/// The exclusive lock on the vector directory; released when the file is closed on drop.
struct DirLock {
    _file: File,
}

struct Shard {
    name: String,
    engine: EdgeShard,
    state: Mutex<WriteState>,
    /// Held while an optimize runs: one at a time per shard (maintenance or a caller's).
    optimizing: Mutex<()>,
    /// Declared after `engine`: the directory stays locked until the engine is dropped (and has
    /// flushed), even when the shard outlives the repo in a blocking task.
    _lock: Arc<DirLock>,
}

/// What the maintenance task needs to know about a shard's writes.
struct WriteState {
    /// When the first write since the last flush happened; `None` when clean.
    dirty_since: Option<Instant>,
    last_write: Instant,
    /// Points written (and deletes issued) since the last optimize started.
    unoptimized: u64,
    last_optimize: Instant,
}

impl Shard {
    fn state(&self) -> MutexGuard<'_, WriteState> {
        // The state is plain counters: a panic elsewhere cannot leave it inconsistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a confirmed (or attempted) write of `points` points.
    fn note_write(&self, points: u64) {
        let now = Instant::now();
        let mut state = self.state();
        state.dirty_since.get_or_insert(now);
        state.last_write = now;
        state.unoptimized = state.unoptimized.saturating_add(points.max(1));
    }
}

impl fmt::Debug for EdgeRepo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EdgeRepo")
            .field("root", &self.inner.root)
            .finish_non_exhaustive()
    }
}

impl EdgeRepo {
    /// Opens (creating it if missing) the vector directory `path`, locks it and starts the
    /// background maintenance task. Must be called inside a tokio runtime. Collections are opened
    /// lazily on first use.
    pub fn open(path: &Path) -> Result<EdgeRepo> {
        Self::open_with(path, Layout::default())
    }

    /// [`EdgeRepo::open`] with collection and search settings. Settings the embedded engine does
    /// not have (shards, replicas) must be unset: configuration validation refuses them.
    pub fn open_with(path: &Path, layout: Layout) -> Result<EdgeRepo> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Rejected("EdgeRepo::open must be called inside a tokio runtime".into()))?;
        std::fs::create_dir_all(path)?;
        let lock = Arc::new(DirLock::acquire(path)?);
        let search_threads = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 8);
        let inner = Arc::new(Inner {
            root: path.to_path_buf(),
            shards: RwLock::new(HashMap::new()),
            open_lock: tokio::sync::Mutex::new(()),
            search_threads,
            layout,
            lock,
        });
        let cancel = CancellationToken::new();
        let task = runtime.spawn(maintain(Arc::downgrade(&inner), cancel.clone()));
        tracing::info!(path = %path.display(), "embedded vector store opened");
        Ok(EdgeRepo {
            inner,
            cancel,
            maintenance: Mutex::new(Some(task)),
        })
    }

    /// Builds `collection`'s optimized segments (its HNSW index and, when configured, quantized
    /// vectors) now rather than when maintenance gets to it, and waits until they are written.
    /// For benchmarks and tests; a missing collection is left alone.
    pub async fn optimize_now(&self, collection: &str) -> Result<()> {
        let Some(shard) = shard(&self.inner, collection).await? else {
            return Ok(());
        };
        {
            let mut state = shard.state();
            state.unoptimized = 0;
            state.last_optimize = Instant::now();
        }
        blocking(move || {
            let _one = shard.optimizing.lock().unwrap_or_else(PoisonError::into_inner);
            shard.engine.optimize().map_err(engine_error)?;
            shard.engine.flush().map_err(engine_error)
        })
        .await
    }

    /// The vector directory.
    pub fn path(&self) -> &Path {
        &self.inner.root
    }
}

impl Drop for EdgeRepo {
    fn drop(&mut self) {
        // The shards flush as they drop with `inner`; the maintenance task only holds a weak
        // reference and stops.
        self.cancel.cancel();
    }
}

#[async_trait]
impl VectorRepo for EdgeRepo {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    async fn health(&self) -> Result<()> {
        let root = self.inner.root.clone();
        let meta = tokio::fs::metadata(&root)
            .await
            .map_err(|e| Error::Unavailable(format!("vector directory {} is not accessible: {e}", root.display())))?;
        if meta.is_dir() {
            Ok(())
        } else {
            Err(Error::Unavailable(format!(
                "vector directory {} is not a directory",
                root.display()
            )))
        }
    }

    async fn ensure_collection(&self, spec: &CollectionSpec) -> Result<()> {
        validate_name(&spec.name)?;
        if spec.dimensions == 0 {
            return Err(Error::Rejected(format!(
                "collection `{}`: dimensions must be positive",
                spec.name
            )));
        }
        detached(ensure(Arc::clone(&self.inner), spec.clone())).await
    }

    async fn upsert(&self, collection: &str, points: Vec<Point>) -> Result<()> {
        writes::upsert(&self.inner, collection, points).await
    }

    async fn search(&self, collection: &str, search: DenseSearch) -> Result<Vec<ScoredPoint>> {
        query::search(&self.inner, collection, search).await
    }

    async fn sparse_search(&self, collection: &str, search: SparseSearch) -> Result<Vec<ScoredPoint>> {
        query::sparse_search(&self.inner, collection, search).await
    }

    async fn hybrid_search(&self, collection: &str, search: HybridSearch) -> Result<Vec<ScoredPoint>> {
        query::hybrid_search(&self.inner, collection, search).await
    }

    async fn retrieve(&self, collection: &str, ids: &[Uuid]) -> Result<Vec<PointRecord>> {
        query::retrieve(&self.inner, collection, ids).await
    }

    async fn dense_vectors(&self, collection: &str, ids: &[Uuid]) -> Result<Vec<(Uuid, Vec<f32>)>> {
        query::dense_vectors(&self.inner, collection, ids).await
    }

    async fn delete_points(&self, collection: &str, ids: &[Uuid]) -> Result<()> {
        writes::delete_points(&self.inner, collection, ids).await
    }

    async fn move_points(&self, collection: &str, ids: &[Uuid], to: PointHome) -> Result<()> {
        writes::move_points(&self.inner, collection, ids, to).await
    }

    async fn delete_by_filter(&self, collection: &str, filter: PointFilter) -> Result<()> {
        writes::delete_by_filter(&self.inner, collection, filter).await
    }

    async fn count(&self, collection: &str, filter: PointFilter) -> Result<u64> {
        query::count(&self.inner, collection, filter).await
    }

    async fn scroll(
        &self,
        collection: &str,
        filter: PointFilter,
        offset: Option<Uuid>,
        limit: usize,
    ) -> Result<ScrollPage> {
        query::scroll(&self.inner, collection, filter, offset, limit).await
    }

    async fn drift(&self, collection: &str) -> Result<Vec<SettingDrift>> {
        let Some(shard) = shard(&self.inner, collection).await? else {
            return Ok(Vec::new());
        };
        let observed = observed(&shard.engine.config());
        Ok(drift(&self.inner.layout.collection, &observed))
    }

    async fn apply_settings(&self, collection: &str) -> Result<Vec<SettingDrift>> {
        let found = self.drift(collection).await?;
        if !found.iter().any(|d| d.in_place) {
            return Ok(found);
        }
        let inner = Arc::clone(&self.inner);
        let name = collection.to_owned();
        detached(async move { reload_with_layout(&inner, &name).await }).await?;
        tracing::info!(collection, "applied [vectors.collection] settings in place");
        self.drift(collection).await
    }

    async fn close(&self) -> Result<()> {
        self.cancel.cancel();
        let task = self.maintenance.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(task) = task
            && let Err(e) = task.await
        {
            tracing::warn!(error = %e, "vector maintenance task ended abnormally");
        }
        let mut first_error = None;
        for shard in self.inner.all_shards() {
            if let Err(e) = flush(shard).await {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => {
                tracing::info!(path = %self.inner.root.display(), "embedded vector store closed");
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod testing;
