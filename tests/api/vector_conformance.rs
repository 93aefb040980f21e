//! One conformance suite for both vector backends.
//!
//! Every check is an `async fn` over `&dyn VectorRepo`, written once and run twice by
//! `conformance_tests!`: against [`EdgeRepo`] in a temporary directory (always) and against a
//! Qdrant server when `QUARRY_TEST_QDRANT_URL` is set (e.g. `http://localhost:6334`, optional
//! `QUARRY_TEST_QDRANT_API_KEY`), in collections under a unique prefix that are deleted afterwards.
//! Without the variable the server tests say loudly that they were skipped.
//!
//! Vectors are tiny (4 dimensions) and chosen so that their cosine scores are known exactly.

use std::collections::HashSet;
use std::io::Write as _;
use std::path::Path;
use std::sync::Once;
use std::time::{Duration, Instant};

use quarry::domain::{RunId, SourceId, WorldId, point_id};
use quarry::vector::edge::EdgeRepo;
use quarry::vector::server::ServerRepo;
use quarry::vector::{
    CollectionSpec, DenseSearch, Error, HybridSearch, Point, PointFilter, PointPayload, SparseVector, VectorRepo,
};
use uuid::Uuid;

const DIM: u32 = 4;

// ---------------------------------------------------------------------------------------------
// fixtures

fn spec(name: &str, sparse: bool) -> CollectionSpec {
    CollectionSpec {
        name: name.to_owned(),
        dimensions: DIM,
        sparse,
    }
}

/// One (world, run, source) slot family.
#[derive(Clone, Copy)]
struct Slot {
    world: WorldId,
    run: RunId,
    source: SourceId,
}

impl Slot {
    fn new() -> Self {
        Slot {
            world: WorldId::new(),
            run: RunId::new(),
            source: SourceId::new(),
        }
    }

    fn with_run(self, run: RunId) -> Self {
        Slot { run, ..self }
    }

    fn with_source(self, source: SourceId) -> Self {
        Slot { source, ..self }
    }

    fn payload(&self, chunk: u32) -> PointPayload {
        PointPayload {
            world_id: self.world,
            run_id: self.run,
            source_id: self.source,
            book_number: 1,
            chunk_number: chunk,
            text_sha256: format!("{:064x}", u128::from(chunk) * 0x9e37_79b9_7f4a_7c15),
            token_count: 10 + chunk,
        }
    }

    fn id(&self, chunk: u32) -> Uuid {
        point_id(self.world, self.run, self.source, chunk)
    }

    fn point(&self, chunk: u32, dense: [f32; 4]) -> Point {
        Point {
            id: self.id(chunk),
            dense: dense.to_vec(),
            sparse: None,
            payload: self.payload(chunk),
        }
    }

    fn sparse_point(&self, chunk: u32, dense: [f32; 4], terms: &[(u32, f32)]) -> Point {
        Point {
            sparse: Some(SparseVector {
                indices: terms.iter().map(|t| t.0).collect(),
                values: terms.iter().map(|t| t.1).collect(),
            }),
            ..self.point(chunk, dense)
        }
    }
}

fn dense_search(vector: [f32; 4], filter: PointFilter, limit: usize, threshold: Option<f32>) -> DenseSearch {
    DenseSearch {
        vector: vector.to_vec(),
        filter,
        limit,
        score_threshold: threshold,
    }
}

fn assert_close(actual: f32, expected: f32, what: &str) {
    assert!(
        (actual - expected).abs() < 1e-4,
        "{what}: score {actual}, expected {expected}"
    );
}

// ---------------------------------------------------------------------------------------------
// the suite

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

