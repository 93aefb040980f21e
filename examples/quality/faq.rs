//! The evaluation sets: FAQ pages that Debian packages install, read into question → answer pairs.
//!
//! Each page becomes one source. Its text is the page's readable text as quarry itself makes it
//! from HTML (`quarry::chunking::html::to_text`): whole, headings included (as a user would upload
//! it), or with every heading taken out, so that a question can only be found through its answer
//! (`headless`). Navigation and the tables of contents, which repeat every
//! question, are cut out of the HTML first. A question is a heading with a `?` in it; its answer
//! runs from that heading to the next heading that is itself a question or is not nested deeper
//! (so unquestioned sub-sections such as "8.1.1. dpkg" belong to the answer above them), and is
//! kept as a char span of the stored text, the unit quarry's offsets count in.

use std::convert::Infallible;
use std::path::{Path, PathBuf};

use html5gum::{DefaultEmitter, Token, Tokenizer};

/// Answers shorter than this many chars are not asked about (one-line pointers to elsewhere).
pub const MIN_ANSWER_CHARS: usize = 40;

/// Elements cut out before conversion: Sphinx's per-page contents and permalink marks, DocBook's
/// tables of contents and navigation bars.
const CUT_CLASSES: &[&str] = &["contents", "headerlink", "toc", "navheader", "navfooter"];

/// Written right after each heading's start tag, so that headings can be told in the converted
/// text from `# comment` lines of code. A private-use char: no page holds it.
const HEADING_MARK: char = '\u{E000}';

/// Where a corpus comes from.
#[derive(Clone, Debug)]
pub struct Spec {
    pub name: &'static str,
    /// The Debian package that installs it.
    pub package: &'static str,
    pub dir: PathBuf,
    /// Pages are the files of `dir` whose names end so ...
    pub suffix: &'static str,
    /// ... except this one (the index, which lists every question).
    pub index: &'static str,
}

impl Spec {
    pub fn python(dir: Option<PathBuf>) -> Spec {
        Spec {
            name: "python",
            package: "python3-doc",
            dir: dir.unwrap_or_else(|| "/usr/share/doc/python3-doc/html/faq".into()),
            suffix: ".html",
            index: "index.html",
        }
    }

    pub fn debian(dir: Option<PathBuf>) -> Spec {
        Spec {
            name: "debian",
            package: "debian-faq",
            dir: dir.unwrap_or_else(|| "/usr/share/doc/debian/FAQ".into()),
            suffix: ".en.html",
            index: "index.en.html",
        }
    }
}

/// One page, ready to upload.
#[derive(Clone, Debug)]
pub struct Page {
    /// The source's file name: the page's name with `.txt` for its extension.
    pub filename: String,
    /// The text to store.
    pub text: String,
    /// Its media type.
    pub content_type: &'static str,
    pub pairs: Vec<Pair>,
    /// Questions whose answer was under [`MIN_ANSWER_CHARS`].
    pub short: usize,
}

/// A question and where its answer lies in its page's text.
#[derive(Clone, Debug)]
pub struct Pair {
    pub question: String,
    /// Char span `[start, end)` of the answer in [`Page::text`].
    pub start: usize,
    pub end: usize,
}

/// Reads every page of a corpus, in file name order.
pub fn load(spec: &Spec, headless: bool) -> Result<Vec<Page>, String> {
    let missing = || {
        format!(
            "the {} corpus is not installed ({} has no pages); install it with `apt-get install {}`",
            spec.name,
            spec.dir.display(),
            spec.package
        )
    };
    let entries = std::fs::read_dir(&spec.dir).map_err(|_| missing())?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(spec.suffix) && name != spec.index
        })
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(missing());
    }
    paths
        .iter()
        .map(|path| {
            let html = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(page(&filename(path, spec.suffix), &html, headless))
        })
        .collect()
}

fn filename(path: &Path, suffix: &str) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("page");
    format!("{}.txt", name.strip_suffix(suffix).unwrap_or(name))
}

