//! [`ServerRepo`]: the vector store as a Qdrant server (or cluster), spoken to over gRPC with
//! `qdrant-client`.
//!
//! Same collections and semantics as the embedded store: named dense vector `dense` (cosine),
//! optional sparse `bm25` with the IDF modifier, UUID indexes on `world_id` (the tenant index),
//! `run_id` and `source_id`. Every write is sent with `wait=true`, so it returns only once
//! the server applied it. Several quarry replicas may share one server; collection creation
//! tolerates losing the race to another replica.
//!
//! Errors: transport failures, timeouts, overload and authentication failures are
//! [`Error::Unavailable`] (the server cannot be used right now); a gRPC `NotFound` is the missing
//! collection (searches and upserts fail with [`Error::MissingCollection`], other reads answer
//! empty, deletes do nothing); anything else the server refuses is [`Error::Rejected`].

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use qdrant_client::qdrant::point_id::PointIdOptions;
use qdrant_client::qdrant::vectors_config::Config as VectorsConfigKind;
use qdrant_client::qdrant::{
    self as pb, Condition, CountPointsBuilder, CreateCollectionBuilder, CreateFieldIndexCollectionBuilder,
    DeletePointsBuilder, FieldType, Filter, GetPointsBuilder, IdfParamsBuilder, PointStruct, PointsIdsList,
    PrefetchQueryBuilder, Query, QueryPointsBuilder, RrfBuilder, ScrollPointsBuilder, SearchParamsBuilder,
    SparseVectorParamsBuilder, SparseVectorsConfigBuilder, UpsertPointsBuilder, UuidIndexParamsBuilder, VectorInput,
    VectorParamsBuilder, VectorsConfigBuilder,
};
use qdrant_client::{Payload, Qdrant, QdrantError};
use uuid::Uuid;

use crate::domain::{SourceId, WorldId};

use super::{
    CollectionSpec, DENSE, DenseSearch, Error, HybridSearch, Point, PointFilter, PointPayload, PointRecord, Result,
    SPARSE, ScoredPoint, ScrollPage, SparseSearch, SparseVector, VectorRepo,
};

const WORLD_ID: &str = "world_id";
const RUN_ID: &str = "run_id";
const SOURCE_ID: &str = "source_id";
/// Reciprocal rank fusion constant, the usual default.
const RRF_K: u32 = 60;
/// Points per upsert request: keeps each gRPC message well under the server's size limit.
const UPSERT_BATCH: usize = 256;
/// Per-request deadline. Writes wait for the server to apply them, so this is generous.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A Qdrant server over gRPC. Cheap to share: the client holds a connection pool.
pub struct ServerRepo {
    client: Qdrant,
    url: String,
    /// Prepended to every collection name (tests isolate themselves with it; production: "").
    prefix: String,
}

