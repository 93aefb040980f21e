//! Configuration: built-in defaults < `quarry.toml` < `QUARRY__SECTION__KEY` environment
//! variables (lists comma-separated), read with the `config` crate and checked once at
//! startup. Every problem is reported with the key that holds it, and startup stops.
//!
//! Secrets (bearer tokens, provider keys, the master key, the store URL, which may hold a
//! password, and the Qdrant API key) are `secrecy` types: their `Debug` output is redacted
//! and they are only exposed where they are used.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

/// Keys whose environment value is a comma-separated list.
const LIST_KEYS: [&str; 6] = [
    "auth.tokens",
    "webhooks.allowed_networks",
    "vectors.urls",
    "providers.google.keys",
    "providers.openai.keys",
    "providers.rerank.keys",
];

/// Default seconds to open a connection to a remote provider.
const DEFAULT_CONNECT_TIMEOUT_S: u64 = 5;
/// Default seconds for one whole request to a remote provider.
const DEFAULT_REQUEST_TIMEOUT_S: u64 = 60;

/// A configuration problem; the message names the key.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub String);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub server: ServerSettings,
    pub auth: AuthSettings,
    pub store: StoreSettings,
    pub vectors: VectorSettings,
    pub providers: ProviderSettings,
    pub embedding: EmbeddingSettings,
    pub retrieval: RetrievalSettings,
    pub security: SecuritySettings,
    pub cluster: ClusterSettings,
    pub sources: SourcesSettings,
    pub webhooks: WebhookSettings,
    pub audit: AuditSettings,
    pub telemetry: TelemetrySettings,
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

