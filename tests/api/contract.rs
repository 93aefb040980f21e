//! The OpenAPI document and the server agree (issue 26): what the document calls valid the
//! server takes, and what it forbids the server refuses. One test per disagreement schemathesis
//! found, each checking both sides: the served document's constraint, and the server's answer
//! to values on either side of it. `scripts/fuzz-api` checks the whole API the same way from
//! generated requests.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TOKEN, TestApp, assert_error, read, spawn_app};

/// The served document.
async fn document(app: &TestApp) -> Value {
    let (status, doc) = app.get("/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    doc
}

/// A component schema's property, `$ref`s and `oneOf [T, null]` resolved to `T`.
fn property<'a>(doc: &'a Value, schema: &str, path: &[&str]) -> &'a Value {
    let mut at = resolve(doc, &doc["components"]["schemas"][schema]);
    for name in path {
        at = resolve(doc, &at["properties"][*name]);
        assert!(!at.is_null(), "{schema} has no property {path:?}");
    }
    at
}

fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    // `allOf [object, extra rules]`: the object's properties.
    if let Some(first) = schema["allOf"].as_array().and_then(|all| all.first()) {
        return resolve(doc, first);
    }
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap();
        return resolve(doc, &doc["components"]["schemas"][name]);
    }
    if let Some(variants) = schema["oneOf"].as_array() {
        let typed: Vec<&Value> = variants.iter().filter(|v| v["type"] != "null").collect();
        if typed.len() == 1 {
            return resolve(doc, typed[0]);
        }
    }
    schema
}

/// A parameter of the operation `operation_id`.
fn parameter<'a>(doc: &'a Value, operation_id: &str, name: &str) -> &'a Value {
    doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|item| item.as_object().unwrap().values())
        .find(|op| op["operationId"] == operation_id)
        .unwrap_or_else(|| panic!("no operation {operation_id}"))["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{operation_id} has no parameter {name}"))
}

/// Whether `value` is valid by the string schema `schema` (`minLength`, `maxLength`, `pattern`
/// and `enum`: what the request strings here are constrained by). Lengths count code points,
/// as JSON Schema does.
fn string_valid(schema: &Value, value: &str) -> bool {
    let chars = value.chars().count() as u64;
    if schema["minLength"].as_u64().is_some_and(|min| chars < min) {
        return false;
    }
    if schema["maxLength"].as_u64().is_some_and(|max| chars > max) {
        return false;
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        let re = regex::Regex::new(pattern).unwrap_or_else(|e| panic!("pattern {pattern}: {e}"));
        if !re.is_match(value) {
            return false;
        }
    }
    if let Some(values) = schema["enum"].as_array() {
        return values.iter().any(|v| v == value);
    }
    true
}

/// Characters whose treatment differs between "whitespace", "control" and ordinary text: every
/// control character, every Unicode whitespace character, and neighbours that are neither.
fn tricky_chars() -> Vec<char> {
    let mut chars: Vec<char> = (0u32..=0xa0).filter_map(char::from_u32).collect();
    chars.extend([
        '\u{1680}', '\u{180e}', '\u{2000}', '\u{200a}', '\u{200b}', '\u{2028}', '\u{2029}', '\u{202f}', '\u{205f}',
        '\u{2060}', '\u{3000}', '\u{feff}', 'é', '北', '🐉',
    ]);
    chars
}

/// The values of `tricky_chars` alone, between letters and around a letter.
fn tricky_values() -> Vec<String> {
    tricky_chars()
        .into_iter()
        .flat_map(|c| [format!("{c}"), format!("a{c}b"), format!("{c}a{c}")])
        .collect()
}

/// Asserts that the server takes exactly the values the document calls valid.
async fn assert_agree<F, Fut>(schema: &Value, values: Vec<String>, accepts: F)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut disagreements = Vec::new();
    for value in values {
        let documented = string_valid(schema, &value);
        if accepts(value.clone()).await != documented {
            disagreements.push(format!("{value:?} (valid by the document: {documented})"));
        }
    }
    assert!(
        disagreements.is_empty(),
        "the server and the document disagree on {} values: {disagreements:?}",
        disagreements.len()
    );
}

