//! Section `vectors`: the embedded vector store alone, at scale, in each collection layout.
//!
//! Each layout runs in a child process of its own (this binary again, with `--child-layout`),
//! so that its resident memory is its own: a store dropped in-process leaves its freed heap to
//! the allocator and its peak in `VmHWM`, and would blur the next layout's figures. The child
//! writes one `RESULT {json}` line on stdout; the parent prints the tables.
//!
//! In the child: the points of `--worlds` worlds are generated world after world
//! (`corpus.rs`), written with `upsert` 1,000 at a time into one collection, as the workers
//! write them (quarry keeps one collection per embedding profile), and offered to the
//! brute-force [`Truth`] on the way, which keeps the exact top 10 of every query and nothing
//! else. Then the wait for the index ("Waiting for the index" in `bench_scale.rs`), memory and
//! disk, and the searches: every query once at concurrency 1 (latency and recall@10 against the
//! exact top 10), then the same queries round-robin at each further concurrency, for each
//! `hnsw_ef`.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quarry::domain::{EmbeddingProfile, ProviderKind, RunId, SourceId, WorldId};
use quarry::vector::edge::EdgeRepo;
use quarry::vector::settings::{CollectionSettings, Layout, Quantization, SearchSettings};
use quarry::vector::{CollectionSpec, DenseSearch, Point, PointFilter, PointPayload, VectorRepo};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use uuid::Uuid;

use crate::corpus::{Corpus, Truth};
use crate::harness::{self, Result, Table, num, quantile_ms};
use crate::{Options, disk_usage, mib, progress};

/// The layouts `--layouts` may name.
pub const LAYOUTS: [&str; 4] = ["float32", "int8", "int8-disk", "float32-tenant"];

/// Points per `upsert` call (the workers write a claim at a time; the engine takes 1,000 per
/// WAL record).
const UPSERT: usize = 1000;
/// Results per search.
const TOP: usize = 10;

/// The collection and search settings of a layout name.
pub fn layout(name: &str) -> Result<Layout> {
    let int8 = |on_disk: Option<bool>| Layout {
        collection: CollectionSettings {
            quantization: Quantization::Int8,
            always_ram: Some(true),
            on_disk,
            ..CollectionSettings::default()
        },
        search: SearchSettings {
            rescore: Some(true),
            oversampling: Some(2.0),
            ..SearchSettings::default()
        },
    };
    let layout = match name {
        "float32" => Layout::default(),
        "int8" => int8(None),
        "int8-disk" => int8(Some(true)),
        // Qdrant's layout for many tenants: no global graph, one graph per world.
        "float32-tenant" => Layout {
            collection: CollectionSettings {
                hnsw_m: Some(0),
                hnsw_payload_m: Some(16),
                ..CollectionSettings::default()
            },
            search: SearchSettings::default(),
        },
        other => return Err(format!("unknown layout `{other}` (known: {})", LAYOUTS.join(", ")).into()),
    };
    layout.collection.validate(false)?;
    layout.search.validate(layout.collection.quantization)?;
    Ok(layout)
}

/// A few lines from `/proc/self/status`, in MiB.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Mem {
    pub rss: f64,
    pub peak: f64,
    pub anon: f64,
    pub file: f64,
}

impl Mem {
    pub fn now() -> Mem {
        let m = harness::memory();
        Mem {
            rss: m.rss,
            peak: m.peak,
            anon: m.anon,
            file: m.file,
        }
    }
}

/// One run of searches: `requests` at `concurrency`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Run {
    concurrency: usize,
    requests: usize,
    errors: usize,
    p50: f64,
    p99: f64,
    per_second: f64,
}

/// The searches at one `hnsw_ef`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct EfRow {
    ef: Option<u32>,
    recall: f64,
    runs: Vec<Run>,
}

/// What a child reports.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Outcome {
    layout: String,
    points: u64,
    load_s: f64,
    upsert_s: f64,
    settle_s: f64,
    /// Before the store was opened (corpus, queries and their exact neighbours only).
    before: Mem,
    settled: Mem,
    searched: Mem,
    disk: u64,
    apparent: u64,
    searches: Vec<EfRow>,
    notes: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// the parent