async fn search_stays_in_its_world_ranks_best_first_and_applies_the_threshold(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("chunks", false)).await.unwrap();
    let a = Slot::new();
    let a_old_run = a.with_run(RunId::new());
    let b = Slot::new();
    let q = [1.0, 0.0, 0.0, 0.0];
    repo.upsert(
        "chunks",
        vec![
            a.point(0, [0.0, 1.0, 0.0, 0.0]),         // cos 0
            a.point(1, [2.0, 2.0, 0.0, 0.0]),         // cos 0.7071 (norm does not matter)
            a.point(2, [5.0, 0.0, 0.0, 0.0]),         // cos 1
            a.point(3, [1.0, 1.0, 1.0, 1.0]),         // cos 0.5
            a.point(4, [-1.0, 0.0, 0.0, 0.0]),        // cos -1
            a_old_run.point(0, [1.0, 0.0, 0.0, 0.0]), // cos 1, but another run
            b.point(0, [1.0, 0.0, 0.0, 0.0]),         // cos 1, but another world
            b.point(1, [1.0, 0.1, 0.0, 0.0]),
        ],
    )
    .await
    .unwrap();

    let hits = repo
        .search(
            "chunks",
            dense_search(q, PointFilter::world(a.world).run(a.run), 10, None),
        )
        .await
        .unwrap();
    let ids: Vec<Uuid> = hits.iter().map(|h| h.id).collect();
    assert_eq!(
        ids,
        vec![a.id(2), a.id(1), a.id(3), a.id(0), a.id(4)],
        "best first, world a run 1 only"
    );
    for (hit, expected) in hits.iter().zip([1.0, std::f32::consts::FRAC_1_SQRT_2, 0.5, 0.0, -1.0]) {
        assert_close(hit.score, expected, "cosine");
    }
    assert_eq!(
        hits[0].payload.as_ref(),
        Some(&a.payload(2)),
        "hits carry their payload"
    );

    // The threshold is applied inside the query: only hits scoring above it come back.
    let hits = repo
        .search(
            "chunks",
            dense_search(q, PointFilter::world(a.world).run(a.run), 10, Some(0.6)),
        )
        .await
        .unwrap();
    assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), vec![a.id(2), a.id(1)]);
    assert!(hits.iter().all(|h| h.score > 0.6));

    // The limit cuts the ranked list.
    let hits = repo
        .search(
            "chunks",
            dense_search(q, PointFilter::world(a.world).run(a.run), 2, None),
        )
        .await
        .unwrap();
    assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), vec![a.id(2), a.id(1)]);

    // Without a run filter the world's other run shows up; other worlds never do.
    let hits = repo
        .search("chunks", dense_search(q, PointFilter::world(a.world), 10, Some(0.9)))
        .await
        .unwrap();
    let ids: HashSet<Uuid> = hits.iter().map(|h| h.id).collect();
    assert_eq!(ids, HashSet::from([a.id(2), a_old_run.id(0)]));
    let hits = repo
        .search("chunks", dense_search(q, PointFilter::world(b.world), 10, None))
        .await
        .unwrap();
    assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), vec![b.id(0), b.id(1)]);
    assert!(
        hits.iter()
            .all(|h| h.payload.as_ref().is_some_and(|p| p.world_id == b.world))
    );

    // A world with no points finds nothing.
    let hits = repo
        .search("chunks", dense_search(q, PointFilter::world(WorldId::new()), 10, None))
        .await
        .unwrap();
    assert!(hits.is_empty());
}

