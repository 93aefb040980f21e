//! Replicas sharing one quota: 1, 2 and 3 quarry replicas in this process on one PostgreSQL
//! database and one shared vector store, ingesting through the benchmark's fake OpenAI server
//! with a per-key quota of R requests per fixed window W, quarry told the quota. For each count,
//! once with budgets shared through the store (what quarry does on PostgreSQL) and once with
//! each replica keeping its own (`cluster.shared_budgets = false`, how every replica paced
//! itself before): efficiency against the quota bound and the 429s the fake answered. Then the
//! cost of the shared budget's store round trip: a draw's latency, on PostgreSQL and SQLite.
//!
//! ```text
//! cargo +nightly run --release --example bench_replicas
//! cargo +nightly run --release --example bench_replicas -- --replicas 1,3 --chunks 4000
//! ```
//! PostgreSQL: `QUARRY_BENCH_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`);
//! a database is created per run and dropped after.

#[path = "bench/fake.rs"]
mod fake;
#[allow(dead_code)]
#[path = "bench/harness.rs"]
mod harness;
#[path = "bench/pgdb.rs"]
mod pgdb;
#[allow(dead_code)]
#[path = "bench/text.rs"]
mod text;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quarry::domain::{BudgetDraw, BudgetLimit, WindowRule};
use quarry::store::Store;
use secrecy::SecretString;

use fake::{Fake, FakeConfig};
use harness::{Quarry, Result, Table, num};
use text::Words;

const HELP: &str = "\
usage: bench_replicas [options]
  --replicas LIST   replica counts (default 1,2,3)
  --keys K          provider keys (default 2)
  --quota R         requests per window per key (default 5)
  --window-ms W     quota window in ms (default 1000)
  --latency-ms L    fake provider latency per request (default 20)
  --chunks N        one-sentence chunks per run (default 3000)
  --draws D         budget draws timed per store (default 2000)
";

struct Options {
    replicas: Vec<usize>,
    keys: usize,
    quota: u32,
    window_ms: u64,
    latency_ms: u64,
    chunks: usize,
    draws: usize,
}

fn options() -> std::result::Result<Options, String> {
    let mut o = Options {
        replicas: vec![1, 2, 3],
        keys: 2,
        quota: 5,
        window_ms: 1000,
        latency_ms: 20,
        chunks: 3000,
        draws: 2000,
    };
    for (flag, value) in harness::flag_pairs(HELP)? {
        let one = |v: &str| harness::whole(&flag, v);
        match flag.as_str() {
            "--replicas" => {
                o.replicas = value
                    .split(',')
                    .map(|v| one(v).map(|n| n as usize))
                    .collect::<std::result::Result<_, _>>()?;
            }
            "--keys" => o.keys = one(&value)? as usize,
            "--quota" => o.quota = one(&value)? as u32,
            "--window-ms" => o.window_ms = one(&value)?,
            "--latency-ms" => o.latency_ms = one(&value)?,
            "--chunks" => o.chunks = one(&value)? as usize,
            "--draws" => o.draws = one(&value)? as usize,
            _ => return Err(format!("unknown option {flag}\n{HELP}")),
        }
    }
    if o.replicas.contains(&0) || o.keys == 0 || o.quota == 0 || o.window_ms == 0 || o.chunks == 0 {
        return Err("--replicas, --keys, --quota, --window-ms and --chunks must be positive".into());
    }
    Ok(o)
}

fn progress(message: impl AsRef<str>) {
    eprintln!("[bench_replicas] {}", message.as_ref());
}

#[tokio::main]
async fn main() -> ExitCode {
    let o = match options() {
        Ok(o) => o,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match run(&o).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench_replicas failed: {err}");
            ExitCode::FAILURE
        }
    }
}

struct Row {
    replicas: usize,
    shared: bool,
    seconds: f64,
    embedded: u64,
    stats: fake::Stats,
    /// Successful requests per replica.
    per_replica: Vec<u64>,
}

