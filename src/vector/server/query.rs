//! Reading points: dense, sparse and hybrid searches, retrieval by id, counting and scrolling.

use qdrant_client::qdrant::{
    self as pb, CountPointsBuilder, GetPointsBuilder, PrefetchQueryBuilder, QuantizationSearchParamsBuilder, Query,
    QueryPointsBuilder, RrfBuilder, ScrollPointsBuilder, SearchParamsBuilder,
};
use uuid::Uuid;

use crate::vector::settings::Quantization;
use crate::vector::{
    DENSE, DenseSearch, HybridSearch, PointFilter, PointRecord, Result, SPARSE, ScoredPoint, ScrollPage, SparseSearch,
    rules,
};

use super::convert::{bm25, clamp_u64, point_ids, record, scored, search_filter, to_filter, uuid_of, world_idf};
use super::errors::{client_error, named_if_missing, or_empty};
use super::{RRF_K, ServerRepo};

impl ServerRepo {
    /// Runs a query on `collection`; a missing collection is named in the error.
    pub(super) async fn run_query(&self, collection: &str, query: QueryPointsBuilder) -> Result<Vec<ScoredPoint>> {
        let result = self
            .call(|c| {
                let query = query.clone();
                async move { c.query(query).await }
            })
            .await
            .map(|r| scored(r.result))
            .map_err(client_error);
        named_if_missing(result, collection)
    }

    /// Search parameters of a dense query: the beam width and, with quantization, rescoring.
    pub(super) fn dense_params(&self, hnsw_ef: Option<u32>) -> Option<SearchParamsBuilder> {
        let search = &self.layout.search;
        let ef = search.ef(hnsw_ef);
        let quantized = self.layout.collection.quantization == Quantization::Int8;
        if ef.is_none() && !quantized {
            return None;
        }
        let mut params = SearchParamsBuilder::default();
        if let Some(ef) = ef {
            params = params.hnsw_ef(u64::from(ef));
        }
        if quantized {
            let mut q = QuantizationSearchParamsBuilder::default().rescore(search.rescore.unwrap_or(true));
            if let Some(oversampling) = search.oversampling {
                q = q.oversampling(oversampling);
            }
            params = params.quantization(q);
        }
        Some(params)
    }

    /// Points by id as `request` asks for them; none from a missing collection.
    pub(super) async fn points(&self, request: GetPointsBuilder) -> Result<Vec<pb::RetrievedPoint>> {
        let result = self
            .call(|c| {
                let request = request.clone();
                async move { c.get_points(request).await }
            })
            .await
            .map_err(client_error);
        or_empty(result.map(|r| r.result), Vec::new())
    }
}

pub(super) async fn search(repo: &ServerRepo, collection: &str, search: DenseSearch) -> Result<Vec<ScoredPoint>> {
    if search.limit == 0 {
        return Ok(Vec::new());
    }
    let mut query = QueryPointsBuilder::new(repo.name(collection))
        .query(Query::new_nearest(search.vector))
        .using(DENSE)
        .filter(search_filter(search.filter, search.sources.as_deref()))
        .limit(clamp_u64(search.limit))
        .with_payload(true);
    if let Some(threshold) = search.score_threshold {
        query = query.score_threshold(threshold);
    }
    if let Some(params) = repo.dense_params(search.hnsw_ef) {
        query = query.params(params);
    }
    repo.run_query(collection, query).await
}

pub(super) async fn sparse_search(
    repo: &ServerRepo,
    collection: &str,
    search: SparseSearch,
) -> Result<Vec<ScoredPoint>> {
    if search.limit == 0 {
        return Ok(Vec::new());
    }
    let query = QueryPointsBuilder::new(repo.name(collection))
        .query(bm25(search.sparse))
        .using(SPARSE)
        .filter(search_filter(search.filter, search.sources.as_deref()))
        .params(world_idf(search.filter.world))
        .limit(clamp_u64(search.limit))
        .with_payload(true);
    repo.run_query(collection, query).await
}

