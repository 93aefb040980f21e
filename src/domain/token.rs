//! API tokens: bearer tokens managed through the API, each with scopes and, optionally, the
//! worlds it may touch. The secret is shown once, when the token is made; the store keeps its
//! SHA-256 digest only.

use chrono::{DateTime, Utc};

use super::{TokenId, WorldId};

/// What a token may do. `admin` holds `ingest`, which holds `read`; `metrics` stands apart
/// (scraping `/metrics` reads nothing of the worlds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Retrieve; list and read worlds, sources, chunks, jobs and events; MCP tools.
    Read,
    /// `read`, and add, replace and delete sources; pause, resume, cancel and retry jobs.
    Ingest,
    /// Everything: worlds, re-ingests and repairs, provider keys, webhooks, tokens, cluster.
    Admin,
    /// Read `/metrics`.
    Metrics,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Ingest, Scope::Admin, Scope::Metrics];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Ingest => "ingest",
            Scope::Admin => "admin",
            Scope::Metrics => "metrics",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Scope::ALL.into_iter().find(|scope| scope.as_str() == s)
    }

    /// Whether holding `self` grants `needed`.
    pub fn grants(self, needed: Scope) -> bool {
        match (self, needed) {
            (held, needed) if held == needed => true,
            (Scope::Admin, Scope::Ingest | Scope::Read) | (Scope::Ingest, Scope::Read) => true,
            _ => false,
        }
    }
}

/// A stored token as the API shows it (never its secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiToken {
    pub id: TokenId,
    pub name: String,
    pub scopes: Vec<Scope>,
    /// The worlds it may touch; `None`: every world.
    pub worlds: Option<Vec<WorldId>>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was last used, to the minute (written at most once a minute).
    pub last_used_at: Option<DateTime<Utc>>,
    /// Requests a minute the token may make on each replica; `None`: no limit of its own.
    pub rate_per_minute: Option<u32>,
}

impl ApiToken {
    /// Whether the token holds a scope that grants `needed`.
    pub fn grants(&self, needed: Scope) -> bool {
        self.scopes.iter().any(|held| held.grants(needed))
    }

    /// Whether the token may touch `world`.
    pub fn sees(&self, world: WorldId) -> bool {
        self.worlds.as_ref().is_none_or(|worlds| worlds.contains(&world))
    }
}

/// What verifying a presented secret needs: the token, the digest of its secret, and during a
/// rotation's grace period the previous secret's digest and when it stops being accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenCredentials {
    pub token: ApiToken,
    pub secret_sha256: [u8; 32],
    pub previous: Option<([u8; 32], DateTime<Utc>)>,
}

/// The scopes' column text: `read,ingest`.
pub fn scopes_column(scopes: &[Scope]) -> String {
    scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",")
}

/// [`scopes_column`] read back; unknown names are skipped (a newer version's scope).
pub fn parse_scopes_column(column: &str) -> Vec<Scope> {
    column.split(',').filter_map(Scope::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::Scope;

    #[test]
    fn admin_holds_ingest_which_holds_read_and_metrics_stands_apart() {
        use Scope::*;
        assert!(Admin.grants(Ingest) && Admin.grants(Read) && Ingest.grants(Read));
        assert!(!Read.grants(Ingest) && !Ingest.grants(Admin) && !Admin.grants(Metrics));
        assert!(!Metrics.grants(Read) && Metrics.grants(Metrics));
        for scope in Scope::ALL {
            assert_eq!(Scope::parse(scope.as_str()), Some(scope));
        }
    }
}
