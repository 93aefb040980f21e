//! `[vectors]`, `[vectors.collection]` and `[vectors.search]`: which vector store, how its
//! collections are laid out and how every dense search runs. (Comparing an existing
//! collection with these settings is the vector module's: `vector::settings::drift`.)

use std::fmt;
use std::path::PathBuf;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::{ConfigError, whole};

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
    pub collection: CollectionSettings,
    pub search: SearchSettings,
}

impl Default for VectorSettings {
    fn default() -> Self {
        Self {
            kind: VectorKind::Embedded,
            path: PathBuf::from("data/vectors"),
            url: None,
            urls: Vec::new(),
            api_key: None,
            collection: CollectionSettings::default(),
            search: SearchSettings::default(),
        }
    }
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

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let fail = |msg: String| Err(ConfigError(msg));
        if self.url.as_deref().is_some_and(|u| !u.is_empty()) && !self.urls.is_empty() {
            return fail("set vectors.url or vectors.urls, not both".into());
        }
        if self.kind == VectorKind::Qdrant {
            let urls = self.node_urls();
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
        self.collection
            .validate(self.kind == VectorKind::Qdrant)
            .map_err(ConfigError)?;
        self.search
            .validate(self.collection.quantization)
            .map_err(ConfigError)?;
        if self.kind == VectorKind::Embedded && self.path.as_os_str().is_empty() {
            return fail("vectors.path must not be empty".into());
        }
        Ok(())
    }
}

/// Vector quantization of the dense vector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Quantization {
    /// Full-precision float32 vectors only.
    #[default]
    None,
    /// Qdrant's scalar int8 quantization: a quarter of the RAM; searches use the int8 copy and
    /// rescore the best candidates with the originals.
    Int8,
}

impl fmt::Display for Quantization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Quantization::None => "none",
            Quantization::Int8 => "int8",
        })
    }
}

/// `[vectors.collection]`: applied when a profile collection is created.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CollectionSettings {
    /// Shards per collection (server only; unset: Qdrant's default, one per node). Fixed at
    /// creation.
    #[serde(deserialize_with = "whole::option::deserialize")]
    pub shard_number: Option<u32>,
    /// Copies of every shard (server only; unset: 1). Fixed at creation as far as quarry is
    /// concerned.
    #[serde(deserialize_with = "whole::option::deserialize")]
    pub replication_factor: Option<u32>,
    /// Copies that must confirm a write before it counts (server only; unset: 1).
    #[serde(deserialize_with = "whole::option::deserialize")]
    pub write_consistency_factor: Option<u32>,
    /// Original float32 vectors on disk (memory-mapped) instead of RAM.
    pub on_disk: Option<bool>,
    /// Payloads on disk instead of RAM.
    pub on_disk_payload: Option<bool>,
    pub quantization: Quantization,
    /// With `int8`: keep the quantized vectors in RAM even when the originals are on disk.
    pub always_ram: Option<bool>,
    /// HNSW links per node (0: no global graph; needs `hnsw_payload_m`).
    #[serde(deserialize_with = "whole::option::deserialize")]
    pub hnsw_m: Option<u32>,
    /// HNSW links per node inside each world's own graph (Qdrant's `payload_m`; unset: as
    /// `hnsw_m`). With `hnsw_m = 0` this is the per-tenant layout Qdrant suggests for many
    /// tenants in one collection: every world gets its own graph and there is no global one.
    #[serde(deserialize_with = "whole::option::deserialize")]
    pub hnsw_payload_m: Option<u32>,
    /// HNSW candidates considered while building.
    #[serde(deserialize_with = "whole::option::deserialize")]
    pub hnsw_ef_construct: Option<u32>,
}

/// `[vectors.search]`: how every dense search runs.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchSettings {
    /// HNSW beam width of a search (unset: Qdrant's default, the index's `ef_construct`).
    #[serde(deserialize_with = "whole::option::deserialize")]
    pub hnsw_ef: Option<u32>,
    /// Bounds on a `/retrieve` request's own `hnsw_ef`.
    #[serde(deserialize_with = "whole::deserialize")]
    pub min_hnsw_ef: u32,
    #[serde(deserialize_with = "whole::deserialize")]
    pub max_hnsw_ef: u32,
    /// With `int8`: rescore the candidates with the original vectors (default true).
    pub rescore: Option<bool>,
    /// With `int8`: candidates taken from the quantized index per result, ≥ 1 (unset: 1).
    pub oversampling: Option<f64>,
}

