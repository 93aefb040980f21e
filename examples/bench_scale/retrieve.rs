//! Section `retrieve`: quarry in-process with one world of `--chunks` chunks loaded through its
//! API (the fake provider answers at once, without a quota), then `POST /retrieve` under load,
//! on SQLite (default) or PostgreSQL (`--store`), with embedded vectors either way.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use secrecy::SecretString;
use serde_json::{Value, json};

use crate::corpus::Corpus;
use crate::fake::{Fake, FakeConfig};
use crate::harness::{self, Quarry, Result, Table, mean, num, quantile_ms};
use crate::vectors::Mem;
use crate::{Options, StoreKind, disk_usage, mib, pgdb, progress};

/// The name of the benchmark's world (found again in a `--data` directory).
const WORLD: &str = "scale";
/// Results per request.
const TOP_K: usize = 10;

/// One answer's timing, as quarry reports it.
struct Timing {
    embed: f64,
    search: f64,
    verify: f64,
    total: f64,
    results: usize,
}

struct Tables {
    load: Table,
    space: Table,
    latency: Table,
    world: Table,
    /// PostgreSQL's own counts for the hot tables after the load.
    tables: Table,
    notes: Vec<String>,
}

pub async fn run(o: &Options) -> Result<()> {
    let mut t = Tables {
        load: Table::new(&["store", "chunks", "sources", "load s", "chunks/s", "index settle s"]),
        space: Table::new(&[
            "store",
            "RSS MiB",
            "peak MiB",
            "RSS B/chunk",
            "relational MiB",
            "relational B/chunk",
            "vectors MiB",
            "vectors B/chunk",
        ]),
        latency: Table::new(&[
            "store",
            "concurrency",
            "requests",
            "errors",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "req/s",
            "embed ms",
            "search ms",
            "verify ms",
            "total ms",
            "CPU ms/req",
            "pg CPU ms/req",
        ]),
        world: Table::new(&["store", "calls", "p50 ms", "p99 ms"]),
        tables: Table::new(&[
            "table",
            "updates",
            "HOT updates",
            "HOT share",
            "live rows",
            "dead rows",
            "autovacuum runs",
            "MiB",
        ]),
        notes: Vec::new(),
    };
    let corpus = Corpus::new(o.text);
    for store in o.stores(&[StoreKind::Sqlite]) {
        one(o, &corpus, store, &mut t).await?;
    }
    let per_source = o.chunks / o.sources;
    println!();
    println!(
        "## Retrieve: quarry in-process, one world of {} chunks in {} sources loaded through the API ({} dimensions, \
         {} text, chunks of one sentence, zero-latency fake provider without a quota, embedded vectors)",
        num((per_source * o.sources) as f64, 0),
        o.sources,
        o.dims,
        o.text_name()
    );
    println!();
    t.load.print();
    println!();
    println!(
        "load s: from the first upload until the world showed every chunk embedded (polled every second); index settle s: then until the process stayed under 5 % of a core for a second (the background optimize done)."
    );
    println!();
    t.space.print();
    println!();
    if !t.tables.is_empty() {
        t.tables.print();
        println!();
        println!(
            "PostgreSQL's statistics (pg_stat_user_tables) for the hot tables once every chunk was embedded: \
             updates written as heap-only tuples (no new index entry) and the dead row versions left for vacuum. \
             MiB: pg_total_relation_size (indexes included)."
        );
        println!();
    }
    println!(
        "RSS: the whole process (quarry, the fake provider, the load generator) less what it held before quarry \
         started, after the index settled; peak: VmHWM, the process's peak since it started (earlier sections \
         included). \
         relational: the SQLite file with its WAL and shared-memory files (blocks allocated), or \
         pg_database_size(); vectors: blocks allocated under the vector directory. B/chunk: per chunk loaded."
    );
    println!();
    t.latency.print();
    println!();
    println!(
        "POST /v1/worlds/{{id}}/retrieve with top_k {TOP_K} over HTTP on loopback; queries are perturbed sentences \
         of the world (`corpus.rs`), in each request shape: parent (the default: dense, each hit's parent as \
         context), none (`expand: none`), neighbors (one chunk either side), hybrid (`mode: hybrid`, RRF, parents). \
         p50/p95/p99 measured by the client; embed / search / verify / total: means of quarry's own `timing` \
         (verify: verification and the context). The engine alone: the same filter, limit and query vectors \
         (for hybrid, the same BM25 query vector and RRF prefetches) on quarry's vector folder once it stopped, \
         warmed at the highest concurrency and measured once idle, as the shapes are, then measured again. \
         The embedding call alone: the query's request to the fake provider, as quarry sends it, from the \
         load generator. CPU ms/req: CPU time this process (quarry, the fake provider, the load generator) used during the run, \
         per request; pg CPU ms/req: the same for every PostgreSQL process on the machine. With two cores busy, \
         requests per second at 32 cannot pass 2,000 over their sum."
    );
    for note in &t.notes {
        println!("{note}");
    }
    println!();
    t.world.print();
    println!();
    println!(
        "GET /v1/worlds/{{id}} (the world with its counts) one call at a time over HTTP, after the retrieval \
         load: what a client polling the world pays."
    );
    Ok(())
}

