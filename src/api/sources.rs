//! `/v1/worlds/{world_id}/sources`: add (JSON or multipart upload), list, get, delete, and
//! read back a source's stored text and its chunks.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody, ErrorCode};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::jobs::JobDto;
use crate::api::AppState;
use crate::domain::{
    ChunkPage, ChunkState, Metadata, SourceFormat, SourceId, SourceKey, SourceTitle, SourceUrl, WorldId,
};
use crate::service::sources::{
    AddSource, Document, Idempotent, Precondition, SourceService, SourceView, UploadSlot, Written as SourceWritten,
};

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

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddSourceRequest {
    /// At most 255 characters as sent, no control characters; a path keeps its last segment,
    /// which must not be blank. Stored without surrounding whitespace.
    #[schema(
        example = "ch1.md",
        min_length = 1,
        max_length = 255,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000/\\][^\u0000-\u001f\u007f-\u009f/\\]*$"
    )]
    pub filename: String,
    /// The document's text: not only whitespace, no NUL character (U+0000).
    #[schema(
        min_length = 1,
        pattern = r"^[^\u0000]*[^\u0000\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\u0000]*$"
    )]
    pub text: String,
    /// `text/plain`, `text/markdown` or `text/html` (converted to text), in any case, with
    /// parameters or not (`text/html; charset=utf-8`); guessed from the filename when absent
    /// or blank.
    #[schema(
        example = "text/markdown",
        pattern = r"^[\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*(?:[Tt][Ee][Xx][Tt]/(?:[Pp][Ll][Aa][Ii][Nn]|[Mm][Aa][Rr][Kk][Dd][Oo][Ww][Nn]|[Hh][Tt][Mm][Ll])[\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*(?:;[\s\S]*)?)?$"
    )]
    pub content_type: Option<String>,
    /// A title for the source (1 to 1000 characters as sent, not only whitespace, no control
    /// characters: one line); shown on the source and on its retrieval hits, without
    /// surrounding whitespace.
    #[schema(
        example = "The Northern Isles, chapter 1",
        min_length = 1,
        max_length = 1000,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub title: Option<String>,
    /// Where the source comes from: an absolute `http` or `https` URL of at most 2048
    /// characters, taken as sent (see the pattern: a host name or IP address, no user
    /// information, no whitespace or control characters).
    #[schema(
        example = "https://example.com/isles/ch1",
        max_length = 2048,
        pattern = "(set from SourceUrl::PATTERN)"
    )]
    pub url: Option<String>,
    /// Flat string metadata: at most 64 keys of 1 to 64 characters from `A-Z a-z 0-9 _ . -`,
    /// each with a string value of at most 1024 characters. Retrieval can filter on it
    /// (`filter.metadata`).
    #[schema(value_type = Option<SourceMetadata>, example = json!({"lang": "en", "kind": "chapter"}))]
    pub metadata: Option<Value>,
    /// Your name for the source (a path, URL or document id): 1 to 1024 characters, no control
    /// characters, unique in the world and taken exactly as sent. Sending a key the world has
    /// already replaces that source (a new version) instead of adding another.
    #[schema(
        example = "guides/install.md",
        min_length = 1,
        max_length = 1024,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]+$"
    )]
    pub key: Option<String>,
}

/// A source's metadata as the document states it (the handler reads it as JSON and
/// [`Metadata::parse`] judges it by the same rules).
pub struct SourceMetadata;

impl utoipa::PartialSchema for SourceMetadata {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        metadata_schema(0).into()
    }
}

impl utoipa::ToSchema for SourceMetadata {
    /// `Metadata`: generators name the `metadata` property of `Source` `SourceMetadata`.
    fn name() -> std::borrow::Cow<'static, str> {
        "Metadata".into()
    }
}

/// Flat string metadata with at least `min_keys` keys: [`Metadata`]'s rules as JSON Schema.
pub(super) fn metadata_schema(min_keys: usize) -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Type};
    let value = ObjectBuilder::new()
        .schema_type(Type::String)
        .max_length(Some(Metadata::MAX_VALUE_CHARS));
    let key = ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(format!("^[A-Za-z0-9_.-]{{1,{}}}$", Metadata::MAX_KEY_CHARS)));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::RefOr(value.build().into())))
        .property_names(Some(key.build()))
        .min_properties((min_keys > 0).then_some(min_keys))
        .max_properties(Some(Metadata::MAX_KEYS))
        .build()
}

