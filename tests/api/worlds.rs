//! The worlds API: create (validated, preflighted), list, get with stats, rename, delete with
//! everything the world owns, and data surviving a restart.

use crate::helpers::world_id;
use chrono::Utc;
use quarry::domain::{JobId, NewChunk, NewSource, RunId, SourceId, WorldId, point_id};
use quarry::vector::{Point, PointFilter, PointPayload};
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::helpers::{PgDatabase, TestApp, assert_error, spawn_app, spawn_app_on, spawn_app_with};

#[tokio::test]
async fn create_returns_the_world_with_its_locked_profile() {
    let app = spawn_app().await;
    let (status, body) = app
        .post(
            "/v1/worlds",
            json!({"name": "  Aerth ", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}, "hybrid": true}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["name"], "Aerth");
    assert_eq!(
        body["embedding"],
        json!({"provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": 384, "distance": "cosine"})
    );
    // Local worlds default to chunks that fit the model's 256-token window.
    assert_eq!(
        body["chunking"],
        json!({"max_tokens": 192, "overlap_tokens": 48, "parent_max_tokens": 768, "context_prefix": false})
    );
    assert_eq!(body["hybrid"], true);
    assert_eq!(body["collection"], "chunks_local_all-minilm-l6-v2_384");
    assert_eq!(
        body["stats"],
        json!({"sources": 0, "chunks": 0, "embedded": 0, "pending": 0, "failed": 0})
    );
    let created = chrono::DateTime::parse_from_rfc3339(body["created_at"].as_str().unwrap()).unwrap();
    assert_eq!(created.offset().local_minus_utc(), 0);
    assert_eq!(body["created_at"], body["updated_at"]);

    let (status, got) = app.get(&format!("/v1/worlds/{}", body["id"].as_str().unwrap())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got, body);
}

#[tokio::test]
async fn remote_profiles_need_an_eligible_key_and_a_failed_preflight_writes_nothing() {
    let app = spawn_app().await;
    let request =
        json!({"name": "g", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768}});
    let (status, body) = app.post("/v1/worlds", request.clone()).await;
    assert_error(status, &body, StatusCode::CONFLICT, "no_eligible_provider_key");
    let (status, body) = app
        .post(
            "/v1/worlds",
            json!({"name": "o", "embedding": {"provider": "openai", "model": "text-embedding-3-small"}}),
        )
        .await;
    assert_error(status, &body, StatusCode::CONFLICT, "no_eligible_provider_key");
    let (_, list) = app.get("/v1/worlds").await;
    assert_eq!(list["worlds"], json!([]));
    // Not even the vector collection was created.
    let count = app
        .state
        .vectors
        .count(
            "chunks_google_gemini-embedding-001_768",
            PointFilter::world(WorldId::new()),
        )
        .await;
    assert_eq!(count.unwrap(), 0);
    assert!(
        !app.vectors_path()
            .join("chunks_google_gemini-embedding-001_768")
            .exists()
    );

    let app = spawn_app_with(|s| s.providers.google.keys = vec![SecretString::from("AIza-test")]).await;
    let (status, body) = app.post("/v1/worlds", request).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["embedding"]["dimensions"], 768);
    assert_eq!(
        body["chunking"],
        json!({"max_tokens": 512, "overlap_tokens": 64, "parent_max_tokens": 2048, "context_prefix": false})
    );
    assert_eq!(body["collection"], "chunks_google_gemini-embedding-001_768");
}

