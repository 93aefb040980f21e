//! The plans SQLite makes for the statements whose cost must not grow with a world: SQLite has
//! no statistics in quarry (it never runs ANALYZE), so a plan read on an empty store is the plan
//! it makes at any size, and a statement that walks a world shows it here.

use super::retrieval::{REUSABLE, REUSABLE_TAIL};
use super::work::{CLAIM, CLAIM_READ};

/// The plan SQLite (which quarry never gives statistics) makes for a statement on an empty
/// store: the one it makes at any size.
async fn plan(sql: &str, binds: usize) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("plan.db").display());
    let store = super::sqlite::SqliteStore::connect(&url).await.unwrap();
    let explain = sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}"));
    let mut query = sqlx::query_as::<sqlx::Sqlite, (i64, i64, i64, String)>(explain);
    for _ in 0..binds {
        query = query.bind("x");
    }
    let rows = query.fetch_all(&store.pool).await.unwrap();
    rows.into_iter().map(|r| r.3).collect()
}

/// Each batch of reusable vectors is looked up by its text hashes and each entry by its key,
/// never by walking the world's entries: that walk slowed a load tenfold by 170,000 chunks.
#[tokio::test]
async fn reusable_vectors_are_found_from_the_text_hashes() {
    for (scope, binds) in [(" AND m.world_id = $2", 4), ("", 3)] {
        let first = binds - 1;
        let sql = format!("{REUSABLE}{scope}{REUSABLE_TAIL}(${first}, ${binds})");
        let steps = plan(&sql, binds).await;
        assert!(
            steps[0].starts_with("SEARCH c ") && steps[0].contains("INDEX chunks_text_hash"),
            "{scope}: {steps:?}"
        );
        assert!(
            steps
                .iter()
                .any(|s| s.starts_with("SEARCH m ") && s.contains("(chunk_id=?)")),
            "{scope}: {steps:?}"
        );
        assert!(
            steps
                .iter()
                .all(|s| !s.starts_with("SCAN") && !s.contains("manifest_world_state")),
            "{scope}: {steps:?}"
        );
    }
}

/// A world's counts are read from the kept counts, not from its entries.
#[tokio::test]
async fn world_counts_read_no_entries() {
    let steps = plan(super::worlds::WORLD_STATS, 1).await;
    // `c` is manifest_counts, by its primary key; an entry index would be named.
    assert!(
        steps
            .iter()
            .any(|s| s.contains("SEARCH c USING PRIMARY KEY (run_id=?)")),
        "{steps:?}"
    );
    assert!(
        steps.iter().all(|s| !s.contains("manifest") && !s.starts_with("SCAN")),
        "{steps:?}"
    );
}

/// A claim walks the running jobs in the order it picks them (least recently claimed first) and
/// stops at the first with work, then reads its batch off the queue index in reading order: it
/// sorts nothing and looks at no other entry. Before, it tested every running job and sorted
/// them, then looked up and sorted every pending entry of the one it took (with its chunk): the
/// bottleneck of a million-chunk load, under SQLite's write lock.
#[tokio::test]
async fn a_claim_reads_only_its_batch() {
    let steps = plan(CLAIM, 4).await;
    for (table, index) in [
        ("SCAN j ", "INDEX jobs_claim_order"),
        ("SEARCH m ", "INDEX manifest_job_queue (job_id=? AND state=?)"),
        ("SEARCH p ", "INDEX manifest_job_queue (job_id=? AND state=?)"),
    ] {
        assert!(
            steps.iter().any(|s| s.starts_with(table) && s.contains(index)),
            "{table}{index}: {steps:?}"
        );
    }
    assert!(
        steps
            .iter()
            .all(|s| !s.contains("TEMP B-TREE") && !s.contains("chunks")),
        "{steps:?}"
    );
}

