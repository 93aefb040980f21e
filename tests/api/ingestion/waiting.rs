//! A job that cannot move says why on the job object (`waiting`) and once in its event stream.

use crate::helpers::warning_count;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::fake_providers::Failure;

use super::{add, id, setup};

/// The job's `waiting`, with its `until` parsed.
async fn waiting(app: &crate::helpers::TestApp, job: &str) -> (Value, Option<DateTime<Utc>>) {
    let (_, job) = app.get(&format!("/v1/jobs/{job}")).await;
    let waiting = job["waiting"].clone();
    let until = waiting["until"].as_str().map(|u| u.parse().unwrap());
    (waiting, until)
}

#[tokio::test]
async fn a_job_whose_keys_are_rate_limited_says_until_when_it_waits() {
    let (fake, app, world) = setup(512).await;
    let accepted = add(&app, &world, "One short text.").await;
    let job = id(&accepted["job"]);
    assert!(waiting(&app, &job).await.0.is_null(), "a job that moves does not wait");

    // The only key is told to wait a minute: the next claim finds no key within the wait.
    fake.fail_next(Failure::RateLimited(Duration::from_secs(60)));
    let before = Utc::now();
    assert_eq!(app.drain().await, 0);
    let (waiting_now, until) = waiting(&app, &job).await;
    assert_eq!(waiting_now["reason"], "rate_limited", "{waiting_now}");
    let until = until.expect("an until");
    let ahead = (until - before).num_seconds();
    assert!(
        (50..=61).contains(&ahead),
        "until {until} is about a minute ahead of {before}"
    );
    let events = app.job_events_now(&job).await;
    assert_eq!(warning_count(&events, "rate_limited"), 1, "{events:?}");
    let warning = events.iter().find(|(_, kind, _)| kind == "warning").unwrap();
    assert!(warning.2["message"].as_str().unwrap().contains("until"), "{warning:?}");
}

#[tokio::test]
async fn a_spent_daily_quota_shows_the_reset_as_the_eta() {
    let (fake, app, world) = setup(512).await;
    let accepted = add(&app, &world, "One short text.").await;
    let job = id(&accepted["job"]);
    fake.fail_next(Failure::DailyQuota);
    let before = Utc::now();
    assert_eq!(app.drain().await, 0);
    let (waiting_now, until) = waiting(&app, &job).await;
    assert_eq!(waiting_now["reason"], "daily_quota", "{waiting_now}");
    // Gemini's per-day quotas reset at midnight Pacific, 08:00 UTC.
    let reset = crate::helpers::next_daily_reset(before);
    let until = until.expect("the reset");
    assert!(
        (until - reset).num_seconds().abs() <= 60,
        "until {until}, reset {reset}"
    );
    let events = app.job_events_now(&job).await;
    assert_eq!(warning_count(&events, "daily_quota"), 1, "{events:?}");

    // Another pass waits again without telling twice.
    tokio::time::sleep(Duration::from_millis(50)).await;
    app.drain().await;
    let events = app.job_events_now(&job).await;
    assert_eq!(warning_count(&events, "daily_quota"), 1, "{events:?}");

    // Paused, the job is not waiting for a key any more.
    let (_, paused) = app.post(&format!("/v1/jobs/{job}/pause"), Value::Null).await;
    assert!(paused["waiting"].is_null(), "{paused}");
}