#[tokio::test]
async fn invalid_profiles_are_rejected_naming_the_field() {
    let app = spawn_app_with(|s| s.providers.google.keys = vec![SecretString::from("k")]).await;
    let cases = [
        (
            json!({"provider": "cohere", "model": "x"}),
            None,
            "invalid_embedding_profile",
            "embedding.provider",
        ),
        (
            json!({"provider": "google", "model": "text-embedding-004"}),
            None,
            "invalid_embedding_profile",
            "embedding.model",
        ),
        (
            json!({"provider": "google", "model": "gemini-embedding-001", "dimensions": 64}),
            None,
            "invalid_embedding_profile",
            "embedding.dimensions",
        ),
        (
            json!({"provider": "google", "model": "gemini-embedding-001", "dimensions": 4096}),
            None,
            "invalid_embedding_profile",
            "embedding.dimensions",
        ),
        (
            json!({"provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": 768}),
            None,
            "invalid_embedding_profile",
            "embedding.dimensions",
        ),
        (
            json!({"provider": "local", "model": "all-MiniLM-L6-v2"}),
            Some(json!({"max_tokens": 300})),
            "invalid_chunking_profile",
            "chunking.max_tokens",
        ),
        (
            json!({"provider": "local", "model": "all-MiniLM-L6-v2"}),
            Some(json!({"max_tokens": 8})),
            "invalid_chunking_profile",
            "chunking.max_tokens",
        ),
        (
            json!({"provider": "local", "model": "all-MiniLM-L6-v2"}),
            Some(json!({"max_tokens": -5})),
            "invalid_chunking_profile",
            "chunking.max_tokens",
        ),
        (
            json!({"provider": "google", "model": "gemini-embedding-001"}),
            Some(json!({"max_tokens": 100, "overlap_tokens": 80})),
            "invalid_chunking_profile",
            "chunking.overlap_tokens",
        ),
    ];
    for (embedding, chunking, code, field) in cases {
        let mut req = json!({"name": "w", "embedding": embedding});
        if let Some(chunking) = chunking {
            req["chunking"] = chunking;
        }
        let (status, body) = app.post("/v1/worlds", req.clone()).await;
        let err = assert_error(status, &body, StatusCode::BAD_REQUEST, code);
        assert_eq!(err["details"]["field"], field, "request {req}");
    }
    for name in ["", "   ", &"n".repeat(201)] {
        let (status, body) = app
            .post(
                "/v1/worlds",
                json!({"name": name, "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}}),
            )
            .await;
        let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(err["details"]["field"], "name");
    }
    let (_, list) = app.get("/v1/worlds").await;
    assert_eq!(list["worlds"], json!([]));

    // An explicit chunking profile within the limits is kept as given.
    let (status, body) = app
        .post(
            "/v1/worlds",
            json!({"name": "w", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"},
                   "chunking": {"max_tokens": 254, "overlap_tokens": 0}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        body["chunking"],
        json!({"max_tokens": 254, "overlap_tokens": 0, "parent_max_tokens": 1016, "context_prefix": false})
    );
}

#[tokio::test]
async fn list_get_rename_and_not_found() {
    let app = spawn_app().await;
    let a = app.create_local_world("A").await;
    let b = app.create_local_world("B").await;
    let (status, list) = app.get("/v1/worlds").await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = list["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["A", "B"]);

    let path = format!("/v1/worlds/{}", a["id"].as_str().unwrap());
    let (status, renamed) = app.patch(&path, json!({"name": "A2"})).await;
    assert_eq!(status, StatusCode::OK, "{renamed}");
    assert_eq!(renamed["name"], "A2");
    assert_eq!(renamed["embedding"], a["embedding"]);
    assert!(renamed["updated_at"].as_str() >= a["updated_at"].as_str());
    let (_, got) = app.get(&path).await;
    assert_eq!(got["name"], "A2");

    // The profile can never change in place.
    for (patch, field) in [
        (
            json!({"embedding": {"provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": 384}}),
            "embedding",
        ),
        (json!({"chunking": {"max_tokens": 100}}), "chunking"),
        (json!({"name": "x", "hybrid": true}), "hybrid"),
        (json!({"hybrid": false}), "hybrid"),
    ] {
        let (status, body) = app.patch(&path, patch).await;
        let error = assert_error(status, &body, StatusCode::CONFLICT, "profile_locked");
        assert_eq!(error["details"]["field"], field, "{body}");
    }
    // A body (or a field) that is not an object is told so, without naming the server's types.
    let (status, body) = app.post("/v1/worlds", json!([])).await;
    let error = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("the body must be a JSON object") && !message.contains("struct"),
        "{body}"
    );
    let (status, body) = app
        .post("/v1/worlds", json!({"name": "a", "embedding": "google"}))
        .await;
    let error = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("`embedding` must be a JSON object"), "{body}");
    assert_eq!(error["details"]["field"], "embedding", "{body}");
    let (status, body) = app.patch(&path, json!({})).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let (status, body) = app.patch(&path, json!({"name": " "})).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let (_, got) = app.get(&path).await;
    assert_eq!(got["name"], "A2", "rejected patches change nothing");

    let missing = format!("/v1/worlds/{}", uuid::Uuid::new_v4());
    let (status, body) = app.get(&missing).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");
    let (status, body) = app.patch(&missing, json!({"name": "x"})).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");
    let (status, body) = app.patch(&missing, json!({"chunking": {"max_tokens": 100}})).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");
    let (status, body) = app.delete(&missing).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");
    let (_, got_b) = app.get(&format!("/v1/worlds/{}", b["id"].as_str().unwrap())).await;
    assert_eq!(got_b["name"], "B");
}

/// Seeds a source with `n` chunks through the real store, and their points through the real
/// vector repository. Returns the source id and job id.
async fn seed(app: &TestApp, world: &Value, n: u32) -> (SourceId, JobId) {
    let id = world_id(world);
    let collection = world["collection"].as_str().unwrap().to_owned();
    let text: String = (0..n).map(|i| format!("Sentence number {i}. ")).collect();
    let chunks: Vec<NewChunk> = (0..n)
        .map(|i| {
            let s = format!("Sentence number {i}. ");
            let start = (0..i)
                .map(|j| format!("Sentence number {j}. ").chars().count() as u64)
                .sum::<u64>();
            NewChunk {
                chunk_number: i,
                char_start: start,
                char_end: start + s.chars().count() as u64,
                token_count: 4,
                chunk_text: s,
                overlap_text: String::new(),
                page: None,
                embed_prefix: String::new(),
                embed_prefix_tokens: 0,
            }
        })
        .collect();
    let source = SourceId::new();
    let job = JobId::new();
    let (stored, job_row) = app
        .state
        .store
        .add_source(
            &NewSource {
                key: None,
                id: source,
                world_id: id,
                run: app.deps.store.get_world(id).await.unwrap().unwrap().active_run,
                filename: "book.txt".into(),
                content_type: "text/plain".into(),
                text,
                details: Default::default(),
                now: Utc::now(),
            },
            chunks,
            job,
        )
        .await
        .unwrap();
    let run = job_row.run_id;
    let points = (0..n)
        .map(|i| Point {
            id: point_id(id, run, source, i),
            dense: (0..384).map(|d| if d as u32 == i % 384 { 1.0 } else { 0.01 }).collect(),
            sparse: None,
            payload: PointPayload {
                world_id: id,
                run_id: run,
                source_id: stored.id,
                book_number: stored.book_number,
                chunk_number: i,
                text_sha256: {
                    use sha2::Digest as _;
                    hex::encode(sha2::Sha256::digest(format!("Sentence number {i}. ").as_bytes()))
                },
                token_count: 4,
            },
        })
        .collect();
    app.deps.vectors.upsert(&collection, points).await.unwrap();
    (source, job)
}

#[tokio::test]
async fn delete_removes_everything_the_world_owns_and_nothing_else() {
    let app = spawn_app().await;
    let doomed = app.create_local_world("doomed").await;
    let kept = app.create_local_world("kept").await;
    let (doomed_source, doomed_job) = seed(&app, &doomed, 3).await;
    let (kept_source, kept_job) = seed(&app, &kept, 2).await;
    let collection = doomed["collection"].as_str().unwrap();
    let (doomed_id, kept_id) = (world_id(&doomed), world_id(&kept));

    let (_, before) = app.get(&format!("/v1/worlds/{doomed_id}")).await;
    assert_eq!(
        before["stats"],
        json!({"sources": 1, "chunks": 3, "embedded": 0, "pending": 3, "failed": 0})
    );

    let (status, body) = app.delete(&format!("/v1/worlds/{doomed_id}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(body, Value::Null);

    let (status, body) = app.get(&format!("/v1/worlds/{doomed_id}")).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");
    let store = &app.deps.store;
    assert!(store.get_source(doomed_id, doomed_source).await.unwrap().is_none());
    assert!(
        store
            .list_sources(doomed_id, quarry::domain::Window::ALL)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.get_job(doomed_job).await.unwrap().is_none());
    assert_eq!(
        app.state
            .vectors
            .count(collection, PointFilter::world(doomed_id))
            .await
            .unwrap(),
        0
    );

    // The other world, sharing the collection, is untouched.
    assert!(store.get_source(kept_id, kept_source).await.unwrap().is_some());
    assert!(store.get_job(kept_job).await.unwrap().is_some());
    assert_eq!(
        app.state
            .vectors
            .count(collection, PointFilter::world(kept_id))
            .await
            .unwrap(),
        2
    );
    let (_, kept_now) = app.get(&format!("/v1/worlds/{kept_id}")).await;
    assert_eq!(kept_now["stats"]["chunks"], 2);
}

#[tokio::test]
async fn worlds_and_vectors_survive_a_restart() {
    let app = spawn_app().await;
    let world = app.create_local_world("persistent").await;
    seed(&app, &world, 4).await;
    let id = world_id(&world);
    let collection = world["collection"].as_str().unwrap().to_owned();
    let (_, before) = app.get(&format!("/v1/worlds/{id}")).await;

    let app = app.restart().await;
    let (status, mut after) = app.get(&format!("/v1/worlds/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{after}");
    // The startup repair may already have adopted the seeded points (their entries were left
    // pending); everything else is exactly as before.
    let stats = after["stats"].take();
    let mut expected = before.clone();
    expected["stats"] = Value::Null;
    assert_eq!(after, expected);
    assert_eq!(stats["chunks"], 4);
    assert_eq!(
        app.state
            .vectors
            .count(&collection, PointFilter::world(id))
            .await
            .unwrap(),
        4
    );
    let run: RunId = app.deps.store.get_world(id).await.unwrap().unwrap().active_run;
    assert_eq!(
        app.state
            .vectors
            .count(&collection, PointFilter::world(id).run(run))
            .await
            .unwrap(),
        4
    );
}

#[tokio::test]
async fn the_worlds_api_works_on_postgres() {
    let Some(db) = PgDatabase::create("the_worlds_api_works_on_postgres").await else {
        return;
    };
    let mut app = spawn_app_on(db.url.clone(), |_| {}).await;
    let (_, ready) = app.get("/readyz").await;
    assert_eq!(ready["store"]["kind"], "postgres");
    let world = app.create_local_world("pg").await;
    let (source, job) = seed(&app, &world, 2).await;
    let id = world_id(&world);
    let (_, got) = app.get(&format!("/v1/worlds/{id}")).await;
    assert_eq!(
        got["stats"],
        json!({"sources": 1, "chunks": 2, "embedded": 0, "pending": 2, "failed": 0})
    );
    assert_eq!(got["created_at"], world["created_at"]);
    let (status, _) = app.patch(&format!("/v1/worlds/{id}"), json!({"name": "pg2"})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app.delete(&format!("/v1/worlds/{id}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(app.deps.store.get_source(id, source).await.unwrap().is_none());
    assert!(app.deps.store.get_job(job).await.unwrap().is_none());
    app.stop().await;
    db.drop_db().await;
}

/// `?name=` finds the worlds of one name (names are not unique), paged like the whole list,
/// and a token limited to some worlds finds only its own.
#[tokio::test]
async fn worlds_are_found_by_name() {
    let app = crate::helpers::spawn_app_with(|_| {}).await;
    let first = app.create_local_world("Handbook").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let _other = app.create_local_world("Notes").await;
    let second = app.create_local_world("Handbook").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let ids = |list: &serde_json::Value| -> Vec<String> {
        list["worlds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, list) = app.get("/v1/worlds?name=Handbook").await;
    assert_eq!(status, reqwest::StatusCode::OK, "{list}");
    assert_eq!(ids(&list), [first.clone(), second.clone()]);
    assert!(list["worlds"][0]["stats"].is_object(), "with its counts: {list}");
    let (_, page) = app.get("/v1/worlds?name=Handbook&limit=1").await;
    assert_eq!(
        (ids(&page), page["next_offset"].as_u64()),
        (vec![first.clone()], Some(1))
    );
    let (_, none) = app.get("/v1/worlds?name=Atlantis").await;
    assert_eq!(none["worlds"], serde_json::json!([]));
    let (_, made) = app
        .post(
            "/v1/tokens",
            serde_json::json!({"name": "one", "scopes": ["read"], "worlds": [second]}),
        )
        .await;
    let (_, limited) = app
        .request_as(
            made["secret"].as_str().unwrap(),
            reqwest::Method::GET,
            "/v1/worlds?name=Handbook",
            None,
        )
        .await;
    assert_eq!(ids(&limited), [second]);
}
