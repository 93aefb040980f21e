//! A world's counts are kept per run and state by triggers (migration 0014), not counted from
//! its entries: they must agree with the entries after every kind of change.

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use quarry::domain::{Window, WorldId, WorldStats};
use quarry::store::Store;

use super::reingest::{embed_the_last_entry_and_switch, reingest_fully_embedded};
use super::retry::fail_all;
use super::{add_source, claim, complete, new_world};

conformance!(world_counts_follow_every_change_of_its_entries);

/// The world's counts as its sources count them, each from its own entries.
async fn counted(store: &Arc<dyn Store>, world: WorldId) -> WorldStats {
    let sources = store.list_sources(world, Window::ALL).await.unwrap();
    let mut stats = WorldStats {
        sources: sources.len() as u64,
        ..WorldStats::default()
    };
    for source in sources {
        let c = store.source_counts(world, source.id).await.unwrap();
        stats.chunks += c.chunks;
        stats.embedded += c.embedded;
        stats.pending += c.pending;
        stats.failed += c.failed;
    }
    stats
}

/// Checks that `world`'s kept counts are `expected` (chunks, embedded, pending, failed) and agree
/// with its entries, before and after the heartbeat's fold (PostgreSQL keeps deltas).
async fn expect(store: &Arc<dyn Store>, world: WorldId, expected: (u64, u64, u64, u64), after: &str) {
    for fold in [false, true] {
        if fold {
            store.fold_counts().await.unwrap();
        }
        let kept = store.world_stats(world).await.unwrap();
        assert_eq!(kept, counted(store, world).await, "after {after}");
        assert_eq!(
            (kept.chunks, kept.embedded, kept.pending, kept.failed),
            expected,
            "after {after}"
        );
    }
}

async fn world_counts_follow_every_change_of_its_entries(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("Counted")).await.unwrap();
    let neighbour = store.create_world(new_world("Neighbour")).await.unwrap();
    expect(&store, world.id, (0, 0, 0, 0), "creation").await;
    let (first, _) = add_source(&store, world.id, 40).await;
    add_source(&store, world.id, 5).await;
    add_source(&store, neighbour.id, 7).await;
    expect(&store, world.id, (45, 0, 45, 0), "uploads").await;
    expect(&store, neighbour.id, (7, 0, 7, 0), "uploads").await;

    // One entry per statement (PostgreSQL appends a delta for each, folded by the heartbeat);
    // claims and lease changes alone change no count.
    let (mut embedded, mut on_neighbour) = (Vec::new(), 0);
    while embedded.len() < 40 {
        let items = claim(&store, "w", 1).await;
        assert_eq!(items.len(), 1);
        if embedded.len() % 10 == 0 {
            expect(
                &store,
                world.id,
                (45, embedded.len() as u64, 45 - embedded.len() as u64, 0),
                "a claim",
            )
            .await;
        }
        complete(&store, "w", &items).await;
        let (mine, theirs): (Vec<_>, Vec<_>) = items.into_iter().partition(|i| i.world_id == world.id);
        embedded.extend(mine);
        on_neighbour += theirs.len() as u64;
    }
    expect(&store, world.id, (45, 40, 5, 0), "single embeds").await;
    expect(
        &store,
        neighbour.id,
        (7, on_neighbour, 7 - on_neighbour, 0),
        "single embeds",
    )
    .await;

    // The rest: the world's fail for good, then come back under their job's retry.
    let mut rest = Vec::new();
    loop {
        let items = claim(&store, "w", 100).await;
        if items.is_empty() {
            break;
        }
        rest.extend(items);
    }
    let (failing, fine): (Vec<_>, Vec<_>) = rest.into_iter().partition(|i| i.world_id == world.id);
    assert!(!failing.is_empty());
    fail_all(&store, "w", &failing).await;
    if !fine.is_empty() {
        complete(&store, "w", &fine).await;
    }
    let failed = failing.len() as u64;
    expect(&store, world.id, (45, 45 - failed, 0, failed), "failures").await;
    expect(&store, neighbour.id, (7, 7, 0, 0), "failures").await;
    let now = Utc::now().trunc_subsecs(6);
    store.finish_job_if_done(failing[0].job_id, now).await.unwrap();
    store.retry_failed(failing[0].job_id, now).await.unwrap();
    let retried = failing.iter().filter(|i| i.job_id == failing[0].job_id).count() as u64;
    expect(
        &store,
        world.id,
        (45, 45 - failed, retried, failed - retried),
        "a retry",
    )
    .await;

    // A repair puts embedded entries back in the queue.
    let requeue: Vec<_> = embedded.iter().take(3).map(|i| i.chunk_id).collect();
    store
        .requeue_entries(world.id, world.active_run, &requeue, "point_missing", None, now)
        .await
        .unwrap()
        .expect("requeued");
    expect(
        &store,
        world.id,
        (45, 42 - failed, retried + 3, failed - retried),
        "a requeue",
    )
    .await;

    // Deleting a source takes its entries off, whatever their state.
    let gone = store.source_counts(world.id, first.id).await.unwrap();
    store
        .delete_source(world.id, first.id, None, now)
        .await
        .unwrap()
        .expect("deleted");
    let left = counted(&store, world.id).await;
    assert_eq!(left.chunks, 5);
    assert_eq!(45 - gone.chunks, 5);
    expect(
        &store,
        world.id,
        (left.chunks, left.embedded, left.pending, left.failed),
        "a source's delete",
    )
    .await;

    // A world deleted: its neighbour's counts stay as they were.
    assert!(store.delete_world(world.id).await.unwrap());
    assert_eq!(store.world_stats(world.id).await.unwrap(), WorldStats::default());
    expect(&store, neighbour.id, (7, 7, 0, 0), "the other world's delete").await;

    // A re-ingest: the new run is counted once the world switches to it, and its changes after.
    let fresh = store.create_world(new_world("Re-ingested")).await.unwrap();
    let (run, job, items) = reingest_fully_embedded(&store, &fresh).await;
    expect(&store, fresh.id, (2, 2, 0, 0), "a re-ingest's run filled").await;
    let new_run: Vec<_> = items.iter().filter(|i| i.run_id == run).map(|i| i.chunk_id).collect();
    store
        .requeue_entries(fresh.id, run, &new_run[..1], "point_missing", None, now)
        .await
        .unwrap()
        .expect("requeued");
    expect(&store, fresh.id, (2, 2, 0, 0), "a requeue in the run being built").await;
    embed_the_last_entry_and_switch(&store, &job).await;
    assert_eq!(store.get_world(fresh.id).await.unwrap().unwrap().active_run, run);
    store
        .requeue_entries(fresh.id, run, &new_run[..1], "point_missing", None, now)
        .await
        .unwrap()
        .expect("requeued");
    expect(&store, fresh.id, (2, 1, 1, 0), "a requeue after the switch").await;
}