/// The world named [`WORLD`], if there is one.
async fn find_world(quarry: &Quarry) -> Result<Option<Value>> {
    let worlds = quarry.get("/v1/worlds").await?;
    Ok(worlds["worlds"]
        .as_array()
        .and_then(|all| all.iter().find(|w| w["name"] == WORLD))
        .cloned())
}

async fn one(o: &Options, corpus: &Corpus, store: StoreKind, t: &mut Tables) -> Result<()> {
    let label = store.name();
    let keys: Vec<String> = (0..2).map(|i| format!("sk-scale-{i}")).collect();
    let fake = Fake::start(FakeConfig {
        outage: None,
        keys: keys.clone(),
        quota: None,
        latency: Duration::ZERO,
    })
    .await?;
    let temporary = tempfile::Builder::new().prefix("quarry-scale-retrieve-").tempdir()?;
    let dir: PathBuf = o.data.clone().unwrap_or_else(|| temporary.path().to_owned());
    let pg = match store {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(pgdb::create(&crate::postgres_admin(), "quarry_scale").await?),
    };
    let before = Mem::now();
    let started = Quarry::start_in(Some(&dir), &fake.base_url(), &keys, |s| {
        // No periodic reconciliation in the middle of a measurement.
        s.embedding.audit_interval_s = 0;
        if let Some((url, _)) = &pg {
            s.store.url = SecretString::from(url.clone());
        }
    })
    .await;
    let result = match started {
        Ok(quarry) => {
            let result = load_and_measure(
                o,
                corpus,
                label,
                &quarry,
                &dir,
                pg.as_ref().map(|p| p.0.as_str()),
                before,
                t,
            )
            .await;
            let stopped = quarry.stop().await;
            let result = result.and(stopped);
            match result {
                // The engine alone on the same world, its folder free now that quarry stopped.
                Ok(()) => match embedding_alone(o, corpus, label, &fake.base_url(), &keys[0], t).await {
                    Ok(()) => raw(o, corpus, label, &dir, pg.as_ref().map(|p| p.0.as_str()), t).await,
                    Err(err) => Err(err),
                },
                Err(err) => Err(err),
            }
        }
        Err(err) => Err(err),
    };
    if let Some((_, name)) = &pg
        && std::env::var_os("QUARRY_BENCH_KEEP_POSTGRES").is_some()
    {
        progress(format!(
            "retrieve ({label}): database {name} kept (QUARRY_BENCH_KEEP_POSTGRES)"
        ));
    } else if let Some((_, name)) = &pg
        && let Err(err) = pgdb::drop(&crate::postgres_admin(), name).await
    {
        eprintln!("[bench_scale] dropping the scratch database {name} failed: {err}");
    }
    drop(fake);
    result
}

