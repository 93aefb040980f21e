//! The audit log: what the API's auth layer records after an administrative action succeeded,
//! the listing `GET /v1/audit` reads, and the hourly deletion of entries past
//! `audit.keep_days`.
//!
//! # Decisions
//! - **Successes only.** A refused request (401, 403, a 4xx of the handler) changed nothing; and
//!   recording refusals would let anyone holding no token at all fill the log.
//! - **Written after the answer is made, in a task of its own**: a client that hangs up as the
//!   action completes cannot cancel the entry. A store failure there is logged (`error`) and
//!   counted; the action's answer stands (it happened; a 500 would invite a second one).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::ServiceResult;
use super::tokens::Principal;
use crate::domain::{Actor, AuditAction, AuditEvent, NewAuditEvent, Window};
use crate::store::Store;

/// How often each replica deletes the entries past `audit.keep_days`.
const FORGET_EVERY: Duration = Duration::from_secs(3600);

pub struct AuditLog {
    store: Arc<dyn Store>,
    keep_for: chrono::Duration,
    meters: crate::meters::Metrics,
}

impl AuditLog {
    pub fn new(deps: &crate::deps::Deps, keep_days: u64) -> Self {
        let keep_days = i64::try_from(keep_days).unwrap_or(i64::MAX).min(1_000_000);
        Self {
            store: deps.store.clone(),
            keep_for: chrono::Duration::days(keep_days),
            meters: deps.meters.clone(),
        }
    }

    /// Who `principal` is, as the log names it.
    pub fn actor(principal: &Principal) -> Actor {
        match principal {
            Principal::Bootstrap => Actor {
                token_id: None,
                name: "bootstrap".to_owned(),
            },
            Principal::Token(token) => Actor {
                token_id: Some(token.id),
                name: token.name.clone(),
            },
        }
    }

    /// Writes `event`; a failure is logged and counted, never returned (see the module's
    /// decisions).
    pub async fn record(&self, event: NewAuditEvent) {
        if let Err(err) = self.store.record_audit(&event).await {
            tracing::error!(error = %err, action = event.action.as_str(), target = ?event.target,
                "an audit log entry could not be written");
            self.meters
                .counter("quarry_audit_write_failures_total", &[])
                .increment(1);
        }
    }

    pub async fn list(&self, action: Option<AuditAction>, window: Window) -> ServiceResult<Vec<AuditEvent>> {
        Ok(self.store.list_audit(action, window).await?)
    }

    /// Deletes the entries older than `audit.keep_days`; returns how many.
    pub async fn forget_old(&self) -> ServiceResult<u64> {
        Ok(self.store.forget_audit(crate::domain::now() - self.keep_for).await?)
    }

    /// Runs [`Self::forget_old`] now and then every hour until `cancel` fires.
    pub fn spawn_forgetting(self: &Arc<Self>, tracker: &TaskTracker, cancel: &CancellationToken) {
        let (this, cancel) = (self.clone(), cancel.clone());
        tracker.spawn(async move {
            loop {
                match this.forget_old().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(entries = n, "forgot audit log entries past audit.keep_days"),
                    Err(err) => tracing::warn!(error = %err, "forgetting old audit log entries failed"),
                }
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(FORGET_EVERY) => {}
                }
            }
        });
    }
}
