//! quarry at a million chunks (issue 25, point 5): the embedded vector store alone, quarry's
//! retrieval over HTTP, and the relational store, each at `--chunks` chunks (default
//! 1,000,000). Like `bench`, it runs everything in-process against its own fake OpenAI
//! embeddings server (`bench/fake.rs`: vectors computed from the words of the text, no network)
//! and prints one plain table per measurement; progress goes to stderr.
//!
//! ```text
//! ./scripts/cargo run --release --example bench_scale                       # everything, at 1,000,000 chunks
//! ./scripts/cargo run --release --example bench_scale -- --only vectors --layouts float32,int8,int8-disk
//! ./scripts/cargo run --release --example bench_scale -- --only retrieve --store postgres
//! ./scripts/cargo run --example bench_scale -- --chunks 20000              # a smoke run (debug build)
//! ./scripts/cargo run --release --example bench_scale -- --help
//! ```
//!
//! # The chunks
//!
//! Every chunk is one generated sentence of 16–20 words and a year (18–26 cl100k tokens, so a
//! world chunked at 32 tokens makes each sentence one chunk), addressed by world and number and
//! computed from them alone (`bench_scale/corpus.rs`). The words are those of `bench/text.rs`,
//! drawn with Zipf weights within one of 200 topics, so that the fake provider's vectors (a sum
//! of one pseudo-random vector per word, normalised) cluster by topic and lean towards the
//! frequent words the way real embeddings do; `--text uniform` takes `text::Words` sentences
//! unchanged instead (every word equally likely: nearly structureless vectors, a harder case for
//! HNSW). Queries are sentences of the world searched, picked at random, without their year and
//! with 30 % of their words replaced by others of the same topic.
//!
//! # Sections
//!
//! **`vectors`**: `EdgeRepo` (qdrant-edge) alone, in each `--layouts` layout: `float32` (the
//! default layout), `int8` (scalar int8 quantization kept in RAM, searches rescored with the
//! originals, oversampling 2) and, when asked, `float32-tenant` (no global graph, one per world:
//! `hnsw_m = 0`, `hnsw_payload_m = 16`) and `int8-disk` (the same as int8 with the original vectors
//! on disk). Each layout runs in a child process of this binary, with its own temporary
//! directory, so that its memory figures are its own. The child writes `--worlds` worlds of
//! `--chunks ÷ --worlds` points into one collection (quarry keeps one per embedding profile,
//! filtered by world), 1,000 per `upsert`, with the payload the workers write; measures the load
//! rate, waits for the index (below), then reads VmRSS / VmHWM from `/proc/self/status` (less
//! what the child held before opening the store) and the blocks allocated under the vector
//! directory (`st_blocks` × 512: the segment files are sparse, so their sizes overstate).
//! Then, for each `--ef` (the engine's default beam width, then 64, 128, 256 through
//! `DenseSearch::hnsw_ef`), every query once at concurrency 1 and round-robin at the further
//! `--concurrency` levels: latency p50/p99, searches per second, and recall@10 against the exact
//! top 10, which the child computes by brute force (cosine of unit vectors) while it generates
//! the points, keeping only the best ten per query — so no copy of the vectors is held.
//!
//! *Waiting for the index.* `EdgeRepo` builds HNSW (and the quantized vectors) in an
//! `optimize()` that its maintenance task starts once writes have settled; the child calls
//! `EdgeRepo::optimize_now` right after the last upsert, which waits for an optimize already
//! running and then runs one to completion, and then waits as `bench` does (`harness::settle`)
//! until the process is quiet. The time from the last upsert to then is "index settle".
//!
//! **`retrieve`**: quarry in-process (`harness::Quarry`) with embedded vectors, on SQLite or,
//! with `--store postgres`, on a scratch PostgreSQL database (`QUARRY_BENCH_POSTGRES_URL`,
//! default `postgres://postgres@127.0.0.1:5432/postgres`; created and dropped by
//! `bench/pgdb.rs`). One world of `--chunks` chunks in `--sources` sources is loaded through
//! the API from the fake provider (no quota, no latency): the load rate and the index settle
//! time as above, the process's RSS per chunk, and the relational store's and the vector
//! directory's disk per chunk, separately. Then `POST /v1/worlds/{id}/retrieve` (top_k 10) at
//! each `--concurrency` (`harness::run_load`): p50/p95/p99, requests per second and quarry's own
//! timing split, for each `--shapes` request shape (dense with parents, the default; dense alone;
//! dense with neighbours; hybrid), each warmed at the highest concurrency first, with the CPU
//! time per request of the process and of PostgreSQL's processes; beside them, the query's
//! embedding call alone and the engine alone (qdrant-edge on quarry's folder, quarry stopped;
//! warmed and settled as the shapes are, then measured twice to show its spread within the run).
//! `--data DIR` keeps the SQLite file and vectors in DIR and reuses a world a previous run
//! loaded there.
//!
//! **`relational`**: the relational store alone, SQLite and PostgreSQL (unless `--store`
//! names one; an unreachable PostgreSQL is reported as SKIPPED), at `--chunks` chunk rows written
//! through the store trait as the service writes them, minus HTTP, provider and vectors
//! (`add_source`, then the workers' `claim_work` / `complete_work` / `finish_job_if_done`:
//! minutes instead of the better part of an hour), plus a pending queue. Latency p50/p99 over
//! `--calls` calls of the store operations the hot paths make — the workers' claim cycle
//! (`claim_work` of 32, `complete_work`, `get_job`, `finish_job_if_done`), a retrieval's reads
//! (`world_for_retrieval`, `chunks_by_points` and `source_details` of 10 random hits) and the
//! listings (first and last pages of sources and of a source's chunks, `source_counts`,
//! `world_stats`); table and index sizes; and the plans of those statements (the store's own SQL,
//! `quarry::store::statements`): `EXPLAIN QUERY PLAN` on SQLite, `EXPLAIN (ANALYZE, BUFFERS)` on
//! PostgreSQL, run in a transaction that is rolled back.
//!
//! # Run time
//!
//! At 1,000,000 chunks on 2 cores, about 1.5–2 hours for everything (two layouts, `retrieve` on
//! SQLite, `relational` on both stores). The smoke runs (20,000 chunks, debug build: 10 minutes,
//! two thirds of it the unoptimised engine building indexes) only show that every step works;
//! the estimate scales the release figures `bench` published for 100,000 chunks (BENCHMARKS.md:
//! 1,057 chunks/s through the API, 26,000 points/s written directly, 40–90 s for the index of
//! 100,000–200,000 points) by the number of points, 384 against 256 dimensions and HNSW's
//! logarithmic growth:
//!
//! - `vectors`: per layout 1–3 minutes of loading, 10–20 of index building, about one of
//!   searches: 25–45 minutes for `float32,int8` (`int8-disk` adds as much again);
//! - `retrieve`: 20–30 minutes of loading through the API, 10–20 for the index;
//! - `relational`: per store 5–10 minutes of writing rows and up to 5 of measurements (an
//!   operation stops after 60 s, which the whole-world counts reach at this size).
//!
//! Each section deletes what it wrote before the next starts; the largest at once is
//! `retrieve`'s (about 4 KB per chunk in SQLite, most of it the kept vectors, and as much again
//! for the vector directory): keep about 10 GB free. Memory stays within a few GB; the index
//! build peaks at about twice the settled size.

