//! Context assembly: passages (hits with the chunks around them) fitted to the token budget.
//!
//! A context is planned on chunk outlines (place, tokens, hash: no text) and only the chunks the
//! plan keeps are then read whole, so a wide window costs the rows the budget can use.

use super::*;
use crate::domain::ChunkOutline;

impl RetrievalService {
    /// The context for `answer.results` within `budget` tokens, widened as `expand` says; with
    /// parents, also `answer.parents` (and a warning for hits whose parents could not be found).
    pub(super) async fn context(
        &self,
        world: &World,
        expand: Expand,
        budget: u32,
        counter: &dyn TokenCounter,
        answer: &mut Retrieval,
    ) -> ServiceResult<Fitted> {
        let mut passages = self.expand(world, expand, answer).await?;
        let plan = plan_context(&passages, budget, counter);
        self.read_kept(world, &mut passages, &plan).await?;
        Ok(render(passages, plan))
    }

    /// The context's passages for `answer.results`, widened as `expand` says, as outlines (a
    /// hit's text is known from the search; a neighbour's is read once the plan keeps it).
    async fn expand(&self, world: &World, expand: Expand, answer: &mut Retrieval) -> ServiceResult<Vec<Vec<Piece>>> {
        match expand {
            Expand::None => Ok(answer
                .results
                .iter()
                .enumerate()
                .map(|(rank, h)| vec![Piece::hit(&h.chunk, rank, None)])
                .collect()),
            Expand::Neighbors(n) => self.neighbour_passages(world, n, &answer.results).await,
            Expand::Parent => self.parent_passages(world, answer).await,
        }
    }

    /// Passages of each hit with `n` chunks either side, windows that overlap or touch merged.
    async fn neighbour_passages(&self, world: &World, n: u32, results: &[Hit]) -> ServiceResult<Vec<Vec<Piece>>> {
        let windows: Vec<(SourceId, u32, u32)> = results
            .iter()
            .map(|h| {
                let c = &h.chunk.chunk;
                (
                    c.source_id,
                    c.chunk_number.saturating_sub(n),
                    c.chunk_number.saturating_add(n),
                )
            })
            .collect();
        // The sections the windows cross, so that each hit reads its own first, read beside
        // the windows' outlines.
        let windows = merge_windows(windows, true);
        let (parents, outlines) = tokio::join!(
            self.parents_of(world, &windows),
            self.store.chunk_outlines(world.id, world.active_run, &windows)
        );
        Ok(passages(results, windows, &outlines?, &parents?))
    }

    /// Passages of each hit's parent (a hit without one stands alone, warned), with
    /// `answer.parents`. Parents never overlap, and two side by side stay two passages.
    async fn parent_passages(&self, world: &World, answer: &mut Retrieval) -> ServiceResult<Vec<Vec<Piece>>> {
        let results = &answer.results;
        let chunks: Vec<(SourceId, u32, u32)> = results
            .iter()
            .map(|h| {
                (
                    h.chunk.chunk.source_id,
                    h.chunk.chunk.chunk_number,
                    h.chunk.chunk.chunk_number,
                )
            })
            .collect();
        let parents = self.parents_of(world, &chunks).await?;
        let mut windows = Vec::with_capacity(results.len());
        let mut matched: Vec<MatchedParent> = Vec::new();
        let mut orphans = 0;
        for (index, hit) in results.iter().enumerate() {
            let c = &hit.chunk.chunk;
            match parents.iter().find(|p| p.holds(c.source_id, c.chunk_number)) {
                Some(parent) => {
                    let p = parent.parent;
                    windows.push((c.source_id, p.first_chunk, p.last_chunk));
                    match matched.iter_mut().find(|m| m.parent == *parent) {
                        Some(m) => {
                            m.result_indexes.push(index);
                            m.children.push(c.id);
                        }
                        None => matched.push(MatchedParent {
                            parent: *parent,
                            book_number: c.book_number,
                            score: hit.score,
                            result_indexes: vec![index],
                            children: vec![c.id],
                        }),
                    }
                }
                None => {
                    orphans += 1;
                    windows.push((c.source_id, c.chunk_number, c.chunk_number));
                }
            }
        }
        if orphans > 0 {
            answer.warnings.push(Warning {
                code: WarningCode::ParentsMissing,
                message: format!("{orphans} hit(s) have no parent stored; they stand alone in the context"),
            });
        }
        answer.parents = matched;
        let windows = merge_windows(windows, false);
        let outlines = self.store.chunk_outlines(world.id, world.active_run, &windows).await?;
        Ok(passages(&answer.results, windows, &outlines, &parents))
    }

