//! PDF to text, page by page, through `pdf-extract` (a pure-Rust text extractor over `lopdf`).
//!
//! The text quarry stores for a PDF is its pages' text in order, each page's text ending in a
//! form feed ([`PAGE_BREAK`]) before the next page, the old plain-text convention for a page
//! break: so the stored text itself says where each page starts, and a chunk's page is one
//! more than the page breaks before it ([`page_at`]) — also when a re-ingest cuts the text
//! again. Ligatures and other compatibility characters are folded (NFKC: "ﬁle" is "file").
//!
//! Bounded, since an upload is untrusted:
//! - **Memory.** Before the parser sees the file, every deflate stream in it is inflated into
//!   a counter, never into memory; a file whose streams would inflate past
//!   [`max_inflated_bytes`] (64 times its size, at least 64 MiB, at most 1 GiB) is refused, so
//!   no stream the parser inflates later can be a bomb. The text kept is at most the caller's
//!   limit, and a document has at most [`MAX_PAGES`] pages.
//! - **Time.** The caller's `stop` is asked before every page (the request was abandoned or
//!   timed out); a page costs milliseconds.
//! - **Panics.** The extractor panics on some damaged files (on purpose, its maintainer says);
//!   each page is extracted under `catch_unwind`, a page that panics or fails is left empty, and a
//!   document none of whose pages could be read is refused.

use std::panic::{AssertUnwindSafe, catch_unwind};

use unicode_normalization::UnicodeNormalization;

/// Ends each page's text but the last in the stored text of a PDF.
pub const PAGE_BREAK: char = '\u{c}';

/// The most pages a PDF may have.
pub const MAX_PAGES: usize = 10_000;

/// The media type of a PDF.
pub const MEDIA_TYPE: &str = "application/pdf";

/// Why a PDF gives no text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PdfError {
    /// Not a PDF the extractor can read: damaged, password-protected, or too large inflated.
    #[error("{0}")]
    Unreadable(String),
    /// Every page is empty: a scan or images without a text layer.
    #[error("the PDF has {pages} pages but no text layer")]
    NoText { pages: usize },
    /// The text is longer than the limit.
    #[error("the PDF's text is larger than {limit} bytes")]
    TooLarge { limit: usize },
    /// The caller gave up.
    #[error("stopped")]
    Stopped,
}

/// A PDF's text and title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdfText {
    /// The pages' text, [`PAGE_BREAK`] between pages.
    pub text: String,
    /// The document's own title (`/Title` of its information dictionary), when it has one.
    pub title: Option<String>,
    pub pages: usize,
    /// Pages that could not be read (left empty).
    pub unreadable_pages: usize,
}

/// Whether `bytes` look like a PDF (the `%PDF-` header within the first kilobyte, as readers
/// allow).
pub fn looks_like_pdf(bytes: &[u8]) -> bool {
    memchr::memmem::find(&bytes[..bytes.len().min(1024)], b"%PDF-").is_some()
}

/// The most bytes the streams of a file of `len` bytes may inflate to.
pub fn max_inflated_bytes(len: usize) -> u64 {
    (len as u64).saturating_mul(64).clamp(64 << 20, 1 << 30)
}

/// The page (1-based) of the char at `char_offset` of a PDF's stored text, given the char
/// offsets of its page breaks in order.
pub fn page_at(breaks: &[u64], char_offset: u64) -> u32 {
    let before = breaks.partition_point(|&b| b < char_offset);
    u32::try_from(before + 1).unwrap_or(u32::MAX)
}

/// The char offsets of the page breaks in `text`.
pub fn page_breaks(text: &str) -> Vec<u64> {
    text.chars()
        .enumerate()
        .filter(|&(_, c)| c == PAGE_BREAK)
        .map(|(i, _)| i as u64)
        .collect()
}

/// Tells each chunk of a PDF's stored `text` the page it starts on.
pub fn number_pages(text: &str, chunks: &mut [crate::domain::NewChunk]) {
    let breaks = page_breaks(text);
    for chunk in chunks {
        chunk.page = Some(page_at(&breaks, chunk.char_start));
    }
}