impl fmt::Debug for ServerRepo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the API key.
        f.debug_struct("ServerRepo")
            .field("url", &self.url)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl ServerRepo {
    /// Runs a query on `collection`; a missing collection is named in the error.
    async fn run_query(&self, collection: &str, query: QueryPointsBuilder) -> Result<Vec<ScoredPoint>> {
        let result = self
            .client
            .query(query)
            .await
            .map(|r| scored(r.result))
            .map_err(client_error);
        named_if_missing(result, collection)
    }

    /// Builds a client for the gRPC endpoint `url` (e.g. `http://localhost:6334`). Does not touch
    /// the network: connections are made on first use, so a server that is down shows up as
    /// [`Error::Unavailable`] from `health()` and the operations, not here. A malformed URL is
    /// [`Error::Rejected`].
    pub fn connect(url: &str, api_key: Option<String>, collection_prefix: String) -> Result<ServerRepo> {
        let client = Qdrant::from_url(url)
            .api_key(api_key)
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            // The check would block here on a throwaway runtime and print to stdout.
            .skip_compatibility_check()
            .build()
            .map_err(|e| match e {
                QdrantError::InvalidUri(e) => Error::Rejected(format!("invalid Qdrant URL {url:?}: {e}")),
                other => client_error(other),
            })?;
        Ok(ServerRepo {
            client,
            url: url.to_owned(),
            prefix: collection_prefix,
        })
    }

    /// The server-side name of `collection`.
    fn name(&self, collection: &str) -> String {
        format!("{}{collection}", self.prefix)
    }

    /// Creates the payload indexes the collection lacks (all of them for a new collection), and
    /// replaces one of another type (the keyword indexes of collections made before the ids were
    /// indexed as UUIDs; Qdrant rebuilds it from the stored payloads).
    async fn ensure_indexes(&self, name: &str, existing: &HashMap<String, pb::PayloadSchemaInfo>) -> Result<()> {
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
            self.client
                .create_field_index(
                    CreateFieldIndexCollectionBuilder::new(name, field, FieldType::Uuid)
                        .field_index_params(params)
                        .wait(true),
                )
                .await
                .map_err(client_error)?;
        }
        Ok(())
    }

    /// Checks an existing collection against `spec` and adds missing indexes.
    async fn check_existing(&self, name: &str, spec: &CollectionSpec) -> Result<()> {
        let info = self.client.collection_info(name).await.map_err(client_error)?;
        let info = info
            .result
            .ok_or_else(|| Error::Unavailable(format!("Qdrant returned no info for collection `{name}`")))?;
        let params = info.config.as_ref().and_then(|c| c.params.as_ref());
        if let Some(reason) = incompatibility(params, spec) {
            return Err(Error::Incompatible {
                name: spec.name.clone(),
                reason,
            });
        }
        self.ensure_indexes(name, &info.payload_schema).await
    }
}

/// Why a collection's parameters do not match `spec`, if they do not.
fn incompatibility(params: Option<&pb::CollectionParams>, spec: &CollectionSpec) -> Option<String> {
    let dense = params
        .and_then(|p| p.vectors_config.as_ref())
        .and_then(|v| v.config.as_ref())
        .and_then(|c| match c {
            VectorsConfigKind::ParamsMap(map) => map.map.get(DENSE),
            VectorsConfigKind::Params(_) => None,
        });
    match dense {
        None => return Some(format!("it has no named dense vector `{DENSE}`")),
        Some(dense) if dense.size != u64::from(spec.dimensions) => {
            return Some(format!(
                "dense vector `{DENSE}` has {} dimensions, wanted {}",
                dense.size, spec.dimensions
            ));
        }
        Some(dense) if dense.distance != pb::Distance::Cosine as i32 => {
            return Some(format!("dense vector `{DENSE}` does not use cosine distance"));
        }
        Some(_) => {}
    }
    let sparse = params
        .and_then(|p| p.sparse_vectors_config.as_ref())
        .and_then(|s| s.map.get(SPARSE));
    match (sparse, spec.sparse) {
        (None, true) => Some(format!("it has no sparse vector `{SPARSE}`")),
        (Some(_), false) => Some(format!("it has a sparse vector `{SPARSE}`, wanted dense only")),
        (Some(sparse), true) if sparse.modifier != Some(pb::Modifier::Idf as i32) => {
            Some(format!("sparse vector `{SPARSE}` lacks the IDF modifier"))
        }
        (Some(_), true) | (None, false) => None,
    }
}

/// gRPC status codes (`tonic::Code` discriminants; tonic is not a direct dependency).
mod code {
    pub const CANCELLED: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const DEADLINE_EXCEEDED: i32 = 4;
    pub const NOT_FOUND: i32 = 5;
    pub const PERMISSION_DENIED: i32 = 7;
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    pub const ABORTED: i32 = 10;
    pub const INTERNAL: i32 = 13;
    pub const UNAVAILABLE: i32 = 14;
    pub const DATA_LOSS: i32 = 15;
    pub const UNAUTHENTICATED: i32 = 16;
}

