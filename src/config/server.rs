//! `[server]`, `[auth]` and `[security]`: the listener and its limits, who may call, and the
//! key that seals provider secrets at rest.

use std::net::SocketAddr;
use std::path::PathBuf;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::{ConfigError, whole};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSettings {
    pub addr: SocketAddr,
    /// Request bodies above this get 413 `payload_too_large`.
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_body_bytes: usize,
    /// Requests running longer are answered with 408 `request_timeout` and dropped.
    #[serde(deserialize_with = "whole::deserialize")]
    pub request_timeout_s: u64,
    /// How long shutdown waits for in-flight requests and background tasks.
    #[serde(deserialize_with = "whole::deserialize")]
    pub shutdown_timeout_s: u64,
    /// Job event streams open at once; one more is 503 `server_busy`.
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_event_streams: usize,
    /// Job event streams one client (one IP address) may hold open at once.
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_event_streams_per_client: usize,
    /// Connections open at once; past it new ones wait in the kernel's backlog.
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_connections: usize,
    /// Connections one client (one IPv4 address, or one IPv6 /64) may hold open at once; one
    /// more is closed when accepted.
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_connections_per_client: usize,
    /// An HTTP/1 request head must arrive whole within this many seconds (counted from the
    /// first byte of a connection's first request).
    #[serde(deserialize_with = "whole::deserialize")]
    pub header_read_timeout_s: u64,
    /// A connection on which no byte moved either way for this long is closed. Longer than
    /// `request_timeout_s`.
    #[serde(deserialize_with = "whole::deserialize")]
    pub idle_timeout_s: u64,
    /// Uploads (`POST …/sources`) read and chunked at once; more wait up to
    /// `upload_wait_s`, then get 503 `server_busy`.
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_concurrent_uploads: usize,
    #[serde(deserialize_with = "whole::deserialize")]
    pub upload_wait_s: u64,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            max_body_bytes: 16 * 1024 * 1024,
            request_timeout_s: 60,
            shutdown_timeout_s: 30,
            max_event_streams: 256,
            max_event_streams_per_client: 16,
            max_connections: 512,
            max_connections_per_client: 64,
            header_read_timeout_s: 10,
            idle_timeout_s: 75,
            max_concurrent_uploads: 4,
            upload_wait_s: 10,
        }
    }
}

impl ServerSettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let fail = |msg: String| Err(ConfigError(msg));
        if self.max_body_bytes < 1024 {
            return fail("server.max_body_bytes must be at least 1024".into());
        }
        if self.request_timeout_s == 0 {
            return fail("server.request_timeout_s must be at least 1".into());
        }
        if self.max_event_streams == 0 || self.max_event_streams_per_client == 0 {
            return fail("server.max_event_streams and server.max_event_streams_per_client must be at least 1".into());
        }
        if self.max_connections == 0 || self.max_concurrent_uploads == 0 || self.max_connections_per_client == 0 {
            return fail(
                "server.max_connections, server.max_connections_per_client and server.max_concurrent_uploads must \
                 be at least 1"
                    .into(),
            );
        }
        if self.header_read_timeout_s == 0 {
            return fail("server.header_read_timeout_s must be at least 1".into());
        }
        // A request in progress sends nothing until it answers: a shorter idle timeout would cut
        // it. (Event streams send a keep-alive at least every third of the idle timeout.)
        if self.idle_timeout_s <= self.request_timeout_s {
            return fail(format!(
                "server.idle_timeout_s ({}) must be longer than server.request_timeout_s ({})",
                self.idle_timeout_s, self.request_timeout_s
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthSettings {
    /// Accepted bearer tokens for `/v1/*`.
    pub tokens: Vec<SecretString>,
    /// Development only: serve `/v1/*` without authentication.
    pub disabled: bool,
    /// A bearer token `/metrics` requires (unset: `/metrics` is open, as scrapers expect).
    pub metrics_token: Option<SecretString>,
}

impl AuthSettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.tokens.iter().any(|t| t.expose_secret().trim().is_empty()) {
            return Err(ConfigError("auth.tokens contains an empty token".into()));
        }
        Ok(())
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecuritySettings {
    /// 32 bytes, base64: encrypts provider-key secrets at rest.
    pub master_key: Option<SecretString>,
    /// A file holding `master_key` (as container secrets are mounted); surrounding whitespace
    /// is ignored. Not together with `master_key`.
    pub master_key_file: Option<PathBuf>,
}
