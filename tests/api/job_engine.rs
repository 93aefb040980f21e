//! The job engine at its own level: transitions, worker reports and the counts and events they
//! leave, finishing, and a re-ingest's run switch — driven through `JobEngine` itself on a real
//! store (SQLite, and PostgreSQL when reachable) and a real embedded vector store, with no HTTP
//! and no workers in between.

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use quarry::domain::{
    EmbeddingProfile, Job, JobEvent, JobEventKind, JobId, JobStatus, ProviderKind, RunId, RunStatus, WorldId,
};
use quarry::jobs::{JobEngine, Transition};
use quarry::providers::Providers;
use quarry::store::{NewRun, Store};
use quarry::vector::{CollectionSpec, VectorRepo};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::store_conformance::{add_source, claim, new_world, vectors_of};

/// What a case works with: the engine and the stores it was built on.
struct Engine {
    engine: JobEngine,
    store: Arc<dyn Store>,
    vectors: Arc<dyn VectorRepo>,
    tracker: TaskTracker,
    _dir: tempfile::TempDir,
}

impl Engine {
    fn new(store: Arc<dyn Store>) -> Engine {
        let dir = tempfile::tempdir().unwrap();
        let vectors: Arc<dyn VectorRepo> =
            Arc::new(quarry::vector::edge::EdgeRepo::open(&dir.path().join("vectors")).unwrap());
        let tracker = TaskTracker::new();
        // No adapters: sources are cut with cl100k_base, as for a world of a provider this
        // process does not run.
        let engine = JobEngine::new(
            store.clone(),
            vectors.clone(),
            Providers::default(),
            tracker.clone(),
            CancellationToken::new(),
        );
        Engine {
            engine,
            store,
            vectors,
            tracker,
            _dir: dir,
        }
    }

    async fn job(&self, id: JobId) -> Job {
        self.store.get_job(id).await.unwrap().expect("the job")
    }

    async fn events(&self, id: JobId) -> Vec<JobEvent> {
        self.store.job_events_after(id, 0, 1000).await.unwrap()
    }

    /// The statuses the job's `status` events record, in order.
    async fn statuses(&self, id: JobId) -> Vec<JobStatus> {
        self.events(id).await.iter().filter_map(JobEvent::status).collect()
    }

    /// Claims what is claimable as `owner` and reports it embedded through the engine.
    async fn embed_all(&self, owner: &str) -> u64 {
        let mut embedded = 0;
        loop {
            let items = claim(&self.store, owner, 100).await;
            let Some(first) = items.first() else {
                return embedded;
            };
            let (job, run) = (first.job_id, first.run_id);
            embedded += (self.engine)
                .report_embedded(owner, job, run, &vectors_of(&items), 0)
                .await
                .unwrap();
            self.engine.report_progress(job).await.unwrap();
        }
    }
}

/// Runs `case` on an engine over a fresh SQLite store and over a fresh PostgreSQL database.
macro_rules! engine_case {
    ($name:ident) => {
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}", dir.path().join("quarry.db").display());
                let store = quarry::store::connect(&url).await.expect("sqlite store");
                super::$name(super::Engine::new(store.clone())).await;
                store.close().await;
            }

            #[tokio::test]
            async fn postgres() {
                let Some(db) = crate::helpers::PgDatabase::create(concat!("job_engine::", stringify!($name))).await
                else {
                    return;
                };
                let store = quarry::store::connect(&db.url).await.expect("postgres store");
                super::$name(super::Engine::new(store.clone())).await;
                store.close().await;
                db.drop_db().await;
            }
        }
    };
}

/// A world on a Google profile (cut with cl100k_base here), its collection created.
async fn world(e: &Engine) -> quarry::domain::World {
    let mut new = new_world("W");
    new.embedding = EmbeddingProfile {
        provider: ProviderKind::Google,
        model: "gemini-embedding-001".into(),
        dimensions: 8,
    };
    let world = e.store.create_world(new).await.unwrap();
    e.vectors
        .ensure_collection(&CollectionSpec::for_profile(&world.embedding))
        .await
        .unwrap();
    world
}