async fn hybrid_search_finds_a_rare_term_the_dense_vector_ranks_low(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("hybrid", true)).await.unwrap();
    let a = Slot::new();
    let b = Slot::new();
    const COMMON: u32 = 11;
    const OTHER: u32 = 12;
    const RARE: u32 = 4_000_000_001;
    let q = [1.0, 0.0, 0.0, 0.0];
    let mut points: Vec<Point> = (0..8)
        .map(|i| a.sparse_point(i, [1.0, 0.05 * i as f32, 0.0, 0.0], &[(COMMON, 1.0), (OTHER, 0.5)]))
        .collect();
    // The target: orthogonal to the query (last in dense order) but the only carrier of RARE.
    let target = a.sparse_point(8, [0.0, 0.0, 0.0, 1.0], &[(COMMON, 0.3), (RARE, 1.2)]);
    points.push(target.clone());
    // Another world with the rare term and a perfect dense match must stay invisible.
    points.push(b.sparse_point(0, q, &[(RARE, 2.0)]));
    repo.upsert("hybrid", points).await.unwrap();

    let dense_only = repo
        .search("hybrid", dense_search(q, PointFilter::world(a.world), 3, None))
        .await
        .unwrap();
    assert!(
        dense_only.iter().all(|h| h.id != target.id),
        "dense alone must not find the target in its top 3"
    );

    let hits = repo
        .hybrid_search(
            "hybrid",
            HybridSearch {
                dense: q.to_vec(),
                sparse: SparseVector {
                    indices: vec![RARE],
                    values: vec![1.0],
                },
                filter: PointFilter::world(a.world).run(a.run),
                limit: 3,
                prefetch_limit: 20,
                dense_score_threshold: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(hits.len(), 3);
    // RRF: the target is first in the sparse list and last in the dense one, which beats the
    // dense winner that the sparse list does not contain at all.
    assert_eq!(hits[0].id, target.id, "the rare term wins the fusion: {hits:?}");
    assert_eq!(hits[0].payload.as_ref(), Some(&target.payload));
    assert!(
        hits.windows(2).all(|w| w[0].score >= w[1].score),
        "fused scores are best first"
    );
    assert!(
        hits.iter()
            .all(|h| h.payload.as_ref().is_some_and(|p| p.world_id == a.world)),
        "world a only"
    );
    assert_eq!(hits[1].id, a.id(0), "then the dense ranking");
}

async fn hybrid_search_weighs_terms_by_their_rarity_in_the_world(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("hybrid", true)).await.unwrap();
    let a = Slot::new();
    let b = Slot::new();
    const X: u32 = 101;
    const Y: u32 = 202;
    let q = [1.0, 0.0, 0.0, 0.0];
    let cos = |c: f32| [c, (1.0 - c * c).sqrt(), 0.0, 0.0];
    // In world a, X is rare (1 point) and Y common (4 points). World b is full of X, so over the
    // whole collection X would be the common term and Y the rare one.
    let d = a.point(0, cos(1.0)); // dense rank 1, no terms
    let p2 = a.sparse_point(1, cos(0.9), &[(Y, 1.0)]); // dense rank 2
    let p1 = a.sparse_point(2, cos(0.8), &[(X, 1.0)]); // dense rank 3
    let mut points = vec![d, p2.clone(), p1.clone()];
    points.extend((3..6).map(|i| a.sparse_point(i, cos(0.5 - 0.1 * i as f32), &[(Y, 0.5)])));
    points.extend((0..20).map(|i| b.sparse_point(i, [0.0, 0.0, 1.0, 0.0], &[(X, 1.0)])));
    repo.upsert("hybrid", points).await.unwrap();

    let hits = repo
        .hybrid_search(
            "hybrid",
            HybridSearch {
                dense: q.to_vec(),
                sparse: SparseVector {
                    indices: vec![X, Y],
                    values: vec![1.0, 1.0],
                },
                filter: PointFilter::world(a.world),
                limit: 2,
                prefetch_limit: 10,
                dense_score_threshold: None,
            },
        )
        .await
        .unwrap();
    // With the world's own IDF, X outweighs Y: p1 is first in the sparse list and wins the fusion
    // (1/63 + 1/61 against p2's 1/62 + 1/62). With collection-wide IDF, p2 would win.
    let ids: Vec<Uuid> = hits.iter().map(|h| h.id).collect();
    assert_eq!(
        ids,
        vec![p1.id, p2.id],
        "IDF must be computed over the world's points: {hits:?}"
    );
}

