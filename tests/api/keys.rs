//! Provider keys through the API: sealed at rest, never returned, enable/disable/delete,
//! configuration keys read-only, and the scheduler's live view.

use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::helpers::{assert_error, spawn_app, spawn_app_with};

pub(crate) const MASTER_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="; // 32 bytes
const SECRET: &str = "AIzaSyDUMMY-secret-value-9f8e7d";

fn with_master_key(s: &mut quarry::config::Settings) {
    s.security.master_key = Some(SecretString::from(MASTER_KEY));
}

#[tokio::test]
async fn adding_a_key_needs_the_master_key() {
    let app = spawn_app().await;
    let (status, body) = app
        .post("/v1/provider-keys", json!({"provider": "google", "secret": SECRET}))
        .await;
    assert_error(status, &body, StatusCode::CONFLICT, "master_key_missing");
    let (_, list) = app.get("/v1/provider-keys").await;
    assert_eq!(list["keys"], json!([]));
}

#[tokio::test]
async fn keys_are_sealed_never_returned_and_make_remote_worlds_possible() {
    let app = spawn_app_with(with_master_key).await;
    let world =
        json!({"name": "g", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768}});
    let (status, body) = app.post("/v1/worlds", world.clone()).await;
    assert_error(status, &body, StatusCode::CONFLICT, "no_eligible_provider_key");

    let (status, key) = app
        .post(
            "/v1/provider-keys",
            json!({"provider": "google", "secret": SECRET, "label": "team-a", "quota_group": "p1"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{key}");
    assert_eq!(key["provider"], "google");
    assert_eq!(key["label"], "team-a");
    assert_eq!(key["source"], "api");
    assert_eq!(key["quota_group"], "p1");
    assert_eq!(key["enabled"], true);
    assert!(key["fingerprint"].as_str().unwrap().starts_with("…8e7d:"), "{key}");
    assert!(!key.to_string().contains(SECRET));

    // The secret is stored encrypted.
    let db = app.dir.path().join("data").join("quarry.db");
    let raw = std::fs::read(&db).unwrap();
    let wal = std::fs::read(db.with_extension("db-wal")).unwrap_or_default();
    for bytes in [&raw, &wal] {
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "secret found in plaintext on disk"
        );
    }

    let (status, body) = app.post("/v1/worlds", world.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // Same secret twice is a conflict.
    let (status, body) = app
        .post("/v1/provider-keys", json!({"provider": "google", "secret": SECRET}))
        .await;
    assert_error(status, &body, StatusCode::CONFLICT, "provider_key_exists");

    let (_, list) = app.get("/v1/provider-keys").await;
    assert_eq!(list["keys"].as_array().unwrap().len(), 1);
    let (_, providers) = app.get("/v1/providers").await;
    let google = providers["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "google")
        .unwrap()
        .clone();
    let live = &google["keys"][0];
    assert_eq!(live["key_id"], key["key_id"]);
    assert_eq!(live["in_flight"], 0);
    assert_eq!(live["cooling_down_until"], Value::Null);
    assert_eq!(live["quota_group"], "p1");
    for body in [list.to_string(), providers.to_string()] {
        assert!(!body.contains(SECRET));
    }

    // Disable → no eligible key; enable → eligible again.
    let path = format!("/v1/provider-keys/{}", key["key_id"].as_str().unwrap());
    let (status, updated) = app.patch(&path, json!({"enabled": false})).await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["enabled"], false);
    let (status, body) = app.post("/v1/worlds", world.clone()).await;
    assert_error(status, &body, StatusCode::CONFLICT, "no_eligible_provider_key");
    let (_, updated) = app.patch(&path, json!({"enabled": true})).await;
    assert_eq!(updated["enabled"], true);

    let (status, body) = app.delete(&path).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (status, body) = app.delete(&path).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "key_not_found");
    let (status, body) = app.patch(&path, json!({"enabled": true})).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "key_not_found");
    let (status, body) = app.post("/v1/worlds", world).await;
    assert_error(status, &body, StatusCode::CONFLICT, "no_eligible_provider_key");
}