engine_case!(transitions_follow_the_state_machine_and_each_leaves_a_status_event);
async fn transitions_follow_the_state_machine_and_each_leaves_a_status_event(e: Engine) {
    let world = world(&e).await;
    let (_, job) = add_source(&e.store, world.id, 2).await;
    assert_eq!(job.status, JobStatus::Running);

    let paused = e.engine.pause(job.id).await.unwrap();
    assert!(
        matches!(&paused, Transition::Done(j) if j.status == JobStatus::Paused),
        "{paused:?}"
    );
    assert_eq!(
        e.engine.pause(job.id).await.unwrap(),
        Transition::Refused {
            from: JobStatus::Paused,
            to: JobStatus::Paused
        }
    );
    assert!(claim(&e.store, "w", 10).await.is_empty(), "a paused job's entries wait");

    // Resumed with entries pending: running again, not finished.
    let resumed = e.engine.resume(job.id).await.unwrap();
    assert!(
        matches!(&resumed, Transition::Done(j) if j.status == JobStatus::Running),
        "{resumed:?}"
    );

    let cancelled = e.engine.cancel(job.id).await.unwrap();
    assert!(
        matches!(&cancelled, Transition::Done(j) if j.status == JobStatus::Cancelled),
        "{cancelled:?}"
    );
    assert_eq!(
        e.engine.resume(job.id).await.unwrap(),
        Transition::Refused {
            from: JobStatus::Cancelled,
            to: JobStatus::Running
        }
    );
    assert!(
        claim(&e.store, "w", 10).await.is_empty(),
        "a cancelled job's entries are not claimed"
    );
    assert_eq!(e.engine.pause(JobId::new()).await.unwrap(), Transition::Missing);

    let statuses = e.statuses(job.id).await;
    assert_eq!(
        statuses[statuses.len() - 3..],
        [JobStatus::Paused, JobStatus::Running, JobStatus::Cancelled],
        "{statuses:?}"
    );
}

engine_case!(reports_count_once_and_the_last_one_completes_the_job);
async fn reports_count_once_and_the_last_one_completes_the_job(e: Engine) {
    let world = world(&e).await;
    let (_, job) = add_source(&e.store, world.id, 3).await;

    // Two of three embedded: progress is recorded once however often it is reported.
    let items = claim(&e.store, "w", 2).await;
    assert_eq!(items.len(), 2);
    let marked = (e.engine)
        .report_embedded("w", job.id, items[0].run_id, &vectors_of(&items), 0)
        .await
        .unwrap();
    assert_eq!(marked, 2);
    e.engine.report_progress(job.id).await.unwrap();
    e.engine.report_progress(job.id).await.unwrap();
    let progress = |events: &[JobEvent]| -> Vec<serde_json::Value> {
        (events.iter())
            .filter(|ev| ev.kind == JobEventKind::Progress)
            .map(|ev| serde_json::from_str(&ev.data).unwrap())
            .collect()
    };
    let events = e.events(job.id).await;
    let seen = progress(&events);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        (seen[0]["embedded"].as_u64(), seen[0]["total"].as_u64()),
        (Some(2), Some(3))
    );
    let counts = e.job(job.id).await.counts;
    assert_eq!((counts.total, counts.embedded, counts.pending), (3, 2, 1));
    assert_eq!(e.job(job.id).await.status, JobStatus::Running);

    // A report by an owner that holds nothing marks nothing.
    let rest = claim(&e.store, "w", 10).await;
    assert_eq!(rest.len(), 1);
    let stolen = (e.engine)
        .report_embedded("someone-else", job.id, rest[0].run_id, &vectors_of(&rest), 0)
        .await
        .unwrap();
    assert_eq!(stolen, 0);

    // The last one: the job completes, its last progress says 3 of 3, its last status event
    // is `completed`.
    assert_eq!(e.embed_all("w").await, 0, "the entry is still claimed by w");
    let marked = (e.engine)
        .report_embedded("w", job.id, rest[0].run_id, &vectors_of(&rest), 0)
        .await
        .unwrap();
    assert_eq!(marked, 1);
    e.engine.report_progress(job.id).await.unwrap();
    let done = e.job(job.id).await;
    assert_eq!(done.status, JobStatus::Completed);
    assert_eq!((done.counts.embedded, done.counts.pending), (3, 0));
    let events = e.events(job.id).await;
    let seen = progress(&events);
    assert_eq!(seen.last().unwrap()["embedded"], 3, "{seen:?}");
    assert_eq!(e.statuses(job.id).await.last(), Some(&JobStatus::Completed));
}