#[path = "bench/fake.rs"]
#[allow(dead_code)]
mod fake;
#[path = "bench/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "bench/pgdb.rs"]
mod pgdb;
#[path = "bench/text.rs"]
#[allow(dead_code)]
mod text;

#[path = "bench_scale/corpus.rs"]
mod corpus;
#[path = "bench_scale/relational.rs"]
mod relational;
#[path = "bench_scale/retrieve.rs"]
mod retrieve;
#[path = "bench_scale/vectors.rs"]
mod vectors;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use corpus::TextKind;
use harness::Result;

const HELP: &str = "\
usage: bench_scale [options]
  --only LIST          sections: vectors,retrieve,relational (default: all three)
  --chunks N           chunks (default 1000000): in all, over --worlds worlds, for `vectors`;
                       in one world for `retrieve` and `relational`
  --worlds W           worlds sharing the collection in `vectors` (default 10)
  --sources N          sources per world (default 1000)
  --dims D             embedding dimensions (default 384)
  --text KIND          zipf (default: topics and frequent words) or uniform (text::Words as is)
  --layouts LIST       vectors: float32,int8,int8-disk,float32-tenant (default float32,int8)
  --queries N          vectors: distinct queries, spread over the worlds (default 200)
  --ef LIST            vectors: hnsw_ef values, `default` for the engine's own
                       (default default,64,128,256)
  --concurrency LIST   vectors and retrieve: concurrency levels (default 1,32)
  --requests LIST      requests per level (default 200,2000)
  --store LIST         sqlite, postgres or both: for `retrieve` (default sqlite) and
                       `relational` (default both; an unreachable PostgreSQL is skipped
                       loudly unless named here). PostgreSQL: QUARRY_BENCH_POSTGRES_URL
                       (default postgres://postgres@127.0.0.1:5432/postgres), where a scratch
                       database is created and dropped (kept if QUARRY_BENCH_KEEP_POSTGRES is set)
  --calls N            relational: calls per store operation (default 200)
  --shapes LIST        retrieve: request shapes, of parent (the default request: dense, each
                       hit's parent as context), none (dense, hits alone), neighbors (dense,
                       one chunk either side), hybrid (RRF, parents; makes the world hybrid)
                       (default parent)
  --data DIR           retrieve (SQLite only): keep the SQLite file and vectors in DIR and reuse
                       the world a previous run loaded there; delete DIR to load afresh
";

/// Which relational store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    Sqlite,
    Postgres,
}

