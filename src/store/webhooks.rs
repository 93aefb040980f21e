//! [`WebhookStore`]: webhook subscriptions, and their deliveries — the outbox the triggers of
//! `0011_webhooks.sql` fill in the statement that changes a job, and the log the API lists.
//!
//! Delivery times are the database's clock ([`Backend::NOW_S`]), so replicas whose clocks
//! disagree still agree on what is due. The statements are put together from constants only
//! (the clock and claim-lock expressions of the backend), never from input, which is why they
//! are [`AssertSqlSafe`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::AssertSqlSafe;
use uuid::Uuid;

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::rows::{corrupt, narrow, wide};
use super::{Result, WebhookStore};
use crate::domain::webhook::{events_column, parse_events_column};
use crate::domain::{Attempt, Delivery, DeliveryStatus, JobId, Webhook, WebhookId, Window, WorldId};

#[derive(sqlx::FromRow)]
struct WebhookRow {
    id: Uuid,
    world_id: Option<Uuid>,
    url: String,
    events: String,
    description: Option<String>,
    secret_ciphertext: Vec<u8>,
    secret_nonce: Vec<u8>,
    created_at: DateTime<Utc>,
}

impl From<WebhookRow> for Webhook {
    fn from(row: WebhookRow) -> Self {
        Webhook {
            id: WebhookId(row.id),
            world_id: row.world_id.map(WorldId),
            url: row.url,
            events: parse_events_column(&row.events),
            description: row.description,
            secret_ciphertext: row.secret_ciphertext,
            secret_nonce: row.secret_nonce,
            created_at: row.created_at,
        }
    }
}

const WEBHOOK_COLUMNS: &str = "id, world_id, url, events, description, secret_ciphertext, secret_nonce, created_at";

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    id: i64,
    webhook_id: Uuid,
    event: String,
    job_id: Uuid,
    world_id: Uuid,
    waiting_reason: Option<String>,
    waiting_until: Option<DateTime<Utc>>,
    payload: Option<String>,
    status: String,
    attempts: i64,
    last_status_code: Option<i64>,
    last_error: Option<String>,
    created_s: f64,
    next_attempt_s: f64,
    last_attempt_s: Option<f64>,
}

const DELIVERY_COLUMNS: &str = "id, webhook_id, event, job_id, world_id, waiting_reason, waiting_until, payload, \
     status, attempts, last_status_code, last_error, created_s, next_attempt_s, last_attempt_s";

/// A time kept as seconds since the epoch.
fn time_of(seconds: f64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros((seconds * 1e6).round() as i64).unwrap_or_default()
}

impl TryFrom<DeliveryRow> for Delivery {
    type Error = super::Error;

    fn try_from(row: DeliveryRow) -> Result<Delivery> {
        const TABLE: &str = "webhook_deliveries";
        let status: DeliveryStatus = row.status.parse().map_err(|reason| corrupt(TABLE, reason))?;
        Ok(Delivery {
            id: row.id,
            webhook_id: WebhookId(row.webhook_id),
            event: row.event.parse().map_err(|reason| corrupt(TABLE, reason))?,
            job_id: JobId(row.job_id),
            world_id: WorldId(row.world_id),
            waiting_reason: (row.waiting_reason.map(|r| r.parse()))
                .transpose()
                .map_err(|reason| corrupt(TABLE, reason))?,
            waiting_until: row.waiting_until,
            payload: row.payload,
            status,
            attempts: narrow(TABLE, row.attempts)?,
            last_status_code: row.last_status_code.map(|c| narrow(TABLE, c)).transpose()?,
            last_error: row.last_error,
            created_at: time_of(row.created_s),
            next_attempt_at: (status == DeliveryStatus::Pending).then(|| time_of(row.next_attempt_s)),
            last_attempt_at: row.last_attempt_s.map(time_of),
        })
    }
}

