//! Context assembly: passages (hits with their neighbours) fitted to the token budget.

use super::*;

impl RetrievalService {
    /// The context's passages in rank order: each hit alone, or with `neighbors` chunks of its
    /// source on each side, windows that overlap or touch merged into one passage (placed at
    /// its best hit) in reading order, no chunk twice.
    pub(super) async fn passages(
        &self,
        world: &World,
        results: &[Hit],
        neighbors: u32,
    ) -> ServiceResult<Vec<Vec<Piece>>> {
        let piece = |view: &ChunkView, rank: Option<usize>| Piece {
            text: view.chunk.chunk_text.clone(),
            tokens: view.chunk.token_count,
            rank,
            number: view.chunk.chunk_number,
        };
        if neighbors == 0 {
            return Ok(results
                .iter()
                .enumerate()
                .map(|(rank, h)| vec![piece(&h.chunk, Some(rank))])
                .collect());
        }
        let ranks: HashMap<ChunkId, usize> = results
            .iter()
            .enumerate()
            .map(|(rank, h)| (h.chunk.chunk.id, rank))
            .collect();
        let mut windows: Vec<(SourceId, u32, u32)> = Vec::new();
        for hit in results {
            let c = &hit.chunk.chunk;
            let mut window = (
                c.source_id,
                c.chunk_number.saturating_sub(neighbors),
                c.chunk_number.saturating_add(neighbors),
            );
            // Absorb every earlier window this one overlaps or touches, keeping the earliest slot.
            let mut slot = None;
            let mut i = 0;
            while i < windows.len() {
                let (source, lo, hi) = windows[i];
                if source == window.0 && lo <= window.2.saturating_add(1) && window.1 <= hi.saturating_add(1) {
                    window.1 = window.1.min(lo);
                    window.2 = window.2.max(hi);
                    match slot {
                        None => {
                            slot = Some(i);
                            i += 1;
                        }
                        Some(_) => {
                            windows.remove(i);
                        }
                    }
                } else {
                    i += 1;
                }
            }
            match slot {
                Some(i) => windows[i] = window,
                None => windows.push(window),
            }
        }
        // One read for every window; the windows are disjoint, and the chunks come back ordered
        // by source and chunk number, so each window is a contiguous run of them.
        let chunks = self.store.chunk_windows(world.id, world.active_run, &windows).await?;
        let mut seen = HashSet::new();
        let mut passages = Vec::with_capacity(windows.len());
        for (source, from, to) in windows {
            let start = chunks.partition_point(|v| (v.chunk.source_id.0, v.chunk.chunk_number) < (source.0, from));
            let passage: Vec<Piece> = chunks[start..]
                .iter()
                .take_while(|v| v.chunk.source_id == source && v.chunk.chunk_number <= to)
                .filter(|view| seen.insert(view.chunk.id))
                .map(|view| piece(view, ranks.get(&view.chunk.id).copied()))
                .collect();
            passages.push(passage);
        }
        Ok(passages)
    }
}

/// One chunk of a context passage.
#[derive(Debug)]
pub(super) struct Piece {
    text: String,
    tokens: u32,
    /// The hit's rank; `None` for a neighbour.
    rank: Option<usize>,
    number: u32,
}

/// The context within `budget` tokens, and how many chunks were left out for want of room. Hits
/// come first: each, in rank order, is kept if it fits. Then each passage with a kept hit gets
/// its neighbours, nearest to a kept hit first, until one does not fit. A chunk whose text is
/// already in the context (the same text in two sources, say) is not repeated, and does not
/// count as left out, nor do the neighbours of a hit that was only a repeat. Kept chunks stay
/// in passage order and, within a passage, in reading order. Counts are each chunk's
/// `token_count`.
pub(super) fn fit_context(passages: Vec<Vec<Piece>>, budget: u32) -> (Vec<String>, usize) {
    let mut keep: Vec<Vec<bool>> = passages.iter().map(|p| vec![false; p.len()]).collect();
    let mut placed: HashSet<&str> = HashSet::new();
    // Repeats, and neighbours of hits that were only repeats: not left out for want of room.
    let mut repeated: Vec<Vec<bool>> = passages.iter().map(|p| vec![false; p.len()]).collect();
    let mut room = u64::from(budget);
    let mut hits: Vec<(usize, usize, usize)> = passages
        .iter()
        .enumerate()
        .flat_map(|(p, passage)| {
            passage
                .iter()
                .enumerate()
                .filter_map(move |(i, piece)| piece.rank.map(|rank| (rank, p, i)))
        })
        .collect();
    hits.sort_unstable();
    for (_, p, i) in hits {
        let piece = &passages[p][i];
        if placed.contains(piece.text.as_str()) {
            repeated[p][i] = true;
            continue;
        }
        let tokens = u64::from(piece.tokens);
        if tokens <= room {
            room -= tokens;
            keep[p][i] = true;
            placed.insert(&piece.text);
        }
    }
    for (p, passage) in passages.iter().enumerate() {
        let kept: Vec<u32> = passage
            .iter()
            .zip(&keep[p])
            .filter(|(_, k)| **k)
            .map(|(piece, _)| piece.number)
            .collect();
        if kept.is_empty() {
            let only_repeats = passage
                .iter()
                .zip(&repeated[p])
                .all(|(piece, repeat)| piece.rank.is_none() || *repeat);
            if only_repeats {
                repeated[p].fill(true);
            }
            continue;
        }
        let mut neighbours: Vec<(u32, usize)> = passage
            .iter()
            .enumerate()
            .filter(|(_, piece)| piece.rank.is_none())
            .map(|(i, piece)| {
                let distance = kept.iter().map(|n| n.abs_diff(piece.number)).min().unwrap_or(u32::MAX);
                (distance, i)
            })
            .collect();
        neighbours.sort_unstable();
        for (_, i) in neighbours {
            let piece = &passage[i];
            if placed.contains(piece.text.as_str()) {
                repeated[p][i] = true;
                continue;
            }
            let tokens = u64::from(piece.tokens);
            if tokens > room {
                break;
            }
            room -= tokens;
            keep[p][i] = true;
            placed.insert(&piece.text);
        }
    }
    let left_out = keep
        .iter()
        .zip(&repeated)
        .flat_map(|(keep, repeated)| keep.iter().zip(repeated))
        .filter(|(kept, repeat)| !**kept && !**repeat)
        .count();
    let context: Vec<String> = passages
        .into_iter()
        .zip(keep)
        .flat_map(|(passage, keep)| {
            passage
                .into_iter()
                .zip(keep)
                .filter(|(_, k)| *k)
                .map(|(piece, _)| piece.text)
        })
        .collect();
    (context, left_out)
}

