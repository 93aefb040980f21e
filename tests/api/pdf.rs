//! PDF uploads: text extracted page by page from real manuals a Debian package ships
//! (bash-doc's `bash.pdf` and `bashref.pdf`), chunks, results and citations that carry their
//! page, a re-ingest that keeps them; a scanned PDF without a text layer (asymptote-doc's
//! `pixel.pdf`, an image only) refused with 422 `no_text_layer`, and damaged files and deflate
//! bombs with 422 `unreadable_document`, storing nothing. Without the packages (installed by
//! `.ci/run`) the real-document tests say SKIPPED loudly (and fail with
//! `QUARRY_TEST_REQUIRE_DOCS=1`).

use std::io::Write as _;
use std::path::Path;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TestApp, assert_error, on_fake_google, spawn_app_with};

const BASH: &str = "/usr/share/doc/bash/bash.pdf";
const BASHREF: &str = "/usr/share/doc/bash/bashref.pdf";
const SCANNED: &str = "/usr/share/doc/asymptote/examples/pixel.pdf";

/// The file's bytes, or `None` (with a loud SKIPPED line) when its package is not installed.
fn document(test: &str, path: &str, package: &str) -> Option<Vec<u8>> {
    crate::documents::installed(test, Path::new(path), package).then(|| std::fs::read(path).unwrap())
}

/// A Google world (fake provider) with chunks of up to 256 tokens.
async fn world(app: &TestApp) -> String {
    let chunking = json!({"chunking": {"max_tokens": 256, "overlap_tokens": 16}});
    crate::helpers::id(&app.create_google_world("Manuals", chunking).await)
}

