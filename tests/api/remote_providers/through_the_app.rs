//! The adapters' configured limits and timeouts, and OpenAI's per-day limits, through the whole
//! application.

use std::time::Duration;

use chrono::{DateTime, Utc};
use quarry::config::Settings;
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::fake_providers::{Failure, FakeGoogle, FakeOpenAi};
use crate::helpers::{TestApp, assert_error, next_daily_reset, spawn_app_with};

use super::{GEMINI, GOOGLE_KEY, OPENAI_KEY};

/// An app whose OpenAI provider is `fake` with one configuration key, no background workers
/// and short waits for a key, then `tweak`.
async fn app_with_openai(fake: &FakeOpenAi, tweak: impl FnOnce(&mut Settings)) -> TestApp {
    let base = fake.base_url();
    spawn_app_with(move |s| {
        s.providers.openai.base_url = base;
        s.providers.openai.keys = vec![SecretString::from(OPENAI_KEY)];
        s.providers.openai.scheduling.acquire_timeout_s = 1;
        s.providers.openai.scheduling.query_wait_s = 1;
        s.embedding.workers = 0;
        tweak(s);
    })
    .await
}

/// A world on `provider`/`model` with one-sentence chunks; returns its id.
async fn remote_world(app: &TestApp, provider: &str, model: &str) -> String {
    let (status, world) = app
        .post(
            "/v1/worlds",
            json!({"name": "Settings", "embedding": {"provider": provider, "model": model, "dimensions": 128},
                   "chunking": {"max_tokens": 16, "overlap_tokens": 0}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    world["id"].as_str().unwrap().to_owned()
}

/// Adds a source of `sentences` one-sentence chunks; returns the 202 body.
async fn add_sentences(app: &TestApp, world: &str, sentences: usize) -> Value {
    let text: String = (0..sentences)
        .map(|i| format!("Sentence {i} tells of the harbour wall and the grey gulls above it. "))
        .collect();
    let (status, accepted) = app
        .post(
            &format!("/v1/worlds/{world}/sources"),
            json!({"filename": "harbour.txt", "text": text}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    accepted
}

/// A `text-embedding-3-small` world with a source of two one-sentence chunks, both embedded;
/// returns its id.
async fn embedded_openai_world(app: &TestApp) -> String {
    let world = remote_world(app, "openai", "text-embedding-3-small").await;
    let chunks = add_sentences(app, &world, 2).await["source"]["chunks"]
        .as_u64()
        .unwrap();
    assert_eq!(app.drain().await, chunks);
    world
}

/// The provider's one key as `GET /v1/providers` shows it.
async fn only_key(app: &TestApp, provider: &str) -> Value {
    let keys = app.provider(provider).await["keys"].clone();
    assert_eq!(keys.as_array().map(Vec::len), Some(1), "{keys}");
    keys[0].clone()
}

#[tokio::test]
async fn a_configured_max_batch_size_bounds_the_inputs_of_every_embeddings_request() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let app = app_with_openai(&fake, |s| s.providers.openai.max_batch_size = 3).await;
    let world = remote_world(&app, "openai", "text-embedding-3-small").await;
    let accepted = add_sentences(&app, &world, 10).await;
    let chunks = accepted["source"]["chunks"].as_u64().unwrap();
    assert!(chunks >= 7, "{accepted}");

    assert_eq!(app.drain().await, chunks);
    let calls = fake.stats().embed_calls;
    let sizes: Vec<usize> = calls.iter().map(|c| c.texts.len()).collect();
    assert!(sizes.iter().all(|&n| n <= 3), "inputs per request: {sizes:?}");
    assert!(sizes.contains(&3), "the bound is reached, not undercut: {sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>() as u64, chunks);

    // The same work without the setting goes out in one request.
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let app = app_with_openai(&fake, |_| {}).await;
    let world = remote_world(&app, "openai", "text-embedding-3-small").await;
    add_sentences(&app, &world, 10).await;
    assert_eq!(app.drain().await, chunks);
    let sizes: Vec<usize> = fake.stats().embed_calls.iter().map(|c| c.texts.len()).collect();
    assert_eq!(sizes, vec![chunks as usize]);
}

#[tokio::test]
async fn a_configured_request_timeout_turns_a_slow_answer_into_a_quick_transient_failure() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let app = app_with_openai(&fake, |s| s.providers.openai.request_timeout_s = 1).await;
    let world = embedded_openai_world(&app).await;

    // Ten seconds per answer from now on; the query gives up after a second per attempt.
    fake.reset_stats();
    fake.set_latency(Duration::from_secs(10));
    let started = std::time::Instant::now();
    let (status, body) = app
        .post(
            &format!("/v1/worlds/{world}/retrieve"),
            json!({"query": "where do the gulls fly?"}),
        )
        .await;
    let elapsed = started.elapsed();
    let error = assert_error(status, &body, StatusCode::BAD_GATEWAY, "provider_error");
    assert!(error["message"].as_str().unwrap().contains("timed out"), "{body}");
    assert!(elapsed < Duration::from_secs(6), "took {elapsed:?}");
    let attempts = fake.stats().embed_requests();
    assert!(attempts >= 1, "the query reached the provider");
    // Transient: counted as failures, the key neither retired nor cooled down.
    let key = only_key(&app, "openai").await;
    assert_eq!(key["failures"], attempts, "{key}");
    assert_eq!(key["retired"], false, "{key}");
    assert!(key["cooling_down_until"].is_null(), "{key}");
}

#[tokio::test]
async fn a_configured_google_request_timeout_applies_to_its_calls() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let base = fake.base_url();
    let app = spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from(GOOGLE_KEY)];
        s.providers.google.request_timeout_s = 1;
        s.embedding.workers = 0;
        s.embedding.max_attempts = 1;
        // A timeout is transient: without a failure budget it spends the chunk's one attempt,
        // so the chunk shows the error.
        s.embedding.breaker.failure_budget_s = 0.0;
    })
    .await;
    let world = remote_world(&app, "google", GEMINI).await;
    let accepted = add_sentences(&app, &world, 1).await;
    let source = accepted["source"]["id"].as_str().unwrap();

    fake.set_latency(Duration::from_secs(10));
    let started = std::time::Instant::now();
    app.drain().await;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(6), "took {elapsed:?}");
    let (_, listing) = app.get(&format!("/v1/worlds/{world}/sources/{source}/chunks")).await;
    let chunk = &listing["chunks"][0];
    assert!(
        chunk["last_error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("timed out")),
        "{listing}"
    );
}

