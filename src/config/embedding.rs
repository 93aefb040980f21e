//! `[embedding]` and `[embedding.breaker]`: the workers, their retries and reuse, and when a
//! failing provider is paused.

use serde::Deserialize;

use super::{ConfigError, whole};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReuseScope {
    /// Reuse vectors of identical text within the same world.
    World,
    /// Reuse across worlds (reveals through timing that a text exists elsewhere).
    Global,
    /// Never reuse.
    Off,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbeddingSettings {
    /// Background embedding workers in this process; 0 runs none (an API-only replica, or
    /// tests that drive the queue step by step).
    #[serde(deserialize_with = "whole::deserialize")]
    pub workers: usize,
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_attempts: u32,
    pub reuse: ReuseScope,
    /// Reconcile every world's manifests with its points in the background at startup.
    pub repair_on_startup: bool,
    /// How long a worker's claim on entries lasts between renewals: a worker renews its claims
    /// every third of this while it works on them, so entries of a process that died are
    /// claimed again by another within this time (a restarted embedded process gives them back
    /// at startup instead).
    #[serde(deserialize_with = "whole::deserialize")]
    pub lease_s: u64,
    /// Circuit breakers per provider and model (`[embedding.breaker]`).
    pub breaker: BreakerSettings,
    /// Seconds between audits of every world's vectors against the store (the startup
    /// repair's reconciliation, run again; `quarry_drift_points` shows what it found). 0: none.
    #[serde(deserialize_with = "whole::deserialize")]
    pub audit_interval_s: u64,
}

impl Default for EmbeddingSettings {
    fn default() -> Self {
        Self {
            workers: 8,
            max_attempts: 3,
            reuse: ReuseScope::World,
            repair_on_startup: true,
            lease_s: 30,
            breaker: BreakerSettings::default(),
            audit_interval_s: 3600,
        }
    }
}

impl EmbeddingSettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.max_attempts == 0 {
            return Err(ConfigError("embedding.max_attempts must be at least 1".into()));
        }
        if self.lease_s == 0 {
            return Err(ConfigError("embedding.lease_s must be at least 1".into()));
        }
        self.breaker.validate()
    }
}

/// When a provider's transient failures open its circuit breaker, and for how long.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerSettings {
    /// Transient failures in a row (5xx, overloaded, timeouts, resets) that open the breaker.
    #[serde(deserialize_with = "whole::deserialize")]
    pub failures_to_open: u32,
    /// The first pause of an open breaker; it doubles with each opening in a row.
    pub open_s: f64,
    /// The longest pause.
    pub max_open_s: f64,
    /// How long a provider may fail without one success before transient failures spend the
    /// chunks' attempts (and chunks fail after `max_attempts`).
    pub failure_budget_s: f64,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        Self {
            failures_to_open: 5,
            open_s: 5.0,
            max_open_s: 300.0,
            failure_budget_s: 1800.0,
        }
    }
}

impl BreakerSettings {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.failures_to_open == 0 {
            return Err(ConfigError(
                "embedding.breaker.failures_to_open must be at least 1".into(),
            ));
        }
        for (key, value) in [
            ("open_s", self.open_s),
            ("max_open_s", self.max_open_s),
            ("failure_budget_s", self.failure_budget_s),
        ] {
            if !(value.is_finite() && (0.0..=31_536_000.0).contains(&value)) {
                return Err(ConfigError(format!(
                    "embedding.breaker.{key} must be a number of seconds from 0 to one year"
                )));
            }
        }
        if self.max_open_s < self.open_s {
            return Err(ConfigError(
                "embedding.breaker.max_open_s must be at least embedding.breaker.open_s".into(),
            ));
        }
        Ok(())
    }
}
