//! PostgreSQL writes a claim and a mark as heap-only (HOT) updates: no new index entry for
//! either (migration 0028), which is what keeps its load near SQLite's rate at a million
//! chunks. And `manifest_open`, PostgreSQL's table of the entries still to do, agrees with the
//! entries after every kind of change; SQLite's is a view of them.

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use quarry::domain::JobStatus;
use quarry::store::Store;

use super::{add_source, claim, complete, new_world, vectors_of};

/// `manifest_entries`' update counts as the statistics collector has them: (all, HOT), and the
/// rows inserted.
async fn update_counts(pool: &sqlx::PgPool) -> ((i64, i64), i64) {
    // Each read in a transaction of its own, so no cached snapshot of the statistics is reused.
    let (updated, hot, inserted) = sqlx::query_as(
        "SELECT n_tup_upd, n_tup_hot_upd, n_tup_ins FROM pg_stat_user_tables WHERE relname = 'manifest_entries'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    ((updated, hot), inserted)
}

/// Reads the update counts until they include `at_least` updates since `base`: a backend reports
/// its statistics when it goes idle, at most once a second, so the store's connections report
/// theirs a little after their statements end. Polled at most 300 times.
async fn counts_after(pool: &sqlx::PgPool, base: (i64, i64), at_least: i64) -> (i64, i64) {
    for _ in 0..300 {
        let (now, _) = update_counts(pool).await;
        if now.0 - base.0 >= at_least {
            return (now.0 - base.0, now.1 - base.1);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the statistics never showed {at_least} updates of the entries");
}

#[tokio::test]
async fn postgres_claims_and_marks_are_hot_updates() {
    let Some(db) = crate::helpers::PgDatabase::create("store_conformance::hot_updates").await else {
        return;
    };
    let store = quarry::store::connect(&db.url).await.expect("postgres store");
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    // No vacuum meanwhile: a page pruned by it would make room that fillfactor did not.
    sqlx::query("ALTER TABLE manifest_entries SET (autovacuum_enabled = false)")
        .execute(&pool)
        .await
        .unwrap();
    let world = store.create_world(new_world("Hot")).await.unwrap();
    // Several pages of entries.
    add_source(&store, world.id, 400).await;
    // The counts from before the claims: once the statistics show the entries' inserts.
    let mut base = None;
    for _ in 0..300 {
        let (counts, inserted) = update_counts(&pool).await;
        if inserted >= 400 {
            base = Some(counts);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let base = base.expect("the statistics never showed the entries' inserts");

    // 64 claims, then 64 marks.
    let items = claim(&store, "hot", 64).await;
    assert_eq!(items.len(), 64);
    let (updated, hot) = counts_after(&pool, base, 64).await;
    assert_eq!((updated, hot), (64, 64), "every claim is a HOT update");
    assert_eq!(complete(&store, "hot", &items).await, 64);
    let (updated, hot) = counts_after(&pool, base, 128).await;
    assert_eq!((updated, hot), (128, 128), "every mark is a HOT update too");

    // The index on the entries' lease is gone, and no index of the entries names the state.
    let indexed: Vec<String> = sqlx::query_scalar(
        "SELECT indexdef FROM pg_indexes WHERE tablename = 'manifest_entries' \
         AND (indexdef LIKE '%state%' OR indexdef LIKE '%lease%')",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(indexed.is_empty(), "{indexed:?}");
    pool.close().await;
    store.close().await;
    db.drop_db().await;
}

/// Every `(chunk, world, run, source, job, state, book, chunk number, error)` of the entries still to do,
/// read from the entries themselves and from `manifest_open`, which must agree.
async fn open_entries(pool: &sqlx::PgPool) -> (i64, i64, i64) {
    const COLUMNS: &str = "chunk_id, world_id, run_id, source_id, job_id, state, book_number, chunk_number, \
         last_error_code, last_error_message";
    let sql = format!(
        "SELECT (SELECT COUNT(*) FROM manifest_open), \
         (SELECT COUNT(*) FROM (SELECT {COLUMNS} FROM manifest_entries WHERE state <> 'embedded' \
         EXCEPT SELECT {COLUMNS} FROM manifest_open) AS missing), \
         (SELECT COUNT(*) FROM (SELECT {COLUMNS} FROM manifest_open \
         EXCEPT SELECT {COLUMNS} FROM manifest_entries WHERE state <> 'embedded') AS extra)"
    );
    sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_one(pool).await.unwrap()
}

#[tokio::test]
async fn postgres_keeps_the_open_entries_with_every_change() {
    let Some(db) = crate::helpers::PgDatabase::create("store_conformance::open_entries").await else {
        return;
    };
    let store: Arc<dyn Store> = quarry::store::connect(&db.url).await.expect("postgres store");
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let world = store.create_world(new_world("Open")).await.unwrap();
    let (_, job) = add_source(&store, world.id, 10).await;
    let (gone, _) = add_source(&store, world.id, 4).await;
    assert_eq!(open_entries(&pool).await, (14, 0, 0), "new entries are open");

    // Marked entries leave; a permanently failed one stays, failed.
    let items = claim(&store, "w", 6).await;
    assert_eq!(complete(&store, "w", &items[..5]).await, 5);
    let now = Utc::now().trunc_subsecs(6);
    let failed = store
        .fail_work("w", job.id, items[5].chunk_id, "bad", "bad input", 3, true, now, now)
        .await
        .unwrap();
    assert!(failed);
    assert_eq!(open_entries(&pool).await, (9, 0, 0));
    let state: String = sqlx::query_scalar("SELECT state FROM manifest_open WHERE chunk_id = $1")
        .bind(items[5].chunk_id.0)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(state, "failed");

    // An outage's note and a spent attempt that goes back to the queue carry their errors along.
    let pending = claim(&store, "w", 2).await;
    store
        .note_error(
            &[pending[0].chunk_id],
            "provider_unavailable",
            "the provider is down",
            now,
        )
        .await
        .unwrap();
    let failed_once = store
        .fail_work(
            "w",
            job.id,
            pending[1].chunk_id,
            "bad_answer",
            "a malformed answer",
            3,
            false,
            now,
            now,
        )
        .await
        .unwrap();
    assert!(!failed_once);
    assert_eq!(open_entries(&pool).await, (9, 0, 0));
    let noted: Option<String> = sqlx::query_scalar("SELECT last_error_code FROM manifest_open WHERE chunk_id = $1")
        .bind(pending[0].chunk_id.0)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(noted.as_deref(), Some("provider_unavailable"));
    store.release_owner("w", &[pending[0].chunk_id], now).await.unwrap();

    // A retry puts it back to pending; a deleted source takes its open entries along.
    store.retry_failed(job.id, now).await.unwrap();
    assert_eq!(open_entries(&pool).await, (9, 0, 0));
    store
        .delete_source(world.id, gone.id, None, now)
        .await
        .unwrap()
        .expect("deleted");
    assert_eq!(open_entries(&pool).await, (5, 0, 0));

    // Everything embedded: nothing is open, and the job completes by the open table's count.
    loop {
        let items = claim(&store, "w", 32).await;
        if items.is_empty() {
            break;
        }
        let done = vectors_of(&items);
        store
            .complete_work("w", items[0].job_id, items[0].run_id, &done, 0, Utc::now())
            .await
            .unwrap();
    }
    assert_eq!(open_entries(&pool).await, (0, 0, 0));
    store.finish_job_if_done(job.id, Utc::now()).await.unwrap();
    let status = store.job_status(job.id).await.unwrap();
    assert_eq!(status, Some(JobStatus::Completed));

    // A deleted world takes its entries along by cascade, the open ones too.
    let (_, _) = add_source(&store, world.id, 3).await;
    assert_eq!(open_entries(&pool).await, (3, 0, 0));
    store.delete_world(world.id).await.unwrap();
    assert_eq!(open_entries(&pool).await, (0, 0, 0));
    pool.close().await;
    store.close().await;
    db.drop_db().await;
}
