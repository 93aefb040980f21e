//! Section `relational`: the relational store at `--chunks` chunk rows, without the service
//! around it: the latencies of the store calls the hot paths make, the plans of their SQL, and
//! what the rows take on disk.
//!
//! The rows are written through the store trait as the service writes them, only without HTTP,
//! the provider or the vector store (which is what makes a million rows take minutes rather
//! than the better part of an hour): per source, `add_source` with the chunks
//! `quarry::chunking::split` cuts (one sentence each at 32 tokens), then the workers' cycle of
//! `claim_work` (1,000 at a time here) and `complete_work` with a vector from the fake
//! provider's function (so `chunk_vectors` holds real-sized rows), then `finish_job_if_done`.
//! One more source is then added and left pending: the queue the claim measurements work
//! through, as an ingest in progress leaves one.
//!
//! The SQL shown with its plan is the store's own text (`quarry::store::statements`), so the
//! plans follow every change to it.

use std::collections::HashMap;
use std::future::Future;
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use quarry::domain::{
    ChunkId, ChunkingProfile, EmbeddedVector, EmbeddingProfile, JobId, NewSource, NewWorld, ProviderKind, RunId,
    SourceDetails, SourceId, Window, WorldId, now,
};
use quarry::store::Store;
use uuid::Uuid;

use crate::corpus::Corpus;
use crate::fake::{splitmix, text_vector};
use crate::harness::{Result, Table, num, quantile_ms};
use crate::{Options, StoreKind, disk_usage, mib, pgdb, progress};

/// Entries a worker claims at once (`CLAIM_LIMIT` in `src/workers/embedding/mod.rs`).
const WORKER_CLAIM: u32 = 32;
/// Entries the loader claims at once.
const LOADER_CLAIM: u32 = 1000;
/// Hits a retrieval verifies (top_k).
const HITS: usize = 10;
/// Rows per listing page (the API's default page).
const PAGE: u32 = 100;
/// No operation is timed for longer than this (its calls stop early).
const OP_BUDGET: Duration = Duration::from_secs(60);

/// What the load left in the store, for the measurements.
struct Loaded {
    world: WorldId,
    run: RunId,
    sources: Vec<SourceId>,
    per_source: u64,
    /// Every hundredth loaded entry: (point, source, chunk).
    sample: Vec<(Uuid, SourceId, ChunkId)>,
    /// The pending queue's job.
    queue: JobId,
}