#[tokio::test]
async fn an_openai_per_day_limit_cools_the_key_until_the_daily_reset() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let app = app_with_openai(&fake, |_| {}).await;
    let world = embedded_openai_world(&app).await;

    // "Rate limit reached … on requests per day (RPD)", no retry headers.
    fake.reset_stats();
    fake.fail_next(Failure::DailyQuota);
    let before = Utc::now();
    let (status, body) = app
        .post(
            &format!("/v1/worlds/{world}/retrieve"),
            json!({"query": "where do the gulls fly?"}),
        )
        .await;
    let after = Utc::now();
    let error = assert_error(status, &body, StatusCode::TOO_MANY_REQUESTS, "provider_rate_limited");
    assert_eq!(
        fake.stats().embed_requests(),
        1,
        "one call, then no retry on the cooled key"
    );

    let key = only_key(&app, "openai").await;
    assert_eq!(key["rate_limited"], 1, "{key}");
    let until: DateTime<Utc> = key["cooling_down_until"]
        .as_str()
        .unwrap_or_else(|| panic!("not cooling down: {key}"))
        .parse()
        .unwrap();
    // Until the daily reset (hours away unless the test runs just before 08:00 UTC), not for
    // the few seconds of a per-minute backoff.
    let close_to = |reset: DateTime<Utc>| (until - reset).num_seconds().abs() <= 5;
    assert!(
        close_to(next_daily_reset(before)) || close_to(next_daily_reset(after)),
        "cooling down until {until}, expected the next 08:00 UTC after {before}"
    );
    let retry_after = error["details"]["retry_after_s"].as_f64().unwrap();
    let left = (until - after).num_seconds() as f64;
    assert!(
        (retry_after - left).abs() <= 5.0,
        "retry_after_s {retry_after}, cooldown left {left}"
    );
}
