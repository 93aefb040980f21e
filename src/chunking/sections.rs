//! Sections: where a source's text changes subject, found from the headings its format has.
//! Parents are cut at them ([`super::parents`]), and a retrieval's context window reads forward
//! inside the section of its hit.
//!
//! # Decisions
//! - **What is found**: the char offset where each heading line begins. The first section of a
//!   text starts at 0 whether or not a heading is there; offsets are not returned for it.
//! - **By format.** Markdown: ATX headings (`#`…`######`) and setext underlines (`===`, `---`).
//!   HTML: its stored text, where quarry writes headings (`h1`–`h6`) as ATX headings. Plain text
//!   and PDF text: ATX headings too (Markdown is often sent as plain text), reStructuredText
//!   titles (a line underlined, and maybe overlined, by one repeated punctuation char at least as
//!   long as the title), and the conservative plain-text rules below. Nothing inside a code fence
//!   is a heading.
//! - **Plain text**, each rule asking that the line start a paragraph (after a blank line, or
//!   first in the text), be at most [`MAX_TITLE_CHARS`] long, and not end like a sentence
//!   (`.`, `,`, `;`), since a heading is a label rather than prose:
//!   - a question: a paragraph whose first line, or whose first two or three lines read as one
//!     unbroken sentence, end in `?` (FAQs: `Q3) How do I…?`);
//!   - a numbered heading: `2.`, `2.3`, `2.3.1`, `A1)` before a capitalised title, standing alone
//!     (a blank line after it) unless the number has several levels;
//!   - a title line: short (at most [`MAX_SHORT_TITLE_CHARS`]), capitalised, alone between blank
//!     lines, with a paragraph after it that is not indented deeper;
//!   - a `man` heading: a line at an indent of at most 3, starting with a letter, whose next
//!     line is indented deeper (`DESCRIPTION` over its indented body, `   Options` inside it).
//!
//!   A rule that fires wrongly costs little (a parent ends early); one that misses leaves the
//!   previous section longer. `bench_quality` reports how many of a plain-text FAQ's questions
//!   the rules find and how many other sections they open.

use crate::domain::SourceFormat;

/// Longest heading line, in chars, for the plain-text rules.
pub const MAX_TITLE_CHARS: usize = 200;

/// Longest stand-alone title line, in chars.
pub const MAX_SHORT_TITLE_CHARS: usize = 60;

/// The char offsets (increasing, none at 0) where the sections of `text` begin, for a source of
/// `format`.
#[must_use]
pub fn section_starts(text: &str, format: SourceFormat) -> Vec<u64> {
    chars_at(text, &section_start_bytes(text, format))
}

/// The char and byte offsets (increasing) where the headings of `text` begin, 0 too when the
/// text opens with one.
pub(super) fn headings(text: &str, format: SourceFormat) -> Vec<(u64, usize)> {
    let bytes = heading_bytes(text, format);
    chars_at(text, &bytes).into_iter().zip(bytes).collect()
}

/// [`section_starts`] as byte offsets.
pub fn section_start_bytes(text: &str, format: SourceFormat) -> Vec<usize> {
    let mut starts = heading_bytes(text, format);
    starts.retain(|&s| s > 0);
    starts
}

/// The byte offsets where the headings of `text` begin, 0 too when the text opens with one.
pub(super) fn heading_bytes(text: &str, format: SourceFormat) -> Vec<usize> {
    let lines = lines(text);
    let plain = matches!(format, SourceFormat::Plain | SourceFormat::Pdf);
    let markdown = format == SourceFormat::Markdown;
    let mut starts_bytes = Vec::new();
    let mut in_fence = false;
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        let body = line.text.trim();
        if indent(line.text) <= 3 && (body.starts_with("```") || body.starts_with("~~~")) {
            in_fence = !in_fence;
            i += 1;
            continue;
        }
        if in_fence || body.is_empty() {
            i += 1;
            continue;
        }
        let after_blank = i == 0 || lines[i - 1].text.trim().is_empty();
        let next = lines.get(i + 1).map(|l| l.text);
        let found = if indent(line.text) <= 3 && super::segment::is_heading(body) {
            Some(line.start)
        } else if (plain || markdown) && next.is_some_and(|n| underlines(body, n, markdown)) {
            // An overline of the same kind above the title belongs to the heading.
            let over = i
                .checked_sub(1)
                .filter(|&o| next.is_some_and(|n| n.trim() == lines[o].text.trim()))
                .filter(|&o| o == 0 || lines[o - 1].text.trim().is_empty());
            if over.is_some() || after_blank {
                Some(over.map_or(line.start, |o| lines[o].start))
            } else {
                None
            }
        } else if plain && after_blank && !is_underline(body) && plain_heading(&lines[i..]) {
            Some(line.start)
        } else {
            None
        };
        if let Some(start) = found {
            starts_bytes.push(start);
            // Skip the underline, which is no heading of its own.
            i += if next.is_some_and(|n| is_underline(n.trim())) {
                2
            } else {
                1
            };
            continue;
        }
        i += 1;
    }
    starts_bytes
}

