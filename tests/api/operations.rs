//! Health, readiness, authentication, OpenAPI and the interactive docs.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TOKEN, assert_error, read, spawn_app};

#[tokio::test]
async fn probes_answer_without_a_token() {
    let app = spawn_app().await;
    let (status, body) = read(app.client.get(app.url("/healthz")).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "ok");

    let (status, body) = read(app.client.get(app.url("/readyz")).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ready");
    assert_eq!(body["store"]["kind"], "sqlite");
    assert_eq!(body["store"]["ok"], true);
    assert_eq!(body["vectors"]["kind"], "embedded");
    assert_eq!(body["vectors"]["ok"], true);
    assert!(body.get("error").is_none(), "{body}");
}

#[tokio::test]
async fn readyz_reports_503_when_the_store_is_gone() {
    let app = spawn_app().await;
    app.deps.store.close().await;
    let (status, body) = read(app.client.get(app.url("/readyz")).send().await.unwrap()).await;
    assert_error(status, &body, StatusCode::SERVICE_UNAVAILABLE, "store_unavailable");
    assert_eq!(body["status"], "unavailable");
    assert_eq!(body["store"]["ok"], false);
    assert_eq!(body["vectors"]["ok"], true);
    // Unauthenticated: the cause (paths, hosts) is in the log, not here.
    assert_eq!(
        body["store"]["error"],
        "the store cannot be reached (the server log says why)"
    );
    assert!(
        !body.to_string().contains(&app.dir.path().display().to_string()),
        "{body}"
    );

    // And a request that needs the store is a structured 503, not a 500.
    let (status, body) = app.get("/v1/worlds").await;
    assert_error(status, &body, StatusCode::SERVICE_UNAVAILABLE, "store_unavailable");
}

#[tokio::test]
async fn v1_requires_a_valid_bearer_token() {
    let app = spawn_app().await;
    let resp = app.client.get(app.url("/v1/worlds")).send().await.unwrap();
    assert_eq!(
        resp.headers().get("www-authenticate").and_then(|v| v.to_str().ok()),
        Some("Bearer")
    );
    let (status, body) = read(resp).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");

    let resp = app
        .client
        .get(app.url("/v1/worlds"))
        .bearer_auth("wrong-token")
        .send()
        .await
        .unwrap();
    let (status, body) = read(resp).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");

    let resp = app
        .client
        .get(app.url("/v1/models"))
        .header("authorization", format!("Basic {TOKEN}"))
        .send()
        .await
        .unwrap();
    let (status, body) = read(resp).await;
    assert_error(status, &body, StatusCode::UNAUTHORIZED, "unauthorized");

    // Unauthenticated requests change nothing, even when they would be valid.
    let resp = app
        .client
        .post(app.url("/v1/worlds"))
        .json(&serde_json::json!({"name": "x", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let (status, body) = app.get("/v1/worlds").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["worlds"], serde_json::json!([]));
}

#[tokio::test]
async fn auth_can_be_disabled_for_development() {
    let app = crate::helpers::spawn_app_with(|s| {
        s.auth.tokens.clear();
        s.auth.disabled = true;
    })
    .await;
    let resp = app.client.get(app.url("/v1/worlds")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
}

#[tokio::test]
async fn startup_refuses_without_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = crate::helpers::test_settings(dir.path(), "sqlite::memory:");
    settings.auth.tokens.clear();
    let err = quarry::app::App::build(settings)
        .await
        .err()
        .expect("startup must fail");
    assert!(err.to_string().contains("auth.tokens"), "{err}");
}

#[tokio::test]
async fn responses_carry_a_request_id() {
    let app = spawn_app().await;
    let resp = app.client.get(app.url("/healthz")).send().await.unwrap();
    let id = resp
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "x-request-id {id:?}");
    let resp = app
        .client
        .get(app.url("/healthz"))
        .header("x-request-id", "client-chosen")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers().get("x-request-id").unwrap(), "client-chosen");
}

#[tokio::test]
async fn served_openapi_matches_the_committed_document() {
    let app = spawn_app().await;
    let (status, served) = read(app.client.get(app.url("/openapi.json")).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    if std::env::var("QUARRY_UPDATE_OPENAPI").is_ok_and(|v| v == "1") {
        std::fs::write(path, quarry::api::openapi::document()).unwrap();
        return;
    }
    let committed: Value = serde_json::from_str(&committed).unwrap_or(Value::Null);
    assert!(
        served == committed,
        "openapi/openapi.json is out of date: regenerate it with `scripts/cargo run -- openapi > openapi/openapi.json` \
         (or QUARRY_UPDATE_OPENAPI=1 make test)"
    );
    // The binary's `quarry openapi` prints the same document.
    let printed: Value = serde_json::from_str(&quarry::api::openapi::document()).unwrap();
    assert_eq!(printed, served);
    // Every route is documented, and so is the error body.
    for path in [
        "/v1/worlds",
        "/v1/worlds/{world_id}",
        "/v1/models",
        "/healthz",
        "/readyz",
    ] {
        assert!(
            served["paths"].get(path).is_some(),
            "{path} missing from the OpenAPI document"
        );
    }
    assert!(served["components"]["schemas"].get("ErrorBody").is_some());
    // Every response is described (OpenAPI requires it; generators refuse documents without).
    for (path, item) in served["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            for (code, response) in operation["responses"].as_object().unwrap() {
                let description = response["description"].as_str().unwrap_or_default();
                assert!(
                    !description.trim().is_empty(),
                    "{method} {path} {code} has no description"
                );
            }
        }
    }
    // The upload is an operation of its own with one content type (generators such as
    // openapi-python-client break on an operation with two), and its form names its file part,
    // so that generated clients can send one: UTF-8 text (`contentMediaType: text/plain`), what
    // the server takes, not any bytes (`format: binary`).
    let content = |path: &str| served["paths"][path]["post"]["requestBody"]["content"].clone();
    let upload = content("/v1/worlds/{world_id}/sources/upload");
    assert_eq!(upload.as_object().unwrap().len(), 1, "{upload}");
    assert_eq!(
        upload["multipart/form-data"]["schema"]["$ref"],
        "#/components/schemas/AddSourceUpload"
    );
    let json_body = content("/v1/worlds/{world_id}/sources");
    assert_eq!(json_body.as_object().unwrap().len(), 1, "{json_body}");
    assert!(json_body.get("application/json").is_some(), "{json_body}");
    let file = &served["components"]["schemas"]["AddSourceUpload"]["properties"]["file"];
    assert_eq!(
        (&file["type"], &file["contentMediaType"]),
        (&json!("string"), &json!("text/plain")),
        "{file}"
    );
    assert!(file.get("format").is_none(), "{file}");
    assert_eq!(served["openapi"].as_str().map(|v| v.starts_with("3.1")), Some(true));
}

