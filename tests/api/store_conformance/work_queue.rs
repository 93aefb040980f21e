//! The work queue: leases, claims and completions, expired leases, and what retrieval reads and
//! requeues by point.

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use quarry::domain::{ChunkId, JobKind, JobStatus, RunId, SourceId, WorldId};
use quarry::store::Store;

use super::{add_source, claim, complete, new_world, vectors_of};

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
    let done = vectors_of(&a);
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
    let listed = store
        .list_jobs(world.id, &[], quarry::domain::Window::ALL)
        .await
        .unwrap();
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
    let done = vectors_of(&short);
    assert_eq!(
        store
            .complete_work("crashed", short[0].job_id, short[0].run_id, &done, 0, later)
            .await
            .unwrap(),
        0,
        "the old owner's late answer is dropped"
    );
}

conformance!(renewed_leases_hold_and_all_can_be_released_at_once);
async fn renewed_leases_hold_and_all_can_be_released_at_once(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    add_source(&store, world.id, 3).await;
    let now = Utc::now().trunc_subsecs(6);
    let mine = store
        .claim_work("beating", 2, now + chrono::Duration::seconds(1), now)
        .await
        .unwrap();
    assert_eq!(mine.len(), 2);
    // The heartbeat extends what the owner holds of its claim, and nothing else.
    let beat = now + chrono::Duration::milliseconds(500);
    let ids: Vec<ChunkId> = mine.iter().map(|item| item.chunk_id).collect();
    assert_eq!(
        store
            .renew_leases("beating", &ids, beat + chrono::Duration::seconds(30), beat)
            .await
            .unwrap(),
        2
    );
    assert_eq!(store.renew_leases("nobody", &ids, beat, beat).await.unwrap(), 0);
    let later = now + chrono::Duration::seconds(5);
    let taken = store
        .claim_work("other", 10, later + chrono::Duration::minutes(5), later)
        .await
        .unwrap();
    assert_eq!(taken.len(), 1, "renewed leases hold past their first end");
    // A given-back entry waiting for its time keeps it; every held lease is released.
    store
        .release_work(
            "other",
            taken[0].job_id,
            &[taken[0].chunk_id],
            Some(later + chrono::Duration::hours(1)),
            false,
            later,
        )
        .await
        .unwrap();
    assert_eq!(store.release_all_leases(later).await.unwrap(), 2);
    let all = store
        .claim_work("restarted", 10, later + chrono::Duration::minutes(5), later)
        .await
        .unwrap();
    assert_eq!(all.len(), 2, "released at once; the waiting one still waits");

    // A stopping worker gives back what it holds of its claim, and only that.
    let stop = later + chrono::Duration::seconds(1);
    let ids: Vec<ChunkId> = all.iter().map(|item| item.chunk_id).collect();
    assert_eq!(store.release_owner("someone else", &ids, stop).await.unwrap(), 0);
    assert_eq!(store.release_owner("restarted", &ids[..1], stop).await.unwrap(), 1);
    let again = store
        .claim_work("next", 10, stop + chrono::Duration::minutes(5), stop)
        .await
        .unwrap();
    assert_eq!(
        again.len(),
        1,
        "the given-back entry is claimable at once, the other still held"
    );
    assert_eq!(again[0].chunk_id, ids[0]);
}

