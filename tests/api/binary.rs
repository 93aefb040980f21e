//! The `quarry` binary itself: its subcommands, its refusal of bad configuration, and a clean
//! stop on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// `quarry` in `dir` with a clean environment (only `PATH`, and `RUST_LOG=info`).
pub(crate) fn quarry(dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quarry"));
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "info");
    cmd
}

#[test]
fn openapi_subcommand_prints_the_committed_document() {
    let dir = tempfile::tempdir().unwrap();
    let out = quarry(dir.path()).arg("openapi").output().unwrap();
    assert!(out.status.success());
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(printed, committed);
}

#[test]
fn migrate_creates_the_database_without_needing_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let out = quarry(dir.path())
        .arg("migrate")
        .env("QUARRY__STORE__URL", "sqlite://state/q.db")
        .output()
        .unwrap();
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert!(dir.path().join("state/q.db").exists());
}

#[test]
fn invalid_configuration_stops_startup_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = quarry(dir.path())
        .arg("serve")
        .env("QUARRY__AUTH__TOKENS", "t")
        .env("QUARRY__EMBEDDING__WORKERS", "many")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("embedding.workers"), "{stderr}");

    let out = quarry(dir.path()).arg("serve").output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("auth.tokens"), "{stderr}");
    // A traces endpoint that is not OTLP over HTTP.
    let out = quarry(dir.path())
        .arg("serve")
        .env("QUARRY__AUTH__TOKENS", "t")
        .env("QUARRY__TELEMETRY__OTLP_ENDPOINT", "otel-collector:4317")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("telemetry.otlp_endpoint"), "{stderr}");
}

/// Starts `quarry serve` on port 0 and returns the child and the address it logged.
fn start_server(dir: &std::path::Path) -> (Child, String, std::sync::mpsc::Receiver<String>) {
    start_server_with(dir, &[])
}