#[allow(clippy::too_many_arguments)]
async fn load_and_measure(
    o: &Options,
    corpus: &Corpus,
    label: &str,
    quarry: &Quarry,
    dir: &Path,
    pg_url: Option<&str>,
    before: Mem,
    t: &mut Tables,
) -> Result<()> {
    let per_source = o.chunks / o.sources;
    let total = per_source * o.sources;
    let world = match find_world(quarry).await? {
        Some(world) => {
            let embedded = world["stats"]["embedded"].as_u64().unwrap_or(0);
            if o.shapes.iter().any(|s| s == "hybrid") && world["hybrid"] != true {
                return Err(format!("the --data directory's world `{WORLD}` is not hybrid; delete it").into());
            }
            if embedded != total || world["stats"]["chunks"].as_u64() != Some(total) {
                return Err(format!(
                    "the --data directory holds world `{WORLD}` with {embedded} embedded chunks, not {total}; delete it"
                )
                .into());
            }
            progress(format!(
                "retrieve ({label}): reusing world `{WORLD}` from {}",
                dir.display()
            ));
            let settled = harness::settle(Duration::from_secs(3), Duration::from_secs(3 * 3600)).await;
            t.load.row(vec![
                format!("{label} (reused)"),
                num(total as f64, 0),
                o.sources.to_string(),
                "–".into(),
                "–".into(),
                format!("{:.0}", settled.as_secs_f64()),
            ]);
            world
        }
        None => load(o, corpus, label, quarry, t).await?,
    };
    let id = world["id"].as_str().ok_or("world without id")?.to_owned();

    let memory = Mem::now();
    let relational = match pg_url {
        None => ["quarry.db", "quarry.db-wal", "quarry.db-shm"]
            .iter()
            .map(|f| disk_usage(&dir.join(f)).0)
            .sum::<u64>(),
        Some(url) => {
            let pool = sqlx::PgPool::connect(url).await?;
            let bytes: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
                .fetch_one(&pool)
                .await?;
            table_counts(&pool, t).await?;
            pool.close().await;
            bytes as u64
        }
    };
    let (vectors, _) = disk_usage(&dir.join("vectors"));
    let n = total as f64;
    t.space.row(vec![
        label.to_owned(),
        num(memory.rss - before.rss, 0),
        num(memory.peak, 0),
        num((memory.rss - before.rss) * 1_048_576.0 / n, 0),
        num(mib(relational), 0),
        num(relational as f64 / n, 0),
        num(mib(vectors), 0),
        num(vectors as f64 / n, 0),
    ]);

    let most = o.requests.iter().copied().max().unwrap_or(0).max(100);
    let queries: Arc<Vec<String>> = Arc::new((0..most as u64).map(|q| corpus.query(0, q, total)).collect());
    let url = Arc::new(quarry.url(&format!("/v1/worlds/{id}/retrieve")));
    let client = quarry.client.clone();
    let retrieve = move |shape: Value| {
        let (url, client, queries) = (url.clone(), client.clone(), queries.clone());
        let shape = Arc::new(shape);
        move |i: usize| {
            let (url, client, queries, shape) = (url.clone(), client.clone(), queries.clone(), shape.clone());
            async move {
                let mut body = json!({"query": queries[i % queries.len()], "top_k": TOP_K});
                for (k, v) in shape.as_object().into_iter().flatten() {
                    body[k] = v.clone();
                }
                let body = harness::post_json(&client, &url, harness::TOKEN, &body).await?;
                let timing = &body["timing"];
                let f = |k: &str| timing[k].as_f64().unwrap_or(f64::NAN);
                Ok::<Timing, String>(Timing {
                    embed: f("embed_ms"),
                    search: f("search_ms"),
                    verify: f("verify_ms"),
                    total: f("total_ms"),
                    results: body["results"].as_array().map_or(0, Vec::len),
                })
            }
        }
    };
    progress(format!("retrieve ({label}): reading the world"));
    let world_url = Arc::new(quarry.url(&format!("/v1/worlds/{id}")));
    let client = quarry.client.clone();
    let read_world = move |_| {
        let (url, client) = (world_url.clone(), client.clone());
        async move {
            let response = client
                .get(url.as_str())
                .bearer_auth(harness::TOKEN)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status();
            let body: Value = response.json().await.map_err(|e| e.to_string())?;
            match body["stats"]["chunks"].as_u64() {
                Some(n) if status.is_success() && n == total => Ok(()),
                _ => Err(format!("HTTP {status}: {body}")),
            }
        }
    };
    let reads = harness::run_load(1, 200, read_world).await;
    if let Some(err) = &reads.first_error {
        return Err(format!("GET /v1/worlds/{{id}} fails: {err}").into());
    }
    t.world.row(vec![
        label.to_owned(),
        reads.latencies.len().to_string(),
        format!("{:.2}", quantile_ms(&reads.latencies, 0.50)),
        format!("{:.2}", quantile_ms(&reads.latencies, 0.99)),
    ]);
    let shapes: Vec<(String, _)> = o
        .shapes
        .iter()
        .map(|shape| {
            let body = match shape.as_str() {
                "none" => json!({"expand": "none"}),
                "neighbors" => json!({"expand": "neighbors", "neighbors": 1}),
                "hybrid" => json!({"mode": "hybrid", "fusion": {"method": "rrf"}}),
                _ => json!({}),
            };
            (format!("{label} · {shape}"), retrieve(body))
        })
        .collect();
    // Every shape starts from the same state: the store's files in the page cache (a reused
    // world was just opened) and every shape warmed up before any is measured, so that the
    // first shape does not pay for what the others then find ready.
    progress(format!(
        "retrieve ({label}): reading the world's files into the page cache"
    ));
    let cached = read_through(dir);
    progress(format!("retrieve ({label}): {:.0} MiB read", mib(cached)));
    // Warmed at the highest concurrency measured, so that every pooled session the runs use is
    // open and has planned its statements (PostgreSQL plans once per session and statement text).
    let busiest = o.concurrency.iter().copied().max().unwrap_or(1);
    for (who, retrieve) in &shapes {
        progress(format!("retrieve ({who}): warming up at concurrency {busiest}"));
        let warm = harness::run_load(busiest, 25 * busiest.max(4), retrieve.clone()).await;
        if warm.errors > 0 {
            return Err(format!("retrieve fails: {}", warm.first_error.unwrap_or_default()).into());
        }
    }
    const SETTLE_AT_MOST: Duration = Duration::from_secs(600);
    let settled = harness::settle(Duration::from_secs(1), SETTLE_AT_MOST).await;
    progress(format!(
        "retrieve ({label}): idle after the warm-up in {:.0} s",
        settled.as_secs_f64()
    ));
    t.notes.push(if settled >= SETTLE_AT_MOST {
        format!(
            "{label}: the process was still busy {} s after the warm-up; measured anyway",
            SETTLE_AT_MOST.as_secs()
        )
    } else {
        format!("{label}: idle {:.0} s after the warm-up", settled.as_secs_f64())
    });
    for (who, retrieve) in shapes {
        for (&concurrency, &requests) in o.concurrency.iter().zip(&o.requests) {
            progress(format!(
                "retrieve ({who}): {requests} requests at concurrency {concurrency}"
            ));
            let cpu = Cpu::now();
            let load = harness::run_load(concurrency, requests, retrieve.clone()).await;
            let cpu = cpu.per_request(requests);
            let out = &load.outputs;
            let short = out.iter().filter(|t| t.results < TOP_K).count();
            if short > 0 {
                t.notes.push(format!(
                    "{who}, concurrency {concurrency}: {short} answers had fewer than {TOP_K} results"
                ));
            }
            if let Some(err) = &load.first_error {
                t.notes
                    .push(format!("{who}, concurrency {concurrency}: first error: {err}"));
            }
            let mut cells = load_cells(&who, concurrency, requests, &load);
            cells.extend([
                format!("{:.2}", mean(out.iter().map(|t| t.embed))),
                format!("{:.2}", mean(out.iter().map(|t| t.search))),
                format!("{:.2}", mean(out.iter().map(|t| t.verify))),
                format!("{:.2}", mean(out.iter().map(|t| t.total))),
            ]);
            cells.extend(cpu);
            t.latency.row(cells);
        }
    }
    Ok(())
}

