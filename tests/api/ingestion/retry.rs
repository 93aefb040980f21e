//! Failed chunks are not lost: a job's retry and a world's retry put them back in the queue,
//! and repair counts them.

use reqwest::StatusCode;
use serde_json::Value;

use crate::fake_providers::{Failure, FakeGoogle};
use crate::helpers::assert_error;

use super::{add, id, many_sentences, setup};

/// Makes the provider refuse the next `n` embedding calls outright (400): a batch so refused
/// is sent again item by item, and an item refused alone fails for good at once.
fn refuse(fake: &FakeGoogle, n: u64) {
    for _ in 0..n {
        fake.fail_next(Failure::Status(400));
    }
}

fn counts(job: &Value) -> (u64, u64, u64) {
    let c = &job["counts"];
    (
        c["embedded"].as_u64().unwrap(),
        c["pending"].as_u64().unwrap(),
        c["failed"].as_u64().unwrap(),
    )
}

#[tokio::test]
async fn a_failed_job_is_retried_until_every_chunk_is_embedded() {
    let (fake, app, world) = setup(16).await;
    let accepted = add(&app, &world, &many_sentences()).await;
    let total = accepted["source"]["chunks"].as_u64().unwrap();
    let job_id = id(&accepted["job"]);
    // The batch, then its first three items alone.
    refuse(&fake, 4);
    app.drain().await;
    let (_, job) = app.get(&format!("/v1/jobs/{job_id}")).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(counts(&job), (total - 3, 0, 3), "{job}");

    let (status, retried) = app.post(&format!("/v1/jobs/{job_id}/retry"), Value::Null).await;
    assert_eq!(status, StatusCode::OK, "{retried}");
    assert_eq!(retried["status"], "running", "{retried}");
    assert_eq!(counts(&retried), (total - 3, 3, 0), "{retried}");
    assert_eq!(retried["errors"], serde_json::json!([]), "{retried}");
    assert!(retried["finished_at"].is_null(), "{retried}");

    // The three are embedded this time, and the job completes.
    assert_eq!(app.drain().await, 3);
    let (_, job) = app.get(&format!("/v1/jobs/{job_id}")).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(counts(&job), (total, 0, 0), "{job}");
    assert_eq!(app.world_points(&world).await, total);

    // The stream tells it: failed, running again (with the counts), completed.
    let events = app.job_events(&job_id).await;
    let statuses: Vec<&str> = events
        .iter()
        .filter(|(_, kind, _)| kind == "status")
        .map(|(_, _, data)| data["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["running", "failed", "running", "completed"], "{events:?}");
    let after_retry = events
        .iter()
        .skip_while(|(_, kind, data)| !(kind == "status" && data["status"] == "failed"))
        .find(|(_, kind, _)| kind == "progress")
        .expect("a progress event after the retry");
    assert_eq!(after_retry.2["failed"], 0, "{after_retry:?}");

    // Nothing left: a second retry is refused and changes nothing.
    let (status, body) = app.post(&format!("/v1/jobs/{job_id}/retry"), Value::Null).await;
    assert_error(status, &body, StatusCode::CONFLICT, "nothing_to_retry");
    let (_, job) = app.get(&format!("/v1/jobs/{job_id}")).await;
    assert_eq!(job["status"], "completed", "{job}");
}

#[tokio::test]
async fn retry_refuses_what_it_cannot_retry() {
    let (fake, app, world) = setup(512).await;
    // A job that does not exist, an id that is not one.
    let unknown = uuid::Uuid::new_v4();
    let (status, body) = app.post(&format!("/v1/jobs/{unknown}/retry"), Value::Null).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "job_not_found");
    let (status, body) = app.post("/v1/jobs/not-a-uuid/retry", Value::Null).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
    let (status, body) = app
        .post(&format!("/v1/worlds/{unknown}/retry-failed"), Value::Null)
        .await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");

    // A running job with nothing failed, then a world with nothing failed.
    let accepted = add(&app, &world, "One short text.").await;
    let job_id = id(&accepted["job"]);
    let (status, body) = app.post(&format!("/v1/jobs/{job_id}/retry"), Value::Null).await;
    assert_error(status, &body, StatusCode::CONFLICT, "nothing_to_retry");
    let (status, body) = app
        .post(&format!("/v1/worlds/{}/retry-failed", id(&world)), Value::Null)
        .await;
    assert_error(status, &body, StatusCode::CONFLICT, "nothing_to_retry");

    // A cancelled job is not retried: cancelling is final (the world's retry takes its failed
    // chunks, see below).
    refuse(&fake, 1);
    app.drain().await;
    let (_, job) = app.get(&format!("/v1/jobs/{job_id}")).await;
    assert_eq!(job["status"], "failed", "{job}");
    let (status, job) = app.post(&format!("/v1/jobs/{job_id}/retry"), Value::Null).await;
    assert_eq!(status, StatusCode::OK, "{job}");
    let (status, job) = app.post(&format!("/v1/jobs/{job_id}/cancel"), Value::Null).await;
    assert_eq!(
        (status, job["status"].as_str()),
        (StatusCode::OK, Some("cancelled")),
        "{job}"
    );
    let (status, body) = app.post(&format!("/v1/jobs/{job_id}/retry"), Value::Null).await;
    assert_error(status, &body, StatusCode::CONFLICT, "job_state_conflict");
}

#[tokio::test]
async fn a_world_retry_takes_every_failed_chunk_back() {
    let (fake, app, world) = setup(16).await;
    let world_id = id(&world);
    // Job one fails two chunks and ends failed; job two, of 40 chunks, fails the whole first
    // claim (32) and is cancelled with the rest pending.
    let one = add(&app, &world, &many_sentences()).await;
    let one_total = one["source"]["chunks"].as_u64().unwrap();
    refuse(&fake, 3);
    app.drain().await;
    let forty: String = (0..40)
        .map(|i| format!("Line {i} names beacon number {} on the cliff path. ", i * 3))
        .collect();
    let two = add(&app, &world, &forty).await;
    let two_total = two["source"]["chunks"].as_u64().unwrap();
    assert!(two_total > 32, "{two}");
    refuse(&fake, 33);
    let step = app.work_step("worker-a").await;
    assert_eq!((step.claimed, step.embedded), (32, 0));
    let (status, cancelled) = app
        .post(&format!("/v1/jobs/{}/cancel", id(&two["job"])), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(counts(&cancelled), (0, two_total - 32, 32), "{cancelled}");

    // Repair leaves failed chunks alone but counts them.
    let (status, repair) = app.post(&format!("/v1/worlds/{world_id}/repair"), Value::Null).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{repair}");
    app.drain().await;
    let events = app.job_events(&id(&repair)).await;
    let summary = events
        .iter()
        .find(|(_, kind, data)| kind == "progress" && data.get("points_checked").is_some())
        .expect("the repair's summary");
    assert_eq!(summary.2["failed_chunks"], 34, "{summary:?}");

    let (status, answer) = app
        .post(&format!("/v1/worlds/{world_id}/retry-failed"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["retried"], 34, "{answer}");
    let jobs = answer["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{answer}");
    let own = jobs
        .iter()
        .find(|j| j["id"] == one["job"]["id"])
        .expect("job one took its own");
    assert_eq!(
        (own["status"].as_str(), counts(own)),
        (Some("running"), (one_total - 2, 2, 0))
    );
    let repair_job = jobs
        .iter()
        .find(|j| j["kind"] == "repair")
        .expect("a repair job took the rest");
    assert_eq!(repair_job["status"], "running", "{answer}");
    assert_eq!(counts(repair_job), (0, 32, 0), "{answer}");

    assert_eq!(app.drain().await, 34);
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&one["job"]))).await;
    assert_eq!(job["status"], "completed", "{job}");
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(repair_job))).await;
    assert_eq!(job["status"], "completed", "{job}");
    // The cancelled job's pending chunks stay pending: cancelling is final.
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&two["job"]))).await;
    assert_eq!(job["status"], "cancelled", "{job}");
    assert_eq!(app.world_points(&world).await, one_total + 32);
    let (status, body) = app
        .post(&format!("/v1/worlds/{world_id}/retry-failed"), Value::Null)
        .await;
    assert_error(status, &body, StatusCode::CONFLICT, "nothing_to_retry");
}
