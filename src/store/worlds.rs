//! [`WorldStore`]: worlds, their first run, their counts.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::rows::{StatsRow, WorldRow, in_list, narrow, wide};
use super::{Result, WorldStore};
use crate::domain::Window;
use crate::domain::{NewWorld, World, WorldId, WorldStats};
use uuid::Uuid;

/// Columns of a [`WorldRow`].
macro_rules! world_columns {
    () => {
        "id, name, provider, model, dimensions, max_tokens, overlap_tokens, parent_max_tokens, context_prefix, \
         hybrid, active_run_id, collection, created_at, updated_at"
    };
}
pub(super) use world_columns;

/// A world's counts, summed from its active run's kept counts (migration 0014), never from its
/// entries: a row per state, and on PostgreSQL the deltas appended since the last fold.
pub const WORLD_STATS: &str = "SELECT (SELECT COUNT(*) FROM sources WHERE world_id = $1) AS sources, \
     CAST(COALESCE(SUM(c.n), 0) AS BIGINT) AS chunks, \
     CAST(COALESCE(SUM(c.n) FILTER (WHERE c.state = 'embedded'), 0) AS BIGINT) AS embedded, \
     CAST(COALESCE(SUM(c.n) FILTER (WHERE c.state = 'pending'), 0) AS BIGINT) AS pending, \
     CAST(COALESCE(SUM(c.n) FILTER (WHERE c.state = 'failed'), 0) AS BIGINT) AS failed \
     FROM worlds w LEFT JOIN manifest_counts c ON c.run_id = w.active_run_id \
     WHERE w.id = $1 GROUP BY w.id";

/// `fold_counts`' lock: a transaction-scoped advisory lock only one replica holds at a time.
const FOLD_LOCK: &str = "SELECT pg_try_advisory_xact_lock(8241127190322115701)";
/// The runs with more than one row per state (at most three when folded).
const FOLD_BUSY: &str = "SELECT run_id FROM manifest_counts GROUP BY run_id HAVING COUNT(*) > 3";
/// Takes every row of the runs listed after it; the caller sums them and writes one per state.
///
/// The fold is three single-table statements so that no plan can go wrong: as one statement
/// joining the table to itself (a semi-join through a `SKIP LOCKED` subquery), PostgreSQL, told
/// by the last vacuum that the table held a handful of rows, chose nested loops that went
/// through the 30,000 deltas of a burst once for each of them (a fold still running after nine
/// minutes).
const FOLD_TAKE: &str = "DELETE FROM manifest_counts WHERE run_id IN ";
/// Run after a fold that took rows, outside any transaction. The folded deltas stay as dead rows
/// until a vacuum, and a world's counts read them all through the run's index (2 million after a
/// million-chunk load with autovacuum off: `GET /v1/worlds/{id}` took 113 ms instead of 1).
/// Vacuuming the handful of live rows costs about a millisecond and works whatever autovacuum
/// does; `SKIP_LOCKED`: a vacuum already under way is not waited for.
const FOLD_VACUUM: &str = "VACUUM (SKIP_LOCKED) manifest_counts";

const SELECT_WORLD: &str = concat!("SELECT ", world_columns!(), " FROM worlds WHERE id = $1");

