//! HTML to readable text, read off `html5gum`'s WHATWG tokenizer.
//!
//! Rules: the content of `<head>` (including a `<head>` the page never opened, such as a bare
//! `<title>`), `<script>`, `<style>`, `<noscript>`, `<template>`, `<iframe>` and the like is
//! dropped; block elements (`<p>`, `<div>`, `<section>`, tables, …) become paragraphs, `<br>`,
//! list items and table rows become line breaks, table cells are separated by spaces. Headings
//! become markdown ATX headings (`## Title`) and list items `- item` / `1. item`, so the splitter
//! treats them as it treats markdown. Entities are decoded by the tokenizer (character references
//! as the spec defines them, with or without the `;`); `&nbsp;` becomes an ordinary space.
//! Whitespace collapses as a browser collapses it, except inside `<pre>`, and runs of blank lines
//! collapse to one. Tags are not balanced (no tree is built): stray or unclosed tags only affect
//! where line breaks go.

use std::convert::Infallible;

use html5gum::{DefaultEmitter, Token, Tokenizer};

/// Pages larger than this are converted whole: finding the main content builds a tree of the
/// page, and its memory and time must stay bounded.
pub const MAIN_CONTENT_MAX_BYTES: usize = 4 << 20;
/// Pages nested deeper than this are converted whole (no real page is; an adversarial one
/// should not reach the tree's scoring).
pub const MAIN_CONTENT_MAX_DEPTH: usize = 256;
/// Pages with more elements than this are converted whole.
pub const MAIN_CONTENT_MAX_ELEMENTS: usize = 100_000;

/// What is navigation wherever it is: landmarks (`<nav>`, ARIA roles), a page's own header and
/// footer, footers within it, breadcrumbs, and the sidebars, relation bars and permalink marks
/// of the common documentation generators (Sphinx and its themes, MkDocs).
const NAVIGATION: &str = "nav, footer, body > header, [role=navigation], [role=search], [role=banner], \
     [role=contentinfo], [role=complementary], .breadcrumb, .breadcrumbs, .wy-breadcrumbs, .sphinxsidebar, \
     .related, .headerlink, .md-sidebar, .md-header, .md-footer, .toctree-wrapper.compound + .rst-footer-buttons";

/// A page's main content: its article as HTML, and its title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MainContent {
    pub html: String,
    pub title: Option<String>,
}

/// The main content of an HTML page (`dom_smoothie`'s port of Mozilla's Readability: the
/// article without navigation, tables of contents, breadcrumbs, sidebars and footers), or
/// `None` when the page is too large or deep for the tree it needs ([`MAIN_CONTENT_MAX_BYTES`],
/// [`MAIN_CONTENT_MAX_DEPTH`], [`MAIN_CONTENT_MAX_ELEMENTS`]; checked first by a linear pass of
/// the tokenizer that follows the tree builder's nesting, [`shallow_enough`]): the caller then
/// converts the whole page. A page where no article stands out keeps everything but its
/// navigation. `stop` is asked between the passes, each of which is bounded by the limits.
///
/// # Errors
/// [`Stopped::Asked`] when `stop` said so.
pub fn main_content(html: &str, stop: &dyn Fn() -> bool) -> Result<Option<MainContent>, Stopped> {
    let asked = |()| if stop() { Err(Stopped::Asked) } else { Ok(()) };
    if html.len() > MAIN_CONTENT_MAX_BYTES || !shallow_enough(html, stop)? {
        return Ok(None);
    }
    asked(())?;
    let config = dom_smoothie::Config {
        max_elements_to_parse: MAIN_CONTENT_MAX_ELEMENTS,
        ..dom_smoothie::Config::default()
    };
    // Navigation landmarks go before the scoring: a theme often puts breadcrumbs, page links
    // and a footer in the same block as the article, where the scoring keeps them.
    let document = dom_query::Document::from(html);
    asked(())?;
    document.select(NAVIGATION).remove();
    // A page without an article that stands out (an index, a search page) keeps what is left
    // once the navigation is gone.
    let page = document.html().to_string();
    let page_title = document.select("title").text().trim().to_owned();
    asked(())?;
    let Ok(mut readability) = dom_smoothie::Readability::with_document(document, None, Some(config)) else {
        return Ok(None);
    };
    let (content, title) = match readability.parse() {
        Ok(article) if !article.content.trim().is_empty() => (article.content.to_string(), article.title),
        _ => (page, page_title),
    };
    asked(())?;
    let title = title.trim();
    Ok(Some(MainContent {
        html: content,
        title: (!title.is_empty()).then(|| title.to_owned()),
    }))
}

