//! Ingestion: sources in, chunks and pending entries stored in one transaction, workers embed
//! through the scheduler and a fake Google server, points are written before entries are
//! marked embedded, and jobs report it all.

use std::time::Duration;

use quarry::domain::WorldId;
use quarry::vector::PointFilter;
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::fake_providers::{Failure, FakeGoogle};
use crate::helpers::{TOKEN, TestApp, assert_error, on_fake_google, parse_sse, read, spawn_app_with};

const TEXT: &str = "# The Northern Isles\n\nQueen Maren rules the northern isles from a tower of salt. \
    Her fleet guards the straits.\n\nIn the south, the river cities trade amber and wool. \
    Their councils elect a speaker every spring.\n\nThe dragons of the east sleep under the glacier.";

/// An app whose Google provider is `fake` (one key), with no background workers unless asked.
async fn app_with_google(fake: &FakeGoogle, workers: usize) -> TestApp {
    let base = fake.base_url();
    spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a")];
        s.providers.google.scheduling.acquire_timeout_s = 1;
        s.embedding.workers = workers;
        s.embedding.max_attempts = 2;
    })
    .await
}

async fn google_world(app: &TestApp, max_tokens: u32) -> Value {
    let (status, world) = app
        .post(
            "/v1/worlds",
            json!({"name": "Aerth", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768},
                   "chunking": {"max_tokens": max_tokens, "overlap_tokens": 0}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    world
}

/// A fake Google server, an app using it without background workers, and a world on it.
async fn setup(max_tokens: u32) -> (FakeGoogle, TestApp, Value) {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = app_with_google(&fake, 0).await;
    let world = google_world(&app, max_tokens).await;
    (fake, app, world)
}

/// Adds a plain-text source and returns the 202 body.
async fn add(app: &TestApp, world: &Value, text: &str) -> Value {
    let (status, accepted) = app
        .post(
            &format!("/v1/worlds/{}/sources", id(world)),
            json!({"filename": "a.txt", "text": text}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    accepted
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_source_is_chunked_embedded_and_its_job_completes() {
    let (fake, app, world) = setup(24).await;
    let (status, accepted) = app
        .post(
            &format!("/v1/worlds/{}/sources", id(&world)),
            json!({"filename": "isles.md", "text": TEXT}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let source = &accepted["source"];
    let job = &accepted["job"];
    assert_eq!(source["book_number"], 1);
    assert_eq!(source["content_type"], "text/markdown");
    assert_eq!(source["chars"], TEXT.chars().count());
    let chunks = source["chunks"].as_u64().unwrap();
    assert!(chunks >= 3, "small max_tokens gives several chunks: {source}");
    assert_eq!(source["pending"], chunks);
    assert_eq!(job["kind"], "ingest");
    assert_eq!(job["status"], "running");
    assert_eq!(job["counts"]["total"], chunks);
    assert_eq!(
        fake.stats().embed_requests(),
        0,
        "nothing is embedded before a worker runs"
    );

    let embedded = app.drain().await;
    assert_eq!(embedded, chunks);
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(job))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["counts"]["embedded"], chunks);
    assert_eq!(job["counts"]["pending"], 0);
    assert!(job["finished_at"].is_string());
    let (_, world_now) = app.get(&format!("/v1/worlds/{}", id(&world))).await;
    assert_eq!(world_now["stats"]["embedded"], chunks);
    let wid = WorldId(uuid::Uuid::parse_str(&id(&world)).unwrap());
    let collection = world["collection"].as_str().unwrap();
    assert_eq!(
        app.state
            .vectors
            .count(collection, PointFilter::world(wid))
            .await
            .unwrap(),
        chunks
    );

    // Only chunk text was sent, in document mode, at the profile's size, after exact counting.
    let stats = fake.stats();
    let sent: Vec<String> = stats.embed_calls.iter().flat_map(|c| c.texts.clone()).collect();
    assert_eq!(sent.len() as u64, chunks);
    assert!(
        stats
            .embed_calls
            .iter()
            .all(|c| c.task_types.iter().all(|t| t.as_deref() == Some("RETRIEVAL_DOCUMENT")))
    );
    assert!(
        stats
            .embed_calls
            .iter()
            .all(|c| c.dimensions.iter().all(|d| *d == Some(768)))
    );
    assert!(
        stats.counted.len() as u64 >= chunks,
        "every chunk is counted before dispatch"
    );
    let (_, list) = app.get(&format!("/v1/worlds/{}/jobs", id(&world))).await;
    assert_eq!(list["jobs"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn rate_limits_give_work_back_without_spending_attempts() {
    let (fake, app, world) = setup(512).await;
    let accepted = add(&app, &world, "One short text.").await;
    fake.fail_next(Failure::RateLimited(Duration::from_millis(300)));
    // The entry goes back, the key cools down for the hint, and the same drain picks the
    // entry up again once the key is usable.
    let started = std::time::Instant::now();
    assert_eq!(app.drain().await, 1);
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "the retry hint was honoured"
    );
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["counts"]["rate_limited"], 1, "{job}");
    assert_eq!(job["counts"]["retries"], 0, "a rate limit is not an attempt: {job}");
    assert_eq!(fake.stats().embed_requests(), 2);
    let (_, providers) = app.get("/v1/providers").await;
    let google = providers["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "google")
        .unwrap()
        .clone();
    assert_eq!(google["keys"][0]["rate_limited"], 1);
}

#[tokio::test]
async fn failures_spend_attempts_and_fail_the_job_with_a_structured_error() {
    let (fake, app, world) = setup(512).await;
    let accepted = add(&app, &world, "One short text.").await;
    fake.fail_next(Failure::WrongLength);
    app.drain().await;
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["counts"]["retries"], 1, "{job}");
    assert_eq!(job["status"], "running");
    // Nothing was stored for the malformed answer.
    let wid = WorldId(uuid::Uuid::parse_str(&id(&world)).unwrap());
    assert_eq!(
        app.state
            .vectors
            .count(world["collection"].as_str().unwrap(), PointFilter::world(wid))
            .await
            .unwrap(),
        0
    );

    // The retry waits for its backoff; make it due, then fail again: max_attempts = 2.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    fake.fail_next(Failure::Status(500));
    app.drain().await;
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["counts"]["failed"], 1);
    let error = &job["errors"][0];
    assert_eq!(error["book_number"], 1);
    assert_eq!(error["chunk_number"], 0);
    assert_eq!(error["code"], "provider_error");
    assert!(
        !error["message"].as_str().unwrap().contains("key-a"),
        "no key in errors: {error}"
    );

    // The stream tells the story: the first failed call is a warning (the chunk will be
    // retried), the second, its last attempt, the chunk's error; then the job's status.
    let events = app.job_events(&id(&accepted["job"])).await;
    let kinds: Vec<&str> = events
        .iter()
        .filter(|(_, kind, _)| kind != "progress")
        .map(|(_, kind, _)| kind.as_str())
        .collect();
    assert_eq!(kinds, ["status", "warning", "error", "status"], "{events:?}");
    let warning = &events.iter().find(|(_, kind, _)| kind == "warning").unwrap().2;
    assert_eq!(
        (&warning["code"], &warning["chunks"]),
        (&json!("provider_error"), &json!(1))
    );
    assert!(!warning.to_string().contains("key-a"), "{warning}");
    assert_eq!(events.last().unwrap().2["status"], "failed");
}

#[tokio::test]
async fn a_job_lists_its_first_hundred_errors_and_counts_them_all() {
    let (fake, app, world) = setup(16).await;
    let text: String = (0..130)
        .map(|i| format!("Sentence number {i} is about the keeper of the lighthouse. "))
        .collect();
    let first = add(&app, &world, &text).await;
    let second = add(&app, &world, "One short text. Another short text.").await;
    let (many, few) = (
        first["source"]["chunks"].as_u64().unwrap(),
        second["source"]["chunks"].as_u64().unwrap(),
    );
    assert!(many > 100 && few >= 1, "{first} {second}");
    // Every chunk is over the model's limit by the provider's count, so every chunk fails.
    for _ in 0..many + few {
        fake.fail_next_count(Failure::Raw {
            status: 200,
            headers: vec![],
            body: "{\"totalTokens\": 5000}".into(),
        });
    }
    app.drain().await;

    let first_job = id(&first["job"]);
    let (_, job) = app.get(&format!("/v1/jobs/{first_job}")).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["counts"]["failed"], many);
    let numbers: Vec<u64> = job["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["chunk_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..100).collect::<Vec<u64>>(), "the first hundred, in order");

    // The world's job list reads the errors of all its jobs at once; each keeps its own.
    let (status, list) = app.get(&format!("/v1/worlds/{}/jobs", id(&world))).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let listed = |job: &str| {
        list["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == job)
            .cloned()
            .unwrap()
    };
    assert_eq!(listed(&first_job)["errors"], job["errors"]);
    let other = listed(&id(&second["job"]));
    assert_eq!(other["counts"]["failed"], few, "{other}");
    let errors = other["errors"].as_array().unwrap();
    assert_eq!(errors.len() as u64, few, "{other}");
    assert!(
        errors
            .iter()
            .all(|e| e["book_number"] == 2 && e["code"] == "input_too_large"),
        "{other}"
    );
}

#[tokio::test]
async fn a_world_s_jobs_can_be_listed_by_status() {
    let (_fake, app, world) = setup(512).await;
    let first = add(&app, &world, "One short text.").await;
    let second = add(&app, &world, "Another short text.").await;
    let (status, _) = app
        .post(&format!("/v1/jobs/{}/cancel", id(&first["job"])), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let path = format!("/v1/worlds/{}/jobs", id(&world));
    let ids = |list: &Value| -> Vec<String> { list["jobs"].as_array().unwrap().iter().map(id).collect() };
    let (_, all) = app.get(&path).await;
    assert_eq!(ids(&all), [id(&second["job"]), id(&first["job"])], "newest first");
    let (status, running) = app.get(&format!("{path}?status=running")).await;
    assert_eq!(status, StatusCode::OK, "{running}");
    assert_eq!(ids(&running), [id(&second["job"])]);
    let (_, either) = app.get(&format!("{path}?status=cancelled,running")).await;
    assert_eq!(ids(&either).len(), 2);
    let (_, none) = app.get(&format!("{path}?status=failed")).await;
    assert_eq!(none["jobs"], json!([]));
    for (query, field) in [
        ("status=done", "status"),
        ("state=running", "state"),
        ("status=running&status=failed", "status"),
    ] {
        let (status, body) = app.get(&format!("{path}?{query}")).await;
        let error = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(error["details"]["field"], field, "{body}");
    }
}

#[tokio::test]
async fn a_batch_refused_as_a_whole_is_sent_again_one_item_at_a_time() {
    let (fake, app, world) = setup(16).await;
    let text: String = (0..4)
        .map(|i| format!("Sentence number {i} is about the keeper of the lighthouse. "))
        .collect();
    let accepted = add(&app, &world, &text).await;
    assert_eq!(accepted["source"]["chunks"], 4, "{accepted}");
    // The batch of four is refused (a 400 that is not the key's fault): each chunk is then
    // sent alone, exactly once, and all four are embedded.
    fake.fail_next(Failure::Status(400));
    app.drain().await;
    let calls: Vec<usize> = fake.stats().embed_calls.iter().map(|c| c.texts.len()).collect();
    assert_eq!(calls, [4, 1, 1, 1, 1], "{calls:?}");
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(
        (&job["counts"]["embedded"], &job["counts"]["retries"]),
        (&json!(4), &json!(0)),
        "{job}"
    );
}

#[tokio::test]
async fn a_refused_key_is_a_warning_on_the_job_and_the_other_key_takes_over() {
    let fake = FakeGoogle::start(&["key-a", "key-b"]).await;
    let base = fake.base_url();
    let app = spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a"), SecretString::from("key-b")];
        s.embedding.workers = 0;
    })
    .await;
    let world = google_world(&app, 512).await;
    let accepted = add(&app, &world, "One short text.").await;
    fake.fail_next(Failure::KeyInvalid);
    app.drain().await;
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(
        job["counts"]["retries"], 0,
        "a refused key is not the chunk's fault: {job}"
    );
    let events = app.job_events(&id(&accepted["job"])).await;
    let warnings: Vec<&Value> = events
        .iter()
        .filter(|(_, kind, _)| kind == "warning")
        .map(|(_, _, data)| data)
        .collect();
    assert_eq!(warnings.len(), 1, "{events:?}");
    assert_eq!(warnings[0]["code"], "key_retired");
    assert!(
        warnings[0]["message"].as_str().unwrap().contains("google"),
        "{warnings:?}"
    );
    assert!(
        !warnings[0].to_string().contains("key-"),
        "no secret in events: {warnings:?}"
    );
}

#[tokio::test]
async fn oversize_and_uncountable_chunks_fail_locally_without_calling_the_provider() {
    let (fake, app, world) = setup(512).await;
    let path = format!("/v1/worlds/{}/sources", id(&world));
    // The provider's exact count is over the model's 2,048-token limit.
    let (_, first) = app
        .post(
            &path,
            json!({"filename": "a.txt", "text": "Too long by the provider's count."}),
        )
        .await;
    fake.fail_next_count(Failure::Raw {
        status: 200,
        headers: vec![],
        body: "{\"totalTokens\": 5000}".into(),
    });
    app.drain().await;
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&first["job"]))).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["errors"][0]["code"], "input_too_large");

    // Counting fails: fail closed.
    let (_, second) = app
        .post(&path, json!({"filename": "b.txt", "text": "Cannot be counted today."}))
        .await;
    fake.fail_next_count(Failure::MalformedBody);
    app.drain().await;
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&second["job"]))).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["errors"][0]["code"], "token_count_failed");
    assert_eq!(fake.stats().embed_requests(), 0, "the embed endpoint was never called");
}