#[async_trait]
impl<DB: Backend> WebhookStore for SqlStore<DB> {
    async fn insert_webhook(&self, hook: &Webhook) -> Result<()> {
        sqlx::query(
            "INSERT INTO webhooks (id, world_id, url, events, description, secret_ciphertext, secret_nonce, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(hook.id.0)
        .bind(hook.world_id.map(|w| w.0))
        .bind(hook.url.clone())
        .bind(events_column(&hook.events))
        .bind(hook.description.clone())
        .bind(hook.secret_ciphertext.clone())
        .bind(hook.secret_nonce.clone())
        .bind(hook.created_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn get_webhook(&self, id: WebhookId) -> Result<Option<Webhook>> {
        let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id = $1");
        let row: Option<WebhookRow> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Webhook::from))
    }

    async fn list_webhooks(&self, window: Window) -> Result<Vec<Webhook>> {
        let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks ORDER BY created_at, id LIMIT $1 OFFSET $2");
        let rows: Vec<WebhookRow> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(wide(window.limit))
            .bind(wide(window.offset))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(Webhook::from).collect())
    }

    async fn count_webhooks(&self) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM webhooks")
            .fetch_one(&self.pool)
            .await?;
        narrow("webhooks", n)
    }

    async fn delete_webhook(&self, id: WebhookId) -> Result<bool> {
        let done = sqlx::query("DELETE FROM webhooks WHERE id = $1")
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn claim_deliveries(&self, owner: &str, limit: u32, lease_s: f64) -> Result<Vec<Delivery>> {
        let sql = format!(
            "UPDATE webhook_deliveries SET lease_owner = $1, lease_until_s = {now} + $2 \
             WHERE id IN (SELECT m.id FROM webhook_deliveries m WHERE m.status = 'pending' \
             AND m.next_attempt_s <= {now} AND (m.lease_until_s IS NULL OR m.lease_until_s < {now}) \
             ORDER BY m.next_attempt_s, m.id LIMIT $3 {lock}) RETURNING {DELIVERY_COLUMNS}",
            now = DB::NOW_S,
            lock = DB::CLAIM_LOCK,
        );
        let rows: Vec<DeliveryRow> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(owner.to_owned())
            .bind(lease_s)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        let mut deliveries: Vec<Delivery> = rows.into_iter().map(TryInto::try_into).collect::<Result<_>>()?;
        deliveries.sort_by_key(|d| d.id);
        Ok(deliveries)
    }

    async fn record_attempt(&self, id: i64, owner: &str, attempt: &Attempt) -> Result<bool> {
        let status = match (attempt.succeeded(), attempt.retry_in_s) {
            (true, _) => DeliveryStatus::Delivered,
            (false, Some(_)) => DeliveryStatus::Pending,
            (false, None) => DeliveryStatus::Failed,
        };
        let sql = format!(
            "UPDATE webhook_deliveries SET status = $3, attempts = attempts + 1, \
             payload = COALESCE(payload, $4), last_status_code = $5, last_error = $6, last_attempt_s = {now}, \
             next_attempt_s = {now} + $7, lease_owner = NULL, lease_until_s = NULL \
             WHERE id = $1 AND lease_owner = $2 AND status = 'pending'",
            now = DB::NOW_S,
        );
        let done = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .bind(owner.to_owned())
            .bind(status.as_str())
            .bind(attempt.payload.clone())
            .bind(attempt.status_code.map(i64::from))
            .bind(attempt.error.clone())
            .bind(attempt.retry_in_s.unwrap_or(0.0))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn list_deliveries(&self, webhook: WebhookId, window: Window) -> Result<Vec<Delivery>> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE webhook_id = $1 \
             ORDER BY id DESC LIMIT $2 OFFSET $3"
        );
        let rows: Vec<DeliveryRow> = sqlx::query_as(AssertSqlSafe(sql))
            .bind(webhook.0)
            .bind(wide(window.limit))
            .bind(wide(window.offset))
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn forget_deliveries(&self, older_than_s: f64) -> Result<u64> {
        let sql = format!(
            "DELETE FROM webhook_deliveries WHERE status <> 'pending' AND created_s < {now} - $1",
            now = DB::NOW_S
        );
        let done = sqlx::query(AssertSqlSafe(sql))
            .bind(older_than_s)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}
