//! `[providers.*]`: the remote embedding providers (Google AI Studio, OpenAI and compatible
//! servers), the local model, the reranker, and how the key scheduler paces each.

use std::path::PathBuf;

use secrecy::SecretString;
use serde::Deserialize;

use super::{ConfigError, whole};

/// Default seconds to open a connection to a remote provider.
const DEFAULT_CONNECT_TIMEOUT_S: u64 = 5;
/// Default seconds for one whole request to a remote provider.
const DEFAULT_REQUEST_TIMEOUT_S: u64 = 60;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderSettings {
    pub google: RemoteProviderSettings,
    pub openai: OpenAiSettings,
    pub local: LocalSettings,
    pub rerank: RerankSettings,
}

impl ProviderSettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let fail = |msg: String| Err(ConfigError(msg));
        for (key, url) in [
            ("providers.google.base_url", &self.google.base_url),
            ("providers.openai.base_url", &self.openai.base_url),
        ] {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return fail(format!("{key} must be an http(s) URL"));
            }
        }
        for (key, connect, request) in [
            (
                "providers.google",
                self.google.connect_timeout_s,
                self.google.request_timeout_s,
            ),
            (
                "providers.openai",
                self.openai.connect_timeout_s,
                self.openai.request_timeout_s,
            ),
        ] {
            if connect == 0 {
                return fail(format!("{key}.connect_timeout_s must be at least 1"));
            }
            if request == 0 {
                return fail(format!("{key}.request_timeout_s must be at least 1"));
            }
        }
        self.openai.validate()?;
        self.google.scheduling.validate("providers.google.scheduling")?;
        self.openai.scheduling.validate("providers.openai.scheduling")?;
        if self.local.max_concurrency == 0 {
            return fail("providers.local.max_concurrency must be at least 1".into());
        }
        Ok(())
    }
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

impl SchedulingSettings {
    fn validate(&self, key: &str) -> Result<(), ConfigError> {
        if self.max_in_flight_per_key == 0 {
            return Err(ConfigError(format!("{key}.max_in_flight_per_key must be at least 1")));
        }
        if self.requests_per_minute == Some(0) || self.tokens_per_minute == Some(0) {
            return Err(ConfigError(format!(
                "{key}: a per-minute budget must be at least 1 (leave it unset for none)"
            )));
        }
        if self.requests_per_day == Some(0) {
            return Err(ConfigError(format!(
                "{key}.requests_per_day must be at least 1 (leave it unset for none)"
            )));
        }
        Ok(())
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

impl OpenAiSettings {
    fn validate(&self) -> Result<(), ConfigError> {
        let fail = |msg: String| Err(ConfigError(msg));
        if self.max_batch_size == 0 {
            return fail("providers.openai.max_batch_size must be at least 1".into());
        }
        if self.max_tokens_per_request == 0 {
            return fail("providers.openai.max_tokens_per_request must be at least 1".into());
        }
        for model in &self.models {
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
        for model in &self.models {
            let name = model.name.as_str();
            if let Some(other) = names.iter().find(|n| **n != name && collection(n) == collection(name)) {
                return fail(format!(
                    "providers.openai.models: `{name}` and `{other}` differ only in case or punctuation, so \
                     their vectors would share one collection; configure only one of them"
                ));
            }
            names.push(name);
        }
        Ok(())
    }
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

impl Default for LocalSettings {
    fn default() -> Self {
        Self {
            model_dir: PathBuf::from("models/all-minilm-l6-v2"),
            max_concurrency: 1,
        }
    }
}
