//! Chaos: `kill -9` the real quarry binary again and again during a large ingestion, then check
//! through the API and the stores that nothing was lost or doubled.
//!
//! ```text
//! ./scripts/cargo build --release
//! ./scripts/cargo run --release --example chaos -- --kills 20
//! ./scripts/cargo run --release --example chaos -- --kills 20 --postgres postgres://postgres@127.0.0.1:5432/postgres
//! ```
//!
//! Per backend (SQLite always; PostgreSQL with `--postgres`, on a database created for the run
//! and dropped after), with embedded vectors: a fake OpenAI-compatible embedding server (fixed
//! latency, so the ingestion lasts), quarry started as a child process on a fresh data folder,
//! `--sources` uploads, then `--kills` rounds of: wait a random 0.3–2.5 s, `kill -9`, start
//! again, wait for `/readyz`. A kill is only made while chunks are still pending (the run says
//! how many it could make). Then quarry runs until every job has ended, is stopped with SIGTERM,
//! and the invariants are checked on the stores themselves:
//!
//! - every chunk's manifest entry is `embedded` (none pending, none failed) and every job ended
//!   `completed`;
//! - every embedded entry has its point, with a payload naming its chunk, and a kept vector;
//! - no point without an entry (no orphan), and as many points as chunks;
//! - the API's world stats agree.
//!
//! With `--outage-s 300` (and `--kills 0`) it is the outage check instead: the fake answers 30 %
//! of calls (`--outage-percent`) 503 "The model is overloaded" for five minutes, then recovers,
//! and every chunk must end embedded with no attempt spent (jobs `completed`, none failed).
//!
//! It prints, per backend, the kills made, the wall time, and the embedding calls and texts the
//! fake served against the chunks (texts embedded more than once: work lost to a kill in flight).
//! Exits non-zero when an invariant fails.

// The benchmark's fake server; chaos reads only some of its counters.
#[allow(dead_code)]
#[path = "bench/fake.rs"]
mod fake;
#[path = "bench/pgdb.rs"]
mod pgdb;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use quarry::domain::{ManifestState, RunId, WorldId};
use quarry::vector::{PointFilter, VectorRepo};
use serde_json::{Value, json};

type Result<T, E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

const HELP: &str = "\
usage: chaos [options]
  --kills N        kill -9s per backend (default 20)
  --sources N      sources uploaded (default 200)
  --sentences N    sentences per source, one chunk each (default 150)
  --latency-ms N   the fake provider's latency per call (default 150)
  --postgres URL   also run on PostgreSQL: a database is created on this server and dropped after
  --quarry PATH    the quarry binary (default target/release/quarry, or $CARGO_TARGET_DIR/release/quarry)
  --workers N      quarry's embedding workers (default 8)
  --outage-s S     the fake answers a share of calls 503 \"overloaded\" for S seconds from the first
  --outage-percent P   that share, in percent (default 30)
  --seed N         seed for the kill times (default: from the clock)
";

const TOKEN: &str = "chaos-token";

struct Options {
    kills: u32,
    sources: u32,
    sentences: u32,
    latency: Duration,
    postgres: Option<String>,
    quarry: PathBuf,
    seed: u64,
    workers: u32,
    outage: Option<Duration>,
    outage_percent: u32,
}

fn options() -> Result<Options> {
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let mut o = Options {
        kills: 20,
        sources: 200,
        sentences: 150,
        latency: Duration::from_millis(150),
        postgres: None,
        quarry: Path::new(&target).join("release/quarry"),
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos() as u64,
        workers: 8,
        outage: None,
        outage_percent: 30,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--kills" => o.kills = value()?.parse()?,
            "--sources" => o.sources = value()?.parse()?,
            "--sentences" => o.sentences = value()?.parse()?,
            "--latency-ms" => o.latency = Duration::from_millis(value()?.parse()?),
            "--postgres" => o.postgres = Some(value()?),
            "--quarry" => o.quarry = value()?.into(),
            "--seed" => o.seed = value()?.parse()?,
            "--workers" => o.workers = value()?.parse()?,
            "--outage-s" => o.outage = Some(Duration::from_secs_f64(value()?.parse()?)),
            "--outage-percent" => o.outage_percent = value()?.parse()?,
            "-h" | "--help" => {
                print!("{HELP}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other}\n{HELP}").into()),
        }
    }
    if !o.quarry.is_file() {
        return Err(format!(
            "no quarry binary at {} (build it: ./scripts/cargo build --release)",
            o.quarry.display()
        )
        .into());
    }
    Ok(o)
}

