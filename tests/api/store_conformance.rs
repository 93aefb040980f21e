//! One conformance suite for the relational store, run against SQLite (always) and
//! PostgreSQL (a fresh database per test; loudly skipped when no server is reachable).
//!
//! The cases are in the submodules, by topic, each run on both backends by `conformance!`; this
//! file holds the macro and the shared setup.

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use quarry::domain::{
    ChunkingProfile, EmbeddingProfile, JobId, NewChunk, NewSource, NewWorld, ProviderKind, RunId, SourceId, WorldId,
};
use quarry::store::Store;

/// Runs `case` against a fresh SQLite store and a fresh Postgres database.
macro_rules! conformance {
    ($name:ident) => {
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}", dir.path().join("nested/dir/quarry.db").display());
                let store = quarry::store::connect(&url).await.expect("sqlite store");
                assert_eq!(store.kind(), "sqlite");
                super::$name(store.clone()).await;
                store.close().await;
            }

            #[tokio::test]
            async fn postgres() {
                let Some(db) =
                    crate::helpers::PgDatabase::create(concat!("store_conformance::", stringify!($name))).await
                else {
                    return;
                };
                let store = quarry::store::connect(&db.url).await.expect("postgres store");
                assert_eq!(store.kind(), "postgres");
                super::$name(store.clone()).await;
                store.close().await;
                db.drop_db().await;
            }
        }
    };
}

pub(crate) fn new_world(name: &str) -> NewWorld {
    NewWorld {
        id: WorldId::new(),
        name: name.into(),
        embedding: EmbeddingProfile {
            provider: ProviderKind::Local,
            model: "all-MiniLM-L6-v2".into(),
            dimensions: 384,
        },
        chunking: ChunkingProfile {
            max_tokens: 192,
            overlap_tokens: 48,
            parent_max_tokens: 768,
            context_prefix: false,
        },
        hybrid: false,
        run: RunId::new(),
        now: Utc::now().trunc_subsecs(6),
    }
}

pub(crate) fn chunks(n: u32) -> Vec<NewChunk> {
    (0..n)
        .map(|i| NewChunk {
            chunk_number: i,
            char_start: u64::from(i) * 10,
            char_end: u64::from(i) * 10 + 9,
            token_count: 3,
            chunk_text: format!("chunk {i:03}."),
            overlap_text: if i == 0 { String::new() } else { format!("tail {i}") },
            page: None,
            embed_prefix: String::new(),
            embed_prefix_tokens: 0,
        })
        .collect()
}

pub(crate) async fn add_source(
    store: &Arc<dyn Store>,
    world: WorldId,
    n: u32,
) -> (quarry::domain::Source, quarry::domain::Job) {
    let run = store.get_world(world).await.unwrap().expect("the world").active_run;
    store
        .add_source(
            &NewSource {
                key: None,
                id: SourceId::new(),
                world_id: world,
                run,
                filename: "book.md".into(),
                content_type: "text/markdown".into(),
                text: "héllo wörld".into(),
                details: Default::default(),
                now: Utc::now().trunc_subsecs(6),
            },
            chunks(n),
            JobId::new(),
        )
        .await
        .expect("add_source")
}

/// Claims everything claimable for `owner` now, with a five-minute lease.
pub(crate) async fn claim(store: &Arc<dyn Store>, owner: &str, limit: u32) -> Vec<quarry::domain::WorkItem> {
    let now = Utc::now().trunc_subsecs(6);
    store
        .claim_work(owner, limit, now + chrono::Duration::minutes(5), now)
        .await
        .unwrap()
}

/// What a worker reports for `items`: each with a vector of its profile's length, whose values
/// tell the chunks apart.
pub(crate) fn vectors_of(items: &[quarry::domain::WorkItem]) -> Vec<quarry::domain::EmbeddedVector> {
    items
        .iter()
        .map(|i| quarry::domain::EmbeddedVector {
            chunk_id: i.chunk_id,
            text_sha256: i.text_sha256.clone(),
            dense: (0..i.profile.dimensions)
                .map(|d| i.chunk_number as f32 + d as f32 / 1024.0)
                .collect(),
        })
        .collect()
}

/// Marks `items` embedded for `owner` under their job and run.
async fn complete(store: &Arc<dyn Store>, owner: &str, items: &[quarry::domain::WorkItem]) -> u64 {
    let done = vectors_of(items);
    store
        .complete_work(owner, items[0].job_id, items[0].run_id, &done, 0, Utc::now())
        .await
        .unwrap()
}

mod cluster;
mod connect;
mod hot_updates;
mod idempotency;
mod job_events;
mod kept_vectors;
mod plans;
mod reingest;
mod retry;
mod secrets;
mod source_details;
mod sources;
mod tokens;
mod work_queue;
mod world_counts;
mod worlds_and_keys;