async fn retrieve_skips_missing_ids_and_keeps_the_requested_order(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("chunks", false)).await.unwrap();
    let a = Slot::new();
    repo.upsert(
        "chunks",
        (0..3).map(|i| a.point(i, [1.0, i as f32, 0.0, 0.0])).collect(),
    )
    .await
    .unwrap();

    let records = repo
        .retrieve("chunks", &[a.id(2), Uuid::new_v4(), a.id(0)])
        .await
        .unwrap();
    assert_eq!(records.iter().map(|r| r.id).collect::<Vec<_>>(), vec![a.id(2), a.id(0)]);
    assert_eq!(records[0].payload.as_ref(), Some(&a.payload(2)));
    assert_eq!(records[1].payload.as_ref(), Some(&a.payload(0)));
    assert!(repo.retrieve("chunks", &[]).await.unwrap().is_empty());
    assert!(repo.retrieve("chunks", &[Uuid::new_v4()]).await.unwrap().is_empty());
}

async fn dense_vectors_come_back_unit_length_for_reuse(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("chunks", true)).await.unwrap();
    let a = Slot::new();
    repo.upsert(
        "chunks",
        vec![
            a.point(0, [3.0, 4.0, 0.0, 0.0]),
            a.sparse_point(1, [0.0, 0.0, 2.0, 0.0], &[(7, 1.0)]),
        ],
    )
    .await
    .unwrap();
    let mut vectors = repo
        .dense_vectors("chunks", &[a.id(1), Uuid::new_v4(), a.id(0)])
        .await
        .unwrap();
    vectors.sort_by_key(|(id, _)| *id != a.id(0));
    assert_eq!(vectors.len(), 2, "a missing id is skipped");
    assert_eq!(vectors[0].0, a.id(0));
    let expected = [[0.6, 0.8, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]];
    for ((_, v), e) in vectors.iter().zip(expected) {
        assert_eq!(v.len(), 4);
        for (x, y) in v.iter().zip(e) {
            assert_close(*x, y, "stored (normalised) component");
        }
    }
    assert!(repo.dense_vectors("missing", &[a.id(0)]).await.unwrap().is_empty());
    assert!(repo.dense_vectors("chunks", &[]).await.unwrap().is_empty());
}

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

async fn scroll_pages_through_a_world_in_id_order_without_duplicates(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("chunks", false)).await.unwrap();
    let a = Slot::new();
    let b = Slot::new();
    let mut points: Vec<Point> = (0..25).map(|i| a.point(i, [1.0, i as f32, 0.0, 0.0])).collect();
    points.extend((0..5).map(|i| b.point(i, [1.0, i as f32, 0.0, 0.0])));
    repo.upsert("chunks", points).await.unwrap();

    let mut seen = Vec::new();
    let mut offset = None;
    let mut pages = 0;
    loop {
        let page = repo
            .scroll("chunks", PointFilter::world(a.world), offset, 7)
            .await
            .unwrap();
        pages += 1;
        assert!(page.points.len() <= 7);
        for record in &page.points {
            let payload = record.payload.as_ref().expect("scrolled points carry their payload");
            assert_eq!(payload.world_id, a.world, "scroll stays in its world");
            assert_eq!(record.id, a.id(payload.chunk_number));
        }
        seen.extend(page.points.iter().map(|r| r.id));
        match page.next {
            Some(next) => offset = Some(next),
            None => break,
        }
        assert!(pages < 10, "scroll does not terminate");
    }
    assert_eq!(pages, 4, "25 points in pages of 7");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "ordered by id, no duplicates");
    let expected: HashSet<Uuid> = (0..25).map(|i| a.id(i)).collect();
    assert_eq!(seen.iter().copied().collect::<HashSet<_>>(), expected);

    let page = repo
        .scroll("chunks", PointFilter::world(WorldId::new()), None, 7)
        .await
        .unwrap();
    assert!(page.points.is_empty() && page.next.is_none());
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
        dense: vec![1.0, 0.0, 0.0, 0.0],
        sparse: SparseVector {
            indices: vec![1],
            values: vec![1.0],
        },
        filter: PointFilter::world(world),
        limit: 5,
        prefetch_limit: 5,
        dense_score_threshold: None,
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