/// Whether the tree the HTML tree builder makes of `html` nests at most
/// [`MAIN_CONTENT_MAX_DEPTH`] deep and has at most [`MAIN_CONTENT_MAX_ELEMENTS`] elements.
///
/// Read off the tokenizer, never by building the tree (whose builder spends time on each tag in
/// proportion to the depth). The depth is followed as the builder nests, erring deep: an end tag
/// closes the innermost open element of its name and those inside it, an end tag that matches
/// no open element is ignored (as the builder ignores it: `<div></x>` nests), the self-closing
/// flag counts only inside `<svg>` and `<math>` (`<div/>` opens a `<div>`), a `<p>`, `<li>`,
/// `<dt>`, `<dd>`, `<tr>`, `<td>`, `<th>` or `<option>` closes one of its name right above it, and
/// a formatting element (`<b>`, `<a>`, `<font>`, …) closed implicitly by an outer end tag is
/// still counted, since the builder re-opens it inside later content.
fn shallow_enough(html: &str, stop: &dyn Fn() -> bool) -> Result<bool, Stopped> {
    let mut open: Vec<Vec<u8>> = Vec::new();
    let (mut reopened, mut elements, mut foreign) = (0usize, 0usize, 0usize);
    for (n, token) in Tokenizer::new(html).enumerate() {
        if n % STOP_EVERY == STOP_EVERY - 1 && stop() {
            return Err(Stopped::Asked);
        }
        let Ok(token): Result<Token, Infallible> = token;
        match token {
            Token::StartTag(tag) => {
                elements += 1;
                if elements > MAIN_CONTENT_MAX_ELEMENTS {
                    return Ok(false);
                }
                let name = tag.name.as_slice();
                if is_void(name) || (tag.self_closing && foreign > 0) {
                    continue;
                }
                if closes_its_like(name) && open.last().is_some_and(|top| top.as_slice() == name) {
                    open.pop();
                }
                if matches!(name, b"svg" | b"math") {
                    foreign += 1;
                }
                open.push(name.to_vec());
                if open.len() + reopened > MAIN_CONTENT_MAX_DEPTH {
                    return Ok(false);
                }
            }
            Token::EndTag(tag) => {
                let name = tag.name.as_slice();
                match open.iter().rposition(|o| o.as_slice() == name) {
                    Some(at) => {
                        for inner in open.drain(at..).skip(1) {
                            if is_formatting(&inner) {
                                reopened += 1;
                            }
                            if matches!(inner.as_slice(), b"svg" | b"math") {
                                foreign -= 1;
                            }
                        }
                        if matches!(name, b"svg" | b"math") {
                            foreign -= 1;
                        }
                    }
                    // Closing a re-opened formatting element ends its re-opening.
                    None if is_formatting(name) => reopened = reopened.saturating_sub(1),
                    None => {}
                }
            }
            _ => {}
        }
    }
    Ok(true)
}

/// Start tags that close an element of their own name right above them.
fn closes_its_like(name: &[u8]) -> bool {
    matches!(name, b"p" | b"li" | b"dt" | b"dd" | b"tr" | b"td" | b"th" | b"option")
}

/// The HTML tree builder's formatting elements (re-opened after an outer element closes them).
fn is_formatting(name: &[u8]) -> bool {
    matches!(
        name,
        b"a" | b"b"
            | b"big"
            | b"code"
            | b"em"
            | b"font"
            | b"i"
            | b"nobr"
            | b"s"
            | b"small"
            | b"strike"
            | b"strong"
            | b"tt"
            | b"u"
    )
}