async fn run(o: &Options) -> Result<()> {
    let admin = std::env::var("QUARRY_BENCH_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let mut rows = Vec::new();
    for &n in &o.replicas {
        for shared in [true, false] {
            progress(format!(
                "{n} replica(s), budgets {}",
                if shared { "shared" } else { "per replica" }
            ));
            let (url, name) = pgdb::create(&admin, "quarry_bench_replicas").await?;
            let row = ingest(o, &url, n, shared).await;
            pgdb::drop(&admin, &name).await?;
            rows.push(row?);
        }
    }
    let window = Duration::from_millis(o.window_ms);
    println!();
    println!(
        "## Replicas on one quota (K = {} keys, R = {} requests per {} ms per key, latency {} ms, {} one-sentence \
         chunks, embedding.workers = 8 per replica, quota told: requests_per_minute = {})",
        o.keys,
        o.quota,
        o.window_ms,
        o.latency_ms,
        o.chunks,
        rpm(o)
    );
    println!();
    let mut table = Table::new(&[
        "replicas",
        "budgets",
        "seconds",
        "chunks/s",
        "requests ok",
        "mean batch",
        "per replica",
        "efficiency",
        "429s",
        "429 share",
    ]);
    for r in &rows {
        let granted = o.keys as f64 * f64::from(o.quota) * r.stats.windows.saturating_sub(1) as f64
            + r.stats.last_window_ok as f64;
        table.row(vec![
            r.replicas.to_string(),
            if r.shared { "shared" } else { "per replica" }.into(),
            format!("{:.1}", r.seconds),
            num(r.embedded as f64 / r.seconds, 1),
            num(r.stats.ok as f64, 0),
            format!("{:.1}", r.stats.mean_batch()),
            r.per_replica.iter().map(u64::to_string).collect::<Vec<_>>().join(" / "),
            format!("{:.1} %", 100.0 * r.stats.ok as f64 / granted.max(1.0)),
            num(r.stats.rate_limited as f64, 0),
            format!(
                "{:.1} %",
                100.0 * r.stats.rate_limited as f64 / r.stats.requests.max(1) as f64
            ),
        ]);
    }
    table.print();
    println!();
    println!(
        "efficiency = successful requests ÷ the requests the quota granted while there was work (K × R for every \
         fixed window of {} ms from the first request's to the one before the last, plus what the last admitted). \
         per replica: successful requests each replica sent (its GET /v1/providers). 429 share: of every request \
         the fake answered.",
        window.as_millis()
    );
    draw_latency(o, &admin).await
}

fn rpm(o: &Options) -> u32 {
    ((u64::from(o.quota) * 60_000) / o.window_ms).max(1) as u32
}

async fn ingest(o: &Options, url: &str, n: usize, shared: bool) -> Result<Row> {
    let keys: Vec<String> = (0..o.keys).map(|i| format!("sk-bench-{i}")).collect();
    let fake = Fake::start(FakeConfig {
        outage: None,
        keys: keys.clone(),
        quota: Some((o.quota, Duration::from_millis(o.window_ms))),
        latency: Duration::from_millis(o.latency_ms),
    })
    .await?;
    let dir = tempfile::tempdir()?;
    let vectors: Arc<dyn quarry::vector::VectorRepo> =
        Arc::new(quarry::vector::edge::EdgeRepo::open(&dir.path().join("vectors"))?);
    let mut replicas = Vec::with_capacity(n);
    for _ in 0..n {
        let url = url.to_owned();
        let rpm = rpm(o);
        replicas.push(
            Quarry::start_sharing(vectors.clone(), &fake.base_url(), &keys, move |s| {
                s.store.url = SecretString::from(url);
                s.providers.openai.scheduling.requests_per_minute = Some(rpm);
                s.cluster.shared_budgets = Some(shared);
            })
            .await?,
        );
    }
    let first = &replicas[0];
    let world = first.create_world("replicas", 256, 32, 0).await?;
    let world_id = world["id"].as_str().ok_or("world without id")?.to_owned();
    let text = Words::new(7).corpus(o.chunks);
    let job = first.add_source(&world_id, "replicas.md", &text).await?;
    let accepted = Instant::now();
    let deadline = accepted + Duration::from_secs(900);
    let done = loop {
        let job = replicas[n - 1].get(&format!("/v1/jobs/{job}")).await?;
        if matches!(job["status"].as_str(), Some("completed" | "failed" | "cancelled")) {
            break job;
        }
        if Instant::now() > deadline {
            return Err(format!("the job did not finish within 15 minutes: {job}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let seconds = accepted.elapsed().as_secs_f64();
    let mut per_replica = Vec::with_capacity(n);
    for replica in &replicas {
        let providers = replica.get("/v1/providers").await?;
        let sent: u64 = providers["providers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["provider"] == "openai")
            .flat_map(|p| p["keys"].as_array().into_iter().flatten())
            .map(|k| k["requests"].as_u64().unwrap_or(0) - k["rate_limited"].as_u64().unwrap_or(0))
            .sum();
        per_replica.push(sent);
    }
    let stats = fake.stats();
    progress(format!(
        "  {} chunks in {seconds:.1} s, {} requests ok, {} 429s, {} refused otherwise",
        done["counts"]["embedded"], stats.ok, stats.rate_limited, stats.rejected
    ));
    for replica in replicas {
        replica.stop().await?;
    }
    vectors.close().await?;
    Ok(Row {
        replicas: n,
        shared,
        seconds,
        embedded: done["counts"]["embedded"].as_u64().unwrap_or(0),
        stats,
        per_replica,
    })
}

/// How long one draw from a shared budget takes: what a replica adds to each provider request
/// when budgets are shared.
async fn draw_latency(o: &Options, admin: &str) -> Result<()> {
    let (url, name) = pgdb::create(admin, "quarry_bench_draws").await?;
    let dir = tempfile::tempdir()?;
    let sqlite = format!("sqlite://{}", dir.path().join("draws.db").display());
    let mut table = Table::new(&["store", "draws", "p50 ms", "p99 ms", "max ms"]);
    for (kind, url) in [("PostgreSQL", url.as_str()), ("SQLite", sqlite.as_str())] {
        let store = quarry::store::connect(url).await?;
        let mut took = time_draws(store.as_ref(), o.draws).await?;
        took.sort();
        table.row(vec![
            kind.into(),
            o.draws.to_string(),
            format!("{:.3}", harness::quantile_ms(&took, 0.5)),
            format!("{:.3}", harness::quantile_ms(&took, 0.99)),
            format!("{:.3}", took.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0)),
        ]);
        store.close().await;
    }
    pgdb::drop(admin, &name).await?;
    println!();
    println!("## A draw from a shared budget (the store round trip added to each provider request)");
    println!();
    table.print();
    println!();
    println!(
        "One budget drawn one unit at a time by one client, a few dozen draws in its window: a draw locks the \
         budget's row, reads the clock and the window, drops what left it and records itself, in one transaction."
    );
    Ok(())
}

async fn time_draws(store: &dyn Store, n: usize) -> Result<Vec<Duration>> {
    let draw = BudgetDraw {
        budget: "bench/rpm".into(),
        amount: 1.0,
        // Never refused, so every draw does the whole work; a short span keeps a few dozen
        // draws in the window, as a busy budget holds.
        limit: BudgetLimit::Window(WindowRule {
            capacity: 1e12,
            span_s: 0.02,
        }),
        overdraft: 0.0,
    };
    let mut took = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        store.draw_budget(&draw).await?;
        took.push(started.elapsed());
    }
    Ok(took)
}
