//! One conformance suite for the relational store, run against SQLite (always) and
//! PostgreSQL (a fresh database per test; loudly skipped when no server is reachable).

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use quarry::domain::{
    ChunkingProfile, EmbeddingProfile, JobId, JobKind, JobStatus, NewChunk, NewSource, NewWorld, ProviderKind, RunId,
    SourceId, World, WorldId, WorldStats,
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

fn new_world(name: &str) -> NewWorld {
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
        },
        hybrid: false,
        run: RunId::new(),
        now: Utc::now().trunc_subsecs(6),
    }
}

fn chunks(n: u32) -> Vec<NewChunk> {
    (0..n)
        .map(|i| NewChunk {
            chunk_number: i,
            char_start: u64::from(i) * 10,
            char_end: u64::from(i) * 10 + 9,
            token_count: 3,
            chunk_text: format!("chunk {i:03}."),
            overlap_text: if i == 0 { String::new() } else { format!("tail {i}") },
        })
        .collect()
}

async fn add_source(store: &Arc<dyn Store>, world: WorldId, n: u32) -> (quarry::domain::Source, quarry::domain::Job) {
    store
        .add_source(
            NewSource {
                id: SourceId::new(),
                world_id: world,
                filename: "book.md".into(),
                content_type: "text/markdown".into(),
                text: "héllo wörld".into(),
                now: Utc::now().trunc_subsecs(6),
            },
            chunks(n),
            JobId::new(),
        )
        .await
        .expect("add_source")
}

conformance!(worlds_round_trip);
async fn worlds_round_trip(store: Arc<dyn Store>) {
    store.ping().await.unwrap();
    let req = new_world("Aerth");
    let created = store.create_world(req.clone()).await.unwrap();
    let expected = World {
        id: req.id,
        name: "Aerth".into(),
        embedding: req.embedding.clone(),
        chunking: req.chunking,
        hybrid: false,
        active_run: req.run,
        collection: "chunks_local_all-minilm-l6-v2_384".into(),
        created_at: req.now,
        updated_at: req.now,
    };
    assert_eq!(created, expected);
    assert_eq!(store.get_world(req.id).await.unwrap(), Some(expected.clone()));
    assert_eq!(store.get_world(WorldId::new()).await.unwrap(), None);
    assert_eq!(store.world_stats(req.id).await.unwrap(), WorldStats::default());
    assert_eq!(
        store.world_collections(req.id).await.unwrap(),
        vec![expected.collection.clone()]
    );

    let second = store.create_world(new_world("Second")).await.unwrap();
    let listed: Vec<WorldId> = store.list_worlds().await.unwrap().into_iter().map(|w| w.id).collect();
    assert_eq!(listed, vec![req.id, second.id], "oldest first");

    let later = (Utc::now() + chrono::Duration::seconds(5)).trunc_subsecs(6);
    let renamed = store.rename_world(req.id, "Aerth II", later).await.unwrap().unwrap();
    assert_eq!(renamed.name, "Aerth II");
    assert_eq!(renamed.updated_at, later);
    assert_eq!(renamed.created_at, req.now);
    assert!(store.rename_world(WorldId::new(), "x", later).await.unwrap().is_none());
}

conformance!(sources_chunks_and_jobs);
async fn sources_chunks_and_jobs(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    let (first, job) = add_source(&store, world.id, 3).await;
    let (second, _) = add_source(&store, world.id, 2).await;
    assert_eq!(
        (first.book_number, second.book_number),
        (1, 2),
        "book numbers count up per world"
    );
    assert_eq!(first.chars, 11, "chars count Unicode scalar values");
    assert_eq!(first.sha256.len(), 64);
    assert_eq!(first.content_type, "text/markdown");

    let other = store.create_world(new_world("other")).await.unwrap();
    let (other_first, _) = add_source(&store, other.id, 1).await;
    assert_eq!(other_first.book_number, 1, "numbering is per world");

    assert_eq!(store.get_source(world.id, first.id).await.unwrap(), Some(first.clone()));
    assert_eq!(
        store.get_source(other.id, first.id).await.unwrap(),
        None,
        "a source belongs to one world"
    );
    let books: Vec<u32> = store
        .list_sources(world.id)
        .await
        .unwrap()
        .iter()
        .map(|s| s.book_number)
        .collect();
    assert_eq!(books, [1, 2]);

    let counts = store.source_counts(world.id, first.id).await.unwrap();
    assert_eq!(
        (counts.chunks, counts.pending, counts.embedded, counts.failed),
        (3, 3, 0, 0)
    );
    let stats = store.world_stats(world.id).await.unwrap();
    assert_eq!(
        stats,
        WorldStats {
            sources: 2,
            chunks: 5,
            embedded: 0,
            pending: 5,
            failed: 0
        }
    );

    assert_eq!(job.kind, JobKind::Ingest);
    assert_eq!(job.status, JobStatus::Running);
    assert_eq!(job.run_id, world.active_run);
    assert_eq!((job.counts.total, job.counts.pending, job.counts.embedded), (3, 3, 0));
    assert!(job.errors.is_empty());
    assert_eq!(store.get_job(job.id).await.unwrap(), Some(job.clone()));
    assert_eq!(store.get_job(JobId::new()).await.unwrap(), None);
    let jobs = store.list_jobs(world.id).await.unwrap();
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().all(|j| j.world_id == world.id));
}

