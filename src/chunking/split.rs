//! Packing sentences into chunks, windowing overlong sentences, choosing overlap.
//!
//! All positions here are byte offsets into the text until [`split`] converts them to the char
//! offsets of the contract.

use unicode_segmentation::{GraphemeCursor, UnicodeSegmentation};

use super::segment::{self, Segment};
use super::tokens::{Cl100k, TokenCounter};
use crate::domain::{ChunkingProfile, NewChunk, SourceFormat};

/// Smallest effective `max_tokens`: one char is at most 4 bytes, so at most 4 byte-level tokens,
/// and any text can be windowed. Worlds are validated to at least
/// [`ChunkingProfile::MIN_MAX_TOKENS`] anyway; this only keeps odd profiles from looping.
const MIN_WINDOW_TOKENS: usize = 4;

/// Bytes of text tokenized at once when windowing an overlong sentence, per token of
/// `max_tokens`: generous for any script (English averages ~4.5 bytes a token, CJK ~3), and it
/// bounds what one tokenizer call sees however long the sentence is.
const WINDOW_BYTES_PER_TOKEN: usize = 12;

/// When the estimate says the next sentence overflows by at most this many tokens, the exact
/// count is tried anyway (estimates are a sentence-by-sentence sum and can be slightly high).
const PROBE_SLACK: usize = 2;

/// Word starts tried for an overlap when no sentence start fits.
const WORD_TRIES: usize = 8;

/// A packing unit: a sentence, or one window of an overlong sentence.
#[derive(Clone, Copy, Debug)]
struct Unit {
    start: usize,
    end: usize,
    /// Exact token count of `text[start..end]`.
    tokens: usize,
    /// Estimated tokens this unit adds after the previous one (its tokens plus the gap's).
    lead: usize,
    /// Starts a sentence (false for the second and later windows of an overlong one).
    sentence: bool,
    heading: bool,
}

/// The counter in use, with its planning bound.
struct Tok<'a> {
    counter: &'a dyn TokenCounter,
    max_token_bytes: usize,
}

impl Tok<'_> {
    fn count(&self, text: &str) -> usize {
        self.counter.count(text)
    }

    fn token_ends(&self, text: &str) -> Vec<usize> {
        self.counter.token_ends(text)
    }

    /// Bytes beyond which `n` tokens surely do not fit (see [`TokenCounter::max_token_bytes`]).
    fn byte_cap(&self, n: usize) -> usize {
        n.saturating_mul(self.max_token_bytes)
    }
}

/// Splits `text` into chunks for `profile`, counting `cl100k_base` tokens. Deterministic and
/// pure; see the module docs of [`crate::chunking`] for the rules. Whitespace-only text gives no
/// chunks.
#[must_use]
pub fn split(text: &str, profile: ChunkingProfile) -> Vec<NewChunk> {
    split_with(text, profile, &Cl100k)
}

/// [`split`] with the tokens of `counter`: every chunk has at most `max_tokens` of them, and
/// its `token_count` is their exact number. Only Markdown ATX headings open chunks; a source's
/// own sections are [`split_source`]'s.
#[must_use]
pub fn split_with(text: &str, profile: ChunkingProfile, counter: &dyn TokenCounter) -> Vec<NewChunk> {
    split_source(text, SourceFormat::Html, profile, counter)
}

/// [`split_with`] for a source of `format`: every section its format marks
/// ([`super::section_starts`]) opens a new chunk, so that no chunk holds the end of one section
/// and the start of the next.
#[must_use]
pub fn split_source(
    text: &str,
    format: SourceFormat,
    profile: ChunkingProfile,
    counter: &dyn TokenCounter,
) -> Vec<NewChunk> {
    split_until(text, format, profile, counter, &|| false).unwrap_or_default()
}

/// Sentences (and chunks) handled between two looks at `stop`.
const STOP_EVERY: usize = 256;

