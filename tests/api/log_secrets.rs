//! No secret ever reaches a log line. The real binary runs with its real logging set-up (JSON
//! lines on stdout, `RUST_LOG=debug` and `trace` for quarry's own targets), serves requests that
//! carry secrets and meets provider failures that echo them, and every line it writes — stdout
//! and stderr, from start to exit — is searched for every secret.
//!
//! The secrets: the bearer token (and a wrong one), provider keys from configuration and added
//! through `POST /v1/provider-keys`, the master key (as configured and as raw bytes), the store
//! URL's password, and the Qdrant API key. Each contains the marker `LOGLEAK`, which nothing else
//! in quarry's output does, so a secret cut or re-quoted is caught as well as a whole one.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::binary::{KillOnDrop, quarry};
use crate::fake_providers::{Failure, FakeGoogle, FakeOpenAi};
use crate::helpers::PgDatabase;

const MARKER: &str = "LOGLEAK";
const BEARER: &str = "tok-LOGLEAK-bearer-1f6c";
const WRONG_BEARER: &str = "tok-LOGLEAK-wrong-bearer-77d0";
const OPENAI_CONFIG_KEY: &str = "sk-LOGLEAK-openai-config-3b9e";
const GOOGLE_CONFIG_KEY: &str = "AIza-LOGLEAK-google-config-c41a";
/// Added through the API and accepted by the fake.
const OPENAI_ADDED_KEY: &str = "sk-LOGLEAK-openai-added-5e27";
/// Added through the API; the fakes refuse them (and echo them in the refusal).
const OPENAI_REFUSED_KEY: &str = "sk-LOGLEAK-openai-refused-9d03";
const GOOGLE_REFUSED_KEY: &str = "AIza-LOGLEAK-google-refused-0b8f";
/// Sent in bodies quarry refuses before storing anything.
const REFUSED_BODY_SECRET: &str = "sk-LOGLEAK-in-a-refused-body-44c1";
const MASTER_KEY_BYTES: &[u8; 32] = b"LOGLEAK-master-key-32-bytes-long";
const PG_PASSWORD: &str = "pw-LOGLEAK-postgres-a8e2";
const QDRANT_KEY: &str = "qd-LOGLEAK-qdrant-6b11";

fn master_key() -> String {
    base64::engine::general_purpose::STANDARD.encode(MASTER_KEY_BYTES)
}

/// Every secret as it could appear in a line.
fn secrets() -> Vec<String> {
    let mut all: Vec<String> = [
        BEARER,
        WRONG_BEARER,
        OPENAI_CONFIG_KEY,
        GOOGLE_CONFIG_KEY,
        OPENAI_ADDED_KEY,
        OPENAI_REFUSED_KEY,
        GOOGLE_REFUSED_KEY,
        REFUSED_BODY_SECRET,
        PG_PASSWORD,
        QDRANT_KEY,
        MARKER,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    all.push(master_key());
    all
}

/// Lines (with their stream) that contain a secret, each with the secrets it contains.
fn leaks<'a>(lines: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let secrets = secrets();
    lines
        .into_iter()
        .filter_map(|line| {
            let found: Vec<&str> = secrets
                .iter()
                .filter(|s| line.contains(s.as_str()))
                .map(String::as_str)
                .collect();
            (!found.is_empty()).then(|| format!("{found:?} in: {line}"))
        })
        .collect()
}

/// Sends every line of `stream`, prefixed with `tag`, until the stream closes.
fn forward(stream: impl Read + Send + 'static, tag: &'static str, tx: std::sync::mpsc::Sender<String>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(format!("{tag}{line}")).is_err() {
                break;
            }
        }
    });
}