impl StoreKind {
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Sqlite => "sqlite",
            StoreKind::Postgres => "postgres",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    sections: Vec<String>,
    pub chunks: u64,
    pub worlds: u32,
    pub sources: u64,
    pub dims: usize,
    pub text: TextKind,
    pub layouts: Vec<String>,
    pub queries: usize,
    pub ef: Vec<Option<u32>>,
    pub concurrency: Vec<usize>,
    pub requests: Vec<usize>,
    /// `None`: each section's own default.
    pub store: Option<Vec<StoreKind>>,
    pub calls: usize,
    pub data: Option<PathBuf>,
    /// `retrieve`: the request shapes measured (`--shapes`).
    pub shapes: Vec<String>,
    /// Set in the child processes of `vectors`: the one layout to run.
    child_layout: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            sections: vec!["vectors".into(), "retrieve".into(), "relational".into()],
            chunks: 1_000_000,
            worlds: 10,
            sources: 1000,
            dims: 384,
            text: TextKind::Zipf,
            layouts: vec!["float32".into(), "int8".into()],
            queries: 200,
            ef: vec![None, Some(64), Some(128), Some(256)],
            concurrency: vec![1, 32],
            requests: vec![200, 2000],
            store: None,
            calls: 200,
            data: None,
            shapes: vec!["parent".into()],
            child_layout: None,
        }
    }
}

impl Options {
    /// The stores a section runs on: `--store`, or the section's `default`.
    pub fn stores(&self, default: &[StoreKind]) -> Vec<StoreKind> {
        self.store.clone().unwrap_or_else(|| default.to_vec())
    }

    pub fn text_name(&self) -> &'static str {
        match self.text {
            TextKind::Zipf => "Zipf-topic",
            TextKind::Uniform => "uniform",
        }
    }
}

fn list<T: std::str::FromStr>(flag: &str, value: &str) -> std::result::Result<Vec<T>, String> {
    value
        .split(',')
        .map(|v| v.trim().parse::<T>().map_err(|_| format!("{flag}: cannot read `{v}`")))
        .collect()
}

