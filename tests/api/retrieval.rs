//! Retrieval: `POST /v1/worlds/{id}/retrieve` against the real app, a fake Google server that
//! counts calls and records task types, and the embedded vector store.
//!
//! The tests are in the submodules, by topic; this file holds their shared setup (also used by
//! the re-ingest and repair tests).

mod context;
mod explain;
mod failures;
mod filters;
mod full_context;
mod fusion;
mod head_starts;
mod parents;
mod query_limits;
mod ranking;
mod repairs;
mod rerank;
mod settings;

use quarry::config::Settings;
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TestApp, on_fake_google, spawn_app_with};

/// One sentence per chunk at `max_tokens: 16`.
pub const ISLES: &str = "Queen Maren rules the northern isles from a tower of salt. \
    Her fleet guards the cold straits every winter. \
    The river cities of the south trade amber and wool. \
    Their councils elect a speaker every spring. \
    The dragons of the east sleep under the glacier. \
    Miners dig copper in the western hills.";

pub struct Setup {
    pub fake: FakeGoogle,
    pub app: TestApp,
    pub world: Value,
}

impl Setup {
    pub fn world_id(&self) -> String {
        id(&self.world)
    }

    pub fn path(&self) -> String {
        format!("/v1/worlds/{}/retrieve", self.world_id())
    }

    pub async fn retrieve(&self, body: Value) -> (StatusCode, Value) {
        self.app.post(&self.path(), body).await
    }

    /// Retrieves and expects 200.
    pub async fn ok(&self, body: Value) -> Value {
        let (status, answer) = self.retrieve(body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        answer
    }

    pub async fn add(&self, filename: &str, text: &str) -> Value {
        add_to(&self.app, &self.world, filename, text).await
    }

    /// Adds sources, embeds everything and forgets the provider calls made so far.
    pub async fn ingest(&self, sources: &[(&str, &str)]) {
        for (filename, text) in sources {
            self.add(filename, text).await;
        }
        self.app.drain().await;
        self.fake.reset_stats();
    }

    pub async fn stats(&self) -> Value {
        let (_, world) = self.app.get(&format!("/v1/worlds/{}", self.world_id())).await;
        world["stats"].clone()
    }

    pub async fn point_count(&self) -> u64 {
        self.app.world_points(&self.world).await
    }

    /// Runs SQL on the app's SQLite file, under the API (to corrupt what the API never would).
    pub async fn sql(&self, statement: &'static str, binds: &[&str]) {
        use sqlx::ConnectOptions as _;
        let options: sqlx::sqlite::SqliteConnectOptions = self.app.store_url().parse().unwrap();
        let mut conn = options.foreign_keys(true).connect().await.unwrap();
        let mut query = sqlx::query(statement);
        for b in binds {
            query = query.bind(*b);
        }
        let done = query.execute(&mut conn).await.unwrap();
        assert!(done.rows_affected() > 0, "`{statement}` changed nothing");
    }

    /// Rewrites the text (and hash) of the chunk whose text is `old` under the API, so that its
    /// point was made from other text.
    pub async fn rewrite_chunk(&self, old: &str, new: &str) {
        let hash = hex::encode(sha2::Sha256::digest(new.as_bytes()));
        self.sql(
            "UPDATE chunks SET chunk_text = ?, text_sha256 = ? WHERE chunk_text = ?",
            &[new, &hash, old],
        )
        .await;
    }
}

pub fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_owned()
}

async fn add_to(app: &TestApp, world: &Value, filename: &str, text: &str) -> Value {
    let (status, accepted) = app
        .post(
            &format!("/v1/worlds/{}/sources", id(world)),
            json!({"filename": filename, "text": text}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    accepted
}

async fn create_world(app: &TestApp, name: &str, hybrid: bool) -> Value {
    let extra = json!({"chunking": crate::helpers::sentence_chunks(), "hybrid": hybrid});
    app.create_google_world(name, extra).await
}

/// A fake Google server with one key, an app on it without background workers (tests drain
/// the queue themselves) and a world with one sentence per chunk.
async fn setup_with(hybrid: bool) -> Setup {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let base = fake.base_url();
    let app = spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a")];
        s.providers.google.scheduling.acquire_timeout_s = 1;
        s.providers.google.scheduling.query_wait_s = 1;
        s.embedding.workers = 0;
    })
    .await;
    let world = create_world(&app, "Aerth", hybrid).await;
    Setup { fake, app, world }
}

pub async fn setup() -> Setup {
    setup_with(false).await
}

/// A fake Google server with one key, an app on it with [`on_fake_google`]'s settings and
/// `tweak`, and a dense world named `name` with one sentence per chunk.
async fn setup_on_fake_google(name: &str, tweak: impl FnOnce(&mut Settings)) -> Setup {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), tweak)).await;
    let world = create_world(&app, name, false).await;
    Setup { fake, app, world }
}

/// The results' scores, in order.
pub fn scores(answer: &Value) -> Vec<f64> {
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["score"].as_f64().unwrap())
        .collect()
}

pub fn texts(answer: &Value) -> Vec<String> {
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["chunk_text"].as_str().unwrap().to_owned())
        .collect()
}

fn warning_codes(answer: &Value) -> Vec<String> {
    answer["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap().to_owned())
        .collect()
}

pub fn sentence(n: usize) -> String {
    let sentences: Vec<&str> = ISLES.split_inclusive(". ").map(str::trim).collect();
    sentences[n].to_owned()
}