/// A page's stored text and pairs from its HTML; `headless`, without its headings.
pub fn page(filename: &str, html: &str, headless: bool) -> Page {
    let text = quarry::chunking::html::to_text(&content_html(html));
    let blocks: Vec<Block> = text.split("\n\n").map(Block::read).collect();

    // The stored text: every block (but the headings, when headless) apart by a blank line;
    // where each body block starts.
    let mut stored = String::with_capacity(text.len());
    let mut chars = 0usize;
    let mut spans = Vec::with_capacity(blocks.len());
    for (raw, block) in text.split("\n\n").zip(&blocks) {
        let body = match block {
            Block::Body(body) => *body,
            Block::Heading { .. } if headless => {
                spans.push(None);
                continue;
            }
            Block::Heading { .. } => raw,
        };
        let body = body.replace(HEADING_MARK, "");
        if chars > 0 {
            stored.push_str("\n\n");
            chars += 2;
        }
        let start = chars;
        stored.push_str(&body);
        chars += body.chars().count();
        spans.push(matches!(block, Block::Body(_)).then_some((start, chars)));
    }

    let mut pairs = Vec::new();
    let mut short = 0;
    for (i, block) in blocks.iter().enumerate() {
        let Block::Heading { level, title } = block else {
            continue;
        };
        if !is_question(title) {
            continue;
        }
        let answer = blocks[i + 1..]
            .iter()
            .zip(&spans[i + 1..])
            .take_while(|(b, _)| match b {
                Block::Heading { level: l, title } => l > level && !is_question(title),
                Block::Body(_) => true,
            })
            .filter_map(|(_, span)| *span);
        let (mut start, mut end) = (None, 0);
        for (s, e) in answer {
            start.get_or_insert(s);
            end = e;
        }
        match start {
            Some(start) if end - start >= MIN_ANSWER_CHARS => pairs.push(Pair {
                question: title.clone(),
                start,
                end,
            }),
            _ => short += 1,
        }
    }
    Page {
        filename: filename.to_owned(),
        text: stored,
        content_type: "text/markdown",
        pairs,
        short,
    }
}

fn is_question(title: &str) -> bool {
    title.contains('?')
}

/// A paragraph of the converted text.
enum Block<'a> {
    Heading { level: usize, title: String },
    Body(&'a str),
}

impl<'a> Block<'a> {
    fn read(block: &'a str) -> Block<'a> {
        let hashes = block.len() - block.trim_start_matches('#').len();
        match block[hashes..]
            .strip_prefix(' ')
            .and_then(|t| t.strip_prefix(HEADING_MARK))
        {
            Some(title) if hashes > 0 => Block::Heading {
                level: hashes,
                title: clean_title(title),
            },
            _ => Block::Body(block),
        }
    }
}

/// A heading as a question: whitespace collapsed, the section number ("8.1.1. ") dropped.
fn clean_title(title: &str) -> String {
    let words: Vec<&str> = title.split_whitespace().collect();
    let numbered = words
        .first()
        .is_some_and(|w| w.ends_with('.') && w.chars().all(|c| c.is_ascii_digit() || c == '.'));
    words[usize::from(numbered)..].join(" ")
}

/// The part of a page worth reading, as HTML: the element marked `role="main"` if there is one
/// (Sphinx puts the sidebar and footers outside it), else the whole page; with the elements of
/// [`CUT_CLASSES`] cut out and [`HEADING_MARK`] written at the start of every heading.
fn content_html(html: &str) -> String {
    let mut emitter = DefaultEmitter::<usize>::new_with_span();
    emitter.naively_switch_states(true);
    let tokens: Vec<Token<usize>> = Tokenizer::new_with_emitter(html, emitter)
        .map(|t: Result<Token<usize>, Infallible>| match t {
            Ok(t) => t,
        })
        .collect();

    let main = tokens.iter().position(|t| match t {
        Token::StartTag(tag) => attribute(tag, b"role") == Some("main"),
        _ => false,
    });
    let (first, from, to) = match main {
        Some(i) => {
            let Token::StartTag(tag) = &tokens[i] else {
                unreachable!("position found a start tag")
            };
            let to = element_end(&tokens, i).map_or(html.len(), |j| tag_span(&tokens[j]).0);
            (i + 1, tag.span.end, to)
        }
        None => (0, 0, html.len()),
    };

    let mut out = String::with_capacity(to - from);
    let mut at = from;
    let mut i = first;
    while i < tokens.len() {
        if let Token::StartTag(tag) = &tokens[i] {
            if tag.span.start >= to {
                break;
            }
            let classes = attribute(tag, b"class").unwrap_or("");
            if !tag.self_closing && classes.split_whitespace().any(|c| CUT_CLASSES.contains(&c)) {
                out.push_str(&html[at..tag.span.start]);
                match element_end(&tokens, i) {
                    Some(j) => {
                        at = tag_span(&tokens[j]).1.min(to);
                        i = j + 1;
                        continue;
                    }
                    None => {
                        at = to;
                        break;
                    }
                }
            }
            if matches!(tag.name.as_slice(), b"h1" | b"h2" | b"h3" | b"h4" | b"h5" | b"h6") {
                out.push_str(&html[at..tag.span.end]);
                out.push(HEADING_MARK);
                at = tag.span.end;
            }
        }
        i += 1;
    }
    out.push_str(&html[at..to]);
    out
}

fn attribute<'t>(tag: &'t html5gum::StartTag<usize>, name: &[u8]) -> Option<&'t str> {
    tag.attributes
        .get(name)
        .and_then(|v| std::str::from_utf8(v.value.as_slice()).ok())
}