/// A small deterministic generator for the kill times (xorshift).
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One quarry process on one data folder and store.
struct Node {
    binary: PathBuf,
    config: PathBuf,
    addr: String,
    log: PathBuf,
    child: Option<Child>,
    client: reqwest::Client,
}

impl Node {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn start(&mut self) -> Result<Duration> {
        let started = Instant::now();
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        let child = Command::new(&self.binary)
            .arg("--config")
            .arg(&self.config)
            .arg("serve")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()?;
        self.child = Some(child);
        loop {
            if let Ok(resp) = self.client.get(self.url("/readyz")).send().await
                && resp.status().is_success()
            {
                return Ok(started.elapsed());
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                return Err(format!("quarry exited at startup ({status}); see {}", self.log.display()).into());
            }
            if started.elapsed() > Duration::from_secs(120) {
                return Err("quarry did not become ready in 120 s".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn kill9(&mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill()?; // SIGKILL
            child.wait()?;
        }
        Ok(())
    }

    fn terminate(&mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            Command::new("kill").arg("-TERM").arg(child.id().to_string()).status()?;
            child.wait()?;
        }
        Ok(())
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<(u16, Value)> {
        let mut req = self.client.request(method, self.url(path)).bearer_auth(TOKEN);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::String(text))))
    }

