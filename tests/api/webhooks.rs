//! Signed webhooks for job lifecycle events: subscriptions, deliveries to a real HTTP receiver
//! that verifies every signature (with the Standard Webhooks reference library), retries with
//! backoff from the persisted outbox across a restart, filters by world and event, and the
//! errors bad subscriptions get.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::fake_providers::{Failure, FakeGoogle};
use crate::helpers::{
    PgDatabase, TestApp, assert_error, google_world, on_fake_google, spawn_app_on, spawn_app_with, spawn_replicas,
};
use crate::keys::MASTER_KEY;

/// One request the receiver got.
#[derive(Clone, Debug)]
struct Received {
    id: String,
    timestamp: String,
    body: String,
    /// Whether the signature verified with the subscription's secret.
    verified: bool,
    /// What the receiver answered.
    answered: u16,
}

/// A real HTTP receiver: records every delivery, checks its signature against the secret it
/// is given, and answers with the status it is told (200 unless told otherwise).
#[derive(Clone)]
struct Receiver {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<Received>>>,
    answer: Arc<AtomicU16>,
    secret: Arc<Mutex<Option<String>>>,
}

impl Receiver {
    async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::serve(listener).await
    }

    async fn serve(listener: tokio::net::TcpListener) -> Receiver {
        let receiver = Receiver {
            addr: listener.local_addr().unwrap(),
            got: Arc::default(),
            answer: Arc::new(AtomicU16::new(200)),
            secret: Arc::default(),
        };
        let state = receiver.clone();
        let app = axum::Router::new().route(
            "/hooks",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let state = state.clone();
                async move {
                    let verified = (state.secret.lock().unwrap().clone())
                        .and_then(|secret| standardwebhooks::Webhook::new(&secret).ok())
                        .is_some_and(|hook| hook.verify(&body, &headers).is_ok());
                    let answered = state.answer.load(Ordering::SeqCst);
                    let header = |name: &str| {
                        (headers.get(name))
                            .map(|v| v.to_str().unwrap().to_owned())
                            .unwrap_or_default()
                    };
                    state.got.lock().unwrap().push(Received {
                        id: header("webhook-id"),
                        timestamp: header("webhook-timestamp"),
                        body: String::from_utf8(body.to_vec()).unwrap(),
                        verified,
                        answered,
                    });
                    StatusCode::from_u16(answered).unwrap()
                }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        receiver
    }

    fn url(&self) -> String {
        format!("http://{}/hooks", self.addr)
    }

    fn trust(&self, secret: &str) {
        *self.secret.lock().unwrap() = Some(secret.to_owned());
    }

    fn got(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// Waits (up to 20 s) until `done` holds for what was received.
    async fn wait_for(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        for _ in 0..200 {
            let got = self.got();
            if done(&got) {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the receiver never got {what}; it got {:#?}", self.got());
    }
}

fn with_webhooks(s: &mut quarry::config::Settings) {
    s.security.master_key = Some(SecretString::from(MASTER_KEY));
    // The receivers here listen on loopback, which is refused unless opted in.
    s.webhooks.allowed_networks = vec!["127.0.0.0/8".parse().unwrap()];
    s.webhooks.poll_interval_ms = 50;
    s.webhooks.first_retry_s = 1;
    s.webhooks.max_retry_s = 1;
}

/// Subscribes `url` with `body`'s other fields; returns the created subscription.
async fn subscribe(app: &TestApp, body: Value) -> Value {
    let (status, hook) = app.post("/v1/webhooks", body).await;
    assert_eq!(status, StatusCode::CREATED, "{hook}");
    hook
}

async fn deliveries(app: &TestApp, hook: &Value) -> Vec<Value> {
    let (status, body) = app
        .get(&format!(
            "/v1/webhooks/{}/deliveries",
            hook["webhook_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["deliveries"].as_array().unwrap().clone()
}

/// Waits (up to 20 s) until the subscription's log satisfies `done`.
async fn wait_log(app: &TestApp, hook: &Value, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    for _ in 0..200 {
        let log = deliveries(app, hook).await;
        if done(&log) {
            return log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the delivery log never got there: {:#}",
        json!(deliveries(app, hook).await)
    );
}

#[tokio::test]
async fn a_finished_job_is_delivered_once_signed_so_that_the_receiver_verifies_it() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let receiver = Receiver::start().await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), with_webhooks)).await;
    let hook = subscribe(&app, json!({"url": receiver.url(), "description": "CI"})).await;
    let secret = hook["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"), "{hook}");
    assert_eq!(
        hook["events"],
        json!([
            "job.completed",
            "job.failed",
            "job.cancelled",
            "job.waiting",
            "job.held"
        ])
    );
    receiver.trust(secret);
    // The secret is shown once: never listed or read back.
    let (_, listed) = app.get("/v1/webhooks").await;
    assert_eq!(listed["webhooks"].as_array().unwrap().len(), 1, "{listed}");
    assert!(!listed.to_string().contains(secret), "{listed}");
    let (status, one) = app
        .get(&format!("/v1/webhooks/{}", hook["webhook_id"].as_str().unwrap()))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(one.get("secret").is_none(), "{one}");

    let world = google_world(&app).await;
    let accepted = app
        .add_text(
            &world,
            "a.txt",
            "Queen Maren rules the isles. Her fleet guards the straits.",
        )
        .await;
    let job = accepted["job"]["id"].as_str().unwrap();
    app.drain().await;

    let got = receiver.wait_for("the completed job", |got| !got.is_empty()).await;
    let message = &got[0];
    assert!(message.verified, "the signature did not verify: {message:?}");
    let body: Value = serde_json::from_str(&message.body).unwrap();
    assert_eq!(body["type"], "job.completed", "{body}");
    assert_eq!(body["data"]["job_id"], job);
    assert_eq!(body["data"]["world_id"], world.as_str());
    assert_eq!(body["data"]["status"], "completed");
    assert_eq!(body["data"]["counts"]["pending"], 0);
    assert!(body["data"]["counts"]["embedded"].as_u64().unwrap() >= 1, "{body}");
    assert!(body["timestamp"].as_str().is_some(), "{body}");

    // A body changed on the way, or signed with another secret, does not verify.
    let mut headers = HeaderMap::new();
    headers.insert("webhook-id", message.id.parse().unwrap());
    headers.insert("webhook-timestamp", message.timestamp.parse().unwrap());
    let signer = standardwebhooks::Webhook::new(secret).unwrap();
    let signature = signer
        .sign(&message.id, message.timestamp.parse().unwrap(), message.body.as_bytes())
        .unwrap();
    headers.insert("webhook-signature", signature.parse().unwrap());
    assert!(signer.verify(message.body.as_bytes(), &headers).is_ok());
    let tampered = message.body.replace("completed", "failed");
    assert!(signer.verify(tampered.as_bytes(), &headers).is_err());

    let log = wait_log(&app, &hook, |log| {
        log.first().is_some_and(|d| d["status"] == "delivered")
    })
    .await;
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["delivery_id"], message.id.as_str());
    assert_eq!(
        (&log[0]["attempts"], &log[0]["last_status_code"]),
        (&json!(1), &json!(200))
    );
    assert_eq!(log[0]["next_attempt_at"], Value::Null);
    // Nothing else is sent for it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.got().len(), 1);

    // Unsubscribed: the next job is not announced.
    let (status, _) = app
        .delete(&format!("/v1/webhooks/{}", hook["webhook_id"].as_str().unwrap()))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    app.add_text(&world, "b.txt", "The tide turns at dusk.").await;
    app.drain().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.got().len(), 1);
    let (status, body) = app
        .get(&format!(
            "/v1/webhooks/{}/deliveries",
            hook["webhook_id"].as_str().unwrap()
        ))
        .await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "webhook_not_found");
}

/// The receiver is down (it answers 503): the delivery is retried with backoff, survives a
/// restart of quarry in the outbox, and is delivered once the receiver is back — with the
/// same message id and the same body on every attempt.
#[tokio::test]
async fn a_receiver_that_is_down_gets_the_delivery_later_even_across_a_restart() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let receiver = Receiver::start().await;
    receiver.answer.store(503, Ordering::SeqCst);
    let app = spawn_app_with(on_fake_google(fake.base_url(), with_webhooks)).await;
    let hook = subscribe(&app, json!({"url": receiver.url(), "events": ["job.completed"]})).await;
    receiver.trust(hook["secret"].as_str().unwrap());
    let world = google_world(&app).await;
    app.add_text(&world, "a.txt", "Queen Maren rules the isles.").await;
    app.drain().await;

    receiver.wait_for("two refused attempts", |got| got.len() >= 2).await;
    let log = deliveries(&app, &hook).await;
    assert_eq!(log[0]["status"], "pending", "{log:?}");
    assert_eq!(log[0]["last_status_code"], 503);
    assert!(log[0]["last_error"].as_str().unwrap().contains("503"), "{log:?}");
    assert!(log[0]["next_attempt_at"].is_string(), "{log:?}");

    // quarry stops; the receiver comes back meanwhile; quarry starts again on the same store.
    let app = app
        .restart_with(|s| {
            on_fake_google(fake.base_url(), with_webhooks)(s);
        })
        .await;
    receiver.answer.store(200, Ordering::SeqCst);
    let got = receiver
        .wait_for("the delivery accepted", |got| got.iter().any(|r| r.answered == 200))
        .await;
    let log = wait_log(&app, &hook, |log| {
        log.first().is_some_and(|d| d["status"] == "delivered")
    })
    .await;
    assert_eq!(log.len(), 1, "{log:?}");
    let accepted: Vec<&Received> = got.iter().filter(|r| r.answered == 200).collect();
    assert_eq!(accepted.len(), 1, "{got:#?}");
    assert!(got.iter().all(|r| r.verified), "{got:#?}");
    assert!(
        got.iter().all(|r| r.id == got[0].id && r.body == got[0].body),
        "{got:#?}"
    );
    assert_eq!(log[0]["attempts"].as_u64().unwrap() as usize, got.len(), "{log:?}");
}

