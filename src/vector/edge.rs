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

use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use qdrant_edge::external::ordered_float::OrderedFloat;
use qdrant_edge::{
    AnyVariants, Condition, CountRequestBuilder, CreateIndex, Distance, EdgeConfig, EdgeShard, EdgeSparseVectorParams,
    EdgeVectorParams, FieldCondition, FieldIndexOperations, Filter, Fusion, HnswIndexConfig, IdfCorpusParams,
    IdfParams, JsonPath, Match, Memory, Modifier, NamedQuery, NamedVectors, OperationError, Payload,
    PayloadFieldSchema, PayloadIndexInfo, PayloadOps, PayloadSchemaParams, PointId, PointInsertOperations,
    PointOperations, PointStructPersisted, PrefetchBuilder, QuantizationConfig, QuantizationSearchParams, QueryEnum,
    QueryRequestBuilder, RetrieveRequestBuilder, ScoringQuery, ScrollRequestBuilder, SearchParams, SetPayloadOp,
    UpdateOperation, UuidIndexParamsBuilder, ValueVariants, Vector, VectorInternal, VectorStructInternal,
    VectorStructPersisted, Vectors, WithPayloadInterface, WithVector,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::domain::{SourceId, WorldId};

use super::settings::{CollectionSettings, Layout, Observed, Quantization, SettingDrift, drift};
use super::{
    CollectionSpec, DENSE, DenseSearch, Error, HybridSearch, Point, PointFilter, PointHome, PointPayload, PointRecord,
    Result, SPARSE, ScoredPoint, ScrollPage, SparseSearch, SparseVector, VectorRepo, rules,
};

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

impl DirLock {
    fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                // Best effort: the holder wrote its pid; an unreadable file still gives the path.
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let by = if holder.is_empty() {
                    String::new()
                } else {
                    format!(" (held by pid {holder})")
                };
                return Err(Error::Unavailable(format!(
                    "vector directory {} is already in use by another EdgeRepo{by}; \
                     only one quarry process may open it (lock file {})",
                    dir.display(),
                    path.display()
                )));
            }
            Err(TryLockError::Error(e)) => return Err(Error::Io(e)),
        }
        // For the error message of the next would-be owner; the lock itself is what matters.
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        writeln!(file, "{}", std::process::id())?;
        Ok(DirLock { _file: file })
    }
}

// ---------------------------------------------------------------------------------------------
// shard lifecycle

impl Inner {
    fn cached(&self, name: &str) -> Option<Arc<Shard>> {
        self.shards
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    fn all_shards(&self) -> Vec<Arc<Shard>> {
        self.shards
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    fn tunables(&self) -> EdgeConfig {
        EdgeConfig::builder().max_search_threads(self.search_threads).build()
    }

    fn make_shard(&self, name: &str, engine: EdgeShard) -> Arc<Shard> {
        let now = Instant::now();
        Arc::new(Shard {
            name: name.to_owned(),
            engine,
            state: Mutex::new(WriteState {
                dirty_since: None,
                last_write: now,
                unoptimized: 0,
                last_optimize: now,
            }),
            optimizing: Mutex::new(()),
            _lock: Arc::clone(&self.lock),
        })
    }

    /// Opens an existing collection; the caller holds `open_lock`.
    async fn open_existing(&self, name: &str) -> Result<Option<Arc<Shard>>> {
        if let Some(shard) = self.cached(name) {
            return Ok(Some(shard));
        }
        let dir = self.root.join(name);
        let tunables = self.tunables();
        let engine = blocking(move || {
            if !dir.join(EDGE_CONFIG_FILE).is_file() {
                return Ok(None);
            }
            let engine = EdgeShard::load(&dir, Some(tunables)).map_err(engine_error)?;
            // Collections from older versions get today's indexes on first open.
            ensure_indexes(&engine)?;
            Ok(Some(engine))
        })
        .await?;
        let Some(engine) = engine else {
            return Ok(None);
        };
        let shard = self.make_shard(name, engine);
        self.shards
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), Arc::clone(&shard));
        tracing::debug!(collection = name, "opened embedded collection");
        Ok(Some(shard))
    }
}

/// The open shard of `name`, opening it from disk if it exists there; `None` if the collection
/// does not exist.
async fn shard(inner: &Arc<Inner>, name: &str) -> Result<Option<Arc<Shard>>> {
    validate_name(name)?;
    if let Some(shard) = inner.cached(name) {
        return Ok(Some(shard));
    }
    let inner = Arc::clone(inner);
    let name = name.to_owned();
    detached(async move {
        let _guard = inner.open_lock.lock().await;
        inner.open_existing(&name).await
    })
    .await
}

async fn shard_or_missing(inner: &Arc<Inner>, name: &str) -> Result<Arc<Shard>> {
    shard(inner, name)
        .await?
        .ok_or_else(|| Error::MissingCollection(name.to_owned()))
}

/// Runs `work` as its own task, to completion even if the caller goes away: opening or creating
/// a shard must end with the shard registered (or dropped) before the next caller may try, or two
/// engines would own one folder.
async fn detached<T, F>(work: F) -> Result<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    tokio::spawn(work)
        .await
        .map_err(|e| Error::Unavailable(format!("embedded vector store task failed: {e}")))?
}

