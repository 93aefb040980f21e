//! `explain: true`: each hit's standing in the dense and BM25 rankings, and the reason every
//! other candidate is not in the answer.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{ISLES, setup, setup_with, texts};
use crate::helpers::assert_error;

const ARCHIVE: &str = "The archive keeps the ZX81 beside the lamp.";

fn reasons(answer: &Value) -> Vec<(String, String)> {
    answer["explain"]["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["chunk_number"].to_string(), r["reason"].as_str().unwrap().to_owned()))
        .collect()
}

fn reason_of(answer: &Value, source_filename_book: u64) -> Vec<String> {
    answer["explain"]["removed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["book_number"] == source_filename_book)
        .map(|r| r["reason"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_fused_hit_shows_both_rankings_and_the_rest_say_why_they_are_out() {
    let s = setup_with(true).await;
    s.ingest(&[("isles.txt", ISLES), ("archive.txt", ARCHIVE)]).await;
    let answer = s
        .ok(json!({"query": "isles ZX81", "top_k": 1, "mode": "hybrid", "fusion": {"method": "rrf"}, "explain": true}))
        .await;
    let hit = &answer["results"][0];
    let explain = &hit["explain"];
    assert_eq!(explain["fused_score"], hit["score"], "{answer}");
    assert!(explain["dense"]["rank"].as_u64().unwrap() >= 1, "{explain}");
    assert!(explain["sparse"]["rank"].as_u64().unwrap() >= 1, "{explain}");
    assert!(explain["sparse"]["score"].as_f64().unwrap() > 0.0);
    assert_eq!(explain["rerank_score"], Value::Null);
    let summary = &answer["explain"];
    assert_eq!(summary["dense_candidates"], 7, "every chunk of the world: {summary}");
    assert_eq!(
        summary["sparse_candidates"], 2,
        "the chunks holding a query term: {summary}"
    );
    // Everything else was ranked below top_k = 1.
    assert_eq!(reasons(&answer).len(), 6, "{summary}");
    assert!(reasons(&answer).iter().all(|(_, r)| r == "ranked_out"), "{summary}");

    // A filter: what it kept out says so.
    let filtered = s
        .ok(
            json!({"query": "isles ZX81", "top_k": 1, "mode": "hybrid", "explain": true,
                   "filter": {"filenames": ["isles.txt"]}}),
        )
        .await;
    assert_eq!(reason_of(&filtered, 2), ["filter"], "{filtered}");
    // Without explain, nothing of it.
    let plain = s.ok(json!({"query": "isles ZX81", "top_k": 1, "mode": "hybrid"})).await;
    assert_eq!(plain["explain"], Value::Null);
    assert_eq!(plain["results"][0]["explain"], Value::Null);
}

#[tokio::test]
async fn a_dense_answer_names_the_threshold_and_the_duplicates() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES), ("copy.txt", ISLES)]).await;
    let answer = s
        .ok(
            json!({"query": "Queen Maren rules the northern isles from a tower of salt", "top_k": 8,
                   "min_score": 0.5, "explain": true}),
        )
        .await;
    assert_eq!(texts(&answer).len(), 1, "{answer}");
    let explain = &answer["results"][0]["explain"];
    // Its copy ties with it; either may rank first in the vector store.
    assert!(
        [1, 2].contains(&explain["dense"]["rank"].as_u64().unwrap()),
        "{explain}"
    );
    assert_eq!(explain["sparse"], Value::Null, "a dense world has no BM25 ranking");
    assert_eq!(explain["fused_score"], Value::Null);
    assert_eq!(answer["explain"]["sparse_candidates"], 0);
    let reasons: Vec<String> = reasons(&answer).into_iter().map(|(_, r)| r).collect();
    assert_eq!(reasons.iter().filter(|r| *r == "duplicate").count(), 1, "{reasons:?}");
    assert_eq!(reasons.iter().filter(|r| *r == "min_score").count(), 10, "{reasons:?}");
    // A bad value is refused with the field named.
    let (status, error) = s.retrieve(json!({"query": "q", "explain": "yes"})).await;
    assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
    assert_eq!(error["error"]["details"]["field"], "explain");
}
