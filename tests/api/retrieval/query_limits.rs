//! Queries over the model's or the server's size limits, and which queries are counted.

use reqwest::StatusCode;
use serde_json::json;

use crate::fake_providers::Failure;
use crate::helpers::assert_error;

use super::{ISLES, sentence, setup, texts};

#[tokio::test]
async fn a_query_over_the_model_limit_is_refused_without_an_embedding_call() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let before = s.stats().await;
    // The fake counts words; gemini-embedding-001 takes 2048 tokens.
    let query = "isles ".repeat(2100);
    let (status, answer) = s.retrieve(json!({"query": query})).await;
    let error = assert_error(status, &answer, StatusCode::UNPROCESSABLE_ENTITY, "input_too_large");
    assert_eq!(error["details"]["field"], "query", "{answer}");
    assert_eq!(s.fake.stats().embed_requests(), 0, "the provider never saw it");
    assert_eq!(s.stats().await, before);
}

#[tokio::test]
async fn a_huge_query_is_refused_before_it_is_counted_or_sent_and_a_huge_body_before_it_is_read() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let query = "isles ".repeat(11_000); // 66,000 bytes: over the 64 KiB a query may have
    let (status, answer) = s.retrieve(json!({"query": query})).await;
    let error = assert_error(status, &answer, StatusCode::UNPROCESSABLE_ENTITY, "input_too_large");
    assert!(error["message"].as_str().unwrap().contains("65536"), "{answer}");
    let stats = s.fake.stats();
    assert_eq!(
        (stats.embed_requests(), stats.counted.len()),
        (0, 0),
        "neither counted by the provider nor sent"
    );
    // A body bigger than any query needs is refused before it is parsed.
    let (status, answer) = s
        .retrieve(json!({"query": "isles", "mode": "x".repeat(300 * 1024)}))
        .await;
    let error = assert_error(status, &answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    assert_eq!(error["details"]["limit_bytes"], 256 * 1024, "{answer}");
    // Just under the query limit is still taken (and counted exactly: it might be too long).
    let answer = s.ok(json!({"query": "isles ".repeat(300), "top_k": 1})).await;
    assert_eq!(answer["results"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_query_that_cannot_be_counted_is_refused() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    // Long enough in bytes (2,400) that it might be over gemini-embedding-001's 2,048 tokens,
    // so it must be counted; the fake counts 480 words.
    let query = "who rules the isles ".repeat(120);
    s.fake.fail_next_count(Failure::MalformedBody);
    let (status, answer) = s.retrieve(json!({"query": query})).await;
    assert_error(status, &answer, StatusCode::UNPROCESSABLE_ENTITY, "token_count_failed");
    assert_eq!(s.fake.stats().embed_requests(), 0);
    // A transient fault while counting is retried at once.
    s.fake.fail_next_count(Failure::Status(503));
    let answer = s.ok(json!({"query": query})).await;
    assert_eq!(texts(&answer)[0], sentence(0));
}

#[tokio::test]
async fn a_query_too_short_to_be_over_the_limit_is_not_counted() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let counted = s.fake.stats().endpoint("countTokens");
    // A failure queued for the next count is never met: no count is made.
    s.fake.fail_next_count(Failure::MalformedBody);
    let answer = s.ok(json!({"query": "who rules the isles"})).await;
    assert_eq!(texts(&answer)[0], sentence(0));
    let near_limit = "isles ".repeat(340); // 2,040 bytes: 2,040 + 8 special tokens ≤ 2,048
    s.ok(json!({"query": near_limit})).await;
    assert_eq!(
        s.fake.stats().endpoint("countTokens"),
        counted,
        "no countTokens round trip"
    );
    // One byte more and the query is counted (and meets the queued failure).
    let (status, answer) = s.retrieve(json!({"query": format!("{near_limit}x")})).await;
    assert_error(status, &answer, StatusCode::UNPROCESSABLE_ENTITY, "token_count_failed");
    assert_eq!(s.fake.stats().endpoint("countTokens"), counted + 1);
}