#[tokio::test]
async fn a_delivery_refused_every_time_fails_for_good_after_max_attempts() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let receiver = Receiver::start().await;
    receiver.answer.store(500, Ordering::SeqCst);
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| {
        with_webhooks(s);
        s.webhooks.max_attempts = 2;
    }))
    .await;
    let hook = subscribe(&app, json!({"url": receiver.url()})).await;
    let world = google_world(&app).await;
    app.add_text(&world, "a.txt", "Queen Maren rules the isles.").await;
    app.drain().await;
    let log = wait_log(&app, &hook, |log| log.first().is_some_and(|d| d["status"] == "failed")).await;
    assert_eq!(
        (&log[0]["attempts"], &log[0]["last_status_code"]),
        (&json!(2), &json!(500))
    );
    assert_eq!(log[0]["next_attempt_at"], Value::Null);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(receiver.got().len(), 2, "no attempt after the last");
}

/// A world's subscription hears only that world; each subscription only its events; a job that
/// fails is `job.failed`, and one that waits with no key left is `job.waiting`, once.
#[tokio::test]
async fn subscriptions_hear_their_world_and_their_events_only() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let receiver = Receiver::start().await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| {
        with_webhooks(s);
        s.embedding.max_attempts = 1;
    }))
    .await;
    let first = google_world(&app).await;
    let (status, other) = app
        .post(
            "/v1/worlds",
            json!({"name": "other", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let other = other["id"].as_str().unwrap().to_owned();
    let first_only = subscribe(
        &app,
        json!({"url": receiver.url(), "world_id": first, "events": ["job.completed"]}),
    )
    .await;
    let failures = subscribe(
        &app,
        json!({"url": receiver.url(), "events": ["job.failed", "job.waiting"]}),
    )
    .await;

    // The other world's job completes: no subscription wants that.
    app.add_text(&other, "a.txt", "The tide turns at dusk.").await;
    app.drain().await;
    // The first world's job completes: its subscription hears it.
    app.add_text(&first, "b.txt", "Queen Maren rules the isles.").await;
    app.drain().await;
    // A job whose chunk the provider refuses for good fails.
    fake.fail_next(Failure::Status(400));
    let failed = app.add_text(&other, "c.txt", "A storm breaks the dam.").await;
    app.drain().await;
    let failed_job = failed["job"]["id"].as_str().unwrap();
    let (_, job) = app.get(&format!("/v1/jobs/{failed_job}")).await;
    assert_eq!(job["status"], "failed", "{job}");
    // A job with no usable key left waits until one is added: announced once.
    let waiting = app.add_text(&first, "d.txt", "Lanterns line the quay.").await;
    let waiting_job = waiting["job"]["id"].as_str().unwrap();
    let key = app.provider("google").await["keys"][0]["key_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = app
        .patch(&format!("/v1/provider-keys/{key}"), json!({"enabled": false}))
        .await;
    assert_eq!(status, StatusCode::OK);
    app.work_step("w").await;
    app.work_step("w").await;

    receiver.wait_for("three events", |got| got.len() >= 3).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = receiver.got();
    let events: Vec<(String, String)> = got
        .iter()
        .map(|r| {
            let body: Value = serde_json::from_str(&r.body).unwrap();
            (
                body["type"].as_str().unwrap().to_owned(),
                body["data"]["world_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(events.contains(&("job.completed".into(), first.clone())), "{events:?}");
    assert!(events.contains(&("job.failed".into(), other.clone())), "{events:?}");
    assert!(events.contains(&("job.waiting".into(), first.clone())), "{events:?}");
    let waiting_body: Value = got
        .iter()
        .map(|r| serde_json::from_str::<Value>(&r.body).unwrap())
        .find(|b| b["type"] == "job.waiting")
        .unwrap();
    assert_eq!(waiting_body["data"]["job_id"], waiting_job);
    assert_eq!(
        waiting_body["data"]["waiting"]["reason"], "no_eligible_key",
        "{waiting_body}"
    );
    assert_eq!(waiting_body["data"]["status"], "running");
    assert_eq!(deliveries(&app, &first_only).await.len(), 1);
    assert_eq!(deliveries(&app, &failures).await.len(), 2);
}

#[tokio::test]
async fn bad_subscriptions_are_refused_naming_the_field_and_change_nothing() {
    let app = spawn_app_with(with_webhooks).await;
    let ok = "https://hooks.example.test/quarry";
    for (body, field) in [
        (json!({"url": "hooks.example.test/quarry"}), "url"),
        (json!({"url": "ftp://hooks.example.test/"}), "url"),
        (json!({"url": format!("https://h.test/{}", "a".repeat(2100))}), "url"),
        (json!({"url": ok, "events": []}), "events"),
        (json!({"url": ok, "events": ["job.started"]}), "events"),
        (json!({"url": ok, "events": "job.completed"}), "events"),
        (json!({"url": ok, "world_id": "not-a-uuid"}), "world_id"),
        (json!({"url": ok, "description": "bell\u{7}"}), "description"),
        (json!({"url": ok, "secret": "hunter2"}), "secret"),
        (json!({"url": ok, "secret": "whsec_c2hvcnQ="}), "secret"),
        (json!({"url": ok, "retries": 3}), "retries"),
        (json!({}), "url"),
    ] {
        let (status, error) = app.post("/v1/webhooks", body.clone()).await;
        let error = assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(error["details"]["field"], field, "{body}: {error}");
    }
    // A world that does not exist is not found, as everywhere.
    let (status, body) = app
        .post("/v1/webhooks", json!({"url": ok, "world_id": uuid::Uuid::new_v4()}))
        .await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");
    let (_, listed) = app.get("/v1/webhooks").await;
    assert_eq!(listed["webhooks"], json!([]), "{listed}");

    let unknown = format!("/v1/webhooks/{}", uuid::Uuid::new_v4());
    let (status, body) = app.get(&unknown).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "webhook_not_found");
    let (status, body) = app.delete(&unknown).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "webhook_not_found");
    let (status, body) = app.get("/v1/webhooks/not-a-uuid").await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_request");

    // A secret given is kept (and not echoed anywhere but the creation's answer).
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let hook = subscribe(&app, json!({"url": ok, "secret": secret})).await;
    assert_eq!(hook["secret"], secret);

    // Without a master key the secret could not be stored encrypted.
    let bare = spawn_app_with(|_| {}).await;
    let (status, body) = bare.post("/v1/webhooks", json!({"url": ok})).await;
    assert_error(status, &body, StatusCode::CONFLICT, "master_key_missing");
}

#[tokio::test]
async fn subscriptions_stop_at_the_limit() {
    let app = spawn_app_with(with_webhooks).await;
    for n in 0..quarry::service::webhooks::MAX_WEBHOOKS {
        subscribe(&app, json!({"url": format!("https://hooks.example.test/{n}")})).await;
    }
    let (status, body) = app
        .post("/v1/webhooks", json!({"url": "https://hooks.example.test/one-more"}))
        .await;
    assert_error(status, &body, StatusCode::CONFLICT, "webhook_limit_reached");
    let (_, page) = app.get("/v1/webhooks?limit=1000").await;
    assert_eq!(
        page["webhooks"].as_array().unwrap().len() as u64,
        quarry::service::webhooks::MAX_WEBHOOKS
    );
}

/// Three replicas on one PostgreSQL share one outbox: every event reaches the receiver exactly
/// once (by message id), whichever replica sent it.
#[tokio::test]
async fn replicas_deliver_each_event_once() {
    let Some(db) = PgDatabase::create("webhooks_replicas").await else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let receiver = Receiver::start().await;
    let apps = spawn_replicas(&db.url, 3, |s| on_fake_google(fake.base_url(), with_webhooks)(s)).await;
    let hook = subscribe(&apps[0], json!({"url": receiver.url(), "events": ["job.completed"]})).await;
    receiver.trust(hook["secret"].as_str().unwrap());
    let world = google_world(&apps[0]).await;
    let jobs = 12;
    for n in 0..jobs {
        apps[n % 3]
            .add_text(&world, &format!("{n}.txt"), &format!("Entry {n} of the log."))
            .await;
    }
    for app in &apps {
        app.drain().await;
    }
    receiver.wait_for("every job", |got| got.len() >= jobs).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = receiver.got();
    let mut ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!((got.len(), ids.len()), (jobs, jobs), "{got:#?}");
    assert!(got.iter().all(|r| r.verified));
    drop(apps);
    db.drop_db().await;
}

/// The same on PostgreSQL: the triggers and the outbox of the server backend.
#[tokio::test]
async fn a_finished_job_is_delivered_on_postgres() {
    let Some(db) = PgDatabase::create("webhooks_pg").await else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let receiver = Receiver::start().await;
    let app = spawn_app_on(db.url.clone(), on_fake_google(fake.base_url(), with_webhooks)).await;
    let hook = subscribe(&app, json!({"url": receiver.url()})).await;
    receiver.trust(hook["secret"].as_str().unwrap());
    let world = google_world(&app).await;
    app.add_text(&world, "a.txt", "Queen Maren rules the isles.").await;
    app.drain().await;
    let got = receiver.wait_for("the completed job", |got| !got.is_empty()).await;
    assert!(got[0].verified);
    let body: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(body["type"], "job.completed");
    wait_log(&app, &hook, |log| {
        log.first().is_some_and(|d| d["status"] == "delivered")
    })
    .await;
    drop(app);
    db.drop_db().await;
}

/// With no network opted in (the default), internal receivers are refused: address literals
/// when subscribing, names (here `localhost`) when the delivery connects — and the delivery log
/// says only `destination_refused`, never what the network answered.
#[tokio::test]
async fn internal_receivers_are_refused_unless_their_network_is_allowed() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let receiver = Receiver::start().await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| {
        with_webhooks(s);
        s.webhooks.allowed_networks = Vec::new();
        s.webhooks.max_attempts = 1;
    }))
    .await;
    for url in [
        "http://127.0.0.1:5432/",
        "http://[::1]:6379/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://192.168.1.1/",
        "http://100.64.0.1/",
        "http://[fd00::1]/",
        "http://0.0.0.0:8080/",
        receiver.url().as_str(),
    ] {
        let (status, error) = app.post("/v1/webhooks", json!({"url": url})).await;
        let error = assert_error(
            status,
            &error,
            StatusCode::UNPROCESSABLE_ENTITY,
            "destination_not_allowed",
        );
        assert_eq!(error["details"]["field"], "url", "{url}: {error}");
        assert!(
            error["message"].as_str().unwrap().contains("webhooks.allowed_networks"),
            "{url}: {error}"
        );
    }
    let (_, listed) = app.get("/v1/webhooks").await;
    assert_eq!(listed["webhooks"], json!([]), "{listed}");

    // A name is accepted, and checked on the addresses it resolves to when connecting.
    let by_name = format!("http://localhost:{}/hooks?token=s3cret", receiver.addr.port());
    let hook = subscribe(&app, json!({"url": by_name, "events": ["job.completed"]})).await;
    assert_eq!(hook["url"], by_name.as_str(), "the creator sees what it sent");
    let (_, listed) = app.get("/v1/webhooks").await;
    let shown = listed["webhooks"][0]["url"].as_str().unwrap();
    assert!(!shown.contains("s3cret") && shown.contains("token=redacted"), "{shown}");
    let world = google_world(&app).await;
    app.add_text(&world, "a.txt", "Queen Maren rules the isles.").await;
    app.drain().await;
    let log = wait_log(&app, &hook, |log| log.first().is_some_and(|d| d["status"] == "failed")).await;
    assert_eq!(
        log[0]["last_error"].as_str().unwrap().split(':').next(),
        Some("destination_refused"),
        "{log:?}"
    );
    assert!(log[0]["last_status_code"].is_null(), "{log:?}");
    assert!(receiver.got().is_empty(), "an internal receiver was reached");
}

/// Once its network is allowed, the same receiver by name gets its delivery; a receiver that
/// is not listening is logged as a coarse `connect_failed`, without the error chain.
#[tokio::test]
async fn allowed_networks_opt_internal_receivers_in_and_failures_are_coarse() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let receiver = Receiver::start().await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| {
        with_webhooks(s);
        s.webhooks.allowed_networks = vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()];
        s.webhooks.max_attempts = 1;
    }))
    .await;
    let by_name = format!("http://localhost:{}/hooks", receiver.addr.port());
    let hook = subscribe(&app, json!({"url": by_name, "events": ["job.completed"]})).await;
    receiver.trust(hook["secret"].as_str().unwrap());
    // Nothing listens on this port: it was bound and released.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let dead = subscribe(
        &app,
        json!({"url": format!("http://127.0.0.1:{}/hooks", closed.port()), "events": ["job.completed"]}),
    )
    .await;
    let world = google_world(&app).await;
    app.add_text(&world, "a.txt", "Queen Maren rules the isles.").await;
    app.drain().await;
    let got = receiver.wait_for("the delivery", |got| !got.is_empty()).await;
    assert!(got[0].verified, "{got:#?}");
    let log = wait_log(&app, &dead, |log| log.first().is_some_and(|d| d["status"] == "failed")).await;
    let error = log[0]["last_error"].as_str().unwrap();
    assert!(error.starts_with("connect_failed: "), "{log:?}");
    assert!(
        !error.to_lowercase().contains("refused"),
        "the network's answer leaked: {error}"
    );
}

