//! Sentence-aware, token-limited chunking of source text.
//!
//! [`prepare_text`] turns an upload into the text quarry stores (HTML becomes readable text, plain
//! text and markdown are kept byte for byte); [`split`] cuts that text into chunks of whole
//! sentences that fit the world's [`ChunkingProfile`], with char offsets into the stored text and
//! a little context carried in from the previous chunk. Tokens are counted on the exact text
//! that is stored, by the world's model's own tokenizer where quarry has it ([`split_with`]: the
//! local model's WordPiece), else as `cl100k_base` tokens ([`split`], [`count_tokens`]; exact
//! for OpenAI's models, an estimate for Google's, whose exact count is taken at dispatch).
//!
//! # Decisions
//! - **Boundaries.** Text is first cut into blocks by line: blank lines end a paragraph, and a
//!   markdown ATX heading (`#`…`######`), a list item (`-`, `*`, `+`, `1.`, `1)`), a thematic
//!   break and each line inside a code fence (three backticks or `~~~`) start a block of their
//!   own (so `# comment` lines in code are not headings). Inside a paragraph, sentences come from
//!   Unicode sentence segmentation (UAX #29), run with single line breaks read as spaces so
//!   hard-wrapped prose is not cut at every line end.
//! - **Packing.** Whole sentences are packed greedily. Counts of the parts only guide the search:
//!   BPE is not additive, so every emitted chunk is counted exactly and shortened (by binary
//!   search over sentence ends) until it fits. A heading always opens a new chunk, unless the
//!   chunk so far holds only headings — a section title travels with its first sentences. So
//!   does the start of every section the source's format marks ([`section_starts`]: setext and
//!   reStructuredText titles, plain text's question lines and numbered headings…), so no chunk
//!   holds the end of one section and the start of the next ([`split_source`]).
//! - **Overlong sentences** are cut into windows of at most `max_tokens` tokens: the cut is placed
//!   after the last whole character that the first `max_tokens` tokens cover (BPE tokens may end
//!   inside a multi-byte character; we never do), moved back to the start of its grapheme cluster
//!   (so an accent or an emoji sequence is not split when the cluster fits), then to the last
//!   whitespace in the window when there is one, and re-counted; the window shrinks until its
//!   exact count fits. A later window does not start a sentence (for overlap purposes).
//! - **Overlap.** `overlap_text` is the stored text that ends exactly where the chunk starts,
//!   taken from the previous chunk (and the whitespace after it): the longest tail that starts at
//!   a sentence start and counts at most `overlap_tokens`; when no sentence start fits, the tail
//!   starts at the first word start (UAX #29 word boundaries, so CJK text has one per ideograph)
//!   that fits; when none fits (a long run without spaces), at the first grapheme that does, so
//!   it still carries about `overlap_tokens` of context. It is empty only for the first chunk or
//!   with `overlap_tokens` 0. It is never embedded.
//! - **HTML** goes through `html5gum`, a WHATWG-conformant HTML tokenizer with no dependencies of
//!   its own (lighter to build than html5ever/scraper, and unlike ad-hoc tag stripping it decodes
//!   every named and numeric entity and knows that `<script>` and `<style>` hold raw text). A tree
//!   builder is not needed to read text out of a page. See [`html`] for the rules.
//! - **Cost.** Every piece of text is tokenized a small, bounded number of times (each sentence
//!   once, each chunk about once, each overlap about once), and never a string longer than a few
//!   windows, so splitting is linear in the input and safe on multi-MB uploads. Runs of more than
//!   64 chars that neither end a sentence nor begin a letter (spaces, digits, punctuation, marks,
//!   format chars) are cut before sentence segmentation, which is super-quadratic on them in
//!   `unicode-segmentation` (10k spaces after a full stop take seconds). HTML conversion is
//!   linear too (list indentation stops growing after a few levels) and bounded in size by the
//!   caller. Both can be stopped midway ([`split_until`], [`html::to_text_within`]): an upload
//!   whose request is abandoned stops costing CPU.
//! - **Odd profiles.** `max_tokens` below 4 is treated as 4 (one char is at most 4 byte tokens);
//!   the API never stores a profile below [`ChunkingProfile::MIN_MAX_TOKENS`] anyway.

