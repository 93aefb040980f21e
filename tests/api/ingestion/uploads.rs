//! What a source upload may be: JSON or multipart, text, Markdown or HTML; a bad one is refused
//! and stores nothing.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TOKEN, assert_error, read};

use super::{id, setup};

#[tokio::test]
async fn bad_sources_are_rejected_and_store_nothing() {
    let (_fake, app, world) = setup(512).await;
    let path = format!("/v1/worlds/{}/sources", id(&world));
    for (body, field) in [
        (json!({"filename": "a.txt", "text": "   \n "}), "text"),
        (json!({"filename": "  ", "text": "Hello."}), "filename"),
        (
            json!({"filename": "a.pdf", "text": "Hello.", "content_type": "application/pdf"}),
            "content_type",
        ),
    ] {
        let (status, resp) = app.post(&path, body).await;
        let err = assert_error(status, &resp, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(err["details"]["field"], field);
    }
    let (status, resp) = app.post(&path, json!({"filename": "a.txt"})).await;
    assert_error(status, &resp, StatusCode::BAD_REQUEST, "invalid_request");
    let (status, resp) = app
        .post(
            &format!("/v1/worlds/{}/sources", uuid::Uuid::new_v4()),
            json!({"filename": "a", "text": "b"}),
        )
        .await;
    assert_error(status, &resp, StatusCode::NOT_FOUND, "world_not_found");

    // A JSON array is not an object, even one with the fields in order.
    let (status, resp) = app.post(&path, json!(["a.txt", "Some text.", null])).await;
    let error = assert_error(status, &resp, StatusCode::BAD_REQUEST, "invalid_request");
    assert!(
        error["message"].as_str().unwrap().contains("must be a JSON object"),
        "{resp}"
    );

    // Multipart: non-UTF-8 bytes are refused.
    let bad = reqwest::multipart::Part::bytes(vec![0xff, 0xfe, 0x00]).file_name("bin.txt");
    let resp = app
        .client
        .post(app.url(&path))
        .bearer_auth(TOKEN)
        .multipart(reqwest::multipart::Form::new().part("file", bad))
        .send()
        .await
        .unwrap();
    let (status, resp) = read(resp).await;
    assert_error(status, &resp, StatusCode::BAD_REQUEST, "invalid_request");

    let (_, sources) = app.get(&path).await;
    assert_eq!(sources["sources"], json!([]));
    let (_, jobs) = app.get(&format!("/v1/worlds/{}/jobs", id(&world))).await;
    assert_eq!(jobs["jobs"], json!([]));
}

#[tokio::test]
async fn multipart_uploads_and_html_are_accepted() {
    let (fake, app, world) = setup(512).await;
    let path = format!("/v1/worlds/{}/sources", id(&world));
    let html = "<html><head><style>p{}</style></head><body><h1>Isles</h1><p>Salt &amp; amber.</p></body></html>";
    let part = reqwest::multipart::Part::bytes(html.as_bytes().to_vec()).file_name("isles.html");
    let resp = app
        .client
        .post(app.url(&path))
        .bearer_auth(TOKEN)
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .unwrap();
    let (status, accepted) = read(resp).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert_eq!(accepted["source"]["filename"], "isles.html");
    assert_eq!(accepted["source"]["content_type"], "text/html");
    let (status, got) = app.get(&format!("{path}/{}", id(&accepted["source"]))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["chunks"], accepted["source"]["chunks"]);
    app.drain().await;
    let sent = fake.stats().sent_texts();
    assert!(
        sent.iter().all(|t| !t.contains('<') && !t.contains("p{}")),
        "HTML was converted: {sent:?}"
    );
    assert!(sent.iter().any(|t| t.contains("Salt & amber.")));
}

#[tokio::test]
async fn multipart_fields_override_the_part_and_unknown_or_repeated_parts_are_refused() {
    let (_fake, app, world) = setup(512).await;
    let path = format!("/v1/worlds/{}/sources", id(&world));
    let send = |form: reqwest::multipart::Form| {
        let request = app.client.post(app.url(&path)).bearer_auth(TOKEN).multipart(form);
        async move { read(request.send().await.unwrap()).await }
    };
    let file = |name: Option<&str>, mime: Option<&str>, text: &str| {
        let mut part = reqwest::multipart::Part::bytes(text.as_bytes().to_vec());
        if let Some(name) = name {
            part = part.file_name(name.to_owned());
        }
        if let Some(mime) = mime {
            part = part.mime_str(mime).unwrap();
        }
        part
    };
    // `filename` and `content_type` fields win over the part's own.
    let (status, accepted) = send(
        reqwest::multipart::Form::new()
            .part("file", file(Some("x.bin"), None, "# Isles\n\nSalt and amber."))
            .text("filename", "isles.md")
            .text("content_type", "text/markdown"),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert_eq!(
        (&accepted["source"]["filename"], &accepted["source"]["content_type"]),
        (&json!("isles.md"), &json!("text/markdown"))
    );
    // A part without a filename is named after its content type.
    let (status, accepted) =
        send(reqwest::multipart::Form::new().part("file", file(None, Some("text/html"), "<p>Salt &amp; amber.</p>")))
            .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert_eq!(
        (&accepted["source"]["filename"], &accepted["source"]["content_type"]),
        (&json!("upload.html"), &json!("text/html"))
    );
    // Unknown and repeated parts are refused like unknown and repeated JSON fields.
    for (form, field) in [
        (
            reqwest::multipart::Form::new()
                .part("file", file(Some("a.txt"), None, "One."))
                .text("foo", "bar"),
            "foo",
        ),
        (
            reqwest::multipart::Form::new()
                .part("file", file(Some("a.txt"), None, "One."))
                .part("file", file(Some("b.txt"), None, "Two.")),
            "file",
        ),
        (
            reqwest::multipart::Form::new()
                .text("filename", "a.txt")
                .text("filename", "b.txt")
                .part("file", file(Some("a.txt"), None, "One.")),
            "filename",
        ),
        (reqwest::multipart::Form::new().text("filename", "a.txt"), "file"),
    ] {
        let (status, body) = send(form).await;
        let error = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(error["details"]["field"], field, "{body}");
    }
    let (_, sources) = app.get(&path).await;
    assert_eq!(
        sources["sources"].as_array().unwrap().len(),
        2,
        "the refusals stored nothing"
    );
}

/// The title, URL and metadata of `source` (a source's JSON as the API answers it).
fn details(source: &serde_json::Value) -> serde_json::Value {
    json!({"title": source["title"], "url": source["url"], "metadata": source["metadata"]})
}

#[tokio::test]
async fn a_source_keeps_the_title_url_and_metadata_it_was_uploaded_with() {
    let (_fake, app, world) = setup(512).await;
    let path = format!("/v1/worlds/{}/sources", id(&world));
    let given = json!({
        "title": "  The Northern Isles — chapter 1 ",
        "url": "https://example.com/isles/ch1?lang=en#top",
        "metadata": {"lang": "en", "kind": "chapter", "glacier": "北の氷河", "note": ""},
    });
    let stored = json!({
        "title": "The Northern Isles — chapter 1",
        "url": "https://example.com/isles/ch1?lang=en#top",
        "metadata": {"glacier": "北の氷河", "kind": "chapter", "lang": "en", "note": ""},
    });
    let mut body = given.clone();
    body["filename"] = json!("ch1.md");
    body["text"] = json!("# Isles\n\nQueen Maren rules the northern isles.");
    let (status, json_upload) = app.post(&path, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{json_upload}");
    assert_eq!(details(&json_upload["source"]), stored, "the upload's answer");

    // The same through a multipart upload, with metadata as JSON text.
    let form = reqwest::multipart::Form::new()
        .part(
            "file",
            reqwest::multipart::Part::bytes(b"Salt and amber.".to_vec()).file_name("ch2.txt"),
        )
        .text("title", given["title"].as_str().unwrap().to_owned())
        .text("url", given["url"].as_str().unwrap().to_owned())
        .text("metadata", given["metadata"].to_string());
    let resp = app
        .client
        .post(app.url(&path))
        .bearer_auth(TOKEN)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let (status, multipart_upload) = read(resp).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{multipart_upload}");
    assert_eq!(details(&multipart_upload["source"]), stored);

    // A source given none (and one given `null`s) has none.
    let (status, plain) = app
        .post(
            &path,
            json!({"filename": "plain.txt", "text": "Plain.", "title": null, "url": null, "metadata": null}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{plain}");
    let none = json!({"title": null, "url": null, "metadata": {}});
    assert_eq!(details(&plain["source"]), none);

    // Read back, one by one and listed.
    for (accepted, expected) in [(&json_upload, &stored), (&multipart_upload, &stored), (&plain, &none)] {
        let (status, got) = app.get(&format!("{path}/{}", id(&accepted["source"]))).await;
        assert_eq!(status, StatusCode::OK, "{got}");
        assert_eq!(&details(&got), expected);
    }
    let (_, listed) = app.get(&path).await;
    let listed: Vec<_> = listed["sources"].as_array().unwrap().iter().map(details).collect();
    assert_eq!(listed, [stored.clone(), stored, none]);
}

#[tokio::test]
async fn bad_titles_urls_and_metadata_are_400_naming_the_field_and_store_nothing() {
    let (_fake, app, world) = setup(512).await;
    let path = format!("/v1/worlds/{}/sources", id(&world));
    let many_keys: serde_json::Map<String, serde_json::Value> =
        (0..65).map(|i| (format!("k{i}"), json!("v"))).collect();
    let cases = [
        (json!({"title": ""}), "title"),
        (json!({"title": "   "}), "title"),
        (json!({"title": "x".repeat(1001)}), "title"),
        (json!({"title": "two\nlines"}), "title"),
        (json!({"title": 7}), "title"),
        (json!({"url": "example.com/page"}), "url"),
        (json!({"url": "/relative"}), "url"),
        (json!({"url": "ftp://example.com/file"}), "url"),
        (json!({"url": "javascript:alert(1)"}), "url"),
        (json!({"url": "https://exa mple.com"}), "url"),
        (
            json!({"url": format!("https://example.com/{}", "a".repeat(2048))}),
            "url",
        ),
        (json!({"url": ""}), "url"),
        (json!({"metadata": ["lang", "en"]}), "metadata"),
        (json!({"metadata": "lang=en"}), "metadata"),
        (json!({"metadata": {"lang": 1}}), "metadata.lang"),
        (json!({"metadata": {"lang": null}}), "metadata.lang"),
        (json!({"metadata": {"lang": ["en"]}}), "metadata.lang"),
        (json!({"metadata": {"lang": {"code": "en"}}}), "metadata.lang"),
        (json!({"metadata": {"lang": "e".repeat(1025)}}), "metadata.lang"),
        (json!({"metadata": {"has space": "x"}}), "metadata"),
        (json!({"metadata": {"": "x"}}), "metadata"),
        (json!({"metadata": {"k".repeat(65): "x"}}), "metadata"),
        (json!({"metadata": {"ключ": "x"}}), "metadata"),
        (json!({"metadata": many_keys}), "metadata"),
    ];
    for (extra, field) in &cases {
        let mut body = json!({"filename": "a.txt", "text": "Hello."});
        for (key, value) in extra.as_object().unwrap() {
            body[key] = value.clone();
        }
        let (status, resp) = app.post(&path, body).await;
        let error = assert_error(status, &resp, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(error["details"]["field"], *field, "{extra}: {resp}");
    }

    // The same refusals from a multipart upload, where every value is text.
    let send = |parts: Vec<(&str, String)>| {
        let mut form = reqwest::multipart::Form::new().part(
            "file",
            reqwest::multipart::Part::bytes(b"Hello.".to_vec()).file_name("a.txt"),
        );
        for (name, value) in parts {
            form = form.text(name.to_owned(), value);
        }
        let request = app.client.post(app.url(&path)).bearer_auth(TOKEN).multipart(form);
        async move { read(request.send().await.unwrap()).await }
    };
    for (extra, field) in cases.iter().filter(|(extra, _)| extra.get("title") != Some(&json!(7))) {
        let (name, value) = extra.as_object().unwrap().iter().next().unwrap();
        let text = match value {
            serde_json::Value::String(s) if name != "metadata" => s.clone(),
            other => other.to_string(),
        };
        let (status, resp) = send(vec![(name.as_str(), text)]).await;
        let error = assert_error(status, &resp, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(error["details"]["field"], *field, "multipart {extra}: {resp}");
    }
    for (parts, field) in [
        (vec![("metadata", "{not json".to_owned())], "metadata"),
        (vec![("metadata", String::new())], "metadata"),
        (vec![("title", "One".to_owned()), ("title", "Two".to_owned())], "title"),
        (
            vec![
                ("url", "https://a.example".to_owned()),
                ("url", "https://b.example".to_owned()),
            ],
            "url",
        ),
        (
            vec![("metadata", "{}".to_owned()), ("metadata", "{}".to_owned())],
            "metadata",
        ),
    ] {
        let (status, resp) = send(parts.clone()).await;
        let error = assert_error(status, &resp, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(error["details"]["field"], field, "multipart {parts:?}: {resp}");
    }

    let (_, sources) = app.get(&path).await;
    assert_eq!(sources["sources"], json!([]), "nothing was stored");
    let (_, jobs) = app.get(&format!("/v1/worlds/{}/jobs", id(&world))).await;
    assert_eq!(jobs["jobs"], json!([]));
}