// ---------------------------------------------------------------------------------------------
// backends

/// An [`EdgeRepo`] in its own temporary directory. Field order matters: the repo is dropped
/// before the directory is removed.
struct EdgeEnv {
    repo: EdgeRepo,
    dir: tempfile::TempDir,
}

impl EdgeEnv {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = EdgeRepo::open(dir.path()).unwrap();
        EdgeEnv { repo, dir }
    }

    async fn finish(self) {
        self.repo.close().await.unwrap();
        drop(self.repo);
        drop(self.dir);
    }
}

/// Says, past the test harness's output capture, that the server suite did not run.
fn announce_server_skip() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = writeln!(
            std::io::stderr(),
            "\n************************************************************************\n\
             SKIPPED: Qdrant server conformance suite — set QUARRY_TEST_QDRANT_URL to run it\n\
             (e.g. QUARRY_TEST_QDRANT_URL=http://localhost:6334; gRPC port)\n\
             ************************************************************************\n"
        );
    });
}

/// A [`ServerRepo`] on the server named by `QUARRY_TEST_QDRANT_URL`, with a collection prefix
/// unique to this test; its collections are deleted on drop (also when the test fails).
struct ServerEnv {
    repo: ServerRepo,
    url: String,
    api_key: Option<String>,
    prefix: String,
}

impl ServerEnv {
    fn from_env(test: &str) -> Option<Self> {
        let Ok(url) = std::env::var("QUARRY_TEST_QDRANT_URL") else {
            announce_server_skip();
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: vector_conformance server test `{test}` (no QUARRY_TEST_QDRANT_URL)"
            );
            return None;
        };
        let api_key = std::env::var("QUARRY_TEST_QDRANT_API_KEY").ok();
        let prefix = format!("quarry_test_{}_", Uuid::new_v4().simple());
        let repo = ServerRepo::connect(&url, api_key.clone(), prefix.clone()).unwrap();
        Some(ServerEnv {
            repo,
            url,
            api_key,
            prefix,
        })
    }
}

impl Drop for ServerEnv {
    fn drop(&mut self) {
        let (url, api_key, prefix) = (self.url.clone(), self.api_key.clone(), self.prefix.clone());
        // Drop cannot await: clean up on a throwaway runtime in its own thread.
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let client = qdrant_client::Qdrant::from_url(&url)
                    .api_key(api_key)
                    .skip_compatibility_check()
                    .build()?;
                for collection in client.list_collections().await?.collections {
                    if collection.name.starts_with(&prefix) {
                        client.delete_collection(collection.name).await?;
                    }
                }
                Ok::<(), qdrant_client::QdrantError>(())
            })
        });
        match cleanup.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("could not delete test collections {}*: {e}", self.prefix),
            Err(_) => eprintln!("cleanup of test collections {}* panicked", self.prefix),
        }
    }
}

macro_rules! conformance_tests {
    ($($name:ident),* $(,)?) => {
        /// The suite against the embedded engine: always runs.
        mod edge {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let env = super::EdgeEnv::new();
                    super::$name(&env.repo).await;
                    env.finish().await;
                }
            )*
        }

        /// The suite against a Qdrant server: runs when `QUARRY_TEST_QDRANT_URL` is set.
        mod server {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(env) = super::ServerEnv::from_env(stringify!($name)) else { return };
                    super::$name(&env.repo).await;
                }
            )*
        }
    };
}

