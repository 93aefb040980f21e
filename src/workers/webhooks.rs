//! The webhook dispatcher: sends the deliveries the store wrote when jobs ended or started
//! waiting, signed the Standard Webhooks way, and retries them with backoff.
//!
//! Every replica runs one. Each round it holds up to [`BATCH`] due deliveries (a lease in the
//! store, so replicas never send one delivery at the same time), sends them concurrently, and
//! records each attempt: delivered on a 2xx answer; otherwise due again after a backoff that
//! doubles from `webhooks.first_retry_s` up to `webhooks.max_retry_s`, until
//! `webhooks.max_attempts` attempts have failed. A process that dies mid-attempt loses nothing:
//! its lease runs out and the delivery is sent again (receivers deduplicate on `webhook-id`).
//!
//! The body is fixed at the first attempt, so every retry sends the same bytes; each attempt is
//! signed anew with its own timestamp (`webhook-timestamp`), as the scheme wants, so a receiver
//! can refuse replays of old messages.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::crypto::{Sealed, SecretCipher};
use crate::domain::{Attempt, Delivery, JobEventKind, JobId, JobKind, JobStatus, Webhook, WebhookEvent, WebhookId};
use crate::store::Store;

/// Deliveries held per round.
const BATCH: u32 = 32;

/// Deliveries in flight at once per replica.
const CONCURRENCY: usize = 8;

/// How often settled deliveries older than `webhooks.keep_deliveries_days` are forgotten.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Why an attempt failed, as the delivery log keeps it: a coarse outcome and a fixed sentence,
/// never the error chain of the connection (which would make the log a scanner of the network
/// quarry is in: "connection refused" against "timed out" tells which ports are open).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failure {
    /// The destination is not public and not in `webhooks.allowed_networks`.
    DestinationRefused,
    /// No connection (name not found, refused, reset, TLS failed).
    ConnectFailed,
    Timeout,
    /// An answer that is not 2xx, by class.
    Http3xx,
    Http4xx,
    Http5xx,
    /// Anything else on the way (a broken answer).
    RequestFailed,
    /// The signing secret cannot be opened with the configured master key.
    SecretUnavailable,
}

impl Failure {
    fn text(self, status: Option<u16>) -> String {
        let (code, what) = match self {
            Failure::DestinationRefused => (
                "destination_refused",
                "the receiver's address is not public and not in webhooks.allowed_networks".to_owned(),
            ),
            Failure::ConnectFailed => ("connect_failed", "no connection to the receiver".to_owned()),
            Failure::Timeout => (
                "timeout",
                "the receiver did not answer in time (webhooks.timeout_s)".to_owned(),
            ),
            Failure::Http3xx | Failure::Http4xx | Failure::Http5xx => (
                match self {
                    Failure::Http3xx => "http_3xx",
                    Failure::Http4xx => "http_4xx",
                    _ => "http_5xx",
                },
                format!("the receiver answered {}", status.unwrap_or_default()),
            ),
            Failure::RequestFailed => ("request_failed", "the exchange with the receiver broke off".to_owned()),
            Failure::SecretUnavailable => (
                "secret_unavailable",
                "the signing secret cannot be decrypted with the configured security.master_key".to_owned(),
            ),
        };
        format!("{code}: {what}")
    }

    fn of_status(status: u16) -> Self {
        match status {
            500.. => Failure::Http5xx,
            400.. => Failure::Http4xx,
            _ => Failure::Http3xx,
        }
    }

    fn of_error(err: &reqwest::Error) -> Self {
        let refused = std::iter::successors(Some(err as &dyn std::error::Error), |e| e.source())
            .any(|e| e.downcast_ref::<crate::outbound::Refused>().is_some());
        if refused {
            Failure::DestinationRefused
        } else if err.is_timeout() {
            Failure::Timeout
        } else if err.is_connect() {
            Failure::ConnectFailed
        } else {
            Failure::RequestFailed
        }
    }
}

#[derive(Clone, Debug)]
pub struct DispatchConfig {
    pub timeout: Duration,
    pub first_retry: Duration,
    pub max_retry: Duration,
    pub max_attempts: u32,
    pub poll_interval: Duration,
    pub keep_for: Duration,
}

