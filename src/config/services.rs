//! `[retrieval]`, `[sources]`, `[webhooks]`, `[audit]` and `[telemetry]`: the settings of
//! one service each.

use serde::Deserialize;

use super::{ConfigError, whole};

/// `key must be at least 1` for the first of `values` that is 0.
fn at_least_one(values: &[(u64, &str)]) -> Result<(), ConfigError> {
    match values.iter().find(|(value, _)| *value == 0) {
        Some((_, key)) => Err(ConfigError(format!("{key} must be at least 1"))),
        None => Ok(()),
    }
}

/// The most `retrieval.max_context_tokens` (and a request's `max_context_tokens`) can be.
pub const MAX_CONTEXT_TOKENS: u32 = 1 << 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetrievalSettings {
    /// The token budget of a retrieval's `context` when the request names none (1 to 2^20).
    /// Results are never cut; see the retrieval module.
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_context_tokens: u32,
    /// `mode: auto` hands the whole corpus (the world, or the sources a filter keeps) to the
    /// model, with no search, when its tokens are at most this and the context budget
    /// (0 to 2^20; 0 never does).
    #[serde(deserialize_with = "whole::deserialize")]
    pub full_context_threshold: u32,
}

impl Default for RetrievalSettings {
    fn default() -> Self {
        Self {
            max_context_tokens: 32_768,
            full_context_threshold: 30_000,
        }
    }
}

impl RetrievalSettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_CONTEXT_TOKENS).contains(&self.max_context_tokens) {
            return Err(ConfigError(format!(
                "retrieval.max_context_tokens must be between 1 and {MAX_CONTEXT_TOKENS}"
            )));
        }
        if self.full_context_threshold > MAX_CONTEXT_TOKENS {
            return Err(ConfigError(format!(
                "retrieval.full_context_threshold must be between 0 and {MAX_CONTEXT_TOKENS}"
            )));
        }
        Ok(())
    }
}

/// How uploads are read (`[sources]`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SourcesSettings {
    /// What an HTML page keeps: `main` (its main content: navigation, tables of contents,
    /// breadcrumbs, sidebars, footers and heading permalinks dropped; its title becomes the
    /// source's title when the upload names none) or `all` (everything a reader would see).
    pub html: crate::chunking::HtmlContent,
}

/// How webhook deliveries are sent and retried (`[webhooks]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhookSettings {
    /// Seconds a receiver has to answer one delivery.
    #[serde(deserialize_with = "whole::deserialize")]
    pub timeout_s: u64,
    /// Seconds before the first retry of a failed delivery; each later retry waits twice as
    /// long as the one before (±10 %), up to `max_retry_s`.
    #[serde(deserialize_with = "whole::deserialize")]
    pub first_retry_s: u64,
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_retry_s: u64,
    /// Attempts per delivery, the first included; then it is `failed` and stays in the log.
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_attempts: u32,
    /// How often each replica looks for due deliveries.
    #[serde(deserialize_with = "whole::deserialize")]
    pub poll_interval_ms: u64,
    /// Days delivered and failed deliveries stay in the log.
    #[serde(deserialize_with = "whole::deserialize")]
    pub keep_deliveries_days: u64,
    /// Networks (CIDR, e.g. `10.20.0.0/16`, `127.0.0.1/32`) receivers may be in although they
    /// are not public. Empty by default: loopback, private, link-local and other internal
    /// addresses are refused, for literals when subscribing and for names when connecting.
    pub allowed_networks: Vec<ipnet::IpNet>,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            timeout_s: 10,
            first_retry_s: 5,
            max_retry_s: 3 * 3600,
            max_attempts: 15,
            poll_interval_ms: 1000,
            keep_deliveries_days: 14,
            allowed_networks: Vec::new(),
        }
    }
}

impl WebhookSettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        at_least_one(&[
            (self.timeout_s, "webhooks.timeout_s"),
            (self.first_retry_s, "webhooks.first_retry_s"),
            (u64::from(self.max_attempts), "webhooks.max_attempts"),
            (self.poll_interval_ms, "webhooks.poll_interval_ms"),
            (self.keep_deliveries_days, "webhooks.keep_deliveries_days"),
        ])?;
        if self.max_retry_s < self.first_retry_s {
            return Err(ConfigError(format!(
                "webhooks.max_retry_s ({}) must be at least webhooks.first_retry_s ({})",
                self.max_retry_s, self.first_retry_s
            )));
        }
        Ok(())
    }
}

/// The audit log of administrative actions (`[audit]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditSettings {
    /// Days an entry of the audit log is kept (`GET /v1/audit`); older ones are deleted.
    #[serde(deserialize_with = "whole::deserialize")]
    pub keep_days: u64,
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self { keep_days: 90 }
    }
}

impl AuditSettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        at_least_one(&[(self.keep_days, "audit.keep_days")])
    }
}

/// OpenTelemetry traces (`[telemetry]`): off unless `otlp_endpoint` is set.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetrySettings {
    /// Where spans are sent, OTLP over HTTP with protobuf: the collector's traces URL, e.g.
    /// `http://otel-collector:4318/v1/traces`. Unset: no traces.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the spans.
    pub service_name: String,
    /// How often finished spans are sent, at the latest.
    #[serde(deserialize_with = "whole::deserialize")]
    pub export_interval_ms: u64,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            service_name: "quarry".to_owned(),
            export_interval_ms: 5000,
        }
    }
}

impl TelemetrySettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        at_least_one(&[(self.export_interval_ms, "telemetry.export_interval_ms")])?;
        if let Some(endpoint) = &self.otlp_endpoint
            && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            return Err(ConfigError(format!(
                "telemetry.otlp_endpoint must be an http:// or https:// URL (OTLP over HTTP), not `{endpoint}`"
            )));
        }
        if self.service_name.trim().is_empty() {
            return Err(ConfigError("telemetry.service_name must not be empty".into()));
        }
        Ok(())
    }
}
