//! `/metrics`: the series move with the work they count, docs/metrics.md's table lists exactly the
//! series quarry serves, and `auth.metrics_token` guards the endpoint when set.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::fake_providers::{Failure, FakeGoogle};
use crate::helpers::{TOKEN, TestApp, google_world, on_fake_google, spawn_app_with};

/// One scrape: every sample (`name{labels}` → value), and the raw text.
async fn scrape(app: &TestApp) -> (HashMap<String, f64>, String) {
    let response = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    let samples = text
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("a sample line: {line}"));
            (series.to_owned(), value.parse::<f64>().unwrap_or(f64::NAN))
        })
        .collect();
    (samples, text)
}

fn value(samples: &HashMap<String, f64>, series: &str) -> f64 {
    *samples
        .get(series)
        .unwrap_or_else(|| panic!("no {series} in {:?}", sorted(samples)))
}

fn sorted(samples: &HashMap<String, f64>) -> Vec<&String> {
    let mut keys: Vec<&String> = samples.keys().collect();
    keys.sort();
    keys
}

/// The series' name of a sample (`name_bucket{…}` → `name`).
fn family(sample: &str) -> &str {
    let name = sample.split('{').next().unwrap();
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .unwrap_or(name)
}

#[tokio::test]
async fn the_series_move_with_the_work_they_count() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    let world = google_world(&app).await;
    let text: String = (0..5)
        .map(|i| {
            format!(
                "The harbour wall number {} stands. ",
                ["one", "two", "three", "four", "five"][i]
            )
        })
        .collect();
    let accepted = app.add_text(&world, "a.txt", &text).await;
    let chunks = accepted["source"]["chunks"].as_u64().unwrap();
    assert!(chunks >= 2, "{accepted}");
    let n = chunks as f64;
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // Queued: the queue's depth and age, the job by kind and status.
    let (before, _) = scrape(&app).await;
    let queue = format!("{{world=\"{world}\",provider=\"google\"}}");
    assert_eq!(value(&before, &format!("quarry_pending_chunks{queue}")), n);
    assert!(value(&before, &format!("quarry_pending_oldest_age_seconds{queue}")) >= 1.0);
    assert_eq!(value(&before, "quarry_jobs{kind=\"ingest\",status=\"running\"}"), 1.0);
    assert_eq!(
        value(
            &before,
            "quarry_http_requests_total{method=\"POST\",route=\"/v1/worlds/{world_id}/sources\",status=\"202\"}"
        ),
        1.0
    );
    assert!(value(&before, "quarry_process_resident_memory_bytes") > 1e6);

    // A rate limit gives the chunks back without an attempt; then they are embedded.
    fake.fail_next(Failure::RateLimited(Duration::from_millis(10)));
    let mut embedded = app.drain().await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    embedded += app.drain().await;
    assert_eq!(embedded, chunks);
    let (status, answer) = app
        .post(
            &format!("/v1/worlds/{world}/retrieve"),
            json!({"query": "which harbour wall stands", "top_k": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, _) = app.get("/v1/no-such-route").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, repair) = app.post(&format!("/v1/worlds/{world}/repair"), Value::Null).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let repair = repair["id"].as_str().unwrap().to_owned();
    for _ in 0..100 {
        let (_, job) = app.get(&format!("/v1/jobs/{repair}")).await;
        if job["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (after, text) = scrape(&app).await;
    let model = "provider=\"google\",model=\"gemini-embedding-001\"";
    assert_eq!(value(&after, &format!("quarry_chunks_embedded_total{{{model}}}")), n);
    assert_eq!(value(&after, "quarry_chunks_retried_total{reason=\"rate_limited\"}"), n);
    assert!(
        value(
            &after,
            &format!("quarry_provider_request_duration_seconds_count{{{model},outcome=\"ok\"}}")
        ) >= 2.0
    );
    assert_eq!(
        value(
            &after,
            &format!("quarry_provider_request_duration_seconds_count{{{model},outcome=\"rate_limited\"}}")
        ),
        1.0
    );
    for lane in ["ingest", "query"] {
        let series =
            format!("quarry_scheduler_wait_seconds_count{{provider=\"google\",lane=\"{lane}\",outcome=\"acquired\"}}");
        assert!(value(&after, &series) >= 1.0, "{series}");
    }
    for phase in ["embed", "search", "verify", "rerank", "total"] {
        let series = format!("quarry_retrieval_phase_duration_seconds_count{{phase=\"{phase}\"}}");
        assert_eq!(value(&after, &series), 1.0, "{series}");
    }
    assert!(
        value(
            &after,
            "quarry_retrieval_phase_duration_seconds_bucket{phase=\"total\",le=\"+Inf\"}"
        ) >= 1.0,
        "latencies are histograms with buckets"
    );
    assert_eq!(
        value(
            &after,
            "quarry_http_request_duration_seconds_count{method=\"POST\",route=\"/v1/worlds/{world_id}/retrieve\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &after,
            "quarry_http_requests_total{method=\"GET\",route=\"unmatched\",status=\"404\"}"
        ),
        1.0
    );
    assert_eq!(value(&after, "quarry_jobs{kind=\"ingest\",status=\"completed\"}"), 1.0);
    for kind in ["orphan", "stale", "missing"] {
        let series = format!("quarry_drift_points{{world=\"{world}\",kind=\"{kind}\"}}");
        assert_eq!(value(&after, &series), 0.0, "{series}");
    }
    assert_eq!(value(&after, "quarry_jobs{kind=\"repair\",status=\"completed\"}"), 1.0);
    // Snapshot series drop to 0 when what they counted is gone.
    assert_eq!(value(&after, &format!("quarry_pending_chunks{queue}")), 0.0);
    assert_eq!(value(&after, "quarry_jobs{kind=\"ingest\",status=\"running\"}"), 0.0);
    // Every family served is one README lists (and quarry::meters::SERIES describes).
    let known: Vec<&str> = quarry::meters::SERIES.iter().map(|s| s.0).collect();
    for sample in after.keys() {
        assert!(known.contains(&family(sample)), "{sample} is not in the table");
    }
    assert!(!text.contains("key-a"), "no secret in the metrics");
}

#[tokio::test]
async fn the_metrics_page_lists_exactly_the_series_quarry_serves() {
    let section = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md")).unwrap();
    let listed: Vec<(String, String)> = section
        .lines()
        .filter(|l| l.starts_with("| `quarry_"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].trim_matches('`').to_owned(), cells[2].to_owned())
        })
        .collect();
    let served: Vec<(String, String)> = quarry::meters::SERIES
        .iter()
        .map(|(name, kind, _)| ((*name).to_owned(), (*kind).to_owned()))
        .collect();
    assert_eq!(
        listed, served,
        "docs/metrics.md's table and quarry::meters::SERIES differ"
    );
}

