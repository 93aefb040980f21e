//! Head starts: a known world is searched while the store is read, and a head start on a world
//! that changed is thrown away.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, assert_error};

use super::{ISLES, id, sentence, setup, texts, warning_codes};

/// `/metrics`' `quarry_retrieval_head_starts_total`: (used, discarded).
async fn head_starts(app: &TestApp) -> (u64, u64) {
    let response = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    let value = |outcome: &str| -> u64 {
        let prefix = format!("quarry_retrieval_head_starts_total{{outcome=\"{outcome}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no `{outcome}` head starts in {text}"))
            .parse()
            .unwrap()
    };
    (value("used"), value("discarded"))
}

#[tokio::test]
async fn a_known_world_is_searched_while_the_store_is_read_and_answers_the_same() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let query = json!({"query": "who rules the northern isles?", "top_k": 3});
    let first = s.ok(query.clone()).await;
    assert_eq!(
        head_starts(&s.app).await,
        (0, 0),
        "nothing is known before a first answer"
    );
    let second = s.ok(query.clone()).await;
    assert_eq!(head_starts(&s.app).await, (1, 0));
    for field in [
        "results",
        "context",
        "requested_top_k",
        "effective_top_k",
        "warnings",
        "repairs",
    ] {
        assert_eq!(second[field], first[field], "{field}");
    }
    assert!(second["timing"]["embed_ms"].as_f64().unwrap() > 0.0, "{second}");
    assert!(second["timing"]["search_ms"].as_f64().unwrap() > 0.0, "{second}");
    assert_eq!(s.fake.stats().embed_calls.len(), 2, "one provider call per query");

    // Requests the checks refuse or answer without a search get no head start and no call.
    let (status, body) = s.retrieve(json!({"query": "   "})).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "empty_query");
    let (status, body) = s.retrieve(json!({"query": "isles", "mode": "hybrid"})).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
    let zero = s.ok(json!({"query": "isles", "top_k": 0})).await;
    assert_eq!(zero["results"], json!([]));
    assert_eq!(s.fake.stats().embed_calls.len(), 2);
    assert_eq!(head_starts(&s.app).await, (1, 0));

    // The head start's clamp comes from the fresh count: a larger top_k than the previous
    // answer's still finds every embedded chunk.
    let all = s
        .ok(json!({"query": "who rules the northern isles?", "top_k": 50}))
        .await;
    assert_eq!(all["effective_top_k"], 6);
    assert_eq!(all["results"].as_array().unwrap().len(), 6);
    assert_eq!(head_starts(&s.app).await, (2, 0));
}

#[tokio::test]
async fn a_head_start_on_a_world_that_changed_is_thrown_away() {
    let s = setup().await;
    let accepted = s.add("isles.txt", ISLES).await;
    s.app.drain().await;
    let query = json!({"query": "who rules the northern isles?"});
    s.ok(query.clone()).await;

    // The world's only source goes: the next answer is the empty one, from the fresh count.
    let source = format!("/v1/worlds/{}/sources/{}", s.world_id(), id(&accepted["source"]));
    let (status, _) = s.app.delete(&source).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let answer = s.ok(query.clone()).await;
    assert_eq!(warning_codes(&answer), ["no_embedded_chunks"]);
    assert_eq!(answer["results"], json!([]));
    assert_eq!(answer["effective_top_k"], 0);
    assert_eq!(head_starts(&s.app).await, (0, 1));
    // Known to be empty now: no head start, no provider call.
    s.fake.reset_stats();
    let answer = s.ok(query.clone()).await;
    assert_eq!(warning_codes(&answer), ["no_embedded_chunks"]);
    assert_eq!(s.fake.stats().requests, 0);
    assert_eq!(head_starts(&s.app).await, (0, 1));

    // Filled again and asked once (no head start: it was known empty), then deleted.
    s.ingest(&[("isles.txt", ISLES)]).await;
    let answer = s.ok(query.clone()).await;
    assert_eq!(texts(&answer)[0], sentence(0));
    assert_eq!(head_starts(&s.app).await, (0, 1));
    let (status, _) = s.app.delete(&format!("/v1/worlds/{}", s.world_id())).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = s.retrieve(query.clone()).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");
    assert_eq!(head_starts(&s.app).await, (0, 2));
    // Forgotten: the next 404 makes no call at all.
    s.fake.reset_stats();
    let (status, body) = s.retrieve(query).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");
    assert_eq!(s.fake.stats().requests, 0);
    assert_eq!(head_starts(&s.app).await, (0, 2));
}