/// [`split_source`], giving up (`None`) once `stop()` returns true: it is asked every few hundred
/// sentences and chunks, so an abandoned upload stops costing CPU within milliseconds.
pub fn split_until(
    text: &str,
    format: SourceFormat,
    profile: ChunkingProfile,
    counter: &dyn TokenCounter,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<NewChunk>> {
    let max = usize::try_from(profile.max_tokens)
        .unwrap_or(usize::MAX)
        .min(counter.max_chunk_tokens().unwrap_or(usize::MAX))
        .max(MIN_WINDOW_TOKENS);
    let budget = usize::try_from(profile.overlap_tokens).unwrap_or(usize::MAX);
    let tok = Tok {
        counter,
        max_token_bytes: counter.max_token_bytes().max(1),
    };
    let opens = super::sections::section_start_bytes(text, format);
    let units = units(&tok, text, &opens, max, stop)?;
    if stop() {
        return None;
    }
    let spans = pack(&tok, text, &units, max);

    let mut chunks = Vec::with_capacity(spans.len());
    let mut chars = CharCursor::default();
    let mut previous: Option<(usize, usize)> = None;
    for (number, &(first, last, token_count)) in spans.iter().enumerate() {
        if number % STOP_EVERY == STOP_EVERY - 1 && stop() {
            return None;
        }
        let start = units[first].start;
        let end = units[last].end;
        let overlap_start = previous.map_or(start, |(a, b)| overlap_start(&tok, text, &units, a, b, first, budget));
        chunks.push(NewChunk {
            chunk_number: u32::try_from(number).unwrap_or(u32::MAX),
            char_start: chars.advance(text, start),
            char_end: chars.advance(text, end),
            token_count: u32::try_from(token_count).unwrap_or(u32::MAX),
            chunk_text: text[start..end].to_owned(),
            overlap_text: text[overlap_start..start].to_owned(),
            page: None,
            embed_prefix: String::new(),
            embed_prefix_tokens: 0,
        });
        previous = Some((first, last));
    }
    Some(chunks)
}

/// Converts increasing byte offsets to char offsets in one pass over the text.
#[derive(Default)]
struct CharCursor {
    byte: usize,
    char: u64,
}

impl CharCursor {
    fn advance(&mut self, text: &str, byte: usize) -> u64 {
        let chars = text.get(self.byte..byte).map_or(0, |s| s.chars().count());
        self.char += u64::try_from(chars).unwrap_or(u64::MAX);
        self.byte = byte;
        self.char
    }
}

/// Segments of `text` as packing units, overlong ones windowed, with their lead estimates.
fn units(tok: &Tok<'_>, text: &str, opens: &[usize], max: usize, stop: &dyn Fn() -> bool) -> Option<Vec<Unit>> {
    let byte_cap = tok.byte_cap(max);
    let mut units = Vec::new();
    for (n, segment) in segment::segments_opening(text, opens).into_iter().enumerate() {
        if n % STOP_EVERY == STOP_EVERY - 1 && stop() {
            return None;
        }
        let Segment { start, end, heading } = segment;
        if end - start <= byte_cap {
            let count = tok.count(&text[start..end]);
            if count <= max {
                units.push(Unit {
                    start,
                    end,
                    tokens: count,
                    lead: 0,
                    sentence: true,
                    heading,
                });
                continue;
            }
        }
        window(tok, text, segment, max, &mut units);
    }
    for k in 0..units.len() {
        let gap = match k.checked_sub(1) {
            Some(previous) => gap_cost(tok, &text[units[previous].end..units[k].start], max),
            None => 0,
        };
        units[k].lead = units[k].tokens.saturating_add(gap);
    }
    Some(units)
}

/// Estimated tokens the whitespace `gap` adds between two units. A single trailing space
/// usually merges into the next word's token, so it is not counted.
fn gap_cost(tok: &Tok<'_>, gap: &str, max: usize) -> usize {
    if gap.len() > tok.byte_cap(max) {
        return max.saturating_add(1);
    }
    let gap = gap.strip_suffix(' ').unwrap_or(gap);
    tok.count(gap)
}

/// Cuts an overlong segment into windows of at most `max` tokens, appended to `out`.
fn window(tok: &Tok<'_>, text: &str, segment: Segment, max: usize, out: &mut Vec<Unit>) {
    let cap = max.saturating_mul(WINDOW_BYTES_PER_TOKEN).max(64);
    // Bytes to tokenize for the next window: starts at ~4 bytes a token, then follows what the
    // previous window needed, doubling (up to `cap`) while a slice holds fewer than `max` tokens.
    let mut guess = max.saturating_mul(4).saturating_add(64).min(cap);
    let mut pos = segment.start;
    let mut sentence = true;
    while pos < segment.end {
        let mut bytes = guess;
        let (slice_end, ends) = loop {
            let mut slice_end = text.floor_char_boundary(segment.end.min(pos.saturating_add(bytes)));
            if slice_end <= pos {
                slice_end = next_char(text, pos);
            }
            let ends = tok.token_ends(&text[pos..slice_end]);
            if ends.len() > max || slice_end == segment.end || bytes >= cap {
                break (slice_end, ends);
            }
            bytes = bytes.saturating_mul(2).min(cap);
        };
        if let Some(&covered) = ends.get(max - 1) {
            guess = covered.saturating_add(covered / 4).saturating_add(16).min(cap);
        }
        let (end, count) = if slice_end == segment.end && ends.len() <= max {
            (segment.end, ends.len())
        } else {
            cut(tok, text, pos, &ends, max)
        };
        out.push(Unit {
            start: pos,
            end,
            tokens: count,
            lead: 0,
            sentence,
            heading: segment.heading,
        });
        sentence = false;
        pos = skip_whitespace(text, end, segment.end);
    }
}

/// End and exact count of the window starting at `pos` (non-whitespace) whose slice tokenized
/// to `ends` (relative token ends). The window holds at least one char and at most `max` tokens.
fn cut(tok: &Tok<'_>, text: &str, pos: usize, ends: &[usize], max: usize) -> (usize, usize) {
    let one_char = next_char(text, pos);
    let mut take = max.min(ends.len());
    loop {
        let covered = take.checked_sub(1).and_then(|k| ends.get(k)).map_or(0, |&e| e);
        // Never cut inside a char, and always keep at least one.
        let mut end = text.floor_char_boundary(pos + covered);
        if end <= pos {
            end = one_char;
        }
        let end = prefer_whitespace(text, pos, floor_grapheme(text, pos, end));
        let count = tok.count(&text[pos..end]);
        if count <= max || end == one_char || take == 0 {
            return (end, count);
        }
        // Re-tokenized on its own the prefix counts more: drop at least that many tokens.
        take = take.saturating_sub((count - max).max(1));
    }
}

/// Moves a window end back to the last whitespace inside the window, if any, so words are not
/// cut; the result is trimmed and still past `pos`.
fn prefer_whitespace(text: &str, pos: usize, end: usize) -> usize {
    let window = &text[pos..end];
    let clean = text[end..].chars().next().is_none_or(char::is_whitespace);
    let cut = if clean {
        window.len()
    } else {
        window.rfind(char::is_whitespace).unwrap_or(window.len())
    };
    let trimmed = window[..cut].trim_end().len();
    if trimmed == 0 { end } else { pos + trimmed }
}

/// `end` moved back to the start of the grapheme cluster it falls in (so `e` + combining accent
/// or a ZWJ emoji sequence stay whole), unless that would leave nothing after `pos`.
fn floor_grapheme(text: &str, pos: usize, end: usize) -> usize {
    let rest = &text[pos..];
    let mut cursor = GraphemeCursor::new(end - pos, rest.len(), true);
    match cursor.is_boundary(rest, 0) {
        Ok(false) => match cursor.prev_boundary(rest, 0) {
            Ok(Some(boundary)) if boundary > 0 => pos + boundary,
            _ => end,
        },
        // A boundary already, or one that needs context before `pos` (regional indicators).
        Ok(true) | Err(_) => end,
    }
}

fn next_char(text: &str, pos: usize) -> usize {
    text[pos..].chars().next().map_or(text.len(), |c| pos + c.len_utf8())
}

fn skip_whitespace(text: &str, pos: usize, limit: usize) -> usize {
    let rest = &text[pos..limit];
    limit - rest.trim_start().len()
}

/// Greedy packing: `(first unit, last unit, exact tokens)` of each chunk.
fn pack(tok: &Tok<'_>, text: &str, units: &[Unit], max: usize) -> Vec<(usize, usize, usize)> {
    let n = units.len();
    // next_heading[k]: first heading unit at or after k; next_body[k]: first non-heading.
    let mut next_heading = vec![n; n + 1];
    let mut next_body = vec![n; n + 1];
    for k in (0..n).rev() {
        next_heading[k] = if units[k].heading { k } else { next_heading[k + 1] };
        next_body[k] = if units[k].heading { next_body[k + 1] } else { k };
    }
    let mut spans = Vec::new();
    let mut first = 0;
    while first < n {
        // A heading opens a new chunk unless everything before it in the chunk is a heading.
        let body = next_body[first];
        let limit = if body < n { next_heading[body] - 1 } else { n - 1 };
        let (last, count) = fit(tok, text, units, first, limit, max);
        spans.push((first, last, count));
        first = last + 1;
    }
    spans
}

/// The last unit `j` in `first..=limit` such that `text[first.start..j.end]` has at most `max`
/// tokens, with that exact count. Estimates propose, exact counts decide; once a candidate has
/// failed, the rest is a binary search. Unit `first` alone always fits.
fn fit(tok: &Tok<'_>, text: &str, units: &[Unit], first: usize, limit: usize, max: usize) -> (usize, usize) {
    let start = units[first].start;
    let byte_cap = tok.byte_cap(max);
    let mut good = (first, units[first].tokens);
    // Smallest index known not to fit (or past the limit).
    let mut bad = limit + 1;
    let mut failed = false;
    while good.0 + 1 < bad {
        let candidate = if failed {
            good.0 + (bad - good.0) / 2
        } else {
            let mut estimate = good.1;
            let mut k = good.0;
            while k + 1 < bad {
                let next = estimate.saturating_add(units[k + 1].lead);
                if next > max {
                    break;
                }
                estimate = next;
                k += 1;
            }
            if k > good.0 {
                k
            } else if good.1.saturating_add(units[k + 1].lead) <= max + PROBE_SLACK {
                k + 1
            } else {
                break;
            }
        };
        let end = units[candidate].end;
        let count = if end - start > byte_cap {
            None
        } else {
            Some(tok.count(&text[start..end]))
        };
        match count {
            Some(count) if count <= max => good = (candidate, count),
            _ => {
                bad = candidate;
                failed = true;
            }
        }
    }
    good
}

/// Byte where the overlap of the chunk starting at unit `next` begins, given the previous chunk
/// `first..=last`; `units[next].start` when nothing fits.
fn overlap_start(
    tok: &Tok<'_>,
    text: &str,
    units: &[Unit],
    first: usize,
    last: usize,
    next: usize,
    budget: usize,
) -> usize {
    let end = units[next].start;
    if budget == 0 {
        return end;
    }
    let byte_cap = tok.byte_cap(budget);
    let fits = |from: usize| end - from <= byte_cap && tok.count(&text[from..end]) <= budget;

    // Sentence starts in the previous chunk whose tail the estimates say fits, earliest first.
    let mut tail = gap_cost(tok, &text[units[last].end..end], budget);
    let mut candidates = Vec::new();
    for unit in units[first..=last].iter().rev() {
        if unit.sentence && tail.saturating_add(unit.tokens) <= budget && end - unit.start <= byte_cap {
            candidates.push(unit.start);
        }
        tail = tail.saturating_add(unit.lead);
        if tail > budget {
            break;
        }
    }
    candidates.reverse();
    // Earliest candidate that fits, by binary search (counts grow with the tail).
    let (mut lo, mut hi) = (0, candidates.len());
    let mut found = None;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(candidates[mid]) {
            found = Some(candidates[mid]);
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    if let Some(from) = found {
        return from;
    }

    // No sentence start fits: the earliest word start (after the latest sentence start) that does.
    let latest_sentence = units[first..=last].iter().rev().find(|unit| unit.sentence);
    let region_start = latest_sentence.map_or(units[first].start, |unit| unit.start);
    let region_start = region_start.max(text.floor_char_boundary(end.saturating_sub(byte_cap)));
    let region = &text[region_start..end];
    let starts: Vec<usize> = region
        .split_word_bound_indices()
        .filter(|&(offset, word)| word_start(text, region_start + offset, word))
        .map(|(offset, _)| region_start + offset)
        .collect();
    // Skip the starts whose tail surely holds more than `budget` tokens: before the token
    // boundary `budget` tokens from the end.
    let ends = tok.token_ends(region);
    let earliest = region_start
        + ends
            .len()
            .checked_sub(budget + 1)
            .and_then(|k| ends.get(k))
            .map_or(0, |&e| e);
    let by_word = starts
        .into_iter()
        .filter(|&at| at >= earliest)
        .take(WORD_TRIES)
        .find(|&at| fits(at));
    if let Some(at) = by_word {
        return at;
    }
    // No word starts close enough (a run without spaces: a long identifier, a URL, emoji, CJK
    // without punctuation): the longest tail that fits, starting at a grapheme boundary, so that
    // the overlap still carries about `budget` tokens of context.
    let graphemes: Vec<usize> = region
        .grapheme_indices(true)
        .filter(|(_, grapheme)| !grapheme.starts_with(char::is_whitespace))
        .map(|(offset, _)| region_start + offset)
        .filter(|&at| at >= earliest)
        .collect();
    graphemes
        .into_iter()
        .take(WORD_TRIES * 4)
        .find(|&at| fits(at))
        .unwrap_or(end)
}

/// Whether a UAX #29 word segment at `at` starts a word: not whitespace, and either after
/// whitespace or alphanumeric (so `(` or `,` inside a line do not start an overlap).
fn word_start(text: &str, at: usize, word: &str) -> bool {
    let Some(first) = word.chars().next() else { return false };
    if first.is_whitespace() {
        return false;
    }
    first.is_alphanumeric() || text[..at].chars().next_back().is_none_or(char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(max_tokens: u32, overlap_tokens: u32) -> ChunkingProfile {
        ChunkingProfile {
            max_tokens,
            overlap_tokens,
            parent_max_tokens: ChunkingProfile::default_parent_max_tokens(max_tokens),
            context_prefix: false,
        }
    }

    #[test]
    fn every_section_of_the_format_opens_a_chunk() {
        let faq = "Intro.\n\n1.1. What is it?\n\nA shell. It runs commands.\n\n1.2. Who wrote it?\n\nBrian.";
        let starts = |format| -> Vec<String> {
            split_source(faq, format, profile(200, 0), &Cl100k)
                .into_iter()
                .map(|c| c.chunk_text)
                .collect()
        };
        // Plain text: each question opens a chunk, with its answer.
        assert_eq!(
            starts(SourceFormat::Plain),
            [
                "Intro.",
                "1.1. What is it?\n\nA shell. It runs commands.",
                "1.2. Who wrote it?\n\nBrian."
            ]
        );
        // The same text as Markdown has no headings: one chunk, as `split` cuts it.
        assert_eq!(starts(SourceFormat::Markdown), [faq]);
        assert_eq!(split(faq, profile(200, 0)).len(), 1);
    }

    #[test]
    fn windows_never_cut_inside_a_char() {
        let text = "é".repeat(300) + &"🎉".repeat(300);
        let chunks = split(&text, profile(16, 4));
        assert!(chunks.len() > 10);
        for chunk in &chunks {
            assert!(chunk.token_count <= 16);
            assert_eq!(Cl100k.count(&chunk.chunk_text), chunk.token_count as usize);
        }
        let joined: String = chunks.iter().map(|c| c.chunk_text.as_str()).collect();
        assert_eq!(joined, text);
    }

    #[test]
    fn windows_keep_grapheme_clusters_whole() {
        let family = "👩\u{200d}👩\u{200d}👧\u{200d}👦";
        let text = format!("{}{}", "e\u{301}".repeat(40), family.repeat(20));
        assert!(Cl100k.count(family) < 32);
        for chunk in split(&text, profile(32, 0)) {
            let body = chunk.chunk_text.replace("e\u{301}", "").replace(family, "");
            assert_eq!(body, "", "a cluster was cut: {:?}", chunk.chunk_text);
        }
    }

    #[test]
    fn text_without_spaces_still_gets_an_overlap() {
        let text = "x7Qz".repeat(400) + &"🎉".repeat(200);
        let chunks = split(&text, profile(32, 8));
        assert!(chunks.len() > 5);
        for pair in chunks.windows(2) {
            let (previous, chunk) = (&pair[0], &pair[1]);
            assert!(
                !chunk.overlap_text.is_empty(),
                "no overlap before chunk {}",
                chunk.chunk_number
            );
            let tokens = Cl100k.count(&chunk.overlap_text);
            assert!((1..=8).contains(&tokens), "{tokens} tokens: {:?}", chunk.overlap_text);
            assert!(
                previous.chunk_text.ends_with(chunk.overlap_text.trim_start()),
                "the overlap is the previous chunk's tail"
            );
        }
    }

    #[test]
    fn tiny_profiles_do_not_loop() {
        let chunks = split("🎉🎉 a", profile(0, 0));
        assert_eq!(chunks.len(), 2);
        assert!(chunks.iter().all(|c| c.token_count as usize <= MIN_WINDOW_TOKENS));
    }
}
