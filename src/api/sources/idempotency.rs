//! Idempotent source writes: the `Idempotency-Key` header, the reservation that records the
//! first answer (or gives the key up), and replaying that answer.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorCode};
use crate::domain::WorldId;
use crate::service::sources::{Idempotent, SourceService};

use super::SourceAccepted;
use super::with_etag;

/// The header that makes a source write idempotent.
pub(super) const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// `Idempotency-Key`, checked: 1 to 255 visible ASCII characters.
pub(super) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    match value.to_str() {
        Ok(key) if (1..=255).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic()) => {
            Ok(Some(key.to_owned()))
        }
        _ => Err(
            ApiError::invalid_request("Idempotency-Key: 1 to 255 visible ASCII characters (a UUID, say)")
                .with_details(serde_json::json!({"field": IDEMPOTENCY_KEY})),
        ),
    }
}

/// A reserved `Idempotency-Key`: recorded with the answer, released when the write fails, and
/// released too when the request is dropped before either (the client left, or timed out), so
/// that the retry runs instead of finding it in use.
pub(super) struct Reservation {
    sources: Arc<SourceService>,
    world: WorldId,
    /// `None` once recorded or released.
    key: Option<String>,
}

/// What reserving an `Idempotency-Key` came to.
pub(super) enum Reserved {
    /// The key is this request's: the write goes ahead.
    Fresh(Reservation),
    /// A request with this key has answered already: its answer, replayed.
    Answered(Response),
}

impl Reservation {
    /// Reserves `key` for the request whose fingerprint is `fingerprint`. A key in use by
    /// another request, or used before for a different one, is refused.
    pub(super) async fn reserve(
        state: &AppState,
        world: WorldId,
        key: String,
        fingerprint: &str,
    ) -> Result<Reserved, ApiError> {
        match state.sources.reserve_idempotency(world, &key, fingerprint).await? {
            Idempotent::Reserved => Ok(Reserved::Fresh(Reservation {
                sources: state.sources.clone(),
                world,
                key: Some(key),
            })),
            Idempotent::Done { status, response } => Ok(Reserved::Answered(replay(status, response))),
            Idempotent::Mismatch => Err(ApiError::new(
                ErrorCode::IdempotencyKeyReused,
                "this Idempotency-Key was used for a different request in this world; a new request needs a new key",
            )
            .with_details(serde_json::json!({"field": IDEMPOTENCY_KEY}))),
            Idempotent::InProgress => Err(ApiError::new(
                ErrorCode::IdempotencyKeyInUse,
                "a request with this Idempotency-Key is still being processed; retry once it has answered",
            )
            .with_details(serde_json::json!({"field": IDEMPOTENCY_KEY}))),
        }
    }

    pub(super) async fn record(&mut self, status: StatusCode, body: &SourceAccepted) {
        let Some(key) = self.key.take() else { return };
        let response = serde_json::to_string(body).unwrap_or_default();
        if let Err(err) = self
            .sources
            .record_idempotency(self.world, &key, status.as_u16(), &response)
            .await
        {
            // The write happened; only its replay is lost (a retry would find the reservation
            // and, once it is abandoned, write again).
            tracing::warn!(error = %err, "recording an idempotency key's answer failed");
        }
    }

    pub(super) async fn release(&mut self) {
        let Some(key) = self.key.take() else { return };
        if let Err(err) = self.sources.release_idempotency(self.world, &key).await {
            tracing::warn!(error = %err, "releasing an idempotency key failed");
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let (sources, world) = (self.sources.clone(), self.world);
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    if let Err(err) = sources.release_idempotency(world, &key).await {
                        tracing::warn!(error = %err, "releasing an abandoned idempotency key failed");
                    }
                });
            }
        }
    }
}

/// The first answer to an idempotent write, again, marked as a replay.
fn replay(status: u16, response: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let version = serde_json::from_str::<serde_json::Value>(&response)
        .ok()
        .and_then(|body| body["source"]["version"].as_u64())
        .and_then(|v| u32::try_from(v).ok());
    let mut response = (
        status,
        [(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        )],
        response,
    )
        .into_response();
    response
        .headers_mut()
        .insert("idempotent-replayed", header::HeaderValue::from_static("true"));
    match version {
        Some(version) => with_etag(version, response),
        None => response,
    }
}