pub mod html;
mod parents;
pub mod pdf;
mod prefix;
mod sections;
mod segment;
mod split;
mod tokens;

pub use parents::{ChunkSpan, parents, parents_of};
pub use prefix::add_context_prefixes;
pub use sections::{section_start_bytes, section_starts};
pub use split::{split, split_source, split_until, split_with};
pub use tokens::{Cl100k, TokenCounter};

use crate::domain::SourceFormat;

/// Why an upload cannot become source text. The API maps both variants to 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    /// The content type is not one quarry can read.
    #[error("unsupported content type `{0}` (expected text/plain, text/markdown or text/html)")]
    UnsupportedContentType(String),
    /// Nothing but whitespace (or, for HTML, nothing readable) is left.
    #[error("the source contains no text")]
    Empty,
    /// The text an HTML page converts to is longer than the limit.
    #[error("the converted text is larger than {limit} bytes")]
    TooLarge { limit: usize },
    /// The caller gave up (the request was abandoned).
    #[error("stopped")]
    Stopped,
}

/// The text quarry stores for an upload of `content_type`; chunk offsets refer to it.
///
/// `text/plain` and `text/markdown` are returned unchanged, `text/html` is converted to readable
/// text. Media type parameters (`; charset=utf-8`) are ignored: `raw` is already decoded.
/// The converted text may be at most `max_bytes` long; `stop` is asked now and then whether the
/// caller still wants the answer.
///
/// # Errors
/// [`ChunkError::UnsupportedContentType`] for any other content type, [`ChunkError::Empty`] when
/// only whitespace is left, [`ChunkError::TooLarge`] past `max_bytes`, [`ChunkError::Stopped`]
/// when `stop` said so.
pub fn prepare_text(
    content_type: &str,
    raw: String,
    max_bytes: usize,
    stop: &dyn Fn() -> bool,
) -> Result<String, ChunkError> {
    let text = match SourceFormat::of(content_type) {
        Some(SourceFormat::Plain | SourceFormat::Markdown) => raw,
        Some(SourceFormat::Html) => html::to_text_within(&raw, max_bytes, stop).map_err(|stopped| match stopped {
            html::Stopped::TooLarge => ChunkError::TooLarge { limit: max_bytes },
            html::Stopped::Asked => ChunkError::Stopped,
        })?,
        // A PDF is bytes, never text: it is read by `pdf::to_text`.
        Some(SourceFormat::Pdf) | None => {
            return Err(ChunkError::UnsupportedContentType(content_type.trim().to_owned()));
        }
    };
    if text.trim().is_empty() {
        return Err(ChunkError::Empty);
    }
    Ok(text)
}

/// What an HTML page keeps (`sources.html`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HtmlContent {
    /// The main content only ([`html::main_content`]); the whole page when none stands out.
    #[default]
    Main,
    /// Everything a reader would see, navigation included.
    All,
}

/// A source's text as quarry stores it, and the title its page named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    pub text: String,
    /// The `<title>` (or heading) of an HTML page whose main content was kept.
    pub title: Option<String>,
}

/// [`prepare_text`], with an HTML page reduced to its main content when `html` says so
/// (navigation, tables of contents, breadcrumbs and footers dropped; the page's title kept).
///
/// # Errors
/// As [`prepare_text`].
pub fn prepare_source(
    content_type: &str,
    raw: String,
    max_bytes: usize,
    html: HtmlContent,
    stop: &dyn Fn() -> bool,
) -> Result<Prepared, ChunkError> {
    if html == HtmlContent::Main
        && SourceFormat::of(content_type) == Some(SourceFormat::Html)
        && let Some(main) = html::main_content(&raw, stop).map_err(|_| ChunkError::Stopped)?
    {
        let text = prepare_text(content_type, main.html, max_bytes, stop)?;
        return Ok(Prepared {
            text,
            title: main.title,
        });
    }
    let text = prepare_text(content_type, raw, max_bytes, stop)?;
    Ok(Prepared { text, title: None })
}

/// Number of `cl100k_base` tokens in `text` (special-token markers count as ordinary text).
#[must_use]
pub fn count_tokens(text: &str) -> u32 {
    u32::try_from(Cl100k.count(text)).unwrap_or(u32::MAX)
}
