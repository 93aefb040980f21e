//! `chunking.context_prefix`: chunks embedded after their source's title and section path, on
//! both stores, through the fake Google server (which records every text it is sent). The
//! stored text and what retrieval returns are unchanged; a vector is kept across an edit only
//! while its prefix is too; a re-ingest turns prefixes on; bounds refused with a clear 400.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TestApp, assert_error, on_fake_google, spawn_app_on, spawn_app_with};

const GOOGLE: &str = r#"{"provider": "google", "model": "gemini-embedding-001", "dimensions": 768}"#;

fn guide(install_heading: &str) -> String {
    format!(
        "# Harbour guide\n\nThe harbour opens at dawn.\n\n## {install_heading}\n\nBring a rope of hemp. Tie it twice \
         around the post nearest the lamp, then once around the cleat, and pull until the hull \
         touches the fenders. Leave a hand's width of slack for the tide.\n\nThe harbour master \
         checks every knot before dusk.\n"
    )
}

async fn world(app: &TestApp, prefix: bool) -> String {
    let chunking = json!({"max_tokens": 40, "overlap_tokens": 0, "context_prefix": prefix});
    let world = app.create_google_world("Harbour", json!({"chunking": chunking})).await;
    assert_eq!(world["chunking"]["context_prefix"], prefix, "{world}");
    world["id"].as_str().unwrap().to_owned()
}

