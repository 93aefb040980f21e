//! Errors the services return: variants a caller can act on, each mapped to one stable code
//! (and through it one HTTP status) by `api::error`. Store and vector errors are translated
//! here, where the service knows what they mean, keeping them as sources for the log.

use std::time::Duration;

use crate::{store, vector};

/// Which kind of thing was not found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    World,
    Source,
    Job,
    Key,
    Webhook,
    Token,
    EvalSet,
    EvalRun,
}

/// Which rule a bad input broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Malformed body or parameter that the contract has no narrower code for.
    Request,
    RetrievalSettings,
    EmptyQuery,
    EmbeddingProfile,
    ChunkingProfile,
}

/// Which state conflict occurred.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conflict {
    NoEligibleProviderKey,
    JobState,
    ProfileLocked,
    /// `POST /v1/provider-keys` without `security.master_key`.
    MasterKeyMissing,
    /// The same secret is already registered for the provider.
    KeyExists,
    /// A unique row the write would have added exists already.
    Duplicate,
    /// Configuration keys cannot be changed through the API.
    KeyReadOnly,
    /// A retry found no failed chunk to put back in the queue.
    NothingToRetry,
    /// As many webhook subscriptions as quarry keeps exist already.
    WebhookLimit,
    /// As many evaluation test sets as quarry keeps per world exist already.
    EvalLimit,
    /// An evaluation run's status does not allow the move (cancel an ended run, delete or
    /// compare one not ended).
    EvalRunState,
}

/// Why an input could not be processed although it was well formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unprocessable {
    InputTooLarge,
    TokenCountFailed,
    /// A document (a PDF) quarry cannot read: damaged, password-protected, or a bomb.
    UnreadableDocument,
    /// A PDF without a text layer (a scan).
    NoTextLayer,
    /// A webhook receiver at an address that is not public, outside `webhooks.allowed_networks`.
    DestinationNotAllowed,
    /// A source write whose body names another key than the source it writes to.
    KeyMismatch,
    /// A token asked to expire at a time already past.
    ExpiryInPast,
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{0:?} not found")]
    NotFound(Missing),
    #[error("{message}")]
    Invalid {
        kind: Invalid,
        message: String,
        field: Option<String>,
    },
    #[error("{message}")]
    Conflict {
        kind: Conflict,
        message: String,
        /// The request field that ran into the conflict, when one did.
        field: Option<&'static str>,
    },
    #[error("{message}")]
    Unprocessable { kind: Unprocessable, message: String },
    /// The input is larger than the server takes (`limit` bytes).
    #[error("{message}")]
    TooLarge { limit: usize, message: String },
    #[error("every eligible provider key is cooling down")]
    RateLimited { retry_after: Duration },
    #[error("provider failed: {message}")]
    Provider { message: String },
    /// A conditional write's precondition does not hold: the source is at version `current`
    /// (`None`: it does not exist).
    #[error("{message}")]
    PreconditionFailed { current: Option<u32>, message: String },
    /// A dependency cannot serve the request now (down, busy, or changing under it); worth a
    /// retry. `message` is for the client; `source`, when there is one, is only logged.
    #[error("{message}")]
    Unavailable {
        dependency: Dependency,
        message: String,
        #[source]
        source: Option<BoxError>,
    },
    /// A bug or an impossible state; the source is logged, never sent.
    #[error("internal error")]
    Internal {
        #[source]
        source: BoxError,
    },
}

/// An error kept as the source of another.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a service depends on that can be unavailable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dependency {
    Store,
    VectorStore,
}

impl From<store::Error> for ServiceError {
    fn from(err: store::Error) -> Self {
        match err {
            store::Error::Unavailable(_) => ServiceError::Unavailable {
                dependency: Dependency::Store,
                message: "the database is unavailable".into(),
                source: Some(err.into()),
            },
            store::Error::RunChanged => ServiceError::Unavailable {
                dependency: Dependency::Store,
                message: "the world kept switching to new runs while the request was prepared; try again".into(),
                source: None,
            },
            store::Error::Duplicate(_) => ServiceError::conflict(Conflict::Duplicate, "the record already exists"),
            store::Error::VersionMismatch { current } => ServiceError::PreconditionFailed {
                current: Some(current),
                message: format!("the source is at version {current}, not the one If-Match names"),
            },
            store::Error::Corrupt { .. }
            | store::Error::Query(_)
            | store::Error::Migrate(_)
            | store::Error::Setup(_)
            | store::Error::Internal(_) => ServiceError::Internal { source: err.into() },
        }
    }
}

impl From<vector::Error> for ServiceError {
    fn from(err: vector::Error) -> Self {
        match err {
            vector::Error::Unavailable(_) | vector::Error::Io(_) => ServiceError::Unavailable {
                dependency: Dependency::VectorStore,
                message: "the vector store is unavailable".into(),
                source: Some(err.into()),
            },
            vector::Error::MissingCollection(ref name) => ServiceError::Unavailable {
                dependency: Dependency::VectorStore,
                message: format!(
                    "the collection `{name}` is missing from the vector store; a repair \
                     (POST /v1/worlds/{{world_id}}/repair, or a restart) creates it again and embeds its chunks anew"
                ),
                source: None,
            },
            vector::Error::Incompatible { .. } | vector::Error::Rejected(_) => {
                ServiceError::Internal { source: err.into() }
            }
        }
    }
}

impl ServiceError {
    pub fn invalid(kind: Invalid, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            kind,
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// A bug or an impossible state described by `message` (logged, never sent).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::Internal {
            source: message.into().into(),
        }
    }

    pub fn conflict(kind: Conflict, message: impl Into<String>) -> Self {
        Self::Conflict {
            kind,
            message: message.into(),
            field: None,
        }
    }

    /// [`ServiceError::conflict`] caused by the request's `field`.
    pub fn conflict_on(kind: Conflict, field: &'static str, message: impl Into<String>) -> Self {
        Self::Conflict {
            kind,
            message: message.into(),
            field: Some(field),
        }
    }
}

pub type ServiceResult<T> = Result<T, ServiceError>;