fn is_void(name: &[u8]) -> bool {
    matches!(
        name,
        b"area"
            | b"base"
            | b"br"
            | b"col"
            | b"embed"
            | b"hr"
            | b"img"
            | b"input"
            | b"link"
            | b"meta"
            | b"source"
            | b"track"
            | b"wbr"
            | b"param"
            | b"keygen"
    )
}

/// Readable text of an HTML document or fragment. Never fails: the tokenizer recovers from any
/// markup error the way browsers do.
#[must_use]
pub fn to_text(html: &str) -> String {
    to_text_within(html, usize::MAX, &|| false).unwrap_or_default()
}

/// Why [`to_text_within`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The text grew past the limit.
    TooLarge,
    /// `stop` said so (the request was abandoned).
    Asked,
}

/// Tokens converted between two looks at `stop`.
const STOP_EVERY: usize = 4096;

/// [`to_text`], giving up once the text is longer than `max_bytes` or `stop()` returns true.
///
/// The work is linear in the input: every token adds at most a bounded prefix (list indentation
/// stops growing at [`MAX_LIST_INDENT`] levels) besides its own text.
///
/// # Errors
/// [`Stopped`] says why it gave up.
pub fn to_text_within(html: &str, max_bytes: usize, stop: &dyn Fn() -> bool) -> Result<String, Stopped> {
    let mut emitter = DefaultEmitter::default();
    // script/style/title/textarea… switch the tokenizer to raw text, so `<` inside them is text.
    emitter.naively_switch_states(true);
    let mut reader = Reader::default();
    for (n, token) in Tokenizer::new_with_emitter(html, emitter).enumerate() {
        let token: Result<Token, Infallible> = token;
        let Ok(token) = token;
        reader.token(token);
        if reader.writer.out.len() > max_bytes {
            return Err(Stopped::TooLarge);
        }
        if n % STOP_EVERY == STOP_EVERY - 1 && stop() {
            return Err(Stopped::Asked);
        }
    }
    Ok(reader.writer.finish())
}

/// Nesting levels of lists that indent their items; deeper lists indent no further, so that
/// thousands of nested lists do not turn each item into a line of thousands of spaces.
pub const MAX_LIST_INDENT: usize = 8;

/// What a tag does to the text flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Its content is not text for people (scripts, styles, head-only elements…).
    Dropped,
    /// Starts and ends a paragraph.
    Block,
    /// Starts and ends a line.
    Line,
    /// A table cell: separated from its neighbours by a space.
    Cell,
    /// `<h1>`…`<h6>`.
    Heading(usize),
    List {
        ordered: bool,
    },
    Item,
    Pre,
    Break,
    /// Elements that may appear inside `<head>` without ending it.
    HeadOnly,
    Inline,
}

fn kind(name: &[u8]) -> Kind {
    match name {
        b"script" | b"style" | b"title" | b"noscript" | b"template" | b"iframe" | b"noembed" | b"noframes" => {
            Kind::Dropped
        }
        b"address" | b"article" | b"aside" | b"blockquote" | b"body" | b"caption" | b"center" | b"details"
        | b"dialog" | b"div" | b"dl" | b"fieldset" | b"figcaption" | b"figure" | b"footer" | b"form" | b"header"
        | b"hgroup" | b"hr" | b"html" | b"legend" | b"main" | b"menu" | b"nav" | b"p" | b"search" | b"section"
        | b"summary" | b"table" => Kind::Block,
        b"dd" | b"dt" | b"tr" | b"thead" | b"tbody" | b"tfoot" | b"option" => Kind::Line,
        b"td" | b"th" => Kind::Cell,
        b"h1" => Kind::Heading(1),
        b"h2" => Kind::Heading(2),
        b"h3" => Kind::Heading(3),
        b"h4" => Kind::Heading(4),
        b"h5" => Kind::Heading(5),
        b"h6" => Kind::Heading(6),
        b"ul" => Kind::List { ordered: false },
        b"ol" => Kind::List { ordered: true },
        b"li" => Kind::Item,
        b"pre" | b"listing" | b"xmp" => Kind::Pre,
        b"br" => Kind::Break,
        b"meta" | b"link" | b"base" | b"basefont" | b"bgsound" => Kind::HeadOnly,
        _ => Kind::Inline,
    }
}