pub async fn run(o: &Options) -> Result<()> {
    let corpus = Corpus::new(o.text);
    let mut load = Table::new(&[
        "store",
        "chunk rows",
        "add_source s",
        "rows/s",
        "claim+complete s",
        "rows/s",
        "ANALYZE s",
    ]);
    let mut ops = Table::new(&["operation", "store", "calls", "p50 ms", "p99 ms", "max ms", "rows"]);
    let mut sizes = Table::new(&["table", "store", "table MiB", "indexes MiB", "B/chunk"]);
    let mut plans: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let explicit = o.store.is_some();
    for kind in o.stores(&[StoreKind::Sqlite, StoreKind::Postgres]) {
        let (url, scratch, _dir) = match kind {
            StoreKind::Sqlite => {
                let dir = tempfile::Builder::new().prefix("quarry-scale-relational-").tempdir()?;
                let url = format!("sqlite://{}", dir.path().join("quarry.db").display());
                (url, None, Some(dir))
            }
            StoreKind::Postgres => match pgdb::create(&crate::postgres_admin(), "quarry_scale").await {
                Ok((url, name)) => (url, Some(name), None),
                Err(err) if !explicit => {
                    let line = format!(
                        "SKIPPED (Postgres): cannot reach the server of QUARRY_BENCH_POSTGRES_URL (or the default \
                         postgres://postgres@127.0.0.1:5432/postgres): {err}"
                    );
                    eprintln!("[bench_scale] {line}");
                    notes.push(line);
                    continue;
                }
                Err(err) => return Err(err),
            },
        };
        let result = one(
            o, &corpus, kind, &url, &mut load, &mut ops, &mut sizes, &mut plans, &mut notes,
        )
        .await;
        if let Some(name) = &scratch
            && let Err(err) = pgdb::drop(&crate::postgres_admin(), name).await
        {
            eprintln!("[bench_scale] dropping the scratch database {name} failed: {err}");
        }
        result?;
    }
    println!();
    println!(
        "## Relational: the store at {} chunk rows (one world, {} sources of one-sentence chunks, {}-dimension kept \
         vectors)",
        num(o.chunks as f64, 0),
        o.sources,
        o.dims
    );
    println!();
    load.print();
    println!();
    println!(
        "Rows written through the store trait (see `relational.rs`): add_source s = chunking + `add_source` (chunks, \
         manifest entries, job); claim+complete s = `claim_work` of {LOADER_CLAIM} + `complete_work` with the \
         vectors (computed outside the timing) + `finish_job_if_done`; every 5 s, outside the timings, the \
         heartbeat's `fold_counts` (PostgreSQL: folds the counts' deltas and vacuums them). PostgreSQL then \
         gets `ANALYZE`, the statistics autovacuum would gather on its own within minutes; SQLite gets none \
         (quarry never runs ANALYZE there)."
    );
    println!();
    ops.print();
    println!();
    println!(
        "Each operation called one at a time, up to --calls times (fewer when {} s ran out), on a store holding the \
         rows above plus a pending queue of --calls × {WORKER_CLAIM} + {WORKER_CLAIM} entries (one more source). \
         Worker rows are one claim cycle each, in order: `claim_work` of {WORKER_CLAIM}, `complete_work` of what it \
         claimed, `get_job` and `finish_job_if_done` (what `report_progress` does). Verify rows read the hits of a \
         retrieval: {HITS} point ids drawn at random from the whole world, and their sources. rows: the mean rows \
         an operation returned or changed.",
        OP_BUDGET.as_secs()
    );
    println!();
    sizes.print();
    println!();
    println!(
        "The eight largest tables: SQLite from the `dbstat` table (pages in use), PostgreSQL from pg_table_size / \
         pg_indexes_size; then the whole store (the SQLite file with its WAL and shared-memory files, blocks \
         allocated; pg_database_size). B/chunk: bytes ÷ chunk rows."
    );
    for note in &notes {
        println!("{note}");
    }
    println!();
    println!("### Query plans");
    for plan in &plans {
        println!();
        println!("{plan}");
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn one(
    o: &Options,
    corpus: &Corpus,
    kind: StoreKind,
    url: &str,
    load: &mut Table,
    ops: &mut Table,
    sizes: &mut Table,
    plans: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let label = kind.name();
    let store = quarry::store::connect(url).await?;
    let (loaded, add_s, mark_s) = populate(o, corpus, label, store.as_ref()).await?;
    store.fold_counts().await?;
    let rows = loaded.per_source * loaded.sources.len() as u64;
    let analyze_s = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => {
            let pool = sqlx::PgPool::connect(url).await?;
            let t = Instant::now();
            sqlx::query("ANALYZE").execute(&pool).await?;
            pool.close().await;
            Some(t.elapsed().as_secs_f64())
        }
    };
    load.row(vec![
        label.to_owned(),
        num(rows as f64, 0),
        format!("{add_s:.0}"),
        num(rows as f64 / add_s, 0),
        format!("{mark_s:.0}"),
        num(rows as f64 / mark_s, 0),
        analyze_s.map_or("–".into(), |s| format!("{s:.1}")),
    ]);
    measure(o, label, store.clone(), &loaded, ops).await?;
    match kind {
        StoreKind::Sqlite => {
            let pool = sqlite_pool(url).await?;
            sqlite_sizes(&pool, label, url, rows, sizes, notes).await?;
            for statement in statements(&loaded, kind, Uuid::nil()) {
                plans.push(render(label, &statement, explain_sqlite(&pool, &statement).await));
            }
            pool.close().await;
        }
        StoreKind::Postgres => {
            let pool = sqlx::PgPool::connect(url).await?;
            pg_sizes(&pool, label, rows, sizes).await?;
            for plan in explain_postgres(&pool, &loaded).await? {
                plans.push(plan);
            }
            pool.close().await;
        }
    }
    store.close().await;
    Ok(())
}

/// Writes the world, its sources and chunks (marked embedded), then the pending queue.
/// Returns what was loaded, and the seconds spent adding sources and marking entries.
async fn populate(o: &Options, corpus: &Corpus, label: &str, store: &dyn Store) -> Result<(Loaded, f64, f64)> {
    let per_source = o.chunks / o.sources;
    let profile = ChunkingProfile {
        max_tokens: 32,
        overlap_tokens: 0,
        parent_max_tokens: ChunkingProfile::default_parent_max_tokens(32),
        context_prefix: false,
    };
    let world = store
        .create_world(NewWorld {
            id: WorldId::new(),
            name: "scale".into(),
            embedding: EmbeddingProfile {
                provider: ProviderKind::OpenAi,
                model: "text-embedding-3-small".into(),
                dimensions: o.dims as u32,
            },
            chunking: profile,
            hybrid: false,
            run: RunId::new(),
            now: now(),
        })
        .await?;
    let (world_id, run) = (world.id, world.active_run);
    progress(format!(
        "relational ({label}): writing {} chunk rows in {} sources",
        per_source * o.sources,
        o.sources
    ));
    let (mut add, mut mark) = (Duration::ZERO, Duration::ZERO);
    let mut sources = Vec::with_capacity(o.sources as usize);
    let mut sample = Vec::new();
    let mut entries = 0u64;
    let started = Instant::now();
    let mut last_report = Instant::now();
    let mut last_fold = Instant::now();
    let owner = "bench-loader";
    for s in 0..o.sources {
        let t = Instant::now();
        let (source, job) = add_source(corpus, store, world_id, run, s, s * per_source, per_source, profile).await?;
        add += t.elapsed();
        sources.push(source);
        loop {
            let t = Instant::now();
            let stamp = now();
            let items = store
                .claim_work(owner, LOADER_CLAIM, stamp + chrono::Duration::minutes(10), stamp)
                .await?;
            mark += t.elapsed();
            if items.is_empty() {
                break;
            }
            let done: Vec<EmbeddedVector> = items
                .iter()
                .map(|item| EmbeddedVector {
                    chunk_id: item.chunk_id,
                    text_sha256: item.text_sha256.clone(),
                    dense: text_vector(&item.chunk_text, o.dims),
                })
                .collect();
            for item in &items {
                if entries.is_multiple_of(100) {
                    sample.push((item.point_id, item.source_id, item.chunk_id));
                }
                entries += 1;
            }
            let t = Instant::now();
            store.complete_work(owner, job, run, &done, 0, now()).await?;
            mark += t.elapsed();
        }
        let t = Instant::now();
        store.finish_job_if_done(job, now()).await?;
        mark += t.elapsed();
        // What each replica's heartbeat does every 5 s (PostgreSQL: fold the counts' deltas and
        // vacuum them), outside the timings.
        if last_fold.elapsed() > Duration::from_secs(5) {
            store.fold_counts().await?;
            last_fold = Instant::now();
        }
        if last_report.elapsed() > Duration::from_secs(15) {
            progress(format!(
                "  {entries} rows after {:.0} s ({:.0} rows/s)",
                started.elapsed().as_secs_f64(),
                entries as f64 / started.elapsed().as_secs_f64()
            ));
            last_report = Instant::now();
        }
    }
    let queue_len = o.calls as u64 * u64::from(WORKER_CLAIM) + u64::from(WORKER_CLAIM);
    let (_, queue) = add_source(
        corpus,
        store,
        world_id,
        run,
        o.sources,
        o.sources * per_source,
        queue_len,
        profile,
    )
    .await?;
    progress(format!(
        "  {entries} rows in {:.0} s, and a queue of {queue_len} pending entries",
        started.elapsed().as_secs_f64()
    ));
    let loaded = Loaded {
        world: world_id,
        run,
        sources,
        per_source,
        sample,
        queue,
    };
    Ok((loaded, add.as_secs_f64(), mark.as_secs_f64()))
}

/// Adds source number `s` of `n` sentences (chunk `first` on): chunked, stored with pending
/// entries and a running ingest job. Returns the source and the job.
#[allow(clippy::too_many_arguments)]
async fn add_source(
    corpus: &Corpus,
    store: &dyn Store,
    world: WorldId,
    run: RunId,
    s: u64,
    first: u64,
    n: u64,
    profile: ChunkingProfile,
) -> Result<(SourceId, JobId)> {
    let sentences: Vec<String> = (first..first + n).map(|i| corpus.sentence(0, i)).collect();
    let text = sentences.join("\n\n");
    let chunks = quarry::chunking::split(&text, profile);
    let source = NewSource {
        key: None,
        id: SourceId::new(),
        world_id: world,
        run,
        filename: format!("scale-{s:05}.md"),
        content_type: "text/markdown".into(),
        text,
        details: SourceDetails::default(),
        now: now(),
    };
    let job = JobId::new();
    store.add_source(&source, chunks, job).await?;
    Ok((source.id, job))
}

/// Calls `f(i)` one at a time, `calls` times or until [`OP_BUDGET`] ran out. Returns the
/// latencies (sorted) and the mean of what `f` counted.
async fn timed<Fut>(calls: usize, mut f: impl FnMut(usize) -> Fut) -> Result<(Vec<Duration>, f64)>
where
    Fut: Future<Output = quarry::store::Result<usize>>,
{
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(calls);
    let mut rows = 0usize;
    for i in 0..calls {
        if started.elapsed() > OP_BUDGET {
            break;
        }
        let t = Instant::now();
        rows += f(i).await?;
        latencies.push(t.elapsed());
    }
    latencies.sort();
    let mean = rows as f64 / latencies.len().max(1) as f64;
    Ok((latencies, mean))
}

fn op_row(table: &mut Table, label: &str, what: &str, latencies: &[Duration], rows: f64) {
    table.row(vec![
        what.to_owned(),
        label.to_owned(),
        latencies.len().to_string(),
        format!("{:.2}", quantile_ms(latencies, 0.50)),
        format!("{:.2}", quantile_ms(latencies, 0.99)),
        format!("{:.2}", quantile_ms(latencies, 1.0)),
        format!("{rows:.1}"),
    ]);
}

async fn measure(o: &Options, label: &str, store: Arc<dyn Store>, l: &Loaded, ops: &mut Table) -> Result<()> {
    let calls = o.calls;
    progress(format!("relational ({label}): worker cycles on the queue"));
    let owner = "bench-worker";
    let (mut claim, mut complete, mut get_job, mut finish) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut claimed, mut marked) = (0usize, 0u64);
    let started = Instant::now();
    for _ in 0..calls {
        if started.elapsed() > OP_BUDGET {
            break;
        }
        let stamp = now();
        let t = Instant::now();
        let items = store
            .claim_work(owner, WORKER_CLAIM, stamp + chrono::Duration::minutes(10), stamp)
            .await?;
        claim.push(t.elapsed());
        if items.is_empty() {
            break;
        }
        claimed += items.len();
        let job = items[0].job_id;
        let done: Vec<EmbeddedVector> = items
            .iter()
            .map(|item| EmbeddedVector {
                chunk_id: item.chunk_id,
                text_sha256: item.text_sha256.clone(),
                dense: text_vector(&item.chunk_text, o.dims),
            })
            .collect();
        let t = Instant::now();
        marked += store.complete_work(owner, job, l.run, &done, 0, now()).await?;
        complete.push(t.elapsed());
        let t = Instant::now();
        store.get_job(job).await?;
        get_job.push(t.elapsed());
        let t = Instant::now();
        store.finish_job_if_done(job, now()).await?;
        finish.push(t.elapsed());
    }
    let cycles = claim.len().max(1) as f64;
    for v in [&mut claim, &mut complete, &mut get_job, &mut finish] {
        v.sort();
    }
    op_row(ops, label, "worker: claim_work (32)", &claim, claimed as f64 / cycles);
    op_row(
        ops,
        label,
        "worker: complete_work (32)",
        &complete,
        marked as f64 / cycles,
    );
    op_row(ops, label, "worker: get_job", &get_job, 1.0);
    op_row(ops, label, "worker: finish_job_if_done", &finish, 0.0);
    // The heartbeat's fold, as after any 5 s of work.
    store.fold_counts().await?;

    progress(format!("relational ({label}): retrieval and listing reads"));
    let (world, run) = (l.world, l.run);
    // The hits of `calls` retrievals: HITS entries drawn at random from the sample.
    let mut state = 0x5eed_u64;
    let hits: Vec<Vec<(Uuid, SourceId, ChunkId)>> = (0..calls)
        .map(|_| {
            (0..HITS)
                .map(|_| l.sample[(splitmix(&mut state) % l.sample.len() as u64) as usize])
                .collect()
        })
        .collect();
    let (lat, rows) = timed(calls, |_| {
        let store = store.clone();
        async move { Ok(store.world_for_retrieval(world, HITS as u64).await?.map_or(0, |_| 1)) }
    })
    .await?;
    op_row(ops, label, "retrieve: world_for_retrieval (≤ 10)", &lat, rows);
    let (lat, rows) = timed(calls, |i| {
        let (store, ids) = (store.clone(), hits[i].iter().map(|h| h.0).collect::<Vec<_>>());
        async move { Ok(store.chunks_by_points(world, run, &ids).await?.len()) }
    })
    .await?;
    op_row(ops, label, "verify: chunks_by_points (10 ids)", &lat, rows);
    let (lat, rows) = timed(calls, |i| {
        let (store, ids) = (store.clone(), hits[i].iter().map(|h| h.0).collect::<Vec<_>>());
        async move { Ok(store.hits_by_points(world, run, &ids).await?.len()) }
    })
    .await?;
    op_row(ops, label, "verify: hits_by_points (10 ids, with sources)", &lat, rows);
    // The context of those hits, as parent expansion reads it: their parents, then the outlines
    // of the chunks those hold, then the texts of what the plan keeps (here all of them).
    let parents: Vec<Vec<(SourceId, u32, u32)>> = {
        let mut all = Vec::with_capacity(calls);
        for ids in &hits {
            let chunks = store
                .chunks_by_points(world, run, &ids.iter().map(|h| h.0).collect::<Vec<_>>())
                .await?;
            let windows: Vec<(SourceId, u32, u32)> = chunks
                .iter()
                .map(|v| (v.chunk.source_id, v.chunk.chunk_number, v.chunk.chunk_number))
                .collect();
            all.push(windows);
        }
        all
    };
    let (lat, rows) = timed(calls, |i| {
        let (store, windows) = (store.clone(), parents[i].clone());
        async move { Ok(store.parents_over(run, &windows).await?.len()) }
    })
    .await?;
    op_row(ops, label, "context: parents_over (10 hits)", &lat, rows);
    let mut sections = Vec::with_capacity(calls);
    for windows in &parents {
        let found = store.parents_over(run, windows).await?;
        sections.push(
            found
                .iter()
                .map(|p| (p.source_id, p.parent.first_chunk, p.parent.last_chunk))
                .collect::<Vec<_>>(),
        );
    }
    let (lat, rows) = timed(calls, |i| {
        let (store, windows) = (store.clone(), sections[i].clone());
        async move { Ok(store.chunk_outlines(world, run, &windows).await?.len()) }
    })
    .await?;
    op_row(ops, label, "context: chunk_outlines (their parents)", &lat, rows);
    let (lat, rows) = timed(calls, |i| {
        let (store, windows) = (store.clone(), sections[i].clone());
        async move { Ok(store.chunk_windows(world, run, &windows).await?.len()) }
    })
    .await?;
    op_row(ops, label, "context: chunk_windows (their parents' texts)", &lat, rows);

    let n_sources = l.sources.len() as u64;
    let pick = |i: usize| l.sources[(i * 7919) % l.sources.len()];
    for (what, offset) in [
        ("list: list_sources, first page (100)", 0),
        (
            "list: list_sources, last page",
            n_sources.saturating_sub(u64::from(PAGE)),
        ),
    ] {
        let (lat, rows) = timed(calls, |_| {
            let store = store.clone();
            async move {
                let window = Window {
                    offset,
                    limit: u64::from(PAGE),
                };
                Ok(store.list_sources(world, window).await?.len())
            }
        })
        .await?;
        op_row(ops, label, what, &lat, rows);
    }
    for (what, offset) in [
        ("list: list_chunks, first page (100)", 0),
        (
            "list: list_chunks, last page",
            l.per_source.saturating_sub(u64::from(PAGE)),
        ),
    ] {
        let (lat, rows) = timed(calls, |i| {
            let (store, source) = (store.clone(), pick(i));
            async move { Ok(store.list_chunks(world, source, offset, PAGE).await?.chunks.len()) }
        })
        .await?;
        op_row(ops, label, what, &lat, rows);
    }
    let (lat, rows) = timed(calls, |i| {
        let (store, source) = (store.clone(), pick(i));
        async move { Ok(store.source_counts(world, source).await?.chunks as usize) }
    })
    .await?;
    op_row(ops, label, "list: source_counts", &lat, rows);
    let (lat, rows) = timed(calls, |_| {
        let store = store.clone();
        async move { Ok(store.world_stats(world).await?.chunks as usize) }
    })
    .await?;
    op_row(ops, label, "world: world_stats (GET a world)", &lat, rows);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// sizes

async fn sqlite_pool(url: &str) -> Result<sqlx::SqlitePool> {
    let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)?.read_only(true);
    Ok(sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await?)
}

