//! Replicas sharing one store: the registry (`GET /v1/cluster`), a dead replica's work given
//! back, one provider quota for the whole deployment, and queries going before ingestion on
//! any replica. Multi-replica cases run on PostgreSQL (loudly skipped without it), the apps in
//! this process on one database and one shared vector store.

use std::time::Duration;

use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{
    KillableReplica, PgDatabase, TestApp, google_world, spawn_app_sharing, spawn_app_with, spawn_replicas,
};

/// Adds a source of `n` one-sentence chunks; returns its job's id.
async fn add(app: &TestApp, world: &str, n: usize) -> String {
    let text: String = (0..n)
        .map(|i| {
            format!(
                "Harbour {} keeps boat number {} and its walls. ",
                words(i),
                words(i * 7 + 3)
            )
        })
        .collect();
    let accepted = app.add_text(world, "a.txt", &text).await;
    assert_eq!(accepted["source"]["chunks"].as_u64().unwrap() as usize, n, "{accepted}");
    accepted["job"]["id"].as_str().unwrap().to_owned()
}

/// A number as words, so every sentence differs for the fake's vectors.
fn words(n: usize) -> String {
    const W: [&str; 10] = [
        "nil", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
    ];
    n.to_string()
        .chars()
        .map(|c| W[c.to_digit(10).unwrap() as usize])
        .collect::<Vec<_>>()
        .join("-")
}