#[derive(Default)]
struct Reader {
    writer: Writer,
    /// Dropping content until the end tag of this element.
    skip_until: Option<Vec<u8>>,
    in_head: bool,
    /// Open lists: `None` for `<ul>`, the next number for `<ol>`.
    lists: Vec<Option<u64>>,
}

impl Reader {
    fn token(&mut self, token: Token) {
        if let Some(name) = &self.skip_until {
            if let Token::EndTag(tag) = &token
                && tag.name.as_slice() == name.as_slice()
            {
                self.skip_until = None;
            }
            return;
        }
        match token {
            Token::StartTag(tag) => {
                let name = tag.name.as_slice();
                let kind = kind(name);
                if self.in_head {
                    match kind {
                        Kind::Dropped | Kind::HeadOnly => {}
                        // Anything else ends the head, as it does in a browser.
                        _ => self.in_head = false,
                    }
                }
                match kind {
                    Kind::Dropped => {
                        if !tag.self_closing {
                            self.skip_until = Some(name.to_vec());
                        }
                    }
                    // A heading's permalink mark (Sphinx and MkDocs: `<a class="headerlink">¶</a>`)
                    // is no text.
                    Kind::Inline
                        if name == b"a"
                            && tag.attributes.get(b"class".as_slice()).is_some_and(|class| {
                                (class.value.as_slice().split(u8::is_ascii_whitespace)).any(|c| c == b"headerlink")
                            }) =>
                    {
                        if !tag.self_closing {
                            self.skip_until = Some(name.to_vec());
                        }
                    }
                    Kind::Inline if name == b"head" => self.in_head = true,
                    Kind::Inline | Kind::HeadOnly => {}
                    Kind::Block => self.writer.brk(Break::Paragraph),
                    Kind::Line => self.writer.brk(Break::Line),
                    Kind::Cell => self.writer.brk(Break::Space),
                    Kind::Heading(level) => {
                        self.writer.brk(Break::Paragraph);
                        self.writer.prefix = Some(format!("{} ", "#".repeat(level)));
                    }
                    Kind::List { ordered } => {
                        // A nested list continues its item's line block; a top-level one is a block.
                        self.writer.brk(if self.lists.is_empty() {
                            Break::Paragraph
                        } else {
                            Break::Line
                        });
                        let start = tag
                            .attributes
                            .get(b"start".as_slice())
                            .and_then(|v| std::str::from_utf8(v.value.as_slice()).ok()?.trim().parse().ok());
                        self.lists.push(ordered.then(|| start.unwrap_or(1)));
                    }
                    Kind::Item => {
                        self.writer.brk(Break::Line);
                        let indent = "  ".repeat(self.lists.len().saturating_sub(1).min(MAX_LIST_INDENT));
                        let marker = match self.lists.last_mut() {
                            Some(Some(number)) => {
                                let marker = format!("{number}. ");
                                *number = number.saturating_add(1);
                                marker
                            }
                            _ => "- ".to_owned(),
                        };
                        self.writer.prefix = Some(indent + &marker);
                    }
                    Kind::Pre => {
                        self.writer.brk(Break::Paragraph);
                        self.writer.pre += 1;
                        self.writer.pre_start = true;
                    }
                    Kind::Break => self.writer.line_break(),
                }
            }
            Token::EndTag(tag) => {
                let name = tag.name.as_slice();
                match kind(name) {
                    Kind::Inline if name == b"head" => self.in_head = false,
                    Kind::Block | Kind::Heading(_) => self.writer.brk(Break::Paragraph),
                    Kind::Line | Kind::Item => self.writer.brk(Break::Line),
                    Kind::List { .. } => {
                        self.lists.pop();
                        self.writer.brk(if self.lists.is_empty() {
                            Break::Paragraph
                        } else {
                            Break::Line
                        });
                    }
                    Kind::Pre => {
                        self.writer.pre = self.writer.pre.saturating_sub(1);
                        self.writer.brk(Break::Paragraph);
                    }
                    // `</br>` is read as `<br>` by browsers.
                    Kind::Break => self.writer.line_break(),
                    Kind::Dropped | Kind::Cell | Kind::HeadOnly | Kind::Inline => {}
                }
            }
            Token::String(text) => {
                let text = String::from_utf8_lossy(text.value.as_slice());
                if self.in_head {
                    if text.chars().all(is_collapsible) {
                        return;
                    }
                    self.in_head = false;
                }
                self.writer.text(&text);
            }
            Token::Comment(_) | Token::Doctype(_) | Token::Error(_) => {}
        }
    }
}

