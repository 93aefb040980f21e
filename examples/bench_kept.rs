//! What keeping each embedded chunk's vector in the relational store costs: bytes per chunk in
//! `chunk_vectors` (rows, primary key index and, on PostgreSQL, out-of-line storage) and the
//! time it adds to marking a claim embedded, at 256, 768 and 1536 dimensions, on SQLite and
//! (with `--postgres`) PostgreSQL.
//!
//! ```text
//! cargo run --release --example bench_kept                         # SQLite only
//! cargo run --release --example bench_kept -- --postgres postgres://postgres@127.0.0.1:5432/postgres
//! cargo run --release --example bench_kept -- --chunks 2000 --dims 384
//! ```
//!
//! Each configuration gets a fresh database (a temporary SQLite file; a PostgreSQL database
//! created on the server given, dropped afterwards) with one world of `--chunks` chunks, marked
//! embedded through the store's own `complete_work` in claims of 32, as the workers do. Sizes
//! come from SQLite's `dbstat` and PostgreSQL's `pg_total_relation_size`. The write overhead is
//! the kept-vector statement alone (one multi-row upsert per claim), run again over the same
//! rows in transactions of 32: what the marking transaction does more than it did before
//! vectors were kept. Timings depend on the build: run it with `--release`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use quarry::domain::{
    ChunkingProfile, EmbeddedVector, EmbeddingProfile, JobId, NewChunk, NewSource, NewWorld, ProviderKind, RunId,
    SourceId, WorldId, now,
};
use quarry::store::Store;

#[path = "bench/pgdb.rs"]
mod pgdb;
use sqlx::ConnectOptions as _;

const HELP: &str = "\
usage: bench_kept [options]
  --chunks N       chunks per configuration (default 5000)
  --dims LIST      dimensions (default 256,768,1536)
  --postgres URL   also measure PostgreSQL: a database is created on this server and dropped after
";

/// Entries per claim and per marking transaction, as the workers claim them.
const CLAIM: u32 = 32;

/// Writes every kept vector again with the statement the marking runs (one upsert of a claim's
/// rows, bytes and all), `CLAIM` rows per transaction begun with `$begin`, on connection `$conn`
/// of database `$db`. Evaluates to the time it took. (A macro: one body, two databases.)
macro_rules! keep_again {
    ($conn:expr, $begin:expr, $db:ty) => {{
        let conn = $conn;
        let rows: Vec<(uuid::Uuid, String, Vec<u8>)> =
            sqlx::query_as("SELECT chunk_id, text_sha256, dense FROM chunk_vectors")
                .fetch_all(&mut *conn)
                .await?;
        let mut total = Duration::ZERO;
        for claim in rows.chunks(CLAIM as usize) {
            let started = Instant::now();
            sqlx::raw_sql($begin).execute(&mut *conn).await?;
            let mut insert =
                sqlx::QueryBuilder::<$db>::new("INSERT INTO chunk_vectors (chunk_id, text_sha256, dense) ");
            insert.push_values(claim, |mut row, (chunk, hash, dense)| {
                row.push_bind(*chunk)
                    .push_bind(hash.as_str())
                    .push_bind(dense.as_slice());
            });
            insert.push(
                " ON CONFLICT (chunk_id) DO UPDATE SET text_sha256 = excluded.text_sha256, dense = excluded.dense",
            );
            insert.build().execute(&mut *conn).await?;
            sqlx::raw_sql("COMMIT").execute(&mut *conn).await?;
            total += started.elapsed();
        }
        total
    }};
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

struct Options {
    chunks: u32,
    dims: Vec<u32>,
    postgres: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = match parse(std::env::args().skip(1)) {
        Ok(Some(options)) => options,
        Ok(None) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            eprintln!("bench_kept: {err}\n{HELP}");
            return ExitCode::FAILURE;
        }
    };
    match run(&options).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench_kept: {err}");
            ExitCode::FAILURE
        }
    }
}

fn parse(mut args: impl Iterator<Item = String>) -> std::result::Result<Option<Options>, String> {
    let mut options = Options {
        chunks: 5000,
        dims: vec![256, 768, 1536],
        postgres: None,
    };
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--chunks" => options.chunks = value()?.parse().map_err(|e| format!("--chunks: {e}"))?,
            "--dims" => {
                options.dims = value()?
                    .split(',')
                    .map(|d| d.trim().parse().map_err(|e| format!("--dims: {e}")))
                    .collect::<std::result::Result<_, _>>()?;
            }
            "--postgres" => options.postgres = Some(value()?),
            "--help" | "-h" => return Ok(None),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if options.chunks == 0 || options.dims.contains(&0) {
        return Err("--chunks and --dims must be positive".into());
    }
    Ok(Some(options))
}

/// One configuration's figures.
struct Measured {
    bytes_per_chunk: f64,
    mark_ms_per_claim: f64,
    keep_ms_per_claim: f64,
}

async fn run(options: &Options) -> Result<()> {
    println!(
        "{} chunks per configuration, claims of {CLAIM}; bytes per chunk include the row, the primary key \
         index and out-of-line storage",
        options.chunks
    );
    println!();
    println!(
        "{:<9} {:>5} {:>11} {:>13} {:>9} {:>15} {:>15}",
        "store", "dims", "raw bytes", "bytes/chunk", "overhead", "mark ms/claim", "keep ms/claim"
    );
    for &dims in &options.dims {
        let sqlite = measure_sqlite(options.chunks, dims).await?;
        print_row("sqlite", dims, &sqlite);
        if let Some(admin) = &options.postgres {
            let postgres = measure_postgres(admin, options.chunks, dims).await?;
            print_row("postgres", dims, &postgres);
        }
    }
    if options.postgres.is_none() {
        println!("\n(PostgreSQL not measured: pass --postgres URL)");
    }
    Ok(())
}

