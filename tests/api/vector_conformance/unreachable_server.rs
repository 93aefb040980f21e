//! The Qdrant server backend with nothing listening: every call is unavailable, never empty.

use quarry::vector::server::ServerRepo;
use quarry::vector::{Error, PointFilter, VectorRepo};

use super::{Slot, dense_search, spec};

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
