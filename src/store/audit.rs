//! [`AuditStore`]: the audit log of administrative actions.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::rows::{corrupt, wide};
use super::{AuditStore, Result};
use crate::domain::{Actor, AuditAction, AuditEvent, NewAuditEvent, TokenId, Window};

#[derive(sqlx::FromRow)]
struct AuditRow {
    seq: i64,
    at: DateTime<Utc>,
    action: String,
    token_id: Option<Uuid>,
    actor_name: String,
    target: Option<String>,
    address: Option<String>,
}

impl TryFrom<AuditRow> for AuditEvent {
    type Error = super::Error;

    fn try_from(row: AuditRow) -> Result<Self> {
        let action = AuditAction::parse(&row.action)
            .ok_or_else(|| corrupt("audit_events", format!("unknown action `{}`", row.action)))?;
        Ok(AuditEvent {
            seq: row.seq,
            event: NewAuditEvent {
                at: row.at,
                actor: Actor {
                    token_id: row.token_id.map(TokenId),
                    name: row.actor_name,
                },
                action,
                target: row.target,
                address: row.address,
            },
        })
    }
}

#[async_trait]
impl<DB: Backend> AuditStore for SqlStore<DB> {
    async fn record_audit(&self, event: &NewAuditEvent) -> Result<()> {
        sqlx::query(
            "INSERT INTO audit_events (at, action, token_id, actor_name, target, address) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(event.at)
        .bind(event.action.as_str())
        .bind(event.actor.token_id.map(|id| id.0))
        .bind(&event.actor.name)
        .bind(event.target.clone())
        .bind(event.address.clone())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn list_audit(&self, action: Option<AuditAction>, window: Window) -> Result<Vec<AuditEvent>> {
        let rows: Vec<AuditRow> = sqlx::query_as(
            "SELECT seq, at, action, token_id, actor_name, target, address FROM audit_events \
             WHERE ($1 IS NULL OR action = $1) ORDER BY seq DESC LIMIT $2 OFFSET $3",
        )
        .bind(action.map(|a| a.as_str().to_owned()))
        .bind(wide(window.limit))
        .bind(wide(window.offset))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn forget_audit(&self, cutoff: DateTime<Utc>) -> Result<u64> {
        let done = sqlx::query("DELETE FROM audit_events WHERE at < $1")
            .bind(cutoff)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}
