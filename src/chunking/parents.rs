//! Parents for small-to-large retrieval: each source's chunks partitioned into runs of
//! consecutive chunks ("parents"), one per section of the text ([`super::sections`]), a section
//! over `parent_max_tokens` cut into several at its paragraph breaks. Chunks stay the embedded
//! search unit; a retrieval that asks for parents widens each hit within its parent, and every
//! context window stays inside its hit's parent while lower hits still need the room.
//!
//! # Decisions
//! - **Runs of chunks, not a second split of the text.** A parent is `first_chunk..=last_chunk`,
//!   so every chunk has exactly one parent and citations keep the chunks' exact offsets; the
//!   parent spans its first chunk's start to its last chunk's end, and parents never overlap.
//! - **Sections first.** A chunk that holds a section's heading (or follows the gap it lies in)
//!   opens a new parent, however small the one before: a section is one subject, and an answer
//!   read forward from its hit should end where the subject does. Chunks are cut without regard
//!   to sections (so rankings do not change with them), so a chunk that starts in one section
//!   and holds the next one's heading belongs to the next: its heading is what a query about
//!   that section matches, and reading forward from it reads the section.
//! - **A long section** is cut greedily: when the next chunk does not fit, at its last paragraph
//!   break (a blank line between two chunks) that leaves the parent at least half full, else
//!   right there.
//! - **Tokens** are the chunks' own counts summed (each chunk was counted exactly when it was
//!   cut), so the parents of a source add up to its chunks.

use crate::domain::{NewChunk, NewParent, SourceFormat};

/// A chunk as the partition sees it: its number, span (chars of the stored text) and tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkSpan {
    pub number: u32,
    pub char_start: u64,
    pub char_end: u64,
    pub tokens: u32,
}

impl From<&NewChunk> for ChunkSpan {
    fn from(c: &NewChunk) -> Self {
        Self {
            number: c.chunk_number,
            char_start: c.char_start,
            char_end: c.char_end,
            tokens: c.token_count,
        }
    }
}

/// The parents of chunks just cut from `text`, a source of `format`.
#[must_use]
pub fn parents_of(text: &str, format: SourceFormat, chunks: &[NewChunk], max_tokens: u32) -> Vec<NewParent> {
    let spans: Vec<ChunkSpan> = chunks.iter().map(ChunkSpan::from).collect();
    parents(text, format, &spans, max_tokens)
}

/// What a chunk's start is, as a place to cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seam {
    Inside,
    Paragraph,
    Heading,
}

/// The parents of one source's `chunks` (in reading order, spans in chars of `text`, a source of
/// `format`): one per section, each of at most `max_tokens` tokens unless one chunk alone is
/// larger. Empty for no chunks.
#[must_use]
pub fn parents(text: &str, format: SourceFormat, chunks: &[ChunkSpan], max_tokens: u32) -> Vec<NewParent> {
    let mut seams = seams(text, chunks);
    for start in super::section_starts(text, format) {
        // The chunk that holds the heading, or the first after the gap it lies in.
        let owner = chunks.partition_point(|c| c.char_end <= start);
        if let Some(seam) = seams.get_mut(owner) {
            *seam = Seam::Heading;
        }
    }
    let max = u64::from(max_tokens.max(1));
    // Tokens of chunks `a..b` are `sums[b] - sums[a]`.
    let mut sums = Vec::with_capacity(chunks.len() + 1);
    sums.push(0u64);
    for chunk in chunks {
        sums.push(sums[sums.len() - 1] + u64::from(chunk.tokens));
    }
    let tokens = |a: usize, b: usize| sums[b] - sums[a];
    let mut parents = Vec::new();
    let mut emit = |a: usize, b: usize| {
        parents.push(NewParent {
            parent_number: parents.len() as u32,
            first_chunk: chunks[a].number,
            last_chunk: chunks[b - 1].number,
            char_start: chunks[a].char_start,
            char_end: chunks[b - 1].char_end,
            token_count: tokens(a, b),
        });
    };
    let mut start = 0;
    for i in 1..chunks.len() {
        if seams[i] == Seam::Heading {
            emit(start, i);
            start = i;
            continue;
        }
        // Chunk `i` does not fit: cut before it, at the last paragraph break that leaves the
        // parent half full, else right there.
        while start < i && tokens(start, i + 1) > max {
            let half_full = |j: usize| tokens(start, j) * 2 >= max;
            let cut = (start + 1..=i)
                .rev()
                .find(|&j| seams[j] == Seam::Paragraph && half_full(j))
                .unwrap_or(i);
            emit(start, cut);
            start = cut;
        }
    }
    if !chunks.is_empty() {
        emit(start, chunks.len());
    }
    parents
}

