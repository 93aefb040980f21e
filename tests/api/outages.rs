//! Outages and damage as the API reports them: a vector store that cannot be reached, a store
//! that is gone or busy past its timeout, a request that outlives the server's timeout, and a
//! corrupt row — each a structured error, and none of them changes anything.

use std::time::Duration;

use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TestApp, assert_error, on_fake_google, spawn_app_with, spawn_app_with_unreachable_vectors};

fn google_world_body(name: &str) -> Value {
    json!({"name": name, "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768}})
}

/// Names of the worlds the API lists.
async fn world_names(app: &TestApp) -> Vec<String> {
    let (status, list) = app.get("/v1/worlds").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn with_the_vector_store_down_world_writes_are_503_and_change_nothing() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let (app, world, source, job) = spawn_app_with_unreachable_vectors(fake.base_url()).await;

    let (status, body) = app.post("/v1/worlds", google_world_body("New")).await;
    assert_error(
        status,
        &body,
        StatusCode::SERVICE_UNAVAILABLE,
        "vector_store_unavailable",
    );
    assert_eq!(world_names(&app).await, ["Offline"]);

    let path = format!("/v1/worlds/{}", world.id);
    let (status, body) = app.post(&format!("{path}/reingest"), json!({})).await;
    assert_error(
        status,
        &body,
        StatusCode::SERVICE_UNAVAILABLE,
        "vector_store_unavailable",
    );
    let (_, jobs) = app.get(&format!("{path}/jobs")).await;
    let ids: Vec<&str> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [job.id.0.to_string()], "no re-ingest job was made");

    // Deleting starts with the points: with the vector store down nothing is deleted at all.
    let (status, body) = app.delete(&path).await;
    assert_error(
        status,
        &body,
        StatusCode::SERVICE_UNAVAILABLE,
        "vector_store_unavailable",
    );
    let (status, got) = app.get(&path).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["stats"]["sources"], 1);
    let (status, _) = app.get(&format!("{path}/sources/{}", source.id)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app.get(&format!("/v1/jobs/{}", job.id)).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn with_the_store_gone_every_route_that_needs_it_is_503_store_unavailable() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| {
        s.security.master_key = Some(SecretString::from(crate::keys::MASTER_KEY));
    }))
    .await;
    let (status, world) = app.post("/v1/worlds", google_world_body("Aerth")).await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    let w = world["id"].as_str().unwrap().to_owned();
    let (status, accepted) = app
        .post(
            &format!("/v1/worlds/{w}/sources"),
            json!({"filename": "a.txt", "text": "Queen Maren rules the isles."}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let job = accepted["job"]["id"].as_str().unwrap().to_owned();
    let source = accepted["source"]["id"].as_str().unwrap().to_owned();
    let key = uuid::Uuid::new_v4();

    app.deps.store.close().await;
    let calls: Vec<(reqwest::Method, String, Option<Value>)> = vec![
        (reqwest::Method::POST, "/v1/worlds".into(), Some(google_world_body("B"))),
        (reqwest::Method::GET, format!("/v1/worlds/{w}"), None),
        (
            reqwest::Method::PATCH,
            format!("/v1/worlds/{w}"),
            Some(json!({"name": "C"})),
        ),
        (reqwest::Method::DELETE, format!("/v1/worlds/{w}"), None),
        (
            reqwest::Method::POST,
            format!("/v1/worlds/{w}/sources"),
            Some(json!({"filename": "b.txt", "text": "Her fleet guards the straits."})),
        ),
        (reqwest::Method::GET, format!("/v1/worlds/{w}/sources"), None),
        (
            reqwest::Method::GET,
            format!("/v1/worlds/{w}/sources/{source}/chunks"),
            None,
        ),
        (
            reqwest::Method::DELETE,
            format!("/v1/worlds/{w}/sources/{source}"),
            None,
        ),
        (reqwest::Method::POST, format!("/v1/worlds/{w}/repair"), Some(json!({}))),
        (
            reqwest::Method::POST,
            format!("/v1/worlds/{w}/reingest"),
            Some(json!({})),
        ),
        (
            reqwest::Method::POST,
            format!("/v1/worlds/{w}/retrieve"),
            Some(json!({"query": "who rules"})),
        ),
        (reqwest::Method::GET, format!("/v1/jobs/{job}"), None),
        (reqwest::Method::POST, format!("/v1/jobs/{job}/pause"), Some(json!({}))),
        (reqwest::Method::GET, "/v1/provider-keys".into(), None),
        (
            reqwest::Method::POST,
            "/v1/provider-keys".into(),
            Some(json!({"provider": "google", "secret": "AIza-new-secret"})),
        ),
        (
            reqwest::Method::PATCH,
            format!("/v1/provider-keys/{key}"),
            Some(json!({"enabled": false})),
        ),
        (reqwest::Method::DELETE, format!("/v1/provider-keys/{key}"), None),
    ];
    for (method, path, body) in calls {
        let (status, answer) = app.request(method.clone(), &path, body).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, Some("store_unavailable")),
            "{method} {path}: {answer}"
        );
    }
}

