//! Rebuilding the index without re-embedding: the store keeps every embedded chunk's vector, so
//! a wiped vector folder, a collection deleted from a Qdrant server or a single lost point is
//! written again by repair (at startup or on request) with no provider call, and retrieval
//! answers as it did before.
//!
//! Each case runs on SQLite and on PostgreSQL (loudly skipped without a server); the Qdrant
//! server case runs when `QUARRY_TEST_QDRANT_URL` is set and says SKIPPED otherwise. The model
//! is an OpenAI-compatible one named for the test, so its collection is the test's own (on a
//! shared Qdrant server too).

use std::time::{Duration, Instant};

use quarry::config::Settings;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_providers::FakeOpenAi;
use crate::helpers::{PgDatabase, TestApp, spawn_app_on, spawn_app_with};

const TEXT: &str = "Queen Maren rules the northern isles from a tower of salt. \
    Her fleet guards the cold straits every winter. \
    The river cities of the south trade amber and wool. \
    Their councils elect a speaker every spring. \
    The dragons of the east sleep under the glacier. \
    Miners dig copper in the western hills near gate K-7.";
const CHUNKS: u64 = 6;
const DIMENSIONS: usize = 64;

/// Where the app keeps its data.
#[derive(Clone, Copy, PartialEq)]
enum Stores {
    Sqlite,
    Postgres,
}

/// An app on a fake OpenAI-compatible server serving a model of this test's own, with one
/// hybrid world holding [`TEXT`] fully embedded.
struct Env {
    fake: FakeOpenAi,
    app: TestApp,
    world: Value,
    model: String,
    /// A Qdrant server's gRPC URL when the vectors live there, else the embedded engine.
    qdrant: Option<String>,
    pg: Option<PgDatabase>,
}

/// The app's settings: the fake and its model; `workers` background workers (0: the test
/// drains by hand).
fn settings(base: String, model: String, qdrant: Option<String>, workers: usize) -> impl FnOnce(&mut Settings) {
    move |s| {
        s.providers.openai.base_url = base;
        s.providers.openai.keys = vec![secrecy::SecretString::from("sk-test")];
        s.providers.openai.models.push(quarry::config::ExtraModel {
            name: model,
            dimensions: DIMENSIONS as u32,
            max_input_tokens: 2048,
            dimensions_adjustable: false,
        });
        s.embedding.workers = workers;
        if let Some(url) = qdrant {
            s.vectors.kind = quarry::config::VectorKind::Qdrant;
            s.vectors.url = Some(url);
        }
    }
}

