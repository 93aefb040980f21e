//! Every rejection is the contract's JSON error, never axum's plain-text default.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TOKEN, assert_error, read, spawn_app, spawn_app_with};

#[tokio::test]
async fn malformed_json_is_invalid_request() {
    let app = spawn_app().await;
    let resp = app
        .client
        .post(app.url("/v1/worlds"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .unwrap();
    let (status, body) = read(resp).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let (_, list) = app.get("/v1/worlds").await;
    assert_eq!(list["worlds"], json!([]));
}

#[tokio::test]
async fn missing_content_type_is_invalid_request() {
    let app = spawn_app().await;
    let resp = app
        .client
        .post(app.url("/v1/worlds"))
        .bearer_auth(TOKEN)
        .body("{}")
        .send()
        .await
        .unwrap();
    let (status, body) = read(resp).await;
    let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert!(err["message"].as_str().unwrap().contains("application/json"), "{body}");
    let (_, list) = app.get("/v1/worlds").await;
    assert_eq!(list["worlds"], json!([]));
}

#[tokio::test]
async fn wrong_types_and_unknown_fields_name_the_field() {
    let app = spawn_app().await;
    let (status, body) = app
        .post(
            "/v1/worlds",
            json!({"name": 7, "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}}),
        )
        .await;
    let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(err["details"]["field"], "name");

    let (status, body) = app
        .post(
            "/v1/worlds",
            json!({"name": "a", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2", "dims": 3}}),
        )
        .await;
    let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert!(err["message"].as_str().unwrap().contains("dims"), "{body}");
    assert_eq!(err["details"]["field"], "embedding.dims", "{body}");

    let (status, body) = app
        .post(
            "/v1/worlds",
            json!({"name": "a", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}, "colour": "red"}),
        )
        .await;
    let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(err["details"]["field"], "colour", "{body}");

    let (status, body) = app
        .post(
            "/v1/worlds",
            json!({"name": "a", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}, "hybrid": 1}),
        )
        .await;
    let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(err["details"]["field"], "hybrid");

    // A boolean where a number is expected is invalid_request outside /retrieve.
    let (status, body) = app
        .post(
            "/v1/worlds",
            json!({"name": "a", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": true}}),
        )
        .await;
    let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(err["details"]["field"], "embedding.dimensions");

    // Missing required field.
    let (status, body) = app.post("/v1/worlds", json!({"name": "a"})).await;
    let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(err["details"]["field"], "embedding", "{body}");
    let (status, body) = app
        .post("/v1/worlds", json!({"name": "a", "embedding": {"provider": "local"}}))
        .await;
    let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(err["details"]["field"], "embedding.model", "{body}");

    let (_, worlds) = app.get("/v1/worlds").await;
    assert_eq!(
        worlds["worlds"],
        json!([]),
        "rejected requests must not create anything"
    );
}

#[tokio::test]
async fn a_bad_uuid_in_the_path_is_invalid_request() {
    let app = spawn_app().await;
    let (status, body) = app.get("/v1/worlds/not-a-uuid").await;
    let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(err["details"]["field"], "world_id");
    assert!(err["message"].as_str().unwrap().contains("not-a-uuid"));
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_in_json() {
    let app = spawn_app().await;
    let (status, body) = app.get("/v1/nothing-here").await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    let (status, body) = app.request(reqwest::Method::PUT, "/v1/worlds", Some(json!({}))).await;
    assert_error(status, &body, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
}

#[tokio::test]
async fn oversized_bodies_are_413_and_change_nothing() {
    let app = spawn_app_with(|s| s.server.max_body_bytes = 4096).await;
    let big = "x".repeat(10_000);
    let (status, body) = app
        .post(
            "/v1/worlds",
            json!({"name": big, "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}}),
        )
        .await;
    assert_error(status, &body, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");

    // Without a Content-Length (chunked), the limit still holds while the body is read.
    let (status, body) = chunked_post(&app, "/v1/worlds", &format!("{{\"name\": \"{big}\"}}")).await;
    assert_error(status, &body, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");

    let (_, worlds) = app.get("/v1/worlds").await;
    assert_eq!(worlds["worlds"], json!([]));
}

/// Sends a chunked POST over a raw connection (no Content-Length) and reads the answer.
async fn chunked_post(app: &crate::helpers::TestApp, path: &str, body: &str) -> (StatusCode, serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        app.addr
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    for piece in body.as_bytes().chunks(1000) {
        let _ = stream.write_all(format!("{:x}\r\n", piece.len()).as_bytes()).await;
        let _ = stream.write_all(piece).await;
        let _ = stream.write_all(b"\r\n").await;
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw);
    let status: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let json_start = text.find('{').expect("a JSON body");
    let json_end = text.rfind('}').expect("a JSON body");
    let body = serde_json::from_str(&text[json_start..=json_end]).expect("JSON error body");
    (StatusCode::from_u16(status).unwrap(), body)
}
