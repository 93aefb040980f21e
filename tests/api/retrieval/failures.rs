//! Provider and vector-store failures while answering: a slow provider, cooling keys, provider
//! errors, no usable key, an unreachable vector store; none changes anything stored.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::fake_providers::{Failure, FakeGoogle};
use crate::helpers::assert_error;

use super::{ISLES, Setup, sentence, setup, setup_on_fake_google, texts};

#[tokio::test]
async fn a_query_the_provider_is_too_slow_to_embed_is_502_before_the_request_times_out() {
    // The provider's own timeout (60 s) is far longer than the server's.
    let s = setup_on_fake_google("Aerth", |s| s.server.request_timeout_s = 2).await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    s.fake.set_latency(Duration::from_secs(5));
    // Without the budget, the server's timeout answers first: 408 request_timeout.
    let (status, body) = s.retrieve(json!({"query": "who rules the northern isles"})).await;
    let error = assert_error(status, &body, StatusCode::BAD_GATEWAY, "provider_error");
    assert!(
        error["message"].as_str().unwrap().contains("1.5 s"),
        "the budget is the 2 s request timeout less a quarter: {body}"
    );
    // The key was not left in flight: a fast provider answers the next query.
    s.fake.set_latency(Duration::ZERO);
    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 1})).await;
    assert_eq!(texts(&answer), [sentence(0)]);
}

#[tokio::test]
async fn cooling_keys_answer_429_with_retry_after() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let before = s.stats().await;
    s.fake.fail_next(Failure::RateLimited(Duration::from_secs(60)));
    let (status, answer) = s.retrieve(json!({"query": "who rules the isles"})).await;
    let error = assert_error(status, &answer, StatusCode::TOO_MANY_REQUESTS, "provider_rate_limited");
    let retry = error["details"]["retry_after_s"].as_u64().unwrap();
    assert!((50..=61).contains(&retry), "the provider's hint: {retry}");
    // The key stays cooling: the next query fails fast without reaching the provider.
    let requests = s.fake.stats().requests;
    let (status, answer) = s.retrieve(json!({"query": "who rules the isles"})).await;
    assert_error(status, &answer, StatusCode::TOO_MANY_REQUESTS, "provider_rate_limited");
    assert_eq!(s.fake.stats().requests, requests);
    assert_eq!(s.stats().await, before, "nothing stored changed");
}

#[tokio::test]
async fn a_provider_failure_is_502_and_changes_nothing() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    // A transient fault is retried at once (on the next usable key).
    s.fake.fail_next(Failure::Status(500));
    let answer = s.ok(json!({"query": "who rules the isles"})).await;
    assert_eq!(texts(&answer)[0], sentence(0));
    assert_eq!(s.fake.stats().embed_requests(), 2);
    let before = s.stats().await;
    for failure in [Failure::Status(400), Failure::MalformedBody, Failure::WrongLength] {
        s.fake.fail_next(failure.clone());
        let (status, answer) = s.retrieve(json!({"query": "who rules the isles"})).await;
        assert_error(status, &answer, StatusCode::BAD_GATEWAY, "provider_error");
    }
    assert_eq!(s.stats().await, before);
    assert_eq!(s.point_count().await, 6);
}

#[tokio::test]
async fn a_world_without_usable_keys_is_409() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let key_id = s.app.provider("google").await["keys"][0]["key_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A rejected key is retired: nothing is left to embed the query with.
    s.fake.fail_next(Failure::KeyInvalid);
    let (status, answer) = s.retrieve(json!({"query": "who rules the isles"})).await;
    assert!(
        status == StatusCode::CONFLICT || status == StatusCode::BAD_GATEWAY,
        "{status}: {answer}"
    );
    let (status, answer) = s.retrieve(json!({"query": "who rules the isles"})).await;
    assert_error(status, &answer, StatusCode::CONFLICT, "no_eligible_provider_key");
    assert!(!key_id.is_empty());
}

#[tokio::test]
async fn an_unreachable_vector_store_is_503_and_changes_nothing() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let (app, world, _, _) = crate::helpers::spawn_app_with_unreachable_vectors(fake.base_url()).await;
    let s = Setup {
        fake,
        app,
        world: json!({"id": world.id.0.to_string(), "collection": world.collection}),
    };
    s.sql("UPDATE manifest_entries SET state = 'embedded'", &[]).await;
    let before = s.stats().await;
    let (status, answer) = s.retrieve(json!({"query": "who rules"})).await;
    assert_error(
        status,
        &answer,
        StatusCode::SERVICE_UNAVAILABLE,
        "vector_store_unavailable",
    );
    assert_eq!(s.stats().await, before);

    let (status, ready) = crate::helpers::read(s.app.client.get(s.app.url("/readyz")).send().await.unwrap()).await;
    assert_error(
        status,
        &ready,
        StatusCode::SERVICE_UNAVAILABLE,
        "vector_store_unavailable",
    );
    assert_eq!(
        (&ready["store"]["ok"], &ready["vectors"]["ok"]),
        (&json!(true), &json!(false))
    );
}
