//! Listing a world's jobs, and pausing, resuming and cancelling them, also while a batch is in
//! flight.

use std::time::Duration;

use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::fake_providers::{Failure, FakeGoogle};
use crate::helpers::{assert_error, spawn_app_with};

use super::{TEXT, add, google_world, id, setup};

#[tokio::test]
async fn a_world_s_jobs_can_be_listed_by_status() {
    let (_fake, app, world) = setup(512).await;
    let first = add(&app, &world, "One short text.").await;
    let second = add(&app, &world, "Another short text.").await;
    let (status, _) = app
        .post(&format!("/v1/jobs/{}/cancel", id(&first["job"])), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let path = format!("/v1/worlds/{}/jobs", id(&world));
    let ids = |list: &Value| -> Vec<String> { list["jobs"].as_array().unwrap().iter().map(id).collect() };
    let (_, all) = app.get(&path).await;
    assert_eq!(ids(&all), [id(&second["job"]), id(&first["job"])], "newest first");
    let (status, running) = app.get(&format!("{path}?status=running")).await;
    assert_eq!(status, StatusCode::OK, "{running}");
    assert_eq!(ids(&running), [id(&second["job"])]);
    let (_, either) = app.get(&format!("{path}?status=cancelled,running")).await;
    assert_eq!(ids(&either).len(), 2);
    let (_, none) = app.get(&format!("{path}?status=failed")).await;
    assert_eq!(none["jobs"], json!([]));
    for (query, field) in [
        ("status=done", "status"),
        ("state=running", "state"),
        ("status=running&status=failed", "status"),
    ] {
        let (status, body) = app.get(&format!("{path}?{query}")).await;
        let error = assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(error["details"]["field"], field, "{body}");
    }
}

#[tokio::test]
async fn pause_resume_and_cancel_follow_the_rules() {
    let (fake, app, world) = setup(512).await;
    let accepted = add(&app, &world, "One short text.").await;
    let job = format!("/v1/jobs/{}", id(&accepted["job"]));
    let (status, paused) = app.post(&format!("{job}/pause"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["status"], "paused");
    assert_eq!(app.drain().await, 0, "paused jobs are not worked on");
    let (status, body) = app.post(&format!("{job}/pause"), json!({})).await;
    assert_error(status, &body, StatusCode::CONFLICT, "job_state_conflict");
    let (status, resumed) = app.post(&format!("{job}/resume"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(resumed["status"], "running");
    let (status, cancelled) = app.post(&format!("{job}/cancel"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cancelled["status"], "cancelled");
    assert!(cancelled["finished_at"].is_string());
    assert_eq!(app.drain().await, 0, "cancelled jobs are not worked on");
    for action in ["pause", "resume", "cancel"] {
        let (status, body) = app.post(&format!("{job}/{action}"), json!({})).await;
        assert_error(status, &body, StatusCode::CONFLICT, "job_state_conflict");
    }
    let missing = format!("/v1/jobs/{}", uuid::Uuid::new_v4());
    let (status, body) = app.get(&missing).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "job_not_found");
    for action in ["pause", "resume", "cancel"] {
        let (status, body) = app.post(&format!("{missing}/{action}"), json!({})).await;
        assert_error(status, &body, StatusCode::NOT_FOUND, "job_not_found");
    }
    let (status, body) = app.get(&format!("{missing}/events")).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "job_not_found");
    assert_eq!(fake.stats().embed_requests(), 0);

    // Every status the job took is in its event stream, in order; the refusals added nothing.
    let events = app.job_events(&id(&accepted["job"])).await;
    assert!(events.iter().all(|(_, kind, _)| kind == "status"), "{events:?}");
    let statuses: Vec<&Value> = events.iter().map(|(_, _, data)| &data["status"]).collect();
    assert_eq!(statuses, ["running", "paused", "running", "cancelled"], "{events:?}");
}

#[tokio::test]
async fn a_job_paused_while_its_batch_waits_for_a_key_sends_nothing() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let base = fake.base_url();
    let app = spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a")];
        s.providers.google.scheduling.acquire_timeout_s = 5;
        s.embedding.workers = 0;
    })
    .await;
    let world = google_world(&app, 512).await;
    // The first job's call is rate limited: the only key cools down for a second.
    add(&app, &world, "One short text.").await;
    fake.fail_next(Failure::RateLimited(Duration::from_secs(1)));
    app.work_step("w").await;
    let calls = fake.stats().embed_requests();
    assert_eq!(calls, 1);
    // The second job's batch is claimed and waits for the key; the job is paused meanwhile.
    let second = add(&app, &world, "Another short text.").await;
    let step = app.spawn_work_step("w");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let job = format!("/v1/jobs/{}", id(&second["job"]));
    let (status, paused) = app.post(&format!("{job}/pause"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    let step = step.await.unwrap();
    assert_eq!((step.claimed, step.embedded), (1, 0), "{step:?}");
    assert_eq!(
        fake.stats().embed_requests(),
        calls,
        "nothing was sent for the paused job"
    );
    let (_, got) = app.get(&job).await;
    assert_eq!(
        (
            &got["status"],
            &got["counts"]["pending"],
            &got["counts"]["rate_limited"]
        ),
        (&json!("paused"), &json!(1), &json!(0)),
        "{got}"
    );
    // Resumed, it is embedded as usual.
    let (status, _) = app.post(&format!("{job}/resume"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    app.drain().await;
    let (_, got) = app.get(&job).await;
    assert_eq!(got["status"], "completed", "{got}");
}

#[tokio::test]
async fn answers_arriving_after_a_cancel_change_nothing() {
    let (fake, app, world) = setup(16).await;
    let accepted = add(&app, &world, TEXT).await;
    fake.set_latency(Duration::from_millis(400));
    let in_flight = app.spawn_work_step("w");
    tokio::time::sleep(Duration::from_millis(150)).await;
    let (status, cancelled) = app
        .post(&format!("/v1/jobs/{}/cancel", id(&accepted["job"])), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    let step = in_flight.await.unwrap();
    assert!(step.claimed > 0);
    assert_eq!(step.embedded, 0, "the late answer advanced nothing");
    let (_, job) = app.get(&format!("/v1/jobs/{}", id(&accepted["job"]))).await;
    assert_eq!(job["status"], "cancelled");
    assert_eq!(job["counts"]["embedded"], 0);
    let (_, world_now) = app.get(&format!("/v1/worlds/{}", id(&world))).await;
    assert_eq!(world_now["stats"]["embedded"], 0);
    let (_, answer) = app
        .post(
            &format!("/v1/worlds/{}/retrieve", id(&world)),
            json!({"query": "Queen Maren"}),
        )
        .await;
    assert_eq!(answer["warnings"][0]["code"], "no_embedded_chunks", "{answer}");
}
