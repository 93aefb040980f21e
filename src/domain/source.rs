//! Sources ("books") and their chunks.

use chrono::{DateTime, Utc};

use super::ids::{ChunkId, JobId, RunId, SourceId, WorldId};
use super::job::{JobStatus, ManifestState};
use super::source_details::SourceDetails;

/// A stored source document. The full text is kept so a re-ingest needs no upload.
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    pub id: SourceId,
    pub world_id: WorldId,
    /// 1, 2, … in the order sources were added to the world.
    pub book_number: u32,
    pub filename: String,
    pub content_type: String,
    /// Hex sha256 of the UTF-8 text.
    pub sha256: String,
    /// Length of the text in chars (Unicode scalar values).
    pub chars: u64,
    /// Title, URL and metadata, as given at upload.
    pub details: SourceDetails,
    pub created_at: DateTime<Utc>,
    /// The caller's name for the source (a path, URL or document id), unique in its world.
    pub key: Option<String>,
    /// 1 at creation, one more at each replace that switched.
    pub version: u32,
    /// When the serving version was stored (its creation, or the replace's switch).
    pub updated_at: DateTime<Utc>,
    /// A replace being embedded, which the source becomes once every chunk of it is.
    pub pending: Option<PendingVersion>,
}

/// A version of a source that is staged but not served yet: a hidden source row whose chunks
/// are embedded beside the serving ones (see `docs/living-sources.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingVersion {
    /// The hidden row's id: its chunks and points are filed under it until the switch.
    pub staged_id: SourceId,
    pub version: u32,
    pub job_id: JobId,
    pub created_at: DateTime<Utc>,
}

impl Source {
    /// What a context prefix names the source by: its title, else its filename.
    #[must_use]
    pub fn context_title(&self) -> &str {
        context_title(&self.details, &self.filename)
    }
}

/// What a context prefix names a source by: the title of `details`, else `filename`.
#[must_use]
pub fn context_title<'a>(details: &'a SourceDetails, filename: &'a str) -> &'a str {
    details.title.as_deref().unwrap_or(filename)
}

/// A validated source key: 1..=1024 chars, no control characters; taken exactly as sent (no
/// trimming or case folding: `docs/a.md` and `docs/A.md` are two keys).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceKey(String);

impl SourceKey {
    pub const MAX_CHARS: usize = 1024;
    /// The rule as a JSON Schema pattern (with `minLength` 1 and `maxLength` [`Self::MAX_CHARS`]).
    pub const PATTERN: &'static str = r"^[^\u0000-\u001f\u007f-\u009f]+$";

    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.is_empty() {
            return Err("key must not be empty".into());
        }
        if raw.chars().count() > Self::MAX_CHARS {
            return Err(format!("key must be at most {} characters", Self::MAX_CHARS));
        }
        if raw.chars().any(char::is_control) {
            return Err("key must not contain control characters".into());
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SourceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A source to insert; `book_number` is assigned by the store inside the write transaction.
#[derive(Clone, Debug)]
pub struct NewSource {
    pub id: SourceId,
    pub world_id: WorldId,
    /// The run the chunks were cut for: the world's active run when it was read. Refused with
    /// `RunChanged` when the world serves another run by the time of the write.
    pub run: RunId,
    pub filename: String,
    pub content_type: String,
    pub text: String,
    pub details: SourceDetails,
    pub now: DateTime<Utc>,
    /// The caller's key, for a new source; `None` for a staged version (its source has it).
    pub key: Option<SourceKey>,
}

/// One chunk of a source in one run, as the chunker produced it.
#[derive(Clone, Debug, PartialEq)]
pub struct NewChunk {
    pub chunk_number: u32,
    pub char_start: u64,
    pub char_end: u64,
    pub token_count: u32,
    pub chunk_text: String,
    pub overlap_text: String,
    /// The page (1-based) the chunk starts on, for a PDF's chunks.
    pub page: Option<u32>,
    /// What is embedded before the text in a world with `chunking.context_prefix` (the
    /// source's title and the chunk's section path); empty otherwise. Not stored text.
    pub embed_prefix: String,
    /// Its tokens, by the world's counter: what the prefix adds to the chunk's embedding.
    pub embed_prefix_tokens: u32,
}

impl NewChunk {
    /// The text the provider embeds: the prefix, then the chunk's text.
    #[must_use]
    pub fn embed_text(&self) -> String {
        format!("{}{}", self.embed_prefix, self.chunk_text)
    }
}

/// A stored chunk.
#[derive(Clone, Debug, PartialEq)]
pub struct Chunk {
    pub id: ChunkId,
    pub world_id: WorldId,
    pub run_id: RunId,
    pub source_id: SourceId,
    pub book_number: u32,
    pub chunk_number: u32,
    pub char_start: u64,
    pub char_end: u64,
    pub token_count: u32,
    pub chunk_text: String,
    pub overlap_text: String,
    /// Hex sha256 of the text embedded: `embed_prefix`, then `chunk_text`.
    pub sha256: String,
    /// What was embedded before the text (see [`NewChunk::embed_prefix`]); empty for most.
    pub embed_prefix: String,
    /// The page (1-based) the chunk starts on, for a PDF's chunks.
    pub page: Option<u32>,
    /// The version of the source text the chunk was cut from.
    pub version: u32,
}

/// Per-source counts of chunk states (in the world's active run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceCounts {
    pub chunks: u64,
    pub embedded: u64,
    pub pending: u64,
    pub failed: u64,
}

/// A chunk with what retrieval shows and verifies: its source's filename and its slot's point.
#[derive(Clone, Debug, PartialEq)]
pub struct ChunkView {
    pub chunk: Chunk,
    pub source_filename: String,
    /// The vector point of the chunk's slot.
    pub point_id: uuid::Uuid,
    /// Set when the chunk belongs to a staged version of that source (not served yet).
    pub staged_for: Option<SourceId>,
}

/// A parent as computed: consecutive chunks `first_chunk..=last_chunk` of one source in one
/// run, spanning `char_start..char_end` of the stored text (the first chunk's start to the
/// last one's end); `token_count` is the chunks' counts summed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewParent {
    pub parent_number: u32,
    pub first_chunk: u32,
    pub last_chunk: u32,
    pub char_start: u64,
    pub char_end: u64,
    pub token_count: u64,
}

