//! The chunks and queries of the scale benchmark. Every chunk is one sentence addressed by
//! `(world, index)` and computed from that address alone, so a million of them never have to be
//! held at once: the vector section writes them as it makes them, and any one can be made again
//! to build a query from it.
//!
//! `text::Words` draws every word uniformly from about 300, which spreads the fake provider's
//! vectors evenly: no topics, no frequent words, little of the structure real embeddings have.
//! The default kind here, [`TextKind::Zipf`], takes the same vocabulary (harvested from `Words`,
//! so each word is still one cl100k token and a sentence still fits a 32-token chunk) and draws
//! it with Zipf weights: each sentence belongs to one of [`TOPICS`] topics, and 60 % of its
//! words come from that topic's own ranking of the vocabulary, the rest from one ranking shared
//! by all. Sentences of a topic share their frequent words, so their vectors cluster, and every
//! vector leans towards the globally frequent words, as real embeddings lean towards a common
//! direction. [`TextKind::Uniform`] keeps `Words::sentence` as it is, for comparison.

use std::collections::BTreeSet;

use super::fake::{splitmix, text_vector};
use super::text::Words;

/// Topics a Zipf sentence is drawn from (shared by every world: a world's filter has to step
/// over close points of other worlds, as it would between worlds on similar subjects).
pub const TOPICS: usize = 200;
/// Share (in %) of a Zipf sentence's words drawn from its topic's ranking.
const TOPIC_SHARE: u64 = 60;
/// Share (in %) of a query's words replaced by fresh draws.
const QUERY_NOISE: u64 = 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextKind {
    Zipf,
    Uniform,
}

pub struct Corpus {
    kind: TextKind,
    /// Lower-case words, sorted: the vocabulary of `text::Words`.
    vocabulary: Vec<String>,
    /// Cumulative Zipf (s = 1) weights over ranks `0..vocabulary.len()`.
    cdf: Vec<f64>,
    /// Vocabulary indices by rank: the ranking shared by every sentence.
    common: Vec<u16>,
    /// Vocabulary indices by rank, one ranking per topic.
    topics: Vec<Vec<u16>>,
}

/// A sentence before it is written out: its topic, its words (vocabulary indices) and its year.
struct Draft {
    topic: usize,
    words: Vec<u16>,
    year: u64,
}

impl Corpus {
    pub fn new(kind: TextKind) -> Corpus {
        let mut seen = BTreeSet::new();
        let mut words = Words::new(0x5ca1e);
        // 3,000 sentences draw ~55,000 words: every one of the ~300 is seen many times over.
        for _ in 0..3000 {
            for word in words.sentence().split(|c: char| !c.is_alphanumeric()) {
                if !word.is_empty() && !word.bytes().all(|b| b.is_ascii_digit()) {
                    seen.insert(word.to_lowercase());
                }
            }
        }
        // Every sentence ends "in year N": those two are added, never drawn.
        seen.remove("in");
        seen.remove("year");
        let vocabulary: Vec<String> = seen.into_iter().collect();
        let n = vocabulary.len();
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for rank in 0..n {
            total += 1.0 / (rank + 1) as f64;
            cdf.push(total);
        }
        cdf.iter_mut().for_each(|c| *c /= total);
        let ranking = |seed: u64| {
            let mut order: Vec<u16> = (0..n as u16).collect();
            let mut state = seed;
            for i in (1..n).rev() {
                let j = (splitmix(&mut state) % (i as u64 + 1)) as usize;
                order.swap(i, j);
            }
            order
        };
        Corpus {
            kind,
            common: ranking(0xc0ffee),
            topics: (0..TOPICS).map(|t| ranking(0x7091_c000_0000 + t as u64)).collect(),
            vocabulary,
            cdf,
        }
    }

    /// The random state of one chunk (or, with another `salt`, of one query).
    fn state(world: u32, index: u64, salt: u64) -> u64 {
        let mut state = salt ^ (u64::from(world) << 40) ^ index;
        splitmix(&mut state);
        state
    }

    fn below(state: &mut u64, n: u64) -> u64 {
        splitmix(state) % n
    }

    fn zipf_rank(&self, state: &mut u64) -> usize {
        let u = (splitmix(state) >> 11) as f64 / (1u64 << 53) as f64;
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }

    /// One word of `topic`: from its own ranking or the common one.
    fn zipf_word(&self, topic: usize, state: &mut u64) -> u16 {
        let from_topic = Self::below(state, 100) < TOPIC_SHARE;
        let rank = self.zipf_rank(state);
        if from_topic {
            self.topics[topic][rank]
        } else {
            self.common[rank]
        }
    }

    fn draft(&self, world: u32, index: u64) -> Draft {
        let mut state = Self::state(world, index, 0x5e47_e9ce);
        let topic = Self::below(&mut state, TOPICS as u64) as usize;
        let n = 16 + Self::below(&mut state, 5) as usize;
        let words = (0..n).map(|_| self.zipf_word(topic, &mut state)).collect();
        let year = 100 + Self::below(&mut state, 1900);
        Draft { topic, words, year }
    }