/// A line of the text: its byte offset and its text without the line break.
struct Line<'a> {
    start: usize,
    text: &'a str,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for raw in text.split_inclusive('\n') {
        out.push(Line {
            start,
            text: raw.trim_end_matches(['\n', '\r']),
        });
        start += raw.len();
    }
    out
}

fn indent(line: &str) -> usize {
    line.chars()
        .take_while(|c| c.is_whitespace())
        .map(|c| if c == '\t' { 8 } else { 1 })
        .sum()
}

/// A line made of one punctuation char repeated (at least 3 times), as reStructuredText
/// underlines titles.
fn is_underline(body: &str) -> bool {
    let mut chars = body.chars();
    let Some(first) = chars.next() else { return false };
    "=-~^\"'`#*+_:.".contains(first) && body.chars().count() >= 3 && chars.all(|c| c == first)
}

/// Whether `next` underlines the title `body`: `===` or `---` under any title in Markdown
/// (setext); in plain text any underline char, at least as long as the title.
fn underlines(body: &str, next: &str, markdown: bool) -> bool {
    let under = next.trim();
    if !is_underline(under) || is_underline(body) || indent(next) > 3 {
        return false;
    }
    if markdown {
        return under.starts_with(['=', '-']);
    }
    body.chars().count() <= MAX_TITLE_CHARS && under.chars().count() >= body.chars().count()
}

