//! Running engine work off the async runtime, and the engine's errors in quarry's terms.

use qdrant_edge::{JsonPath, OperationError};

use crate::vector::{Error, Result};

/// Runs `work` as its own task, to completion even if the caller goes away: opening or creating
/// a shard must end with the shard registered (or dropped) before the next caller may try, or two
/// engines would own one folder.
pub(super) async fn detached<T, F>(work: F) -> Result<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    tokio::spawn(work)
        .await
        .map_err(|e| Error::Unavailable(format!("embedded vector store task failed: {e}")))?
}

pub(super) async fn blocking<T, F>(f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Unavailable(format!("embedded vector engine task failed: {e}")))?
}

pub(super) fn engine_error(e: OperationError) -> Error {
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

pub(super) fn json_path(field: &str) -> Result<JsonPath> {
    JsonPath::try_from(field).map_err(|()| Error::Rejected(format!("invalid payload key {field:?}")))
}
