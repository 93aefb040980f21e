//! The web console (issue 42): its pages are served from the binary without a token, under a
//! strict Content-Security-Policy, each file with its content type; an unknown file is the
//! contract's JSON 404; and every file the page names exists. The pages' behaviour in a real
//! browser is `scripts/browser-test`'s.

use reqwest::StatusCode;
use reqwest::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH};

use crate::helpers::{TestApp, assert_error, read, spawn_app};

/// A client with no token and no redirects followed.
fn anonymous() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn fetch(app: &TestApp, path: &str) -> reqwest::Response {
    anonymous().get(app.url(path)).send().await.unwrap()
}

fn header(resp: &reqwest::Response, name: reqwest::header::HeaderName) -> &str {
    resp.headers()
        .get(&name)
        .unwrap_or_else(|| panic!("no {name} on {}", resp.url()))
        .to_str()
        .unwrap()
}

#[tokio::test]
async fn the_page_is_served_without_a_token_under_a_strict_policy() {
    let app = spawn_app().await;
    // `/console` leads to `/console/`, where the page's relative URLs resolve.
    let resp = fetch(&app, "/console").await;
    assert_eq!(resp.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(header(&resp, reqwest::header::LOCATION), "/console/");

    let resp = fetch(&app, "/console/").await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(header(&resp, CONTENT_TYPE), "text/html; charset=utf-8");
    let csp = header(&resp, CONTENT_SECURITY_POLICY).to_owned();
    for directive in [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{csp}");
    assert_eq!(header(&resp, CACHE_CONTROL), "no-cache");
    assert_eq!(header(&resp, reqwest::header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    let etag = header(&resp, ETAG).to_owned();
    let html = resp.text().await.unwrap();
    assert!(html.contains("<title>quarry console</title>"));
    // No inline script or style: the policy would block them.
    assert!(
        !html.contains("<style") && !html.contains("style="),
        "inline style in index.html"
    );
    for script in html.split("<script").skip(1) {
        assert!(
            script.trim_start().starts_with("type=\"module\" src="),
            "inline script: {script}"
        );
    }

    // A current copy is revalidated cheaply.
    let resp = anonymous()
        .get(app.url("/console/"))
        .header(IF_NONE_MATCH, &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(header(&resp, ETAG), etag);
}

#[tokio::test]
async fn each_file_has_its_content_type_and_the_policy() {
    let app = spawn_app().await;
    for name in quarry::api::console::asset_names() {
        let resp = fetch(&app, &format!("/console/{name}")).await;
        assert_eq!(resp.status(), StatusCode::OK, "{name}");
        let expected = match name.rsplit('.').next().unwrap() {
            "html" => "text/html; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            "js" => "text/javascript; charset=utf-8",
            "svg" => "image/svg+xml",
            other => panic!("a console file of an unexpected kind: {other}"),
        };
        assert_eq!(header(&resp, CONTENT_TYPE), expected, "{name}");
        assert_eq!(
            header(&resp, CONTENT_SECURITY_POLICY),
            quarry::api::console::CONTENT_SECURITY_POLICY
        );
        assert!(!resp.bytes().await.unwrap().is_empty(), "{name} is empty");
    }
}

#[tokio::test]
async fn an_unknown_file_is_a_json_404_and_nothing_outside_console_is_added() {
    let app = spawn_app().await;
    for path in ["/console/nope.js", "/console/..%2Fsrc%2Fmain.rs", "/console/a/b"] {
        let (status, body) = read(fetch(&app, path).await).await;
        assert_error(status, &body, StatusCode::NOT_FOUND, "not_found");
    }
    // A token is not needed, and not harmful either.
    let resp = app
        .client
        .get(app.url("/console/app.js"))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
}

/// Every file index.html and the modules name (`href="…"`, `src="…"`, `from "./…"`) is served,
/// and every served file is named somewhere: none missing, none dead.
#[tokio::test]
async fn every_file_the_page_names_exists() {
    let app = spawn_app().await;
    let named = regex::Regex::new(r##"(?:href|src)="([^"#:]+)"|from "\./([^"]+)""##).unwrap();
    let mut seen = std::collections::BTreeSet::from(["index.html".to_owned()]);
    let mut queue = vec!["index.html".to_owned()];
    while let Some(file) = queue.pop() {
        let resp = fetch(&app, &format!("/console/{file}")).await;
        assert_eq!(resp.status(), StatusCode::OK, "{file} is named but not served");
        let text = resp.text().await.unwrap();
        for capture in named.captures_iter(&text) {
            let name = capture.get(1).or(capture.get(2)).unwrap().as_str().to_owned();
            if seen.insert(name.clone()) {
                queue.push(name);
            }
        }
    }
    let served: std::collections::BTreeSet<String> = quarry::api::console::asset_names().map(str::to_owned).collect();
    assert_eq!(seen, served);
}