    /// The parents in the world's served run that overlap `windows` (source, from, to); sources
    /// found without any (chunked before parents existed, or before sections) get theirs built
    /// first, from the stored text and chunks.
    async fn parents_of(&self, world: &World, windows: &[(SourceId, u32, u32)]) -> ServiceResult<Vec<Parent>> {
        let mut parents = self.store.parents_over(world.active_run, windows).await?;
        let mut built = false;
        for source in unparented(windows, &parents) {
            let max = world.chunking.parent_max_tokens;
            built |=
                crate::jobs::parents::build_from_store(self.store.as_ref(), world.id, world.active_run, source, max)
                    .await?;
        }
        if built {
            parents = self.store.parents_over(world.active_run, windows).await?;
        }
        Ok(parents)
    }

    /// Reads the texts of the neighbours `plan` keeps (hits have theirs), as runs of
    /// consecutive chunks; one that changed or went meanwhile is dropped from the plan.
    async fn read_kept(&self, world: &World, passages: &mut [Vec<Piece>], plan: &Plan) -> ServiceResult<()> {
        let mut windows: Vec<(SourceId, u32, u32)> = Vec::new();
        for (passage, keep) in passages.iter().zip(&plan.keep) {
            for (piece, _) in passage.iter().zip(keep).filter(|(p, k)| **k && p.text.is_none()) {
                match windows.last_mut() {
                    Some(last) if last.0 == piece.cite.source && last.2 + 1 == piece.number => last.2 = piece.number,
                    _ => windows.push((piece.cite.source, piece.number, piece.number)),
                }
            }
        }
        if windows.is_empty() {
            return Ok(());
        }
        let read = self.store.chunk_texts(world.active_run, &windows).await?;
        let mut texts: HashMap<ChunkId, (String, String)> =
            read.into_iter().map(|(id, sha, text)| (id, (sha, text))).collect();
        for piece in passages.iter_mut().flatten().filter(|p| p.text.is_none()) {
            if let Some((sha, text)) = texts.remove(&piece.cite.chunk)
                && sha == piece.sha256
            {
                piece.text = Some(text);
            }
        }
        Ok(())
    }
}

impl RetrievalService {
    /// Answers with the whole corpus (the sources `sizes` names) as the context, in reading
    /// order (book, then chunk number), one passage per source, within `budget` tokens; no
    /// query embedding, no search, no results. An empty corpus is the usual empty answer.
    pub(super) async fn full_context(
        &self,
        world: &World,
        sizes: &[SourceSize],
        budget: u32,
        answer: &mut Retrieval,
    ) -> ServiceResult<()> {
        answer.search_used = Some(SearchUsed::FullContext);
        if sizes.iter().all(|s| s.chunks == 0) {
            answer.warnings.push(Warning {
                code: WarningCode::NoEmbeddedChunks,
                message: "the world has no chunks yet; the context is empty".into(),
            });
            return Ok(());
        }
        answer.quality.level = QualityLevel::Unrated;
        let phase = Instant::now();
        // Only what can fit is read: whole sources in reading order while their tokens fit, then
        // the start of the next (every chunk holds at least one token, so no more chunks than
        // the budget left can fit).
        let mut in_order: Vec<&SourceSize> = sizes.iter().collect();
        in_order.sort_unstable_by_key(|s| s.book_number);
        let mut windows: Vec<(SourceId, u32, u32)> = Vec::new();
        let mut room = u64::from(budget);
        for size in in_order {
            if size.tokens <= room {
                room -= size.tokens;
                windows.push((size.source_id, 0, u32::MAX));
                continue;
            }
            if room > 0 {
                windows.push((size.source_id, 0, u32::try_from(room - 1).unwrap_or(u32::MAX)));
            }
            break;
        }
        let mut chunks = self.store.chunk_windows(world.id, world.active_run, &windows).await?;
        chunks.sort_unstable_by_key(|v| (v.chunk.book_number, v.chunk.chunk_number));
        let total: u64 = sizes.iter().map(|s| s.chunks).sum();
        let mut fitted = fit_reading_order(chunks, budget);
        fitted.left_out = usize::try_from(total)
            .unwrap_or(usize::MAX)
            .saturating_sub(fitted.chunks.len());
        if fitted.left_out > 0 {
            answer.warnings.push(Warning {
                code: WarningCode::ContextTruncated,
                message: format!(
                    "the corpus is larger than the context budget of {budget} tokens (max_context_tokens): \
                     {} chunk(s) at its end were left out",
                    fitted.left_out
                ),
            });
        }
        answer.context = fitted.chunks;
        answer.context_text = fitted.text;
        answer.citations = fitted.citations;
        answer.timing.verify_ms = ms(phase.elapsed());
        Ok(())
    }
}

