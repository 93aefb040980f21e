//! Sources: added with their chunks and job (or refused, writing nothing), their text and chunk
//! pages, and deleted with their jobs kept coherent.

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use quarry::domain::{
    EntryError, JobId, JobKind, JobStatus, ManifestState, NewSource, RunId, SourceId, WorldId, WorldStats,
};
use quarry::store::Store;

use super::{add_source, chunks, claim, complete, new_world, vectors_of};

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
        .list_sources(world.id, quarry::domain::Window::ALL)
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
    let jobs = store
        .list_jobs(world.id, &[], quarry::domain::Window::ALL)
        .await
        .unwrap();
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().all(|j| j.world_id == world.id));
}

/// Adds a one-chunk source to `world`, cut for `run`.
async fn add_one_chunk(
    store: &Arc<dyn Store>,
    world: WorldId,
    run: RunId,
) -> quarry::store::Result<(quarry::domain::Source, quarry::domain::Job)> {
    let source = NewSource {
        key: None,
        id: SourceId::new(),
        world_id: world,
        run,
        filename: "a".into(),
        content_type: "text/plain".into(),
        text: "t".into(),
        details: Default::default(),
        now: Utc::now(),
    };
    store.add_source(&source, chunks(1), JobId::new()).await
}

conformance!(adding_to_a_missing_world_writes_nothing);
async fn adding_to_a_missing_world_writes_nothing(store: Arc<dyn Store>) {
    let missing = WorldId::new();
    let result = add_one_chunk(&store, missing, RunId::new()).await;
    assert!(result.is_err());
    assert!(
        store
            .list_sources(missing, quarry::domain::Window::ALL)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .list_jobs(missing, &[], quarry::domain::Window::ALL)
            .await
            .unwrap()
            .is_empty()
    );
}

conformance!(a_source_cut_for_a_run_the_world_no_longer_serves_is_refused);
async fn a_source_cut_for_a_run_the_world_no_longer_serves_is_refused(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    let (old, new) = (world.active_run, RunId::new());
    // Chunks were cut for `new` while the world still serves `old` (or the other way round
    // after a re-ingest switched it): refused, nothing written, the book number not spent.
    let result = add_one_chunk(&store, world.id, new).await;
    assert!(matches!(result, Err(quarry::store::Error::RunChanged)), "{result:?}");
    assert!(
        store
            .list_sources(world.id, quarry::domain::Window::ALL)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .list_jobs(world.id, &[], quarry::domain::Window::ALL)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.get_world(world.id).await.unwrap().unwrap().active_run, old);
    let (source, job) = add_source(&store, world.id, 1).await;
    assert_eq!((source.book_number, job.run_id), (1, old));
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

    let deletion = store
        .delete_source(world.id, doomed.id, None, now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(deletion.chunks, 3);
    assert_eq!(
        deletion.finished_jobs,
        vec![(doomed_job.id, JobStatus::Cancelled)],
        "only the job whose whole work was deleted ended"
    );
    assert!(
        store
            .delete_source(world.id, doomed.id, None, now)
            .await
            .unwrap()
            .is_none(),
        "a second delete finds nothing"
    );
    assert!(
        store
            .delete_source(other.id, kept.id, None, now)
            .await
            .unwrap()
            .is_none()
    );

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
        .list_sources(world.id, quarry::domain::Window::ALL)
        .await
        .unwrap()
        .iter()
        .map(|s| s.book_number)
        .collect();
    assert_eq!(books, [2], "the kept source keeps its book number");
    assert_eq!(
        store
            .list_jobs(world.id, &[], quarry::domain::Window::ALL)
            .await
            .unwrap()
            .len(),
        3,
        "jobs stay"
    );
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

    let deletion = store
        .delete_source(world.id, doomed.id, None, now)
        .await
        .unwrap()
        .unwrap();
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
    let late = vectors_of(&[on(doomed.id, 0)]);
    assert_eq!(
        store.complete_work("r", repair, run, &late, 0, now).await.unwrap(),
        0,
        "the in-flight answer for the deleted slot is dropped"
    );
    assert!(claim(&store, "x", 10).await.is_empty(), "nothing is left to claim");
}

conformance!(parents_are_stored_once_found_by_chunk_and_built_for_sources_without);
async fn parents_are_stored_once_found_by_chunk_and_built_for_sources_without(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("Parents")).await.unwrap();
    let run = world.active_run;
    // Sources written without parents (as before parents existed).
    let (source, _) = add_source(&store, world.id, 10).await;
    let (other, _) = add_source(&store, world.id, 2).await;
    let mut missing = store.sources_without_parents().await.unwrap();
    missing.sort_by_key(|m| m.2 != source.id);
    assert_eq!(missing.len(), 2, "{missing:?}");
    assert_eq!(missing[0], (world.id, run, source.id, 768));
    assert!(store.parents_over(run, &[(source.id, 0, 0)]).await.unwrap().is_empty());

    // The startup pass builds them from the stored chunks.
    assert_eq!(quarry::jobs::parents::backfill(store.as_ref()).await.unwrap(), 2);
    assert!(store.sources_without_parents().await.unwrap().is_empty());
    let found = store
        .parents_over(
            run,
            &[
                (source.id, 0, 0),
                (source.id, 9, 9),
                (other.id, 1, 1),
                (SourceId::new(), 0, 0),
            ],
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 2, "one parent each, found once: {found:?}");
    let mine = found.iter().find(|p| p.source_id == source.id).unwrap();
    assert_eq!(
        mine.parent,
        quarry::domain::NewParent {
            parent_number: 0,
            first_chunk: 0,
            last_chunk: 9,
            char_start: 0,
            char_end: 99,
            token_count: 30,
        }
    );
    assert!(mine.holds(source.id, 5) && !mine.holds(source.id, 10) && !mine.holds(other.id, 0));
    // Stored once: a second write is refused, as is one for a run that is not live or a
    // source that is gone.
    assert!(
        !store
            .add_parents(world.id, run, source.id, &[mine.parent])
            .await
            .unwrap()
    );
    assert!(
        !store
            .add_parents(world.id, RunId::new(), source.id, &[mine.parent])
            .await
            .unwrap()
    );
    assert!(
        !store
            .add_parents(world.id, run, SourceId::new(), &[mine.parent])
            .await
            .unwrap()
    );
    assert!(
        store
            .parents_over(RunId::new(), &[(source.id, 0, 0)])
            .await
            .unwrap()
            .is_empty()
    );
    // Many windows in one read (a hundred per statement).
    let many: Vec<(SourceId, u32, u32)> = (0..250).map(|i| (source.id, i % 10, i % 10)).collect();
    assert_eq!(store.parents_over(run, &many).await.unwrap().len(), 1);
    // They go with their source.
    store
        .delete_source(world.id, source.id, None, Utc::now().trunc_subsecs(6))
        .await
        .unwrap()
        .unwrap();
    assert!(store.parents_over(run, &[(source.id, 0, 0)]).await.unwrap().is_empty());
    assert_eq!(store.parents_over(run, &[(other.id, 0, 0)]).await.unwrap().len(), 1);
}