/// A chunk without its texts: where it stands and what it costs. A context is planned on these
/// and only the chunks it keeps are read whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkOutline {
    pub id: ChunkId,
    pub source_id: SourceId,
    pub book_number: u32,
    pub chunk_number: u32,
    pub char_start: u64,
    pub char_end: u64,
    pub token_count: u32,
    /// Hex sha256 of the chunk's text.
    pub sha256: String,
    pub page: Option<u32>,
    pub version: u32,
}

/// A stored parent, with the source it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parent {
    pub source_id: SourceId,
    pub parent: NewParent,
}

impl Parent {
    /// Whether chunk `number` of `source` belongs to this parent.
    #[must_use]
    pub fn holds(&self, source: SourceId, number: u32) -> bool {
        self.source_id == source && (self.parent.first_chunk..=self.parent.last_chunk).contains(&number)
    }
}

/// How much text one source holds in one run: its chunks and their tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceSize {
    pub source_id: SourceId,
    /// Its place in reading order.
    pub book_number: u32,
    pub chunks: u64,
    pub tokens: u64,
}

/// The last failed attempt of a chunk's embedding, as recorded on its manifest entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryError {
    pub code: String,
    pub message: String,
}

/// A chunk with the state of its manifest entry, as the chunk listing shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChunkState {
    pub chunk: Chunk,
    pub state: ManifestState,
    /// Attempts spent (rate limits spend none).
    pub attempts: u32,
    /// Set while the latest attempt's failure stands: on failed entries, and on pending ones
    /// waiting for a retry. Cleared when the chunk is embedded or requeued.
    pub last_error: Option<EntryError>,
}

/// One page of a source's chunks in the world's active run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChunkPage {
    pub chunks: Vec<ChunkState>,
    /// Chunks of the source in the active run, whatever the page.
    pub total: u64,
}

/// What deleting a source removed and which unfinished jobs it ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceDeletion {
    /// Chunks removed, over every run of the world.
    pub chunks: u64,
    /// Unfinished jobs that lost all their remaining work and ended, with their new status.
    pub finished_jobs: Vec<(JobId, JobStatus)>,
    /// The staged version deleted with the source (its points carry this id).
    pub staged: Option<SourceId>,
}

/// The essence of a `Content-Type` value: `type/subtype`, lower-cased, parameters dropped
/// (`Text/HTML; charset=utf-8` → `text/html`). The one place quarry reads a media type.
pub fn media_essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The document formats a source can be uploaded as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceFormat {
    Plain,
    Markdown,
    Html,
    /// Uploaded as a file only: its text is extracted page by page.
    Pdf,
}

impl SourceFormat {
    /// The format of a `Content-Type` value; `None` for any other media type.
    pub fn of(content_type: &str) -> Option<Self> {
        match media_essence(content_type).as_str() {
            "text/plain" => Some(SourceFormat::Plain),
            "text/markdown" => Some(SourceFormat::Markdown),
            "text/html" => Some(SourceFormat::Html),
            "application/pdf" => Some(SourceFormat::Pdf),
            _ => None,
        }
    }

    /// The format a file name suggests: Markdown for `.md`/`.markdown`, HTML for
    /// `.html`/`.htm`, PDF for `.pdf`, else plain text.
    pub fn guess(filename: &str) -> Self {
        let lower = filename.to_ascii_lowercase();
        if lower.ends_with(".md") || lower.ends_with(".markdown") {
            SourceFormat::Markdown
        } else if lower.ends_with(".html") || lower.ends_with(".htm") {
            SourceFormat::Html
        } else if lower.ends_with(".pdf") {
            SourceFormat::Pdf
        } else {
            SourceFormat::Plain
        }
    }

    pub fn media_type(self) -> &'static str {
        match self {
            SourceFormat::Plain => "text/plain",
            SourceFormat::Markdown => "text/markdown",
            SourceFormat::Html => "text/html",
            SourceFormat::Pdf => "application/pdf",
        }
    }

    /// The file extension of a source sent without a name.
    pub fn extension(self) -> &'static str {
        match self {
            SourceFormat::Plain => "txt",
            SourceFormat::Markdown => "md",
            SourceFormat::Html => "html",
            SourceFormat::Pdf => "pdf",
        }
    }
}
