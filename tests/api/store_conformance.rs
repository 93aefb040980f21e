//! One conformance suite for the relational store, run against SQLite (always) and
//! PostgreSQL (a fresh database per test; loudly skipped when no server is reachable).

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use quarry::domain::{
    ChunkId, ChunkingProfile, EmbeddingProfile, EntryError, JobId, JobKind, JobStatus, ManifestState, NewChunk,
    NewSource, NewWorld, ProviderKind, RunId, SourceId, World, WorldId, WorldStats,
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
    let run = store.get_world(world).await.unwrap().expect("the world").active_run;
    store
        .add_source(
            &NewSource {
                id: SourceId::new(),
                world_id: world,
                run,
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

/// Adds a one-chunk source to `world`, cut for `run`.
async fn add_one_chunk(
    store: &Arc<dyn Store>,
    world: WorldId,
    run: RunId,
) -> quarry::store::Result<(quarry::domain::Source, quarry::domain::Job)> {
    let source = NewSource {
        id: SourceId::new(),
        world_id: world,
        run,
        filename: "a".into(),
        content_type: "text/plain".into(),
        text: "t".into(),
        now: Utc::now(),
    };
    store.add_source(&source, chunks(1), JobId::new()).await
}

conformance!(adding_to_a_missing_world_writes_nothing);
async fn adding_to_a_missing_world_writes_nothing(store: Arc<dyn Store>) {
    let missing = WorldId::new();
    let result = add_one_chunk(&store, missing, RunId::new()).await;
    assert!(result.is_err());
    assert!(store.list_sources(missing).await.unwrap().is_empty());
    assert!(store.list_jobs(missing).await.unwrap().is_empty());
}

conformance!(a_source_cut_for_a_run_the_world_no_longer_serves_is_refused);
async fn a_source_cut_for_a_run_the_world_no_longer_serves_is_refused(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    let (old, new) = (world.active_run, RunId::new());
    // Chunks were cut for `new` while the world still serves `old` (or the other way round
    // after a re-ingest switched it): refused, nothing written, the book number not spent.
    let result = add_one_chunk(&store, world.id, new).await;
    assert!(matches!(result, Err(quarry::store::Error::RunChanged)), "{result:?}");
    assert!(store.list_sources(world.id).await.unwrap().is_empty());
    assert!(store.list_jobs(world.id).await.unwrap().is_empty());
    assert_eq!(store.get_world(world.id).await.unwrap().unwrap().active_run, old);
    let (source, job) = add_source(&store, world.id, 1).await;
    assert_eq!((source.book_number, job.run_id), (1, old));
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

/// Claims everything claimable for `owner` now, with a five-minute lease.
async fn claim(store: &Arc<dyn Store>, owner: &str, limit: u32) -> Vec<quarry::domain::WorkItem> {
    let now = Utc::now().trunc_subsecs(6);
    store
        .claim_work(owner, limit, now + chrono::Duration::minutes(5), now)
        .await
        .unwrap()
}

/// Marks `items` embedded for `owner` under their job and run.
async fn complete(store: &Arc<dyn Store>, owner: &str, items: &[quarry::domain::WorkItem]) -> u64 {
    let done: Vec<_> = items.iter().map(|i| (i.chunk_id, i.text_sha256.clone())).collect();
    store
        .complete_work(owner, items[0].job_id, items[0].run_id, &done, 0, Utc::now())
        .await
        .unwrap()
}

conformance!(work_is_leased_to_one_owner_and_completed_only_while_running);
async fn work_is_leased_to_one_owner_and_completed_only_while_running(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    let (_, job) = add_source(&store, world.id, 5).await;
    let a = claim(&store, "owner-a", 3).await;
    let b = claim(&store, "owner-b", 10).await;
    assert_eq!((a.len(), b.len()), (3, 2), "claims are disjoint");
    let mut numbers: Vec<u32> = a.iter().chain(&b).map(|i| i.chunk_number).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, [0, 1, 2, 3, 4]);
    assert_eq!(a[0].chunk_text, "chunk 000.");
    assert_eq!(a[0].profile, world.embedding);
    assert!(claim(&store, "owner-c", 10).await.is_empty(), "everything is leased");

    // Only the holder can complete; nothing is marked for another owner.
    let done: Vec<_> = a.iter().map(|i| (i.chunk_id, i.text_sha256.clone())).collect();
    assert_eq!(
        store
            .complete_work("owner-b", job.id, world.active_run, &done, 0, Utc::now())
            .await
            .unwrap(),
        0
    );
    assert_eq!(complete(&store, "owner-a", &a).await, 3);

    // A paused job advances nothing; a released entry can be claimed again after resume.
    let now = Utc::now().trunc_subsecs(6);
    store
        .transition_job(job.id, &[JobStatus::Running], JobStatus::Paused, now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(complete(&store, "owner-b", &b[..1]).await, 0, "paused: nothing marked");
    let ids: Vec<_> = b.iter().map(|i| i.chunk_id).collect();
    store
        .release_work("owner-b", job.id, &ids, None, true, now)
        .await
        .unwrap();
    assert!(
        claim(&store, "owner-c", 10).await.is_empty(),
        "paused jobs are not claimed"
    );
    store
        .transition_job(job.id, &[JobStatus::Paused], JobStatus::Running, now)
        .await
        .unwrap()
        .unwrap();
    let again = claim(&store, "owner-c", 10).await;
    assert_eq!(again.len(), 2);

    // One entry fails for good (attempts exhausted), the other is completed: the job fails.
    let failed = store
        .fail_work(
            "owner-c",
            job.id,
            again[0].chunk_id,
            "provider_error",
            "refused",
            1,
            false,
            now,
            now,
        )
        .await
        .unwrap();
    assert!(failed);
    assert_eq!(complete(&store, "owner-c", &again[1..]).await, 1);
    let finished = store.finish_job_if_done(job.id, Utc::now()).await.unwrap().unwrap();
    assert_eq!(finished.status, JobStatus::Failed);
    assert_eq!(
        (
            finished.counts.embedded,
            finished.counts.failed,
            finished.counts.rate_limited
        ),
        (4, 1, 2)
    );
    assert_eq!(finished.errors.len(), 1);
    assert_eq!(finished.errors[0].code, "provider_error");
    // The world's listing reads the same errors for this job, and none for the others.
    add_source(&store, world.id, 2).await;
    let listed = store.list_jobs(world.id).await.unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    for other in &listed {
        if other.id == job.id {
            assert_eq!(other.errors, finished.errors);
        } else {
            assert!(other.errors.is_empty(), "{other:?}");
        }
    }
}

conformance!(expired_leases_return_to_the_queue);
async fn expired_leases_return_to_the_queue(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    add_source(&store, world.id, 2).await;
    let now = Utc::now().trunc_subsecs(6);
    let short = store
        .claim_work("crashed", 10, now + chrono::Duration::milliseconds(1), now)
        .await
        .unwrap();
    assert_eq!(short.len(), 2);
    let later = now + chrono::Duration::seconds(1);
    let taken = store
        .claim_work("survivor", 10, later + chrono::Duration::minutes(5), later)
        .await
        .unwrap();
    assert_eq!(taken.len(), 2, "an expired lease is pending again");
    let done: Vec<_> = short.iter().map(|i| (i.chunk_id, i.text_sha256.clone())).collect();
    assert_eq!(
        store
            .complete_work("crashed", short[0].job_id, short[0].run_id, &done, 0, later)
            .await
            .unwrap(),
        0,
        "the old owner's late answer is dropped"
    );
}

conformance!(retrieval_reads_and_requeues_by_point);
async fn retrieval_reads_and_requeues_by_point(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    let other = store.create_world(new_world("other")).await.unwrap();
    let (source, ingest) = add_source(&store, world.id, 4).await;
    add_source(&store, other.id, 2).await;
    let run = world.active_run;
    let embedded = |at_most| {
        let store = store.clone();
        async move {
            let (found, n) = store.world_for_retrieval(world.id, at_most).await.unwrap().unwrap();
            assert_eq!(found.id, world.id);
            n
        }
    };
    assert_eq!(embedded(100).await, 0);
    let items = claim(&store, "w", 10).await;
    let mine: Vec<_> = items.iter().filter(|i| i.world_id == world.id).cloned().collect();
    assert_eq!(mine.len(), 4, "{items:?}");
    assert_eq!(complete(&store, "w", &mine).await, 4);
    assert_eq!(embedded(100).await, 4, "the other world's entries are not counted");
    assert_eq!(embedded(3).await, 3, "counting stops at the bound");
    assert_eq!(embedded(0).await, 0);
    assert!(store.world_for_retrieval(WorldId::new(), 8).await.unwrap().is_none());

    // Reuse finds embedded text by hash, per world or anywhere, in the same collection only.
    let hashes: Vec<String> = mine.iter().map(|i| i.text_sha256.clone()).collect();
    let found = store
        .find_reusable(&world.collection, Some(world.id), &hashes)
        .await
        .unwrap();
    assert_eq!(found.len(), 4);
    assert!(
        found
            .iter()
            .all(|(h, p)| mine.iter().any(|i| &i.text_sha256 == h && &i.point_id == p))
    );
    assert!(
        store
            .find_reusable(&world.collection, Some(other.id), &hashes)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .find_reusable(&world.collection, None, &hashes)
            .await
            .unwrap()
            .len(),
        4
    );
    assert!(
        store
            .find_reusable("chunks_elsewhere", None, &hashes)
            .await
            .unwrap()
            .is_empty()
    );

    // By point id, within one world and run only.
    let points: Vec<uuid::Uuid> = mine.iter().map(|i| i.point_id).collect();
    let mut found = store.chunks_by_points(world.id, run, &points).await.unwrap();
    found.sort_by_key(|c| c.chunk.chunk_number);
    assert_eq!(found.len(), 4);
    assert_eq!(found[2].chunk.chunk_text, "chunk 002.");
    assert_eq!(found[2].chunk.overlap_text, "tail 2");
    assert_eq!(found[2].point_id, points[2]);
    assert_eq!(found[2].source_filename, "book.md");
    assert_eq!(found[2].chunk.source_id, source.id);
    assert!(
        store
            .chunks_by_points(other.id, other.active_run, &points)
            .await
            .unwrap()
            .is_empty()
    );
    let unknown = [uuid::Uuid::new_v4()];
    assert!(
        store
            .chunks_by_points(world.id, run, &unknown)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.chunks_by_points(world.id, run, &[]).await.unwrap().is_empty());

    let window = store.chunk_windows(world.id, run, &[(source.id, 1, 9)]).await.unwrap();
    let numbers: Vec<u32> = window.iter().map(|c| c.chunk.chunk_number).collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert!(
        store
            .chunk_windows(other.id, run, &[(source.id, 0, 3)])
            .await
            .unwrap()
            .is_empty()
    );
    // Several windows in one read: overlapping ones give each chunk once, in reading order, and
    // a window of an unknown source adds nothing.
    let windows = [
        (source.id, 2, 3),
        (SourceId::new(), 0, 9),
        (source.id, 0, 0),
        (source.id, 1, 2),
    ];
    let window = store.chunk_windows(world.id, run, &windows).await.unwrap();
    let numbers: Vec<u32> = window.iter().map(|c| c.chunk.chunk_number).collect();
    assert_eq!(numbers, [0, 1, 2, 3]);
    assert!(store.chunk_windows(world.id, run, &[]).await.unwrap().is_empty());
    // More windows than one statement takes (100 per read) still come back whole.
    let many: Vec<_> = (0..450).map(|i| (source.id, i % 4, i % 4)).collect();
    let window = store.chunk_windows(world.id, run, &many).await.unwrap();
    let numbers: Vec<u32> = window.iter().map(|c| c.chunk.chunk_number).collect();
    assert_eq!(numbers, [0, 1, 2, 3]);

    // Requeued slots go to one running repair job; pending ones are left alone.
    let now = Utc::now().trunc_subsecs(6);
    let repair = store
        .requeue_entries(world.id, run, &[mine[0].chunk_id], "stale_point", None, now)
        .await
        .unwrap()
        .expect("a repair job")
        .0;
    assert_ne!(repair, ingest.id);
    let again = store
        .requeue_entries(
            world.id,
            run,
            &[mine[0].chunk_id, mine[1].chunk_id],
            "stale_point",
            None,
            now,
        )
        .await
        .unwrap();
    assert_eq!(
        again,
        Some((repair, 1)),
        "the running repair job is reused; one entry was still embedded"
    );
    let job = store.get_job(repair).await.unwrap().unwrap();
    assert_eq!((job.kind, job.status), (JobKind::Repair, JobStatus::Running));
    assert_eq!(job.counts.total, 2, "the already pending slot was not counted twice");
    assert_eq!(embedded(100).await, 2);
    assert_eq!(
        store
            .requeue_entries(world.id, run, &[mine[0].chunk_id], "stale_point", None, now)
            .await
            .unwrap(),
        None,
        "nothing to requeue"
    );
    // Claims rotate between jobs: the other world's ingest job may come first.
    let mut requeued = claim(&store, "r", 10).await;
    if requeued.first().is_some_and(|i| i.world_id == other.id) {
        requeued = claim(&store, "r", 10).await;
    }
    assert_eq!(requeued.len(), 2);
    assert!(requeued.iter().all(|i| i.job_id == repair && i.attempts == 0));
    assert_eq!(complete(&store, "r", &requeued).await, 2);
    let done = store.finish_job_if_done(repair, Utc::now()).await.unwrap().unwrap();
    assert_eq!(done.status, JobStatus::Completed);

    // A job that has ended takes no more work (repair's own job, finished while the repair ran):
    // the entry goes to a new running repair job, which counts it and will embed it.
    let (later, n) = store
        .requeue_entries(world.id, run, &[mine[2].chunk_id], "point_missing", Some(repair), now)
        .await
        .unwrap()
        .expect("requeued");
    assert_eq!(n, 1);
    assert_ne!(later, repair, "not into the completed job");
    let fresh = store.get_job(later).await.unwrap().unwrap();
    assert_eq!(
        (fresh.kind, fresh.status, fresh.counts.total),
        (JobKind::Repair, JobStatus::Running, 1)
    );
    let ended = store.get_job(repair).await.unwrap().unwrap();
    assert_eq!(
        (ended.status, ended.counts.total),
        (JobStatus::Completed, 2),
        "untouched"
    );
    let mut item = claim(&store, "r", 10).await;
    if item.first().is_some_and(|i| i.world_id == other.id) {
        item = claim(&store, "r", 10).await;
    }
    assert_eq!(item.len(), 1);
    assert_eq!(complete(&store, "r", &item).await, 1);
    // An entry the live job had itself counted as embedded goes back to pending in its counts,
    // not a second time into its total.
    assert_eq!(
        store
            .requeue_entries(world.id, run, &[mine[2].chunk_id], "point_missing", Some(later), now)
            .await
            .unwrap(),
        Some((later, 1))
    );
    let counts = store.get_job(later).await.unwrap().unwrap().counts;
    assert_eq!((counts.total, counts.embedded, counts.pending), (1, 0, 1), "{counts:?}");
}

conformance!(requeues_in_a_run_being_built_go_to_its_reingest_job_and_hold_the_switch);
async fn requeues_in_a_run_being_built_go_to_its_reingest_job_and_hold_the_switch(store: Arc<dyn Store>) {
    use quarry::store::ReingestStep;
    let now = Utc::now().trunc_subsecs(6);
    let world = store.create_world(new_world("W")).await.unwrap();
    let (run, job, items) = reingest_fully_embedded(&store, &world).await;
    let built: Vec<ChunkId> = items.iter().filter(|i| i.run_id == run).map(|i| i.chunk_id).collect();
    assert_eq!(built.len(), 2);
    // Paused, then a repair finds one of the new run's points missing: the entry goes back to
    // the re-ingest job, not to a repair job of its own (which could finish apart from it).
    store
        .transition_job(job.id, &[JobStatus::Running], JobStatus::Paused, now)
        .await
        .unwrap()
        .unwrap();
    let other_job = JobId::new();
    assert_eq!(
        store
            .requeue_entries(world.id, run, &built[..1], "point_missing", Some(other_job), now)
            .await
            .unwrap(),
        Some((job.id, 1))
    );
    let counts = store.get_job(job.id).await.unwrap().unwrap().counts;
    assert_eq!((counts.total, counts.embedded, counts.pending), (2, 1, 1), "{counts:?}");
    assert!(claim(&store, "w", 10).await.is_empty(), "a paused job's entries wait");
    store
        .transition_job(job.id, &[JobStatus::Paused], JobStatus::Running, now)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(store.finish_reingest(job.id, now).await.unwrap(), ReingestStep::NotDone),
        "no switch while an entry of the run is pending"
    );
    embed_the_last_entry_and_switch(&store, &job).await;
}

conformance!(source_text_and_chunk_pages);
async fn source_text_and_chunk_pages(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    let other = store.create_world(new_world("other")).await.unwrap();
    let (source, job) = add_source(&store, world.id, 5).await;
    assert_eq!(
        store.source_text(world.id, source.id).await.unwrap().as_deref(),
        Some("héllo wörld")
    );
    assert_eq!(
        store.source_text(other.id, source.id).await.unwrap(),
        None,
        "one world only"
    );
    assert_eq!(store.source_text(world.id, SourceId::new()).await.unwrap(), None);

    let page = store.list_chunks(world.id, source.id, 0, 2).await.unwrap();
    assert_eq!(page.total, 5);
    let numbers: Vec<u32> = page.chunks.iter().map(|c| c.chunk.chunk_number).collect();
    assert_eq!(numbers, [0, 1]);
    let first = &page.chunks[1];
    assert_eq!(first.chunk.chunk_text, "chunk 001.");
    assert_eq!(first.chunk.overlap_text, "tail 1");
    assert_eq!((first.chunk.char_start, first.chunk.char_end), (10, 19));
    assert_eq!(first.chunk.token_count, 3);
    assert_eq!(first.chunk.sha256.len(), 64);
    assert_eq!(first.chunk.run_id, world.active_run);
    assert_eq!(
        (first.state, first.attempts, first.last_error.clone()),
        (ManifestState::Pending, 0, None)
    );
    let rest = store.list_chunks(world.id, source.id, 2, 1000).await.unwrap();
    let numbers: Vec<u32> = rest.chunks.iter().map(|c| c.chunk.chunk_number).collect();
    assert_eq!((numbers, rest.total), (vec![2, 3, 4], 5));
    let past = store.list_chunks(world.id, source.id, 5, 10).await.unwrap();
    assert!(past.chunks.is_empty());
    assert_eq!(past.total, 5, "the total does not depend on the page");
    let huge = store.list_chunks(world.id, source.id, u64::MAX, 10).await.unwrap();
    assert!(huge.chunks.is_empty());
    let foreign = store.list_chunks(other.id, source.id, 0, 10).await.unwrap();
    assert_eq!((foreign.chunks.len(), foreign.total), (0, 0));

    // Entry states: a retried failure keeps its error while pending, a final one is failed,
    // an embedded chunk has none.
    let items = claim(&store, "w", 10).await;
    let now = Utc::now().trunc_subsecs(6);
    let later = now + chrono::Duration::minutes(10);
    assert!(
        !store
            .fail_work(
                "w",
                job.id,
                items[0].chunk_id,
                "provider_error",
                "try again",
                3,
                false,
                later,
                now
            )
            .await
            .unwrap()
    );
    assert!(
        store
            .fail_work(
                "w",
                job.id,
                items[1].chunk_id,
                "input_too_large",
                "too long",
                3,
                true,
                later,
                now
            )
            .await
            .unwrap()
    );
    assert_eq!(complete(&store, "w", &items[2..3]).await, 1);
    let states = store.list_chunks(world.id, source.id, 0, 3).await.unwrap().chunks;
    assert_eq!(states[0].state, ManifestState::Pending);
    assert_eq!(states[0].attempts, 1);
    assert_eq!(
        states[0].last_error,
        Some(EntryError {
            code: "provider_error".into(),
            message: "try again".into()
        })
    );
    assert_eq!(states[1].state, ManifestState::Failed);
    assert_eq!(
        states[1].last_error.as_ref().map(|e| e.code.as_str()),
        Some("input_too_large")
    );
    assert_eq!(
        (states[2].state, states[2].attempts, states[2].last_error.clone()),
        (ManifestState::Embedded, 0, None)
    );
}

conformance!(deleting_a_source_removes_its_rows_and_keeps_jobs_coherent);
async fn deleting_a_source_removes_its_rows_and_keeps_jobs_coherent(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    let other = store.create_world(new_world("other")).await.unwrap();
    let run = world.active_run;
    let (doomed, doomed_job) = add_source(&store, world.id, 3).await;
    let (kept, kept_job) = add_source(&store, world.id, 2).await;
    let (foreign, _) = add_source(&store, other.id, 1).await;

    // The doomed source's job embeds chunk 0 and still has 1 and 2 to do; the kept source is
    // embedded and its job completed; the other world's entry stays pending.
    let later = Utc::now() + chrono::Duration::hours(1);
    let mut doomed_pending = Vec::new();
    let mut kept_items = Vec::new();
    loop {
        let items = claim(&store, "w", 10).await;
        if items.is_empty() {
            break;
        }
        for item in items {
            if item.world_id == other.id || (item.source_id == doomed.id && item.chunk_number > 0) {
                let ids = [item.chunk_id];
                store
                    .release_work("w", item.job_id, &ids, Some(later), false, Utc::now())
                    .await
                    .unwrap();
                if item.source_id == doomed.id {
                    doomed_pending.push(item);
                }
            } else {
                assert_eq!(complete(&store, "w", std::slice::from_ref(&item)).await, 1);
                if item.source_id == kept.id {
                    kept_items.push(item);
                }
            }
        }
    }
    assert_eq!(doomed_pending.len(), 2);
    assert_eq!(kept_items.len(), 2);
    let kept_done = store
        .finish_job_if_done(kept_job.id, Utc::now())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept_done.status, JobStatus::Completed);

    // A paused repair job holds one slot of each source.
    let now = Utc::now().trunc_subsecs(6);
    let doomed_points = store
        .list_chunks(world.id, doomed.id, 0, 10)
        .await
        .unwrap()
        .chunks
        .into_iter()
        .map(|c| c.chunk.id)
        .collect::<Vec<_>>();
    let repair = store
        .requeue_entries(
            world.id,
            run,
            &[doomed_points[0], kept_items[0].chunk_id],
            "stale_point",
            None,
            now,
        )
        .await
        .unwrap()
        .unwrap()
        .0;
    store
        .transition_job(repair, &[JobStatus::Running], JobStatus::Paused, now)
        .await
        .unwrap()
        .unwrap();
    let before = store.get_job(doomed_job.id).await.unwrap().unwrap();
    assert_eq!(
        (
            before.status,
            before.counts.total,
            before.counts.embedded,
            before.counts.pending
        ),
        (JobStatus::Running, 3, 1, 2)
    );

    let deletion = store.delete_source(world.id, doomed.id, now).await.unwrap().unwrap();
    assert_eq!(deletion.chunks, 3);
    assert_eq!(
        deletion.finished_jobs,
        vec![(doomed_job.id, JobStatus::Cancelled)],
        "only the job whose whole work was deleted ended"
    );
    assert!(
        store.delete_source(world.id, doomed.id, now).await.unwrap().is_none(),
        "a second delete finds nothing"
    );
    assert!(store.delete_source(other.id, kept.id, now).await.unwrap().is_none());

    // The doomed job ended, counting what it did; nothing is left pending on it.
    let ended = store.get_job(doomed_job.id).await.unwrap().unwrap();
    assert_eq!(ended.status, JobStatus::Cancelled);
    assert_eq!(ended.finished_at, Some(now));
    assert_eq!(
        (ended.counts.total, ended.counts.embedded, ended.counts.pending),
        (1, 1, 0)
    );
    // The repair job lost the doomed slot and keeps the other, still paused.
    let paused = store.get_job(repair).await.unwrap().unwrap();
    assert_eq!(paused.status, JobStatus::Paused);
    assert_eq!((paused.counts.total, paused.counts.pending), (1, 1));
    // Finished jobs are history and stay as they were.
    assert_eq!(store.get_job(kept_job.id).await.unwrap(), Some(kept_done));

    assert_eq!(store.get_source(world.id, doomed.id).await.unwrap(), None);
    assert_eq!(store.source_text(world.id, doomed.id).await.unwrap(), None);
    assert_eq!(store.list_chunks(world.id, doomed.id, 0, 10).await.unwrap().total, 0);
    assert_eq!(store.source_counts(world.id, doomed.id).await.unwrap().chunks, 0);
    let doomed_point_ids: Vec<uuid::Uuid> = doomed_pending.iter().map(|i| i.point_id).collect();
    assert!(
        store
            .chunks_by_points(world.id, run, &doomed_point_ids)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.world_stats(world.id).await.unwrap(),
        WorldStats {
            sources: 1,
            chunks: 2,
            embedded: 1,
            pending: 1,
            failed: 0
        }
    );
    let books: Vec<u32> = store
        .list_sources(world.id)
        .await
        .unwrap()
        .iter()
        .map(|s| s.book_number)
        .collect();
    assert_eq!(books, [2], "the kept source keeps its book number");
    assert_eq!(store.list_jobs(world.id).await.unwrap().len(), 3, "jobs stay");
    assert_eq!(
        store.world_stats(other.id).await.unwrap().chunks,
        1,
        "other worlds untouched"
    );
    assert!(store.get_source(other.id, foreign.id).await.unwrap().is_some());

    // Book numbers are never reused.
    let (next, _) = add_source(&store, world.id, 1).await;
    assert_eq!(next.book_number, 3);

    // The resumed repair job works only on what is left, and completes.
    store
        .transition_job(repair, &[JobStatus::Paused], JobStatus::Running, now)
        .await
        .unwrap()
        .unwrap();
    let mut left = claim(&store, "r", 10).await;
    while left.first().is_some_and(|i| i.job_id != repair) {
        left = claim(&store, "r", 10).await;
    }
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].source_id, kept.id);
    assert_eq!(complete(&store, "r", &left).await, 1);
    let done = store.finish_job_if_done(repair, Utc::now()).await.unwrap().unwrap();
    assert_eq!(done.status, JobStatus::Completed);
}

