//! What checking a managed API token costs a request, with 10,000 tokens stored: `GET
//! /v1/models` (answered from memory, so the check is most of the work) bearing a bootstrap
//! token (`auth.tokens`, a digest comparison) against one bearing a managed token, in
//! alternating batches, one request at a time; and the check itself, from the cache (a secret
//! verified in the last 5 seconds) and from the store (the first request after that).
//!
//! ```text
//! cargo run --release --example bench_tokens
//! ```

#[allow(dead_code)]
#[path = "bench/harness.rs"]
mod harness;

use std::time::{Duration, Instant};

use quarry::domain::Scope;
use quarry::service::tokens::{NewToken, Principal, TokenService};

use harness::{Quarry, Result, Table, quantile_ms};

const TOKENS: usize = 10_000;
const ROUNDS: usize = 20;
const BATCH: usize = 100;

#[tokio::main]
async fn main() -> Result<()> {
    let quarry = Quarry::start("http://127.0.0.1:9/v1", &[], |_| {}).await?;
    let started = Instant::now();
    let mut chosen = String::new();
    for n in 0..TOKENS {
        let new = NewToken {
            name: format!("client {n}"),
            scopes: vec![Scope::Read],
            worlds: None,
            expires_at: None,
            rate_per_minute: None,
        };
        let (_, secret) = quarry.state.tokens.create(&Principal::Bootstrap, new).await?;
        if n == TOKENS / 2 {
            chosen = secret;
        }
    }
    println!("# token checks with {TOKENS} tokens stored");
    println!();
    println!("machine: {}", harness::machine());
    println!("made {TOKENS} tokens in {:.1} s", started.elapsed().as_secs_f64());

    let url = quarry.url("/v1/models");
    let timed = |token: String| {
        let request = quarry.client.get(&url).bearer_auth(token);
        async move {
            let at = Instant::now();
            let response = request.send().await?;
            let status = response.status();
            response.bytes().await?;
            if !status.is_success() {
                return Err(format!("GET /v1/models answered {status}").into());
            }
            Ok::<Duration, Box<dyn std::error::Error + Send + Sync>>(at.elapsed())
        }
    };
    let (mut bootstrap, mut managed) = (Vec::new(), Vec::new());
    for _ in 0..BATCH {
        timed(harness::TOKEN.to_owned()).await?;
        timed(chosen.clone()).await?;
    }
    for _ in 0..ROUNDS {
        for _ in 0..BATCH {
            bootstrap.push(timed(harness::TOKEN.to_owned()).await?);
        }
        for _ in 0..BATCH {
            managed.push(timed(chosen.clone()).await?);
        }
    }
    bootstrap.sort_unstable();
    managed.sort_unstable();

    // The check alone: cached, and read from the store (a fresh service each time).
    let mut cached = Vec::new();
    let mut read = Vec::new();
    for _ in 0..500 {
        let at = Instant::now();
        quarry.state.tokens.verify(&chosen).await?;
        cached.push(at.elapsed());
        let fresh = TokenService::new(&quarry.deps);
        let at = Instant::now();
        fresh.verify(&chosen).await?;
        read.push(at.elapsed());
    }
    cached.sort_unstable();
    read.sort_unstable();

    println!();
    let mut table = Table::new(&["what", "p50 (µs)", "p95 (µs)"]);
    let micros = |sorted: &[Duration], q: f64| format!("{:.0}", quantile_ms(sorted, q) * 1000.0);
    for (name, sorted) in [
        ("GET /v1/models, bootstrap token", &bootstrap),
        ("GET /v1/models, managed token", &managed),
        ("the check, cached", &cached),
        ("the check, read from the store", &read),
    ] {
        table.row(vec![name.to_owned(), micros(sorted, 0.5), micros(sorted, 0.95)]);
    }
    table.print();
    println!();
    println!(
        "a managed token adds {:.0} µs at p50 to the request",
        (quantile_ms(&managed, 0.5) - quantile_ms(&bootstrap, 0.5)) * 1000.0
    );
    quarry.stop().await?;
    Ok(())
}