async fn sqlite_sizes(
    pool: &sqlx::SqlitePool,
    label: &str,
    url: &str,
    rows: u64,
    sizes: &mut Table,
    notes: &mut Vec<String>,
) -> Result<()> {
    let path = url.trim_start_matches("sqlite://");
    let files: Vec<(String, u64)> = ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| {
            let file = format!("{path}{suffix}");
            let bytes = disk_usage(std::path::Path::new(&file)).0;
            (format!("quarry.db{suffix}"), bytes)
        })
        .collect();
    let total: u64 = files.iter().map(|f| f.1).sum();
    let per_table: std::result::Result<Vec<(String, i64, i64)>, sqlx::Error> = sqlx::query_as(
        "SELECT m.tbl_name, \
         SUM(CASE WHEN m.type = 'table' THEN d.pgsize ELSE 0 END) AS t, \
         SUM(CASE WHEN m.type = 'index' THEN d.pgsize ELSE 0 END) AS i \
         FROM dbstat d JOIN sqlite_master m ON m.name = d.name \
         GROUP BY m.tbl_name ORDER BY t + i DESC LIMIT 8",
    )
    .fetch_all(pool)
    .await;
    match per_table {
        Ok(tables) => {
            for (name, table, indexes) in tables {
                size_row(sizes, label, &name, table as u64, indexes as u64, rows);
            }
        }
        Err(err) => notes.push(format!("{label}: no table sizes (dbstat unavailable: {err})")),
    }
    let listed: Vec<String> = files
        .iter()
        .map(|(name, bytes)| format!("{name} {} MiB", num(mib(*bytes), 0)))
        .collect();
    sizes.row(vec![
        "(the files)".into(),
        label.to_owned(),
        num(mib(total), 0),
        String::new(),
        num(total as f64 / rows as f64, 0),
    ]);
    notes.push(format!("{label}: files (blocks allocated): {}", listed.join(", ")));
    Ok(())
}