#[tokio::test]
async fn a_metrics_token_guards_the_endpoint_when_set() {
    let open = spawn_app_with(|_| {}).await;
    assert_eq!(
        open.client.get(open.url("/metrics")).send().await.unwrap().status(),
        StatusCode::OK,
        "open by default"
    );
    let app = spawn_app_with(|s| s.auth.metrics_token = Some(SecretString::from("scrape-me"))).await;
    let get = |token: Option<&'static str>| {
        let mut request = app.client.get(app.url("/metrics"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let refused = get(None).await.unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(refused.headers()["www-authenticate"], "Bearer");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");
    assert_eq!(
        get(Some(TOKEN)).await.unwrap().status(),
        StatusCode::UNAUTHORIZED,
        "the API's token is not the scrape token"
    );
    assert_eq!(get(Some("scrape-me")).await.unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn unauthenticated_traffic_cannot_add_series() {
    let app = spawn_app_with(|_| {}).await;
    let (_, before) = scrape(&app).await;
    // Invented methods (each a would-be label) and invented paths, without a token.
    for i in 0..50 {
        let method = reqwest::Method::from_bytes(format!("M{i:03}{}", "X".repeat(500)).as_bytes()).unwrap();
        let response = app.client.request(method, app.url("/healthz")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
        let response = app
            .client
            .get(app.url(&format!("/nowhere/{i}/{}", "p".repeat(300))))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
    }
    let (samples, after) = scrape(&app).await;
    assert!(!after.contains("XXXX"), "an invented method became a label");
    assert!(!after.contains("nowhere"), "a raw path became a label");
    assert_eq!(
        value(
            &samples,
            r#"quarry_http_requests_total{method="_OTHER",route="/healthz",status="405"}"#
        ),
        50.0
    );
    assert_eq!(
        value(
            &samples,
            r#"quarry_http_requests_total{method="GET",route="unmatched",status="404"}"#
        ),
        50.0
    );
    // A handful of new series, not one per request: the exposition grew by a few KB at most.
    assert!(
        after.len() < before.len() + 8 * 1024,
        "/metrics grew from {} to {} bytes",
        before.len(),
        after.len()
    );
}

#[tokio::test]
async fn gauges_of_known_things_are_zero_not_missing() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    let world = google_world(&app).await;
    let (samples, _) = scrape(&app).await;
    // A world with nothing queued has a queue of depth 0.
    let queue = format!(r#"{{world="{world}",provider="google"}}"#);
    assert_eq!(value(&samples, &format!("quarry_pending_chunks{queue}")), 0.0);
    assert_eq!(
        value(&samples, &format!("quarry_pending_oldest_age_seconds{queue}")),
        0.0
    );
    // Every job kind and status is there before any job exists.
    for kind in ["ingest", "reingest", "repair"] {
        for status in ["queued", "running", "paused", "cancelled", "completed", "failed"] {
            assert_eq!(
                value(&samples, &format!(r#"quarry_jobs{{kind="{kind}",status="{status}"}}"#)),
                0.0
            );
        }
    }
}