/// What a gRPC status from Qdrant means for quarry. The server's own failures (`INTERNAL`,
/// `UNKNOWN`, `DATA_LOSS`: a full disk, a failed storage write, a crashed task; the client also
/// reports broken connections this way) are outages: retried later, never a refusal that
/// spends an attempt or fails a request with a 500. Only a refusal of the request itself
/// (`INVALID_ARGUMENT`, `FAILED_PRECONDITION`, …) is `Rejected`.
fn status_error(status: i32, message: &str) -> Error {
    match status {
        code::UNAVAILABLE | code::DEADLINE_EXCEEDED | code::CANCELLED | code::ABORTED | code::RESOURCE_EXHAUSTED => {
            Error::Unavailable(format!("Qdrant: {message}"))
        }
        code::UNAUTHENTICATED | code::PERMISSION_DENIED => {
            Error::Unavailable(format!("Qdrant refused the credentials: {message}"))
        }
        code::NOT_FOUND => Error::MissingCollection(message.to_owned()),
        code::INTERNAL | code::UNKNOWN | code::DATA_LOSS => Error::Unavailable(format!("Qdrant failed: {message}")),
        _ => Error::Rejected(format!("Qdrant: {message}")),
    }
}

fn client_error(e: QdrantError) -> Error {
    match e {
        QdrantError::ResponseError { status } => status_error(status.code() as i32, status.message()),
        QdrantError::ResourceExhaustedError {
            status,
            retry_after_seconds,
        } => Error::Unavailable(format!(
            "Qdrant is overloaded (retry after {retry_after_seconds}s): {}",
            status.message()
        )),
        QdrantError::Io(e) => Error::Io(e),
        e @ (QdrantError::ConversionError(_)
        | QdrantError::InvalidUri(_)
        | QdrantError::NoSnapshotFound(_)
        | QdrantError::JsonToPayload(_)
        | QdrantError::PayloadDeserialization(_)) => Error::Rejected(e.to_string()),
    }
}

/// Names `collection` in a missing-collection error (the server's message names the namespaced
/// collection, or none).
fn named_if_missing<T>(result: Result<T>, collection: &str) -> Result<T> {
    match result {
        Err(Error::MissingCollection(_)) => Err(Error::MissingCollection(collection.to_owned())),
        other => other,
    }
}

/// Maps a missing collection to `empty` (reads and deletes of a collection that does not exist).
fn or_empty<T>(result: Result<T>, empty: T) -> Result<T> {
    match result {
        Err(Error::MissingCollection(_)) => Ok(empty),
        other => other,
    }
}

/// `filter`, narrowed to points of `sources` (any of them) when given.
fn search_filter(filter: PointFilter, sources: Option<&[SourceId]>) -> Filter {
    let mut built = to_filter(filter);
    if let Some(sources) = sources {
        let ids: Vec<String> = sources.iter().map(ToString::to_string).collect();
        built.must.push(Condition::matches(SOURCE_ID, ids));
    }
    built
}

fn to_filter(filter: PointFilter) -> Filter {
    let mut must = vec![Condition::matches(WORLD_ID, filter.world.to_string())];
    if let Some(run) = filter.run {
        must.push(Condition::matches(RUN_ID, run.to_string()));
    }
    if let Some(source) = filter.source {
        must.push(Condition::matches(SOURCE_ID, source.to_string()));
    }
    Filter::must(must)
}

fn to_point(point: Point) -> Result<PointStruct> {
    let payload = serde_json::to_value(&point.payload)
        .map_err(|e| Error::Rejected(format!("payload does not serialise: {e}")))?;
    let payload = Payload::try_from(payload).map_err(client_error)?;
    let mut vectors: HashMap<String, pb::Vector> = HashMap::new();
    vectors.insert(DENSE.to_owned(), pb::Vector::new_dense(point.dense));
    if let Some(sparse) = point.sparse {
        vectors.insert(SPARSE.to_owned(), pb::Vector::new_sparse(sparse.indices, sparse.values));
    }
    Ok(PointStruct::new(point.id, vectors, payload))
}

fn point_ids(ids: &[Uuid]) -> Vec<pb::PointId> {
    ids.iter().copied().map(pb::PointId::from).collect()
}

