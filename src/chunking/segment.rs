//! Cutting text into sentences: markdown-aware blocks by line, then UAX #29 sentences inside
//! each paragraph. Every segment is trimmed, so whitespace between segments belongs to none.

use std::borrow::Cow;

use unicode_segmentation::{GraphemeCursor, UnicodeSegmentation};

/// A sentence (or a heading, list item, code line…) as a byte range of the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Segment {
    pub start: usize,
    pub end: usize,
    /// A markdown heading line, or the start of a section: it opens a new chunk.
    pub heading: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Line {
    Blank,
    /// `#` … `######` then a space or the end of the line.
    Heading,
    /// Three backticks or `~~~`: opens or closes a code fence.
    Fence,
    /// `---`, `***`, `___` or a setext `===` underline.
    Rule,
    /// `-`, `*`, `+`, `1.` or `1)` then a space: starts a block that may continue on later lines.
    ListItem,
    Text,
}

/// [`segments`], where the first segment at or after each of `opens` (byte offsets where a
/// section begins, increasing) is a heading too: it opens a new chunk.
pub(super) fn segments_opening(text: &str, opens: &[usize]) -> Vec<Segment> {
    let mut out = segments(text);
    let mut from = 0;
    for &open in opens {
        from += out[from..].partition_point(|s| s.start < open);
        if let Some(segment) = out.get_mut(from) {
            segment.heading = true;
        }
    }
    out
}

/// Segments of `text`, in order, each trimmed and non-empty. Together they hold every
/// non-whitespace char of `text`.
pub(super) fn segments(text: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    // Start of the paragraph (or list item) being collected.
    let mut open: Option<usize> = None;
    let mut in_fence = false;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        let end = offset + line.len();
        offset = end;
        let kind = classify(line);
        let kind = match (in_fence, kind) {
            (true, Line::Fence | Line::Blank) | (false, _) => kind,
            // Inside a fence every line stands alone: no headings, lists or sentences in code.
            (true, _) => Line::Rule,
        };
        match kind {
            Line::Text => {
                open.get_or_insert(start);
            }
            Line::ListItem => {
                close_paragraph(text, open.take(), start, &mut out);
                open = Some(start);
            }
            Line::Blank => close_paragraph(text, open.take(), start, &mut out),
            Line::Heading | Line::Fence | Line::Rule => {
                close_paragraph(text, open.take(), start, &mut out);
                in_fence ^= kind == Line::Fence;
                push_trimmed(text, start, end, kind == Line::Heading, &mut out);
            }
        }
    }
    close_paragraph(text, open, text.len(), &mut out);
    out
}

fn classify(line: &str) -> Line {
    let line = line.trim_end();
    let body = line.trim_start();
    if body.is_empty() {
        return Line::Blank;
    }
    let indent = line.len() - body.len();
    let marker_line = indent <= 3;
    if marker_line && is_heading(body) {
        Line::Heading
    } else if marker_line && (body.starts_with("```") || body.starts_with("~~~")) {
        Line::Fence
    } else if marker_line && is_rule(body) {
        Line::Rule
    } else if is_list_item(body) {
        Line::ListItem
    } else {
        Line::Text
    }
}

pub(super) fn is_heading(body: &str) -> bool {
    let hashes = body.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes) && body[hashes..].chars().next().is_none_or(|c| c == ' ' || c == '\t')
}

fn is_rule(body: &str) -> bool {
    let mut marks = body.chars().filter(|c| *c != ' ' && *c != '\t');
    let Some(first) = marks.next() else { return false };
    matches!(first, '-' | '*' | '_' | '=') && marks.clone().all(|c| c == first) && marks.count() >= 2
}

fn is_list_item(body: &str) -> bool {
    let spaced = |rest: &str| rest.chars().next().is_some_and(|c| c == ' ' || c == '\t');
    if let Some(rest) = body.strip_prefix(['-', '*', '+']) {
        return spaced(rest);
    }
    let digits = body.bytes().take_while(u8::is_ascii_digit).count();
    (1..=9).contains(&digits) && body[digits..].strip_prefix(['.', ')']).is_some_and(spaced)
}