#[tokio::test]
async fn pause_resume_and_cancel_follow_the_rules() {
    let (fake, app, world) = setup(512).await;
    let accepted = add(&app, &world, "One short text.").await;
    let job = format!("/v1/jobs/{}", id(&accepted["job"]));
    let (status, paused) = app.post(&format!("{job}/pause"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["status"], "paused");
    assert_eq!(app.drain().await, 0, "paused jobs are not worked on");
    let (status, body) = app.post(&format!("{job}/pause"), json!({})).await;
    assert_error(status, &body, StatusCode::CONFLICT, "job_state_conflict");
    let (status, resumed) = app.post(&format!("{job}/resume"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(resumed["status"], "running");
    let (status, cancelled) = app.post(&format!("{job}/cancel"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cancelled["status"], "cancelled");
    assert!(cancelled["finished_at"].is_string());
    assert_eq!(app.drain().await, 0, "cancelled jobs are not worked on");
    for action in ["pause", "resume", "cancel"] {
        let (status, body) = app.post(&format!("{job}/{action}"), json!({})).await;
        assert_error(status, &body, StatusCode::CONFLICT, "job_state_conflict");
    }
    let missing = format!("/v1/jobs/{}", uuid::Uuid::new_v4());
    let (status, body) = app.get(&missing).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "job_not_found");
    for action in ["pause", "resume", "cancel"] {
        let (status, body) = app.post(&format!("{missing}/{action}"), json!({})).await;
        assert_error(status, &body, StatusCode::NOT_FOUND, "job_not_found");
    }
    let (status, body) = app.get(&format!("{missing}/events")).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "job_not_found");
    assert_eq!(fake.stats().embed_requests(), 0);

    // Every status the job took is in its event stream, in order; the refusals added nothing.
    let events = app.job_events(&id(&accepted["job"])).await;
    assert!(events.iter().all(|(_, kind, _)| kind == "status"), "{events:?}");
    let statuses: Vec<&Value> = events.iter().map(|(_, _, data)| &data["status"]).collect();
    assert_eq!(statuses, ["running", "paused", "running", "cancelled"], "{events:?}");
}

#[tokio::test]
async fn bad_sources_are_rejected_and_store_nothing() {
    let (_fake, app, world) = setup(512).await;
    let path = format!("/v1/worlds/{}/sources", id(&world));
    for (body, field) in [
        (json!({"filename": "a.txt", "text": "   \n "}), "text"),
        (json!({"filename": "  ", "text": "Hello."}), "filename"),
        (
            json!({"filename": "a.pdf", "text": "Hello.", "content_type": "application/pdf"}),
            "content_type",
        ),
    ] {
        let (status, resp) = app.post(&path, body).await;
        let err = assert_error(status, &resp, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(err["details"]["field"], field);
    }
    let (status, resp) = app.post(&path, json!({"filename": "a.txt"})).await;
    assert_error(status, &resp, StatusCode::BAD_REQUEST, "invalid_request");
    let (status, resp) = app
        .post(
            &format!("/v1/worlds/{}/sources", uuid::Uuid::new_v4()),
            json!({"filename": "a", "text": "b"}),
        )
        .await;
    assert_error(status, &resp, StatusCode::NOT_FOUND, "world_not_found");

    // A JSON array is not an object, even one with the fields in order.
    let (status, resp) = app.post(&path, json!(["a.txt", "Some text.", null])).await;
    let error = assert_error(status, &resp, StatusCode::BAD_REQUEST, "invalid_request");
    assert!(
        error["message"].as_str().unwrap().contains("must be a JSON object"),
        "{resp}"
    );

    // Multipart: non-UTF-8 bytes are refused.
    let bad = reqwest::multipart::Part::bytes(vec![0xff, 0xfe, 0x00]).file_name("bin.txt");
    let resp = app
        .client
        .post(app.url(&path))
        .bearer_auth(TOKEN)
        .multipart(reqwest::multipart::Form::new().part("file", bad))
        .send()
        .await
        .unwrap();
    let (status, resp) = read(resp).await;
    assert_error(status, &resp, StatusCode::BAD_REQUEST, "invalid_request");

    let (_, sources) = app.get(&path).await;
    assert_eq!(sources["sources"], json!([]));
    let (_, jobs) = app.get(&format!("/v1/worlds/{}/jobs", id(&world))).await;
    assert_eq!(jobs["jobs"], json!([]));
}

#[tokio::test]
async fn multipart_uploads_and_html_are_accepted() {
    let (fake, app, world) = setup(512).await;
    let path = format!("/v1/worlds/{}/sources", id(&world));
    let html = "<html><head><style>p{}</style></head><body><h1>Isles</h1><p>Salt &amp; amber.</p></body></html>";
    let part = reqwest::multipart::Part::bytes(html.as_bytes().to_vec()).file_name("isles.html");
    let resp = app
        .client
        .post(app.url(&path))
        .bearer_auth(TOKEN)
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .unwrap();
    let (status, accepted) = read(resp).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert_eq!(accepted["source"]["filename"], "isles.html");
    assert_eq!(accepted["source"]["content_type"], "text/html");
    let (status, got) = app.get(&format!("{path}/{}", id(&accepted["source"]))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["chunks"], accepted["source"]["chunks"]);
    app.drain().await;
    let sent: Vec<String> = fake.stats().embed_calls.iter().flat_map(|c| c.texts.clone()).collect();
    assert!(
        sent.iter().all(|t| !t.contains('<') && !t.contains("p{}")),
        "HTML was converted: {sent:?}"
    );
    assert!(sent.iter().any(|t| t.contains("Salt & amber.")));
}

#[tokio::test]
async fn multipart_fields_override_the_part_and_unknown_or_repeated_parts_are_refused() {
    let (_fake, app, world) = setup(512).await;
    let path = format!("/v1/worlds/{}/sources", id(&world));
    let send = |form: reqwest::multipart::Form| {
        let request = app.client.post(app.url(&path)).bearer_auth(TOKEN).multipart(form);
        async move { read(request.send().await.unwrap()).await }
    };
    let file = |name: Option<&str>, mime: Option<&str>, text: &str| {
        let mut part = reqwest::multipart::Part::bytes(text.as_bytes().to_vec());
        if let Some(name) = name {
            part = part.file_name(name.to_owned());
        }
        if let Some(mime) = mime {
            part = part.mime_str(mime).unwrap();
        }
        part
    };
    // `filename` and `content_type` fields win over the part's own.
    let (status, accepted) = send(
        reqwest::multipart::Form::new()
            .part("file", file(Some("x.bin"), None, "# Isles\n\nSalt and amber."))
            .text("filename", "isles.md")
            .text("content_type", "text/markdown"),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert_eq!(
        (&accepted["source"]["filename"], &accepted["source"]["content_type"]),
        (&json!("isles.md"), &json!("text/markdown"))
    );
    // A part without a filename is named after its content type.
    let (status, accepted) =
        send(reqwest::multipart::Form::new().part("file", file(None, Some("text/html"), "<p>Salt &amp; amber.</p>")))
            .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert_eq!(
        (&accepted["source"]["filename"], &accepted["source"]["content_type"]),
        (&json!("upload.html"), &json!("text/html"))
    );
    // Unknown and repeated parts are refused like unknown and repeated JSON fields.
    for (form, field) in [
        (
            reqwest::multipart::Form::new()
                .part("file", file(Some("a.txt"), None, "One."))
                .text("foo", "bar"),
            "foo",
        ),
        (
            reqwest::multipart::Form::new()
                .part("file", file(Some("a.txt"), None, "One."))
                .part("file", file(Some("b.txt"), None, "Two.")),
            "file",
        ),
        (
            reqwest::multipart::Form::new()
                .text("filename", "a.txt")
                .text("filename", "b.txt")
                .part("file", file(Some("a.txt"), None, "One.")),
            "filename",
        ),
        (reqwest::multipart::Form::new().text("filename", "a.txt"), "file"),
    ] {
        let (status, body) = send(form).await;
        let error = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(error["details"]["field"], field, "{body}");
    }
    let (_, sources) = app.get(&path).await;
    assert_eq!(
        sources["sources"].as_array().unwrap().len(),
        2,
        "the refusals stored nothing"
    );
}

#[tokio::test]
async fn a_job_paused_while_its_batch_waits_for_a_key_sends_nothing() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let base = fake.base_url();
    let app = spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a")];
        s.providers.google.scheduling.acquire_timeout_s = 5;
        s.embedding.workers = 0;
    })
    .await;
    let world = google_world(&app, 512).await;
    // The first job's call is rate limited: the only key cools down for a second.
    add(&app, &world, "One short text.").await;
    fake.fail_next(Failure::RateLimited(Duration::from_secs(1)));
    app.work_step("w").await;
    let calls = fake.stats().embed_requests();
    assert_eq!(calls, 1);
    // The second job's batch is claimed and waits for the key; the job is paused meanwhile.
    let second = add(&app, &world, "Another short text.").await;
    let step = app.spawn_work_step("w");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let job = format!("/v1/jobs/{}", id(&second["job"]));
    let (status, paused) = app.post(&format!("{job}/pause"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    let step = step.await.unwrap();
    assert_eq!((step.claimed, step.embedded), (1, 0), "{step:?}");
    assert_eq!(
        fake.stats().embed_requests(),
        calls,
        "nothing was sent for the paused job"
    );
    let (_, got) = app.get(&job).await;
    assert_eq!(
        (
            &got["status"],
            &got["counts"]["pending"],
            &got["counts"]["rate_limited"]
        ),
        (&json!("paused"), &json!(1), &json!(0)),
        "{got}"
    );
    // Resumed, it is embedded as usual.
    let (status, _) = app.post(&format!("{job}/resume"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    app.drain().await;
    let (_, got) = app.get(&job).await;
    assert_eq!(got["status"], "completed", "{got}");
}

#[tokio::test]
async fn a_stopping_worker_gives_its_claimed_chunks_back_at_once() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    fake.set_latency(Duration::from_secs(30));
    let app = app_with_google(&fake, 1).await;
    let world = google_world(&app, 512).await;
    let accepted = add(&app, &world, "One short text. And a second sentence.").await;
    // The worker has claimed the chunk and is waiting on the provider.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while fake.stats().requests == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker never called the provider"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A graceful stop; the next process finds the chunk free to claim, not leased for minutes.
    let base = fake.base_url();
    let app = app
        .restart_with(move |s| {
            s.providers.google.base_url = base;
            s.providers.google.keys = vec![SecretString::from("key-a")];
            s.embedding.workers = 0;
        })
        .await;
    let now = chrono::Utc::now();
    let items = app
        .state
        .store
        .claim_work("next", 10, now + chrono::Duration::minutes(2), now)
        .await
        .unwrap();
    assert_eq!(items.len(), 1, "the chunk was given back");
    assert_eq!(items[0].job_id.0.to_string(), id(&accepted["job"]));
    assert_eq!(items[0].attempts, 0, "no attempt spent");
}

#[tokio::test]
async fn background_workers_finish_several_sources_end_to_end() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = app_with_google(&fake, 2).await;
    let world = google_world(&app, 24).await;
    let texts = [
        TEXT.to_owned(),
        many_sentences(),
        "A third, short book about the sea.".to_owned(),
    ];
    let mut accepted = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let (status, body) = app
            .post(
                &format!("/v1/worlds/{}/sources", id(&world)),
                json!({"filename": format!("book-{i}.md"), "text": text}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert_eq!(body["source"]["book_number"], i + 1);
        accepted.push(body);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for body in &accepted {
        let job = format!("/v1/jobs/{}", id(&body["job"]));
        loop {
            let (_, current) = app.get(&job).await;
            if current["status"] == "completed" {
                assert_eq!(current["counts"]["embedded"], body["source"]["chunks"]);
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "job did not complete in time: {current}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let total: u64 = accepted.iter().map(|b| b["source"]["chunks"].as_u64().unwrap()).sum();
    let (_, world_now) = app.get(&format!("/v1/worlds/{}", id(&world))).await;
    assert_eq!(world_now["stats"]["sources"], 3);
    assert_eq!(world_now["stats"]["embedded"], total);
    let wid = WorldId(uuid::Uuid::parse_str(&id(&world)).unwrap());
    let collection = world["collection"].as_str().unwrap();
    let points = app
        .state
        .vectors
        .count(collection, PointFilter::world(wid))
        .await
        .unwrap();
    assert_eq!(points, total, "one point per chunk");
    assert_eq!(fake.stats().items_embedded, total, "each chunk embedded once");
}

#[tokio::test]
async fn job_events_stream_replays_from_last_event_id_and_end_after_the_status() {
    let (_fake, app, world) = setup(24).await;
    let (_, accepted) = app
        .post(
            &format!("/v1/worlds/{}/sources", id(&world)),
            json!({"filename": "isles.md", "text": TEXT}),
        )
        .await;
    app.drain().await;
    let url = app.url(&format!("/v1/jobs/{}/events", id(&accepted["job"])));
    let resp = app.client.get(&url).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let body = tokio::time::timeout(Duration::from_secs(10), resp.text())
        .await
        .expect("stream ends")
        .unwrap();
    let events: Vec<(i64, String, Value)> = parse_sse(&body);
    assert!(!events.is_empty(), "no events parsed from {body:?}");
    assert!(events.iter().any(|(_, kind, _)| kind == "progress"), "{body}");
    let (last_id, kind, data) = events.last().unwrap().clone();
    assert_eq!(kind, "status");
    assert_eq!(data["status"], "completed");
    assert!(events.windows(2).all(|w| w[0].0 < w[1].0), "ids increase");

    // Resuming from the first event replays only what came after it.
    assert!(events.len() >= 2, "{events:?}");
    let first_id = events[0].0;
    let resp = app
        .client
        .get(&url)
        .bearer_auth(TOKEN)
        .header("last-event-id", first_id.to_string())
        .send()
        .await
        .unwrap();
    let replay = parse_sse(
        &tokio::time::timeout(Duration::from_secs(10), resp.text())
            .await
            .unwrap()
            .unwrap(),
    );
    let replayed: Vec<i64> = replay.iter().map(|e| e.0).collect();
    let expected: Vec<i64> = events[1..].iter().map(|e| e.0).collect();
    assert_eq!(replayed, expected);
    assert_eq!(replay.last().unwrap().0, last_id);

    let resp = app
        .client
        .get(app.url(&format!("/v1/jobs/{}/events", uuid::Uuid::new_v4())))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let (status, body) = read(resp).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "job_not_found");
}

#[tokio::test]
async fn a_local_world_is_embedded_by_the_built_in_model() {
    if !crate::local_model::model_present("a_local_world_is_embedded_by_the_built_in_model") {
        return;
    }
    let dir = crate::local_model::model_dir();
    let app = spawn_app_with(move |s| {
        s.providers.local.model_dir = dir;
        s.embedding.workers = 0;
    })
    .await;
    let world = app.create_local_world("local").await;
    let accepted = add(&app, &world, TEXT).await;
    let chunks = accepted["source"]["chunks"].as_u64().unwrap();
    assert_eq!(app.drain().await, chunks);
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    let wid = WorldId(uuid::Uuid::parse_str(&id(&world)).unwrap());
    let collection = world["collection"].as_str().unwrap();
    assert_eq!(
        app.state
            .vectors
            .count(collection, PointFilter::world(wid))
            .await
            .unwrap(),
        chunks
    );
}

#[tokio::test]
async fn shutdown_is_bounded_even_with_a_stream_open() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let mut app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.server.shutdown_timeout_s = 1)).await;
    let world = google_world(&app, 512).await;
    let accepted = add(&app, &world, "One short text.").await;
    // A running job's event stream stays open until the job ends, which it never does here.
    let mut stream = app
        .client
        .get(app.url(&format!("/v1/jobs/{}/events", id(&accepted["job"]))))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let _first = tokio::time::timeout(Duration::from_secs(5), stream.chunk()).await;
    let started = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(10), app.stop())
        .await
        .expect("shutdown finishes");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded by shutdown_timeout_s: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn event_streams_beyond_the_configured_number_are_503_until_one_closes() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.server.max_event_streams = 1)).await;
    let world = google_world(&app, 512).await;
    let accepted = add(&app, &world, "One short text.").await;
    let url = app.url(&format!("/v1/jobs/{}/events", id(&accepted["job"])));
    let open = || app.client.get(url.clone()).bearer_auth(TOKEN).send();
    // The job never ends here, so its stream stays open.
    let mut first = open().await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let _ = tokio::time::timeout(Duration::from_secs(5), first.chunk()).await;
    let second = open().await.unwrap();
    assert_eq!(
        second.headers().get("retry-after").map(|v| v.to_str().unwrap()),
        Some("5")
    );
    let (status, body) = read(second).await;
    assert_error(status, &body, StatusCode::SERVICE_UNAVAILABLE, "server_busy");
    // Once the first client goes away, its slot is free again.
    drop(first);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let third = open().await.unwrap();
        if third.status() == StatusCode::OK {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the closed stream's slot was never freed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An app on `fake` with embedding reuse set to `reuse` and no background workers.
async fn app_with_reuse(fake: &FakeGoogle, reuse: quarry::config::ReuseScope) -> TestApp {
    let base = fake.base_url();
    spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a")];
        s.embedding.workers = 0;
        s.embedding.reuse = reuse;
    })
    .await
}

#[tokio::test]
async fn re_adding_identical_text_reuses_vectors_without_any_provider_call() {
    let (fake, app, world) = setup(24).await;
    let first = add(&app, &world, TEXT).await;
    let chunks = first["source"]["chunks"].as_u64().unwrap();
    app.drain().await;
    fake.reset_stats();

    let second = add(&app, &world, TEXT).await;
    assert_eq!(app.drain().await, chunks);
    assert_eq!(fake.stats().requests, 0, "no countTokens, no embed call");
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&second["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["counts"]["embedded"], chunks);
    assert_eq!(job["counts"]["reused"], chunks);
    let (_, first_job) = app.get(&format!("/v1/jobs/{}", id(&first["job"]))).await;
    assert_eq!(first_job["counts"]["reused"], 0);
    // Progress events carry the same counts, `reused` included, and never the same twice.
    let events = app.job_events(&id(&second["job"])).await;
    let progress: Vec<&Value> = events
        .iter()
        .filter(|(_, kind, _)| kind == "progress")
        .map(|(_, _, data)| data)
        .collect();
    assert_eq!(
        progress.last().map(|p| &p["reused"]),
        Some(&json!(chunks)),
        "{events:?}"
    );
    assert!(progress.windows(2).all(|w| w[0] != w[1]), "{progress:?}");

    // Both books have points of their own and are found.
    let wid = WorldId(uuid::Uuid::parse_str(&id(&world)).unwrap());
    let collection = world["collection"].as_str().unwrap();
    let points = app
        .state
        .vectors
        .count(collection, PointFilter::world(wid))
        .await
        .unwrap();
    assert_eq!(points, 2 * chunks);
    let (status, answer) = app
        .post(
            &format!("/v1/worlds/{}/retrieve", id(&world)),
            json!({"query": "Queen Maren rules the northern isles", "top_k": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let books: Vec<u64> = answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["book_number"].as_u64().unwrap())
        .collect();
    assert_eq!(books, [1, 2], "{answer}");
    assert_eq!(answer["results"][0]["score"], answer["results"][1]["score"]);
    // The context holds the text once, and nothing was left out for want of room.
    assert_eq!(
        answer["context"]["chunks"],
        json!([answer["results"][0]["chunk_text"]]),
        "{answer}"
    );
    assert_eq!(answer["warnings"], json!([]), "{answer}");
}

#[tokio::test]
async fn reuse_stays_inside_a_world_unless_configured_global_and_can_be_off() {
    use quarry::config::ReuseScope;
    for (scope, calls_in_other_world, calls_in_same_world) in [
        (ReuseScope::World, true, false),
        (ReuseScope::Global, false, false),
        (ReuseScope::Off, true, true),
    ] {
        let fake = FakeGoogle::start(&["key-a"]).await;
        let app = app_with_reuse(&fake, scope).await;
        let one = google_world(&app, 512).await;
        add(&app, &one, "Salt is the wealth of the islands.").await;
        app.drain().await;

        fake.reset_stats();
        let (status, two) = app
            .post(
                "/v1/worlds",
                json!({"name": "Two", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768}}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
        add(&app, &two, "Salt is the wealth of the islands.").await;
        app.drain().await;
        assert_eq!(
            fake.stats().embed_requests() > 0,
            calls_in_other_world,
            "{scope:?}: identical text in another world"
        );

        fake.reset_stats();
        add(&app, &one, "Salt is the wealth of the islands.").await;
        app.drain().await;
        assert_eq!(
            fake.stats().embed_requests() > 0,
            calls_in_same_world,
            "{scope:?}: identical text in the same world"
        );
    }
}

/// Twenty-four one-sentence chunks at `max_tokens: 16`.
fn many_sentences() -> String {
    (0..24)
        .map(|i| {
            format!(
                "Sentence {} tells of harbour number {} and its grey stone walls. ",
                i,
                i * 7
            )
        })
        .collect()
}

#[tokio::test]
async fn a_429_storm_across_two_keys_fails_nothing_and_spends_no_attempt() {
    let fake = FakeGoogle::start(&["key-a", "key-b"]).await;
    // Google counts every text of a batch: four texts per key per 400 ms.
    fake.set_quota("key-a", 4, Duration::from_millis(400));
    fake.set_quota("key-b", 4, Duration::from_millis(400));
    let base = fake.base_url();
    let app = spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a"), SecretString::from("key-b")];
        s.providers.google.scheduling.acquire_timeout_s = 5;
        s.embedding.workers = 0;
        s.embedding.max_attempts = 1;
    })
    .await;
    let world = google_world(&app, 16).await;
    let accepted = add(&app, &world, &many_sentences()).await;
    let chunks = accepted["source"]["chunks"].as_u64().unwrap();
    assert!(chunks >= 20, "{accepted}");

    assert_eq!(app.drain().await, chunks);
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["counts"]["failed"], 0);
    assert_eq!(job["counts"]["retries"], 0, "rate limits spend no attempt: {job}");
    assert!(job["counts"]["rate_limited"].as_u64().unwrap() > 0, "{job}");

    let stats = fake.stats();
    assert!(stats.quota_rejections > 0);
    assert!(
        stats.key("key-a") > 0 && stats.key("key-b") > 0,
        "both keys carried work"
    );
    assert_eq!(stats.items_embedded, chunks, "every chunk embedded exactly once");
    // Rejected batches were halved until they fit the quota.
    let sizes: Vec<usize> = stats.embed_calls.iter().map(|c| c.texts.len()).collect();
    assert!(sizes[0] > 4, "the first batch was larger than the quota: {sizes:?}");
    assert!(sizes.iter().any(|&n| n <= 4), "{sizes:?}");
}

#[tokio::test]
async fn answers_arriving_after_a_cancel_change_nothing() {
    let (fake, app, world) = setup(16).await;
    let accepted = add(&app, &world, TEXT).await;
    fake.set_latency(Duration::from_millis(400));
    let in_flight = app.spawn_work_step("w");
    tokio::time::sleep(Duration::from_millis(150)).await;
    let (status, cancelled) = app
        .post(&format!("/v1/jobs/{}/cancel", id(&accepted["job"])), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    let step = in_flight.await.unwrap();
    assert!(step.claimed > 0);
    assert_eq!(step.embedded, 0, "the late answer advanced nothing");
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "cancelled");
    assert_eq!(job["counts"]["embedded"], 0);
    let (_, world_now) = app.get(&format!("/v1/worlds/{}", id(&world))).await;
    assert_eq!(world_now["stats"]["embedded"], 0);
    let (_, answer) = app
        .post(
            &format!("/v1/worlds/{}/retrieve", id(&world)),
            json!({"query": "Queen Maren"}),
        )
        .await;
    assert_eq!(answer["warnings"][0]["code"], "no_embedded_chunks", "{answer}");
}

/// The job's events so far, read from the store (the stream only ends with the job).
async fn events_so_far(app: &TestApp, job: &str) -> Vec<(String, Value)> {
    let job = quarry::domain::JobId(uuid::Uuid::parse_str(job).unwrap());
    let events = app.state.store.job_events_after(job, 0, 1000).await.unwrap();
    events
        .into_iter()
        .map(|e| (e.kind.as_str().to_owned(), serde_json::from_str(&e.data).unwrap()))
        .collect()
}

#[tokio::test]
async fn a_vector_store_outage_while_embedding_gives_the_chunks_back_for_a_while_and_says_so() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let (app, _world, _source, job) = crate::helpers::spawn_app_with_unreachable_vectors(fake.base_url()).await;
    let step = app.work_step("w").await;
    assert_eq!((step.claimed, step.embedded), (1, 0));
    assert_eq!(fake.stats().items_embedded, 1);
    // Given back for a pause: a step right after claims nothing and calls nobody.
    let step = app.work_step("w").await;
    assert_eq!(step.claimed, 0);
    assert_eq!(fake.stats().items_embedded, 1, "not embedded again at once");

    let (_, got) = app.get(&format!("/v1/jobs/{}", job.id)).await;
    assert_eq!(got["status"], "running", "{got}");
    assert_eq!(
        (&got["counts"]["pending"], &got["counts"]["failed"]),
        (&json!(1), &json!(0)),
        "an outage spends no attempt: {got}"
    );
    let warnings: Vec<Value> = events_so_far(&app, &job.id.0.to_string())
        .await
        .into_iter()
        .filter(|(kind, _)| kind == "warning")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0]["code"], "vector_store_unavailable");
    assert_eq!(warnings[0]["chunks"], 1);
    assert!(
        warnings[0]["message"].as_str().unwrap().contains("in 5 s"),
        "{}",
        warnings[0]
    );
}

