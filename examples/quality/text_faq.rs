//! A plain-text evaluation set: the Vim FAQ, `/usr/share/doc/vim/FAQ.gz` from the Debian package
//! `vim-doc` (2:9.0.1378-2+deb12u2 on bookworm; the FAQ's own text was last updated in January
//! 2005). Some 375 numbered questions in 37 sections, written by the Vim community, not by us.
//!
//! Unlike `faq.rs`, nothing is taken out: the pages, put back together, are the file as a user
//! would upload it, index and questions included, so quarry's own plain-text section detection is
//! what finds the structure. The file is larger than [`MAX_PAGE_BYTES`], so it is cut into the
//! fewest pages that fit, each cut at the section start nearest to an equal share.
//!
//! How the file reads:
//! - a question starts on a line that begins, in its first column, with a number of two or more
//!   parts such as `5.2. `, and goes on over the indented lines right below it (long questions
//!   wrap). The index at the top lists the same questions indented, so it holds none;
//! - its answer runs from the line after the question to the next question or the next rule (a
//!   line of `=`, which opens every section and the closing credits), blank lines at both ends
//!   left out, and is kept as a char span of the page's text;
//! - a section starts at the first non-blank line after a rule (`SECTION 5 - EDITING A FILE`).

use std::io::Read;
use std::path::PathBuf;

use flate2::read::GzDecoder;

use crate::faq::{MIN_ANSWER_CHARS, Page, Pair};

/// The most a page may hold, in bytes, before the file is cut at section starts.
pub const MAX_PAGE_BYTES: usize = 200_000;

/// A rule is a line of at least this many `=` and nothing else.
const RULE_MIN: usize = 10;

/// Where a plain-text corpus comes from.
#[derive(Clone, Debug)]
pub struct TextSpec {
    pub name: &'static str,
    /// The Debian package that installs it.
    pub package: &'static str,
    /// The file; gunzipped when its name ends in `.gz`.
    pub path: PathBuf,
    /// Pages are named after it: `vim-faq.txt`, or `vim-faq-1.txt`, `vim-faq-2.txt`, … when cut.
    pub stem: &'static str,
}

impl TextSpec {
    pub fn vim(path: Option<PathBuf>) -> TextSpec {
        TextSpec {
            name: "vim",
            package: "vim-doc",
            path: path.unwrap_or_else(|| "/usr/share/doc/vim/FAQ.gz".into()),
            stem: "vim-faq",
        }
    }
}

/// Reads the corpus into its pages, in file order.
pub fn load(spec: &TextSpec) -> Result<Vec<Page>, String> {
    let text = read(spec)?;
    let parts = split(&text, MAX_PAGE_BYTES);
    let pages: Vec<Page> = parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let filename = match parts.len() {
                1 => format!("{}.txt", spec.stem),
                _ => format!("{}-{}.txt", spec.stem, i + 1),
            };
            page(&filename, part)
        })
        .collect();
    if pages.iter().all(|p| p.pairs.is_empty()) {
        return Err(format!("{}: no numbered questions found", spec.path.display()));
    }
    Ok(pages)
}

/// The corpus file's whole text.
pub fn read(spec: &TextSpec) -> Result<String, String> {
    let path = &spec.path;
    let file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "the {} corpus is not installed ({} is missing); install it with `apt-get install {}`",
            spec.name,
            path.display(),
            spec.package
        ),
        _ => format!("{}: {e}", path.display()),
    })?;
    let mut reader: Box<dyn Read> = match path.extension() {
        Some(ext) if ext == "gz" => Box::new(GzDecoder::new(file)),
        _ => Box::new(file),
    };
    let mut text = String::new();
    reader
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text)
}

/// Cuts `text` into the fewest parts of about `max` bytes or less, each cut at the section start
/// nearest to an equal share. The parts, joined, are `text`.
pub fn split(text: &str, max: usize) -> Vec<&str> {
    let n = text.len().div_ceil(max.max(1));
    let starts = section_starts(text);
    let mut parts = Vec::with_capacity(n.max(1));
    let mut from = 0;
    for k in 1..n {
        let share = text.len() * k / n;
        let cut = starts
            .iter()
            .copied()
            .filter(|&s| s > from)
            .min_by_key(|&s| s.abs_diff(share));
        if let Some(cut) = cut {
            parts.push(&text[from..cut]);
            from = cut;
        }
    }
    parts.push(&text[from..]);
    parts
}

/// Byte offsets of the first non-blank line after each rule.
fn section_starts(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut after_rule = false;
    for line in lines(text) {
        if is_rule(line.text) {
            after_rule = true;
        } else if after_rule && !line.text.trim().is_empty() {
            starts.push(line.byte);
            after_rule = false;
        }
    }
    starts
}

/// A page with its text as given and the pairs found in it.
pub fn page(filename: &str, text: &str) -> Page {
    let lines = lines(text);
    let mut pairs = Vec::new();
    let mut short = 0;
    let mut i = 0;
    while i < lines.len() {
        let Some(first) = question_start(lines[i].text) else {
            i += 1;
            continue;
        };
        let mut words: Vec<&str> = first.split_whitespace().collect();
        let mut j = i + 1;
        while j < lines.len() && is_continuation(lines[j].text) {
            words.extend(lines[j].text.split_whitespace());
            j += 1;
        }
        let end = (j..lines.len())
            .find(|&k| question_start(lines[k].text).is_some() || is_rule(lines[k].text))
            .unwrap_or(lines.len());
        let body = lines[j..end].iter().filter(|l| !l.text.trim().is_empty());
        let (mut start, mut stop) = (None, 0);
        for line in body {
            start.get_or_insert(line.start + line.indent());
            stop = line.end;
        }
        match start {
            Some(start) if stop - start >= MIN_ANSWER_CHARS => pairs.push(Pair {
                question: words.join(" "),
                start,
                end: stop,
            }),
            _ => short += 1,
        }
        i = end;
    }
    Page {
        filename: filename.to_owned(),
        text: text.to_owned(),
        content_type: "text/plain",
        pairs,
        short,
    }
}

