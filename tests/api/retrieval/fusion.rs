//! Fusion in hybrid mode: chosen by the query (`auto`), weighted RRF and DBSF when asked, what
//! ran reported in `mode_used` / `fusion_used`, and bad fusion settings refused before the
//! world is read.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{ISLES, scores, setup, setup_with, texts};
use crate::helpers::assert_error;

const ARCHIVE: &str = "The archive keeps the ZX81 beside the lamp.";

async fn hybrid_world() -> super::Setup {
    let s = setup_with(true).await;
    s.ingest(&[
        ("isles.txt", ISLES),
        ("archive.txt", ARCHIVE),
        ("years.txt", "1066 1492 1789 1914."),
    ])
    .await;
    s
}

#[tokio::test]
async fn a_plain_words_question_in_hybrid_mode_is_ranked_by_the_dense_search_alone() {
    let s = hybrid_world().await;
    let query = "who rules the northern isles from a tower";
    let dense = s.ok(json!({"query": query, "top_k": 5})).await;
    let hybrid = s.ok(json!({"query": query, "top_k": 5, "mode": "hybrid"})).await;
    assert_eq!(texts(&hybrid), texts(&dense), "{hybrid}");
    assert_eq!(scores(&hybrid), scores(&dense), "cosine scores, not fused ranks");
    assert_eq!(hybrid["mode_used"], "dense");
    assert_eq!(hybrid["fusion_used"], Value::Null);
    assert_eq!(dense["mode_used"], "dense");
    // Cosine scores can be judged.
    assert_ne!(hybrid["quality"]["level"], "unrated", "{hybrid}");

    // Asked for by name, the fusion runs whatever the query.
    let fused = s
        .ok(json!({"query": query, "top_k": 5, "mode": "hybrid", "fusion": {"method": "rrf"}}))
        .await;
    assert_eq!(fused["mode_used"], "hybrid");
    assert_eq!(
        fused["fusion_used"],
        json!({"method": "rrf", "dense_weight": 1.0, "sparse_weight": 1.0})
    );
    assert_eq!(fused["quality"]["level"], "unrated");
}

#[tokio::test]
async fn a_query_with_an_identifier_is_fused_with_bm25_by_default() {
    let s = hybrid_world().await;
    let dense = s.ok(json!({"query": "ZX81", "top_k": 1})).await;
    assert_ne!(
        texts(&dense),
        [ARCHIVE],
        "the fake dense model has no word for codes: {dense}"
    );
    let auto = s.ok(json!({"query": "ZX81", "top_k": 1, "mode": "hybrid"})).await;
    assert_eq!(texts(&auto), [ARCHIVE], "{auto}");
    assert_eq!(auto["mode_used"], "hybrid");
    assert_eq!(auto["fusion_used"]["method"], "dbsf");
    // `auto` written out is the same.
    let named = s
        .ok(json!({"query": "ZX81", "top_k": 1, "mode": "hybrid", "fusion": {"method": "auto"}}))
        .await;
    assert_eq!(texts(&named), [ARCHIVE]);
}

#[tokio::test]
async fn rrf_weights_decide_which_ranking_counts() {
    let s = hybrid_world().await;
    // Dense knows only `isles`; BM25 ranks the shorter chunk holding `ZX81` first.
    let query = "isles ZX81";
    let dense = s.ok(json!({"query": query, "top_k": 1})).await;
    assert_ne!(texts(&dense), [ARCHIVE], "{dense}");
    // Only the dense ranking counts: its order, fused scores.
    let dense_only = s
        .ok(json!({"query": query, "top_k": 1, "mode": "hybrid",
                   "fusion": {"dense_weight": 1, "sparse_weight": 0}}))
        .await;
    assert_eq!(texts(&dense_only), texts(&dense), "{dense_only}");
    assert_eq!(
        dense_only["fusion_used"],
        json!({"method": "rrf", "dense_weight": 1.0, "sparse_weight": 0.0})
    );
    // Only BM25 counts: the one chunk holding the term comes first.
    let sparse_only = s
        .ok(json!({"query": query, "top_k": 3, "mode": "hybrid",
                   "fusion": {"method": "rrf", "dense_weight": 0, "sparse_weight": 2.5}}))
        .await;
    assert_eq!(texts(&sparse_only)[0], ARCHIVE, "{sparse_only}");
    assert_eq!(sparse_only["fusion_used"]["sparse_weight"], 2.5);
}

