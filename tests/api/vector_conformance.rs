//! One conformance suite for both vector backends.
//!
//! Every check is an `async fn` over `&dyn VectorRepo`, written once and run twice by
//! `conformance_tests!`: against [`EdgeRepo`] in a temporary directory (always) and against a
//! Qdrant server when `QUARRY_TEST_QDRANT_URL` is set (e.g. `http://localhost:6334`, optional
//! `QUARRY_TEST_QDRANT_API_KEY`), in collections under a unique prefix that are deleted afterwards.
//! Without the variable the server tests say loudly that they were skipped.
//!
//! Vectors are tiny (4 dimensions) and chosen so that their cosine scores are known exactly.
//!
//! The checks are in the submodules, by topic, each file running its own through
//! `conformance_tests!`; this file holds the fixtures, the backends and the macro.

use std::io::Write as _;
use std::sync::Once;

use quarry::domain::{RunId, SourceId, WorldId, point_id};
use quarry::vector::edge::EdgeRepo;
use quarry::vector::server::ServerRepo;
use quarry::vector::settings::Layout;
use quarry::vector::{CollectionSpec, DenseSearch, Point, PointFilter, PointPayload, SparseVector, VectorRepo};
use uuid::Uuid;

const DIM: u32 = 4;

// ---------------------------------------------------------------------------------------------
// fixtures

fn spec(name: &str, sparse: bool) -> CollectionSpec {
    CollectionSpec {
        name: name.to_owned(),
        dimensions: DIM,
        sparse,
    }
}

/// One (world, run, source) slot family.
#[derive(Clone, Copy)]
struct Slot {
    world: WorldId,
    run: RunId,
    source: SourceId,
}

impl Slot {
    fn new() -> Self {
        Slot {
            world: WorldId::new(),
            run: RunId::new(),
            source: SourceId::new(),
        }
    }

    fn with_run(self, run: RunId) -> Self {
        Slot { run, ..self }
    }

    fn with_source(self, source: SourceId) -> Self {
        Slot { source, ..self }
    }

    fn payload(&self, chunk: u32) -> PointPayload {
        PointPayload {
            world_id: self.world,
            run_id: self.run,
            source_id: self.source,
            book_number: 1,
            chunk_number: chunk,
            text_sha256: format!("{:064x}", u128::from(chunk) * 0x9e37_79b9_7f4a_7c15),
            token_count: 10 + chunk,
        }
    }

    fn id(&self, chunk: u32) -> Uuid {
        point_id(self.world, self.run, self.source, chunk)
    }

    fn point(&self, chunk: u32, dense: [f32; 4]) -> Point {
        Point {
            id: self.id(chunk),
            dense: dense.to_vec(),
            sparse: None,
            payload: self.payload(chunk),
        }
    }

    fn sparse_point(&self, chunk: u32, dense: [f32; 4], terms: &[(u32, f32)]) -> Point {
        Point {
            sparse: Some(SparseVector {
                indices: terms.iter().map(|t| t.0).collect(),
                values: terms.iter().map(|t| t.1).collect(),
            }),
            ..self.point(chunk, dense)
        }
    }
}

fn dense_search(vector: [f32; 4], filter: PointFilter, limit: usize, threshold: Option<f32>) -> DenseSearch {
    DenseSearch {
        hnsw_ef: None,
        vector: vector.to_vec(),
        filter,
        sources: None,
        limit,
        score_threshold: threshold,
    }
}

fn assert_close(actual: f32, expected: f32, what: &str) {
    assert!(
        (actual - expected).abs() < 1e-4,
        "{what}: score {actual}, expected {expected}"
    );
}

// ---------------------------------------------------------------------------------------------
// backends

/// An [`EdgeRepo`] in its own temporary directory. Field order matters: the repo is dropped
/// before the directory is removed.
struct EdgeEnv {
    repo: EdgeRepo,
    dir: tempfile::TempDir,
}

impl EdgeEnv {
    fn new() -> Self {
        Self::with_layout(Layout::default())
    }