async fn pg_sizes(pool: &sqlx::PgPool, label: &str, rows: u64, sizes: &mut Table) -> Result<()> {
    let tables: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT relname::text, pg_table_size(oid), pg_indexes_size(oid) FROM pg_class \
         WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace \
         ORDER BY pg_total_relation_size(oid) DESC LIMIT 8",
    )
    .fetch_all(pool)
    .await?;
    for (name, table, indexes) in tables {
        size_row(sizes, label, &name, table as u64, indexes as u64, rows);
    }
    let total: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
        .fetch_one(pool)
        .await?;
    sizes.row(vec![
        "(pg_database_size)".into(),
        label.to_owned(),
        num(mib(total as u64), 0),
        String::new(),
        num(total as f64 / rows as f64, 0),
    ]);
    Ok(())
}

fn size_row(sizes: &mut Table, label: &str, name: &str, table: u64, indexes: u64, rows: u64) {
    sizes.row(vec![
        name.to_owned(),
        label.to_owned(),
        num(mib(table), 1),
        num(mib(indexes), 1),
        num((table + indexes) as f64 / rows as f64, 0),
    ]);
}

// ---------------------------------------------------------------------------------------------
// plans

/// A value bound to a statement shown with its plan.
#[derive(Clone, Debug)]
enum Arg {
    Id(Uuid),
    Int(i64),
    Time(DateTime<Utc>),
    Text(String),
}

