//! Retrieval settings, and requests refused or answered without a search: validation before
//! the world is looked up, defaults, blank queries, `top_k: 0`, a world with nothing embedded,
//! hybrid mode on a dense world.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::assert_error;

use super::{ISLES, setup, warning_codes};

#[tokio::test]
async fn settings_are_refused_before_the_world_is_looked_up() {
    let s = setup().await;
    let unknown = format!("/v1/worlds/{}/retrieve", uuid::Uuid::new_v4());
    let cases = [
        (json!({"query": "q", "top_k": -1}), "top_k"),
        (json!({"query": "q", "top_k": true}), "top_k"),
        (json!({"query": "q", "top_k": "8"}), "top_k"),
        (json!({"query": "q", "top_k": 2.5}), "top_k"),
        (json!({"query": "q", "top_k": 1001}), "top_k"),
        (json!({"query": "q", "min_score": 1.5}), "min_score"),
        (json!({"query": "q", "min_score": -0.1}), "min_score"),
        (json!({"query": "q", "min_score": false}), "min_score"),
        (json!({"query": "q", "min_score": "0.3"}), "min_score"),
        (json!({"query": "q", "mode": "sparse"}), "mode"),
        (json!({"query": "q", "neighbors": 4}), "neighbors"),
        (json!({"query": "q", "neighbors": true}), "neighbors"),
        (json!({"query": "q", "max_context_tokens": 0}), "max_context_tokens"),
        (
            json!({"query": "q", "max_context_tokens": 1_048_577}),
            "max_context_tokens",
        ),
        (json!({"query": "q", "max_context_tokens": "800"}), "max_context_tokens"),
        (json!({"query": "q", "max_context_tokens": 1.5}), "max_context_tokens"),
        (json!({"query": "q", "hnsw_ef": 0}), "hnsw_ef"),
        (json!({"query": "q", "hnsw_ef": "64"}), "hnsw_ef"),
        (json!({"query": "q", "hnsw_ef": 15}), "hnsw_ef"),
        (json!({"query": "q", "hnsw_ef": 1025}), "hnsw_ef"),
        (json!({"query": "q", "hnsw_ef": 10_000_000}), "hnsw_ef"),
    ];
    for (body, field) in cases {
        for path in [&unknown, &s.path()] {
            let (status, answer) = s.app.post(path, body.clone()).await;
            let error = assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
            assert_eq!(error["details"]["field"], field, "{body}: {answer}");
        }
    }
    // Structural problems are generic request errors, also before any lookup.
    for (body, field) in [
        (json!({"query": "q", "topk": 3}), "topk"),
        (json!({"top_k": 3}), "query"),
        (json!({"query": 7}), "query"),
    ] {
        let (status, answer) = s.app.post(&unknown, body.clone()).await;
        let error = assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(error["details"]["field"], field, "{body}: {answer}");
    }
    // Only an object: not an array, not even one that lists every field in order.
    for body in [json!(["query"]), json!(["who rules", 8, null, null, null, null])] {
        let (status, answer) = s.app.post(&unknown, body).await;
        assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
    }
    // A repeated field is refused as on every other route, not silently resolved.
    let resp = s
        .app
        .client
        .post(s.app.url(&unknown))
        .bearer_auth(crate::helpers::TOKEN)
        .header("content-type", "application/json")
        .body(r#"{"query": "a", "query": "b"}"#)
        .send()
        .await
        .unwrap();
    let (status, answer) = crate::helpers::read(resp).await;
    let error = assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
    assert!(
        error["message"].as_str().unwrap().contains("duplicate field"),
        "{answer}"
    );
    // Valid settings on an unknown world: 404. An explicit null is "not set" (what generated
    // clients send for an unset optional field), so it passes validation too.
    for body in [
        json!({"query": "q", "top_k": 3}),
        json!({"query": "q", "top_k": null, "min_score": null, "mode": null, "neighbors": null,
               "max_context_tokens": null}),
    ] {
        let (status, answer) = s.app.post(&unknown, body).await;
        assert_error(status, &answer, StatusCode::NOT_FOUND, "world_not_found");
    }
    assert_eq!(s.fake.stats().requests, 0, "nothing reached the provider");
}

#[tokio::test]
async fn null_settings_take_their_defaults() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let (status, answer) = s
        .retrieve(
            json!({"query": "who keeps the lighthouse", "top_k": null, "min_score": null,
                         "mode": null, "neighbors": null, "max_context_tokens": null}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["requested_top_k"], 8, "{answer}");
    assert!(!answer["results"].as_array().unwrap().is_empty(), "{answer}");
}

#[tokio::test]
async fn a_blank_query_is_refused_after_the_world_and_before_any_provider_call() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    for query in ["", "   ", " \n\t "] {
        let (status, answer) = s.retrieve(json!({"query": query})).await;
        let error = assert_error(status, &answer, StatusCode::BAD_REQUEST, "empty_query");
        assert_eq!(error["details"]["field"], "query");
    }
    // An unknown world wins over a blank query: the world is looked up first.
    let (status, answer) = s
        .app
        .post(
            &format!("/v1/worlds/{}/retrieve", uuid::Uuid::new_v4()),
            json!({"query": " "}),
        )
        .await;
    assert_error(status, &answer, StatusCode::NOT_FOUND, "world_not_found");
    assert_eq!(s.fake.stats().requests, 0);
}

