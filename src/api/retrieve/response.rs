//! What `/retrieve` answers: [`RetrieveResponse`], made from the service's [`Retrieval`].

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::service::retrieval::{
    Citation, CorpusStats, Explanation, Hit, HitExplain, MatchedParent, Quality, QualityLevel, Removed, Repair,
    Retrieval, SearchUsed, Timing, Warning,
};
use crate::vector::Fusion;

/// One verified hit. Text comes from the store, never from the vector store.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalResult {
    pub chunk_id: Uuid,
    pub point_id: Uuid,
    /// Cosine similarity (dense) or the fused rank score (hybrid).
    pub score: f32,
    /// The reranker's relevance score, when the results were reranked (their order).
    pub rerank_score: Option<f32>,
    /// With `explain: true`.
    pub explain: Option<HitExplanation>,
    pub source_id: Uuid,
    pub source_filename: String,
    /// The source's title as given at upload (`null` when none was).
    pub title: Option<String>,
    /// The source's URL as given at upload (`null` when none was).
    pub url: Option<String>,
    /// The source's metadata as given at upload (`{}` when none was).
    pub metadata: BTreeMap<String, String>,
    pub book_number: u32,
    pub chunk_number: u32,
    pub char_start: u64,
    pub char_end: u64,
    /// For a PDF's chunk, the page (1-based) it starts on; `null` for other formats.
    pub page: Option<u32>,
    pub chunk_text: String,
    pub overlap_text: String,
    /// Other hits with exactly the same text, folded into this one (their chunk ids).
    pub duplicates: Vec<Uuid>,
}

/// Chunk text for a model's context: no scores, filenames or overlap text.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalContext {
    /// The selected chunk texts, in passage order (passages by their best hit's rank), reading
    /// order within a passage.
    pub chunks: Vec<String>,
    /// The passages, each marked `[n] ` (its citation number) and apart by a blank line; the
    /// chunks of a passage are apart by a blank line too.
    pub text: String,
    /// One per entry of `chunks`, in the same order: where it comes from.
    pub citations: Vec<RetrievalCitation>,
}

/// Where one context chunk comes from, for citing it.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalCitation {
    /// The passage's number in `context.text` (`[n]`).
    pub n: u32,
    /// Index in `results` of the hit this chunk is, or of its passage's best hit (a
    /// neighbour); `null` in a full-context answer, which has no results.
    pub result_index: Option<usize>,
    pub chunk_id: Uuid,
    pub source_id: Uuid,
    pub book_number: u32,
    pub chunk_number: u32,
    /// The cited span of the source's stored text, in chars (a chunk cut to fit the budget
    /// ends where the cut does).
    pub char_start: u64,
    pub char_end: u64,
    /// For a PDF's chunk, the page (1-based) it starts on: cite it as "p. N".
    pub page: Option<u32>,
}

