//! Work a dead worker held is taken up fast: leases are short and renewed while a worker works
//! on them, so a dead replica's claims are free within one lease; an embedded quarry gives its
//! previous life's claims back when it starts.

use std::time::Duration;

use chrono::Utc;
use reqwest::StatusCode;
use serde_json::Value;

use crate::fake_providers::FakeGoogle;
use crate::helpers::{PgDatabase, TestApp, google_world, on_fake_google, spawn_app_on, spawn_app_with};

/// Adds a source of a few one-sentence chunks; returns its job's id and its chunk count.
async fn add(app: &TestApp, world: &str) -> (String, u64) {
    let text: String = (0..6)
        .map(|i| format!("Sentence {i} tells of harbour number {} and its walls. ", i * 7))
        .collect();
    let accepted = app.add_text(world, "a.txt", &text).await;
    let chunks = accepted["source"]["chunks"].as_u64().unwrap();
    (accepted["job"]["id"].as_str().unwrap().to_owned(), chunks)
}

#[tokio::test]
async fn a_restarted_embedded_quarry_takes_its_old_claims_back_at_once() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let settings = |fake: &FakeGoogle| {
        on_fake_google(fake.base_url(), |s| {
            // Long leases: without the startup release, the restarted process would wait them out.
            s.embedding.lease_s = 600;
        })
    };
    let app = spawn_app_with(settings(&fake)).await;
    let world = google_world(&app).await;
    let (job_id, chunks) = add(&app, &world).await;
    // The process dies holding a claim on every entry (a kill -9 gives nothing back).
    let now = Utc::now();
    let claimed = app
        .state
        .store
        .claim_work("the-old-process-0", 32, now + chrono::Duration::seconds(600), now)
        .await
        .unwrap();
    assert_eq!(claimed.len() as u64, chunks);
    assert_eq!(app.drain().await, 0, "the claims hold");

    let app = app.restart_with(settings(&fake)).await;
    assert_eq!(app.drain().await, chunks, "the restarted process embeds at once");
    assert_eq!(app.job(&job_id).await["status"], "completed");
}

#[tokio::test]
async fn a_dead_replicas_claims_are_taken_over_within_one_lease() {
    let Some(db) = PgDatabase::create("takeover::a_dead_replicas_claims_are_taken_over_within_one_lease").await else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let settings = |fake: &FakeGoogle| on_fake_google(fake.base_url(), |s| s.embedding.lease_s = 3);
    let a = spawn_app_on(db.url.clone(), settings(&fake)).await;
    let b = spawn_app_on(db.url.clone(), settings(&fake)).await;
    let world = google_world(&a).await;
    // Replicas share one vector store; each of these has its own folder, so B gets the world's
    // collection made in its own (a repair makes a missing one).
    let (status, repair) = b.post(&format!("/v1/worlds/{world}/repair"), Value::Null).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{repair}");
    b.drain().await;
    let (job_id, chunks) = add(&a, &world).await;

    // Replica A claims everything and then hangs on the provider, renewing its claims.
    fake.set_latency(Duration::from_secs(30));
    let stuck = a.spawn_work_step("replica-a");
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Past the first lease (3 s) A still holds them: B finds nothing to claim.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let step = b.work_step("replica-b").await;
    assert_eq!(step.claimed, 0, "the heartbeat renewed A's claims");

    // A dies: no more renewals. Within one lease, B takes the work over.
    stuck.abort();
    fake.set_latency(Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let step = b.work_step("replica-b").await;
    assert_eq!(step.claimed as u64, chunks, "B took A's claims over");
    assert_eq!(step.embedded, chunks);
    assert_eq!(b.job(&job_id).await["status"], "completed");
    drop((a, b));
    db.drop_db().await;
}
