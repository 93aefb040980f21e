//! [`IdempotencyStore`]: the `Idempotency-Key`s of source writes — a reservation while the
//! first request runs, then its answer, per world, for a bounded time and number.
//!
//! Times are the database's clock ([`Backend::NOW_S`]), so replicas agree on what expired.
//! The statements are put together from that constant only, never from input, which is why
//! they are [`AssertSqlSafe`].

use async_trait::async_trait;
use sqlx::AssertSqlSafe;

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::rows::narrow;
use super::{IdempotencyStore, Idempotent, Result};
use crate::domain::WorldId;

#[async_trait]
impl<DB: Backend> IdempotencyStore for SqlStore<DB> {
    async fn reserve_idempotency(
        &self,
        world: WorldId,
        key: &str,
        fingerprint: &str,
        keep_s: f64,
        abandoned_s: f64,
        max_per_world: u32,
    ) -> Result<Idempotent> {
        // Expired answers, and reservations whose request never finished (a crash), go first.
        let sql = format!(
            "DELETE FROM idempotency_keys WHERE world_id = $1 \
             AND (expires_s < {now} OR (status IS NULL AND created_s < {now} - $2))",
            now = DB::NOW_S
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(world.0)
            .bind(abandoned_s)
            .execute(&self.pool)
            .await?;
        let sql = format!(
            "INSERT INTO idempotency_keys (world_id, idem_key, fingerprint, created_s, expires_s) \
             VALUES ($1, $2, $3, {now}, {now} + $4) ON CONFLICT (world_id, idem_key) DO NOTHING",
            now = DB::NOW_S
        );
        let inserted = sqlx::query(AssertSqlSafe(sql))
            .bind(world.0)
            .bind(key.to_owned())
            .bind(fingerprint.to_owned())
            .bind(keep_s)
            .execute(&self.pool)
            .await?;
        if inserted.rows_affected() > 0 {
            // The bound: past `max_per_world` keys the oldest are forgotten.
            sqlx::query(
                "DELETE FROM idempotency_keys WHERE world_id = $1 AND created_s <= \
                 (SELECT created_s FROM idempotency_keys WHERE world_id = $1 ORDER BY created_s DESC LIMIT 1 OFFSET $2)",
            )
            .bind(world.0)
            .bind(i64::from(max_per_world))
            .execute(&self.pool)
            .await?;
            return Ok(Idempotent::Reserved);
        }
        let row: Option<(String, Option<i64>, Option<String>)> = sqlx::query_as(
            "SELECT fingerprint, status, response FROM idempotency_keys WHERE world_id = $1 AND idem_key = $2",
        )
        .bind(world.0)
        .bind(key.to_owned())
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            // Gone between the two statements (expired, evicted): the caller may try again.
            None => Idempotent::InProgress,
            Some((had, _, _)) if had != fingerprint => Idempotent::Mismatch,
            Some((_, Some(status), Some(response))) => Idempotent::Done {
                status: narrow("idempotency_keys", status)?,
                response,
            },
            Some(_) => Idempotent::InProgress,
        })
    }

    async fn record_idempotency(&self, world: WorldId, key: &str, status: u16, response: &str) -> Result<()> {
        sqlx::query(
            "UPDATE idempotency_keys SET status = $3, response = $4 \
             WHERE world_id = $1 AND idem_key = $2 AND status IS NULL",
        )
        .bind(world.0)
        .bind(key.to_owned())
        .bind(i64::from(status))
        .bind(response.to_owned())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn release_idempotency(&self, world: WorldId, key: &str) -> Result<()> {
        sqlx::query("DELETE FROM idempotency_keys WHERE world_id = $1 AND idem_key = $2 AND status IS NULL")
            .bind(world.0)
            .bind(key.to_owned())
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
