//! The `modes` part of the retrieval section: `POST /retrieve` p50 of each retrieval mode and
//! option on the 100k-chunk world, after a `PATCH {"hybrid": true}` has turned it hybrid (a
//! re-ingest that reuses every dense vector and adds BM25 terms, no provider call). The modes
//! take turns in rounds with the same queries, at concurrency 1, so that each sees the same
//! machine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{self, Load, Quarry, Result, Table, mean, quantile_ms};
use crate::text::Words;

/// Rounds in which the modes take turns.
const ROUNDS: usize = 4;

/// What is measured: a name and the settings added to `{"query", "top_k": 8}`.
fn configurations(filename: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("dense", json!({})),
        ("dense, expand neighbors", json!({"expand": "neighbors"})),
        ("dense, expand parent", json!({"expand": "parent"})),
        ("dense, filter 1 filename", json!({"filter": {"filenames": [filename]}})),
        ("dense, explain", json!({"explain": true})),
        ("dense, rerank 50 → 8 (fake)", json!({"rerank": {"candidates": 50}})),
        ("hybrid (fusion auto)", json!({"mode": "hybrid"})),
        ("hybrid, dbsf", json!({"mode": "hybrid", "fusion": {"method": "dbsf"}})),
        ("auto (corpus over threshold)", json!({"mode": "auto"})),
        (
            "full (forced, budget 2,048)",
            json!({"mode": "full", "max_context_tokens": 2048}),
        ),
    ]
}

/// One answer as the table needs it.
struct Answer {
    search: f64,
    verify: f64,
    rerank: f64,
    total: f64,
    used: String,
}

/// Turns the world hybrid (unless a reused `--data` world already is) and measures every
/// configuration; returns the table and notes to print.
pub async fn measure(
    quarry: &Quarry,
    world: &str,
    filename: &str,
    requests: usize,
    dense_only: bool,
) -> Result<(Table, Vec<String>)> {
    let mut notes = Vec::new();
    let current = quarry.get(&format!("/v1/worlds/{world}")).await?;
    let hybrid = current["hybrid"] == Value::Bool(true);
    if !hybrid && !dense_only {
        crate::progress("retrieval modes: PATCH {\"hybrid\": true} (re-ingest reusing the dense vectors)");
        let started = Instant::now();
        let (status, job) = quarry
            .call(
                reqwest::Method::PATCH,
                &format!("/v1/worlds/{world}"),
                Some(&json!({"hybrid": true})),
            )
            .await?;
        if status != 202 {
            return Err(format!("PATCH hybrid: HTTP {status}: {job}").into());
        }
        let job = job["id"].as_str().ok_or("no job id")?.to_owned();
        loop {
            let state = quarry.get(&format!("/v1/jobs/{job}")).await?;
            match state["status"].as_str() {
                Some("completed") => break,
                Some("failed" | "cancelled") => return Err(format!("the hybrid re-ingest ended: {state}").into()),
                _ if started.elapsed() > Duration::from_secs(1800) => {
                    return Err("the hybrid re-ingest did not finish within 30 minutes".into());
                }
                _ => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
        let done = started.elapsed();
        let settled = harness::settle(Duration::from_secs(3), Duration::from_secs(600)).await;
        notes.push(format!(
            "the world became hybrid in {:.0} s (re-ingest job, no provider call), index settled {:.0} s later",
            done.as_secs_f64(),
            settled.as_secs_f64()
        ));
    }

    let mut words = Words::new(77);
    let queries: Arc<Vec<String>> = Arc::new((0..requests).map(|_| words.query()).collect());
    let url = Arc::new(quarry.url(&format!("/v1/worlds/{world}/retrieve")));
    let mut configurations = configurations(filename);
    if dense_only && !hybrid {
        configurations.retain(|(_, settings)| settings["mode"] != "hybrid");
        notes.push("dense world (--dense-modes): no hybrid rows".to_owned());
    }
    let mut loads: Vec<Load<Answer>> = configurations.iter().map(|_| Load::empty()).collect();
    let per_round = requests.div_ceil(ROUNDS);
    crate::progress(format!(
        "retrieval modes: {} configurations × {requests} requests at concurrency 1",
        configurations.len()
    ));
    for round in 0..ROUNDS {
        let offset = round * per_round;
        let n = per_round.min(requests.saturating_sub(offset));
        for ((_, settings), load) in configurations.iter().zip(loads.iter_mut()) {
            let (url, client, queries) = (url.clone(), quarry.client.clone(), queries.clone());
            let settings = Arc::new(settings.clone());
            load.absorb(
                harness::run_load(1, n, move |i| {
                    let (url, client, queries, settings) =
                        (url.clone(), client.clone(), queries.clone(), settings.clone());
                    async move { retrieve(&client, &url, &queries[(i + offset) % queries.len()], &settings).await }
                })
                .await,
            );
        }
    }

    let mut table = Table::new(&[
        "configuration",
        "requests",
        "errors",
        "p50 ms",
        "p95 ms",
        "search ms",
        "verify ms",
        "rerank ms",
        "total ms",
        "mode_used",
    ]);
    for ((name, _), load) in configurations.iter().zip(&loads) {
        if let Some(err) = &load.first_error {
            notes.push(format!("{name}: {} errors; first: {err}", load.errors));
        }
        let a = &load.outputs;
        let mut used: Vec<&str> = a.iter().map(|a| a.used.as_str()).collect();
        used.sort_unstable();
        used.dedup();
        table.row(vec![
            (*name).to_owned(),
            (a.len() + load.errors).to_string(),
            load.errors.to_string(),
            format!("{:.2}", quantile_ms(&load.latencies, 0.50)),
            format!("{:.2}", quantile_ms(&load.latencies, 0.95)),
            format!("{:.2}", mean(a.iter().map(|a| a.search))),
            format!("{:.2}", mean(a.iter().map(|a| a.verify))),
            format!("{:.2}", mean(a.iter().map(|a| a.rerank))),
            format!("{:.2}", mean(a.iter().map(|a| a.total))),
            used.join(", "),
        ]);
    }
    Ok((table, notes))
}

async fn retrieve(
    client: &reqwest::Client,
    url: &str,
    query: &str,
    settings: &Value,
) -> std::result::Result<Answer, String> {
    let mut body = json!({"query": query, "top_k": 8});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), settings.as_object()) {
        body.extend(extra.clone());
    }
    let body = harness::post_json(client, url, harness::TOKEN, &body).await?;
    if let Some(warning) = body["warnings"].as_array().and_then(|w| {
        w.iter()
            .find(|w| w["code"] == "rerank_unavailable" || w["code"] == "filter_matched_nothing")
    }) {
        return Err(format!("warning {warning}"));
    }
    let t = &body["timing"];
    let f = |k: &str| t[k].as_f64().unwrap_or(f64::NAN);
    Ok(Answer {
        search: f("search_ms"),
        verify: f("verify_ms"),
        rerank: f("rerank_ms"),
        total: f("total_ms"),
        used: body["mode_used"].as_str().unwrap_or("?").to_owned(),
    })
}