impl Default for SearchSettings {
    fn default() -> Self {
        Self {
            hnsw_ef: None,
            min_hnsw_ef: 16,
            max_hnsw_ef: 1024,
            rescore: None,
            oversampling: None,
        }
    }
}

/// The most shards, replicas or HNSW links a setting may ask for: far beyond sensible values,
/// well before Qdrant's own limits.
const MAX_SHARDS: u32 = 1024;
const MAX_REPLICAS: u32 = 16;
const MAX_HNSW_M: u32 = 128;
const MAX_EF: u32 = 4096;
const MAX_OVERSAMPLING: f64 = 16.0;

impl CollectionSettings {
    /// Checks the settings for a backend; the message names the key. `server` is false for the
    /// embedded backend, which has one shard and no replicas.
    pub fn validate(&self, server: bool) -> Result<(), String> {
        let key = |name: &str| format!("vectors.collection.{name}");
        if !server {
            for (name, set) in [
                ("shard_number", self.shard_number.is_some()),
                ("replication_factor", self.replication_factor.is_some()),
                ("write_consistency_factor", self.write_consistency_factor.is_some()),
            ] {
                if set {
                    return Err(format!(
                        "{} applies only to vectors.kind = \"qdrant\" (the embedded store has one shard and no replicas)",
                        key(name)
                    ));
                }
            }
        }
        for (name, value, max) in [
            ("shard_number", self.shard_number, MAX_SHARDS),
            ("replication_factor", self.replication_factor, MAX_REPLICAS),
            ("write_consistency_factor", self.write_consistency_factor, MAX_REPLICAS),
        ] {
            if let Some(value) = value
                && !(1..=max).contains(&value)
            {
                return Err(format!("{} must be between 1 and {max} (got {value})", key(name)));
            }
        }
        let replicas = self.replication_factor.unwrap_or(1);
        if let Some(wcf) = self.write_consistency_factor
            && wcf > replicas
        {
            return Err(format!(
                "{} ({wcf}) must not exceed vectors.collection.replication_factor ({replicas}): no write could ever be confirmed",
                key("write_consistency_factor")
            ));
        }
        if let Some(m) = self.hnsw_payload_m
            && !(4..=MAX_HNSW_M).contains(&m)
        {
            return Err(format!(
                "{} must be between 4 and {MAX_HNSW_M} (got {m})",
                key("hnsw_payload_m")
            ));
        }
        match self.hnsw_m {
            Some(0) if self.hnsw_payload_m.is_none() => {
                return Err(format!(
                    "{} = 0 (no global graph) needs vectors.collection.hnsw_payload_m (the per-world graphs)",
                    key("hnsw_m")
                ));
            }
            Some(m) if m != 0 && !(4..=MAX_HNSW_M).contains(&m) => {
                return Err(format!(
                    "{} must be 0 or between 4 and {MAX_HNSW_M} (got {m})",
                    key("hnsw_m")
                ));
            }
            _ => {}
        }
        if let Some(ef) = self.hnsw_ef_construct
            && !(4..=MAX_EF).contains(&ef)
        {
            return Err(format!(
                "{} must be between 4 and {MAX_EF} (got {ef})",
                key("hnsw_ef_construct")
            ));
        }
        if self.always_ram.is_some() && self.quantization == Quantization::None {
            return Err(format!(
                "{} needs vectors.collection.quantization = \"int8\"",
                key("always_ram")
            ));
        }
        Ok(())
    }
}