/// The server's environment: every secret configured, logs at debug (trace for quarry).
fn server_env(store_url: &str, openai: &FakeOpenAi, google: &FakeGoogle) -> Vec<(&'static str, String)> {
    vec![
        ("RUST_LOG", "debug,quarry=trace".into()),
        ("QUARRY__AUTH__TOKENS", BEARER.into()),
        ("QUARRY__SERVER__ADDR", "127.0.0.1:0".into()),
        ("QUARRY__STORE__URL", store_url.into()),
        ("QUARRY__VECTORS__API_KEY", QDRANT_KEY.into()),
        ("QUARRY__SECURITY__MASTER_KEY", master_key()),
        ("QUARRY__PROVIDERS__OPENAI__BASE_URL", openai.base_url()),
        ("QUARRY__PROVIDERS__OPENAI__KEYS", OPENAI_CONFIG_KEY.into()),
        ("QUARRY__PROVIDERS__OPENAI__SCHEDULING__ACQUIRE_TIMEOUT_S", "1".into()),
        ("QUARRY__PROVIDERS__OPENAI__SCHEDULING__QUERY_WAIT_S", "1".into()),
        ("QUARRY__PROVIDERS__GOOGLE__BASE_URL", google.base_url()),
        ("QUARRY__PROVIDERS__GOOGLE__KEYS", GOOGLE_CONFIG_KEY.into()),
        ("QUARRY__PROVIDERS__GOOGLE__SCHEDULING__ACQUIRE_TIMEOUT_S", "1".into()),
        ("QUARRY__PROVIDERS__GOOGLE__SCHEDULING__QUERY_WAIT_S", "1".into()),
        ("QUARRY__EMBEDDING__WORKERS", "1".into()),
    ]
}

/// Starts `quarry serve --log-format json` with `env`; returns the child, its address, the
/// channel of its output lines (`out| ` / `err| `) and the lines read while waiting.
fn start(dir: &std::path::Path, env: &[(&'static str, String)]) -> (KillOnDrop, String, Receiver<String>, Vec<String>) {
    let mut command: Command = quarry(dir);
    command
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .args(["serve", "--log-format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child: Child = command.spawn().expect("quarry starts");
    let (tx, rx) = std::sync::mpsc::channel();
    forward(child.stdout.take().expect("stdout piped"), "out| ", tx.clone());
    forward(child.stderr.take().expect("stderr piped"), "err| ", tx);
    let child = KillOnDrop::new(child);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let addr = line
            .strip_prefix("out| ")
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|log| log["message"] == "quarry is listening")
            .and_then(|log| log["addr"].as_str().map(str::to_owned));
        seen.push(line);
        if let Some(addr) = addr {
            return (child, addr, rx, seen);
        }
    }
    panic!("quarry did not report its address in time; output: {seen:#?}");
}

/// Everything still to come on `rx`, until both streams close.
fn rest(rx: &Receiver<String>) -> Vec<String> {
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => lines.push(line),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return lines,
        }
    }
    panic!("quarry's output did not close within 30 s of its exit");
}

/// A small client for the server; remembers every answer so they can be searched too.
struct Client {
    base: String,
    http: reqwest::Client,
    answers: Vec<String>,
}

