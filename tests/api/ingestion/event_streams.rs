//! Job event streams: replay from `Last-Event-ID`, the cap on open streams, and open streams when
//! the server shuts down.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TOKEN, assert_error, on_fake_google, parse_sse, read, spawn_app_with};

use super::{TEXT, add, google_world, id, setup};

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