/// The text of the PDF `bytes`, at most `max_bytes` long.
///
/// # Errors
/// See [`PdfError`].
pub fn to_text(bytes: &[u8], max_bytes: usize, stop: &dyn Fn() -> bool) -> Result<PdfText, PdfError> {
    check_inflation(bytes, max_inflated_bytes(bytes.len()), stop)?;
    let loaded = catch_unwind(|| pdf_extract::Document::load_mem(bytes));
    let mut doc = match loaded {
        Ok(Ok(doc)) => doc,
        Ok(Err(err)) => {
            return Err(PdfError::Unreadable(format!(
                "the file is not a PDF quarry can read ({err})"
            )));
        }
        Err(_) => {
            return Err(PdfError::Unreadable(
                "the file is not a PDF quarry can read (damaged)".into(),
            ));
        }
    };
    if doc.is_encrypted() && !matches!(catch_unwind(AssertUnwindSafe(|| doc.decrypt(""))), Ok(Ok(()))) {
        return Err(PdfError::Unreadable(
            "the PDF is password-protected; send a copy without the password".into(),
        ));
    }
    let pages = doc.get_pages();
    if pages.len() > MAX_PAGES {
        return Err(PdfError::Unreadable(format!(
            "the PDF has {} pages, more than the {MAX_PAGES} quarry reads",
            pages.len()
        )));
    }
    let title = catch_unwind(AssertUnwindSafe(|| title_of(&doc))).ok().flatten();
    let mut text = String::new();
    let mut unreadable_pages = 0;
    for (i, &number) in pages.keys().enumerate() {
        if stop() {
            return Err(PdfError::Stopped);
        }
        if i > 0 {
            text.push(PAGE_BREAK);
        }
        let page = catch_unwind(AssertUnwindSafe(|| {
            let mut raw = String::new();
            let mut out = pdf_extract::PlainTextOutput::new(&mut raw);
            pdf_extract::output_doc_page(&doc, &mut out, number).map(|()| raw)
        }));
        match page {
            Ok(Ok(raw)) => push_page(&mut text, &raw),
            Ok(Err(_)) | Err(_) => unreadable_pages += 1,
        }
        if text.len() > max_bytes {
            return Err(PdfError::TooLarge { limit: max_bytes });
        }
    }
    if pages.is_empty() || unreadable_pages == pages.len() {
        return Err(PdfError::Unreadable(
            "no page of the PDF could be read (damaged or unsupported)".into(),
        ));
    }
    if text.chars().all(|c| c.is_whitespace()) {
        return Err(PdfError::NoText { pages: pages.len() });
    }
    Ok(PdfText {
        text,
        title,
        pages: pages.len(),
        unreadable_pages,
    })
}

/// Appends a page's text: compatibility characters folded, control characters other than line
/// breaks and tabs dropped (a page break inside a page would miscount the pages), lines'
/// trailing spaces and the page's surrounding blank lines trimmed.
fn push_page(text: &mut String, raw: &str) {
    let folded: String = raw
        .nfkc()
        .filter(|&c| !c.is_control() || c == '\n' || c == '\t')
        .collect();
    let mut lines: Vec<&str> = folded.lines().map(str::trim_end).collect();
    while lines.first().is_some_and(|l| l.trim().is_empty()) {
        lines.remove(0);
    }
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    // Runs of blank lines become one: the extractor marks every vertical gap.
    let mut blank = false;
    for line in lines {
        let is_blank = line.trim().is_empty();
        if is_blank && blank {
            continue;
        }
        blank = is_blank;
        text.push_str(line);
        text.push('\n');
    }
}

