//! Re-ingests: the run being built, one switch however many finish it at once, pending entries
//! taken over from ended jobs, and nothing requeued into a retired run.

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use quarry::domain::{ChunkId, JobId, JobStatus, RunId, World};
use quarry::store::Store;

use super::{add_source, chunks, claim, complete, new_world};

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

/// A world's source of two chunks, and a running re-ingest that has chunked it into its run;
/// every entry of both runs claimed and embedded. Returns the new run, its job and the items.
pub(super) async fn reingest_fully_embedded(
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
pub(super) async fn embed_the_last_entry_and_switch(store: &Arc<dyn Store>, job: &quarry::domain::Job) {
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
        .begin_reingest(new, JobId::new(), None, Utc::now().trunc_subsecs(6))
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