#[cfg(test)]
mod tests {
    use super::{Piece, fit_context};

    fn hit(text: &str, number: u32, tokens: u32, rank: usize) -> Piece {
        Piece {
            text: text.into(),
            tokens,
            rank: Some(rank),
            number,
        }
    }

    fn near(text: &str, number: u32, tokens: u32) -> Piece {
        Piece {
            text: text.into(),
            tokens,
            rank: None,
            number,
        }
    }

    /// Passage one: a hit (rank 0) between two neighbours; passage two: a lone hit (rank 1).
    fn two_passages() -> Vec<Vec<Piece>> {
        vec![
            vec![near("a3", 3, 5), hit("a4", 4, 10, 0), near("a5", 5, 5)],
            vec![hit("b9", 9, 10, 1)],
        ]
    }

    #[test]
    fn everything_fits_in_passage_and_reading_order() {
        let (context, left_out) = fit_context(two_passages(), 30);
        assert_eq!(context, ["a3", "a4", "a5", "b9"]);
        assert_eq!(left_out, 0);
    }

    #[test]
    fn hits_take_the_budget_before_any_neighbour() {
        let (context, left_out) = fit_context(two_passages(), 20);
        assert_eq!(
            context,
            ["a4", "b9"],
            "the second hit outranks the first hit's neighbours"
        );
        assert_eq!(left_out, 2);
        let (context, left_out) = fit_context(two_passages(), 25);
        assert_eq!(
            context,
            ["a3", "a4", "b9"],
            "then neighbours, nearest (then earliest) first"
        );
        assert_eq!(left_out, 1);
    }

    #[test]
    fn a_hit_too_big_is_skipped_and_its_neighbours_with_it() {
        let passages = vec![vec![near("a3", 3, 1), hit("a4", 4, 50, 0)], vec![hit("b9", 9, 10, 1)]];
        let (context, left_out) = fit_context(passages, 20);
        assert_eq!(context, ["b9"]);
        assert_eq!(left_out, 2);
    }

    #[test]
    fn neighbours_stop_at_the_first_that_does_not_fit() {
        let passage = vec![
            near("n1", 1, 1),
            near("n2", 2, 8),
            hit("h3", 3, 1, 0),
            near("n4", 4, 1),
            near("n5", 5, 1),
        ];
        // Nearest first: n2 and n4 (distance 1), then n1 and n5. n2 does not fit, and the
        // passage stops there rather than skipping to farther chunks.
        let (context, left_out) = fit_context(vec![passage], 5);
        assert_eq!(context, ["h3"]);
        assert_eq!(left_out, 4);
    }

    #[test]
    fn a_text_already_in_the_context_is_not_repeated_nor_counted_as_left_out() {
        // The same sentence in two sources: the better-ranked copy is kept, with its neighbours.
        let passages = vec![
            vec![near("before", 1, 1), hit("same", 2, 3, 1)],
            vec![hit("same", 7, 3, 0), near("after", 8, 1)],
            vec![hit("other", 4, 2, 2)],
        ];
        let (context, left_out) = fit_context(passages, 100);
        assert_eq!(context, ["same", "after", "other"]);
        assert_eq!(left_out, 0);
        // Repeated neighbours too; a budget that leaves one out still says so.
        let passages = vec![
            vec![hit("h1", 1, 1, 0), near("shared", 2, 1)],
            vec![near("shared", 5, 1), hit("h6", 6, 1, 1), near("n7", 7, 5)],
        ];
        let (context, left_out) = fit_context(passages, 4);
        assert_eq!(context, ["h1", "shared", "h6"]);
        assert_eq!(left_out, 1);
    }
}