/// The sources of `windows` that none of `parents` belongs to: those whose parents are not
/// built. Each window holds a chunk that exists (a hit), so a source with parents finds one
/// for each of its windows; a window that runs past its source's last chunk (a neighbour
/// window around the last hit) is no sign of missing parents.
fn unparented(windows: &[(SourceId, u32, u32)], parents: &[Parent]) -> Vec<SourceId> {
    let mut sources: Vec<SourceId> = windows
        .iter()
        .map(|w| w.0)
        .filter(|s| !parents.iter().any(|p| p.source_id == *s))
        .collect();
    sources.sort_unstable_by_key(|s| s.0);
    sources.dedup();
    sources
}

/// Merges `hit_windows` (`(source, from, to)`, in rank order) where they overlap (or touch,
/// with `merge_touching`), each merged window in the slot of its earliest: disjoint windows,
/// in rank order.
fn merge_windows(hit_windows: Vec<(SourceId, u32, u32)>, merge_touching: bool) -> Vec<(SourceId, u32, u32)> {
    let slack = u32::from(merge_touching);
    let mut windows: Vec<(SourceId, u32, u32)> = Vec::new();
    for mut window in hit_windows {
        // Absorb every earlier window this one overlaps or touches, keeping the earliest slot.
        let mut slot = None;
        let mut i = 0;
        while i < windows.len() {
            let (source, lo, hi) = windows[i];
            if source == window.0 && lo <= window.2.saturating_add(slack) && window.1 <= hi.saturating_add(slack) {
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
    windows
}

/// The context's passages in rank order: the chunks of each of `windows` (disjoint, from
/// [`merge_windows`]) found in `outlines` (ordered by source and chunk number, so each window
/// is a contiguous run of them), in reading order, no chunk twice; each chunk told its section
/// (the number of the parent in `parents` that holds it).
fn passages(
    results: &[Hit],
    windows: Vec<(SourceId, u32, u32)>,
    outlines: &[ChunkOutline],
    parents: &[Parent],
) -> Vec<Vec<Piece>> {
    let hits: HashMap<ChunkId, (usize, &Hit)> = results
        .iter()
        .enumerate()
        .map(|(rank, h)| (h.chunk.chunk.id, (rank, h)))
        .collect();
    // A source replaced between the search and this read has the new version's chunks
    // now: they are left out rather than joined to a hit of the old one.
    let versions: HashMap<SourceId, u32> = results
        .iter()
        .map(|h| (h.chunk.chunk.source_id, h.chunk.chunk.version))
        .collect();
    let section = |source: SourceId, number: u32| {
        parents
            .iter()
            .find(|p| p.holds(source, number))
            .map(|p| (p.parent.parent_number, p.parent.first_chunk))
    };
    let mut seen = HashSet::new();
    let mut passages = Vec::with_capacity(windows.len());
    for (source, from, to) in windows {
        let start = outlines.partition_point(|o| (o.source_id.0, o.chunk_number) < (source.0, from));
        let passage: Vec<Piece> = outlines[start..]
            .iter()
            .take_while(|o| o.source_id == source && o.chunk_number <= to)
            .filter(|o| versions.get(&source).is_none_or(|version| *version == o.version))
            .filter(|o| seen.insert(o.id))
            .map(|o| {
                let section = section(source, o.chunk_number);
                match hits.get(&o.id) {
                    Some(&(rank, hit)) => Piece::hit(&hit.chunk, rank, section),
                    None => Piece::neighbour(o, section),
                }
            })
            .collect();
        passages.push(passage);
    }
    passages
}

/// `chunks` (in reading order) from the start, while they fit `budget`: one passage per
/// source, each chunk cited. The first chunk that does not fit ends the context.
fn fit_reading_order(chunks: Vec<ChunkView>, budget: u32) -> Fitted {
    let mut fitted = Fitted::default();
    let mut room = u64::from(budget);
    let mut passages: Vec<Vec<String>> = Vec::new();
    let mut current: Option<SourceId> = None;
    let total = chunks.len();
    for view in chunks {
        let tokens = u64::from(view.chunk.token_count);
        if tokens > room {
            break;
        }
        room -= tokens;
        let c = view.chunk;
        if current != Some(c.source_id) {
            current = Some(c.source_id);
            passages.push(Vec::new());
        }
        fitted.citations.push(Citation {
            n: passages.len() as u32,
            result_index: None,
            chunk_id: c.id,
            source_id: c.source_id,
            book_number: c.book_number,
            chunk_number: c.chunk_number,
            char_start: c.char_start,
            char_end: c.char_end,
            page: c.page,
        });
        if let Some(passage) = passages.last_mut() {
            passage.push(c.chunk_text.clone());
        }
        fitted.chunks.push(c.chunk_text);
    }
    fitted.left_out = total - fitted.chunks.len();
    fitted.text = passages
        .iter()
        .enumerate()
        .map(|(i, parts)| format!("[{}] {}", i + 1, parts.join("\n\n")))
        .collect::<Vec<_>>()
        .join("\n\n");
    fitted
}

/// One chunk of a context passage.
#[derive(Debug)]
pub(super) struct Piece {
    /// The chunk's text: a hit's comes with it; a neighbour's is read once the plan keeps it.
    text: Option<String>,
    /// Hex sha256 of the text: the same text twice is placed once.
    sha256: String,
    tokens: u32,
    /// The hit's rank; `None` for a neighbour.
    rank: Option<usize>,
    number: u32,
    /// The section the chunk lies in, when known: its parent's number and first chunk.
    section: Option<(u32, u32)>,
    /// Where the chunk stands, for its citation.
    cite: Cite,
}

impl Piece {
    fn hit(view: &ChunkView, rank: usize, section: Option<(u32, u32)>) -> Self {
        let c = &view.chunk;
        Self {
            text: Some(c.chunk_text.clone()),
            sha256: c.sha256.clone(),
            tokens: c.token_count,
            rank: Some(rank),
            number: c.chunk_number,
            section,
            cite: Cite {
                chunk: c.id,
                source: c.source_id,
                book_number: c.book_number,
                char_start: c.char_start,
                char_end: c.char_end,
                page: c.page,
            },
        }
    }

    fn neighbour(o: &ChunkOutline, section: Option<(u32, u32)>) -> Self {
        Self {
            text: None,
            sha256: o.sha256.clone(),
            tokens: o.token_count,
            rank: None,
            number: o.chunk_number,
            section,
            cite: Cite {
                chunk: o.id,
                source: o.source_id,
                book_number: o.book_number,
                char_start: o.char_start,
                char_end: o.char_end,
                page: o.page,
            },
        }
    }
}

/// What a context chunk's citation names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Cite {
    chunk: ChunkId,
    source: SourceId,
    book_number: u32,
    char_start: u64,
    char_end: u64,
    page: Option<u32>,
}

/// The context as fitted: its chunks (in passage order, reading order within a passage), the
/// citation of each, the passages' texts, and how many chunks were left out for want of room.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Fitted {
    pub chunks: Vec<String>,
    pub citations: Vec<Citation>,
    /// The context text: each passage marked `[n] `, passages apart by a blank line.
    pub text: String,
    pub left_out: usize,
    /// The top passage was larger than the whole budget and was cut at a sentence boundary.
    pub cut: bool,
}

/// Which chunks of the passages go into the context.
#[derive(Debug)]
pub(super) struct Plan {
    /// Per passage, per chunk: kept.
    keep: Vec<Vec<bool>>,
    left_out: usize,
    /// The best hit, cut to fit: (passage, chunk, its beginning that fits).
    cut: Option<(usize, usize, String)>,
}

/// Plans the context within `budget` tokens; counts are each chunk's `token_count`.
///
/// Hits are taken in rank order, each if it fits, and each kept hit's window is read before the
/// next hit: **forward first** within the hit's section (the chunks after the hit, nearest
/// first), then back toward the section's start, until a chunk does not fit. Answers run forward
/// from the sentence a question matches, so a tight budget goes to the hit's continuation
/// rather than to the end of whatever came before. When the section does not fit but its start
/// through the hit does, the window starts at the section's start (its heading and lead-in) and
/// reads forward from there. Chunks of a window outside the hit's section (`expand: neighbors`
/// crossing a heading) come last, after every hit has had its section, forward first again.
///
/// When not even the best hit fits, its text is cut at the last sentence (or, failing that, word)
/// boundary that fits, counted with `counter`, instead of leaving the context empty. A chunk
/// whose text is already in the context (the same text in two sources, say) is not repeated and
/// does not count as left out, nor do the neighbours of a hit that was only a repeat.
pub(super) fn plan_context(passages: &[Vec<Piece>], budget: u32, counter: &dyn TokenCounter) -> Plan {
    let mut keep: Vec<Vec<bool>> = passages.iter().map(|p| vec![false; p.len()]).collect();
    let mut placed: HashSet<&str> = HashSet::new();
    // Repeats, and neighbours of hits that were only repeats: not left out for want of room.
    let mut repeated: Vec<Vec<bool>> = passages.iter().map(|p| vec![false; p.len()]).collect();
    let mut room = u64::from(budget);
    let mut cut: Option<(usize, usize, String)> = None;
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
    let mut expanded: Vec<(usize, usize)> = Vec::new();
    for (n, &(_, p, i)) in hits.iter().enumerate() {
        let piece = &passages[p][i];
        if placed.contains(piece.sha256.as_str()) {
            repeated[p][i] = true;
            continue;
        }
        let tokens = u64::from(piece.tokens);
        if tokens <= room {
            room -= tokens;
            keep[p][i] = true;
            placed.insert(&piece.sha256);
        } else if n == 0 && room > 0 {
            // The best hit alone is over the budget: its beginning, up to a sentence boundary.
            let text = piece.text.as_deref().unwrap_or_default();
            if let Some(prefix) = prefix_within(text, room as usize, counter) {
                room = 0;
                keep[p][i] = true;
                placed.insert(&piece.sha256);
                cut = Some((p, i, prefix));
            }
            continue;
        } else {
            continue;
        }
        let order = section_order(&passages[p], i, &keep[p], &repeated[p], room);
        let fill = Fill {
            keep: &mut keep[p],
            repeated: &mut repeated[p],
            placed: &mut placed,
            room: &mut room,
        };
        take(&passages[p], order, &mut { fill });
        expanded.push((p, i));
    }
    // Then, hit by hit, what their windows hold beyond their sections.
    for (p, i) in expanded {
        let section = passages[p][i].section;
        let outside = |j: &usize| passages[p][*j].section != section;
        let order: Vec<usize> = (i + 1..passages[p].len())
            .filter(outside)
            .chain((0..i).rev().filter(outside))
            .collect();
        let fill = Fill {
            keep: &mut keep[p],
            repeated: &mut repeated[p],
            placed: &mut placed,
            room: &mut room,
        };
        take(&passages[p], order, &mut { fill });
    }
    // A chunk whose text is in the context is not missed, wherever the walk stopped.
    for (p, passage) in passages.iter().enumerate() {
        for (j, piece) in passage.iter().enumerate() {
            if !keep[p][j] && placed.contains(piece.sha256.as_str()) {
                repeated[p][j] = true;
            }
        }
    }
    // A passage whose hits were all repeats: its neighbours are not missed.
    for (p, passage) in passages.iter().enumerate() {
        let any_kept = keep[p].iter().any(|k| *k);
        let only_repeats = passage
            .iter()
            .zip(&repeated[p])
            .all(|(piece, repeat)| piece.rank.is_none() || *repeat);
        if !any_kept && only_repeats {
            repeated[p].fill(true);
        }
    }
    let left_out = keep
        .iter()
        .zip(&repeated)
        .flat_map(|(keep, repeated)| keep.iter().zip(repeated))
        .filter(|(kept, repeat)| !**kept && !**repeat)
        .count();
    Plan { keep, left_out, cut }
}

/// The order in which hit `i`'s section is read around it (neighbours only, not yet placed):
/// forward then backward, nearest first; or from the section's start through the hit and then
/// forward, when the whole section does not fit in `room` but its start (in the passage: a
/// window of neighbours may begin inside the section) through the hit does.
fn section_order(passage: &[Piece], i: usize, keep: &[bool], repeated: &[bool], room: u64) -> Vec<usize> {
    let section = passage[i].section;
    let same = |j: &usize| passage[*j].section == section;
    let lo = (0..i).rev().take_while(same).last().unwrap_or(i);
    let hi = (i + 1..passage.len()).take_while(same).last().unwrap_or(i);
    let open = |j: &usize| passage[*j].rank.is_none() && !keep[*j] && !repeated[*j];
    let following: Vec<usize> = (i + 1..=hi).filter(open).collect();
    let preceding: Vec<usize> = (lo..i).filter(open).collect();
    let tokens = |js: &[usize]| js.iter().map(|&j| u64::from(passage[j].tokens)).sum::<u64>();
    let (before, after) = (tokens(&preceding), tokens(&following));
    let starts_section = passage[lo]
        .section
        .is_some_and(|(_, first)| first == passage[lo].number);
    if before + after > room && before <= room && starts_section {
        preceding.into_iter().chain(following).collect()
    } else {
        following.into_iter().chain(preceding.into_iter().rev()).collect()
    }
}

/// Places the neighbours of `passage` in `order` until one does not fit; texts already placed
/// are skipped (and marked as repeats).
fn take<'a>(passage: &'a [Piece], order: Vec<usize>, fill: &mut Fill<'a, '_>) {
    for j in order {
        let piece = &passage[j];
        if piece.rank.is_some() || fill.keep[j] || fill.repeated[j] {
            continue;
        }
        if fill.placed.contains(piece.sha256.as_str()) {
            fill.repeated[j] = true;
            continue;
        }
        let tokens = u64::from(piece.tokens);
        if tokens > *fill.room {
            break;
        }
        *fill.room -= tokens;
        fill.keep[j] = true;
        fill.placed.insert(&piece.sha256);
    }
}