/// A world on the local model (creating one needs no model files).
async fn world(app: &TestApp) -> String {
    app.create_local_world("contract").await["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn an_empty_query_is_invalid_by_the_document_and_refused() {
    let app = spawn_app().await;
    let world = world(&app).await;
    let doc = document(&app).await;
    let query = property(&doc, "RetrieveRequest", &["query"]);
    assert_eq!(query["minLength"], 1, "{query}");
    for blank in ["", " ", "\t\n", "\u{3000}"] {
        assert!(!string_valid(query, blank), "{blank:?} is valid by {query}");
        let (status, body) = app
            .post(&format!("/v1/worlds/{world}/retrieve"), json!({"query": blank}))
            .await;
        assert_error(status, &body, StatusCode::BAD_REQUEST, "empty_query");
    }
    // The world has nothing embedded: a query with text is answered without the model.
    for text in ["x", " who? ", "\u{feff}"] {
        assert!(string_valid(query, text), "{text:?} is invalid by {query}");
        let (status, body) = app
            .post(&format!("/v1/worlds/{world}/retrieve"), json!({"query": text}))
            .await;
        assert_eq!(status, StatusCode::OK, "{text:?}: {body}");
    }
}

#[tokio::test]
async fn empty_source_text_is_invalid_by_the_document_and_refused() {
    let app = spawn_app().await;
    let world = world(&app).await;
    let doc = document(&app).await;
    let text = property(&doc, "AddSourceRequest", &["text"]);
    assert_eq!(text["minLength"], 1, "{text}");
    for bad in ["", "  \n", "a\u{0}b"] {
        assert!(!string_valid(text, bad), "{bad:?} is valid by {text}");
        let (status, body) = app
            .post(
                &format!("/v1/worlds/{world}/sources"),
                json!({"filename": "ch1.md", "text": bad}),
            )
            .await;
        let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(err["details"]["field"], "text", "{body}");
    }
    // The documented rules of the other strings of a source are the server's.
    let filename = property(&doc, "AddSourceRequest", &["filename"]);
    let mut names = tricky_values();
    names.extend(["dir/", "dir/ ", "a\\", "/a"].map(String::from));
    names.extend(["x".repeat(255), "x".repeat(256), format!(" {} ", "x".repeat(254))]);
    assert_agree(filename, names, |name| {
        let app = &app;
        let world = &world;
        // A refusal of the file name comes before the text is looked at; the text here is
        // blank, so an accepted name shows as a refusal naming `text`.
        async move {
            let (status, body) = app
                .post(
                    &format!("/v1/worlds/{world}/sources"),
                    json!({"filename": name, "text": " "}),
                )
                .await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
            body["error"]["details"]["field"] == "text"
        }
    })
    .await;
}

#[tokio::test]
async fn an_empty_world_name_is_invalid_by_the_document_and_refused() {
    let app = spawn_app().await;
    let world = world(&app).await;
    let doc = document(&app).await;
    for schema in ["CreateWorldRequest", "UpdateWorldRequest"] {
        let name = property(&doc, schema, &["name"]);
        assert_eq!(name["minLength"], 1, "{schema}: {name}");
        assert_eq!(name["maxLength"], 200, "{schema}: {name}");
    }
    let (status, body) = app.patch(&format!("/v1/worlds/{world}"), json!({"name": ""})).await;
    let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(err["details"]["field"], "name");

    // Every rule is the document's, the length counted as sent (before trimming).
    let name = property(&doc, "UpdateWorldRequest", &["name"]);
    let mut values = tricky_values();
    values.extend([
        "x".repeat(200),
        "x".repeat(201),
        format!(" {} ", "x".repeat(198)),
        format!(" {} ", "x".repeat(199)),
    ]);
    assert_agree(name, values, |value| {
        let app = &app;
        let world = &world;
        async move {
            let (status, body) = app.patch(&format!("/v1/worlds/{world}"), json!({"name": value})).await;
            assert!(status == StatusCode::OK || status == StatusCode::BAD_REQUEST, "{body}");
            status == StatusCode::OK
        }
    })
    .await;
    // Stored trimmed.
    let (_, renamed) = app
        .patch(&format!("/v1/worlds/{world}"), json!({"name": "  Aerth "}))
        .await;
    assert_eq!(renamed["name"], "Aerth");
}

#[tokio::test]
async fn the_provider_key_secret_rule_is_the_documented_pattern() {
    let app = crate::helpers::spawn_app_with(|s| {
        s.security.master_key = Some(secrecy::SecretString::from(crate::keys::MASTER_KEY));
    })
    .await;
    let doc = document(&app).await;
    let secret = property(&doc, "CreateKeyRequest", &["secret"]);
    assert!(secret["pattern"].is_string(), "{secret}");
    assert_eq!(secret["maxLength"], 1024, "{secret}");
    let mut values: Vec<String> = tricky_chars()
        .into_iter()
        .map(|c| format!("AIza{c}key{}", c as u32))
        .collect();
    values.extend(["", "k", " AIzaPadded ", "AIzaPadded\n"].map(String::from));
    values.extend([format!("k{}", "x".repeat(1023)), format!("k{}", "x".repeat(1024))]);
    assert_agree(secret, values, |value| {
        let app = &app;
        async move {
            let (status, body) = app
                .post("/v1/provider-keys", json!({"provider": "google", "secret": value}))
                .await;
            assert!(
                status == StatusCode::CREATED || status == StatusCode::BAD_REQUEST,
                "{body}"
            );
            status == StatusCode::CREATED
        }
    })
    .await;
    // Labels and quota groups: at most 200 characters as sent, no control characters.
    for field in ["label", "quota_group"] {
        let schema = property(&doc, "CreateKeyRequest", &[field]);
        let mut values = tricky_values();
        values.extend(["x".repeat(200), "x".repeat(201), format!(" {} ", "x".repeat(199))]);
        let n = std::sync::atomic::AtomicU32::new(0);
        assert_agree(schema, values, |value| {
            let app = &app;
            let secret = format!("{field}-{}", n.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
            async move {
                let (status, body) = app
                    .post(
                        "/v1/provider-keys",
                        json!({"provider": "openai", "secret": secret, field: value}),
                    )
                    .await;
                assert!(
                    status == StatusCode::CREATED || status == StatusCode::BAD_REQUEST,
                    "{body}"
                );
                status == StatusCode::CREATED
            }
        })
        .await;
    }
}

#[tokio::test]
async fn the_job_status_filter_is_a_documented_list_of_the_enum() {
    let app = spawn_app().await;
    let world = world(&app).await;
    let doc = document(&app).await;
    let status = parameter(&doc, "list_jobs", "status");
    assert_eq!(status["style"], "form", "{status}");
    assert_eq!(status["explode"], false, "{status}");
    let schema = resolve(&doc, &status["schema"]);
    assert_eq!(schema["minItems"], 1, "{schema}");
    let items = resolve(&doc, &schema["items"]);
    let documented: Vec<&str> = items["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("no enum in {items}"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        documented,
        [
            "queued",
            "running",
            "paused",
            "held",
            "cancelled",
            "completed",
            "failed"
        ]
    );
    let jobs = format!("/v1/worlds/{world}/jobs");
    for value in &documented {
        let (code, body) = app.get(&format!("{jobs}?status={value}")).await;
        assert_eq!(code, StatusCode::OK, "{value}: {body}");
    }
    let (code, body) = app.get(&format!("{jobs}?status={}", documented.join(","))).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    // An empty list, or a value outside the enum.
    for bad in ["", "done", "queued,", "QUEUED"] {
        let (code, body) = app.get(&format!("{jobs}?status={bad}")).await;
        let err = assert_error(code, &body, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(err["details"]["field"], "status", "{bad}: {body}");
    }
}

#[tokio::test]
async fn integral_numbers_are_integers_when_creating_a_world() {
    let app = spawn_app().await;
    let (status, world) = app
        .post(
            "/v1/worlds",
            json!({"name": "Aerth", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2", "dimensions": 384.0},
                   "chunking": {"max_tokens": 200.0, "overlap_tokens": 20.0, "parent_max_tokens": 800.0}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    assert_eq!(world["embedding"]["dimensions"], 384);
    assert_eq!(
        world["chunking"],
        json!({"max_tokens": 200, "overlap_tokens": 20, "parent_max_tokens": 800, "context_prefix": false})
    );
    // A fraction, or a number out of every integer's range, is still refused, naming the field.
    for (bad, field) in [
        (json!({"max_tokens": 200.5}), "chunking.max_tokens"),
        (json!({"overlap_tokens": 1e300}), "chunking.overlap_tokens"),
        (json!({"parent_max_tokens": "800"}), "chunking.parent_max_tokens"),
        (json!({"context_prefix": "yes"}), "chunking.context_prefix"),
    ] {
        let (status, body) = app
            .post(
                "/v1/worlds",
                json!({"name": "Aerth", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}, "chunking": bad}),
            )
            .await;
        let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(err["details"]["field"], field, "{body}");
    }
}

#[tokio::test]
async fn integral_numbers_are_integers_when_reingesting() {
    let app = spawn_app().await;
    let world = world(&app).await;
    let (status, job) = app
        .post(
            &format!("/v1/worlds/{world}/reingest"),
            json!({"chunking": {"max_tokens": 100.0, "overlap_tokens": 0.0}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let (status, body) = app
        .post(
            &format!("/v1/worlds/{world}/reingest"),
            json!({"chunking": {"max_tokens": 100.25}}),
        )
        .await;
    let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(err["details"]["field"], "chunking.max_tokens", "{body}");
}

#[tokio::test]
async fn integral_numbers_are_integers_in_retrieval_settings() {
    let app = spawn_app().await;
    let world = world(&app).await;
    let (status, body) = app
        .post(
            &format!("/v1/worlds/{world}/retrieve"),
            json!({"query": "x", "top_k": 8.0, "neighbors": 1.0, "max_context_tokens": 500.0,
                   "filter": {"book_numbers": [1.0]}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app
        .post(
            &format!("/v1/worlds/{world}/retrieve"),
            json!({"query": "x", "top_k": 8.5}),
        )
        .await;
    let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
    assert_eq!(err["details"]["field"], "top_k", "{body}");
}

#[tokio::test]
async fn an_array_is_not_an_object_when_creating_a_world() {
    let app = spawn_app().await;
    let embedding = json!({"provider": "local", "model": "all-MiniLM-L6-v2"});
    for (body, field) in [
        (
            json!({"name": "a", "embedding": embedding, "chunking": [null, null]}),
            "chunking",
        ),
        (
            json!({"name": "a", "embedding": embedding, "chunking": [200, 20, 800]}),
            "chunking",
        ),
        (
            json!({"name": "a", "embedding": ["local", "all-MiniLM-L6-v2"]}),
            "embedding",
        ),
    ] {
        let (status, answer) = app.post("/v1/worlds", body.clone()).await;
        let err = assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(err["details"]["field"], field, "{body}: {answer}");
        assert!(err["message"].as_str().unwrap().contains("object"), "{answer}");
    }
    let (_, list) = app.get("/v1/worlds").await;
    assert_eq!(list["worlds"], json!([]), "nothing was created");
    // `null` is "not given", as the document's `oneOf [object, null]` says.
    let (status, answer) = app
        .post(
            "/v1/worlds",
            json!({"name": "a", "embedding": embedding, "chunking": null}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
}

#[tokio::test]
async fn an_array_is_not_an_object_when_reingesting() {
    let app = spawn_app().await;
    let world = world(&app).await;
    for (body, field) in [
        (json!({"chunking": [null, null]}), "chunking"),
        (json!({"embedding": ["local", "all-MiniLM-L6-v2", 384]}), "embedding"),
    ] {
        let (status, answer) = app.post(&format!("/v1/worlds/{world}/reingest"), body.clone()).await;
        let err = assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(err["details"]["field"], field, "{body}: {answer}");
    }
    let (_, jobs) = app.get(&format!("/v1/worlds/{world}/jobs")).await;
    assert_eq!(jobs["jobs"], json!([]), "no re-ingest was started");
}

#[tokio::test]
async fn an_unparsable_last_event_id_is_refused() {
    let app = spawn_app().await;
    let world = world(&app).await;
    let (status, job) = app.post(&format!("/v1/worlds/{world}/reingest"), json!({})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let events = format!("/v1/jobs/{}/events", job["id"].as_str().unwrap());
    let doc = document(&app).await;
    let header = &parameter(&doc, "job_events", "Last-Event-ID")["schema"];
    assert_eq!(header["minimum"], 0, "{header}");
    assert_eq!(header["maximum"], i64::MAX, "{header}");
    for bad in ["9223372036854775808", "-1", "abc", "1.5", "", "+3"] {
        let resp = app
            .client
            .get(app.url(&events))
            .bearer_auth(TOKEN)
            .header("Last-Event-ID", bad)
            .send()
            .await
            .unwrap();
        let (status, body) = read(resp).await;
        let err = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(err["details"]["field"], "Last-Event-ID", "{bad:?}: {body}");
    }
    // The largest id the document allows is taken (and is past every event: nothing is replayed
    // but the stream, which ends with the job).
    let resp = app
        .client
        .get(app.url(&events))
        .bearer_auth(TOKEN)
        .header("Last-Event-ID", i64::MAX.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
}

#[tokio::test]
async fn retrieval_enums_and_paging_bounds_are_documented_as_the_server_checks_them() {
    let app = spawn_app().await;
    let world = world(&app).await;
    let doc = document(&app).await;
    let retrieve = format!("/v1/worlds/{world}/retrieve");
    // (the setting's path in the body, its documented values, a body setting it)
    type Case = (&'static [&'static str], Vec<&'static str>, fn(&str) -> Value);
    let cases: [Case; 3] = [
        (
            &["mode"],
            vec!["dense", "hybrid", "auto", "full"],
            |v| json!({"query": "x", "mode": v}),
        ),
        (
            &["expand"],
            vec!["none", "neighbors", "parent"],
            |v| json!({"query": "x", "expand": v}),
        ),
        (
            &["fusion", "method"],
            vec!["auto", "rrf", "dbsf"],
            |v| json!({"query": "x", "mode": "auto", "fusion": {"method": v}}),
        ),
    ];
    for (path, values, body) in cases {
        let schema = property(&doc, "RetrieveRequest", path);
        let documented: Vec<&str> = schema["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{path:?} is no enum: {schema}"))
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(documented, values, "{path:?}");
        let field = path.join(".");
        for value in documented.iter().copied().chain(["Dense", "", "bm25"]) {
            let (status, answer) = app.post(&retrieve, body(value)).await;
            let refused = status == StatusCode::BAD_REQUEST && answer["error"]["details"]["field"] == field.as_str();
            // `hybrid` is refused by this dense world (a state the document cannot know) under
            // the field `mode` too: told apart by its message.
            let by_state = answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("hybrid: true"));
            assert_eq!(
                refused && !by_state,
                !documented.contains(&value),
                "{field} = {value:?}: {status} {answer}"
            );
        }
    }
    // Paging: `offset` up to 2^63 - 1, `limit` 1 to 1000, as documented.
    for operation in ["list_worlds", "list_jobs", "list_sources", "list_chunks", "list_keys"] {
        let offset = &parameter(&doc, operation, "offset")["schema"];
        assert_eq!(
            (&offset["minimum"], &offset["maximum"]),
            (&json!(0), &json!(i64::MAX)),
            "{operation}"
        );
        let limit = &parameter(&doc, operation, "limit")["schema"];
        assert_eq!(
            (&limit["minimum"], &limit["maximum"]),
            (&json!(1), &json!(1000)),
            "{operation}"
        );
    }
    for (query, ok) in [
        (format!("offset={}", i64::MAX), true),
        (format!("offset={}", i64::MAX as u64 + 1), false),
        ("limit=1000".to_owned(), true),
        ("limit=1001".to_owned(), false),
        ("limit=0".to_owned(), false),
    ] {
        let (status, body) = app.get(&format!("/v1/worlds?{query}")).await;
        assert_eq!(status == StatusCode::OK, ok, "{query}: {body}");
    }
}

#[tokio::test]
async fn a_source_url_is_refused_exactly_when_the_documented_pattern_refuses_it() {
    let app = spawn_app().await;
    let world = world(&app).await;
    let doc = document(&app).await;
    for schema in ["AddSourceRequest", "AddSourceUpload"] {
        let url = property(&doc, schema, &["url"]);
        assert_eq!(url["pattern"], quarry::domain::SourceUrl::PATTERN, "{schema}");
        assert_eq!(url["maxLength"], 2048, "{schema}");
    }
    let url = property(&doc, "AddSourceRequest", &["url"]);
    let mut values: Vec<String> = [
        "https://example.com",
        "HTTP://Example.COM:8080/a/b?c=d#e",
        "https://[::1]/x",
        "https://[2001:db8::8a2e:370:7334]:443/",
        "https://例え.jp/ページ",
        "http://127.0.0.1:65535/",
        "http://127.0.0.1:65536/",
        "http://256.1.1.1/",
        "https://1.2.3/",
        "https://user@example.com/",
        "https://example.com./",
        "https://-a.com/",
        "ftp://example.com/",
        "http:example.com",
        "https://",
        " https://example.com",
        "https://example.com/ a",
    ]
    .map(String::from)
    .to_vec();
    values.extend(tricky_chars().into_iter().map(|c| format!("https://example.com/{c}")));
    values.extend([
        format!("https://example.com/{}", "a".repeat(2048 - 20)),
        format!("https://example.com/{}", "a".repeat(2048 - 19)),
    ]);
    assert_agree(url, values, |value| {
        let app = &app;
        let world = &world;
        // A refused URL comes before the text is looked at; the text here is blank, so an
        // accepted URL shows as a refusal naming `text`.
        async move {
            let (status, body) = app
                .post(
                    &format!("/v1/worlds/{world}/sources"),
                    json!({"filename": "a.md", "text": " ", "url": value}),
                )
                .await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
            body["error"]["details"]["field"] == "text"
        }
    })
    .await;
}
