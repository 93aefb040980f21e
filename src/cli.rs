//! The `quarry` command-line client: subcommands of the same binary that talk HTTP to a quarry
//! server (`--url` / `QUARRY_URL`, `--token` / `QUARRY_TOKEN`). Human output on a terminal,
//! JSON lines when the output is piped or with `--json`. Exit codes ([`Exit`]) tell usage,
//! authentication, not-found, rate-limit and server failures apart.
//!
//! `ingest` walks files and folders (`.md`, `.markdown`, `.txt`, `.html`, `.htm`, `.pdf`; `.gitignore`
//! and `--exclude` globs honoured), uploads each file the world does not have yet (known by the
//! sha256 of its bytes, which the upload records in the source's metadata as `file_sha256`),
//! then follows every job's event stream (reconnecting with `Last-Event-ID`) with a progress bar
//! per file and one overall; rate-limit and quota waits show as waits. Ctrl-C stops following,
//! not the server's work. `eval` ([`eval`]) scores a world's retrieval on a test set and
//! compares runs.

use std::collections::{HashMap, HashSet};
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use futures_util::StreamExt as _;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use sha2::Digest as _;

mod eval;
mod sync;
pub use eval::{EvalOptions, eval};
pub use sync::{SyncOptions, sync};

/// Exit codes, documented in README.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    /// The server could not be reached, or something else went wrong.
    Failure = 1,
    /// Bad arguments, or a request the server refused as invalid (400, 409, 413, 415, 422).
    Usage = 2,
    /// 401 or 403: no token, or one the server does not accept.
    Auth = 3,
    /// 404: no such world, source or job.
    NotFound = 4,
    /// 429: every provider key is rate limited, or the token is past its `rate_per_minute`; try
    /// again later.
    RateLimited = 5,
    /// 5xx: the server, its store or a provider failed.
    Server = 6,
    /// Work finished with failed chunks, or a job failed.
    Incomplete = 7,
    /// Interrupted (Ctrl-C); the server's jobs go on.
    Interrupted = 130,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}

/// A failure to report: a message and its exit code.
#[derive(Debug)]
pub struct Failed {
    pub exit: Exit,
    pub message: String,
    /// The field of the request the server named (`details.field` of a refusal), when it did.
    pub field: Option<String>,
}

type Result<T> = std::result::Result<T, Failed>;

fn failed(exit: Exit, message: impl Into<String>) -> Failed {
    Failed {
        exit,
        message: message.into(),
        field: None,
    }
}

/// Where the server is and how output is written.
pub struct Client {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
    /// JSON lines instead of human output.
    pub json: bool,
}

impl Client {
    pub fn new(url: &str, token: Option<String>, json: bool) -> Self {
        quarry::outbound::install_tls_provider();
        Self {
            http: reqwest::Client::new(),
            url: url.trim_end_matches('/').to_owned(),
            token,
            json: json || !std::io::stdout().is_terminal(),
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.url));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value> {
        let response = request
            .send()
            .await
            .map_err(|err| failed(Exit::Failure, format!("cannot reach {}: {err}", self.url)))?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let code = body["error"]["code"].as_str().unwrap_or("error");
        let message = body["error"]["message"].as_str().unwrap_or("");
        let exit = match status.as_u16() {
            401 | 403 => Exit::Auth,
            404 => Exit::NotFound,
            429 => Exit::RateLimited,
            500..=599 => Exit::Server,
            _ => Exit::Usage,
        };
        let field = body["error"]["details"]["field"].as_str().map(str::to_owned);
        Err(Failed {
            field,
            ..failed(exit, format!("{} {code}: {message}", status.as_u16()))
        })
    }