conformance!(delete_cascades_within_one_world);
async fn delete_cascades_within_one_world(store: Arc<dyn Store>) {
    let doomed = store.create_world(new_world("doomed")).await.unwrap();
    let kept = store.create_world(new_world("kept")).await.unwrap();
    let (doomed_source, doomed_job) = add_source(&store, doomed.id, 4).await;
    let (kept_source, kept_job) = add_source(&store, kept.id, 2).await;

    assert!(store.delete_world(doomed.id).await.unwrap());
    assert!(
        !store.delete_world(doomed.id).await.unwrap(),
        "second delete finds nothing"
    );
    assert_eq!(store.get_world(doomed.id).await.unwrap(), None);
    assert_eq!(store.get_source(doomed.id, doomed_source.id).await.unwrap(), None);
    assert_eq!(store.get_job(doomed_job.id).await.unwrap(), None);
    assert!(store.list_jobs(doomed.id).await.unwrap().is_empty());
    assert_eq!(store.world_stats(doomed.id).await.unwrap(), WorldStats::default());
    assert!(store.world_collections(doomed.id).await.unwrap().is_empty());

    assert_eq!(
        store.get_source(kept.id, kept_source.id).await.unwrap(),
        Some(kept_source)
    );
    assert_eq!(store.get_job(kept_job.id).await.unwrap(), Some(kept_job));
    assert_eq!(store.world_stats(kept.id).await.unwrap().chunks, 2);
}

conformance!(adding_to_a_missing_world_writes_nothing);
async fn adding_to_a_missing_world_writes_nothing(store: Arc<dyn Store>) {
    let missing = WorldId::new();
    let result = store
        .add_source(
            NewSource {
                id: SourceId::new(),
                world_id: missing,
                filename: "a".into(),
                content_type: "text/plain".into(),
                text: "t".into(),
                now: Utc::now(),
            },
            chunks(1),
            JobId::new(),
        )
        .await;
    assert!(result.is_err());
    assert!(store.list_sources(missing).await.unwrap().is_empty());
    assert!(store.list_jobs(missing).await.unwrap().is_empty());
}

conformance!(keys_are_counted_per_provider);
async fn keys_are_counted_per_provider(store: Arc<dyn Store>) {
    for provider in ProviderKind::ALL {
        assert_eq!(store.count_eligible_keys(provider).await.unwrap(), 0);
    }
    let now = Utc::now().trunc_subsecs(6);
    let key = |fingerprint: &str| quarry::domain::NewKey {
        id: quarry::domain::KeyId::new(),
        provider: ProviderKind::Google,
        label: "config #1".into(),
        origin: quarry::domain::KeyOrigin::Config,
        quota_group: Some("p1".into()),
        sealed: None,
        fingerprint: fingerprint.into(),
        now,
    };
    let first = store.upsert_config_key(key("…abcd:01234567")).await.unwrap();
    // Mirroring the same configuration key again keeps one row (and its id).
    let again = store.upsert_config_key(key("…abcd:01234567")).await.unwrap();
    assert_eq!(again.id, first.id);
    assert_eq!(store.list_keys().await.unwrap().len(), 1);
    assert_eq!(store.count_eligible_keys(ProviderKind::Google).await.unwrap(), 1);
    assert_eq!(store.count_eligible_keys(ProviderKind::OpenAi).await.unwrap(), 0);

    let until = now + chrono::Duration::seconds(90);
    store.set_key_cooldown(first.id, Some(until), 2, now).await.unwrap();
    let stored = store.get_key(first.id).await.unwrap().unwrap();
    assert_eq!((stored.cooldown_until, stored.consecutive_failures), (Some(until), 2));
    store
        .extend_group_cooldown(ProviderKind::Google, "p1", until)
        .await
        .unwrap();
    store
        .extend_group_cooldown(ProviderKind::Google, "p1", now)
        .await
        .unwrap();
    let groups = store.list_group_cooldowns().await.unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].until, until, "a group cooldown is never shortened");

    store.retire_key(first.id, "API_KEY_INVALID", now).await.unwrap();
    assert_eq!(store.count_eligible_keys(ProviderKind::Google).await.unwrap(), 0);
    // Re-enabling lifts the retirement and the cooldown.
    let enabled = store.set_key_enabled(first.id, true, now).await.unwrap().unwrap();
    assert!(!enabled.retired && enabled.cooldown_until.is_none());
    assert_eq!(store.count_eligible_keys(ProviderKind::Google).await.unwrap(), 1);
    store.set_key_enabled(first.id, false, now).await.unwrap();
    assert_eq!(store.count_eligible_keys(ProviderKind::Google).await.unwrap(), 0);
    assert!(store.delete_key(first.id).await.unwrap());
    assert!(store.get_key(first.id).await.unwrap().is_none());
}

#[tokio::test]
async fn sqlite_creates_the_file_and_its_folders_and_uses_wal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a/b/c/quarry.db");
    let store = quarry::store::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    assert!(path.exists());
    store.create_world(new_world("w")).await.unwrap();
    assert!(
        dir.path().join("a/b/c/quarry.db-wal").exists(),
        "WAL mode keeps a -wal file beside the database"
    );
    store.close().await;
}

#[tokio::test]
async fn unreachable_postgres_is_a_startup_error() {
    // Port 9 (discard) refuses connections on loopback.
    let err = quarry::store::connect("postgres://nobody@127.0.0.1:9/none")
        .await
        .err()
        .expect("must fail");
    assert!(matches!(err, quarry::store::Error::Unavailable(_)), "{err:?}");
}
