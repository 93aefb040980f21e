//! A one-paragraph edit of a 1,000-chunk source, on each store (SQLite, PostgreSQL) and each
//! vector store (the embedded engine, and a Qdrant server when `QUARRY_TEST_QDRANT_URL` is
//! set): only the changed chunks go to the provider, and retrievals hammered while the replace
//! is embedded and switched in each see exactly one version of the source — never both, never
//! none.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{PgDatabase, TOKEN, TestApp, google_world, on_fake_google, spawn_app_on, spawn_app_with};

/// Sentences of the source; with [`google_world`]'s 16-token chunks each is one chunk.
const SENTENCES: usize = 1000;
/// The paragraph the edit rewrites.
const EDITED: std::ops::Range<usize> = 500..503;

fn text(edited: bool) -> String {
    (0..SENTENCES)
        .map(|i| {
            if edited && EDITED.contains(&i) {
                format!("Isle {i} lost its lighthouse to a storm of violet hail.")
            } else {
                format!("Isle {i} keeps a lighthouse of grey stone and goats.")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What one retrieval of every chunk saw of the source's two versions.
#[derive(Debug, Default)]
struct Seen {
    old: bool,
    new: bool,
    results: usize,
}

async fn look(client: &reqwest::Client, url: &str) -> Seen {
    let resp = client
        .post(url)
        .bearer_auth(TOKEN)
        .json(&json!({"query": "a lighthouse of stone", "top_k": 1000}))
        .send()
        .await
        .expect("retrieve sent");
    assert_eq!(resp.status(), StatusCode::OK);
    let answer: Value = resp.json().await.unwrap();
    let results = answer["results"].as_array().unwrap();
    let texts = || results.iter().map(|r| r["chunk_text"].as_str().unwrap());
    Seen {
        old: texts().any(|t| t.starts_with("Isle 501 keeps")),
        new: texts().any(|t| t.contains("violet")),
        results: results.len(),
    }
}

async fn edit_one_paragraph(app: TestApp, fake: FakeGoogle) {
    let world = google_world(&app).await;
    let key_path = format!("/v1/worlds/{world}/sources/by-key?key=isles.md");
    let (status, created) = app
        .put(&key_path, json!({"filename": "isles.md", "text": text(false)}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{created}");
    app.drain().await;
    let chunks = created["job"]["counts"]["total"].as_u64().unwrap();
    assert!((990..=1000).contains(&chunks), "{chunks} chunks");
    let sent_before = fake.stats().sent_texts().len();

    // Four clients retrieve every chunk, over and over, while the edit is embedded and switched.
    let stop = Arc::new(AtomicBool::new(false));
    let url = app.url(&format!("/v1/worlds/{world}/retrieve"));
    let hammers: Vec<_> = (0..4)
        .map(|_| {
            let (stop, url) = (stop.clone(), url.clone());
            tokio::spawn(async move {
                let client = crate::helpers::http_client();
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    seen.push(look(&client, &url).await);
                }
                seen.push(look(&client, &url).await);
                seen
            })
        })
        .collect();
    let (status, replaced) = app
        .put(&key_path, json!({"filename": "isles.md", "text": text(true)}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{replaced}");
    app.drain().await;
    stop.store(true, Ordering::Relaxed);
    let mut seen = Vec::new();
    for hammer in hammers {
        seen.extend(hammer.await.unwrap());
    }

    let sent: Vec<String> = fake.stats().sent_texts()[sent_before..]
        .iter()
        .filter(|t| t.starts_with("Isle"))
        .cloned()
        .collect();
    assert!(
        sent.len() <= EDITED.len() + 2,
        "only the edited chunks (and at most their neighbours) are embedded: {sent:?}"
    );
    assert!(
        sent.iter().filter(|t| t.contains("violet")).count() == EDITED.len(),
        "{sent:?}"
    );
    for look in &seen {
        assert!(look.results > 0, "a retrieval saw none of the source: {seen:?}");
        assert!(!(look.old && look.new), "a retrieval saw both versions: {look:?}");
    }
    assert!(seen.last().unwrap().new, "the last look sees the new version: {seen:?}");
    let (_, source) = app.get(&key_path).await;
    assert_eq!(source["version"], 2, "{source}");
    assert_eq!(source["embedded"], source["chunks"], "{source}");
    let world_body = app.get(&format!("/v1/worlds/{world}")).await.1;
    assert_eq!(
        app.world_points(&world_body).await,
        source["chunks"].as_u64().unwrap(),
        "the old version's points are gone"
    );
    eprintln!(
        "replace_at_scale: {} provider texts for the edit; {} retrievals during it, {} of the old version, {} of the \
         new, the fewest hits {}",
        sent.len(),
        seen.len(),
        seen.iter().filter(|s| s.old).count(),
        seen.iter().filter(|s| s.new).count(),
        seen.iter().map(|s| s.results).min().unwrap_or(0)
    );
    let (status, _) = app.delete(&format!("/v1/worlds/{world}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

fn qdrant_server(test: &str) -> Option<String> {
    let url = std::env::var("QUARRY_TEST_QDRANT_URL").ok();
    if url.is_none() {
        eprintln!(
            "\n*** SKIPPED (Qdrant server): replace_at_scale::{test} — set QUARRY_TEST_QDRANT_URL to run it. ***\n"
        );
    }
    url
}

fn vectors_on(url: Option<String>) -> impl FnOnce(&mut quarry::config::Settings) {
    move |s| {
        if let Some(url) = url {
            s.vectors.kind = quarry::config::VectorKind::Qdrant;
            s.vectors.url = Some(url);
        }
    }
}

#[tokio::test]
async fn a_paragraph_edit_of_a_thousand_chunks_on_sqlite_and_the_embedded_engine() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    edit_one_paragraph(app, fake).await;
}

#[tokio::test]
async fn a_paragraph_edit_of_a_thousand_chunks_on_postgres_and_the_embedded_engine() {
    let Some(db) = PgDatabase::create("replace_at_scale::postgres_embedded").await else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_on(db.url.clone(), on_fake_google(fake.base_url(), |_| {})).await;
    edit_one_paragraph(app, fake).await;
    db.drop_db().await;
}

#[tokio::test]
async fn a_paragraph_edit_of_a_thousand_chunks_on_sqlite_and_a_qdrant_server() {
    let Some(url) = qdrant_server("a_paragraph_edit_of_a_thousand_chunks_on_sqlite_and_a_qdrant_server") else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), vectors_on(Some(url)))).await;
    edit_one_paragraph(app, fake).await;
}

#[tokio::test]
async fn a_paragraph_edit_of_a_thousand_chunks_on_postgres_and_a_qdrant_server() {
    let Some(url) = qdrant_server("a_paragraph_edit_of_a_thousand_chunks_on_postgres_and_a_qdrant_server") else {
        return;
    };
    let Some(db) = PgDatabase::create("replace_at_scale::postgres_server").await else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_on(db.url.clone(), on_fake_google(fake.base_url(), vectors_on(Some(url)))).await;
    edit_one_paragraph(app, fake).await;
    db.drop_db().await;
}