/// The paragraph breaks at each chunk's start (the first chunk's is `Heading`: nothing comes
/// before it); headings are marked by the caller, from the sections.
fn seams(text: &str, chunks: &[ChunkSpan]) -> Vec<Seam> {
    // One walk over the text, converting the chunks' char offsets (increasing) to bytes.
    let mut chars = text.char_indices().enumerate();
    let mut byte_at = |target: u64| -> usize {
        for (n, (byte, _)) in chars.by_ref() {
            if n as u64 == target {
                return byte;
            }
        }
        text.len()
    };
    let mut seams = Vec::with_capacity(chunks.len());
    let mut previous_end = None;
    for (i, chunk) in chunks.iter().enumerate() {
        if i == 0 {
            seams.push(Seam::Heading);
            previous_end = Some(byte_at(chunk.char_end));
            continue;
        }
        let gap_start = previous_end.unwrap_or(0);
        let start = if chunk.char_start == chunks[i - 1].char_end {
            gap_start
        } else {
            byte_at(chunk.char_start).max(gap_start)
        };
        let gap = &text[gap_start..start];
        let seam = if gap.matches('\n').count() >= 2 {
            Seam::Paragraph
        } else {
            Seam::Inside
        };
        seams.push(seam);
        previous_end = Some(if chunk.char_end == chunk.char_start {
            start
        } else {
            byte_at(chunk.char_end)
        });
    }
    seams
}

#[cfg(test)]
mod tests {
    use super::{ChunkSpan, parents};
    use crate::domain::{NewParent, SourceFormat};