impl SearchSettings {
    /// Checks the settings; the message names the key.
    pub fn validate(&self, quantization: Quantization) -> Result<(), String> {
        let key = |name: &str| format!("vectors.search.{name}");
        if self.min_hnsw_ef == 0 || self.min_hnsw_ef > self.max_hnsw_ef || self.max_hnsw_ef > MAX_EF {
            return Err(format!(
                "{} and {} must satisfy 1 <= min_hnsw_ef <= max_hnsw_ef <= {MAX_EF} (got {} and {})",
                key("min_hnsw_ef"),
                key("max_hnsw_ef"),
                self.min_hnsw_ef,
                self.max_hnsw_ef
            ));
        }
        if let Some(ef) = self.hnsw_ef
            && !(self.min_hnsw_ef..=self.max_hnsw_ef).contains(&ef)
        {
            return Err(format!(
                "{} ({ef}) must be between vectors.search.min_hnsw_ef ({}) and vectors.search.max_hnsw_ef ({})",
                key("hnsw_ef"),
                self.min_hnsw_ef,
                self.max_hnsw_ef
            ));
        }
        if quantization == Quantization::None {
            for (name, set) in [
                ("rescore", self.rescore.is_some()),
                ("oversampling", self.oversampling.is_some()),
            ] {
                if set {
                    return Err(format!(
                        "{} needs vectors.collection.quantization = \"int8\"",
                        key(name)
                    ));
                }
            }
        }
        if let Some(o) = self.oversampling
            && !(o.is_finite() && (1.0..=MAX_OVERSAMPLING).contains(&o))
        {
            return Err(format!(
                "{} must be between 1 and {MAX_OVERSAMPLING} (got {o})",
                key("oversampling")
            ));
        }
        Ok(())
    }

    /// The beam width for one search: the request's own (already checked against the bounds)
    /// or the configured one.
    pub fn ef(&self, requested: Option<u32>) -> Option<u32> {
        requested.or(self.hnsw_ef)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_name_their_key() {
        let cases: [(CollectionSettings, bool, &str); 6] = [
            (
                CollectionSettings {
                    replication_factor: Some(2),
                    ..CollectionSettings::default()
                },
                false,
                "vectors.collection.replication_factor applies only",
            ),
            (
                CollectionSettings {
                    shard_number: Some(0),
                    ..CollectionSettings::default()
                },
                true,
                "vectors.collection.shard_number must be between 1",
            ),
            (
                CollectionSettings {
                    replication_factor: Some(2),
                    write_consistency_factor: Some(3),
                    ..CollectionSettings::default()
                },
                true,
                "vectors.collection.write_consistency_factor (3) must not exceed",
            ),
            (
                CollectionSettings {
                    hnsw_m: Some(2),
                    ..CollectionSettings::default()
                },
                true,
                "vectors.collection.hnsw_m",
            ),
            (
                CollectionSettings {
                    hnsw_ef_construct: Some(1_000_000),
                    ..CollectionSettings::default()
                },
                false,
                "vectors.collection.hnsw_ef_construct",
            ),
            (
                CollectionSettings {
                    always_ram: Some(true),
                    ..CollectionSettings::default()
                },
                false,
                "vectors.collection.always_ram needs",
            ),
        ];
        let tenant_only = CollectionSettings {
            hnsw_m: Some(0),
            ..CollectionSettings::default()
        };
        assert!(
            tenant_only
                .validate(true)
                .unwrap_err()
                .contains("needs vectors.collection.hnsw_payload_m")
        );
        let tenant_only = CollectionSettings {
            hnsw_payload_m: Some(16),
            ..tenant_only
        };
        assert!(tenant_only.validate(false).is_ok());
        for (settings, server, wanted) in cases {
            let err = settings.validate(server).expect_err(wanted);
            assert!(err.contains(wanted), "{err}");
        }
        let search = SearchSettings {
            oversampling: Some(2.0),
            ..SearchSettings::default()
        };
        assert!(
            search
                .validate(Quantization::None)
                .unwrap_err()
                .contains("vectors.search.oversampling needs")
        );
        assert!(search.validate(Quantization::Int8).is_ok());
        let search = SearchSettings {
            hnsw_ef: Some(5000),
            ..SearchSettings::default()
        };
        assert!(
            search
                .validate(Quantization::None)
                .unwrap_err()
                .contains("vectors.search.hnsw_ef (5000)")
        );
    }
}
