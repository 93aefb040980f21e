//! The collection layout (`[vectors.collection]`): the request that creates a collection as
//! configured, reading an existing collection's layout back, and changing what can change in place.

use std::collections::HashMap;

use qdrant_client::qdrant::vectors_config::Config as VectorsConfigKind;
use qdrant_client::qdrant::{
    self as pb, CollectionParamsDiffBuilder, CreateCollectionBuilder, HnswConfigDiffBuilder, ScalarQuantizationBuilder,
    SparseVectorParamsBuilder, SparseVectorsConfigBuilder, UpdateCollectionBuilder, VectorParamsBuilder,
    VectorParamsDiffBuilder, VectorsConfigBuilder,
};

use crate::vector::settings::{CollectionSettings, Observed, Quantization, SettingDrift};
use crate::vector::{CollectionSpec, DENSE, Result, SPARSE, VectorRepo};

use super::ServerRepo;
use super::errors::{client_error, named_if_missing};

impl ServerRepo {
    /// The layout of an existing collection; `None` when it does not exist.
    pub(super) async fn observed(&self, collection: &str) -> Result<Option<Observed>> {
        let name = self.name(collection);
        if !self.exists(&name).await? {
            return Ok(None);
        }
        let info = named_if_missing(self.info(&name).await, collection)?;
        Ok(Some(observed(info.config.as_ref())))
    }

    /// The collection as `[vectors.collection]` describes it, for creating it.
    pub(super) fn create_request(&self, name: &str, spec: &CollectionSpec) -> CreateCollectionBuilder {
        let layout = &self.layout.collection;
        let mut dense = VectorParamsBuilder::new(u64::from(spec.dimensions), pb::Distance::Cosine);
        if let Some(on_disk) = layout.on_disk {
            dense = dense.memory(placement(on_disk));
        }
        let mut vectors = VectorsConfigBuilder::default();
        vectors.add_named_vector_params(DENSE, dense);
        let mut create = CreateCollectionBuilder::new(name).vectors_config(vectors);
        if spec.sparse {
            let mut sparse = SparseVectorsConfigBuilder::default();
            sparse.add_named_vector_params(SPARSE, SparseVectorParamsBuilder::default().modifier(pb::Modifier::Idf));
            create = create.sparse_vectors_config(sparse);
        }
        if let Some(n) = layout.shard_number {
            create = create.shard_number(n);
        }
        if let Some(n) = layout.replication_factor {
            create = create.replication_factor(n);
        }
        if let Some(n) = layout.write_consistency_factor {
            create = create.write_consistency_factor(n);
        }
        if let Some(on_disk) = layout.on_disk_payload {
            create = create.payload(pb::PayloadStorageParams {
                memory: Some(placement(on_disk)),
            });
        }
        if let Some(hnsw) = hnsw_diff(layout) {
            create = create.hnsw_config(hnsw);
        }
        if let Some(quantization) = scalar_quantization(layout) {
            create = create.quantization_config(quantization);
        }
        create
    }
}

/// Changes what `[vectors.collection]` sets differently and the server can change in place, then
/// reports what still differs.
pub(super) async fn apply_settings(repo: &ServerRepo, collection: &str) -> Result<Vec<SettingDrift>> {
    let found = repo.drift(collection).await?;
    let changeable = |setting: &str| found.iter().any(|d| d.in_place && d.setting.ends_with(setting));
    let layout = &repo.layout.collection;
    let mut update = UpdateCollectionBuilder::new(repo.name(collection));
    let mut changed = false;
    let mut params = CollectionParamsDiffBuilder::default();
    let mut params_changed = false;
    if let (true, Some(n)) = (changeable(".write_consistency_factor"), layout.write_consistency_factor) {
        params = params.write_consistency_factor(n);
        params_changed = true;
    }
    if let (true, Some(on_disk)) = (changeable(".on_disk_payload"), layout.on_disk_payload) {
        params = params.payload(pb::PayloadStorageParams {
            memory: Some(placement(on_disk)),
        });
        params_changed = true;
    }
    if params_changed {
        update = update.params(params);
        changed = true;
    }
    if let (true, Some(on_disk)) = (changeable(".on_disk"), layout.on_disk) {
        let dense = VectorParamsDiffBuilder::default().memory(placement(on_disk)).build();
        update = update.vectors_config(pb::VectorsConfigDiff {
            config: Some(pb::vectors_config_diff::Config::ParamsMap(pb::VectorParamsDiffMap {
                map: HashMap::from([(DENSE.to_owned(), dense)]),
            })),
        });
        changed = true;
    }
    if (changeable(".hnsw_m") || changeable(".hnsw_payload_m") || changeable(".hnsw_ef_construct"))
        && let Some(hnsw) = hnsw_diff(layout)
    {
        update = update.hnsw_config(hnsw);
        changed = true;
    }
    if changeable(".quantization") || changeable(".always_ram") {
        update = match scalar_quantization(layout) {
            Some(q) => update.quantization_config(q),
            None => update.quantization_config(pb::Disabled {}),
        };
        changed = true;
    }
    if changed {
        let request = update;
        repo.call(|c| {
            let request = request.clone();
            async move { c.update_collection(request).await }
        })
        .await
        .map_err(client_error)?;
        tracing::info!(collection, "applied [vectors.collection] settings in place");
    }
    repo.drift(collection).await
}

