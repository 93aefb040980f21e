//! The web console (issue 42): hand-written HTML, CSS and JavaScript modules from `console/`,
//! embedded in the binary at compile time and served under `/console/` — nothing is fetched
//! from another origin, and there is no build step.
//!
//! The pages need no token: they are the same for everyone and hold no data. The user pastes a
//! bearer token into the page, which keeps it for the tab (`sessionStorage`) and sends it with
//! every `/v1` call, so the API's own checks decide what the console may see and do. Every
//! answer here carries a strict Content-Security-Policy (scripts, styles and connections from
//! this origin only, no inline code, no framing). The console is not API: its routes stay out
//! of the OpenAPI document and out of the scope table.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use super::error::{ApiError, ErrorCode};

/// What every console response may load: its own scripts, styles and images, API calls to its
/// own origin, nothing inline, no plugins, and it is never framed (clickjacking).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// One embedded file: its name under `/console/`, its content type and its bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! assets {
    ($($name:literal => $content_type:literal),+ $(,)?) => {
        &[$(Asset {
            name: $name,
            content_type: $content_type,
            bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/console/", $name)),
        }),+]
    };
}

/// Every file of the console; `index.html` is also `/console/`.
const ASSETS: &[Asset] = assets! {
    "index.html" => "text/html; charset=utf-8",
    "console.css" => "text/css; charset=utf-8",
    "app.js" => "text/javascript; charset=utf-8",
    "api.js" => "text/javascript; charset=utf-8",
    "dom.js" => "text/javascript; charset=utf-8",
    "worlds.js" => "text/javascript; charset=utf-8",
    "world.js" => "text/javascript; charset=utf-8",
    "playground.js" => "text/javascript; charset=utf-8",
    "source.js" => "text/javascript; charset=utf-8",
    "operations.js" => "text/javascript; charset=utf-8",
    "evals.js" => "text/javascript; charset=utf-8",
    "favicon.svg" => "image/svg+xml",
};

/// The names of the embedded files (for tests and docs).
pub fn asset_names() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|asset| asset.name)
}

pub fn router() -> Router {
    Router::new()
        // Relative asset URLs in the page resolve under `/console/` only with the slash.
        .route("/console", get(|| async { Redirect::permanent("/console/") }))
        .route(
            "/console/",
            get(|headers: HeaderMap| async move { serve("index.html", &headers) }),
        )
        .route(
            "/console/{asset}",
            get(|Path(name): Path<String>, headers: HeaderMap| async move { serve(&name, &headers) }),
        )
}

/// The asset `name` with the console's headers; `304` when the client's copy is current, a JSON
/// `404` for a name that is not a console file.
fn serve(name: &str, headers: &HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|asset| asset.name == name) else {
        return ApiError::new(ErrorCode::NotFound, format!("the console has no file `{name}`")).into_response();
    };
    // The files change only with the binary: revalidate each time, cheaply, by content hash.
    let etag = format!("\"{}\"", hex::encode(&Sha256::digest(asset.bytes)[..12]));
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|tag| tag.trim() == etag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, asset.content_type)], asset.bytes).into_response()
    };
    let set = response.headers_mut();
    set.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    set.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    set.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    set.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    set.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        set.insert(header::ETAG, etag);
    }
    response
}