#[tokio::test]
async fn vectors_the_vector_store_refuses_spend_attempts_until_the_chunk_fails() {
    let (fake, app, world) = setup(64).await;
    let accepted = add(&app, &world, "Queen Maren rules the northern isles.").await;
    // A tampered run row: the run's vectors no longer fit its collection (768 dimensions).
    {
        use sqlx::ConnectOptions as _;
        let options: sqlx::sqlite::SqliteConnectOptions = app.store_url().parse().unwrap();
        let mut conn = options.connect().await.unwrap();
        sqlx::query("UPDATE runs SET dimensions = 700")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    app.drain().await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    app.drain().await;
    let job_id = id(&accepted["job"]);
    let (_, job) = app.get(&format!("/v1/jobs/{job_id}")).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["errors"][0]["code"], "vector_store_rejected", "{job}");
    assert_eq!(
        fake.stats().items_embedded,
        2,
        "one embedding per attempt (max_attempts 2)"
    );
    let events = app.job_events(&job_id).await;
    let warnings: Vec<&Value> = events
        .iter()
        .filter(|(_, kind, _)| kind == "warning")
        .map(|(_, _, data)| data)
        .collect();
    assert_eq!(warnings.len(), 2, "{events:?}");
    assert!(warnings.iter().all(|w| w["code"] == "vector_store_rejected"));
}

