//! The key scheduler against a real store, with the clock paused: rotation, cooldowns from
//! hints and backoff, quota groups, retirement, client-side budgets, the priority lane,
//! fairness between worlds, and cooldowns persisted across a restart.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use quarry::domain::{ProviderKind, WorldId};
use quarry::providers::scheduler::{AcquireError, ConfigKey, KeyLease, KeyScheduler, Lane, Outcome, PoolConfig};
use quarry::providers::{ProviderError, RateLimitScope};
use quarry::store::Store;
use secrecy::{ExposeSecret, SecretString};
use tokio::time::Instant;

const G: ProviderKind = ProviderKind::Google;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = quarry::store::connect(&format!("sqlite://{}", dir.path().join("q.db").display()))
        .await
        .unwrap();
    Fixture { _dir: dir, store }
}

fn pool(max_in_flight: usize, rpm: Option<u32>) -> HashMap<ProviderKind, PoolConfig> {
    let config = PoolConfig {
        max_in_flight_per_key: max_in_flight,
        requests_per_minute: rpm,
        tokens_per_minute: None,
        requests_per_day: None,
        acquire_timeout: Duration::from_secs(600),
        query_wait: Duration::from_secs(600),
        shared_budgets: false,
    };
    [(G, config)].into_iter().collect()
}

fn keys(secrets: &[&str], group: Option<&str>) -> Vec<ConfigKey> {
    secrets
        .iter()
        .map(|s| ConfigKey {
            provider: G,
            secret: SecretString::from(s.to_string()),
            quota_group: group.map(Into::into),
        })
        .collect()
}

async fn scheduler(f: &Fixture, ks: Vec<ConfigKey>, pools: HashMap<ProviderKind, PoolConfig>) -> KeyScheduler {
    KeyScheduler::new(f.store.clone(), None, ks, pools, 1).await.unwrap()
}

fn secret_of(lease: &quarry::providers::scheduler::KeyLease) -> String {
    lease.key().unwrap().secret.expose_secret().to_owned()
}

/// Reports a rate limit or retirement with the clock running: these write to the store, and a
/// paused clock would jump ahead while the test waits on the database thread.
async fn finish_unpaused(lease: KeyLease, outcome: Outcome) {
    tokio::time::resume();
    lease.finish(outcome).await;
    tokio::time::pause();
}

/// Equal up to the timer wheel's millisecond resolution.
#[track_caller]
fn about(actual: Duration, expected: Duration) {
    let slack = Duration::from_millis(10);
    assert!(
        actual + slack >= expected && actual <= expected + slack,
        "{actual:?} is not about {expected:?}"
    );
}

const INGEST: Lane = Lane::Ingest(WorldId(uuid::Uuid::nil()));

#[tokio::test]
async fn keys_rotate_by_least_recent_use_and_fewest_in_flight() {
    let f = fixture().await;
    let s = scheduler(&f, keys(&["key-a", "key-b", "key-c"], None), pool(4, None)).await;
    let mut seen = Vec::new();
    for _ in 0..6 {
        let lease = s.acquire(G, INGEST, 10).await.unwrap();
        seen.push(secret_of(&lease));
        lease.finish(Outcome::Success).await;
    }
    assert_eq!(seen, ["key-a", "key-b", "key-c", "key-a", "key-b", "key-c"]);

    // Held leases push new work onto the idle keys.
    let a = s.acquire(G, INGEST, 10).await.unwrap();
    let b = s.acquire(G, INGEST, 10).await.unwrap();
    let c = s.acquire(G, INGEST, 10).await.unwrap();
    let mut held = [secret_of(&a), secret_of(&b), secret_of(&c)];
    held.sort();
    assert_eq!(held, ["key-a", "key-b", "key-c"]);
}

