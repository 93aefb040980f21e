//! The one error type handlers return, the table of stable error codes, and the contract's
//! JSON error body.
//!
//! Every non-2xx response quarry sends has the body `{"error": {"code", "message", "details"?}}`.
//! [`ErrorCode`] is the one table of codes: each with its HTTP status, whether a `Retry-After`
//! header comes with it, and what it means (the OpenAPI document's error descriptions). Service
//! errors map to codes through one `match` without a catch-all arm. 5xx bodies are opaque; an
//! error with a cause travels in the response's extensions to [`log_errors`], the middleware
//! that logs it once, with its cause chain.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::service::error::{BoxError, Dependency};
use crate::service::{Conflict, Invalid, Missing, ServiceError, Unprocessable};

/// Whether an error response carries `Retry-After`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAfter {
    /// No header: retrying the same request will not help (or the client cannot know when).
    No,
    /// The header, with the time the cause gives (a provider's cooldown).
    Given,
    /// The header, always this many seconds.
    Seconds(u64),
}

macro_rules! error_codes {
    ($($variant:ident => $code:literal, $status:ident, $retry:expr, $description:literal;)+) => {
        /// Every stable error code quarry answers with.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorCode { $($variant),+ }

        impl ErrorCode {
            /// Every code, in the table's order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant),+];

            /// The code as clients see it.
            pub fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $code),+ }
            }

            /// The HTTP status the code is sent with.
            pub fn status(self) -> StatusCode {
                match self { $(ErrorCode::$variant => StatusCode::$status),+ }
            }

            /// Whether `Retry-After` comes with the code.
            pub fn retry_after(self) -> RetryAfter {
                match self { $(ErrorCode::$variant => $retry),+ }
            }

            /// What the code means, for the OpenAPI document and the README.
            pub fn description(self) -> &'static str {
                match self { $(ErrorCode::$variant => $description),+ }
            }
        }
    };
}

use RetryAfter::{Given, No, Seconds};

