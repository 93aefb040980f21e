//! `[vectors.collection]` and `[vectors.search]`: a collection is created with the configured
//! layout (read back from the backend), an existing one that differs is reported and changed
//! in place only when asked, quantized searches still find the exact nearest neighbour, and a
//! server client moves past a node that does not answer.

use quarry::vector::settings::{CollectionSettings, Layout, Quantization, SearchSettings};
use quarry::vector::{CollectionSpec, DenseSearch, Point, PointFilter, PointPayload, VectorRepo};
use uuid::Uuid;

use super::{EdgeEnv, ServerEnv, Slot};

/// Wide vectors: the embedded engine builds its index (and quantizes) only past 10 MB of
/// vectors per segment, which 1,400 points of 2,048 dimensions pass.
const DIM: usize = 2048;
/// Points in the collections that are optimized.
const MANY: u32 = 1400;

fn spec() -> CollectionSpec {
    CollectionSpec {
        name: "layout".into(),
        dimensions: DIM as u32,
        sparse: true,
    }
}

/// Settings both backends have.
fn tuned() -> CollectionSettings {
    CollectionSettings {
        on_disk: Some(true),
        on_disk_payload: Some(true),
        quantization: Quantization::Int8,
        always_ram: Some(true),
        hnsw_m: Some(20),
        hnsw_payload_m: Some(12),
        hnsw_ef_construct: Some(64),
        ..CollectionSettings::default()
    }
}

fn search_settings() -> SearchSettings {
    SearchSettings {
        hnsw_ef: Some(64),
        rescore: Some(true),
        oversampling: Some(2.0),
        ..SearchSettings::default()
    }
}

/// A deterministic pseudo-random unit-ish vector per `seed` (xorshift), spread enough that the
/// exact neighbour of a point is the point itself by a wide margin.
fn vector(seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..DIM)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn points(slot: Slot, count: u32) -> Vec<Point> {
    (0..count)
        .map(|i| Point {
            id: slot.id(i),
            dense: vector(u64::from(i)),
            sparse: None,
            payload: PointPayload { ..slot.payload(i) },
        })
        .collect()
}

/// For a sample of points, a search with the point's own vector (slightly disturbed) must put
/// that point first.
async fn assert_exact_top_hits(repo: &dyn VectorRepo, slot: Slot, count: u32, hnsw_ef: Option<u32>) {
    for i in (0..count).step_by(17) {
        let mut query = vector(u64::from(i));
        query[0] += 0.01;
        let hits = repo
            .search(
                "layout",
                DenseSearch {
                    vector: query,
                    filter: PointFilter::world(slot.world),
                    sources: None,
                    limit: 5,
                    score_threshold: None,
                    hnsw_ef,
                },
            )
            .await
            .unwrap();
        let top: Option<Uuid> = hits.first().map(|h| h.id);
        assert_eq!(top, Some(slot.id(i)), "point {i}: {hits:?}");
    }
}

