//! [`EvalStore`]: evaluation test sets. The items are one JSON column (a set is read and
//! written whole); `item_count` beside it lets a listing skip them.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::rows::{corrupt, narrow, wide};
use super::{EvalStore, Result};
use crate::domain::{EvalItem, EvalSet, EvalSetId, EvalSetSummary, Window, WorldId};

const TABLE: &str = "eval_sets";

#[derive(sqlx::FromRow)]
struct SetRow {
    id: Uuid,
    world_id: Uuid,
    name: String,
    items: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<SetRow> for EvalSet {
    type Error = super::Error;

    fn try_from(row: SetRow) -> Result<EvalSet> {
        let items: Vec<EvalItem> =
            serde_json::from_str(&row.items).map_err(|err| corrupt(TABLE, format!("items: {err}")))?;
        Ok(EvalSet {
            id: EvalSetId(row.id),
            world_id: WorldId(row.world_id),
            name: row.name,
            items,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

#[derive(sqlx::FromRow)]
struct SummaryRow {
    id: Uuid,
    world_id: Uuid,
    name: String,
    item_count: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

fn items_column(set: &EvalSet) -> Result<String> {
    serde_json::to_string(&set.items).map_err(|err| super::Error::Internal(format!("eval items: {err}")))
}

#[async_trait]
impl<DB: Backend> EvalStore for SqlStore<DB> {
    async fn insert_eval_set(&self, set: &EvalSet) -> Result<()> {
        sqlx::query(
            "INSERT INTO eval_sets (id, world_id, name, items, item_count, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(set.id.0)
        .bind(set.world_id.0)
        .bind(set.name.clone())
        .bind(items_column(set)?)
        .bind(wide(set.items.len() as u64))
        .bind(set.created_at)
        .bind(set.updated_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn get_eval_set(&self, world: WorldId, id: EvalSetId) -> Result<Option<EvalSet>> {
        let row: Option<SetRow> = sqlx::query_as(
            "SELECT id, world_id, name, items, created_at, updated_at FROM eval_sets WHERE id = $1 AND world_id = $2",
        )
        .bind(id.0)
        .bind(world.0)
        .fetch_optional(&self.pool)
        .await?;
        row.map(EvalSet::try_from).transpose()
    }

    async fn list_eval_sets(&self, world: WorldId, window: Window) -> Result<Vec<EvalSetSummary>> {
        let rows: Vec<SummaryRow> = sqlx::query_as(
            "SELECT id, world_id, name, item_count, created_at, updated_at FROM eval_sets WHERE world_id = $1 \
             ORDER BY created_at, id LIMIT $2 OFFSET $3",
        )
        .bind(world.0)
        .bind(wide(window.limit))
        .bind(wide(window.offset))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|row| {
                Ok(EvalSetSummary {
                    id: EvalSetId(row.id),
                    world_id: WorldId(row.world_id),
                    name: row.name,
                    item_count: narrow(TABLE, row.item_count)?,
                    created_at: row.created_at,
                    updated_at: row.updated_at,
                })
            })
            .collect()
    }

    async fn count_eval_sets(&self, world: WorldId) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM eval_sets WHERE world_id = $1")
            .bind(world.0)
            .fetch_one(&self.pool)
            .await?;
        narrow(TABLE, n)
    }

    async fn replace_eval_set(&self, set: &EvalSet) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE eval_sets SET name = $1, items = $2, item_count = $3, updated_at = $4 \
             WHERE id = $5 AND world_id = $6",
        )
        .bind(set.name.clone())
        .bind(items_column(set)?)
        .bind(wide(set.items.len() as u64))
        .bind(set.updated_at)
        .bind(set.id.0)
        .bind(set.world_id.0)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn delete_eval_set(&self, world: WorldId, id: EvalSetId) -> Result<bool> {
        let done = sqlx::query("DELETE FROM eval_sets WHERE id = $1 AND world_id = $2")
            .bind(id.0)
            .bind(world.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