error_codes! {
    InvalidRequest => "invalid_request", BAD_REQUEST, No,
        "the request is malformed: a body, parameter or header the contract does not take (`details.field` names it)";
    InvalidRetrievalSettings => "invalid_retrieval_settings", BAD_REQUEST, No,
        "a retrieval setting is out of range or unknown (`details.field` names it)";
    EmptyQuery => "empty_query", BAD_REQUEST, No, "the query has no text";
    InvalidEmbeddingProfile => "invalid_embedding_profile", BAD_REQUEST, No,
        "the provider, model or dimensions are not ones quarry can embed with";
    InvalidChunkingProfile => "invalid_chunking_profile", BAD_REQUEST, No,
        "max_tokens or overlap_tokens are out of range for the model";
    Unauthorized => "unauthorized", UNAUTHORIZED, No, "missing or invalid bearer token";
    InsufficientScope => "insufficient_scope", FORBIDDEN, No,
        "the token does not hold the scope this route needs (`details.scope` names it), or reaches only some worlds and the route concerns them all";
    WorldNotFound => "world_not_found", NOT_FOUND, No, "no world has this id";
    SourceNotFound => "source_not_found", NOT_FOUND, No, "the world has no source with this id";
    JobNotFound => "job_not_found", NOT_FOUND, No, "no job has this id";
    KeyNotFound => "key_not_found", NOT_FOUND, No, "no provider key has this id";
    WebhookNotFound => "webhook_not_found", NOT_FOUND, No, "no webhook subscription has this id";
    EvalNotFound => "eval_not_found", NOT_FOUND, No, "the world has no evaluation test set with this id";
    EvalRunNotFound => "eval_run_not_found", NOT_FOUND, No, "the test set has no evaluation run with this id";
    TokenNotFound => "token_not_found", NOT_FOUND, No, "no API token has this id";
    NotFound => "not_found", NOT_FOUND, No, "no route has this path";
    MethodNotAllowed => "method_not_allowed", METHOD_NOT_ALLOWED, No, "the route does not take this method";
    RequestTimeout => "request_timeout", REQUEST_TIMEOUT, No,
        "the request took longer than `server.request_timeout_s`";
    NoEligibleProviderKey => "no_eligible_provider_key", CONFLICT, No,
        "no enabled key of the world's provider is left to embed with; add or enable one";
    JobStateConflict => "job_state_conflict", CONFLICT, No,
        "the job's status does not allow this (or a re-ingest of the world is already under way)";
    ProfileLocked => "profile_locked", CONFLICT, No,
        "a world's embedding profile cannot change in place; re-ingest it";
    MasterKeyMissing => "master_key_missing", CONFLICT, No,
        "keys cannot be stored without `security.master_key`";
    ProviderKeyExists => "provider_key_exists", CONFLICT, No, "the provider already has this key";
    ProviderKeyReadOnly => "provider_key_read_only", CONFLICT, No,
        "a key from the configuration is changed in the configuration, not through the API";
    NothingToRetry => "nothing_to_retry", CONFLICT, No,
        "the job (or world) has no failed chunk in a run its world serves or is building";
    WebhookLimitReached => "webhook_limit_reached", CONFLICT, No,
        "as many webhook subscriptions as quarry keeps (100) exist already; delete one first";
    EvalLimitReached => "eval_limit_reached", CONFLICT, No,
        "the world has as many evaluation test sets (100) or runs as quarry keeps; delete one first";
    EvalRunState => "eval_run_state", CONFLICT, No,
        "the evaluation run's status does not allow this (it has ended, or has not)";
    Conflict => "conflict", CONFLICT, No, "the record already exists";
    IdempotencyKeyInUse => "idempotency_key_in_use", CONFLICT, No,
        "a request with this `Idempotency-Key` is still being processed; retry once it has answered";
    IdempotencyKeyReused => "idempotency_key_reused", UNPROCESSABLE_ENTITY, No,
        "this `Idempotency-Key` was used (within 24 hours) for a different request; use a new key";
    PreconditionFailed => "precondition_failed", PRECONDITION_FAILED, No,
        "the source is not at the version `If-Match` names, or `If-None-Match: *` found it exists (`details.current_version`); read it again";
    PayloadTooLarge => "payload_too_large", PAYLOAD_TOO_LARGE, No,
        "the body is larger than the route takes (`details.limit_bytes`)";
    UnsupportedMediaType => "unsupported_media_type", UNSUPPORTED_MEDIA_TYPE, No,
        "the body's content type is not one the route takes";
    InputTooLarge => "input_too_large", UNPROCESSABLE_ENTITY, No,
        "the query has more tokens than the world's model takes";
    TokenCountFailed => "token_count_failed", UNPROCESSABLE_ENTITY, No,
        "the provider could not count the query's tokens";
    UnreadableDocument => "unreadable_document", UNPROCESSABLE_ENTITY, No,
        "the uploaded PDF cannot be read: damaged, password-protected, or expanding to far more than its size";
    NoTextLayer => "no_text_layer", UNPROCESSABLE_ENTITY, No,
        "the uploaded PDF has no text layer (a scan, or images of text); OCR it first";
    DestinationNotAllowed => "destination_not_allowed", UNPROCESSABLE_ENTITY, No,
        "the webhook URL's address is not public (loopback, private, link-local, …) and not in `webhooks.allowed_networks`";
    ExpiryInPast => "expiry_in_past", UNPROCESSABLE_ENTITY, No,
        "a token's `expires_at` is not in the future";
    KeyMismatch => "key_mismatch", UNPROCESSABLE_ENTITY, No,
        "the body's `key` is not the key of the source the route writes to (a key is set when a source is created)";
    TokenRateLimited => "token_rate_limited", TOO_MANY_REQUESTS, Given,
        "the token made more requests than its `rate_per_minute` allows on this replica; retry after `Retry-After` seconds";
    ProviderRateLimited => "provider_rate_limited", TOO_MANY_REQUESTS, Given,
        "every eligible provider key is cooling down; retry after `Retry-After` seconds";
    InternalError => "internal_error", INTERNAL_SERVER_ERROR, No, "a fault inside quarry (logged in full, never sent)";
    ProviderError => "provider_error", BAD_GATEWAY, No, "the embedding provider failed or answered nonsense";
    StoreUnavailable => "store_unavailable", SERVICE_UNAVAILABLE, No,
        "the database is unavailable, or changed under the request; retry";
    VectorStoreUnavailable => "vector_store_unavailable", SERVICE_UNAVAILABLE, No,
        "the vector store is unavailable, or lost the world's collection (a repair makes it again)";
    ServerBusy => "server_busy", SERVICE_UNAVAILABLE, Seconds(5),
        "the server is at a limit: as many event streams as it keeps open (`server.max_event_streams`, \
         or `server.max_event_streams_per_client` for one client), or as many uploads as it processes at once \
         (`server.max_concurrent_uploads`); retry after `Retry-After` seconds";
}

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
    pub code: ErrorCode,
    pub message: String,
    pub details: Option<Box<Value>>,
    retry_after: Option<Duration>,
    /// Kept for the log line; never sent.
    cause: Option<BoxError>,
}