impl Env {
    /// `None` when the backend this case needs is not available (said loudly).
    async fn start(test: &str, stores: Stores, qdrant: Option<String>) -> Option<Env> {
        let pg = match stores {
            Stores::Sqlite => None,
            Stores::Postgres => Some(PgDatabase::create(test).await?),
        };
        let model = format!("kept-{}", uuid::Uuid::new_v4().simple());
        let fake = FakeOpenAi::start(&["sk-test"]).await;
        fake.add_model(&model, DIMENSIONS, false);
        let tweak = settings(fake.base_url(), model.clone(), qdrant.clone(), 0);
        let app = match &pg {
            Some(db) => spawn_app_on(db.url.clone(), tweak).await,
            None => spawn_app_with(tweak).await,
        };
        let (status, world) = app
            .post(
                "/v1/worlds",
                json!({"name": "Isles", "embedding": {"provider": "openai", "model": model},
                       "chunking": {"max_tokens": 16, "overlap_tokens": 0}, "hybrid": true}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{world}");
        let env = Env {
            fake,
            app,
            world,
            model,
            qdrant,
            pg,
        };
        let (status, accepted) = env
            .app
            .post(
                &format!("/v1/worlds/{}/sources", env.world_id()),
                json!({"filename": "isles.txt", "text": TEXT}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
        env.app.drain().await;
        assert_eq!(env.stats().await["embedded"], CHUNKS);
        assert_eq!(env.app.world_points(&env.world).await, CHUNKS);
        env.fake.reset_stats();
        Some(env)
    }

    fn world_id(&self) -> String {
        self.world["id"].as_str().unwrap().to_owned()
    }

    fn collection(&self) -> String {
        self.world["collection"].as_str().unwrap().to_owned()
    }

    async fn stats(&self) -> Value {
        let (_, world) = self.app.get(&format!("/v1/worlds/{}", self.world_id())).await;
        world["stats"].clone()
    }

    /// Stops the app, runs `lose` on the stopped app (what is lost while the process is down),
    /// and starts it again on the same data with the defaults that matter here: background
    /// workers (which would embed anything requeued) and the startup repair.
    async fn restart_after(self, lose: impl AsyncFnOnce(&TestApp)) -> Env {
        let Env {
            fake,
            mut app,
            world,
            model,
            qdrant,
            pg,
        } = self;
        app.stop().await;
        lose(&app).await;
        let app = app
            .restart_with(settings(fake.base_url(), model.clone(), qdrant.clone(), 2))
            .await;
        Env {
            fake,
            app,
            world,
            model,
            qdrant,
            pg,
        }
    }

    /// Waits until the world has its points back (20 s at most).
    async fn wait_for_points(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.app.world_points(&self.world).await < CHUNKS {
            assert!(Instant::now() < deadline, "the world's points never came back");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The answers the tests compare before and after the loss: a dense and a hybrid search,
    /// every chunk ranked, as (text, score) pairs.
    async fn answers(&self) -> Vec<Vec<(String, f64)>> {
        let mut all = Vec::new();
        for (query, mode) in [("who rules the isles?", "dense"), ("gate K-7 copper", "hybrid")] {
            let (status, answer) = self
                .app
                .post(
                    &format!("/v1/worlds/{}/retrieve", self.world_id()),
                    json!({"query": query, "mode": mode, "top_k": CHUNKS}),
                )
                .await;
            assert_eq!(status, StatusCode::OK, "{answer}");
            assert_eq!(answer["warnings"], json!([]), "{answer}");
            let results: Vec<(String, f64)> = answer["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r["chunk_text"].as_str().unwrap().to_owned(),
                        r["score"].as_f64().unwrap(),
                    )
                })
                .collect();
            assert!(!results.is_empty(), "{answer}");
            all.push(results);
        }
        all
    }

    /// What the provider was asked since the last reset: only the queries' own texts.
    fn assert_only_queries_were_embedded(&self) {
        let sent = self.fake.stats().sent_texts();
        assert_eq!(
            sent,
            ["who rules the isles?", "gate K-7 copper"],
            "no chunk was embedded again"
        );
    }

    async fn finish(mut self) {
        self.app.stop().await;
        if let Some(db) = self.pg.take() {
            db.drop_db().await;
        }
    }
}

/// The embedded vector folder is wiped while the process is down; the restarted process's
/// startup repair makes the collection again and writes every point from the kept vectors.
async fn a_wiped_vector_folder_is_rebuilt_at_restart_without_a_provider_call(stores: Stores) {
    let test = "kept_vectors::a_wiped_vector_folder_is_rebuilt_at_restart_without_a_provider_call";
    let Some(env) = Env::start(test, stores, None).await else {
        return;
    };
    let before = env.answers().await;
    env.fake.reset_stats();

    let env = env
        .restart_after(async |app: &TestApp| {
            let folder = app.vectors_path();
            assert!(folder.is_dir(), "{folder:?}");
            std::fs::remove_dir_all(&folder).unwrap();
        })
        .await;
    env.wait_for_points().await;
    assert_eq!(env.fake.stats().requests, 0, "rebuilt without asking the provider");
    assert_eq!(env.stats().await["embedded"], CHUNKS);
    assert_eq!(env.stats().await["pending"], 0);

    assert_eq!(env.answers().await, before, "the same answers, scores included");
    env.assert_only_queries_were_embedded();
    env.finish().await;
}

#[tokio::test]
async fn a_wiped_vector_folder_is_rebuilt_at_restart_without_a_provider_call_on_sqlite() {
    a_wiped_vector_folder_is_rebuilt_at_restart_without_a_provider_call(Stores::Sqlite).await;
}

#[tokio::test]
async fn a_wiped_vector_folder_is_rebuilt_at_restart_without_a_provider_call_on_postgres() {
    a_wiped_vector_folder_is_rebuilt_at_restart_without_a_provider_call(Stores::Postgres).await;
}

/// One point lost from a running process: a repair request writes it again from its kept
/// vector; the repair job has nothing to embed and says what it restored.
async fn a_lost_point_is_restored_by_repair_without_a_provider_call(stores: Stores) {
    let test = "kept_vectors::a_lost_point_is_restored_by_repair_without_a_provider_call";
    let Some(env) = Env::start(test, stores, None).await else {
        return;
    };
    let before = env.answers().await;
    let (_, answer) = env
        .app
        .post(
            &format!("/v1/worlds/{}/retrieve", env.world_id()),
            json!({"query": "dragons under the glacier", "top_k": 1}),
        )
        .await;
    let lost = uuid::Uuid::parse_str(answer["results"][0]["point_id"].as_str().unwrap()).unwrap();
    env.app
        .state
        .vectors
        .delete_points(&env.collection(), &[lost])
        .await
        .unwrap();
    assert_eq!(env.app.world_points(&env.world).await, CHUNKS - 1);
    env.fake.reset_stats();

    let (status, job) = env
        .app
        .post(&format!("/v1/worlds/{}/repair", env.world_id()), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let job = job["id"].as_str().unwrap().to_owned();
    // The job ends by itself (nothing to embed), or has queued the slot for the workers.
    let deadline = Instant::now() + Duration::from_secs(10);
    let done = loop {
        let (_, done) = env.app.get(&format!("/v1/jobs/{job}")).await;
        if done["status"] != "running" || done["counts"]["total"] != 0 {
            break done;
        }
        assert!(Instant::now() < deadline, "the repair never ended: {done}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(done["counts"]["total"], 0, "nothing was queued for embedding: {done}");
    assert_eq!(done["status"], "completed", "{done}");
    let events = env.app.job_events(&job).await;
    let summary = events
        .iter()
        .find(|(_, kind, _)| kind == "progress")
        .map(|(_, _, data)| data.clone())
        .expect("the repair's summary");
    assert_eq!(summary["points_restored"], 1, "{summary}");
    assert_eq!(summary["missing_points_requeued"], 0, "{summary}");
    assert_eq!(env.app.world_points(&env.world).await, CHUNKS);
    assert_eq!(env.fake.stats().requests, 0, "restored without asking the provider");

    assert_eq!(env.answers().await, before);
    env.assert_only_queries_were_embedded();
    env.finish().await;
}

#[tokio::test]
async fn a_lost_point_is_restored_by_repair_without_a_provider_call_on_sqlite() {
    a_lost_point_is_restored_by_repair_without_a_provider_call(Stores::Sqlite).await;
}

#[tokio::test]
async fn a_lost_point_is_restored_by_repair_without_a_provider_call_on_postgres() {
    a_lost_point_is_restored_by_repair_without_a_provider_call(Stores::Postgres).await;
}

/// The server suite's variant: the world's collection is deleted from the Qdrant server while
/// quarry is down; the restart makes it again and fills it from the kept vectors.
#[tokio::test]
async fn a_collection_deleted_from_a_qdrant_server_is_rebuilt_at_restart_without_a_provider_call() {
    let Ok(url) = std::env::var("QUARRY_TEST_QDRANT_URL") else {
        eprintln!(
            "\n*** SKIPPED (Qdrant server): kept_vectors::a_collection_deleted_from_a_qdrant_server_is_rebuilt_\
             at_restart_without_a_provider_call — set QUARRY_TEST_QDRANT_URL (gRPC, e.g. http://127.0.0.1:6334) \
             to run it. ***\n"
        );
        return;
    };
    let test = "kept_vectors::a_collection_deleted_from_a_qdrant_server_is_rebuilt_at_restart_without_a_provider_call";
    let env = Env::start(test, Stores::Sqlite, Some(url.clone()))
        .await
        .expect("SQLite needs no server");
    // The collection is named after this test's own model: deleting it touches nothing else.
    let _cleanup = DropCollection {
        url: url.clone(),
        name: env.collection(),
    };
    let before = env.answers().await;
    env.fake.reset_stats();

    let collection = env.collection();
    let env = env
        .restart_after(async |_: &TestApp| {
            let client = qdrant(&url);
            assert!(client.collection_exists(&collection).await.unwrap());
            client.delete_collection(&collection).await.unwrap();
        })
        .await;
    env.wait_for_points().await;
    assert_eq!(env.fake.stats().requests, 0, "rebuilt without asking the provider");
    assert_eq!(env.stats().await["embedded"], CHUNKS);

    assert_eq!(env.answers().await, before, "the same answers, scores included");
    env.assert_only_queries_were_embedded();
    env.finish().await;
}

fn qdrant(url: &str) -> qdrant_client::Qdrant {
    qdrant_client::Qdrant::from_url(url)
        .api_key(std::env::var("QUARRY_TEST_QDRANT_API_KEY").ok())
        .skip_compatibility_check()
        .build()
        .unwrap()
}

/// Deletes the test's collection from the server when the test ends, passed or failed.
struct DropCollection {
    url: String,
    name: String,
}

impl Drop for DropCollection {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        // Drop cannot await: clean up on a throwaway runtime in its own thread.
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move { qdrant(&url).delete_collection(name).await.map(|_| ()) })
        });
        if let Ok(Err(err)) = cleanup.join() {
            eprintln!("could not delete the test collection {}: {err}", self.name);
        }
    }
}
