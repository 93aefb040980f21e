//! Living sources: keys, replace in place with the old version serving until the new one is
//! embedded, supersession, conditional writes.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TOKEN, TestApp, assert_error, google_world, read};

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

/// `PUT path` with [`isles`]`(changed)` as `isles.md`.
async fn put_isles(app: &TestApp, path: &str, changed: Option<(usize, &str)>) -> (StatusCode, Value, Option<String>) {
    let body = json!({"filename": "isles.md", "text": isles(changed)});
    send(app, reqwest::Method::PUT, path, &[], Some(body)).await
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

/// Runs `case` on SQLite, on a fresh PostgreSQL database and on a Qdrant server (the last two
/// skipped, loudly, without `QUARRY_TEST_POSTGRES_URL` or `QUARRY_TEST_QDRANT_URL`), each with
/// the fake Google provider and `tweak`'s settings.
macro_rules! on_every_backend {
    ($case:ident) => {
        on_every_backend!($case, |_: &mut quarry::config::Settings| {});
    };
    ($case:ident, $tweak:expr) => {
        mod $case {
            use crate::fake_providers::FakeGoogle;
            use crate::helpers::{on_fake_google, spawn_app_on, spawn_app_with};

            fn tweak(s: &mut quarry::config::Settings) {
                ($tweak)(s)
            }

            #[tokio::test]
            async fn sqlite() {
                let fake = FakeGoogle::start(&["key-a"]).await;
                let app = spawn_app_with(on_fake_google(fake.base_url(), tweak)).await;
                super::$case(fake, app).await;
            }

            #[tokio::test]
            async fn postgres() {
                let name = concat!("living_sources::", stringify!($case));
                let Some(db) = crate::helpers::PgDatabase::create(name).await else {
                    return;
                };
                let fake = FakeGoogle::start(&["key-a"]).await;
                let app = spawn_app_on(db.url.clone(), on_fake_google(fake.base_url(), tweak)).await;
                super::$case(fake, app).await;
                db.drop_db().await;
            }

            #[tokio::test]
            async fn qdrant_server() {
                let Ok(url) = std::env::var("QUARRY_TEST_QDRANT_URL") else {
                    eprintln!(concat!(
                        "\n*** SKIPPED (Qdrant server): living_sources::",
                        stringify!($case),
                        "::qdrant_server — set QUARRY_TEST_QDRANT_URL to run it. ***\n"
                    ));
                    return;
                };
                let fake = FakeGoogle::start(&["key-a"]).await;
                let app = spawn_app_with(on_fake_google(fake.base_url(), move |s| {
                    tweak(s);
                    s.vectors.kind = quarry::config::VectorKind::Qdrant;
                    s.vectors.url = Some(url);
                }))
                .await;
                super::$case(fake, app).await;
            }
        }
    };
}

on_every_backend!(a_one_sentence_edit_embeds_only_its_chunk_and_switches_when_it_is_embedded);
async fn a_one_sentence_edit_embeds_only_its_chunk_and_switches_when_it_is_embedded(fake: FakeGoogle, app: TestApp) {
    let world = google_world(&app).await;
    let path = by_key(&world, "guides/isles.md");
    let (status, created, etag) = put_isles(&app, &path, None).await;
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
    let (status, replaced, etag) = put_isles(&app, &path, Some((17, edited))).await;
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

on_every_backend!(a_newer_replace_supersedes_a_pending_one_which_is_never_served);
async fn a_newer_replace_supersedes_a_pending_one_which_is_never_served(_fake: FakeGoogle, app: TestApp) {
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

on_every_backend!(a_cancelled_replace_leaves_the_current_version_serving);
async fn a_cancelled_replace_leaves_the_current_version_serving(_fake: FakeGoogle, app: TestApp) {
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

on_every_backend!(bad_keys_and_preconditions_are_refused_and_change_nothing);
async fn bad_keys_and_preconditions_are_refused_and_change_nothing(_fake: FakeGoogle, app: TestApp) {
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
    // An unquoted version means the same as the ETag.
    let (status, body, _) = send(
        &app,
        reqwest::Method::PUT,
        &by_key(&world, "a"),
        &[("if-match", "7")],
        Some(json!({"filename": "a.md", "text": "Some text."})),
    )
    .await;
    assert_error(status, &body, StatusCode::PRECONDITION_FAILED, "precondition_failed");
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
    // A body naming another key than the query's, or than the source's.
    let (status, body, _) = send(
        &app,
        reqwest::Method::PUT,
        &by_key(&world, "a"),
        &[],
        Some(json!({"filename": "a.md", "text": "Some text.", "key": "b"})),
    )
    .await;
    let details = assert_error(status, &body, StatusCode::UNPROCESSABLE_ENTITY, "key_mismatch");
    assert_eq!(details["details"]["field"], "key");
    let (_, listed) = app.get(&format!("/v1/worlds/{world}/sources")).await;
    assert!(listed["sources"].as_array().unwrap().is_empty(), "{listed}");
    let (status, made) = app
        .post(
            &format!("/v1/worlds/{world}/sources"),
            json!({"filename": "a.md", "text": "Some text.", "key": "a"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{made}");
    let id = made["source"]["id"].as_str().unwrap();
    let (status, body, _) = send(
        &app,
        reqwest::Method::PUT,
        &format!("/v1/worlds/{world}/sources/{id}"),
        &[],
        Some(json!({"filename": "a.md", "text": "Other text.", "key": "b"})),
    )
    .await;
    assert_error(status, &body, StatusCode::UNPROCESSABLE_ENTITY, "key_mismatch");
    let (_, source) = app.get(&format!("/v1/worlds/{world}/sources/{id}")).await;
    assert_eq!(
        (&source["key"], &source["version"]),
        (&json!("a"), &json!(1)),
        "{source}"
    );
    assert!(source["pending_version"].is_null(), "{source}");
}

async fn count_sources(app: &TestApp, world: &str) -> usize {
    let (_, listed) = app.get(&format!("/v1/worlds/{world}/sources")).await;
    listed["sources"].as_array().unwrap().len()
}

/// Uploads `text` as a multipart file with an `Idempotency-Key` (a new boundary every time).
async fn upload_once(app: &TestApp, world: &str, key: &str, text: &str) -> (StatusCode, Value, bool) {
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(text.as_bytes().to_vec()).file_name("isles.md"),
    );
    let resp = crate::helpers::http_client()
        .post(app.url(&format!("/v1/worlds/{world}/sources/upload")))
        .bearer_auth(TOKEN)
        .header("Idempotency-Key", key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let replayed = resp.headers().get("idempotent-replayed").is_some();
    let (status, body) = read(resp).await;
    (status, body, replayed)
}

/// `POST path` with `Idempotency-Key: key`.
async fn post_keyed(app: &TestApp, path: &str, key: &str, body: Value) -> (StatusCode, Value, Option<String>) {
    send(
        app,
        reqwest::Method::POST,
        path,
        &[("Idempotency-Key", key)],
        Some(body),
    )
    .await
}

// A retried creation with the same `Idempotency-Key` and request gets the first answer (same
// source, same job, marked as a replay) and writes nothing; the same key with another request
// is `422 idempotency_key_reused`; a request that failed leaves its key free for the corrected
// retry; keys belong to their world; a bad key is a `400` naming the header.
on_every_backend!(idempotent_retries_create_one_source);
async fn idempotent_retries_create_one_source(fake: FakeGoogle, app: TestApp) {
    let world = google_world(&app).await;
    let body = json!({"filename": "ferry.md", "text": "The ferry leaves at nine."});
    let path = format!("/v1/worlds/{world}/sources");
    let first = post_keyed(&app, &path, "retry-1", body.clone()).await;
    assert_eq!(first.0, StatusCode::ACCEPTED, "{}", first.1);
    let again = post_keyed(&app, &path, "retry-1", body.clone()).await;
    assert_eq!(again.0, StatusCode::ACCEPTED, "{}", again.1);
    assert_eq!(again.1["source"]["id"], first.1["source"]["id"]);
    assert_eq!(again.1["job"]["id"], first.1["job"]["id"]);
    assert_eq!(again.2, first.2, "the same ETag");
    assert_eq!(count_sources(&app, &world).await, 1);

    let other = json!({"filename": "ferry.md", "text": "The ferry leaves at ten."});
    let (status, refused, _) = post_keyed(&app, &path, "retry-1", other.clone()).await;
    let error = assert_error(
        status,
        &refused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency_key_reused",
    );
    assert_eq!(error["details"]["field"], "Idempotency-Key");
    assert_eq!(count_sources(&app, &world).await, 1, "a refused request writes nothing");

    // Multipart: every retry has another boundary, and is still the same request.
    let (status, up1, replayed1) = upload_once(&app, &world, "upload-1", "Seals rest on the skerries.").await;
    assert_eq!((status, replayed1), (StatusCode::ACCEPTED, false), "{up1}");
    let (status, up2, replayed2) = upload_once(&app, &world, "upload-1", "Seals rest on the skerries.").await;
    assert_eq!((status, replayed2), (StatusCode::ACCEPTED, true), "{up2}");
    assert_eq!(up1["source"]["id"], up2["source"]["id"]);
    assert_eq!(count_sources(&app, &world).await, 2);

    // A failed request (empty text) keeps nothing: the corrected retry with its key runs.
    let (status, _, _) = post_keyed(&app, &path, "fix-me", json!({"filename": "x.md", "text": ""})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, fixed, _) = post_keyed(&app, &path, "fix-me", json!({"filename": "x.md", "text": "Fixed."})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{fixed}");

    // Another world's key of the same name is another key.
    let elsewhere = google_world(&app).await;
    let (status, _, _) = send(
        &app,
        reqwest::Method::POST,
        &format!("/v1/worlds/{elsewhere}/sources"),
        &[("Idempotency-Key", "retry-1")],
        Some(other),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);

    for bad in ["", "has space", &"k".repeat(256), "ünïcode"] {
        let resp = crate::helpers::http_client()
            .post(app.url(&path))
            .bearer_auth(TOKEN)
            .header(
                "Idempotency-Key",
                reqwest::header::HeaderValue::from_bytes(bad.as_bytes()).unwrap(),
            )
            .json(&body)
            .send()
            .await
            .unwrap();
        let (status, refused) = read(resp).await;
        let error = assert_error(status, &refused, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(error["details"]["field"], "Idempotency-Key", "{bad:?}");
    }
    assert_eq!(count_sources(&app, &world).await, 3);
    app.drain().await;
    // One embedding per distinct text: the retries sent nothing more.
    let sent = fake.stats().sent_texts();
    assert_eq!(
        sent.iter().filter(|t| t.contains("ferry leaves at nine")).count(),
        1,
        "{sent:?}"
    );
}

// Two worlds of one profile fed the same 200 texts at the same moment (`embedding.reuse =
// "global"`): claims of the two jobs run side by side, and a text one claim is sending is
// waited for by the other instead of sent again — 200 provider texts in all, not 400, and
// both worlds answer.
on_every_backend!(
    identical_texts_in_flight_are_embedded_once,
    |s: &mut quarry::config::Settings| s.embedding.reuse = quarry::config::ReuseScope::Global
);
async fn identical_texts_in_flight_are_embedded_once(fake: FakeGoogle, app: TestApp) {
    // Slow enough that two claims overlap.
    fake.set_latency(std::time::Duration::from_millis(150));
    let text: String = (0..200)
        .map(|i| format!("Harbour {i} moors {i} boats beside a crane of red iron."))
        .collect::<Vec<_>>()
        .join(" ");
    let (a, b) = (google_world(&app).await, google_world(&app).await);
    let job_a = app.add_text(&a, "harbours.md", &text).await["job"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let job_b = app.add_text(&b, "harbours.md", &text).await["job"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut steps = 0;
    loop {
        let (one, two) = (app.spawn_work_step("w1"), app.spawn_work_step("w2"));
        let (one, two) = (one.await.unwrap(), two.await.unwrap());
        steps += 1;
        if one.claimed + two.claimed == 0 || steps > 40 {
            break;
        }
    }
    app.drain().await;
    let mut reused = 0;
    for job in [&job_a, &job_b] {
        let (_, job) = app.get(&format!("/v1/jobs/{job}")).await;
        assert_eq!(job["status"], "completed", "{job}");
        assert_eq!(job["counts"]["embedded"], job["counts"]["total"], "{job}");
        reused += job["counts"]["reused"].as_u64().unwrap();
    }
    // No query has been embedded yet: every text sent is a chunk's.
    let sent = fake.stats().sent_texts().len() as u64;
    let (_, job) = app.get(&format!("/v1/jobs/{job_a}")).await;
    let chunks = job["counts"]["total"].as_u64().unwrap();
    assert!(chunks >= 150, "{chunks} chunks");
    assert_eq!(
        sent, chunks,
        "each text sent once, in {steps} double steps ({reused} reused)"
    );
    assert_eq!(
        reused, chunks,
        "the other world's copy of every text was shared, not sent"
    );
    for world in [&a, &b] {
        let hits = retrieve(&app, world, "Harbour 117 moors 117 boats").await;
        assert_eq!(hits.len(), 5, "{hits:?}");
        assert!(hits.iter().all(|h| h.contains("boats beside a crane")), "{hits:?}");
    }
}

// A replace whose new text the provider refuses for good fails, saying why; the current version
// keeps serving, the new one stays staged, and retrying the job embeds it and switches.
on_every_backend!(a_failed_replace_says_why_keeps_serving_and_switches_once_retried);
async fn a_failed_replace_says_why_keeps_serving_and_switches_once_retried(fake: FakeGoogle, app: TestApp) {
    let world = google_world(&app).await;
    let path = by_key(&world, "isles.md");
    let (status, _, _) = put_isles(&app, &path, None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    app.drain().await;

    let edited = "Isle number 40 traded its goats for a flock of white geese.";
    let (status, replaced, _) = put_isles(&app, &path, Some((40, edited))).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{replaced}");
    let job = replaced["job"]["id"].as_str().unwrap().to_owned();
    // The one new chunk goes alone; the provider refuses it as invalid, which is for good.
    fake.fail_next(crate::fake_providers::Failure::Status(400));
    app.drain().await;
    let (_, failed) = app.get(&format!("/v1/jobs/{job}")).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["counts"]["failed"], 1, "{failed}");
    assert!(
        !failed["errors"].as_array().unwrap().is_empty(),
        "the job says why: {failed}"
    );
    let (_, source, etag) = send(&app, reqwest::Method::GET, &path, &[], None).await;
    assert_eq!(
        (&source["version"], etag.as_deref()),
        (&json!(1), Some("\"1\"")),
        "{source}"
    );
    assert_eq!(
        source["pending_version"]["job_id"],
        job.as_str(),
        "still staged: {source}"
    );
    let hits = retrieve(&app, &world, "white geese flock").await;
    assert!(
        hits.iter().all(|h| !h.contains("geese")),
        "the failed version is not served: {hits:?}"
    );

    let (status, retried) = app.post(&format!("/v1/jobs/{job}/retry"), json!({})).await;
    assert!(status.is_success(), "{retried}");
    app.drain().await;
    let (_, source, _) = send(&app, reqwest::Method::GET, &path, &[], None).await;
    assert_eq!(source["version"], 2, "{source}");
    assert!(source["pending_version"].is_null(), "{source}");
    let hits = retrieve(&app, &world, "white geese flock").await;
    assert!(hits.iter().any(|h| h.contains("geese")), "{hits:?}");
}
