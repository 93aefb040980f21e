//! PostgreSQL's plans on tables that have no statistics yet (a fresh world, or a server whose
//! autovacuum is off): retrieval's verification reads each hit by key, planning one row per hit,
//! a source's listings read that source's rows, never the world's, and a claim reads back what it
//! leased by key.

use quarry::store::statements::{
    CHUNK_WINDOW, CHUNKS_BY_POINTS, CLAIM_READ, HITS_BY_POINTS, LIST_CHUNKS, LIST_CHUNKS_TOTAL, OF_SOURCE,
    OUTLINE_WINDOW, SOURCE_COUNTS, TEXT_WINDOW, parents_over_union, window_union,
};

use super::{add_source, claim, complete, new_world};

/// `$1…$n`.
fn in_list(n: usize) -> String {
    let params: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
    format!("({})", params.join(", "))
}

/// Every node of a JSON plan, depth first.
fn nodes(plan: &serde_json::Value, into: &mut Vec<serde_json::Value>) {
    into.push(plan.clone());
    for child in plan["Plans"].as_array().into_iter().flatten() {
        nodes(child, into);
    }
}

/// Whether a plan node reads a whole table of chunk rows. (With sixteen sources in a few pages, a scan
/// of `sources` is the right plan; the rows it is planned to return are what is checked.)
fn scans_entries(step: &serde_json::Value) -> bool {
    step["Node Type"] == "Seq Scan"
        && ["chunks", "manifest_entries"].contains(&step["Relation Name"].as_str().unwrap_or_default())
}

/// The plan PostgreSQL makes for `sql` with these ids (then these integers) bound, as its nodes.
async fn plan(pool: &sqlx::PgPool, sql: &str, ids: &[uuid::Uuid], ints: &[i64]) -> Vec<serde_json::Value> {
    let explain = sqlx::AssertSqlSafe(format!("EXPLAIN (FORMAT JSON) {sql}"));
    let mut query = sqlx::query_scalar::<_, serde_json::Value>(explain);
    for id in ids {
        query = query.bind(*id);
    }
    for int in ints {
        query = query.bind(*int);
    }
    let plan = query.fetch_one(pool).await.unwrap();
    let mut all = Vec::new();
    nodes(&plan[0]["Plan"], &mut all);
    all
}