/// What [`log_errors`] logs of a response: put in its extensions by [`ApiError`].
#[derive(Clone, Debug)]
struct FailedRequest {
    code: ErrorCode,
    chain: Arc<str>,
}

impl ApiError {
    /// An error with `code`'s status (and its fixed `Retry-After`, if it has one).
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let retry_after = match code.retry_after() {
            Seconds(secs) => Some(Duration::from_secs(secs)),
            No | Given => None,
        };
        Self {
            status: code.status(),
            code,
            message: message.into(),
            details: None,
            retry_after,
            cause: None,
        }
    }

    /// Sends the error with another status than its code's (a status our router did not
    /// produce itself, passed on as it is).
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    fn with_cause(mut self, cause: BoxError) -> Self {
        self.cause = Some(cause);
        self
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn unauthorized() -> Self {
        Self::new(ErrorCode::Unauthorized, "missing or invalid bearer token")
    }

    /// 429 `token_rate_limited`, to retry after `wait`.
    pub fn token_rate_limited(wait: Duration) -> Self {
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        let mut err = Self::new(
            ErrorCode::TokenRateLimited,
            format!("the token's rate_per_minute is spent; retry in {secs} s"),
        )
        .with_details(json!({ "retry_after_s": secs }));
        err.retry_after = Some(Duration::from_secs(secs));
        err
    }

    /// 403 `insufficient_scope`: the route needs `scope`.
    pub fn insufficient_scope(scope: crate::domain::Scope, message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InsufficientScope, message).with_details(json!({ "scope": scope.as_str() }))
    }

    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            ErrorCode::PayloadTooLarge,
            format!("request body is larger than {limit} bytes"),
        )
        .with_details(json!({ "limit_bytes": limit }))
    }
}

