//! Embedding reuse: identical text is embedded once, within a world or globally as configured,
//! or not at all when reuse is off.

use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TestApp, spawn_app_with};

use super::{TEXT, add, google_world, id, setup};

/// An app on `fake` with embedding reuse set to `reuse` and no background workers.
async fn app_with_reuse(fake: &FakeGoogle, reuse: quarry::config::ReuseScope) -> TestApp {
    let base = fake.base_url();
    spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a")];
        s.embedding.workers = 0;
        s.embedding.reuse = reuse;
    })
    .await
}

#[tokio::test]
async fn re_adding_identical_text_reuses_vectors_without_any_provider_call() {
    let (fake, app, world) = setup(24).await;
    let first = add(&app, &world, TEXT).await;
    let chunks = first["source"]["chunks"].as_u64().unwrap();
    app.drain().await;
    fake.reset_stats();

    let second = add(&app, &world, TEXT).await;
    assert_eq!(app.drain().await, chunks);
    assert_eq!(fake.stats().requests, 0, "no countTokens, no embed call");
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&second["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["counts"]["embedded"], chunks);
    assert_eq!(job["counts"]["reused"], chunks);
    let (_, first_job) = app.get(&format!("/v1/jobs/{}", id(&first["job"]))).await;
    assert_eq!(first_job["counts"]["reused"], 0);
    // Progress events carry the same counts, `reused` included, and never the same twice.
    let events = app.job_events(&id(&second["job"])).await;
    let progress: Vec<&Value> = events
        .iter()
        .filter(|(_, kind, _)| kind == "progress")
        .map(|(_, _, data)| data)
        .collect();
    assert_eq!(
        progress.last().map(|p| &p["reused"]),
        Some(&json!(chunks)),
        "{events:?}"
    );
    assert!(progress.windows(2).all(|w| w[0] != w[1]), "{progress:?}");

    // Both books have points of their own and are found: one result stands for both (the same
    // text), listing the other book's chunk.
    assert_eq!(app.world_points(&world).await, 2 * chunks);
    let (status, answer) = app
        .post(
            &format!("/v1/worlds/{}/retrieve", id(&world)),
            json!({"query": "Queen Maren rules the northern isles", "top_k": 2, "expand": "none"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let books: Vec<u64> = answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["book_number"].as_u64().unwrap())
        .collect();
    assert_eq!(books, [1], "{answer}");
    let duplicates = answer["results"][0]["duplicates"].as_array().unwrap();
    assert_eq!(duplicates.len(), 1, "{answer}");
    let (_, second_chunks) = app
        .get(&format!(
            "/v1/worlds/{}/sources/{}/chunks",
            id(&world),
            id(&second["source"])
        ))
        .await;
    assert_eq!(duplicates[0], second_chunks["chunks"][0]["id"], "{answer}");
    // The context holds the text once, and nothing was left out for want of room.
    assert_eq!(
        answer["context"]["chunks"],
        json!([answer["results"][0]["chunk_text"]]),
        "{answer}"
    );
    assert_eq!(answer["warnings"], json!([]), "{answer}");
}

#[tokio::test]
async fn reuse_stays_inside_a_world_unless_configured_global_and_can_be_off() {
    use quarry::config::ReuseScope;
    for (scope, calls_in_other_world, calls_in_same_world) in [
        (ReuseScope::World, true, false),
        (ReuseScope::Global, false, false),
        (ReuseScope::Off, true, true),
    ] {
        let fake = FakeGoogle::start(&["key-a"]).await;
        let app = app_with_reuse(&fake, scope).await;
        let one = google_world(&app, 512).await;
        add(&app, &one, "Salt is the wealth of the islands.").await;
        app.drain().await;

        fake.reset_stats();
        let (status, two) = app
            .post(
                "/v1/worlds",
                json!({"name": "Two", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768}}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
        add(&app, &two, "Salt is the wealth of the islands.").await;
        app.drain().await;
        assert_eq!(
            fake.stats().embed_requests() > 0,
            calls_in_other_world,
            "{scope:?}: identical text in another world"
        );

        fake.reset_stats();
        add(&app, &one, "Salt is the wealth of the islands.").await;
        app.drain().await;
        assert_eq!(
            fake.stats().embed_requests() > 0,
            calls_in_same_world,
            "{scope:?}: identical text in the same world"
        );
    }
}