#[tokio::test]
async fn a_rate_limited_key_cools_down_for_the_hint_and_others_take_over() {
    let f = fixture().await;
    let s = scheduler(&f, keys(&["key-a", "key-b"], None), pool(4, None)).await;
    tokio::time::pause();
    let a = s.acquire(G, INGEST, 1).await.unwrap();
    assert_eq!(secret_of(&a), "key-a");
    let limited: Result<(), ProviderError> = Err(ProviderError::RateLimited {
        retry_after: Some(Duration::from_secs(30)),
        scope: RateLimitScope::Short,
        message: "quota".into(),
    });
    finish_unpaused(a, Outcome::of(&limited)).await;
    for _ in 0..3 {
        let lease = s.acquire(G, INGEST, 1).await.unwrap();
        assert_eq!(secret_of(&lease), "key-b");
        lease.finish(Outcome::Success).await;
    }
    let status = s.status();
    let a_status = status.iter().find(|k| k.rate_limited == 1).unwrap();
    assert!(a_status.cooling_down_until.is_some());
    tokio::time::advance(Duration::from_secs(31)).await;
    let mut seen = Vec::new();
    for _ in 0..2 {
        let lease = s.acquire(G, INGEST, 1).await.unwrap();
        seen.push(secret_of(&lease));
        lease.finish(Outcome::Success).await;
    }
    assert!(
        seen.contains(&"key-a".to_owned()),
        "key-a is back after its cooldown: {seen:?}"
    );
}

#[tokio::test]
async fn a_rate_limit_cools_the_whole_quota_group_and_waiting_ends_with_retry_after() {
    let f = fixture().await;
    let mut ks = keys(&["p1-a", "p1-b"], Some("project-1"));
    ks.extend(keys(&["p2-a"], Some("project-2")));
    let s = scheduler(&f, ks, pool(4, None)).await;
    tokio::time::pause();
    let lease = s.acquire(G, INGEST, 1).await.unwrap();
    assert_eq!(secret_of(&lease), "p1-a");
    finish_unpaused(
        lease,
        Outcome::RateLimited {
            retry_after: Some(Duration::from_secs(40)),
            scope: RateLimitScope::Short,
        },
    )
    .await;
    // Only the other project's key is usable.
    for _ in 0..3 {
        let lease = s.acquire(G, INGEST, 1).await.unwrap();
        assert_eq!(secret_of(&lease), "p2-a");
        lease.finish(Outcome::Success).await;
    }
    let lease = s.acquire(G, INGEST, 1).await.unwrap();
    finish_unpaused(
        lease,
        Outcome::RateLimited {
            retry_after: Some(Duration::from_secs(20)),
            scope: RateLimitScope::Short,
        },
    )
    .await;
    // Everything cools down past a bounded wait: it ends at once (nothing can change before its
    // end) with the earliest time a key comes back.
    let started = Instant::now();
    let err = s
        .acquire_within(G, INGEST, 1, Duration::from_secs(5))
        .await
        .unwrap_err();
    about(started.elapsed(), Duration::ZERO);
    let AcquireError::RateLimited { retry_after, .. } = err else {
        panic!("{err:?}")
    };
    about(retry_after, Duration::from_secs(20)); // project-2 returns 20 s after its limit
    // An unbounded wait is served the moment project-2 returns (no busy loop, no real sleep).
    let started = Instant::now();
    let lease = s.acquire(G, INGEST, 1).await.unwrap();
    assert_eq!(secret_of(&lease), "p2-a");
    about(started.elapsed(), Duration::from_secs(20));
}

