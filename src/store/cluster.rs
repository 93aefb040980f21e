//! [`ClusterStore`]: the replica registry and the budgets replicas share.
//!
//! Times here are the database's clock ([`Backend::NOW_S`]), never a replica's: liveness and
//! budget refills are then judged the same way by every replica, whatever their clocks say.
//! The statements are put together from constants only (the clock expression of the backend),
//! never from input, which is why they are [`AssertSqlSafe`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::AssertSqlSafe;

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::{ClusterStore, Result};
use crate::domain::{BudgetDraw, BudgetLimit, Drawn, Replica, ReplicaBeat, WindowRule};

#[derive(sqlx::FromRow)]
struct ReplicaRow {
    id: String,
    address: String,
    version: String,
    started_at: DateTime<Utc>,
    age_s: f64,
    workers: i64,
    in_flight: i64,
}

impl From<ReplicaRow> for Replica {
    fn from(row: ReplicaRow) -> Self {
        Replica {
            beat: ReplicaBeat {
                id: row.id,
                address: row.address,
                version: row.version,
                started_at: row.started_at,
                workers: u32::try_from(row.workers).unwrap_or(u32::MAX),
                in_flight: u32::try_from(row.in_flight).unwrap_or(u32::MAX),
            },
            heartbeat_age_s: row.age_s.max(0.0),
        }
    }
}

#[async_trait]
impl<DB: Backend> ClusterStore for SqlStore<DB> {
    async fn heartbeat(&self, beat: &ReplicaBeat) -> Result<()> {
        let sql = format!(
            "INSERT INTO replicas (id, address, version, started_at, heartbeat_s, workers, in_flight) \
             VALUES ($1, $2, $3, $4, {now}, $5, $6) ON CONFLICT (id) DO UPDATE SET address = excluded.address, \
             version = excluded.version, heartbeat_s = excluded.heartbeat_s, workers = excluded.workers, \
             in_flight = excluded.in_flight",
            now = DB::NOW_S
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(beat.id.clone())
            .bind(beat.address.clone())
            .bind(beat.version.clone())
            .bind(beat.started_at)
            .bind(i64::from(beat.workers))
            .bind(i64::from(beat.in_flight))
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn list_replicas(&self) -> Result<Vec<Replica>> {
        let sql = format!(
            "SELECT id, address, version, started_at, {now} - heartbeat_s AS age_s, workers, in_flight \
             FROM replicas ORDER BY started_at, id",
            now = DB::NOW_S
        );
        let rows: Vec<ReplicaRow> = sqlx::query_as(AssertSqlSafe(sql)).fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(Replica::from).collect())
    }

    async fn reap_replica(&self, id: &str, dead_after_s: f64, now: DateTime<Utc>) -> Result<Option<u64>> {
        let mut tx = self.begin().await?;
        let sql = format!(
            "DELETE FROM replicas WHERE id = $1 AND {now} - heartbeat_s > $2",
            now = DB::NOW_S
        );
        let gone = sqlx::query(AssertSqlSafe(sql))
            .bind(id.to_owned())
            .bind(dead_after_s)
            .execute(&mut *tx)
            .await?;
        if gone.rows_affected() == 0 {
            return Ok(None);
        }
        // Its workers' owners are `{id}-{n}`; ids are hex, so the pattern has no other wildcard.
        let released = sqlx::query(
            "UPDATE manifest_entries SET lease_owner = NULL, lease_expires_at = NULL, updated_at = $2 \
             WHERE lease_owner LIKE $1 AND state = 'pending'",
        )
        .bind(format!("{id}-%"))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(released.rows_affected()))
    }

    async fn leave(&self, id: &str) -> Result<()> {
        sqlx::query("DELETE FROM replicas WHERE id = $1")
            .bind(id.to_owned())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn draw_budget(&self, draw: &BudgetDraw) -> Result<Drawn> {
        match &draw.limit {
            BudgetLimit::Window(rule) => self.draw_window(draw, *rule).await,
            BudgetLimit::Day { day, limit } => self.draw_day(draw, day, *limit).await,
        }
    }

    async fn forget_budget_days(&self, before: &str) -> Result<u64> {
        let done = sqlx::query("DELETE FROM budget_days WHERE day < $1")
            .bind(before.to_owned())
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}

impl<DB: Backend> SqlStore<DB> {
    /// Records `draw.amount` in a shared window when it has room (see [`WindowRule::draw`]),
    /// deciding under the budget's row lock (SQLite: the write lock), so replicas drawing at
    /// once never both take the last room.
    async fn draw_window(&self, draw: &BudgetDraw, rule: WindowRule) -> Result<Drawn> {
        let mut tx = self.begin().await?;
        // Creates the budget's row, or locks it (an update takes the row lock on PostgreSQL).
        sqlx::query(
            "INSERT INTO budgets (budget) VALUES ($1) ON CONFLICT (budget) DO UPDATE SET budget = excluded.budget",
        )
        .bind(draw.budget.clone())
        .execute(&mut *tx)
        .await?;
        let (now_s,): (f64,) = sqlx::query_as(AssertSqlSafe(format!("SELECT {}", DB::NOW_S)))
            .fetch_one(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM budget_draws WHERE budget = $1 AND at_s <= $2")
            .bind(draw.budget.clone())
            .bind(now_s - rule.span_s)
            .execute(&mut *tx)
            .await?;
        let draws: Vec<(f64, f64)> =
            sqlx::query_as("SELECT at_s, amount FROM budget_draws WHERE budget = $1 ORDER BY at_s")
                .bind(draw.budget.clone())
                .fetch_all(&mut *tx)
                .await?;
        match rule.draw(&draws, now_s, draw.amount, draw.overdraft) {
            Ok(pieces) => {
                for (at, amount) in pieces {
                    sqlx::query("INSERT INTO budget_draws (budget, at_s, amount) VALUES ($1, $2, $3)")
                        .bind(draw.budget.clone())
                        .bind(at)
                        .bind(amount)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(Drawn::Granted)
            }
            Err(wait_s) => {
                tx.commit().await?;
                Ok(Drawn::Refused { wait_s: Some(wait_s) })
            }
        }
    }

    /// Adds `draw.amount` to the day's spending when it stays within `limit` (a request larger
    /// than the whole allowance goes only as the day's first: the provider's to refuse).
    async fn draw_day(&self, draw: &BudgetDraw, day: &str, limit: f64) -> Result<Drawn> {
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO budget_days (budget, day, used) VALUES ($1, $2, 0) ON CONFLICT (budget, day) DO NOTHING",
        )
        .bind(draw.budget.clone())
        .bind(day.to_owned())
        .execute(&mut *tx)
        .await?;
        let granted: Option<(f64,)> = sqlx::query_as(
            "UPDATE budget_days SET used = used + $3 WHERE budget = $1 AND day = $2 \
             AND (used + $3 <= $4 OR used = 0) RETURNING used",
        )
        .bind(draw.budget.clone())
        .bind(day.to_owned())
        .bind(draw.amount)
        .bind(limit + 1e-9)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(match granted {
            Some(_) => Drawn::Granted,
            None => Drawn::Refused { wait_s: None },
        })
    }
}
