//! Accepting an upload: a JSON or multipart body read into a source, aimed at a new source, an
//! id or a key, made idempotent when asked, and written.

use axum::extract::{FromRequest, Multipart, Request};
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::Value;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorCode};
use crate::api::extract::ApiJson;
use crate::domain::{Metadata, SourceId, SourceKey, SourceTitle, SourceUrl, WorldId};
use crate::service::sources::{AddSource, Document, Precondition, UploadSlot, Written as SourceWritten};

use super::idempotency::{Reservation, Reserved, idempotency_key};
use super::{AddSourceRequest, AddSourceUpload, Outcome, SourceAccepted, precondition, with_etag};

/// Which bodies a route takes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Written {
    /// JSON (and, as before the upload route existed, multipart).
    Json,
    Multipart,
    Either,
}

/// What an upload writes to.
pub(super) enum Target {
    /// A new source (or, with a `key` the world has, that source).
    New,
    Id(SourceId),
    Key(SourceKey),
}

/// Reads an upload from a multipart body or a JSON one (as `routes` takes), and writes it.
pub(super) async fn accept(
    state: &AppState,
    world_id: WorldId,
    req: Request,
    routes: Written,
    target: Target,
) -> Result<Response, ApiError> {
    let precondition = precondition(req.headers())?;
    let idempotency = idempotency_key(req.headers())?;
    let slot = upload_slot(state).await?;
    let mut add = read_body(state, req, routes, slot).await?;
    aim(&mut add, target, precondition)?;
    let mut reservation = match idempotency {
        None => None,
        Some(key) => match Reservation::reserve(state, world_id, key, &add.fingerprint()).await? {
            Reserved::Fresh(reservation) => Some(reservation),
            Reserved::Answered(response) => return Ok(response),
        },
    };
    let written = match state.sources.add(world_id, add).await {
        Ok(written) => written,
        Err(err) => {
            if let Some(reservation) = reservation.as_mut() {
                reservation.release().await;
            }
            return Err(err.into());
        }
    };
    let (status, outcome, view, job) = match written {
        SourceWritten::Created { view, job } => (StatusCode::ACCEPTED, Outcome::Created, view, Some(job)),
        SourceWritten::Replaced { view, job } => (StatusCode::ACCEPTED, Outcome::Replaced, view, Some(job)),
        SourceWritten::Unchanged { view } => (StatusCode::OK, Outcome::Unchanged, view, None),
    };
    let version = view.source.version;
    let body = SourceAccepted {
        source: view.into(),
        job: job.map(Into::into),
        outcome,
    };
    if let Some(reservation) = reservation.as_mut() {
        reservation.record(status, &body).await;
    }
    Ok(with_etag(version, (status, axum::Json(body))))
}

/// One of the server's upload slots, taken before the body is read: bodies in memory and
/// chunking work are bounded too. The slot goes with the upload to the blocking work that reads
/// and splits it, and is free again when that work ends (not when this request does). None
/// free within the upload wait: `server_busy`.
async fn upload_slot(state: &AppState) -> Result<UploadSlot, ApiError> {
    match state.uploads.acquire(state.upload_wait).await {
        Some(slot) => Ok(slot),
        None => Err(ApiError::new(
            ErrorCode::ServerBusy,
            format!(
                "{} uploads are being processed, the most this server takes at once (server.max_concurrent_uploads); \
                 retry shortly",
                state.uploads.max()
            ),
        )),
    }
}

/// The source a request's body describes: a multipart form, or a JSON body where `routes`
/// takes one. Its target and precondition are left for [`aim`].
async fn read_body(state: &AppState, req: Request, routes: Written, slot: UploadSlot) -> Result<AddSource, ApiError> {
    let is_multipart = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    if !is_multipart && routes == Written::Multipart {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "an upload is a multipart/form-data body (a JSON body goes to POST /v1/worlds/{world_id}/sources)",
        ));
    }
    if is_multipart {
        let multipart = Multipart::from_request(req, state)
            .await
            .map_err(|err| ApiError::invalid_request(format!("invalid multipart body: {}", err.body_text())))?;
        let (form, part) = AddSourceUpload::read(multipart, state.max_body_bytes).await?;
        return form.into_source(part, slot);
    }
    let ApiJson(body) = ApiJson::<AddSourceRequest>::from_request(req, state).await?;
    let (title, url, metadata) = parse_details(body.title.as_deref(), body.url.as_deref(), body.metadata.as_ref())?;
    Ok(AddSource {
        slot,
        filename: body.filename,
        content_type: body.content_type,
        document: Document::Text(body.text),
        title,
        url,
        metadata,
        key: parse_key(body.key.as_deref())?,
        target: None,
        precondition: Precondition::default(),
    })
}

/// Points `add` at the source the route names (`target`; a key in the query must agree with
/// the body's) and sets the request's precondition, which needs a source named by id or key.
fn aim(add: &mut AddSource, target: Target, precondition: Precondition) -> Result<(), ApiError> {
    match target {
        Target::New => {}
        Target::Id(id) => add.target = Some(id),
        Target::Key(key) => {
            if add.key.as_ref().is_some_and(|k| *k != key) {
                return Err(ApiError::new(
                    ErrorCode::KeyMismatch,
                    "the body's `key` is not the one the query names",
                )
                .with_details(serde_json::json!({"field": "key"})));
            }
            add.key = Some(key);
        }
    }
    if add.target.is_none() && add.key.is_none() && precondition != Precondition::default() {
        return Err(ApiError::invalid_request(
            "If-Match and If-None-Match apply to a source named by id or key; this upload names none",
        )
        .with_details(serde_json::json!({"field": "If-Match"})));
    }
    add.precondition = precondition;
    Ok(())
}

/// A `key` field as sent, parsed.
pub(super) fn parse_key(raw: Option<&str>) -> Result<Option<SourceKey>, ApiError> {
    raw.map(SourceKey::parse)
        .transpose()
        .map_err(|m| ApiError::invalid_request(m).with_details(serde_json::json!({"field": "key"})))
}
/// A source's title, URL and metadata as sent (absent or `null`: none), parsed; a bad one is
/// `invalid_request` naming its field (`metadata.<key>` for a bad value of a key).
pub(super) fn parse_details(
    title: Option<&str>,
    url: Option<&str>,
    metadata: Option<&Value>,
) -> Result<(Option<SourceTitle>, Option<SourceUrl>, Metadata), ApiError> {
    let invalid = |field: &str, message: String| {
        ApiError::invalid_request(message).with_details(serde_json::json!({ "field": field }))
    };
    let title = title
        .map(SourceTitle::parse)
        .transpose()
        .map_err(|m| invalid("title", m))?;
    let url = url.map(SourceUrl::parse).transpose().map_err(|m| invalid("url", m))?;
    let metadata = match metadata {
        None | Some(Value::Null) => Metadata::default(),
        Some(value) => Metadata::parse(value, "metadata").map_err(|e| invalid(&e.field, e.message))?,
    };
    Ok((title, url, metadata))
}