conformance!(deleting_the_last_pending_slot_finishes_a_running_job);
async fn deleting_the_last_pending_slot_finishes_a_running_job(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    let run = world.active_run;
    let (doomed, _) = add_source(&store, world.id, 1).await;
    let (kept, _) = add_source(&store, world.id, 2).await;
    // Embed everything, then requeue one slot of each source under a running repair job.
    let mut all = Vec::new();
    loop {
        let items = claim(&store, "w", 10).await;
        if items.is_empty() {
            break;
        }
        assert_eq!(complete(&store, "w", &items).await, items.len() as u64);
        store.finish_job_if_done(items[0].job_id, Utc::now()).await.unwrap();
        all.extend(items);
    }
    let slot = |source: SourceId, n: u32| {
        all.iter()
            .find(|i| i.source_id == source && i.chunk_number == n)
            .unwrap()
            .clone()
    };
    let now = Utc::now().trunc_subsecs(6);
    let (d0, k0, k1) = (slot(doomed.id, 0), slot(kept.id, 0), slot(kept.id, 1));
    let repair = store
        .requeue_entries(
            world.id,
            run,
            &[d0.chunk_id, k0.chunk_id, k1.chunk_id],
            "stale_point",
            None,
            now,
        )
        .await
        .unwrap()
        .unwrap()
        .0;
    // The repair job's kept slots are done (one embedded, one failed for good); the doomed
    // one is leased to a worker whose answer is still out.
    let leased = claim(&store, "r", 10).await;
    assert_eq!(leased.len(), 3);
    let on = |source: SourceId, n: u32| {
        leased
            .iter()
            .find(|i| i.source_id == source && i.chunk_number == n)
            .unwrap()
            .clone()
    };
    assert_eq!(complete(&store, "r", &[on(kept.id, 0)]).await, 1);
    assert!(
        store
            .fail_work(
                "r",
                repair,
                on(kept.id, 1).chunk_id,
                "provider_error",
                "no",
                1,
                true,
                now,
                now
            )
            .await
            .unwrap()
    );
    assert!(
        store.finish_job_if_done(repair, now).await.unwrap().is_none(),
        "one slot still pending"
    );

    let deletion = store.delete_source(world.id, doomed.id, now).await.unwrap().unwrap();
    assert_eq!(deletion.chunks, 1);
    assert_eq!(
        deletion.finished_jobs,
        vec![(repair, JobStatus::Failed)],
        "finished as the workers would: a failed entry remains"
    );
    let job = store.get_job(repair).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Failed);
    assert_eq!(
        (
            job.counts.total,
            job.counts.embedded,
            job.counts.failed,
            job.counts.pending
        ),
        (2, 1, 1, 0)
    );
    assert_eq!(job.errors.len(), 1);
    assert_eq!(job.errors[0].code, "provider_error");
    let late = [(on(doomed.id, 0).chunk_id, d0.text_sha256.clone())];
    assert_eq!(
        store.complete_work("r", repair, run, &late, 0, now).await.unwrap(),
        0,
        "the in-flight answer for the deleted slot is dropped"
    );
    assert!(claim(&store, "x", 10).await.is_empty(), "nothing is left to claim");
}