#[tokio::test]
async fn dbsf_fuses_normalised_scores() {
    let s = hybrid_world().await;
    let answer = s
        .ok(json!({"query": "ZX81", "top_k": 3, "mode": "hybrid", "fusion": {"method": "dbsf"}}))
        .await;
    assert_eq!(answer["mode_used"], "hybrid");
    assert_eq!(
        answer["fusion_used"],
        json!({"method": "dbsf", "dense_weight": null, "sparse_weight": null})
    );
    assert_eq!(texts(&answer)[0], ARCHIVE, "{answer}");
    let scores = scores(&answer);
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
}

#[tokio::test]
async fn bad_fusion_settings_are_refused_with_the_field_named_before_the_world_is_read() {
    let s = setup().await;
    let missing = format!("/v1/worlds/{}/retrieve", uuid::Uuid::new_v4());
    let hybrid = |fusion: Value| json!({"query": "isles", "mode": "hybrid", "fusion": fusion});
    for (body, field) in [
        (hybrid(json!("rrf")), "fusion"),
        (hybrid(json!({"method": "max"})), "fusion.method"),
        (hybrid(json!({"method": 1})), "fusion.method"),
        (hybrid(json!({"dense_weight": -0.5})), "fusion.dense_weight"),
        (hybrid(json!({"sparse_weight": 101})), "fusion.sparse_weight"),
        (hybrid(json!({"sparse_weight": "2"})), "fusion.sparse_weight"),
        (
            hybrid(json!({"dense_weight": 0, "sparse_weight": 0})),
            "fusion.dense_weight",
        ),
        (hybrid(json!({"method": "dbsf", "dense_weight": 2})), "fusion.method"),
        (hybrid(json!({"method": "auto", "sparse_weight": 2})), "fusion.method"),
        (hybrid(json!({"k": 60})), "fusion.k"),
        (json!({"query": "isles", "fusion": {"method": "rrf"}}), "fusion"),
        (
            json!({"query": "isles", "mode": "dense", "fusion": {"method": "rrf"}}),
            "fusion",
        ),
    ] {
        for path in [s.path(), missing.clone()] {
            let (status, error) = s.app.post(&path, body.clone()).await;
            assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
            assert_eq!(error["error"]["details"]["field"], field, "{body}: {error}");
        }
    }
    assert!(s.fake.stats().embed_calls.is_empty());
}

#[tokio::test]
async fn a_dense_world_turns_hybrid_without_a_provider_call() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES), ("archive.txt", ARCHIVE)]).await;
    let (status, _) = s.retrieve(json!({"query": "ZX81", "mode": "hybrid"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a dense world has no BM25 vectors yet");
    let path = format!("/v1/worlds/{}", s.world_id());
    let (status, job) = s.app.patch(&path, json!({"hybrid": true})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    assert_eq!(job["kind"], "reingest");
    s.app.wait_prepared().await;
    s.app.drain().await;
    let (_, job) = s.app.get(&format!("/v1/jobs/{}", job["id"].as_str().unwrap())).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(
        job["counts"]["reused"], job["counts"]["total"],
        "every vector reused: {job}"
    );
    assert!(s.fake.stats().embed_calls.is_empty(), "no provider call");
    let (_, world) = s.app.get(&path).await;
    assert_eq!(world["hybrid"], true);
    // BM25 now finds what the dense side cannot.
    let answer = s.ok(json!({"query": "ZX81", "top_k": 1, "mode": "hybrid"})).await;
    assert_eq!(texts(&answer), [ARCHIVE], "{answer}");
    // Asking again changes nothing.
    let (status, again) = s.app.patch(&path, json!({"hybrid": true})).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["hybrid"], true);
    assert_eq!(again["id"], world["id"]);
}