/// The plain-text rules, for the paragraph that starts at `lines[0]`.
fn plain_heading(lines: &[Line<'_>]) -> bool {
    let first = lines[0].text;
    let body = first.trim();
    if body.chars().count() > MAX_TITLE_CHARS {
        return false;
    }
    let next = lines.get(1).map(|l| l.text);
    let next_blank = next.is_none_or(|n| n.trim().is_empty());
    question(lines)
        || numbered(body, next_blank)
        || short_title(lines, next_blank)
        || (indent(first) <= 3
            && body.starts_with(char::is_alphabetic)
            && !ends_like_prose(body)
            && body.chars().count() <= MAX_SHORT_TITLE_CHARS
            && next.is_some_and(|n| !n.trim().is_empty() && indent(n) > indent(first)))
}

fn ends_like_prose(body: &str) -> bool {
    body.ends_with(['.', ',', ';'])
}

/// The paragraph's first one to three lines are a question: one sentence that ends in `?`.
fn question(lines: &[Line<'_>]) -> bool {
    let mut chars = 0;
    for line in lines.iter().take(3) {
        let body = line.text.trim();
        if body.is_empty() {
            return false;
        }
        chars += body.chars().count();
        if chars > MAX_TITLE_CHARS {
            return false;
        }
        if body.ends_with('?') {
            return true;
        }
        // A sentence ended before the `?`: prose, not a question heading.
        if body.ends_with(['.', '!', ':', ';']) {
            return false;
        }
    }
    false
}

/// `2. Title`, `2.3 Title`, `2.3.1. Title`, `A1) Title`, `Q12: Title`.
fn numbered(body: &str, next_blank: bool) -> bool {
    if ends_like_prose(body) {
        return false;
    }
    let letter = body.starts_with(|c: char| c.is_ascii_uppercase()) as usize;
    let rest = &body[letter..];
    let digits_and_dots = rest.bytes().take_while(|b| b.is_ascii_digit() || *b == b'.').count();
    let number = &rest[..digits_and_dots];
    if !number.starts_with(|c: char| c.is_ascii_digit()) {
        return false;
    }
    let levels = number.trim_end_matches('.').split('.').count();
    let after = &rest[digits_and_dots..];
    let after = after.strip_prefix([')', ':']).unwrap_or(after);
    let Some(title) = after.strip_prefix([' ', '\t']) else {
        return false;
    };
    let title = title.trim_start();
    title.starts_with(|c: char| c.is_uppercase()) && (levels > 1 || letter == 1 || next_blank)
}

/// A short capitalised line alone between blank lines, with a paragraph after it that is not
/// indented deeper (a line that leads into an indented block — `For more information, read`
/// over a list of commands — is prose, not a title).
fn short_title(lines: &[Line<'_>], next_blank: bool) -> bool {
    let body = lines[0].text.trim();
    let words = body.split_whitespace().count();
    next_blank
        && body.chars().count() <= MAX_SHORT_TITLE_CHARS
        && (1..=10).contains(&words)
        && body.starts_with(|c: char| c.is_uppercase())
        && !body.ends_with(['.', ',', ';', ':', '!'])
        && lines
            .get(2)
            .is_some_and(|l| !l.text.trim().is_empty() && indent(l.text) <= indent(lines[0].text))
}

/// Char offsets of increasing byte offsets.
fn chars_at(text: &str, bytes: &[usize]) -> Vec<u64> {
    let mut out = Vec::with_capacity(bytes.len());
    let (mut byte, mut chars) = (0usize, 0u64);
    for &target in bytes {
        chars += text[byte..target].chars().count() as u64;
        byte = target;
        out.push(chars);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::section_starts;
    use crate::domain::SourceFormat;

    /// The first line of each section after the first.
    fn heads(text: &str, format: SourceFormat) -> Vec<String> {
        section_starts(text, format)
            .into_iter()
            .map(|at| {
                text.chars()
                    .skip(at as usize)
                    .take_while(|c| *c != '\n')
                    .collect::<String>()
            })
            .collect()
    }

    #[test]
    fn markdown_atx_and_setext_headings_outside_fences() {
        let text = "Intro line.\n\n# One\n\nBody.\n\nTwo\n===\n\nMore.\n\n```\n# not a heading\n```\n\nThree\n---\n\nEnd é.\n## Four\n";
        assert_eq!(
            heads(text, SourceFormat::Markdown),
            ["# One", "Two", "Three", "## Four"]
        );
        // A question line is not a Markdown heading.
        assert!(section_starts("Intro.\n\nWhy?\n\nBecause.", SourceFormat::Markdown).is_empty());
    }

    #[test]
    fn html_text_has_its_headings_as_atx() {
        let text = "# Title\n\nIntro.\n\n## Why is it so?\n\nBecause.\n\nA short line\n\nText.";
        assert_eq!(heads(text, SourceFormat::Html), ["## Why is it so?"]);
    }

    #[test]
    fn restructured_text_titles_with_and_without_overlines() {
        let text = "=====\nTitle\n=====\n\nIntro text here.\n\nSection one\n-----------\n\nBody.\n\nToo long a title\n~~~\n\nNot a title: its underline is short.";
        assert_eq!(heads(text, SourceFormat::Plain), ["Section one"]);
        let text = "Preface.\n\n*****\nPart\n*****\n\nText.";
        assert_eq!(heads(text, SourceFormat::Plain), ["*****"]);
    }

    #[test]
    fn plain_text_questions_numbers_titles_and_man_headings() {
        let faq = "Intro to the FAQ.\n\nA1) What is it?\n\nIt is a shell.\n\nA2) How do I build it on a system\nwithout a compiler?\n\nYou cannot.\n\nIs this prose? Yes, it ends with a period.\n";
        assert_eq!(
            heads(faq, SourceFormat::Plain),
            ["A1) What is it?", "A2) How do I build it on a system"]
        );
        let numbered = "Text.\n\n1.2 Installing\nRun make.\n\n3. Usage\n\nCall it.\n\n4. Run the tests.\n\nDone.";
        assert_eq!(heads(numbered, SourceFormat::Plain), ["1.2 Installing", "3. Usage"]);
        let titles =
            "Start.\n\nGetting started\n\nFirst do this.\n\nthanks to bob\n\nFor more, read\n\n    :help\n\nEnd.";
        assert_eq!(heads(titles, SourceFormat::Plain), ["Getting started"]);
        let man = "BASH(1)\n\nNAME\n       bash - GNU Bourne-Again SHell\n\nDESCRIPTION\n       Bash is a shell.\n\n   Options\n       -c     Read commands.\n";
        assert_eq!(heads(man, SourceFormat::Plain), ["NAME", "DESCRIPTION", "   Options"]);
        // PDF text follows the plain rules; Markdown does not.
        assert_eq!(heads(faq, SourceFormat::Pdf).len(), 2);
        assert!(section_starts(faq, SourceFormat::Markdown).is_empty());
    }

    #[test]
    fn prose_opens_no_section() {
        let prose = "This is a paragraph that goes on.\nIt wraps over lines.\n\nAnother paragraph follows it, with a list:\n\n- one item\n- two items\n\nAnd the end.";
        assert!(section_starts(prose, SourceFormat::Plain).is_empty());
        assert!(section_starts("", SourceFormat::Plain).is_empty());
        assert!(
            section_starts("# Only a title", SourceFormat::Markdown).is_empty(),
            "none at 0"
        );
    }
}
