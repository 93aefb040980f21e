//! The sources API beyond adding: the stored text, the chunk listing with its paging, deleting a
//! source end to end (rows, points, jobs, stats, retrieval) and the body limit on uploads. The
//! real app runs against a fake Google server and the embedded vector store; tests drain the
//! embedding queue themselves.

use crate::helpers::id;
use std::time::Duration;

use quarry::domain::{SourceId, WorldId};
use quarry::vector::PointFilter;
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::fake_providers::{Failure, FakeGoogle};
use crate::helpers::{PgDatabase, TOKEN, TestApp, assert_error, read, spawn_app_on, spawn_app_with};

/// About one sentence per chunk at `max_tokens: 16`, with characters of one to four UTF-8 bytes
/// so char offsets and byte offsets differ.
const BOOK: &str = "Queen Maren rules the northern isles from a tower of salt. \
    Her fleet guards the cold straits every winter.\n\n\
    The café owners of the south serve crème brûlée to sailors. \
    Traders call the eastern glacier 北の氷河 in their ledgers. \
    🐉 Dragons sleep under it, and nobody wakes them.\n\n   \
    Miners dig copper in the western hills.";

const OTHER_BOOK: &str = "The lighthouse keeper climbs the tower every evening. \
    Seals have their young on the rocks in autumn. \
    The island council meets in the old chapel.";

struct Setup {
    fake: FakeGoogle,
    app: TestApp,
    world: Value,
}

impl Setup {
    fn world_id(&self) -> WorldId {
        WorldId(uuid::Uuid::parse_str(&id(&self.world)).unwrap())
    }

    fn sources(&self) -> String {
        format!("/v1/worlds/{}/sources", id(&self.world))
    }

    fn collection(&self) -> &str {
        self.world["collection"].as_str().unwrap()
    }

    async fn add(&self, filename: &str, text: &str) -> Value {
        let (status, accepted) = self
            .app
            .post(&self.sources(), json!({"filename": filename, "text": text}))
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
        accepted
    }

    /// `GET …/sources/{id}/text`: status, content type and body.
    async fn text(&self, source: &str) -> (StatusCode, String, String) {
        let resp = self
            .app
            .client
            .get(self.app.url(&format!("{}/{source}/text", self.sources())))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let content_type = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (status, content_type, resp.text().await.unwrap())
    }

    /// Every chunk of a source through the listing (default page size).
    async fn chunks(&self, source: &str) -> Value {
        let (status, page) = self.app.get(&format!("{}/{source}/chunks", self.sources())).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        page
    }

    async fn stats(&self) -> Value {
        let (_, world) = self.app.get(&format!("/v1/worlds/{}", id(&self.world))).await;
        world["stats"].clone()
    }

    async fn points(&self, source: &str) -> u64 {
        let source = SourceId(uuid::Uuid::parse_str(source).unwrap());
        self.app
            .state
            .vectors
            .count(self.collection(), PointFilter::world(self.world_id()).source(source))
            .await
            .unwrap()
    }