/// A replace's `job.completed` says it is one (`kind: replace`), names its source and what it
/// did: the version it switched to and the chunks added (of which reused) and removed.
#[tokio::test]
async fn a_completed_replace_is_delivered_with_what_it_changed() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let receiver = Receiver::start().await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), with_webhooks)).await;
    let hook = subscribe(&app, json!({"url": receiver.url(), "events": ["job.completed"]})).await;
    receiver.trust(hook["secret"].as_str().unwrap());
    let world = google_world(&app).await;
    let first = "Queen Maren rules the isles. Her fleet guards the straits. The tide turns at dusk.";
    let (status, created) = app
        .post(
            &format!("/v1/worlds/{world}/sources"),
            json!({"key": "maren.txt", "filename": "maren.txt", "text": first}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{created}");
    app.drain().await;
    receiver.wait_for("the first job", |got| got.len() == 1).await;
    let source = created["source"]["id"].as_str().unwrap();
    let (status, replaced) = app
        .put(
            &format!("/v1/worlds/{world}/sources/{source}"),
            json!({"filename": "maren.txt", "text": first.replace("dusk", "dawn")}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{replaced}");
    app.drain().await;
    let got = receiver.wait_for("the replace", |got| got.len() == 2).await;
    let body: Value = serde_json::from_str(&got[1].body).unwrap();
    assert!(got[1].verified);
    let data = &body["data"];
    assert_eq!(
        (&data["kind"], &data["status"]),
        (&json!("replace"), &json!("completed")),
        "{body}"
    );
    assert_eq!(data["source_id"], source, "{body}");
    let did = &data["replaced"];
    assert_eq!(did["version"], 2, "{body}");
    assert!(did["added"].as_u64().unwrap() >= 1, "{body}");
    assert!(
        did["reused"].as_u64().unwrap() >= 1,
        "unchanged sentences reuse vectors: {body}"
    );
    assert!(did["removed"].as_u64().unwrap() >= 1, "{body}");
}

#[tokio::test]
async fn a_held_reingest_is_delivered_with_its_gate() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), with_webhooks)).await;
    held_reingest_is_delivered(app).await;
}

