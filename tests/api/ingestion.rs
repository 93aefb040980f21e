//! Ingestion: sources in, chunks and pending entries stored in one transaction, workers embed
//! through the scheduler and a fake Google server, points are written before entries are
//! marked embedded, and jobs report it all.
//!
//! The tests are in the submodules, by topic; this file holds their shared setup.

mod breaker;
mod event_streams;
mod failures;
mod job_control;
mod pipeline;
mod retry;
mod reuse;
mod uploads;
mod waiting;

use crate::helpers::id;
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TestApp, spawn_app_with};

const TEXT: &str = "# The Northern Isles\n\nQueen Maren rules the northern isles from a tower of salt. \
    Her fleet guards the straits.\n\nIn the south, the river cities trade amber and wool. \
    Their councils elect a speaker every spring.\n\nThe dragons of the east sleep under the glacier.";

/// An app whose Google provider is `fake` (one key), with no background workers unless asked.
async fn app_with_google(fake: &FakeGoogle, workers: usize) -> TestApp {
    let base = fake.base_url();
    spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a")];
        s.providers.google.scheduling.acquire_timeout_s = 1;
        s.embedding.workers = workers;
        s.embedding.max_attempts = 2;
    })
    .await
}

async fn google_world(app: &TestApp, max_tokens: u32) -> Value {
    let (status, world) = app
        .post(
            "/v1/worlds",
            json!({"name": "Aerth", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768},
                   "chunking": {"max_tokens": max_tokens, "overlap_tokens": 0}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    world
}

/// A fake Google server, an app using it without background workers, and a world on it.
async fn setup(max_tokens: u32) -> (FakeGoogle, TestApp, Value) {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = app_with_google(&fake, 0).await;
    let world = google_world(&app, max_tokens).await;
    (fake, app, world)
}

/// Adds a plain-text source and returns the 202 body.
async fn add(app: &TestApp, world: &Value, text: &str) -> Value {
    let (status, accepted) = app
        .post(
            &format!("/v1/worlds/{}/sources", id(world)),
            json!({"filename": "a.txt", "text": text}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    accepted
}

/// Twenty-four one-sentence chunks at `max_tokens: 16`.
fn many_sentences() -> String {
    (0..24)
        .map(|i| {
            format!(
                "Sentence {} tells of harbour number {} and its grey stone walls. ",
                i,
                i * 7
            )
        })
        .collect()
}