/// What [`take`] changes: one passage's kept and repeated chunks, the texts placed and the room.
struct Fill<'a, 'b> {
    keep: &'b mut [bool],
    repeated: &'b mut [bool],
    placed: &'b mut HashSet<&'a str>,
    room: &'b mut u64,
}

/// The context `plan` keeps of `passages`, whose kept chunks have their texts (a kept chunk
/// without one, gone since it was planned, is left out).
pub(super) fn render(passages: Vec<Vec<Piece>>, plan: Plan) -> Fitted {
    let Plan { keep, left_out, cut } = plan;
    let mut fitted = Fitted {
        left_out,
        cut: cut.is_some(),
        ..Fitted::default()
    };
    let mut texts = Vec::new();
    for (p, (passage, keep)) in passages.into_iter().zip(keep).enumerate() {
        // A neighbour cites the best hit of its passage.
        let best = passage
            .iter()
            .zip(&keep)
            .filter(|(piece, k)| **k && piece.rank.is_some())
            .filter_map(|(piece, _)| piece.rank)
            .min();
        let mut parts = Vec::new();
        for (i, (piece, k)) in passage.into_iter().zip(keep).enumerate() {
            if !k {
                continue;
            }
            let mut cite = piece.cite;
            let text = match (&cut, piece.text) {
                (Some((cp, ci, prefix)), _) if *cp == p && *ci == i => {
                    cite.char_end = cite.char_start + prefix.chars().count() as u64;
                    prefix.clone()
                }
                (_, Some(text)) => text,
                (_, None) => {
                    fitted.left_out += 1;
                    continue;
                }
            };
            fitted.citations.push(Citation {
                n: texts.len() as u32 + 1,
                result_index: piece.rank.or(best),
                chunk_id: cite.chunk,
                source_id: cite.source,
                book_number: cite.book_number,
                chunk_number: piece.number,
                char_start: cite.char_start,
                char_end: cite.char_end,
                page: cite.page,
            });
            parts.push(text.clone());
            fitted.chunks.push(text);
        }
        if !parts.is_empty() {
            texts.push(format!("[{}] {}", texts.len() + 1, parts.join("\n\n")));
        }
    }
    fitted.text = texts.join("\n\n");
    fitted
}