async fn put_guide(app: &TestApp, world: &str, heading: &str) {
    let (status, body) = app
        .put(
            &format!("/v1/worlds/{world}/sources/by-key?key=guide.md"),
            json!({"filename": "guide.md", "title": "Harbour handbook", "text": guide(heading)}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    app.drain().await;
}

/// The texts of the source's chunks, as stored.
async fn chunk_texts(app: &TestApp, world: &str) -> Vec<String> {
    let (_, listed) = app.get(&format!("/v1/worlds/{world}/sources")).await;
    app.chunk_texts(world, listed["sources"][0]["id"].as_str().unwrap())
        .await
}

macro_rules! on_both_stores {
    ($case:ident) => {
        mod $case {
            use super::*;

            #[tokio::test]
            async fn sqlite() {
                let fake = FakeGoogle::start(&["key-a"]).await;
                let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
                super::$case(fake, app).await;
            }

            #[tokio::test]
            async fn postgres() {
                let Some(db) = crate::helpers::PgDatabase::create(concat!("context_prefix::", stringify!($case))).await
                else {
                    return;
                };
                let fake = FakeGoogle::start(&["key-a"]).await;
                let app = spawn_app_on(db.url.clone(), on_fake_google(fake.base_url(), |_| {})).await;
                super::$case(fake, app).await;
                db.drop_db().await;
            }
        }
    };
}

on_both_stores!(chunks_are_embedded_after_their_title_and_section_path);
async fn chunks_are_embedded_after_their_title_and_section_path(fake: FakeGoogle, app: TestApp) {
    let plain = world(&app, false).await;
    put_guide(&app, &plain, "Mooring").await;
    let stored = chunk_texts(&app, &plain).await;
    assert!(stored.len() >= 3, "{stored:?}");
    assert_eq!(
        fake.stats().sent_texts(),
        stored,
        "without a prefix the stored text is sent"
    );

    fake.reset_stats();
    let prefixed = world(&app, true).await;
    put_guide(&app, &prefixed, "Mooring").await;
    let texts = chunk_texts(&app, &prefixed).await;
    assert_eq!(texts, stored, "the stored chunks are the same");
    let sent = fake.stats().sent_texts();
    assert_eq!(sent.len(), texts.len());
    for (sent, text) in sent.iter().zip(&texts) {
        assert!(sent.ends_with(text.as_str()), "{sent:?} ends with the chunk {text:?}");
    }
    // A chunk opening with its heading gets the title only (and the path above it); one deep in
    // a section gets the section's heading.
    assert_eq!(sent[0], format!("Harbour handbook\n\n{}", texts[0]));
    let deep = texts.iter().position(|t| t.contains("harbour master")).unwrap();
    assert_eq!(
        sent[deep],
        format!("Harbour handbook\nHarbour guide › Mooring\n\n{}", texts[deep])
    );

    // Retrieval returns the stored text, verified against the store (the vector's hash is of
    // the text embedded, prefix and all).
    let (status, answer) = app
        .post(
            &format!("/v1/worlds/{prefixed}/retrieve"),
            json!({"query": "who checks the knots", "top_k": 3, "expand": "none"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{answer}");
    for hit in results {
        let text = hit["chunk_text"].as_str().unwrap();
        assert!(texts.iter().any(|t| t == text), "{text:?}");
        assert!(!text.starts_with("Harbour handbook"), "{text:?}");
    }
    assert!(answer["warnings"].as_array().unwrap().is_empty(), "{answer}");

    // An edit that only renames the section: the chunks under it get a new prefix, so they are
    // embedded again, though their text is unchanged; the chunk before the heading keeps its
    // vector.
    fake.reset_stats();
    put_guide(&app, &prefixed, "Tying up").await;
    let sent = fake.stats().sent_texts();
    assert!(
        sent.iter().all(|s| s.contains("Tying up")),
        "only chunks of the renamed section are sent: {sent:?}"
    );
    assert!(
        sent.iter()
            .any(|s| s == &format!("Harbour handbook\nHarbour guide › Tying up\n\n{}", texts[deep])),
        "{sent:?}"
    );
    assert!(!sent.iter().any(|s| s.contains("opens at dawn")), "{sent:?}");
}

on_both_stores!(a_reingest_turns_prefixes_on_and_the_bound_is_checked);
async fn a_reingest_turns_prefixes_on_and_the_bound_is_checked(fake: FakeGoogle, app: TestApp) {
    let id = world(&app, false).await;
    put_guide(&app, &id, "Mooring").await;
    let texts = chunk_texts(&app, &id).await;

    fake.reset_stats();
    let (status, job) = app
        .post(
            &format!("/v1/worlds/{id}/reingest"),
            json!({"chunking": {"max_tokens": 40, "overlap_tokens": 0, "context_prefix": true}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    for _ in 0..50 {
        app.drain().await;
        let (_, w) = app.get(&format!("/v1/worlds/{id}")).await;
        if w["chunking"]["context_prefix"] == true {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (_, w) = app.get(&format!("/v1/worlds/{id}")).await;
    assert_eq!(w["chunking"]["context_prefix"], true, "{w}");
    let sent = fake.stats().sent_texts();
    assert_eq!(sent.len(), texts.len(), "every chunk embedded again: {sent:?}");
    assert!(sent.iter().all(|s| s.starts_with("Harbour handbook\n")), "{sent:?}");

    // A later re-ingest without the field keeps the world's own setting.
    let (status, job) = app
        .post(
            &format!("/v1/worlds/{id}/reingest"),
            json!({"chunking": {"overlap_tokens": 0}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    app.drain().await;

    // The prefix's room comes off the chunk limit: 2048 for Gemini less 48.
    let embedding: Value = serde_json::from_str(GOOGLE).unwrap();
    let before = app.get("/v1/worlds").await.1["worlds"].as_array().unwrap().len();
    let (status, body) = app
        .post(
            "/v1/worlds",
            json!({"name": "too big", "embedding": embedding,
                   "chunking": {"max_tokens": 2001, "context_prefix": true}}),
        )
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_chunking_profile");
    assert_eq!(body["error"]["details"]["field"], "chunking.max_tokens", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("less 48 for the context prefix"),
        "{body}"
    );
    let (status, body) = app
        .post(
            "/v1/worlds",
            json!({"name": "typo", "embedding": embedding, "chunking": {"context_prefix": "yes"}}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("context_prefix"),
        "{body}"
    );
    let after = app.get("/v1/worlds").await.1["worlds"].as_array().unwrap().len();
    assert_eq!(before, after, "nothing was created");
}
