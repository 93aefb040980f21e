//! Writing points: upserts in batches, deletes by id or filter, and moving points to another
//! run. Every write waits until the server applied it.

use qdrant_client::Payload;
use qdrant_client::qdrant::{
    self as pb, DeletePointsBuilder, PointsIdsList, SetPayloadPointsBuilder, UpsertPointsBuilder,
};
use uuid::Uuid;

use crate::vector::{Error, Point, PointFilter, PointHome, Result};

use super::convert::{point_ids, to_filter, to_point};
use super::errors::{client_error, or_empty};
use super::{ServerRepo, UPSERT_BATCH};

/// The write options every update carries: ordered through the shard's leader replica, so
/// replicas apply one point's writes in the same order, yet still accepted while a node is down.
fn ordering() -> pb::WriteOrdering {
    pb::WriteOrdering {
        r#type: pb::WriteOrderingType::Medium as i32,
    }
}

pub(super) async fn upsert(repo: &ServerRepo, collection: &str, points: Vec<Point>) -> Result<()> {
    let name = repo.name(collection);
    if points.is_empty() {
        return if repo.exists(&name).await? {
            Ok(())
        } else {
            Err(Error::MissingCollection(collection.to_owned()))
        };
    }
    let mut points = points.into_iter().map(to_point).collect::<Result<Vec<_>>>()?;
    while !points.is_empty() {
        let rest = points.split_off(points.len().min(UPSERT_BATCH));
        let batch = std::mem::replace(&mut points, rest);
        let request = UpsertPointsBuilder::new(&name, batch).wait(true).ordering(ordering());
        repo.call(|c| {
            let request = request.clone();
            async move { c.upsert_points(request).await }
        })
        .await
        .map_err(|e| match client_error(e) {
            Error::MissingCollection(_) => Error::MissingCollection(collection.to_owned()),
            other => other,
        })?;
    }
    Ok(())
}

pub(super) async fn delete_points(repo: &ServerRepo, collection: &str, ids: &[Uuid]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let request = DeletePointsBuilder::new(repo.name(collection))
        .points(PointsIdsList { ids: point_ids(ids) })
        .wait(true)
        .ordering(ordering());
    or_empty(
        repo.call(|c| {
            let request = request.clone();
            async move { c.delete_points(request).await }
        })
        .await
        .map(|_| ())
        .map_err(client_error),
        (),
    )
}

pub(super) async fn move_points(repo: &ServerRepo, collection: &str, ids: &[Uuid], to: PointHome) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let payload = Payload::from(to.to_json());
    let request = SetPayloadPointsBuilder::new(repo.name(collection), payload)
        .points_selector(PointsIdsList { ids: point_ids(ids) })
        .wait(true)
        .ordering(ordering());
    or_empty(
        repo.call(|c| {
            let request = request.clone();
            async move { c.set_payload(request).await }
        })
        .await
        .map(|_| ())
        .map_err(client_error),
        (),
    )
}

pub(super) async fn delete_by_filter(repo: &ServerRepo, collection: &str, filter: PointFilter) -> Result<()> {
    let request = DeletePointsBuilder::new(repo.name(collection))
        .points(to_filter(filter))
        .wait(true)
        .ordering(ordering());
    or_empty(
        repo.call(|c| {
            let request = request.clone();
            async move { c.delete_points(request).await }
        })
        .await
        .map(|_| ())
        .map_err(client_error),
        (),
    )
}
