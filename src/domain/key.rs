//! Provider API keys as stored.

use chrono::{DateTime, Utc};

use super::ids::KeyId;
use super::world::ProviderKind;

/// Where a key came from. Configuration keys are mirrored into the store (without their
/// secret) so that cooldowns and retirements persist for them too; the API cannot change them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrigin {
    Api,
    Config,
}

impl KeyOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyOrigin::Api => "api",
            KeyOrigin::Config => "config",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "api" => Some(KeyOrigin::Api),
            "config" => Some(KeyOrigin::Config),
            _ => None,
        }
    }
}

/// An encrypted secret (AES-256-GCM).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedSecret {
    pub ciphertext: Vec<u8>,
    pub nonce: Vec<u8>,
}

/// A key row.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredKey {
    pub id: KeyId,
    pub provider: ProviderKind,
    pub label: String,
    pub origin: KeyOrigin,
    pub quota_group: Option<String>,
    /// `None` for configuration keys (their secret lives only in the configuration).
    pub sealed: Option<SealedSecret>,
    pub fingerprint: String,
    pub enabled: bool,
    pub retired: bool,
    pub retired_reason: Option<String>,
    pub cooldown_until: Option<DateTime<Utc>>,
    pub consecutive_failures: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A key to insert.
#[derive(Clone, Debug)]
pub struct NewKey {
    pub id: KeyId,
    pub provider: ProviderKind,
    pub label: String,
    pub origin: KeyOrigin,
    pub quota_group: Option<String>,
    pub sealed: Option<SealedSecret>,
    pub fingerprint: String,
    pub now: DateTime<Utc>,
}

/// A cooldown shared by the keys of one quota group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupCooldown {
    pub provider: ProviderKind,
    pub quota_group: String,
    pub until: DateTime<Utc>,
}
