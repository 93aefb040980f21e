//! Rate limits, refused keys and batches, provider and vector-store failures while embedding:
//! what spends an attempt, what fails a chunk, and what the job reports.

use std::time::Duration;

use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::fake_providers::{Failure, FakeGoogle};
use crate::helpers::{TestApp, spawn_app_with};

use super::{add, google_world, id, many_sentences, setup};

#[tokio::test]
async fn rate_limits_give_work_back_without_spending_attempts() {
    let (fake, app, world) = setup(512).await;
    let accepted = add(&app, &world, "One short text.").await;
    fake.fail_next(Failure::RateLimited(Duration::from_millis(300)));
    // The entry goes back, the key cools down for the hint, and the same drain picks the
    // entry up again once the key is usable.
    let started = std::time::Instant::now();
    assert_eq!(app.drain().await, 1);
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "the retry hint was honoured"
    );
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["counts"]["rate_limited"], 1, "{job}");
    assert_eq!(job["counts"]["retries"], 0, "a rate limit is not an attempt: {job}");
    assert_eq!(fake.stats().embed_requests(), 2);
    let google = app.provider("google").await;
    assert_eq!(google["keys"][0]["rate_limited"], 1);
}

#[tokio::test]
async fn failures_spend_attempts_and_fail_the_job_with_a_structured_error() {
    let (fake, app, world) = setup(512).await;
    let accepted = add(&app, &world, "One short text.").await;
    fake.fail_next(Failure::WrongLength);
    app.drain().await;
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["counts"]["retries"], 1, "{job}");
    assert_eq!(job["status"], "running");
    // Nothing was stored for the malformed answer.
    assert_eq!(app.world_points(&world).await, 0);

    // The retry waits for its backoff; make it due, then fail again: max_attempts = 2. (A 5xx
    // would spend no attempt: see the breaker tests.)
    tokio::time::sleep(Duration::from_millis(2100)).await;
    fake.fail_next(Failure::MalformedBody);
    app.drain().await;
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["counts"]["failed"], 1);
    let error = &job["errors"][0];
    assert_eq!(error["book_number"], 1);
    assert_eq!(error["chunk_number"], 0);
    assert_eq!(error["code"], "provider_error");
    assert!(
        !error["message"].as_str().unwrap().contains("key-a"),
        "no key in errors: {error}"
    );

    // The stream tells the story: the first failed call is a warning (the chunk will be
    // retried), the second, its last attempt, the chunk's error; then the job's status.
    let events = app.job_events(&id(&accepted["job"])).await;
    let kinds: Vec<&str> = events
        .iter()
        .filter(|(_, kind, _)| kind != "progress")
        .map(|(_, kind, _)| kind.as_str())
        .collect();
    assert_eq!(kinds, ["status", "warning", "error", "status"], "{events:?}");
    let warning = &events.iter().find(|(_, kind, _)| kind == "warning").unwrap().2;
    assert_eq!(
        (&warning["code"], &warning["chunks"]),
        (&json!("provider_error"), &json!(1))
    );
    assert!(!warning.to_string().contains("key-a"), "{warning}");
    assert_eq!(events.last().unwrap().2["status"], "failed");
}

#[tokio::test]
async fn a_job_lists_its_first_hundred_errors_and_counts_them_all() {
    let (fake, app, world) = setup(16).await;
    let text: String = (0..130)
        .map(|i| format!("Sentence number {i} is about the keeper of the lighthouse. "))
        .collect();
    let first = add(&app, &world, &text).await;
    let second = add(&app, &world, "One short text. Another short text.").await;
    let (many, few) = (
        first["source"]["chunks"].as_u64().unwrap(),
        second["source"]["chunks"].as_u64().unwrap(),
    );
    assert!(many > 100 && few >= 1, "{first} {second}");
    // Every chunk is over the model's limit by the provider's count, so every chunk fails.
    for _ in 0..many + few {
        fake.fail_next_count(Failure::Raw {
            status: 200,
            headers: vec![],
            body: "{\"totalTokens\": 5000}".into(),
        });
    }
    app.drain().await;

    let first_job = id(&first["job"]);
    let (_, job) = app.get(&format!("/v1/jobs/{first_job}")).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["counts"]["failed"], many);
    let numbers: Vec<u64> = job["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["chunk_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..100).collect::<Vec<u64>>(), "the first hundred, in order");

    // The world's job list reads the errors of all its jobs at once; each keeps its own.
    let (status, list) = app.get(&format!("/v1/worlds/{}/jobs", id(&world))).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let listed = |job: &str| {
        list["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == job)
            .cloned()
            .unwrap()
    };
    assert_eq!(listed(&first_job)["errors"], job["errors"]);
    let other = listed(&id(&second["job"]));
    assert_eq!(other["counts"]["failed"], few, "{other}");
    let errors = other["errors"].as_array().unwrap();
    assert_eq!(errors.len() as u64, few, "{other}");
    assert!(
        errors
            .iter()
            .all(|e| e["book_number"] == 2 && e["code"] == "input_too_large"),
        "{other}"
    );
}

