//! `/mcp`: an MCP client (the official Rust SDK's) lists the tools, lists worlds, retrieves and
//! reads a source; bad arguments are tool errors with the API's codes; the route needs the token.

use reqwest::StatusCode;
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TOKEN, google_world, on_fake_google, spawn_app_with};

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn args(value: Value) -> serde_json::Map<String, Value> {
    value.as_object().unwrap().clone()
}

#[tokio::test]
async fn an_mcp_client_lists_worlds_retrieves_and_reads_a_source() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    let world = google_world(&app).await;
    let (status, accepted) = app
        .post(
            &format!("/v1/worlds/{world}/sources"),
            json!({"filename": "isles.md", "title": "The Isles", "key": "guides/isles.md",
                   "text": "The keeper climbs the tower every evening. Seals have their young in autumn."}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let source = accepted["source"]["id"].as_str().unwrap().to_owned();
    app.drain().await;

    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.url("/mcp")).auth_header(TOKEN),
    );
    let client = ().serve(transport).await.expect("the MCP handshake");
    let listed = client.list_all_tools().await.unwrap();
    let mut tools: Vec<String> = listed.iter().map(|t| t.name.to_string()).collect();
    tools.sort();
    assert_eq!(tools, ["get_source_text", "list_worlds", "retrieve"]);
    // The arguments a tool cannot do without are marked required in its input schema.
    let required = |name: &str| {
        let tool = listed.iter().find(|t| t.name == name).unwrap();
        let mut fields: Vec<String> = (tool.input_schema.get("required").and_then(Value::as_array))
            .map(|r| r.iter().map(|f| f.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default();
        fields.sort();
        fields
    };
    assert_eq!(required("retrieve"), ["query", "world_id"]);
    // Every /retrieve setting, described as the OpenAPI document describes the body.
    let retrieve_tool = listed.iter().find(|t| t.name == "retrieve").unwrap();
    let properties = retrieve_tool.input_schema["properties"].as_object().unwrap();
    for field in [
        "top_k", "mode", "fusion", "expand", "rerank", "explain", "hnsw_ef", "filter",
    ] {
        assert!(properties.contains_key(field), "{field}: {properties:?}");
    }
    assert_eq!(properties["top_k"]["maximum"], 1000, "{properties:?}");
    assert!(
        !serde_json::to_string(&*retrieve_tool.input_schema)
            .unwrap()
            .contains("$ref"),
        "the schema stands alone"
    );
    assert_eq!(required("get_source_text"), ["world_id"]);

    let call = |name: &'static str, arguments: Value| {
        let client = &client;
        async move {
            client
                .call_tool(CallToolRequestParams::new(name).with_arguments(args(arguments)))
                .await
                .expect("a tool call never fails as a transport")
        }
    };
    let worlds = call("list_worlds", json!({})).await;
    assert_ne!(worlds.is_error, Some(true), "{worlds:?}");
    let listed = worlds.structured_content.clone().unwrap();
    assert_eq!(listed["worlds"][0]["id"], world.as_str(), "{listed}");

    let answer = call(
        "retrieve",
        json!({"world_id": world, "query": "who climbs the tower", "top_k": 1}),
    )
    .await;
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    assert!(
        text(&answer).contains("The keeper climbs the tower"),
        "{}",
        text(&answer)
    );
    let structured = answer.structured_content.clone().unwrap();
    assert_eq!(structured["results"].as_array().unwrap().len(), 1);
    // A setting the tool's old argument list lacked reaches the service.
    let explained = call(
        "retrieve",
        json!({"world_id": world, "query": "who climbs the tower", "top_k": 1, "explain": true}),
    )
    .await;
    assert_ne!(explained.is_error, Some(true), "{explained:?}");
    let explained = explained.structured_content.clone().unwrap();
    assert!(
        explained["results"][0]["explain"]["dense"]["rank"].is_number(),
        "{explained}"
    );
    let citation = &structured["context"]["citations"][0];
    assert_eq!(citation["source_id"], source.as_str(), "{structured}");

    let read = call(
        "get_source_text",
        json!({"world_id": world, "source_id": source, "max_chars": 10}),
    )
    .await;
    assert_ne!(read.is_error, Some(true), "{read:?}");
    assert_eq!(text(&read), "The keeper");
    let slice = read.structured_content.clone().unwrap();
    assert_eq!(
        (slice["chars"].as_u64(), slice["more"].as_bool()),
        (Some(10), Some(true))
    );

    // By key, as uploaded.
    let by_key = call(
        "get_source_text",
        json!({"world_id": world, "key": "guides/isles.md", "offset": 11, "max_chars": 6}),
    )
    .await;
    assert_ne!(by_key.is_error, Some(true), "{by_key:?}");
    assert_eq!(text(&by_key), "climbs");

    // Bad arguments are tool errors with the API's codes.
    for (name, arguments, code) in [
        ("retrieve", json!({"world_id": "nope", "query": "x"}), "invalid_request"),
        ("retrieve", json!({"query": "x"}), "invalid_request"),
        ("retrieve", json!({"world_id": world}), "invalid_request"),
        (
            "retrieve",
            json!({"world_id": world, "query": "x", "top_k": 5000}),
            "invalid_retrieval_settings",
        ),
        (
            "retrieve",
            json!({"world_id": world, "query": "x", "mode": "psychic"}),
            "invalid_retrieval_settings",
        ),
        (
            "retrieve",
            json!({"world_id": world, "query": "x", "top_k": "5"}),
            "invalid_retrieval_settings",
        ),
        (
            "retrieve",
            json!({"world_id": world, "query": "x", "topk": 5}),
            "invalid_request",
        ),
        (
            "retrieve",
            json!({"world_id": uuid::Uuid::new_v4(), "query": "x"}),
            "world_not_found",
        ),
        (
            "get_source_text",
            json!({"world_id": world, "source_id": source, "max_chars": 0}),
            "invalid_request",
        ),
        (
            "get_source_text",
            json!({"world_id": world, "source_id": uuid::Uuid::new_v4()}),
            "source_not_found",
        ),
        (
            "get_source_text",
            json!({"world_id": world, "key": "guides/missing.md"}),
            "source_not_found",
        ),
        (
            "get_source_text",
            json!({"world_id": world, "key": ""}),
            "invalid_request",
        ),
        (
            "get_source_text",
            json!({"world_id": world, "key": "guides/isles.md", "source_id": source}),
            "invalid_request",
        ),
        ("get_source_text", json!({"world_id": world}), "invalid_request"),
    ] {
        let result = call(name, arguments.clone()).await;
        assert_eq!(result.is_error, Some(true), "{name} {arguments}: {result:?}");
        assert!(text(&result).starts_with(code), "{name} {arguments}: {}", text(&result));
        // The API's whole error body, structured.
        let body = result.structured_content.clone();
        assert_eq!(
            body.as_ref().map(|b| &b["error"]["code"]),
            Some(&json!(code)),
            "{body:?}"
        );
    }
    let result = call("retrieve", json!({"world_id": world, "query": "x", "top_k": 5000})).await;
    let body = result.structured_content.expect("the error body");
    assert_eq!(body["error"]["details"]["field"], "top_k", "{body}");
    let result = call(
        "get_source_text",
        json!({"world_id": world, "max_chars": 0, "key": "guides/isles.md"}),
    )
    .await;
    let body = result.structured_content.expect("the error body");
    assert_eq!(body["error"]["details"]["field"], "max_chars", "{body}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn mcp_needs_the_bearer_token() {
    let app = spawn_app_with(|_| {}).await;
    let response = app
        .client
        .post(app.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");
}

/// README's MCP client configuration, as written: the JSON block's URL and header (and the
/// `claude mcp add` line's, which must say the same) reach the server, once its address and
/// token are those of this test's server.
#[tokio::test]
async fn the_documented_mcp_configuration_connects_as_written() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/mcp.md")).unwrap();
    let block = guide
        .split("```json\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap())
        .find(|b| b.contains("mcpServers"))
        .expect("docs/mcp.md shows an MCP client configuration");
    let config: Value = serde_json::from_str(block).expect("the documented MCP configuration is JSON");
    let server = &config["mcpServers"]["quarry"];
    assert_eq!(server["type"], "http", "{server}");
    let url = server["url"].as_str().unwrap();
    let auth = server["headers"]["Authorization"].as_str().unwrap();
    let claude_line = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("claude mcp add"))
            .map(str::to_owned)
    };
    let claude = claude_line(&readme).expect("README shows the claude command");
    assert_eq!(
        Some(&claude),
        claude_line(&guide).as_ref(),
        "README and docs/mcp.md show the same command"
    );
    assert!(
        claude.contains(&format!(" {url} ")) && claude.contains(&format!("\"Authorization: {auth}\"")),
        "the claude line and the JSON configuration agree: {claude}"
    );
    let token = auth.strip_prefix("Bearer ").expect("a bearer token");

    let app = spawn_app_with(|s| s.auth.tokens = vec![secrecy::SecretString::from(token.to_owned())]).await;
    let url = url.replace("127.0.0.1:8080", &app.addr.to_string());
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    let client = ().serve(transport).await.expect("the MCP handshake with the README's settings");
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 3);
    client.cancel().await.unwrap();
}

