//! `[store]` and `[cluster]`: where quarry keeps its state, and the replicas sharing it.

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::{ConfigError, whole};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSettings {
    /// `sqlite://path` or `postgres://user@host/db`; a secret because it may hold a password.
    pub url: SecretString,
}

impl Default for StoreSettings {
    fn default() -> Self {
        Self {
            url: SecretString::from("sqlite://data/quarry.db"),
        }
    }
}

impl StoreSettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let url = self.url.expose_secret();
        if !(url.starts_with("sqlite:") || url.starts_with("postgres:") || url.starts_with("postgresql:")) {
            return Err(ConfigError("store.url must start with sqlite: or postgres:".into()));
        }
        Ok(())
    }
}

/// Replicas sharing one store (`[cluster]`): the registry each writes into and the budgets
/// they share.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterSettings {
    /// Seconds between two heartbeats of this replica.
    #[serde(deserialize_with = "whole::deserialize")]
    pub heartbeat_s: u64,
    /// A replica whose last heartbeat is older than this is dead: the first replica to notice
    /// removes it and gives its claimed work back.
    #[serde(deserialize_with = "whole::deserialize")]
    pub dead_after_s: u64,
    /// The address other replicas and operators reach this one at (`GET /v1/cluster`);
    /// unset: the address it listens on.
    pub address: Option<String>,
    /// Whether provider budgets (`requests_per_minute`, `tokens_per_minute`) are kept in the
    /// store and shared by every replica. Unset: shared on PostgreSQL (replicas may share it),
    /// in this process on SQLite (one process per store).
    pub shared_budgets: Option<bool>,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            heartbeat_s: 5,
            dead_after_s: 30,
            address: None,
            shared_budgets: None,
        }
    }
}

impl ClusterSettings {
    /// Whether budgets are shared through a store of this kind ("sqlite", "postgres").
    pub fn shares_budgets(&self, store_kind: &str) -> bool {
        self.shared_budgets.unwrap_or(store_kind == "postgres")
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.heartbeat_s == 0 {
            return Err(ConfigError("cluster.heartbeat_s must be at least 1".into()));
        }
        if self.dead_after_s < 2 * self.heartbeat_s {
            return Err(ConfigError(format!(
                "cluster.dead_after_s ({}) must be at least twice cluster.heartbeat_s ({})",
                self.dead_after_s, self.heartbeat_s
            )));
        }
        Ok(())
    }
}
