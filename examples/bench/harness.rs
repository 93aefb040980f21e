//! The benchmark's plumbing: quarry started in-process (the way the tests do it), a small HTTP
//! client for it, a closed-loop load runner with latency percentiles, `/proc` readers, a
//! "wait until the process is idle" helper and a plain table printer.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use quarry::api::AppState;
use quarry::app::App;
use quarry::config::Settings;
use quarry::deps::Deps;
use secrecy::SecretString;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T, E = BoxError> = std::result::Result<T, E>;

pub const TOKEN: &str = "bench-token";

/// A running quarry with its own SQLite file and vector folder in a temporary directory.
pub struct Quarry {
    pub addr: SocketAddr,
    pub state: AppState,
    pub deps: Deps,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<std::io::Result<()>>>,
    /// The temporary directory, removed on drop; `None` when the caller chose the directory.
    _dir: Option<tempfile::TempDir>,
}

impl Quarry {
    /// Starts quarry against an OpenAI-compatible server at `base_url` with `keys`;
    /// `tweak` adjusts anything else (scheduling, workers).
    pub async fn start(base_url: &str, keys: &[String], tweak: impl FnOnce(&mut Settings)) -> Result<Quarry> {
        Self::start_in(None, base_url, keys, tweak).await
    }

    /// [`Quarry::start`] with its data in `dir` (created if missing, kept afterwards) instead
    /// of a temporary directory.
    pub async fn start_in(
        dir: Option<&Path>,
        base_url: &str,
        keys: &[String],
        tweak: impl FnOnce(&mut Settings),
    ) -> Result<Quarry> {
        Self::start_on(dir, None, base_url, keys, tweak).await
    }

    /// [`Quarry::start`] on a vector store shared with other replicas in this process (the
    /// store URL is `tweak`'s to set, e.g. one PostgreSQL database for every replica).
    #[allow(dead_code)]
    pub async fn start_sharing(
        vectors: std::sync::Arc<dyn quarry::vector::VectorRepo>,
        base_url: &str,
        keys: &[String],
        tweak: impl FnOnce(&mut Settings),
    ) -> Result<Quarry> {
        Self::start_on(None, Some(vectors), base_url, keys, tweak).await
    }

    async fn start_on(
        dir: Option<&Path>,
        vectors: Option<std::sync::Arc<dyn quarry::vector::VectorRepo>>,
        base_url: &str,
        keys: &[String],
        tweak: impl FnOnce(&mut Settings),
    ) -> Result<Quarry> {
        let (path, temporary): (PathBuf, _) = match dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                (dir.to_owned(), None)
            }
            None => {
                let temporary = tempfile::Builder::new().prefix("quarry-bench-").tempdir()?;
                (temporary.path().to_owned(), Some(temporary))
            }
        };
        let mut settings = Settings::default();
        settings.server.addr = SocketAddr::from(([127, 0, 0, 1], 0));
        settings.server.shutdown_timeout_s = 10;
        settings.auth.tokens = vec![SecretString::from(TOKEN)];
        settings.store.url = SecretString::from(format!("sqlite://{}", path.join("quarry.db").display()));
        settings.vectors.path = path.join("vectors");
        settings.providers.openai.base_url = base_url.to_owned();
        settings.providers.openai.keys = keys.iter().map(|k| SecretString::from(k.clone())).collect();
        tweak(&mut settings);
        let app = match vectors {
            Some(vectors) => App::build_sharing(settings, vectors).await?,
            None => App::build(settings).await?,
        };
        let addr = app.local_addr();
        let (state, deps) = (app.state(), app.deps());
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(app.run_until(async move {
            let _ = stopped.await;
        }));
        Ok(Quarry {
            addr,
            state,
            deps,
            client: http_client(),
            stop: Some(stop),
            handle: Some(handle),
            _dir: temporary,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> Result<(u16, Value)> {
        let mut request = self.client.request(method, self.url(path)).bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok((status, value))
    }

    /// POST expecting `want`; anything else is an error carrying the body.
    pub async fn post(&self, path: &str, body: &Value, want: u16) -> Result<Value> {
        let (status, value) = self.call(reqwest::Method::POST, path, Some(body)).await?;
        if status != want {
            return Err(format!("POST {path}: HTTP {status}: {value}").into());
        }
        Ok(value)
    }

    pub async fn get(&self, path: &str) -> Result<Value> {
        let (status, value) = self.call(reqwest::Method::GET, path, None).await?;
        if status != 200 {
            return Err(format!("GET {path}: HTTP {status}: {value}").into());
        }
        Ok(value)
    }

    /// Creates an OpenAI text-embedding-3-small world; returns its JSON.
    pub async fn create_world(&self, name: &str, dimensions: u32, max_tokens: u32, overlap: u32) -> Result<Value> {
        let body = json!({
            "name": name,
            "embedding": {"provider": "openai", "model": "text-embedding-3-small", "dimensions": dimensions},
            "chunking": {"max_tokens": max_tokens, "overlap_tokens": overlap},
        });
        self.post("/v1/worlds", &body, 201).await
    }

    /// Adds a source; returns the job id.
    pub async fn add_source(&self, world: &str, filename: &str, text: &str) -> Result<String> {
        let body = json!({"filename": filename, "text": text, "content_type": "text/markdown"});
        let answer = self.post(&format!("/v1/worlds/{world}/sources"), &body, 202).await?;
        answer["job"]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("no job id in {answer}").into())
    }

    /// Stops quarry the way SIGTERM would and waits for it.
    pub async fn stop(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(handle) = self.handle.take() {
            handle.await??;
        }
        Ok(())
    }
}