/// [`plan_context`] and [`render`] of passages whose texts are all known.
#[cfg(test)]
pub(super) fn fit_context(passages: Vec<Vec<Piece>>, budget: u32, counter: &dyn TokenCounter) -> Fitted {
    let plan = plan_context(&passages, budget, counter);
    render(passages, plan)
}

/// The longest beginning of `text` within `room` tokens that ends at a sentence boundary, or
/// failing that at a word boundary; `None` when not even one word fits.
fn prefix_within(text: &str, room: usize, counter: &dyn TokenCounter) -> Option<String> {
    use unicode_segmentation::UnicodeSegmentation as _;
    let fits = |end: usize| counter.count(text[..end].trim_end()) <= room;
    let best = |ends: Vec<usize>| -> Option<usize> {
        // Counts grow with the prefix: the last end that fits, by bisection.
        let (mut lo, mut hi) = (0usize, ends.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if fits(ends[mid]) { lo = mid + 1 } else { hi = mid }
        }
        lo.checked_sub(1).map(|i| ends[i])
    };
    let sentences: Vec<usize> = text
        .split_sentence_bound_indices()
        .map(|(at, s)| at + s.len())
        .collect();
    let end = best(sentences).or_else(|| {
        let words: Vec<usize> = text
            .split_word_bound_indices()
            .filter(|(_, w)| !w.trim().is_empty())
            .map(|(at, w)| at + w.len())
            .collect();
        best(words)
    })?;
    let prefix = text[..end].trim_end();
    (!prefix.is_empty()).then(|| prefix.to_owned())
}