/// A `read` token limited to one world: the tools list that world only, retrieve and read in
/// it, and answer every other world as missing.
#[tokio::test]
async fn a_token_limited_to_one_world_reaches_that_world_only_through_mcp() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    let mine = google_world(&app).await;
    let theirs = google_world(&app).await;
    for world in [&mine, &theirs] {
        let (status, body) = app
            .post(
                &format!("/v1/worlds/{world}/sources"),
                json!({"filename": "isles.md", "key": "isles.md", "text": "The keeper climbs the tower every evening."}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    app.drain().await;
    let (status, made) = app
        .post(
            "/v1/tokens",
            json!({"name": "agent", "scopes": ["read"], "worlds": [mine]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let secret = made["secret"].as_str().unwrap().to_owned();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.url("/mcp")).auth_header(secret),
    );
    let client = ().serve(transport).await.expect("the MCP handshake");
    let call = |name: &'static str, arguments: Value| {
        let client = &client;
        async move {
            client
                .call_tool(CallToolRequestParams::new(name).with_arguments(args(arguments)))
                .await
                .expect("a tool call never fails as a transport")
        }
    };
    let listed = call("list_worlds", json!({})).await.structured_content.unwrap();
    let ids: Vec<&str> = listed["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [mine.as_str()]);
    let answer = call("retrieve", json!({"world_id": mine, "query": "who climbs the tower"})).await;
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
    assert!(text(&answer).contains("The keeper climbs"), "{}", text(&answer));
    let read = call("get_source_text", json!({"world_id": mine, "key": "isles.md"})).await;
    assert_ne!(read.is_error, Some(true), "{read:?}");
    for (name, arguments) in [
        ("retrieve", json!({"world_id": theirs, "query": "who climbs the tower"})),
        ("get_source_text", json!({"world_id": theirs, "key": "isles.md"})),
    ] {
        let refused = call(name, arguments).await;
        assert_eq!(refused.is_error, Some(true), "{name}: {refused:?}");
        assert!(text(&refused).starts_with("world_not_found"), "{}", text(&refused));
    }
    client.cancel().await.unwrap();
}

/// A `tools/call` of `retrieve` as one JSON-RPC POST (MCP's stateless HTTP), given up by the
/// client after `wait`: answers whether an answer came.
async fn abandoned_retrieve(app: &crate::helpers::TestApp, world: &str, wait: std::time::Duration) -> bool {
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "retrieve", "arguments": {"world_id": world, "query": "who keeps the tower"}}});
    let sent = (app.client.post(app.url("/mcp")))
        .bearer_auth(TOKEN)
        .header("accept", "application/json, text/event-stream")
        .json(&call)
        .timeout(wait)
        .send()
        .await;
    sent.is_ok()
}

#[tokio::test]
async fn a_retrieval_its_mcp_client_gave_up_stops_and_frees_its_key() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.embedding.workers = 0)).await;
    let world = google_world(&app).await;
    app.add_text(&world, "isles.txt", "The keeper climbs the tower every evening.")
        .await;
    app.drain().await;
    // The provider now takes far longer than the client waits.
    fake.set_latency(std::time::Duration::from_secs(40));
    let before = fake.stats().requests;
    assert!(!abandoned_retrieve(&app, &world, std::time::Duration::from_millis(800)).await);
    assert_eq!(fake.stats().requests, before + 1, "the query reached the provider");
    // The retrieval is dropped with its request: its key leaves the provider call at once
    // instead of waiting the provider out. Checked step by step, for at most 100 steps of 50 ms
    // (the provider answers after 40 s).
    let scheduler = app.deps.scheduler.clone();
    let mut steps = 0;
    while scheduler.in_flight() > 0 && steps < 100 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        steps += 1;
    }
    assert_eq!(
        scheduler.in_flight(),
        0,
        "the abandoned retrieval still holds its key after {steps} steps"
    );
}