#[tokio::test]
async fn a_batch_refused_as_a_whole_is_sent_again_one_item_at_a_time() {
    let (fake, app, world) = setup(16).await;
    let text: String = (0..4)
        .map(|i| format!("Sentence number {i} is about the keeper of the lighthouse. "))
        .collect();
    let accepted = add(&app, &world, &text).await;
    assert_eq!(accepted["source"]["chunks"], 4, "{accepted}");
    // The batch of four is refused (a 400 that is not the key's fault): each chunk is then
    // sent alone, exactly once, and all four are embedded.
    fake.fail_next(Failure::Status(400));
    app.drain().await;
    let calls: Vec<usize> = fake.stats().embed_calls.iter().map(|c| c.texts.len()).collect();
    assert_eq!(calls, [4, 1, 1, 1, 1], "{calls:?}");
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(
        (&job["counts"]["embedded"], &job["counts"]["retries"]),
        (&json!(4), &json!(0)),
        "{job}"
    );
}

#[tokio::test]
async fn a_refused_key_is_a_warning_on_the_job_and_the_other_key_takes_over() {
    let fake = FakeGoogle::start(&["key-a", "key-b"]).await;
    let base = fake.base_url();
    let app = spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a"), SecretString::from("key-b")];
        s.embedding.workers = 0;
    })
    .await;
    let world = google_world(&app, 512).await;
    let accepted = add(&app, &world, "One short text.").await;
    fake.fail_next(Failure::KeyInvalid);
    app.drain().await;
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(
        job["counts"]["retries"], 0,
        "a refused key is not the chunk's fault: {job}"
    );
    let events = app.job_events(&id(&accepted["job"])).await;
    let warnings: Vec<&Value> = events
        .iter()
        .filter(|(_, kind, _)| kind == "warning")
        .map(|(_, _, data)| data)
        .collect();
    assert_eq!(warnings.len(), 1, "{events:?}");
    assert_eq!(warnings[0]["code"], "key_retired");
    assert!(
        warnings[0]["message"].as_str().unwrap().contains("google"),
        "{warnings:?}"
    );
    assert!(
        !warnings[0].to_string().contains("key-"),
        "no secret in events: {warnings:?}"
    );
}

#[tokio::test]
async fn oversize_and_uncountable_chunks_fail_locally_without_calling_the_provider() {
    let (fake, app, world) = setup(512).await;
    let path = format!("/v1/worlds/{}/sources", id(&world));
    // The provider's exact count is over the model's 2,048-token limit.
    let (_, first) = app
        .post(
            &path,
            json!({"filename": "a.txt", "text": "Too long by the provider's count."}),
        )
        .await;
    fake.fail_next_count(Failure::Raw {
        status: 200,
        headers: vec![],
        body: "{\"totalTokens\": 5000}".into(),
    });
    app.drain().await;
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&first["job"]))).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["errors"][0]["code"], "input_too_large");

    // Counting fails: fail closed.
    let (_, second) = app
        .post(&path, json!({"filename": "b.txt", "text": "Cannot be counted today."}))
        .await;
    fake.fail_next_count(Failure::MalformedBody);
    app.drain().await;
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&second["job"]))).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["errors"][0]["code"], "token_count_failed");
    assert_eq!(fake.stats().embed_requests(), 0, "the embed endpoint was never called");
}

