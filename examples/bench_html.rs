//! What an HTML page costs at the bounds quarry puts on main-content extraction
//! (`quarry::chunking::html::main_content`: at most `MAIN_CONTENT_MAX_BYTES` bytes,
//! `MAIN_CONTENT_MAX_ELEMENTS` elements and `MAIN_CONTENT_MAX_DEPTH` levels; past them the page
//! is converted whole instead). The readability pass cannot be stopped midway, so its worst
//! case within the bounds is what an abandoned upload can still cost before `stop` is asked
//! again: this example measures it, beside the plain conversion of the same page.
//!
//! ```text
//! cargo run --release --example bench_html
//! ```
//!
//! Pages, each built here (nothing is read from disk): flat paragraphs up to the element bound,
//! nesting at the depth bound repeated up to the element bound, a page of links (the scoring
//! weighs link density), a table-heavy page, and each of those cut to the byte bound.

use std::time::Instant;

use quarry::chunking::html::{
    MAIN_CONTENT_MAX_BYTES, MAIN_CONTENT_MAX_DEPTH, MAIN_CONTENT_MAX_ELEMENTS, main_content, to_text,
};

/// A page of `body` wrapped in a document with a title and a navigation bar.
fn page(body: &str) -> String {
    format!(
        "<!doctype html><html><head><title>Bench</title></head><body>\
         <nav><a href=\"/\">Home</a> <a href=\"/docs\">Docs</a></nav><main>{body}</main>\
         <footer>Footer</footer></body></html>"
    )
}

/// `unit` repeated while the page keeps within the element and byte bounds (`elements` per
/// unit).
fn repeated(unit: &str, elements: usize) -> String {
    let by_elements = (MAIN_CONTENT_MAX_ELEMENTS - 16) / elements;
    let by_bytes = (MAIN_CONTENT_MAX_BYTES - 512) / unit.len();
    unit.repeat(by_elements.min(by_bytes))
}

fn main() {
    let words = "Quarry keeps worlds of documents and answers questions from them with citations.";
    let deep_unit = format!(
        "{}<p>{words}</p>{}",
        "<div>".repeat(MAIN_CONTENT_MAX_DEPTH - 8),
        "</div>".repeat(MAIN_CONTENT_MAX_DEPTH - 8)
    );
    let cases: Vec<(&str, String)> = vec![
        ("flat paragraphs", page(&repeated(&format!("<p>{words}</p>"), 1))),
        (
            "nested to the depth bound",
            page(&repeated(&deep_unit, MAIN_CONTENT_MAX_DEPTH - 7)),
        ),
        (
            "links",
            page(&repeated(
                "<p><a href=\"/a\">a link</a> and <a href=\"/b\">another</a></p>",
                3,
            )),
        ),
        (
            "tables",
            page(&repeated(
                &format!("<table><tr><td>{words}</td><td>2</td></tr></table>"),
                5,
            )),
        ),
    ];
    println!("# main-content extraction at its bounds");
    println!();
    println!(
        "bounds: {} bytes, {} elements, depth {}",
        MAIN_CONTENT_MAX_BYTES, MAIN_CONTENT_MAX_ELEMENTS, MAIN_CONTENT_MAX_DEPTH
    );
    println!();
    println!("| page | bytes | main content (s) | kept | plain conversion (s) |");
    println!("| :--- | ----: | ---------------: | :--- | -------------------: |");
    for (name, html) in &cases {
        let started = Instant::now();
        let main = main_content(html, &|| false).unwrap_or(None);
        let main_seconds = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let text = to_text(html);
        let plain_seconds = started.elapsed().as_secs_f64();
        let kept = match &main {
            Some(m) => format!("main content, {} bytes", m.html.len()),
            None => format!("whole page ({} bytes of text)", text.len()),
        };
        println!(
            "| {name} | {} | {main_seconds:.2} | {kept} | {plain_seconds:.2} |",
            html.len()
        );
    }
}