/// How far to trust the answer, for the caller to tell its model.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalQuality {
    /// `high` (dense: best score ≥ 0.5, or ≥ 0.3 and ahead of the second by ≥ 0.1), `low`
    /// (hits, none convincing), `none` (no hits) or `unrated` (a fused search: fused scores are not similarities).
    pub level: String,
    pub best_score: Option<f32>,
    /// Best score less the second best.
    pub score_gap: Option<f32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalWarning {
    /// `no_embedded_chunks`, `filter_matched_nothing`, `chunk_missing`, `stale_point`,
    /// `context_truncated`, `context_cut`, `parents_missing` or `rerank_unavailable`.
    pub code: String,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalRepair {
    pub point_id: Uuid,
    /// `stale_point_deleted` (the slot is queued for embedding again) or `orphan_point_deleted`
    /// (the point's chunk no longer exists).
    pub kind: String,
}

/// A parent holding hits (`expand: parent`).
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalParent {
    pub source_id: Uuid,
    pub book_number: u32,
    /// 0-based order of the parent in its source.
    pub parent_number: u32,
    /// Its chunks, `first_chunk..=last_chunk` by chunk number.
    pub first_chunk: u32,
    pub last_chunk: u32,
    /// Its span of the source's stored text, in chars (its first chunk's start to its last
    /// chunk's end).
    pub char_start: u64,
    pub char_end: u64,
    /// Its chunks' token counts summed.
    pub token_count: u64,
    /// The best score of its hits.
    pub score: f32,
    /// Its hits, best first: their indexes in `results` (whose entries carry each matched
    /// chunk's exact offsets) and chunk ids.
    pub result_indexes: Vec<usize>,
    pub children: Vec<Uuid>,
}

/// A rank (1-based) and score in one ranking.
#[derive(Debug, Serialize, ToSchema)]
pub struct RankStanding {
    pub rank: u32,
    pub score: f32,
}

impl From<crate::service::retrieval::Standing> for RankStanding {
    fn from(s: crate::service::retrieval::Standing) -> Self {
        Self {
            rank: s.rank,
            score: s.score,
        }
    }
}

/// One result, explained.
#[derive(Debug, Serialize, ToSchema)]
pub struct HitExplanation {
    /// Its standing in the dense ranking (cosine), without threshold or filter.
    pub dense: Option<RankStanding>,
    /// Its standing in the BM25 ranking (hybrid worlds; `null` when BM25 did not find it).
    pub sparse: Option<RankStanding>,
    /// The fused score, in a fused search.
    pub fused_score: Option<f32>,
    pub rerank_score: Option<f32>,
}

/// A candidate not in the answer, and why.
#[derive(Debug, Serialize, ToSchema)]
pub struct RemovedCandidate {
    pub point_id: Uuid,
    pub source_id: Option<Uuid>,
    pub book_number: Option<u32>,
    pub chunk_number: Option<u32>,
    pub dense: Option<RankStanding>,
    pub sparse: Option<RankStanding>,
    /// `filter`, `min_score`, `bm25_not_used` (BM25 found it, but the search ran dense),
    /// `verification` (its chunk is gone or changed), `duplicate` (same text as a result) or
    /// `ranked_out` (below the cut: `top_k`, the fusion or the reranker).
    pub reason: String,
}

/// How the answer came about (`explain: true`).
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalExplanation {
    /// Candidates of the explaining dense and BM25 searches (2 × the search's limit, at least 20).
    pub dense_candidates: usize,
    pub sparse_candidates: usize,
    pub removed: Vec<RemovedCandidate>,
}

/// The size of a corpus.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalCorpus {
    pub sources: u64,
    /// Chunks, whatever their embedding state.
    pub chunks: u64,
    /// The chunks' token counts summed.
    pub tokens: u64,
}

/// A fusion as run.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalFusion {
    /// `rrf` or `dbsf`.
    pub method: String,
    /// `rrf` only.
    pub dense_weight: Option<f32>,
    /// `rrf` only.
    pub sparse_weight: Option<f32>,
}

impl From<Fusion> for RetrievalFusion {
    fn from(fusion: Fusion) -> Self {
        match fusion {
            Fusion::Rrf {
                dense_weight,
                sparse_weight,
            } => RetrievalFusion {
                method: "rrf".into(),
                dense_weight: Some(dense_weight),
                sparse_weight: Some(sparse_weight),
            },
            Fusion::Dbsf => RetrievalFusion {
                method: "dbsf".into(),
                dense_weight: None,
                sparse_weight: None,
            },
        }
    }
}