#[tokio::test]
async fn backoff_without_a_hint_grows_and_a_daily_quota_waits_for_the_reset() {
    let f = fixture().await;
    let s = scheduler(&f, keys(&["only"], None), pool(4, None)).await;
    tokio::time::pause();
    let mut waits = Vec::new();
    for _ in 0..3 {
        let lease = s.acquire(G, INGEST, 1).await.unwrap();
        finish_unpaused(
            lease,
            Outcome::RateLimited {
                retry_after: None,
                scope: RateLimitScope::Short,
            },
        )
        .await;
        let started = Instant::now();
        let lease = s.acquire(G, INGEST, 1).await.unwrap();
        waits.push(started.elapsed());
        lease.finish(Outcome::Unused).await;
    }
    // 2 s ± 20 % jitter, and the timer's millisecond resolution on top.
    assert!(
        waits[0] >= Duration::from_millis(1600) && waits[0] <= Duration::from_millis(2410),
        "{waits:?}"
    );
    assert!(waits[1] > waits[0] && waits[2] > waits[1], "backoff grows: {waits:?}");

    let lease = s.acquire(G, INGEST, 1).await.unwrap();
    finish_unpaused(
        lease,
        Outcome::RateLimited {
            retry_after: Some(Duration::from_secs(5)),
            scope: RateLimitScope::Daily,
        },
    )
    .await;
    let err = s
        .acquire_within(G, INGEST, 1, Duration::from_millis(10))
        .await
        .unwrap_err();
    let AcquireError::RateLimited { retry_after, .. } = err else {
        panic!("{err:?}")
    };
    // The wait is until the next 08:00 UTC, whatever the hint said (computed from the wall
    // clock here too: a run in the minutes before 08:00 sees a short wait, not a day's).
    let now = chrono::Utc::now();
    let mut reset = now.date_naive().and_hms_opt(8, 0, 0).unwrap().and_utc();
    if reset <= now {
        reset += chrono::Duration::days(1);
    }
    let expected = (reset - now).to_std().unwrap();
    assert!(
        retry_after.abs_diff(expected) < Duration::from_secs(3),
        "a daily quota waits for the reset ({expected:?}), not the 5 s hint: {retry_after:?}"
    );
}

#[tokio::test]
async fn rejected_keys_are_retired_persistently_until_re_enabled() {
    let f = fixture().await;
    let s = scheduler(&f, keys(&["bad", "good"], None), pool(4, None)).await;
    let lease = s.acquire(G, INGEST, 1).await.unwrap();
    assert_eq!(secret_of(&lease), "bad");
    let rejected: Result<(), ProviderError> = Err(ProviderError::KeyRejected {
        message: "API_KEY_INVALID".into(),
    });
    lease.finish(Outcome::of(&rejected)).await;
    for _ in 0..3 {
        let lease = s.acquire(G, INGEST, 1).await.unwrap();
        assert_eq!(secret_of(&lease), "good");
        lease.finish(Outcome::Success).await;
    }
    let stored = f.store.list_keys(quarry::domain::Window::ALL).await.unwrap();
    let bad = stored.iter().find(|k| k.retired).expect("retirement persisted");
    assert!(bad.retired_reason.as_deref().unwrap().contains("API_KEY_INVALID"));

    // A new process sees the retirement; re-enabling lifts it.
    let s2 = scheduler(&f, keys(&["bad", "good"], None), pool(4, None)).await;
    assert!(s2.status().iter().any(|k| k.retired));
    f.store.set_key_enabled(bad.id, true, chrono::Utc::now()).await.unwrap();
    s2.refresh().await.unwrap();
    assert!(s2.status().iter().all(|k| !k.retired));

    // With every key retired there is nothing to wait for.
    let s3 = scheduler(&f, keys(&["lonely"], None), pool(4, None)).await;
    let lonely = s3.status().into_iter().find(|k| k.label.contains("#1")).unwrap().key_id;
    for k in f.store.list_keys(quarry::domain::Window::ALL).await.unwrap() {
        if k.id != lonely {
            f.store.set_key_enabled(k.id, false, chrono::Utc::now()).await.unwrap();
        }
    }
    f.store.retire_key(lonely, "test", chrono::Utc::now()).await.unwrap();
    s3.refresh().await.unwrap();
    assert_eq!(
        s3.acquire(G, INGEST, 1).await.unwrap_err(),
        AcquireError::NoEligibleKey(G)
    );
}