#[tokio::test]
async fn a_held_reingest_is_delivered_on_postgres() {
    let Some(db) = crate::helpers::PgDatabase::create("webhooks::held").await else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_on(db.url.clone(), on_fake_google(fake.base_url(), with_webhooks)).await;
    held_reingest_is_delivered(app).await;
    db.drop_db().await;
}

async fn held_reingest_is_delivered(app: TestApp) {
    let receiver = Receiver::start().await;
    let hook = subscribe(&app, json!({"url": receiver.url(), "events": ["job.held"]})).await;
    receiver.trust(hook["secret"].as_str().unwrap());
    let (world, eval, _) = crate::reingest_gate::world_and_set(&app).await;
    let job = crate::reingest_gate::worse_reingest(&app, &world, &eval).await;
    let job = job["id"].as_str().unwrap();
    assert_eq!(crate::reingest_gate::decided(&app, job).await["status"], "held");
    let got = receiver.wait_for("the hold", |got| !got.is_empty()).await;
    assert_eq!(got.len(), 1, "the ingest jobs were not asked for: {got:#?}");
    assert!(got[0].verified);
    let body: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(body["type"], "job.held", "{body}");
    let data = &body["data"];
    assert_eq!(
        (&data["job_id"], &data["status"]),
        (&json!(job), &json!("held")),
        "{body}"
    );
    assert_eq!(data["gate"]["state"], "held", "{body}");
    assert_eq!(
        (data["gate"]["before"].as_f64(), data["gate"]["after"].as_f64()),
        (Some(1.0), Some(0.0))
    );
    // Promoting it completes the job: not asked for, not delivered.
    let (status, _) = app
        .post(&format!("/v1/worlds/{world}/reingest/{job}/promote"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.got().len(), 1);
}
