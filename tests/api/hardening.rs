//! Denial of service: connection limits and timeouts, bounded upload processing, HTML that
//! cannot blow up, adversarial text for the sentence splitter, per-client event streams.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::fake_providers::FakeGoogle;
use crate::helpers::*;

/// An app whose embedding provider is a fake Google server on a real port, so these tests need
/// no model files; and the fake, which must live as long as the app.
async fn keyed_app(tweak: impl FnOnce(&mut quarry::config::Settings)) -> (FakeGoogle, TestApp) {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), tweak)).await;
    (fake, app)
}

/// A world on the fake Google provider, named `name`.
async fn world(app: &TestApp, name: &str) -> Value {
    app.create_google_world(name, json!({})).await
}

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
async fn idle_connections_are_closed_and_at_the_cap_the_most_idle_makes_room() {
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
    // A fifth client is served: the most idle connection is closed to make room for it...
    let status = tokio::time::timeout(Duration::from_secs(20), http_client().get(app.url("/healthz")).send())
        .await
        .expect("the client past the cap was served")
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::OK);
    // ...and every idle one is closed, by that or by the idle timeout.
    for socket in &mut idle {
        assert!(
            closed_within(socket, Duration::from_secs(20)).await,
            "an idle connection was never closed"
        );
    }
}

/// One client (here 127.0.0.1) holds at most `server.max_connections_per_client` connections;
/// one more is closed at once, while another client (127.0.0.2, bound on loopback) is served.
/// Keep-alive connections parked by one client do not lock others out of the global cap either.
#[tokio::test]
async fn one_client_cannot_hold_every_connection() {
    let app = spawn_app_with(|s| {
        s.server.max_connections = 8;
        s.server.max_connections_per_client = 3;
        s.server.idle_timeout_s = 120;
    })
    .await;
    let request = b"GET /healthz HTTP/1.1\r\nHost: quarry\r\n\r\n";
    // Three keep-alive connections, each served once and then parked.
    let mut parked = Vec::new();
    for _ in 0..3 {
        let mut socket = TcpStream::connect(app.addr).await.unwrap();
        socket.write_all(request).await.unwrap();
        let mut answer = vec![0u8; 512];
        let n = socket.read(&mut answer).await.unwrap();
        assert!(String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 200"));
        parked.push(socket);
    }
    // A fourth from the same address is closed without an answer.
    let mut fourth = TcpStream::connect(app.addr).await.unwrap();
    let _ = fourth.write_all(request).await;
    let mut answer = vec![0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(10), fourth.read(&mut answer))
        .await
        .expect("the connection past the share was closed")
        .unwrap_or(0);
    assert_eq!(n, 0, "answered: {}", String::from_utf8_lossy(&answer[..n]));
    // Another client is served meanwhile.
    let other = tokio::net::TcpSocket::new_v4().unwrap();
    other.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let mut other = other.connect(app.addr).await.unwrap();
    other.write_all(request).await.unwrap();
    let n = other.read(&mut answer).await.unwrap();
    assert!(String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 200"));
    // Once one of the first client's connections closes, it may open another.
    drop(parked.pop());
    let mut polls = 0;
    loop {
        let mut again = TcpStream::connect(app.addr).await.unwrap();
        again.write_all(request).await.unwrap();
        let n = again.read(&mut answer).await.unwrap_or(0);
        if String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 200") {
            break;
        }
        polls += 1;
        assert!(polls < 100, "the closed connection's share was never given back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
    let (_fake, app) = keyed_app(|s| {
        s.server.max_concurrent_uploads = 1;
        s.server.upload_wait_s = 1;
    })
    .await;
    let world = world(&app, "uploads").await;
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
    let (_fake, app) = keyed_app(|s| s.server.max_body_bytes = 1024 * 1024).await;
    let world = world(&app, "html").await;
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
    let (_fake, app) = keyed_app(|_| {}).await;
    let world = world(&app, "splitter").await;
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
    let (_fake, app) = keyed_app(|_| {}).await;
    for i in 0..3 {
        world(&app, &format!("w{i}")).await;
    }
    let world = world(&app, "paged").await;
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

/// End tags that match nothing open (`</x>`) close nothing in the HTML tree builder: a page of
/// 300 `<div></x>` nests 300 deep, past the main-content bound, so it is converted whole (its
/// `<nav>` kept) rather than handed to the tree pass; and 99,000 of them (871 KB, once 60 s and
/// a 408 whose work went on for minutes) are converted at once.
#[tokio::test]
async fn html_nested_by_unmatched_end_tags_is_converted_whole_and_at_once() {
    let (_fake, app) = keyed_app(|_| {}).await;
    let world = world(&app, "pages").await;
    let sources = format!("/v1/worlds/{}/sources", world["id"].as_str().unwrap());
    let page = |divs: usize| {
        format!(
            "<html><body><nav>Harbour index</nav>{}<p>The keeper climbs the tower every evening.</p></body></html>",
            "<div></x>".repeat(divs)
        )
    };
    let text_of = |accepted: Value| {
        let source = accepted["source"]["id"].as_str().unwrap().to_owned();
        let url = app.url(&format!("{sources}/{source}/text"));
        let client = app.client.clone();
        async move {
            client
                .get(url)
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let (status, accepted) = app
        .post(
            &sources,
            json!({"filename": "deep.html", "text": page(300), "content_type": "text/html"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let text = text_of(accepted).await;
    assert!(
        text.contains("Harbour index"),
        "the deep page went through the tree pass: {text}"
    );
    // Nested the ordinary way, the same depth is bounded the same way.
    let nested = format!(
        "<html><body><nav>Harbour index</nav>{}<p>The keeper climbs.</p></body></html>",
        "<div>".repeat(300)
    );
    let (status, accepted) = app
        .post(
            &sources,
            json!({"filename": "nested.html", "text": nested, "content_type": "text/html"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert!(text_of(accepted).await.contains("Harbour index"));

    let (status, accepted) = app
        .post(
            &sources,
            json!({"filename": "bomb.html", "text": page(99_000), "content_type": "text/html"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
}
