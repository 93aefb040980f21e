//! Writing points: upserts in batches, deletes by id or filter, and moving points to another
//! run. Every write is noted on its shard for the maintenance task.

use std::sync::Arc;

use qdrant_edge::{
    Payload, PayloadOps, PointId, PointInsertOperations, PointOperations, SetPayloadOp, UpdateOperation,
};
use uuid::Uuid;

use crate::vector::{Point, PointFilter, PointHome, Result};

use super::convert::{to_filter, to_persisted};
use super::engine::{blocking, engine_error};
use super::shards::{shard, shard_or_missing};
use super::{Inner, UPSERT_BATCH};

pub(super) async fn upsert(inner: &Arc<Inner>, collection: &str, points: Vec<Point>) -> Result<()> {
    let shard = shard_or_missing(inner, collection).await?;
    if points.is_empty() {
        return Ok(());
    }
    let points = points.into_iter().map(to_persisted).collect::<Result<Vec<_>>>()?;
    blocking(move || {
        let mut rest = points;
        while !rest.is_empty() {
            let tail = rest.split_off(rest.len().min(UPSERT_BATCH));
            let batch = std::mem::replace(&mut rest, tail);
            let count = batch.len() as u64;
            let result = shard
                .engine
                .update(UpdateOperation::PointOperation(PointOperations::UpsertPoints(
                    PointInsertOperations::PointsList(batch),
                )));
            // Even a failed update may have touched the WAL: let maintenance flush it.
            shard.note_write(count);
            result.map_err(engine_error)?;
        }
        Ok(())
    })
    .await
}

pub(super) async fn delete_points(inner: &Arc<Inner>, collection: &str, ids: &[Uuid]) -> Result<()> {
    let Some(shard) = shard(inner, collection).await? else {
        return Ok(());
    };
    if ids.is_empty() {
        return Ok(());
    }
    let ids: Vec<PointId> = ids.iter().copied().map(PointId::Uuid).collect();
    blocking(move || {
        let count = ids.len() as u64;
        let result = shard
            .engine
            .update(UpdateOperation::PointOperation(PointOperations::DeletePoints { ids }));
        shard.note_write(count);
        result.map_err(engine_error)
    })
    .await
}

pub(super) async fn move_points(inner: &Arc<Inner>, collection: &str, ids: &[Uuid], to: PointHome) -> Result<()> {
    let Some(shard) = shard(inner, collection).await? else {
        return Ok(());
    };
    if ids.is_empty() {
        return Ok(());
    }
    let points: Vec<PointId> = ids.iter().copied().map(PointId::Uuid).collect();
    blocking(move || {
        let count = points.len() as u64;
        let result = shard
            .engine
            .update(UpdateOperation::PayloadOperation(PayloadOps::SetPayload(
                SetPayloadOp {
                    payload: Payload(to.to_json()),
                    points: Some(points),
                    filter: None,
                    key: None,
                },
            )));
        shard.note_write(count);
        result.map_err(engine_error)
    })
    .await
}

pub(super) async fn delete_by_filter(inner: &Arc<Inner>, collection: &str, filter: PointFilter) -> Result<()> {
    let Some(shard) = shard(inner, collection).await? else {
        return Ok(());
    };
    let filter = to_filter(filter)?;
    blocking(move || {
        let result = shard
            .engine
            .update(UpdateOperation::PointOperation(PointOperations::DeletePointsByFilter(
                filter,
            )));
        shard.note_write(1);
        result.map_err(engine_error)
    })
    .await
}
