//! `[vectors.collection]` against collections that exist: a collection made under other
//! settings is reported in `/readyz` (and the log) without being touched, `quarry vectors check`
//! lists it and `quarry vectors apply-settings` changes it, after which nothing differs.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

use crate::binary::quarry;
use crate::helpers::{google_world, on_fake_google, spawn_app_in, spawn_app_with};
use quarry::config::Settings;
use quarry::vector::settings::Quantization;

fn int8(settings: &mut Settings) {
    settings.vectors.collection.quantization = Quantization::Int8;
    settings.vectors.collection.hnsw_m = Some(24);
}

/// `/readyz`'s `vectors` once the startup comparison has run (it runs beside startup).
async fn readyz_vectors(app: &crate::helpers::TestApp, want_drift: bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let resp = app.client.get(app.url("/readyz")).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let body: Value = resp.json().await.unwrap();
        let has = body["vectors"]["drift"].as_array().is_some_and(|d| !d.is_empty());
        if has == want_drift {
            return body["vectors"].clone();
        }
        assert!(Instant::now() < deadline, "drift never became {want_drift}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs `quarry vectors <action>` on the files in `dir` with int8 configured.
fn vectors_command(dir: &std::path::Path, store_url: &str, action: &str) -> (Option<i32>, String) {
    let out = quarry(dir)
        .args(["vectors", action])
        .env("QUARRY__STORE__URL", store_url)
        .env("QUARRY__VECTORS__PATH", dir.join("vectors"))
        .env("QUARRY__VECTORS__COLLECTION__QUANTIZATION", "int8")
        .env("QUARRY__VECTORS__COLLECTION__HNSW_M", "24")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code(), format!("{stdout}{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collection_made_under_other_settings_is_reported_and_changed_only_by_the_command() {
    let dead = "http://127.0.0.1:1".to_owned();
    let app = spawn_app_with(on_fake_google(dead.clone(), |_| {})).await;
    let world = google_world(&app).await;
    let (_, body) = app.get(&format!("/v1/worlds/{world}")).await;
    let collection = body["collection"].as_str().unwrap().to_owned();
    // Made with the defaults: nothing differs.
    let vectors = readyz_vectors(&app, false).await;
    assert!(vectors.get("drift").is_none(), "{vectors}");

    let mut app = app.restart_with(on_fake_google(dead.clone(), int8)).await;
    let vectors = readyz_vectors(&app, true).await;
    assert_eq!(
        vectors["ok"], true,
        "drift does not make the service unready: {vectors}"
    );
    let drift = &vectors["drift"][0];
    assert_eq!(drift["collection"], collection.as_str());
    let quantization = drift["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["setting"] == "vectors.collection.quantization")
        .unwrap_or_else(|| panic!("{drift}"));
    assert_eq!(quantization["configured"], "int8");
    assert_eq!(quantization["actual"], "none");
    assert_eq!(quantization["in_place"], true);

    // The embedded store is one process's: the command runs once the service has stopped.
    app.stop().await;
    let (dir, store_url) = (app.dir.clone(), app.store_url().to_owned());
    drop(app);
    let (code, out) = vectors_command(dir.path(), &store_url, "check");
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&collection) && out.contains("vectors.collection.quantization"),
        "{out}"
    );
    assert!(out.contains("vectors.collection.hnsw_m"), "{out}");
    let (code, out) = vectors_command(dir.path(), &store_url, "apply-settings");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("every collection in use matches"), "{out}");
    let (code, out) = vectors_command(dir.path(), &store_url, "check");
    assert_eq!(code, Some(0), "{out}");

    let app = spawn_app_in(dir, store_url, on_fake_google(dead, int8)).await;
    app.state
        .drift
        .check(app.deps.store.as_ref(), app.deps.vectors.as_ref())
        .await;
    let vectors = readyz_vectors(&app, false).await;
    assert!(vectors.get("drift").is_none(), "{vectors}");
}

#[test]
fn bad_collection_settings_stop_startup_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (key, value, named) in [
        (
            "QUARRY__VECTORS__COLLECTION__REPLICATION_FACTOR",
            "2",
            "vectors.collection.replication_factor",
        ),
        ("QUARRY__VECTORS__COLLECTION__QUANTIZATION", "int4", "quantization"),
        (
            "QUARRY__VECTORS__SEARCH__OVERSAMPLING",
            "2",
            "vectors.search.oversampling",
        ),
        ("QUARRY__VECTORS__URLS", "http://q0:6334,http://q0:6334", "vectors.urls"),
    ] {
        let out = quarry(dir.path())
            .arg("serve")
            .env("QUARRY__AUTH__TOKENS", "t")
            .env(
                "QUARRY__VECTORS__KIND",
                if key.ends_with("URLS") { "qdrant" } else { "embedded" },
            )
            .env(key, value)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{key}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(named), "{key}: {stderr}");
    }
}