fn uuid_of(id: Option<pb::PointId>) -> Option<Uuid> {
    match id?.point_id_options? {
        PointIdOptions::Uuid(s) => Uuid::parse_str(&s).ok(),
        PointIdOptions::Num(n) => {
            tracing::warn!(
                point = n,
                "ignoring a point with a numeric id: quarry only writes UUIDs"
            );
            None
        }
    }
}

/// Never fails: a payload that is not a [`PointPayload`] (stale or foreign point) is `None`.
fn parse_payload(payload: HashMap<String, pb::Value>) -> Option<PointPayload> {
    if payload.is_empty() {
        return None;
    }
    serde_json::from_value(serde_json::Value::from(Payload::from(payload))).ok()
}

fn record(point: pb::RetrievedPoint) -> Option<PointRecord> {
    Some(PointRecord {
        id: uuid_of(point.id)?,
        payload: parse_payload(point.payload),
    })
}

fn scored(points: Vec<pb::ScoredPoint>) -> Vec<ScoredPoint> {
    points
        .into_iter()
        .filter_map(|p| {
            Some(ScoredPoint {
                id: uuid_of(p.id)?,
                score: p.score,
                payload: parse_payload(p.payload),
            })
        })
        .collect()
}

fn clamp_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A BM25 query for the sparse vector.
fn bm25(sparse: SparseVector) -> Query {
    Query::new_nearest(VectorInput::new_sparse(sparse.indices, sparse.values))
}

/// IDF over `world`'s points only: other worlds' vocabularies must not weigh its terms.
fn world_idf(world: WorldId) -> SearchParamsBuilder {
    SearchParamsBuilder::default().idf(IdfParamsBuilder::new().corpus(to_filter(PointFilter::world(world))))
}