#[tokio::test]
async fn docs_page_is_served_without_downloads() {
    let app = spawn_app().await;
    let resp = app.client.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let html = resp.text().await.unwrap();
    assert!(html.contains("swagger"), "docs page: {html:.200}");
    // The page's assets come from this server, not from a CDN.
    assert!(
        !html.contains("https://"),
        "docs page must not load assets from the internet"
    );
    let resp = app
        .client
        .get(app.url("/docs/swagger-initializer.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.text().await.unwrap().contains("/openapi.json"));
}

#[tokio::test]
async fn models_lists_the_registry() {
    let app = spawn_app().await;
    let (status, body) = app.get("/v1/models").await;
    assert_eq!(status, StatusCode::OK);
    let models = body["models"].as_array().unwrap();
    let find = |p: &str, m: &str| {
        models
            .iter()
            .find(|x| x["provider"] == p && x["model"] == m)
            .cloned()
            .unwrap_or_else(|| panic!("{p}/{m} missing"))
    };
    let g = find("google", "gemini-embedding-001");
    assert_eq!(g["max_input_tokens"], 2048);
    assert_eq!(g["default_dimensions"], 3072);
    assert_eq!(g["allowed_dimensions"], serde_json::json!({"min": 128, "max": 3072}));
    assert_eq!(g["query_mode"], "RETRIEVAL_QUERY");
    assert_eq!(g["document_mode"], "RETRIEVAL_DOCUMENT");
    assert_eq!(find("openai", "text-embedding-3-small")["default_dimensions"], 1536);
    assert_eq!(find("openai", "text-embedding-3-large")["max_input_tokens"], 8192);
    let l = find("local", "all-MiniLM-L6-v2");
    assert_eq!(
        (l["default_dimensions"].clone(), l["max_input_tokens"].clone()),
        (384.into(), 256.into())
    );
    let int8 = find("local", "all-MiniLM-L6-v2-int8");
    assert_eq!(
        (int8["default_dimensions"].clone(), int8["max_input_tokens"].clone()),
        (384.into(), 256.into())
    );
    // The chunk limit a world accepts: the local model's 256 include [CLS] and [SEP].
    assert_eq!(
        (l["max_chunk_tokens"].clone(), g["max_chunk_tokens"].clone()),
        (254.into(), 2048.into())
    );
}

#[tokio::test]
async fn configured_openai_compatible_models_are_listed_and_usable() {
    let app = crate::helpers::spawn_app_with(|s| {
        s.providers.openai.models.push(quarry::config::ExtraModel {
            name: "nomic-embed-text".into(),
            dimensions: 768,
            max_input_tokens: 2048,
            dimensions_adjustable: false,
        });
        s.providers.openai.keys.push(secrecy::SecretString::from("sk-test"));
    })
    .await;
    let (_, body) = app.get("/v1/models").await;
    assert!(
        body["models"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["model"] == "nomic-embed-text")
    );
    let (status, body) = app
        .post(
            "/v1/worlds",
            serde_json::json!({"name": "n", "embedding": {"provider": "openai", "model": "nomic-embed-text"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["embedding"]["dimensions"], 768);
}

/// Settings on `fake` (an OpenAI-compatible server), with the extra model `nomic-embed-text`
/// configured or not, and no background workers.
fn nomic_settings(base: String, with_model: bool) -> impl FnOnce(&mut quarry::config::Settings) {
    move |s| {
        s.providers.openai.base_url = base;
        if with_model {
            s.providers.openai.models.push(quarry::config::ExtraModel {
                name: "nomic-embed-text".into(),
                dimensions: 768,
                max_input_tokens: 2048,
                dimensions_adjustable: false,
            });
        }
        s.providers.openai.keys.push(secrecy::SecretString::from("sk-test"));
        s.embedding.workers = 0;
    }
}

/// A world on `nomic-embed-text` with one source added (not embedded yet): the fake, the app,
/// the world's path and the 202 body.
async fn nomic_world_with_a_source() -> (
    crate::fake_providers::FakeOpenAi,
    crate::helpers::TestApp,
    String,
    Value,
) {
    let fake = crate::fake_providers::FakeOpenAi::start(&["sk-test"]).await;
    fake.add_model("nomic-embed-text", 768, false);
    let app = crate::helpers::spawn_app_with(nomic_settings(fake.base_url(), true)).await;
    let (status, world) = app
        .post(
            "/v1/worlds",
            serde_json::json!({"name": "n", "embedding": {"provider": "openai", "model": "nomic-embed-text"}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    let path = format!("/v1/worlds/{}", world["id"].as_str().unwrap());
    let (status, accepted) = app
        .post(
            &format!("{path}/sources"),
            serde_json::json!({"filename": "a.txt", "text": "Queen Maren rules the isles."}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    (fake, app, path, accepted)
}

#[tokio::test]
async fn chunks_wait_without_spending_attempts_while_their_model_is_missing_from_the_configuration() {
    let (fake, app, path, accepted) = nomic_world_with_a_source().await;
    let job = format!("/v1/jobs/{}", accepted["job"]["id"].as_str().unwrap());

    // A process (a replica, or this one after a configuration change) without the model.
    let app = app.restart_with(nomic_settings(fake.base_url(), false)).await;
    for _ in 0..2 {
        app.drain().await;
    }
    let (_, waiting) = app.get(&job).await;
    assert_eq!(waiting["status"], "running", "{waiting}");
    assert_eq!(
        (
            &waiting["counts"]["pending"],
            &waiting["counts"]["failed"],
            &waiting["counts"]["retries"]
        ),
        (&serde_json::json!(1), &serde_json::json!(0), &serde_json::json!(0)),
        "{waiting}"
    );
    let job_id = quarry::domain::JobId(uuid::Uuid::parse_str(accepted["job"]["id"].as_str().unwrap()).unwrap());
    let events = app.deps.store.job_events_after(job_id, 0, 100).await.unwrap();
    let warnings: Vec<serde_json::Value> = events
        .iter()
        .filter(|e| e.kind == quarry::domain::JobEventKind::Warning)
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    assert_eq!(warnings.len(), 1, "told once: {events:?}");
    assert_eq!(warnings[0]["code"], "provider_unavailable");
    assert!(
        warnings[0]["message"].as_str().unwrap().contains("nomic-embed-text"),
        "{warnings:?}"
    );
    assert_eq!(fake.stats().embed_requests(), 0);

    // Nothing was given up on: the chunk is still pending, for a process that has the model.
    let (_, source) = app.get(&format!("{path}/sources")).await;
    assert_eq!(source["sources"][0]["pending"], 1, "{source}");
}

#[tokio::test]
async fn a_world_whose_model_left_the_configuration_is_told_so_on_reingest_and_retrieval() {
    let (fake, app, path, _) = nomic_world_with_a_source().await;
    app.drain().await;

    let app = app.restart_with(nomic_settings(fake.base_url(), false)).await;
    let (status, body) = app
        .post(&format!("{path}/retrieve"), serde_json::json!({"query": "who rules"}))
        .await;
    let error = assert_error(status, &body, StatusCode::BAD_GATEWAY, "provider_error");
    assert!(
        error["message"].as_str().unwrap().contains("nomic-embed-text"),
        "{body}"
    );
    let (status, body) = app.post(&format!("{path}/reingest"), serde_json::json!({})).await;
    let error = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_embedding_profile");
    assert_eq!(error["details"]["field"], "embedding", "{body}");
    let (_, jobs) = app.get(&format!("{path}/jobs")).await;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 1, "no re-ingest job: {jobs}");
    // The world itself is still there, its chunks intact.
    let (status, got) = app.get(&path).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["stats"]["embedded"], 1, "{got}");
}

/// README's PostgreSQL backup, as written in `docs/operations.md`: `pg_dump --format=custom`
/// of the store, `pg_restore --no-owner` into an empty database, and quarry started on the
/// restored database with an empty vector store answers as before — the startup repair writes
/// every point again from the vectors the store kept, without asking the provider for one chunk.
#[tokio::test]
async fn a_postgres_store_backed_up_with_pg_dump_and_restored_answers_as_before() {
    use crate::fake_providers::FakeGoogle;
    use crate::helpers::{PgDatabase, google_world, on_fake_google, spawn_app_on};

    let Some(db) = PgDatabase::create("operations::pg_dump_backup").await else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let mut app = spawn_app_on(db.url.clone(), on_fake_google(fake.base_url(), |_| {})).await;
    let world = google_world(&app).await;
    app.add_text(
        &world,
        "isles.txt",
        "Queen Maren rules the isles. Her fleet guards the straits. The lighthouse keeper climbs at dusk.",
    )
    .await;
    app.drain().await;
    let query = json!({"query": "Who guards the straits?", "top_k": 3});
    let (status, before) = app.post(&format!("/v1/worlds/{world}/retrieve"), query.clone()).await;
    assert_eq!(status, StatusCode::OK, "{before}");
    let ids = |answer: &Value| -> Vec<Value> {
        answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["chunk_id"].clone())
            .collect()
    };
    assert!(!ids(&before).is_empty(), "{before}");
    app.stop().await;

    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("quarry.dump");
    let run = |program: &str, args: &[&str]| {
        let out = std::process::Command::new(program)
            .args(args)
            .output()
            .unwrap_or_else(|err| panic!("{program} could not run: {err}"));
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let dump_arg = dump.to_str().unwrap();
    run("pg_dump", &["--format=custom", &format!("--file={dump_arg}"), &db.url]);
    let restored = PgDatabase::create("operations::pg_dump_backup (restored)")
        .await
        .unwrap();
    run(
        "pg_restore",
        &["--no-owner", &format!("--dbname={}", restored.url), dump_arg],
    );

    fake.reset_stats();
    // A new process on the restored database, with an empty vector store of its own.
    let app = spawn_app_on(restored.url.clone(), on_fake_google(fake.base_url(), |_| {})).await;
    let mut after = Value::Null;
    for _ in 0..100 {
        let (status, answer) = app.post(&format!("/v1/worlds/{world}/retrieve"), query.clone()).await;
        if status == StatusCode::OK && !answer["results"].as_array().unwrap().is_empty() {
            after = answer;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(ids(&after), ids(&before), "{after}");
    let sent = fake.stats().sent_texts();
    assert!(
        sent.iter().all(|t| t == "Who guards the straits?"),
        "only queries were embedded after the restore: {sent:?}"
    );
    drop(app);
    db.drop_db().await;
    restored.drop_db().await;
}