#[tokio::test]
async fn a_job_left_running_with_nothing_to_claim_is_finished_by_the_workers() {
    let (_fake, app, world) = setup(64).await;
    let accepted = add(&app, &world, TEXT).await;
    // A worker marked the job's last entries and its process stopped before finishing the job
    // (the points would be written; they do not matter here).
    let store = &app.state.store;
    let now = chrono::Utc::now();
    let items = store
        .claim_work("gone", 100, now + chrono::Duration::minutes(5), now)
        .await
        .unwrap();
    assert!(!items.is_empty());
    let done: Vec<(quarry::domain::ChunkId, String)> =
        items.iter().map(|i| (i.chunk_id, i.text_sha256.clone())).collect();
    let marked = store
        .complete_work("gone", items[0].job_id, items[0].run_id, &done, 0, now)
        .await
        .unwrap();
    assert_eq!(marked, items.len() as u64);
    let path = format!("/v1/jobs/{}", id(&accepted["job"]));
    let (_, job) = app.get(&path).await;
    assert_eq!(
        (&job["status"], &job["counts"]["pending"]),
        (&json!("running"), &json!(0)),
        "{job}"
    );

    // Nothing is left to claim, so only the idle workers' sweep can end it.
    app.drain().await;
    let (_, job) = app.get(&path).await;
    assert_eq!(job["status"], "completed", "{job}");
}