impl Client {
    async fn send(
        &mut self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<&str>,
    ) -> (StatusCode, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_owned());
        }
        let response = request.send().await.expect("request sent");
        let status = response.status();
        let text = response.text().await.expect("body read");
        self.answers.push(format!("{status} {path}: {text}"));
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    async fn get(&mut self, path: &str) -> (StatusCode, Value) {
        self.send(reqwest::Method::GET, path, BEARER, None).await
    }

    async fn post(&mut self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(reqwest::Method::POST, path, BEARER, Some(&body.to_string()))
            .await
    }

    async fn retrieve(&mut self, world: &str, query: &str) -> StatusCode {
        self.post(&format!("/v1/worlds/{world}/retrieve"), json!({"query": query}))
            .await
            .0
    }

    /// Waits until the job is no longer running.
    async fn settle(&mut self, job: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let (_, job) = self.get(&format!("/v1/jobs/{job}")).await;
            if job["status"] != "running" {
                return job;
            }
            assert!(Instant::now() < deadline, "the job did not finish: {job}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A world and a source on it; returns the world id and the ingest job id.
async fn world_with_source(client: &mut Client, embedding: Value) -> (String, String) {
    let (status, world) = client
        .post(
            "/v1/worlds",
            json!({"name": "Secrets", "embedding": embedding, "chunking": {"max_tokens": 16, "overlap_tokens": 0}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    let world = world["id"].as_str().unwrap().to_owned();
    let text: String = (0..6)
        .map(|i| format!("Line {i} tells of the keeper who lights the lamp above the harbour. "))
        .collect();
    let (status, accepted) = client
        .post(
            &format!("/v1/worlds/{world}/sources"),
            json!({"filename": "lamp.txt", "text": text}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    (world, accepted["job"]["id"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn no_secret_reaches_a_log_line() {
    let openai = FakeOpenAi::start(&[OPENAI_CONFIG_KEY, OPENAI_ADDED_KEY]).await;
    let google = FakeGoogle::start(&[GOOGLE_CONFIG_KEY]).await;
    let dir = tempfile::tempdir().unwrap();

    // The store URL carries a password: on a real Postgres server when one is reachable (its
    // usual trust authentication ignores the password, so the URL works as given), else the
    // password is only tested on the failing start-up below.
    let pg =
        PgDatabase::create("log_secrets::no_secret_reaches_a_log_line on Postgres (it runs on SQLite instead)").await;
    let store_url = match &pg {
        Some(db) => {
            let mut url = reqwest::Url::parse(&db.url).expect("Postgres URL");
            url.set_password(Some(PG_PASSWORD)).expect("a password fits the URL");
            url.to_string()
        }
        None => "sqlite://data/quarry.db".to_owned(),
    };
    let env = server_env(&store_url, &openai, &google);
    let (child, addr, rx, mut lines) = start(dir.path(), &env);
    let mut client = Client {
        base: format!("http://{addr}"),
        http: crate::helpers::http_client(),
        answers: Vec::new(),
    };

    // Bearer tokens: a wrong one is refused, the right one works everywhere below.
    let (status, _) = client
        .send(reqwest::Method::GET, "/v1/worlds", WRONG_BEARER, None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Keys through the API: accepted, duplicated, and refused before anything is stored.
    for (provider, secret) in [
        ("openai", OPENAI_ADDED_KEY),
        ("openai", OPENAI_REFUSED_KEY),
        ("google", GOOGLE_REFUSED_KEY),
    ] {
        let (status, body) = client
            .post(
                "/v1/provider-keys",
                json!({"provider": provider, "secret": secret, "label": "added"}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (status, _) = client
        .post(
            "/v1/provider-keys",
            json!({"provider": "openai", "secret": OPENAI_ADDED_KEY, "label": "again"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    for body in [
        json!({"provider": "nobody", "secret": REFUSED_BODY_SECRET}).to_string(),
        json!({"provider": "openai", "secret": REFUSED_BODY_SECRET, "surprise": true}).to_string(),
        json!({"provider": "openai", "secret": [REFUSED_BODY_SECRET]}).to_string(),
        format!(r#"{{"provider": "openai", "secret": "{REFUSED_BODY_SECRET}"#),
    ] {
        let (status, answer) = client
            .send(reqwest::Method::POST, "/v1/provider-keys", BEARER, Some(&body))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} → {answer}");
    }

    // A secret in the wrong field: the 400 may quote it back to its sender, which already has
    // it (so this answer is not searched), but it must not be logged.
    let status = client
        .http
        .post(format!("{}/v1/provider-keys", client.base))
        .bearer_auth(BEARER)
        .json(&json!({"provider": REFUSED_BODY_SECRET, "secret": "x"}))
        .send()
        .await
        .expect("request sent")
        .status();
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Ingestion meets failures that echo the key: a 500, a rate limit, a 503 and a rate-limited
    // count; keys the fakes do not know are refused with an echo and retired.
    openai.fail_next(Failure::Status(500));
    openai.fail_next(Failure::RateLimited(Duration::from_millis(200)));
    google.fail_next(Failure::Status(503));
    google.fail_next_count(Failure::RateLimited(Duration::from_millis(200)));
    let (openai_world, openai_job) = world_with_source(
        &mut client,
        json!({"provider": "openai", "model": "text-embedding-3-small", "dimensions": 64}),
    )
    .await;
    let (google_world, google_job) = world_with_source(
        &mut client,
        json!({"provider": "google", "model": "gemini-embedding-001", "dimensions": 128}),
    )
    .await;
    for job in [&openai_job, &google_job] {
        let job = client.settle(job).await;
        assert_eq!(job["status"], "completed", "{job}");
    }

    // Queries rotate through the keys (the refused ones are retired on their first use)...
    for i in 0..4 {
        let status = client.retrieve(&openai_world, &format!("who lights lamp {i}?")).await;
        assert_eq!(status, StatusCode::OK);
        let status = client.retrieve(&google_world, &format!("who keeps harbour {i}?")).await;
        assert_eq!(status, StatusCode::OK);
    }
    // ...and meet a permanent refusal (502), a per-day limit, a leaked key and an invalid one,
    // each echoing the key.
    openai.fail_next(Failure::Status(400));
    assert_eq!(
        client.retrieve(&openai_world, "a refused query").await,
        StatusCode::BAD_GATEWAY
    );
    openai.fail_next(Failure::DailyQuota);
    client.retrieve(&openai_world, "a query over the daily limit").await;
    openai.fail_next(Failure::PermissionDenied);
    openai.fail_next(Failure::PermissionDenied);
    client.retrieve(&openai_world, "a query with a leaked key").await;
    google.fail_next(Failure::KeyInvalid);
    client.retrieve(&google_world, "a query with an invalid key").await;
    for path in ["/v1/providers", "/v1/provider-keys", "/metrics"] {
        let (status, _) = client.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
    }
    let (_, providers) = client.get("/v1/providers").await;

    // Stop it the way an operator would and collect everything it wrote.
    let mut process = child.disarm();
    let status = Command::new("kill")
        .args(["-TERM", &process.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = process.wait().unwrap();
    assert!(exit.success(), "exit status {exit:?}");
    lines.extend(rest(&rx));
    if let Some(db) = pg {
        db.drop_db().await;
    }

    let leaked = leaks(&lines);
    assert!(
        leaked.is_empty(),
        "{} of {} log lines hold a secret:\n{}",
        leaked.len(),
        lines.len(),
        leaked.join("\n")
    );
    let answered = leaks(&client.answers);
    assert!(answered.is_empty(), "answers hold a secret:\n{}", answered.join("\n"));

    // The run did what the test is about: debug logging on, keys retired and cooled down after
    // refusals that echoed them, the echoes logged redacted.
    let stdout = |needle: &str| lines.iter().any(|l| l.starts_with("out| ") && l.contains(needle));
    assert!(stdout("\"level\":\"DEBUG\""), "no debug lines were logged");
    assert!(stdout("provider key retired"), "no key was retired");
    assert!(stdout("provider key rate limited"), "no key was rate limited");
    assert!(stdout("[REDACTED]"), "no echoed key was logged redacted");
    let retired = providers["providers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["keys"].as_array().unwrap().iter())
        .filter(|k| k["retired"] == true)
        .count();
    assert!(retired >= 3, "{providers}");
    let stats = (openai.stats(), google.stats());
    assert!(stats.0.key(OPENAI_REFUSED_KEY) > 0 && stats.1.key(GOOGLE_REFUSED_KEY) > 0);
}

/// Base64 of "LOGLEAK-short": a master key of the wrong length.
const SHORT_MASTER_KEY: &str = "TE9HTEVBSy1zaG9ydA==";

/// Start-up failures print their cause; none of it may carry a secret either.
#[tokio::test]
async fn failed_start_ups_print_no_secret() {
    let openai = FakeOpenAi::start(&[]).await;
    let google = FakeGoogle::start(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let unreachable = format!("postgres://quarry:{PG_PASSWORD}@127.0.0.1:1/quarry");
    let bad_scheme = format!("mysql://quarry:{PG_PASSWORD}@127.0.0.1/quarry");
    let mut cases: Vec<(&str, Vec<(&'static str, String)>)> = vec![
        ("an unreachable Postgres", server_env(&unreachable, &openai, &google)),
        (
            "a store URL of the wrong kind",
            server_env(&bad_scheme, &openai, &google),
        ),
    ];
    let mut bad_master = server_env("sqlite://data/quarry.db", &openai, &google);
    bad_master.push(("QUARRY__SECURITY__MASTER_KEY", format!("{PG_PASSWORD}!")));
    cases.push(("a master key that is not base64", bad_master));
    let mut short_master = server_env("sqlite://data/quarry.db", &openai, &google);
    short_master.push(("QUARRY__SECURITY__MASTER_KEY", SHORT_MASTER_KEY.into()));
    cases.push(("a master key of the wrong length", short_master));

    for (case, env) in cases {
        let started = Instant::now();
        let output = quarry(dir.path())
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .args(["serve", "--log-format", "json"])
            .output()
            .expect("quarry runs");
        assert!(!output.status.success(), "{case}: quarry started");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{case}: took {:?}",
            started.elapsed()
        );
        let lines: Vec<String> = [("out| ", &output.stdout), ("err| ", &output.stderr)]
            .iter()
            .flat_map(|(tag, bytes)| {
                String::from_utf8_lossy(bytes)
                    .lines()
                    .map(|l| format!("{tag}{l}"))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert!(
            lines.iter().any(|l| l.starts_with("err| quarry:")),
            "{case}: no cause printed: {lines:#?}"
        );
        let mut leaked = leaks(&lines);
        leaked.extend(lines.iter().filter(|l| l.contains(SHORT_MASTER_KEY)).cloned());
        assert!(leaked.is_empty(), "{case}:\n{}", leaked.join("\n"));
    }
}

/// With a Qdrant server that cannot be reached, the failures of the vector store (readiness,
/// creating a world's collection) are logged without its API key.
#[tokio::test]
async fn an_unreachable_qdrant_server_is_logged_without_its_key() {
    let openai = FakeOpenAi::start(&[]).await;
    let google = FakeGoogle::start(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut env = server_env("sqlite://data/quarry.db", &openai, &google);
    env.push(("QUARRY__VECTORS__KIND", "qdrant".into()));
    env.push(("QUARRY__VECTORS__URL", "http://127.0.0.1:1".into()));
    let (child, addr, rx, mut lines) = start(dir.path(), &env);
    let mut client = Client {
        base: format!("http://{addr}"),
        http: crate::helpers::http_client(),
        answers: Vec::new(),
    };
    let (status, _) = client.get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let (status, body) = client
        .post(
            "/v1/worlds",
            json!({"name": "Q", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}}),
        )
        .await;
    assert!(status.is_server_error(), "{status} {body}");

    let mut process = child.disarm();
    let _ = Command::new("kill").args(["-TERM", &process.id().to_string()]).status();
    let _ = process.wait();
    lines.extend(rest(&rx));
    let leaked = leaks(lines.iter().chain(&client.answers));
    assert!(leaked.is_empty(), "{}", leaked.join("\n"));
    assert!(
        lines.iter().any(|l| l.contains("readiness: vector store check failed")),
        "the failure was logged"
    );
}