#[tokio::test]
async fn top_k_zero_returns_the_empty_shape_without_any_call() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let answer = s
        .ok(json!({"query": "who rules the northern isles?", "top_k": 0}))
        .await;
    assert_eq!(answer["results"], json!([]));
    assert_eq!(answer["context"], json!({"chunks": [], "text": "", "citations": []}));
    assert_eq!(
        answer["quality"],
        json!({"level": "none", "best_score": null, "score_gap": null})
    );
    assert_eq!(answer["requested_top_k"], 0);
    assert_eq!(answer["effective_top_k"], 0);
    assert_eq!(answer["warnings"], json!([]));
    assert_eq!(answer["repairs"], json!([]));
    for phase in ["embed_ms", "search_ms", "verify_ms"] {
        assert_eq!(answer["timing"][phase], 0.0, "{answer}");
    }
    assert!(answer["timing"]["total_ms"].is_number());
    assert_eq!(s.fake.stats().requests, 0, "no provider call for top_k = 0");
}

#[tokio::test]
async fn a_world_without_embedded_chunks_warns_and_spends_no_provider_call() {
    let s = setup().await;
    // Empty world, then a world whose only source is still pending.
    for _ in 0..2 {
        let answer = s.ok(json!({"query": "who rules the northern isles?"})).await;
        assert_eq!(answer["results"], json!([]));
        assert_eq!(answer["context"]["chunks"], json!([]));
        assert_eq!(answer["requested_top_k"], 8);
        assert_eq!(answer["effective_top_k"], 0);
        assert_eq!(warning_codes(&answer), ["no_embedded_chunks"]);
        s.add("isles.txt", ISLES).await;
    }
    assert_eq!(s.fake.stats().requests, 0, "no provider call without embedded chunks");
}

#[tokio::test]
async fn hybrid_mode_on_a_dense_world_is_refused() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let (status, answer) = s.retrieve(json!({"query": "isles", "mode": "hybrid"})).await;
    let error = assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
    assert_eq!(error["details"]["field"], "mode");
    assert_eq!(s.fake.stats().requests, 0);
}

#[tokio::test]
async fn hnsw_ef_moves_within_the_configured_bounds_and_finds_the_same_best_hit() {
    let s = super::setup_on_fake_google("Aerth", |settings| {
        settings.vectors.search.min_hnsw_ef = 8;
        settings.vectors.search.max_hnsw_ef = 64;
        settings.vectors.search.hnsw_ef = Some(32);
    })
    .await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let query = "who rules the northern isles?";
    let plain = s.ok(json!({"query": query, "top_k": 3})).await;
    for ef in [8, 64] {
        let tuned = s.ok(json!({"query": query, "top_k": 3, "hnsw_ef": ef})).await;
        assert_eq!(tuned["results"][0]["text"], plain["results"][0]["text"], "hnsw_ef {ef}");
    }
    // The bounds are the configured ones, and the message says which.
    for ef in [7, 65] {
        let (status, answer) = s.retrieve(json!({"query": query, "hnsw_ef": ef})).await;
        let error = assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
        assert_eq!(error["details"]["field"], "hnsw_ef");
        assert!(
            error["message"].as_str().unwrap().contains("between 8 and 64"),
            "{answer}"
        );
    }
}