impl Drop for Quarry {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// POSTs `body` as JSON with `token` as the bearer and returns the JSON answer; any status
/// outside 2xx is an error naming it with the answer. Errors are strings, as load closures
/// return them.
pub async fn post_json(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    body: &Value,
) -> std::result::Result<Value, String> {
    let response = client
        .post(url)
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body: Value = response.json().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("HTTP {status}: {body}"));
    }
    Ok(body)
}

pub fn http_client() -> reqwest::Client {
    quarry::outbound::install_tls_provider();
    reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .timeout(Duration::from_secs(120))
        .build()
        .expect("reqwest client")
}

// ---------------------------------------------------------------------------------------------
// load

/// Latencies of one closed-loop run.
pub struct Load<T> {
    pub latencies: Vec<Duration>,
    pub wall: Duration,
    pub errors: usize,
    pub first_error: Option<String>,
    /// What each successful call returned (e.g. quarry's timing breakdown).
    pub outputs: Vec<T>,
}

impl<T> Load<T> {
    pub fn empty() -> Self {
        Load {
            latencies: Vec::new(),
            wall: Duration::ZERO,
            errors: 0,
            first_error: None,
            outputs: Vec::new(),
        }
    }

    pub fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64()
    }

    /// Adds another run's calls (latencies stay sorted; walls add up).
    pub fn absorb(&mut self, other: Load<T>) {
        self.latencies.extend(other.latencies);
        self.latencies.sort();
        self.outputs.extend(other.outputs);
        self.wall += other.wall;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// Runs `total` calls of `call(i)` with `concurrency` callers, each starting its next call as
/// soon as the previous one returned.
pub async fn run_load<T, F, Fut>(concurrency: usize, total: usize, call: F) -> Load<T>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<T, String>> + Send + 'static,
{
    let next = Arc::new(AtomicUsize::new(0));
    let call = Arc::new(call);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let next = next.clone();
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = (Vec::new(), Vec::new(), 0usize, None::<String>);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return mine;
                }
                let t = Instant::now();
                match call(i).await {
                    Ok(out) => {
                        mine.0.push(t.elapsed());
                        mine.1.push(out);
                    }
                    Err(err) => {
                        mine.2 += 1;
                        mine.3.get_or_insert(err);
                    }
                }
            }
        }));
    }
    let mut load = Load {
        latencies: Vec::with_capacity(total),
        wall: Duration::ZERO,
        errors: 0,
        first_error: None,
        outputs: Vec::with_capacity(total),
    };
    for task in tasks {
        if let Ok((latencies, outputs, errors, first)) = task.await {
            load.latencies.extend(latencies);
            load.outputs.extend(outputs);
            load.errors += errors;
            if load.first_error.is_none() {
                load.first_error = first;
            }
        }
    }
    load.wall = started.elapsed();
    load.latencies.sort();
    load
}