impl From<&crate::config::WebhookSettings> for DispatchConfig {
    fn from(s: &crate::config::WebhookSettings) -> Self {
        Self {
            timeout: Duration::from_secs(s.timeout_s),
            first_retry: Duration::from_secs(s.first_retry_s),
            max_retry: Duration::from_secs(s.max_retry_s),
            max_attempts: s.max_attempts,
            poll_interval: Duration::from_millis(s.poll_interval_ms),
            keep_for: Duration::from_secs(s.keep_deliveries_days.saturating_mul(86_400)),
        }
    }
}

impl DispatchConfig {
    /// The wait before attempt `attempts + 1`, after `attempts` failed ones: the first retry's
    /// wait doubled for each earlier retry, capped, ±10 %.
    pub fn backoff(&self, attempts: u32) -> Duration {
        let doublings = attempts.saturating_sub(1).min(30);
        let base = self.first_retry.saturating_mul(1 << doublings).min(self.max_retry);
        base.mul_f64(rand::random_range(0.9..=1.1))
    }
}

#[derive(Clone)]
pub struct WebhookDispatcher {
    store: Arc<dyn Store>,
    cipher: Option<SecretCipher>,
    client: reqwest::Client,
    config: DispatchConfig,
    destinations: crate::outbound::Destinations,
    meters: crate::meters::Metrics,
}

impl WebhookDispatcher {
    pub fn new(
        deps: &crate::deps::Deps,
        config: DispatchConfig,
        destinations: crate::outbound::Destinations,
    ) -> Result<Self, reqwest::Error> {
        crate::outbound::install_tls_provider();
        // Names are resolved by a resolver that drops internal addresses; no redirect is
        // followed and no proxy used, so the address checked is the one connected to.
        let client = reqwest::Client::builder()
            .connect_timeout(config.timeout)
            .timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(destinations.resolver())
            .user_agent(concat!("quarry/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            store: deps.store.clone(),
            cipher: deps.cipher.clone(),
            client,
            config,
            destinations,
            meters: deps.meters.clone(),
        })
    }