/// Creates the collection, or checks the existing one against `spec`.
async fn ensure(inner: Arc<Inner>, spec: CollectionSpec) -> Result<()> {
    let _guard = inner.open_lock.lock().await;
    if let Some(shard) = inner.open_existing(&spec.name).await? {
        // Its indexes were ensured when it was created or loaded.
        return match rules::incompatibility(&shape(&shard.engine.config()), &spec) {
            Some(reason) => Err(Error::Incompatible {
                name: spec.name,
                reason,
            }),
            None => Ok(()),
        };
    }
    let dir = inner.root.join(&spec.name);
    let config = shard_config(&spec, inner.search_threads, &inner.layout.collection)?;
    let engine = blocking(move || {
        let engine = EdgeShard::new(&dir, config).map_err(engine_error)?;
        ensure_indexes(&engine)?;
        // Persist the empty collection with its indexes right away.
        engine.flush().map_err(engine_error)?;
        Ok(engine)
    })
    .await?;
    let shard = inner.make_shard(&spec.name, engine);
    inner
        .shards
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(spec.name.clone(), shard);
    tracing::info!(collection = %spec.name, dimensions = spec.dimensions, sparse = spec.sparse, "created embedded collection");
    Ok(())
}

/// Reopens collection `name` with `[vectors.collection]` applied to its configuration, then
/// optimizes it so that every segment takes the new layout (quantization, HNSW, placement).
async fn reload_with_layout(inner: &Arc<Inner>, name: &str) -> Result<()> {
    let _guard = inner.open_lock.lock().await;
    let Some(mut shard) = inner.open_existing(name).await? else {
        return Ok(());
    };
    inner
        .shards
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(name);
    // Requests still holding the shard finish first: one engine per folder.
    let shard = loop {
        match Arc::try_unwrap(shard) {
            Ok(shard) => break shard,
            Err(held) => {
                shard = held;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    let mut config = shard.engine.config().clone();
    apply_layout(&mut config, &inner.layout.collection)?;
    config.max_search_threads = Some(inner.search_threads);
    let dir = inner.root.join(name);
    let engine = blocking(move || {
        // Dropping the engine flushes it.
        drop(shard);
        let engine = EdgeShard::load(&dir, Some(config)).map_err(engine_error)?;
        engine.optimize().map_err(engine_error)?;
        engine.flush().map_err(engine_error)?;
        Ok(engine)
    })
    .await?;
    let shard = inner.make_shard(name, engine);
    inner
        .shards
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(name.to_owned(), shard);
    Ok(())
}

/// Collection names become folder names: keep them to a safe alphabet so a name can never
/// escape the vector directory or collide with the lock file.
fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Error::Rejected(format!(
            "invalid collection name {name:?}: use 1-200 ASCII letters, digits, '_', '-' or '.', not starting with '.'"
        )))
    }
}

fn shard_config(spec: &CollectionSpec, search_threads: usize, layout: &CollectionSettings) -> Result<EdgeConfig> {
    let mut dense = EdgeVectorParams::builder(spec.dimensions as usize, Distance::Cosine);
    if let Some(on_disk) = layout.on_disk {
        dense = dense.memory(Memory::from_on_disk(on_disk));
    }
    let mut builder = EdgeConfig::builder()
        .vector(DENSE, dense.build())
        .max_search_threads(search_threads);
    if spec.sparse {
        builder = builder.sparse_vector(
            SPARSE,
            EdgeSparseVectorParams::builder().modifier(Modifier::Idf).build(),
        );
    }
    let mut config = builder.build();
    apply_layout(&mut config, layout)?;
    Ok(config)
}

/// Sets what `layout` configures on `config` (a new shard's, or an existing one's to reload it
/// with): placement of vectors and payloads, HNSW and quantization.
fn apply_layout(config: &mut EdgeConfig, layout: &CollectionSettings) -> Result<()> {
    if let Some(on_disk) = layout.on_disk
        && let Some(dense) = config.vectors.get_mut(DENSE)
    {
        dense.memory = Some(Memory::from_on_disk(on_disk));
    }
    if let Some(on_disk) = layout.on_disk_payload {
        config.payload_memory = Some(Memory::from_on_disk(on_disk));
    }
    if layout.hnsw_m.is_some() || layout.hnsw_ef_construct.is_some() || layout.hnsw_payload_m.is_some() {
        let current = config.hnsw_config();
        config.hnsw_config = Some(HnswIndexConfig {
            m: layout.hnsw_m.map_or(current.m, |m| m as usize),
            ef_construct: layout.hnsw_ef_construct.map_or(current.ef_construct, |ef| ef as usize),
            payload_m: layout.hnsw_payload_m.map(|m| m as usize).or(current.payload_m),
            ..current
        });
    }
    config.quantization_config = match layout.quantization {
        Quantization::None => None,
        Quantization::Int8 => {
            // Built from its JSON form: the struct carries deprecated fields.
            let scalar = match layout.always_ram {
                Some(true) => serde_json::json!({"scalar": {"type": "int8", "memory": "pinned"}}),
                _ => serde_json::json!({"scalar": {"type": "int8"}}),
            };
            Some(
                serde_json::from_value::<QuantizationConfig>(scalar)
                    .map_err(|e| Error::Rejected(format!("int8 quantization config: {e}")))?,
            )
        }
    };
    if let Some(dense) = config.vectors.get_mut(DENSE) {
        // A per-vector quantization would override the collection's.
        dense.quantization_config = None;
    }
    Ok(())
}

