//! The one error type handlers return, and the contract's JSON error body.
//!
//! Every non-2xx response quarry sends has the body `{"error": {"code", "message", "details"?}}`.
//! Service errors map here through one `match` without a catch-all arm; 5xx bodies are opaque
//! and the full cause chain is logged once, when the response is built.

use std::time::Duration;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::service::{Conflict, Invalid, Missing, ServiceError, Unprocessable};
use crate::{store, vector};

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code, e.g. `world_not_found`.
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
    /// Extra facts, e.g. `{"field": "top_k"}` or `{"retry_after_s": 12}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub details: Option<Value>,
}

/// An error on its way to becoming a response.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Option<Value>,
    retry_after: Option<Duration>,
    /// Kept for the log line of 5xx responses; never sent.
    cause: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ApiError {
    /// Adds a `Retry-After` header (whole seconds).
    pub fn with_retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            details: None,
            retry_after: None,
            cause: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or invalid bearer token",
        )
    }

    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body is larger than {limit} bytes"),
        )
        .with_details(json!({ "limit_bytes": limit }))
    }

    fn opaque(
        status: StatusCode,
        code: &'static str,
        message: &str,
        cause: Box<dyn std::error::Error + Send + Sync>,
    ) -> Self {
        Self {
            cause: Some(cause),
            ..Self::new(status, code, message)
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(err: ServiceError) -> Self {
        use StatusCode as S;
        match err {
            ServiceError::NotFound(what) => {
                let (code, message) = match what {
                    Missing::World => ("world_not_found", "world not found"),
                    Missing::Source => ("source_not_found", "source not found"),
                    Missing::Job => ("job_not_found", "job not found"),
                    Missing::Key => ("key_not_found", "provider key not found"),
                };
                ApiError::new(S::NOT_FOUND, code, message)
            }
            ServiceError::Invalid { kind, message, field } => {
                let code = match kind {
                    Invalid::Request => "invalid_request",
                    Invalid::RetrievalSettings => "invalid_retrieval_settings",
                    Invalid::EmptyQuery => "empty_query",
                    Invalid::EmbeddingProfile => "invalid_embedding_profile",
                    Invalid::ChunkingProfile => "invalid_chunking_profile",
                };
                let err = ApiError::new(S::BAD_REQUEST, code, message);
                match field {
                    Some(field) => err.with_details(json!({ "field": field })),
                    None => err,
                }
            }
            ServiceError::Conflict { kind, message } => {
                let code = match kind {
                    Conflict::NoEligibleProviderKey => "no_eligible_provider_key",
                    Conflict::JobState => "job_state_conflict",
                    Conflict::ProfileLocked => "profile_locked",
                    Conflict::MasterKeyMissing => "master_key_missing",
                    Conflict::KeyExists => "provider_key_exists",
                    Conflict::KeyReadOnly => "provider_key_read_only",
                };
                ApiError::new(S::CONFLICT, code, message)
            }
            ServiceError::Unprocessable { kind, message } => {
                let code = match kind {
                    Unprocessable::InputTooLarge => "input_too_large",
                    Unprocessable::TokenCountFailed => "token_count_failed",
                };
                // Only a query is judged this way (sources are chunked to fit).
                ApiError::new(S::UNPROCESSABLE_ENTITY, code, message).with_details(json!({ "field": "query" }))
            }
            ServiceError::RateLimited { retry_after } => {
                let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
                let mut err = ApiError::new(
                    S::TOO_MANY_REQUESTS,
                    "provider_rate_limited",
                    "every eligible provider key is cooling down; retry later",
                )
                .with_details(json!({ "retry_after_s": secs }));
                err.retry_after = Some(Duration::from_secs(secs));
                err
            }
            ServiceError::Provider { message } => ApiError::new(S::BAD_GATEWAY, "provider_error", message),
            ServiceError::Internal { message } => ApiError::opaque(
                S::INTERNAL_SERVER_ERROR,
                "internal_error",
                "internal error",
                message.into(),
            ),
            ServiceError::Store(err) => match err {
                store::Error::Unavailable(_) => ApiError::opaque(
                    S::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    "the database is unavailable",
                    err.into(),
                ),
                store::Error::RunChanged => ApiError::new(
                    S::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    "the world kept switching to new runs while the request was prepared; try again",
                ),
                store::Error::Duplicate(_) => ApiError::new(S::CONFLICT, "conflict", "the record already exists"),
                store::Error::Corrupt { .. }
                | store::Error::Query(_)
                | store::Error::Migrate(_)
                | store::Error::Setup(_)
                | store::Error::Internal(_) => {
                    ApiError::opaque(S::INTERNAL_SERVER_ERROR, "internal_error", "internal error", err.into())
                }
            },
            ServiceError::Vector(err) => match err {
                vector::Error::Unavailable(_) | vector::Error::Io(_) => ApiError::opaque(
                    S::SERVICE_UNAVAILABLE,
                    "vector_store_unavailable",
                    "the vector store is unavailable",
                    err.into(),
                ),
                vector::Error::MissingCollection(ref name) => ApiError::new(
                    S::SERVICE_UNAVAILABLE,
                    "vector_store_unavailable",
                    format!(
                        "the collection `{name}` is missing from the vector store; a repair \
                         (POST /v1/worlds/{{world_id}}/repair, or a restart) creates it again and embeds its chunks anew"
                    ),
                ),
                vector::Error::Incompatible { .. } | vector::Error::Rejected(_) => {
                    ApiError::opaque(S::INTERNAL_SERVER_ERROR, "internal_error", "internal error", err.into())
                }
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Some(cause) = &self.cause {
            let mut chain = cause.to_string();
            let mut source = cause.source();
            while let Some(s) = source {
                chain.push_str(": ");
                chain.push_str(&s.to_string());
                source = s.source();
            }
            tracing::error!(status = self.status.as_u16(), code = self.code, error = %chain, "request failed");
        }
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
                details: self.details,
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(retry) = self.retry_after
            && let Ok(value) = HeaderValue::from_str(&retry.as_secs().to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}