#[tokio::test]
async fn a_database_busy_past_its_timeout_is_503_and_a_request_past_the_servers_is_408_and_neither_writes() {
    use sqlx::ConnectOptions as _;
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    let (status, world) = app.post("/v1/worlds", google_world_body("Aerth")).await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    let sources = format!("/v1/worlds/{}/sources", world["id"].as_str().unwrap());

    let options: sqlx::sqlite::SqliteConnectOptions = app.store_url().parse().unwrap();
    let mut holder = options.connect().await.unwrap();
    sqlx::query("BEGIN IMMEDIATE").execute(&mut holder).await.unwrap();
    // The write waits out SQLite's busy timeout (10 s), then gives up.
    let (status, body) = app
        .post(
            &sources,
            json!({"filename": "a.txt", "text": "Queen Maren rules the isles."}),
        )
        .await;
    assert_error(status, &body, StatusCode::SERVICE_UNAVAILABLE, "store_unavailable");
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    let (_, listed) = app.get(&sources).await;
    assert_eq!(listed["sources"], json!([]));

    // A server whose request timeout is shorter than the wait answers 408 first; the write it
    // abandoned is rolled back.
    let app = app
        .restart_with(on_fake_google(fake.base_url(), |s| s.server.request_timeout_s = 1))
        .await;
    sqlx::query("BEGIN IMMEDIATE").execute(&mut holder).await.unwrap();
    let (status, body) = app.post("/v1/worlds", google_world_body("Late")).await;
    assert_error(status, &body, StatusCode::REQUEST_TIMEOUT, "request_timeout");
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(world_names(&app).await, ["Aerth"]);
}

#[tokio::test]
async fn a_corrupt_row_is_an_opaque_500_that_shows_no_sql() {
    use sqlx::ConnectOptions as _;
    let app = crate::helpers::spawn_app().await;
    let world = app.create_local_world("Aerth").await;
    let id = world["id"].as_str().unwrap();
    let options: sqlx::sqlite::SqliteConnectOptions = app.store_url().parse().unwrap();
    let mut conn = options.connect().await.unwrap();
    sqlx::query("UPDATE worlds SET provider = 'bogus'")
        .execute(&mut conn)
        .await
        .unwrap();
    let (status, body) = app.get(&format!("/v1/worlds/{id}")).await;
    let error = assert_error(status, &body, StatusCode::INTERNAL_SERVER_ERROR, "internal_error");
    assert_eq!(error["message"], "internal error", "{body}");
    let text = body.to_string();
    for leak in ["bogus", "worlds", "SELECT", "provider"] {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
}

#[tokio::test]
async fn a_local_world_without_its_model_files_refuses_sources_with_502_and_stores_nothing() {
    let empty = tempfile::tempdir().unwrap();
    let dir = empty.path().to_path_buf();
    let app = spawn_app_with(move |s| {
        s.providers.local.model_dir = dir;
        s.embedding.workers = 0;
    })
    .await;
    let world = app.create_local_world("Aerth").await;
    let path = format!("/v1/worlds/{}/sources", world["id"].as_str().unwrap());
    let (status, body) = app
        .post(
            &path,
            json!({"filename": "a.txt", "text": "Queen Maren rules the isles."}),
        )
        .await;
    let error = assert_error(status, &body, StatusCode::BAD_GATEWAY, "provider_error");
    assert!(
        error["message"].as_str().unwrap().contains("scripts/fetch-model"),
        "{body}"
    );
    let (_, sources) = app.get(&path).await;
    assert_eq!(sources["sources"], json!([]));
    let (_, jobs) = app
        .get(&format!("/v1/worlds/{}/jobs", world["id"].as_str().unwrap()))
        .await;
    assert_eq!(jobs["jobs"], json!([]));
}