async fn chunks(app: &TestApp, world: &str, source: &str) -> Vec<Value> {
    let (status, body) = app
        .get(&format!("/v1/worlds/{world}/sources/{source}/chunks?limit=1000"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["chunks"].as_array().unwrap().clone()
}

/// The page of the char at `offset` of a PDF's stored text: one more than the form feeds
/// (page breaks) before it — counted here independently of the server.
fn page_of(text: &str, offset: u64) -> u64 {
    1 + text.chars().take(offset as usize).filter(|&c| c == '\u{c}').count() as u64
}

#[tokio::test]
async fn a_real_pdf_manual_is_read_page_by_page_and_chunks_results_and_citations_carry_their_page() {
    let Some(bytes) = document("pdf::a_real_pdf_manual_is_read_page_by_page", BASH, "bash-doc") else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    let world = world(&app).await;
    let (status, accepted) = app
        .upload(&format!("/v1/worlds/{world}/sources/upload"), "bash.pdf", bytes)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let source = accepted["source"]["id"].as_str().unwrap().to_owned();
    assert_eq!(accepted["source"]["content_type"], "application/pdf", "{accepted}");
    app.drain().await;

    // 87 pages: 86 page breaks; the first page is the manual's first page.
    let text = app.source_text(&world, &source).await;
    let pages: Vec<&str> = text.split('\u{c}').collect();
    assert_eq!(pages.len(), 87);
    assert!(
        pages[0].contains("GNU Bourne-Again SHell"),
        "{}",
        &pages[0][..300.min(pages[0].len())]
    );
    assert!(pages[86].contains("bug reports"), "{}", pages[86]);
    // Words are apart, ligatures folded ("ﬁ" is "fi"), no control characters but the breaks.
    assert!(
        text.contains("Bash is an sh-compatible command language interpreter"),
        "{}",
        &text[..2000]
    );
    assert!(!text.contains('\u{fb01}') && !text.contains('\u{fb02}'));
    assert!(
        text.chars()
            .all(|c| !c.is_control() || matches!(c, '\n' | '\t' | '\u{c}'))
    );

    let chunks = chunks(&app, &world, &source).await;
    assert!(chunks.len() > 50, "{}", chunks.len());
    for c in &chunks {
        assert_eq!(c["state"], "embedded", "{c}");
        let expected = page_of(&text, c["char_start"].as_u64().unwrap());
        assert_eq!(c["page"].as_u64(), Some(expected), "{c}");
    }
    assert_eq!(chunks[0]["page"], 1);
    // The manual has 87 pages; its last section opens on page 86 or 87.
    let last = chunks.last().unwrap()["page"].as_u64().unwrap();
    assert!((86..=87).contains(&last), "{last}");

    let (status, answer) = app
        .post(
            &format!("/v1/worlds/{world}/retrieve"),
            json!({"query": "Which startup files does an interactive login shell read?", "top_k": 5}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let results = answer["results"].as_array().unwrap();
    assert!(!results.is_empty(), "{answer}");
    for r in results {
        assert_eq!(
            r["page"].as_u64(),
            Some(page_of(&text, r["char_start"].as_u64().unwrap())),
            "{r}"
        );
    }
    let citations = answer["context"]["citations"].as_array().unwrap();
    assert!(!citations.is_empty(), "{answer}");
    for c in citations {
        assert!(c["page"].as_u64().is_some_and(|p| (1..=87).contains(&p)), "{c}");
    }

    // A re-ingest cuts the text again: the new chunks are told their pages too.
    let (status, body) = app
        .post(
            &format!("/v1/worlds/{world}/reingest"),
            json!({"chunking": {"max_tokens": 400, "overlap_tokens": 0}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    app.wait_prepared().await;
    app.drain().await;
    let (_, w) = app.get(&format!("/v1/worlds/{world}")).await;
    assert_eq!(w["chunking"]["max_tokens"], 400, "{w}");
    let again = crate::pdf::chunks(&app, &world, &source).await;
    assert!(again.len() < chunks.len(), "{} vs {}", again.len(), chunks.len());
    for c in &again {
        assert_eq!(
            c["page"].as_u64(),
            Some(page_of(&text, c["char_start"].as_u64().unwrap())),
            "{c}"
        );
    }
}

#[tokio::test]
async fn a_texinfo_manual_reads_in_order_and_other_formats_have_no_page() {
    let Some(bytes) = document("pdf::a_texinfo_manual_reads_in_order", BASHREF, "bash-doc") else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    let world = world(&app).await;
    // Sent without a name or a content type: known by its `%PDF-` header.
    let part = reqwest::multipart::Part::bytes(bytes);
    let response = app
        .client
        .post(app.url(&format!("/v1/worlds/{world}/sources/upload")))
        .bearer_auth(crate::helpers::TOKEN)
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .unwrap();
    let (status, accepted) = crate::helpers::read(response).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    assert_eq!(accepted["source"]["filename"], "upload.pdf", "{accepted}");
    let source = accepted["source"]["id"].as_str().unwrap().to_owned();
    let text = app.source_text(&world, &source).await;
    assert_eq!(text.split('\u{c}').count(), 196);
    assert!(text.starts_with("Bash Reference Manual"), "{}", &text[..200]);
    let intro = text.find("What is Bash?").expect("the introduction");
    let definitions = text.find("Definitions").expect("the definitions");
    assert!(intro < definitions);

    // A text source's chunks have no page.
    let plain = app
        .add_text(&world, "notes.txt", "Plain notes have no pages at all.")
        .await;
    let plain = plain["source"]["id"].as_str().unwrap();
    assert_eq!(chunks(&app, &world, plain).await[0]["page"], Value::Null);
}

#[tokio::test]
async fn pdfs_that_give_no_text_are_refused_with_422_and_store_nothing() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    let world = world(&app).await;
    let upload = |name: &'static str, bytes: Vec<u8>| {
        let app = &app;
        let world = world.clone();
        async move {
            app.upload(&format!("/v1/worlds/{world}/sources/upload"), name, bytes)
                .await
        }
    };

    if let Some(scan) = document("pdf::pdfs_that_give_no_text (scan)", SCANNED, "asymptote-doc") {
        let (status, body) = upload("pixel.pdf", scan).await;
        let error = assert_error(status, &body, StatusCode::UNPROCESSABLE_ENTITY, "no_text_layer");
        assert_eq!(error["details"]["field"], "file");
        assert!(error["message"].as_str().unwrap().contains("OCR"), "{error}");
    }

    // Not a PDF at all, behind the header.
    let (status, body) = upload("broken.pdf", b"%PDF-1.7\n\x00\x01 nothing a reader could use".to_vec()).await;
    assert_error(status, &body, StatusCode::UNPROCESSABLE_ENTITY, "unreadable_document");

    // A deflate bomb: 80 MiB of zeros in a 80 kB file is refused before any parser inflates it.
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..80 {
        z.write_all(&zeros).unwrap();
    }
    let stream = z.finish().unwrap();
    let mut bomb = format!(
        "%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n\
         3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>\nendobj\n\
         4 0 obj\n<< /Length {} /Filter /FlateDecode >>\nstream\n",
        stream.len()
    )
    .into_bytes();
    bomb.extend_from_slice(&stream);
    bomb.extend_from_slice(b"\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n");
    let (status, body) = upload("bomb.pdf", bomb).await;
    let error = assert_error(status, &body, StatusCode::UNPROCESSABLE_ENTITY, "unreadable_document");
    assert!(error["message"].as_str().unwrap().contains("expand"), "{error}");

    // The JSON route takes text only.
    let (status, body) = app
        .post(
            &format!("/v1/worlds/{world}/sources"),
            json!({"filename": "a.pdf", "text": "%PDF-1.7", "content_type": "application/pdf"}),
        )
        .await;
    let error = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(error["details"]["field"], "content_type");

    let (_, listed) = app.get(&format!("/v1/worlds/{world}/sources")).await;
    assert_eq!(listed["sources"], json!([]), "{listed}");
    assert_eq!(fake.stats().embed_requests(), 0);
}

/// The upload's `/metrics` figures: slots held now, uploads abandoned so far.
async fn upload_figures(app: &TestApp) -> (f64, f64) {
    let text = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let figure = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse::<f64>().ok()))
            .unwrap_or_else(|| panic!("no {name} in /metrics"))
    };
    (
        figure("quarry_uploads_in_progress "),
        figure("quarry_uploads_abandoned_total "),
    )
}

/// An upload whose request times out (408) or whose client goes away stops its work at the
/// next page, and holds its slot of `server.max_concurrent_uploads` until the work has stopped,
/// not only until the request ended: the slot count and the abandoned count say so, in
/// polls rather than seconds.
#[tokio::test]
async fn abandoned_uploads_stop_their_work_and_hold_their_slot_until_it_stops() {
    let Some(manual) = document(
        "abandoned_uploads_stop_their_work_and_hold_their_slot_until_it_stops",
        BASHREF,
        "bash-doc",
    ) else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.server.request_timeout_s = 1)).await;
    let world = world(&app).await;
    let upload = format!("/v1/worlds/{world}/sources/upload");

    // Timed out: the manual's pages take longer than the 1 s the request has.
    let response = app
        .client
        .post(app.url(&upload))
        .bearer_auth(crate::helpers::TOKEN)
        .multipart(reqwest::multipart::Form::new().part("file", reqwest::multipart::Part::bytes(manual.clone())))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
    let mut polls = 0;
    while upload_figures(&app).await.0 > 0.0 {
        polls += 1;
        assert!(polls < 300, "the abandoned upload's work never stopped");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(upload_figures(&app).await, (0.0, 1.0), "stopped, not finished");

    // The client leaves mid-conversion: the same.
    let body = reqwest::multipart::Form::new().part("file", reqwest::multipart::Part::bytes(manual));
    let leaving = app
        .client
        .post(app.url(&upload))
        .bearer_auth(crate::helpers::TOKEN)
        .multipart(body)
        .timeout(std::time::Duration::from_millis(400))
        .send()
        .await;
    assert!(leaving.is_err_and(|e| e.is_timeout()));
    polls = 0;
    while upload_figures(&app).await != (0.0, 2.0) {
        polls += 1;
        assert!(
            polls < 300,
            "the left upload's work never stopped: {:?}",
            upload_figures(&app).await
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (_, listed) = app.get(&format!("/v1/worlds/{world}/sources")).await;
    assert_eq!(listed["sources"], json!([]), "{listed}");
}