async fn cluster(app: &TestApp) -> Value {
    let (status, body) = app.get("/v1/cluster").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn ids(cluster: &Value) -> Vec<String> {
    cluster["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until job `id` is completed (or panics after `limit`).
async fn completed(app: &TestApp, id: &str, limit: Duration) -> Value {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let (_, job) = app.get(&format!("/v1/jobs/{id}")).await;
        if job["status"] == "completed" {
            return job;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "job not completed in time: {job}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Settings of a replica on the fake Google server with `keys`.
fn on_google(fake: &FakeGoogle, keys: &[&str]) -> impl Fn(&mut quarry::config::Settings) {
    let base = fake.base_url();
    let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
    move |s| {
        s.providers.google.base_url = base.clone();
        s.providers.google.keys = keys.iter().map(|k| SecretString::from(k.clone())).collect();
        s.cluster.heartbeat_s = 1;
        s.cluster.dead_after_s = 3;
    }
}

#[tokio::test]
async fn a_single_replica_lists_itself_and_keeps_its_budgets_in_process() {
    let app = spawn_app_with(|s| s.embedding.workers = 3).await;
    let body = cluster(&app).await;
    assert_eq!(body["budgets"], "local", "SQLite is one process's: {body}");
    assert_eq!(
        (body["heartbeat_s"].as_u64(), body["dead_after_s"].as_u64()),
        (Some(5), Some(30))
    );
    let replicas = body["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 1, "{body}");
    let me = &replicas[0];
    assert_eq!(me["id"], body["this"]);
    assert_eq!(me["address"], app.addr.to_string());
    assert_eq!(me["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(me["workers"], 3);
    assert!(me["last_heartbeat"].is_string() && me["started_at"].is_string(), "{me}");

    // Like every /v1 route, it needs the token.
    let resp = app.client.get(app.url("/v1/cluster")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn replicas_on_one_store_see_each_other_and_a_stopped_one_leaves() {
    let Some(db) = PgDatabase::create("cluster::replicas_on_one_store_see_each_other_and_a_stopped_one_leaves").await
    else {
        return;
    };
    let mut apps = spawn_replicas(&db.url, 3, |s| s.embedding.workers = 0).await;
    let mut seen = Vec::new();
    for app in &apps {
        let body = cluster(app).await;
        assert_eq!(body["budgets"], "shared", "{body}");
        let mut listed = ids(&body);
        listed.sort();
        seen.push(body["this"].as_str().unwrap().to_owned());
        assert_eq!(listed.len(), 3, "{body}");
        if let Some(first) = seen.first() {
            assert!(listed.contains(first));
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 3, "each replica has an id of its own");

    // A replica that stops leaves the registry at once.
    let mut gone = apps.remove(0);
    gone.stop().await;
    for app in &apps {
        assert_eq!(ids(&cluster(app).await).len(), 2);
    }
    drop(apps);
    db.drop_db().await;
}

#[tokio::test]
async fn a_killed_replicas_claims_go_to_the_others_when_it_is_found_dead() {
    let Some(db) = PgDatabase::create("cluster::a_killed_replicas_claims_go_to_the_others_when_it_is_found_dead").await
    else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let settings = on_google(&fake, &["key-a"]);
    let (dir, vectors) = crate::helpers::shared_vectors();
    // B runs no workers of its own until asked; leases are long, so only the registry can give
    // A's claims back in time.
    let b = spawn_app_sharing(&db.url, dir.clone(), vectors.clone(), |s| {
        settings(s);
        s.embedding.workers = 0;
        s.embedding.lease_s = 600;
    })
    .await;
    let world = google_world(&b).await;
    let job = add(&b, &world, 6).await;

    // A claims every entry and hangs on the provider.
    fake.set_latency(Duration::from_secs(60));
    let a_dir = tempfile::tempdir().unwrap();
    let mut a = KillableReplica::start(&db.url, vectors.clone(), a_dir.path(), |s| {
        settings(s);
        s.embedding.workers = 2;
        s.embedding.lease_s = 600;
    })
    .await;
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let leased = || async {
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM manifest_entries WHERE lease_owner IS NOT NULL")
            .fetch_one(&pool)
            .await
            .unwrap();
        n
    };
    for _ in 0..100 {
        if leased().await == 6 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(leased().await, 6, "A holds every entry");
    let both = cluster(&b).await;
    assert_eq!(ids(&both).len(), 2);
    assert!(
        both["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["address"] == a.addr.to_string()),
        "{both}"
    );

    // kill -9: nothing is given back, and A is still in the registry for a while.
    a.kill();
    fake.set_latency(Duration::ZERO);
    assert_eq!(b.drain().await, 0, "A's claims hold while A may be alive");

    // Once A has been silent for dead_after_s (3 s), B's heartbeat removes it with its claims.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let body = cluster(&b).await;
    assert_eq!(ids(&body), [body["this"].as_str().unwrap()], "{body}");
    // The listing leaves out a silent replica at once; B's next heartbeat deletes its row and
    // gives back its claims, in one transaction (late on a loaded machine).
    for _ in 0..100 {
        if leased().await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(leased().await, 0, "A's claims are given back");
    assert_eq!(b.drain().await, 6, "B finishes A's work");
    assert_eq!(
        completed(&b, &job, Duration::from_secs(10)).await["counts"]["embedded"],
        6
    );
    pool.close().await;
    drop((a, b));
    db.drop_db().await;
}

#[tokio::test]
async fn replicas_told_the_quota_spend_it_together_not_each() {
    let Some(db) = PgDatabase::create("cluster::replicas_told_the_quota_spend_it_together_not_each").await else {
        return;
    };
    // Two keys of 40 texts a second each, counted per text as Google does, enforced over fixed
    // 3-second windows that start at a key's first request (a per-minute quota checked over
    // short spans, as providers do). quarry paces a told quota over 1.02-second windows; a
    // fixed window of exactly one second would leave it 20 ms of scheduling jitter on a loaded
    // test machine (BENCHMARKS.md measures that case), three seconds leave 60.
    let fake = FakeGoogle::start(&["key-a", "key-b"]).await;
    for key in ["key-a", "key-b"] {
        fake.set_quota(key, 120, Duration::from_secs(3));
    }
    let settings = on_google(&fake, &["key-a", "key-b"]);
    let apps = spawn_replicas(&db.url, 3, |s| {
        settings(s);
        s.embedding.workers = 2;
        s.providers.google.scheduling.requests_per_minute = Some(2400);
    })
    .await;
    let world = google_world(&apps[0]).await;
    let chunks = 600;
    let job = add(&apps[1], &world, chunks).await;
    completed(&apps[2], &job, Duration::from_secs(120)).await;

    let stats = fake.stats();
    let requests = stats.endpoint("batchEmbedContents") + stats.endpoint("embedContent");
    assert!(
        stats.quota_rejections * 100 <= requests,
        "{} of {requests} requests were refused for quota",
        stats.quota_rejections
    );
    assert_eq!(stats.items_embedded, chunks as u64, "every chunk embedded exactly once");
    // The quota was spent by several replicas at once, so it was shared, not each replica's
    // own. Which replicas take part is a race: under load, two can claim all six hundred
    // chunks before the third's workers first look (the CI run of 28dbf36 saw it), so the test
    // asks for two, which is what sharing needs.
    let mut senders = Vec::new();
    for app in &apps {
        let google = app.provider("google").await;
        let sent: u64 = google["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["requests"].as_u64().unwrap())
            .sum();
        senders.push(sent);
    }
    assert!(
        senders.iter().filter(|&&sent| sent > 0).count() >= 2,
        "fewer than two replicas sent requests: {senders:?}"
    );
    drop(apps);
    db.drop_db().await;
}

#[tokio::test]
async fn a_query_on_one_replica_goes_before_ingestion_on_another() {
    let Some(db) = PgDatabase::create("cluster::a_query_on_one_replica_goes_before_ingestion_on_another").await else {
        return;
    };
    let fake = FakeGoogle::start(&["key-a"]).await;
    let settings = on_google(&fake, &["key-a"]);
    // One request a second for the whole deployment; a query waits at most a second.
    let tight = move |s: &mut quarry::config::Settings| {
        settings(s);
        s.providers.google.scheduling.requests_per_minute = Some(60);
        s.providers.google.scheduling.query_wait_s = 1;
    };
    let (dir, vectors) = crate::helpers::shared_vectors();
    let ingesting = spawn_app_sharing(&db.url, dir.clone(), vectors.clone(), |s| {
        tight(s);
        s.embedding.workers = 4;
    })
    .await;
    let querying = spawn_app_sharing(&db.url, dir.clone(), vectors.clone(), |s| {
        tight(s);
        s.embedding.workers = 0;
    })
    .await;
    let world = google_world(&ingesting).await;
    add(&ingesting, &world, 120).await;
    // The ingesting replica spends every request the budget refills.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for i in 0..5 {
        let (status, body) = querying
            .post(
                &format!("/v1/worlds/{world}/retrieve"),
                json!({"query": format!("which harbour keeps boat {}", words(i)), "top_k": 3}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "query {i}: {body}");
    }
    drop((ingesting, querying));
    db.drop_db().await;
}

#[tokio::test]
async fn a_told_daily_budget_stops_ingestion_at_it_and_a_restart_remembers_the_day() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let settings = |fake: &FakeGoogle| {
        crate::helpers::on_fake_google(fake.base_url(), |s| {
            s.providers.google.scheduling.requests_per_day = Some(5);
        })
    };
    // A provider day ends at 08:00 UTC: a run that would straddle it waits for the new day.
    let reset = crate::helpers::next_daily_reset(chrono::Utc::now());
    if let Ok(left) = (reset - chrono::Utc::now()).to_std()
        && left < std::time::Duration::from_secs(60)
    {
        tokio::time::sleep(left + std::time::Duration::from_secs(1)).await;
    }
    let app = spawn_app_with(settings(&fake)).await;
    let world = google_world(&app).await;
    let job = add(&app, &world, 8).await;
    // Google counts each text: five texts spend the day, in one batch of five.
    assert_eq!(app.drain().await, 5);
    let stats = fake.stats();
    assert_eq!((stats.items_embedded, stats.quota_rejections), (5, 0));
    let (_, body) = app.get(&format!("/v1/jobs/{job}")).await;
    assert_eq!(body["waiting"]["reason"], "daily_quota", "{body}");
    let until: chrono::DateTime<chrono::Utc> = body["waiting"]["until"].as_str().unwrap().parse().unwrap();
    let reset = crate::helpers::next_daily_reset(chrono::Utc::now());
    assert!(
        (until - reset).num_seconds().abs() <= 60,
        "until {until}, reset {reset}"
    );

    // The day's spending is kept in the store: a restart does not start it afresh.
    let app = app.restart_with(settings(&fake)).await;
    assert_eq!(app.drain().await, 0);
    assert_eq!(fake.stats().items_embedded, 5, "nothing more was sent");
}
