//! What Qdrant's gRPC failures mean for quarry: outages, refusals and missing collections.

use qdrant_client::QdrantError;

use crate::vector::{Error, Result};

/// gRPC status codes (`tonic::Code` discriminants; tonic is not a direct dependency).
pub(super) mod code {
    pub const CANCELLED: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const DEADLINE_EXCEEDED: i32 = 4;
    pub const NOT_FOUND: i32 = 5;
    pub const PERMISSION_DENIED: i32 = 7;
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    pub const ABORTED: i32 = 10;
    pub const INTERNAL: i32 = 13;
    pub const UNAVAILABLE: i32 = 14;
    pub const DATA_LOSS: i32 = 15;
    pub const UNAUTHENTICATED: i32 = 16;
}

/// What a gRPC status from Qdrant means for quarry. The server's own failures (`INTERNAL`,
/// `UNKNOWN`, `DATA_LOSS`: a full disk, a failed storage write, a crashed task; the client also
/// reports broken connections this way) are outages: retried later, never a refusal that
/// spends an attempt or fails a request with a 500. Only a refusal of the request itself
/// (`INVALID_ARGUMENT`, `FAILED_PRECONDITION`, …) is `Rejected`.
fn status_error(status: i32, message: &str) -> Error {
    match status {
        code::UNAVAILABLE | code::DEADLINE_EXCEEDED | code::CANCELLED | code::ABORTED | code::RESOURCE_EXHAUSTED => {
            Error::Unavailable(format!("Qdrant: {message}"))
        }
        code::UNAUTHENTICATED | code::PERMISSION_DENIED => {
            Error::Unavailable(format!("Qdrant refused the credentials: {message}"))
        }
        code::NOT_FOUND => Error::MissingCollection(message.to_owned()),
        code::INTERNAL | code::UNKNOWN | code::DATA_LOSS => Error::Unavailable(format!("Qdrant failed: {message}")),
        _ => Error::Rejected(format!("Qdrant: {message}")),
    }
}

pub(super) fn client_error(e: QdrantError) -> Error {
    match e {
        QdrantError::ResponseError { status } => status_error(status.code() as i32, status.message()),
        QdrantError::ResourceExhaustedError {
            status,
            retry_after_seconds,
        } => Error::Unavailable(format!(
            "Qdrant is overloaded (retry after {retry_after_seconds}s): {}",
            status.message()
        )),
        QdrantError::Io(e) => Error::Io(e),
        e @ (QdrantError::ConversionError(_)
        | QdrantError::InvalidUri(_)
        | QdrantError::NoSnapshotFound(_)
        | QdrantError::JsonToPayload(_)
        | QdrantError::PayloadDeserialization(_)) => Error::Rejected(e.to_string()),
    }
}

/// Names `collection` in a missing-collection error (the server's message names the namespaced
/// collection, or none).
pub(super) fn named_if_missing<T>(result: Result<T>, collection: &str) -> Result<T> {
    match result {
        Err(Error::MissingCollection(_)) => Err(Error::MissingCollection(collection.to_owned())),
        other => other,
    }
}

/// Maps a missing collection to `empty` (reads and deletes of a collection that does not exist).
pub(super) fn or_empty<T>(result: Result<T>, empty: T) -> Result<T> {
    match result {
        Err(Error::MissingCollection(_)) => Ok(empty),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_failures_are_outages_and_only_refusals_are_rejections() {
        for status in [
            code::UNAVAILABLE,
            code::DEADLINE_EXCEEDED,
            code::RESOURCE_EXHAUSTED,
            code::INTERNAL,
            code::UNKNOWN,
            code::DATA_LOSS,
            code::UNAUTHENTICATED,
        ] {
            assert!(
                matches!(status_error(status, "No space left on device"), Error::Unavailable(_)),
                "{status}"
            );
        }
        // INVALID_ARGUMENT (3) and FAILED_PRECONDITION (9): the request itself was refused.
        for status in [3, 9] {
            assert!(
                matches!(
                    status_error(status, "Wrong input: Vector dimension error"),
                    Error::Rejected(_)
                ),
                "{status}"
            );
        }
        assert!(matches!(
            status_error(code::NOT_FOUND, "Collection `x` doesn't exist!"),
            Error::MissingCollection(_)
        ));
    }
}
