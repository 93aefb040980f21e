//! Collections and points on both backends: creating a collection, upserts and counts, payloads
//! that round-trip exactly, and what a missing collection or a wrong-shaped vector gets.

use quarry::domain::{RunId, SourceId, WorldId, point_id};
use quarry::vector::{CollectionSpec, Error, HybridSearch, Point, PointFilter, PointPayload, SparseVector, VectorRepo};
use uuid::Uuid;

use super::{DIM, Slot, assert_close, dense_search, spec};

async fn ensure_collection_is_idempotent_and_rejects_incompatible_specs(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("chunks", true)).await.unwrap();
    repo.ensure_collection(&spec("chunks", true))
        .await
        .expect("second ensure of the same spec must succeed");

    let other_dims = CollectionSpec {
        dimensions: DIM + 1,
        ..spec("chunks", true)
    };
    let err = repo
        .ensure_collection(&other_dims)
        .await
        .expect_err("different dimensions must be refused");
    assert!(
        matches!(&err, Error::Incompatible { name, .. } if name == "chunks"),
        "{err:?}"
    );

    let err = repo
        .ensure_collection(&spec("chunks", false))
        .await
        .expect_err("dropping sparse must be refused");
    assert!(matches!(err, Error::Incompatible { .. }), "{err:?}");

    repo.ensure_collection(&spec("dense_only", false)).await.unwrap();
    let err = repo
        .ensure_collection(&spec("dense_only", true))
        .await
        .expect_err("adding sparse must be refused");
    assert!(matches!(err, Error::Incompatible { .. }), "{err:?}");

    // The refused specs changed nothing: the collection still takes points of its own shape.
    let slot = Slot::new();
    repo.upsert("chunks", vec![slot.sparse_point(0, [1.0, 0.0, 0.0, 0.0], &[(1, 1.0)])])
        .await
        .unwrap();
    assert_eq!(repo.count("chunks", PointFilter::world(slot.world)).await.unwrap(), 1);
}

async fn upsert_then_count_by_world_run_and_source(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("chunks", false)).await.unwrap();
    let a = Slot::new();
    let a_s2 = a.with_source(SourceId::new());
    let a_r2 = a.with_run(RunId::new());
    let b = Slot::new();
    let mut points = Vec::new();
    points.extend((0..3).map(|i| a.point(i, [1.0, i as f32, 0.0, 0.0])));
    points.extend((0..2).map(|i| a_s2.point(i, [0.0, 1.0, i as f32, 0.0])));
    points.push(a_r2.point(0, [0.0, 0.0, 1.0, 0.0]));
    points.extend((0..4).map(|i| b.point(i, [0.0, 0.0, 0.0, 1.0 + i as f32])));
    repo.upsert("chunks", points).await.unwrap();

    let count = |filter| repo.count("chunks", filter);
    assert_eq!(
        count(PointFilter::world(a.world)).await.unwrap(),
        6,
        "world a, all runs and sources"
    );
    assert_eq!(
        count(PointFilter::world(a.world).run(a.run)).await.unwrap(),
        5,
        "world a, run 1"
    );
    assert_eq!(
        count(PointFilter::world(a.world).run(a_r2.run)).await.unwrap(),
        1,
        "world a, run 2"
    );
    assert_eq!(
        count(PointFilter::world(a.world).source(a.source)).await.unwrap(),
        4,
        "world a, source 1"
    );
    assert_eq!(
        count(PointFilter::world(a.world).run(a.run).source(a.source))
            .await
            .unwrap(),
        3
    );
    assert_eq!(count(PointFilter::world(a.world).source(a_s2.source)).await.unwrap(), 2);
    assert_eq!(count(PointFilter::world(b.world)).await.unwrap(), 4, "world b");
    assert_eq!(
        count(PointFilter::world(WorldId::new())).await.unwrap(),
        0,
        "unknown world"
    );
    // Another world's run or source never matches.
    assert_eq!(count(PointFilter::world(b.world).run(a.run)).await.unwrap(), 0);

    // Upserting the same slot again replaces the point instead of adding one.
    let mut again = a.point(0, [0.0, 1.0, 0.0, 0.0]);
    again.payload.token_count = 999;
    repo.upsert("chunks", vec![again]).await.unwrap();
    assert_eq!(count(PointFilter::world(a.world)).await.unwrap(), 6);
    let stored = repo.retrieve("chunks", &[a.id(0)]).await.unwrap();
    assert_eq!(stored[0].payload.as_ref().map(|p| p.token_count), Some(999));
}

