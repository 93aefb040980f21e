//! `spawn_app()`: the real application on an ephemeral port with its own SQLite file and
//! vector folder (or its own Postgres database), and a small HTTP client for it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use quarry::api::AppState;
use quarry::app::App;
use quarry::config::Settings;
use quarry::deps::Deps;
use quarry::domain::WorldId;
use quarry::vector::PointFilter;
use quarry::workers::embedding::{EmbeddingWorkers, Step};
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const TOKEN: &str = "test-token";

pub struct TestApp {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    /// The services the handlers call.
    pub state: AppState,
    /// What they were built from: the real stores, the job engine, …
    pub deps: Deps,
    workers: EmbeddingWorkers,
    pub dir: Arc<tempfile::TempDir>,
    store_url: String,
    shutdown: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<std::io::Result<()>>>,
}

/// Settings for a test app whose files live in `dir`.
pub fn test_settings(dir: &std::path::Path, store_url: &str) -> Settings {
    let mut settings = Settings::default();
    settings.server.addr = SocketAddr::from(([127, 0, 0, 1], 0));
    settings.server.shutdown_timeout_s = 10;
    settings.auth.tokens = vec![SecretString::from(TOKEN)];
    settings.store.url = SecretString::from(store_url.to_owned());
    settings.vectors.path = dir.join("vectors");
    settings
}

/// Settings for an app on the fake Google server at `base` (key `key-a`), without background
/// workers (tests drain the queue themselves), then `tweak`.
pub fn on_fake_google(base: String, tweak: impl FnOnce(&mut Settings)) -> impl FnOnce(&mut Settings) {
    move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a")];
        s.embedding.workers = 0;
        tweak(s);
    }
}

/// A Google world whose chunks are one short sentence each.
pub async fn google_world(app: &TestApp) -> String {
    id(&app
        .create_google_world("Aerth", serde_json::json!({"chunking": sentence_chunks()}))
        .await)
}

/// Chunking that makes every short sentence a chunk of its own.
pub fn sentence_chunks() -> Value {
    serde_json::json!({"max_tokens": 16, "overlap_tokens": 0})
}

/// The `id` of an object the API answered.
pub fn id(v: &Value) -> String {
    v["id"].as_str().expect("an id").to_owned()
}

/// The id of a world the API answered, typed.
pub fn world_id(world: &Value) -> WorldId {
    WorldId(uuid::Uuid::parse_str(&id(world)).expect("a world id"))
}