conformance_tests!(
    ensure_collection_is_idempotent_and_rejects_incompatible_specs,
    upsert_then_count_by_world_run_and_source,
    search_stays_in_its_world_ranks_best_first_and_applies_the_threshold,
    hybrid_search_finds_a_rare_term_the_dense_vector_ranks_low,
    hybrid_search_weighs_terms_by_their_rarity_in_the_world,
    retrieve_skips_missing_ids_and_keeps_the_requested_order,
    dense_vectors_come_back_unit_length_for_reuse,
    delete_points_removes_exactly_those_ids,
    delete_by_filter_removes_only_the_matching_points,
    scroll_pages_through_a_world_in_id_order_without_duplicates,
    a_missing_collection_reads_empty_and_refuses_searches_and_upserts,
    payload_round_trips_exactly,
    vectors_of_the_wrong_shape_are_rejected_not_stored,
);

// ---------------------------------------------------------------------------------------------
// embedded-only behaviour: restarts, the directory lock, flushing

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_huge_limits_return_everything_without_exhausting_memory() {
    let env = EdgeEnv::new();
    let repo = &env.repo;
    repo.ensure_collection(&spec("hybrid", true)).await.unwrap();
    let a = Slot::new();
    let points = (0..5)
        .map(|i| a.sparse_point(i, [1.0, i as f32, 0.0, 0.0], &[(1, 1.0)]))
        .collect();
    repo.upsert("hybrid", points).await.unwrap();
    let filter = PointFilter::world(a.world);
    let hits = repo.search("hybrid", dense_search([1.0, 0.0, 0.0, 0.0], filter, usize::MAX, None));
    assert_eq!(hits.await.unwrap().len(), 5);
    let hybrid = HybridSearch {
        dense: vec![1.0, 0.0, 0.0, 0.0],
        sparse: SparseVector {
            indices: vec![1],
            values: vec![1.0],
        },
        filter,
        limit: usize::MAX,
        prefetch_limit: usize::MAX,
        dense_score_threshold: None,
    };
    assert_eq!(repo.hybrid_search("hybrid", hybrid).await.unwrap().len(), 5);
    let page = repo.scroll("hybrid", filter, None, usize::MAX).await.unwrap();
    assert_eq!(page.points.len(), 5);
    assert!(page.next.is_none());
    env.finish().await;
}

