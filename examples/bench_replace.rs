//! Editing one paragraph of a large source: how many texts go to the provider and how long until
//! every retrieval sees the new version, beside the bound the provider's quota puts on it. The
//! source (N one-sentence chunks) is uploaded under a key through the benchmark's fake OpenAI
//! server (one key, R requests per window W, quarry told the quota), then one paragraph of it is
//! rewritten and sent again to the same key (`PUT …/sources/by-key`): once as quarry does it
//! (unchanged chunks reuse their vectors), once with `embedding.reuse = "off"` (every chunk
//! embedded again, as a re-upload without reuse would).
//!
//! ```text
//! cargo +nightly run --release --example bench_replace
//! cargo +nightly run --release --example bench_replace -- --chunks 5000 --edit 5
//! ```

#[allow(dead_code)]
#[path = "bench/fake.rs"]
mod fake;
#[allow(dead_code)]
#[path = "bench/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "bench/text.rs"]
mod text;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use fake::{Fake, FakeConfig};
use harness::{Quarry, Result, Table, num};
use text::Words;

const HELP: &str = "\
usage: bench_replace [options]
  --chunks N        one-sentence chunks in the source (default 1000)
  --edit E          sentences of the paragraph rewritten (default 3)
  --quota R         requests per window for the one key (default 5)
  --window-ms W     quota window in ms (default 1000)
  --latency-ms L    fake provider latency per request (default 100)
";

struct Options {
    chunks: usize,
    edit: usize,
    quota: u32,
    window_ms: u64,
    latency_ms: u64,
}

fn options() -> Result<Options> {
    let mut o = Options {
        chunks: 1000,
        edit: 3,
        quota: 5,
        window_ms: 1000,
        latency_ms: 100,
    };
    for (flag, value) in harness::flag_pairs(HELP)? {
        let n = harness::whole(&flag, &value)?;
        match flag.as_str() {
            "--chunks" => o.chunks = n as usize,
            "--edit" => o.edit = n as usize,
            "--quota" => o.quota = n as u32,
            "--window-ms" => o.window_ms = n,
            "--latency-ms" => o.latency_ms = n,
            _ => return Err(format!("unknown option {flag}\n{HELP}").into()),
        }
    }
    if o.chunks == 0 || o.edit == 0 || o.edit > o.chunks || o.quota == 0 || o.window_ms == 0 {
        return Err(
            format!("--chunks, --edit, --quota and --window-ms must be positive, --edit ≤ --chunks\n{HELP}").into(),
        );
    }
    Ok(o)
}

/// One write of the source and what it cost.
struct Write {
    texts: u64,
    requests: u64,
    seconds: f64,
    reused: u64,
    /// Requests the fake refused for quota.
    refused: u64,
}

impl Write {
    /// The least time the quota allows for this write's requests: whole windows for all but
    /// the last window's worth (fixed windows, starting fresh).
    fn bound(&self, o: &Options) -> f64 {
        let windows = self.requests.div_ceil(u64::from(o.quota));
        windows.saturating_sub(1) as f64 * o.window_ms as f64 / 1000.0
    }
}