/// Milliseconds per phase.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetrievalTiming {
    pub embed_ms: f64,
    pub search_ms: f64,
    pub verify_ms: f64,
    pub rerank_ms: f64,
    pub total_ms: f64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RetrieveResponse {
    /// Sorted by score descending, then book_number, then chunk_number.
    pub results: Vec<RetrievalResult>,
    pub context: RetrievalContext,
    pub quality: RetrievalQuality,
    /// What ran: `dense`, `hybrid` or `full` (the whole corpus as the context); `null` when
    /// nothing did (top_k 0, nothing embedded, a filter matching nothing).
    pub mode_used: Option<String>,
    /// With `expand: parent`: each parent holding hits, once, best first (empty otherwise).
    pub parents: Vec<RetrievalParent>,
    /// With `explain: true`, when a search ran.
    pub explain: Option<RetrievalExplanation>,
    /// The corpus a `full`/`auto` request looked at (the world's served run, or the sources
    /// the filter keeps); `null` in the other modes.
    pub corpus: Option<RetrievalCorpus>,
    /// The fusion a `hybrid` search used (`null` otherwise).
    pub fusion_used: Option<RetrievalFusion>,
    pub requested_top_k: u64,
    /// `top_k` clamped to the number of embedded chunks.
    pub effective_top_k: u64,
    pub warnings: Vec<RetrievalWarning>,
    pub repairs: Vec<RetrievalRepair>,
    pub timing: RetrievalTiming,
}

impl From<Retrieval> for RetrieveResponse {
    fn from(r: Retrieval) -> Self {
        // One explanation per result, in the results' order.
        let mut explained = r.explain.as_ref().map(|e| e.hits.clone().into_iter());
        RetrieveResponse {
            explain: r.explain.map(Into::into),
            results: r
                .results
                .into_iter()
                .map(|hit| {
                    let explain = explained.as_mut().and_then(Iterator::next).map(Into::into);
                    result(hit, explain)
                })
                .collect(),
            context: RetrievalContext {
                chunks: r.context,
                text: r.context_text,
                citations: r.citations.into_iter().map(Into::into).collect(),
            },
            quality: r.quality.into(),
            mode_used: r.search_used.map(|used| {
                match used {
                    SearchUsed::Dense => "dense",
                    SearchUsed::Hybrid(_) => "hybrid",
                    SearchUsed::FullContext => "full",
                }
                .to_owned()
            }),
            parents: r.parents.into_iter().map(Into::into).collect(),
            corpus: r.corpus.map(Into::into),
            fusion_used: match r.search_used {
                Some(SearchUsed::Hybrid(fusion)) => Some(fusion.into()),
                _ => None,
            },
            requested_top_k: r.requested_top_k,
            effective_top_k: r.effective_top_k,
            warnings: r.warnings.into_iter().map(Into::into).collect(),
            repairs: r.repairs.into_iter().map(Into::into).collect(),
            timing: r.timing.into(),
        }
    }
}

/// A verified hit as answered, with its explanation when one was asked for.
fn result(hit: Hit, explain: Option<HitExplanation>) -> RetrievalResult {
    let c = hit.chunk.chunk;
    RetrievalResult {
        chunk_id: c.id.0,
        point_id: hit.chunk.point_id,
        score: hit.score,
        rerank_score: hit.rerank_score,
        explain,
        source_id: c.source_id.0,
        source_filename: hit.chunk.source_filename,
        title: hit.source.title.clone(),
        url: hit.source.url.clone(),
        metadata: hit.source.metadata.clone().into_map(),
        book_number: c.book_number,
        chunk_number: c.chunk_number,
        char_start: c.char_start,
        char_end: c.char_end,
        page: c.page,
        chunk_text: c.chunk_text,
        overlap_text: c.overlap_text,
        duplicates: hit.duplicates.into_iter().map(|id| id.0).collect(),
    }
}