    /// Chunk `index` of world `world`: one sentence of 16–20 words and a year, 18–26 tokens.
    pub fn sentence(&self, world: u32, index: u64) -> String {
        match self.kind {
            TextKind::Uniform => Words::new(Self::state(world, index, 0x5e47_e9ce)).sentence(),
            TextKind::Zipf => {
                let draft = self.draft(world, index);
                let mut s = String::with_capacity(draft.words.len() * 8 + 16);
                for (i, &w) in draft.words.iter().enumerate() {
                    let word = &self.vocabulary[usize::from(w)];
                    if i == 0 {
                        let mut chars = word.chars();
                        if let Some(first) = chars.next() {
                            s.extend(first.to_uppercase());
                            s.push_str(chars.as_str());
                        }
                    } else {
                        s.push(' ');
                        s.push_str(word);
                    }
                }
                s.push_str(&format!(" in year {}.", draft.year));
                s
            }
        }
    }

    /// The `n`-th query into world `world` of `size` chunks: one of its sentences, picked at
    /// random, without its year and with 30 % of its words replaced (by words of the same
    /// topic for Zipf text, by any word otherwise). A query is near its sentence but not a copy
    /// of it, and its exact neighbours are found by brute force, not assumed.
    pub fn query(&self, world: u32, n: u64, size: u64) -> String {
        let mut state = Self::state(world, n, 0x9e7_0a11);
        let index = Self::below(&mut state, size.max(1));
        let (topic, words): (Option<usize>, Vec<u16>) = match self.kind {
            TextKind::Zipf => {
                let draft = self.draft(world, index);
                (Some(draft.topic), draft.words)
            }
            TextKind::Uniform => {
                let sentence = self.sentence(world, index);
                let body = sentence.split(" in year ").next().unwrap_or_default().to_lowercase();
                let words = body
                    .split(' ')
                    .filter_map(|w| self.vocabulary.binary_search_by(|v| v.as_str().cmp(w)).ok())
                    .map(|i| i as u16)
                    .collect();
                (None, words)
            }
        };
        let words: Vec<&str> = words
            .into_iter()
            .map(|w| {
                if Self::below(&mut state, 100) >= QUERY_NOISE {
                    return w;
                }
                match topic {
                    Some(topic) => self.zipf_word(topic, &mut state),
                    None => Self::below(&mut state, self.vocabulary.len() as u64) as u16,
                }
            })
            .map(|w| self.vocabulary[usize::from(w)].as_str())
            .collect();
        words.join(" ")
    }
}

/// The exact nearest neighbours of a set of queries, each query searching one world, computed
/// by brute force as the chunks stream past ([`Truth::offer`]): nothing but the best `k` per
/// query is kept.
pub struct Truth {
    k: usize,
    /// Per query: its world and its (unit) vector.
    queries: Vec<(u32, Vec<f32>)>,
    /// Per world: the queries searching it.
    by_world: Vec<Vec<usize>>,
    /// Per query: the best `(score, id)` so far, best first.
    best: Vec<Vec<(f32, uuid::Uuid)>>,
}

impl Truth {
    /// `queries` as `(world, text)`; `worlds` worlds in all.
    pub fn new(queries: &[(u32, String)], worlds: usize, dims: usize, k: usize) -> Truth {
        let mut by_world = vec![Vec::new(); worlds];
        for (i, (world, _)) in queries.iter().enumerate() {
            by_world[*world as usize].push(i);
        }
        Truth {
            k,
            queries: queries
                .iter()
                .map(|(world, text)| (*world, text_vector(text, dims)))
                .collect(),
            by_world,
            best: vec![Vec::with_capacity(k + 1); queries.len()],
        }
    }

    /// Scores point `id` of `world` (unit vector `v`) against that world's queries.
    pub fn offer(&mut self, world: u32, id: uuid::Uuid, v: &[f32]) {
        for &q in &self.by_world[world as usize] {
            let score = dot(&self.queries[q].1, v);
            let best = &mut self.best[q];
            if best.len() == self.k && best.last().is_some_and(|(s, _)| *s >= score) {
                continue;
            }
            let at = best.partition_point(|(s, _)| *s >= score);
            best.insert(at, (score, id));
            best.truncate(self.k);
        }
    }

    pub fn len(&self) -> usize {
        self.queries.len()
    }

    /// Query `q`'s world and vector.
    pub fn query(&self, q: usize) -> (u32, &[f32]) {
        (self.queries[q].0, &self.queries[q].1)
    }

    /// The share of `found` (a search's ids for query `q`) among its exact top `k`.
    pub fn recall(&self, q: usize, found: &[uuid::Uuid]) -> f64 {
        let exact = &self.best[q];
        if exact.is_empty() {
            return f64::NAN;
        }
        let hits = found
            .iter()
            .take(self.k)
            .filter(|id| exact.iter().any(|(_, e)| e == *id))
            .count();
        hits as f64 / exact.len() as f64
    }
}

/// The dot product, in eight lanes so that it vectorises.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}
