//! Failed entries put back in the queue: a job's own retry and what a world's retry reads.

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use quarry::domain::{JobId, JobStatus};
use quarry::store::{Retry, Store};

use super::{add_source, claim, complete, new_world};

conformance!(failed_entries_are_retried_under_their_job);

/// Fails every claimed entry of `items` for good.
pub(super) async fn fail_all(store: &Arc<dyn Store>, owner: &str, items: &[quarry::domain::WorkItem]) {
    let now = Utc::now().trunc_subsecs(6);
    for item in items {
        let failed = store
            .fail_work(
                owner,
                item.job_id,
                item.chunk_id,
                "provider_error",
                "boom",
                3,
                true,
                now,
                now,
            )
            .await
            .unwrap();
        assert!(failed);
    }
}

async fn failed_entries_are_retried_under_their_job(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("Aerth")).await.unwrap();
    let (_, job) = add_source(&store, world.id, 3).await;
    let now = Utc::now().trunc_subsecs(6);
    assert_eq!(store.retry_failed(job.id, now).await.unwrap(), Retry::Nothing);
    assert_eq!(store.retry_failed(JobId::new(), now).await.unwrap(), Retry::Missing);

    // Two fail for good, one is embedded: the job ends failed.
    let items = claim(&store, "w1", 3).await;
    fail_all(&store, "w1", &items[..2]).await;
    complete(&store, "w1", &items[2..]).await;
    let done = store.finish_job_if_done(job.id, Utc::now()).await.unwrap().unwrap();
    assert_eq!((done.status, done.counts.failed), (JobStatus::Failed, 2));
    let failed = store.failed_entries(world.id).await.unwrap();
    assert_eq!(failed.len(), 2);
    assert!(
        failed
            .iter()
            .all(|e| e.job == Some(job.id) && e.run == world.active_run)
    );
    assert_eq!(failed[0].chunk, items[0].chunk_id, "in reading order");

    // The retry: both pending again with their attempts reset, the job running, unfinished.
    let now = Utc::now().trunc_subsecs(6);
    assert_eq!(store.retry_failed(job.id, now).await.unwrap(), Retry::Requeued(2));
    let again = store.get_job(job.id).await.unwrap().unwrap();
    assert_eq!(again.status, JobStatus::Running);
    assert_eq!(
        (again.counts.failed, again.counts.pending, again.counts.embedded),
        (0, 2, 1)
    );
    assert!(again.errors.is_empty());
    assert!(again.finished_at.is_none());
    assert!(store.failed_entries(world.id).await.unwrap().is_empty());
    let items = claim(&store, "w2", 10).await;
    assert_eq!(items.len(), 2, "due at once");
    assert!(items.iter().all(|i| i.attempts == 0));
    // The status change is an event, as every status is.
    let events = store.job_events_after(job.id, 0, 100).await.unwrap();
    let statuses: Vec<String> = events
        .iter()
        .filter(|e| e.kind.as_str() == "status")
        .map(|e| e.data.clone())
        .collect();
    assert_eq!(statuses.len(), 3, "running, failed, running: {statuses:?}");
    assert!(statuses[2].contains("running"));

    // A cancelled job is refused, its failed entries still listed for the world.
    fail_all(&store, "w2", &items).await;
    let cancelled = store
        .transition_job(job.id, &[JobStatus::Running], JobStatus::Cancelled, Utc::now())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cancelled.status, JobStatus::Cancelled);
    assert!(matches!(
        store.retry_failed(job.id, Utc::now()).await.unwrap(),
        Retry::Refused {
            status: JobStatus::Cancelled,
            ..
        }
    ));
    assert_eq!(store.failed_entries(world.id).await.unwrap().len(), 2);
    // Another world's entries are not this one's.
    let other = store.create_world(new_world("Other")).await.unwrap();
    assert!(store.failed_entries(other.id).await.unwrap().is_empty());
}