/// An embedded collection's layout in the terms of `[vectors.collection]`.
fn observed(config: &EdgeConfig) -> Observed {
    let dense = config.vectors.get(DENSE);
    let hnsw = dense
        .and_then(|d| d.hnsw_config)
        .unwrap_or_else(|| config.hnsw_config());
    let quantization = dense
        .and_then(|d| d.quantization_config.as_ref())
        .or(config.quantization_config.as_ref())
        .and_then(|q| serde_json::to_value(q).ok());
    let scalar = quantization.as_ref().and_then(|q| q.get("scalar"));
    let (quantization, always_ram) = match scalar {
        Some(scalar) if scalar.get("type").and_then(|t| t.as_str()) == Some("int8") => {
            let pinned = scalar.get("memory").and_then(|m| m.as_str()) == Some("pinned")
                || scalar.get("always_ram").and_then(serde_json::Value::as_bool) == Some(true);
            (Quantization::Int8, Some(pinned))
        }
        _ => (Quantization::None, None),
    };
    let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    Observed {
        shard_number: None,
        replication_factor: None,
        write_consistency_factor: None,
        on_disk: Some(dense.and_then(|d| d.memory_placement()) == Some(Memory::Cold)),
        on_disk_payload: Some(config.payload_memory_placement() == Memory::Cold),
        quantization,
        always_ram,
        hnsw_m: Some(clamp(hnsw.m)),
        hnsw_payload_m: hnsw.payload_m.map(clamp),
        hnsw_ef_construct: Some(clamp(hnsw.ef_construct)),
    }
}

/// Search parameters of a dense query: the beam width and, with quantization, rescoring.
fn dense_params(layout: &Layout, hnsw_ef: Option<u32>) -> Option<SearchParams> {
    let ef = layout.search.ef(hnsw_ef);
    let quantized = layout.collection.quantization == Quantization::Int8;
    if ef.is_none() && !quantized {
        return None;
    }
    Some(SearchParams {
        hnsw_ef: ef.map(|ef| ef as usize),
        quantization: quantized.then(|| QuantizationSearchParams {
            ignore: false,
            rescore: Some(layout.search.rescore.unwrap_or(true)),
            oversampling: layout.search.oversampling,
        }),
        ..Default::default()
    })
}

/// The vectors of an existing shard, for [`rules::incompatibility`].
fn shape(config: &EdgeConfig) -> rules::Shape {
    rules::Shape {
        dense: (config.vectors.get(DENSE)).map(|dense| rules::DenseShape {
            size: dense.size as u64,
            distance: format!("{:?}", dense.distance),
        }),
        sparse_idf: (config.sparse_vectors.get(SPARSE)).map(|sparse| sparse.modifier == Some(Modifier::Idf)),
    }
}