#[async_trait]
impl VectorRepo for ServerRepo {
    fn kind(&self) -> &'static str {
        "qdrant"
    }

    async fn health(&self) -> Result<()> {
        self.client
            .health_check()
            .await
            .map(|_| ())
            .map_err(|e| match client_error(e) {
                // Whatever went wrong, for /readyz the answer is "not ready".
                Error::Unavailable(m) | Error::Rejected(m) | Error::MissingCollection(m) => Error::Unavailable(m),
                Error::Incompatible { reason, .. } => Error::Unavailable(reason),
                Error::Io(e) => Error::Io(e),
            })
    }

    async fn ensure_collection(&self, spec: &CollectionSpec) -> Result<()> {
        if spec.dimensions == 0 {
            return Err(Error::Rejected(format!(
                "collection `{}`: dimensions must be positive",
                spec.name
            )));
        }
        let name = self.name(&spec.name);
        if self.client.collection_exists(&name).await.map_err(client_error)? {
            return self.check_existing(&name, spec).await;
        }
        let mut vectors = VectorsConfigBuilder::default();
        vectors.add_named_vector_params(
            DENSE,
            VectorParamsBuilder::new(u64::from(spec.dimensions), pb::Distance::Cosine),
        );
        let mut create = CreateCollectionBuilder::new(&name).vectors_config(vectors);
        if spec.sparse {
            let mut sparse = SparseVectorsConfigBuilder::default();
            sparse.add_named_vector_params(SPARSE, SparseVectorParamsBuilder::default().modifier(pb::Modifier::Idf));
            create = create.sparse_vectors_config(sparse);
        }
        if let Err(e) = self.client.create_collection(create).await {
            // Another replica may have created it in the meantime: then it only has to match.
            let created_elsewhere = self.client.collection_exists(&name).await.unwrap_or(false);
            if !created_elsewhere {
                return Err(client_error(e));
            }
            return self.check_existing(&name, spec).await;
        }
        tracing::info!(collection = %name, dimensions = spec.dimensions, sparse = spec.sparse, "created Qdrant collection");
        self.ensure_indexes(&name, &HashMap::new()).await
    }

    async fn upsert(&self, collection: &str, points: Vec<Point>) -> Result<()> {
        let name = self.name(collection);
        if points.is_empty() {
            return if self.client.collection_exists(&name).await.map_err(client_error)? {
                Ok(())
            } else {
                Err(Error::MissingCollection(collection.to_owned()))
            };
        }
        let mut points = points.into_iter().map(to_point).collect::<Result<Vec<_>>>()?;
        while !points.is_empty() {
            let rest = points.split_off(points.len().min(UPSERT_BATCH));
            let batch = std::mem::replace(&mut points, rest);
            self.client
                .upsert_points(UpsertPointsBuilder::new(&name, batch).wait(true))
                .await
                .map_err(|e| match client_error(e) {
                    Error::MissingCollection(_) => Error::MissingCollection(collection.to_owned()),
                    other => other,
                })?;
        }
        Ok(())
    }

    async fn search(&self, collection: &str, search: DenseSearch) -> Result<Vec<ScoredPoint>> {
        if search.limit == 0 {
            return Ok(Vec::new());
        }
        let mut query = QueryPointsBuilder::new(self.name(collection))
            .query(Query::new_nearest(search.vector))
            .using(DENSE)
            .filter(search_filter(search.filter, search.sources.as_deref()))
            .limit(clamp_u64(search.limit))
            .with_payload(true);
        if let Some(threshold) = search.score_threshold {
            query = query.score_threshold(threshold);
        }
        self.run_query(collection, query).await
    }

    async fn sparse_search(&self, collection: &str, search: SparseSearch) -> Result<Vec<ScoredPoint>> {
        if search.limit == 0 {
            return Ok(Vec::new());
        }
        let query = QueryPointsBuilder::new(self.name(collection))
            .query(bm25(search.sparse))
            .using(SPARSE)
            .filter(search_filter(search.filter, search.sources.as_deref()))
            .params(world_idf(search.filter.world))
            .limit(clamp_u64(search.limit))
            .with_payload(true);
        self.run_query(collection, query).await
    }

    async fn hybrid_search(&self, collection: &str, search: HybridSearch) -> Result<Vec<ScoredPoint>> {
        if search.limit == 0 {
            return Ok(Vec::new());
        }
        // Each prefetch must be able to fill the final page on its own.
        let prefetch_limit = clamp_u64(search.prefetch_limit.max(search.limit));
        let filter = search_filter(search.filter, search.sources.as_deref());
        let mut dense = PrefetchQueryBuilder::default()
            .query(Query::new_nearest(search.dense))
            .using(DENSE)
            .filter(filter.clone())
            .limit(prefetch_limit);
        if let Some(threshold) = search.dense_score_threshold {
            dense = dense.score_threshold(threshold);
        }
        // IDF over this world's points only: other worlds' vocabularies must not weigh its terms.
        let sparse = PrefetchQueryBuilder::default()
            .query(bm25(search.sparse))
            .using(SPARSE)
            .filter(filter.clone())
            .params(world_idf(search.filter.world))
            .limit(prefetch_limit);
        let query = QueryPointsBuilder::new(self.name(collection))
            .add_prefetch(dense)
            .add_prefetch(sparse)
            .query(match search.fusion {
                super::Fusion::Rrf {
                    dense_weight,
                    sparse_weight,
                } => Query::new_rrf(RrfBuilder::with_k(RRF_K).weights(vec![dense_weight, sparse_weight])),
                super::Fusion::Dbsf => Query::new_fusion(qdrant_client::qdrant::Fusion::Dbsf),
            })
            .filter(filter)
            .limit(clamp_u64(search.limit))
            .with_payload(true);
        self.run_query(collection, query).await
    }

    async fn retrieve(&self, collection: &str, ids: &[Uuid]) -> Result<Vec<PointRecord>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let request = GetPointsBuilder::new(self.name(collection), point_ids(ids))
            .with_payload(true)
            .with_vectors(false);
        let result = self.client.get_points(request).await.map_err(client_error);
        let points = or_empty(result.map(|r| r.result), Vec::new())?;
        // The server does not promise the request's order: restore it.
        let mut by_id: HashMap<Uuid, PointRecord> = points
            .into_iter()
            .filter_map(record)
            .map(|record| (record.id, record))
            .collect();
        Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
    }

    async fn dense_vectors(&self, collection: &str, ids: &[Uuid]) -> Result<Vec<(Uuid, Vec<f32>)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let request = GetPointsBuilder::new(self.name(collection), point_ids(ids))
            .with_payload(false)
            .with_vectors(pb::VectorsSelector {
                names: vec![DENSE.to_owned()],
            });
        let result = self.client.get_points(request).await.map_err(client_error);
        let points = or_empty(result.map(|r| r.result), Vec::new())?;
        Ok(points
            .into_iter()
            .filter_map(|point| {
                let id = uuid_of(point.id)?;
                match point.vectors?.get_vector_by_name(DENSE)? {
                    pb::vector_output::Vector::Dense(dense) => Some((id, dense.data)),
                    pb::vector_output::Vector::Sparse(_) | pb::vector_output::Vector::MultiDense(_) => None,
                }
            })
            .collect())
    }

    async fn delete_points(&self, collection: &str, ids: &[Uuid]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let request = DeletePointsBuilder::new(self.name(collection))
            .points(PointsIdsList { ids: point_ids(ids) })
            .wait(true);
        or_empty(
            self.client
                .delete_points(request)
                .await
                .map(|_| ())
                .map_err(client_error),
            (),
        )
    }

    async fn delete_by_filter(&self, collection: &str, filter: PointFilter) -> Result<()> {
        let request = DeletePointsBuilder::new(self.name(collection))
            .points(to_filter(filter))
            .wait(true);
        or_empty(
            self.client
                .delete_points(request)
                .await
                .map(|_| ())
                .map_err(client_error),
            (),
        )
    }

    async fn count(&self, collection: &str, filter: PointFilter) -> Result<u64> {
        let request = CountPointsBuilder::new(self.name(collection))
            .filter(to_filter(filter))
            .exact(true);
        let result = self
            .client
            .count(request)
            .await
            .map(|r| r.result.map_or(0, |c| c.count))
            .map_err(client_error);
        or_empty(result, 0)
    }

    async fn scroll(
        &self,
        collection: &str,
        filter: PointFilter,
        offset: Option<Uuid>,
        limit: usize,
    ) -> Result<ScrollPage> {
        if limit == 0 {
            // Nothing asked for; hand the position back so the caller does not mistake it for the end.
            return Ok(ScrollPage {
                points: Vec::new(),
                next: offset,
            });
        }
        let mut request = ScrollPointsBuilder::new(self.name(collection))
            .filter(to_filter(filter))
            .limit(u32::try_from(limit).unwrap_or(u32::MAX))
            .with_payload(true)
            .with_vectors(false);
        if let Some(offset) = offset {
            request = request.offset(offset);
        }
        let result = self
            .client
            .scroll(request)
            .await
            .map(|r| ScrollPage {
                points: r.result.into_iter().filter_map(record).collect(),
                next: uuid_of(r.next_page_offset),
            })
            .map_err(client_error);
        or_empty(
            result,
            ScrollPage {
                points: Vec::new(),
                next: None,
            },
        )
    }

    async fn close(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_failures_are_outages_and_only_refusals_are_rejections() {
        for status in [
            code::UNAVAILABLE,
            code::DEADLINE_EXCEEDED,
            code::RESOURCE_EXHAUSTED,
            code::INTERNAL,
            code::UNKNOWN,
            code::DATA_LOSS,
            code::UNAUTHENTICATED,
        ] {
            assert!(
                matches!(status_error(status, "No space left on device"), Error::Unavailable(_)),
                "{status}"
            );
        }
        // INVALID_ARGUMENT (3) and FAILED_PRECONDITION (9): the request itself was refused.
        for status in [3, 9] {
            assert!(
                matches!(
                    status_error(status, "Wrong input: Vector dimension error"),
                    Error::Rejected(_)
                ),
                "{status}"
            );
        }
        assert!(matches!(
            status_error(code::NOT_FOUND, "Collection `x` doesn't exist!"),
            Error::MissingCollection(_)
        ));
    }
}
