//! The embedded engine only: huge limits, data across a restart, writes flushed on close, and
//! the directory lock, also against another process.

use std::path::Path;
use std::time::{Duration, Instant};

use quarry::vector::edge::EdgeRepo;
use quarry::vector::{Error, HybridSearch, Point, PointFilter, SparseVector, VectorRepo};

use super::{EdgeEnv, Slot, dense_search, spec};

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
        hnsw_ef: None,
        dense: vec![1.0, 0.0, 0.0, 0.0],
        sparse: SparseVector {
            indices: vec![1],
            values: vec![1.0],
        },
        filter,
        sources: None,
        limit: usize::MAX,
        prefetch_limit: usize::MAX,
        dense_score_threshold: None,
        fusion: quarry::vector::Fusion::default(),
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
                hnsw_ef: None,
                dense: vec![1.0, 0.0, 0.0, 0.0],
                sparse: SparseVector {
                    indices: vec![5],
                    values: vec![1.0],
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
            "vector_conformance::embedded::edge_lock_probe_child",
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
