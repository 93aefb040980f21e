//! Searching both backends: dense search within a world, hybrid search, points by id, unit
//! vectors for reuse, and scrolling.

use std::collections::HashSet;

use quarry::domain::{RunId, SourceId, WorldId};
use quarry::vector::{Fusion, HybridSearch, Point, PointFilter, SparseSearch, SparseVector, VectorRepo};
use uuid::Uuid;

use super::{Slot, assert_close, dense_search, spec};

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
                hnsw_ef: None,
                dense: q.to_vec(),
                sparse: SparseVector {
                    indices: vec![RARE],
                    values: vec![1.0],
                },
                filter: PointFilter::world(a.world).run(a.run),
                sources: None,
                limit: 3,
                prefetch_limit: 20,
                dense_score_threshold: None,
                fusion: quarry::vector::Fusion::default(),
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

async fn hybrid_search_fuses_with_the_weights_and_method_given(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("weighted", true)).await.unwrap();
    let a = Slot::new();
    const RARE: u32 = 4_000_000_003;
    let q = [1.0, 0.0, 0.0, 0.0];
    let mut points: Vec<Point> = (0..8)
        .map(|i| a.sparse_point(i, [1.0, 0.05 * i as f32, 0.0, 0.0], &[(11, 1.0)]))
        .collect();
    // Last in the dense order, first (and alone) in the sparse one.
    let target = a.sparse_point(8, [0.0, 0.0, 0.0, 1.0], &[(RARE, 1.2)]);
    points.push(target.clone());
    repo.upsert("weighted", points).await.unwrap();
    let search = |fusion: Fusion| HybridSearch {
        hnsw_ef: None,
        dense: q.to_vec(),
        sparse: SparseVector {
            indices: vec![RARE],
            values: vec![1.0],
        },
        filter: PointFilter::world(a.world).run(a.run),
        sources: None,
        limit: 3,
        prefetch_limit: 20,
        dense_score_threshold: None,
        fusion,
    };
    let rrf = |dense_weight, sparse_weight| Fusion::Rrf {
        dense_weight,
        sparse_weight,
    };
    let first = |hits: &[quarry::vector::ScoredPoint]| hits[0].id;

    let equal = repo.hybrid_search("weighted", search(rrf(1.0, 1.0))).await.unwrap();
    assert_eq!(
        first(&equal),
        target.id,
        "equal weights: the sparse winner leads: {equal:?}"
    );
    // A weight divides its list's positions (Qdrant's weighted RRF, k = 60): the dense
    // winner at weight 3 scores 1 / (1/3 + 59), up from 1 / 60.
    let dense_heavy = repo.hybrid_search("weighted", search(rrf(3.0, 1.0))).await.unwrap();
    let score_of = |hits: &[quarry::vector::ScoredPoint], id: Uuid| hits.iter().find(|h| h.id == id).unwrap().score;
    assert_close(score_of(&equal, a.id(0)), 1.0 / 60.0, "weight 1");
    assert_close(score_of(&dense_heavy, a.id(0)), 1.0 / (1.0 / 3.0 + 59.0), "weight 3");
    let dense_only = repo.hybrid_search("weighted", search(rrf(1.0, 0.0))).await.unwrap();
    let order: Vec<Uuid> = dense_only.iter().map(|h| h.id).collect();
    assert_eq!(order, [a.id(0), a.id(1), a.id(2)], "the dense order alone");
    let sparse_only = repo.hybrid_search("weighted", search(rrf(0.0, 1.0))).await.unwrap();
    assert_eq!(first(&sparse_only), target.id, "{sparse_only:?}");

    let dbsf = repo.hybrid_search("weighted", search(Fusion::Dbsf)).await.unwrap();
    assert_eq!(dbsf.len(), 3, "{dbsf:?}");
    assert!(dbsf.windows(2).all(|w| w[0].score >= w[1].score), "{dbsf:?}");
    assert!(
        dbsf.iter()
            .all(|h| h.payload.as_ref().is_some_and(|p| p.world_id == a.world))
    );
}

