//! Job events: every status change is recorded with it, and a reader tailing concurrent writers
//! misses none.

use std::sync::Arc;

use chrono::Utc;
use quarry::domain::JobStatus;
use quarry::store::Store;

use super::{add_source, new_world};

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
