//! [`ParentStore`]: the parents of small-to-large retrieval (runs of consecutive chunks), kept
//! beside the chunks they group.

use async_trait::async_trait;
use sqlx::QueryBuilder;
use uuid::Uuid;

use super::backend::{Backend, SqlStore};
use super::retrieval::window_union;
use super::rows::{narrow, wide};
use super::runs::lock_run;
use super::worlds::lock_world;
use super::{ParentStore, Result};
use crate::domain::{NewParent, Parent, RunId, SourceId, WorldId};

/// One window of [`ParentStore::parents_over`]: `$1` run, `$k` source, `$k1`..`$k2` the chunk
/// numbers. Parents partition their source's chunks in order, so those overlapping the window
/// are the first ones by last chunk from `$k1` on, at most one per chunk of the window, that
/// start by `$k2`: a seek in `parents_by_last_chunk` (migration 0030) and a bounded read.
/// (`first_chunk <= $k2` tested inside would read on to the source's last parent when fewer
/// overlap than the window is wide.)
pub const PARENTS_OVER: &str = "SELECT * FROM (SELECT source_id, parent_number, first_chunk, last_chunk, char_start, \
     char_end, token_count FROM parents WHERE run_id = $1 AND source_id = $k AND last_chunk >= $k1 \
     ORDER BY last_chunk LIMIT $k2 - $k1 + 1) AS p WHERE first_chunk <= $k2";

/// [`PARENTS_OVER`] for `n` windows, as one `UNION ALL` (`$2` onward: source, from, to).
pub fn parents_over_union(n: usize) -> String {
    window_union(PARENTS_OVER, 2, n)
}

type ParentRow = (Uuid, i64, i64, i64, i64, i64, i64);

fn parent(row: ParentRow) -> Result<Parent> {
    let (source, number, first, last, start, end, tokens) = row;
    Ok(Parent {
        source_id: SourceId(source),
        parent: NewParent {
            parent_number: narrow("parents", number)?,
            first_chunk: narrow("parents", first)?,
            last_chunk: narrow("parents", last)?,
            char_start: narrow("parents", start)?,
            char_end: narrow("parents", end)?,
            token_count: narrow("parents", tokens)?,
        },
    })
}

#[async_trait]
impl<DB: Backend> ParentStore for SqlStore<DB> {
    async fn add_parents(&self, world: WorldId, run: RunId, source: SourceId, parents: &[NewParent]) -> Result<bool> {
        if parents.is_empty() {
            return Ok(false);
        }
        let mut tx = self.begin().await?;
        // World, then run (the order every writer takes); then only into a live run and a
        // source that still exists, and only once.
        if lock_world(&mut *tx, world).await?.is_none()
            || !matches!(lock_run(&mut *tx, run).await?.as_deref(), Some("active" | "building"))
        {
            tx.rollback().await?;
            return Ok(false);
        }
        let present: Option<(i64, i64)> = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM sources WHERE id = $1 AND world_id = $2), \
             (SELECT COUNT(*) FROM parents WHERE run_id = $3 AND source_id = $1)",
        )
        .bind(source.0)
        .bind(world.0)
        .bind(run.0)
        .fetch_optional(&mut *tx)
        .await?;
        if present != Some((1, 0)) {
            tx.rollback().await?;
            return Ok(false);
        }
        for batch in parents.chunks(500) {
            let mut insert = QueryBuilder::<DB>::new(
                "INSERT INTO parents (world_id, run_id, source_id, parent_number, first_chunk, last_chunk, \
                 char_start, char_end, token_count) ",
            );
            insert.push_values(batch, |mut row, p| {
                row.push_bind(world.0)
                    .push_bind(run.0)
                    .push_bind(source.0)
                    .push_bind(wide(p.parent_number))
                    .push_bind(wide(p.first_chunk))
                    .push_bind(wide(p.last_chunk))
                    .push_bind(wide(p.char_start))
                    .push_bind(wide(p.char_end))
                    .push_bind(wide(p.token_count));
            });
            insert.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn parents_over(&self, run: RunId, windows: &[(SourceId, u32, u32)]) -> Result<Vec<Parent>> {
        let mut found = self
            .by_windows(PARENTS_OVER, run, windows, |row: ParentRow| parent(row).map(Some))
            .await?;
        found.sort_by_key(|p| (p.source_id.0, p.parent.parent_number));
        found.dedup();
        Ok(found)
    }

    async fn sources_without_parents(&self) -> Result<Vec<(WorldId, RunId, SourceId, u32)>> {
        // A source has chunk 0 in every run it is chunked into.
        let rows: Vec<(Uuid, Uuid, Uuid, i64)> = sqlx::query_as(
            "SELECT c.world_id, c.run_id, c.source_id, r.parent_max_tokens FROM chunks c \
             JOIN runs r ON r.id = c.run_id \
             WHERE c.chunk_number = 0 AND r.status IN ('active', 'building') \
             AND NOT EXISTS (SELECT 1 FROM parents p WHERE p.run_id = c.run_id AND p.source_id = c.source_id)",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(world, run, source, max)| Ok((WorldId(world), RunId(run), SourceId(source), narrow("runs", max)?)))
            .collect()
    }
}