    fn with_layout(layout: Layout) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = EdgeRepo::open_with(dir.path(), layout).unwrap();
        EdgeEnv { repo, dir }
    }

    /// Closes the repo and opens the same directory with `layout`.
    async fn reopen(self, layout: Layout) -> Self {
        let EdgeEnv { repo, dir } = self;
        repo.close().await.unwrap();
        drop(repo);
        let repo = EdgeRepo::open_with(dir.path(), layout).unwrap();
        EdgeEnv { repo, dir }
    }

    async fn finish(self) {
        self.repo.close().await.unwrap();
        drop(self.repo);
        drop(self.dir);
    }
}

/// Says, past the test harness's output capture, that the server suite did not run.
fn announce_server_skip() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = writeln!(
            std::io::stderr(),
            "\n************************************************************************\n\
             SKIPPED: Qdrant server conformance suite — set QUARRY_TEST_QDRANT_URL to run it\n\
             (e.g. QUARRY_TEST_QDRANT_URL=http://localhost:6334; gRPC port)\n\
             ************************************************************************\n"
        );
    });
}

/// A [`ServerRepo`] on the server named by `QUARRY_TEST_QDRANT_URL`, with a collection prefix
/// unique to this test; its collections are deleted on drop (also when the test fails).
struct ServerEnv {
    repo: ServerRepo,
    url: String,
    api_key: Option<String>,
    prefix: String,
}

impl ServerEnv {
    fn from_env(test: &str) -> Option<Self> {
        Self::from_env_with(test, Layout::default())
    }

    /// The server of `QUARRY_TEST_QDRANT_URL`, reached through `urls_before` (addresses tried
    /// first: dead ones, for failover) and then the real one, with `layout`.
    fn from_env_with(test: &str, layout: Layout) -> Option<Self> {
        Self::from_env_nodes(test, layout, &[])
    }

    fn from_env_nodes(test: &str, layout: Layout, urls_before: &[&str]) -> Option<Self> {
        let Ok(url) = std::env::var("QUARRY_TEST_QDRANT_URL") else {
            announce_server_skip();
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: vector_conformance server test `{test}` (no QUARRY_TEST_QDRANT_URL)"
            );
            return None;
        };
        let api_key = std::env::var("QUARRY_TEST_QDRANT_API_KEY").ok();
        let prefix = format!("quarry_test_{}_", Uuid::new_v4().simple());
        let mut urls: Vec<String> = urls_before.iter().map(|u| (*u).to_owned()).collect();
        urls.push(url.clone());
        let repo = ServerRepo::connect_nodes(&urls, api_key.clone(), prefix.clone(), layout).unwrap();
        Some(ServerEnv {
            repo,
            url,
            api_key,
            prefix,
        })
    }
}

impl ServerEnv {
    /// Another client of the same server and collections, with another layout.
    fn repo_with(&self, layout: Layout) -> ServerRepo {
        ServerRepo::connect_nodes(
            std::slice::from_ref(&self.url),
            self.api_key.clone(),
            self.prefix.clone(),
            layout,
        )
        .unwrap()
    }
}

impl Drop for ServerEnv {
    fn drop(&mut self) {
        let (url, api_key, prefix) = (self.url.clone(), self.api_key.clone(), self.prefix.clone());
        // Drop cannot await: clean up on a throwaway runtime in its own thread.
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let client = qdrant_client::Qdrant::from_url(&url)
                    .api_key(api_key)
                    .skip_compatibility_check()
                    .build()?;
                for collection in client.list_collections().await?.collections {
                    if collection.name.starts_with(&prefix) {
                        client.delete_collection(collection.name).await?;
                    }
                }
                Ok::<(), qdrant_client::QdrantError>(())
            })
        });
        match cleanup.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("could not delete test collections {}*: {e}", self.prefix),
            Err(_) => eprintln!("cleanup of test collections {}* panicked", self.prefix),
        }
    }
}

macro_rules! conformance_tests {
    ($($name:ident),* $(,)?) => {
        /// The suite against the embedded engine: always runs.
        mod edge {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let env = crate::vector_conformance::EdgeEnv::new();
                    super::$name(&env.repo).await;
                    env.finish().await;
                }
            )*
        }

        /// The suite against a Qdrant server: runs when `QUARRY_TEST_QDRANT_URL` is set.
        mod server {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(env) = crate::vector_conformance::ServerEnv::from_env(stringify!($name)) else { return };
                    super::$name(&env.repo).await;
                }
            )*
        }
    };
}

mod collections;
mod deletes;
mod embedded;
mod layout;
mod search;
mod unreachable_server;