#[cfg(test)]
mod tests {
    use super::{Cite, Fitted, Piece, fit_context};
    use crate::chunking::Cl100k;

    fn piece(text: &str, number: u32, tokens: u32, rank: Option<usize>, section: Option<(u32, u32)>) -> Piece {
        Piece {
            text: Some(text.into()),
            sha256: text.into(),
            tokens,
            rank,
            number,
            section,
            cite: Cite::default(),
        }
    }

    fn hit(text: &str, number: u32, tokens: u32, rank: usize) -> Piece {
        piece(text, number, tokens, Some(rank), None)
    }

    fn near(text: &str, number: u32, tokens: u32) -> Piece {
        piece(text, number, tokens, None, None)
    }

    /// A piece in section `section`, which starts at chunk `first`.
    fn at(mut piece: Piece, section: u32, first: u32) -> Piece {
        piece.section = Some((section, first));
        piece
    }

    fn fit(passages: Vec<Vec<Piece>>, budget: u32) -> (Vec<String>, usize) {
        let Fitted { chunks, left_out, .. } = fit_context(passages, budget, &Cl100k);
        (chunks, left_out)
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
        let fitted = fit_context(two_passages(), 30, &Cl100k);
        assert_eq!(fitted.chunks, ["a3", "a4", "a5", "b9"]);
        assert_eq!(fitted.left_out, 0);
        assert_eq!(fitted.text, "[1] a3\n\na4\n\na5\n\n[2] b9", "one number per passage");
        let numbers: Vec<(u32, Option<usize>)> = fitted.citations.iter().map(|c| (c.n, c.result_index)).collect();
        assert_eq!(
            numbers,
            [(1, Some(0)), (1, Some(0)), (1, Some(0)), (2, Some(1))],
            "neighbours cite their passage's hit"
        );
    }