#[tokio::test]
async fn persisted_cooldowns_are_honoured_by_a_new_process() {
    let f = fixture().await;
    let s = scheduler(&f, keys(&["solo"], None), pool(4, None)).await;
    let lease = s.acquire(G, INGEST, 1).await.unwrap();
    lease
        .finish(Outcome::RateLimited {
            retry_after: Some(Duration::from_secs(120)),
            scope: RateLimitScope::Short,
        })
        .await;
    drop(s);
    // "Restart": a fresh scheduler on the same database.
    let s = scheduler(&f, keys(&["solo"], None), pool(4, None)).await;
    tokio::time::pause();
    let err = s
        .acquire_within(G, INGEST, 1, Duration::from_secs(1))
        .await
        .unwrap_err();
    let AcquireError::RateLimited { retry_after, .. } = err else {
        panic!("{err:?}")
    };
    assert!(retry_after > Duration::from_secs(100), "{retry_after:?}");
    assert!(s.status()[0].cooling_down_until.is_some());
}

#[tokio::test]
async fn client_side_budgets_pace_requests_and_keep_a_reserve_for_queries() {
    let f = fixture().await;
    let s = scheduler(&f, keys(&["budgeted"], None), pool(100, Some(60))).await;
    tokio::time::pause();
    let started = Instant::now();
    // 60 per minute, paced: one at once (a window holds a second's worth), then one per 1.02 s
    // (the window is 2 % longer than a second, a margin for the network's jitter).
    s.acquire(G, INGEST, 1).await.unwrap().finish(Outcome::Success).await;
    assert_eq!(started.elapsed(), Duration::ZERO);
    for n in 1..=3u64 {
        s.acquire(G, INGEST, 1).await.unwrap().finish(Outcome::Success).await;
        let waited = started.elapsed();
        // (timers have millisecond resolution)
        assert!(
            waited >= Duration::from_millis(1020 * n) && waited <= Duration::from_millis(1020 * n + 10),
            "request {n} went out after {waited:?}"
        );
    }
    // Queries may borrow a tenth of a minute's worth (5.9 requests at the paced rate) at once.
    let before = Instant::now();
    for _ in 0..5 {
        s.acquire(G, Lane::Query, 1)
            .await
            .unwrap()
            .finish(Outcome::Success)
            .await;
    }
    assert_eq!(before.elapsed(), Duration::ZERO);
    // Ingestion then waits until what they borrowed is repaid: five more spans, one each.
    let before = Instant::now();
    s.acquire(G, INGEST, 1).await.unwrap().finish(Outcome::Success).await;
    about(before.elapsed(), Duration::from_millis(6 * 1020));
}

#[tokio::test]
async fn a_batch_counted_per_text_pays_the_request_budget_per_text() {
    let f = fixture().await;
    let s = scheduler(&f, keys(&["budgeted"], None), pool(100, Some(600))).await;
    tokio::time::pause();
    // 600 per minute = 10 per 1.02 s window. A batch of 10 texts that the provider counts as
    // 10 requests (Google) fills it ...
    let started = Instant::now();
    s.acquire_for(G, INGEST, 10, 0)
        .await
        .unwrap()
        .finish(Outcome::Success)
        .await;
    assert_eq!(started.elapsed(), Duration::ZERO);
    // ... so the next batch of 10 waits for the window to move on, where a single request
    // would have gone out at once.
    s.acquire_for(G, INGEST, 10, 0)
        .await
        .unwrap()
        .finish(Outcome::Success)
        .await;
    about(started.elapsed(), Duration::from_millis(1020));
    // A batch larger than the window waits for an empty one and takes three windows: the pace
    // over time stays the budget's.
    let before = Instant::now();
    s.acquire_for(G, INGEST, 30, 0)
        .await
        .unwrap()
        .finish(Outcome::Success)
        .await;
    about(before.elapsed(), Duration::from_millis(1020));
    let before = Instant::now();
    s.acquire(G, INGEST, 0).await.unwrap().finish(Outcome::Success).await;
    about(before.elapsed(), Duration::from_millis(3 * 1020));
}