#[async_trait]
impl<DB: Backend> WorldStore for SqlStore<DB> {
    async fn create_world(&self, w: NewWorld) -> Result<World> {
        let collection = w.embedding.collection_name();
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO worlds (id, name, provider, model, dimensions, max_tokens, overlap_tokens, hybrid, \
             active_run_id, collection, created_at, updated_at, parent_max_tokens, context_prefix) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12, $13)",
        )
        .bind(w.id.0)
        .bind(&w.name)
        .bind(w.embedding.provider.as_str())
        .bind(&w.embedding.model)
        .bind(wide(w.embedding.dimensions))
        .bind(wide(w.chunking.max_tokens))
        .bind(wide(w.chunking.overlap_tokens))
        .bind(w.hybrid)
        .bind(w.run.0)
        .bind(&collection)
        .bind(w.now)
        .bind(wide(w.chunking.parent_max_tokens))
        .bind(w.chunking.context_prefix)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO runs (id, world_id, provider, model, dimensions, max_tokens, overlap_tokens, collection, \
             status, created_at, parent_max_tokens, context_prefix) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(w.run.0)
        .bind(w.id.0)
        .bind(w.embedding.provider.as_str())
        .bind(&w.embedding.model)
        .bind(wide(w.embedding.dimensions))
        .bind(wide(w.chunking.max_tokens))
        .bind(wide(w.chunking.overlap_tokens))
        .bind(&collection)
        .bind("active")
        .bind(w.now)
        .bind(wide(w.chunking.parent_max_tokens))
        .bind(w.chunking.context_prefix)
        .execute(&mut *tx)
        .await?;
        let row: WorldRow = sqlx::query_as(SELECT_WORLD).bind(w.id.0).fetch_one(&mut *tx).await?;
        tx.commit().await?;
        row.try_into()
    }

    async fn get_world(&self, id: WorldId) -> Result<Option<World>> {
        let row: Option<WorldRow> = sqlx::query_as(SELECT_WORLD)
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn list_worlds(&self, window: Window) -> Result<Vec<World>> {
        const LIST_WORLDS: &str = concat!(
            "SELECT ",
            world_columns!(),
            " FROM worlds ORDER BY created_at, id LIMIT $1 OFFSET $2"
        );
        let rows: Vec<WorldRow> = sqlx::query_as(LIST_WORLDS)
            .bind(wide(window.limit))
            .bind(wide(window.offset))
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn world_stats(&self, id: WorldId) -> Result<WorldStats> {
        let row: Option<StatsRow> = sqlx::query_as(WORLD_STATS)
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else {
            return Ok(WorldStats::default());
        };
        Ok(WorldStats {
            sources: narrow("sources", row.sources)?,
            chunks: narrow("chunks", row.chunks)?,
            embedded: narrow("manifest_counts", row.embedded)?,
            pending: narrow("manifest_counts", row.pending)?,
            failed: narrow("manifest_counts", row.failed)?,
        })
    }

    async fn rename_world(&self, id: WorldId, name: &str, now: DateTime<Utc>) -> Result<Option<World>> {
        const RENAME_WORLD: &str = concat!(
            "UPDATE worlds SET name = $2, updated_at = $3 WHERE id = $1 RETURNING ",
            world_columns!()
        );
        let row: Option<WorldRow> = sqlx::query_as(RENAME_WORLD)
            .bind(id.0)
            .bind(name)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn enable_hybrid(&self, id: WorldId, now: DateTime<Utc>) -> Result<Option<World>> {
        const ENABLE_HYBRID: &str = concat!(
            "UPDATE worlds SET hybrid = TRUE, updated_at = $2 WHERE id = $1 RETURNING ",
            world_columns!()
        );
        let row: Option<WorldRow> = sqlx::query_as(ENABLE_HYBRID)
            .bind(id.0)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn delete_world(&self, id: WorldId) -> Result<bool> {
        let done = sqlx::query("DELETE FROM worlds WHERE id = $1")
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn fold_counts(&self) -> Result<()> {
        if !DB::FOLDS_COUNTS {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        // One replica folds at a time; the others skip this beat (the lock ends with the
        // transaction). Nobody else deletes deltas of a live run, so each is summed once.
        let mine: bool = sqlx::query_scalar(FOLD_LOCK).fetch_one(&mut *tx).await?;
        if !mine {
            tx.rollback().await?;
            return Ok(());
        }
        let busy: Vec<Uuid> = sqlx::query_scalar(FOLD_BUSY).fetch_all(&mut *tx).await?;
        if busy.is_empty() {
            // Nothing folded, nothing to vacuum.
            tx.commit().await?;
            return Ok(());
        }
        for batch in busy.chunks(500) {
            // Only generated `$n` placeholders are added to the constant text.
            let sql = sqlx::AssertSqlSafe(format!(
                "{FOLD_TAKE}{} RETURNING run_id, state, n",
                in_list(1, batch.len())
            ));
            let mut take = sqlx::query_as::<DB, (Uuid, String, i64)>(sql);
            for run in batch {
                take = take.bind(*run);
            }
            let mut sums: std::collections::BTreeMap<(Uuid, String), i64> = Default::default();
            for (run, state, n) in take.fetch_all(&mut *tx).await? {
                *sums.entry((run, state)).or_default() += n;
            }
            for ((run, state), n) in sums.into_iter().filter(|(_, n)| *n != 0) {
                sqlx::query("INSERT INTO manifest_counts (run_id, state, n) VALUES ($1, $2, $3)")
                    .bind(run)
                    .bind(state)
                    .bind(n)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        // The simple protocol: a single statement in no transaction, as VACUUM requires.
        sqlx::raw_sql(FOLD_VACUUM).execute(&self.pool).await?;
        Ok(())
    }

    async fn world_collections(&self, id: WorldId) -> Result<Vec<String>> {
        Ok(
            sqlx::query_scalar("SELECT DISTINCT collection FROM runs WHERE world_id = $1 ORDER BY collection")
                .bind(id.0)
                .fetch_all(&self.pool)
                .await?,
        )
    }
}

/// Takes world `id`'s row lock (Postgres row lock; SQLite's write lock), the first lock of the
/// order world → run → job that every writer of these rows takes, so that source uploads, source
/// deletes, requeues and a run switch serialise. Returns the world's active run, `None` when there
/// is no such world.
pub(super) async fn lock_world<'e, DB: Backend>(
    db: impl sqlx::Executor<'e, Database = DB>,
    id: WorldId,
) -> Result<Option<uuid::Uuid>> {
    Ok(
        sqlx::query_scalar("UPDATE worlds SET updated_at = updated_at WHERE id = $1 RETURNING active_run_id")
            .bind(id.0)
            .fetch_optional(db)
            .await?,
    )
}
