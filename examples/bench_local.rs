//! Throughput of the local embedding provider (all-MiniLM-L6-v2 on ONNX Runtime, CPU), fp32 and
//! int8 (`all-MiniLM-L6-v2-int8`): chunks per second for 128- and 256-token chunks at batch
//! sizes 1, 8 and 32, through the provider's public `embed` (so tokenizing, the blocking-pool
//! hop and pooling are all included), and int8's ratio to fp32 at each — and,
//! in the same run on the same texts, the peers' figures and quarry's ratio to each, when a
//! Python environment with them is at hand (`scripts/bench-peers-setup` makes one in
//! `target/bench-peers`; `QUARRY_BENCH_PEERS_PYTHON` names another).
//!
//! ```text
//! scripts/fetch-model
//! scripts/bench-peers-setup          # optional: the peers, from the Python package index
//! cargo run --release --example bench_local [MODEL_DIR]
//! ```
//!
//! MODEL_DIR defaults to `$QUARRY_MODEL_DIR`, else `models/all-minilm-l6-v2`. Chunks are cut
//! from real English prose to exactly 128 or 256 tokens ([CLS] and [SEP] included) by the
//! model's own tokenizer. Requests run one after another, each a single batch; with a peer,
//! quarry and the peer (one process, model loaded once) take turns of about 0.3 s until each
//! has run 10 s, so both are measured in the same moments (a shared machine's speed drifts by
//! more than the gap being measured). The peers
//! (`scripts/bench-peers.py`): ONNX Runtime's Python API on the same graph (model.onnx, or
//! model-int8.onnx for the int8 rows, with the session options quarry gives it) with 2 intra-op
//! threads, tokenizing with the same tokenizer.json (what fastembed does), and the same
//! vectors' cosine to quarry's. The peer runs a batch as one padded pass; quarry runs the int8
//! model one text per pass (see `providers::local`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use quarry::providers::local::{DIMENSIONS, LocalModel, LocalProvider, MODEL_NAME};

/// The graph file of each model in the model folder, for the peer.
fn graph_file(model: LocalModel) -> &'static str {
    match model {
        LocalModel::Fp32 => "model.onnx",
        LocalModel::Int8 => "model-int8.onnx",
    }
}
use quarry::providers::{EmbedMode, EmbedRequest, EmbeddingProvider};
use tokenizers::Tokenizer;

const TOKEN_LENGTHS: [u32; 2] = [128, 256];
const BATCH_SIZES: [usize; 3] = [1, 8, 32];
/// Each configuration runs for at least this long (after one warm-up request).
const MIN_RUN: Duration = Duration::from_secs(10);
const MIN_REQUESTS: u32 = 3;
/// About how long one turn of requests runs (quarry's, then the peer's).
const TURN: Duration = Duration::from_millis(300);

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench_local: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let dir = std::env::args_os()
        .nth(1)
        .or_else(|| std::env::var_os("QUARRY_MODEL_DIR"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/all-minilm-l6-v2"));
    let provider = LocalProvider::new(&dir, 1);
    let loading = Instant::now();
    provider.ready(LocalModel::Fp32).await?;
    let load_time = loading.elapsed();
    provider.ready(LocalModel::Int8).await?;

    let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))?;
    tokenizer.with_truncation(None)?;
    tokenizer.with_padding(None);

    print_machine(load_time);
    println!();
    let peers = peers_python();
    let mut peers_by_model = Vec::new();
    for model in LocalModel::ALL {
        let peer = peers
            .as_deref()
            .map(|python| Peer::start(python, &dir, graph_file(model)))
            .transpose()?;
        peers_by_model.push((model, peer));
    }
    println!(
        "{:>5}  {:>6}  {:>5}  {:>9}  {:>9}  {:>10}  {:>8}{}",
        "model",
        "tokens",
        "batch",
        "chunks/s",
        "int8/fp32",
        "ms/request",
        "requests",
        if peers.is_some() {
            "   ORT-py/s   quarry/ORT-py   cosine"
        } else {
            ""
        }
    );
    for tokens in TOKEN_LENGTHS {
        let chunks = cut_chunks(&tokenizer, &provider, tokens, BATCH_SIZES[BATCH_SIZES.len() - 1]).await?;
        for batch in BATCH_SIZES {
            let mut fp32_rate = f64::NAN;
            for (model, peer) in peers_by_model.iter_mut() {
                let model = *model;
                let texts = &chunks[..batch];
                let request = EmbedRequest {
                    model: model.name(),
                    dimensions: DIMENSIONS,
                    mode: EmbedMode::Document,
                    texts,
                    token_counts: None,
                };
                let warm = Instant::now();
                let ours = provider.embed(None, request).await?; // warm-up
                // Turns of about TURN each; with a peer, quarry and the peer alternate turns until
                // each has run MIN_RUN, so both are measured in the same moments of a machine whose
                // speed drifts by more than the gap being measured.
                let per_turn = (TURN.as_secs_f64() / warm.elapsed().as_secs_f64().max(1e-3)).clamp(1.0, 1000.0) as u32;
                let (mut ours_s, mut theirs_s, mut requests, mut cosine) = (0.0f64, 0.0f64, 0u32, 1.0f64);
                if let Some(peer) = peer.as_mut() {
                    let (_, vectors) = peer.turn(texts, 1)?; // warm-up
                    cosine = lowest_cosine(&ours, &vectors);
                }
                while requests < MIN_REQUESTS || ours_s < MIN_RUN.as_secs_f64() {
                    let started = Instant::now();
                    for _ in 0..per_turn {
                        provider.embed(None, request).await?;
                    }
                    ours_s += started.elapsed().as_secs_f64();
                    requests += per_turn;
                    if let Some(peer) = peer.as_mut() {
                        theirs_s += peer.turn(texts, per_turn)?.0;
                    }
                }
                let rate = f64::from(requests) * batch as f64 / ours_s;
                let versus = match model {
                    LocalModel::Fp32 => {
                        fp32_rate = rate;
                        "–".to_owned()
                    }
                    LocalModel::Int8 => format!("{:.2}×", rate / fp32_rate),
                };
                let label = match model {
                    LocalModel::Fp32 => "fp32",
                    LocalModel::Int8 => "int8",
                };
                let compared = if peer.is_some() {
                    let peer_rate = f64::from(requests) * batch as f64 / theirs_s;
                    format!("   {peer_rate:>9.1}   {:>12.2}×   {cosine:.6}", rate / peer_rate)
                } else {
                    String::new()
                };
                println!(
                    "{label:>5}  {tokens:>6}  {batch:>5}  {rate:>9.1}  {versus:>9}  {:>10.1}  {requests:>8}{compared}",
                    ours_s * 1000.0 / f64::from(requests),
                );
            }
        }
    }
    if peers.is_none() {
        println!("\n(no peers: run scripts/bench-peers-setup for ONNX Runtime's Python figures in the same run)");
    }
    Ok(())
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The Python with the peers installed, if any.
fn peers_python() -> Option<PathBuf> {
    let python = std::env::var_os("QUARRY_BENCH_PEERS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-peers/bin/python"));
    python.is_file().then_some(python)
}

