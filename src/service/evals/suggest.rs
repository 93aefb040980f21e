//! A starter test set drafted from a world's own sections: a heading that is a question (it ends
//! in `?`), asked as the query, with the start of the text under it as the expected answer and
//! its source as the expected hit. Useful on FAQ-shaped corpora; a draft for the user to read
//! and correct, never stored by itself, and no model is asked anything.
//!
//! The work is bounded: at most [`MAX_SOURCES_READ`] sources and [`MAX_CHARS_READ`] chars of
//! stored text are read, in reading order, and it stops once `limit` questions are found.

use std::collections::HashSet;

use super::{EvalService, MAX_ITEMS, MAX_QUERY_CHARS, invalid};
use crate::domain::{EvalItem, Expected, SourceFormat, Window, WorldId};
use crate::service::{Missing, ServiceError, ServiceResult};

/// Questions drafted when the request does not say.
pub const DEFAULT_SUGGESTIONS: usize = 50;
/// Sources read at most for one draft.
pub const MAX_SOURCES_READ: u64 = 2000;
/// Stored text read at most for one draft, in chars.
pub const MAX_CHARS_READ: u64 = 32 * 1024 * 1024;
/// The longest expected answer drafted, in chars: the first paragraphs under the question.
const ANSWER_CHARS: usize = 600;
/// An answer under this many words is not worth judging on.
const MIN_ANSWER_WORDS: usize = 4;

/// A drafted test set, and what was read to draft it.
#[derive(Clone, Debug, PartialEq)]
pub struct Suggestion {
    pub items: Vec<EvalItem>,
    pub sources_read: u64,
    pub sections_seen: u64,
}

impl EvalService {
    /// Drafts up to `limit` (1 to 1000; default 50) questions from the sections of `world`.
    pub async fn suggest(&self, world: WorldId, limit: Option<usize>) -> ServiceResult<Suggestion> {
        let limit = limit.unwrap_or(DEFAULT_SUGGESTIONS);
        if !(1..=MAX_ITEMS).contains(&limit) {
            return Err(invalid("limit", format!("limit must be 1 to {MAX_ITEMS}")));
        }
        if self.store.get_world(world).await?.is_none() {
            return Err(ServiceError::NotFound(Missing::World));
        }
        let mut suggestion = Suggestion {
            items: Vec::new(),
            sources_read: 0,
            sections_seen: 0,
        };
        let mut asked = HashSet::new();
        let mut chars = 0u64;
        let page = 100;
        let mut offset = 0;
        'sources: loop {
            let sources = self.store.list_sources(world, Window { offset, limit: page }).await?;
            for source in &sources {
                if suggestion.sources_read >= MAX_SOURCES_READ || chars >= MAX_CHARS_READ {
                    break 'sources;
                }
                let Some(text) = self.store.source_text(world, source.id).await? else {
                    continue;
                };
                suggestion.sources_read += 1;
                chars += source.chars;
                let format = SourceFormat::of(&source.content_type).unwrap_or(SourceFormat::Plain);
                // Off the runtime: one text's sections, a linear pass.
                let text = tokio::task::spawn_blocking(move || questions(&text, format))
                    .await
                    .map_err(|err| ServiceError::Internal { source: err.into() })?;
                suggestion.sections_seen += text.sections;
                for (query, answer) in text.found {
                    if asked.insert(query.to_lowercase()) {
                        suggestion.items.push(EvalItem {
                            query,
                            expected: Expected {
                                sources: vec![source.id],
                                answer: Some(answer),
                                ..Expected::default()
                            },
                        });
                        if suggestion.items.len() >= limit {
                            break 'sources;
                        }
                    }
                }
            }
            if (sources.len() as u64) < page {
                break;
            }
            offset += page;
        }
        Ok(suggestion)
    }
}

/// The questions of one text, and how many sections it has.
struct Questions {
    found: Vec<(String, String)>,
    sections: u64,
}

/// Each section whose heading is a question, with the start of its body.
fn questions(text: &str, format: SourceFormat) -> Questions {
    let mut starts = crate::chunking::section_start_bytes(text, format);
    starts.insert(0, 0);
    starts.push(text.len());
    let mut found = Vec::new();
    for pair in starts.windows(2) {
        let section = &text[pair[0]..pair[1]];
        if let Some(q) = question(section) {
            found.push(q);
        }
    }
    Questions {
        found,
        sections: (starts.len() - 1) as u64,
    }
}