/// The `q` quantile (nearest rank) of sorted latencies, in milliseconds.
pub fn quantile_ms(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1000.0
}

pub fn mean(values: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = values.into_iter().fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { f64::NAN } else { sum / n as f64 }
}

// ---------------------------------------------------------------------------------------------
// the process

/// Memory of this process from `/proc/self/status`, in MiB.
#[derive(Clone, Copy, Debug)]
pub struct Memory {
    /// Peak resident set (`VmHWM`).
    pub peak: f64,
    /// Resident set now (`VmRSS`) ...
    pub rss: f64,
    /// ... of which anonymous memory (heap, stacks) ...
    pub anon: f64,
    /// ... and file-backed pages (mmap'd segment files, the binary).
    pub file: f64,
}

pub fn memory() -> Memory {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    Memory {
        peak: field("VmHWM:"),
        rss: field("VmRSS:"),
        anon: field("RssAnon:"),
        file: field("RssFile:"),
    }
}

/// CPU time (user + system) this process has used, in seconds (Linux USER_HZ = 100).
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the `(comm)`: state is field 3; utime and stime are fields 14 and 15.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Waits at least `at_least`, then until this process has used under 5 % of a core for two
/// consecutive half-second samples (background flushes and the HNSW build have finished), or
/// `at_most` has passed. Returns the time waited.
pub async fn settle(at_least: Duration, at_most: Duration) -> Duration {
    let started = Instant::now();
    tokio::time::sleep(at_least).await;
    let mut quiet = 0;
    let mut last = cpu_seconds();
    while started.elapsed() < at_most {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = cpu_seconds();
        quiet = if now - last < 0.025 { quiet + 1 } else { 0 };
        last = now;
        if quiet >= 2 {
            break;
        }
    }
    started.elapsed()
}

/// One line about the machine: CPU model, cores, memory, load average.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU", |(_, m)| m.trim())
        .to_owned();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let total_gib = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0 / 1024.0);
    format!(
        "{model}, {cores} cores available, {total_gib:.1} GiB memory, load average {}",
        load_average()
    )
}

pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------------
// tables

/// A markdown-style table with right-aligned columns (the first left-aligned).
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    #[allow(dead_code)] // only tables printed when something was measured ask
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn print(&self) {
        let n = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(n) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let parts: Vec<String> = (0..n)
                .map(|i| {
                    let cell = cells.get(i).map_or("", String::as_str);
                    if i == 0 {
                        format!("{cell:<w$}", w = widths[i])
                    } else {
                        format!("{cell:>w$}", w = widths[i])
                    }
                })
                .collect();
            println!("| {} |", parts.join(" | "));
        };
        line(&self.headers);
        let rule: Vec<String> = (0..n)
            .map(|i| {
                if i == 0 {
                    format!(":{}", "-".repeat(widths[i] - 1))
                } else {
                    format!("{}:", "-".repeat(widths[i] - 1))
                }
            })
            .collect();
        println!(
            "|{}|",
            rule.iter().map(|r| format!(" {r} ")).collect::<Vec<_>>().join("|")
        );
        for row in &self.rows {
            line(row);
        }
    }
}

/// `1234567.8` → `1,234,568`; numbers below 100 keep `decimals`.
pub fn num(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    if x.abs() < 100.0 {
        return format!("{x:.decimals$}");
    }
    let s = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if x < 0.0 { format!("-{out}") } else { out }
}

/// The command line as `--flag value` pairs (`--help` or `-h`: `help` as the error).
#[allow(dead_code)] // not every benchmark takes flags this way
pub fn flag_pairs(help: &str) -> std::result::Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            return Err(help.to_owned());
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value\n{help}"))?;
        pairs.push((flag, value));
    }
    Ok(pairs)
}

/// A flag's whole-number value.
#[allow(dead_code)]
pub fn whole(flag: &str, value: &str) -> std::result::Result<u64, String> {
    value
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("{flag}: cannot read `{value}`"))
}