/// `scripts/bench-peers.py`, running: ONNX Runtime's Python API with the model loaded, timing
/// the turns it is given.
struct Peer {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
}

impl Peer {
    fn start(python: &Path, model_dir: &Path, graph: &str) -> Result<Self, BoxError> {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/bench-peers.py");
        let mut child = std::process::Command::new(python)
            .arg(script)
            .arg(model_dir)
            .arg(graph)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        let input = child.stdin.take().ok_or("no stdin")?;
        let output = std::io::BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(Self { child, input, output })
    }

    /// `requests` requests of `texts` as one batch: how long they took, and the vectors.
    fn turn(&mut self, texts: &[String], requests: u32) -> Result<(f64, Vec<Vec<f32>>), BoxError> {
        use std::io::BufRead as _;
        let job = serde_json::json!({"texts": texts, "requests": requests});
        writeln!(self.input, "{job}")?;
        self.input.flush()?;
        let mut line = String::new();
        if self.output.read_line(&mut line)? == 0 {
            return Err(format!("bench-peers.py stopped ({:?})", self.child.try_wait()).into());
        }
        let answer: serde_json::Value = serde_json::from_str(&line)?;
        let seconds = answer["seconds"].as_f64().ok_or("no seconds")?;
        Ok((seconds, serde_json::from_value(answer["vectors"].clone())?))
    }
}

/// The lowest cosine between two sets of vectors, pair by pair.
fn lowest_cosine(ours: &[Vec<f32>], theirs: &[Vec<f32>]) -> f64 {
    ours.iter()
        .zip(theirs)
        .map(|(a, b)| {
            let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
            f64::from(dot / (norm(a) * norm(b)))
        })
        .fold(1.0, f64::min)
}

fn print_machine(load_time: Duration) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, name)| name.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    println!("local embedding throughput: {MODEL_NAME} (fp32) and {MODEL_NAME}-int8, ONNX Runtime 1.31.1 CPU");
    println!("cpu: {cpu}");
    println!("cores: {cores}; ONNX Runtime intra-op threads: {cores}");
    println!("model load: {} ms; one request at a time", load_time.as_millis());
}

