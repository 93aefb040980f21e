//! Webhook subscriptions and their deliveries.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};

use super::ids::{JobId, WebhookId, WorldId};
use super::job::WaitReason;

/// The job lifecycle events a subscription can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WebhookEvent {
    JobCompleted,
    JobFailed,
    JobCancelled,
    JobWaiting,
    /// A gated re-ingest held: its new run scored worse; a person decides.
    JobHeld,
}

impl WebhookEvent {
    pub const ALL: [WebhookEvent; 5] = [
        WebhookEvent::JobCompleted,
        WebhookEvent::JobFailed,
        WebhookEvent::JobCancelled,
        WebhookEvent::JobWaiting,
        WebhookEvent::JobHeld,
    ];

    /// The event's type as sent (`type` in the payload) and as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookEvent::JobCompleted => "job.completed",
            WebhookEvent::JobFailed => "job.failed",
            WebhookEvent::JobCancelled => "job.cancelled",
            WebhookEvent::JobWaiting => "job.waiting",
            WebhookEvent::JobHeld => "job.held",
        }
    }
}

impl fmt::Display for WebhookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WebhookEvent {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|e| e.as_str() == s).ok_or_else(|| {
            let known: Vec<&str> = Self::ALL.iter().map(|e| e.as_str()).collect();
            format!("unknown event `{s}`; known events: {}", known.join(", "))
        })
    }
}

/// A set of events as the store keeps it: each between commas (`,job.completed,job.failed,`),
/// so that the triggers that write deliveries match whole names.
pub fn events_column(events: &[WebhookEvent]) -> String {
    let mut text = String::from(",");
    for event in events {
        text.push_str(event.as_str());
        text.push(',');
    }
    text
}

/// The events of a stored set, in the order of [`WebhookEvent::ALL`]; unknown names are skipped.
pub fn parse_events_column(text: &str) -> Vec<WebhookEvent> {
    let mut events: Vec<WebhookEvent> = text.split(',').filter_map(|e| e.parse().ok()).collect();
    events.sort();
    events.dedup();
    events
}

/// A subscription as stored (its secret sealed).
#[derive(Clone, Debug, PartialEq)]
pub struct Webhook {
    pub id: WebhookId,
    /// `None`: every world's jobs.
    pub world_id: Option<WorldId>,
    pub url: String,
    pub events: Vec<WebhookEvent>,
    pub description: Option<String>,
    pub secret_ciphertext: Vec<u8>,
    pub secret_nonce: Vec<u8>,
    pub created_at: DateTime<Utc>,
}

/// Where a delivery is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Not yet accepted by the receiver; tried again at `next_attempt_at`.
    Pending,
    /// The receiver answered 2xx.
    Delivered,
    /// Every attempt failed; not tried again.
    Failed,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 3] = [
        DeliveryStatus::Pending,
        DeliveryStatus::Delivered,
        DeliveryStatus::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }
}

impl FromStr for DeliveryStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(DeliveryStatus::Pending),
            "delivered" => Ok(DeliveryStatus::Delivered),
            "failed" => Ok(DeliveryStatus::Failed),
            other => Err(format!("unknown delivery status `{other}`")),
        }
    }
}

/// One event for one subscription: the outbox row and its log entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    /// Increasing per database; sent as `webhook-id: msg_{id}`.
    pub id: i64,
    pub webhook_id: WebhookId,
    pub event: WebhookEvent,
    pub job_id: JobId,
    pub world_id: WorldId,
    /// For `job.waiting`: why and until when, as the job said when it started waiting.
    pub waiting_reason: Option<WaitReason>,
    pub waiting_until: Option<DateTime<Utc>>,
    /// The body sent, fixed at the first attempt.
    pub payload: Option<String>,
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub last_status_code: Option<u16>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub last_attempt_at: Option<DateTime<Utc>>,
}

/// What one attempt came to.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt {
    /// The body sent (kept when the delivery has none yet).
    pub payload: String,
    /// The receiver's status code, when it answered.
    pub status_code: Option<u16>,
    /// Why the attempt failed; `None` when it succeeded.
    pub error: Option<String>,
    /// When to try again after a failure (seconds from now); `None`: give up (or succeeded).
    pub retry_in_s: Option<f64>,
}

impl Attempt {
    pub fn succeeded(&self) -> bool {
        self.error.is_none()
    }
}