/// Every status a job takes is a `status` event written with the change: the first one at
/// creation, then one per real change (none for a refused or repeated transition), so a reader
/// that sees the job finished finds its final event too.
async fn job_status_changes_are_recorded_as_events(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    let (_, job) = add_source(&store, world.id, 2).await;
    let statuses = |events: Vec<quarry::domain::JobEvent>| -> Vec<(String, String)> {
        events
            .into_iter()
            .map(|e| {
                let data: serde_json::Value = serde_json::from_str(&e.data).unwrap();
                (
                    e.kind.as_str().to_owned(),
                    data["status"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    };
    let events = store.job_events_after(job.id, 0, 100).await.unwrap();
    assert_eq!(statuses(events.clone()), [("status".into(), "running".into())]);
    assert!(events[0].created_at >= job.created_at);

    let now = Utc::now();
    assert!(
        store
            .transition_job(job.id, &[JobStatus::Running], JobStatus::Paused, now)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .transition_job(job.id, &[JobStatus::Running], JobStatus::Cancelled, now)
            .await
            .unwrap()
            .is_none(),
        "a paused job is not running"
    );
    let progress = store
        .append_job_event(job.id, quarry::domain::JobEventKind::Progress, "{}", now)
        .await
        .unwrap();
    assert!(
        store
            .transition_job(job.id, &[JobStatus::Paused], JobStatus::Cancelled, now)
            .await
            .unwrap()
            .is_some()
    );
    let events = store.job_events_after(job.id, 0, 100).await.unwrap();
    assert!(events.windows(2).all(|w| w[0].id < w[1].id), "ids increase");
    assert_eq!(
        statuses(events.clone()),
        [
            ("status".into(), "running".into()),
            ("status".into(), "paused".into()),
            ("progress".into(), String::new()),
            ("status".into(), "cancelled".into()),
        ]
    );
    assert_eq!(events[2].id, progress);
    assert_eq!(
        statuses(store.job_events_after(job.id, progress, 100).await.unwrap()),
        [("status".into(), "cancelled".into())]
    );
}
conformance!(job_status_changes_are_recorded_as_events);

/// A reader tailing a job's events by id while several writers append to it concurrently sees
/// every event: a job's events commit in id order (on Postgres, ids are handed out at insert,
/// so without the per-job lock a late commit with a smaller id could be passed over).
async fn a_reader_tailing_job_events_misses_none_written_concurrently(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    let (_, job) = add_source(&store, world.id, 1).await;
    const WRITERS: usize = 4;
    const EACH: usize = 40;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..EACH {
                    let data = format!("{{\"writer\": {w}, \"n\": {i}}}");
                    store
                        .append_job_event(job.id, quarry::domain::JobEventKind::Progress, &data, Utc::now())
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    let reader = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut cursor = 0;
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while seen.len() < WRITERS * EACH + 1 && std::time::Instant::now() < deadline {
                for event in store.job_events_after(job.id, cursor, 7).await.unwrap() {
                    cursor = event.id;
                    seen.push(event.id);
                }
                tokio::task::yield_now().await;
            }
            seen
        })
    };
    for writer in writers {
        writer.await.unwrap();
    }
    let seen = reader.await.unwrap();
    let all: Vec<i64> = store
        .job_events_after(job.id, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(
        all.len(),
        WRITERS * EACH + 1,
        "the status event and every progress event"
    );
    assert_eq!(seen, all, "the tailing reader saw every event once, in order");
}
conformance!(a_reader_tailing_job_events_misses_none_written_concurrently);

/// A world's source of two chunks, and a running re-ingest that has chunked it into its run;
/// every entry of both runs claimed and embedded. Returns the new run, its job and the items.
async fn reingest_fully_embedded(
    store: &Arc<dyn Store>,
    world: &World,
) -> (RunId, quarry::domain::Job, Vec<quarry::domain::WorkItem>) {
    use quarry::store::SourceChunks;
    let now = Utc::now().trunc_subsecs(6);
    let (source, _) = add_source(store, world.id, 2).await;
    let (run, job) = begin_reingest(store, world).await;
    let added = store
        .add_run_chunks(
            world.id,
            run,
            job.id,
            SourceChunks {
                source: source.id,
                book_number: source.book_number,
                chunks: chunks(2),
            },
            now,
        )
        .await
        .unwrap();
    assert_eq!(added, 2);
    store
        .transition_job(job.id, &[JobStatus::Queued], JobStatus::Running, now)
        .await
        .unwrap()
        .unwrap();
    // A claim takes one job's entries at a time.
    let mut all = Vec::new();
    for _ in 0..4 {
        let items = claim(store, "w", 10).await;
        if items.is_empty() {
            break;
        }
        assert_eq!(complete(store, "w", &items).await, items.len() as u64);
        all.extend(items);
    }
    assert_eq!(all.len(), 4, "both runs embedded: {all:?}");
    (run, job, all)
}

/// Claims the one pending entry, which must be `job`'s, embeds it, and checks that the re-ingest
/// then switches the world.
async fn embed_the_last_entry_and_switch(store: &Arc<dyn Store>, job: &quarry::domain::Job) {
    let items = claim(store, "w", 10).await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].job_id, job.id);
    assert_eq!(complete(store, "w", &items).await, 1);
    assert!(matches!(
        store
            .finish_reingest(job.id, Utc::now().trunc_subsecs(6))
            .await
            .unwrap(),
        quarry::store::ReingestStep::Switched { .. }
    ));
}

/// A re-ingest of `world` on its own profiles: its new run (building) and its job (queued).
async fn begin_reingest(store: &Arc<dyn Store>, world: &World) -> (RunId, quarry::domain::Job) {
    let run = RunId::new();
    let new = quarry::store::NewRun {
        id: run,
        world: world.id,
        embedding: world.embedding.clone(),
        chunking: world.chunking,
    };
    let job = store
        .begin_reingest(new, JobId::new(), Utc::now().trunc_subsecs(6))
        .await
        .unwrap();
    (run, job)
}

conformance!(a_reingest_switches_once_however_many_finish_it_at_once);
async fn a_reingest_switches_once_however_many_finish_it_at_once(store: Arc<dyn Store>) {
    use quarry::domain::RunStatus;
    use quarry::store::ReingestStep;
    let now = Utc::now().trunc_subsecs(6);
    let world = store.create_world(new_world("W")).await.unwrap();
    let old = world.active_run;
    // A world without sources: its re-ingest has nothing to embed and may switch at once.
    let (run, job) = begin_reingest(&store, &world).await;
    store
        .transition_job(job.id, &[JobStatus::Queued], JobStatus::Running, now)
        .await
        .unwrap()
        .unwrap();
    // Three workers reach the completion step together: each read the job running before
    // any of them switched.
    let (a, b, c) = tokio::join!(
        store.finish_reingest(job.id, now),
        store.finish_reingest(job.id, now),
        store.finish_reingest(job.id, now)
    );
    let steps = [a.unwrap(), b.unwrap(), c.unwrap()];
    let switched: Vec<&ReingestStep> = steps
        .iter()
        .filter(|s| matches!(s, ReingestStep::Switched { .. }))
        .collect();
    assert_eq!(switched.len(), 1, "{steps:?}");
    assert!(
        matches!(switched[0], ReingestStep::Switched { old_run, .. } if *old_run == old),
        "{steps:?}"
    );
    assert_eq!(store.get_world(world.id).await.unwrap().unwrap().active_run, run);
    let runs = store.world_runs(world.id).await.unwrap();
    let status_of = |id: RunId| runs.iter().find(|r| r.id == id).map(|r| r.status);
    assert_eq!(
        (status_of(old), status_of(run)),
        (Some(RunStatus::Retired), Some(RunStatus::Active))
    );
    assert!(matches!(
        store.finish_reingest(job.id, now).await.unwrap(),
        ReingestStep::NotDone
    ));
    // The run a world serves is neither retired nor deleted by a late cancel's clean-up.
    assert!(!store.retire_run(run).await.unwrap());
    store.delete_run(run).await.unwrap();
    let runs = store.world_runs(world.id).await.unwrap();
    assert!(
        runs.iter().any(|r| r.id == run && r.status == RunStatus::Active),
        "{runs:?}"
    );
}

conformance!(a_reingest_takes_up_pending_entries_of_its_run_that_an_ended_job_holds);
async fn a_reingest_takes_up_pending_entries_of_its_run_that_an_ended_job_holds(store: Arc<dyn Store>) {
    use quarry::store::{ReingestStep, SourceChunks};
    let now = Utc::now().trunc_subsecs(6);
    let world = store.create_world(new_world("W")).await.unwrap();
    let (source, ingest) = add_source(&store, world.id, 1).await;
    let items = claim(&store, "w", 10).await;
    assert_eq!(complete(&store, "w", &items).await, 1);
    assert_eq!(
        store
            .finish_job_if_done(ingest.id, now)
            .await
            .unwrap()
            .map(|j| j.status),
        Some(JobStatus::Completed)
    );
    // The new run's entry is held by a job that has ended (as code before requeues went to the
    // re-ingest job could leave it): no worker would ever claim it.
    let (run, job) = begin_reingest(&store, &world).await;
    let source_chunks = SourceChunks {
        source: source.id,
        book_number: source.book_number,
        chunks: chunks(1),
    };
    assert_eq!(
        store
            .add_run_chunks(world.id, run, ingest.id, source_chunks, now)
            .await
            .unwrap(),
        1
    );
    store
        .transition_job(job.id, &[JobStatus::Queued], JobStatus::Running, now)
        .await
        .unwrap()
        .unwrap();
    assert!(claim(&store, "w", 10).await.is_empty(), "held by an ended job");
    // The completion step gives it to the re-ingest, which embeds it and then switches.
    assert!(matches!(
        store.finish_reingest(job.id, now).await.unwrap(),
        ReingestStep::NotDone
    ));
    embed_the_last_entry_and_switch(&store, &job).await;
    assert_eq!(store.get_world(world.id).await.unwrap().unwrap().active_run, run);
}

conformance!(nothing_is_requeued_into_a_retired_run);
async fn nothing_is_requeued_into_a_retired_run(store: Arc<dyn Store>) {
    let now = Utc::now().trunc_subsecs(6);
    let world = store.create_world(new_world("W")).await.unwrap();
    let (run, job, items) = reingest_fully_embedded(&store, &world).await;
    let hashes: Vec<String> = items.iter().map(|i| i.text_sha256.clone()).collect();
    let (new_run, active): (Vec<ChunkId>, Vec<ChunkId>) = (
        items.iter().filter(|i| i.run_id == run).map(|i| i.chunk_id).collect(),
        items.iter().filter(|i| i.run_id != run).map(|i| i.chunk_id).collect(),
    );
    assert_eq!((new_run.len(), active.len()), (2, 2));
    store
        .transition_job(job.id, &[JobStatus::Running], JobStatus::Cancelled, now)
        .await
        .unwrap()
        .unwrap();
    assert!(store.retire_run(run).await.unwrap());
    let requeued = store
        .requeue_entries(world.id, run, &new_run, "point_missing", None, now)
        .await
        .unwrap();
    assert_eq!(requeued, None, "no work (nor repair job) for a run on its way out");
    // The active run takes requeues as before.
    let requeued = store
        .requeue_entries(world.id, world.active_run, &active, "point_missing", None, now)
        .await
        .unwrap();
    assert!(matches!(requeued, Some((_, 2))), "{requeued:?}");
    // The retired run's entries still say embedded, but its points are on their way out: they
    // are never offered for reuse (the active run's, pending again, have nothing to offer).
    for scope in [Some(world.id), None] {
        let found = store.find_reusable(&world.collection, scope, &hashes).await.unwrap();
        assert!(found.is_empty(), "{found:?}");
    }
}