/// `count` different chunks of exactly `tokens` tokens, cut at word starts from the prose below.
async fn cut_chunks(
    tokenizer: &Tokenizer,
    provider: &LocalProvider,
    tokens: u32,
    count: usize,
) -> Result<Vec<String>, Box<dyn std::error::Error + Send + Sync>> {
    let encoding = tokenizer.encode(PROSE, false)?;
    let pieces = encoding.get_tokens();
    let offsets = encoding.get_offsets();
    let body = tokens as usize - 2; // room for [CLS] and [SEP]
    let starts: Vec<usize> = (0..pieces.len().saturating_sub(body + 8))
        .filter(|&i| !pieces[i].starts_with("##"))
        .collect();
    if starts.len() < count {
        return Err(format!("the sample prose is too short for {count} chunks of {tokens} tokens").into());
    }
    let step = starts.len() / count;
    let mut chunks = Vec::with_capacity(count);
    for k in 0..count {
        let start = starts[k * step];
        // Cut after `body` tokens; if the cut splits a word so that it re-tokenizes
        // differently, move the end until the count is exact.
        let mut end = start + body;
        loop {
            let text = &PROSE[offsets[start].0..offsets[end - 1].1];
            let counted = provider.count_tokens(None, MODEL_NAME, &[text.to_owned()]).await?[0];
            match counted.cmp(&tokens) {
                std::cmp::Ordering::Equal => {
                    chunks.push(text.to_owned());
                    break;
                }
                std::cmp::Ordering::Greater if end > start + 1 => end -= 1,
                std::cmp::Ordering::Less if end < pieces.len() => end += 1,
                _ => return Err(format!("cannot cut a chunk of exactly {tokens} tokens").into()),
            }
        }
    }
    Ok(chunks)
}

/// Plain English prose (written for this benchmark) to cut chunks from.
const PROSE: &str = "\
The first lighthouses were little more than fires lit on hilltops, tended by whoever lived \
closest to the harbour. Sailors approaching an unfamiliar coast at night had few other ways to \
judge their distance from the rocks, and a single misreading could cost a ship, its cargo and \
everyone aboard. Over the centuries these fires moved into towers, the towers grew taller, and \
the people who kept them became a profession with its own rules, pay and pride.

Keeping a light was lonely, repetitive work. A keeper trimmed the wick every few hours, polished \
the brass and glass until no smear could dim the beam, and wrote the weather into a logbook \
that inspectors would read months later. On offshore stations, supply boats came when the sea \
allowed it, which in winter might mean weeks of waiting. Families who lived on the mainland \
stations kept gardens, schooled their children at the kitchen table and learned to sleep \
through the sound of the fog signal.

The great technical change came in the nineteenth century, when a French physicist designed a \
lens made of concentric rings of glass prisms. Instead of one heavy curved lens, which would \
have been impossibly thick, the rings bent the light from a single lamp into a narrow, intense \
beam that could be seen more than twenty miles away. Rotating the lens on a bed of mercury \
turned the steady glow into flashes, and each lighthouse was given its own pattern, so that a \
navigator who counted the seconds between flashes could tell exactly which headland he was \
looking at.

Fuel changed as well. Whale oil gave way to colza oil pressed from rapeseed, then to lard oil, \
then to kerosene, each cheaper or brighter than the last. Electricity arrived slowly, because \
running a cable to a rock in the open sea was expensive and storms broke what the engineers \
built. Many stations ran their own generators for decades, and keepers had to become \
mechanics as well as lamplighters.

By the middle of the twentieth century, automation began to replace the keepers themselves. \
Timers switched the lamps on at dusk, sensors detected fog, and a technician visiting once a \
month could look after a whole stretch of coast. Radio beacons and later satellite navigation \
meant that ships relied less on lights at all. The last keepers left their towers with mixed \
feelings: relief at the end of isolation, and sadness that a way of life had quietly ended.

Today many lighthouses are museums, holiday cottages or simply landmarks that appear on \
postcards. Volunteers repaint them, historians collect the old logbooks, and children climb the \
spiral stairs to look out over the water. The lights that still shine are mostly small, \
efficient lamps that need little care, but the towers remain, reminders of how much effort it \
once took to bring a ship safely home.

A modern reader might find the keepers' logbooks surprisingly moving. Between the entries about \
wind direction and oil consumption there are notes about a child's birthday, a gull with a \
broken wing nursed back to health, a ship that passed too close and the relief when it cleared \
the reef. The records were meant for officials, yet they preserve the texture of ordinary days: \
the bread that would not rise in damp weather, the letters that arrived three at a time, the \
first daffodils on the cliff path after a long and difficult winter.

Engineers who study the old towers today are often impressed by how well they were built. \
Granite blocks were cut to interlock like a puzzle, so that waves striking the base spread their \
force through the whole structure rather than prying stones loose. Some towers have stood for \
more than two hundred years on rocks that are covered by the sea at high tide, and they still \
need little more than fresh paint and new glazing to keep doing their job.";
