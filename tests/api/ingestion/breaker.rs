//! Provider outages: transient failures spend no attempt, a run of them opens the provider's
//! circuit breaker (visible in `/v1/providers`, said once per job), and the work is done when
//! the provider recovers.

use crate::helpers::warning_count;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::Value;

use crate::fake_providers::{Failure, FakeGoogle};
use crate::helpers::{TestApp, spawn_app_with};

use super::{add, google_world, id, many_sentences};

async fn app(fake: &FakeGoogle, breaker: impl FnOnce(&mut quarry::config::BreakerSettings)) -> TestApp {
    let base = fake.base_url();
    spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a")];
        s.providers.google.scheduling.acquire_timeout_s = 1;
        s.embedding.workers = 0;
        s.embedding.max_attempts = 2;
        breaker(&mut s.embedding.breaker);
    })
    .await
}

async fn job(app: &TestApp, id: &str) -> Value {
    let (status, job) = app.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{job}");
    job
}

/// Drains until every job given has ended (the queue's backoffs are waited out), at most 60 s.
async fn drain_until_done(app: &TestApp, jobs: &[String]) {
    let started = Instant::now();
    loop {
        app.drain().await;
        let mut done = true;
        for j in jobs {
            done &= job(app, j).await["finished_at"].is_string();
        }
        if done {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the jobs did not end");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_provider_failing_thirty_percent_of_calls_loses_no_chunk() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = app(&fake, |b| {
        b.failures_to_open = 3;
        b.open_s = 0.3;
        b.max_open_s = 1.0;
    })
    .await;
    let world = google_world(&app, 16).await;
    let mut jobs = Vec::new();
    let mut total = 0;
    for n in 0..4 {
        // Texts of their own: identical ones would reuse the first one's vectors.
        let text = many_sentences().replace("Sentence", &format!("Part {n}, sentence"));
        let accepted = add(&app, &world, &text).await;
        total += accepted["source"]["chunks"].as_u64().unwrap();
        jobs.push(id(&accepted["job"]));
    }
    // 30 % of embedding calls answer 503 "overloaded" for three seconds, then none.
    fake.fail_share(30, Duration::from_secs(3), Failure::Status(503));
    drain_until_done(&app, &jobs).await;
    for j in &jobs {
        let job = job(&app, j).await;
        assert_eq!(job["status"], "completed", "{job}");
        assert_eq!(job["counts"]["failed"], 0, "{job}");
        assert_eq!(
            job["counts"]["retries"], 0,
            "a transient failure spends no attempt: {job}"
        );
    }
    assert_eq!(app.world_points(&world).await, total);
    let calls = fake.stats().embed_requests();
    assert!(calls > 4, "the outage was met: {calls} calls");
}

#[tokio::test]
async fn an_open_breaker_shows_in_providers_and_on_the_job_and_is_said_once() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = app(&fake, |b| {
        b.failures_to_open = 2;
        b.open_s = 30.0;
    })
    .await;
    let world = google_world(&app, 512).await;
    let accepted = add(&app, &world, "One short text.").await;
    let job_id = id(&accepted["job"]);
    fake.fail_share(100, Duration::from_secs(120), Failure::Status(503));

    // The first failure gives the chunk back for a short backoff; the second opens the breaker.
    app.drain().await;
    let google = app.provider("google").await;
    assert_eq!(google["breakers"][0]["state"], "closed", "{google}");
    assert_eq!(google["breakers"][0]["failures_in_row"], 1, "{google}");
    tokio::time::sleep(Duration::from_millis(800)).await;
    app.drain().await;
    let google = app.provider("google").await;
    let breaker = &google["breakers"][0];
    assert_eq!(
        (breaker["model"].as_str(), breaker["state"].as_str()),
        (Some("gemini-embedding-001"), Some("open")),
        "{google}"
    );
    assert!(
        breaker["open_until"].is_string() && breaker["failing_since"].is_string(),
        "{breaker}"
    );
    let calls = fake.stats().embed_requests();
    assert_eq!(calls, 2);
    // `/metrics` shows it too: 2 is open.
    let metrics = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("quarry_provider_breaker_state{provider=\"google\",model=\"gemini-embedding-001\"} 2\n"),
        "{metrics}"
    );

    let job = job(&app, &job_id).await;
    assert_eq!(job["waiting"]["reason"], "provider_unavailable", "{job}");
    // The chunk says why it waits, with no attempt spent.
    let source = accepted["source"]["id"].as_str().unwrap();
    let (_, listing) = app
        .get(&format!("/v1/worlds/{}/sources/{source}/chunks", id(&world)))
        .await;
    let chunk = &listing["chunks"][0];
    assert_eq!(
        (chunk["state"].as_str(), chunk["attempts"].as_u64()),
        (Some("pending"), Some(0)),
        "{chunk}"
    );
    assert_eq!(chunk["last_error"]["code"], "provider_error", "{chunk}");
    assert!(job["waiting"]["until"].is_string(), "{job}");
    assert_eq!(
        (job["counts"]["retries"].as_u64(), job["counts"]["failed"].as_u64()),
        (Some(0), Some(0))
    );

    // While it is open nothing is sent, whatever is claimable.
    let accepted = add(&app, &world, "Another short text.").await;
    app.drain().await;
    assert_eq!(fake.stats().embed_requests(), calls, "an open breaker sends nothing");
    let second = job_events(&app, &id(&accepted["job"])).await;
    assert_eq!(warning_count(&second, "provider_unavailable"), 1, "{second:?}");
    let events = job_events(&app, &job_id).await;
    assert_eq!(warning_count(&events, "provider_unavailable"), 1, "{events:?}");
}

#[tokio::test]
async fn past_the_failure_budget_transient_failures_spend_attempts() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = app(&fake, |b| b.failure_budget_s = 0.0).await;
    let world = google_world(&app, 512).await;
    let accepted = add(&app, &world, "One short text.").await;
    fake.fail_share(100, Duration::from_secs(120), Failure::Status(503));
    app.drain().await;
    let job = job(&app, &id(&accepted["job"])).await;
    assert_eq!(job["counts"]["retries"], 1, "{job}");
}

async fn job_events(app: &TestApp, job: &str) -> Vec<(i64, String, Value)> {
    app.job_events_now(job).await
}