engine_case!(a_chunk_out_of_attempts_is_an_error_event_and_fails_the_job);
async fn a_chunk_out_of_attempts_is_an_error_event_and_fails_the_job(e: Engine) {
    let world = world(&e).await;
    let (_, job) = add_source(&e.store, world.id, 2).await;
    let items = claim(&e.store, "w", 10).await;
    assert_eq!(items.len(), 2);
    let later = Utc::now().trunc_subsecs(6);

    // Given back without an attempt spent: claimable again, counted as rate limited.
    e.engine
        .give_back("w", job.id, &[items[1].chunk_id], None, true)
        .await
        .unwrap();
    assert_eq!(e.job(job.id).await.counts.rate_limited, 1);
    let again = claim(&e.store, "w", 10).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].chunk_id, items[1].chunk_id);

    // The first fails once of two attempts: not failed yet, no error event.
    let failed = (e.engine)
        .report_failure("w", &items[0], "provider_error", "boom", false, 2, later)
        .await
        .unwrap();
    assert!(!failed);
    assert!(!e.events(job.id).await.iter().any(|ev| ev.kind == JobEventKind::Error));

    // The second embedded; the first fails for good (permanent): an error event naming it.
    e.engine
        .report_embedded("w", job.id, again[0].run_id, &vectors_of(&again), 0)
        .await
        .unwrap();
    let first = claim(&e.store, "w", 10).await;
    assert_eq!(first.len(), 1, "retried at once: retry_at is now");
    let failed = (e.engine)
        .report_failure("w", &first[0], "input_rejected", "no", true, 2, later)
        .await
        .unwrap();
    assert!(failed);
    let errors: Vec<serde_json::Value> = (e.events(job.id).await.iter())
        .filter(|ev| ev.kind == JobEventKind::Error)
        .map(|ev| serde_json::from_str(&ev.data).unwrap())
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["chunk_number"], first[0].chunk_number);
    assert_eq!(errors[0]["code"], "input_rejected");

    e.engine.report_progress(job.id).await.unwrap();
    let done = e.job(job.id).await;
    assert_eq!(done.status, JobStatus::Failed);
    assert_eq!((done.counts.embedded, done.counts.failed), (1, 1));
    assert_eq!(e.statuses(job.id).await.last(), Some(&JobStatus::Failed));
}

/// A re-ingest of `world` on its own profiles, prepared by the engine (its sources cut into the
/// new run) and running.
async fn reingest(e: &Engine, world: &quarry::domain::World) -> (RunId, Job) {
    let run = RunId::new();
    let new = NewRun {
        id: run,
        world: world.id,
        embedding: world.embedding.clone(),
        chunking: world.chunking,
    };
    let job = e
        .store
        .begin_reingest(new, JobId::new(), None, Utc::now().trunc_subsecs(6))
        .await
        .unwrap();
    assert_eq!(job.status, JobStatus::Queued);
    e.engine.prepare(job.id);
    e.engine.prepared().await;
    let job = e.job(job.id).await;
    assert_eq!(job.status, JobStatus::Running, "prepared: {job:?}");
    assert!(job.counts.total > 0, "the source was cut into the new run: {job:?}");
    (run, job)
}

async fn run_status(store: &Arc<dyn Store>, world: WorldId, run: RunId) -> Option<RunStatus> {
    (store.world_runs(world).await.unwrap().into_iter())
        .find(|r| r.id == run)
        .map(|r| r.status)
}

engine_case!(a_reingest_switches_the_world_to_its_run_when_its_last_entry_is_embedded);
async fn a_reingest_switches_the_world_to_its_run_when_its_last_entry_is_embedded(e: Engine) {
    let world = world(&e).await;
    let old = world.active_run;
    add_source(&e.store, world.id, 2).await;
    assert_eq!(e.embed_all("w").await, 2);

    let (run, job) = reingest(&e, &world).await;
    assert_eq!(e.store.get_world(world.id).await.unwrap().unwrap().active_run, old);
    assert_eq!(run_status(&e.store, world.id, run).await, Some(RunStatus::Building));

    assert_eq!(e.embed_all("w").await, job.counts.total);
    assert_eq!(e.job(job.id).await.status, JobStatus::Completed);
    assert_eq!(e.store.get_world(world.id).await.unwrap().unwrap().active_run, run);
    assert_eq!(run_status(&e.store, world.id, run).await, Some(RunStatus::Active));
    assert_eq!(
        run_status(&e.store, world.id, old).await,
        None,
        "the old run is removed"
    );
    e.tracker.close();
    e.tracker.wait().await;
}

engine_case!(a_cancelled_reingest_removes_its_run_and_the_world_keeps_serving_the_old_one);
async fn a_cancelled_reingest_removes_its_run_and_the_world_keeps_serving_the_old_one(e: Engine) {
    let world = world(&e).await;
    let old = world.active_run;
    add_source(&e.store, world.id, 2).await;
    assert_eq!(e.embed_all("w").await, 2);

    let (run, job) = reingest(&e, &world).await;
    let cancelled = e.engine.cancel(job.id).await.unwrap();
    assert!(
        matches!(&cancelled, Transition::Done(j) if j.status == JobStatus::Cancelled),
        "{cancelled:?}"
    );
    assert_eq!(e.store.get_world(world.id).await.unwrap().unwrap().active_run, old);
    assert_eq!(run_status(&e.store, world.id, old).await, Some(RunStatus::Active));
    assert_eq!(
        run_status(&e.store, world.id, run).await,
        None,
        "the run being built is removed"
    );
    assert!(
        claim(&e.store, "w", 10).await.is_empty(),
        "nothing of it is left to embed"
    );
}
