//! Living sources: keys, replace in place with the old version serving until the new one is
//! embedded, supersession, conditional writes.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TOKEN, TestApp, assert_error, google_world, on_fake_google, read, spawn_app_with};

/// Sixty sentences, one chunk each in [`google_world`]; sentence `changed` (if any) says
/// something else.
fn isles(changed: Option<(usize, &str)>) -> String {
    (0..60)
        .map(|i| match changed {
            Some((n, text)) if n == i => text.to_owned(),
            _ => format!("Isle number {i} keeps a lighthouse of grey stone and {i} goats."),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A request with extra headers, as the helpers send them otherwise.
async fn send(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, Value, Option<String>) {
    let mut req = crate::helpers::http_client()
        .request(method, app.url(path))
        .bearer_auth(TOKEN);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.expect("request sent");
    let etag = resp.headers().get("etag").map(|v| v.to_str().unwrap().to_owned());
    let (status, body) = read(resp).await;
    (status, body, etag)
}

fn by_key(world: &str, key: &str) -> String {
    let key: String = url_escape(key);
    format!("/v1/worlds/{world}/sources/by-key?key={key}")
}

/// Percent-encodes everything but unreserved characters.
fn url_escape(raw: &str) -> String {
    raw.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The chunk texts a retrieval for `query` returns.
async fn retrieve(app: &TestApp, world: &str, query: &str) -> Vec<String> {
    let (status, answer) = app
        .post(
            &format!("/v1/worlds/{world}/retrieve"),
            json!({"query": query, "top_k": 5}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["chunk_text"].as_str().unwrap().to_owned())
        .collect()
}

async fn app() -> (FakeGoogle, TestApp) {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    (fake, app)
}

#[tokio::test]
async fn a_one_sentence_edit_embeds_only_its_chunk_and_switches_when_it_is_embedded() {
    let (fake, app) = app().await;
    let world = google_world(&app).await;
    let path = by_key(&world, "guides/isles.md");
    let (status, created, etag) = send(
        &app,
        reqwest::Method::PUT,
        &path,
        &[],
        Some(json!({"filename": "isles.md", "text": isles(None)})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{created}");
    assert_eq!(created["outcome"], "created");
    assert_eq!(created["source"]["key"], "guides/isles.md");
    assert_eq!(created["source"]["version"], 1);
    assert_eq!(etag.as_deref(), Some("\"1\""));
    let source_id = created["source"]["id"].as_str().unwrap().to_owned();
    app.drain().await;
    let chunks = created["job"]["counts"]["total"].as_u64().unwrap();
    assert!(chunks >= 50, "{created}");
    let sent_before = fake.stats().sent_texts().len();

    // One sentence changed: a new version, staged.
    let edited = "Isle number 17 lost its lighthouse to a storm of violet hail.";
    let (status, replaced, etag) = send(
        &app,
        reqwest::Method::PUT,
        &path,
        &[],
        Some(json!({"filename": "isles.md", "text": isles(Some((17, edited)))})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{replaced}");
    assert_eq!(replaced["outcome"], "replaced");
    assert_eq!(replaced["job"]["kind"], "replace");
    assert_eq!(replaced["job"]["source_id"], source_id.as_str());
    assert_eq!(replaced["source"]["id"], source_id.as_str(), "the source keeps its id");
    assert_eq!(
        replaced["source"]["version"], 1,
        "the current version serves until the switch"
    );
    assert_eq!(replaced["source"]["pending_version"]["version"], 2);
    assert_eq!(etag.as_deref(), Some("\"1\""));

    // Until the new version is embedded, retrievals see only the old one.
    let hits = retrieve(&app, &world, "violet hail storm lighthouse").await;
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| !h.contains("violet")), "{hits:?}");
    let (_, listed) = app.get(&format!("/v1/worlds/{world}/sources")).await;
    assert_eq!(
        listed["sources"].as_array().unwrap().len(),
        1,
        "a staged version is not a source: {listed}"
    );

    app.drain().await;
    // Queries are embedded too: only chunk texts count.
    let sent: Vec<String> = fake.stats().sent_texts()[sent_before..]
        .iter()
        .filter(|t| t.starts_with("Isle"))
        .cloned()
        .collect();
    assert!(
        !sent.is_empty() && sent.len() <= 3,
        "only the changed chunk (and at most its neighbours) is embedded: {sent:?}"
    );
    assert!(sent.iter().any(|t| t.contains("violet")), "{sent:?}");

    let (status, source, etag) = send(&app, reqwest::Method::GET, &path, &[], None).await;
    assert_eq!(status, StatusCode::OK, "{source}");
    assert_eq!(source["version"], 2);
    assert!(source["pending_version"].is_null(), "{source}");
    let new_chunks = replaced["job"]["counts"]["total"].as_u64().unwrap();
    assert!(new_chunks.abs_diff(chunks) <= 2, "{replaced}");
    assert_eq!(source["chunks"].as_u64(), Some(new_chunks));
    assert_eq!(source["embedded"].as_u64(), Some(new_chunks));
    assert_eq!(etag.as_deref(), Some("\"2\""));
    let hits = retrieve(&app, &world, "violet hail storm lighthouse").await;
    assert!(hits[0].contains("violet"), "{hits:?}");
    assert!(
        hits.iter().all(|h| !h.contains("Isle number 17 keeps")),
        "the old version is gone: {hits:?}"
    );
    let world_body = app.get(&format!("/v1/worlds/{world}")).await.1;
    assert_eq!(
        app.world_points(&world_body).await,
        new_chunks,
        "the old version's points were deleted"
    );
    let (_, job) = app
        .get(&format!("/v1/jobs/{}", replaced["job"]["id"].as_str().unwrap()))
        .await;
    assert_eq!(job["status"], "completed", "{job}");
    assert!(job["counts"]["reused"].as_u64().unwrap() >= chunks - 3, "{job}");

    // The same text again: nothing to do.
    let (status, same, _) = send(
        &app,
        reqwest::Method::PUT,
        &format!("/v1/worlds/{world}/sources/{source_id}"),
        &[],
        Some(json!({"filename": "isles.md", "text": isles(Some((17, edited)))})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{same}");
    assert_eq!(same["outcome"], "unchanged");
    assert!(same["job"].is_null());

    // A writer that read version 1 cannot overwrite version 2, nor delete it.
    let (status, stale, _) = send(
        &app,
        reqwest::Method::PUT,
        &path,
        &[("if-match", "\"1\"")],
        Some(json!({"filename": "isles.md", "text": isles(None)})),
    )
    .await;
    let details = assert_error(status, &stale, StatusCode::PRECONDITION_FAILED, "precondition_failed");
    assert_eq!(details["details"]["current_version"], 2);
    let (status, stale, _) = send(&app, reqwest::Method::DELETE, &path, &[("if-match", "\"1\"")], None).await;
    assert_error(status, &stale, StatusCode::PRECONDITION_FAILED, "precondition_failed");
    // `If-None-Match: *` creates only.
    let (status, exists, _) = send(
        &app,
        reqwest::Method::PUT,
        &path,
        &[("if-none-match", "*")],
        Some(json!({"filename": "isles.md", "text": "other"})),
    )
    .await;
    assert_error(status, &exists, StatusCode::PRECONDITION_FAILED, "precondition_failed");
    let sent_now = fake.stats().sent_texts().len();
    app.drain().await;
    assert_eq!(
        fake.stats().sent_texts().len(),
        sent_now,
        "refused writes embed nothing"
    );

    let (status, _, _) = send(&app, reqwest::Method::DELETE, &path, &[("if-match", "\"2\"")], None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, gone, _) = send(&app, reqwest::Method::GET, &path, &[], None).await;
    assert_error(status, &gone, StatusCode::NOT_FOUND, "source_not_found");
    assert_eq!(app.world_points(&world_body).await, 0);
}

#[tokio::test]
async fn a_newer_replace_supersedes_a_pending_one_which_is_never_served() {
    let (_fake, app) = app().await;
    let world = google_world(&app).await;
    let (status, created) = app
        .post(
            &format!("/v1/worlds/{world}/sources"),
            json!({"filename": "isles.md", "text": isles(None), "key": "isles"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{created}");
    app.drain().await;
    // Two replaces in a row, by key through POST, before any worker runs.
    let first = "Isle number 5 now breeds amber herons.";
    let second = "Isle number 5 now breeds cobalt herons.";
    let (status, one) = app
        .post(
            &format!("/v1/worlds/{world}/sources"),
            json!({"filename": "isles.md", "text": isles(Some((5, first))), "key": "isles"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{one}");
    assert_eq!(one["outcome"], "replaced");
    let (status, two) = app
        .post(
            &format!("/v1/worlds/{world}/sources"),
            json!({"filename": "isles.md", "text": isles(Some((5, second))), "key": "isles"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{two}");
    let (_, superseded) = app
        .get(&format!("/v1/jobs/{}", one["job"]["id"].as_str().unwrap()))
        .await;
    assert_eq!(superseded["status"], "cancelled", "{superseded}");
    app.drain().await;
    let hits = retrieve(&app, &world, "herons breeding on the isle").await;
    assert!(hits.iter().any(|h| h.contains("cobalt")), "{hits:?}");
    assert!(hits.iter().all(|h| !h.contains("amber")), "{hits:?}");
    let (_, source) = app.get(&by_key(&world, "isles")).await;
    assert_eq!(source["version"], 2, "{source}");
    let (_, listed) = app.get(&format!("/v1/worlds/{world}/sources")).await;
    assert_eq!(listed["sources"].as_array().unwrap().len(), 1, "{listed}");
}

#[tokio::test]
async fn a_cancelled_replace_leaves_the_current_version_serving() {
    let (_fake, app) = app().await;
    let world = google_world(&app).await;
    let path = by_key(&world, "a/b/c.md");
    let (status, created, _) = send(
        &app,
        reqwest::Method::PUT,
        &path,
        &[],
        Some(json!({"filename": "c.md", "text": isles(None)})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{created}");
    app.drain().await;
    let (_, replaced, _) = send(
        &app,
        reqwest::Method::PUT,
        &path,
        &[("if-match", "\"1\"")],
        Some(json!({"filename": "c.md", "text": isles(Some((3, "Isle number 3 sank beneath saffron waves.")))})),
    )
    .await;
    assert_eq!(replaced["outcome"], "replaced", "{replaced}");
    let job = replaced["job"]["id"].as_str().unwrap();
    let (status, cancelled) = app.post(&format!("/v1/jobs/{job}/cancel"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    app.drain().await;
    let (_, source, etag) = send(&app, reqwest::Method::GET, &path, &[], None).await;
    assert_eq!(source["version"], 1, "{source}");
    assert!(source["pending_version"].is_null(), "{source}");
    assert_eq!(etag.as_deref(), Some("\"1\""));
    let hits = retrieve(&app, &world, "saffron waves sank").await;
    assert!(hits.iter().all(|h| !h.contains("saffron")), "{hits:?}");
    let world_body = app.get(&format!("/v1/worlds/{world}")).await.1;
    assert_eq!(
        app.world_points(&world_body).await,
        created["job"]["counts"]["total"].as_u64().unwrap(),
        "the staged points went with the cancelled replace"
    );
}

#[tokio::test]
async fn bad_keys_and_preconditions_are_refused_and_change_nothing() {
    let (_fake, app) = app().await;
    let world = google_world(&app).await;
    for bad in ["", "tab\there"] {
        let (status, body, _) = send(
            &app,
            reqwest::Method::PUT,
            &by_key(&world, bad),
            &[],
            Some(json!({"filename": "a.md", "text": "Some text."})),
        )
        .await;
        let details = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(details["details"]["field"], "key", "{body}");
    }
    let long = "k".repeat(1025);
    let (status, body) = app
        .post(
            &format!("/v1/worlds/{world}/sources"),
            json!({"filename": "a.md", "text": "Some text.", "key": long}),
        )
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let (status, body, _) = send(
        &app,
        reqwest::Method::PUT,
        &by_key(&world, "a"),
        &[("if-match", "v1")],
        Some(json!({"filename": "a.md", "text": "Some text."})),
    )
    .await;
    let details = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(details["details"]["field"], "If-Match");
    let (status, body, _) = send(
        &app,
        reqwest::Method::PUT,
        &by_key(&world, "a"),
        &[("if-match", "*")],
        Some(json!({"filename": "a.md", "text": "Some text."})),
    )
    .await;
    let details = assert_error(status, &body, StatusCode::PRECONDITION_FAILED, "precondition_failed");
    assert!(details["details"]["current_version"].is_null(), "{body}");
    let (status, body, _) = send(
        &app,
        reqwest::Method::PUT,
        &format!("/v1/worlds/{world}/sources/{}", uuid::Uuid::new_v4()),
        &[],
        Some(json!({"filename": "a.md", "text": "Some text."})),
    )
    .await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "source_not_found");
    let (_, listed) = app.get(&format!("/v1/worlds/{world}/sources")).await;
    assert!(listed["sources"].as_array().unwrap().is_empty(), "{listed}");
}
