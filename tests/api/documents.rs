//! Real documents: HTML pages keep their main content (no navigation, tables of contents,
//! breadcrumbs, footers or permalink marks), with the page's title as the source's title;
//! `sources.html = "all"` keeps everything. The real pages are a Debian package's Sphinx manual
//! (python3-enlighten-doc, installed by `.ci/run`); without it those tests say SKIPPED loudly
//! (and fail with `QUARRY_TEST_REQUIRE_DOCS=1`).

use std::path::{Path, PathBuf};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TestApp, google_world, on_fake_google, spawn_app_with};

const MANUAL: &str = "/usr/share/doc/python3-enlighten-doc/html";

/// The manual's pages, or `None` (with a loud SKIPPED line) when the package is not installed.
fn manual(test: &str) -> Option<Vec<PathBuf>> {
    let dir = Path::new(MANUAL);
    if !installed(test, dir, "python3-enlighten-doc") {
        return None;
    }
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "html"))
        .collect();
    pages.sort();
    assert!(pages.len() >= 5, "{pages:?}");
    Some(pages)
}

/// Whether a Debian documentation package's `path` is there; if not, a loud SKIPPED line (a
/// failure with `QUARRY_TEST_REQUIRE_DOCS=1`, which `.ci/run` sets after installing them).
pub(crate) fn installed(test: &str, path: &Path, package: &str) -> bool {
    if path.exists() {
        return true;
    }
    let required = std::env::var("QUARRY_TEST_REQUIRE_DOCS").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{test}: {} is missing but QUARRY_TEST_REQUIRE_DOCS=1",
        path.display()
    );
    eprintln!("SKIPPED: {test} (install the Debian package {package} for its real documents)");
    false
}

/// Uploads `page` as an HTML source; returns the 202 body.
async fn upload(app: &TestApp, world: &str, page: &Path) -> Value {
    let bytes = std::fs::read(page).unwrap();
    let name = page.file_name().unwrap().to_string_lossy().into_owned();
    let (status, body) = app
        .upload(&format!("/v1/worlds/{world}/sources/upload"), &name, bytes)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{name}: {body}");
    body
}

/// What the manual's theme puts around every page (Read the Docs' Sphinx theme).
const NAVIGATION: [&str; 4] = ["Edit on GitHub", "Built with Sphinx", "© Copyright", "¶"];

#[tokio::test]
async fn a_real_manual_keeps_its_main_content_and_no_navigation() {
    let Some(pages) = manual("documents::a_real_manual_keeps_its_main_content_and_no_navigation") else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    let world = google_world(&app).await;
    let mut chunks = 0;
    for page in &pages {
        if page.ends_with("search.html") {
            // A search page is a form and a script around navigation: nothing is left of it.
            let bytes = std::fs::read(page).unwrap();
            let (status, body) = app
                .upload(&format!("/v1/worlds/{world}/sources/upload"), "search.html", bytes)
                .await;
            crate::helpers::assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
            continue;
        }
        let accepted = upload(&app, &world, page).await;
        let source = accepted["source"]["id"].as_str().unwrap();
        for text in app.chunk_texts(&world, source).await {
            for mark in NAVIGATION {
                assert!(
                    !text.contains(mark),
                    "{}: a chunk holds `{mark}`: {text}",
                    page.display()
                );
            }
            chunks += 1;
        }
    }
    assert!(chunks > 20, "{chunks} chunks");

    // The FAQ keeps its questions and answers, and the page's title names the source.
    let faq = pages.iter().find(|p| p.ends_with("faq.html")).unwrap();
    let accepted = upload(&app, &world, faq).await;
    let title = accepted["source"]["title"].as_str().unwrap_or_default();
    assert!(title.contains("Frequently Asked Questions"), "{accepted}");
    let text = app
        .source_text(&world, accepted["source"]["id"].as_str().unwrap())
        .await;
    assert!(text.contains("Why is Enlighten called Enlighten?"), "{text}");
    assert!(
        text.contains("Enlighten has supported Windows since version 1.3.0."),
        "{text}"
    );
    assert!(
        !text.contains("Installation\n"),
        "the sidebar's table of contents went: {text}"
    );
    // A title the upload gives wins over the page's.
    let bytes = std::fs::read(faq).unwrap();
    let part = reqwest::multipart::Part::bytes(bytes).file_name("faq.html");
    let form = reqwest::multipart::Form::new()
        .part("file", part)
        .text("title", "Our FAQ");
    let response = app
        .client
        .post(app.url(&format!("/v1/worlds/{world}/sources/upload")))
        .bearer_auth(crate::helpers::TOKEN)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["source"]["title"], "Our FAQ", "{body}");
}

