//! Denial of service: connection limits and timeouts, bounded upload processing, HTML that
//! cannot blow up, adversarial text for the sentence splitter, per-client event streams.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::fake_providers::FakeGoogle;
use crate::helpers::*;

/// Waits up to `within` for the server to close `socket` (EOF or a reset); false if it did not.
async fn closed_within(socket: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, socket.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            // An answer (e.g. a 408) before the close: keep reading.
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn idle_connections_are_closed_and_past_the_cap_new_ones_wait() {
    let app = spawn_app_with(|s| {
        s.server.max_connections = 4;
        s.server.request_timeout_s = 1;
        s.server.idle_timeout_s = 2;
    })
    .await;
    // Four connections that never send a byte fill the cap.
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(app.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A fifth client is not served while they hold their slots...
    let started = Instant::now();
    let health = tokio::spawn({
        let (client, url) = (http_client(), app.url("/healthz"));
        async move { client.get(url).send().await.map(|r| r.status()) }
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!health.is_finished(), "a connection past the cap was served at once");
    // ...and is once the idle ones are closed, which they are.
    for socket in &mut idle {
        assert!(
            closed_within(socket, Duration::from_secs(20)).await,
            "an idle connection was never closed"
        );
    }
    let status = tokio::time::timeout(Duration::from_secs(20), health)
        .await
        .expect("the waiting client was served")
        .unwrap()
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[tokio::test]
async fn a_request_head_trickled_byte_by_byte_is_cut_off() {
    let app = spawn_app_with(|s| s.server.header_read_timeout_s = 1).await;
    let mut socket = TcpStream::connect(app.addr).await.unwrap();
    socket
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: quarry\r\n")
        .await
        .unwrap();
    // One header line every 300 ms keeps the connection busy but never ends the head.
    let started = Instant::now();
    let mut cut = false;
    for i in 0..60 {
        if socket.write_all(format!("X-Slow-{i}: a\r\n").as_bytes()).await.is_err() {
            cut = true;
            break;
        }
        let mut buf = [0u8; 512];
        match tokio::time::timeout(Duration::from_millis(300), socket.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => {
                cut = true;
                break;
            }
            Ok(Ok(n)) => {
                // hyper answers 408 before closing; that ends the attack too.
                assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 408"));
                cut = true;
                break;
            }
            Err(_) => {}
        }
    }
    assert!(
        cut,
        "the trickled head was still being read after {:?}",
        started.elapsed()
    );
    // The server is fine afterwards.
    let (status, _) = app.get("/healthz").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn one_client_cannot_hold_every_event_stream() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| {
        s.server.max_event_streams = 10;
        s.server.max_event_streams_per_client = 2;
    }))
    .await;
    let (_, world) = app
        .post(
            "/v1/worlds",
            json!({"name": "w", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768}}),
        )
        .await;
    let (status, accepted) = app
        .post(
            &format!("/v1/worlds/{}/sources", world["id"].as_str().unwrap()),
            json!({"filename": "a.md", "text": "One short text."}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let url = app.url(&format!("/v1/jobs/{}/events", accepted["job"]["id"].as_str().unwrap()));
    let open = || app.client.get(url.clone()).bearer_auth(TOKEN).send();
    // No workers run: the job never ends and its streams stay open.
    let first = open().await.unwrap();
    let second = open().await.unwrap();
    assert_eq!((first.status(), second.status()), (StatusCode::OK, StatusCode::OK));
    let third = open().await.unwrap();
    assert!(third.headers().contains_key("retry-after"));
    let (status, body) = read(third).await;
    let error = assert_error(status, &body, StatusCode::SERVICE_UNAVAILABLE, "server_busy");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("max_event_streams_per_client"),
        "{body}"
    );
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    while open().await.unwrap().status() != StatusCode::OK {
        assert!(Instant::now() < deadline, "the closed stream's slot was never freed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn uploads_past_the_concurrency_bound_wait_then_get_server_busy() {
    let app = spawn_app_with(|s| {
        s.server.max_concurrent_uploads = 1;
        s.server.upload_wait_s = 1;
    })
    .await;
    let world = app.create_local_world("uploads").await;
    let sources = format!("/v1/worlds/{}/sources", world["id"].as_str().unwrap());
    // A client that sends its body slowly holds the only upload slot.
    let mut slow = TcpStream::connect(app.addr).await.unwrap();
    let body = json!({"filename": "slow.md", "text": "Slow text. ".repeat(100)}).to_string();
    let head = format!(
        "POST {sources} HTTP/1.1\r\nHost: quarry\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    slow.write_all(&body.as_bytes()[..10]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (status, refused) = app
        .post(&sources, json!({"filename": "b.md", "text": "Another text."}))
        .await;
    let error = assert_error(status, &refused, StatusCode::SERVICE_UNAVAILABLE, "server_busy");
    assert!(
        error["message"].as_str().unwrap().contains("max_concurrent_uploads"),
        "{refused}"
    );
    // Nothing was stored for the refused upload.
    let (_, listed) = app.get(&sources).await;
    assert_eq!(listed["sources"].as_array().unwrap().len(), 0, "{listed}");

    // The slow upload finishes; its slot is free again.
    slow.write_all(&body.as_bytes()[10..]).await.unwrap();
    let mut answer = vec![0u8; 256];
    let n = slow.read(&mut answer).await.unwrap();
    assert!(String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 202"));
    let (status, accepted) = app
        .post(&sources, json!({"filename": "c.md", "text": "A third text."}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
}

#[tokio::test]
async fn deeply_nested_html_lists_stay_linear_and_html_past_the_limit_is_413() {
    let app = spawn_app_with(|s| s.server.max_body_bytes = 1024 * 1024).await;
    let world = app.create_local_world("html").await;
    let sources = format!("/v1/worlds/{}/sources", world["id"].as_str().unwrap());

    // 113 KB that once became 160 M chars of text.
    let nested = format!("{}{}", "<ul>".repeat(4000), "<li>x".repeat(20_000));
    let (status, accepted) = app
        .post(
            &sources,
            json!({"filename": "lists.html", "text": nested, "content_type": "text/html"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let source = accepted["source"]["id"].as_str().unwrap();
    let resp = app
        .client
        .get(app.url(&format!("{sources}/{source}/text")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let text = resp.text().await.unwrap();
    assert!(
        text.len() < 5 * nested.len(),
        "{} bytes of text from {} of HTML",
        text.len(),
        nested.len()
    );

    // 900 KB of list items converts to more than the 1 MiB limit: refused, nothing stored.
    let long = format!("{}{}", "<ul>".repeat(10), "<li>item".repeat(100_000));
    assert!(long.len() < 1024 * 1024);
    let (status, refused) = app
        .post(
            &sources,
            json!({"filename": "long.html", "text": long, "content_type": "text/html"}),
        )
        .await;
    let error = assert_error(status, &refused, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    assert_eq!(error["details"]["limit_bytes"], 1024 * 1024);
    let (_, listed) = app.get(&sources).await;
    assert_eq!(listed["sources"].as_array().unwrap().len(), 1, "{listed}");
}

#[tokio::test]
async fn adversarial_text_for_the_sentence_splitter_is_chunked() {
    let app = spawn_app().await;
    let world = app.create_local_world("splitter").await;
    let sources = format!("/v1/worlds/{}/sources", world["id"].as_str().unwrap());
    // A vowel sign after each space: once quadratic (390 KB never finished).
    let text = format!("a. {}", " \u{93e}".repeat(97_000));
    let (status, accepted) = app.post(&sources, json!({"filename": "marks.txt", "text": text})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert!(
        accepted["source"]["chunks"].as_u64().is_some_and(|n| n > 0),
        "{accepted}"
    );
}

#[tokio::test]
async fn every_list_is_paged() {
    let app = spawn_app().await;
    for i in 0..3 {
        app.create_local_world(&format!("w{i}")).await;
    }
    let world = app.create_local_world("paged").await;
    let world_id = world["id"].as_str().unwrap();
    for i in 0..3 {
        let (status, _) = app
            .post(
                &format!("/v1/worlds/{world_id}/sources"),
                json!({"filename": format!("s{i}.md"), "text": format!("Text number {i}.")}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED);
    }
    let names = |list: &serde_json::Value, key: &str, field: &str| -> Vec<String> {
        list[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x[field].as_str().unwrap().to_owned())
            .collect()
    };
    // Worlds by creation, two at a time.
    let (_, first) = app.get("/v1/worlds?limit=2").await;
    assert_eq!(names(&first, "worlds", "name"), ["w0", "w1"]);
    assert_eq!(first["next_offset"], 2);
    let (_, last) = app.get("/v1/worlds?limit=2&offset=2").await;
    assert_eq!(names(&last, "worlds", "name"), ["w2", "paged"]);
    assert_eq!(last["next_offset"], serde_json::Value::Null);
    // The default page holds them all.
    let (_, all) = app.get("/v1/worlds").await;
    assert_eq!(all["worlds"].as_array().unwrap().len(), 4);
    assert_eq!(all["next_offset"], serde_json::Value::Null);

    let (_, sources) = app
        .get(&format!("/v1/worlds/{world_id}/sources?limit=2&offset=1"))
        .await;
    assert_eq!(names(&sources, "sources", "filename"), ["s1.md", "s2.md"]);
    assert_eq!(sources["next_offset"], serde_json::Value::Null);
    let (_, jobs) = app
        .get(&format!(
            "/v1/worlds/{world_id}/jobs?limit=1&status=queued,running,completed"
        ))
        .await;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 1, "{jobs}");
    assert_eq!(jobs["next_offset"], 1);
    let (_, keys) = app.get("/v1/provider-keys?limit=5").await;
    assert_eq!(keys["next_offset"], serde_json::Value::Null);

    for (path, field) in [
        ("/v1/worlds?limit=0", "limit"),
        ("/v1/worlds?limit=1001", "limit"),
        ("/v1/provider-keys?offset=-1", "offset"),
        ("/v1/worlds?page=2", "page"),
        ("/v1/worlds?limit=1&limit=2", "limit"),
    ] {
        let (status, body) = app.get(path).await;
        let error = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(error["details"]["field"], field, "{path}: {body}");
    }
    let (status, body) = app
        .get(&format!("/v1/worlds/{world_id}/jobs?status=done&limit=1"))
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
}