/// Splits the paragraph `start..end` (if any) into sentences.
fn close_paragraph(text: &str, start: Option<usize>, end: usize, out: &mut Vec<Segment>) {
    let Some(start) = start else { return };
    let paragraph = &text[start..end];
    // A line break inside a paragraph is a sentence boundary in UAX #29; hard-wrapped prose would
    // then be cut at every line end. Reading it as a space keeps byte offsets unchanged.
    let scan: Cow<'_, str> = if paragraph.trim_end().contains(['\n', '\r']) {
        Cow::Owned(paragraph.replace(['\n', '\r'], " "))
    } else {
        Cow::Borrowed(paragraph)
    };
    for piece in bounded_pieces(&scan) {
        sentences(text, start + piece.start, &scan[piece], out);
    }
}

/// `scan` cut into the pieces handed to the sentence segmenter one by one.
///
/// UAX #29 as implemented by unicode-segmentation looks ahead after every full stop over the
/// chars that can neither start nor end a sentence (spaces, digits, closing punctuation,
/// combining and spacing marks, format chars…) to find out whether a lower-case letter
/// follows, so a long run of them after a full stop costs time quadratic in its length
/// (10k spaces take seconds; `"a. " + " \u{93e}" * n` — a vowel sign — never finishes). Such
/// runs are cut into pieces of at most `MAX_RUN` chars: each piece then costs at most its
/// length times `MAX_RUN`, and the whole split stays linear in the text. Text people write
/// never has such runs; the cut only guards against uploads made to stall the splitter.
fn bounded_pieces(scan: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut piece_start = 0;
    let mut run = 0;
    for (i, c) in scan.char_indices() {
        if ends_lookahead(c) {
            run = 0;
            continue;
        }
        run += 1;
        // Cut between grapheme clusters (an emoji ZWJ sequence is such a run too), unless the
        // run is one endless cluster (a letter under thousands of combining marks).
        if run > MAX_RUN && (run > 4 * MAX_RUN || is_grapheme_boundary(scan, i)) {
            out.push(piece_start..i);
            piece_start = i;
            run = 1;
        }
    }
    out.push(piece_start..scan.len());
    out
}

/// Whether the segmenter's look-ahead after a full stop stops at `c`: a sentence terminator,
/// or a letter that begins a grapheme cluster. Marks (a Devanagari vowel sign is alphabetic,
/// yet it only extends the letter before it) and digits do not stop it.
fn ends_lookahead(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic() || matches!(c, '.' | '?' | '!');
    }
    if matches!(c, '。' | '？' | '！') {
        return true;
    }
    if !c.is_alphabetic() {
        return false;
    }
    // `c` extends a cluster when "a" followed by `c` is one cluster.
    let mut buf = [0u8; 5];
    buf[0] = b'a';
    let len = 1 + c.encode_utf8(&mut buf[1..]).len();
    std::str::from_utf8(&buf[..len]).map_or(true, |pair| is_grapheme_boundary(pair, 1))
}

fn is_grapheme_boundary(text: &str, at: usize) -> bool {
    GraphemeCursor::new(at, text.len(), true)
        .is_boundary(text, 0)
        .unwrap_or(true)
}

/// Longest run of chars that are neither alphanumeric nor sentence terminators handed to the
/// sentence segmenter in one piece.
const MAX_RUN: usize = 64;

/// UAX #29 sentences of `scan`, a same-length view of `text[start..]`.
fn sentences(text: &str, start: usize, scan: &str, out: &mut Vec<Segment>) {
    for (offset, sentence) in scan.split_sentence_bound_indices() {
        let sentence_start = start + offset;
        push_trimmed(text, sentence_start, sentence_start + sentence.len(), false, out);
    }
}

