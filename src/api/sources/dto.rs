//! The bodies of the sources routes: the JSON and multipart forms of an upload, and the source,
//! chunk and list answers, with their OpenAPI schemas.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::api::jobs::JobDto;
use crate::domain::{ChunkPage, ChunkState, Metadata};
use crate::service::sources::SourceView;

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
pub(in crate::api) fn metadata_schema(min_keys: usize) -> utoipa::openapi::schema::Object {
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
