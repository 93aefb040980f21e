//! How one retrieval answer is judged against a test item, and how item scores add up.
//!
//! - **Hits**: the rank (from 1) of the first result that is expected — a named source, by id
//!   or by key, or a named chunk. hit@1 and hit@5 are the shares of items whose first hit is
//!   within 1 and 5; MRR@10 is the mean of 1/rank over them, 0 past rank 10 or without a hit.
//!   Only items that name sources or chunks count for these.
//! - **Answer in context**: the share of the expected answer's word 4-grams (words are runs of
//!   letters and digits, lower-cased; an answer under four words is one gram of all of them)
//!   that occur in `context.text`; an item is answered *fully* at [`FULLY`] or more. Only items
//!   with an answer count for these.

use std::collections::HashSet;

use crate::domain::{ChunkId, Expected, SourceId};

/// The share of an answer's grams from which it counts as fully in the context.
pub const FULLY: f64 = 0.8;

/// The longest word gram.
const GRAM: usize = 4;

/// The words of `text`: runs of letters and digits, lower-cased.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The distinct `n`-word grams of `words`, each joined by single spaces.
fn grams(words: &[String], n: usize) -> HashSet<String> {
    words.windows(n).map(|w| w.join(" ")).collect()
}

/// The share of `answer`'s word grams found in `context` (0 to 1); `None` for an answer without
/// words.
pub fn answer_share(answer: &str, context: &str) -> Option<f64> {
    let wanted = words(answer);
    if wanted.is_empty() {
        return None;
    }
    let n = wanted.len().min(GRAM);
    let wanted = grams(&wanted, n);
    let present = grams(&words(context), n);
    let found = wanted.iter().filter(|g| present.contains(*g)).count();
    Some(found as f64 / wanted.len() as f64)
}

/// A result as scoring sees it.
#[derive(Clone, Copy, Debug)]
pub struct Found<'a> {
    pub source: SourceId,
    pub source_key: Option<&'a str>,
    pub chunk: ChunkId,
}

/// The rank (from 1) of the first of `results` that `expected` names; `None` when none is.
pub fn first_hit(expected: &Expected, results: &[Found<'_>]) -> Option<usize> {
    let named = |found: &Found<'_>| {
        expected.sources.contains(&found.source)
            || expected.chunks.contains(&found.chunk)
            || found
                .source_key
                .is_some_and(|key| expected.source_keys.iter().any(|k| k == key))
    };
    results.iter().position(named).map(|i| i + 1)
}

/// One item judged under one setting.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ItemScore {
    /// `Some(rank)` of the first hit (`Some(None)`: none) when the item names sources or chunks.
    pub hit: Option<Option<usize>>,
    /// The answer's share in the context, per budget, when the item has an answer.
    pub answer_share: Option<f64>,
}

impl ItemScore {
    /// Scores `results` and `context` against `expected`.
    pub fn judge(expected: &Expected, results: &[Found<'_>], context: &str) -> ItemScore {
        ItemScore {
            hit: expected.names_hits().then(|| first_hit(expected, results)),
            answer_share: (expected.answer.as_deref()).and_then(|answer| answer_share(answer, context)),
        }
    }
}

/// What a list of item scores adds up to; `None` where no item could be judged.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    /// Items judged on hits.
    pub hit_items: usize,
    pub hit_at_1: Option<f64>,
    pub hit_at_5: Option<f64>,
    pub mrr_at_10: Option<f64>,
    /// Items judged on their answer.
    pub answer_items: usize,
    /// The mean share of the answers' grams in the context.
    pub answer_share: Option<f64>,
    /// The share of answers at least [`FULLY`] in the context.
    pub fully: Option<f64>,
}

