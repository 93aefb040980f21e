//! Context prefixes (`chunking.context_prefix`): each chunk is embedded after a short line that
//! says where it sits — its source's title and the headings of the sections around it — so a
//! chunk deep in an answer still carries the question it answers. The stored text is unchanged;
//! the prefix is kept beside it and is part of what the vector was made from.
//!
//! # Decisions
//! - **Shape**: `title\nouter heading › inner heading\n\n`, then the chunk's text. The title is
//!   the source's own (given at upload or taken from the page), else its filename. The path is
//!   the chain of headings open at the chunk's start: ATX headings (`#`, also how quarry stores
//!   HTML headings) nest by level; a heading the format gives no level for (setext, underlined,
//!   plain-text rules) is a sibling of the previous such heading, under the ATX ones.
//! - **No repetition**: a chunk that opens with its section's heading does not get that heading
//!   again in its path.
//! - **Bounded**: at most [`ChunkingProfile::CONTEXT_PREFIX_MAX_TOKENS`] tokens by the world's
//!   own counter; past it the outermost headings go first, then the text is cut. A world with
//!   prefixes keeps its chunks that much under the model's limit, so chunk and prefix always fit.

use crate::domain::{ChunkingProfile, NewChunk, SourceFormat};

use super::TokenCounter;

/// Longest title or heading kept, in chars.
const MAX_PART_CHARS: usize = 120;

/// The most lines a heading is read from.
const HEADING_LINES: usize = 5;

/// Sets `embed_prefix` (and its tokens) on `chunks` of `text`, a source of `format` named
/// `title`.
pub fn add_context_prefixes(
    text: &str,
    format: SourceFormat,
    title: &str,
    chunks: &mut [NewChunk],
    counter: &dyn TokenCounter,
) {
    let headings: Vec<(u64, Heading)> = super::sections::headings(text, format)
        .into_iter()
        .filter_map(|(at, byte)| Some((at, heading_at(&text[byte..])?)))
        .collect();
    let title = part(title);
    let mut open: Vec<&Heading> = Vec::new();
    let mut next = 0;
    let mut last: Option<(String, u32)> = None;
    for chunk in chunks.iter_mut() {
        while next < headings.len() && headings[next].0 <= chunk.char_start {
            let heading = &headings[next].1;
            open.retain(|h| h.level < heading.level);
            open.push(heading);
            next += 1;
        }
        // The chunk that opens with its section's heading has it already.
        let opens_section = next > 0 && headings[next - 1].0 == chunk.char_start;
        let path: Vec<&str> = open[..open.len() - usize::from(opens_section && !open.is_empty())]
            .iter()
            .map(|h| h.text.as_str())
            .collect();
        let (prefix, tokens) = match &last {
            Some((p, n)) if *p == render(&title, &path) => (p.clone(), *n),
            _ => bounded(&title, &path, counter),
        };
        last = Some((prefix.clone(), tokens));
        chunk.embed_prefix = prefix;
        chunk.embed_prefix_tokens = tokens;
    }
}

#[derive(Debug)]
struct Heading {
    /// 1–6 for an ATX heading; 7 for one whose format gives no level.
    level: u8,
    text: String,
}

/// The heading that starts `rest` (a section's start): its first line with letters, `#`s and
/// an overline dropped; a question's lines up to its blank line, joined.
fn heading_at(rest: &str) -> Option<Heading> {
    // A few lines at most: an overline, the title, a question's continuation. Never further,
    // or a text of many letterless headings would be read once per heading.
    let mut lines = rest
        .lines()
        .take(HEADING_LINES)
        .map(str::trim)
        .skip_while(|l| !l.chars().any(char::is_alphanumeric));
    let first = lines.next()?;
    let hashes = first.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) {
        let text = first[hashes..].trim().trim_end_matches('#').trim();
        return Some(Heading {
            level: u8::try_from(hashes).unwrap_or(7),
            text: part(text),
        });
    }
    let mut text = first.to_owned();
    if !text.ends_with('?') {
        // A question may run over two or three lines: take them until it ends.
        for line in lines.take(2) {
            if line.is_empty() || !line.chars().any(char::is_alphanumeric) {
                break;
            }
            text.push(' ');
            text.push_str(line);
            if line.ends_with('?') {
                break;
            }
        }
        if !text.ends_with('?') {
            text = first.to_owned();
        }
    }
    Some(Heading {
        level: 7,
        text: part(&text),
    })
}

/// `s` trimmed and cut to [`MAX_PART_CHARS`], whitespace runs made single spaces.
fn part(s: &str) -> String {
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(MAX_PART_CHARS) {
        Some((at, _)) => format!("{}…", &joined[..at]),
        None => joined,
    }
}

fn render(title: &str, path: &[&str]) -> String {
    match (title.is_empty(), path.is_empty()) {
        (true, true) => String::new(),
        (false, true) => format!("{title}\n\n"),
        (true, false) => format!("{}\n\n", path.join(" › ")),
        (false, false) => format!("{title}\n{}\n\n", path.join(" › ")),
    }
}

