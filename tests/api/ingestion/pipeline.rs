//! A source's way to embedded points: chunked, counted, embedded in document mode and its job
//! completed, by hand or by background workers, on a fake provider or the built-in model; and
//! what a worker leaves when it stops.

use std::time::Duration;

use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::json;

use crate::fake_providers::FakeGoogle;
use crate::helpers::spawn_app_with;

use super::{TEXT, add, app_with_google, google_world, id, many_sentences, setup};

#[tokio::test]
async fn a_source_is_chunked_embedded_and_its_job_completes() {
    let (fake, app, world) = setup(24).await;
    let (status, accepted) = app
        .post(
            &format!("/v1/worlds/{}/sources", id(&world)),
            json!({"filename": "isles.md", "text": TEXT}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let source = &accepted["source"];
    let job = &accepted["job"];
    assert_eq!(source["book_number"], 1);
    assert_eq!(source["content_type"], "text/markdown");
    assert_eq!(source["chars"], TEXT.chars().count());
    let chunks = source["chunks"].as_u64().unwrap();
    assert!(chunks >= 3, "small max_tokens gives several chunks: {source}");
    assert_eq!(source["pending"], chunks);
    assert_eq!(job["kind"], "ingest");
    assert_eq!(job["status"], "running");
    assert_eq!(job["counts"]["total"], chunks);
    assert_eq!(
        fake.stats().embed_requests(),
        0,
        "nothing is embedded before a worker runs"
    );

    let embedded = app.drain().await;
    assert_eq!(embedded, chunks);
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(job))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["counts"]["embedded"], chunks);
    assert_eq!(job["counts"]["pending"], 0);
    assert!(job["finished_at"].is_string());
    let (_, world_now) = app.get(&format!("/v1/worlds/{}", id(&world))).await;
    assert_eq!(world_now["stats"]["embedded"], chunks);
    assert_eq!(app.world_points(&world).await, chunks);

    // Only chunk text was sent, in document mode, at the profile's size, after exact counting.
    let stats = fake.stats();
    let sent = stats.sent_texts();
    assert_eq!(sent.len() as u64, chunks);
    assert!(
        stats
            .embed_calls
            .iter()
            .all(|c| c.task_types.iter().all(|t| t.as_deref() == Some("RETRIEVAL_DOCUMENT")))
    );
    assert!(
        stats
            .embed_calls
            .iter()
            .all(|c| c.dimensions.iter().all(|d| *d == Some(768)))
    );
    assert!(
        stats.counted.len() as u64 >= chunks,
        "every chunk is counted before dispatch"
    );
    let (_, list) = app.get(&format!("/v1/worlds/{}/jobs", id(&world))).await;
    assert_eq!(list["jobs"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_stopping_worker_gives_its_claimed_chunks_back_at_once() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    fake.set_latency(Duration::from_secs(30));
    let app = app_with_google(&fake, 1).await;
    let world = google_world(&app, 512).await;
    let accepted = add(&app, &world, "One short text. And a second sentence.").await;
    // The worker has claimed the chunk and is waiting on the provider.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while fake.stats().requests == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker never called the provider"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A graceful stop; the next process finds the chunk free to claim, not leased for minutes.
    let base = fake.base_url();
    let app = app
        .restart_with(move |s| {
            s.providers.google.base_url = base;
            s.providers.google.keys = vec![SecretString::from("key-a")];
            s.embedding.workers = 0;
        })
        .await;
    let now = chrono::Utc::now();
    let items = app
        .state
        .store
        .claim_work("next", 10, now + chrono::Duration::minutes(2), now)
        .await
        .unwrap();
    assert_eq!(items.len(), 1, "the chunk was given back");
    assert_eq!(items[0].job_id.0.to_string(), id(&accepted["job"]));
    assert_eq!(items[0].attempts, 0, "no attempt spent");
}

#[tokio::test]
async fn background_workers_finish_several_sources_end_to_end() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = app_with_google(&fake, 2).await;
    let world = google_world(&app, 24).await;
    let texts = [
        TEXT.to_owned(),
        many_sentences(),
        "A third, short book about the sea.".to_owned(),
    ];
    let mut accepted = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let (status, body) = app
            .post(
                &format!("/v1/worlds/{}/sources", id(&world)),
                json!({"filename": format!("book-{i}.md"), "text": text}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert_eq!(body["source"]["book_number"], i + 1);
        accepted.push(body);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for body in &accepted {
        let job = format!("/v1/jobs/{}", id(&body["job"]));
        loop {
            let (_, current) = app.get(&job).await;
            if current["status"] == "completed" {
                assert_eq!(current["counts"]["embedded"], body["source"]["chunks"]);
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "job did not complete in time: {current}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let total: u64 = accepted.iter().map(|b| b["source"]["chunks"].as_u64().unwrap()).sum();
    let (_, world_now) = app.get(&format!("/v1/worlds/{}", id(&world))).await;
    assert_eq!(world_now["stats"]["sources"], 3);
    assert_eq!(world_now["stats"]["embedded"], total);
    assert_eq!(app.world_points(&world).await, total, "one point per chunk");
    assert_eq!(fake.stats().items_embedded, total, "each chunk embedded once");
}

#[tokio::test]
async fn a_local_world_is_embedded_by_the_built_in_model() {
    if !crate::local_model::model_present("a_local_world_is_embedded_by_the_built_in_model") {
        return;
    }
    let dir = crate::local_model::model_dir();
    let app = spawn_app_with(move |s| {
        s.providers.local.model_dir = dir;
        s.embedding.workers = 0;
    })
    .await;
    let world = app.create_local_world("local").await;
    let accepted = add(&app, &world, TEXT).await;
    let chunks = accepted["source"]["chunks"].as_u64().unwrap();
    assert_eq!(app.drain().await, chunks);
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(app.world_points(&world).await, chunks);
}

#[tokio::test]
async fn a_job_left_running_with_nothing_to_claim_is_finished_by_the_workers() {
    let (_fake, app, world) = setup(64).await;
    let accepted = add(&app, &world, TEXT).await;
    // A worker marked the job's last entries and its process stopped before finishing the job
    // (the points would be written; they do not matter here).
    let store = &app.deps.store;
    let now = chrono::Utc::now();
    let items = store
        .claim_work("gone", 100, now + chrono::Duration::minutes(5), now)
        .await
        .unwrap();
    assert!(!items.is_empty());
    let done: Vec<quarry::domain::EmbeddedVector> = items
        .iter()
        .map(|i| quarry::domain::EmbeddedVector {
            chunk_id: i.chunk_id,
            text_sha256: i.text_sha256.clone(),
            dense: vec![0.5; i.profile.dimensions as usize],
        })
        .collect();
    let marked = store
        .complete_work("gone", items[0].job_id, items[0].run_id, &done, 0, now)
        .await
        .unwrap();
    assert_eq!(marked, items.len() as u64);
    let path = format!("/v1/jobs/{}", id(&accepted["job"]));
    let (_, job) = app.get(&path).await;
    assert_eq!(
        (&job["status"], &job["counts"]["pending"]),
        (&json!("running"), &json!(0)),
        "{job}"
    );

    // Nothing is left to claim, so only the idle workers' sweep can end it.
    app.drain().await;
    let (_, job) = app.get(&path).await;
    assert_eq!(job["status"], "completed", "{job}");
}
