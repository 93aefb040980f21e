//! Helpers the embedded store's unit tests share: chunk points and a store with a collection.

use std::path::Path;

use crate::domain::{RunId, SourceId, WorldId};
use crate::vector::{CollectionSpec, Point, PointPayload, VectorRepo};

use super::EdgeRepo;

/// A point of chunk `i` with the payload the workers write.
pub(super) fn point(world: WorldId, run: RunId, source: SourceId, i: u32, dense: Vec<f32>) -> Point {
    Point {
        id: crate::domain::point_id(world, run, source, i),
        dense,
        sparse: None,
        payload: PointPayload {
            world_id: world,
            run_id: run,
            source_id: source,
            book_number: 1,
            chunk_number: i,
            text_sha256: String::new(),
            token_count: 1,
        },
    }
}

/// The store in `dir` with a 4-dimension dense collection `chunks`.
pub(super) async fn open_with_chunks(dir: &Path) -> EdgeRepo {
    let repo = EdgeRepo::open(dir).unwrap();
    repo.ensure_collection(&CollectionSpec {
        name: "chunks".into(),
        dimensions: 4,
        sparse: false,
    })
    .await
    .unwrap();
    repo
}