/// Retrieval's verification reads each hit's entry by its point, then its chunk by key and its
/// source's columns from the covering index `sources_shown` (migration 0029): from the table,
/// they lie after the document's text, whose overflow pages SQLite would walk for each hit.
#[tokio::test]
async fn verification_reads_each_hit_by_key() {
    let sql = format!("{}($1, $2, $3)", super::retrieval::CHUNKS_BY_POINTS);
    let steps = plan(&super::backend::shown::<sqlx::Sqlite>(&sql), 3).await;
    for (table, index) in [
        ("SEARCH m ", "INDEX manifest_point (point_id=?)"),
        ("SEARCH c ", "INDEX sqlite_autoindex_chunks_1 (id=?)"),
        ("SEARCH s ", "COVERING INDEX sources_shown (id=?)"),
    ] {
        assert!(
            steps.iter().any(|s| s.starts_with(table) && s.contains(index)),
            "{table}{index}: {steps:?}"
        );
    }
    assert!(steps.iter().all(|s| !s.starts_with("SCAN")), "{steps:?}");
    // The same lookups, with the sources' details.
    let sql = format!("{}($1, $2, $3)", super::retrieval::HITS_BY_POINTS);
    let with_details = plan(&super::backend::shown::<sqlx::Sqlite>(&sql), 3).await;
    assert_eq!(with_details, steps);
    // As written (PostgreSQL's form), SQLite would read the source's row instead.
    let unhinted = plan(&sql, 3).await;
    assert!(
        unhinted
            .iter()
            .any(|s| s.starts_with("SEARCH s ") && s.contains("sqlite_autoindex_sources_1")),
        "{unhinted:?}"
    );
}

/// A context's parents are found by a seek in their last-chunk index, each window reading at
/// most its width in rows: never the source's other parents (a long manual has hundreds), nor
/// the world's.
#[tokio::test]
async fn a_windows_parents_are_found_by_a_seek() {
    let steps = plan(&super::parents::parents_over_union(2), 7).await;
    let seeks = steps
        .iter()
        .filter(|s| {
            s.starts_with("SEARCH parents ")
                && s.contains("INDEX parents_by_last_chunk (run_id=? AND source_id=? AND last_chunk>?)")
        })
        .count();
    assert_eq!(seeks, 2, "one seek per window: {steps:?}");
    assert!(
        steps
            .iter()
            .all(|s| !s.starts_with("SCAN parents") && !s.contains("TEMP B-TREE")),
        "{steps:?}"
    );
}

/// A context's windows (the outlines it is planned on, the texts it keeps, whole chunks) are
/// read by the chunks' window key, one seek per window: never by walking the world's chunks.
#[tokio::test]
async fn a_contexts_windows_are_read_by_their_key() {
    use super::retrieval::{CHUNK_WINDOW, OUTLINE_WINDOW, TEXT_WINDOW, window_union};
    for sql in [TEXT_WINDOW, OUTLINE_WINDOW, CHUNK_WINDOW] {
        let sql = super::backend::shown::<sqlx::Sqlite>(&window_union(sql, 2, 2));
        let steps = plan(&sql, 7).await;
        let seeks = steps
            .iter()
            .filter(|s| {
                s.starts_with("SEARCH c ")
                    && s.contains(
                        "INDEX sqlite_autoindex_chunks_2 (run_id=? AND source_id=? AND chunk_number>? AND chunk_number<?)",
                    )
            })
            .count();
        assert_eq!(seeks, 2, "one seek per window: {steps:?}");
        assert!(
            steps.iter().all(|s| !s.starts_with("SCAN") && !s.contains("world_run")),
            "{steps:?}"
        );
    }
}

