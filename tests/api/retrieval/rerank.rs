//! Reranking: `rerank: {candidates, top_n}` hands the search's candidates to the configured
//! reranker (a fake server scoring by word overlap) through the key scheduler; a failing or
//! slow reranker leaves the search's order with a warning, never an error.

use std::time::Duration;

use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use super::{Setup, setup, setup_on_fake_google, texts, warning_codes};
use crate::fake_rerank::{FakeRerank, overlap};
use crate::helpers::assert_error;

/// Dense (cosine over word counts) prefers the short repetitive text; word overlap prefers the
/// one holding every query word.
const REPETITIVE: &str = "Salt salt salt salt.";
const COMPLETE: &str = "The queen keeps a salt tower by the long northern sea road today.";
const QUERY: &str = "salt tower queen";

async fn reranked_setup(tweak: impl FnOnce(&mut quarry::config::Settings) + Send + 'static) -> (Setup, FakeRerank) {
    let reranker = FakeRerank::start().await;
    let base = reranker.base_url();
    let s = setup_on_fake_google("Aerth", move |settings| {
        settings.providers.rerank.base_url = base;
        settings.providers.rerank.model = "rerank-lite".into();
        settings.providers.rerank.keys = vec![SecretString::from("rerank-key")];
        settings.providers.rerank.request_timeout_s = 1;
        tweak(settings);
    })
    .await;
    s.ingest(&[
        ("repetitive.txt", REPETITIVE),
        ("complete.txt", COMPLETE),
        ("other.txt", "Miners dig copper in the western hills."),
    ])
    .await;
    (s, reranker)
}

#[tokio::test]
async fn the_reranker_orders_the_candidates_and_keeps_top_n() {
    let (s, reranker) = reranked_setup(|_| {}).await;
    reranker.require_key("rerank-key");
    let dense = s.ok(json!({"query": QUERY, "top_k": 2})).await;
    assert_eq!(texts(&dense)[0], REPETITIVE, "{dense}");

    let answer = s
        .ok(json!({"query": QUERY, "top_k": 2, "rerank": {"candidates": 3, "top_n": 1}}))
        .await;
    assert_eq!(texts(&answer), [COMPLETE], "{answer}");
    assert_eq!(answer["effective_top_k"], 1);
    let best = &answer["results"][0];
    assert_eq!(best["rerank_score"].as_f64().unwrap() as f32, overlap(QUERY, COMPLETE));
    assert!(
        best["score"].as_f64().unwrap() > 0.0,
        "the search's score stays: {best}"
    );
    assert_eq!(answer["context"]["chunks"], json!([COMPLETE]));
    assert_eq!(answer["warnings"], json!([]));
    assert!(answer["timing"]["rerank_ms"].as_f64().unwrap() >= 0.0);
    // One call with every candidate, the model and the key from configuration.
    let calls = reranker.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].query, QUERY);
    let candidates = s.ok(json!({"query": QUERY, "top_k": 3})).await;
    assert_eq!(
        calls[0].documents,
        texts(&candidates),
        "the search's candidates, in its order"
    );
    assert_eq!(calls[0].top_n, Some(1));
    assert_eq!(calls[0].model.as_deref(), Some("rerank-lite"));
    assert_eq!(calls[0].authorization.as_deref(), Some("Bearer rerank-key"));
    // top_n defaults to top_k; unreranked answers carry no rerank score.
    let answer = s.ok(json!({"query": QUERY, "top_k": 2, "rerank": {}})).await;
    assert_eq!(texts(&answer)[0], COMPLETE);
    assert_eq!(answer["results"].as_array().unwrap().len(), 2);
    assert_eq!(dense["results"][0]["rerank_score"], Value::Null);
}

#[tokio::test]
async fn a_failing_or_slow_reranker_leaves_the_search_order_with_a_warning() {
    let (s, reranker) = reranked_setup(|_| {}).await;
    let dense = s.ok(json!({"query": QUERY, "top_k": 2})).await;
    reranker.fail_with(Some(StatusCode::SERVICE_UNAVAILABLE));
    let answer = s
        .ok(json!({"query": QUERY, "top_k": 2, "rerank": {"candidates": 3}}))
        .await;
    assert_eq!(texts(&answer), texts(&dense), "{answer}");
    assert_eq!(warning_codes(&answer), ["rerank_unavailable"]);
    assert!(
        answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["rerank_score"].is_null())
    );

    reranker.fail_with(None);
    reranker.set_latency(Duration::from_secs(3));
    let answer = s
        .ok(json!({"query": QUERY, "top_k": 2, "rerank": {"candidates": 3}}))
        .await;
    assert_eq!(texts(&answer), texts(&dense), "{answer}");
    assert_eq!(warning_codes(&answer), ["rerank_unavailable"]);

    // A key the server refuses: the same, and the key is reported to the scheduler.
    reranker.set_latency(Duration::ZERO);
    reranker.require_key("another-key");
    let answer = s
        .ok(json!({"query": QUERY, "top_k": 2, "rerank": {"candidates": 3}}))
        .await;
    assert_eq!(warning_codes(&answer), ["rerank_unavailable"]);
}

#[tokio::test]
async fn bad_rerank_settings_are_refused_before_the_world_is_read() {
    let (s, reranker) = reranked_setup(|_| {}).await;
    let missing = format!("/v1/worlds/{}/retrieve", uuid::Uuid::new_v4());
    for (rerank, field) in [
        (json!({"candidates": 1001}), "rerank.candidates"),
        (json!({"candidates": 0}), "rerank.candidates"),
        (json!({"candidates": "5"}), "rerank.candidates"),
        (json!({"candidates": 5, "top_n": 6}), "rerank.top_n"),
        (json!({"top_n": 0}), "rerank.top_n"),
        (json!({"model": "x"}), "rerank.model"),
        (json!(true), "rerank"),
    ] {
        for path in [s.path(), missing.clone()] {
            let (status, error) = s.app.post(&path, json!({"query": QUERY, "rerank": rerank})).await;
            assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
            assert_eq!(error["error"]["details"]["field"], field, "{rerank}: {error}");
        }
    }
    assert!(reranker.calls().is_empty());
    assert!(s.fake.stats().embed_calls.is_empty());

    // Without a configured reranker, asking for one is refused too.
    let plain = setup().await;
    let (status, error) = plain.retrieve(json!({"query": "q", "rerank": {}})).await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
    assert_eq!(error["error"]["details"]["field"], "rerank");
}