/// Opens `path`, retrying while a previous owner is still letting go of the lock.
async fn open_eventually(path: &Path) -> EdgeRepo {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match EdgeRepo::open(path) {
            Ok(repo) => return repo,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("could not reopen {}: {e}", path.display()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_data_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let a = Slot::new();
    let target = a.sparse_point(9, [0.0, 0.0, 0.0, 1.0], &[(5, 1.0)]);
    {
        let repo = EdgeRepo::open(dir.path()).unwrap();
        repo.ensure_collection(&spec("hybrid", true)).await.unwrap();
        repo.ensure_collection(&spec("dense", false)).await.unwrap();
        let mut points: Vec<Point> = (0..5)
            .map(|i| a.sparse_point(i, [1.0, i as f32, 0.0, 0.0], &[(1, 1.0)]))
            .collect();
        points.push(target.clone());
        repo.upsert("hybrid", points).await.unwrap();
        repo.upsert("dense", vec![a.point(0, [1.0, 0.0, 0.0, 0.0])])
            .await
            .unwrap();
        repo.close().await.unwrap();
    }

    let repo = EdgeRepo::open(dir.path()).expect("reopen after close and drop");
    // Collections come back lazily, with their shape, indexes and data.
    assert_eq!(repo.count("hybrid", PointFilter::world(a.world)).await.unwrap(), 6);
    assert_eq!(
        repo.count("hybrid", PointFilter::world(a.world).source(a.source))
            .await
            .unwrap(),
        6
    );
    assert_eq!(
        repo.count("dense", PointFilter::world(a.world).run(a.run))
            .await
            .unwrap(),
        1
    );
    repo.ensure_collection(&spec("hybrid", true))
        .await
        .expect("same spec after restart");
    let err = repo.ensure_collection(&spec("hybrid", false)).await.unwrap_err();
    assert!(matches!(err, Error::Incompatible { .. }), "{err:?}");
    let records = repo.retrieve("hybrid", &[target.id]).await.unwrap();
    assert_eq!(records[0].payload.as_ref(), Some(&target.payload));
    let hits = repo
        .hybrid_search(
            "hybrid",
            HybridSearch {
                dense: vec![1.0, 0.0, 0.0, 0.0],
                sparse: SparseVector {
                    indices: vec![5],
                    values: vec![1.0],
                },
                filter: PointFilter::world(a.world),
                limit: 2,
                prefetch_limit: 10,
                dense_score_threshold: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(hits[0].id, target.id, "sparse index works after restart");
    // And it keeps taking writes.
    repo.upsert("dense", vec![a.point(1, [0.0, 1.0, 0.0, 0.0])])
        .await
        .unwrap();
    assert_eq!(repo.count("dense", PointFilter::world(a.world)).await.unwrap(), 2);
    repo.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_close_persists_writes_and_deletes_made_just_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = Slot::new();
    let b = Slot::new();
    {
        let repo = EdgeRepo::open(dir.path()).unwrap();
        repo.ensure_collection(&spec("chunks", false)).await.unwrap();
        let points: Vec<Point> = (0..2_500)
            .map(|i| a.point(i, [1.0, (i % 17) as f32, (i % 5) as f32, 0.5]))
            .collect();
        repo.upsert("chunks", points).await.unwrap();
        repo.upsert(
            "chunks",
            (0..10).map(|i| b.point(i, [0.0, 1.0, 0.0, i as f32])).collect(),
        )
        .await
        .unwrap();
        // No pause for the background flush: close itself must persist everything.
        repo.close().await.unwrap();
    }
    {
        let repo = EdgeRepo::open(dir.path()).unwrap();
        assert_eq!(repo.count("chunks", PointFilter::world(a.world)).await.unwrap(), 2_500);
        assert_eq!(repo.count("chunks", PointFilter::world(b.world)).await.unwrap(), 10);
        repo.delete_by_filter("chunks", PointFilter::world(b.world))
            .await
            .unwrap();
        repo.delete_points("chunks", &[a.id(0), a.id(1)]).await.unwrap();
        repo.close().await.unwrap();
    }
    let repo = EdgeRepo::open(dir.path()).unwrap();
    assert_eq!(repo.count("chunks", PointFilter::world(a.world)).await.unwrap(), 2_498);
    assert_eq!(repo.count("chunks", PointFilter::world(b.world)).await.unwrap(), 0);
    let records = repo.retrieve("chunks", &[a.id(0), a.id(2_499)]).await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].payload.as_ref(), Some(&a.payload(2_499)));
    repo.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_second_open_of_a_directory_fails_until_the_first_is_closed_and_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let first = EdgeRepo::open(dir.path()).unwrap();
    first.ensure_collection(&spec("chunks", false)).await.unwrap();

    let err = EdgeRepo::open(dir.path()).expect_err("a second owner of the directory must be refused");
    let message = err.to_string();
    assert!(
        message.contains(&dir.path().display().to_string()),
        "the error names the folder: {message}"
    );
    assert!(message.contains("already in use"), "{message}");
    assert!(
        message.contains(&std::process::id().to_string()),
        "the error names the holder's pid: {message}"
    );

    // Still refused after close (the first repo is alive and could still write)...
    first.close().await.unwrap();
    assert!(EdgeRepo::open(dir.path()).is_err());
    // ...and free once it is gone.
    drop(first);
    let second = EdgeRepo::open(dir.path()).expect("open after the first owner was closed and dropped");
    second.ensure_collection(&spec("chunks", false)).await.unwrap();
    second.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_drop_without_close_releases_the_directory_and_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let a = Slot::new();
    {
        let repo = EdgeRepo::open(dir.path()).unwrap();
        repo.ensure_collection(&spec("chunks", false)).await.unwrap();
        repo.upsert(
            "chunks",
            (0..20).map(|i| a.point(i, [1.0, i as f32, 0.0, 0.0])).collect(),
        )
        .await
        .unwrap();
        // Dropped without close(): must not panic, must not keep the lock.
    }
    let repo = open_eventually(dir.path()).await;
    assert_eq!(repo.count("chunks", PointFilter::world(a.world)).await.unwrap(), 20);
    repo.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_open_creates_the_directory_and_refuses_unsafe_collection_names() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("a").join("vectors");
    let repo = EdgeRepo::open(&nested).unwrap();
    assert!(nested.is_dir());
    repo.health().await.unwrap();
    assert_eq!(repo.kind(), "embedded");
    for name in ["../escape", ".hidden", "", "a/b"] {
        let err = repo.ensure_collection(&spec(name, false)).await.unwrap_err();
        assert!(matches!(err, Error::Rejected(_)), "{name:?}: {err:?}");
    }
    assert!(!dir.path().join("a").join("escape").exists());
    repo.close().await.unwrap();
}

/// Env var naming the directory the child process should try to open.
const LOCK_PROBE_DIR: &str = "QUARRY_TEST_EDGE_LOCK_PROBE_DIR";
const LOCK_PROBE_REFUSED: &str = "LOCK-PROBE: refused";

/// Helper run by `edge_lock_excludes_other_processes` in a child process; a no-op otherwise.
#[tokio::test]
async fn edge_lock_probe_child() {
    let Ok(dir) = std::env::var(LOCK_PROBE_DIR) else {
        return;
    };
    match EdgeRepo::open(Path::new(&dir)) {
        Err(e) => println!("{LOCK_PROBE_REFUSED}: {e}"),
        Ok(_) => panic!("the child process could open a directory another process holds"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_lock_excludes_other_processes() {
    let dir = tempfile::tempdir().unwrap();
    let repo = EdgeRepo::open(dir.path()).unwrap();
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "vector_conformance::edge_lock_probe_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(LOCK_PROBE_DIR, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains(LOCK_PROBE_REFUSED), "the child never tried: {stdout}");
    assert!(
        stdout.contains(&dir.path().display().to_string()),
        "the child's error names the folder: {stdout}"
    );
    repo.close().await.unwrap();
}

/// Needs no server: nothing listens on port 1. A transport failure must surface as
/// `Unavailable` (a 503 upstream) — never as an empty answer that looks like "no such data".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_that_cannot_be_reached_is_unavailable_not_empty() {
    let repo = ServerRepo::connect("http://127.0.0.1:1", None, "quarry_test_".into()).unwrap();
    assert_eq!(repo.kind(), "qdrant");
    let a = Slot::new();
    let unavailable = |what: &str, err: Error| {
        assert!(matches!(err, Error::Unavailable(_)), "{what}: {err:?}");
    };
    unavailable("health", repo.health().await.unwrap_err());
    unavailable(
        "ensure",
        repo.ensure_collection(&spec("chunks", false)).await.unwrap_err(),
    );
    unavailable(
        "count",
        repo.count("chunks", PointFilter::world(a.world)).await.unwrap_err(),
    );
    let search = dense_search([1.0, 0.0, 0.0, 0.0], PointFilter::world(a.world), 5, None);
    unavailable("search", repo.search("chunks", search).await.unwrap_err());
    let points = vec![a.point(0, [1.0, 0.0, 0.0, 0.0])];
    unavailable("upsert", repo.upsert("chunks", points).await.unwrap_err());
    let deleted = repo.delete_by_filter("chunks", PointFilter::world(a.world)).await;
    unavailable("delete", deleted.unwrap_err());
    let scrolled = repo.scroll("chunks", PointFilter::world(a.world), None, 5).await;
    unavailable("scroll", scrolled.unwrap_err());
    repo.close().await.unwrap();

    let err = ServerRepo::connect("not a url", None, String::new()).unwrap_err();
    assert!(matches!(err, Error::Rejected(_)), "{err:?}");
}