    async fn world(&self, id: &str) -> Result<Value> {
        let (status, world) = self
            .call(reqwest::Method::GET, &format!("/v1/worlds/{id}"), None)
            .await?;
        if status != 200 {
            return Err(format!("GET world: {status} {world}").into());
        }
        Ok(world)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.kill9();
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// What one backend's run came to.
struct Outcome {
    backend: &'static str,
    chunks: u64,
    kills: u32,
    restart_ms: Vec<f64>,
    wall: Duration,
    calls: u64,
    overloaded: u64,
    texts: u64,
    failures: Vec<String>,
}

async fn run(o: &Options, backend: &'static str, store_url: &str, rng: &mut Rng) -> Result<Outcome> {
    let dir = tempfile::tempdir()?;
    let fake = fake::Fake::start(fake::FakeConfig {
        keys: vec!["chaos-key".into()],
        quota: None,
        latency: o.latency,
        outage: o.outage.map(|length| (o.outage_percent, length)),
    })
    .await?;
    let port = free_port()?;
    let config = dir.path().join("quarry.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\naddr = \"127.0.0.1:{port}\"\n\n[auth]\ntokens = [\"{TOKEN}\"]\n\n\
             [store]\nurl = \"{store_url}\"\n\n[vectors]\npath = \"{}\"\n\n\
             [providers.openai]\nbase_url = \"{}\"\nkeys = [\"chaos-key\"]\nmax_batch_size = 16\n\n\
             [embedding]\nworkers = {}\n",
            dir.path().join("vectors").display(),
            fake.base_url(),
            o.workers
        ),
    )?;
    let mut node = Node {
        binary: o.quarry.clone(),
        config,
        addr: format!("127.0.0.1:{port}"),
        log: dir.path().join("quarry.log"),
        child: None,
        client: reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?,
    };
    node.start().await?;
    let started = Instant::now();
    let (status, world) = node
        .call(
            reqwest::Method::POST,
            "/v1/worlds",
            Some(json!({"name": "chaos", "embedding": {"provider": "openai", "model": "text-embedding-3-small", "dimensions": 64},
                        "chunking": {"max_tokens": 24, "overlap_tokens": 0}})),
        )
        .await?;
    if status != 201 {
        return Err(format!("create world: {status} {world}").into());
    }
    let world_id = world["id"].as_str().ok_or("no world id")?.to_owned();
    let mut jobs = Vec::new();
    for s in 0..o.sources {
        let text: String = (0..o.sentences)
            .map(|i| {
                format!(
                    "Source {s} line {i} records beacon {} on the northern cliff path. ",
                    i * 7 + s
                )
            })
            .collect();
        let (status, accepted) = node
            .call(
                reqwest::Method::POST,
                &format!("/v1/worlds/{world_id}/sources"),
                Some(json!({"filename": format!("s{s}.txt"), "text": text})),
            )
            .await?;
        if status != 202 {
            return Err(format!("upload: {status} {accepted}").into());
        }
        jobs.push(accepted["job"]["id"].as_str().ok_or("no job id")?.to_owned());
    }

    // The kills, each while chunks are still pending.
    let mut kills = 0;
    let mut restart_ms = Vec::new();
    while kills < o.kills {
        let wait = Duration::from_secs_f64(0.3 + 2.2 * rng.next_f64());
        tokio::time::sleep(wait).await;
        let pending = node.world(&world_id).await?["stats"]["pending"].as_u64().unwrap_or(0);
        if pending == 0 {
            break;
        }
        node.kill9()?;
        kills += 1;
        restart_ms.push(node.start().await?.as_secs_f64() * 1000.0);
        eprintln!("  {backend}: kill {kills}/{} with {pending} chunks pending", o.kills);
    }

    // Until every job has ended.
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let stats = node.world(&world_id).await?["stats"].clone();
        if stats["pending"].as_u64() == Some(0) {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("the ingestion did not finish in 15 minutes: {stats}").into());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let wall = started.elapsed();
    let mut failures = Vec::new();
    let world = node.world(&world_id).await?;
    let stats = &world["stats"];
    let chunks = stats["chunks"].as_u64().unwrap_or(0);
    if stats["embedded"].as_u64() != Some(chunks) || stats["failed"].as_u64() != Some(0) || chunks == 0 {
        failures.push(format!("API world stats: {stats}"));
    }
    // Jobs: every one completed (a finish step may lag a moment behind the last chunk).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut ended = HashMap::<String, u64>::new();
    for job in &jobs {
        let (_, j) = node
            .call(reqwest::Method::GET, &format!("/v1/jobs/{job}"), None)
            .await?;
        *ended.entry(j["status"].as_str().unwrap_or("?").to_owned()).or_default() += 1;
    }
    if ended.get("completed").copied() != Some(jobs.len() as u64) {
        failures.push(format!("job statuses: {ended:?}"));
    }
    node.terminate()?;

    // The stores themselves, with quarry stopped.
    let store = quarry::store::connect(store_url).await?;
    let world_id = WorldId(world_id.parse()?);
    let world = store.get_world(world_id).await?.ok_or("the world is gone")?;
    let run: RunId = world.active_run;
    let entries = store.manifest_entries(world_id, run, quarry::domain::now()).await?;
    let mut states = HashMap::<&'static str, u64>::new();
    for e in &entries {
        let state = match e.state {
            ManifestState::Embedded => "embedded",
            ManifestState::Pending => "pending",
            ManifestState::Failed => "failed",
        };
        *states.entry(state).or_default() += 1;
    }
    if entries.len() as u64 != chunks || states.get("embedded").copied() != Some(chunks) {
        failures.push(format!(
            "manifest: {} entries for {chunks} chunks, states {states:?}",
            entries.len()
        ));
    }
    let chunk_ids: Vec<_> = entries.iter().map(|e| e.chunk_id).collect();
    let mut kept = 0;
    for batch in chunk_ids.chunks(500) {
        kept += store.kept_points(world_id, run, batch).await?.len();
    }
    if kept as u64 != chunks {
        failures.push(format!("kept vectors: {kept} for {chunks} chunks"));
    }
    store.close().await;
    let vectors = quarry::vector::edge::EdgeRepo::open(&dir.path().join("vectors"))?;
    let by_point: HashMap<uuid::Uuid, &quarry::domain::ManifestEntry> =
        entries.iter().map(|e| (e.point_id, e)).collect();
    let mut seen = HashSet::new();
    let (mut orphans, mut wrong) = (0u64, 0u64);
    let mut offset = None;
    loop {
        let page = vectors
            .scroll(&world.collection, PointFilter::world(world_id), offset, 1000)
            .await?;
        for point in page.points {
            match by_point.get(&point.id) {
                None => orphans += 1,
                Some(entry) => {
                    let right = point.payload.as_ref().is_some_and(|p| {
                        p.run_id == run && p.source_id == entry.source_id && p.chunk_number == entry.chunk_number
                    });
                    wrong += u64::from(!right);
                    seen.insert(point.id);
                }
            }
        }
        match page.next {
            Some(next) => offset = Some(next),
            None => break,
        }
    }
    let missing = entries.iter().filter(|e| !seen.contains(&e.point_id)).count();
    if orphans > 0 || wrong > 0 || missing > 0 {
        failures.push(format!(
            "points: {orphans} orphan(s), {wrong} with a wrong payload, {missing} embedded entr(y/ies) without a point"
        ));
    }
    let stats = fake.stats();
    Ok(Outcome {
        backend,
        chunks,
        kills,
        restart_ms,
        wall,
        calls: stats.ok,
        overloaded: stats.overloaded,
        texts: stats.items,
        failures,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    match chaos().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("chaos: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn chaos() -> Result<bool> {
    let o = options()?;
    quarry::outbound::install_tls_provider();
    let mut rng = Rng(o.seed | 1);
    println!(
        "chaos: {} kills per backend, {} sources x {} sentences, {} workers, fake latency {} ms{}, seed {}",
        o.kills,
        o.sources,
        o.sentences,
        o.workers,
        o.latency.as_millis(),
        o.outage
            .map(|l| format!(", {} % of calls 503 for {} s", o.outage_percent, l.as_secs()))
            .unwrap_or_default(),
        o.seed
    );
    let mut outcomes = Vec::new();
    let sqlite_dir = tempfile::tempdir()?;
    let sqlite = format!("sqlite://{}", sqlite_dir.path().join("quarry.db").display());
    outcomes.push(run(&o, "sqlite", &sqlite, &mut rng).await?);
    if let Some(admin) = &o.postgres {
        let (url, name) = pgdb::create(admin, "quarry_chaos").await?;
        let outcome = run(&o, "postgres", &url, &mut rng).await;
        pgdb::drop(admin, &name).await?;
        outcomes.push(outcome?);
    }
    println!();
    println!(
        "| backend | chunks | kills | restart ms (median / max) | wall s | embed calls | 503s | texts embedded | extra texts | invariants |"
    );
    println!("| :-- | --: | --: | --: | --: | --: | --: | --: | --: | :-- |");
    let mut ok = true;
    for out in &outcomes {
        let mut restarts = out.restart_ms.clone();
        restarts.sort_by(f64::total_cmp);
        let median = restarts.get(restarts.len() / 2).copied().unwrap_or(0.0);
        let max = restarts.last().copied().unwrap_or(0.0);
        let verdict = if out.failures.is_empty() {
            "all hold".to_owned()
        } else {
            out.failures.join("; ")
        };
        ok &= out.failures.is_empty();
        println!(
            "| {} | {} | {} | {:.0} / {:.0} | {:.1} | {} | {} | {} | {} | {} |",
            out.backend,
            out.chunks,
            out.kills,
            median,
            max,
            out.wall.as_secs_f64(),
            out.calls,
            out.overloaded,
            out.texts,
            out.texts.saturating_sub(out.chunks),
            verdict
        );
    }
    Ok(ok)
}