    /// Runs rounds every `webhooks.poll_interval_ms` until `cancel` fires, as `owner`.
    pub fn spawn(&self, owner: String, tracker: &TaskTracker, cancel: &CancellationToken) {
        let (this, cancel) = (self.clone(), cancel.clone());
        tracker.spawn(async move {
            let mut pruned = tokio::time::Instant::now();
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(this.config.poll_interval) => {}
                }
                // A round runs to its end: an attempt cut off mid-flight would be sent again.
                if let Err(err) = this.round(&owner).await {
                    tracing::warn!(error = %crate::telemetry::error_chain(&err), "webhook round failed");
                }
                if pruned.elapsed() >= PRUNE_EVERY {
                    pruned = tokio::time::Instant::now();
                    match this.store.forget_deliveries(this.config.keep_for.as_secs_f64()).await {
                        Ok(0) => {}
                        Ok(n) => tracing::debug!(deliveries = n, "forgot old webhook deliveries"),
                        Err(err) => tracing::warn!(error = %err, "forgetting old webhook deliveries failed"),
                    }
                }
            }
        });
    }

    /// Sends what is due now; returns how many deliveries were attempted.
    pub async fn round(&self, owner: &str) -> Result<usize, crate::store::Error> {
        let lease = self.config.timeout.as_secs_f64() * 2.0 + 30.0;
        let due = self.store.claim_deliveries(owner, BATCH, lease).await?;
        if due.is_empty() {
            return Ok(0);
        }
        let mut hooks: std::collections::HashMap<WebhookId, Option<Webhook>> = std::collections::HashMap::new();
        for delivery in &due {
            if let std::collections::hash_map::Entry::Vacant(entry) = hooks.entry(delivery.webhook_id) {
                entry.insert(self.store.get_webhook(delivery.webhook_id).await?);
            }
        }
        let hooks = &hooks;
        let n = due.len();
        let results: Vec<Result<(), crate::store::Error>> = futures_util::stream::iter(due)
            .map(|delivery| async move {
                // A subscription deleted meanwhile took its deliveries with it.
                let Some(hook) = hooks.get(&delivery.webhook_id).and_then(Option::as_ref) else {
                    return Ok(());
                };
                let attempt = self.attempt(hook, &delivery).await;
                let outcome = match (attempt.succeeded(), attempt.retry_in_s) {
                    (true, _) => "delivered",
                    (false, Some(_)) => "retried",
                    (false, None) => "failed",
                };
                self.meters
                    .counter(
                        "quarry_webhook_deliveries_total",
                        &[("event", delivery.event.as_str()), ("outcome", outcome)],
                    )
                    .increment(1);
                if let Some(error) = &attempt.error {
                    tracing::info!(
                        webhook = %hook.id, delivery = delivery.id, event = %delivery.event,
                        attempt = delivery.attempts + 1, outcome, error = %error,
                        "webhook delivery attempt failed"
                    );
                }
                self.store.record_attempt(delivery.id, owner, &attempt).await.map(drop)
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        results.into_iter().collect::<Result<Vec<()>, _>>()?;
        Ok(n)
    }

    /// One attempt at `delivery`.
    async fn attempt(&self, hook: &Webhook, delivery: &Delivery) -> Attempt {
        let payload = match &delivery.payload {
            Some(payload) => payload.clone(),
            None => self.payload(delivery).await,
        };
        let attempts = delivery.attempts + 1;
        let failed = |status_code: Option<u16>, failure: Failure| Attempt {
            payload: payload.clone(),
            status_code,
            error: Some(failure.text(status_code)),
            retry_in_s: (attempts < self.config.max_attempts).then(|| self.config.backoff(attempts).as_secs_f64()),
        };
        let Some(signer) = self.signer(hook) else {
            return failed(None, Failure::SecretUnavailable);
        };
        // An address literal is checked here (a resolver sees only names); the policy may have
        // changed since the subscription was made.
        let url = match url::Url::parse(&hook.url) {
            Ok(url) if self.destinations.check_url(&url).is_ok() => url,
            _ => return failed(None, Failure::DestinationRefused),
        };
        let msg_id = format!("msg_{}", delivery.id);
        let timestamp = chrono::Utc::now().timestamp();
        let Ok(signature) = signer.sign(&msg_id, timestamp, payload.as_bytes()) else {
            return failed(None, Failure::SecretUnavailable);
        };
        let sent = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(standardwebhooks::HEADER_WEBHOOK_ID, &msg_id)
            .header(standardwebhooks::HEADER_WEBHOOK_TIMESTAMP, timestamp.to_string())
            .header(standardwebhooks::HEADER_WEBHOOK_SIGNATURE, signature)
            .body(payload.clone())
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => Attempt {
                payload,
                status_code: Some(response.status().as_u16()),
                error: None,
                retry_in_s: None,
            },
            Ok(response) => {
                let status = response.status().as_u16();
                failed(Some(status), Failure::of_status(status))
            }
            Err(err) => failed(None, Failure::of_error(&err)),
        }
    }

    fn signer(&self, hook: &Webhook) -> Option<standardwebhooks::Webhook> {
        let sealed = Sealed {
            ciphertext: hook.secret_ciphertext.clone(),
            nonce: hook.secret_nonce.clone(),
        };
        let key = self.cipher.as_ref()?.open_bytes(hook.id.0.as_bytes(), &sealed).ok()?;
        standardwebhooks::Webhook::from_bytes(key).ok()
    }

    /// What a completed replace did (its `replaced` event: version, added, reused and removed
    /// chunks), or `null` when its events cannot be read.
    async fn replaced(&self, job: JobId) -> serde_json::Value {
        let mut after = 0;
        loop {
            let events = match self.store.job_events_after(job, after, 500).await {
                Ok(events) => events,
                Err(err) => {
                    tracing::warn!(error = %err, %job, "webhook payload: reading the job's events failed");
                    return serde_json::Value::Null;
                }
            };
            for event in &events {
                if event.kind == JobEventKind::Progress
                    && let Ok(mut value) = serde_json::from_str::<serde_json::Value>(&event.data)
                    && value["code"] == "replaced"
                    && let Some(object) = value.as_object_mut()
                {
                    object.remove("code");
                    return value;
                }
            }
            match events.last() {
                Some(last) => after = last.id,
                None => return serde_json::Value::Null,
            }
        }
    }

    /// A gated re-ingest's gate as the job shows it: state, metric, figures and reason.
    async fn gate(&self, job: JobId) -> serde_json::Value {
        match self.store.get_gate(job).await {
            Ok(Some(gate)) => json!({
                "state": gate.state.as_str(),
                "eval_id": gate.eval_id.0,
                "metric": gate.metric.as_str(),
                "tolerance": gate.tolerance,
                "before_run_id": gate.before_run.0,
                "after_run_id": gate.after_run.0,
                "before": gate.before_value,
                "after": gate.after_value,
                "reason": gate.reason,
            }),
            Ok(None) => serde_json::Value::Null,
            Err(err) => {
                tracing::warn!(error = %err, %job, "webhook payload: reading the gate failed");
                serde_json::Value::Null
            }
        }
    }

    /// The body of a delivery: the event, when it happened, and the job as it is now (for an
    /// ended job, as it ended) — or only its ids when the job is gone.
    async fn payload(&self, delivery: &Delivery) -> String {
        let mut data = json!({
            "job_id": delivery.job_id.0,
            "world_id": delivery.world_id.0,
        });
        match self.store.get_job(delivery.job_id).await {
            Ok(Some(job)) => {
                data["kind"] = json!(job.kind.as_str());
                data["status"] = json!(if job.is_held() { "held" } else { job.status.as_str() });
                data["counts"] = json!(job.counts);
                data["created_at"] = json!(job.created_at);
                data["started_at"] = json!(job.started_at);
                data["finished_at"] = json!(job.finished_at);
                if let Some(source) = job.source {
                    data["source_id"] = json!(source.0);
                }
                if job.kind == JobKind::Replace && job.status == JobStatus::Completed {
                    data["replaced"] = self.replaced(job.id).await;
                }
                if job.gate.is_some() {
                    let gate = self.gate(job.id).await;
                    // Read after the job, the gate's state is the newer: the status follows it.
                    if job.status == JobStatus::Running && gate["state"] == "held" {
                        data["status"] = json!("held");
                    }
                    data["gate"] = gate;
                }
            }
            Ok(None) => {}
            Err(err) => tracing::warn!(error = %err, job = %delivery.job_id, "webhook payload: reading the job failed"),
        }
        if delivery.event == WebhookEvent::JobWaiting {
            data["waiting"] = json!({
                "reason": delivery.waiting_reason.map(|r| r.as_str()),
                "until": delivery.waiting_until,
            });
        }
        json!({
            "type": delivery.event.as_str(),
            "timestamp": delivery.created_at,
            "data": data,
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_first_retry_up_to_the_cap_with_a_tenth_of_jitter() {
        let config = DispatchConfig {
            timeout: Duration::from_secs(10),
            first_retry: Duration::from_secs(5),
            max_retry: Duration::from_secs(60),
            max_attempts: 10,
            poll_interval: Duration::from_secs(1),
            keep_for: Duration::from_secs(86_400),
        };
        for (attempts, base) in [(1, 5.0), (2, 10.0), (3, 20.0), (4, 40.0), (5, 60.0), (40, 60.0)] {
            let wait = config.backoff(attempts).as_secs_f64();
            assert!(
                (base * 0.9..=base * 1.1).contains(&wait),
                "after {attempts}: {wait} s, base {base}"
            );
        }
    }

    /// The scheme's published example: a signature any Standard Webhooks library checks.
    #[test]
    fn signatures_follow_the_standard_webhooks_scheme() {
        let signer = standardwebhooks::Webhook::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let signature = signer
            .sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, br#"{"test": 2432232314}"#)
            .unwrap();
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }
}