pub(super) async fn hybrid_search(
    repo: &ServerRepo,
    collection: &str,
    search: HybridSearch,
) -> Result<Vec<ScoredPoint>> {
    if search.limit == 0 {
        return Ok(Vec::new());
    }
    // Each prefetch must be able to fill the final page on its own.
    let prefetch_limit = clamp_u64(search.prefetch_limit.max(search.limit));
    let filter = search_filter(search.filter, search.sources.as_deref());
    let mut dense = PrefetchQueryBuilder::default()
        .query(Query::new_nearest(search.dense))
        .using(DENSE)
        .filter(filter.clone())
        .limit(prefetch_limit);
    if let Some(threshold) = search.dense_score_threshold {
        dense = dense.score_threshold(threshold);
    }
    if let Some(params) = repo.dense_params(search.hnsw_ef) {
        dense = dense.params(params);
    }
    // IDF over this world's points only: other worlds' vocabularies must not weigh its terms.
    let sparse = PrefetchQueryBuilder::default()
        .query(bm25(search.sparse))
        .using(SPARSE)
        .filter(filter.clone())
        .params(world_idf(search.filter.world))
        .limit(prefetch_limit);
    let query = QueryPointsBuilder::new(repo.name(collection))
        .add_prefetch(dense)
        .add_prefetch(sparse)
        .query(match search.fusion {
            crate::vector::Fusion::Rrf {
                dense_weight,
                sparse_weight,
            } => Query::new_rrf(RrfBuilder::with_k(RRF_K).weights(vec![dense_weight, sparse_weight])),
            crate::vector::Fusion::Dbsf => Query::new_fusion(qdrant_client::qdrant::Fusion::Dbsf),
        })
        .filter(filter)
        .limit(clamp_u64(search.limit))
        .with_payload(true);
    repo.run_query(collection, query).await
}

pub(super) async fn retrieve(repo: &ServerRepo, collection: &str, ids: &[Uuid]) -> Result<Vec<PointRecord>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let request = GetPointsBuilder::new(repo.name(collection), point_ids(ids))
        .with_payload(true)
        .with_vectors(false);
    let points = repo.points(request).await?;
    Ok(rules::in_request_order(ids, points.into_iter().filter_map(record)))
}

pub(super) async fn dense_vectors(repo: &ServerRepo, collection: &str, ids: &[Uuid]) -> Result<Vec<(Uuid, Vec<f32>)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let request = GetPointsBuilder::new(repo.name(collection), point_ids(ids))
        .with_payload(false)
        .with_vectors(pb::VectorsSelector {
            names: vec![DENSE.to_owned()],
        });
    let points = repo.points(request).await?;
    Ok(points
        .into_iter()
        .filter_map(|point| {
            let id = uuid_of(point.id)?;
            match point.vectors?.get_vector_by_name(DENSE)? {
                pb::vector_output::Vector::Dense(dense) => Some((id, dense.data)),
                pb::vector_output::Vector::Sparse(_) | pb::vector_output::Vector::MultiDense(_) => None,
            }
        })
        .collect())
}

pub(super) async fn count(repo: &ServerRepo, collection: &str, filter: PointFilter) -> Result<u64> {
    let request = CountPointsBuilder::new(repo.name(collection))
        .filter(to_filter(filter))
        .exact(true);
    let result = repo
        .call(|c| {
            let request = request.clone();
            async move { c.count(request).await }
        })
        .await
        .map(|r| r.result.map_or(0, |c| c.count))
        .map_err(client_error);
    or_empty(result, 0)
}

pub(super) async fn scroll(
    repo: &ServerRepo,
    collection: &str,
    filter: PointFilter,
    offset: Option<Uuid>,
    limit: usize,
) -> Result<ScrollPage> {
    if limit == 0 {
        // Nothing asked for; hand the position back so the caller does not mistake it for the end.
        return Ok(ScrollPage {
            points: Vec::new(),
            next: offset,
        });
    }
    let mut request = ScrollPointsBuilder::new(repo.name(collection))
        .filter(to_filter(filter))
        .limit(u32::try_from(limit).unwrap_or(u32::MAX))
        .with_payload(true)
        .with_vectors(false);
    if let Some(offset) = offset {
        request = request.offset(offset);
    }
    let result = repo
        .call(|c| {
            let request = request.clone();
            async move { c.scroll(request).await }
        })
        .await
        .map(|r| ScrollPage {
            points: r.result.into_iter().filter_map(record).collect(),
            next: uuid_of(r.next_page_offset),
        })
        .map_err(client_error);
    or_empty(
        result,
        ScrollPage {
            points: Vec::new(),
            next: None,
        },
    )
}