#[tokio::test]
async fn an_open_event_stream_ends_cleanly_when_the_server_shuts_down() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    // Long enough that a stream holding the shutdown up would hang the test.
    let mut app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.server.shutdown_timeout_s = 600)).await;
    let world = google_world(&app, 24).await;
    let (_, accepted) = app
        .post(
            &format!("/v1/worlds/{}/sources", id(&world)),
            json!({"filename": "isles.md", "text": TEXT}),
        )
        .await;
    // The job stays running (no workers), so its stream would go on.
    let url = app.url(&format!("/v1/jobs/{}/events", id(&accepted["job"])));
    let resp = app.client.get(&url).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let reader = tokio::spawn(resp.text());
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Without the shutdown signal the stream holds the graceful shutdown until its timeout.
    tokio::time::timeout(Duration::from_secs(60), app.stop())
        .await
        .expect("the server stopped without waiting out its 600 s shutdown timeout");
    let body = tokio::time::timeout(Duration::from_secs(30), reader)
        .await
        .expect("the stream ended")
        .unwrap()
        .expect("a complete body, not a broken connection");
    let events = parse_sse(&body);
    assert_eq!(events.first().map(|e| e.1.as_str()), Some("status"), "{body}");
    assert_eq!(events[0].2["status"], "running");
}
