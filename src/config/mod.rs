//! Configuration: built-in defaults < `quarry.toml` < `QUARRY__SECTION__KEY` environment
//! variables (lists comma-separated), read with the `config` crate and checked once at
//! startup. Every problem is reported with the key that holds it, and startup stops.
//!
//! Secrets (bearer tokens, provider keys, the master key, the store URL, which may hold a
//! password, and the Qdrant API key) are `secrecy` types: their `Debug` output is redacted
//! and they are only exposed where they are used.

use std::path::Path;

use base64::Engine as _;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

mod embedding;
mod providers;
mod server;
mod services;
mod store;
mod vectors;
pub(crate) mod whole;

pub use embedding::{BreakerSettings, EmbeddingSettings, ReuseScope};
pub use providers::{
    EncodingFormat, ExtraModel, LocalSettings, OpenAiSettings, ProviderSettings, RemoteProviderSettings,
    RerankSettings, SchedulingSettings,
};
pub use server::{AuthSettings, SecuritySettings, ServerSettings};
pub use services::{
    AuditSettings, MAX_CONTEXT_TOKENS, RetrievalSettings, SourcesSettings, TelemetrySettings, WebhookSettings,
};
pub use store::{ClusterSettings, StoreSettings};
pub use vectors::{CollectionSettings, Quantization, SearchSettings, VectorKind, VectorSettings};

/// Keys whose environment value is a comma-separated list.
const LIST_KEYS: [&str; 6] = [
    "auth.tokens",
    "webhooks.allowed_networks",
    "vectors.urls",
    "providers.google.keys",
    "providers.openai.keys",
    "providers.rerank.keys",
];

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

    /// Checks what the types alone cannot express, section by section (each section's rules
    /// are beside its struct).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.auth.validate()?;
        self.server.validate()?;
        self.cluster.validate()?;
        self.webhooks.validate()?;
        self.audit.validate()?;
        self.telemetry.validate()?;
        self.store.validate()?;
        self.vectors.validate()?;
        self.providers.validate()?;
        self.embedding.validate()?;
        self.retrieval.validate()?;
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

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
        use super::Quantization;
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
