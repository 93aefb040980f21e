//! `/v1/worlds/{world_id}/sources`: add (JSON or multipart upload), list, get, delete, and
//! read back a source's stored text and its chunks.

mod dto;
mod form;
mod idempotency;
mod upload;

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::error::{ApiError, ErrorBody};
use super::extract::{ApiPath, ApiQuery};
use crate::api::AppState;
use crate::domain::{SourceId, SourceKey, WorldId};
use crate::service::sources::Precondition;

pub(super) use dto::metadata_schema;
pub use dto::{
    AddSourceRequest, AddSourceUpload, ChunkDto, ChunkErrorDto, ChunkList, Outcome, PendingVersionDto, SourceAccepted,
    SourceDto, SourceList, SourceMetadata,
};
use upload::{Target, Written, accept};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/worlds/{world_id}/sources", get(list_sources).post(add_source))
        .route(
            "/v1/worlds/{world_id}/sources/upload",
            axum::routing::post(upload_source),
        )
        .route(
            "/v1/worlds/{world_id}/sources/by-key",
            get(get_source_by_key)
                .put(put_source_by_key)
                .delete(delete_source_by_key),
        )
        .route(
            "/v1/worlds/{world_id}/sources/{source_id}",
            get(get_source).put(put_source).delete(delete_source),
        )
        .route("/v1/worlds/{world_id}/sources/{source_id}/text", get(source_text))
        .route("/v1/worlds/{world_id}/sources/{source_id}/chunks", get(list_chunks))
}
/// Add a source from a JSON body. The text is stored, split into chunks and queued for
/// embedding; the answer comes at once with the ingest job (202). A file is uploaded with
/// `POST /v1/worlds/{world_id}/sources/upload` (a `multipart/form-data` body sent here is taken
/// too, as before that operation existed).
#[utoipa::path(post, path = "/v1/worlds/{world_id}/sources", tag = "sources",
    params(("world_id" = Uuid, Path), ("Idempotency-Key" = Option<String>, Header, description = "any new value (a UUID, say): a retry with the same key and request within 24 hours gets the first answer again (`Idempotent-Replayed: true`), not a second write")),
    request_body(content((AddSourceRequest = "application/json"))),
    responses((status = 202, body = SourceAccepted, description = "created, or (with a `key` the world has) replaced"),
        (status = 200, body = SourceAccepted, description = "unchanged: the `key` names a source with this very text and details"),
        (status = 400, description = "invalid_request (empty or non-UTF-8 text, unsupported content type, a bad title, url or metadata; `details.field` names it)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, description = "world_not_found", body = ErrorBody),
        (status = 409, description = "idempotency_key_in_use, or no_eligible_provider_key (the world's provider has no usable key)", body = ErrorBody),
        (status = 502, description = "provider_error (a local world's model files are missing: its tokenizer cuts the chunks)", body = ErrorBody),
        (status = 413, description = "payload_too_large (the body, or the text an HTML page converts to, is larger than `server.max_body_bytes`)", body = ErrorBody),
        (status = 422, description = "idempotency_key_reused (the `Idempotency-Key` went with another request), or unreadable_document or no_text_layer (an uploaded PDF that gives no text: damaged, password-protected, expanding to far more than its size, or a scan without a text layer)", body = ErrorBody),
        (status = 503, description = "server_busy (`server.max_concurrent_uploads` uploads are being processed; see `Retry-After`)", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn add_source(
    State(state): State<AppState>,
    ApiPath(world_id): ApiPath<WorldId>,
    req: Request,
) -> Result<Response, ApiError> {
    accept(&state, world_id, req, Written::Json, Target::New).await
}

/// Upload a file as a source: a `multipart/form-data` body with the file in part `file`, and
/// optionally `filename`, `content_type`, `title`, `url` and `metadata` (JSON text) parts. The
/// text is stored, split into chunks and queued for embedding; the answer comes at once with
/// the ingest job (202).
#[utoipa::path(post, path = "/v1/worlds/{world_id}/sources/upload", tag = "sources",
    params(("world_id" = Uuid, Path), ("Idempotency-Key" = Option<String>, Header, description = "any new value (a UUID, say): a retry with the same key and request within 24 hours gets the first answer again (`Idempotent-Replayed: true`), not a second write")),
    request_body(content((AddSourceUpload = "multipart/form-data"))),
    responses((status = 202, body = SourceAccepted, description = "created, or (with a `key` the world has) replaced"),
        (status = 200, body = SourceAccepted, description = "unchanged: the `key` names a source with this very text and details"),
        (status = 400, description = "invalid_request (a missing or repeated part, empty or non-UTF-8 text, unsupported content type, a bad title, url or metadata; `details.field` names it)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, description = "world_not_found", body = ErrorBody),
        (status = 409, description = "idempotency_key_in_use, or no_eligible_provider_key (the world's provider has no usable key)", body = ErrorBody),
        (status = 502, description = "provider_error (a local world's model files are missing: its tokenizer cuts the chunks)", body = ErrorBody),
        (status = 413, description = "payload_too_large (the body, or the text an HTML page converts to, is larger than `server.max_body_bytes`)", body = ErrorBody),
        (status = 415, description = "unsupported_media_type (the body is not `multipart/form-data`)", body = ErrorBody),
        (status = 422, description = "idempotency_key_reused (the `Idempotency-Key` went with another request), or unreadable_document or no_text_layer (an uploaded PDF that gives no text: damaged, password-protected, expanding to far more than its size, or a scan without a text layer)", body = ErrorBody),
        (status = 503, description = "server_busy (`server.max_concurrent_uploads` uploads are being processed; see `Retry-After`)", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn upload_source(
    State(state): State<AppState>,
    ApiPath(world_id): ApiPath<WorldId>,
    req: Request,
) -> Result<Response, ApiError> {
    accept(&state, world_id, req, Written::Multipart, Target::New).await
}

/// Replace a source's text with a new version (a JSON body as for `POST …/sources`, or a
/// `multipart/form-data` upload as for `POST …/sources/upload`). Identical text and details:
/// `200`, `outcome: unchanged`, nothing embedded. Otherwise `202`, `outcome: replaced`: the new
/// version is chunked, chunks whose text the world's model has already embedded take that
/// vector (no provider call), and the rest are embedded by a `replace` job; the current version
/// keeps answering retrievals until every chunk of the new one is embedded, then the source
/// switches at once. A replace of a source whose previous replace is still embedding supersedes
/// it (that one is cancelled and never served); a failed or cancelled replace leaves the
/// current version serving. `If-Match: "<version>"` makes the write conditional (`412` when
/// the source is at another version).
#[utoipa::path(put, path = "/v1/worlds/{world_id}/sources/{source_id}", tag = "sources",
    params(("world_id" = Uuid, Path), ("source_id" = Uuid, Path),
        ("Idempotency-Key" = Option<String>, Header, description = "any new value (a UUID, say): a retry with the same key and request within 24 hours gets the first answer again (`Idempotent-Replayed: true`), not a second write"),
        ("If-Match" = Option<String>, Header, description = "`\"<version>\"` (the source's `ETag`) or `*`: write only over that version")),
    request_body(content((AddSourceRequest = "application/json"), (AddSourceUpload = "multipart/form-data"))),
    responses((status = 200, body = SourceAccepted, description = "unchanged", headers(("ETag" = String, description = "the source's version, quoted"))),
        (status = 202, body = SourceAccepted, description = "replaced: a new version is being embedded", headers(("ETag" = String, description = "the version served now, quoted"))),
        (status = 400, description = "invalid_request (as for adding a source)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, description = "world_not_found or source_not_found", body = ErrorBody),
        (status = 409, description = "idempotency_key_in_use, or no_eligible_provider_key, or job_state_conflict (a re-ingest of the world is under way)", body = ErrorBody),
        (status = 412, description = "precondition_failed (`details.current_version`)", body = ErrorBody),
        (status = 413, description = "payload_too_large", body = ErrorBody),
        (status = 415, description = "unsupported_media_type", body = ErrorBody),
        (status = 422, description = "idempotency_key_reused (the `Idempotency-Key` went with another request), key_mismatch (the body names another key), or unreadable_document or no_text_layer", body = ErrorBody),
        (status = 503, description = "server_busy", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn put_source(
    State(state): State<AppState>,
    ApiPath((world_id, source_id)): ApiPath<(WorldId, SourceId)>,
    req: Request,
) -> Result<Response, ApiError> {
    accept(&state, world_id, req, Written::Either, Target::Id(source_id)).await
}

/// The `key` query parameter of the `by-key` routes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyQuery {
    key: String,
}

/// `key`, parsed.
fn key_of(query: &KeyQuery) -> Result<SourceKey, ApiError> {
    SourceKey::parse(&query.key)
        .map_err(|m| ApiError::invalid_request(m).with_details(serde_json::json!({"field": "key"})))
}

/// Create or replace the source with key `key` (keys may hold `/`: pass it percent-encoded
/// in the query, `?key=guides%2Finstall.md`). No such source: it is created (`202`, `outcome:
/// created`). Otherwise as `PUT …/sources/{source_id}`. `If-None-Match: *` creates only;
/// `If-Match` replaces only the version it names.
#[utoipa::path(put, path = "/v1/worlds/{world_id}/sources/by-key", tag = "sources",
    params(("world_id" = Uuid, Path),
        ("key" = String, Query, description = "the source's key (1 to 1024 characters)"),
        ("Idempotency-Key" = Option<String>, Header, description = "any new value (a UUID, say): a retry with the same key and request within 24 hours gets the first answer again (`Idempotent-Replayed: true`), not a second write"),
        ("If-Match" = Option<String>, Header, description = "`\"<version>\"` or `*`: write only over that version (`*`: over any existing one)"),
        ("If-None-Match" = Option<String>, Header, description = "`*`: create only")),
    request_body(content((AddSourceRequest = "application/json"), (AddSourceUpload = "multipart/form-data"))),
    responses((status = 200, body = SourceAccepted, description = "unchanged", headers(("ETag" = String, description = "the source's version, quoted"))),
        (status = 202, body = SourceAccepted, description = "created or replaced", headers(("ETag" = String, description = "the version served now, quoted"))),
        (status = 400, description = "invalid_request (as for adding a source; a bad `key`)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, description = "world_not_found", body = ErrorBody),
        (status = 409, description = "idempotency_key_in_use, or no_eligible_provider_key, or job_state_conflict (a re-ingest of the world is under way)", body = ErrorBody),
        (status = 412, description = "precondition_failed (`details.current_version`; `null`: no such source)", body = ErrorBody),
        (status = 413, description = "payload_too_large", body = ErrorBody),
        (status = 415, description = "unsupported_media_type", body = ErrorBody),
        (status = 422, description = "idempotency_key_reused (the `Idempotency-Key` went with another request), key_mismatch (the body names another key), or unreadable_document or no_text_layer", body = ErrorBody),
        (status = 503, description = "server_busy", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn put_source_by_key(
    State(state): State<AppState>,
    ApiPath(world_id): ApiPath<WorldId>,
    ApiQuery(query): ApiQuery<KeyQuery>,
    req: Request,
) -> Result<Response, ApiError> {
    let key = key_of(&query)?;
    accept(&state, world_id, req, Written::Either, Target::Key(key)).await
}

/// The source with key `key`.
#[utoipa::path(get, path = "/v1/worlds/{world_id}/sources/by-key", tag = "sources",
    params(("world_id" = Uuid, Path), ("key" = String, Query, description = "the source's key")),
    responses((status = 200, body = SourceDto, headers(("ETag" = String, description = "the source's version, quoted"))),
        (status = 400, description = "invalid_request (a bad `key`)", body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found or source_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_source_by_key(
    State(state): State<AppState>,
    ApiPath(world_id): ApiPath<WorldId>,
    ApiQuery(query): ApiQuery<KeyQuery>,
) -> Result<Response, ApiError> {
    let key = key_of(&query)?;
    let view = state.sources.get_by_key(world_id, &key).await?;
    Ok(with_etag(view.source.version, axum::Json(SourceDto::from(view))))
}

/// Delete the source with key `key`, as `DELETE …/sources/{source_id}` does.
#[utoipa::path(delete, path = "/v1/worlds/{world_id}/sources/by-key", tag = "sources",
    params(("world_id" = Uuid, Path), ("key" = String, Query, description = "the source's key"),
        ("If-Match" = Option<String>, Header, description = "`\"<version>\"` or `*`: delete only that version")),
    responses((status = 204, description = "deleted"),
        (status = 400, description = "invalid_request (a bad `key` or `If-Match`)", body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found or source_not_found", body = ErrorBody),
        (status = 412, description = "precondition_failed (`details.current_version`)", body = ErrorBody),
        (status = 503, description = "vector_store_unavailable (nothing was deleted)", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete_source_by_key(
    State(state): State<AppState>,
    ApiPath(world_id): ApiPath<WorldId>,
    ApiQuery(query): ApiQuery<KeyQuery>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    let key = key_of(&query)?;
    let precondition = precondition(&headers)?;
    let view = state.sources.get_by_key(world_id, &key).await?;
    state.sources.delete(world_id, view.source.id, &precondition).await?;
    Ok(StatusCode::NO_CONTENT)
}
/// `If-Match` and `If-None-Match`, on a source's version (`"3"`, or `*`).
fn precondition(headers: &HeaderMap) -> Result<Precondition, ApiError> {
    let bad = |name: &str, message: &str| {
        ApiError::invalid_request(format!("{name}: {message}")).with_details(serde_json::json!({"field": name}))
    };
    let if_match = match headers.get(header::IF_MATCH) {
        None => None,
        Some(value) => {
            let value = value.to_str().map_err(|_| bad("If-Match", "not ASCII"))?.trim();
            if value == "*" {
                Some(None)
            } else {
                // The ETag as sent back (`"3"`), or its bare number, which clients that do
                // not quote also mean.
                let number = value
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(value);
                let version = Some(number)
                    .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|n| n.parse::<u32>().ok())
                    .ok_or_else(|| bad("If-Match", "expected a source's ETag (`\"3\"`, or `3`) or `*`"))?;
                Some(Some(version))
            }
        }
    };
    let if_none_match = match headers.get(header::IF_NONE_MATCH) {
        None => false,
        Some(value) if value.to_str().is_ok_and(|v| v.trim() == "*") => true,
        Some(_) => return Err(bad("If-None-Match", "only `*` (create only) is taken")),
    };
    Ok(Precondition {
        if_match,
        if_none_match,
    })
}

/// `body` with the source's version as its `ETag`.
fn with_etag(version: u32, body: impl IntoResponse) -> Response {
    let mut response = body.into_response();
    if let Ok(value) = header::HeaderValue::from_str(&format!("\"{version}\"")) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}
/// Sources of a world, by book number, with chunk state counts.
#[utoipa::path(get, path = "/v1/worlds/{world_id}/sources", tag = "sources",
    params(("world_id" = Uuid, Path),
        ("offset" = Option<u64>, Query, description = "sources to skip (default 0)", minimum = 0, maximum = 9223372036854775807_i64),
        ("limit" = Option<u32>, Query, description = "sources to return, 1 to 1000 (default 100)", minimum = 1, maximum = 1000)),
    responses((status = 200, body = SourceList), (status = 400, description = "invalid_request (`details.field`: `offset`, `limit` or an unknown parameter)", body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_sources(
    State(state): State<AppState>,
    ApiPath(world_id): ApiPath<WorldId>,
    ApiQuery(query): ApiQuery<Vec<(String, String)>>,
) -> Result<axum::Json<SourceList>, ApiError> {
    let paging = super::extract::list_query(&query, &[])?;
    let sources = state.sources.list(world_id, super::extract::window(paging)).await?;
    let (sources, next_offset) = super::extract::page(sources, paging);
    Ok(axum::Json(SourceList {
        sources: sources.into_iter().map(Into::into).collect(),
        next_offset,
    }))
}

/// One source with chunk state counts.
#[utoipa::path(get, path = "/v1/worlds/{world_id}/sources/{source_id}", tag = "sources",
    params(("world_id" = Uuid, Path), ("source_id" = Uuid, Path)),
    responses((status = 200, body = SourceDto, headers(("ETag" = String, description = "the source's version, quoted"))),
        (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found or source_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_source(
    State(state): State<AppState>,
    ApiPath((world_id, source_id)): ApiPath<(WorldId, SourceId)>,
) -> Result<Response, ApiError> {
    let view = state.sources.get(world_id, source_id).await?;
    Ok(with_etag(view.source.version, axum::Json(SourceDto::from(view))))
}

/// Delete a source: its points (in every collection the world uses), chunks and manifest
/// entries. The world's other sources keep their book numbers; numbers are never reused.
/// Unfinished jobs drop the deleted work; one left with nothing to do ends (`cancelled` when
/// all its work was this source's).
#[utoipa::path(delete, path = "/v1/worlds/{world_id}/sources/{source_id}", tag = "sources",
    params(("world_id" = Uuid, Path), ("source_id" = Uuid, Path),
        ("If-Match" = Option<String>, Header, description = "`\"<version>\"` or `*`: delete only that version")),
    responses((status = 204, description = "deleted"), (status = 401, body = ErrorBody),
        (status = 400, description = "invalid_request (a bad `If-Match`)", body = ErrorBody),
        (status = 404, description = "world_not_found or source_not_found", body = ErrorBody),
        (status = 412, description = "precondition_failed (`details.current_version`)", body = ErrorBody),
        (status = 503, description = "vector_store_unavailable (nothing was deleted)", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete_source(
    State(state): State<AppState>,
    ApiPath((world_id, source_id)): ApiPath<(WorldId, SourceId)>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    state
        .sources
        .delete(world_id, source_id, &precondition(&headers)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The stored text of a source (HTML sources: the converted text). Chunk offsets count chars
/// (Unicode scalar values) of exactly this text.
#[utoipa::path(get, path = "/v1/worlds/{world_id}/sources/{source_id}/text", tag = "sources",
    params(("world_id" = Uuid, Path), ("source_id" = Uuid, Path)),
    responses((status = 200, description = "the stored text", body = String, content_type = "text/plain; charset=utf-8"),
        (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found or source_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn source_text(
    State(state): State<AppState>,
    ApiPath((world_id, source_id)): ApiPath<(WorldId, SourceId)>,
) -> Result<impl IntoResponse, ApiError> {
    let text = state.sources.text(world_id, source_id).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text))
}
/// The chunks of a source in the world's active run, by chunk number, a page at a time.
/// `offset` and `limit` are checked before anything is looked up.
#[utoipa::path(get, path = "/v1/worlds/{world_id}/sources/{source_id}/chunks", tag = "sources",
    params(("world_id" = Uuid, Path), ("source_id" = Uuid, Path),
        ("offset" = Option<u64>, Query, description = "chunks to skip (default 0)", minimum = 0, maximum = 9223372036854775807_i64),
        ("limit" = Option<u32>, Query, description = "chunks to return, 1 to 1000 (default 100)", minimum = 1, maximum = 1000)),
    responses((status = 200, body = ChunkList),
        (status = 400, description = "invalid_request (`details.field`: `offset`, `limit` or an unknown parameter)", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found or source_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_chunks(
    State(state): State<AppState>,
    ApiPath((world_id, source_id)): ApiPath<(WorldId, SourceId)>,
    ApiQuery(query): ApiQuery<BTreeMap<String, String>>,
) -> Result<axum::Json<ChunkList>, ApiError> {
    if let Some(unknown) = query.keys().find(|k| *k != "offset" && *k != "limit") {
        return Err(
            ApiError::invalid_request(format!("unknown query parameter `{unknown}` (use offset and limit)"))
                .with_details(serde_json::json!({ "field": unknown })),
        );
    }
    let paging = super::extract::paging(
        query.get("offset").map(String::as_str),
        query.get("limit").map(String::as_str),
    )?;
    let page = state.sources.chunks(world_id, source_id, paging).await?;
    Ok(axum::Json(page.into()))
}
