//! Reading points: dense, sparse and hybrid searches, retrieval by id, counting and scrolling.

use std::sync::Arc;

use qdrant_edge::external::ordered_float::OrderedFloat;
use qdrant_edge::{
    CountRequestBuilder, Fusion, IdfCorpusParams, IdfParams, PointId, PrefetchBuilder, QuantizationSearchParams,
    QueryRequestBuilder, RetrieveRequestBuilder, ScoringQuery, ScrollRequestBuilder, SearchParams, VectorInternal,
    VectorStructInternal, WithPayloadInterface, WithVector,
};
use uuid::Uuid;

use crate::vector::settings::{Layout, Quantization};
use crate::vector::{
    DENSE, DenseSearch, Error, HybridSearch, PointFilter, PointRecord, Result, SPARSE, ScoredPoint, ScrollPage,
    SparseSearch, rules,
};

use super::convert::{
    nearest, record, scored, search_filter, sparse_vector, to_filter, uuid_of, with_payload, world_filter,
};
use super::engine::{blocking, engine_error};
use super::shards::shard;
use super::{Inner, RRF_K};

/// Search parameters of a dense query: the beam width and, with quantization, rescoring.
fn dense_params(layout: &Layout, hnsw_ef: Option<u32>) -> Option<SearchParams> {
    let ef = layout.search.ef(hnsw_ef);
    let quantized = layout.collection.quantization == Quantization::Int8;
    if ef.is_none() && !quantized {
        return None;
    }
    Some(SearchParams {
        hnsw_ef: ef.map(|ef| ef as usize),
        quantization: quantized.then(|| QuantizationSearchParams {
            ignore: false,
            rescore: Some(layout.search.rescore.unwrap_or(true)),
            oversampling: layout.search.oversampling,
        }),
        ..Default::default()
    })
}

pub(super) async fn search(inner: &Arc<Inner>, collection: &str, search: DenseSearch) -> Result<Vec<ScoredPoint>> {
    if search.limit == 0 {
        return Ok(Vec::new());
    }
    let Some(shard) = shard(inner, collection).await? else {
        return Err(Error::MissingCollection(collection.to_owned()));
    };
    let mut request = QueryRequestBuilder::new(search.limit)
        .query(nearest(VectorInternal::Dense(search.vector), DENSE))
        .filter(search_filter(search.filter, search.sources.as_deref())?)
        .with_payload(with_payload());
    if let Some(threshold) = search.score_threshold {
        request = request.score_threshold(threshold);
    }
    if let Some(params) = dense_params(&inner.layout, search.hnsw_ef) {
        request = request.params(params);
    }
    let request = request.build();
    let hits = blocking(move || shard.engine.query(request).map_err(engine_error)).await?;
    Ok(scored(hits))
}

pub(super) async fn sparse_search(
    inner: &Arc<Inner>,
    collection: &str,
    search: SparseSearch,
) -> Result<Vec<ScoredPoint>> {
    if search.limit == 0 {
        return Ok(Vec::new());
    }
    let Some(shard) = shard(inner, collection).await? else {
        return Err(Error::MissingCollection(collection.to_owned()));
    };
    let world = world_filter(search.filter.world)?;
    let request = QueryRequestBuilder::new(search.limit)
        .query(nearest(VectorInternal::Sparse(sparse_vector(search.sparse)?), SPARSE))
        .filter(search_filter(search.filter, search.sources.as_deref())?)
        .params(SearchParams {
            idf: Some(IdfParams::Corpus(IdfCorpusParams { corpus: world })),
            ..Default::default()
        })
        .with_payload(with_payload())
        .build();
    let hits = blocking(move || shard.engine.query(request).map_err(engine_error)).await?;
    Ok(scored(hits))
}

