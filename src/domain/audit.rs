//! The audit log: administrative actions that succeeded, with who did them, from where and
//! when. Entries are written by the API's auth layer from the route table (each audited route
//! names its [`AuditAction`]) and kept for `audit.keep_days` days.

use chrono::{DateTime, Utc};

use super::TokenId;

/// An administrative action the audit log records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuditAction {
    WorldCreated,
    WorldUpdated,
    WorldDeleted,
    WorldReingested,
    ReingestPromoted,
    ReingestDiscarded,
    WorldRepaired,
    KeyAdded,
    KeyUpdated,
    KeyRemoved,
    WebhookCreated,
    WebhookDeleted,
    TokenCreated,
    TokenRevoked,
    TokenRotated,
}

impl AuditAction {
    pub const ALL: [AuditAction; 15] = [
        AuditAction::WorldCreated,
        AuditAction::WorldUpdated,
        AuditAction::WorldDeleted,
        AuditAction::WorldReingested,
        AuditAction::ReingestPromoted,
        AuditAction::ReingestDiscarded,
        AuditAction::WorldRepaired,
        AuditAction::KeyAdded,
        AuditAction::KeyUpdated,
        AuditAction::KeyRemoved,
        AuditAction::WebhookCreated,
        AuditAction::WebhookDeleted,
        AuditAction::TokenCreated,
        AuditAction::TokenRevoked,
        AuditAction::TokenRotated,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::WorldCreated => "world.created",
            AuditAction::WorldUpdated => "world.updated",
            AuditAction::WorldDeleted => "world.deleted",
            AuditAction::WorldReingested => "world.reingested",
            AuditAction::ReingestPromoted => "world.reingest_promoted",
            AuditAction::ReingestDiscarded => "world.reingest_discarded",
            AuditAction::WorldRepaired => "world.repaired",
            AuditAction::KeyAdded => "provider_key.added",
            AuditAction::KeyUpdated => "provider_key.updated",
            AuditAction::KeyRemoved => "provider_key.removed",
            AuditAction::WebhookCreated => "webhook.created",
            AuditAction::WebhookDeleted => "webhook.deleted",
            AuditAction::TokenCreated => "token.created",
            AuditAction::TokenRevoked => "token.revoked",
            AuditAction::TokenRotated => "token.rotated",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        AuditAction::ALL.into_iter().find(|action| action.as_str() == s)
    }
}

/// Who acted: a managed token (its id and its name at the time), or a bootstrap token from
/// `auth.tokens` (no id; named `bootstrap`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    pub token_id: Option<TokenId>,
    pub name: String,
}

/// An entry to write.
#[derive(Clone, Debug, PartialEq)]
pub struct NewAuditEvent {
    pub at: DateTime<Utc>,
    pub actor: Actor,
    pub action: AuditAction,
    /// The id of what was acted on (a world, provider key, webhook or token).
    pub target: Option<String>,
    /// The client's IP address as the server saw it (a proxy's, behind one).
    pub address: Option<String>,
}

/// A stored entry; `seq` orders entries (newer is larger) and pages the listing.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditEvent {
    pub seq: i64,
    pub event: NewAuditEvent,
}