/// The HNSW settings to send, if any is configured.
fn hnsw_diff(layout: &CollectionSettings) -> Option<HnswConfigDiffBuilder> {
    if layout.hnsw_m.is_none() && layout.hnsw_ef_construct.is_none() && layout.hnsw_payload_m.is_none() {
        return None;
    }
    let mut hnsw = HnswConfigDiffBuilder::default();
    if let Some(m) = layout.hnsw_m {
        hnsw = hnsw.m(u64::from(m));
    }
    if let Some(m) = layout.hnsw_payload_m {
        hnsw = hnsw.payload_m(u64::from(m));
    }
    if let Some(ef) = layout.hnsw_ef_construct {
        hnsw = hnsw.ef_construct(u64::from(ef));
    }
    Some(hnsw)
}

/// Scalar int8 quantization, when configured.
fn scalar_quantization(layout: &CollectionSettings) -> Option<ScalarQuantizationBuilder> {
    match layout.quantization {
        Quantization::None => None,
        Quantization::Int8 => {
            let mut q = ScalarQuantizationBuilder::default().r#type(pb::QuantizationType::Int8 as i32);
            if layout.always_ram == Some(true) {
                q = q.memory(pb::Memory::Pinned as i32);
            }
            Some(q)
        }
    }
}

/// A collection's layout from its configuration as Qdrant reports it (per-vector settings of the
/// dense vector win over the collection's).
fn observed(config: Option<&pb::CollectionConfig>) -> Observed {
    let params = config.and_then(|c| c.params.as_ref());
    let dense = params
        .and_then(|p| p.vectors_config.as_ref())
        .and_then(|v| v.config.as_ref())
        .and_then(|c| match c {
            VectorsConfigKind::ParamsMap(map) => map.map.get(DENSE),
            VectorsConfigKind::Params(_) => None,
        });
    let hnsw = dense
        .and_then(|d| d.hnsw_config.as_ref())
        .or_else(|| config.and_then(|c| c.hnsw_config.as_ref()));
    let quantization = dense
        .and_then(|d| d.quantization_config.as_ref())
        .or_else(|| config.and_then(|c| c.quantization_config.as_ref()))
        .and_then(|q| q.quantization.as_ref());
    let (quantization, always_ram) = match quantization {
        Some(pb::quantization_config::Quantization::Scalar(scalar))
            if scalar.r#type == pb::QuantizationType::Int8 as i32 =>
        {
            (Quantization::Int8, Some(pinned(scalar)))
        }
        // Other kinds quarry does not configure: shown as "none" to whoever asked for int8.
        _ => (Quantization::None, None),
    };
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    Observed {
        shard_number: params.map(|p| p.shard_number),
        replication_factor: params.map(|p| p.replication_factor.unwrap_or(1)),
        write_consistency_factor: params.map(|p| p.write_consistency_factor.unwrap_or(1)),
        on_disk: dense.map(vectors_on_disk),
        on_disk_payload: params.map(payload_on_disk),
        quantization,
        always_ram,
        hnsw_m: hnsw.and_then(|h| h.m).map(clamp),
        hnsw_payload_m: hnsw.and_then(|h| h.payload_m).map(clamp),
        hnsw_ef_construct: hnsw.and_then(|h| h.ef_construct).map(clamp),
    }
}

/// The memory placement that stands for "on disk" (`true`) or "in RAM" (`false`).
fn placement(on_disk: bool) -> i32 {
    if on_disk {
        pb::Memory::Cold as i32
    } else {
        pb::Memory::Cached as i32
    }
}

// Qdrant 1.19 reports placements as `memory`; collections made with the flags that preceded it
// (`on_disk`, `on_disk_payload`, `always_ram`) may report only those.

#[allow(deprecated)]
fn vectors_on_disk(dense: &pb::VectorParams) -> bool {
    match dense.memory {
        Some(memory) => memory == pb::Memory::Cold as i32,
        None => dense.on_disk.unwrap_or(false),
    }
}

#[allow(deprecated)]
fn payload_on_disk(params: &pb::CollectionParams) -> bool {
    match params.payload.as_ref().and_then(|p| p.memory) {
        Some(memory) => memory == pb::Memory::Cold as i32,
        None => params.on_disk_payload,
    }
}

#[allow(deprecated)]
fn pinned(scalar: &pb::ScalarQuantization) -> bool {
    match scalar.memory {
        Some(memory) => memory == pb::Memory::Pinned as i32,
        None => scalar.always_ram.unwrap_or(false),
    }
}