/// How many `warning` events with `code` are among `events`.
pub fn warning_count(events: &[(i64, String, Value)], code: &str) -> usize {
    (events.iter())
        .filter(|(_, kind, data)| kind == "warning" && data["code"] == code)
        .count()
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

pub async fn spawn_app_with(tweak: impl FnOnce(&mut Settings)) -> TestApp {
    let dir = Arc::new(tempfile::tempdir().expect("temp dir"));
    let url = format!("sqlite://{}", dir.path().join("data").join("quarry.db").display());
    start(dir, url, tweak).await
}

/// The real app on a store URL of the caller's choosing (e.g. a fresh Postgres database).
pub async fn spawn_app_on(store_url: String, tweak: impl FnOnce(&mut Settings)) -> TestApp {
    let dir = Arc::new(tempfile::tempdir().expect("temp dir"));
    start(dir, store_url, tweak).await
}

/// Replicas of one deployment in this process: `n` apps on one store (a Postgres database),
/// sharing one embedded vector store as replicas share one Qdrant.
pub async fn spawn_replicas(store_url: &str, n: usize, tweak: impl Fn(&mut Settings)) -> Vec<TestApp> {
    let (dir, vectors) = shared_vectors();
    let mut apps = Vec::with_capacity(n);
    for _ in 0..n {
        apps.push(start_on(dir.clone(), store_url.to_owned(), Some(vectors.clone()), &tweak).await);
    }
    apps
}

/// One embedded vector store for several replicas, in a folder of its own.
pub fn shared_vectors() -> (Arc<tempfile::TempDir>, Arc<dyn quarry::vector::VectorRepo>) {
    let dir = Arc::new(tempfile::tempdir().expect("temp dir"));
    let vectors = quarry::vector::edge::EdgeRepo::open(&dir.path().join("vectors")).expect("shared vectors");
    (dir, Arc::new(vectors))
}

/// A replica on a runtime of its own, so that it can be killed as `kill -9` would: its tasks
/// stop where they are, nothing is given back, its heartbeat stops.
pub struct KillableReplica {
    pub addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl KillableReplica {
    pub async fn start(
        store_url: &str,
        vectors: Arc<dyn quarry::vector::VectorRepo>,
        dir: &std::path::Path,
        tweak: impl FnOnce(&mut Settings),
    ) -> KillableReplica {
        let mut settings = test_settings(dir, store_url);
        tweak(&mut settings);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let (tx, rx) = oneshot::channel();
        runtime.spawn(async move {
            let app = App::build_sharing(settings, vectors).await.expect("app builds");
            let _ = tx.send(app.local_addr());
            let _ = app.run_until(std::future::pending()).await;
        });
        let addr = rx.await.expect("the replica started");
        KillableReplica {
            addr,
            runtime: Some(runtime),
        }
    }

    /// Stops every task of the replica where it is, without any shutdown step.
    pub fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for KillableReplica {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn start(dir: Arc<tempfile::TempDir>, store_url: String, tweak: impl FnOnce(&mut Settings)) -> TestApp {
    start_on(dir, store_url, None, tweak).await
}

/// An app on the files of an app stopped and dropped earlier (its `dir` and store URL), e.g.
/// after a command-line tool worked on them.
pub async fn spawn_app_in(
    dir: Arc<tempfile::TempDir>,
    store_url: String,
    tweak: impl FnOnce(&mut Settings),
) -> TestApp {
    start(dir, store_url, tweak).await
}

/// One replica on `vectors`, shared with others (see [`shared_vectors`]).
pub async fn spawn_app_sharing(
    store_url: &str,
    dir: Arc<tempfile::TempDir>,
    vectors: Arc<dyn quarry::vector::VectorRepo>,
    tweak: impl FnOnce(&mut Settings),
) -> TestApp {
    start_on(dir, store_url.to_owned(), Some(vectors), tweak).await
}

async fn start_on(
    dir: Arc<tempfile::TempDir>,
    store_url: String,
    vectors: Option<Arc<dyn quarry::vector::VectorRepo>>,
    tweak: impl FnOnce(&mut Settings),
) -> TestApp {
    let mut settings = test_settings(dir.path(), &store_url);
    tweak(&mut settings);
    let app = match vectors {
        Some(vectors) => App::build_sharing(settings, vectors).await,
        None => App::build(settings).await,
    }
    .expect("app builds");
    let addr = app.local_addr();
    let (state, deps, workers) = (app.state(), app.deps(), app.workers());
    let (tx, rx) = oneshot::channel::<()>();
    let handle = tokio::spawn(app.run_until(async move {
        let _ = rx.await;
    }));
    TestApp {
        addr,
        client: http_client(),
        state,
        deps,
        workers,
        dir,
        store_url,
        shutdown: Some(tx),
        handle: Some(handle),
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Stops the app the way SIGTERM would and waits until it has released its files.
    pub async fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(handle) = self.handle.take() {
            handle.await.expect("server task").expect("server ran cleanly");
        }
    }

    /// Stops this app and starts a new process-equivalent on the same files.
    pub async fn restart(self) -> TestApp {
        self.restart_with(|_| {}).await
    }

    /// [`TestApp::restart`] with settings of the caller's choosing for the new process.
    pub async fn restart_with(mut self, tweak: impl FnOnce(&mut Settings)) -> TestApp {
        self.stop().await;
        let dir = self.dir.clone();
        let url = self.store_url.clone();
        // Drop every handle on the old stores (the embedded vector folder stays locked while
        // any handle lives, as it would until the old process exits).
        drop(self);
        start(dir, url, tweak).await
    }

    /// The store URL this app runs on (tests reach under the API with it, e.g. to corrupt a row).
    pub fn store_url(&self) -> &str {
        &self.store_url
    }

    pub fn vectors_path(&self) -> PathBuf {
        self.dir.path().join("vectors")
    }

    pub async fn request(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        self.request_as(TOKEN, method, path, body).await
    }

    /// [`TestApp::request`] bearing `token`.
    pub async fn request_as(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.client.request(method, self.url(path)).bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("request sent");
        read(resp).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.request(reqwest::Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.request(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.request(reqwest::Method::PUT, path, Some(body)).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.request(reqwest::Method::PATCH, path, Some(body)).await
    }

    /// Adds a plain-text source to `world` through the JSON route; asserts the 202 and
    /// returns its body (`source`, `job`).
    pub async fn add_text(&self, world: &str, filename: &str, text: &str) -> Value {
        let (status, accepted) = self
            .post(
                &format!("/v1/worlds/{world}/sources"),
                serde_json::json!({"filename": filename, "text": text}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
        accepted
    }

    /// A source's stored text (`GET …/sources/{source}/text`); asserts the 200.
    pub async fn source_text(&self, world: &str, source: &str) -> String {
        let response = self
            .client
            .get(self.url(&format!("/v1/worlds/{world}/sources/{source}/text")))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("request sent");
        assert_eq!(response.status(), StatusCode::OK);
        response.text().await.expect("the text")
    }

    /// Uploads `bytes` as the multipart field `file` named `filename`.
    pub async fn upload(&self, path: &str, filename: &str, bytes: Vec<u8>) -> (StatusCode, Value) {
        let part = reqwest::multipart::Part::bytes(bytes).file_name(filename.to_owned());
        let resp = self
            .client
            .post(self.url(path))
            .bearer_auth(TOKEN)
            .multipart(reqwest::multipart::Form::new().part("file", part))
            .send()
            .await
            .expect("request sent");
        read(resp).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.request(reqwest::Method::DELETE, path, None).await
    }

    /// Creates a world on the local model (needs no key) and returns its JSON.
    pub async fn create_local_world(&self, name: &str) -> Value {
        let (status, body) = self
            .post(
                "/v1/worlds",
                serde_json::json!({"name": name, "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body
    }

    /// The entry of `provider` (`"google"`, `"openai"`, …) in `GET /v1/providers`.
    pub async fn provider(&self, provider: &str) -> Value {
        let (status, body) = self.get("/v1/providers").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["provider"] == provider)
            .unwrap_or_else(|| panic!("no {provider} in {body}"))
            .clone()
    }

    /// How many points the vector store holds for `world` (its JSON as the API returns it),
    /// read under the API.
    pub async fn world_points(&self, world: &Value) -> u64 {
        let wid = WorldId(uuid::Uuid::parse_str(world["id"].as_str().unwrap()).unwrap());
        self.deps
            .vectors
            .count(world["collection"].as_str().unwrap(), PointFilter::world(wid))
            .await
            .unwrap()
    }
}

/// The embedding workers, driven by hand (tests run apps without background workers and step
/// the queue themselves). The only place the tests name the worker type.
impl TestApp {
    /// Waits for the re-ingest preparations under way.
    pub async fn wait_prepared(&self) {
        self.deps.engine.prepared().await;
    }

    /// Waits for re-ingest preparations, runs worker steps until nothing is left that can be
    /// done now and finishes stalled jobs; returns how many entries were embedded.
    pub async fn drain(&self) -> u64 {
        drain(&self.workers).await
    }

    /// [`TestApp::drain`] on a task of its own, for a test that acts while it runs.
    pub fn spawn_drain(&self) -> JoinHandle<u64> {
        let workers = self.workers.clone();
        tokio::spawn(async move { drain(&workers).await })
    }

    /// One worker step as `owner`: claims one set of entries and processes it.
    pub async fn work_step(&self, owner: &str) -> Step {
        work_step(&self.workers, owner).await
    }

    /// [`TestApp::work_step`] on a task of its own, for a test that acts while it runs.
    pub fn spawn_work_step(&self, owner: &str) -> JoinHandle<Step> {
        let workers = self.workers.clone();
        let owner = owner.to_owned();
        tokio::spawn(async move { work_step(&workers, &owner).await })
    }
}

async fn drain(workers: &EmbeddingWorkers) -> u64 {
    workers
        .drain()
        .await
        .expect("the workers drain the queue (store error)")
}

async fn work_step(workers: &EmbeddingWorkers, owner: &str) -> Step {
    workers.run_once(owner).await.expect("a worker step (store error)")
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Status and JSON body (`Value::Null` when the body is empty, a string when it is not JSON).
pub async fn read(resp: reqwest::Response) -> (StatusCode, Value) {
    let status = resp.status();
    let text = resp.text().await.expect("body read");
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, body)
}

/// Asserts the contract's error shape and code; returns the error object.
/// The events of a server-sent event stream: (id, event, data as JSON).
pub fn parse_sse(body: &str) -> Vec<(i64, String, Value)> {
    body.split("\n\n")
        .filter_map(|block| {
            let mut id = None;
            let mut kind = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("event:") {
                    kind = Some(v.trim().to_owned());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data = serde_json::from_str(v.trim()).ok();
                }
            }
            Some((id?, kind?, data?))
        })
        .collect()
}

impl TestApp {
    /// The whole event stream of a job, which must end (after its terminal status) within
    /// ten seconds.
    pub async fn job_events(&self, job_id: &str) -> Vec<(i64, String, Value)> {
        let resp = self
            .client
            .get(self.url(&format!("/v1/jobs/{job_id}/events")))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let body = tokio::time::timeout(std::time::Duration::from_secs(10), resp.text())
            .await
            .expect("the event stream ends")
            .unwrap();
        parse_sse(&body)
    }
}

impl TestApp {
    /// The events a job has so far, read from the store (for a job that has not ended, whose
    /// stream would not end either).
    pub async fn job_events_now(&self, job_id: &str) -> Vec<(i64, String, Value)> {
        let job = quarry::domain::JobId(job_id.parse().expect("a job id"));
        let events = self
            .deps
            .store
            .job_events_after(job, 0, 10_000)
            .await
            .expect("job events");
        events
            .into_iter()
            .map(|e| {
                (
                    e.id,
                    e.kind.as_str().to_owned(),
                    serde_json::from_str(&e.data).expect("JSON event"),
                )
            })
            .collect()
    }
}

/// The next 08:00 UTC strictly after `now` (the daily reset the scheduler waits for).
pub fn next_daily_reset(now: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
    let today = now.date_naive().and_hms_opt(8, 0, 0).unwrap().and_utc();
    if today > now {
        today
    } else {
        today + chrono::Duration::days(1)
    }
}

pub fn assert_error(status: StatusCode, body: &Value, expected_status: StatusCode, code: &str) -> Value {
    assert_eq!(status, expected_status, "unexpected status; body: {body}");
    let error = body
        .get("error")
        .unwrap_or_else(|| panic!("no `error` object in {body}"));
    assert_eq!(error["code"], code, "unexpected code in {body}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "empty message in {body}"
    );
    error.clone()
}

/// A fresh Postgres database for one test, dropped afterwards. `None` (with a loud message)
/// when no server is reachable, unless `QUARRY_TEST_REQUIRE_POSTGRES=1`, which turns that into
/// a failure (CI sets it: there, Postgres must be tested).
pub struct PgDatabase {
    pub url: String,
    admin_url: String,
    name: String,
}

impl PgDatabase {
    pub async fn create(test: &str) -> Option<PgDatabase> {
        use sqlx::Connection as _;
        let admin_url = match std::env::var("QUARRY_TEST_POSTGRES_URL") {
            Ok(url) if !url.is_empty() => url,
            _ => return skip(test, "QUARRY_TEST_POSTGRES_URL is not set"),
        };
        let mut conn = match sqlx::PgConnection::connect(&admin_url).await {
            Ok(conn) => conn,
            Err(err) => return skip(test, &format!("cannot connect to QUARRY_TEST_POSTGRES_URL: {err}")),
        };
        let name = format!("quarry_test_{}", uuid::Uuid::new_v4().simple());
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .expect("create test database");
        let _ = conn.close().await;
        let after_scheme = admin_url.find("://").map_or(0, |i| i + 3);
        let base = match admin_url[after_scheme..].find('/') {
            Some(i) => &admin_url[..after_scheme + i],
            None => admin_url.as_str(),
        };
        let url = format!("{base}/{name}");
        Some(PgDatabase { url, admin_url, name })
    }

    /// Drops the database (call at the end of the test; the app must have been stopped).
    pub async fn drop_db(self) {
        use sqlx::Connection as _;
        if let Ok(mut conn) = sqlx::PgConnection::connect(&self.admin_url).await {
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            )))
            .execute(&mut conn)
            .await;
        }
    }
}

fn skip<T>(test: &str, why: &str) -> Option<T> {
    if std::env::var("QUARRY_TEST_REQUIRE_POSTGRES").is_ok_and(|v| v == "1") {
        panic!("{test}: Postgres is required (QUARRY_TEST_REQUIRE_POSTGRES=1) but {why}");
    }
    eprintln!("\n*** SKIPPED (Postgres): {test} — {why}. Set QUARRY_TEST_POSTGRES_URL to run it. ***\n");
    None
}

/// An HTTP client for talking to the app (quarry's TLS backend needs its crypto provider
/// installed before any reqwest client is built).
pub fn http_client() -> reqwest::Client {
    quarry::outbound::install_tls_provider();
    reqwest::Client::new()
}

/// An app on the Google provider at `google_base_url` (key `key-a`, no background workers)
/// whose vector store is a Qdrant server that cannot be reached, with one world and one source
/// of one chunk written under the API (creating them through it needs the vector store).
pub async fn spawn_app_with_unreachable_vectors(
    google_base_url: String,
) -> (
    TestApp,
    quarry::domain::World,
    quarry::domain::Source,
    quarry::domain::Job,
) {
    use quarry::domain::{
        ChunkingProfile, EmbeddingProfile, JobId, NewChunk, NewSource, NewWorld, ProviderKind, RunId, SourceId, WorldId,
    };
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let app = spawn_app_with(move |s| {
        s.providers.google.base_url = google_base_url;
        s.providers.google.keys = vec![SecretString::from("key-a")];
        s.providers.google.scheduling.query_wait_s = 1;
        s.embedding.workers = 0;
        s.vectors.kind = quarry::config::VectorKind::Qdrant;
        s.vectors.url = Some(format!("http://127.0.0.1:{port}"));
    })
    .await;
    let store = &app.deps.store;
    let world = store
        .create_world(NewWorld {
            id: WorldId::new(),
            name: "Offline".into(),
            embedding: EmbeddingProfile {
                provider: ProviderKind::Google,
                model: "gemini-embedding-001".into(),
                dimensions: 768,
            },
            chunking: ChunkingProfile {
                max_tokens: 64,
                overlap_tokens: 0,
                parent_max_tokens: 256,
                context_prefix: false,
            },
            hybrid: false,
            run: RunId::new(),
            now: chrono::Utc::now(),
        })
        .await
        .expect("world stored");
    let text = "Queen Maren rules.";
    let (source, job) = store
        .add_source(
            &NewSource {
                key: None,
                id: SourceId::new(),
                world_id: world.id,
                run: world.active_run,
                filename: "a.txt".into(),
                content_type: "text/plain".into(),
                text: text.into(),
                details: Default::default(),
                now: chrono::Utc::now(),
            },
            vec![NewChunk {
                chunk_number: 0,
                char_start: 0,
                char_end: text.chars().count() as u64,
                token_count: 4,
                chunk_text: text.into(),
                overlap_text: String::new(),
                page: None,
                embed_prefix: String::new(),
                embed_prefix_tokens: 0,
            }],
            JobId::new(),
        )
        .await
        .expect("source stored");
    (app, world, source, job)
}

impl TestApp {
    /// Creates a world on the fake Google provider (`gemini-embedding-001`, 768 dimensions)
    /// named `name`, with `extra`'s fields (`chunking`, `hybrid`, …) added to the body; answers
    /// its JSON.
    pub async fn create_google_world(&self, name: &str, extra: Value) -> Value {
        let mut body = serde_json::json!({"name": name,
            "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768}});
        if let Value::Object(fields) = extra {
            body.as_object_mut().expect("an object").extend(fields);
        }
        let (status, world) = self.post("/v1/worlds", body).await;
        assert_eq!(status, StatusCode::CREATED, "{world}");
        world
    }

    /// `GET /v1/jobs/{id}`, which must answer 200.
    pub async fn job(&self, id: &str) -> Value {
        let (status, job) = self.get(&format!("/v1/jobs/{id}")).await;
        assert_eq!(status, StatusCode::OK, "{job}");
        job
    }

    /// The stored texts of a source's chunks, in order.
    pub async fn chunk_texts(&self, world: &str, source: &str) -> Vec<String> {
        let (status, body) = self
            .get(&format!("/v1/worlds/{world}/sources/{source}/chunks?limit=1000"))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        (body["chunks"].as_array().expect("chunks").iter())
            .map(|c| c["chunk_text"].as_str().expect("a chunk text").to_owned())
            .collect()
    }
}