/// The `multipart/form-data` form of a source upload. A part left out is not given; an empty
/// one is (there is no `null` in a form). Any other part is refused.
// Read part by part (`AddSourceUpload::read`): a form is not a serde body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddSourceUpload {
    /// The document as UTF-8 text, as `text` in the JSON body (not only whitespace, no NUL
    /// character) — or a PDF's bytes, known by the content type `application/pdf`, or, when no
    /// content type is given, by a `.pdf` name or the `%PDF-` header. A PDF's text is read page
    /// by page (its chunks carry `page`); one without a text layer (a scan) is 422
    /// `no_text_layer`, a damaged or password-protected one 422 `unreadable_document`. Its
    /// part's filename and content type name the source unless the fields below are sent.
    #[schema(value_type = String, content_media_type = "text/plain", min_length = 1,
        pattern = r"^[^\u0000]*[^\u0000\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\u0000]*$")]
    pub file: Vec<u8>,
    /// Overrides the `file` part's filename; as `filename` in the JSON body.
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 255,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000/\\][^\u0000-\u001f\u007f-\u009f/\\]*$"
    )]
    pub filename: Option<String>,
    /// Overrides the `file` part's content type: `text/plain`, `text/markdown` or `text/html`,
    /// as `content_type` in the JSON body, or `application/pdf`.
    #[schema(
        nullable = false,
        pattern = r"^[\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*(?:(?:[Tt][Ee][Xx][Tt]/(?:[Pp][Ll][Aa][Ii][Nn]|[Mm][Aa][Rr][Kk][Dd][Oo][Ww][Nn]|[Hh][Tt][Mm][Ll])|[Aa][Pp][Pp][Ll][Ii][Cc][Aa][Tt][Ii][Oo][Nn]/[Pp][Dd][Ff])[\t-\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*(?:;[\s\S]*)?)?$"
    )]
    pub content_type: Option<String>,
    /// As `title` in the JSON body.
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 1000,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub title: Option<String>,
    /// As `url` in the JSON body.
    #[schema(nullable = false, max_length = 2048, pattern = "(set from SourceUrl::PATTERN)")]
    pub url: Option<String>,
    /// As `metadata` in the JSON body, written as JSON text: `{"lang": "en"}`.
    #[schema(value_type = Option<SourceMetadata>, nullable = false, example = json!({"lang": "en"}))]
    pub metadata: Option<String>,
    /// As `key` in the JSON body.
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 1024,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]+$"
    )]
    pub key: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Source)]
pub struct SourceDto {
    pub id: Uuid,
    pub world_id: Uuid,
    pub book_number: u32,
    pub filename: String,
    pub content_type: String,
    pub sha256: String,
    /// Length of the stored text in chars (Unicode scalar values).
    pub chars: u64,
    /// As given at upload; for an HTML page uploaded without one, the page's own title (with
    /// `sources.html = "main"`); `null` otherwise.
    pub title: Option<String>,
    /// As given at upload; `null` when none was.
    pub url: Option<String>,
    /// As given at upload; `{}` when none was.
    pub metadata: BTreeMap<String, String>,
    pub chunks: u64,
    pub embedded: u64,
    pub pending: u64,
    pub failed: u64,
    pub created_at: DateTime<Utc>,
    /// Your name for the source, if you gave one.
    pub key: Option<String>,
    /// 1 at creation, one more each time a replace switches in; also the `ETag` (`"3"`).
    pub version: u32,
    /// When the version served now was stored.
    pub updated_at: DateTime<Utc>,
    /// A new version being embedded, which the source switches to (at once, for every
    /// retrieval) when all its chunks are; until then retrievals see the current one.
    /// `null` when none is.
    pub pending_version: Option<PendingVersionDto>,
}

/// A staged version of a source.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = PendingVersion)]
pub struct PendingVersionDto {
    pub version: u32,
    /// The `replace` job embedding it: its progress and failures are there.
    pub job_id: Uuid,
    pub created_at: DateTime<Utc>,
}