/// PUTs `text` to the key and waits until the source serves `version`.
async fn write(quarry: &Quarry, fake: &Fake, world: &str, text: &str, version: u64) -> Result<Write> {
    let path = format!("/v1/worlds/{world}/sources/by-key?key=handbook.md");
    let before = fake.stats();
    let started = Instant::now();
    let response = quarry
        .client
        .put(quarry.url(&path))
        .bearer_auth(harness::TOKEN)
        .json(&json!({"filename": "handbook.md", "text": text, "content_type": "text/markdown"}))
        .send()
        .await?;
    let status = response.status().as_u16();
    let accepted: Value = response.json().await?;
    if status != 202 {
        return Err(format!("PUT {path}: HTTP {status}: {accepted}").into());
    }
    let job = accepted["job"]["id"].as_str().ok_or("no job")?.to_owned();
    let deadline = started + Duration::from_secs(1800);
    let job_path = format!("/v1/jobs/{job}");
    loop {
        // Served: the version is in place and its job has ended (a new source serves as its
        // chunks are embedded; a new version all at once, when the last one is).
        let source = quarry.get(&path).await?;
        let ended = matches!(
            quarry.get(&job_path).await?["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        );
        if ended && source["version"].as_u64() == Some(version) && source["pending_version"].is_null() {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("version {version} not served within 30 minutes: {source}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let job = quarry.get(&job_path).await?;
    let after = fake.stats();
    Ok(Write {
        texts: after.items - before.items,
        requests: after.ok - before.ok,
        seconds,
        reused: job["counts"]["reused"].as_u64().unwrap_or(0),
        refused: after.rate_limited - before.rate_limited,
    })
}

async fn run(o: &Options, reuse: bool) -> Result<(Write, Write)> {
    let keys = vec!["sk-bench-0".to_owned()];
    let fake = Fake::start(FakeConfig {
        outage: None,
        keys: keys.clone(),
        quota: Some((o.quota, Duration::from_millis(o.window_ms))),
        latency: Duration::from_millis(o.latency_ms),
    })
    .await?;
    let rpm = ((u64::from(o.quota) * 60_000) / o.window_ms).max(1) as u32;
    let quarry = Quarry::start(&fake.base_url(), &keys, move |s| {
        s.providers.openai.scheduling.requests_per_minute = Some(rpm);
        if !reuse {
            s.embedding.reuse = quarry::config::ReuseScope::Off;
        }
    })
    .await?;
    let world = quarry.create_world("handbook", 256, 32, 0).await?;
    let world = world["id"].as_str().ok_or("world without id")?.to_owned();
    let mut words = Words::new(11);
    let mut sentences: Vec<String> = (0..o.chunks).map(|_| words.sentence()).collect();
    let first = write(&quarry, &fake, &world, &sentences.join("\n\n"), 1).await?;
    let middle = o.chunks / 2;
    let mut other = Words::new(12);
    for sentence in &mut sentences[middle..middle + o.edit] {
        *sentence = other.sentence();
    }
    let edit = write(&quarry, &fake, &world, &sentences.join("\n\n"), 2).await?;
    quarry.stop().await?;
    Ok((first, edit))
}

async fn bench(o: &Options) -> Result<()> {
    println!("{}", harness::machine());
    println!(
        "## Editing one paragraph ({} one-sentence chunks, {} of them rewritten; one key, R = {} requests per {} ms, \
         latency {} ms, quarry told the quota)\n",
        o.chunks, o.edit, o.quota, o.window_ms, o.latency_ms
    );
    let mut table = Table::new(&[
        "write",
        "embedding.reuse",
        "provider texts",
        "requests",
        "429s",
        "reused",
        "s until served",
        "quota bound s",
    ]);
    for reuse in [true, false] {
        let (first, edit) = run(o, reuse).await?;
        let scope = if reuse { "world" } else { "off" };
        for (name, w) in [("upload", &first), ("edit", &edit)] {
            table.row(vec![
                name.to_owned(),
                scope.to_owned(),
                w.texts.to_string(),
                w.requests.to_string(),
                w.refused.to_string(),
                w.reused.to_string(),
                num(w.seconds, 2),
                num(w.bound(o), 1),
            ]);
        }
    }
    table.print();
    println!(
        "\ns until served: from the PUT until the job has ended and GET …/by-key shows the version with no pending \
         one (for the edit: every retrieval sees it). quota bound: the least time R requests per window allow for \
         those requests."
    );
    Ok(())
}

fn main() -> ExitCode {
    let o = match options() {
        Ok(o) => o,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("bench_replace: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bench(&o)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench_replace: {err}");
            ExitCode::FAILURE
        }
    }
}