/// Reads every file under `dir` once (into the page cache); the bytes read.
fn read_through(dir: &Path) -> u64 {
    let mut total = 0;
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(mut file) = std::fs::File::open(&path) {
                total += std::io::copy(&mut file, &mut std::io::sink()).unwrap_or(0);
            }
        }
    }
    total
}

/// A latency row's first cells: who, how many at once, the client's percentiles and the rate.
fn load_cells<T>(who: &str, concurrency: usize, requests: usize, load: &harness::Load<T>) -> Vec<String> {
    vec![
        who.to_owned(),
        concurrency.to_string(),
        requests.to_string(),
        load.errors.to_string(),
        format!("{:.2}", quantile_ms(&load.latencies, 0.50)),
        format!("{:.2}", quantile_ms(&load.latencies, 0.95)),
        format!("{:.2}", quantile_ms(&load.latencies, 0.99)),
        num(load.per_second(), 1),
    ]
}

/// The query's embedding call alone: the request quarry makes to the fake provider for each
/// retrieval (one text, base64 vectors, as quarry asks for them), made by the load generator at
/// each concurrency, for what that round trip costs in CPU on this machine, where the provider
/// shares quarry's cores as no real one does.
async fn embedding_alone(
    o: &Options,
    corpus: &Corpus,
    label: &str,
    base_url: &str,
    key: &str,
    t: &mut Tables,
) -> Result<()> {
    let total = (o.chunks / o.sources) * o.sources;
    let most = o.requests.iter().copied().max().unwrap_or(0).max(100);
    let queries: Arc<Vec<String>> = Arc::new((0..most as u64).map(|q| corpus.query(0, q, total)).collect());
    let url = Arc::new(format!("{}/embeddings", base_url.trim_end_matches('/')));
    let client = reqwest::Client::new();
    let (key, dims) = (Arc::new(key.to_owned()), o.dims);
    let embed = move |i: usize| {
        let (url, client, queries, key) = (url.clone(), client.clone(), queries.clone(), key.clone());
        async move {
            let body = json!({
                "model": "text-embedding-3-small",
                "input": [queries[i % queries.len()]],
                "dimensions": dims,
                "encoding_format": "base64",
            });
            harness::post_json(&client, &url, &key, &body).await.map(drop)
        }
    };
    let busiest = o.concurrency.iter().copied().max().unwrap_or(1);
    let warm = harness::run_load(busiest, 100, embed.clone()).await;
    if let Some(err) = warm.first_error {
        return Err(format!("the embedding call fails: {err}").into());
    }
    measure_alone(o, &format!("{label}: embedding call alone"), embed, t).await;
    Ok(())
}