/// A pending separator; a stronger one wins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
enum Break {
    #[default]
    None,
    Space,
    Line,
    Paragraph,
}

#[derive(Default)]
struct Writer {
    out: String,
    pending: Break,
    /// Written before the next text (a heading's `## ` or a list marker).
    prefix: Option<String>,
    /// Depth of `<pre>` elements: whitespace is kept inside.
    pre: usize,
    /// Right after `<pre>`, whose first newline is not content.
    pre_start: bool,
}

fn is_collapsible(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{c}' | '\u{a0}')
}

impl Writer {
    fn brk(&mut self, brk: Break) {
        self.pending = self.pending.max(brk);
    }

    /// `<br>`: a line break even when one is already pending (`a<br><br>b` keeps a blank line).
    fn line_break(&mut self) {
        if self.pending == Break::Line {
            self.pending = Break::Paragraph;
        } else {
            self.brk(Break::Line);
        }
    }

    fn text(&mut self, text: &str) {
        if self.pre > 0 {
            let text = if self.pre_start {
                text.strip_prefix('\n').unwrap_or(text)
            } else {
                text
            };
            self.pre_start = false;
            if text.is_empty() {
                return;
            }
            self.flush();
            self.out.push_str(text);
            return;
        }
        for c in text.chars() {
            if is_collapsible(c) {
                self.brk(Break::Space);
            } else {
                self.flush();
                self.out.push(c);
            }
        }
    }

    fn flush(&mut self) {
        if !self.out.is_empty() {
            match self.pending {
                Break::None => {}
                Break::Space => {
                    if !self.out.ends_with(char::is_whitespace) {
                        self.out.push(' ');
                    }
                }
                Break::Line | Break::Paragraph => {
                    let kept = self.out.trim_end_matches(is_collapsible).len();
                    self.out.truncate(kept);
                    self.out
                        .push_str(if self.pending == Break::Line { "\n" } else { "\n\n" });
                }
            }
        }
        self.pending = Break::None;
        if let Some(prefix) = self.prefix.take() {
            self.out.push_str(&prefix);
        }
    }