impl From<Explanation> for RetrievalExplanation {
    fn from(e: Explanation) -> Self {
        RetrievalExplanation {
            dense_candidates: e.dense_candidates,
            sparse_candidates: e.sparse_candidates,
            removed: e.removed.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<Removed> for RemovedCandidate {
    fn from(c: Removed) -> Self {
        RemovedCandidate {
            point_id: c.point_id,
            source_id: c.source_id.map(|s| s.0),
            book_number: c.book_number,
            chunk_number: c.chunk_number,
            dense: c.dense.map(Into::into),
            sparse: c.sparse.map(Into::into),
            reason: c.reason.to_owned(),
        }
    }
}

impl From<HitExplain> for HitExplanation {
    fn from(e: HitExplain) -> Self {
        HitExplanation {
            dense: e.dense.map(Into::into),
            sparse: e.sparse.map(Into::into),
            fused_score: e.fused_score,
            rerank_score: e.rerank_score,
        }
    }
}

impl From<Citation> for RetrievalCitation {
    fn from(c: Citation) -> Self {
        RetrievalCitation {
            n: c.n,
            result_index: c.result_index,
            chunk_id: c.chunk_id.0,
            source_id: c.source_id.0,
            book_number: c.book_number,
            chunk_number: c.chunk_number,
            char_start: c.char_start,
            char_end: c.char_end,
            page: c.page,
        }
    }
}

impl From<Quality> for RetrievalQuality {
    fn from(q: Quality) -> Self {
        RetrievalQuality {
            level: match q.level {
                QualityLevel::High => "high",
                QualityLevel::Low => "low",
                QualityLevel::None => "none",
                QualityLevel::Unrated => "unrated",
            }
            .to_owned(),
            best_score: q.best_score,
            score_gap: q.score_gap,
        }
    }
}

impl From<MatchedParent> for RetrievalParent {
    fn from(m: MatchedParent) -> Self {
        RetrievalParent {
            source_id: m.parent.source_id.0,
            book_number: m.book_number,
            parent_number: m.parent.parent.parent_number,
            first_chunk: m.parent.parent.first_chunk,
            last_chunk: m.parent.parent.last_chunk,
            char_start: m.parent.parent.char_start,
            char_end: m.parent.parent.char_end,
            token_count: m.parent.parent.token_count,
            score: m.score,
            result_indexes: m.result_indexes,
            children: m.children.into_iter().map(|c| c.0).collect(),
        }
    }
}

impl From<CorpusStats> for RetrievalCorpus {
    fn from(c: CorpusStats) -> Self {
        RetrievalCorpus {
            sources: c.sources,
            chunks: c.chunks,
            tokens: c.tokens,
        }
    }
}

impl From<Warning> for RetrievalWarning {
    fn from(w: Warning) -> Self {
        RetrievalWarning {
            code: w.code.as_str().to_owned(),
            message: w.message,
        }
    }
}

impl From<Repair> for RetrievalRepair {
    fn from(r: Repair) -> Self {
        RetrievalRepair {
            point_id: r.point_id,
            kind: r.kind.as_str().to_owned(),
        }
    }
}

impl From<Timing> for RetrievalTiming {
    fn from(t: Timing) -> Self {
        RetrievalTiming {
            embed_ms: t.embed_ms,
            search_ms: t.search_ms,
            verify_ms: t.verify_ms,
            rerank_ms: t.rerank_ms,
            total_ms: t.total_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;

    use crate::service::retrieval::{RepairKind, WarningCode};

    /// The document names every code the service's tables hold, and no other.
    #[test]
    fn the_document_names_every_warning_and_repair_the_service_can_give() {
        let described = |schema: serde_json::Value, field: &str| -> String {
            schema["properties"][field]["description"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        let warnings = described(serde_json::to_value(super::RetrievalWarning::schema()).unwrap(), "code");
        for code in WarningCode::ALL {
            assert!(
                warnings.contains(&format!("`{}`", code.as_str())),
                "{code:?}: {warnings}"
            );
        }
        assert_eq!(warnings.matches('`').count(), 2 * WarningCode::ALL.len(), "{warnings}");
        let repairs = described(serde_json::to_value(super::RetrievalRepair::schema()).unwrap(), "kind");
        for kind in RepairKind::ALL {
            assert!(repairs.contains(&format!("`{}`", kind.as_str())), "{kind:?}: {repairs}");
        }
    }
}