/// Measures `call` at each concurrency as rows of their own beside quarry's (no timing split),
/// with the CPU per request; returns each concurrency's load, for checks of its outputs.
async fn measure_alone<T, F, Fut>(o: &Options, who: &str, call: F, t: &mut Tables) -> Vec<(usize, harness::Load<T>)>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = std::result::Result<T, String>> + Send + 'static,
{
    let mut loads = Vec::new();
    for (&concurrency, &requests) in o.concurrency.iter().zip(&o.requests) {
        progress(format!(
            "retrieve ({who}): {requests} calls at concurrency {concurrency}"
        ));
        let cpu = Cpu::now();
        let load = harness::run_load(concurrency, requests, call.clone()).await;
        let cpu = cpu.per_request(requests);
        let mut cells = load_cells(who, concurrency, requests, &load);
        cells.extend(std::iter::repeat_n("–".to_owned(), 4));
        cells.extend(cpu);
        t.latency.row(cells);
        loads.push((concurrency, load));
    }
    loads
}

/// The vector engine alone (quarry's embedded store over qdrant-edge, as the `vectors` section
/// measures it) on the world quarry just served: the same queries, embedded as the fake provider
/// embeds them, the same filter (world and active run) and limit, alone and at each concurrency.
async fn raw(
    o: &Options,
    corpus: &Corpus,
    label: &str,
    dir: &Path,
    pg_url: Option<&str>,
    t: &mut Tables,
) -> Result<()> {
    use quarry::vector::edge::EdgeRepo;
    use quarry::vector::{DenseSearch, Fusion, HybridSearch, PointFilter, VectorRepo};
    let per_source = o.chunks / o.sources;
    let total = per_source * o.sources;
    const WORLD_ROW: &str = "SELECT w.id, w.active_run_id, r.collection FROM worlds w JOIN runs r ON r.id = w.active_run_id \
         WHERE w.name = $1";
    let (world, run, collection): (uuid::Uuid, uuid::Uuid, String) = match pg_url {
        Some(url) => {
            let pool = sqlx::PgPool::connect(url).await?;
            let row = sqlx::query_as(WORLD_ROW).bind(WORLD).fetch_one(&pool).await?;
            pool.close().await;
            row
        }
        None => {
            let url = format!("sqlite://{}", dir.join("quarry.db").display());
            let pool = sqlx::SqlitePool::connect(&url).await?;
            let row = sqlx::query_as(WORLD_ROW).bind(WORLD).fetch_one(&pool).await?;
            pool.close().await;
            row
        }
    };
    let most = o.requests.iter().copied().max().unwrap_or(0).max(100);
    let queries: Vec<String> = (0..most as u64).map(|q| corpus.query(0, q, total)).collect();
    let engine = Arc::new(Engine {
        repo: EdgeRepo::open(&dir.join("vectors"))?,
        vectors: queries.iter().map(|q| crate::fake::text_vector(q, o.dims)).collect(),
        sparse: queries.iter().map(|q| quarry::sparse::query(q)).collect(),
        collection,
        filter: PointFilter::world(quarry::domain::WorldId(world)).run(quarry::domain::RunId(run)),
    });
    let hybrid = o.shapes.iter().any(|s| s == "hybrid");
    for kind in ["dense", "hybrid"].into_iter().filter(|k| *k == "dense" || hybrid) {
        let engine = engine.clone();
        let search = move |i: usize| {
            let engine = engine.clone();
            async move {
                let Engine {
                    repo,
                    vectors,
                    sparse,
                    collection,
                    filter,
                } = engine.as_ref();
                let filter = *filter;
                let vector = vectors[i % vectors.len()].clone();
                let hits = match kind {
                    "hybrid" => {
                        // As quarry asks it (`service::retrieval::search`): RRF over a dense
                        // and a BM25 prefetch of twice the limit, at least 20.
                        let request = HybridSearch {
                            hnsw_ef: None,
                            dense: vector,
                            sparse: sparse[i % sparse.len()].clone(),
                            filter,
                            sources: None,
                            limit: TOP_K,
                            prefetch_limit: (TOP_K * 2).max(20),
                            dense_score_threshold: Some(0.0f32.next_down()),
                            fusion: Fusion::Rrf {
                                dense_weight: 1.0,
                                sparse_weight: 1.0,
                            },
                        };
                        repo.hybrid_search(collection, request).await
                    }
                    _ => {
                        let request = DenseSearch {
                            hnsw_ef: None,
                            vector,
                            filter,
                            sources: None,
                            limit: TOP_K,
                            score_threshold: Some(0.0f32.next_down()),
                        };
                        repo.search(collection, request).await
                    }
                };
                Ok::<usize, String>(hits.map_err(|e| e.to_string())?.len())
            }
        };
        // As quarry's shapes are: warmed at the highest concurrency, then measured once the
        // process is idle (opening the folder may start the engine's own maintenance). Then
        // measured a second time, so that the table shows the engine's spread within this run.
        progress(format!("retrieve ({label}): the engine alone, {kind}, warming up"));
        let busiest = o.concurrency.iter().copied().max().unwrap_or(1);
        let warm = harness::run_load(busiest, 25 * busiest.max(4), search.clone()).await;
        if let Some(err) = warm.first_error {
            return Err(format!("raw search fails: {err}").into());
        }
        let settled = harness::settle(Duration::from_secs(1), Duration::from_secs(600)).await;
        t.notes.push(format!(
            "{label}: the engine alone ({kind}) idle {:.0} s after its warm-up",
            settled.as_secs_f64()
        ));
        for pass in ["", " (again)"] {
            let who = format!("{label}: engine alone, {kind}{pass}");
            let loads = measure_alone(o, &who, search.clone(), t).await;
            for (concurrency, load) in loads {
                let short = load.outputs.iter().filter(|&&n| n < TOP_K).count();
                if short > 0 {
                    t.notes.push(format!(
                        "{who}, concurrency {concurrency}: {short} searches found fewer than {TOP_K}"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// CPU seconds used so far by this process and by PostgreSQL's processes.
struct Cpu {
    own: f64,
    postgres: f64,
}

impl Cpu {
    fn now() -> Cpu {
        Cpu {
            own: harness::cpu_seconds(),
            postgres: postgres_cpu_seconds(),
        }
    }

    /// The CPU milliseconds per request since `self`: this process's, then PostgreSQL's (a dash
    /// when it used none, as with SQLite).
    fn per_request(self, requests: usize) -> [String; 2] {
        let now = Cpu::now();
        let per = |seconds: f64| seconds * 1000.0 / requests.max(1) as f64;
        let postgres = now.postgres - self.postgres;
        [
            format!("{:.2}", per(now.own - self.own)),
            if postgres > 0.0 {
                format!("{:.2}", per(postgres))
            } else {
                "–".to_owned()
            },
        ]
    }
}

/// The CPU seconds every process named `postgres` on this machine has used (user and system
/// time, from `/proc`); the sessions quarry opens and the server's own workers alike, and with
/// the children's times, the sessions and autovacuum workers that have exited (the postmaster
/// reaps them).
fn postgres_cpu_seconds() -> f64 {
    let mut total = 0.0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if !entry.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        if !head.ends_with("(postgres") {
            continue;
        }
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        total += (ticks(11) + ticks(12) + ticks(13) + ticks(14)) / 100.0;
    }
    total
}

/// What the engine alone searches with: quarry's vector folder, the queries' dense and BM25
/// vectors, the world's collection and filter.
struct Engine {
    repo: quarry::vector::edge::EdgeRepo,
    vectors: Vec<Vec<f32>>,
    sparse: Vec<quarry::vector::SparseVector>,
    collection: String,
    filter: quarry::vector::PointFilter,
}

/// PostgreSQL's update, HOT and dead-row counts of the tables a load writes most.
async fn table_counts(pool: &sqlx::PgPool, t: &mut Tables) -> Result<()> {
    let autovacuum: String = sqlx::query_scalar("SELECT current_setting('autovacuum')")
        .fetch_one(pool)
        .await?;
    t.notes.push(format!("postgres: autovacuum = {autovacuum}"));
    let rows: Vec<(String, i64, i64, i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT relname::text, n_tup_upd, n_tup_hot_upd, n_live_tup, n_dead_tup, autovacuum_count, \
         pg_total_relation_size(relid) FROM pg_stat_user_tables \
         WHERE relname IN ('manifest_entries', 'manifest_open', 'jobs', 'chunks', 'chunk_vectors') ORDER BY relname",
    )
    .fetch_all(pool)
    .await?;
    for (name, updated, hot, live, dead, vacuums, bytes) in rows {
        let share = if updated > 0 {
            hot as f64 / updated as f64 * 100.0
        } else {
            0.0
        };
        t.tables.row(vec![
            name,
            num(updated as f64, 0),
            num(hot as f64, 0),
            format!("{share:.1} %"),
            num(live as f64, 0),
            num(dead as f64, 0),
            vacuums.to_string(),
            num(mib(bytes as u64), 0),
        ]);
    }
    Ok(())
}

/// Creates the world and uploads `--sources` sources of one-sentence paragraphs (a 32-token
/// chunking makes each sentence a chunk), then waits until every chunk is embedded and the
/// index has settled. Returns the world's JSON.
async fn load(o: &Options, corpus: &Corpus, label: &str, quarry: &Quarry, t: &mut Tables) -> Result<Value> {
    let per_source = o.chunks / o.sources;
    let total = per_source * o.sources;
    let hybrid = o.shapes.iter().any(|s| s == "hybrid");
    let body = json!({
        "name": WORLD,
        "embedding": {"provider": "openai", "model": "text-embedding-3-small", "dimensions": o.dims},
        "chunking": {"max_tokens": 32, "overlap_tokens": 0},
        "hybrid": hybrid,
    });
    let world = quarry.post("/v1/worlds", &body, 201).await?;
    let id = world["id"].as_str().ok_or("world without id")?.to_owned();
    progress(format!(
        "retrieve ({label}): loading {total} chunks in {} sources through the API",
        o.sources
    ));
    let started = Instant::now();
    for s in 0..o.sources {
        let sentences: Vec<String> = (0..per_source)
            .map(|c| corpus.sentence(0, s * per_source + c))
            .collect();
        quarry
            .add_source(&id, &format!("scale-{s:05}.md"), &sentences.join("\n\n"))
            .await?;
    }
    let uploaded = started.elapsed();
    let poll = Duration::from_secs(1);
    let mut last_report = Instant::now();
    loop {
        let world = quarry.get(&format!("/v1/worlds/{id}")).await?;
        let stats = &world["stats"];
        let count = |k: &str| stats[k].as_u64().unwrap_or(0);
        if count("pending") == 0 && count("chunks") >= total {
            if count("failed") > 0 {
                return Err(format!("{} chunks failed while loading", count("failed")).into());
            }
            break;
        }
        if last_report.elapsed() > Duration::from_secs(15) {
            progress(format!(
                "  {}/{total} embedded after {:.0} s ({:.0} chunks/s)",
                count("embedded"),
                started.elapsed().as_secs_f64(),
                count("embedded") as f64 / started.elapsed().as_secs_f64()
            ));
            last_report = Instant::now();
        }
        if started.elapsed() > Duration::from_secs(6 * 3600) {
            return Err("loading did not finish within 6 hours".into());
        }
        tokio::time::sleep(poll).await;
    }
    let loaded = started.elapsed();
    progress(format!(
        "  loaded in {:.0} s (uploads took {:.0} s); waiting for the index to settle",
        loaded.as_secs_f64(),
        uploaded.as_secs_f64()
    ));
    let settled = harness::settle(Duration::from_secs(3), Duration::from_secs(3 * 3600)).await;
    progress(format!("  settled after {:.0} s", settled.as_secs_f64()));
    t.load.row(vec![
        label.to_owned(),
        num(total as f64, 0),
        o.sources.to_string(),
        format!("{:.0}", loaded.as_secs_f64()),
        num(total as f64 / loaded.as_secs_f64(), 0),
        format!("{:.0}", settled.as_secs_f64()),
    ]);
    quarry.get(&format!("/v1/worlds/{id}")).await
}