async fn sparse_search_ranks_the_bm25_side_alone_within_its_world(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("sparse", true)).await.unwrap();
    let a = Slot::new();
    let b = Slot::new();
    const TERM: u32 = 4_000_000_011;
    let points = vec![
        a.sparse_point(0, [1.0, 0.0, 0.0, 0.0], &[(TERM, 2.0)]),
        a.sparse_point(1, [1.0, 0.0, 0.0, 0.0], &[(TERM, 1.0), (12, 1.0)]),
        a.sparse_point(2, [1.0, 0.0, 0.0, 0.0], &[(12, 1.0)]),
        b.sparse_point(0, [1.0, 0.0, 0.0, 0.0], &[(TERM, 5.0)]),
    ];
    repo.upsert("sparse", points).await.unwrap();
    let search = |sources: Option<Vec<SourceId>>| SparseSearch {
        sparse: SparseVector {
            indices: vec![TERM],
            values: vec![1.0],
        },
        filter: PointFilter::world(a.world).run(a.run),
        sources,
        limit: 10,
    };
    let hits = repo.sparse_search("sparse", search(None)).await.unwrap();
    let ids: Vec<Uuid> = hits.iter().map(|h| h.id).collect();
    assert_eq!(
        ids,
        [a.id(0), a.id(1)],
        "only carriers of the term, best first, world a only"
    );
    assert!(hits[0].score > hits[1].score && hits[1].score > 0.0, "{hits:?}");
    let none = repo
        .sparse_search("sparse", search(Some(vec![SourceId::new()])))
        .await
        .unwrap();
    assert!(none.is_empty());
    assert!(repo.sparse_search("nowhere", search(None)).await.is_err());
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
                hnsw_ef: None,
                dense: q.to_vec(),
                sparse: SparseVector {
                    indices: vec![X, Y],
                    values: vec![1.0, 1.0],
                },
                filter: PointFilter::world(a.world),
                sources: None,
                limit: 2,
                prefetch_limit: 10,
                dense_score_threshold: None,
                fusion: quarry::vector::Fusion::default(),
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

async fn searches_keep_to_the_sources_they_are_given(repo: &dyn VectorRepo) {
    repo.ensure_collection(&spec("chunks", true)).await.unwrap();
    let a = Slot::new();
    let b = a.with_source(SourceId::new());
    let c = a.with_source(SourceId::new());
    let q = [1.0, 0.0, 0.0, 0.0];
    let points = vec![
        a.sparse_point(0, [1.0, 0.0, 0.0, 0.0], &[(7, 1.0)]),
        b.sparse_point(0, [1.0, 0.1, 0.0, 0.0], &[(7, 1.0)]),
        c.sparse_point(0, [1.0, 0.2, 0.0, 0.0], &[(7, 1.0)]),
    ];
    repo.upsert("chunks", points).await.unwrap();
    let filter = PointFilter::world(a.world).run(a.run);
    let ids = |hits: Vec<quarry::vector::ScoredPoint>| -> HashSet<Uuid> { hits.iter().map(|h| h.id).collect() };

    let mut dense = dense_search(q, filter, 10, None);
    assert_eq!(ids(repo.search("chunks", dense.clone()).await.unwrap()).len(), 3);
    dense.sources = Some(vec![b.source, c.source]);
    let found = ids(repo.search("chunks", dense.clone()).await.unwrap());
    assert_eq!(found, HashSet::from([b.id(0), c.id(0)]), "any of the sources given");
    dense.sources = Some(vec![SourceId::new()]);
    assert!(
        repo.search("chunks", dense).await.unwrap().is_empty(),
        "none of the world's"
    );

    let hybrid = HybridSearch {
        hnsw_ef: None,
        dense: q.to_vec(),
        sparse: SparseVector {
            indices: vec![7],
            values: vec![1.0],
        },
        filter,
        sources: Some(vec![a.source]),
        limit: 10,
        prefetch_limit: 20,
        dense_score_threshold: None,
        fusion: quarry::vector::Fusion::default(),
    };
    let found = ids(repo.hybrid_search("chunks", hybrid).await.unwrap());
    assert_eq!(found, HashSet::from([a.id(0)]), "both prefetches keep to the sources");
}

conformance_tests!(
    search_stays_in_its_world_ranks_best_first_and_applies_the_threshold,
    hybrid_search_finds_a_rare_term_the_dense_vector_ranks_low,
    hybrid_search_fuses_with_the_weights_and_method_given,
    sparse_search_ranks_the_bm25_side_alone_within_its_world,
    hybrid_search_weighs_terms_by_their_rarity_in_the_world,
    retrieve_skips_missing_ids_and_keeps_the_requested_order,
    dense_vectors_come_back_unit_length_for_reuse,
    scroll_pages_through_a_world_in_id_order_without_duplicates,
    searches_keep_to_the_sources_they_are_given,
);
