//! Creating a collection or checking an existing one against its spec, and the collection
//! layout (`[vectors.collection]`): building a new shard's configuration, applying it to an
//! existing one, and reading it back for drift.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use qdrant_edge::{
    Distance, EdgeConfig, EdgeShard, EdgeSparseVectorParams, EdgeVectorParams, HnswIndexConfig, Memory, Modifier,
    QuantizationConfig,
};

use crate::vector::settings::{CollectionSettings, Observed, Quantization};
use crate::vector::{CollectionSpec, DENSE, Error, Result, SPARSE, rules};

use super::Inner;
use super::engine::{blocking, engine_error};
use super::indexes::ensure_indexes;

/// Creates the collection, or checks the existing one against `spec`.
pub(super) async fn ensure(inner: Arc<Inner>, spec: CollectionSpec) -> Result<()> {
    let _guard = inner.open_lock.lock().await;
    if let Some(shard) = inner.open_existing(&spec.name).await? {
        // Its indexes were ensured when it was created or loaded.
        return match rules::incompatibility(&shape(&shard.engine.config()), &spec) {
            Some(reason) => Err(Error::Incompatible {
                name: spec.name,
                reason,
            }),
            None => Ok(()),
        };
    }
    let dir = inner.root.join(&spec.name);
    let config = shard_config(&spec, inner.search_threads, &inner.layout.collection)?;
    let engine = blocking(move || {
        let engine = EdgeShard::new(&dir, config).map_err(engine_error)?;
        ensure_indexes(&engine)?;
        // Persist the empty collection with its indexes right away.
        engine.flush().map_err(engine_error)?;
        Ok(engine)
    })
    .await?;
    let shard = inner.make_shard(&spec.name, engine);
    inner
        .shards
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(spec.name.clone(), shard);
    tracing::info!(collection = %spec.name, dimensions = spec.dimensions, sparse = spec.sparse, "created embedded collection");
    Ok(())
}