/// A statement of the hot paths, as the store runs it, with realistic values.
struct Statement {
    name: &'static str,
    /// Where in `src/store/` the text comes from.
    origin: &'static str,
    sql: String,
    args: Vec<Arg>,
}

macro_rules! bind_all {
    ($query:expr, $args:expr) => {{
        let mut query = $query;
        for arg in $args {
            query = match arg {
                Arg::Id(v) => query.bind(*v),
                Arg::Int(v) => query.bind(*v),
                Arg::Time(v) => query.bind(*v),
                Arg::Text(v) => query.bind(v.clone()),
            };
        }
        query
    }};
}

/// `$first…$first+n-1` in parentheses (`in_list` in `src/store/rows.rs`).
fn in_list(first: usize, n: usize) -> String {
    let params: Vec<String> = (first..first + n).map(|i| format!("${i}")).collect();
    format!("({})", params.join(", "))
}

// The statements, as the store runs them.
use quarry::store::statements::{
    CHUNKS_BY_POINTS, CLAIM, CLAIM_OPEN, CLAIM_READ, FINISH_IF_DONE, HITS_BY_POINTS, JOB_ERRORS, LIST_CHUNKS,
    LIST_CHUNKS_TOTAL, LIST_SOURCES, REUSABLE, REUSABLE_TAIL, SOURCE_COUNTS, WORLD_FOR_RETRIEVAL, WORLD_STATS,
    complete_mark, parents_over_union, shown,
};