/// The document's `/Title`, decoded (UTF-16 with a byte-order mark, else PDFDocEncoding, read
/// as Latin-1), when it is not blank.
fn title_of(doc: &pdf_extract::Document) -> Option<String> {
    let info = doc.trailer.get(b"Info").ok()?;
    let (_, info) = doc.dereference(info).ok()?;
    let title = info.as_dict().ok()?.get(b"Title").ok()?;
    let (_, title) = doc.dereference(title).ok()?;
    let bytes = title.as_str().ok()?;
    let text = match bytes {
        [0xfe, 0xff, rest @ ..] => {
            let units: Vec<u16> = rest.chunks_exact(2).map(|p| u16::from_be_bytes([p[0], p[1]])).collect();
            String::from_utf16_lossy(&units)
        }
        [0xff, 0xfe, rest @ ..] => {
            let units: Vec<u16> = rest.chunks_exact(2).map(|p| u16::from_le_bytes([p[0], p[1]])).collect();
            String::from_utf16_lossy(&units)
        }
        _ => bytes.iter().map(|&b| char::from(b)).collect(),
    };
    let text: String = text.chars().filter(|c| !c.is_control()).collect();
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// Input handed to the inflater at a time, between two looks at `stop`.
const INFLATE_STEP: usize = 64 << 10;

/// Inflates every deflate stream of the file, keeping none of the output, and refuses the file
/// when they come to more than `limit` bytes. Every `stream` keyword is tried (a false one is
/// not a zlib stream and fails at once), so no real stream is missed — also one hidden inside
/// another's data.
///
/// Linear in the file: the compressed bytes read, over all streams, may come to at most twice
/// the file (a real file's streams do not overlap, so each byte is read about once; a crafted
/// one that starts a stream inside another's data, to be inflated once per `stream` marker, is
/// refused), and `stop` is asked after every [`INFLATE_STEP`] bytes of input.
fn check_inflation(bytes: &[u8], limit: u64, stop: &dyn Fn() -> bool) -> Result<(), PdfError> {
    use flate2::{Decompress, FlushDecompress, Status};
    let too_large = || {
        PdfError::Unreadable(format!(
            "the PDF's compressed streams expand to more than {} MiB; quarry does not read it",
            limit >> 20
        ))
    };
    let input_limit = (bytes.len() as u64).saturating_mul(2);
    let (mut inflated, mut read) = (0u64, 0u64);
    let mut out = vec![0u8; 32 << 10];
    for at in memchr::memmem::find_iter(bytes, b"stream") {
        if at >= 3 && &bytes[at - 3..at] == b"end" {
            continue;
        }
        let mut data = &bytes[at + 6..];
        if let Some(rest) = data.strip_prefix(b"\r\n") {
            data = rest;
        } else if let Some(rest) = data.strip_prefix(b"\n").or_else(|| data.strip_prefix(b"\r")) {
            data = rest;
        } else {
            continue;
        }
        // A zlib header: deflate, a window of at most 32 KiB, and the check bits.
        if data.len() < 2
            || data[0] & 0x0f != 8
            || data[0] >> 4 > 7
            || !u16::from_be_bytes([data[0], data[1]]).is_multiple_of(31)
        {
            continue;
        }
        let mut z = Decompress::new(true);
        loop {
            if stop() {
                return Err(PdfError::Stopped);
            }
            let from = usize::try_from(z.total_in()).unwrap_or(usize::MAX).min(data.len());
            let step = &data[from..(from + INFLATE_STEP).min(data.len())];
            let (in_before, out_before) = (z.total_in(), z.total_out());
            // A broken stream counts what it inflated before it broke.
            let status = z.decompress(step, &mut out, FlushDecompress::None);
            let (consumed, produced) = (z.total_in() - in_before, z.total_out() - out_before);
            read += consumed;
            inflated += produced;
            if inflated > limit {
                return Err(too_large());
            }
            if read > input_limit {
                return Err(PdfError::Unreadable(
                    "the PDF's compressed streams overlap (their data was read more than twice over); quarry does \
                     not read it"
                        .into(),
                ));
            }
            match status {
                Ok(Status::StreamEnd) | Err(_) => break,
                // Out of input (a truncated stream) or no progress.
                Ok(_) if consumed == 0 && produced == 0 => break,
                Ok(_) => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn pages_are_counted_from_the_page_breaks_before_an_offset() {
        let text = "one\u{c}two\u{c}\u{c}four";
        let breaks = page_breaks(text);
        assert_eq!(breaks, vec![3, 7, 8]);
        assert_eq!(page_at(&breaks, 0), 1);
        assert_eq!(page_at(&breaks, 3), 1, "the break ends its page");
        assert_eq!(page_at(&breaks, 4), 2);
        assert_eq!(page_at(&breaks, 9), 4);
    }

    #[test]
    fn pages_are_folded_and_trimmed() {
        let mut text = String::new();
        push_page(&mut text, "\n\n  The \u{fb01}le   \n\n\n\nends\u{c} here\u{7}\n\n");
        assert_eq!(text, "  The file\n\nends here\n");
    }

    #[test]
    fn a_deflate_bomb_is_refused_before_parsing_and_a_small_stream_is_not() {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&vec![0u8; 8 << 20]).unwrap();
        let stream = z.finish().unwrap();
        let pdf = |stream: &[u8]| {
            let mut pdf = b"%PDF-1.4\n1 0 obj\n<< /Length 9 /Filter /FlateDecode >>\nstream\n".to_vec();
            pdf.extend_from_slice(stream);
            pdf.extend_from_slice(b"\nendstream\nendobj\n%%EOF\n");
            pdf
        };
        let go = &|| false;
        assert!(check_inflation(&pdf(&stream), 4 << 20, go).is_err());
        assert!(check_inflation(&pdf(&stream), 16 << 20, go).is_ok());
        assert!(check_inflation(b"%PDF-1.4 stream\nnot zlib endstream", 1, go).is_ok());
    }

    /// A file of about `len` bytes: one zlib stream of empty stored blocks (no output at all)
    /// to its end, with `markers` more `stream` keywords inside it (in 9-byte stored blocks),
    /// each starting such a stream that runs to the end of the file too.
    fn zero_output_pdf(len: usize, markers: usize) -> Vec<u8> {
        let mut pdf = b"%PDF-1.4\nstream\n\x78\x9c".to_vec();
        let empty = [0u8, 0, 0, 0xff, 0xff];
        let per_stream = len / (markers + 1);
        for i in 0..=markers {
            let start = pdf.len();
            while pdf.len() - start + empty.len() <= per_stream {
                pdf.extend_from_slice(&empty);
            }
            if i < markers {
                pdf.extend_from_slice(&[0, 9, 0, 0xf6, 0xff]);
                pdf.extend_from_slice(b"stream\n\x78\x9c");
            }
        }
        pdf
    }

    /// How many times `stop` was asked while checking `pdf`: the work done, in steps.
    fn steps(pdf: &[u8]) -> (Result<(), PdfError>, usize) {
        let asked = std::cell::Cell::new(0usize);
        let result = check_inflation(pdf, u64::MAX, &|| {
            asked.set(asked.get() + 1);
            false
        });
        (result, asked.get())
    }

    #[test]
    fn nested_stream_markers_cannot_multiply_the_inflation_work() {
        let len = 256 << 10;
        let (plain, plain_steps) = steps(&zero_output_pdf(len, 0));
        assert!(plain.is_ok(), "{plain:?}");
        // Each marker would once have inflated to the end of the file again (128 markers: 48 s
        // of CPU for 256 KiB). Now the input read is bounded by twice the file, so the work
        // stays within a few times the plain file's, whatever the markers.
        for markers in [8, 32, 128] {
            let (result, n) = steps(&zero_output_pdf(len, markers));
            assert!(
                n <= 2 * plain_steps + 2 * markers + 4,
                "{markers} markers: {n} steps, {plain_steps} for none ({result:?})"
            );
        }
        // Streams started inside another's data are read over again: past twice the file,
        // refused.
        assert!(
            matches!(steps(&zero_output_pdf(len, 8)).0, Err(PdfError::Unreadable(m)) if m.contains("overlap")),
            "{:?}",
            steps(&zero_output_pdf(len, 8)).0
        );
    }

    #[test]
    fn the_check_stops_when_asked() {
        let pdf = zero_output_pdf(4 << 20, 0);
        assert_eq!(check_inflation(&pdf, u64::MAX, &|| true), Err(PdfError::Stopped));
    }
}
