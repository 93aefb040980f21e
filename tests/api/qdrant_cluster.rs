//! quarry on a real three-node Qdrant cluster that loses a node.
//!
//! Runs when `QUARRY_TEST_QDRANT_BIN` names a Qdrant server binary (v1.19; see
//! `../shared/tools/qdrant-server` on a development machine); says SKIPPED otherwise. Each test
//! starts its own cluster on free loopback ports in a temporary directory, kills nodes with
//! SIGKILL and starts them again on the same storage.
//!
//! - `replication_factor = 2` with every node's URL: any one node down (the one quarry talks to
//!   included) costs nothing visible: every retrieval answers completely, ingestion goes on.
//! - `replication_factor = 1`: a node down makes retrieval a clear 503, never a partial answer;
//!   ingestion waits and finishes once the node is back.

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TestApp, on_fake_google, spawn_app_with};

/// One sentence per chunk at `max_tokens: 16`: 24 chunks with distinct subjects.
const TOPICS: [&str; 12] = [
    "Queen Maren rules the northern isles from a tower of salt.",
    "The river cities of the south trade amber and wool.",
    "The dragons of the east sleep under the glacier.",
    "Miners dig copper in the western hills.",
    "A lighthouse keeper counts the ships that pass the cape.",
    "The desert caravans carry saffron across the dunes.",
    "Monks copy old maps in the mountain monastery.",
    "Fishermen mend their nets on the pebble beach at dawn.",
    "The royal astronomer charts comets from the observatory.",
    "Shepherds drive their flocks to the summer pastures.",
    "Glassblowers in the harbour town make green bottles.",
    "The old bridge over the gorge is guarded by trolls.",
];

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Node {
    http: u16,
    grpc: u16,
    p2p: u16,
    storage: PathBuf,
    child: Option<Child>,
}

impl Node {
    fn grpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc)
    }

    fn http_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.http)
    }
}

/// Three Qdrant processes in distributed mode.
struct Cluster {
    binary: PathBuf,
    nodes: Vec<Node>,
    _dir: tempfile::TempDir,
    http: reqwest::Client,
}

impl Cluster {
    /// The binary from `QUARRY_TEST_QDRANT_BIN`, or `None` after a loud skip notice.
    fn binary(test: &str) -> Option<PathBuf> {
        match std::env::var("QUARRY_TEST_QDRANT_BIN") {
            Ok(path) if Path::new(&path).is_file() => Some(PathBuf::from(path)),
            _ => {
                let _ = writeln!(
                    std::io::stderr(),
                    "\n************************************************************************\n\
                     SKIPPED: {test} — set QUARRY_TEST_QDRANT_BIN to a Qdrant server binary\n\
                     ************************************************************************\n"
                );
                None
            }
        }
    }