/// `sql` as the store of `kind` runs it (SQLite reads retrieval's sources through an index).
fn for_store(kind: StoreKind, sql: &str) -> String {
    match kind {
        StoreKind::Sqlite => shown::<sqlx::Sqlite>(sql),
        StoreKind::Postgres => shown::<sqlx::Postgres>(sql),
    }
}

/// The statements in the order a claim cycle, a retrieval and the listings run them, bound to
/// values from the load; `chunk` is the entry the mark names (a leased one for PostgreSQL,
/// whose plans are executed).
fn statements(l: &Loaded, kind: StoreKind, chunk: Uuid) -> Vec<Statement> {
    let stamp = now();
    let lease = stamp + chrono::Duration::minutes(10);
    let owner = Arg::Text("bench-explain".into());
    let claim = match kind {
        StoreKind::Sqlite => CLAIM,
        StoreKind::Postgres => CLAIM_OPEN,
    };
    let (world, run) = (l.world.0, l.run.0);
    let hits: Vec<(Uuid, SourceId, ChunkId)> = l
        .sample
        .iter()
        .step_by(l.sample.len().div_ceil(HITS).max(1))
        .copied()
        .collect();
    let chunk = if chunk.is_nil() {
        hits.first().map_or(Uuid::nil(), |h| h.2.0)
    } else {
        chunk
    };
    let mut sources: Vec<Uuid> = hits.iter().map(|h| h.1.0).collect();
    sources.sort();
    sources.dedup();
    let source = l.sources[l.sources.len() / 2].0;
    let claimed: Vec<Uuid> = std::iter::once(chunk)
        .chain(l.sample.iter().map(|h| h.2.0))
        .take(WORKER_CLAIM as usize)
        .collect();
    let mut statements = vec![
        Statement {
            name: "worker: claim_work, the claim",
            origin: "work.rs CLAIM",
            sql: claim.into(),
            args: vec![
                owner.clone(),
                Arg::Int(i64::from(WORKER_CLAIM)),
                Arg::Time(lease),
                Arg::Time(stamp),
            ],
        },
        Statement {
            name: "worker: claim_work, reading the claimed entries",
            origin: "work.rs CLAIM_READ",
            // The ids the claim returned; the sample's stand in (the plan is the same).
            sql: format!("{CLAIM_READ}{}", in_list(1, claimed.len())),
            args: claimed.iter().map(|c| Arg::Id(*c)).collect(),
        },
        Statement {
            name: "worker: find_reusable (32 text hashes)",
            origin: "retrieval.rs REUSABLE",
            sql: format!("{REUSABLE} AND m.world_id = $2{REUSABLE_TAIL}{}", in_list(3, 32)),
            args: [Arg::Text("quarry_bench".into()), Arg::Id(world)]
                .into_iter()
                .chain((0..32).map(|i| Arg::Text(format!("{i:064x}"))))
                .collect(),
        },
        Statement {
            name: "worker: complete_work, marking one entry",
            origin: "work.rs COMPLETE_MARK",
            sql: complete_mark(1),
            args: vec![
                owner.clone(),
                Arg::Time(stamp),
                Arg::Id(l.queue.0),
                Arg::Id(run),
                Arg::Id(chunk),
                Arg::Text("0".repeat(64)),
                Arg::Id(chunk),
            ],
        },
        Statement {
            name: "worker: get_job, the failed entries",
            origin: "jobs.rs JOB_ERRORS",
            sql: JOB_ERRORS.into(),
            args: vec![Arg::Id(l.queue.0), Arg::Int(100)],
        },
        Statement {
            name: "worker: finish_job_if_done",
            origin: "jobs.rs FINISH_IF_DONE",
            sql: FINISH_IF_DONE.into(),
            args: vec![Arg::Id(l.queue.0), Arg::Time(stamp)],
        },
        Statement {
            name: "retrieve: world_for_retrieval",
            origin: "retrieval.rs WORLD_FOR_RETRIEVAL",
            sql: WORLD_FOR_RETRIEVAL.into(),
            args: vec![Arg::Id(world), Arg::Int(HITS as i64)],
        },
        Statement {
            name: "verify: chunks_by_points (10 ids)",
            origin: "retrieval.rs CHUNKS_BY_POINTS",
            sql: for_store(kind, &format!("{CHUNKS_BY_POINTS}{}", in_list(1, hits.len()))),
            args: hits.iter().map(|h| Arg::Id(h.0)).collect(),
        },
        Statement {
            name: "verify: hits_by_points (10 ids, with their sources' details)",
            origin: "retrieval.rs HITS_BY_POINTS",
            sql: for_store(kind, &format!("{HITS_BY_POINTS}{}", in_list(1, hits.len()))),
            args: hits.iter().map(|h| Arg::Id(h.0)).collect(),
        },
        Statement {
            name: "context: parents_over (10 hits)",
            origin: "parents.rs PARENTS_OVER",
            sql: parents_over_union(hits.len()),
            args: std::iter::once(Arg::Id(run))
                .chain(hits.iter().flat_map(|h| [Arg::Id(h.1.0), Arg::Int(5), Arg::Int(5)]))
                .collect(),
        },
        Statement {
            name: "list: list_sources, first page",
            origin: "sources.rs LIST_SOURCES",
            sql: LIST_SOURCES.into(),
            args: vec![Arg::Id(world), Arg::Int(i64::from(PAGE)), Arg::Int(0)],
        },
        Statement {
            name: "list: list_chunks, first page",
            origin: "sources.rs LIST_CHUNKS",
            sql: LIST_CHUNKS.into(),
            args: vec![Arg::Id(world), Arg::Id(source), Arg::Int(i64::from(PAGE)), Arg::Int(0)],
        },
        Statement {
            name: "list: list_chunks, the total",
            origin: "sources.rs LIST_CHUNKS_TOTAL",
            sql: LIST_CHUNKS_TOTAL.into(),
            args: vec![Arg::Id(world), Arg::Id(source)],
        },
        Statement {
            name: "list: source_counts",
            origin: "sources.rs SOURCE_COUNTS",
            sql: SOURCE_COUNTS.into(),
            args: vec![Arg::Id(world), Arg::Id(source)],
        },
        Statement {
            name: "world: world_stats",
            origin: "worlds.rs WORLD_STATS",
            sql: WORLD_STATS.into(),
            args: vec![Arg::Id(world)],
        },
    ];
    if hits.is_empty() {
        statements.retain(|s| !s.name.starts_with("verify"));
    }
    statements
}