    async fn retrieve(&self, query: &str) -> Value {
        let (status, answer) = self
            .app
            .post(
                &format!("/v1/worlds/{}/retrieve", id(&self.world)),
                json!({"query": query, "top_k": 50}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        answer
    }
}

fn google(base: String) -> impl FnOnce(&mut quarry::config::Settings) {
    move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a")];
        s.providers.google.scheduling.acquire_timeout_s = 1;
        s.providers.google.scheduling.query_wait_s = 1;
        s.embedding.workers = 0;
        s.embedding.max_attempts = 2;
    }
}

async fn world_on(app: &TestApp) -> Value {
    let (status, world) = app
        .post(
            "/v1/worlds",
            json!({"name": "Aerth", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768},
                   "chunking": {"max_tokens": 16, "overlap_tokens": 4}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    world
}

/// A fake Google server, an app on SQLite using it without background workers, and a world.
async fn setup() -> Setup {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(google(fake.base_url())).await;
    let world = world_on(&app).await;
    Setup { fake, app, world }
}

fn slice(text: &str, start: u64, end: u64) -> String {
    text.chars().skip(start as usize).take((end - start) as usize).collect()
}

fn chunk_list(page: &Value) -> Vec<Value> {
    page["chunks"].as_array().unwrap().clone()
}

#[tokio::test]
async fn the_text_is_served_as_stored_and_every_chunk_is_its_slice() {
    let s = setup().await;
    let accepted = s.add("book.md", BOOK).await;
    let source = id(&accepted["source"]);

    let (status, content_type, text) = s.text(&source).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "text/plain; charset=utf-8");
    assert_eq!(text, BOOK);
    assert_eq!(accepted["source"]["chars"], text.chars().count());
    assert_eq!(
        accepted["source"]["sha256"],
        hex::encode(sha2::Sha256::digest(text.as_bytes()))
    );

    let page = s.chunks(&source).await;
    let chunks = chunk_list(&page);
    assert!(chunks.len() >= 5, "small chunks: {page}");
    assert_eq!(page["total"], chunks.len());
    assert_eq!(page["total"], accepted["source"]["chunks"]);
    let mut covered = vec![false; text.chars().count()];
    let mut previous_end = 0;
    for (n, chunk) in chunks.iter().enumerate() {
        assert_eq!(chunk["chunk_number"], n, "chunk_number order: {page}");
        let (start, end) = (
            chunk["char_start"].as_u64().unwrap(),
            chunk["char_end"].as_u64().unwrap(),
        );
        let chunk_text = chunk["chunk_text"].as_str().unwrap();
        assert_eq!(slice(&text, start, end), chunk_text, "chunk {n}");
        assert!(start >= previous_end, "chunks are disjoint and in order: {page}");
        previous_end = end;
        for c in &mut covered[start as usize..end as usize] {
            *c = true;
        }
        assert_eq!(
            chunk["sha256"],
            hex::encode(sha2::Sha256::digest(chunk_text.as_bytes()))
        );
        let overlap = chunk["overlap_text"].as_str().unwrap();
        if n == 0 {
            assert_eq!(overlap, "");
        } else {
            // Context carried in from before: text that ends right at char_start.
            let before: String = slice(&text, 0, start);
            assert!(before.trim_end().ends_with(overlap.trim_end()), "{overlap:?}");
        }
        assert!(chunk["token_count"].as_u64().unwrap() > 0);
        assert_eq!(chunk["state"], "pending");
        assert_eq!(chunk["attempts"], 0);
        assert_eq!(chunk["last_error"], Value::Null);
    }
    for (c, covered) in text.chars().zip(&covered) {
        assert!(*covered || c.is_whitespace(), "{c:?} is in no chunk");
    }

    // HTML: the converted text is what is stored, served and sliced.
    let html = "<html><body><h1>Ledger</h1><p>Amber &amp; wool — 北の氷河.</p><script>x()</script></body></html>";
    let accepted = s.add("ledger.html", html).await;
    let source = id(&accepted["source"]);
    let (status, _, text) = s.text(&source).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!text.contains('<') && !text.contains("x()"), "{text:?}");
    assert!(text.contains("Amber & wool — 北の氷河."), "{text:?}");
    for chunk in chunk_list(&s.chunks(&source).await) {
        let (start, end) = (
            chunk["char_start"].as_u64().unwrap(),
            chunk["char_end"].as_u64().unwrap(),
        );
        assert_eq!(slice(&text, start, end), chunk["chunk_text"].as_str().unwrap());
    }
}

#[tokio::test]
async fn paging_returns_every_chunk_once() {
    let s = setup().await;
    let source = id(&s.add("book.md", BOOK).await["source"]);
    let all = chunk_list(&s.chunks(&source).await);
    let total = all.len();
    assert!(total >= 5);
    for limit in [1, 2, 3, total, 1000] {
        let mut seen = Vec::new();
        let mut offset = 0;
        loop {
            let (status, page) = s
                .app
                .get(&format!(
                    "{}/{source}/chunks?offset={offset}&limit={limit}",
                    s.sources()
                ))
                .await;
            assert_eq!(status, StatusCode::OK, "{page}");
            assert_eq!(page["total"], total, "the total is the same on every page");
            let chunks = chunk_list(&page);
            assert!(chunks.len() <= limit);
            if chunks.is_empty() {
                break;
            }
            offset += chunks.len();
            seen.extend(chunks);
        }
        assert_eq!(seen, all, "limit {limit}: every chunk once, in order");
    }
    let (_, past) = s
        .app
        .get(&format!("{}/{source}/chunks?offset={}", s.sources(), total + 10))
        .await;
    assert_eq!(past, json!({"chunks": [], "total": total}));
    let (_, huge) = s
        .app
        .get(&format!(
            "{}/{source}/chunks?offset=9223372036854775807&limit=1000",
            s.sources()
        ))
        .await;
    assert_eq!(huge, json!({"chunks": [], "total": total}));
}

#[tokio::test]
async fn bad_paging_is_400_naming_the_parameter_before_any_lookup() {
    let s = setup().await;
    let source = id(&s.add("book.md", BOOK).await["source"]);
    let known = format!("{}/{source}/chunks", s.sources());
    let unknown = format!(
        "/v1/worlds/{}/sources/{}/chunks",
        uuid::Uuid::new_v4(),
        uuid::Uuid::new_v4()
    );
    let cases = [
        ("offset=-1", "offset"),
        ("offset=abc", "offset"),
        ("offset=1.5", "offset"),
        ("offset=", "offset"),
        ("offset=9223372036854775808", "offset"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=-5", "limit"),
        ("limit=ten", "limit"),
        ("limit=", "limit"),
        ("offset=0&limit=100&page=2", "page"),
    ];
    for (query, field) in cases {
        for path in [&known, &unknown] {
            let (status, body) = s.app.get(&format!("{path}?{query}")).await;
            let error = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
            assert_eq!(error["details"]["field"], field, "{query}: {body}");
        }
    }
    // The bounds themselves are fine.
    for query in ["offset=0&limit=1", "limit=1000", "offset=3"] {
        let (status, body) = s.app.get(&format!("{known}?{query}")).await;
        assert_eq!(status, StatusCode::OK, "{query}: {body}");
    }
}

#[tokio::test]
async fn chunk_states_follow_the_embedding_with_structured_errors() {
    let s = setup().await;
    let source = id(&s.add("short.txt", "One short text.").await["source"]);
    // A malformed answer spends an attempt (a 5xx would not: see the breaker tests).
    s.fake.fail_next(Failure::MalformedBody);
    s.app.drain().await;
    let chunk = &chunk_list(&s.chunks(&source).await)[0];
    assert_eq!(chunk["state"], "pending", "{chunk}");
    assert_eq!(chunk["attempts"], 1);
    assert_eq!(chunk["last_error"]["code"], "provider_error", "{chunk}");
    assert!(chunk["last_error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(
        !chunk["last_error"].to_string().contains("key-a"),
        "no secret in errors"
    );

    // The retry waits for its backoff; then it fails again: max_attempts = 2.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    s.fake.fail_next(Failure::MalformedBody);
    s.app.drain().await;
    let chunk = &chunk_list(&s.chunks(&source).await)[0];
    assert_eq!(chunk["state"], "failed", "{chunk}");
    assert_eq!(chunk["attempts"], 2);
    assert_eq!(chunk["last_error"]["code"], "provider_error");

    let source = id(&s.add("fine.txt", "Another short text.").await["source"]);
    s.app.drain().await;
    let chunk = &chunk_list(&s.chunks(&source).await)[0];
    assert_eq!(
        (&chunk["state"], &chunk["attempts"], &chunk["last_error"]),
        (&json!("embedded"), &json!(0), &Value::Null)
    );
}

#[tokio::test]
async fn missing_worlds_and_sources_are_404_and_bad_ids_400() {
    let s = setup().await;
    let source = id(&s.add("book.md", BOOK).await["source"]);
    let other = world_on(&s.app).await;
    let missing_world = uuid::Uuid::new_v4();
    let missing_source = uuid::Uuid::new_v4();
    for suffix in ["/text", "/chunks", ""] {
        let cases = [
            (
                format!("/v1/worlds/{missing_world}/sources/{source}{suffix}"),
                StatusCode::NOT_FOUND,
                "world_not_found",
            ),
            (
                format!("{}/{missing_source}{suffix}", s.sources()),
                StatusCode::NOT_FOUND,
                "source_not_found",
            ),
            // A source is found only in its own world.
            (
                format!("/v1/worlds/{}/sources/{source}{suffix}", id(&other)),
                StatusCode::NOT_FOUND,
                "source_not_found",
            ),
            (
                format!("{}/not-a-uuid{suffix}", s.sources()),
                StatusCode::BAD_REQUEST,
                "invalid_request",
            ),
        ];
        for (path, expected, code) in &cases {
            let method = if suffix.is_empty() {
                reqwest::Method::DELETE
            } else {
                reqwest::Method::GET
            };
            let (status, body) = s.app.request(method, path, None).await;
            assert_error(status, &body, *expected, code);
        }
        let resp = s
            .app
            .client
            .get(s.app.url(&format!("{}/{source}{suffix}", s.sources())))
            .send()
            .await
            .unwrap();
        let (status, body) = read(resp).await;
        assert_error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");
    }
    // A source read in a world that does not exist, and a missing world's listings.
    for path in [
        format!("/v1/worlds/{missing_world}/sources/{source}"),
        format!("/v1/worlds/{missing_world}/sources"),
        format!("/v1/worlds/{missing_world}/jobs"),
    ] {
        let (status, body) = s.app.get(&path).await;
        assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");
    }
    // Nothing was deleted by any of that.
    let (status, _) = s.app.get(&format!("{}/{source}", s.sources())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s.stats().await["sources"], 1);
}

/// Two embedded sources; deleting one removes its rows and points and nothing of the other.
async fn delete_end_to_end(s: &Setup) {
    let doomed = s.add("book.md", BOOK).await;
    let kept = s.add("other.md", OTHER_BOOK).await;
    s.app.drain().await;
    let (doomed_id, kept_id) = (id(&doomed["source"]), id(&kept["source"]));
    let doomed_chunks = doomed["source"]["chunks"].as_u64().unwrap();
    let kept_chunks = kept["source"]["chunks"].as_u64().unwrap();
    assert_eq!(s.points(&doomed_id).await, doomed_chunks);
    assert_eq!(s.points(&kept_id).await, kept_chunks);
    let kept_listing = s.chunks(&kept_id).await;
    let queen = "Queen Maren rules the northern isles from a tower of salt.";
    let before = s.retrieve(queen).await;
    assert_eq!(before["results"][0]["source_id"], doomed_id.as_str(), "{before}");

    let (status, body) = s.app.delete(&format!("{}/{doomed_id}", s.sources())).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(body, Value::Null);

    assert_eq!(s.points(&doomed_id).await, 0, "the source's points are gone");
    assert_eq!(
        s.points(&kept_id).await,
        kept_chunks,
        "the other source's points remain"
    );
    for suffix in ["", "/text", "/chunks"] {
        let (status, body) = s.app.get(&format!("{}/{doomed_id}{suffix}", s.sources())).await;
        assert_error(status, &body, StatusCode::NOT_FOUND, "source_not_found");
    }
    let (status, body) = s.app.delete(&format!("{}/{doomed_id}", s.sources())).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "source_not_found");

    let (_, list) = s.app.get(&s.sources()).await;
    let list = list["sources"].as_array().unwrap().clone();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["id"], kept_id.as_str());
    assert_eq!(list[0]["book_number"], 2, "book numbers are not reassigned");
    assert_eq!(
        s.chunks(&kept_id).await,
        kept_listing,
        "the other source's chunks are untouched"
    );
    assert_eq!(
        s.stats().await,
        json!({"sources": 1, "chunks": kept_chunks, "embedded": kept_chunks, "pending": 0, "failed": 0})
    );
    // Its finished ingest job stays, as history.
    let (_, job) = s.app.get(&format!("/v1/jobs/{}", id(&doomed["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["counts"]["embedded"], doomed_chunks);

    for query in [queen, "crème brûlée", "dragons glacier copper miners"] {
        let answer = s.retrieve(query).await;
        let sources: Vec<&Value> = answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| &r["source_id"])
            .collect();
        assert!(sources.iter().all(|id| **id == kept_id.as_str()), "{answer}");
        assert_eq!(answer["warnings"], json!([]), "no stale points were met: {answer}");
    }

    // Book numbers are never reused.
    let next = s.add("next.md", "A new book about the isles.").await;
    assert_eq!(next["source"]["book_number"], 3);
}

#[tokio::test]
async fn delete_removes_the_source_its_points_and_rows_and_nothing_else() {
    let s = setup().await;
    delete_end_to_end(&s).await;
}

#[tokio::test]
async fn delete_works_end_to_end_on_postgres() {
    let Some(db) = PgDatabase::create("sources::delete_works_end_to_end_on_postgres").await else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_on(db.url.clone(), google(fake.base_url())).await;
    let world = world_on(&app).await;
    let mut s = Setup { fake, app, world };
    delete_end_to_end(&s).await;
    s.app.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn deleting_a_source_mid_ingest_cancels_its_job() {
    let s = setup().await;
    let accepted = s.add("book.md", BOOK).await;
    let source = id(&accepted["source"]);
    let job = format!("/v1/jobs/{}", id(&accepted["job"]));
    let (status, _) = s.app.delete(&format!("{}/{source}", s.sources())).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    let (_, ended) = s.app.get(&job).await;
    assert_eq!(ended["status"], "cancelled", "{ended}");
    assert!(ended["finished_at"].is_string());
    assert_eq!(ended["counts"]["total"], 0, "{ended}");
    assert_eq!(ended["counts"]["pending"], 0, "{ended}");
    assert_eq!(s.app.drain().await, 0);
    assert_eq!(s.fake.stats().requests, 0, "nothing was sent to the provider");
    assert_eq!(
        s.stats().await,
        json!({"sources": 0, "chunks": 0, "embedded": 0, "pending": 0, "failed": 0})
    );

    // The job's event stream tells why it ended (a warning), then ends on its status.
    let events = s.app.job_events(&id(&accepted["job"])).await;
    let kinds: Vec<&str> = events.iter().map(|(_, kind, _)| kind.as_str()).collect();
    assert_eq!(kinds, ["status", "warning", "status"], "{events:?}");
    assert_eq!(events[0].2, json!({"status": "running"}));
    let warning = &events[1].2;
    assert_eq!(warning["code"], "source_deleted", "{warning}");
    assert_eq!(warning["source_id"], source.as_str());
    assert_eq!(warning["dropped"], accepted["source"]["chunks"], "{warning} {accepted}");
    assert_eq!(events[2].2, json!({"status": "cancelled"}));
}

#[tokio::test]
async fn a_late_upsert_from_a_worker_in_flight_is_never_served() {
    let s = setup().await;
    let kept = s.add("other.md", OTHER_BOOK).await;
    s.app.drain().await;
    let text = "Queen Maren rules the northern isles.";
    let doomed = id(&s.add("queen.txt", text).await["source"]);

    // A worker has claimed the chunk and waits for the provider when the source is deleted.
    s.fake.set_latency(Duration::from_millis(1500));
    let drain = s.app.spawn_drain();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while s.fake.stats().embed_requests() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker never called the provider"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, _) = s.app.delete(&format!("{}/{doomed}", s.sources())).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(drain.await.unwrap(), 0, "nothing was marked embedded");
    s.fake.set_latency(Duration::ZERO);

    // The worker's point landed after the delete; finding its slot gone, the worker removed
    // it again, so nothing is left for retrieval to skip.
    assert_eq!(s.points(&doomed).await, 0, "the late point was removed by its worker");
    let answer = s.retrieve(text).await;
    assert!(
        answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["source_id"] == kept["source"]["id"]),
        "{answer}"
    );
    assert_eq!(answer["repairs"], serde_json::json!([]), "{answer}");
    assert_eq!(s.stats().await["sources"], 1);
}

#[tokio::test]
async fn a_vector_store_outage_is_503_and_deletes_nothing() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let (app, world, source, job) = crate::helpers::spawn_app_with_unreachable_vectors(fake.base_url()).await;
    let path = format!("/v1/worlds/{}/sources/{}", world.id, source.id);
    let (status, body) = app.delete(&path).await;
    assert_error(
        status,
        &body,
        StatusCode::SERVICE_UNAVAILABLE,
        "vector_store_unavailable",
    );
    let (status, got) = app.get(&path).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["chunks"], 1);
    let (status, page) = app.get(&format!("{path}/chunks")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["total"], 1);
    let (_, job) = app.get(&format!("/v1/jobs/{}", job.id)).await;
    assert_eq!(job["status"], "running", "{job}");
}

#[tokio::test]
async fn oversized_uploads_are_413_and_store_nothing() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let google = google(fake.base_url());
    let app = spawn_app_with(move |s| {
        google(s);
        s.server.max_body_bytes = 2048;
    })
    .await;
    let world = world_on(&app).await;
    let path = format!("/v1/worlds/{}/sources", id(&world));
    let big = "Queen Maren rules the northern isles. ".repeat(100);
    assert!(big.len() > 2048);

    let (status, body) = app.post(&path, json!({"filename": "big.txt", "text": big})).await;
    assert_error(status, &body, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");

    let (status, body) = app.upload(&path, "big.txt", big.clone().into_bytes()).await;
    let error = assert_error(status, &body, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    assert_eq!(error["details"]["limit_bytes"], 2048, "{body}");

    let (_, sources) = app.get(&path).await;
    assert_eq!(sources["sources"], json!([]));
    let (_, jobs) = app.get(&format!("/v1/worlds/{}/jobs", id(&world))).await;
    assert_eq!(jobs["jobs"], json!([]));
    let (_, got) = app.get(&format!("/v1/worlds/{}", id(&world))).await;
    assert_eq!(got["stats"]["sources"], 0);

    // Under the limit, both forms are accepted: the refusals were about size.
    let small = "Queen Maren rules the northern isles.";
    let (status, body) = app.post(&path, json!({"filename": "small.txt", "text": small})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (status, body) = app.upload(&path, "small.txt", small.as_bytes().to_vec()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(fake.stats().requests, 0);
}

/// A NUL character is refused as text alike on both backends (PostgreSQL cannot store it).
async fn nul_text_is_refused(app: &TestApp) {
    let world = world_on(app).await;
    let path = format!("/v1/worlds/{}/sources", id(&world));
    let (status, body) = app
        .post(&path, json!({"filename": "a.txt", "text": "Queen Maren\u{0}rules."}))
        .await;
    let error = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(error["details"]["field"], "text", "{body}");
    let (status, body) = app.upload(&path, "a.txt", b"Queen Maren\0rules.".to_vec()).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let (_, sources) = app.get(&path).await;
    assert_eq!(sources["sources"], json!([]));
    let (_, jobs) = app.get(&format!("/v1/worlds/{}/jobs", id(&world))).await;
    assert_eq!(jobs["jobs"], json!([]));
}

#[tokio::test]
async fn a_nul_character_in_the_text_is_400_and_stores_nothing() {
    let s = setup().await;
    nul_text_is_refused(&s.app).await;
}

#[tokio::test]
async fn a_nul_character_in_the_text_is_400_on_postgres_too() {
    let Some(db) = PgDatabase::create("sources::a_nul_character_in_the_text_is_400_on_postgres_too").await else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let mut app = spawn_app_on(db.url.clone(), google(fake.base_url())).await;
    nul_text_is_refused(&app).await;
    app.stop().await;
    db.drop_db().await;
}

#[tokio::test]
async fn files_are_uploaded_at_their_own_operation_which_takes_only_multipart() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(google(fake.base_url())).await;
    let world = world_on(&app).await;
    let upload = format!("/v1/worlds/{}/sources/upload", id(&world));
    let text = "Queen Maren rules the northern isles.";
    let (status, body) = app.upload(&upload, "isles.md", text.as_bytes().to_vec()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["source"]["filename"], "isles.md");
    assert_eq!(body["source"]["content_type"], "text/markdown");

    // A JSON body belongs to POST …/sources: here it is 415, and nothing is stored.
    let (status, body) = app.post(&upload, json!({"filename": "a.txt", "text": text})).await;
    let error = assert_error(
        status,
        &body,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    assert!(
        error["message"].as_str().unwrap().contains("multipart/form-data"),
        "{body}"
    );
    let (_, sources) = app.get(&format!("/v1/worlds/{}/sources", id(&world))).await;
    assert_eq!(sources["sources"].as_array().unwrap().len(), 1, "{sources}");
    // POST …/sources still takes an upload, as before the operation existed.
    let (status, body) = app
        .upload(
            &format!("/v1/worlds/{}/sources", id(&world)),
            "b.txt",
            text.as_bytes().to_vec(),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
}