#[tokio::test]
async fn bad_key_requests_are_rejected_and_store_nothing() {
    let app = spawn_app_with(with_master_key).await;
    for (body, field) in [
        (json!({"provider": "cohere", "secret": SECRET}), Some("provider")),
        (json!({"provider": "local", "secret": SECRET}), Some("provider")),
        (json!({"provider": "google", "secret": "  "}), Some("secret")),
        (json!({"provider": "google", "secret": "two words"}), Some("secret")),
        (
            json!({"provider": "google", "secret": "k".repeat(1025)}),
            Some("secret"),
        ),
        (json!({"provider": "google"}), None),
        (json!({"provider": "google", "secret": SECRET, "extra": 1}), None),
        (
            json!({"provider": "google", "secret": SECRET, "label": "team\u{0}a"}),
            Some("label"),
        ),
        (
            json!({"provider": "google", "secret": SECRET, "quota_group": "p\n1"}),
            Some("quota_group"),
        ),
    ] {
        let (status, resp) = app.post("/v1/provider-keys", body.clone()).await;
        let err = assert_error(status, &resp, StatusCode::BAD_REQUEST, "invalid_request");
        if let Some(field) = field {
            assert_eq!(err["details"]["field"], field, "{body}");
        }
        assert!(!resp.to_string().contains(SECRET), "error echoes the secret: {resp}");
    }
    let (status, body) = app
        .patch(
            &format!("/v1/provider-keys/{}", uuid::Uuid::new_v4()),
            json!({"enabled": "yes"}),
        )
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let (status, body) = app.delete("/v1/provider-keys/nope").await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let (_, list) = app.get("/v1/provider-keys").await;
    assert_eq!(list["keys"], json!([]));
}