pub async fn run(o: &Options) -> Result<()> {
    let exe = std::env::current_exe()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut outcomes = Vec::new();
    for name in &o.layouts {
        progress(format!("vectors: layout {name} in a child process"));
        let output = tokio::process::Command::new(&exe)
            .args(&args)
            .args(["--child-layout", name])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?
            // Not `Command::output`, which would capture stderr (the child's progress) too.
            .wait_with_output()
            .await?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("RESULT ")) else {
            return Err(format!(
                "the {name} child reported nothing ({}); its output:\n{stdout}",
                output.status
            )
            .into());
        };
        outcomes.push(serde_json::from_str::<Outcome>(line)?);
    }
    print(o, &outcomes);
    Ok(())
}

fn print(o: &Options, outcomes: &[Outcome]) {
    let per_world = o.chunks / u64::from(o.worlds);
    println!();
    println!(
        "## Vectors: the embedded store alone ({} points in {} world(s) of {} in one collection, {} dimensions, \
         {} text, upserts of {UPSERT})",
        num(per_world as f64 * f64::from(o.worlds), 0),
        o.worlds,
        num(per_world as f64, 0),
        o.dims,
        o.text_name(),
    );
    println!();
    let mut load = Table::new(&[
        "layout",
        "points",
        "load s",
        "points/s",
        "in upsert s",
        "upsert points/s",
        "index settle s",
    ]);
    for r in outcomes {
        load.row(vec![
            r.layout.clone(),
            num(r.points as f64, 0),
            format!("{:.1}", r.load_s),
            num(r.points as f64 / r.load_s, 0),
            format!("{:.1}", r.upsert_s),
            num(r.points as f64 / r.upsert_s, 0),
            format!("{:.0}", r.settle_s),
        ]);
    }
    load.print();
    println!();
    println!(
        "load s: wall time of the load loop, generating the points included; in upsert s: the part spent inside \
         `upsert` (the store's own rate). index settle s: from the last upsert until `EdgeRepo::optimize_now` had \
         built the HNSW index (and the quantized vectors) and the process stayed under 5 % of a core for a second."
    );
    println!();
    let mut space = Table::new(&[
        "layout",
        "RSS MiB",
        "RSS after searches",
        "peak MiB",
        "anon MiB",
        "file MiB",
        "RSS B/chunk",
        "disk MiB",
        "apparent MiB",
        "disk B/chunk",
        "raw f32 MiB",
    ]);
    for r in outcomes {
        let n = r.points as f64;
        let base = r.before.rss;
        space.row(vec![
            r.layout.clone(),
            num(r.settled.rss - base, 0),
            num(r.searched.rss - base, 0),
            num(r.searched.peak - base, 0),
            num(r.searched.anon - r.before.anon, 0),
            num(r.searched.file - r.before.file, 0),
            num((r.searched.rss - base) * 1_048_576.0 / n, 0),
            num(mib(r.disk), 0),
            num(mib(r.apparent), 0),
            num(r.disk as f64 / n, 0),
            num(n * o.dims as f64 * 4.0 / 1_048_576.0, 0),
        ]);
    }
    space.print();
    println!();
    println!(
        "Memory is the child process's less what it held before opening the store ({} MiB RSS: runtime, queries and \
         their exact neighbours); RSS after the index settled, then after every search below, with the peak (VmHWM) \
         and the anon / file split after the searches. B/chunk uses RSS after searches. disk: blocks actually \
         allocated under the vector directory (st_blocks × 512: segment files are sparse); apparent: their sizes.",
        outcomes.first().map_or("–".into(), |r| num(r.before.rss, 0)),
    );
    println!();
    let mut headers = vec!["layout".to_owned(), "hnsw_ef".into(), "recall@10".into()];
    for &c in &o.concurrency {
        headers.extend([
            format!("c{c} p50 ms"),
            format!("c{c} p99 ms"),
            format!("c{c} searches/s"),
        ]);
    }
    headers.push("errors".into());
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut search = Table::new(&headers);
    for r in outcomes {
        for row in &r.searches {
            let mut cells = vec![
                r.layout.clone(),
                row.ef.map_or("default".into(), |ef| ef.to_string()),
                format!("{:.3}", row.recall),
            ];
            for run in &row.runs {
                cells.extend([
                    format!("{:.2}", run.p50),
                    format!("{:.2}", run.p99),
                    num(run.per_second, 0),
                ]);
            }
            cells.push(row.runs.iter().map(|r| r.errors).sum::<usize>().to_string());
            search.row(cells);
        }
    }
    search.print();
    println!();
    println!(
        "Searches: limit {TOP}, filtered by one world (and its run), as quarry searches; {} queries (perturbed \
         sentences of their world, spread over the worlds), each once at concurrency {}, then round-robin for the \
         other concurrencies ({} requests). recall@10: share of the exact top 10 (brute force over the world's \
         points, cosine) found, averaged over the queries at concurrency {}. `default` is the engine's own beam \
         width (its ef_construct); int8 layouts rescore with the originals, oversampling 2.",
        o.queries,
        o.concurrency[0],
        o.requests
            .iter()
            .skip(1)
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        o.concurrency[0],
    );
    for r in outcomes {
        for note in &r.notes {
            println!("{}: {note}", r.layout);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// the child

/// Fixed ids, so that every layout holds the same points under the same ids.
fn world_id(w: u32) -> WorldId {
    WorldId(Uuid::from_u128(0x5ca1_0001 << 96 | u128::from(w)))
}

fn run_id(w: u32) -> RunId {
    RunId(Uuid::from_u128(0x5ca1_0002 << 96 | u128::from(w)))
}

fn source_id(w: u32, s: u64) -> SourceId {
    SourceId(Uuid::from_u128(0x5ca1_0003 << 96 | u128::from(w) << 64 | u128::from(s)))
}

/// Runs one layout and prints its `RESULT` line.
pub async fn child(o: &Options, name: &str) -> Result<()> {
    let layout = layout(name)?;
    let worlds = o.worlds;
    let per_world = o.chunks / u64::from(worlds);
    let per_source = (per_world / o.sources).max(1);
    let corpus = Corpus::new(o.text);
    let queries: Vec<(u32, String)> = (0..o.queries as u64)
        .map(|q| {
            let world = (q % u64::from(worlds)) as u32;
            (world, corpus.query(world, q, per_world))
        })
        .collect();
    let mut truth = Truth::new(&queries, worlds as usize, o.dims, TOP);
    let profile = EmbeddingProfile {
        provider: ProviderKind::OpenAi,
        model: "text-embedding-3-small".into(),
        dimensions: o.dims as u32,
    };
    let spec = CollectionSpec::for_profile(&profile);
    let collection = spec.name.clone();
    let dir = tempfile::Builder::new().prefix("quarry-scale-vectors-").tempdir()?;
    let path = dir.path().join("vectors");

    let before = Mem::now();
    let repo = Arc::new(EdgeRepo::open_with(&path, layout)?);
    repo.ensure_collection(&spec).await?;
    progress(format!(
        "vectors ({name}): writing {} points ({worlds} worlds of {per_world}) into {}",
        u64::from(worlds) * per_world,
        path.display()
    ));
    let started = Instant::now();
    let mut in_upsert = Duration::ZERO;
    let mut last_report = Instant::now();
    let mut points = Vec::with_capacity(UPSERT);
    let mut written = 0u64;
    for w in 0..worlds {
        let (world, run) = (world_id(w), run_id(w));
        for i in 0..per_world {
            let text = corpus.sentence(w, i);
            let dense = crate::fake::text_vector(&text, o.dims);
            let (s, chunk_number) = (i / per_source, (i % per_source) as u32);
            let source = source_id(w, s);
            let id = quarry::domain::point_id(world, run, source, chunk_number);
            truth.offer(w, id, &dense);
            points.push(Point {
                id,
                dense,
                sparse: None,
                payload: PointPayload {
                    world_id: world,
                    run_id: run,
                    source_id: source,
                    book_number: s as u32 + 1,
                    chunk_number,
                    text_sha256: hex::encode(sha2::Sha256::digest(text.as_bytes())),
                    token_count: quarry::chunking::count_tokens(&text),
                },
            });
            if points.len() == UPSERT {
                let t = Instant::now();
                repo.upsert(&collection, std::mem::take(&mut points)).await?;
                in_upsert += t.elapsed();
                written += UPSERT as u64;
                if last_report.elapsed() > Duration::from_secs(15) {
                    progress(format!(
                        "  {written} points after {:.0} s ({:.0} points/s)",
                        started.elapsed().as_secs_f64(),
                        written as f64 / started.elapsed().as_secs_f64()
                    ));
                    last_report = Instant::now();
                }
            }
        }
    }
    if !points.is_empty() {
        written += points.len() as u64;
        let t = Instant::now();
        repo.upsert(&collection, points).await?;
        in_upsert += t.elapsed();
    }
    let load = started.elapsed();
    progress(format!(
        "  written in {:.0} s; waiting for the index to settle",
        load.as_secs_f64()
    ));
    // Builds the index now (waiting for an optimize maintenance may have started first), then
    // makes sure nothing else is still running.
    let building = Instant::now();
    repo.optimize_now(&collection).await?;
    harness::settle(Duration::from_secs(1), Duration::from_secs(3 * 3600)).await;
    let settled_after = building.elapsed();
    progress(format!("  settled after {:.0} s", settled_after.as_secs_f64()));
    let mut notes = Vec::new();
    let stored = repo.count(&collection, PointFilter::world(world_id(0))).await?;
    if stored != per_world {
        notes.push(format!("world 0 holds {stored} points, not {per_world}"));
    }
    let settled = Mem::now();
    let (disk, apparent) = disk_usage(&path);

    let truth = Arc::new(truth);
    let collection = Arc::new(collection);
    let search = {
        let (repo, truth, collection) = (repo.clone(), truth.clone(), collection.clone());
        move |q: usize, ef: Option<u32>| {
            let (repo, truth, collection) = (repo.clone(), truth.clone(), collection.clone());
            async move {
                let (world, vector) = truth.query(q);
                let request = DenseSearch {
                    hnsw_ef: ef,
                    vector: vector.to_vec(),
                    filter: PointFilter::world(world_id(world)).run(run_id(world)),
                    sources: None,
                    limit: TOP,
                    score_threshold: Some(0.0f32.next_down()),
                };
                let hits = repo.search(&collection, request).await.map_err(|e| e.to_string())?;
                let ids: Vec<Uuid> = hits.iter().map(|h| h.id).collect();
                Ok::<f64, String>(truth.recall(q, &ids))
            }
        }
    };
    progress(format!("vectors ({name}): warming up"));
    let warm = {
        let (search, n) = (search.clone(), truth.len());
        harness::run_load(4, 100, move |i| search(i % n, None)).await
    };
    if warm.errors > 0 {
        return Err(format!("search fails: {}", warm.first_error.unwrap_or_default()).into());
    }
    let mut searches = Vec::new();
    for &ef in &o.ef {
        let mut runs = Vec::new();
        let mut recall = f64::NAN;
        for (k, (&concurrency, &requests)) in o.concurrency.iter().zip(&o.requests).enumerate() {
            progress(format!(
                "vectors ({name}): hnsw_ef {}, {requests} searches at concurrency {concurrency}",
                ef.map_or("default".into(), |e| e.to_string())
            ));
            let search = search.clone();
            let n = truth.len();
            let load = harness::run_load(concurrency, requests, move |i| search(i % n, ef)).await;
            if k == 0 {
                recall = harness::mean(load.outputs.iter().copied().filter(|r| r.is_finite()));
            }
            if let Some(err) = &load.first_error {
                notes.push(format!("hnsw_ef {ef:?}, concurrency {concurrency}: first error: {err}"));
            }
            runs.push(Run {
                concurrency,
                requests,
                errors: load.errors,
                p50: quantile_ms(&load.latencies, 0.50),
                p99: quantile_ms(&load.latencies, 0.99),
                per_second: load.per_second(),
            });
        }
        searches.push(EfRow { ef, recall, runs });
    }
    let searched = Mem::now();
    repo.close().await?;
    drop(search);
    drop(repo);
    let outcome = Outcome {
        layout: name.to_owned(),
        points: written,
        load_s: load.as_secs_f64(),
        upsert_s: in_upsert.as_secs_f64(),
        settle_s: settled_after.as_secs_f64(),
        before,
        settled,
        searched,
        disk,
        apparent,
        searches,
        notes,
    };
    println!("RESULT {}", serde_json::to_string(&outcome)?);
    drop(dir);
    Ok(())
}
