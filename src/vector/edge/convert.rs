//! Conversions between quarry's vector types and the engine's: filters, points, sparse
//! vectors, hits and records.

use qdrant_edge::{
    AnyVariants, Condition, FieldCondition, Filter, Match, NamedQuery, NamedVectors, Payload, PointId,
    PointStructPersisted, QueryEnum, ScoringQuery, ValueVariants, Vector, VectorInternal, VectorStructPersisted,
    Vectors, WithPayloadInterface,
};
use uuid::Uuid;

use crate::domain::{SourceId, WorldId};
use crate::vector::{
    DENSE, Error, Point, PointFilter, PointPayload, PointRecord, Result, SPARSE, ScoredPoint, SparseVector,
};

use super::engine::json_path;
use super::{RUN_ID, SOURCE_ID, WORLD_ID};

fn keyword_match(field: &str, value: String) -> Result<Condition> {
    Ok(Condition::Field(FieldCondition::new_match(
        json_path(field)?,
        Match::new_value(ValueVariants::String(value)),
    )))
}

pub(super) fn world_filter(world: WorldId) -> Result<Filter> {
    to_filter(PointFilter::world(world))
}

/// `filter`, narrowed to points of `sources` (any of them) when given.
pub(super) fn search_filter(filter: PointFilter, sources: Option<&[SourceId]>) -> Result<Filter> {
    let mut built = to_filter(filter)?;
    if let Some(sources) = sources {
        let any = AnyVariants::Strings(sources.iter().map(|s| s.to_string()).collect());
        let condition = Condition::Field(FieldCondition::new_match(json_path(SOURCE_ID)?, Match::new_any(any)));
        built.must.get_or_insert_with(Vec::new).push(condition);
    }
    Ok(built)
}

pub(super) fn to_filter(filter: PointFilter) -> Result<Filter> {
    let mut must = vec![keyword_match(WORLD_ID, filter.world.to_string())?];
    if let Some(run) = filter.run {
        must.push(keyword_match(RUN_ID, run.to_string())?);
    }
    if let Some(source) = filter.source {
        must.push(keyword_match(SOURCE_ID, source.to_string())?);
    }
    Ok(Filter {
        should: None,
        min_should: None,
        must: Some(must),
        must_not: None,
    })
}

pub(super) fn sparse_vector(sparse: SparseVector) -> Result<qdrant_edge::SparseVector> {
    let mut vector = qdrant_edge::SparseVector::new(sparse.indices, sparse.values)
        .map_err(|e| Error::Rejected(format!("invalid sparse vector: {e}")))?;
    vector.sort_by_indices();
    Ok(vector)
}

pub(super) fn to_persisted(point: Point) -> Result<PointStructPersisted> {
    let payload = match serde_json::to_value(&point.payload) {
        Ok(serde_json::Value::Object(map)) => Payload(map),
        Ok(other) => {
            return Err(Error::Rejected(format!("payload is not a JSON object: {other}")));
        }
        Err(e) => return Err(Error::Rejected(format!("payload does not serialise: {e}"))),
    };
    let mut vectors = NamedVectors::default().add_vector(DENSE, Vector::new_dense(point.dense));
    if let Some(sparse) = point.sparse {
        vectors = vectors.add_vector(SPARSE, Vector::from(VectorInternal::Sparse(sparse_vector(sparse)?)));
    }
    Ok(PointStructPersisted {
        id: PointId::Uuid(point.id),
        vector: VectorStructPersisted::from(Vectors::from(vectors).0),
        payload: Some(payload),
    })
}

pub(super) fn uuid_of(id: PointId) -> Option<Uuid> {
    match id {
        PointId::Uuid(id) => Some(id),
        PointId::NumId(n) => {
            tracing::warn!(
                point = n,
                "ignoring a point with a numeric id: quarry only writes UUIDs"
            );
            None
        }
    }
}

/// Never fails: a payload that is not a [`PointPayload`] (stale or foreign point) is `None`.
fn parse_payload(payload: Option<Payload>) -> Option<PointPayload> {
    serde_json::from_value(serde_json::Value::Object(payload?.0)).ok()
}

pub(super) fn scored(hits: Vec<qdrant_edge::ScoredPoint>) -> Vec<ScoredPoint> {
    hits.into_iter()
        .filter_map(|hit| {
            Some(ScoredPoint {
                id: uuid_of(hit.id)?,
                score: hit.score,
                payload: parse_payload(hit.payload),
            })
        })
        .collect()
}

pub(super) fn record(record: qdrant_edge::Record) -> Option<PointRecord> {
    Some(PointRecord {
        id: uuid_of(record.id)?,
        payload: parse_payload(record.payload),
    })
}

pub(super) fn nearest(vector: VectorInternal, using: &str) -> ScoringQuery {
    ScoringQuery::Vector(QueryEnum::Nearest(NamedQuery::new(vector, using)))
}

pub(super) fn with_payload() -> WithPayloadInterface {
    WithPayloadInterface::Bool(true)
}