fn render(label: &str, statement: &Statement, plan: Result<Vec<String>>) -> String {
    let args: Vec<String> = statement
        .args
        .iter()
        .map(|a| match a {
            Arg::Id(v) => v.to_string(),
            Arg::Int(v) => v.to_string(),
            Arg::Time(v) => v.to_rfc3339(),
            Arg::Text(v) => format!("'{v}'"),
        })
        .collect();
    let body = match plan {
        Ok(lines) => lines.join("\n"),
        Err(err) => format!("(explaining failed: {err})"),
    };
    format!(
        "#### {label}: {} ({})\n\n```text\n{}\n-- bound: {}\n{body}\n```",
        statement.name,
        statement.origin,
        statement.sql,
        args.join(", ")
    )
}

/// `EXPLAIN QUERY PLAN`, its rows indented as the tree they form.
async fn explain_sqlite(pool: &sqlx::SqlitePool, statement: &Statement) -> Result<Vec<String>> {
    let sql = sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {}", statement.sql));
    let query = bind_all!(sqlx::query_as::<_, (i64, i64, i64, String)>(sql), &statement.args);
    let rows = query.fetch_all(pool).await?;
    let mut depth: HashMap<i64, usize> = HashMap::new();
    Ok(rows
        .into_iter()
        .map(|(id, parent, _, detail)| {
            let d = depth.get(&parent).map_or(0, |d| d + 1);
            depth.insert(id, d);
            format!("{}{detail}", "  ".repeat(d))
        })
        .collect())
}