conformance!(a_job_records_what_it_waits_for);
async fn a_job_records_what_it_waits_for(store: Arc<dyn Store>) {
    use quarry::domain::{WaitReason, Waiting};
    let world = store.create_world(new_world("w")).await.unwrap();
    let (_, job) = add_source(&store, world.id, 2).await;
    assert_eq!(job.waiting, None);
    let until = Utc::now().trunc_subsecs(6) + chrono::Duration::hours(3);
    let waiting = Waiting {
        reason: WaitReason::DailyQuota,
        until: Some(until),
    };
    store.set_job_waiting(job.id, Some(&waiting)).await.unwrap();
    let read = store.get_job(job.id).await.unwrap().unwrap();
    assert_eq!(read.waiting, Some(waiting.clone()));
    assert_eq!(read.waiting_at(Utc::now()), Some(&waiting));
    assert_eq!(
        read.waiting_at(until + chrono::Duration::seconds(1)),
        None,
        "not past its time"
    );
    let listed = store
        .list_jobs(world.id, &[], quarry::domain::Window::ALL)
        .await
        .unwrap();
    assert_eq!(listed[0].waiting, Some(waiting));
    // A chunk embedded: the job moves, and waits no more.
    let items = claim(&store, "w", 1).await;
    assert_eq!(complete(&store, "w", &items).await, 1);
    assert_eq!(store.get_job(job.id).await.unwrap().unwrap().waiting, None);
    let no_key = Waiting {
        reason: WaitReason::NoEligibleKey,
        until: None,
    };
    store.set_job_waiting(job.id, Some(&no_key)).await.unwrap();
    assert_eq!(store.get_job(job.id).await.unwrap().unwrap().waiting, Some(no_key));
    store.set_job_waiting(job.id, None).await.unwrap();
    assert_eq!(store.get_job(job.id).await.unwrap().unwrap().waiting, None);
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
    // Outlines: the same chunks without their texts, and none asked of another world.
    let outlines = store.chunk_outlines(world.id, run, &windows).await.unwrap();
    let numbers: Vec<u32> = outlines.iter().map(|o| o.chunk_number).collect();
    assert_eq!(numbers, [0, 1, 2, 3]);
    assert_eq!(outlines[2].sha256, window[2].chunk.sha256);
    assert!(
        store
            .chunk_outlines(other.id, run, &[(source.id, 0, 3)])
            .await
            .unwrap()
            .is_empty()
    );
    // The kept texts: each chunk's key, hash and text, from its row; nothing from another run.
    let mut texts = store.chunk_texts(run, &[(source.id, 1, 2)]).await.unwrap();
    texts.sort();
    let mut expected: Vec<_> = window[1..3]
        .iter()
        .map(|v| (v.chunk.id, v.chunk.sha256.clone(), v.chunk.chunk_text.clone()))
        .collect();
    expected.sort();
    assert_eq!(texts, expected);
    assert!(
        store
            .chunk_texts(other.active_run, &[(source.id, 0, 3)])
            .await
            .unwrap()
            .is_empty()
    );
    // More windows than one statement takes (100 per read) still come back whole.
    let many: Vec<_> = (0..450).map(|i| (source.id, i % 4, i % 4)).collect();
    let window = store.chunk_windows(world.id, run, &many).await.unwrap();
    let numbers: Vec<u32> = window.iter().map(|c| c.chunk.chunk_number).collect();
    assert_eq!(numbers, [0, 1, 2, 3]);
    // A whole source, as full-context retrieval reads it.
    let whole = store
        .chunk_windows(world.id, run, &[(source.id, 0, u32::MAX)])
        .await
        .unwrap();
    assert_eq!(whole.len(), 4);
    // Its size: chunks and tokens, whatever their embedding state; nothing for other worlds
    // or runs.
    let sizes = store.source_sizes(world.id, run).await.unwrap();
    let tokens: u64 = whole.iter().map(|v| u64::from(v.chunk.token_count)).sum();
    assert_eq!(
        sizes,
        [quarry::domain::SourceSize {
            source_id: source.id,
            book_number: source.book_number,
            chunks: 4,
            tokens
        }]
    );
    assert!(tokens > 0);
    assert!(store.source_sizes(other.id, run).await.unwrap().is_empty());
    assert!(store.source_sizes(world.id, RunId::new()).await.unwrap().is_empty());
    // A second source adds its own size; deleting it takes its size away again.
    let (second, _) = add_source(&store, world.id, 3).await;
    let mut sizes = store.source_sizes(world.id, run).await.unwrap();
    sizes.sort_by_key(|s| s.book_number);
    assert_eq!(sizes.len(), 2);
    assert_eq!((sizes[1].source_id, sizes[1].chunks), (second.id, 3));
    let now = Utc::now().trunc_subsecs(6);
    store
        .delete_source(world.id, second.id, None, now)
        .await
        .unwrap()
        .unwrap();
    let sizes = store.source_sizes(world.id, run).await.unwrap();
    assert_eq!(sizes.len(), 1);
    assert_eq!(sizes[0].source_id, source.id);

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