#[tokio::test]
async fn configuration_keys_are_listed_read_only_and_survive_restarts_as_one_row() {
    let app = spawn_app_with(|s| {
        s.providers.openai.keys = vec![SecretString::from("sk-config-key-0123456789")];
        s.providers.openai.quota_group = Some("org-1".into());
    })
    .await;
    let (_, list) = app.get("/v1/provider-keys").await;
    let keys = list["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0]["source"], "config");
    assert_eq!(keys[0]["provider"], "openai");
    assert_eq!(keys[0]["quota_group"], "org-1");
    assert!(!list.to_string().contains("sk-config-key-0123456789"));
    let path = format!("/v1/provider-keys/{}", keys[0]["key_id"].as_str().unwrap());
    let (status, body) = app.delete(&path).await;
    assert_error(status, &body, StatusCode::CONFLICT, "provider_key_read_only");
    let (_, after) = app.get("/v1/provider-keys").await;
    assert_eq!(after, list, "the refused delete changed nothing");
    // They can be disabled (and re-enabled).
    let (status, body) = app.patch(&path, json!({"enabled": false})).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let dir = app.dir.clone();
    let mut app = app;
    app.stop().await;
    drop(app);
    let url = format!("sqlite://{}", dir.path().join("data").join("quarry.db").display());
    let app = crate::helpers::spawn_app_on(url, |s| {
        s.vectors.path = dir.path().join("vectors2");
        s.providers.openai.keys = vec![SecretString::from("sk-config-key-0123456789")];
    })
    .await;
    let (_, list) = app.get("/v1/provider-keys").await;
    let keys = list["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1, "the configuration key is mirrored once: {list}");
    assert_eq!(keys[0]["enabled"], false, "its persisted state is kept");
}

#[tokio::test]
async fn metrics_export_key_counters_without_secrets() {
    let app = spawn_app_with(|s| s.providers.google.keys = vec![SecretString::from("AIza-metrics-secret-123")]).await;
    let resp = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = resp.text().await.unwrap();
    assert!(
        text.contains("# TYPE quarry_provider_key_requests_total counter"),
        "{text}"
    );
    assert!(
        text.contains("quarry_provider_key_usable{provider=\"google\""),
        "{text}"
    );
    assert!(!text.contains("AIza-metrics-secret-123"));
}

#[tokio::test]
async fn without_a_usable_key_sources_are_refused_and_a_waiting_job_is_told_why() {
    let fake = crate::fake_providers::FakeGoogle::start(&[SECRET]).await;
    let base = fake.base_url();
    let app = spawn_app_with(move |s| {
        with_master_key(s);
        s.providers.google.base_url = base;
        s.embedding.workers = 0;
    })
    .await;
    let (status, key) = app
        .post("/v1/provider-keys", json!({"provider": "google", "secret": SECRET}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{key}");
    let (status, world) = app
        .post(
            "/v1/worlds",
            json!({"name": "g", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    let sources = format!("/v1/worlds/{}/sources", world["id"].as_str().unwrap());
    let (status, accepted) = app
        .post(
            &sources,
            json!({"filename": "a.txt", "text": "Queen Maren rules the isles."}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let job = accepted["job"]["id"].as_str().unwrap().to_owned();

    let key_path = format!("/v1/provider-keys/{}", key["key_id"].as_str().unwrap());
    let (status, _) = app.patch(&key_path, json!({"enabled": false})).await;
    assert_eq!(status, StatusCode::OK);
    // A source nobody could embed is refused, and nothing of it is stored.
    let (status, body) = app
        .post(
            &sources,
            json!({"filename": "b.txt", "text": "Her fleet guards the straits."}),
        )
        .await;
    assert_error(status, &body, StatusCode::CONFLICT, "no_eligible_provider_key");
    let (_, listed) = app.get(&sources).await;
    assert_eq!(listed["sources"].as_array().unwrap().len(), 1, "{listed}");

    // The job that was already there waits, and says why.
    let step = app.work_step("w").await;
    assert_eq!((step.claimed, step.embedded), (1, 0));
    let events = app
        .state
        .store
        .job_events_after(quarry::domain::JobId(uuid::Uuid::parse_str(&job).unwrap()), 0, 100)
        .await
        .unwrap();
    let warnings: Vec<Value> = events
        .iter()
        .filter(|e| e.kind == quarry::domain::JobEventKind::Warning)
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0]["code"], "no_eligible_key");
    assert_eq!(warnings[0]["chunks"], 1);
    assert!(!warnings[0].to_string().contains(SECRET));
    let (_, got) = app.get(&format!("/v1/jobs/{job}")).await;
    assert_eq!(
        (&got["status"], &got["counts"]["pending"]),
        (&json!("running"), &json!(1)),
        "{got}"
    );
    assert_eq!(fake.stats().items_embedded, 0);
}

/// Another master key (32 other bytes).
const NEW_MASTER_KEY: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

/// `quarry keys rotate-master` (the real binary) re-seals every secret — a provider key and a
/// webhook's signing secret — under a new key in one transaction: quarry on the new key serves
/// them, and quarry on the old key (or any other) is refused at startup, naming the setting,
/// instead of starting with every secret unusable. A rotation to the key in use, or by a
/// process whose key is not the store's, changes nothing.
#[tokio::test]
async fn a_rotated_master_key_serves_every_secret_and_the_old_one_is_refused() {
    let mut app = spawn_app_with(with_master_key).await;
    let (status, key) = app
        .post("/v1/provider-keys", json!({"provider": "google", "secret": SECRET}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{key}");
    let (status, hook) = app
        .post("/v1/webhooks", json!({"url": "https://receiver.example/hooks"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{hook}");
    app.stop().await;
    let (dir, store_url) = (app.dir.clone(), app.store_url().to_owned());
    drop(app);
    let key_file = dir.path().join("new-master.key");
    let rotate = |key: &str, file: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_quarry"))
            .args(["keys", "rotate-master", "--new-key-file", file.to_str().unwrap()])
            .env("QUARRY__STORE__URL", &store_url)
            .env("QUARRY__SECURITY__MASTER_KEY", key)
            .env("QUARRY__VECTORS__PATH", dir.path().join("vectors"))
            .output()
            .expect("the quarry binary runs")
    };
    // To the key in use: refused, nothing changed.
    std::fs::write(&key_file, format!("{MASTER_KEY}\n")).unwrap();
    let same = rotate(MASTER_KEY, &key_file);
    assert_eq!(same.status.code(), Some(1), "{same:?}");
    assert!(
        String::from_utf8_lossy(&same.stderr).contains("the one in use"),
        "{same:?}"
    );
    // By a process that does not hold the store's key: refused.
    std::fs::write(&key_file, NEW_MASTER_KEY).unwrap();
    let stranger = rotate("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY=", &key_file);
    assert_eq!(stranger.status.code(), Some(1), "{stranger:?}");
    assert!(
        String::from_utf8_lossy(&stranger.stderr).contains("master key does not open"),
        "{stranger:?}"
    );

    let rotated = rotate(MASTER_KEY, &key_file);
    assert!(rotated.status.success(), "{rotated:?}");
    let said = String::from_utf8_lossy(&rotated.stdout);
    assert!(said.contains("1 provider key(s) and 1 webhook secret(s)"), "{said}");

    // The old key no longer starts quarry on this store.
    let mut settings = crate::helpers::test_settings(dir.path(), &store_url);
    with_master_key(&mut settings);
    let refused = quarry::app::App::build(settings)
        .await
        .err()
        .expect("the old key is refused");
    assert!(
        matches!(refused, quarry::app::StartupError::MasterKey(_)),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("security.master_key"), "{refused}");

    // The new one does, and every secret opens.
    let app = crate::helpers::spawn_app_in(dir, store_url, |s| {
        s.security.master_key = Some(SecretString::from(NEW_MASTER_KEY));
    })
    .await;
    let (_, list) = app.get("/v1/provider-keys").await;
    let listed = &list["keys"][0];
    assert_eq!((&listed["id"], &listed["usable"]), (&key["id"], &json!(true)), "{list}");
    assert!(listed["problem"].is_null(), "{list}");
    let hooks = app.deps.store.sealed_secrets().await.unwrap();
    let cipher = quarry::crypto::SecretCipher::new(
        <[u8; 32]>::try_from(
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, NEW_MASTER_KEY).unwrap(),
        )
        .unwrap(),
    );
    assert_eq!(hooks.len(), 2);
    for row in &hooks {
        assert!(cipher.open_bytes(row.id.as_bytes(), &row.sealed).is_ok(), "{row:?}");
    }
}

/// A store sealed before the check value existed (migration 0020): the first start with the
/// key its secrets open stores the check; a start with another key is refused.
#[tokio::test]
async fn a_store_without_a_check_value_takes_only_the_key_its_secrets_open() {
    let mut app = spawn_app_with(with_master_key).await;
    let (status, key) = app
        .post("/v1/provider-keys", json!({"provider": "google", "secret": SECRET}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{key}");
    app.stop().await;
    let (dir, store_url) = (app.dir.clone(), app.store_url().to_owned());
    drop(app);
    let forget_check = async || {
        use sqlx::Connection as _;
        let options: sqlx::sqlite::SqliteConnectOptions = store_url.parse().unwrap();
        let mut db = sqlx::SqliteConnection::connect_with(&options).await.unwrap();
        sqlx::query("DELETE FROM master_key_check")
            .execute(&mut db)
            .await
            .unwrap();
        db.close().await.unwrap();
    };
    forget_check().await;
    let mut settings = crate::helpers::test_settings(dir.path(), &store_url);
    settings.security.master_key = Some(SecretString::from(NEW_MASTER_KEY));
    let refused = quarry::app::App::build(settings)
        .await
        .err()
        .expect("another key is refused");
    assert!(refused.to_string().contains("does not open"), "{refused}");

    let app = crate::helpers::spawn_app_in(dir, store_url.clone(), with_master_key).await;
    let (_, list) = app.get("/v1/provider-keys").await;
    assert_eq!(list["keys"][0]["usable"], true, "{list}");
    assert!(
        app.deps.store.master_key_check().await.unwrap().is_some(),
        "the check is stored"
    );
}