    /// Chunks over `parts` joined by `separators` (one fewer), `tokens` each.
    fn layout(parts: &[&str], separators: &[&str], tokens: u32) -> (String, Vec<ChunkSpan>) {
        let mut text = String::new();
        let mut chunks = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                text.push_str(separators[i - 1]);
            }
            let start = text.chars().count() as u64;
            text.push_str(part);
            chunks.push(ChunkSpan {
                number: i as u32,
                char_start: start,
                char_end: text.chars().count() as u64,
                tokens,
            });
        }
        (text, chunks)
    }

    fn ranges(parents: &[NewParent]) -> Vec<(u32, u32)> {
        parents.iter().map(|p| (p.first_chunk, p.last_chunk)).collect()
    }

    #[test]
    fn a_source_that_fits_is_one_parent_spanning_every_chunk() {
        let (text, chunks) = layout(&["# Title", "One.", "Two é."], &["\n\n", " "], 10);
        let found = parents(&text, SourceFormat::Markdown, &chunks, 100);
        assert_eq!(
            found,
            [NewParent {
                parent_number: 0,
                first_chunk: 0,
                last_chunk: 2,
                char_start: 0,
                char_end: text.chars().count() as u64,
                token_count: 30,
            }]
        );
        assert!(parents("", SourceFormat::Plain, &[], 100).is_empty());
    }

    #[test]
    fn every_section_starts_a_parent_however_small_the_one_before() {
        let (text, chunks) = layout(
            &["# A", "a1.", "a2.", "## B", "b1.", "# C", "c1."],
            &["\n\n", " ", "\n\n", "\n\n", "\n\n", "\n\n"],
            10,
        );
        for max in [40, 100] {
            assert_eq!(
                ranges(&parents(&text, SourceFormat::Markdown, &chunks, max)),
                [(0, 2), (3, 4), (5, 6)]
            );
        }
    }

    #[test]
    fn a_chunk_holding_the_next_sections_heading_opens_that_section() {
        // Plain-text FAQ chunked across its questions: chunk 1 ends the first answer and holds
        // the second question.
        let text = "Q1) Why?\n\nBecause of a.\n\nAnd b.\n\nQ2) How?\n\nLike so.";
        let span = |number, from: &str, to: &str| {
            let start = text.find(from).unwrap() as u64;
            let end = (text.find(to).unwrap() + to.len()) as u64;
            ChunkSpan {
                number,
                char_start: start,
                char_end: end,
                tokens: 5,
            }
        };
        let chunks = [span(0, "Q1)", "a."), span(1, "And b.", "How?"), span(2, "Like", "so.")];
        assert_eq!(
            ranges(&parents(text, SourceFormat::Plain, &chunks, 100)),
            [(0, 0), (1, 2)]
        );
        // As Markdown, a question line is no heading: one parent.
        assert_eq!(ranges(&parents(text, SourceFormat::Markdown, &chunks, 100)), [(0, 2)]);
    }

    #[test]
    fn an_overfull_parent_is_cut_at_its_last_paragraph_break_that_leaves_it_half_full() {
        let (text, chunks) = layout(
            &["p1 a.", "p1 b.", "p2 a.", "p2 b.", "p2 c.", "p3 a."],
            &[" ", "\n\n", " ", " ", "\n\n"],
            10,
        );
        // 40 max: the fifth chunk does not fit; the break before p2 leaves 20 (half): cut there.
        let found = parents(&text, SourceFormat::Markdown, &chunks, 40);
        assert_eq!(ranges(&found), [(0, 1), (2, 5)]);
        // 30 max: after p1 (20) the break at p2 is taken; p2 alone (30) is full, then p3.
        assert_eq!(
            ranges(&parents(&text, SourceFormat::Markdown, &chunks, 30)),
            [(0, 1), (2, 4), (5, 5)]
        );
        // No seam at all: cut where the next chunk does not fit.
        let (text, chunks) = layout(&["a.", "b.", "c.", "d.", "e."], &[" ", " ", " ", " "], 10);
        assert_eq!(
            ranges(&parents(&text, SourceFormat::Markdown, &chunks, 25)),
            [(0, 1), (2, 3), (4, 4)]
        );
    }

    #[test]
    fn parents_partition_the_chunks_and_stay_within_the_limit() {
        let parts: Vec<String> = (0..200).map(|i| format!("s{i}.")).collect();
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        let separators: Vec<&str> = (0..199)
            .map(|i| match i % 7 {
                0 => "\n\n# h\n",
                3 => "\n\n",
                _ => " ",
            })
            .collect();
        let (text, chunks) = layout(&parts, &separators, 7);
        for max in [7, 20, 64, 300, 5000] {
            let found = parents(&text, SourceFormat::Markdown, &chunks, max);
            assert_eq!(found[0].first_chunk, 0);
            assert_eq!(found.last().unwrap().last_chunk, 199);
            for pair in found.windows(2) {
                assert_eq!(pair[1].first_chunk, pair[0].last_chunk + 1, "consecutive, no overlap");
                assert!(pair[1].char_start >= pair[0].char_end);
                assert_eq!(pair[1].parent_number, pair[0].parent_number + 1);
            }
            assert!(found.iter().all(|p| p.token_count <= u64::from(max.max(7))), "{max}");
            assert_eq!(found.iter().map(|p| p.token_count).sum::<u64>(), 1400);
        }
    }
}