/// Files of quantized vectors under the embedded store's folder.
fn quantized_files(dir: &std::path::Path) -> usize {
    fn walk(dir: &std::path::Path, found: &mut usize) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.to_string_lossy().contains("quantiz") {
                *found += 1;
            }
        }
    }
    let mut found = 0;
    walk(dir, &mut found);
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_creates_collections_with_the_configured_layout_and_quantized_search_finds_the_exact_top_hit() {
    let env = EdgeEnv::with_layout(Layout {
        collection: tuned(),
        search: search_settings(),
    });
    env.repo.ensure_collection(&spec()).await.unwrap();
    assert_eq!(
        env.repo.drift("layout").await.unwrap(),
        vec![],
        "a new collection matches"
    );
    let slot = Slot::new();
    env.repo.upsert("layout", points(slot, MANY)).await.unwrap();
    // Builds the optimized (quantized, indexed) segments now rather than when maintenance gets
    // to it: the searches below run on them.
    env.repo.optimize_now("layout").await.unwrap();
    assert!(quantized_files(env.dir.path()) > 0, "int8 vectors were written");
    assert_exact_top_hits(&env.repo, slot, MANY, None).await;
    assert_exact_top_hits(&env.repo, slot, MANY, Some(16)).await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_reports_a_differing_collection_and_changes_it_only_when_asked() {
    let env = EdgeEnv::new();
    env.repo.ensure_collection(&spec()).await.unwrap();
    let slot = Slot::new();
    env.repo.upsert("layout", points(slot, MANY)).await.unwrap();
    let env = env
        .reopen(Layout {
            collection: tuned(),
            search: search_settings(),
        })
        .await;
    // Opening (and using) the collection changes nothing.
    assert_exact_top_hits(&env.repo, slot, MANY, None).await;
    let found = env.repo.drift("layout").await.unwrap();
    let mut names: Vec<&str> = found.iter().map(|d| d.setting.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "vectors.collection.hnsw_ef_construct",
            "vectors.collection.hnsw_m",
            "vectors.collection.hnsw_payload_m",
            "vectors.collection.on_disk",
            "vectors.collection.quantization",
        ],
        "{found:?}"
    );
    assert!(found.iter().all(|d| d.in_place), "{found:?}");
    let quantization = found.iter().find(|d| d.setting.ends_with("quantization")).unwrap();
    assert_eq!(
        (quantization.configured.as_str(), quantization.actual.as_str()),
        ("int8", "none")
    );
    // Still different after a restart: nothing is applied silently.
    let env = env
        .reopen(Layout {
            collection: tuned(),
            search: search_settings(),
        })
        .await;
    assert_eq!(env.repo.drift("layout").await.unwrap().len(), 5);
    assert_eq!(quantized_files(env.dir.path()), 0);
    assert!(env.repo.apply_settings("layout").await.unwrap().is_empty());
    assert!(env.repo.drift("layout").await.unwrap().is_empty());
    assert!(
        quantized_files(env.dir.path()) > 0,
        "the existing points were quantized"
    );
    assert_exact_top_hits(&env.repo, slot, MANY, None).await;
    // And it stays applied across a restart.
    let env = env
        .reopen(Layout {
            collection: tuned(),
            search: search_settings(),
        })
        .await;
    assert!(env.repo.drift("layout").await.unwrap().is_empty());
    assert_eq!(
        env.repo.count("layout", PointFilter::world(slot.world)).await.unwrap(),
        u64::from(MANY)
    );
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_drift_of_a_missing_collection_is_empty() {
    let env = EdgeEnv::with_layout(Layout {
        collection: tuned(),
        search: search_settings(),
    });
    assert!(env.repo.drift("nothing_here").await.unwrap().is_empty());
    assert!(env.repo.apply_settings("nothing_here").await.unwrap().is_empty());
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_creates_collections_with_the_configured_layout() {
    let layout = CollectionSettings {
        shard_number: Some(2),
        replication_factor: Some(1),
        write_consistency_factor: Some(1),
        ..tuned()
    };
    let Some(env) = ServerEnv::from_env_with(
        "server_creates_collections_with_the_configured_layout",
        Layout {
            collection: layout,
            search: search_settings(),
        },
    ) else {
        return;
    };
    env.repo.ensure_collection(&spec()).await.unwrap();
    assert_eq!(env.repo.drift("layout").await.unwrap(), vec![]);
    // Read back with a plain client too.
    let client = qdrant_client::Qdrant::from_url(&env.url)
        .api_key(env.api_key.clone())
        .skip_compatibility_check()
        .build()
        .unwrap();
    let info = client
        .collection_info(format!("{}layout", env.prefix))
        .await
        .unwrap()
        .result
        .unwrap();
    let config = info.config.unwrap();
    let params = config.params.unwrap();
    assert_eq!(params.shard_number, 2);
    assert_eq!(params.replication_factor, Some(1));
    assert_eq!(
        params.payload.and_then(|p| p.memory),
        Some(qdrant_client::qdrant::Memory::Cold as i32)
    );
    let hnsw = config.hnsw_config.unwrap();
    assert_eq!(
        (hnsw.m, hnsw.payload_m, hnsw.ef_construct),
        (Some(20), Some(12), Some(64))
    );
    let quantization = format!("{:?}", config.quantization_config);
    assert!(quantization.contains("Scalar"), "{quantization}");
    let slot = Slot::new();
    env.repo.upsert("layout", points(slot, 400)).await.unwrap();
    assert_exact_top_hits(&env.repo, slot, 400, None).await;
    assert_exact_top_hits(&env.repo, slot, 400, Some(16)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_reports_a_differing_collection_and_changes_only_what_can_change() {
    let Some(env) = ServerEnv::from_env("server_reports_a_differing_collection_and_changes_only_what_can_change")
    else {
        return;
    };
    env.repo.ensure_collection(&spec()).await.unwrap();
    let slot = Slot::new();
    env.repo.upsert("layout", points(slot, 300)).await.unwrap();
    let tuned_repo = env.repo_with(Layout {
        collection: CollectionSettings {
            replication_factor: Some(2),
            ..tuned()
        },
        search: search_settings(),
    });
    // Ensuring the existing collection does not change its layout.
    tuned_repo.ensure_collection(&spec()).await.unwrap();
    let found = tuned_repo.drift("layout").await.unwrap();
    let fixed: Vec<&str> = found
        .iter()
        .filter(|d| !d.in_place)
        .map(|d| d.setting.as_str())
        .collect();
    assert_eq!(fixed, ["vectors.collection.replication_factor"], "{found:?}");
    assert!(
        found
            .iter()
            .any(|d| d.setting == "vectors.collection.quantization" && d.in_place)
    );
    assert!(
        found
            .iter()
            .any(|d| d.setting == "vectors.collection.hnsw_m" && d.in_place)
    );
    let remaining = tuned_repo.apply_settings("layout").await.unwrap();
    let remaining: Vec<&str> = remaining.iter().map(|d| d.setting.as_str()).collect();
    assert_eq!(remaining, ["vectors.collection.replication_factor"]);
    assert_exact_top_hits(&tuned_repo, slot, 300, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_moves_past_a_dead_node_listed_first() {
    // Nothing listens on port 1 of the loopback: connections are refused at once.
    let Some(env) = ServerEnv::from_env_nodes(
        "server_moves_past_a_dead_node_listed_first",
        Layout::default(),
        &["http://127.0.0.1:1"],
    ) else {
        return;
    };
    let repo = &env.repo;
    repo.health().await.unwrap();
    repo.ensure_collection(&spec()).await.unwrap();
    let slot = Slot::new();
    repo.upsert("layout", points(slot, 60)).await.unwrap();
    assert_exact_top_hits(repo, slot, 60, None).await;
    assert_eq!(repo.count("layout", PointFilter::world(slot.world)).await.unwrap(), 60);
    let nodes = repo.nodes().await;
    assert_eq!(nodes.len(), 2);
    assert!(!nodes[0].ok && !nodes[0].preferred, "{nodes:?}");
    assert!(nodes[1].ok && nodes[1].preferred, "{nodes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_nodes_are_all_down_answers_unavailable_and_reports_each_node() {
    let urls = ["http://127.0.0.1:1".to_owned(), "http://127.0.0.1:2".to_owned()];
    let repo = quarry::vector::server::ServerRepo::connect_nodes(&urls, None, "t_".into(), Layout::default()).unwrap();
    assert!(matches!(
        repo.health().await,
        Err(quarry::vector::Error::Unavailable(_))
    ));
    let err = repo
        .count("layout", PointFilter::world(Slot::new().world))
        .await
        .unwrap_err();
    assert!(matches!(err, quarry::vector::Error::Unavailable(_)), "{err:?}");
    let nodes = repo.nodes().await;
    assert_eq!(
        nodes.iter().map(|n| (n.index, n.ok)).collect::<Vec<_>>(),
        [(0, false), (1, false)]
    );
}