/// Reopens collection `name` with `[vectors.collection]` applied to its configuration, then
/// optimizes it so that every segment takes the new layout (quantization, HNSW, placement).
pub(super) async fn reload_with_layout(inner: &Arc<Inner>, name: &str) -> Result<()> {
    let _guard = inner.open_lock.lock().await;
    let Some(mut shard) = inner.open_existing(name).await? else {
        return Ok(());
    };
    inner
        .shards
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(name);
    // Requests still holding the shard finish first: one engine per folder.
    let shard = loop {
        match Arc::try_unwrap(shard) {
            Ok(shard) => break shard,
            Err(held) => {
                shard = held;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    let mut config = shard.engine.config().clone();
    apply_layout(&mut config, &inner.layout.collection)?;
    config.max_search_threads = Some(inner.search_threads);
    let dir = inner.root.join(name);
    let engine = blocking(move || {
        // Dropping the engine flushes it.
        drop(shard);
        let engine = EdgeShard::load(&dir, Some(config)).map_err(engine_error)?;
        engine.optimize().map_err(engine_error)?;
        engine.flush().map_err(engine_error)?;
        Ok(engine)
    })
    .await?;
    let shard = inner.make_shard(name, engine);
    inner
        .shards
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(name.to_owned(), shard);
    Ok(())
}

fn shard_config(spec: &CollectionSpec, search_threads: usize, layout: &CollectionSettings) -> Result<EdgeConfig> {
    let mut dense = EdgeVectorParams::builder(spec.dimensions as usize, Distance::Cosine);
    if let Some(on_disk) = layout.on_disk {
        dense = dense.memory(Memory::from_on_disk(on_disk));
    }
    let mut builder = EdgeConfig::builder()
        .vector(DENSE, dense.build())
        .max_search_threads(search_threads);
    if spec.sparse {
        builder = builder.sparse_vector(
            SPARSE,
            EdgeSparseVectorParams::builder().modifier(Modifier::Idf).build(),
        );
    }
    let mut config = builder.build();
    apply_layout(&mut config, layout)?;
    Ok(config)
}

/// Sets what `layout` configures on `config` (a new shard's, or an existing one's to reload it
/// with): placement of vectors and payloads, HNSW and quantization.
fn apply_layout(config: &mut EdgeConfig, layout: &CollectionSettings) -> Result<()> {
    if let Some(on_disk) = layout.on_disk
        && let Some(dense) = config.vectors.get_mut(DENSE)
    {
        dense.memory = Some(Memory::from_on_disk(on_disk));
    }
    if let Some(on_disk) = layout.on_disk_payload {
        config.payload_memory = Some(Memory::from_on_disk(on_disk));
    }
    if layout.hnsw_m.is_some() || layout.hnsw_ef_construct.is_some() || layout.hnsw_payload_m.is_some() {
        let current = config.hnsw_config();
        config.hnsw_config = Some(HnswIndexConfig {
            m: layout.hnsw_m.map_or(current.m, |m| m as usize),
            ef_construct: layout.hnsw_ef_construct.map_or(current.ef_construct, |ef| ef as usize),
            payload_m: layout.hnsw_payload_m.map(|m| m as usize).or(current.payload_m),
            ..current
        });
    }
    config.quantization_config = match layout.quantization {
        Quantization::None => None,
        Quantization::Int8 => {
            // Built from its JSON form: the struct carries deprecated fields.
            let scalar = match layout.always_ram {
                Some(true) => serde_json::json!({"scalar": {"type": "int8", "memory": "pinned"}}),
                _ => serde_json::json!({"scalar": {"type": "int8"}}),
            };
            Some(
                serde_json::from_value::<QuantizationConfig>(scalar)
                    .map_err(|e| Error::Rejected(format!("int8 quantization config: {e}")))?,
            )
        }
    };
    if let Some(dense) = config.vectors.get_mut(DENSE) {
        // A per-vector quantization would override the collection's.
        dense.quantization_config = None;
    }
    Ok(())
}

/// An embedded collection's layout in the terms of `[vectors.collection]`.
pub(super) fn observed(config: &EdgeConfig) -> Observed {
    let dense = config.vectors.get(DENSE);
    let hnsw = dense
        .and_then(|d| d.hnsw_config)
        .unwrap_or_else(|| config.hnsw_config());
    let quantization = dense
        .and_then(|d| d.quantization_config.as_ref())
        .or(config.quantization_config.as_ref())
        .and_then(|q| serde_json::to_value(q).ok());
    let scalar = quantization.as_ref().and_then(|q| q.get("scalar"));
    let (quantization, always_ram) = match scalar {
        Some(scalar) if scalar.get("type").and_then(|t| t.as_str()) == Some("int8") => {
            let pinned = scalar.get("memory").and_then(|m| m.as_str()) == Some("pinned")
                || scalar.get("always_ram").and_then(serde_json::Value::as_bool) == Some(true);
            (Quantization::Int8, Some(pinned))
        }
        _ => (Quantization::None, None),
    };
    let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    Observed {
        shard_number: None,
        replication_factor: None,
        write_consistency_factor: None,
        on_disk: Some(dense.and_then(|d| d.memory_placement()) == Some(Memory::Cold)),
        on_disk_payload: Some(config.payload_memory_placement() == Memory::Cold),
        quantization,
        always_ram,
        hnsw_m: Some(clamp(hnsw.m)),
        hnsw_payload_m: hnsw.payload_m.map(clamp),
        hnsw_ef_construct: Some(clamp(hnsw.ef_construct)),
    }
}

/// The vectors of an existing shard, for [`rules::incompatibility`].
fn shape(config: &EdgeConfig) -> rules::Shape {
    rules::Shape {
        dense: (config.vectors.get(DENSE)).map(|dense| rules::DenseShape {
            size: dense.size as u64,
            distance: format!("{:?}", dense.distance),
        }),
        sparse_idf: (config.sparse_vectors.get(SPARSE)).map(|sparse| sparse.modifier == Some(Modifier::Idf)),
    }
}
