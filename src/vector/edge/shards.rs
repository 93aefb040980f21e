//! Opening shards: the directory lock, the cache of open shards, loading a collection from
//! disk on first use, and the collection names that may become folder names.

use std::fs::{OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use qdrant_edge::{EdgeConfig, EdgeShard};

use crate::vector::{Error, Result};

use super::engine::{blocking, detached, engine_error};
use super::indexes::ensure_indexes;
use super::{DirLock, EDGE_CONFIG_FILE, Inner, LOCK_FILE, Shard, WriteState};

impl DirLock {
    pub(super) fn acquire(dir: &Path) -> Result<DirLock> {
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

impl Inner {
    pub(super) fn cached(&self, name: &str) -> Option<Arc<Shard>> {
        self.shards
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    pub(super) fn all_shards(&self) -> Vec<Arc<Shard>> {
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

    pub(super) fn make_shard(&self, name: &str, engine: EdgeShard) -> Arc<Shard> {
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
    pub(super) async fn open_existing(&self, name: &str) -> Result<Option<Arc<Shard>>> {
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
pub(super) async fn shard(inner: &Arc<Inner>, name: &str) -> Result<Option<Arc<Shard>>> {
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

pub(super) async fn shard_or_missing(inner: &Arc<Inner>, name: &str) -> Result<Arc<Shard>> {
    shard(inner, name)
        .await?
        .ok_or_else(|| Error::MissingCollection(name.to_owned()))
}

/// Collection names become folder names: keep them to a safe alphabet so a name can never
/// escape the vector directory or collide with the lock file.
pub(super) fn validate_name(name: &str) -> Result<()> {
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
