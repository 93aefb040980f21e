//! `explain: true`: where each hit stood in the dense and the BM25 ranking, and why the other
//! candidates those rankings held are not in the answer. Two more searches of the same world
//! and run, without threshold or source filter, so that what the filter and `min_score` removed
//! shows too; only asked for by callers tuning a retrieval.

use super::*;
use crate::vector::SparseSearch;

/// Where a point stood in one ranking (1-based) and its score there.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Standing {
    pub rank: u32,
    pub score: f32,
}

/// One hit, explained.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HitExplain {
    pub dense: Option<Standing>,
    /// `None` in a dense-only world, or when BM25 did not find it.
    pub sparse: Option<Standing>,
    /// The fused score (a fused search only).
    pub fused_score: Option<f32>,
    pub rerank_score: Option<f32>,
}

/// A candidate of either ranking that is not in the answer, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Removed {
    pub point_id: Uuid,
    pub source_id: Option<SourceId>,
    pub book_number: Option<u32>,
    pub chunk_number: Option<u32>,
    pub dense: Option<Standing>,
    pub sparse: Option<Standing>,
    /// `filter` (its source is filtered out), `min_score` (dense score under it, and BM25
    /// did not bring it), `bm25_not_used` (found by BM25 only, in a search that ran dense),
    /// `verification` (its chunk is gone or changed: repaired), `duplicate` (the same text as a
    /// result) or `ranked_out` (below the cut: `top_k`, the fusion or the reranker).
    pub reason: &'static str,
}

/// The explanation of an answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Explanation {
    /// One per result, in the same order.
    pub hits: Vec<HitExplain>,
    /// How many candidates each explaining search returned.
    pub dense_candidates: usize,
    pub sparse_candidates: usize,
    pub removed: Vec<Removed>,
}

/// What the explanation needs from the retrieval that ran.
pub(super) struct Ran<'a> {
    pub world: &'a World,
    pub query: &'a str,
    pub vector: Vec<f32>,
    pub used: SearchUsed,
    pub min_score: f32,
    pub sources: Option<&'a [SourceId]>,
    pub limit: usize,
}

impl RetrievalService {
    pub(super) async fn explain(&self, ran: Ran<'_>, answer: &Retrieval) -> ServiceResult<Explanation> {
        let world = ran.world;
        let filter = PointFilter::world(world.id).run(world.active_run);
        let limit = (ran.limit * 2).max(MIN_PREFETCH);
        let dense = self
            .vectors
            .search(
                &world.collection,
                DenseSearch {
                    hnsw_ef: None,
                    vector: ran.vector,
                    filter,
                    sources: None,
                    limit,
                    score_threshold: None,
                },
            )
            .await?;
        let sparse = if world.hybrid {
            self.vectors
                .sparse_search(
                    &world.collection,
                    SparseSearch {
                        sparse: crate::sparse::query(ran.query),
                        filter,
                        sources: None,
                        limit,
                    },
                )
                .await?
        } else {
            Vec::new()
        };
        // Each ranking by point id: (1-based rank, score).
        let ranking = |list: &[ScoredPoint]| -> HashMap<Uuid, Standing> {
            list.iter()
                .enumerate()
                .map(|(i, p)| {
                    let standing = Standing {
                        rank: i as u32 + 1,
                        score: p.score,
                    };
                    (p.id, standing)
                })
                .collect()
        };
        let (dense_ranks, sparse_ranks) = (ranking(&dense), ranking(&sparse));
        let standing = |ranks: &HashMap<Uuid, Standing>, id: Uuid| ranks.get(&id).copied();
        let fused = matches!(ran.used, SearchUsed::Hybrid(_));
        let hits: Vec<HitExplain> = answer
            .results
            .iter()
            .map(|hit| HitExplain {
                dense: standing(&dense_ranks, hit.chunk.point_id),
                sparse: standing(&sparse_ranks, hit.chunk.point_id),
                fused_score: fused.then_some(hit.score),
                rerank_score: hit.rerank_score,
            })
            .collect();
        let kept: HashSet<Uuid> = answer.results.iter().map(|h| h.chunk.point_id).collect();
        let texts: HashSet<&str> = answer.results.iter().map(|h| h.chunk.chunk.sha256.as_str()).collect();
        let repaired: HashSet<Uuid> = answer.repairs.iter().map(|r| r.point_id).collect();
        let mut seen = HashSet::new();
        let mut removed = Vec::new();
        for point in dense.iter().chain(&sparse) {
            if kept.contains(&point.id) || !seen.insert(point.id) {
                continue;
            }
            let d = standing(&dense_ranks, point.id);
            let s = standing(&sparse_ranks, point.id);
            let payload = point.payload.as_ref();
            let reason = if ran
                .sources
                .is_some_and(|sources| payload.is_some_and(|p| !sources.contains(&p.source_id)))
            {
                "filter"
            } else if repaired.contains(&point.id) {
                "verification"
            } else if payload.is_some_and(|p| texts.contains(p.text_sha256.as_str())) {
                "duplicate"
            } else if d.is_none() && !fused {
                "bm25_not_used"
            } else if d.is_some_and(|d| d.score < ran.min_score) && (s.is_none() || !fused) {
                "min_score"
            } else {
                "ranked_out"
            };
            removed.push(Removed {
                point_id: point.id,
                source_id: payload.map(|p| p.source_id),
                book_number: payload.map(|p| p.book_number),
                chunk_number: payload.map(|p| p.chunk_number),
                dense: d,
                sparse: s,
                reason,
            });
        }
        Ok(Explanation {
            hits,
            dense_candidates: dense.len(),
            sparse_candidates: sparse.len(),
            removed,
        })
    }
}