/// A source's rows are deleted and switched (a new version in) run by run, each by a seek in its
/// table's `(run_id, source_id, …)` key: never by walking the world's chunks or parents.
#[tokio::test]
async fn a_sources_rows_are_changed_by_their_key() {
    use super::sources::OF_SOURCE;
    for (sql, binds, table, index) in [
        (
            format!("DELETE FROM chunks WHERE {OF_SOURCE} IN ($2, $3)"),
            3,
            "chunks",
            "sqlite_autoindex_chunks_2",
        ),
        (
            format!("DELETE FROM chunks WHERE {OF_SOURCE} = $2"),
            2,
            "chunks",
            "sqlite_autoindex_chunks_2",
        ),
        (
            format!("DELETE FROM parents WHERE {OF_SOURCE} = $2"),
            2,
            "parents",
            "parents_by_last_chunk",
        ),
        (
            format!("DELETE FROM run_sources WHERE {OF_SOURCE} = $2"),
            2,
            "run_sources",
            "sqlite_autoindex_run_sources_1",
        ),
        (
            format!("UPDATE chunks SET source_id = $2, book_number = $3 WHERE {OF_SOURCE} = $4"),
            4,
            "chunks",
            "sqlite_autoindex_chunks_2",
        ),
        (
            format!("UPDATE parents SET source_id = $2 WHERE {OF_SOURCE} = $3"),
            3,
            "parents",
            "parents_by_last_chunk",
        ),
    ] {
        let steps = plan(&sql, binds).await;
        assert!(
            steps.iter().any(|s| s.starts_with(&format!("SEARCH {table} "))
                && s.contains(&format!("INDEX {index} (run_id=? AND source_id=?"))),
            "{sql}: {steps:?}"
        );
        assert!(
            steps.iter().all(|s| !s.starts_with("SCAN") && !s.contains("world_run")),
            "{sql}: {steps:?}"
        );
    }
}

/// A source's chunks, their total and its counts are read through the source's rows, never
/// through the world's indexes: their cost follows the source, not the world.
#[tokio::test]
async fn a_source_listing_reads_only_that_source() {
    use super::sources::{LIST_CHUNKS, LIST_CHUNKS_TOTAL, SOURCE_COUNTS};
    for (sql, binds, index) in [
        (
            LIST_CHUNKS,
            4,
            "INDEX sqlite_autoindex_chunks_2 (run_id=? AND source_id=?)",
        ),
        (
            LIST_CHUNKS_TOTAL,
            2,
            "INDEX manifest_source_state (source_id=? AND run_id=?)",
        ),
        (
            SOURCE_COUNTS,
            2,
            "INDEX manifest_source_state (source_id=? AND run_id=?)",
        ),
    ] {
        let steps = plan(sql, binds).await;
        assert!(steps.iter().any(|s| s.contains(index)), "{sql}: {steps:?}");
        assert!(
            steps
                .iter()
                .all(|s| !s.starts_with("SCAN") && !s.contains("world_run") && !s.contains("world_state")),
            "{sql}: {steps:?}"
        );
    }
}

/// What a claim leased is read back by the ids it returned, each entry by its key.
#[tokio::test]
async fn a_claim_reads_back_its_entries_by_key() {
    let steps = plan(&format!("{CLAIM_READ}($1, $2)"), 2).await;
    assert!(
        steps
            .iter()
            .any(|s| s.starts_with("SEARCH m ") && s.contains("INDEX sqlite_autoindex_manifest_entries_1 (chunk_id=?)")),
        "{steps:?}"
    );
    assert!(
        steps
            .iter()
            .all(|s| !s.starts_with("SCAN") && !s.contains("lease_owner")),
        "{steps:?}"
    );
}

/// What reads the entries still to do through `manifest_open` (a view of the entries on SQLite)
/// reads them by the job's queue index, never by walking the entries or building a filter of
/// them.
#[tokio::test]
async fn the_open_entries_are_read_by_the_queue_index() {
    for (sql, binds) in [(super::jobs::FINISH_IF_DONE, 2), (super::jobs::JOB_ERRORS, 2)] {
        let steps = plan(sql, binds).await;
        assert!(
            steps
                .iter()
                .any(|s| s.contains("INDEX manifest_job_queue (job_id=? AND state=?)")),
            "{steps:?}"
        );
        assert!(
            steps
                .iter()
                .all(|s| !s.starts_with("SCAN") && !s.contains("BLOOM") && !s.contains("manifest_world_state")),
            "{steps:?}"
        );
    }
}
