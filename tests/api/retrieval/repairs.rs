//! Repairs while answering: a point whose chunk is gone, or made from old text, is skipped and
//! deleted, and its slot embedded again.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use super::{ISLES, Setup, id, sentence, setup, texts, warning_codes};

#[tokio::test]
async fn a_point_whose_chunk_is_gone_is_skipped_and_deleted() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    assert_eq!(s.point_count().await, 6);
    s.sql("DELETE FROM chunks WHERE chunk_text = ?", &[&sentence(0)]).await;

    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 6})).await;
    assert!(!texts(&answer).contains(&sentence(0)), "{answer}");
    assert_eq!(warning_codes(&answer), ["chunk_missing"]);
    let repairs = answer["repairs"].as_array().unwrap();
    assert_eq!(repairs.len(), 1, "{answer}");
    assert_eq!(repairs[0]["kind"], "orphan_point_deleted");
    assert_eq!(s.point_count().await, 5, "the orphan point is gone");
    // Five chunks are embedded, so five hits were asked for; the one skipped was made up by a
    // deeper search, and the answer is whole.
    assert_eq!(answer["effective_top_k"], 5);
    assert_eq!(answer["results"].as_array().unwrap().len(), 5, "{answer}");

    let again = s.ok(json!({"query": "who rules the northern isles", "top_k": 6})).await;
    assert_eq!(again["results"].as_array().unwrap().len(), 5);
    assert_eq!(again["warnings"], json!([]));
    assert_eq!(again["repairs"], json!([]));
}

/// Ingests ISLES, then rewrites its first chunk's text (and hash) under the API, so that the
/// chunk's point was made from old text; returns the new text.
async fn with_first_chunk_rewritten(s: &Setup) -> &'static str {
    s.ingest(&[("isles.txt", ISLES)]).await;
    let new_text = "Queen Maren rules the northern isles from a palace of glass.";
    s.rewrite_chunk(&sentence(0), new_text).await;
    new_text
}

#[tokio::test]
async fn a_stale_hit_still_gets_its_answer_when_its_slot_cannot_be_requeued() {
    use sqlx::ConnectOptions as _;
    let s = setup().await;
    let new_text = with_first_chunk_rewritten(&s).await;
    // Reads go on (WAL); the requeue, a write, waits out the busy timeout and fails.
    let options: sqlx::sqlite::SqliteConnectOptions = s.app.store_url().parse().unwrap();
    let mut holder = options.connect().await.unwrap();
    sqlx::query("BEGIN IMMEDIATE").execute(&mut holder).await.unwrap();
    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 6})).await;
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    assert_eq!(warning_codes(&answer), ["stale_point"], "{answer}");
    assert_eq!(answer["results"].as_array().unwrap().len(), 5, "{answer}");
    assert_eq!(answer["repairs"][0]["kind"], "stale_point_deleted");

    // The entry still says embedded without its point: a repair puts it right.
    let (status, job) = s
        .app
        .post(&format!("/v1/worlds/{}/repair", s.world_id()), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        s.app.drain().await;
        let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 1})).await;
        if texts(&answer) == [new_text] {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never repaired: {answer}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_point_made_from_old_text_is_deleted_and_its_slot_embedded_again() {
    let s = setup().await;
    let new_text = with_first_chunk_rewritten(&s).await;

    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 6})).await;
    let returned = texts(&answer);
    assert!(
        !returned.iter().any(|t| t.contains("Queen Maren")),
        "stale hits are skipped: {answer}"
    );
    assert_eq!(warning_codes(&answer), ["stale_point"]);
    let repairs = answer["repairs"].as_array().unwrap();
    assert_eq!(repairs.len(), 1);
    assert_eq!(repairs[0]["kind"], "stale_point_deleted");
    assert_eq!(s.point_count().await, 5, "the stale point is deleted");
    let stats = s.stats().await;
    assert_eq!(
        (stats["embedded"].as_u64(), stats["pending"].as_u64()),
        (Some(5), Some(1))
    );
    let (_, jobs) = s.app.get(&format!("/v1/worlds/{}/jobs", s.world_id())).await;
    let repair = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["kind"] == "repair")
        .cloned()
        .unwrap_or_else(|| panic!("a repair job holds the slot: {jobs}"));
    assert_eq!(repair["status"], "running");
    assert_eq!(repair["counts"]["total"], 1);

    // The workers embed the current text; the chunk text itself was never touched.
    s.app.drain().await;
    let sent = s.fake.stats().sent_texts();
    assert!(sent.contains(&new_text.to_owned()), "{sent:?}");
    let (_, job) = s.app.get(&format!("/v1/jobs/{}", id(&repair))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(s.point_count().await, 6);
    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 1})).await;
    assert_eq!(texts(&answer), [new_text]);
    assert_eq!(answer["warnings"], json!([]));
}