/// `EXPLAIN (ANALYZE, BUFFERS)` of every statement, executed in one transaction that is rolled
/// back: the claim leases entries for the statements after it, as a worker's claim does.
async fn explain_postgres(pool: &sqlx::PgPool, l: &Loaded) -> Result<Vec<String>> {
    let label = StoreKind::Postgres.name();
    let mut tx = pool.begin().await?;
    let mut out = Vec::new();
    let all = statements(l, StoreKind::Postgres, Uuid::nil());
    let mut chunk = Uuid::nil();
    for (i, statement) in all.iter().enumerate() {
        let mut statement = Statement {
            name: statement.name,
            origin: statement.origin,
            sql: statement.sql.clone(),
            args: statement.args.clone(),
        };
        if statement.origin == "work.rs COMPLETE_MARK" && !chunk.is_nil() {
            // The mark names an entry the claim above leased (in its `CASE` and its list).
            statement.args[4] = Arg::Id(chunk);
            statement.args[6] = Arg::Id(chunk);
        }
        let sql = sqlx::AssertSqlSafe(format!("EXPLAIN (ANALYZE, BUFFERS) {}", statement.sql));
        let query = bind_all!(sqlx::query_scalar::<_, String>(sql), &statement.args);
        let plan = query.fetch_all(&mut *tx).await.map_err(Into::into);
        out.push(render(label, &statement, plan));
        if i == 0 {
            chunk = sqlx::query_scalar("SELECT chunk_id FROM manifest_entries WHERE lease_owner = $1 LIMIT 1")
                .bind("bench-explain")
                .fetch_optional(&mut *tx)
                .await?
                .unwrap_or(Uuid::nil());
        }
    }
    tx.rollback().await?;
    Ok(out)
}