/// [`start_server`] with extra environment variables.
fn start_server_with(
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (Child, String, std::sync::mpsc::Receiver<String>) {
    let mut command = quarry(dir);
    command.envs(env.iter().copied());
    let mut child = command
        .args(["serve", "--log-format", "json"])
        .env("QUARRY__AUTH__TOKENS", "t")
        .env("QUARRY__SERVER__ADDR", "127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let Ok(log) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if log["message"] == "quarry is listening" {
            return (child, log["addr"].as_str().unwrap().to_owned(), rx);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("quarry did not report its address in time");
}

#[tokio::test]
async fn sigterm_stops_the_server_cleanly_and_releases_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr, rx) = start_server(dir.path());
    let client = crate::helpers::http_client();
    let resp = client.get(format!("http://{addr}/readyz")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let resp = client
        .post(format!("http://{addr}/v1/worlds"))
        .bearer_auth("t")
        .json(&serde_json::json!({"name": "kept", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "quarry did not stop within 30 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "exit status {exit:?}");
    let logs: Vec<String> = rx.try_iter().collect();
    assert!(
        logs.iter().any(|l| l.contains("quarry stopped")),
        "no clean-stop log line in {logs:?}"
    );

    // The same folders can be opened again at once (the vector folder lock was released) and
    // the world is still there.
    let (mut child, addr, _rx) = start_server(dir.path());
    let resp = client
        .get(format!("http://{addr}/v1/worlds"))
        .bearer_auth("t")
        .send()
        .await
        .unwrap();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["worlds"][0]["name"], "kept");
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
}

/// The README's first-run walkthrough, against the real binary with the real local model:
/// create a local world, upload `examples/northern-isles.md`, wait for the job, and ask.
#[tokio::test]
async fn the_readme_walkthrough_finds_the_right_passages_with_the_local_model() {
    if !crate::local_model::model_present("binary::the_readme_walkthrough") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model_dir = crate::local_model::model_dir();
    let (mut child, addr, _rx) = start_server_with(
        dir.path(),
        &[("QUARRY__PROVIDERS__LOCAL__MODEL_DIR", model_dir.to_str().unwrap())],
    );
    let q = format!("http://{addr}");
    let client = crate::helpers::http_client();

    let world: Value = post_json(
        &client,
        format!("{q}/v1/worlds"),
        serde_json::json!({"name": "Isles", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}}),
    )
    .await;
    let world_id = world["id"].as_str().unwrap().to_owned();

    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/northern-isles.md");
    let bytes = std::fs::read(sample).unwrap();
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(bytes).file_name("northern-isles.md"),
    );
    let resp = client
        .post(format!("{q}/v1/worlds/{world_id}/sources/upload"))
        .bearer_auth("t")
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let accepted: Value = resp.json().await.unwrap();
    let job_id = accepted["job"]["id"].as_str().unwrap().to_owned();

    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let job: Value = get_json(&client, format!("{q}/v1/jobs/{job_id}")).await;
        if job["status"] == "completed" {
            break;
        }
        assert!(job["status"] == "running", "{job}");
        assert!(Instant::now() < deadline, "the job did not finish: {job}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    for (question, expected) in [
        ("Who looks after the lighthouse?", "Ada Hallam"),
        ("How are members of the island council selected?", "drawing lots"),
        ("What food is served at the winter celebration?", "smoked mutton"),
        ("When do the seals have their young?", "pups"),
    ] {
        let answer: Value = post_json(
            &client,
            format!("{q}/v1/worlds/{world_id}/retrieve"),
            serde_json::json!({"query": question, "top_k": 3}),
        )
        .await;
        let best = answer["results"][0]["chunk_text"].as_str().unwrap_or_default();
        assert!(best.contains(expected), "{question} → {answer}");
        assert_eq!(answer["context"]["chunks"][0].as_str(), Some(best));
    }

    // docs/evaluation.md, "In five commands": a test set, a run of two settings
    // at two budgets, a second run, and their comparison.
    let set: Value = post_json(
        &client,
        format!("{q}/v1/worlds/{world_id}/evals"),
        serde_json::json!({"name": "Isles", "items": [
            {"query": "Who looks after the lighthouse?", "expected": {"answer": "Ada Hallam"}},
            {"query": "When do the seals have their young?", "expected": {"answer": "each autumn to give birth to their pups"}}]}),
    )
    .await;
    let runs = format!(
        "{q}/v1/worlds/{world_id}/evals/{}/runs",
        set["eval_id"].as_str().unwrap()
    );
    let run_once = |body: Value| {
        let (client, runs) = (client.clone(), runs.clone());
        async move {
            let run: Value = post_json(&client, runs.clone(), body).await;
            let path = format!("{runs}/{}", run["run_id"].as_str().unwrap());
            loop {
                let run: Value = get_json(&client, path.clone()).await;
                if run["status"] != "queued" && run["status"] != "running" {
                    return run;
                }
                assert!(Instant::now() < deadline, "the run did not end: {run}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let first =
        run_once(serde_json::json!({"settings": [{"expand": "parent"}, {"expand": "none"}], "budgets": [512, 1024]}))
            .await;
    assert_eq!(first["status"], "completed", "{first}");
    let parent = &first["report"]["settings"][0];
    for budget in 0..2 {
        // Both answers reach the context when the hit's section is read forward.
        assert_eq!(parent["budgets"][budget]["fully"], 1.0, "{first}");
    }
    assert_eq!(first["report"]["items"][0]["found_by"][0], 0, "{first}");
    let second = run_once(serde_json::json!({"settings": [{"expand": "none"}], "budgets": [1024]})).await;
    let compared: Value = get_json(
        &client,
        format!(
            "{runs}/{}/compare/{}",
            first["run_id"].as_str().unwrap(),
            second["run_id"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(compared["items_compared"], 2, "{compared}");
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
}

/// A process killed (SIGKILL) in the middle of a job, and a new one started on the same files:
/// the new one takes the dead one's claims over once their lease ends and finishes the job with
/// every chunk embedded exactly once (one point per chunk).
#[tokio::test]
async fn a_killed_process_leaves_a_job_the_next_one_finishes_exactly_once() {
    use crate::fake_providers::FakeGoogle;
    let fake = FakeGoogle::start(&["key-a"]).await;
    fake.set_latency(Duration::from_millis(700));
    let dir = tempfile::tempdir().unwrap();
    let base = fake.base_url();
    let env = [
        ("QUARRY__PROVIDERS__GOOGLE__BASE_URL", base.as_str()),
        ("QUARRY__PROVIDERS__GOOGLE__KEYS", "key-a"),
        ("QUARRY__EMBEDDING__WORKERS", "2"),
        ("QUARRY__EMBEDDING__LEASE_S", "2"),
    ];
    let (child, addr, _rx) = start_server_with(dir.path(), &env);
    let mut child = KillOnDrop::new(child);
    let q = format!("http://{addr}");
    let client = crate::helpers::http_client();
    let world: Value = post_json(&client, format!("{q}/v1/worlds"), serde_json::json!({"name": "K", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 128},
            "chunking": {"max_tokens": 16, "overlap_tokens": 0}})).await;
    let world_id = world["id"].as_str().unwrap().to_owned();
    let text: String = (0..40)
        .map(|i| format!("Line {i} speaks of the tide at harbour gate {i} before the storm. "))
        .collect();
    let accepted: Value = post_json(
        &client,
        format!("{q}/v1/worlds/{world_id}/sources"),
        serde_json::json!({"filename": "tides.txt", "text": text}),
    )
    .await;
    let chunks = accepted["source"]["chunks"].as_u64().unwrap();
    let job_id = accepted["job"]["id"].as_str().unwrap().to_owned();

    // Kill it as soon as it is talking to the provider.
    let deadline = Instant::now() + Duration::from_secs(30);
    while fake.stats().requests == 0 {
        assert!(Instant::now() < deadline, "the worker never called the provider");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.child().kill().unwrap();
    child.child().wait().unwrap();
    fake.set_latency(Duration::ZERO);

    let (child, addr, _rx) = start_server_with(dir.path(), &env);
    let child = KillOnDrop::new(child);
    let q = format!("http://{addr}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let job = loop {
        let job: Value = get_json(&client, format!("{q}/v1/jobs/{job_id}")).await;
        if job["status"] == "completed" {
            break job;
        }
        assert!(Instant::now() < deadline, "the job never finished: {job}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(job["counts"]["embedded"], chunks, "{job}");
    assert_eq!(job["counts"]["failed"], 0);
    let mut child = child.disarm();
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();

    // One point per chunk, no more.
    let repo = quarry::vector::edge::EdgeRepo::open(&dir.path().join("data/vectors")).unwrap();
    let wid = quarry::domain::WorldId(uuid::Uuid::parse_str(&world_id).unwrap());
    let points = quarry::vector::VectorRepo::count(
        &repo,
        world["collection"].as_str().unwrap(),
        quarry::vector::PointFilter::world(wid),
    )
    .await
    .unwrap();
    assert_eq!(points, chunks);
    quarry::vector::VectorRepo::close(&repo).await.unwrap();
}

/// Kills the child when a failing test unwinds, so no server outlives its test.
pub(crate) struct KillOnDrop(Option<Child>);

impl KillOnDrop {
    pub(crate) fn new(child: Child) -> Self {
        Self(Some(child))
    }

    pub(crate) fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("the child is still owned")
    }

    pub(crate) fn disarm(mut self) -> Child {
        self.0.take().expect("the child is still owned")
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// POSTs JSON with the test token and returns the JSON answer.
async fn post_json(client: &reqwest::Client, url: String, body: Value) -> Value {
    client
        .post(url)
        .bearer_auth("t")
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// GETs with the test token and returns the JSON answer.
async fn get_json(client: &reqwest::Client, url: String) -> Value {
    client
        .get(url)
        .bearer_auth("t")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The output of a README command, or `None` (said loudly) when its tool is not installed.
fn tool_output(program: &str, args: &[&str], dir: &std::path::Path) -> Option<String> {
    match Command::new(program).args(args).current_dir(dir).output() {
        Ok(out) => {
            assert!(
                out.status.success(),
                "{program} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        }
        Err(err) => {
            eprintln!("SKIPPED: README command `{program}` is not available here: {err}");
            None
        }
    }
}

/// A server process that is killed if the test ends before it stops it.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl Running {
    /// Stops it as SIGTERM does and checks it exits cleanly.
    fn stop(mut self) {
        sigterm(&self.0);
        assert!(self.0.wait().unwrap().success());
    }
}

/// README's operations commands, as written there: a master key made with `openssl rand -base64
/// 32` seals an API key; `sqlite3 data/quarry.db ".backup …"` copies the store while quarry
/// runs; the copy, restored after the data is lost, brings the world and the key back.
#[tokio::test]
async fn the_readme_operations_commands_work_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let Some(master_key) = tool_output("openssl", &["rand", "-base64", "32"], dir.path()) else {
        return;
    };
    let env = [("QUARRY__SECURITY__MASTER_KEY", master_key.as_str())];
    let (child, addr, _logs) = start_server_with(dir.path(), &env);
    let server = Running(child);
    let client = crate::helpers::http_client();
    let world = post_json(
        &client,
        format!("http://{addr}/v1/worlds"),
        serde_json::json!({"name": "Backed up", "embedding": {"provider": "local", "model": "all-MiniLM-L6-v2"}}),
    )
    .await;
    assert!(world["id"].is_string(), "{world}");
    let key = post_json(
        &client,
        format!("http://{addr}/v1/provider-keys"),
        serde_json::json!({"provider": "openai", "secret": "sk-readme-backup-check"}),
    )
    .await;
    assert_eq!(key["usable"], true, "the generated master key seals keys: {key}");

    // The online backup, while quarry runs.
    std::fs::create_dir(dir.path().join("backups")).unwrap();
    if tool_output("sqlite3", &["data/quarry.db", ".backup backups/quarry.db"], dir.path()).is_none() {
        return;
    }
    server.stop();

    // The data is lost; the backup goes back (the vector folder is rebuilt by the startup repair).
    std::fs::remove_dir_all(dir.path().join("data")).unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::copy(dir.path().join("backups/quarry.db"), dir.path().join("data/quarry.db")).unwrap();
    let (child, addr, _logs) = start_server_with(dir.path(), &env);
    let server = Running(child);
    let worlds = get_json(&client, format!("http://{addr}/v1/worlds")).await;
    assert_eq!(worlds["worlds"][0]["id"], world["id"], "{worlds}");
    let keys = get_json(&client, format!("http://{addr}/v1/provider-keys")).await;
    let restored = (keys["keys"].as_array().unwrap().iter())
        .find(|k| k["key_id"] == key["key_id"])
        .unwrap_or_else(|| panic!("the key is back: {keys}"));
    assert_eq!(
        restored["usable"], true,
        "the same master key opens it again: {restored}"
    );
    server.stop();
}

/// Sends SIGTERM to `child` (with `kill`, as an operator would).
fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// With `telemetry.otlp_endpoint`, the real binary sends its spans over OTLP (HTTP, protobuf)
/// to a receiver standing in for a collector: a retrieval's request span continues the
/// caller's `traceparent`, with its phases and the provider call as children, carrying the
/// provider and model and never a key; the workers' batches are traced too.
#[tokio::test]
async fn spans_go_to_the_otlp_endpoint_continuing_the_callers_trace() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message as _;

    let received: std::sync::Arc<std::sync::Mutex<Vec<ExportTraceServiceRequest>>> = Default::default();
    let sink = received.clone();
    let receiver = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let sink = sink.clone();
            async move {
                let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
                sink.lock().unwrap().push(request);
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let collector = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, receiver).await.unwrap() });

    let fake = crate::fake_providers::FakeGoogle::start(&["secret-key-a"]).await;
    let dir = tempfile::tempdir().unwrap();
    let base = fake.base_url();
    let env = [
        ("QUARRY__PROVIDERS__GOOGLE__BASE_URL", base.as_str()),
        ("QUARRY__PROVIDERS__GOOGLE__KEYS", "secret-key-a"),
        ("QUARRY__TELEMETRY__OTLP_ENDPOINT", collector.as_str()),
        ("QUARRY__TELEMETRY__SERVICE_NAME", "quarry-under-test"),
        ("QUARRY__TELEMETRY__EXPORT_INTERVAL_MS", "100"),
    ];
    let (child, addr, _rx) = start_server_with(dir.path(), &env);
    let child = KillOnDrop::new(child);
    let q = format!("http://{addr}");
    let client = crate::helpers::http_client();
    let world: Value = post_json(&client, format!("{q}/v1/worlds"), serde_json::json!({"name": "T", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 128}})).await;
    let world_id = world["id"].as_str().unwrap().to_owned();
    let accepted: Value = post_json(
        &client,
        format!("{q}/v1/worlds/{world_id}/sources"),
        serde_json::json!({"filename": "tides.txt", "text": "Spring tides come twice a month. Neap tides come between them."}),
    )
    .await;
    let job_id = accepted["job"]["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    while get_json(&client, format!("{q}/v1/jobs/{job_id}")).await["status"] != "completed" {
        assert!(Instant::now() < deadline, "the job never finished");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let answer = client
        .post(format!("{q}/v1/worlds/{world_id}/retrieve"))
        .bearer_auth("t")
        .header("traceparent", format!("00-{trace_id}-00f067aa0ba902b7-01"))
        .json(&serde_json::json!({"query": "when do spring tides come", "mode": "dense"}))
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success());

    // Spans by name, with their trace id, parent and attributes, as the collector got them.
    let spans = |received: &[ExportTraceServiceRequest]| {
        let mut found = Vec::new();
        for export in received {
            for resource in &export.resource_spans {
                let service = resource
                    .resource
                    .as_ref()
                    .map(|r| format!("{:?}", r.attributes))
                    .unwrap_or_default();
                for scope in &resource.scope_spans {
                    for span in &scope.spans {
                        found.push((span.name.clone(), hex(&span.trace_id), span.clone(), service.clone()));
                    }
                }
            }
        }
        found
    };
    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let found = loop {
        let found = spans(&received.lock().unwrap());
        let names: Vec<&str> = found
            .iter()
            .filter(|(_, trace, _, _)| trace == trace_id)
            .map(|(name, _, _, _)| name.as_str())
            .collect();
        if [
            "request",
            "retrieval.embed",
            "provider.embed",
            "retrieval.search",
            "retrieval.verify",
            "retrieval.context",
        ]
        .iter()
        .all(|n| names.contains(n))
            && found.iter().any(|(name, _, _, _)| name == "worker.batch")
        {
            break found;
        }
        assert!(Instant::now() < deadline, "spans never arrived: {names:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let in_trace: Vec<_> = found.iter().filter(|(_, trace, _, _)| trace == trace_id).collect();
    let request = in_trace.iter().find(|(name, _, _, _)| name == "request").unwrap();
    assert_eq!(
        hex(&request.2.parent_span_id),
        "00f067aa0ba902b7",
        "the caller's span is the parent"
    );
    assert!(request.3.contains("quarry-under-test"), "{}", request.3);
    let call = in_trace
        .iter()
        .find(|(name, _, _, _)| name == "provider.embed")
        .unwrap();
    let attributes = format!("{:?}", call.2.attributes);
    assert!(
        attributes.contains("google") && attributes.contains("gemini-embedding-001"),
        "{attributes}"
    );
    let everything = format!("{:?}", received.lock().unwrap());
    assert!(!everything.contains("secret-key-a"), "a key reached the traces");

    let mut child = child.disarm();
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
}