fn push_trimmed(text: &str, start: usize, end: usize, heading: bool, out: &mut Vec<Segment>) {
    let raw = &text[start..end];
    let body = raw.trim_start();
    let start = start + (raw.len() - body.len());
    let end = start + body.trim_end().len();
    if start < end {
        out.push(Segment { start, end, heading });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<(&str, bool)> {
        segments(text)
            .into_iter()
            .map(|s| (&text[s.start..s.end], s.heading))
            .collect()
    }

    #[test]
    fn markdown_lines_are_boundaries() {
        let text = "# Title\nIntro one. Intro\ntwo.\n\n- item a\n  more a\n2) item b\n***\nlast";
        assert_eq!(
            pieces(text),
            vec![
                ("# Title", true),
                ("Intro one.", false),
                ("Intro\ntwo.", false),
                ("- item a\n  more a", false),
                ("2) item b", false),
                ("***", false),
                ("last", false),
            ]
        );
    }

    #[test]
    fn fenced_code_lines_stand_alone() {
        let text = "```sh\n# not a heading\nls -l\n```\nText.";
        assert_eq!(
            pieces(text),
            vec![
                ("```sh", false),
                ("# not a heading", false),
                ("ls -l", false),
                ("```", false),
                ("Text.", false)
            ]
        );
    }

    #[test]
    fn long_punctuation_runs_are_cut_between_clusters() {
        let family = "👩\u{200d}👩\u{200d}👧\u{200d}👦";
        let text = format!("Hi.{}", family.repeat(30));
        let segments = pieces(&text);
        assert!(segments.len() > 2, "{segments:?}");
        for (piece, _) in &segments[1..] {
            assert_eq!(piece.replace(family, ""), "", "a cluster was cut: {piece:?}");
        }
        // One cluster of a thousand combining marks is still cut (at chars), and nothing is lost.
        let endless = format!("Hi.{}", "\u{301}".repeat(1000));
        let total: usize = pieces(&endless).iter().map(|(s, _)| s.len()).sum();
        assert_eq!(total, endless.len());
    }

    /// The segmenter's cost bound for one split: each piece's length times its longest run of
    /// chars that do not end the look-ahead (what a full stop in it could make the segmenter
    /// scan), summed over the pieces.
    fn steps(scan: &str) -> usize {
        bounded_pieces(scan)
            .into_iter()
            .map(|piece| {
                let (mut longest, mut run) = (0, 0);
                for c in scan[piece.clone()].chars() {
                    run = if ends_lookahead(c) { 0 } else { run + 1 };
                    longest = longest.max(run);
                }
                piece.len() * (longest + 1)
            })
            .sum()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Adversarial runs after a full stop cost work linear in their length: the steps per
        /// byte at 16× the length are no more than at 4× (plus rounding) and stay under a fixed
        /// bound, and nothing is lost.
        #[test]
        fn adversarial_runs_split_in_linear_work(
            unit in proptest::sample::select(vec![
                " ", " \u{93e}", "\u{301}", " 1", ")", "\u{200b}", "\u{200d}", " \u{2019}", "\u{ad}",
                "\u{3000}", "👩\u{200d}👧", " ,", "\u{64b}",
            ]),
            n in 200usize..400,
        ) {
            let text = |n: usize| format!("a. {}", unit.repeat(n));
            let (small, large) = (text(4 * n), text(16 * n));
            let per_byte = |t: &str| steps(t) as f64 / t.len() as f64;
            proptest::prop_assert!(
                per_byte(&large) <= per_byte(&small) * 1.25 + 1.0,
                "{} steps per byte at {} bytes, {} at {}",
                per_byte(&large), large.len(), per_byte(&small), small.len()
            );
            proptest::prop_assert!(per_byte(&large) <= (4 * MAX_RUN + 1) as f64);
            let total: usize = bounded_pieces(&large).iter().map(std::iter::ExactSizeIterator::len).sum();
            proptest::prop_assert_eq!(total, large.len());
            // And the segmenter really finishes, keeping every non-space char.
            let kept: usize = segments(&large).iter().map(|s| large[s.start..s.end].chars().filter(|c| !c.is_whitespace()).count()).sum();
            proptest::prop_assert_eq!(kept, large.chars().filter(|c| !c.is_whitespace()).count());
        }
    }

    #[test]
    fn marks_and_digits_do_not_end_the_lookahead() {
        assert!(ends_lookahead('a') && ends_lookahead('Ж') && ends_lookahead('क') && ends_lookahead('.'));
        assert!(!ends_lookahead('\u{93e}') && !ends_lookahead('\u{301}') && !ends_lookahead('7'));
        assert!(!ends_lookahead(' ') && !ends_lookahead('\u{200b}'));
    }

    #[test]
    fn not_headings_or_items() {
        assert_eq!(classify("#hashtag"), Line::Text);
        assert_eq!(classify("####### seven"), Line::Text);
        assert_eq!(classify("    # indented code"), Line::Text);
        assert_eq!(classify("-5 degrees"), Line::Text);
        assert_eq!(classify("*emphasis*"), Line::Text);
        assert_eq!(classify("- - -"), Line::Rule);
        assert_eq!(classify("#"), Line::Heading);
        assert_eq!(classify("10. ten"), Line::ListItem);
    }
}