    async fn get(&self, path: &str) -> Result<Value> {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    async fn post(&self, path: &str, body: &Value) -> Result<Value> {
        self.send(self.request(reqwest::Method::POST, path).json(body)).await
    }

    /// Every item of a paged list (`{key: [...], next_offset}`).
    async fn all(&self, path: &str, key: &str) -> Result<Vec<Value>> {
        let mut items = Vec::new();
        let mut offset = 0u64;
        loop {
            let sep = if path.contains('?') { '&' } else { '?' };
            let page = self.get(&format!("{path}{sep}limit=1000&offset={offset}")).await?;
            items.extend(page[key].as_array().cloned().unwrap_or_default());
            match page["next_offset"].as_u64() {
                Some(next) if next > offset => offset = next,
                _ => return Ok(items),
            }
        }
    }

    /// A world by id or name.
    async fn world(&self, name_or_id: &str) -> Result<Option<Value>> {
        let worlds = self.all("/v1/worlds", "worlds").await?;
        Ok(worlds
            .into_iter()
            .find(|w| w["id"] == name_or_id || w["name"] == name_or_id))
    }

    async fn world_id(&self, name_or_id: &str) -> Result<String> {
        match self.world(name_or_id).await? {
            Some(world) => Ok(world["id"].as_str().unwrap_or_default().to_owned()),
            None => Err(failed(
                Exit::NotFound,
                format!("no world is called or has the id `{name_or_id}`"),
            )),
        }
    }

    fn line(&self, value: &Value) {
        println!("{value}");
    }
}

/// `quarry worlds`
pub async fn worlds(client: &Client) -> Result<()> {
    for w in client.all("/v1/worlds", "worlds").await? {
        if client.json {
            client.line(&w);
        } else {
            let s = &w["stats"];
            println!(
                "{}  {:<24} {}/{:<24} sources {:>4}  chunks {:>6}  embedded {:>6}  pending {:>6}  failed {:>4}",
                w["id"].as_str().unwrap_or_default(),
                w["name"].as_str().unwrap_or_default(),
                w["embedding"]["provider"].as_str().unwrap_or_default(),
                w["embedding"]["model"].as_str().unwrap_or_default(),
                s["sources"],
                s["chunks"],
                s["embedded"],
                s["pending"],
                s["failed"],
            );
        }
    }
    Ok(())
}

/// `quarry sources WORLD`
pub async fn sources(client: &Client, world: &str) -> Result<()> {
    let id = client.world_id(world).await?;
    for s in client.all(&format!("/v1/worlds/{id}/sources"), "sources").await? {
        if client.json {
            client.line(&s);
        } else {
            println!(
                "{:>4}  {:<40} v{:<3} chunks {:>5}  embedded {:>5}  pending {:>5}  failed {:>3}  {}",
                s["book_number"],
                s["key"].as_str().or(s["filename"].as_str()).unwrap_or_default(),
                s["version"],
                s["chunks"],
                s["embedded"],
                s["pending"],
                s["failed"],
                s["id"].as_str().unwrap_or_default(),
            );
        }
    }
    Ok(())
}

/// `quarry jobs WORLD [--watch]`
pub async fn jobs(client: &Client, world: &str, watch: bool) -> Result<()> {
    let id = client.world_id(world).await?;
    loop {
        let jobs = client.all(&format!("/v1/worlds/{id}/jobs"), "jobs").await?;
        let busy = jobs
            .iter()
            .any(|j| matches!(j["status"].as_str(), Some("queued" | "running")));
        for j in &jobs {
            if client.json {
                client.line(j);
            } else {
                let c = &j["counts"];
                let waiting = j["waiting"]["reason"]
                    .as_str()
                    .map(|r| format!("  waiting: {r}"))
                    .unwrap_or_default();
                println!(
                    "{}  {:<8} {:<10} {}/{} embedded, {} failed{waiting}",
                    j["id"].as_str().unwrap_or_default(),
                    j["kind"].as_str().unwrap_or_default(),
                    j["status"].as_str().unwrap_or_default(),
                    c["embedded"],
                    c["total"],
                    c["failed"],
                );
            }
        }
        if !watch || !busy {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        if !client.json {
            println!();
        }
    }
}

/// What `quarry retrieve` sends besides the query.
#[derive(Debug, Default, clap::Args)]
pub struct RetrieveOptions {
    #[arg(long)]
    pub top_k: Option<u32>,
    /// dense, hybrid, auto or full.
    #[arg(long)]
    pub mode: Option<String>,
    /// neighbors or parent.
    #[arg(long)]
    pub expand: Option<String>,
    #[arg(long)]
    pub neighbors: Option<u32>,
    #[arg(long)]
    pub max_context_tokens: Option<u32>,
}

/// `quarry retrieve WORLD QUERY`
pub async fn retrieve(client: &Client, world: &str, query: &str, options: RetrieveOptions) -> Result<()> {
    let id = client.world_id(world).await?;
    let mut body = json!({ "query": query });
    let fields = [
        ("top_k", options.top_k.map(Value::from)),
        ("mode", options.mode.map(Value::from)),
        ("expand", options.expand.map(Value::from)),
        ("neighbors", options.neighbors.map(Value::from)),
        ("max_context_tokens", options.max_context_tokens.map(Value::from)),
    ];
    for (name, value) in fields {
        if let Some(value) = value {
            body[name] = value;
        }
    }
    let answer = client.post(&format!("/v1/worlds/{id}/retrieve"), &body).await?;
    if client.json {
        client.line(&answer);
        return Ok(());
    }
    println!("{}", answer["context"]["text"].as_str().unwrap_or_default());
    println!();
    for c in answer["context"]["citations"].as_array().into_iter().flatten() {
        let result = c["result_index"]
            .as_u64()
            .and_then(|i| answer["results"].get(i as usize));
        println!(
            "[{}] {} (book {}, chunk {}){}",
            c["n"],
            result.and_then(|r| r["source_filename"].as_str()).unwrap_or(""),
            c["book_number"],
            c["chunk_number"],
            result
                .and_then(|r| r["score"].as_f64())
                .map(|s| format!(", score {s:.3}"))
                .unwrap_or_default(),
        );
    }
    for w in answer["warnings"].as_array().into_iter().flatten() {
        eprintln!("warning: {}", w["message"].as_str().unwrap_or_default());
    }
    Ok(())
}

/// The world a client command writes to, made when asked.
#[derive(Debug, Default, clap::Args)]
pub struct WorldArgs {
    /// The world's name or id.
    #[arg(long)]
    pub world: String,
    /// Create the world when there is none by that name.
    #[arg(long)]
    pub create: bool,
    /// With --create: the embedding provider.
    #[arg(long, default_value = "local")]
    pub provider: String,
    /// With --create: the embedding model.
    #[arg(long, default_value = "all-MiniLM-L6-v2")]
    pub model: String,
}

/// Which files under the paths given a client command reads.
#[derive(Debug, Default, clap::Args)]
pub struct WalkArgs {
    /// Glob of paths to leave out (repeatable); `.gitignore` files are honoured.
    #[arg(long)]
    pub exclude: Vec<String>,
    /// Follow symbolic links wherever they point. Without it, a link is read only when its
    /// target is inside the folder being walked; links out of it are skipped (and named).
    #[arg(long)]
    pub follow_links: bool,
}

/// What `quarry ingest` is told.
#[derive(Debug, Default, clap::Args)]
pub struct IngestOptions {
    /// Files and folders (.md, .markdown, .txt, .html, .htm, .pdf; .gitignore honoured).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub target: WorldArgs,
    #[command(flatten)]
    pub walk: WalkArgs,
}

/// File types `ingest` uploads.
const EXTENSIONS: [&str; 6] = ["md", "markdown", "txt", "html", "htm", "pdf"];

/// A file to upload and the key it goes under.
struct Found {
    path: PathBuf,
    /// Its path relative to the folder named (a file named itself: its file name), with `/`
    /// between parts; `Err` says why it can be no source key (not UTF-8, a control character).
    key: std::result::Result<String, String>,
}

/// `file`'s key: its path relative to `root` (the folder named on the command line, or the
/// file itself), parts joined by `/` whatever the platform.
fn key_of(root: &Path, file: &Path) -> std::result::Result<String, String> {
    let relative = match file.strip_prefix(root) {
        Ok(relative) if !relative.as_os_str().is_empty() => relative,
        _ => Path::new(file.file_name().unwrap_or(file.as_os_str())),
    };
    let mut parts = Vec::new();
    for part in relative.components() {
        match part {
            std::path::Component::Normal(part) => parts.push(
                part.to_str()
                    .ok_or_else(|| "its name is not UTF-8".to_owned())?
                    .to_owned(),
            ),
            std::path::Component::CurDir => {}
            _ => return Err("it is not under the folder named".to_owned()),
        }
    }
    let key = parts.join("/");
    quarry::domain::SourceKey::parse(&key).map(|_| key)
}

/// The files under `paths`, in order, without duplicates; with `follow_links` false, symbolic
/// links whose targets are outside the path given are left out (and reported on stderr), so a
/// link planted in a shared folder cannot send a file from elsewhere to the server.
fn files(paths: &[PathBuf], walk: &WalkArgs) -> Result<Vec<Found>> {
    let (exclude, follow_links) = (&walk.exclude, walk.follow_links);
    let mut found = Vec::new();
    let mut seen = HashSet::new();
    for path in paths {
        if !path.exists() {
            return Err(failed(Exit::Usage, format!("{} does not exist", path.display())));
        }
        let root = path
            .canonicalize()
            .map_err(|err| failed(Exit::Failure, format!("reading {}: {err}", path.display())))?;
        let root = if root.is_file() {
            root.parent().map(Path::to_path_buf).unwrap_or(root)
        } else {
            root
        };
        let mut overrides = ignore::overrides::OverrideBuilder::new(path);
        for glob in exclude {
            overrides
                .add(&format!("!{glob}"))
                .map_err(|err| failed(Exit::Usage, format!("--exclude {glob}: {err}")))?;
        }
        let overrides = overrides
            .build()
            .map_err(|err| failed(Exit::Usage, format!("--exclude: {err}")))?;
        let walker = ignore::WalkBuilder::new(path)
            // `.gitignore` files count outside a git repository too.
            .require_git(false)
            .overrides(overrides)
            .follow_links(follow_links)
            .sort_by_file_path(Ord::cmp)
            .build();
        for entry in walker {
            let entry = entry.map_err(|err| failed(Exit::Failure, format!("reading {}: {err}", path.display())))?;
            let p = entry.path();
            if !follow_links && entry.path_is_symlink() && is_ingestible(p) {
                let inside = p.canonicalize().is_ok_and(|target| target.starts_with(&root));
                if !inside {
                    eprintln!(
                        "skipped {}: a symbolic link out of {} (--follow-links reads it)",
                        p.display(),
                        path.display()
                    );
                    continue;
                }
            }
            let wanted = p.is_file() && is_ingestible(p);
            if wanted && seen.insert(p.to_path_buf()) {
                found.push(Found {
                    path: p.to_path_buf(),
                    key: key_of(path, p),
                });
            }
        }
    }
    Ok(found)
}

/// One uploaded file and its job.
struct Upload {
    name: String,
    job: String,
    total: u64,
}

/// The world `target` names, created with its provider and model when it asks and there is
/// none.
async fn open_world(client: &Client, target: &WorldArgs) -> Result<Value> {
    let name_or_id = target.world.as_str();
    match client.world(name_or_id).await? {
        Some(world) => Ok(world),
        None if target.create => {
            let body = json!({"name": name_or_id, "embedding": {"provider": target.provider, "model": target.model}});
            client.post("/v1/worlds", &body).await
        }
        None => Err(failed(
            Exit::NotFound,
            format!("no world is called or has the id `{name_or_id}` (add --create to make it)"),
        )),
    }
}

/// A file's bytes and their sha256.
fn read_file(path: &Path) -> Result<(Vec<u8>, String)> {
    let bytes = std::fs::read(path).map_err(|err| failed(Exit::Failure, format!("{}: {err}", path.display())))?;
    let sha = hex::encode(sha2::Sha256::digest(&bytes));
    Ok((bytes, sha))
}

/// The multipart form that uploads `path`'s `bytes`: their sha256 goes in the source's metadata
/// as `file_sha256` (how a later run knows the file), `key`, when given, is the source's key.
fn upload_form(path: &Path, (bytes, sha): (Vec<u8>, String), key: Option<&str>) -> reqwest::multipart::Form {
    let filename = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let form = reqwest::multipart::Form::new()
        .part("file", reqwest::multipart::Part::bytes(bytes).file_name(filename))
        .text("metadata", json!({ "file_sha256": sha }).to_string());
    match key {
        Some(key) => form.text("key", key.to_owned()),
        None => form,
    }
}

/// `quarry ingest PATH... --world W`
pub async fn ingest(client: &Client, options: IngestOptions) -> Result<Exit> {
    let files = files(&options.paths, &options.walk)?;
    let world = open_world(client, &options.target).await?;
    let world_id = world["id"].as_str().unwrap_or_default().to_owned();
    // What the world already has: the sha256 of each source's text and of each uploaded file,
    // and, by key, the file each keyed source was uploaded from.
    let mut known: HashSet<String> = HashSet::new();
    let mut keyed: HashMap<String, Option<String>> = HashMap::new();
    for s in client.all(&format!("/v1/worlds/{world_id}/sources"), "sources").await? {
        for sha in [&s["sha256"], &s["metadata"]["file_sha256"]] {
            if let Some(sha) = sha.as_str() {
                known.insert(sha.to_owned());
            }
        }
        if let Some(key) = s["key"].as_str() {
            let file = s["metadata"]["file_sha256"].as_str().map(str::to_owned);
            keyed.insert(key.to_owned(), file);
        }
    }
    let mut uploads = Vec::new();
    let mut skipped = 0usize;
    for found in &files {
        let name = found.path.display().to_string();
        let (bytes, sha) = read_file(&found.path)?;
        let key = found.key.as_deref().ok();
        // A file under a key the world has is that source's next version (unless it is the
        // very file); any other file the world has is skipped, as before keys.
        let replaces = key
            .and_then(|k| keyed.get(k))
            .is_some_and(|had| had.as_deref() != Some(sha.as_str()));
        let have = match key.and_then(|k| keyed.get(k)) {
            Some(had) => had.as_deref() == Some(sha.as_str()),
            None => known.contains(&sha),
        };
        if have {
            skipped += 1;
            if client.json {
                client.line(&json!({"file": name, "event": "skipped", "reason": "the world has this file"}));
            }
            continue;
        }
        known.insert(sha.clone());
        let form = upload_form(&found.path, (bytes, sha), key);
        let request = client
            .request(reqwest::Method::POST, &format!("/v1/worlds/{world_id}/sources/upload"))
            .multipart(form);
        let accepted = client
            .send(request)
            .await
            .map_err(|f| failed(f.exit, format!("{name}: {}", f.message)))?;
        let event = match accepted["outcome"].as_str() {
            Some("unchanged") => {
                skipped += 1;
                if client.json {
                    client.line(&json!({"file": name, "event": "skipped", "reason": "the source has this text"}));
                }
                continue;
            }
            _ if replaces => "replaced",
            _ => "uploaded",
        };
        let upload = Upload {
            name: name.clone(),
            job: accepted["job"]["id"].as_str().unwrap_or_default().to_owned(),
            total: accepted["job"]["counts"]["total"]
                .as_u64()
                .or_else(|| accepted["source"]["chunks"].as_u64())
                .unwrap_or(0),
        };
        if client.json {
            client.line(&json!({"file": name, "event": event, "source": accepted["source"], "job": upload.job}));
        }
        uploads.push(upload);
    }
    if !client.json {
        eprintln!(
            "{} file(s) uploaded to world {}, {skipped} skipped (already there)",
            uploads.len(),
            world["name"].as_str().unwrap_or_default()
        );
    }
    follow_or_interrupt(client, &uploads, &world_id).await
}

/// Follows `uploads` to their end, or stops following at Ctrl-C (the server's work goes on).
async fn follow_or_interrupt(client: &Client, uploads: &[Upload], world_id: &str) -> Result<Exit> {
    tokio::select! {
        exit = follow(client, uploads) => Ok(exit),
        _ = tokio::signal::ctrl_c() => {
            eprintln!(
                "\ninterrupted: the server goes on embedding; follow it with `quarry jobs {world_id} --watch`"
            );
            Ok(Exit::Interrupted)
        }
    }
}

/// Follows every upload's job to its end, with progress bars on a terminal.
async fn follow(client: &Client, uploads: &[Upload]) -> Exit {
    let bars = MultiProgress::new();
    if client.json {
        bars.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let total: u64 = uploads.iter().map(|u| u.total).sum();
    let style = ProgressStyle::with_template("{prefix:>30!} [{bar:30}] {pos}/{len} {per_sec} eta {eta} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    let overall = bars.add(
        ProgressBar::new(total)
            .with_style(style.clone())
            .with_prefix("all files"),
    );
    let mut outcome = Exit::Ok;
    let mut done: HashMap<&str, u64> = HashMap::new();
    let followers = uploads.iter().map(|u| {
        let bar = bars.insert_before(
            &overall,
            ProgressBar::new(u.total)
                .with_style(style.clone())
                .with_prefix(u.name.clone()),
        );
        follow_job(client, u, bar)
    });
    let results = futures_util::future::join_all(followers).await;
    for (u, (embedded, exit)) in uploads.iter().zip(results) {
        done.insert(&u.name, embedded);
        if exit != Exit::Ok {
            outcome = exit;
        }
    }
    overall.set_position(done.values().sum());
    overall.finish();
    if client.json {
        client.line(
            &json!({"event": "done", "files": uploads.len(), "embedded": done.values().sum::<u64>(), "total": total}),
        );
    }
    outcome
}

/// Follows one job's event stream to its terminal status, reconnecting with `Last-Event-ID`.
/// Returns the chunks embedded and how it ended.
async fn follow_job(client: &Client, upload: &Upload, bar: ProgressBar) -> (u64, Exit) {
    let mut last: Option<String> = None;
    let mut embedded = 0u64;
    let mut attempts = 0u32;
    loop {
        let mut request = client.request(reqwest::Method::GET, &format!("/v1/jobs/{}/events", upload.job));
        if let Some(id) = &last {
            request = request.header("Last-Event-ID", id);
        }
        let stream = match request.send().await {
            Ok(response) if response.status().is_success() => response.bytes_stream(),
            Ok(response) if response.status().as_u16() == 503 && attempts < 30 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Ok(response) => {
                bar.abandon_with_message(format!("event stream answered {}", response.status()));
                return (embedded, Exit::Server);
            }
            Err(_) if attempts < 30 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(err) => {
                bar.abandon_with_message(format!("lost the server: {err}"));
                return (embedded, Exit::Failure);
            }
        };
        let mut events = eventsource_stream::EventStream::new(stream);
        while let Some(event) = events.next().await {
            let Ok(event) = event else { break };
            if !event.id.is_empty() {
                last = Some(event.id.clone());
            }
            let data: Value = serde_json::from_str(&event.data).unwrap_or(Value::Null);
            if client.json {
                client.line(&json!({"file": upload.name, "job": upload.job, "event": event.event, "data": data}));
            }
            match event.event.as_str() {
                "progress" => {
                    embedded = data["embedded"].as_u64().unwrap_or(embedded);
                    bar.set_position(embedded);
                    bar.set_message("");
                }
                "warning" => {
                    let code = data["code"].as_str().unwrap_or_default();
                    let wait = matches!(code, "rate_limited" | "daily_quota" | "provider_unavailable");
                    bar.set_message(if wait {
                        format!("waiting: {code}")
                    } else {
                        format!("warning: {code}")
                    });
                }
                "status" => match data["status"].as_str() {
                    Some("completed") => {
                        bar.finish_with_message("done");
                        return (embedded, Exit::Ok);
                    }
                    Some(status @ ("failed" | "cancelled")) => {
                        bar.abandon_with_message(status.to_owned());
                        return (embedded, Exit::Incomplete);
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        // The stream ended without a terminal status (a restart, a proxy): reconnect.
        attempts += 1;
        if attempts > 30 {
            bar.abandon_with_message("the event stream keeps ending");
            return (embedded, Exit::Failure);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Prints a failure the way the chosen output wants it and returns its exit code.
pub fn report(client_json: bool, failure: &Failed) -> ExitCode {
    if client_json {
        println!(
            "{}",
            json!({"error": {"exit": failure.exit as u8, "message": failure.message}})
        );
    }
    eprintln!("quarry: {}", failure.message);
    failure.exit.into()
}

/// Whether `path` has an extension `ingest` reads.
fn is_ingestible(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}