    async fn start(binary: PathBuf) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let nodes = (0..3)
            .map(|i| Node {
                http: free_port(),
                grpc: free_port(),
                p2p: free_port(),
                storage: dir.path().join(format!("node{i}")),
                child: None,
            })
            .collect();
        let mut cluster = Cluster {
            binary,
            nodes,
            _dir: dir,
            http: crate::helpers::http_client(),
        };
        for i in 0..3 {
            cluster.start_node(i);
            cluster.wait_ready(i).await;
        }
        cluster.wait_peers(3).await;
        cluster
    }

    fn start_node(&mut self, i: usize) {
        let first_p2p = self.nodes[0].p2p;
        let node = &mut self.nodes[i];
        std::fs::create_dir_all(&node.storage).unwrap();
        let log = std::fs::File::create(node.storage.with_extension("log")).unwrap();
        let mut command = Command::new(&self.binary);
        command
            .current_dir(&node.storage)
            .env("QDRANT__SERVICE__HOST", "127.0.0.1")
            .env("QDRANT__SERVICE__HTTP_PORT", node.http.to_string())
            .env("QDRANT__SERVICE__GRPC_PORT", node.grpc.to_string())
            .env("QDRANT__CLUSTER__ENABLED", "true")
            .env("QDRANT__CLUSTER__P2P__PORT", node.p2p.to_string())
            .env("QDRANT__STORAGE__STORAGE_PATH", node.storage.join("storage"))
            .env("QDRANT__STORAGE__SNAPSHOTS_PATH", node.storage.join("snapshots"))
            .env("QDRANT__TELEMETRY_DISABLED", "true")
            .args(["--uri", &format!("http://127.0.0.1:{}", node.p2p)])
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log));
        if i > 0 {
            command.args(["--bootstrap", &format!("http://127.0.0.1:{first_p2p}")]);
        }
        node.child = Some(command.spawn().expect("qdrant starts"));
    }

    fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    async fn wait_ready(&self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = self
                .http
                .get(self.nodes[i].http_url("/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "qdrant node {i} never became ready");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn wait_peers(&self, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let peers = self
                .get(0, "/cluster")
                .await
                .map_or(0, |c| c["result"]["peers"].as_object().map_or(0, serde_json::Map::len));
            if peers == count {
                return;
            }
            assert!(Instant::now() < deadline, "the cluster never had {count} peers");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn get(&self, i: usize, path: &str) -> Option<Value> {
        let resp = self.http.get(self.nodes[i].http_url(path)).send().await.ok()?;
        resp.json().await.ok()
    }

    /// Waits until every replica of `collection` is active again (a node that came back has
    /// caught up), as node `via` sees it.
    async fn wait_all_active(&self, via: usize, collection: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(info) = self.get(via, &format!("/collections/{collection}/cluster")).await {
                let result = &info["result"];
                let states = result["local_shards"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .chain(result["remote_shards"].as_array().into_iter().flatten())
                    .map(|s| s["state"].as_str().unwrap_or("").to_owned())
                    .collect::<Vec<_>>();
                if !states.is_empty() && states.iter().all(|s| s == "Active") {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "replicas of {collection} never all active again"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Node::grpc_url).collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}

async fn app_on(cluster: &Cluster, fake: &FakeGoogle, replication: u32) -> TestApp {
    let urls = cluster.urls();
    spawn_app_with(on_fake_google(fake.base_url(), move |s| {
        s.vectors.kind = quarry::config::VectorKind::Qdrant;
        s.vectors.urls = urls;
        s.vectors.collection.replication_factor = Some(replication);
        // Background workers: ingestion has to go on by itself while a node is down.
        s.embedding.workers = 2;
    }))
    .await
}

async fn create_world(app: &TestApp) -> (String, String) {
    let world = (app.create_google_world("Aerth", json!({"chunking": crate::helpers::sentence_chunks()}))).await;
    (
        world["id"].as_str().unwrap().to_owned(),
        world["collection"].as_str().unwrap().to_owned(),
    )
}

async fn add(app: &TestApp, world: &str, name: &str, text: &str) {
    let (status, body) = app
        .post(
            &format!("/v1/worlds/{world}/sources"),
            json!({"filename": name, "text": text}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
}

/// Waits until the world has `chunks` chunks, all embedded.
async fn wait_embedded(app: &TestApp, world: &str, chunks: u64, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let (_, body) = app.get(&format!("/v1/worlds/{world}")).await;
        let stats = &body["stats"];
        if stats["chunks"] == chunks && stats["embedded"] == chunks {
            return;
        }
        assert!(Instant::now() < deadline, "not all embedded in time: {stats}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Asks one question per topic of `topics`; answers the status and body of each.
async fn ask(app: &TestApp, world: &str, topics: &[&str]) -> Vec<(StatusCode, Value, String)> {
    let mut answers = Vec::new();
    for topic in topics {
        let (status, body) = app
            .post(
                &format!("/v1/worlds/{world}/retrieve"),
                json!({"query": topic, "top_k": 3}),
            )
            .await;
        answers.push((status, body, (*topic).to_owned()));
    }
    answers
}

/// Each topic's own sentence comes back first, with 3 results.
fn assert_complete(answers: &[(StatusCode, Value, String)], what: &str) {
    for (status, body, topic) in answers {
        assert_eq!(*status, StatusCode::OK, "{what}: {body}");
        let results = body["results"].as_array().unwrap();
        assert_eq!(results.len(), 3, "{what}: {body}");
        assert!(
            results[0]["chunk_text"]
                .as_str()
                .unwrap()
                .contains(topic.trim_end_matches('.')),
            "{what}: {topic} -> {body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_two_replicas_losing_any_one_node_costs_nothing_visible() {
    let test = "with_two_replicas_losing_any_one_node_costs_nothing_visible";
    let Some(binary) = Cluster::binary(test) else { return };
    let mut cluster = Cluster::start(binary).await;
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = app_on(&cluster, &fake, 2).await;
    let (world, collection) = create_world(&app).await;
    let info = cluster.get(1, &format!("/collections/{collection}")).await.unwrap();
    assert_eq!(info["result"]["config"]["params"]["replication_factor"], 2, "{info}");
    add(&app, &world, "first.txt", &TOPICS[..3].join(" ")).await;
    wait_embedded(&app, &world, 3, Duration::from_secs(60)).await;
    // Node 0 is the one quarry talks to first; then the others, one at a time. Each time three
    // more topics are ingested while the node is down.
    for victim in 0..3 {
        cluster.kill(victim);
        let known = 3 + 3 * victim;
        // Asked right after the kill: complete answers.
        assert_complete(
            &ask(&app, &world, &TOPICS[..known]).await,
            &format!("node {victim} just killed"),
        );
        let more = &TOPICS[known..known + 3];
        add(&app, &world, &format!("during-{victim}.txt"), &more.join(" ")).await;
        wait_embedded(&app, &world, (known + 3) as u64, Duration::from_secs(120)).await;
        assert_complete(
            &ask(&app, &world, &TOPICS[..known + 3]).await,
            &format!("node {victim} down, after ingesting"),
        );
        let resp = app.client.get(app.url("/readyz")).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "a node down leaves the service ready");
        let ready: Value = resp.json().await.unwrap();
        let nodes = ready["vectors"]["nodes"].as_array().unwrap();
        assert_eq!(nodes[victim]["ok"], false, "{ready}");
        assert_eq!(nodes.iter().filter(|n| n["ok"] == true).count(), 2, "{ready}");
        assert_eq!(nodes[victim]["preferred"], false, "{ready}");
        cluster.start_node(victim);
        cluster.wait_ready(victim).await;
        cluster.wait_all_active((victim + 1) % 3, &collection).await;
    }
    assert_complete(&ask(&app, &world, &TOPICS).await, "every node back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_one_replica_a_lost_node_is_a_clear_503_and_ingestion_resumes() {
    let test = "with_one_replica_a_lost_node_is_a_clear_503_and_ingestion_resumes";
    let Some(binary) = Cluster::binary(test) else { return };
    let mut cluster = Cluster::start(binary).await;
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = app_on(&cluster, &fake, 1).await;
    let (world, collection) = create_world(&app).await;
    add(&app, &world, "first.txt", &TOPICS[..6].join(" ")).await;
    wait_embedded(&app, &world, 6, Duration::from_secs(60)).await;
    // A node quarry does not talk to first: one shard of three is gone.
    cluster.kill(2);
    for (status, body, _) in ask(&app, &world, &TOPICS[..6]).await {
        assert_eq!(
            status,
            StatusCode::SERVICE_UNAVAILABLE,
            "never a partial answer: {body}"
        );
        assert_eq!(body["error"]["code"], "vector_store_unavailable", "{body}");
    }
    add(&app, &world, "second.txt", &TOPICS[6..].join(" ")).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    cluster.start_node(2);
    cluster.wait_ready(2).await;
    cluster.wait_all_active(0, &collection).await;
    wait_embedded(&app, &world, TOPICS.len() as u64, Duration::from_secs(180)).await;
    assert_complete(&ask(&app, &world, &TOPICS).await, "node back");
}