pub(super) async fn hybrid_search(
    inner: &Arc<Inner>,
    collection: &str,
    search: HybridSearch,
) -> Result<Vec<ScoredPoint>> {
    if search.limit == 0 {
        return Ok(Vec::new());
    }
    let Some(shard) = shard(inner, collection).await? else {
        return Err(Error::MissingCollection(collection.to_owned()));
    };
    // Each prefetch must be able to fill the final page on its own.
    let prefetch_limit = search.prefetch_limit.max(search.limit);
    let filter = search_filter(search.filter, search.sources.as_deref())?;
    let mut dense = PrefetchBuilder::new(prefetch_limit)
        .query(nearest(VectorInternal::Dense(search.dense), DENSE))
        .filter(filter.clone());
    if let Some(threshold) = search.dense_score_threshold {
        dense = dense.score_threshold(threshold);
    }
    if let Some(params) = dense_params(&inner.layout, search.hnsw_ef) {
        dense = dense.params(params);
    }
    let dense = dense.build();
    // IDF over this world's points only: other worlds' vocabularies must not weigh its terms.
    let sparse = PrefetchBuilder::new(prefetch_limit)
        .query(nearest(VectorInternal::Sparse(sparse_vector(search.sparse)?), SPARSE))
        .filter(filter.clone())
        .params(SearchParams {
            idf: Some(IdfParams::Corpus(IdfCorpusParams {
                corpus: world_filter(search.filter.world)?,
            })),
            ..Default::default()
        })
        .build();
    let request = QueryRequestBuilder::new(search.limit)
        .add_prefetch(dense)
        .add_prefetch(sparse)
        .query(ScoringQuery::Fusion(match search.fusion {
            crate::vector::Fusion::Rrf {
                dense_weight,
                sparse_weight,
            } => Fusion::Rrf {
                k: RRF_K,
                weights: Some(vec![OrderedFloat(dense_weight), OrderedFloat(sparse_weight)]),
            },
            crate::vector::Fusion::Dbsf => Fusion::Dbsf,
        }))
        .filter(filter)
        .with_payload(with_payload())
        .build();
    let hits = blocking(move || shard.engine.query(request).map_err(engine_error)).await?;
    Ok(scored(hits))
}

pub(super) async fn retrieve(inner: &Arc<Inner>, collection: &str, ids: &[Uuid]) -> Result<Vec<PointRecord>> {
    let Some(shard) = shard(inner, collection).await? else {
        return Ok(Vec::new());
    };
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let request = RetrieveRequestBuilder::new(ids.iter().copied().map(PointId::Uuid).collect())
        .with_payload(with_payload())
        .with_vector(WithVector::Bool(false))
        .build();
    let records = blocking(move || shard.engine.retrieve(request).map_err(engine_error)).await?;
    Ok(rules::in_request_order(ids, records.into_iter().filter_map(record)))
}

pub(super) async fn dense_vectors(inner: &Arc<Inner>, collection: &str, ids: &[Uuid]) -> Result<Vec<(Uuid, Vec<f32>)>> {
    let Some(shard) = shard(inner, collection).await? else {
        return Ok(Vec::new());
    };
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let request = RetrieveRequestBuilder::new(ids.iter().copied().map(PointId::Uuid).collect())
        .with_payload(WithPayloadInterface::Bool(false))
        .with_vector(WithVector::Selector(vec![DENSE.into()]))
        .build();
    let records = blocking(move || shard.engine.retrieve(request).map_err(engine_error)).await?;
    Ok(records
        .into_iter()
        .filter_map(|record| {
            let id = uuid_of(record.id)?;
            match record.vector? {
                VectorStructInternal::Named(mut vectors) => match vectors.remove(DENSE)? {
                    VectorInternal::Dense(dense) => Some((id, dense)),
                    VectorInternal::Sparse(_) | VectorInternal::MultiDense(_) => None,
                },
                VectorStructInternal::Single(dense) => Some((id, dense)),
                VectorStructInternal::MultiDense(_) => None,
            }
        })
        .collect())
}

pub(super) async fn count(inner: &Arc<Inner>, collection: &str, filter: PointFilter) -> Result<u64> {
    let Some(shard) = shard(inner, collection).await? else {
        return Ok(0);
    };
    let request = CountRequestBuilder::new()
        .filter(to_filter(filter)?)
        .exact(true)
        .build();
    let count = blocking(move || shard.engine.count(request).map_err(engine_error)).await?;
    Ok(count as u64)
}

pub(super) async fn scroll(
    inner: &Arc<Inner>,
    collection: &str,
    filter: PointFilter,
    offset: Option<Uuid>,
    limit: usize,
) -> Result<ScrollPage> {
    let Some(shard) = shard(inner, collection).await? else {
        return Ok(ScrollPage {
            points: Vec::new(),
            next: None,
        });
    };
    if limit == 0 {
        // Nothing asked for; hand the position back so the caller does not mistake it for the end.
        return Ok(ScrollPage {
            points: Vec::new(),
            next: offset,
        });
    }
    let mut request = ScrollRequestBuilder::new()
        .limit(limit)
        .filter(to_filter(filter)?)
        .with_payload(with_payload())
        .with_vector(WithVector::Bool(false));
    if let Some(offset) = offset {
        request = request.offset(PointId::Uuid(offset));
    }
    let request = request.build();
    let (records, next) = blocking(move || shard.engine.scroll(request).map_err(engine_error)).await?;
    Ok(ScrollPage {
        points: records.into_iter().filter_map(record).collect(),
        next: next.and_then(uuid_of),
    })
}