/// How uploads are read (`[sources]`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SourcesSettings {
    /// What an HTML page keeps: `main` (its main content: navigation, tables of contents,
    /// breadcrumbs, sidebars, footers and heading permalinks dropped; its title becomes the
    /// source's title when the upload names none) or `all` (everything a reader would see).
    pub html: crate::chunking::HtmlContent,
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSettings {
    /// `sqlite://path` or `postgres://user@host/db`; a secret because it may hold a password.
    pub url: SecretString,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VectorKind {
    /// qdrant-edge in-process, data under `vectors.path`.
    Embedded,
    /// A Qdrant server (or cluster) over gRPC at `vectors.url` or `vectors.urls`.
    Qdrant,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VectorSettings {
    pub kind: VectorKind,
    pub path: PathBuf,
    /// One Qdrant node's gRPC address.
    pub url: Option<String>,
    /// Several nodes of one Qdrant cluster, tried in order: requests go to the first that
    /// answers and stay there until it stops answering.
    pub urls: Vec<String>,
    pub api_key: Option<SecretString>,
    pub collection: crate::vector::settings::CollectionSettings,
    pub search: crate::vector::settings::SearchSettings,
}

impl VectorSettings {
    /// The Qdrant nodes to talk to, in order (`vectors.urls`, or the one `vectors.url`).
    pub fn node_urls(&self) -> Vec<String> {
        if self.urls.is_empty() {
            self.url.iter().filter(|u| !u.is_empty()).cloned().collect()
        } else {
            self.urls.clone()
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderSettings {
    pub google: RemoteProviderSettings,
    pub openai: OpenAiSettings,
    pub local: LocalSettings,
    pub rerank: RerankSettings,
}

/// The reranker (`[providers.rerank]`): a server speaking the common `/rerank` wire format.
/// Off while `base_url` is empty.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RerankSettings {
    /// API base; quarry posts to `{base_url}/rerank`. Empty: no reranker.
    pub base_url: String,
    /// The `model` sent with each request (empty: none sent, for single-model servers).
    pub model: String,
    /// Read-only keys from configuration (none: the server is called without a key unless
    /// keys were added through the API).
    pub keys: Vec<SecretString>,
    pub quota_group: Option<String>,
    pub scheduling: SchedulingSettings,
    #[serde(deserialize_with = "whole::deserialize")]
    pub connect_timeout_s: u64,
    /// A rerank that takes longer is given up: the answer keeps the search's order, with the
    /// warning `rerank_unavailable`.
    #[serde(deserialize_with = "whole::deserialize")]
    pub request_timeout_s: u64,
}

impl Default for RerankSettings {
    fn default() -> Self {
        Self {
            base_url: String::new(),
            model: String::new(),
            keys: Vec::new(),
            quota_group: None,
            scheduling: SchedulingSettings::default(),
            connect_timeout_s: 2,
            request_timeout_s: 5,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RemoteProviderSettings {
    /// API base including the version; quarry appends the method paths.
    pub base_url: String,
    /// Read-only keys from configuration.
    pub keys: Vec<SecretString>,
    /// Quota group shared by every configuration key (keys of one Google project share quota).
    pub quota_group: Option<String>,
    pub scheduling: SchedulingSettings,
    /// Seconds allowed to open a connection (TCP and TLS) to the provider.
    #[serde(deserialize_with = "whole::deserialize")]
    pub connect_timeout_s: u64,
    /// Seconds allowed for one whole HTTP request, from sending to the end of the answer.
    #[serde(deserialize_with = "whole::deserialize")]
    pub request_timeout_s: u64,
}

/// How the key scheduler paces one provider.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulingSettings {
    /// Ingestion requests in flight per key at once (queries may use one more).
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_in_flight_per_key: usize,
    /// Client-side request budget per minute, per quota group (or per key without a group).
    #[serde(deserialize_with = "whole::option::deserialize")]
    pub requests_per_minute: Option<u32>,
    /// Client-side token budget per minute, per quota group (or per key without a group).
    #[serde(deserialize_with = "whole::option::deserialize")]
    pub tokens_per_minute: Option<u32>,
    /// Client-side request budget per provider day (from 08:00 UTC), per quota group (or per
    /// key without a group); kept in the store, so a restart does not forget the day's spending.
    #[serde(deserialize_with = "whole::option::deserialize")]
    pub requests_per_day: Option<u32>,
    /// How long ingestion waits for a usable key before giving the work back.
    #[serde(deserialize_with = "whole::deserialize")]
    pub acquire_timeout_s: u64,
    /// How long a `/retrieve` query waits for a usable key before answering 429.
    #[serde(deserialize_with = "whole::deserialize")]
    pub query_wait_s: u64,
}

impl Default for SchedulingSettings {
    fn default() -> Self {
        Self {
            max_in_flight_per_key: 4,
            requests_per_minute: None,
            tokens_per_minute: None,
            requests_per_day: None,
            acquire_timeout_s: 30,
            query_wait_s: 5,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpenAiSettings {
    pub base_url: String,
    pub keys: Vec<SecretString>,
    /// Quota group shared by every configuration key.
    pub quota_group: Option<String>,
    pub scheduling: SchedulingSettings,
    /// Extra models served by an OpenAI-compatible server (file only: `[[providers.openai.models]]`).
    pub models: Vec<ExtraModel>,
    /// Seconds allowed to open a connection (TCP and TLS) to the server.
    #[serde(deserialize_with = "whole::deserialize")]
    pub connect_timeout_s: u64,
    /// Seconds allowed for one whole HTTP request, from sending to the end of the answer.
    #[serde(deserialize_with = "whole::deserialize")]
    pub request_timeout_s: u64,
    /// Most inputs in one `/embeddings` request (OpenAI takes 2048; TEI, Ollama and the like
    /// often far fewer). Larger work is split into several requests.
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_batch_size: usize,
    /// Most tokens summed over one `/embeddings` request (OpenAI: 300,000); also caps one input.
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_tokens_per_request: u64,
    /// How vectors are asked for: `base64` (little-endian f32, about half the bytes of decimal
    /// JSON and far cheaper to read) or `float` (for servers that refuse `base64`).
    pub encoding_format: EncodingFormat,
}

/// The `encoding_format` sent to an OpenAI-compatible `/embeddings` endpoint.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EncodingFormat {
    #[default]
    Base64,
    Float,
}

impl EncodingFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            EncodingFormat::Base64 => "base64",
            EncodingFormat::Float => "float",
        }
    }
}

/// An OpenAI-compatible model declared in configuration.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ExtraModel {
    pub name: String,
    /// Native output size.
    #[serde(deserialize_with = "whole::deserialize")]
    pub dimensions: u32,
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_input_tokens: u32,
    /// Whether the server accepts the `dimensions` request field (smaller outputs).
    #[serde(default)]
    pub dimensions_adjustable: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LocalSettings {
    pub model_dir: PathBuf,
    /// Batches of the local model computed at once (each uses the CPU fully).
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_concurrency: usize,
}

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
        let d = crate::providers::breaker::BreakerConfig::default();
        Self {
            failures_to_open: d.failures_to_open,
            open_s: d.open_for.as_secs_f64(),
            max_open_s: d.max_open_for.as_secs_f64(),
            failure_budget_s: d.failure_budget.as_secs_f64(),
        }
    }
}

impl BreakerSettings {
    pub fn config(&self) -> crate::providers::breaker::BreakerConfig {
        let secs = |s: f64| Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX);
        crate::providers::breaker::BreakerConfig {
            failures_to_open: self.failures_to_open,
            open_for: secs(self.open_s),
            max_open_for: secs(self.max_open_s),
            failure_budget: secs(self.failure_budget_s),
        }
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

impl Default for StoreSettings {
    fn default() -> Self {
        Self {
            url: SecretString::from("sqlite://data/quarry.db"),
        }
    }
}

impl Default for VectorSettings {
    fn default() -> Self {
        Self {
            kind: VectorKind::Embedded,
            path: PathBuf::from("data/vectors"),
            url: None,
            urls: Vec::new(),
            api_key: None,
            collection: crate::vector::settings::CollectionSettings::default(),
            search: crate::vector::settings::SearchSettings::default(),
        }
    }
}

impl Default for RemoteProviderSettings {
    fn default() -> Self {
        Self {
            base_url: "https://generativelanguage.googleapis.com/v1beta".into(),
            keys: Vec::new(),
            quota_group: None,
            scheduling: SchedulingSettings::default(),
            connect_timeout_s: DEFAULT_CONNECT_TIMEOUT_S,
            request_timeout_s: DEFAULT_REQUEST_TIMEOUT_S,
        }
    }
}

impl Default for OpenAiSettings {
    fn default() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".into(),
            keys: Vec::new(),
            quota_group: None,
            scheduling: SchedulingSettings::default(),
            models: Vec::new(),
            connect_timeout_s: DEFAULT_CONNECT_TIMEOUT_S,
            request_timeout_s: DEFAULT_REQUEST_TIMEOUT_S,
            max_batch_size: 2048,
            max_tokens_per_request: 300_000,
            encoding_format: EncodingFormat::Base64,
        }
    }
}

impl Default for LocalSettings {
    fn default() -> Self {
        Self {
            model_dir: PathBuf::from("models/all-minilm-l6-v2"),
            max_concurrency: 1,
        }
    }
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

impl Settings {
    /// Reads defaults, then `file` (required when given explicitly, else `quarry.toml` in the
    /// working directory if it exists), then the process environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_from(file, std::env::vars())
    }

    /// [`Settings::load`] with an explicit environment, for tests.
    pub fn load_from(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let file_source = match file {
            Some(path) => config::File::from(path).required(true),
            None => config::File::with_name("quarry.toml")
                .format(config::FileFormat::Toml)
                .required(false),
        };
        let env: config::Map<String, String> = env.into_iter().filter(|(k, _)| k.starts_with("QUARRY__")).collect();
        let mut environment = config::Environment::with_prefix("QUARRY")
            .prefix_separator("__")
            .separator("__")
            .list_separator(",")
            .try_parsing(true)
            .source(Some(env));
        for key in LIST_KEYS {
            environment = environment.with_list_parse_key(key);
        }
        let settings: Settings = config::Config::builder()
            .add_source(file_source)
            .add_source(environment)
            .build()
            .and_then(config::Config::try_deserialize)
            .map_err(|err| ConfigError(err.to_string()))?;
        settings.validate()?;
        Ok(settings)
    }

    /// Checks what the types alone cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |msg: String| Err(ConfigError(msg));
        if self.auth.tokens.iter().any(|t| t.expose_secret().trim().is_empty()) {
            return fail("auth.tokens contains an empty token".into());
        }
        if self.server.max_body_bytes < 1024 {
            return fail("server.max_body_bytes must be at least 1024".into());
        }
        if self.server.request_timeout_s == 0 {
            return fail("server.request_timeout_s must be at least 1".into());
        }
        if self.server.max_event_streams == 0 || self.server.max_event_streams_per_client == 0 {
            return fail("server.max_event_streams and server.max_event_streams_per_client must be at least 1".into());
        }
        if self.server.max_connections == 0
            || self.server.max_concurrent_uploads == 0
            || self.server.max_connections_per_client == 0
        {
            return fail(
                "server.max_connections, server.max_connections_per_client and server.max_concurrent_uploads must \
                 be at least 1"
                    .into(),
            );
        }
        if self.server.header_read_timeout_s == 0 {
            return fail("server.header_read_timeout_s must be at least 1".into());
        }
        // A request in progress sends nothing until it answers: a shorter idle timeout would cut
        // it. (Event streams send a keep-alive at least every third of the idle timeout.)
        if self.server.idle_timeout_s <= self.server.request_timeout_s {
            return fail(format!(
                "server.idle_timeout_s ({}) must be longer than server.request_timeout_s ({})",
                self.server.idle_timeout_s, self.server.request_timeout_s
            ));
        }
        if self.cluster.heartbeat_s == 0 {
            return fail("cluster.heartbeat_s must be at least 1".into());
        }
        if self.cluster.dead_after_s < 2 * self.cluster.heartbeat_s {
            return fail(format!(
                "cluster.dead_after_s ({}) must be at least twice cluster.heartbeat_s ({})",
                self.cluster.dead_after_s, self.cluster.heartbeat_s
            ));
        }
        let hooks = &self.webhooks;
        for (value, key) in [
            (hooks.timeout_s, "webhooks.timeout_s"),
            (hooks.first_retry_s, "webhooks.first_retry_s"),
            (u64::from(hooks.max_attempts), "webhooks.max_attempts"),
            (hooks.poll_interval_ms, "webhooks.poll_interval_ms"),
            (hooks.keep_deliveries_days, "webhooks.keep_deliveries_days"),
            (self.audit.keep_days, "audit.keep_days"),
            (self.telemetry.export_interval_ms, "telemetry.export_interval_ms"),
        ] {
            if value == 0 {
                return fail(format!("{key} must be at least 1"));
            }
        }
        if hooks.max_retry_s < hooks.first_retry_s {
            return fail(format!(
                "webhooks.max_retry_s ({}) must be at least webhooks.first_retry_s ({})",
                hooks.max_retry_s, hooks.first_retry_s
            ));
        }
        if let Some(endpoint) = &self.telemetry.otlp_endpoint
            && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            return fail(format!(
                "telemetry.otlp_endpoint must be an http:// or https:// URL (OTLP over HTTP), not `{endpoint}`"
            ));
        }
        if self.telemetry.service_name.trim().is_empty() {
            return fail("telemetry.service_name must not be empty".into());
        }
        let url = self.store.url.expose_secret();
        if !(url.starts_with("sqlite:") || url.starts_with("postgres:") || url.starts_with("postgresql:")) {
            return fail("store.url must start with sqlite: or postgres:".into());
        }
        if self.vectors.url.as_deref().is_some_and(|u| !u.is_empty()) && !self.vectors.urls.is_empty() {
            return fail("set vectors.url or vectors.urls, not both".into());
        }
        if self.vectors.kind == VectorKind::Qdrant {
            let urls = self.vectors.node_urls();
            if urls.is_empty() {
                return fail("vectors.url (or vectors.urls) is required when vectors.kind = \"qdrant\"".into());
            }
            if let Some(bad) = urls
                .iter()
                .find(|u| !(u.starts_with("http://") || u.starts_with("https://")) || u.len() <= "https://".len())
            {
                return fail(format!(
                    "vectors.urls: {bad:?} is not an http:// or https:// address of a Qdrant node's gRPC port"
                ));
            }
            let mut unique = urls.clone();
            unique.sort();
            unique.dedup();
            if unique.len() != urls.len() {
                return fail("vectors.urls lists a node twice".into());
            }
        }
        self.vectors
            .collection
            .validate(self.vectors.kind == VectorKind::Qdrant)
            .map_err(ConfigError)?;
        self.vectors
            .search
            .validate(self.vectors.collection.quantization)
            .map_err(ConfigError)?;
        if self.vectors.kind == VectorKind::Embedded && self.vectors.path.as_os_str().is_empty() {
            return fail("vectors.path must not be empty".into());
        }
        for (key, url) in [
            ("providers.google.base_url", &self.providers.google.base_url),
            ("providers.openai.base_url", &self.providers.openai.base_url),
        ] {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return fail(format!("{key} must be an http(s) URL"));
            }
        }
        for (key, connect, request) in [
            (
                "providers.google",
                self.providers.google.connect_timeout_s,
                self.providers.google.request_timeout_s,
            ),
            (
                "providers.openai",
                self.providers.openai.connect_timeout_s,
                self.providers.openai.request_timeout_s,
            ),
        ] {
            if connect == 0 {
                return fail(format!("{key}.connect_timeout_s must be at least 1"));
            }
            if request == 0 {
                return fail(format!("{key}.request_timeout_s must be at least 1"));
            }
        }
        if self.providers.openai.max_batch_size == 0 {
            return fail("providers.openai.max_batch_size must be at least 1".into());
        }
        if self.providers.openai.max_tokens_per_request == 0 {
            return fail("providers.openai.max_tokens_per_request must be at least 1".into());
        }
        for model in &self.providers.openai.models {
            if model.name.trim().is_empty() || model.dimensions == 0 || model.max_input_tokens == 0 {
                return fail(format!(
                    "providers.openai.models: model `{}` needs a name, dimensions > 0 and max_input_tokens > 0",
                    model.name
                ));
            }
        }
        // A collection name keeps only lower-case letters, digits and `-` of the model's name:
        // two models whose names differ only in case or punctuation would share a collection,
        // and embedding reuse could then hand one model's vectors to the other's chunks.
        let collection = |model: &str| {
            crate::domain::EmbeddingProfile {
                provider: crate::domain::ProviderKind::OpenAi,
                model: model.to_owned(),
                dimensions: 0,
            }
            .collection_name()
        };
        let mut names: Vec<&str> = crate::domain::BUILTIN_OPENAI_MODELS.to_vec();
        for model in &self.providers.openai.models {
            let name = model.name.as_str();
            if let Some(other) = names.iter().find(|n| **n != name && collection(n) == collection(name)) {
                return fail(format!(
                    "providers.openai.models: `{name}` and `{other}` differ only in case or punctuation, so \
                     their vectors would share one collection; configure only one of them"
                ));
            }
            names.push(name);
        }
        for (key, sched) in [
            ("providers.google.scheduling", &self.providers.google.scheduling),
            ("providers.openai.scheduling", &self.providers.openai.scheduling),
        ] {
            if sched.max_in_flight_per_key == 0 {
                return fail(format!("{key}.max_in_flight_per_key must be at least 1"));
            }
            if sched.requests_per_minute == Some(0) || sched.tokens_per_minute == Some(0) {
                return fail(format!(
                    "{key}: a per-minute budget must be at least 1 (leave it unset for none)"
                ));
            }
            if sched.requests_per_day == Some(0) {
                return fail(format!(
                    "{key}.requests_per_day must be at least 1 (leave it unset for none)"
                ));
            }
        }
        if self.providers.local.max_concurrency == 0 {
            return fail("providers.local.max_concurrency must be at least 1".into());
        }
        if self.embedding.max_attempts == 0 {
            return fail("embedding.max_attempts must be at least 1".into());
        }
        if self.embedding.lease_s == 0 {
            return fail("embedding.lease_s must be at least 1".into());
        }
        let breaker = &self.embedding.breaker;
        if breaker.failures_to_open == 0 {
            return fail("embedding.breaker.failures_to_open must be at least 1".into());
        }
        for (key, value) in [
            ("open_s", breaker.open_s),
            ("max_open_s", breaker.max_open_s),
            ("failure_budget_s", breaker.failure_budget_s),
        ] {
            if !(value.is_finite() && (0.0..=31_536_000.0).contains(&value)) {
                return fail(format!(
                    "embedding.breaker.{key} must be a number of seconds from 0 to one year"
                ));
            }
        }
        if breaker.max_open_s < breaker.open_s {
            return fail("embedding.breaker.max_open_s must be at least embedding.breaker.open_s".into());
        }
        if !(1..=MAX_CONTEXT_TOKENS).contains(&self.retrieval.max_context_tokens) {
            return fail(format!(
                "retrieval.max_context_tokens must be between 1 and {MAX_CONTEXT_TOKENS}"
            ));
        }
        if self.retrieval.full_context_threshold > MAX_CONTEXT_TOKENS {
            return fail(format!(
                "retrieval.full_context_threshold must be between 0 and {MAX_CONTEXT_TOKENS}"
            ));
        }
        self.master_key()?;
        Ok(())
    }

    /// Serving needs a way to authenticate: at least one token, or auth explicitly disabled.
    /// (Separate from [`Settings::validate`] so `quarry migrate` runs without tokens.)
    pub fn check_auth(&self) -> Result<(), ConfigError> {
        if self.auth.tokens.is_empty() && !self.auth.disabled {
            return Err(ConfigError(
                "auth.tokens is empty: set at least one bearer token (QUARRY__AUTH__TOKENS=...) \
                 or, for development only, auth.disabled = true"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The decoded master key, if one is configured.
    pub fn master_key(&self) -> Result<Option<[u8; 32]>, ConfigError> {
        match (&self.security.master_key, &self.security.master_key_file) {
            (Some(_), Some(_)) => Err(ConfigError(
                "security.master_key and security.master_key_file are both set; set one".into(),
            )),
            (Some(key), None) => self.master_key_bytes(key).map(Some),
            (None, Some(path)) => {
                // The file's content is never shown: only its path and what is wrong with it.
                let key = std::fs::read_to_string(path).map_err(|err| {
                    ConfigError(format!(
                        "security.master_key_file: cannot read {}: {}",
                        path.display(),
                        err.kind()
                    ))
                })?;
                self.master_key_bytes(&SecretString::from(key))
                    .map(Some)
                    .map_err(|err| {
                        ConfigError(format!("{err} (read from security.master_key_file {})", path.display()))
                    })
            }
            (None, None) => Ok(None),
        }
    }

    /// A master key as configured: base64 of 32 bytes (surrounding whitespace ignored).
    pub fn master_key_bytes(&self, key: &SecretString) -> Result<[u8; 32], ConfigError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(key.expose_secret().trim())
            .map_err(|_| ConfigError("security.master_key is not valid base64".into()))?;
        <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
            ConfigError(format!(
                "security.master_key must decode to 32 bytes, not {}",
                bytes.len()
            ))
        })
    }
}