impl From<SourceView> for SourceDto {
    fn from(v: SourceView) -> Self {
        SourceDto {
            id: v.source.id.0,
            world_id: v.source.world_id.0,
            book_number: v.source.book_number,
            filename: v.source.filename,
            content_type: v.source.content_type,
            sha256: v.source.sha256,
            chars: v.source.chars,
            title: v.source.details.title,
            url: v.source.details.url,
            metadata: v.source.details.metadata.into_map(),
            chunks: v.counts.chunks,
            embedded: v.counts.embedded,
            pending: v.counts.pending,
            failed: v.counts.failed,
            created_at: v.source.created_at,
            key: v.source.key,
            version: v.source.version,
            updated_at: v.source.updated_at,
            pending_version: v.source.pending.map(|p| PendingVersionDto {
                version: p.version,
                job_id: p.job_id.0,
                created_at: p.created_at,
            }),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SourceAccepted {
    pub source: SourceDto,
    /// The job embedding what was written: `ingest` for a new source, `replace` for a new
    /// version; `null` when nothing changed (`outcome: unchanged`).
    pub job: Option<JobDto>,
    /// `created` (202), `replaced` (202: a new version is being embedded while the current one
    /// keeps serving) or `unchanged` (200: the text and details are the version served now).
    #[schema(example = "created")]
    pub outcome: Outcome,
}

/// What an upload did.
#[derive(Clone, Copy, Debug, Serialize, ToSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Created,
    Replaced,
    Unchanged,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SourceList {
    pub sources: Vec<SourceDto>,
    /// The `offset` of the next page; `null` on the last one.
    pub next_offset: Option<u64>,
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

/// Which bodies a route takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Written {
    /// JSON (and, as before the upload route existed, multipart).
    Json,
    Multipart,
    Either,
}

/// What an upload writes to.
enum Target {
    /// A new source (or, with a `key` the world has, that source).
    New,
    Id(SourceId),
    Key(SourceKey),
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

/// Reads an upload from a multipart body or a JSON one (as `routes` takes), and writes it.
async fn accept(
    state: &AppState,
    world_id: WorldId,
    req: Request,
    routes: Written,
    target: Target,
) -> Result<Response, ApiError> {
    let precondition = precondition(req.headers())?;
    let idempotency = idempotency_key(req.headers())?;

    // Taken before the body is read: bodies in memory and chunking work are bounded too.
    // The slot goes with the upload to the blocking work that reads and splits it, and is free
    // again when that work ends (not when this request does).
    let Some(slot) = state.uploads.acquire(state.upload_wait).await else {
        return Err(ApiError::new(
            ErrorCode::ServerBusy,
            format!(
                "{} uploads are being processed, the most this server takes at once (server.max_concurrent_uploads); \
                 retry shortly",
                state.uploads.max()
            ),
        ));
    };
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
    let mut add = if is_multipart {
        let multipart = Multipart::from_request(req, state)
            .await
            .map_err(|err| ApiError::invalid_request(format!("invalid multipart body: {}", err.body_text())))?;
        let (form, part) = AddSourceUpload::read(multipart, state.max_body_bytes).await?;
        form.into_source(part, slot)?
    } else {
        let ApiJson(body) = ApiJson::<AddSourceRequest>::from_request(req, state).await?;
        let (title, url, metadata) = parse_details(body.title.as_deref(), body.url.as_deref(), body.metadata.as_ref())?;
        AddSource {
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
        }
    };
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
    let mut reservation = match idempotency {
        None => None,
        Some(key) => match state
            .sources
            .reserve_idempotency(world_id, &key, &add.fingerprint())
            .await?
        {
            Idempotent::Reserved => Some(Reservation {
                sources: state.sources.clone(),
                world: world_id,
                key: Some(key),
            }),
            Idempotent::Done { status, response } => return Ok(replay(status, response)),
            Idempotent::Mismatch => {
                return Err(ApiError::new(
                    ErrorCode::IdempotencyKeyReused,
                    "this Idempotency-Key was used for a different request in this world; a new request needs a new key",
                )
                .with_details(serde_json::json!({"field": IDEMPOTENCY_KEY})));
            }
            Idempotent::InProgress => {
                return Err(ApiError::new(
                    ErrorCode::IdempotencyKeyInUse,
                    "a request with this Idempotency-Key is still being processed; retry once it has answered",
                )
                .with_details(serde_json::json!({"field": IDEMPOTENCY_KEY})));
            }
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

/// The header that makes a source write idempotent.
const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// `Idempotency-Key`, checked: 1 to 255 visible ASCII characters.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
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
struct Reservation {
    sources: Arc<SourceService>,
    world: WorldId,
    /// `None` once recorded or released.
    key: Option<String>,
}

impl Reservation {
    async fn record(&mut self, status: StatusCode, body: &SourceAccepted) {
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

    async fn release(&mut self) {
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

/// A `key` field as sent, parsed.
fn parse_key(raw: Option<&str>) -> Result<Option<SourceKey>, ApiError> {
    raw.map(SourceKey::parse)
        .transpose()
        .map_err(|m| ApiError::invalid_request(m).with_details(serde_json::json!({"field": "key"})))
}

/// The `file` part's own name and content type (`application/octet-stream` counts as none).
struct FilePart {
    name: Option<String>,
    content_type: Option<String>,
}

impl AddSourceUpload {
    /// Reads a multipart upload: one `file` part, optionally `filename` and `content_type` text
    /// parts that override the file part's own, and optionally `title`, `url`, `metadata` (JSON
    /// text) and `key` parts. Any other part, or a second one of a kind, is refused as JSON
    /// bodies refuse unknown or repeated fields. Returns the form and the file part's own name
    /// and content type.
    async fn read(mut multipart: Multipart, limit: usize) -> Result<(Self, FilePart), ApiError> {
        let too_large = |err: axum::extract::multipart::MultipartError| {
            if err.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::payload_too_large(limit)
            } else {
                ApiError::invalid_request(format!("invalid multipart body: {}", err.body_text()))
            }
        };
        let mut file: Option<(FilePart, Vec<u8>)> = None;
        let mut form = AddSourceUpload {
            file: Vec::new(),
            filename: None,
            content_type: None,
            title: None,
            url: None,
            metadata: None,
            key: None,
        };
        while let Some(field) = multipart.next_field().await.map_err(too_large)? {
            let name = field.name().unwrap_or_default().to_owned();
            let repeated = || field_error(&name, format!("the upload has more than one `{name}` part"));
            let slot = match name.as_str() {
                "file" => {
                    if file.is_some() {
                        return Err(repeated());
                    }
                    let part = FilePart {
                        name: field.file_name().map(str::to_owned),
                        content_type: field
                            .content_type()
                            .map(str::to_owned)
                            .filter(|ct| ct != "application/octet-stream"),
                    };
                    let bytes = field.bytes().await.map_err(too_large)?;
                    file = Some((part, Vec::from(bytes)));
                    continue;
                }
                "filename" => &mut form.filename,
                "content_type" => &mut form.content_type,
                "title" => &mut form.title,
                "url" => &mut form.url,
                "metadata" => &mut form.metadata,
                "key" => &mut form.key,
                _ => {
                    return Err(field_error(
                        &name,
                        format!(
                            "unknown part `{name}` (expected `file`, and optionally `filename`, `content_type`, \
                             `title`, `url`, `metadata` and `key`)"
                        ),
                    ));
                }
            };
            if slot.is_some() {
                return Err(repeated());
            }
            *slot = Some(field.text().await.map_err(too_large)?);
        }
        let Some((part, bytes)) = file else {
            return Err(field_error("file", "multipart upload has no `file` field".into()));
        };
        form.file = bytes;
        Ok((form, part))
    }

    /// The upload the form describes, its parts checked as a JSON body's fields are.
    fn into_source(self, part: FilePart, slot: UploadSlot) -> Result<AddSource, ApiError> {
        let AddSourceUpload {
            file: bytes,
            filename,
            content_type,
            title,
            url,
            metadata,
            key,
        } = self;
        let metadata = match metadata {
            None => None,
            Some(raw) => Some(serde_json::from_str::<Value>(&raw).map_err(|err| {
                field_error(
                    "metadata",
                    format!("the `metadata` part must be a JSON object of string values ({err})"),
                )
            })?),
        };
        let (title, url, metadata) = parse_details(title.as_deref(), url.as_deref(), metadata.as_ref())?;
        let content_type = content_type.or(part.content_type);
        // A PDF by its content type, or, when none is given, by its name or its `%PDF-` header.
        let named = filename.as_deref().or(part.name.as_deref());
        let pdf = match content_type.as_deref().map(str::trim).filter(|ct| !ct.is_empty()) {
            Some(ct) => SourceFormat::of(ct) == Some(SourceFormat::Pdf),
            None => {
                named.is_some_and(|n| SourceFormat::guess(n) == SourceFormat::Pdf)
                    || crate::chunking::pdf::looks_like_pdf(&bytes)
            }
        };
        // A file part sent without a name is named after its content type, so that the name
        // does not contradict how the text is read.
        let filename = filename.or(part.name).unwrap_or_else(|| {
            let format = if pdf {
                Some(SourceFormat::Pdf)
            } else {
                content_type.as_deref().and_then(SourceFormat::of)
            };
            format!("upload.{}", format.unwrap_or(SourceFormat::Plain).extension())
        });
        let document = if pdf {
            Document::Pdf(bytes)
        } else {
            Document::Text(
                String::from_utf8(bytes)
                    .map_err(|_| field_error("file", "the uploaded file is not valid UTF-8 text (nor a PDF)".into()))?,
            )
        };
        Ok(AddSource {
            slot,
            filename,
            content_type,
            document,
            title,
            url,
            metadata,
            key: parse_key(key.as_deref())?,
            target: None,
            precondition: Precondition::default(),
        })
    }
}

/// `invalid_request` naming a part of a multipart upload.
fn field_error(field: &str, message: String) -> ApiError {
    ApiError::invalid_request(message).with_details(serde_json::json!({"field": field}))
}

/// A source's title, URL and metadata as sent (absent or `null`: none), parsed; a bad one is
/// `invalid_request` naming its field (`metadata.<key>` for a bad value of a key).
fn parse_details(
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

/// A chunk of a source with the state of its embedding.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Chunk)]
pub struct ChunkDto {
    /// The chunk's id, as retrieval results, duplicates and citations name it.
    pub id: Uuid,
    /// 0-based reading order within the source.
    pub chunk_number: u32,
    /// Offsets in chars (Unicode scalar values) of the stored text, end exclusive.
    pub char_start: u64,
    pub char_end: u64,
    pub token_count: u32,
    /// The embedded text: exactly the stored text's chars `char_start..char_end`.
    pub chunk_text: String,
    /// Context carried in from the previous chunk (ends at `char_start`); not embedded.
    pub overlap_text: String,
    /// Hex sha256 of `chunk_text`.
    pub sha256: String,
    /// For a PDF's chunks, the page (1-based) the chunk starts on; `null` for other formats.
    pub page: Option<u32>,
    /// `pending`, `embedded` or `failed`.
    pub state: String,
    /// Embedding attempts spent (rate limits spend none).
    pub attempts: u32,
    /// The failure of the latest attempt, while it stands: set on failed chunks and on pending
    /// ones waiting for a retry, null otherwise.
    pub last_error: Option<ChunkErrorDto>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ChunkError)]
pub struct ChunkErrorDto {
    /// Stable code, e.g. `provider_error`, `input_too_large`, `token_count_failed`.
    pub code: String,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChunkList {
    pub chunks: Vec<ChunkDto>,
    /// Chunks of the source in the world's active run (all pages).
    pub total: u64,
}

impl From<ChunkState> for ChunkDto {
    fn from(c: ChunkState) -> Self {
        ChunkDto {
            id: c.chunk.id.0,
            chunk_number: c.chunk.chunk_number,
            char_start: c.chunk.char_start,
            char_end: c.chunk.char_end,
            token_count: c.chunk.token_count,
            chunk_text: c.chunk.chunk_text,
            overlap_text: c.chunk.overlap_text,
            sha256: c.chunk.sha256,
            page: c.chunk.page,
            state: c.state.as_str().to_owned(),
            attempts: c.attempts,
            last_error: c.last_error.map(|e| ChunkErrorDto {
                code: e.code,
                message: e.message,
            }),
        }
    }
}

impl From<ChunkPage> for ChunkList {
    fn from(page: ChunkPage) -> Self {
        ChunkList {
            chunks: page.chunks.into_iter().map(Into::into).collect(),
            total: page.total,
        }
    }
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