fn parse_args(args: &[String]) -> std::result::Result<Options, String> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Err(HELP.into());
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value\n\n{HELP}"))?;
        let whole = |v: &str| {
            v.replace('_', "")
                .parse::<u64>()
                .map_err(|_| format!("{flag}: cannot read `{v}`"))
        };
        match flag.as_str() {
            "--only" => {
                o.sections = list::<String>(flag, value)?;
                if let Some(bad) = o
                    .sections
                    .iter()
                    .find(|s| !["vectors", "retrieve", "relational"].contains(&s.as_str()))
                {
                    return Err(format!("--only: unknown section `{bad}`"));
                }
            }
            "--chunks" => o.chunks = whole(value)?,
            "--worlds" => o.worlds = whole(value)? as u32,
            "--sources" => o.sources = whole(value)?,
            "--dims" => o.dims = whole(value)? as usize,
            "--text" => {
                o.text = match value.as_str() {
                    "zipf" => TextKind::Zipf,
                    "uniform" => TextKind::Uniform,
                    other => return Err(format!("--text: `{other}` is not zipf or uniform")),
                }
            }
            "--layouts" => {
                o.layouts = list::<String>(flag, value)?;
                if let Some(bad) = o.layouts.iter().find(|l| !vectors::LAYOUTS.contains(&l.as_str())) {
                    return Err(format!(
                        "--layouts: unknown layout `{bad}` (known: {})",
                        vectors::LAYOUTS.join(", ")
                    ));
                }
            }
            "--queries" => o.queries = whole(value)? as usize,
            "--ef" => {
                o.ef = value
                    .split(',')
                    .map(|v| match v.trim() {
                        "default" => Ok(None),
                        v => v
                            .parse::<u32>()
                            .map(Some)
                            .map_err(|_| format!("--ef: cannot read `{v}`")),
                    })
                    .collect::<std::result::Result<_, _>>()?;
            }
            "--concurrency" => o.concurrency = list(flag, value)?,
            "--requests" => o.requests = list(flag, value)?,
            "--store" => {
                let stores = value
                    .split(',')
                    .map(|v| match v.trim() {
                        "sqlite" => Ok(StoreKind::Sqlite),
                        "postgres" => Ok(StoreKind::Postgres),
                        other => Err(format!("--store: `{other}` is not sqlite or postgres")),
                    })
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                o.store = Some(stores);
            }
            "--calls" => o.calls = whole(value)? as usize,
            "--data" => o.data = Some(value.into()),
            "--shapes" => {
                o.shapes = list::<String>(flag, value)?;
                if let Some(bad) = o
                    .shapes
                    .iter()
                    .find(|s| !["parent", "none", "neighbors", "hybrid"].contains(&s.as_str()))
                {
                    return Err(format!("--shapes: unknown shape `{bad}`"));
                }
            }
            "--child-layout" => o.child_layout = Some(value.clone()),
            _ => return Err(format!("unknown option {flag}\n\n{HELP}")),
        }
    }
    if o.concurrency.is_empty() || o.concurrency.len() != o.requests.len() {
        return Err("--concurrency and --requests need the same number of entries".into());
    }
    if o.concurrency.contains(&0) || o.requests.contains(&0) {
        return Err("--concurrency and --requests must be positive".into());
    }
    if o.worlds == 0 || o.sources == 0 || o.dims == 0 || o.queries == 0 || o.calls == 0 || o.ef.is_empty() {
        return Err("--worlds, --sources, --dims, --queries, --calls and --ef must be positive".into());
    }
    if o.chunks < o.sources || o.chunks / u64::from(o.worlds) < 100 {
        return Err("--chunks must be at least --sources, and at least 100 per world".into());
    }
    if o.data.is_some() && o.stores(&[StoreKind::Sqlite]).contains(&StoreKind::Postgres) {
        return Err("--data keeps a SQLite store: it cannot be combined with --store postgres".into());
    }
    Ok(o)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse_args(&args) {
        Ok(o) => o,
        Err(message) => {
            eprintln!("{message}");
            return if args.iter().any(|a| a == "--help" || a == "-h") {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    };
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("bench_scale: cannot start tokio: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = match options.child_layout.clone() {
        Some(layout) => runtime.block_on(vectors::child(&options, &layout)),
        None => runtime.block_on(run(options)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench_scale: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(o: Options) -> Result<()> {
    let command = std::iter::once("bench_scale".to_owned())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    println!("# quarry at scale");
    println!();
    println!("command: {command}");
    println!("date:    {}", chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"));
    println!("machine: {}", harness::machine());
    println!(
        "build:   {}",
        if cfg!(debug_assertions) {
            "debug (figures are not representative: use --release)"
        } else {
            "release"
        }
    );
    println!("options: {o:?}");
    let started = Instant::now();
    let want = |s: &str| o.sections.iter().any(|x| x == s);
    let mut took = Vec::new();
    if want("vectors") {
        let t = Instant::now();
        vectors::run(&o).await?;
        took.push(format!("vectors {:.0} s", t.elapsed().as_secs_f64()));
    }
    if want("retrieve") {
        let t = Instant::now();
        retrieve::run(&o).await?;
        took.push(format!("retrieve {:.0} s", t.elapsed().as_secs_f64()));
    }
    if want("relational") {
        let t = Instant::now();
        relational::run(&o).await?;
        took.push(format!("relational {:.0} s", t.elapsed().as_secs_f64()));
    }
    println!();
    println!(
        "total {:.0} s ({}); load average at the end {}",
        started.elapsed().as_secs_f64(),
        took.join(", "),
        harness::load_average()
    );
    Ok(())
}

pub fn progress(message: impl AsRef<str>) {
    eprintln!("[bench_scale] {}", message.as_ref());
}

/// The PostgreSQL server scratch databases are created on.
pub fn postgres_admin() -> String {
    std::env::var("QUARRY_BENCH_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

/// Bytes allocated on disk (`st_blocks` × 512) and apparent bytes (sizes) of `path`, a file or
/// a directory walked without following links; (0, 0) when it does not exist.
pub fn disk_usage(path: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return (0, 0);
    };
    let mut total = (meta.blocks() * 512, meta.len());
    if meta.is_dir()
        && let Ok(entries) = std::fs::read_dir(path)
    {
        for entry in entries.flatten() {
            let (allocated, apparent) = disk_usage(&entry.path());
            total.0 += allocated;
            total.1 += apparent;
        }
    }
    total
}