/// A section's heading as a question, and the start of the text under it; `None` unless the
/// heading (its first one to three lines) ends in `?` and the body has words enough.
fn question(section: &str) -> Option<(String, String)> {
    let lines: Vec<&str> = section.lines().collect();
    let mut heading = Vec::new();
    let mut body_from = None;
    for (i, line) in lines.iter().enumerate().take(3) {
        let line = line.trim();
        if line.is_empty() {
            break;
        }
        heading.push(line);
        if line.ends_with('?') {
            body_from = Some(i + 1);
            break;
        }
    }
    let body_from = body_from?;
    let query = clean_heading(&heading.join(" "));
    if query.chars().count() < 3 || query.chars().count() > MAX_QUERY_CHARS {
        return None;
    }
    // The underline of a setext or reStructuredText heading is no text of the body.
    let body: Vec<&str> = (lines[body_from..].iter())
        .map(|l| l.trim())
        .skip_while(|l| l.is_empty() || l.chars().all(|c| "=-~^*#".contains(c)))
        .collect();
    let answer = opening(&body);
    (super::score::words(&answer).len() >= MIN_ANSWER_WORDS).then_some((query, answer))
}

/// A heading without its Markdown marks or its number (`## 3.1 How…?`, `Q3) How…?`).
fn clean_heading(heading: &str) -> String {
    let text = heading.trim_start_matches('#').trim();
    let (label, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    // `3.`, `A1)`, `Q3:`, `2.1`: a number, maybe after a letter or two, with a mark after it
    // or levels in it (a bare `2024` may be the title's first word).
    let core = label.trim_end_matches(['.', ')', ':']);
    let digits = core.trim_start_matches(|c: char| c.is_ascii_uppercase());
    let marked = core.len() < label.len() || core.contains('.') || digits.len() < core.len();
    let numbered = !rest.is_empty()
        && marked
        && core.len() - digits.len() <= 2
        && digits.starts_with(|c: char| c.is_ascii_digit())
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.');
    let text = if numbered { rest.trim() } else { text };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first paragraphs of `body`, whole, up to [`ANSWER_CHARS`] (a longer first one is cut
/// at a word), on one line.
fn opening(body: &[&str]) -> String {
    let mut out = String::new();
    for paragraph in body.split(|l| l.is_empty()) {
        let text = paragraph.join(" ");
        if text.is_empty() {
            continue;
        }
        let joined = if out.is_empty() {
            text.clone()
        } else {
            format!("{out} {text}")
        };
        if joined.chars().count() <= ANSWER_CHARS {
            out = joined;
            continue;
        }
        if out.is_empty() {
            let cut: String = text.chars().take(ANSWER_CHARS).collect();
            out = match cut.rfind(char::is_whitespace) {
                Some(at) => cut[..at].to_owned(),
                None => cut,
            };
        }
        break;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_heading_becomes_a_query_with_the_text_under_it() {
        let text = "# Seals\n\nIntro text here.\n\n## 2.1 When do grey seals pup?\n\nGrey seals pup in the autumn on quiet beaches.\n\nMore detail follows.\n\n## Feeding\n\nThey eat fish.\n";
        let q = questions(text, SourceFormat::Markdown);
        assert_eq!(q.sections, 3);
        assert_eq!(
            q.found,
            [(
                "When do grey seals pup?".to_owned(),
                "Grey seals pup in the autumn on quiet beaches. More detail follows.".to_owned()
            )]
        );
    }

    #[test]
    fn plain_faqs_numbered_and_over_two_lines_are_found() {
        let text = "Q3) How do I read a file\nline by line?\n\nOpen it and loop over its lines until the end.\n";
        let q = questions(text, SourceFormat::Plain);
        assert_eq!(q.found.len(), 1, "{:?}", q.found);
        assert_eq!(q.found[0].0, "How do I read a file line by line?");
        // Too short an answer is left out; a heading that asks nothing too.
        assert!(
            questions("# Why?\n\nBecause.\n", SourceFormat::Markdown)
                .found
                .is_empty()
        );
        assert!(
            questions("# Seals\n\nThey live on rocks by the sea.\n", SourceFormat::Markdown)
                .found
                .is_empty()
        );
    }

    #[test]
    fn a_long_answer_is_cut_at_a_word() {
        let long = "word ".repeat(300);
        let answer = opening(&[long.trim()]);
        assert!(
            answer.chars().count() <= ANSWER_CHARS && answer.ends_with("word"),
            "{answer}"
        );
    }
}