/// The prefix for `title` and `path` within the token bound, and its tokens.
fn bounded(title: &str, path: &[&str], counter: &dyn TokenCounter) -> (String, u32) {
    let max = ChunkingProfile::CONTEXT_PREFIX_MAX_TOKENS as usize;
    let mut path = path;
    loop {
        let prefix = render(title, path);
        let tokens = counter.count(&prefix);
        if tokens <= max {
            return (prefix, u32::try_from(tokens).unwrap_or(u32::MAX));
        }
        if path.len() > 1 {
            path = &path[1..];
            continue;
        }
        // Still too long: cut the text, halving until it fits (a word or less per token).
        let mut kept = prefix.trim_end().to_owned();
        while !kept.is_empty() {
            let half = kept.char_indices().nth(kept.chars().count() / 2).map_or(0, |(i, _)| i);
            kept.truncate(half);
            let candidate = format!("{}…\n\n", kept.trim_end());
            let tokens = counter.count(&candidate);
            if tokens <= max {
                return (candidate, u32::try_from(tokens).unwrap_or(u32::MAX));
            }
        }
        return (String::new(), 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunking::{Cl100k, split_source};

    fn profile() -> ChunkingProfile {
        ChunkingProfile {
            max_tokens: 40,
            overlap_tokens: 0,
            parent_max_tokens: 160,
            context_prefix: true,
        }
    }

    fn prefixed(text: &str, format: SourceFormat, title: &str) -> Vec<NewChunk> {
        let mut chunks = split_source(text, format, profile(), &Cl100k);
        add_context_prefixes(text, format, title, &mut chunks, &Cl100k);
        for chunk in &chunks {
            assert_eq!(chunk.embed_prefix_tokens as usize, Cl100k.count(&chunk.embed_prefix));
        }
        chunks
    }

    #[test]
    fn markdown_chunks_carry_the_title_and_the_headings_above_them() {
        let text = "# Guide\n\nIntro text here.\n\n## Install\n\nRun the installer. It asks for a folder and \
                    then copies every file there, which takes a minute or two on a slow disk. It writes \
                    a log of each step beside the files, and you may delete that log later on. When it \
                    is done, open the program.\n\n### On Windows\n\nDouble-click the file.\n\n## Use\n\nType.\n";
        let chunks = prefixed(text, SourceFormat::Markdown, "Handbook");
        let of = |needle: &str| {
            chunks
                .iter()
                .find(|c| c.chunk_text.contains(needle))
                .map(|c| c.embed_prefix.clone())
                .unwrap()
        };
        // The first chunk opens with its own heading: only the title.
        assert_eq!(of("Intro text"), "Handbook\n\n");
        assert_eq!(of("Install\n\nRun"), "Handbook\nGuide\n\n");
        // A chunk inside the section, not at its start, carries the section's heading.
        assert_eq!(of("open the program"), "Handbook\nGuide › Install\n\n");
        assert_eq!(of("Double-click"), "Handbook\nGuide › Install\n\n");
        // A heading of the same level closes its sibling and its children.
        assert_eq!(of("Type."), "Handbook\nGuide\n\n");
        assert!(
            chunks.iter().all(|c| !c.chunk_text.starts_with("Handbook")),
            "the text is unchanged"
        );
    }

    #[test]
    fn a_plain_text_question_names_the_chunks_of_its_answer() {
        let answer = "The answer goes on for a while, sentence after sentence, so that it does not fit in \
                      one chunk of forty tokens. It keeps explaining. And then it explains some more, \
                      with details that matter.";
        let text = format!("How do I change the colour\nof the cursor?\n\n{answer}\n\nWhy is it slow?\n\nIt is not.\n");
        let chunks = prefixed(&text, SourceFormat::Plain, "");
        assert!(chunks.len() >= 3, "{chunks:#?}");
        assert_eq!(chunks[0].embed_prefix, "", "opens with its question, no title");
        let later: Vec<&NewChunk> = chunks
            .iter()
            .filter(|c| c.chunk_text.contains("explains some more"))
            .collect();
        assert_eq!(later[0].embed_prefix, "How do I change the colour of the cursor?\n\n");
        let last = chunks.last().unwrap();
        assert!(last.chunk_text.starts_with("Why is it slow?"));
        assert_eq!(last.embed_prefix, "");
    }

    #[test]
    fn a_long_path_keeps_its_innermost_headings_within_the_bound() {
        let mut text = String::new();
        for level in 1..=6 {
            text.push_str(&format!(
                "{} A heading at level {level} with quite a few words in it to take tokens\n\n",
                "#".repeat(level)
            ));
        }
        text.push_str("Body.\n\nMore body text that is its own chunk? No, a sentence.\n");
        let title = "t".repeat(500);
        let chunks = prefixed(&text, SourceFormat::Markdown, &title);
        for chunk in &chunks {
            assert!(Cl100k.count(&chunk.embed_prefix) <= ChunkingProfile::CONTEXT_PREFIX_MAX_TOKENS as usize);
        }
        let body = chunks.iter().find(|c| c.chunk_text.contains("More body")).unwrap();
        assert!(!body.embed_prefix.is_empty());
    }

    #[test]
    fn a_heading_is_read_from_its_first_lines_only() {
        // Letterless headings one after another: each is read from a few lines, not the rest.
        assert!(heading_at(&"#\n".repeat(10_000)).is_none());
        let heading = heading_at("=====\nTitle\n=====\n\nBody.").unwrap();
        assert_eq!((heading.level, heading.text.as_str()), (7, "Title"));
        assert!(heading_at(&format!("{}Far away", "-\n".repeat(10))).is_none());
    }

    #[test]
    fn setext_and_rst_titles_name_their_sections() {
        let text = "Overview\n========\n\nFirst part. It runs on and on, long enough to need a second chunk \
                    of its own when the chunks hold forty tokens each. Another sentence follows here, \
                    and then one more, which they do.\n\nDetails\n-------\n\nSecond.\n";
        let chunks = prefixed(text, SourceFormat::Markdown, "Doc");
        let tail = chunks.iter().find(|c| c.chunk_text.contains("which they do")).unwrap();
        assert_eq!(tail.embed_prefix, "Doc\nOverview\n\n");
        let second = chunks.iter().find(|c| c.chunk_text.contains("Second.")).unwrap();
        assert_eq!(second.embed_prefix, "Doc\n\n");
    }
}
