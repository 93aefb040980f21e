//! Creating a collection or checking an existing one against its spec, with its payload indexes.

use std::collections::HashMap;

use qdrant_client::qdrant::vectors_config::Config as VectorsConfigKind;
use qdrant_client::qdrant::{self as pb, CreateFieldIndexCollectionBuilder, FieldType, UuidIndexParamsBuilder};

use crate::vector::{CollectionSpec, DENSE, Error, Result, SPARSE, rules};

use super::errors::client_error;
use super::{RUN_ID, SOURCE_ID, ServerRepo, WORLD_ID};

/// Creates the collection, or checks the existing one against `spec`.
pub(super) async fn ensure(repo: &ServerRepo, spec: &CollectionSpec) -> Result<()> {
    if spec.dimensions == 0 {
        return Err(Error::Rejected(format!(
            "collection `{}`: dimensions must be positive",
            spec.name
        )));
    }
    let name = repo.name(&spec.name);
    if repo.exists(&name).await? {
        return repo.check_existing(&name, spec).await;
    }
    let create = repo.create_request(&name, spec);
    let created = repo
        .call(|c| {
            let create = create.clone();
            async move { c.create_collection(create).await }
        })
        .await;
    if let Err(e) = created {
        // Another replica may have created it in the meantime (or a node created it and then
        // failed to answer): then it only has to match.
        let created_elsewhere = repo.exists(&name).await.unwrap_or(false);
        if !created_elsewhere {
            return Err(client_error(e));
        }
        return repo.check_existing(&name, spec).await;
    }
    tracing::info!(collection = %name, dimensions = spec.dimensions, sparse = spec.sparse, "created Qdrant collection");
    repo.ensure_indexes(&name, &HashMap::new()).await
}

impl ServerRepo {
    /// Creates the payload indexes the collection lacks (all of them for a new collection), and
    /// replaces one of another type (the keyword indexes of collections made before the ids were
    /// indexed as UUIDs; Qdrant rebuilds it from the stored payloads).
    pub(super) async fn ensure_indexes(
        &self,
        name: &str,
        existing: &HashMap<String, pb::PayloadSchemaInfo>,
    ) -> Result<()> {
        let indexes = [
            (WORLD_ID, UuidIndexParamsBuilder::default().is_tenant(true)),
            // Used to narrow filters and deletes: per-index HNSW links would only slow indexing.
            (RUN_ID, UuidIndexParamsBuilder::default().enable_hnsw(false)),
            (SOURCE_ID, UuidIndexParamsBuilder::default().enable_hnsw(false)),
        ];
        for (field, params) in indexes {
            if existing
                .get(field)
                .is_some_and(|have| have.data_type == pb::PayloadSchemaType::Uuid as i32)
            {
                continue;
            }
            let request = CreateFieldIndexCollectionBuilder::new(name, field, FieldType::Uuid)
                .field_index_params(params)
                .wait(true);
            self.call(|c| {
                let request = request.clone();
                async move { c.create_field_index(request).await }
            })
            .await
            .map_err(client_error)?;
        }
        Ok(())
    }

    /// Checks an existing collection against `spec` and adds missing indexes.
    pub(super) async fn check_existing(&self, name: &str, spec: &CollectionSpec) -> Result<()> {
        let info = self.info(name).await?;
        let params = info.config.as_ref().and_then(|c| c.params.as_ref());
        if let Some(reason) = rules::incompatibility(&shape(params), spec) {
            return Err(Error::Incompatible {
                name: spec.name.clone(),
                reason,
            });
        }
        self.ensure_indexes(name, &info.payload_schema).await
    }

    pub(super) async fn info(&self, name: &str) -> Result<pb::CollectionInfo> {
        let info = self
            .call(|c| {
                let name = name.to_owned();
                async move { c.collection_info(name).await }
            })
            .await
            .map_err(client_error)?;
        info.result
            .ok_or_else(|| Error::Unavailable(format!("Qdrant returned no info for collection `{name}`")))
    }

    pub(super) async fn exists(&self, name: &str) -> Result<bool> {
        self.call(|c| {
            let name = name.to_owned();
            async move { c.collection_exists(name).await }
        })
        .await
        .map_err(client_error)
    }
}

/// The vectors of an existing collection, for [`rules::incompatibility`].
fn shape(params: Option<&pb::CollectionParams>) -> rules::Shape {
    let dense = params
        .and_then(|p| p.vectors_config.as_ref())
        .and_then(|v| v.config.as_ref())
        .and_then(|c| match c {
            VectorsConfigKind::ParamsMap(map) => map.map.get(DENSE),
            VectorsConfigKind::Params(_) => None,
        });
    let sparse = params
        .and_then(|p| p.sparse_vectors_config.as_ref())
        .and_then(|s| s.map.get(SPARSE));
    rules::Shape {
        dense: dense.map(|dense| rules::DenseShape {
            size: dense.size,
            distance: pb::Distance::try_from(dense.distance)
                .map_or_else(|_| format!("unknown ({})", dense.distance), |d| format!("{d:?}")),
        }),
        sparse_idf: sparse.map(|sparse| sparse.modifier == Some(pb::Modifier::Idf as i32)),
    }
}
