//! The replica registry and the shared budget ledger, by the store's clock.

use std::sync::Arc;
use std::time::Duration;

use chrono::{SubsecRound, Utc};
use quarry::domain::{BudgetDraw, BudgetLimit, Drawn, ReplicaBeat, WindowRule};
use quarry::store::Store;

use super::{add_source, claim, new_world};

conformance!(replicas_heartbeat_and_the_dead_are_reaped_with_their_claims);
conformance!(a_shared_window_grants_refuses_and_lets_queries_overdraw);
conformance!(a_days_allowance_is_counted_per_day);

fn beat(id: &str) -> ReplicaBeat {
    ReplicaBeat {
        id: id.into(),
        address: format!("{id}.local:8080"),
        version: "1.2.3".into(),
        started_at: Utc::now().trunc_subsecs(6),
        workers: 4,
        in_flight: 2,
    }
}

async fn replicas_heartbeat_and_the_dead_are_reaped_with_their_claims(store: Arc<dyn Store>) {
    store.heartbeat(&beat("aaaa")).await.unwrap();
    store.heartbeat(&beat("bbbb")).await.unwrap();
    // A renewal updates the row, it adds none.
    let mut again = beat("aaaa");
    again.in_flight = 7;
    store.heartbeat(&again).await.unwrap();
    let replicas = store.list_replicas().await.unwrap();
    assert_eq!(replicas.len(), 2);
    let a = replicas.iter().find(|r| r.beat.id == "aaaa").unwrap();
    assert_eq!((a.beat.in_flight, a.beat.workers), (7, 4));
    assert_eq!(a.beat.address, "aaaa.local:8080");
    assert!(a.heartbeat_age_s < 5.0, "{}", a.heartbeat_age_s);

    // bbbb's workers hold claims; another replica's look alike but are not its own.
    let world = store.create_world(new_world("Aerth")).await.unwrap();
    add_source(&store, world.id, 4).await;
    assert_eq!(claim(&store, "bbbb-0", 2).await.len(), 2);
    assert_eq!(claim(&store, "bbbbc-0", 1).await.len(), 1);
    let now = Utc::now().trunc_subsecs(6);

    // Alive: not reaped.
    assert_eq!(store.reap_replica("bbbb", 30.0, now).await.unwrap(), None);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    store.heartbeat(&beat("aaaa")).await.unwrap();
    // Silent for more than a second: dead, and exactly its two claims come back.
    assert_eq!(store.reap_replica("bbbb", 1.0, now).await.unwrap(), Some(2));
    assert_eq!(store.reap_replica("bbbb", 1.0, now).await.unwrap(), None, "reaped once");
    assert_eq!(
        store.reap_replica("aaaa", 1.0, now).await.unwrap(),
        None,
        "it beat again"
    );
    let ids: Vec<String> = store
        .list_replicas()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.beat.id)
        .collect();
    assert_eq!(ids, ["aaaa"]);
    assert_eq!(
        claim(&store, "cccc-0", 10).await.len(),
        3,
        "bbbb's two and the one never claimed"
    );

    store.leave("aaaa").await.unwrap();
    assert!(store.list_replicas().await.unwrap().is_empty());
}

fn window(amount: f64, overdraft: f64) -> BudgetDraw {
    BudgetDraw {
        budget: "group/google/p/rpm".into(),
        amount,
        // 10 in any second.
        limit: BudgetLimit::Window(WindowRule {
            capacity: 10.0,
            span_s: 1.0,
        }),
        overdraft,
    }
}

async fn refused(store: &Arc<dyn Store>, draw: BudgetDraw) -> f64 {
    match store.draw_budget(&draw).await.unwrap() {
        Drawn::Refused { wait_s: Some(wait) } => wait,
        other => panic!("{draw:?} should be refused, got {other:?}"),
    }
}

async fn a_shared_window_grants_refuses_and_lets_queries_overdraw(store: Arc<dyn Store>) {
    assert_eq!(store.draw_budget(&window(8.0, 0.0)).await.unwrap(), Drawn::Granted);
    // 8 in the window: 5 more must wait until those 8 leave it, about a second.
    let wait = refused(&store, window(5.0, 0.0)).await;
    assert!(wait > 0.8 && wait <= 1.0, "{wait}");
    // A query may go over by its allowance…
    assert_eq!(store.draw_budget(&window(6.0, 6.0)).await.unwrap(), Drawn::Granted);
    // …and ingestion waits until the window has room again.
    let wait = refused(&store, window(1.0, 0.0)).await;
    assert!(wait > 0.8 && wait <= 1.0, "{wait}");
    tokio::time::sleep(Duration::from_secs_f64(wait + 0.05)).await;
    assert_eq!(store.draw_budget(&window(1.0, 0.0)).await.unwrap(), Drawn::Granted);
    // More than the window holds goes into an empty one, as pieces a span apart.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(store.draw_budget(&window(25.0, 0.0)).await.unwrap(), Drawn::Granted);
    let wait = refused(&store, window(1.0, 0.0)).await;
    assert!(
        wait > 1.5 && wait <= 2.0,
        "room for one more once two of its three pieces are past: {wait}"
    );
    // Budgets are independent.
    let mut other = window(10.0, 0.0);
    other.budget = "group/google/q/rpm".into();
    assert_eq!(store.draw_budget(&other).await.unwrap(), Drawn::Granted);
}

async fn a_days_allowance_is_counted_per_day(store: Arc<dyn Store>) {
    let day = |day: &str, amount: f64| BudgetDraw {
        budget: "key/k/rpd".into(),
        amount,
        limit: BudgetLimit::Day {
            day: day.into(),
            limit: 10.0,
        },
        overdraft: 0.0,
    };
    assert_eq!(
        store.draw_budget(&day("2026-11-25", 6.0)).await.unwrap(),
        Drawn::Granted
    );
    assert_eq!(
        store.draw_budget(&day("2026-11-25", 4.0)).await.unwrap(),
        Drawn::Granted
    );
    assert_eq!(
        store.draw_budget(&day("2026-11-25", 1.0)).await.unwrap(),
        Drawn::Refused { wait_s: None }
    );
    // More than the whole allowance goes only as a day's first draw.
    assert_eq!(
        store.draw_budget(&day("2026-11-24", 12.0)).await.unwrap(),
        Drawn::Granted
    );
    assert_eq!(
        store.draw_budget(&day("2026-11-24", 12.0)).await.unwrap(),
        Drawn::Refused { wait_s: None }
    );
    // The next day starts afresh; old days can be forgotten.
    assert_eq!(
        store.draw_budget(&day("2026-11-26", 10.0)).await.unwrap(),
        Drawn::Granted
    );
    assert_eq!(store.forget_budget_days("2026-11-26").await.unwrap(), 2);
    assert_eq!(
        store.draw_budget(&day("2026-11-26", 1.0)).await.unwrap(),
        Drawn::Refused { wait_s: None }
    );
}