/// A line of the text, with where it lies.
struct Line<'a> {
    /// Without its line break or trailing whitespace.
    text: &'a str,
    /// Byte offset of its first char.
    byte: usize,
    /// Char offsets of its first char and of the end of [`Line::text`].
    start: usize,
    end: usize,
}

impl Line<'_> {
    /// Chars of leading whitespace.
    fn indent(&self) -> usize {
        self.text.chars().take_while(|c| c.is_whitespace()).count()
    }
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let (mut byte, mut chars) = (0, 0);
    for raw in text.split_inclusive('\n') {
        let content = raw.trim_end();
        out.push(Line {
            text: content,
            byte,
            start: chars,
            end: chars + content.chars().count(),
        });
        byte += raw.len();
        chars += raw.chars().count();
    }
    out
}

/// The question's first line without its number, if the line opens a question: `5.2. How do I…`.
fn question_start(line: &str) -> Option<&str> {
    let (number, rest) = line.split_once(' ')?;
    let parts: Vec<&str> = number.strip_suffix('.')?.split('.').collect();
    let numbered = parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    (numbered && !rest.trim().is_empty()).then_some(rest)
}

/// A wrapped question's next line: indented and not blank.
fn is_continuation(line: &str) -> bool {
    line.starts_with(char::is_whitespace) && !line.trim().is_empty()
}

fn is_rule(line: &str) -> bool {
    let line = line.trim();
    line.len() >= RULE_MIN && line.bytes().all(|b| b == b'=')
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "vim:tw=75

Café notes: a FAQ.

INDEX

SECTION 1 - BASICS
    1.1. What is it?
    1.2. Who wrote it
         and when?

=============================================================================

SECTION 1 - BASICS


1.1. What is it?

It is a text editor, compatible with Vi, with many improvements.

    :help intro


1.2. Who wrote it
     and when?

Bram.


=============================================================================

SECTION 2 - MORE

2.1. Why?

Because this answer, naïve as it is, is long enough to be kept.
1. A list item in column one is not a question.

=============================================================================

Current Maintainer: Someone
";

    fn answer(page: &Page, pair: &Pair) -> String {
        page.text.chars().skip(pair.start).take(pair.end - pair.start).collect()
    }

    #[test]
    fn questions_are_numbered_lines_and_answers_run_to_the_next_one_or_a_rule() {
        let page = page("vim-faq.txt", SAMPLE);
        assert_eq!(page.text, SAMPLE);
        assert_eq!(page.short, 1, "“Bram.” is too short");
        let questions: Vec<&str> = page.pairs.iter().map(|p| p.question.as_str()).collect();
        assert_eq!(questions, ["What is it?", "Why?"]);
        assert_eq!(
            answer(&page, &page.pairs[0]),
            "It is a text editor, compatible with Vi, with many improvements.\n\n    :help intro"
        );
        assert_eq!(
            answer(&page, &page.pairs[1]),
            "Because this answer, naïve as it is, is long enough to be kept.\n\
             1. A list item in column one is not a question."
        );
    }

    #[test]
    fn wrapped_questions_are_joined() {
        let text = SAMPLE.replace(
            "Bram.",
            "Bram Moolenar, with contributions from too many people to list.",
        );
        let page = page("vim-faq.txt", &text);
        assert_eq!(page.short, 0);
        assert_eq!(page.pairs[1].question, "Who wrote it and when?");
        assert!(answer(&page, &page.pairs[1]).starts_with("Bram Moolenar"));
    }

    #[test]
    fn pages_are_cut_at_section_starts_and_join_back() {
        let parts = split(SAMPLE, SAMPLE.len() / 2 + 1);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts.concat(), SAMPLE);
        assert!(parts[1].starts_with("SECTION 2 - MORE"), "{}", parts[1]);
        assert_eq!(split(SAMPLE, SAMPLE.len()), [SAMPLE]);
    }

    /// Checks the installed corpus: `./scripts/cargo test --example bench_quality text_faq -- --ignored`.
    #[test]
    #[ignore = "needs the vim-doc package installed"]
    fn installed_vim_faq_reads_whole() {
        let spec = TextSpec::vim(None);
        let pages = load(&spec).unwrap();
        assert_eq!(
            pages.iter().map(|p| p.text.as_str()).collect::<String>(),
            read(&spec).unwrap()
        );
        let pairs: usize = pages.iter().map(|p| p.pairs.len()).sum();
        let short: usize = pages.iter().map(|p| p.short).sum();
        println!("{} pages, {pairs} pairs, {short} short", pages.len());
        assert!(pairs >= 300, "{pairs} pairs");
        for page in &pages {
            assert!(
                page.text.len() <= MAX_PAGE_BYTES,
                "{} is {} bytes",
                page.filename,
                page.text.len()
            );
            for pair in &page.pairs {
                let answer = answer(page, pair);
                assert_eq!(answer.trim(), answer, "{}", pair.question);
                assert!(!answer.contains("====="), "{}", pair.question);
                assert!(answer.lines().all(|l| question_start(l).is_none()), "{}", pair.question);
            }
        }
    }
}