#[tokio::test]
async fn queries_are_served_while_ingestion_saturates_every_key() {
    let f = fixture().await;
    let s = scheduler(&f, keys(&["k1", "k2"], None), pool(1, None)).await;
    tokio::time::pause();
    // Ingestion holds every slot and more ingestion work is waiting.
    let held = [
        s.acquire(G, INGEST, 1).await.unwrap(),
        s.acquire(G, INGEST, 1).await.unwrap(),
    ];
    let waiting = {
        let s = s.clone();
        tokio::spawn(async move { s.acquire(G, INGEST, 1).await.map(|l| l.key_id()) })
    };
    tokio::task::yield_now().await;
    // The query does not queue behind it.
    let query = tokio::time::timeout(Duration::from_millis(1), s.acquire(G, Lane::Query, 1)).await;
    let query = query.expect("query served at once").unwrap();
    assert!(!waiting.is_finished());
    query.finish(Outcome::Success).await;
    drop(held);
    assert!(waiting.await.unwrap().is_ok());
}

#[tokio::test]
async fn a_freed_key_goes_to_a_waiting_query_before_waiting_ingestion() {
    let f = fixture().await;
    let s = scheduler(&f, keys(&["k"], None), pool(1, None)).await;
    tokio::time::pause();
    let held = s.acquire(G, INGEST, 1).await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (name, lane) in [("ingest-1", INGEST), ("ingest-2", INGEST), ("query", Lane::Query)] {
        let (s, order) = (s.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let lease = s.acquire(G, lane, 1).await.unwrap();
            order.lock().unwrap().push(name);
            tokio::time::sleep(Duration::from_millis(10)).await;
            lease.finish(Outcome::Success).await;
        }));
        // Let it register as a waiter (virtual time: no real sleep).
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    held.finish(Outcome::Success).await;
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), ["query", "ingest-1", "ingest-2"]);
}

#[tokio::test]
async fn ingestion_capacity_is_shared_fairly_between_worlds() {
    let f = fixture().await;
    let s = scheduler(&f, keys(&["k"], None), pool(1, None)).await;
    tokio::time::pause();
    let (big, small) = (WorldId::new(), WorldId::new());
    let first = s.acquire(G, Lane::Ingest(big), 1).await.unwrap();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (name, world) in [("big", big), ("big", big), ("big", big), ("small", small)] {
        let (s, order) = (s.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let lease = s.acquire(G, Lane::Ingest(world), 1).await.unwrap();
            order.lock().unwrap().push(name);
            tokio::time::sleep(Duration::from_millis(10)).await;
            lease.finish(Outcome::Success).await;
        }));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    first.finish(Outcome::Success).await;
    for t in tasks {
        t.await.unwrap();
    }
    // The small world, queued last, is served right after the big world's current request.
    assert_eq!(*order.lock().unwrap(), ["small", "big", "big", "big"]);
}

#[tokio::test]
async fn the_local_model_needs_no_key_and_is_limited_by_concurrency() {
    let f = fixture().await;
    let s = KeyScheduler::new(f.store.clone(), None, Vec::new(), HashMap::new(), 1)
        .await
        .unwrap();
    tokio::time::pause();
    let lease = s.acquire(ProviderKind::Local, INGEST, 1).await.unwrap();
    assert!(lease.key().is_none());
    let second = s
        .acquire_within(ProviderKind::Local, INGEST, 1, Duration::from_secs(1))
        .await;
    assert!(matches!(second, Err(AcquireError::RateLimited { .. })));
    drop(lease);
    assert!(s.acquire(ProviderKind::Local, INGEST, 1).await.is_ok());
    assert!(s.status().is_empty(), "the local slot is not a key");
    assert_eq!(
        s.acquire(G, INGEST, 1).await.unwrap_err(),
        AcquireError::NoEligibleKey(G)
    );
}