#[tokio::test]
async fn sources_html_all_keeps_everything_a_reader_sees() {
    let Some(pages) = manual("documents::sources_html_all_keeps_everything_a_reader_sees") else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| {
        s.sources.html = quarry::chunking::HtmlContent::All;
    }))
    .await;
    let world = google_world(&app).await;
    let faq = pages.iter().find(|p| p.ends_with("faq.html")).unwrap();
    let accepted = upload(&app, &world, faq).await;
    assert!(accepted["source"]["title"].is_null(), "{accepted}");
    let text = app
        .source_text(&world, accepted["source"]["id"].as_str().unwrap())
        .await;
    assert!(text.contains("Edit on GitHub"), "everything is kept: {text}");
    assert!(text.contains("Why is Enlighten called Enlighten?"));
    assert!(!text.contains('¶'), "permalink marks are never text");
}

#[tokio::test]
async fn a_page_nested_too_deep_for_the_tree_is_converted_whole() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    let world = google_world(&app).await;
    let depth = quarry::chunking::html::MAIN_CONTENT_MAX_DEPTH + 10;
    let page = format!(
        "<html><head><title>Deep</title></head><body><nav>Menu entry</nav>{}<p>The keeper climbs the tower.</p>{}</body></html>",
        "<div>".repeat(depth),
        "</div>".repeat(depth)
    );
    let (status, accepted) = app
        .post(
            &format!("/v1/worlds/{world}/sources"),
            json!({"filename": "deep.html", "text": page}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let text = app
        .source_text(&world, accepted["source"]["id"].as_str().unwrap())
        .await;
    assert!(
        text.contains("Menu entry") && text.contains("The keeper climbs the tower."),
        "{text}"
    );
    assert!(accepted["source"]["title"].is_null());
}

/// The Vim FAQ (vim-doc: plain text, 375 numbered questions under `SECTION n - …` titles):
/// the plain-text section rules find its questions, and open few sections anywhere else (the
/// closing `For more information, read` over its indented list is no title).
#[test]
fn a_plain_text_faq_is_cut_into_sections_at_its_questions() {
    use std::io::Read as _;
    let path = Path::new("/usr/share/doc/vim/FAQ.gz");
    if !installed(
        "a_plain_text_faq_is_cut_into_sections_at_its_questions",
        path,
        "vim-doc",
    ) {
        return;
    }
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let starts = quarry::chunking::section_starts(&text, quarry::domain::SourceFormat::Plain);
    // Where each line starts, in chars; which of them hold a question (`12.3. …` in the first
    // column, after the index).
    let mut lines = Vec::new();
    let mut at = 0u64;
    for line in text.split_inclusive('\n') {
        lines.push((at, line.trim_end()));
        at += line.chars().count() as u64;
    }
    let is_question = |line: &str| {
        let number: String = line.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        number.matches('.').count() == 2 && number.ends_with('.') && line[number.len()..].starts_with(' ')
    };
    let questions: Vec<u64> = lines
        .iter()
        .filter(|(_, l)| is_question(l))
        .map(|(at, _)| *at)
        .collect();
    assert!(questions.len() >= 370, "{}", questions.len());
    let found = questions.iter().filter(|at| starts.contains(at)).count();
    // A few questions are statements (`22.5. … stop here.`), which no rule takes for a heading.
    assert!(
        found * 100 >= questions.len() * 98,
        "{found} of {} questions open a section",
        questions.len()
    );
    // Elsewhere: the 37 section titles of the index (over their indented questions), and a
    // few more (52 in all): under one for every seven questions.
    let elsewhere = starts.len() - found;
    assert!(elsewhere * 7 < questions.len(), "few other starts: {elsewhere}");
}
