//! Conversions between quarry's vector types and the client's: filters, points, ids, payloads
//! and hits.

use std::collections::HashMap;

use qdrant_client::Payload;
use qdrant_client::qdrant::point_id::PointIdOptions;
use qdrant_client::qdrant::{
    self as pb, Condition, Filter, IdfParamsBuilder, PointStruct, Query, SearchParamsBuilder, VectorInput,
};
use uuid::Uuid;

use crate::domain::{SourceId, WorldId};
use crate::vector::{
    DENSE, Error, Point, PointFilter, PointPayload, PointRecord, Result, SPARSE, ScoredPoint, SparseVector,
};

use super::errors::client_error;
use super::{RUN_ID, SOURCE_ID, WORLD_ID};

/// `filter`, narrowed to points of `sources` (any of them) when given.
pub(super) fn search_filter(filter: PointFilter, sources: Option<&[SourceId]>) -> Filter {
    let mut built = to_filter(filter);
    if let Some(sources) = sources {
        let ids: Vec<String> = sources.iter().map(ToString::to_string).collect();
        built.must.push(Condition::matches(SOURCE_ID, ids));
    }
    built
}

pub(super) fn to_filter(filter: PointFilter) -> Filter {
    let mut must = vec![Condition::matches(WORLD_ID, filter.world.to_string())];
    if let Some(run) = filter.run {
        must.push(Condition::matches(RUN_ID, run.to_string()));
    }
    if let Some(source) = filter.source {
        must.push(Condition::matches(SOURCE_ID, source.to_string()));
    }
    Filter::must(must)
}

pub(super) fn to_point(point: Point) -> Result<PointStruct> {
    let payload = serde_json::to_value(&point.payload)
        .map_err(|e| Error::Rejected(format!("payload does not serialise: {e}")))?;
    let payload = Payload::try_from(payload).map_err(client_error)?;
    let mut vectors: HashMap<String, pb::Vector> = HashMap::new();
    vectors.insert(DENSE.to_owned(), pb::Vector::new_dense(point.dense));
    if let Some(sparse) = point.sparse {
        vectors.insert(SPARSE.to_owned(), pb::Vector::new_sparse(sparse.indices, sparse.values));
    }
    Ok(PointStruct::new(point.id, vectors, payload))
}

pub(super) fn point_ids(ids: &[Uuid]) -> Vec<pb::PointId> {
    ids.iter().copied().map(pb::PointId::from).collect()
}

pub(super) fn uuid_of(id: Option<pb::PointId>) -> Option<Uuid> {
    match id?.point_id_options? {
        PointIdOptions::Uuid(s) => Uuid::parse_str(&s).ok(),
        PointIdOptions::Num(n) => {
            tracing::warn!(
                point = n,
                "ignoring a point with a numeric id: quarry only writes UUIDs"
            );
            None
        }
    }
}

/// Never fails: a payload that is not a [`PointPayload`] (stale or foreign point) is `None`.
fn parse_payload(payload: HashMap<String, pb::Value>) -> Option<PointPayload> {
    if payload.is_empty() {
        return None;
    }
    serde_json::from_value(serde_json::Value::from(Payload::from(payload))).ok()
}

pub(super) fn record(point: pb::RetrievedPoint) -> Option<PointRecord> {
    Some(PointRecord {
        id: uuid_of(point.id)?,
        payload: parse_payload(point.payload),
    })
}

pub(super) fn scored(points: Vec<pb::ScoredPoint>) -> Vec<ScoredPoint> {
    points
        .into_iter()
        .filter_map(|p| {
            Some(ScoredPoint {
                id: uuid_of(p.id)?,
                score: p.score,
                payload: parse_payload(p.payload),
            })
        })
        .collect()
}

pub(super) fn clamp_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A BM25 query for the sparse vector.
pub(super) fn bm25(sparse: SparseVector) -> Query {
    Query::new_nearest(VectorInput::new_sparse(sparse.indices, sparse.values))
}

/// IDF over `world`'s points only: other worlds' vocabularies must not weigh its terms.
pub(super) fn world_idf(world: WorldId) -> SearchParamsBuilder {
    SearchParamsBuilder::default().idf(IdfParamsBuilder::new().corpus(to_filter(PointFilter::world(world))))
}
