//! How chunk collections are laid out (`[vectors.collection]`) and searched
//! (`[vectors.search]`), and how an existing collection is compared with that configuration.
//!
//! Every layout setting is optional: unset means "whatever Qdrant chooses" and is never
//! reported as drift. A collection is created with the settings in force; an existing one is
//! only *compared* ([`drift`]) — changing it is an explicit step (`quarry vectors
//! apply-settings`), because re-quantizing or re-indexing millions of points is not something
//! a restart should start by surprise.

use serde::Serialize;
use utoipa::ToSchema;

pub use crate::config::{CollectionSettings, Quantization, SearchSettings};

/// Everything a backend needs to know about layout and search: `[vectors.collection]` and
/// `[vectors.search]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Layout {
    pub collection: CollectionSettings,
    pub search: SearchSettings,
}

/// An existing collection's layout as the backend reports it, in the terms of
/// [`CollectionSettings`]; `None` where the backend does not say (or does not have the notion).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    pub shard_number: Option<u32>,
    pub replication_factor: Option<u32>,
    pub write_consistency_factor: Option<u32>,
    pub on_disk: Option<bool>,
    pub on_disk_payload: Option<bool>,
    pub quantization: Quantization,
    pub always_ram: Option<bool>,
    pub hnsw_m: Option<u32>,
    pub hnsw_payload_m: Option<u32>,
    pub hnsw_ef_construct: Option<u32>,
}

/// One setting of an existing collection that differs from the configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct SettingDrift {
    /// The configuration key, e.g. `vectors.collection.hnsw_m`.
    #[schema(example = "vectors.collection.quantization")]
    pub setting: String,
    #[schema(example = "int8")]
    pub configured: String,
    /// What the collection has (`unset` where the backend reports nothing).
    #[schema(example = "none")]
    pub actual: String,
    /// Whether `quarry vectors apply-settings` can change it in place (shard count and
    /// replication cannot: see the operations guide).
    pub in_place: bool,
}

/// The settings that differ between `configured` and `observed`. Unset settings never differ.
pub fn drift(configured: &CollectionSettings, observed: &Observed) -> Vec<SettingDrift> {
    let mut out = Vec::new();
    let mut compare = |name: &str, wanted: Option<String>, actual: Option<String>, in_place: bool| {
        if let Some(wanted) = wanted
            && actual.as_ref() != Some(&wanted)
        {
            out.push(SettingDrift {
                setting: format!("vectors.collection.{name}"),
                configured: wanted,
                actual: actual.unwrap_or_else(|| "unset".to_owned()),
                in_place,
            });
        }
    };
    let text = |v: Option<u32>| v.map(|v| v.to_string());
    let flag = |v: Option<bool>| v.map(|v| v.to_string());
    compare(
        "shard_number",
        text(configured.shard_number),
        text(observed.shard_number),
        false,
    );
    compare(
        "replication_factor",
        text(configured.replication_factor),
        text(observed.replication_factor),
        false,
    );
    compare(
        "write_consistency_factor",
        text(configured.write_consistency_factor),
        text(observed.write_consistency_factor),
        true,
    );
    compare("on_disk", flag(configured.on_disk), flag(observed.on_disk), true);
    compare(
        "on_disk_payload",
        flag(configured.on_disk_payload),
        flag(observed.on_disk_payload),
        true,
    );
    compare(
        "quantization",
        Some(configured.quantization.to_string()),
        Some(observed.quantization.to_string()),
        true,
    );
    if configured.quantization == Quantization::Int8 && observed.quantization == Quantization::Int8 {
        compare(
            "always_ram",
            flag(configured.always_ram),
            flag(observed.always_ram.or(Some(false))),
            true,
        );
    }
    compare("hnsw_m", text(configured.hnsw_m), text(observed.hnsw_m), true);
    compare(
        "hnsw_payload_m",
        text(configured.hnsw_payload_m),
        text(observed.hnsw_payload_m),
        true,
    );
    compare(
        "hnsw_ef_construct",
        text(configured.hnsw_ef_construct),
        text(observed.hnsw_ef_construct),
        true,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_configured_settings_can_differ() {
        let observed = Observed {
            shard_number: Some(3),
            replication_factor: Some(1),
            hnsw_m: Some(16),
            hnsw_ef_construct: Some(100),
            on_disk: Some(false),
            ..Observed::default()
        };
        assert!(drift(&CollectionSettings::default(), &observed).is_empty());
        let configured = CollectionSettings {
            replication_factor: Some(2),
            hnsw_m: Some(16),
            quantization: Quantization::Int8,
            ..CollectionSettings::default()
        };
        let found = drift(&configured, &observed);
        let names: Vec<(&str, &str, bool)> = found
            .iter()
            .map(|d| (d.setting.as_str(), d.actual.as_str(), d.in_place))
            .collect();
        assert_eq!(
            names,
            [
                ("vectors.collection.replication_factor", "1", false),
                ("vectors.collection.quantization", "none", true),
            ]
        );
    }
}