conformance!(parents_over_a_window_are_those_it_crosses);
async fn parents_over_a_window_are_those_it_crosses(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("Sections")).await.unwrap();
    let run = world.active_run;
    let (source, _) = add_source(&store, world.id, 12).await;
    // Four sections: chunks 0-2, 3-5, 6-6, 7-11.
    let sections: Vec<quarry::domain::NewParent> = [(0, 2), (3, 5), (6, 6), (7, 11)]
        .iter()
        .enumerate()
        .map(|(i, &(first, last))| quarry::domain::NewParent {
            parent_number: i as u32,
            first_chunk: first,
            last_chunk: last,
            char_start: u64::from(first) * 10,
            char_end: u64::from(last) * 10 + 9,
            token_count: 3 * u64::from(last - first + 1),
        })
        .collect();
    assert!(store.add_parents(world.id, run, source.id, &sections).await.unwrap());
    let numbers =
        |found: Vec<quarry::domain::Parent>| -> Vec<u32> { found.iter().map(|p| p.parent.parent_number).collect() };
    let over = |from: u32, to: u32| {
        let store = store.clone();
        async move { numbers(store.parents_over(run, &[(source.id, from, to)]).await.unwrap()) }
    };
    // One chunk: the section holding it, whichever it is.
    for (chunk, section) in [(0, 0), (2, 0), (3, 1), (5, 1), (6, 2), (7, 3), (11, 3)] {
        assert_eq!(over(chunk, chunk).await, vec![section], "chunk {chunk}");
    }
    // A window: every section it crosses, and only those, however wide it is.
    assert_eq!(over(2, 3).await, vec![0, 1]);
    assert_eq!(over(4, 7).await, vec![1, 2, 3]);
    assert_eq!(over(1, 1000).await, vec![0, 1, 2, 3]);
    // A neighbour window past the source's last chunk: its last section, nothing more.
    assert_eq!(over(10, 12).await, vec![3]);
    assert!(over(12, 14).await.is_empty());
    // Windows of one read that share sections find each once.
    let found = store
        .parents_over(run, &[(source.id, 0, 3), (source.id, 3, 6), (source.id, 11, 11)])
        .await
        .unwrap();
    assert_eq!(numbers(found), vec![0, 1, 2, 3]);
}