impl From<ServiceError> for ApiError {
    fn from(err: ServiceError) -> Self {
        use ErrorCode as C;
        match err {
            ServiceError::NotFound(what) => {
                let (code, message) = match what {
                    Missing::World => (C::WorldNotFound, "world not found"),
                    Missing::Source => (C::SourceNotFound, "source not found"),
                    Missing::Job => (C::JobNotFound, "job not found"),
                    Missing::Key => (C::KeyNotFound, "provider key not found"),
                    Missing::Webhook => (C::WebhookNotFound, "webhook subscription not found"),
                    Missing::EvalSet => (C::EvalNotFound, "evaluation test set not found"),
                    Missing::EvalRun => (C::EvalRunNotFound, "evaluation run not found"),
                    Missing::Token => (C::TokenNotFound, "API token not found"),
                };
                ApiError::new(code, message)
            }
            ServiceError::Invalid { kind, message, field } => {
                let code = match kind {
                    Invalid::Request => C::InvalidRequest,
                    Invalid::RetrievalSettings => C::InvalidRetrievalSettings,
                    Invalid::EmptyQuery => C::EmptyQuery,
                    Invalid::EmbeddingProfile => C::InvalidEmbeddingProfile,
                    Invalid::ChunkingProfile => C::InvalidChunkingProfile,
                };
                let err = ApiError::new(code, message);
                match field {
                    Some(field) => err.with_details(json!({ "field": field })),
                    None => err,
                }
            }
            ServiceError::Conflict { kind, message, field } => {
                let code = match kind {
                    Conflict::NoEligibleProviderKey => C::NoEligibleProviderKey,
                    Conflict::JobState => C::JobStateConflict,
                    Conflict::ProfileLocked => C::ProfileLocked,
                    Conflict::MasterKeyMissing => C::MasterKeyMissing,
                    Conflict::KeyExists => C::ProviderKeyExists,
                    Conflict::KeyReadOnly => C::ProviderKeyReadOnly,
                    Conflict::Duplicate => C::Conflict,
                    Conflict::NothingToRetry => C::NothingToRetry,
                    Conflict::WebhookLimit => C::WebhookLimitReached,
                    Conflict::EvalLimit => C::EvalLimitReached,
                    Conflict::EvalRunState => C::EvalRunState,
                };
                let err = ApiError::new(code, message);
                match field {
                    Some(field) => err.with_details(json!({ "field": field })),
                    None => err,
                }
            }
            ServiceError::Unprocessable { kind, message } => {
                let code = match kind {
                    Unprocessable::InputTooLarge => C::InputTooLarge,
                    Unprocessable::TokenCountFailed => C::TokenCountFailed,
                    Unprocessable::UnreadableDocument => C::UnreadableDocument,
                    Unprocessable::NoTextLayer => C::NoTextLayer,
                    Unprocessable::DestinationNotAllowed => C::DestinationNotAllowed,
                    Unprocessable::KeyMismatch => C::KeyMismatch,
                    Unprocessable::ExpiryInPast => C::ExpiryInPast,
                };
                // A query too long for the model, or an uploaded document that gives no text.
                let field = match kind {
                    Unprocessable::InputTooLarge | Unprocessable::TokenCountFailed => "query",
                    Unprocessable::UnreadableDocument | Unprocessable::NoTextLayer => "file",
                    Unprocessable::DestinationNotAllowed => "url",
                    Unprocessable::KeyMismatch => "key",
                    Unprocessable::ExpiryInPast => "expires_at",
                };
                ApiError::new(code, message).with_details(json!({ "field": field }))
            }
            ServiceError::RateLimited { retry_after } => {
                let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
                let mut err = ApiError::new(
                    C::ProviderRateLimited,
                    "every eligible provider key is cooling down; retry later",
                )
                .with_details(json!({ "retry_after_s": secs }));
                err.retry_after = Some(Duration::from_secs(secs));
                err
            }
            ServiceError::Provider { message } => ApiError::new(C::ProviderError, message),
            ServiceError::PreconditionFailed { current, message } => {
                ApiError::new(C::PreconditionFailed, message).with_details(json!({ "current_version": current }))
            }
            ServiceError::TooLarge { limit, message } => {
                ApiError::new(C::PayloadTooLarge, message).with_details(json!({ "limit_bytes": limit }))
            }
            ServiceError::Unavailable {
                dependency,
                message,
                source,
            } => {
                let code = match dependency {
                    Dependency::Store => C::StoreUnavailable,
                    Dependency::VectorStore => C::VectorStoreUnavailable,
                };
                let err = ApiError::new(code, message);
                match source {
                    Some(source) => err.with_cause(source),
                    None => err,
                }
            }
            ServiceError::Internal { source } => ApiError::new(C::InternalError, "internal error").with_cause(source),
        }
    }
}

impl ApiError {
    /// The error as the body a client reads, for answers that are not HTTP responses (an MCP
    /// tool's error): its cause, which no response carries to [`log_errors`] then, is logged
    /// here, once.
    pub fn into_body(self, surface: &'static str) -> ErrorBody {
        if let Some(cause) = &self.cause {
            tracing::error!(
                surface,
                code = self.code.as_str(),
                error = %crate::telemetry::error_chain(cause.as_ref()),
                "request failed"
            );
        }
        ErrorBody {
            error: ErrorDetail {
                code: self.code.as_str().to_owned(),
                message: self.message,
                details: self.details.map(|d| *d),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.as_str().to_owned(),
                message: self.message,
                details: self.details.map(|d| *d),
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(retry) = self.retry_after
            && let Ok(value) = HeaderValue::from_str(&retry.as_secs().to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        if let Some(cause) = self.cause {
            let chain = crate::telemetry::error_chain(cause.as_ref());
            response.extensions_mut().insert(FailedRequest {
                code: self.code,
                chain: chain.into(),
            });
        }
        response
    }
}

/// Logs, once, every error response that carries a cause (an [`ApiError`] made from a store,
/// vector store or internal failure), with the cause chain the client never sees.
pub async fn log_errors(req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    if let Some(failed) = response.extensions().get::<FailedRequest>() {
        tracing::error!(
            status = response.status().as_u16(),
            code = failed.code.as_str(),
            error = %failed.chain,
            "request failed"
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_snake_case_and_described() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let text = code.as_str();
            assert!(seen.insert(text), "{text} twice");
            assert!(text.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{text}");
            assert!(!code.description().is_empty(), "{text}");
            assert!(
                code.status().is_client_error() || code.status().is_server_error(),
                "{text}"
            );
        }
    }
}