fn print_row(store: &str, dims: u32, m: &Measured) {
    let raw = 4 * dims;
    println!(
        "{store:<9} {dims:>5} {raw:>11} {:>13.0} {:>8.1}% {:>15.2} {:>15.2}",
        m.bytes_per_chunk,
        (m.bytes_per_chunk / f64::from(raw) - 1.0) * 100.0,
        m.mark_ms_per_claim,
        m.keep_ms_per_claim,
    );
}

async fn measure_sqlite(chunks: u32, dims: u32) -> Result<Measured> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("quarry.db").display());
    let store = quarry::store::connect(&url).await?;
    let mark = fill(&store, chunks, dims).await?;
    store.close().await;

    let options: sqlx::sqlite::SqliteConnectOptions = url.parse()?;
    let mut conn = options
        .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
        .connect()
        .await?;
    let bytes: i64 = sqlx::query_scalar(
        "SELECT SUM(pgsize) FROM dbstat WHERE name IN ('chunk_vectors', 'sqlite_autoindex_chunk_vectors_1')",
    )
    .fetch_one(&mut conn)
    .await?;
    let keep = keep_again!(&mut conn, "BEGIN IMMEDIATE", sqlx::Sqlite);
    Ok(Measured {
        bytes_per_chunk: bytes as f64 / f64::from(chunks),
        mark_ms_per_claim: per_claim(mark, chunks),
        keep_ms_per_claim: per_claim(keep, chunks),
    })
}

async fn measure_postgres(admin: &str, chunks: u32, dims: u32) -> Result<Measured> {
    use sqlx::Connection as _;
    let (url, name) = pgdb::create(admin, "quarry_bench_kept").await?;
    let measured = async {
        let store = quarry::store::connect(&url).await?;
        let mark = fill(&store, chunks, dims).await?;
        store.close().await;
        let mut db = sqlx::PgConnection::connect(&url).await?;
        let bytes: i64 = sqlx::query_scalar("SELECT pg_total_relation_size('chunk_vectors')")
            .fetch_one(&mut db)
            .await?;
        let keep = keep_again!(&mut db, "BEGIN", sqlx::Postgres);
        db.close().await?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(Measured {
            bytes_per_chunk: bytes as f64 / f64::from(chunks),
            mark_ms_per_claim: per_claim(mark, chunks),
            keep_ms_per_claim: per_claim(keep, chunks),
        })
    }
    .await;
    pgdb::drop(admin, &name).await?;
    measured
}

fn per_claim(total: Duration, chunks: u32) -> f64 {
    total.as_secs_f64() * 1000.0 / (f64::from(chunks) / f64::from(CLAIM))
}

/// One world of `chunks` chunks at `dims` dimensions, every entry claimed and marked embedded
/// the way the workers do it. Returns the time spent marking.
async fn fill(store: &Arc<dyn Store>, chunks: u32, dims: u32) -> Result<Duration> {
    let created = now();
    let world = store
        .create_world(NewWorld {
            id: WorldId::new(),
            name: "kept".into(),
            embedding: EmbeddingProfile {
                provider: ProviderKind::OpenAi,
                model: "text-embedding-3-small".into(),
                dimensions: dims,
            },
            chunking: ChunkingProfile {
                max_tokens: 512,
                overlap_tokens: 64,
                parent_max_tokens: 2048,
                context_prefix: false,
            },
            hybrid: false,
            run: RunId::new(),
            now: created,
        })
        .await?;
    let new_chunks: Vec<NewChunk> = (0..chunks)
        .map(|i| {
            let text = format!("Chunk {i} of the benchmark world, a sentence long.");
            NewChunk {
                chunk_number: i,
                char_start: u64::from(i) * 64,
                char_end: u64::from(i) * 64 + text.chars().count() as u64,
                token_count: 12,
                chunk_text: text,
                overlap_text: String::new(),
                page: None,
                embed_prefix: String::new(),
                embed_prefix_tokens: 0,
            }
        })
        .collect();
    store
        .add_source(
            &NewSource {
                key: None,
                id: SourceId::new(),
                world_id: world.id,
                run: world.active_run,
                filename: "bench.txt".into(),
                content_type: "text/plain".into(),
                text: "x".repeat(chunks as usize * 64),
                details: Default::default(),
                now: created,
            },
            new_chunks,
            JobId::new(),
        )
        .await?;
    let mut marking = Duration::ZERO;
    let mut seed = 0x9e37_79b9_u32;
    loop {
        let at = now();
        let items = store
            .claim_work("bench", CLAIM, at + chrono::Duration::minutes(5), at)
            .await?;
        if items.is_empty() {
            return Ok(marking);
        }
        let done: Vec<EmbeddedVector> = items
            .iter()
            .map(|item| EmbeddedVector {
                chunk_id: item.chunk_id,
                text_sha256: item.text_sha256.clone(),
                // Values spread like a real embedding's (random mantissas: floats that compress
                // as badly as real ones).
                dense: (0..dims).map(|_| next(&mut seed)).collect(),
            })
            .collect();
        let started = Instant::now();
        let marked = store
            .complete_work("bench", items[0].job_id, items[0].run_id, &done, 0, Utc::now())
            .await?;
        marking += started.elapsed();
        if marked != items.len() as u64 {
            return Err(format!("marked {marked} of {}", items.len()).into());
        }
    }
}

/// A uniform value in [-0.1, 0.1) from a xorshift generator.
fn next(state: &mut u32) -> f32 {
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    (*state as f32 / u32::MAX as f32 - 0.5) * 0.2
}
