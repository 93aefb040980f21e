//! What an upload's document may be: its filename, the content type it is read as, the title
//! a page gives itself, and the refusals of a text or PDF that cannot become source text.

use crate::chunking::{self, ChunkError};
use crate::domain::{SourceFormat, SourceTitle};
use crate::service::{Invalid, ServiceError, ServiceResult, Unprocessable};

use super::Document;

/// The refusal of a text holding U+0000.
pub(super) fn nul_refused() -> ServiceError {
    ServiceError::invalid(
        Invalid::Request,
        "text",
        "the text contains a NUL character (U+0000); send the document as text",
    )
}

/// The content type an upload is read as: a PDF's own, the one sent (lower-cased), or the one
/// its filename suggests. Text holding U+0000, and a PDF content type on text, are refused.
pub(super) fn content_type_of(
    document: &Document,
    content_type: Option<&str>,
    filename: &str,
) -> ServiceResult<String> {
    // PostgreSQL cannot store U+0000 in text, and no document holds it as text: refused on
    // every backend alike, in the text as sent (what the OpenAPI document's `pattern` says;
    // an HTML page's conversion drops it, but the page is refused all the same).
    if let Document::Text(text) = document
        && text.contains('\0')
    {
        return Err(nul_refused());
    }
    let content_type = match (document, content_type.map(str::trim)) {
        (Document::Pdf(_), _) => SourceFormat::Pdf.media_type().to_owned(),
        (Document::Text(_), Some(ct)) if !ct.is_empty() => ct.to_ascii_lowercase(),
        (Document::Text(_), _) => SourceFormat::guess(filename).media_type().to_owned(),
    };
    if matches!(document, Document::Text(_)) && SourceFormat::of(&content_type) == Some(SourceFormat::Pdf) {
        return Err(ServiceError::invalid(
            Invalid::Request,
            "content_type",
            "a PDF is uploaded as a file: POST /v1/worlds/{world_id}/sources/upload (multipart/form-data)",
        ));
    }
    Ok(content_type)
}

/// The title a page or PDF gives itself, cut to what a source title may be; `None` when
/// nothing of it is left.
pub(super) fn page_title_of(title: Option<String>) -> Option<SourceTitle> {
    title.and_then(|t| {
        let t: String = t
            .chars()
            .filter(|c| !c.is_control())
            .take(SourceTitle::MAX_CHARS)
            .collect();
        SourceTitle::parse(&t).ok()
    })
}

/// The last path component, trimmed; 1..=255 chars.
pub(super) fn clean_filename(raw: &str) -> ServiceResult<String> {
    // The limits apply to the name as sent (what the OpenAPI document's `maxLength` and
    // `pattern` say); what is kept is its last path segment, trimmed.
    if raw.chars().count() > 255 || raw.chars().any(char::is_control) {
        return Err(ServiceError::invalid(
            Invalid::Request,
            "filename",
            "filename must be at most 255 characters without control characters",
        ));
    }
    let name = raw.rsplit(['/', '\\']).next().unwrap_or(raw).trim();
    if name.is_empty() {
        return Err(ServiceError::invalid(
            Invalid::Request,
            "filename",
            "filename must not be blank (nor end with `/` or `\\`)",
        ));
    }
    Ok(name.to_owned())
}

/// What a text upload that cannot become source text gets.
pub(super) fn text_refused(err: ChunkError) -> ServiceError {
    match err {
        ChunkError::UnsupportedContentType(ct) => ServiceError::invalid(
            Invalid::Request,
            "content_type",
            format!("unsupported content type `{ct}` (use text/plain, text/markdown or text/html, or upload a PDF)"),
        ),
        ChunkError::Empty => ServiceError::invalid(Invalid::Request, "text", "the source has no text"),
        ChunkError::TooLarge { limit } => ServiceError::TooLarge {
            limit,
            message: format!("the text this page converts to is larger than {limit} bytes (server.max_body_bytes)"),
        },
        ChunkError::Stopped => ServiceError::internal("the upload was abandoned"),
    }
}

/// What a PDF that gives no text gets.
pub(super) fn pdf_refused(err: chunking::pdf::PdfError) -> ServiceError {
    use chunking::pdf::PdfError;
    match err {
        PdfError::Unreadable(message) => ServiceError::Unprocessable {
            kind: Unprocessable::UnreadableDocument,
            message,
        },
        PdfError::NoText { pages } => ServiceError::Unprocessable {
            kind: Unprocessable::NoTextLayer,
            message: format!(
                "the PDF has {pages} page(s) but no text layer (a scan, or images of text); \
                 run it through OCR (e.g. ocrmypdf) and upload the result"
            ),
        },
        PdfError::TooLarge { limit } => ServiceError::TooLarge {
            limit,
            message: format!("the text of this PDF is larger than {limit} bytes (server.max_body_bytes)"),
        },
        PdfError::Stopped => ServiceError::internal("the upload was abandoned"),
    }
}