async fn a_missing_collection_reads_empty_and_refuses_searches_and_upserts(repo: &dyn VectorRepo) {
    let world = WorldId::new();
    let name = "never_created";
    let err = repo
        .search(
            name,
            dense_search([1.0, 0.0, 0.0, 0.0], PointFilter::world(world), 5, None),
        )
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::MissingCollection(n) if n == name), "{err:?}");
    let nothing_asked = repo
        .search(
            name,
            dense_search([1.0, 0.0, 0.0, 0.0], PointFilter::world(world), 0, None),
        )
        .await;
    assert!(nothing_asked.unwrap().is_empty());
    let hybrid = HybridSearch {
        hnsw_ef: None,
        dense: vec![1.0, 0.0, 0.0, 0.0],
        sparse: SparseVector {
            indices: vec![1],
            values: vec![1.0],
        },
        filter: PointFilter::world(world),
        sources: None,
        limit: 5,
        prefetch_limit: 5,
        dense_score_threshold: None,
        fusion: quarry::vector::Fusion::default(),
    };
    let err = repo.hybrid_search(name, hybrid).await.unwrap_err();
    assert!(matches!(&err, Error::MissingCollection(n) if n == name), "{err:?}");
    assert!(repo.retrieve(name, &[Uuid::new_v4()]).await.unwrap().is_empty());
    let page = repo.scroll(name, PointFilter::world(world), None, 5).await.unwrap();
    assert!(page.points.is_empty() && page.next.is_none());
    assert_eq!(repo.count(name, PointFilter::world(world)).await.unwrap(), 0);
    repo.delete_points(name, &[Uuid::new_v4()]).await.unwrap();
    repo.delete_by_filter(name, PointFilter::world(world)).await.unwrap();

    let err = repo
        .upsert(name, vec![Slot::new().point(0, [1.0, 0.0, 0.0, 0.0])])
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::MissingCollection(n) if n == name), "{err:?}");
    // Reads did not create it either.
    assert_eq!(repo.count(name, PointFilter::world(world)).await.unwrap(), 0);
}

async fn vectors_of_the_wrong_shape_are_rejected_not_stored(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("chunks", false)).await.unwrap();
    let a = Slot::new();
    let mut too_long = a.point(0, [1.0, 0.0, 0.0, 0.0]);
    too_long.dense.push(1.0);
    let err = repo.upsert("chunks", vec![too_long]).await.unwrap_err();
    assert!(matches!(err, Error::Rejected(_)), "wrong dimensions: {err:?}");

    // A sparse vector in a dense-only collection.
    let sparse = a.sparse_point(1, [1.0, 0.0, 0.0, 0.0], &[(1, 1.0)]);
    let err = repo.upsert("chunks", vec![sparse]).await.unwrap_err();
    assert!(matches!(err, Error::Rejected(_)), "undeclared sparse vector: {err:?}");

    let mut search = dense_search([1.0, 0.0, 0.0, 0.0], PointFilter::world(a.world), 5, None);
    search.vector.pop();
    let err = repo.search("chunks", search).await.unwrap_err();
    assert!(matches!(err, Error::Rejected(_)), "query of the wrong size: {err:?}");
    assert_eq!(repo.count("chunks", PointFilter::world(a.world)).await.unwrap(), 0);

    // Zero limits are empty answers, not errors.
    repo.upsert("chunks", vec![a.point(2, [1.0, 0.0, 0.0, 0.0])])
        .await
        .unwrap();
    let search = dense_search([1.0, 0.0, 0.0, 0.0], PointFilter::world(a.world), 0, None);
    assert!(repo.search("chunks", search).await.unwrap().is_empty());
}

async fn payload_round_trips_exactly(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("chunks", true)).await.unwrap();
    let a = Slot::new();
    let payload = PointPayload {
        world_id: a.world,
        run_id: a.run,
        source_id: a.source,
        book_number: u32::MAX,
        chunk_number: 4_000_000_000,
        text_sha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".into(),
        token_count: 0,
    };
    let id = point_id(a.world, a.run, a.source, payload.chunk_number);
    let point = Point {
        id,
        dense: vec![0.25, -0.5, 0.125, 1.0],
        sparse: Some(SparseVector {
            indices: vec![7, 3, 99],
            values: vec![0.5, 1.5, 0.25],
        }),
        payload: payload.clone(),
    };
    repo.upsert("chunks", vec![point]).await.unwrap();

    let records = repo.retrieve("chunks", &[id]).await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].id, id);
    assert_eq!(records[0].payload.as_ref(), Some(&payload));
    let hits = repo
        .search(
            "chunks",
            dense_search([0.25, -0.5, 0.125, 1.0], PointFilter::world(a.world), 1, None),
        )
        .await;
    let hits = hits.unwrap();
    assert_eq!(hits.len(), 1);
    assert_close(hits[0].score, 1.0, "identical vector");
    assert_eq!(hits[0].payload.as_ref(), Some(&payload));
    let page = repo
        .scroll("chunks", PointFilter::world(a.world), None, 10)
        .await
        .unwrap();
    assert_eq!(page.points[0].payload.as_ref(), Some(&payload));
}

conformance_tests!(
    ensure_collection_is_idempotent_and_rejects_incompatible_specs,
    upsert_then_count_by_world_run_and_source,
    a_missing_collection_reads_empty_and_refuses_searches_and_upserts,
    payload_round_trips_exactly,
    vectors_of_the_wrong_shape_are_rejected_not_stored,
);