/// Integer settings refuse fractions. The `config` crate would round `1.5` to `2` (environment values
/// are parsed as numbers, and TOML has floats), and a fraction for a count, a size or a number of
/// seconds is a mistake worth stopping for; a whole float such as `8.0` is accepted. The error
/// names the key, like every other configuration error.
pub(crate) mod whole {
    use std::fmt;
    use std::marker::PhantomData;

    use serde::de::{self, Deserializer, Unexpected, Visitor};

    pub fn deserialize<'de, D, T>(deserializer: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: TryFrom<i128>,
    {
        deserializer.deserialize_any(Whole(PhantomData))
    }

    struct Whole<T>(PhantomData<T>);

    fn fit<T: TryFrom<i128>, E: de::Error>(n: i128) -> Result<T, E> {
        T::try_from(n).map_err(|_| E::custom(format!("{n} is out of range")))
    }

    impl<'de, T: TryFrom<i128>> Visitor<'de> for Whole<T> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a whole number")
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            fit(i128::from(v))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            fit(i128::from(v))
        }

        fn visit_i128<E: de::Error>(self, v: i128) -> Result<T, E> {
            fit(v)
        }

        fn visit_u128<E: de::Error>(self, v: u128) -> Result<T, E> {
            i128::try_from(v)
                .map_err(|_| E::custom(format!("{v} is out of range")))
                .and_then(fit)
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
            // Whole and well inside i128: the cast is exact.
            if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e30 {
                fit(v as i128)
            } else {
                Err(E::invalid_value(Unexpected::Float(v), &self))
            }
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            match v.trim().parse::<i128>() {
                Ok(n) => fit(n),
                Err(_) => Err(E::invalid_value(Unexpected::Str(v), &self)),
            }
        }
    }

    pub mod option {
        use super::*;

        pub fn deserialize<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
        where
            D: Deserializer<'de>,
            T: TryFrom<i128>,
        {
            deserializer.deserialize_option(Maybe(PhantomData))
        }

        struct Maybe<T>(PhantomData<T>);

        impl<'de, T: TryFrom<i128>> Visitor<'de> for Maybe<T> {
            type Value = Option<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number or nothing")
            }

            fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
                Ok(None)
            }

            fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
                Ok(None)
            }

            fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<T>, D::Error> {
                super::deserialize(deserializer).map(Some)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_match_the_contract() {
        let s = Settings::load_from(None, env(&[("QUARRY__AUTH__TOKENS", "t1")])).unwrap();
        assert_eq!(s.server.addr.to_string(), "127.0.0.1:8080");
        assert_eq!(s.server.max_body_bytes, 16 * 1024 * 1024);
        assert_eq!(s.store.url.expose_secret(), "sqlite://data/quarry.db");
        assert_eq!(s.vectors.kind, VectorKind::Embedded);
        assert_eq!(s.vectors.path, PathBuf::from("data/vectors"));
        assert_eq!(s.embedding.workers, 8);
        assert_eq!(s.embedding.max_attempts, 3);
        assert_eq!(s.embedding.reuse, ReuseScope::World);
        assert_eq!(s.providers.local.model_dir, PathBuf::from("models/all-minilm-l6-v2"));
        assert!(s.providers.google.base_url.ends_with("/v1beta"));
        assert!(s.providers.openai.base_url.ends_with("/v1"));
        for (connect, request) in [
            (
                s.providers.google.connect_timeout_s,
                s.providers.google.request_timeout_s,
            ),
            (
                s.providers.openai.connect_timeout_s,
                s.providers.openai.request_timeout_s,
            ),
        ] {
            assert_eq!((connect, request), (5, 60));
        }
        assert_eq!(s.providers.openai.max_batch_size, 2048);
        assert_eq!(s.providers.openai.max_tokens_per_request, 300_000);
    }

    #[test]
    fn integer_keys_refuse_fractions_and_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("quarry.toml");
        let tokens = ("QUARRY__AUTH__TOKENS", "t");
        for (var, value, key) in [
            ("QUARRY__EMBEDDING__WORKERS", "1.5", "embedding.workers"),
            ("QUARRY__SERVER__REQUEST_TIMEOUT_S", "0.5", "server.request_timeout_s"),
            (
                "QUARRY__PROVIDERS__OPENAI__SCHEDULING__REQUESTS_PER_MINUTE",
                "2.5",
                "providers.openai.scheduling.requests_per_minute",
            ),
            ("QUARRY__EMBEDDING__MAX_ATTEMPTS", "-1", "embedding.max_attempts"),
        ] {
            let err = Settings::load_from(None, env(&[tokens, (var, value)])).unwrap_err();
            assert!(err.0.contains(key), "{var}={value}: {err}");
        }
        std::fs::write(&path, "[embedding]\nworkers = 2.5\n").unwrap();
        let err = Settings::load_from(Some(&path), env(&[tokens])).unwrap_err();
        assert!(err.0.contains("embedding.workers"), "{err}");
        std::fs::write(&path, "[providers.google.scheduling]\nrequests_per_minute = 59.9\n").unwrap();
        let err = Settings::load_from(Some(&path), env(&[tokens])).unwrap_err();
        assert!(
            err.0.contains("providers.google.scheduling.requests_per_minute"),
            "{err}"
        );

        // Whole numbers are taken as they are, written as integers or as whole floats.
        std::fs::write(
            &path,
            "[embedding]\nworkers = 4.0\n[providers.google.scheduling]\nrequests_per_minute = 60\n",
        )
        .unwrap();
        let s = Settings::load_from(
            Some(&path),
            env(&[
                tokens,
                ("QUARRY__EMBEDDING__MAX_ATTEMPTS", "7"),
                ("QUARRY__PROVIDERS__OPENAI__SCHEDULING__REQUESTS_PER_MINUTE", "300"),
            ]),
        )
        .unwrap();
        assert_eq!(s.embedding.workers, 4);
        assert_eq!(s.embedding.max_attempts, 7);
        assert_eq!(s.providers.google.scheduling.requests_per_minute, Some(60));
        assert_eq!(s.providers.openai.scheduling.requests_per_minute, Some(300));
    }

    #[test]
    fn adapter_options_come_from_file_and_environment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("quarry.toml");
        std::fs::write(
            &path,
            "[providers.google]\nconnect_timeout_s = 3\nrequest_timeout_s = 20\n\
             [providers.openai]\nmax_batch_size = 64\nmax_tokens_per_request = 100000\n\
             encoding_format = \"float\"\n",
        )
        .unwrap();
        let s = Settings::load_from(
            Some(&path),
            env(&[
                ("QUARRY__AUTH__TOKENS", "t"),
                ("QUARRY__PROVIDERS__GOOGLE__REQUEST_TIMEOUT_S", "30"),
                ("QUARRY__PROVIDERS__OPENAI__CONNECT_TIMEOUT_S", "2"),
                ("QUARRY__PROVIDERS__OPENAI__REQUEST_TIMEOUT_S", "15"),
                ("QUARRY__PROVIDERS__OPENAI__MAX_BATCH_SIZE", "32"),
            ]),
        )
        .unwrap();
        assert_eq!(s.providers.google.connect_timeout_s, 3);
        assert_eq!(s.providers.google.request_timeout_s, 30);
        assert_eq!(s.providers.openai.connect_timeout_s, 2);
        assert_eq!(s.providers.openai.request_timeout_s, 15);
        assert_eq!(s.providers.openai.max_batch_size, 32);
        assert_eq!(s.providers.openai.max_tokens_per_request, 100_000);
        assert_eq!(s.providers.openai.encoding_format, EncodingFormat::Float);
        let from_env = Settings::load_from(
            None,
            env(&[
                ("QUARRY__AUTH__TOKENS", "t"),
                ("QUARRY__PROVIDERS__OPENAI__ENCODING_FORMAT", "float"),
            ]),
        )
        .unwrap();
        assert_eq!(from_env.providers.openai.encoding_format, EncodingFormat::Float);
        let default = Settings::load_from(None, env(&[("QUARRY__AUTH__TOKENS", "t")])).unwrap();
        assert_eq!(default.providers.openai.encoding_format, EncodingFormat::Base64);
    }

    #[test]
    fn invalid_adapter_options_name_their_key() {
        for (var, value, key) in [
            (
                "QUARRY__PROVIDERS__GOOGLE__CONNECT_TIMEOUT_S",
                "0",
                "providers.google.connect_timeout_s",
            ),
            (
                "QUARRY__PROVIDERS__GOOGLE__REQUEST_TIMEOUT_S",
                "soon",
                "providers.google.request_timeout_s",
            ),
            (
                "QUARRY__PROVIDERS__OPENAI__CONNECT_TIMEOUT_S",
                "-1",
                "providers.openai.connect_timeout_s",
            ),
            (
                "QUARRY__PROVIDERS__OPENAI__REQUEST_TIMEOUT_S",
                "0",
                "providers.openai.request_timeout_s",
            ),
            (
                "QUARRY__PROVIDERS__OPENAI__MAX_BATCH_SIZE",
                "0",
                "providers.openai.max_batch_size",
            ),
            (
                "QUARRY__PROVIDERS__OPENAI__MAX_BATCH_SIZE",
                "many",
                "providers.openai.max_batch_size",
            ),
            (
                "QUARRY__PROVIDERS__OPENAI__MAX_TOKENS_PER_REQUEST",
                "0",
                "providers.openai.max_tokens_per_request",
            ),
            (
                "QUARRY__PROVIDERS__OPENAI__MAX_TOKENS_PER_REQUEST",
                "plenty",
                "providers.openai.max_tokens_per_request",
            ),
            (
                "QUARRY__PROVIDERS__OPENAI__ENCODING_FORMAT",
                "xml",
                "providers.openai.encoding_format",
            ),
        ] {
            let err = Settings::load_from(None, env(&[("QUARRY__AUTH__TOKENS", "t"), (var, value)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{var}={value}: {err}");
        }
    }

    #[test]
    fn environment_overrides_file_and_splits_lists() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("quarry.toml");
        std::fs::write(
            &path,
            "[server]\naddr = \"0.0.0.0:9000\"\nmax_body_bytes = 2048\n[auth]\ntokens = [\"from-file\"]\n\
             [[providers.openai.models]]\nname = \"nomic\"\ndimensions = 768\nmax_input_tokens = 2048\n",
        )
        .unwrap();
        let s = Settings::load_from(
            Some(&path),
            env(&[
                ("QUARRY__SERVER__MAX_BODY_BYTES", "4096"),
                ("QUARRY__PROVIDERS__GOOGLE__KEYS", "k1,k2,k3"),
                ("QUARRY__PROVIDERS__RERANK__KEYS", "r1,r2"),
                ("QUARRY__AUTH__TOKENS", "a,b"),
            ]),
        )
        .unwrap();
        assert_eq!(s.server.addr.to_string(), "0.0.0.0:9000");
        assert_eq!(s.server.max_body_bytes, 4096);
        let keys: Vec<_> = s
            .providers
            .google
            .keys
            .iter()
            .map(|k| k.expose_secret().to_owned())
            .collect();
        assert_eq!(keys, ["k1", "k2", "k3"]);
        assert_eq!(s.providers.rerank.keys.len(), 2, "the reranker's keys are a list too");
        assert_eq!(s.auth.tokens.len(), 2);
        assert_eq!(s.providers.openai.models[0].name, "nomic");
    }

    #[test]
    fn models_that_would_share_a_collection_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("quarry.toml");
        let model = |name: &str| {
            format!("[[providers.openai.models]]\nname = \"{name}\"\ndimensions = 768\nmax_input_tokens = 2048\n")
        };
        for (a, b) in [("org/m.v1", "org_m_v1"), ("nomic", "Nomic")] {
            std::fs::write(&path, format!("[auth]\ntokens = [\"t\"]\n{}{}", model(a), model(b))).unwrap();
            let err = Settings::load_from(Some(&path), env(&[])).unwrap_err().to_string();
            assert!(
                err.contains("share one collection") && err.contains(a) && err.contains(b),
                "{err}"
            );
        }
        // The same name twice is one model, not a clash.
        std::fs::write(
            &path,
            format!("[auth]\ntokens = [\"t\"]\n{}{}", model("nomic"), model("nomic")),
        )
        .unwrap();
        assert!(Settings::load_from(Some(&path), env(&[])).is_ok());
        std::fs::write(
            &path,
            format!("[auth]\ntokens = [\"t\"]\n{}", model("Text-Embedding-3-Small")),
        )
        .unwrap();
        let err = Settings::load_from(Some(&path), env(&[])).unwrap_err().to_string();
        assert!(err.contains("text-embedding-3-small"), "{err}");
    }

    #[test]
    fn vector_cluster_settings_come_from_the_environment_and_bad_ones_name_their_key() {
        use crate::vector::settings::Quantization;
        let s = Settings::load_from(
            None,
            env(&[
                ("QUARRY__AUTH__TOKENS", "t"),
                ("QUARRY__VECTORS__KIND", "qdrant"),
                ("QUARRY__VECTORS__URLS", "http://q0:6334,http://q1:6334,http://q2:6334"),
                ("QUARRY__VECTORS__COLLECTION__REPLICATION_FACTOR", "2"),
                ("QUARRY__VECTORS__COLLECTION__SHARD_NUMBER", "6"),
                ("QUARRY__VECTORS__COLLECTION__QUANTIZATION", "int8"),
                ("QUARRY__VECTORS__COLLECTION__ALWAYS_RAM", "true"),
                ("QUARRY__VECTORS__COLLECTION__ON_DISK", "true"),
                ("QUARRY__VECTORS__SEARCH__HNSW_EF", "128"),
                ("QUARRY__VECTORS__SEARCH__OVERSAMPLING", "2.5"),
            ]),
        )
        .unwrap();
        assert_eq!(s.vectors.node_urls().len(), 3);
        assert_eq!(s.vectors.collection.replication_factor, Some(2));
        assert_eq!(s.vectors.collection.shard_number, Some(6));
        assert_eq!(s.vectors.collection.quantization, Quantization::Int8);
        assert_eq!(s.vectors.collection.always_ram, Some(true));
        assert_eq!(s.vectors.collection.on_disk, Some(true));
        assert_eq!(s.vectors.search.hnsw_ef, Some(128));
        assert_eq!(s.vectors.search.oversampling, Some(2.5));

        for (pairs, wanted) in [
            (
                vec![("QUARRY__VECTORS__COLLECTION__REPLICATION_FACTOR", "2")],
                "vectors.collection.replication_factor applies only",
            ),
            (
                vec![("QUARRY__VECTORS__COLLECTION__QUANTIZATION", "int4")],
                "quantization",
            ),
            (
                vec![("QUARRY__VECTORS__COLLECTION__HNSW_M", "1")],
                "vectors.collection.hnsw_m",
            ),
            (
                vec![("QUARRY__VECTORS__SEARCH__RESCORE", "false")],
                "vectors.search.rescore",
            ),
            (vec![("QUARRY__VECTORS__COLLECTION__HNSW_M", "20.5")], "hnsw_m"),
            (vec![("QUARRY__VECTORS__SEARCH__HNSW_EFF", "1")], "hnsw_eff"),
            (
                vec![
                    ("QUARRY__VECTORS__KIND", "qdrant"),
                    ("QUARRY__VECTORS__URLS", "http://q0:6334,q1:6334"),
                ],
                "vectors.urls",
            ),
            (
                vec![
                    ("QUARRY__VECTORS__KIND", "qdrant"),
                    ("QUARRY__VECTORS__URL", "http://q0:6334"),
                    ("QUARRY__VECTORS__URLS", "http://q1:6334"),
                ],
                "vectors.url or vectors.urls",
            ),
        ] {
            let mut all = vec![("QUARRY__AUTH__TOKENS", "t")];
            all.extend(pairs);
            let err = Settings::load_from(None, env(&all)).unwrap_err().to_string();
            assert!(err.contains(wanted), "{wanted}: {err}");
        }
    }

    #[test]
    fn invalid_values_name_their_key() {
        let err = Settings::load_from(
            None,
            env(&[
                ("QUARRY__AUTH__TOKENS", "t"),
                ("QUARRY__SERVER__MAX_BODY_BYTES", "lots"),
            ]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("server.max_body_bytes"), "{err}");

        let err = Settings::load_from(
            None,
            env(&[("QUARRY__AUTH__TOKENS", "t"), ("QUARRY__VECTORS__KIND", "faiss")]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("vectors.kind"), "{err}");

        let err = Settings::load_from(
            None,
            env(&[
                ("QUARRY__AUTH__TOKENS", "t"),
                ("QUARRY__SECURITY__MASTER_KEY", "c2hvcnQ="),
            ]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("security.master_key"), "{err}");

        // The key from a file, as container secrets are mounted; never both.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("master.key");
        std::fs::write(&file, "  AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n").unwrap();
        let from_file = Settings::load_from(
            None,
            env(&[
                ("QUARRY__AUTH__TOKENS", "t"),
                ("QUARRY__SECURITY__MASTER_KEY_FILE", file.to_str().unwrap()),
            ]),
        )
        .unwrap();
        let expected: Vec<u8> = (0u8..32).collect();
        assert_eq!(from_file.master_key().unwrap().unwrap().to_vec(), expected);
        for (extra, needle) in [
            (
                Some((
                    "QUARRY__SECURITY__MASTER_KEY",
                    "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
                )),
                "both set",
            ),
            (None, "master_key_file"),
        ] {
            let missing = dir.path().join("missing.key");
            let path = if extra.is_some() {
                file.to_str().unwrap()
            } else {
                missing.to_str().unwrap()
            };
            let mut vars = vec![
                ("QUARRY__AUTH__TOKENS", "t"),
                ("QUARRY__SECURITY__MASTER_KEY_FILE", path),
            ];
            vars.extend(extra);
            let err = Settings::load_from(None, env(&vars)).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
        std::fs::write(&file, "c2hvcnQ=").unwrap();
        let err = Settings::load_from(
            None,
            env(&[
                ("QUARRY__AUTH__TOKENS", "t"),
                ("QUARRY__SECURITY__MASTER_KEY_FILE", file.to_str().unwrap()),
            ]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("32 bytes") && !err.contains("c2hvcnQ"), "{err}");

        let err = Settings::load_from(
            None,
            env(&[("QUARRY__AUTH__TOKENS", "t"), ("QUARRY__VECTORS__KIND", "qdrant")]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("vectors.url"), "{err}");
    }

    #[test]
    fn cluster_and_daily_budget_settings_are_checked() {
        let s = Settings::load_from(None, env(&[])).unwrap();
        assert_eq!((s.cluster.heartbeat_s, s.cluster.dead_after_s), (5, 30));
        assert!(s.cluster.shares_budgets("postgres") && !s.cluster.shares_budgets("sqlite"));
        let s = Settings::load_from(None, env(&[("QUARRY__CLUSTER__SHARED_BUDGETS", "true")])).unwrap();
        assert!(s.cluster.shares_budgets("sqlite"));
        for (vars, key) in [
            (&[("QUARRY__CLUSTER__HEARTBEAT_S", "0")][..], "cluster.heartbeat_s"),
            (
                &[
                    ("QUARRY__CLUSTER__HEARTBEAT_S", "10"),
                    ("QUARRY__CLUSTER__DEAD_AFTER_S", "15"),
                ][..],
                "cluster.dead_after_s",
            ),
            (
                &[("QUARRY__PROVIDERS__GOOGLE__SCHEDULING__REQUESTS_PER_DAY", "0")][..],
                "providers.google.scheduling.requests_per_day",
            ),
            (&[("QUARRY__WEBHOOKS__MAX_ATTEMPTS", "0")][..], "webhooks.max_attempts"),
            (
                &[
                    ("QUARRY__WEBHOOKS__FIRST_RETRY_S", "60"),
                    ("QUARRY__WEBHOOKS__MAX_RETRY_S", "30"),
                ][..],
                "webhooks.max_retry_s",
            ),
        ] {
            let err = Settings::load_from(None, env(vars))
                .and_then(|s| s.validate().map(|()| s))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key), "{vars:?}: {err}");
        }
    }

    #[test]
    fn html_pages_keep_their_main_content_unless_told_otherwise() {
        use crate::chunking::HtmlContent;
        let s = Settings::load_from(None, env(&[])).unwrap();
        assert_eq!(s.sources.html, HtmlContent::Main);
        let s = Settings::load_from(None, env(&[("QUARRY__SOURCES__HTML", "all")])).unwrap();
        assert_eq!(s.sources.html, HtmlContent::All);
        let err = Settings::load_from(None, env(&[("QUARRY__SOURCES__HTML", "some")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("sources.html"), "{err}");
    }

    #[test]
    fn the_context_budget_is_set_and_checked() {
        let s = Settings::load_from(None, env(&[])).unwrap();
        assert_eq!(s.retrieval.max_context_tokens, 32_768);
        let s = Settings::load_from(None, env(&[("QUARRY__RETRIEVAL__MAX_CONTEXT_TOKENS", "4000")])).unwrap();
        assert_eq!(s.retrieval.max_context_tokens, 4000);
        for bad in ["0", "1048577"] {
            let err = Settings::load_from(None, env(&[("QUARRY__RETRIEVAL__MAX_CONTEXT_TOKENS", bad)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains("retrieval.max_context_tokens"), "{bad}: {err}");
        }
        assert_eq!(s.retrieval.full_context_threshold, 30_000);
        let s = Settings::load_from(None, env(&[("QUARRY__RETRIEVAL__FULL_CONTEXT_THRESHOLD", "0")])).unwrap();
        assert_eq!(s.retrieval.full_context_threshold, 0);
        let err = Settings::load_from(None, env(&[("QUARRY__RETRIEVAL__FULL_CONTEXT_THRESHOLD", "1048577")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("retrieval.full_context_threshold"), "{err}");
    }

    #[test]
    fn missing_tokens_refuse_to_start_unless_auth_is_disabled() {
        let err = Settings::load_from(None, env(&[]))
            .unwrap()
            .check_auth()
            .unwrap_err()
            .to_string();
        assert!(err.contains("auth.tokens"), "{err}");
        let disabled = Settings::load_from(None, env(&[("QUARRY__AUTH__DISABLED", "true")])).unwrap();
        assert!(disabled.check_auth().is_ok());
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let s = Settings::load_from(
            None,
            env(&[
                ("QUARRY__AUTH__TOKENS", "tok-visible-if-leaked"),
                ("QUARRY__PROVIDERS__OPENAI__KEYS", "sk-visible-if-leaked"),
                (
                    "QUARRY__SECURITY__MASTER_KEY",
                    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
                ),
                ("QUARRY__STORE__URL", "postgres://u:pw-visible-if-leaked@h/db"),
            ]),
        )
        .unwrap();
        let debug = format!("{s:?}");
        assert!(!debug.contains("visible-if-leaked"), "{debug}");
        assert!(!debug.contains("AAAAAAAA"), "{debug}");
        assert_eq!(s.master_key().unwrap(), Some([0u8; 32]));
    }
}