/// The payload indexes every chunk collection carries, created before any data.
fn payload_indexes() -> [(&'static str, PayloadFieldSchema); 3] {
    let uuid = |tenant: bool| {
        let params = if tenant {
            UuidIndexParamsBuilder::new().is_tenant(true)
        } else {
            UuidIndexParamsBuilder::new().enable_hnsw(false)
        };
        PayloadFieldSchema::FieldParams(PayloadSchemaParams::Uuid(params.build()))
    };
    [(WORLD_ID, uuid(true)), (RUN_ID, uuid(false)), (SOURCE_ID, uuid(false))]
}

/// The payload indexes the shard lacks or has with another schema (the keyword indexes of
/// collections made before the ids were indexed as UUIDs).
fn outdated_indexes(engine: &EdgeShard) -> Result<Vec<(JsonPath, PayloadFieldSchema)>> {
    let existing = engine.info().map_err(engine_error)?.payload_schema;
    let mut outdated = Vec::new();
    for (field, schema) in payload_indexes() {
        let field_name = json_path(field)?;
        let wanted = PayloadIndexInfo::new(schema.clone(), 0);
        let current = existing
            .get(&field_name)
            .is_some_and(|have| have.data_type == wanted.data_type && have.params == wanted.params);
        if !current {
            outdated.push((field_name, schema));
        }
    }
    Ok(outdated)
}

/// Creates the payload indexes the shard does not have yet (all of them for a new shard; the
/// missing ones after a crash between creation and indexing), and replaces outdated ones: the
/// engine drops the old index and builds the new one from the stored payloads. Runs whenever a
/// shard is created or loaded, so every shard in the cache has today's indexes.
fn ensure_indexes(engine: &EdgeShard) -> Result<()> {
    for (field_name, schema) in outdated_indexes(engine)? {
        engine
            .update(UpdateOperation::FieldIndexOperation(FieldIndexOperations::CreateIndex(
                CreateIndex {
                    field_name,
                    field_schema: Some(schema),
                },
            )))
            .map_err(engine_error)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// conversions

async fn blocking<T, F>(f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Unavailable(format!("embedded vector engine task failed: {e}")))?
}

fn engine_error(e: OperationError) -> Error {
    match e {
        // Storage trouble: the disk, not the request.
        OperationError::ServiceError { .. }
        | OperationError::InconsistentStorage { .. }
        | OperationError::FileNotFound { .. }
        | OperationError::OutOfMemory { .. } => Error::Io(std::io::Error::other(e.to_string())),
        OperationError::Cancelled { .. } | OperationError::Timeout { .. } => Error::Unavailable(e.to_string()),
        other => Error::Rejected(other.to_string()),
    }
}

fn json_path(field: &str) -> Result<JsonPath> {
    JsonPath::try_from(field).map_err(|()| Error::Rejected(format!("invalid payload key {field:?}")))
}

fn keyword_match(field: &str, value: String) -> Result<Condition> {
    Ok(Condition::Field(FieldCondition::new_match(
        json_path(field)?,
        Match::new_value(ValueVariants::String(value)),
    )))
}

fn world_filter(world: WorldId) -> Result<Filter> {
    to_filter(PointFilter::world(world))
}

/// `filter`, narrowed to points of `sources` (any of them) when given.
fn search_filter(filter: PointFilter, sources: Option<&[SourceId]>) -> Result<Filter> {
    let mut built = to_filter(filter)?;
    if let Some(sources) = sources {
        let any = AnyVariants::Strings(sources.iter().map(|s| s.to_string()).collect());
        let condition = Condition::Field(FieldCondition::new_match(json_path(SOURCE_ID)?, Match::new_any(any)));
        built.must.get_or_insert_with(Vec::new).push(condition);
    }
    Ok(built)
}

fn to_filter(filter: PointFilter) -> Result<Filter> {
    let mut must = vec![keyword_match(WORLD_ID, filter.world.to_string())?];
    if let Some(run) = filter.run {
        must.push(keyword_match(RUN_ID, run.to_string())?);
    }
    if let Some(source) = filter.source {
        must.push(keyword_match(SOURCE_ID, source.to_string())?);
    }
    Ok(Filter {
        should: None,
        min_should: None,
        must: Some(must),
        must_not: None,
    })
}

fn sparse_vector(sparse: SparseVector) -> Result<qdrant_edge::SparseVector> {
    let mut vector = qdrant_edge::SparseVector::new(sparse.indices, sparse.values)
        .map_err(|e| Error::Rejected(format!("invalid sparse vector: {e}")))?;
    vector.sort_by_indices();
    Ok(vector)
}

fn to_persisted(point: Point) -> Result<PointStructPersisted> {
    let payload = match serde_json::to_value(&point.payload) {
        Ok(serde_json::Value::Object(map)) => Payload(map),
        Ok(other) => {
            return Err(Error::Rejected(format!("payload is not a JSON object: {other}")));
        }
        Err(e) => return Err(Error::Rejected(format!("payload does not serialise: {e}"))),
    };
    let mut vectors = NamedVectors::default().add_vector(DENSE, Vector::new_dense(point.dense));
    if let Some(sparse) = point.sparse {
        vectors = vectors.add_vector(SPARSE, Vector::from(VectorInternal::Sparse(sparse_vector(sparse)?)));
    }
    Ok(PointStructPersisted {
        id: PointId::Uuid(point.id),
        vector: VectorStructPersisted::from(Vectors::from(vectors).0),
        payload: Some(payload),
    })
}

fn uuid_of(id: PointId) -> Option<Uuid> {
    match id {
        PointId::Uuid(id) => Some(id),
        PointId::NumId(n) => {
            tracing::warn!(
                point = n,
                "ignoring a point with a numeric id: quarry only writes UUIDs"
            );
            None
        }
    }
}

/// Never fails: a payload that is not a [`PointPayload`] (stale or foreign point) is `None`.
fn parse_payload(payload: Option<Payload>) -> Option<PointPayload> {
    serde_json::from_value(serde_json::Value::Object(payload?.0)).ok()
}

fn scored(hits: Vec<qdrant_edge::ScoredPoint>) -> Vec<ScoredPoint> {
    hits.into_iter()
        .filter_map(|hit| {
            Some(ScoredPoint {
                id: uuid_of(hit.id)?,
                score: hit.score,
                payload: parse_payload(hit.payload),
            })
        })
        .collect()
}

fn record(record: qdrant_edge::Record) -> Option<PointRecord> {
    Some(PointRecord {
        id: uuid_of(record.id)?,
        payload: parse_payload(record.payload),
    })
}

fn nearest(vector: VectorInternal, using: &str) -> ScoringQuery {
    ScoringQuery::Vector(QueryEnum::Nearest(NamedQuery::new(vector, using)))
}

fn with_payload() -> WithPayloadInterface {
    WithPayloadInterface::Bool(true)
}

// ---------------------------------------------------------------------------------------------
// the trait

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
        let shard = shard_or_missing(&self.inner, collection).await?;
        if points.is_empty() {
            return Ok(());
        }
        let points = points.into_iter().map(to_persisted).collect::<Result<Vec<_>>>()?;
        blocking(move || {
            let mut rest = points;
            while !rest.is_empty() {
                let tail = rest.split_off(rest.len().min(UPSERT_BATCH));
                let batch = std::mem::replace(&mut rest, tail);
                let count = batch.len() as u64;
                let result = shard
                    .engine
                    .update(UpdateOperation::PointOperation(PointOperations::UpsertPoints(
                        PointInsertOperations::PointsList(batch),
                    )));
                // Even a failed update may have touched the WAL: let maintenance flush it.
                shard.note_write(count);
                result.map_err(engine_error)?;
            }
            Ok(())
        })
        .await
    }

    async fn search(&self, collection: &str, search: DenseSearch) -> Result<Vec<ScoredPoint>> {
        if search.limit == 0 {
            return Ok(Vec::new());
        }
        let Some(shard) = shard(&self.inner, collection).await? else {
            return Err(Error::MissingCollection(collection.to_owned()));
        };
        let mut request = QueryRequestBuilder::new(search.limit)
            .query(nearest(VectorInternal::Dense(search.vector), DENSE))
            .filter(search_filter(search.filter, search.sources.as_deref())?)
            .with_payload(with_payload());
        if let Some(threshold) = search.score_threshold {
            request = request.score_threshold(threshold);
        }
        if let Some(params) = dense_params(&self.inner.layout, search.hnsw_ef) {
            request = request.params(params);
        }
        let request = request.build();
        let hits = blocking(move || shard.engine.query(request).map_err(engine_error)).await?;
        Ok(scored(hits))
    }

    async fn sparse_search(&self, collection: &str, search: SparseSearch) -> Result<Vec<ScoredPoint>> {
        if search.limit == 0 {
            return Ok(Vec::new());
        }
        let Some(shard) = shard(&self.inner, collection).await? else {
            return Err(Error::MissingCollection(collection.to_owned()));
        };
        let world = world_filter(search.filter.world)?;
        let request = QueryRequestBuilder::new(search.limit)
            .query(nearest(VectorInternal::Sparse(sparse_vector(search.sparse)?), SPARSE))
            .filter(search_filter(search.filter, search.sources.as_deref())?)
            .params(SearchParams {
                idf: Some(IdfParams::Corpus(IdfCorpusParams { corpus: world })),
                ..Default::default()
            })
            .with_payload(with_payload())
            .build();
        let hits = blocking(move || shard.engine.query(request).map_err(engine_error)).await?;
        Ok(scored(hits))
    }

    async fn hybrid_search(&self, collection: &str, search: HybridSearch) -> Result<Vec<ScoredPoint>> {
        if search.limit == 0 {
            return Ok(Vec::new());
        }
        let Some(shard) = shard(&self.inner, collection).await? else {
            return Err(Error::MissingCollection(collection.to_owned()));
        };
        // Each prefetch must be able to fill the final page on its own.
        let prefetch_limit = search.prefetch_limit.max(search.limit);
        let filter = search_filter(search.filter, search.sources.as_deref())?;
        let mut dense = PrefetchBuilder::new(prefetch_limit)
            .query(nearest(VectorInternal::Dense(search.dense), DENSE))
            .filter(filter.clone());
        if let Some(threshold) = search.dense_score_threshold {
            dense = dense.score_threshold(threshold);
        }
        if let Some(params) = dense_params(&self.inner.layout, search.hnsw_ef) {
            dense = dense.params(params);
        }
        let dense = dense.build();
        // IDF over this world's points only: other worlds' vocabularies must not weigh its terms.
        let sparse = PrefetchBuilder::new(prefetch_limit)
            .query(nearest(VectorInternal::Sparse(sparse_vector(search.sparse)?), SPARSE))
            .filter(filter.clone())
            .params(SearchParams {
                idf: Some(IdfParams::Corpus(IdfCorpusParams {
                    corpus: world_filter(search.filter.world)?,
                })),
                ..Default::default()
            })
            .build();
        let request = QueryRequestBuilder::new(search.limit)
            .add_prefetch(dense)
            .add_prefetch(sparse)
            .query(ScoringQuery::Fusion(match search.fusion {
                super::Fusion::Rrf {
                    dense_weight,
                    sparse_weight,
                } => Fusion::Rrf {
                    k: RRF_K,
                    weights: Some(vec![OrderedFloat(dense_weight), OrderedFloat(sparse_weight)]),
                },
                super::Fusion::Dbsf => Fusion::Dbsf,
            }))
            .filter(filter)
            .with_payload(with_payload())
            .build();
        let hits = blocking(move || shard.engine.query(request).map_err(engine_error)).await?;
        Ok(scored(hits))
    }

    async fn retrieve(&self, collection: &str, ids: &[Uuid]) -> Result<Vec<PointRecord>> {
        let Some(shard) = shard(&self.inner, collection).await? else {
            return Ok(Vec::new());
        };
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let request = RetrieveRequestBuilder::new(ids.iter().copied().map(PointId::Uuid).collect())
            .with_payload(with_payload())
            .with_vector(WithVector::Bool(false))
            .build();
        let records = blocking(move || shard.engine.retrieve(request).map_err(engine_error)).await?;
        Ok(rules::in_request_order(ids, records.into_iter().filter_map(record)))
    }

    async fn dense_vectors(&self, collection: &str, ids: &[Uuid]) -> Result<Vec<(Uuid, Vec<f32>)>> {
        let Some(shard) = shard(&self.inner, collection).await? else {
            return Ok(Vec::new());
        };
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let request = RetrieveRequestBuilder::new(ids.iter().copied().map(PointId::Uuid).collect())
            .with_payload(WithPayloadInterface::Bool(false))
            .with_vector(WithVector::Selector(vec![DENSE.into()]))
            .build();
        let records = blocking(move || shard.engine.retrieve(request).map_err(engine_error)).await?;
        Ok(records
            .into_iter()
            .filter_map(|record| {
                let id = uuid_of(record.id)?;
                match record.vector? {
                    VectorStructInternal::Named(mut vectors) => match vectors.remove(DENSE)? {
                        VectorInternal::Dense(dense) => Some((id, dense)),
                        VectorInternal::Sparse(_) | VectorInternal::MultiDense(_) => None,
                    },
                    VectorStructInternal::Single(dense) => Some((id, dense)),
                    VectorStructInternal::MultiDense(_) => None,
                }
            })
            .collect())
    }

    async fn delete_points(&self, collection: &str, ids: &[Uuid]) -> Result<()> {
        let Some(shard) = shard(&self.inner, collection).await? else {
            return Ok(());
        };
        if ids.is_empty() {
            return Ok(());
        }
        let ids: Vec<PointId> = ids.iter().copied().map(PointId::Uuid).collect();
        blocking(move || {
            let count = ids.len() as u64;
            let result = shard
                .engine
                .update(UpdateOperation::PointOperation(PointOperations::DeletePoints { ids }));
            shard.note_write(count);
            result.map_err(engine_error)
        })
        .await
    }

    async fn move_points(&self, collection: &str, ids: &[Uuid], to: PointHome) -> Result<()> {
        let Some(shard) = shard(&self.inner, collection).await? else {
            return Ok(());
        };
        if ids.is_empty() {
            return Ok(());
        }
        let points: Vec<PointId> = ids.iter().copied().map(PointId::Uuid).collect();
        blocking(move || {
            let count = points.len() as u64;
            let result = shard
                .engine
                .update(UpdateOperation::PayloadOperation(PayloadOps::SetPayload(
                    SetPayloadOp {
                        payload: Payload(to.to_json()),
                        points: Some(points),
                        filter: None,
                        key: None,
                    },
                )));
            shard.note_write(count);
            result.map_err(engine_error)
        })
        .await
    }

    async fn delete_by_filter(&self, collection: &str, filter: PointFilter) -> Result<()> {
        let Some(shard) = shard(&self.inner, collection).await? else {
            return Ok(());
        };
        let filter = to_filter(filter)?;
        blocking(move || {
            let result = shard
                .engine
                .update(UpdateOperation::PointOperation(PointOperations::DeletePointsByFilter(
                    filter,
                )));
            shard.note_write(1);
            result.map_err(engine_error)
        })
        .await
    }

    async fn count(&self, collection: &str, filter: PointFilter) -> Result<u64> {
        let Some(shard) = shard(&self.inner, collection).await? else {
            return Ok(0);
        };
        let request = CountRequestBuilder::new()
            .filter(to_filter(filter)?)
            .exact(true)
            .build();
        let count = blocking(move || shard.engine.count(request).map_err(engine_error)).await?;
        Ok(count as u64)
    }

    async fn scroll(
        &self,
        collection: &str,
        filter: PointFilter,
        offset: Option<Uuid>,
        limit: usize,
    ) -> Result<ScrollPage> {
        let Some(shard) = shard(&self.inner, collection).await? else {
            return Ok(ScrollPage {
                points: Vec::new(),
                next: None,
            });
        };
        if limit == 0 {
            // Nothing asked for; hand the position back so the caller does not mistake it for the end.
            return Ok(ScrollPage {
                points: Vec::new(),
                next: offset,
            });
        }
        let mut request = ScrollRequestBuilder::new()
            .limit(limit)
            .filter(to_filter(filter)?)
            .with_payload(with_payload())
            .with_vector(WithVector::Bool(false));
        if let Some(offset) = offset {
            request = request.offset(PointId::Uuid(offset));
        }
        let request = request.build();
        let (records, next) = blocking(move || shard.engine.scroll(request).map_err(engine_error)).await?;
        Ok(ScrollPage {
            points: records.into_iter().filter_map(record).collect(),
            next: next.and_then(uuid_of),
        })
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

// ---------------------------------------------------------------------------------------------
// background maintenance

/// Flushes a shard on the blocking pool. The dirty mark is cleared before the flush, so writes
/// that land during it mark the shard dirty again; a failed flush restores the mark.
async fn flush(shard: Arc<Shard>) -> Result<()> {
    let since = shard.state().dirty_since.take();
    let name = shard.name.clone();
    let result = blocking({
        let shard = Arc::clone(&shard);
        move || shard.engine.flush().map_err(engine_error)
    })
    .await;
    if let Err(e) = &result {
        tracing::warn!(collection = %name, error = %e, "flushing embedded collection failed");
        if let Some(since) = since {
            let mut state = shard.state();
            let dirty_since = state.dirty_since.get_or_insert(since);
            *dirty_since = (*dirty_since).min(since);
        }
    }
    result
}

fn optimize_due(state: &WriteState, now: Instant) -> bool {
    if state.unoptimized == 0 {
        return false;
    }
    let settled = now.duration_since(state.last_write) >= OPTIMIZE_SETTLE;
    let since_optimize = now.duration_since(state.last_optimize);
    if state.unoptimized >= OPTIMIZE_AFTER_POINTS {
        settled || since_optimize >= OPTIMIZE_MAX_DELAY
    } else {
        settled && since_optimize >= OPTIMIZE_IDLE_INTERVAL
    }
}

fn flush_due(state: &WriteState, now: Instant) -> bool {
    state.dirty_since.is_some_and(|since| {
        now.duration_since(state.last_write) >= FLUSH_DEBOUNCE || now.duration_since(since) >= FLUSH_MAX_DELAY
    })
}

/// The maintenance loop: see the module docs for the policy. It holds the repo only weakly, so
/// dropping the [`EdgeRepo`] drops (and flushes) the shards right there and ends the loop.
async fn maintain(inner: Weak<Inner>, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(MAINTENANCE_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut optimizing: Option<JoinHandle<()>> = None;
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let Some(shards) = inner.upgrade().map(|inner| inner.all_shards()) else {
            break;
        };
        if optimizing.as_ref().is_some_and(JoinHandle::is_finished) {
            optimizing = None;
        }
        let now = Instant::now();
        for shard in shards {
            let (flush_now, optimize_now) = {
                let state = shard.state();
                (
                    flush_due(&state, now),
                    optimizing.is_none() && optimize_due(&state, now),
                )
            };
            if flush_now {
                // Errors are logged inside; the shard stays dirty and is retried next tick.
                let _ = flush(Arc::clone(&shard)).await;
            }
            if optimize_now {
                optimizing = Some(spawn_optimize(shard));
            }
        }
    }
    // An optimize in flight is not awaited: it can take minutes and cannot be interrupted. Its
    // shard keeps the directory locked until it finishes (or the process exits; the engine
    // recovers an interrupted optimize on load).
}

fn spawn_optimize(shard: Arc<Shard>) -> JoinHandle<()> {
    {
        let mut state = shard.state();
        state.unoptimized = 0;
        state.last_optimize = Instant::now();
    }
    tokio::task::spawn_blocking(move || {
        let _one = shard.optimizing.lock().unwrap_or_else(PoisonError::into_inner);
        let started = Instant::now();
        let result = shard.engine.optimize();
        let elapsed_ms = started.elapsed().as_millis() as u64;
        match result {
            Ok(changed) => {
                tracing::info!(collection = %shard.name, changed, elapsed_ms, "optimized embedded collection");
                if changed {
                    // New segments were written: persist and truncate the WAL soon.
                    let now = Instant::now();
                    shard.state().dirty_since.get_or_insert(now);
                }
            }
            Err(e) => {
                tracing::warn!(collection = %shard.name, error = %e, elapsed_ms, "optimizing embedded collection failed");
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{RunId, SourceId};
    use qdrant_edge::{KeywordIndexParamsBuilder, PayloadSchemaType};

    fn state(now: Instant, dirty_for: Option<Duration>, idle_for: Duration, unoptimized: u64) -> WriteState {
        WriteState {
            dirty_since: dirty_for.map(|d| now - d),
            last_write: now - idle_for,
            unoptimized,
            last_optimize: now - Duration::from_secs(1),
        }
    }

    #[test]
    fn flush_waits_for_writes_to_settle_but_not_forever() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        assert!(
            !flush_due(&state(now, None, ms(10_000), 0), now),
            "clean shards are left alone"
        );
        assert!(
            !flush_due(&state(now, Some(ms(300)), ms(100), 1), now),
            "writes still arriving"
        );
        assert!(
            flush_due(&state(now, Some(ms(700)), ms(600), 1), now),
            "settled for the debounce"
        );
        assert!(
            flush_due(&state(now, Some(ms(6_000)), ms(50), 1), now),
            "continuous writes: flush anyway"
        );
    }

    #[test]
    fn optimize_after_many_points_once_settled_or_overdue() {
        let now = Instant::now();
        let s = Duration::from_secs;
        assert!(!optimize_due(&state(now, None, s(100), 0), now), "nothing written");
        assert!(
            !optimize_due(&state(now, None, s(1), OPTIMIZE_AFTER_POINTS), now),
            "writes not settled"
        );
        assert!(
            optimize_due(&state(now, None, s(3), OPTIMIZE_AFTER_POINTS), now),
            "settled after a bulk load"
        );
        assert!(
            !optimize_due(&state(now, None, s(3), 10), now),
            "a trickle waits for the idle interval"
        );
        let mut overdue = state(now, None, Duration::ZERO, OPTIMIZE_AFTER_POINTS);
        overdue.last_optimize = now - OPTIMIZE_MAX_DELAY;
        assert!(
            optimize_due(&overdue, now),
            "writes that never settle still get optimized"
        );
        let mut trickle = state(now, None, s(3), 10);
        trickle.last_optimize = now - OPTIMIZE_IDLE_INTERVAL;
        assert!(optimize_due(&trickle, now));
    }

    /// A point of chunk `i` with the payload the workers write.
    fn point(world: WorldId, run: RunId, source: SourceId, i: u32, dense: Vec<f32>) -> Point {
        Point {
            id: crate::domain::point_id(world, run, source, i),
            dense,
            sparse: None,
            payload: PointPayload {
                world_id: world,
                run_id: run,
                source_id: source,
                book_number: 1,
                chunk_number: i,
                text_sha256: String::new(),
                token_count: 1,
            },
        }
    }

    /// The store in `dir` with a 4-dimension dense collection `chunks`.
    async fn open_with_chunks(dir: &Path) -> EdgeRepo {
        let repo = EdgeRepo::open(dir).unwrap();
        repo.ensure_collection(&CollectionSpec {
            name: "chunks".into(),
            dimensions: 4,
            sparse: false,
        })
        .await
        .unwrap();
        repo
    }

    async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn maintenance_flushes_and_optimizes_in_the_background() {
        let dir = tempfile::tempdir().unwrap();
        let repo = open_with_chunks(dir.path()).await;
        let (world, run, source) = (WorldId::new(), RunId::new(), SourceId::new());
        let points: Vec<Point> = (0..OPTIMIZE_AFTER_POINTS as u32)
            .map(|i| point(world, run, source, i, vec![1.0, (i % 13) as f32, (i % 7) as f32, 0.5]))
            .collect();
        let written = Instant::now();
        repo.upsert("chunks", points).await.unwrap();
        let shard = repo.inner.cached("chunks").unwrap();
        assert!(shard.state().dirty_since.is_some(), "a write marks the shard dirty");
        assert_eq!(shard.state().unoptimized, OPTIMIZE_AFTER_POINTS);

        wait_for("the debounced flush", || shard.state().dirty_since.is_none()).await;
        wait_for("the background optimize", || {
            let state = shard.state();
            state.unoptimized == 0 && state.last_optimize > written
        })
        .await;
        assert!(
            written.elapsed() >= OPTIMIZE_SETTLE,
            "optimize waited for the writes to settle"
        );
        assert_eq!(
            repo.count("chunks", PointFilter::world(world)).await.unwrap(),
            OPTIMIZE_AFTER_POINTS
        );
        repo.close().await.unwrap();
        assert!(shard.state().dirty_since.is_none(), "close leaves every shard flushed");
    }

    fn index_types(engine: &EdgeShard) -> Vec<(String, PayloadSchemaType)> {
        let mut types: Vec<(String, PayloadSchemaType)> = engine
            .info()
            .unwrap()
            .payload_schema
            .into_iter()
            .map(|(field, info)| (field.to_string(), info.data_type))
            .collect();
        types.sort_by(|a, b| a.0.cmp(&b.0));
        types
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keyword_indexes_of_an_older_collection_become_uuid_indexes_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let (world, other, run, source) = (WorldId::new(), WorldId::new(), RunId::new(), SourceId::new());
        let chunk = |world: WorldId, i: u32| point(world, run, source, i, vec![1.0, i as f32, 0.5, 0.25]);
        {
            let repo = open_with_chunks(dir.path()).await;
            let created = repo.inner.cached("chunks").unwrap();
            assert!(
                outdated_indexes(&created.engine).unwrap().is_empty(),
                "a new collection has today's indexes"
            );
            // Not kept: the engine below must be the only one on the folder.
            drop(created);
            let points = (0..20)
                .map(|i| chunk(world, i))
                .chain((0..30).map(|i| chunk(other, i)))
                .collect();
            repo.upsert("chunks", points).await.unwrap();
            repo.close().await.unwrap();
        }
        // What older versions made: keyword indexes on the three ids.
        {
            let engine = EdgeShard::load(&dir.path().join("chunks"), None).unwrap();
            for (field, tenant) in [(WORLD_ID, true), (RUN_ID, false), (SOURCE_ID, false)] {
                let params = match tenant {
                    true => KeywordIndexParamsBuilder::new().is_tenant(true),
                    false => KeywordIndexParamsBuilder::new().enable_hnsw(false),
                };
                engine
                    .update(UpdateOperation::FieldIndexOperation(FieldIndexOperations::CreateIndex(
                        CreateIndex {
                            field_name: json_path(field).unwrap(),
                            field_schema: Some(PayloadFieldSchema::FieldParams(PayloadSchemaParams::Keyword(
                                params.build(),
                            ))),
                        },
                    )))
                    .unwrap();
            }
            assert!(
                index_types(&engine)
                    .iter()
                    .all(|(_, t)| *t == PayloadSchemaType::Keyword),
                "{:?}",
                index_types(&engine)
            );
            engine.flush().unwrap();
        }

        let repo = EdgeRepo::open(dir.path()).unwrap();
        let filter = PointFilter::world(world).run(run);
        let hits = repo
            .search(
                "chunks",
                DenseSearch {
                    hnsw_ef: None,
                    vector: vec![1.0, 3.0, 0.5, 0.25],
                    filter,
                    sources: None,
                    limit: 100,
                    score_threshold: None,
                },
            )
            .await
            .unwrap();
        assert_eq!(hits.len(), 20, "the filter still finds exactly the world's points");
        assert!(
            hits.iter()
                .all(|h| h.payload.as_ref().is_some_and(|p| p.world_id == world))
        );
        let shard = repo.inner.cached("chunks").unwrap();
        assert_eq!(
            index_types(&shard.engine),
            vec![
                (RUN_ID.to_owned(), PayloadSchemaType::Uuid),
                (SOURCE_ID.to_owned(), PayloadSchemaType::Uuid),
                (WORLD_ID.to_owned(), PayloadSchemaType::Uuid),
            ]
        );
        assert!(
            outdated_indexes(&shard.engine).unwrap().is_empty(),
            "the rebuilt indexes match what is wanted, so the next open rebuilds nothing"
        );
        assert_eq!(repo.count("chunks", PointFilter::world(other)).await.unwrap(), 30);
        repo.delete_by_filter("chunks", PointFilter::world(world).run(run).source(source))
            .await
            .unwrap();
        assert_eq!(repo.count("chunks", PointFilter::world(world)).await.unwrap(), 0);
        assert_eq!(repo.count("chunks", PointFilter::world(other)).await.unwrap(), 30);
        repo.close().await.unwrap();
    }
}