/// Byte span of a start or end tag (empty for anything else).
fn tag_span(token: &Token<usize>) -> (usize, usize) {
    match token {
        Token::StartTag(t) => (t.span.start, t.span.end),
        Token::EndTag(t) => (t.span.start, t.span.end),
        _ => (0, 0),
    }
}

/// Index of the end tag closing the element opened at `tokens[open]`, counting nested elements
/// of the same name (both pages are well-formed XHTML-style markup).
fn element_end(tokens: &[Token<usize>], open: usize) -> Option<usize> {
    let Token::StartTag(tag) = &tokens[open] else {
        return None;
    };
    let mut depth = 0usize;
    for (j, token) in tokens.iter().enumerate().skip(open + 1) {
        match token {
            Token::StartTag(t) if t.name == tag.name && !t.self_closing => depth += 1,
            Token::EndTag(t) if t.name == tag.name => {
                if depth == 0 {
                    return Some(j);
                }
                depth -= 1;
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_go_and_answers_are_spans_of_what_is_left() {
        let html = "<html><body><div class=\"toc\"><p>Why is it so?</p></div>\
            <h1>Chapter 1. Basics</h1><p>Intro text.</p>\
            <h2>1.1. Why is the sky blue?</h2><p>Because air scatters blue light more than red light.</p>\
            <h3>1.1.1. Details</h3><p>Rayleigh scattering grows with the fourth power of frequency.</p>\
            <h3>1.1.2. And sunsets?</h3><p>Too short.</p>\
            <h2>1.2. Next</h2><p>Other.</p></body></html>";
        let whole = page("a.txt", html, false);
        assert!(
            whole.text.contains("## 1.1. Why is the sky blue?\n\nBecause air"),
            "{}",
            whole.text
        );
        let page = page("a.txt", html, true);
        assert!(!page.text.contains("Why is it so?"), "{}", page.text);
        assert!(!page.text.contains("sky blue"));
        assert_eq!(page.pairs.len(), 1);
        assert_eq!(page.short, 1);
        let pair = &page.pairs[0];
        assert_eq!(pair.question, "Why is the sky blue?");
        let answer: String = page.text.chars().skip(pair.start).take(pair.end - pair.start).collect();
        assert!(answer.starts_with("Because air"), "{answer}");
        assert!(answer.ends_with("frequency."), "{answer}");
        let pair = &whole.pairs[0];
        let answer: String = whole
            .text
            .chars()
            .skip(pair.start)
            .take(pair.end - pair.start)
            .collect();
        assert!(
            answer.starts_with("Because air") && answer.ends_with("frequency."),
            "{answer}"
        );
        assert!(
            answer.contains("### 1.1.1. Details"),
            "the unquestioned sub-heading is in the answer"
        );
    }
}