#[tokio::test]
async fn postgres_reads_hits_and_sources_by_key_without_statistics() {
    let Some(db) = crate::helpers::PgDatabase::create("store_conformance::plans::verify").await else {
        return;
    };
    let store = quarry::store::connect(&db.url).await.expect("postgres store");
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    for table in ["chunks", "manifest_entries", "sources"] {
        let off = sqlx::AssertSqlSafe(format!("ALTER TABLE {table} SET (autovacuum_enabled = false)"));
        sqlx::query(off).execute(&pool).await.unwrap();
    }
    let world = store.create_world(new_world("Unanalyzed")).await.unwrap();
    // Enough rows that reading 32 of them by key beats reading the table: a claim's size.
    for _ in 0..16 {
        add_source(&store, world.id, 1000).await;
    }
    let analyzed: Option<i64> = sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_stat_user_tables WHERE relname IN ('chunks', 'manifest_entries') \
         AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(analyzed, Some(0), "the tables have no statistics");

    let points: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT point_id FROM manifest_entries ORDER BY chunk_id LIMIT 10")
            .fetch_all(&pool)
            .await
            .unwrap();
    let steps = plan(&pool, &format!("{CHUNKS_BY_POINTS}{}", in_list(10)), &points, &[]).await;
    for step in &steps {
        assert!(!scans_entries(step), "{steps:#?}");
        assert!(
            step["Plan Rows"].as_f64().unwrap() <= 10.0,
            "one row per hit: {steps:#?}"
        );
    }
    // The statement returns what was planned.
    let found = store
        .chunks_by_points(
            world.id,
            store.get_world(world.id).await.unwrap().unwrap().active_run,
            &points,
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 10);

    // With the hits' sources' details, the same: one row per hit.
    let steps = plan(&pool, &format!("{HITS_BY_POINTS}{}", in_list(10)), &points, &[]).await;
    for step in &steps {
        assert!(!scans_entries(step), "{steps:#?}");
        assert!(
            step["Plan Rows"].as_f64().unwrap() <= 10.0,
            "one row per hit: {steps:#?}"
        );
    }
    let sources: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM sources")
        .fetch_all(&pool)
        .await
        .unwrap();
    // The parents of four hits: each by a seek in the parents' last-chunk index, never a walk
    // of the world's chunks or entries, nor of a source's parents.
    let run = store.get_world(world.id).await.unwrap().unwrap().active_run;
    assert_eq!(quarry::jobs::parents::backfill(store.as_ref()).await.unwrap(), 16);
    let explain = sqlx::AssertSqlSafe(format!("EXPLAIN (FORMAT JSON) {}", parents_over_union(4)));
    let mut query = sqlx::query_scalar::<_, serde_json::Value>(explain).bind(run.0);
    for source in &sources[..4] {
        query = query.bind(*source).bind(5_i64).bind(5_i64);
    }
    let mut steps = Vec::new();
    nodes(&query.fetch_one(&pool).await.unwrap()[0]["Plan"], &mut steps);
    assert!(steps.iter().all(|step| !scans_entries(step)), "{steps:#?}");
    let lookups = steps
        .iter()
        .filter(|step| step["Index Name"] == "parents_by_last_chunk")
        .count();
    assert_eq!(lookups, 4, "one seek per hit: {steps:#?}");
    // A context's windows (the texts it keeps; the outlines it is planned on; whole chunks): a
    // seek per window in the chunks' window key, never a walk of the world's chunks.
    for sql in [TEXT_WINDOW, OUTLINE_WINDOW, CHUNK_WINDOW] {
        let sql = quarry::store::statements::shown::<sqlx::Postgres>(&window_union(sql, 2, 4));
        let explain = sqlx::AssertSqlSafe(format!("EXPLAIN (FORMAT JSON) {sql}"));
        let mut query = sqlx::query_scalar::<_, serde_json::Value>(explain).bind(run.0);
        for source in &sources[..4] {
            query = query.bind(*source).bind(3_i64).bind(7_i64);
        }
        let mut steps = Vec::new();
        nodes(&query.fetch_one(&pool).await.unwrap()[0]["Plan"], &mut steps);
        assert!(steps.iter().all(|step| !scans_entries(step)), "{sql}: {steps:#?}");
        let seeks = steps
            .iter()
            .filter(|step| step["Index Name"] == "chunks_run_id_source_id_chunk_number_key")
            .count();
        assert_eq!(seeks, 4, "{sql}: one seek per window: {steps:#?}");
        assert!(
            steps.iter().all(|step| step["Index Name"] != "chunks_world_run"),
            "{sql}: {steps:#?}"
        );
    }
    // A source's rows deleted or switched in one run: a seek in each table's run and source key,
    // never a walk of the world's chunks or parents.
    for (table, index) in [
        ("chunks", "chunks_run_id_source_id_chunk_number_key"),
        ("parents", "parents_by_last_chunk"),
        ("run_sources", "run_sources_pkey"),
    ] {
        let explain = sqlx::AssertSqlSafe(format!(
            "EXPLAIN (FORMAT JSON) DELETE FROM {table} WHERE {OF_SOURCE} = $2"
        ));
        let plan: serde_json::Value = sqlx::query_scalar(explain)
            .bind(run.0)
            .bind(sources[0])
            .fetch_one(&pool)
            .await
            .unwrap();
        let mut steps = Vec::new();
        nodes(&plan[0]["Plan"], &mut steps);
        assert!(
            steps.iter().any(|step| step["Index Name"] == index
                && step["Index Cond"]
                    .as_str()
                    .is_some_and(|c| c.contains("run_id") && c.contains("source_id"))),
            "{table}: {steps:#?}"
        );
        assert!(
            steps.iter().all(|step| step["Node Type"] != "Seq Scan"
                && !step["Index Name"].as_str().unwrap_or_default().contains("world")),
            "{table}: {steps:#?}"
        );
    }
    let found = store
        .parents_over(run, &[(quarry::domain::SourceId(sources[0]), 5, 5)])
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "{found:?}");

    // A source's chunks, their total and its counts: by the source's index, whatever the world's
    // size; the world's own indexes are never read.
    let source = sources[0];
    for (sql, ints) in [
        (LIST_CHUNKS, &[50, 0][..]),
        (LIST_CHUNKS_TOTAL, &[]),
        (SOURCE_COUNTS, &[]),
    ] {
        let steps = plan(&pool, sql, &[world.id.0, source], ints).await;
        for step in &steps {
            assert!(!scans_entries(step), "{sql}: {steps:#?}");
            let index = step["Index Name"].as_str().unwrap_or_default();
            assert!(
                !index.ends_with("world_run") && !index.ends_with("world_state"),
                "{sql}: {steps:#?}"
            );
        }
    }

    // A claim's entries are read back by the ids the claim returned, by key: the owner's index
    // also points at every dead version of the entries it leased before (until a vacuum).
    for _ in 0..3 {
        let items = claim(&store, "w", 32).await;
        complete(&store, "w", &items).await;
    }
    let items = claim(&store, "w", 32).await;
    let ids: Vec<uuid::Uuid> = items.iter().map(|i| i.chunk_id.0).collect();
    let steps = plan(&pool, &format!("{CLAIM_READ}{}", in_list(ids.len())), &ids, &[]).await;
    for step in &steps {
        assert!(!scans_entries(step), "{steps:#?}");
        let index = step["Index Name"].as_str().unwrap_or_default();
        assert!(
            !index.starts_with("manifest_") || index == "manifest_entries_pkey",
            "{steps:#?}"
        );
        if ["chunks", "manifest_entries"].contains(&step["Relation Name"].as_str().unwrap_or_default()) {
            assert!(
                step["Plan Rows"].as_f64().unwrap() <= 32.0,
                "one row per id: {steps:#?}"
            );
        }
    }
    assert!(
        steps.iter().any(|s| s["Index Name"] == "manifest_entries_pkey"),
        "{steps:#?}"
    );
    pool.close().await;
    store.close().await;
    db.drop_db().await;
}