    /// The text with trailing whitespace cut from every line and at most one blank line in a row.
    fn finish(self) -> String {
        let mut text = String::with_capacity(self.out.len());
        let mut blank_run = true;
        for line in self.out.lines() {
            let line = line.trim_end();
            if line.is_empty() {
                if !blank_run {
                    text.push('\n');
                }
                blank_run = true;
                continue;
            }
            blank_run = false;
            text.push_str(line);
            text.push('\n');
        }
        text.truncate(text.trim_end().len());
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shallow(html: &str) -> bool {
        shallow_enough(html, &|| false).unwrap()
    }

    #[test]
    fn the_depth_guard_nests_as_the_tree_builder_does() {
        let deep = MAIN_CONTENT_MAX_DEPTH + 44;
        // End tags that match nothing open close nothing; `<div/>` opens a div.
        assert!(!shallow(&"<div></x>".repeat(deep)));
        assert!(!shallow(&"<div/>".repeat(deep)));
        assert!(!shallow(&"<div>".repeat(deep)));
        // A formatting element closed by an outer end tag is re-opened inside later content.
        assert!(!shallow(&"<div><b></div>".repeat(deep)));
        // What real pages do stays shallow: closed elements, unclosed paragraphs and items,
        // self-closed SVG shapes, formatting closed in order.
        assert!(shallow(&"<div><p>text</p></div>".repeat(5000)));
        assert!(shallow(&format!("<ul>{}</ul>", "<li>item".repeat(5000))));
        assert!(shallow(&"<p>para".repeat(5000)));
        assert!(shallow(&format!("<svg>{}</svg>", "<path d='M0'/>".repeat(5000))));
        assert!(shallow(&"<p><b>bold</b> and <i>it</i></p>".repeat(5000)));
        assert!(shallow(&"<div>".repeat(MAIN_CONTENT_MAX_DEPTH)));
    }

    #[test]
    fn a_page_nested_past_the_guard_is_converted_whole() {
        let nav = "<nav>Home | About</nav>";
        let shallow_page = format!(
            "<html><body>{nav}{}<p>Body text here.</p></body></html>",
            "<div></div>".repeat(300)
        );
        let deep_page = format!(
            "<html><body>{nav}{}<p>Body text here.</p></body></html>",
            "<div></x>".repeat(300)
        );
        assert!(main_content(&shallow_page, &|| false).unwrap().is_some());
        assert_eq!(main_content(&deep_page, &|| false).unwrap(), None);
        // Stopped between passes when asked.
        assert_eq!(main_content(&shallow_page, &|| true), Err(Stopped::Asked));
    }

    #[test]
    fn blocks_lists_and_headings() {
        let html = "<html><head><title>T</title><meta charset=utf-8><style>p{}</style></head>\
            <body><h1>Hello &amp; <em>welcome</em></h1><p>One\n   two.<br>Three</p>\
            <ol start=3><li>a</li><li>b<ul><li>c</li></ul></li></ol><pre>\n  x\n\n\n  y</pre>\
            <table><tr><td>1</td><td>2</td></tr><tr><td>3</td></tr></table></body></html>";
        assert_eq!(
            to_text(html),
            "# Hello & welcome\n\nOne two.\nThree\n\n3. a\n4. b\n  - c\n\n  x\n\n  y\n\n1 2\n3"
        );
    }

    #[test]
    fn head_without_tags_and_scripts_are_dropped() {
        let html = "<title>Gone</title><script>if (a < b) { document.write('<p>x</p>') }</script>\
            Kept&nbsp;text &eacute;&#233;&#x1F389; &lt;tag&gt;<noscript><p>no</p></noscript>";
        assert_eq!(to_text(html), "Kept text éé🎉 <tag>");
    }

    #[test]
    fn deep_lists_indent_no_further_than_the_cap() {
        let html = format!("{}{}", "<ul>".repeat(4000), "<li>x".repeat(20_000));
        let text = to_text(&html);
        assert_eq!(text.lines().count(), 20_000);
        let deepest = "  ".repeat(MAX_LIST_INDENT);
        assert!(
            text.lines().all(|line| line == format!("{deepest}- x")),
            "{}",
            &text[..200]
        );
        // Linear in the input: the text is a small multiple of the markup, not 4,000 × of it.
        assert!(
            text.len() < 5 * html.len(),
            "{} bytes of text from {} of HTML",
            text.len(),
            html.len()
        );
    }

    #[test]
    fn conversion_stops_at_the_limit_or_when_asked() {
        let html = "<p>word</p>".repeat(10_000);
        assert_eq!(to_text_within(&html, 1000, &|| false), Err(Stopped::TooLarge));
        assert_eq!(to_text_within(&html, usize::MAX, &|| true), Err(Stopped::Asked));
        assert_eq!(
            to_text_within(&html, usize::MAX, &|| false).map(|t| t.len()),
            Ok(to_text(&html).len())
        );
    }

    #[test]
    fn junk_is_survivable() {
        assert_eq!(to_text("<<<>>></p></div><p"), "<<<>>>");
        assert_eq!(to_text(""), "");
        assert_eq!(to_text("<script>never closed"), "");
    }
}