    #[test]
    fn the_best_hit_is_expanded_before_lower_hits() {
        let (context, left_out) = fit(two_passages(), 20);
        assert_eq!(
            context,
            ["a3", "a4", "a5"],
            "the best hit's neighbours outrank the second hit"
        );
        assert_eq!(left_out, 1);
        let (context, left_out) = fit(two_passages(), 15);
        assert_eq!(context, ["a4", "a5"], "the hit's continuation first");
        assert_eq!(left_out, 2);
        let (context, _) = fit(two_passages(), 30);
        assert_eq!(context, ["a3", "a4", "a5", "b9"], "then the next hit");
    }

    #[test]
    fn a_lower_hit_too_big_is_skipped_and_its_neighbours_with_it() {
        let passages = vec![vec![hit("b9", 9, 10, 0)], vec![near("a3", 3, 1), hit("a4", 4, 50, 1)]];
        let (context, left_out) = fit(passages, 20);
        assert_eq!(context, ["b9"]);
        assert_eq!(left_out, 2);
    }

    #[test]
    fn a_best_hit_larger_than_the_budget_is_cut_at_a_sentence_boundary() {
        let text = "The first sentence is short. The second one is a little longer than that. A third.";
        let passages = vec![vec![hit(text, 4, 40, 0), near("n5", 5, 1)], vec![hit("b9", 9, 10, 1)]];
        let fitted = fit_context(passages, 8, &Cl100k);
        assert_eq!(fitted.chunks, ["The first sentence is short."]);
        assert!(fitted.cut);
        assert_eq!(fitted.text, "[1] The first sentence is short.");
        assert_eq!(fitted.citations[0].char_end - fitted.citations[0].char_start, 28);
        // Not even one sentence fits: words.
        let passages = vec![vec![hit(text, 4, 40, 0)]];
        let fitted = fit_context(passages, 3, &Cl100k);
        assert_eq!(fitted.chunks, ["The first sentence"]);
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
        // Forward first: n4 and n5, then back: n2 does not fit, and the passage stops there
        // rather than skipping to farther chunks.
        let (context, left_out) = fit(vec![passage], 5);
        assert_eq!(context, ["h3", "n4", "n5"]);
        assert_eq!(left_out, 2);
    }