/// PostgreSQL appends a delta row per statement that changes entries; the heartbeat's fold
/// leaves one per state, and replicas folding at the same moment neither wait for each other
/// nor count anything twice.
#[tokio::test]
async fn postgres_folds_the_deltas_into_one_row_per_state() {
    let Some(db) = crate::helpers::PgDatabase::create("store_conformance::world_counts::fold").await else {
        return;
    };
    let store = quarry::store::connect(&db.url).await.expect("postgres store");
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let rows = || async {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM manifest_counts")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let world = store.create_world(new_world("Folded")).await.unwrap();
    add_source(&store, world.id, 30).await;
    for _ in 0..20 {
        let items = claim(&store, "w", 1).await;
        complete(&store, "w", &items).await;
    }
    assert_eq!(
        rows().await,
        41,
        "the upload's delta and two per mark (out of pending, into embedded)"
    );
    let (a, b) = tokio::join!(store.fold_counts(), store.fold_counts());
    a.unwrap();
    b.unwrap();
    // Of two concurrent folds one may skip its beat (one replica folds at a time): a third
    // leaves one per state.
    store.fold_counts().await.unwrap();
    assert_eq!(rows().await, 2, "pending and embedded");
    // The folded rows do not stay behind as dead rows for every read of the counts to step
    // over: the fold vacuums the table (this server's autovacuum may be off, as here).
    let vacuumed: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT last_vacuum FROM pg_stat_user_tables WHERE relname = 'manifest_counts'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(vacuumed.is_some(), "manifest_counts was vacuumed");
    expect(&store, world.id, (30, 20, 10, 0), "folds").await;
    // A world's delete takes its counts along.
    assert!(store.delete_world(world.id).await.unwrap());
    assert_eq!(rows().await, 0);
    pool.close().await;
    store.close().await;
    db.drop_db().await;
}

/// A fold right after a burst of deltas takes them all, however few rows the table held when
/// PostgreSQL last looked at it. As one statement joining the table to itself, the fold was
/// planned from the vacuum's "two rows in these pages" (the burst refills the pages the vacuum
/// freed) and went through the burst once per delta: 17 s for 30,000, minutes for this one.
#[tokio::test]
async fn postgres_folds_a_burst_that_follows_a_vacuum() {
    let Some(db) = crate::helpers::PgDatabase::create("store_conformance::world_counts::burst").await else {
        return;
    };
    let store = quarry::store::connect(&db.url).await.expect("postgres store");
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let world = store.create_world(new_world("Burst")).await.unwrap();
    add_source(&store, world.id, 30).await;
    let run = store.get_world(world.id).await.unwrap().unwrap().active_run;
    // Deltas as from `n` single marks: one out of pending, one into embedded each.
    let burst = |n: i64| {
        sqlx::query(
            "INSERT INTO manifest_counts (run_id, state, n) \
             SELECT $1, CASE WHEN i % 2 = 0 THEN 'pending' ELSE 'embedded' END, \
             CASE WHEN i % 2 = 0 THEN -1 ELSE 1 END FROM generate_series(1, 2 * $2) AS i",
        )
        .bind(run.0)
        .bind(n)
        .execute(&pool)
    };
    // A first burst, folded and vacuumed: PostgreSQL now takes the table's pages to hold two rows.
    burst(60_000).await.unwrap();
    store.fold_counts().await.unwrap();
    burst(50_000).await.unwrap();
    // A hang guard, not a timing: the fold takes about a second here.
    tokio::time::timeout(std::time::Duration::from_secs(120), store.fold_counts())
        .await
        .expect("the fold finished")
        .unwrap();
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT state, CAST(SUM(n) AS BIGINT), COUNT(*) FROM manifest_counts GROUP BY state ORDER BY state",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        rows,
        [
            ("embedded".to_owned(), 110_000, 1),
            ("pending".to_owned(), 30 - 110_000, 1)
        ]
    );
    pool.close().await;
    store.close().await;
    db.drop_db().await;
}