/// Adds up `scores`.
pub fn summarize(scores: &[ItemScore]) -> Summary {
    let ranks: Vec<Option<usize>> = scores.iter().filter_map(|s| s.hit).collect();
    let shares: Vec<f64> = scores.iter().filter_map(|s| s.answer_share).collect();
    let mean = |values: &mut dyn Iterator<Item = f64>, n: usize| (n > 0).then(|| values.sum::<f64>() / n as f64);
    let within = |k: usize| move |r: &Option<usize>| if r.is_some_and(|r| r <= k) { 1.0 } else { 0.0 };
    Summary {
        hit_items: ranks.len(),
        hit_at_1: mean(&mut ranks.iter().map(within(1)), ranks.len()),
        hit_at_5: mean(&mut ranks.iter().map(within(5)), ranks.len()),
        mrr_at_10: mean(
            &mut ranks.iter().map(|r| match r {
                Some(r) if *r <= 10 => 1.0 / *r as f64,
                _ => 0.0,
            }),
            ranks.len(),
        ),
        answer_items: shares.len(),
        answer_share: mean(&mut shares.iter().copied(), shares.len()),
        fully: mean(
            &mut shares.iter().map(|s| if *s >= FULLY { 1.0 } else { 0.0 }),
            shares.len(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) {
        let a = a.expect("a value");
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn an_answers_share_counts_its_word_four_grams_in_the_context() {
        // "the keeper climbs the tower" → 4-grams: "the keeper climbs the", "keeper climbs the
        // tower": both present (case and punctuation aside).
        close(
            answer_share(
                "The keeper climbs the tower",
                "Each evening, THE KEEPER climbs the tower!",
            ),
            1.0,
        );
        // Six words, three 4-grams; the context holds the first four words and the last four
        // apart: "a b c d" and "c d e f" are present, "b c d e" is not → 2/3.
        close(answer_share("a b c d e f", "a b c d . x c d e f"), 2.0 / 3.0);
        // Under four words: the whole answer is one gram.
        close(answer_share("seals", "Seals have their young."), 1.0);
        close(answer_share("grey seals", "grey stone and seals"), 0.0);
        // A gram repeated in the answer counts once.
        close(answer_share("go go go go go", "go go go go"), 1.0);
        assert_eq!(answer_share("?!", "anything"), None);
    }

    #[test]
    fn the_first_hit_is_a_named_source_by_id_or_key_or_a_named_chunk() {
        let (s1, s2, s3) = (SourceId::new(), SourceId::new(), SourceId::new());
        let (c1, c2, c3) = (ChunkId::new(), ChunkId::new(), ChunkId::new());
        let results = [
            Found {
                source: s1,
                source_key: None,
                chunk: c1,
            },
            Found {
                source: s2,
                source_key: Some("guides/b.md"),
                chunk: c2,
            },
            Found {
                source: s3,
                source_key: None,
                chunk: c3,
            },
        ];
        let by = |sources: Vec<SourceId>, keys: Vec<&str>, chunks: Vec<ChunkId>| Expected {
            sources,
            source_keys: keys.into_iter().map(str::to_owned).collect(),
            chunks,
            answer: None,
        };
        assert_eq!(first_hit(&by(vec![s3], vec![], vec![]), &results), Some(3));
        assert_eq!(first_hit(&by(vec![], vec!["guides/b.md"], vec![]), &results), Some(2));
        assert_eq!(first_hit(&by(vec![s3], vec![], vec![c1]), &results), Some(1));
        assert_eq!(first_hit(&by(vec![SourceId::new()], vec!["x"], vec![]), &results), None);
    }

    #[test]
    fn scores_add_up_to_hit_rates_mrr_and_answer_coverage() {
        let item = |hit: Option<Option<usize>>, share: Option<f64>| ItemScore {
            hit,
            answer_share: share,
        };
        let scores = [
            item(Some(Some(1)), Some(1.0)),
            item(Some(Some(3)), Some(0.5)),
            item(Some(Some(12)), None),
            item(Some(None), Some(0.8)),
            item(None, Some(0.0)),
        ];
        let s = summarize(&scores);
        // Four items judged on hits: ranks 1, 3, 12, none.
        assert_eq!(s.hit_items, 4);
        close(s.hit_at_1, 1.0 / 4.0);
        close(s.hit_at_5, 2.0 / 4.0);
        // (1 + 1/3 + 0 + 0) / 4: rank 12 is past 10.
        close(s.mrr_at_10, (1.0 + 1.0 / 3.0) / 4.0);
        // Four answers: shares 1, 0.5, 0.8, 0; fully at ≥ 0.8: two of four.
        assert_eq!(s.answer_items, 4);
        close(s.answer_share, (1.0 + 0.5 + 0.8 + 0.0) / 4.0);
        close(s.fully, 0.5);
        let none = summarize(&[item(None, None)]);
        assert_eq!((none.hit_at_1, none.answer_share), (None, None));
    }
}
