//! Deleting points on both backends, by id and by filter.

use quarry::domain::{RunId, SourceId};
use quarry::vector::{Point, PointFilter, VectorRepo};
use uuid::Uuid;

use super::{Slot, dense_search, spec};

async fn delete_points_removes_exactly_those_ids(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("chunks", false)).await.unwrap();
    let a = Slot::new();
    repo.upsert(
        "chunks",
        (0..4).map(|i| a.point(i, [1.0, i as f32, 0.0, 0.0])).collect(),
    )
    .await
    .unwrap();

    repo.delete_points("chunks", &[a.id(1), a.id(3), Uuid::new_v4()])
        .await
        .unwrap();
    assert_eq!(repo.count("chunks", PointFilter::world(a.world)).await.unwrap(), 2);
    let left = repo
        .retrieve("chunks", &[a.id(0), a.id(1), a.id(2), a.id(3)])
        .await
        .unwrap();
    assert_eq!(left.iter().map(|r| r.id).collect::<Vec<_>>(), vec![a.id(0), a.id(2)]);
    let hits = repo
        .search(
            "chunks",
            dense_search([1.0, 3.0, 0.0, 0.0], PointFilter::world(a.world), 10, None),
        )
        .await;
    assert!(
        hits.unwrap().iter().all(|h| h.id != a.id(1) && h.id != a.id(3)),
        "deleted points are not found"
    );
    // Deleting again, or nothing, is fine.
    repo.delete_points("chunks", &[a.id(1)]).await.unwrap();
    repo.delete_points("chunks", &[]).await.unwrap();
    assert_eq!(repo.count("chunks", PointFilter::world(a.world)).await.unwrap(), 2);
}

async fn delete_by_filter_removes_only_the_matching_points(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("chunks", false)).await.unwrap();
    let a = Slot::new();
    let a_s2 = a.with_source(SourceId::new());
    let a_r2 = a.with_run(RunId::new());
    let b = Slot::new();
    let mut points: Vec<Point> = (0..3).map(|i| a.point(i, [1.0, 0.0, i as f32, 0.0])).collect();
    points.extend((0..2).map(|i| a_s2.point(i, [1.0, 0.0, 0.0, i as f32])));
    points.extend((0..2).map(|i| a_r2.point(i, [0.0, 1.0, 0.0, i as f32])));
    points.extend((0..3).map(|i| b.point(i, [1.0, 0.0, i as f32, 0.0])));
    repo.upsert("chunks", points).await.unwrap();

    // One source of one run.
    repo.delete_by_filter("chunks", PointFilter::world(a.world).run(a.run).source(a.source))
        .await
        .unwrap();
    assert_eq!(
        repo.count("chunks", PointFilter::world(a.world).source(a.source))
            .await
            .unwrap(),
        2,
        "run 2 kept"
    );
    assert_eq!(
        repo.count("chunks", PointFilter::world(a.world).source(a_s2.source))
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        repo.count("chunks", PointFilter::world(b.world)).await.unwrap(),
        3,
        "world b untouched"
    );

    // A whole run (what a finished re-ingest does to the old one).
    repo.delete_by_filter("chunks", PointFilter::world(a.world).run(a_r2.run))
        .await
        .unwrap();
    assert_eq!(repo.count("chunks", PointFilter::world(a.world)).await.unwrap(), 2);

    // A whole world.
    repo.delete_by_filter("chunks", PointFilter::world(a.world))
        .await
        .unwrap();
    assert_eq!(repo.count("chunks", PointFilter::world(a.world)).await.unwrap(), 0);
    assert_eq!(
        repo.count("chunks", PointFilter::world(b.world)).await.unwrap(),
        3,
        "world b untouched"
    );
    let left = repo.retrieve("chunks", &[b.id(0), b.id(1), b.id(2)]).await.unwrap();
    assert_eq!(left.len(), 3);
}

conformance_tests!(
    delete_points_removes_exactly_those_ids,
    delete_by_filter_removes_only_the_matching_points,
);