    #[test]
    fn a_text_already_in_the_context_is_not_repeated_nor_counted_as_left_out() {
        // The same sentence in two sources: the better-ranked copy is kept, with its neighbours.
        let passages = vec![
            vec![near("before", 1, 1), hit("same", 2, 3, 1)],
            vec![hit("same", 7, 3, 0), near("after", 8, 1)],
            vec![hit("other", 4, 2, 2)],
        ];
        let (context, left_out) = fit(passages, 100);
        assert_eq!(context, ["same", "after", "other"]);
        assert_eq!(left_out, 0);
        // Repeated neighbours too; a budget that leaves one out still says so.
        let passages = vec![
            vec![hit("h1", 1, 1, 0), near("shared", 2, 1)],
            vec![near("shared", 5, 1), hit("h6", 6, 1, 1), near("n7", 7, 5)],
        ];
        let (context, left_out) = fit(passages, 4);
        assert_eq!(context, ["h1", "shared", "h6"]);
        assert_eq!(left_out, 1);
    }

    #[test]
    fn a_window_reads_forward_within_its_section_before_going_back() {
        // Section 1 is b1..b4 with the hit at b2; a0 ends section 0, c5 opens section 2.
        let passage = || {
            vec![
                at(near("a0", 0, 4), 0, 0),
                at(near("b1", 1, 4), 1, 1),
                at(hit("b2", 2, 4, 0), 1, 1),
                at(near("b3", 3, 4), 1, 1),
                at(near("b4", 4, 4), 1, 1),
                at(near("c5", 5, 4), 2, 5),
            ]
        };
        // The whole section fits: all of it, and nothing from the sections around it before
        // a lower hit has had its room.
        let passages = vec![passage(), vec![hit("z9", 9, 4, 1)]];
        assert_eq!(fit(passages, 20).0, ["b1", "b2", "b3", "b4", "z9"]);
        // Then the rest of the window, forward first: c5 before a0.
        let passages = vec![passage(), vec![hit("z9", 9, 4, 1)]];
        assert_eq!(fit(passages, 24).0, ["b1", "b2", "b3", "b4", "c5", "z9"]);
        // The section does not fit but its start through the hit does: from its start, forward.
        assert_eq!(fit(vec![passage()], 12).0, ["b1", "b2", "b3"]);
        // Its start through the hit fills the room exactly: still from its start.
        assert_eq!(fit(vec![passage()], 8).0, ["b1", "b2"]);
        // A window that begins inside the section (neighbours, not the parent) knows no start:
        // forward first.
        let window = vec![
            at(near("b1", 1, 4), 1, 0),
            at(hit("b2", 2, 4, 0), 1, 0),
            at(near("b3", 3, 4), 1, 0),
        ];
        assert_eq!(fit(vec![window], 8).0, ["b2", "b3"]);
    }

    #[test]
    fn a_hit_deep_in_a_long_section_reads_on_from_itself() {
        let mut passage: Vec<Piece> = (0..8).map(|n| at(near(&format!("s{n}"), n, 10), 0, 0)).collect();
        passage[6] = at(hit("hit", 6, 10, 0), 0, 0);
        // Section start through the hit is 70 tokens: over the room, so forward first.
        let (context, left_out) = fit(vec![passage], 30);
        assert_eq!(context, ["s5", "hit", "s7"]);
        assert_eq!(left_out, 5);
    }

    /// Parents are built for a source that has none, never again for one whose window runs
    /// past its last chunk (neighbours of its last hit): that rebuild read the whole source's
    /// text and chunks on every such retrieval, for nothing (its parents were all there).
    #[test]
    fn only_sources_without_parents_are_unparented() {
        use crate::domain::{NewParent, Parent, SourceId};
        let (built, bare) = (SourceId::new(), SourceId::new());
        let parent = |number: u32, first: u32, last: u32| Parent {
            source_id: built,
            parent: NewParent {
                parent_number: number,
                first_chunk: first,
                last_chunk: last,
                char_start: 0,
                char_end: 1,
                token_count: 1,
            },
        };
        // `built` has chunks 0..=9 in two parents; its last hit's window reaches chunk 11.
        let parents = [parent(0, 0, 4), parent(1, 5, 9)];
        assert!(super::unparented(&[(built, 8, 11), (built, 0, 1)], &parents).is_empty());
        let missing = super::unparented(&[(built, 8, 11), (bare, 3, 5), (bare, 9, 9)], &parents);
        assert_eq!(missing, vec![bare]);
    }
}
