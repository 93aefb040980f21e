//! The payload indexes every chunk collection carries, and bringing an older collection's
//! indexes up to date.

use qdrant_edge::{
    CreateIndex, EdgeShard, FieldIndexOperations, JsonPath, PayloadFieldSchema, PayloadIndexInfo, PayloadSchemaParams,
    UpdateOperation, UuidIndexParamsBuilder,
};

use crate::vector::Result;

use super::engine::{engine_error, json_path};
use super::{RUN_ID, SOURCE_ID, WORLD_ID};

/// The payload indexes every chunk collection carries, created before any data.
fn payload_indexes() -> [(&'static str, PayloadFieldSchema); 3] {
    let uuid = |tenant: bool| {
        let params = if tenant {
            UuidIndexParamsBuilder::new().is_tenant(true)
        } else {
            UuidIndexParamsBuilder::new().enable_hnsw(false)
        };
        PayloadFieldSchema::FieldParams(PayloadSchemaParams::Uuid(params.build()))
    };
    [(WORLD_ID, uuid(true)), (RUN_ID, uuid(false)), (SOURCE_ID, uuid(false))]
}

/// The payload indexes the shard lacks or has with another schema (the keyword indexes of
/// collections made before the ids were indexed as UUIDs).
fn outdated_indexes(engine: &EdgeShard) -> Result<Vec<(JsonPath, PayloadFieldSchema)>> {
    let existing = engine.info().map_err(engine_error)?.payload_schema;
    let mut outdated = Vec::new();
    for (field, schema) in payload_indexes() {
        let field_name = json_path(field)?;
        let wanted = PayloadIndexInfo::new(schema.clone(), 0);
        let current = existing
            .get(&field_name)
            .is_some_and(|have| have.data_type == wanted.data_type && have.params == wanted.params);
        if !current {
            outdated.push((field_name, schema));
        }
    }
    Ok(outdated)
}

/// Creates the payload indexes the shard does not have yet (all of them for a new shard; the
/// missing ones after a crash between creation and indexing), and replaces outdated ones: the
/// engine drops the old index and builds the new one from the stored payloads. Runs whenever a
/// shard is created or loaded, so every shard in the cache has today's indexes.
pub(super) fn ensure_indexes(engine: &EdgeShard) -> Result<()> {
    for (field_name, schema) in outdated_indexes(engine)? {
        engine
            .update(UpdateOperation::FieldIndexOperation(FieldIndexOperations::CreateIndex(
                CreateIndex {
                    field_name,
                    field_schema: Some(schema),
                },
            )))
            .map_err(engine_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use qdrant_edge::{KeywordIndexParamsBuilder, PayloadSchemaType};

    use super::*;
    use crate::domain::{RunId, SourceId, WorldId};
    use crate::vector::edge::EdgeRepo;
    use crate::vector::edge::testing::{open_with_chunks, point};
    use crate::vector::{DenseSearch, PointFilter, VectorRepo};

    fn index_types(engine: &EdgeShard) -> Vec<(String, PayloadSchemaType)> {
        let mut types: Vec<(String, PayloadSchemaType)> = engine
            .info()
            .unwrap()
            .payload_schema
            .into_iter()
            .map(|(field, info)| (field.to_string(), info.data_type))
            .collect();
        types.sort_by(|a, b| a.0.cmp(&b.0));
        types
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keyword_indexes_of_an_older_collection_become_uuid_indexes_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let (world, other, run, source) = (WorldId::new(), WorldId::new(), RunId::new(), SourceId::new());
        let chunk = |world: WorldId, i: u32| point(world, run, source, i, vec![1.0, i as f32, 0.5, 0.25]);
        {
            let repo = open_with_chunks(dir.path()).await;
            let created = repo.inner.cached("chunks").unwrap();
            assert!(
                outdated_indexes(&created.engine).unwrap().is_empty(),
                "a new collection has today's indexes"
            );
            // Not kept: the engine below must be the only one on the folder.
            drop(created);
            let points = (0..20)
                .map(|i| chunk(world, i))
                .chain((0..30).map(|i| chunk(other, i)))
                .collect();
            repo.upsert("chunks", points).await.unwrap();
            repo.close().await.unwrap();
        }
        // What older versions made: keyword indexes on the three ids.
        {
            let engine = EdgeShard::load(&dir.path().join("chunks"), None).unwrap();
            for (field, tenant) in [(WORLD_ID, true), (RUN_ID, false), (SOURCE_ID, false)] {
                let params = match tenant {
                    true => KeywordIndexParamsBuilder::new().is_tenant(true),
                    false => KeywordIndexParamsBuilder::new().enable_hnsw(false),
                };
                engine
                    .update(UpdateOperation::FieldIndexOperation(FieldIndexOperations::CreateIndex(
                        CreateIndex {
                            field_name: json_path(field).unwrap(),
                            field_schema: Some(PayloadFieldSchema::FieldParams(PayloadSchemaParams::Keyword(
                                params.build(),
                            ))),
                        },
                    )))
                    .unwrap();
            }
            assert!(
                index_types(&engine)
                    .iter()
                    .all(|(_, t)| *t == PayloadSchemaType::Keyword),
                "{:?}",
                index_types(&engine)
            );
            engine.flush().unwrap();
        }

        let repo = EdgeRepo::open(dir.path()).unwrap();
        let filter = PointFilter::world(world).run(run);
        let hits = repo
            .search(
                "chunks",
                DenseSearch {
                    hnsw_ef: None,
                    vector: vec![1.0, 3.0, 0.5, 0.25],
                    filter,
                    sources: None,
                    limit: 100,
                    score_threshold: None,
                },
            )
            .await
            .unwrap();
        assert_eq!(hits.len(), 20, "the filter still finds exactly the world's points");
        assert!(
            hits.iter()
                .all(|h| h.payload.as_ref().is_some_and(|p| p.world_id == world))
        );
        let shard = repo.inner.cached("chunks").unwrap();
        assert_eq!(
            index_types(&shard.engine),
            vec![
                (RUN_ID.to_owned(), PayloadSchemaType::Uuid),
                (SOURCE_ID.to_owned(), PayloadSchemaType::Uuid),
                (WORLD_ID.to_owned(), PayloadSchemaType::Uuid),
            ]
        );
        assert!(
            outdated_indexes(&shard.engine).unwrap().is_empty(),
            "the rebuilt indexes match what is wanted, so the next open rebuilds nothing"
        );
        assert_eq!(repo.count("chunks", PointFilter::world(other)).await.unwrap(), 30);
        repo.delete_by_filter("chunks", PointFilter::world(world).run(run).source(source))
            .await
            .unwrap();
        assert_eq!(repo.count("chunks", PointFilter::world(world)).await.unwrap(), 0);
        assert_eq!(repo.count("chunks", PointFilter::world(other)).await.unwrap(), 30);
        repo.close().await.unwrap();
    }
}
