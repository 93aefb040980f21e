//! Errors the services return: variants a caller can act on, each mapped to one HTTP status
//! and stable code by `api::error`.

use std::time::Duration;

use crate::{store, vector};

/// Which kind of thing was not found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    World,
    Source,
    Job,
    Key,
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
    /// Configuration keys cannot be changed through the API.
    KeyReadOnly,
}

/// Why an input could not be processed although it was well formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unprocessable {
    InputTooLarge,
    TokenCountFailed,
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
    Conflict { kind: Conflict, message: String },
    #[error("{message}")]
    Unprocessable { kind: Unprocessable, message: String },
    #[error("every eligible provider key is cooling down")]
    RateLimited { retry_after: Duration },
    #[error("provider failed: {message}")]
    Provider { message: String },
    /// A bug or an impossible state; the message is logged, never sent.
    #[error("internal error: {message}")]
    Internal { message: String },
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error(transparent)]
    Vector(#[from] vector::Error),
}

impl ServiceError {
    pub fn invalid(kind: Invalid, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            kind,
            message: message.into(),
            field: Some(field.into()),
        }
    }

    pub fn conflict(kind: Conflict, message: impl Into<String>) -> Self {
        Self::Conflict {
            kind,
            message: message.into(),
        }
    }
}

pub type ServiceResult<T> = Result<T, ServiceError>;