#[tokio::test]
async fn a_429_storm_across_two_keys_fails_nothing_and_spends_no_attempt() {
    let fake = FakeGoogle::start(&["key-a", "key-b"]).await;
    // Google counts every text of a batch: four texts per key per 400 ms.
    fake.set_quota("key-a", 4, Duration::from_millis(400));
    fake.set_quota("key-b", 4, Duration::from_millis(400));
    let base = fake.base_url();
    let app = spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a"), SecretString::from("key-b")];
        s.providers.google.scheduling.acquire_timeout_s = 5;
        s.embedding.workers = 0;
        s.embedding.max_attempts = 1;
    })
    .await;
    let world = google_world(&app, 16).await;
    let accepted = add(&app, &world, &many_sentences()).await;
    let chunks = accepted["source"]["chunks"].as_u64().unwrap();
    assert!(chunks >= 20, "{accepted}");

    assert_eq!(app.drain().await, chunks);
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["counts"]["failed"], 0);
    assert_eq!(job["counts"]["retries"], 0, "rate limits spend no attempt: {job}");
    assert!(job["counts"]["rate_limited"].as_u64().unwrap() > 0, "{job}");

    let stats = fake.stats();
    assert!(stats.quota_rejections > 0);
    assert!(
        stats.key("key-a") > 0 && stats.key("key-b") > 0,
        "both keys carried work"
    );
    assert_eq!(stats.items_embedded, chunks, "every chunk embedded exactly once");
    // Rejected batches were halved until they fit the quota.
    let sizes: Vec<usize> = stats.embed_calls.iter().map(|c| c.texts.len()).collect();
    assert!(sizes[0] > 4, "the first batch was larger than the quota: {sizes:?}");
    assert!(sizes.iter().any(|&n| n <= 4), "{sizes:?}");
}

/// The job's events so far, read from the store (the stream only ends with the job).
async fn events_so_far(app: &TestApp, job: &str) -> Vec<(String, Value)> {
    let job = quarry::domain::JobId(uuid::Uuid::parse_str(job).unwrap());
    let events = app.deps.store.job_events_after(job, 0, 1000).await.unwrap();
    events
        .into_iter()
        .map(|e| (e.kind.as_str().to_owned(), serde_json::from_str(&e.data).unwrap()))
        .collect()
}

#[tokio::test]
async fn a_vector_store_outage_while_embedding_gives_the_chunks_back_for_a_while_and_says_so() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let (app, _world, _source, job) = crate::helpers::spawn_app_with_unreachable_vectors(fake.base_url()).await;
    let step = app.work_step("w").await;
    assert_eq!((step.claimed, step.embedded), (1, 0));
    assert_eq!(fake.stats().items_embedded, 1);
    // Given back for a pause: a step right after claims nothing and calls nobody.
    let step = app.work_step("w").await;
    assert_eq!(step.claimed, 0);
    assert_eq!(fake.stats().items_embedded, 1, "not embedded again at once");

    let (_, got) = app.get(&format!("/v1/jobs/{}", job.id)).await;
    assert_eq!(got["status"], "running", "{got}");
    assert_eq!(
        (&got["counts"]["pending"], &got["counts"]["failed"]),
        (&json!(1), &json!(0)),
        "an outage spends no attempt: {got}"
    );
    let warnings: Vec<Value> = events_so_far(&app, &job.id.0.to_string())
        .await
        .into_iter()
        .filter(|(kind, _)| kind == "warning")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0]["code"], "vector_store_unavailable");
    assert_eq!(warnings[0]["chunks"], 1);
    assert!(
        warnings[0]["message"].as_str().unwrap().contains("in 5 s"),
        "{}",
        warnings[0]
    );
}

#[tokio::test]
async fn vectors_the_vector_store_refuses_spend_attempts_until_the_chunk_fails() {
    let (fake, app, world) = setup(64).await;
    let accepted = add(&app, &world, "Queen Maren rules the northern isles.").await;
    // A tampered run row: the run's vectors no longer fit its collection (768 dimensions).
    {
        use sqlx::ConnectOptions as _;
        let options: sqlx::sqlite::SqliteConnectOptions = app.store_url().parse().unwrap();
        let mut conn = options.connect().await.unwrap();
        sqlx::query("UPDATE runs SET dimensions = 700")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    app.drain().await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    app.drain().await;
    let job_id = id(&accepted["job"]);
    let (_, job) = app.get(&format!("/v1/jobs/{job_id}")).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["errors"][0]["code"], "vector_store_rejected", "{job}");
    assert_eq!(
        fake.stats().items_embedded,
        2,
        "one embedding per attempt (max_attempts 2)"
    );
    let events = app.job_events(&job_id).await;
    let warnings: Vec<&Value> = events
        .iter()
        .filter(|(_, kind, _)| kind == "warning")
        .map(|(_, _, data)| data)
        .collect();
    assert_eq!(warnings.len(), 2, "{events:?}");
    assert!(warnings.iter().all(|w| w["code"] == "vector_store_rejected"));
}
