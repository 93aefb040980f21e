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
