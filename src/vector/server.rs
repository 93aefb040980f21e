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
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::time::Duration;

use async_trait::async_trait;
use qdrant_client::qdrant::point_id::PointIdOptions;
use qdrant_client::qdrant::vectors_config::Config as VectorsConfigKind;
use qdrant_client::qdrant::{
    self as pb, CollectionParamsDiffBuilder, Condition, CountPointsBuilder, CreateCollectionBuilder,
    CreateFieldIndexCollectionBuilder, DeletePointsBuilder, FieldType, Filter, GetPointsBuilder, HnswConfigDiffBuilder,
    IdfParamsBuilder, PointStruct, PointsIdsList, PrefetchQueryBuilder, QuantizationSearchParamsBuilder, Query,
    QueryPointsBuilder, RrfBuilder, ScalarQuantizationBuilder, ScrollPointsBuilder, SearchParamsBuilder,
    SetPayloadPointsBuilder, SparseVectorParamsBuilder, SparseVectorsConfigBuilder, UpdateCollectionBuilder,
    UpsertPointsBuilder, UuidIndexParamsBuilder, VectorInput, VectorParamsBuilder, VectorParamsDiffBuilder,
    VectorsConfigBuilder,
};
use qdrant_client::{Payload, Qdrant, QdrantError};
use uuid::Uuid;

use crate::domain::{SourceId, WorldId};

use super::settings::{CollectionSettings, Layout, Observed, Quantization, SettingDrift, drift};
use super::{
    CollectionSpec, DENSE, DenseSearch, Error, HybridSearch, NodeState, Point, PointFilter, PointHome, PointPayload,
    PointRecord, Result, SPARSE, ScoredPoint, ScrollPage, SparseSearch, SparseVector, VectorRepo, rules,
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
/// How long `/readyz` waits for one node's health answer.
const NODE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// A Qdrant server, or several nodes of one cluster. Cheap to share: each node's client holds
/// a connection pool.
pub struct ServerRepo {
    nodes: Vec<Node>,
    /// The node requests go to first: the last one that answered.
    preferred: AtomicUsize,
    /// Prepended to every collection name (tests isolate themselves with it; production: "").
    prefix: String,
    layout: Layout,
}

/// One configured node.
struct Node {
    url: String,
    client: Qdrant,
}

impl fmt::Debug for ServerRepo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the API key.
        let urls: Vec<&str> = self.nodes.iter().map(|n| n.url.as_str()).collect();
        f.debug_struct("ServerRepo")
            .field("urls", &urls)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl ServerRepo {
    /// Runs a query on `collection`; a missing collection is named in the error.
    async fn run_query(&self, collection: &str, query: QueryPointsBuilder) -> Result<Vec<ScoredPoint>> {
        let result = self
            .call(|c| {
                let query = query.clone();
                async move { c.query(query).await }
            })
            .await
            .map(|r| scored(r.result))
            .map_err(client_error);
        named_if_missing(result, collection)
    }

    /// Builds a client for the gRPC endpoint `url` (e.g. `http://localhost:6334`) with Qdrant's
    /// default collection layout. See [`ServerRepo::connect_nodes`].
    pub fn connect(url: &str, api_key: Option<String>, collection_prefix: String) -> Result<ServerRepo> {
        Self::connect_nodes(&[url.to_owned()], api_key, collection_prefix, Layout::default())
    }

    /// Builds a client for the nodes at `urls` (gRPC endpoints of one cluster, tried in order).
    /// Does not touch the network: connections are made on first use, so a server that is down
    /// shows up as [`Error::Unavailable`] from `health()` and the operations, not here. A
    /// malformed URL is [`Error::Rejected`].
    pub fn connect_nodes(
        urls: &[String],
        api_key: Option<String>,
        collection_prefix: String,
        layout: Layout,
    ) -> Result<ServerRepo> {
        if urls.is_empty() {
            return Err(Error::Rejected("no Qdrant URL given".into()));
        }
        let nodes = urls
            .iter()
            .map(|url| {
                let client = Qdrant::from_url(url)
                    .api_key(api_key.clone())
                    .timeout(REQUEST_TIMEOUT)
                    .connect_timeout(CONNECT_TIMEOUT)
                    // The check would block here on a throwaway runtime and print to stdout.
                    .skip_compatibility_check()
                    .build()
                    .map_err(|e| match e {
                        QdrantError::InvalidUri(e) => Error::Rejected(format!("invalid Qdrant URL {url:?}: {e}")),
                        other => client_error(other),
                    })?;
                Ok(Node {
                    url: url.clone(),
                    client,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ServerRepo {
            nodes,
            preferred: AtomicUsize::new(0),
            prefix: collection_prefix,
            layout,
        })
    }

    /// Runs `op` on the preferred node; when that node cannot be reached, on the next one, and so
    /// on once around the list. The node that answered becomes the preferred one. Only outages
    /// move a request on: an answer (even a refusal) is the cluster's answer.
    async fn call<T, F, Fut>(&self, op: F) -> Result<T, QdrantError>
    where
        F: Fn(Qdrant) -> Fut,
        Fut: Future<Output = Result<T, QdrantError>>,
    {
        let count = self.nodes.len();
        let start = self.preferred.load(AtomicOrdering::Relaxed) % count;
        let mut step = 0;
        loop {
            let index = (start + step) % count;
            let node = &self.nodes[index];
            match op(node.client.clone()).await {
                Ok(value) => {
                    if step > 0 && self.preferred.swap(index, AtomicOrdering::Relaxed) != index {
                        tracing::warn!(node = %node.url, "Qdrant: moved to this node");
                    }
                    return Ok(value);
                }
                Err(e) if step + 1 < count && node_unreachable(&e) => {
                    tracing::warn!(node = %node.url, error = %e, "Qdrant node unreachable; trying the next one");
                    step += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The write options every update carries: ordered through the shard's leader replica, so
    /// replicas apply one point's writes in the same order, yet still accepted while a node is down.
    fn ordering() -> pb::WriteOrdering {
        pb::WriteOrdering {
            r#type: pb::WriteOrderingType::Medium as i32,
        }
    }

    /// Search parameters of a dense query: the beam width and, with quantization, rescoring.
    fn dense_params(&self, hnsw_ef: Option<u32>) -> Option<SearchParamsBuilder> {
        let search = &self.layout.search;
        let ef = search.ef(hnsw_ef);
        let quantized = self.layout.collection.quantization == Quantization::Int8;
        if ef.is_none() && !quantized {
            return None;
        }
        let mut params = SearchParamsBuilder::default();
        if let Some(ef) = ef {
            params = params.hnsw_ef(u64::from(ef));
        }
        if quantized {
            let mut q = QuantizationSearchParamsBuilder::default().rescore(search.rescore.unwrap_or(true));
            if let Some(oversampling) = search.oversampling {
                q = q.oversampling(oversampling);
            }
            params = params.quantization(q);
        }
        Some(params)
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
    async fn check_existing(&self, name: &str, spec: &CollectionSpec) -> Result<()> {
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

    /// Points by id as `request` asks for them; none from a missing collection.
    async fn points(&self, request: GetPointsBuilder) -> Result<Vec<pb::RetrievedPoint>> {
        let result = self
            .call(|c| {
                let request = request.clone();
                async move { c.get_points(request).await }
            })
            .await
            .map_err(client_error);
        or_empty(result.map(|r| r.result), Vec::new())
    }

    async fn info(&self, name: &str) -> Result<pb::CollectionInfo> {
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

    async fn exists(&self, name: &str) -> Result<bool> {
        self.call(|c| {
            let name = name.to_owned();
            async move { c.collection_exists(name).await }
        })
        .await
        .map_err(client_error)
    }

    /// The layout of an existing collection; `None` when it does not exist.
    async fn observed(&self, collection: &str) -> Result<Option<Observed>> {
        let name = self.name(collection);
        if !self.exists(&name).await? {
            return Ok(None);
        }
        let info = named_if_missing(self.info(&name).await, collection)?;
        Ok(Some(observed(info.config.as_ref())))
    }

    /// The collection as `[vectors.collection]` describes it, for creating it.
    fn create_request(&self, name: &str, spec: &CollectionSpec) -> CreateCollectionBuilder {
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

/// Whether `e` says the node could not be reached (or failed before answering), so the same
/// request may go to another node (every request quarry sends is idempotent). A refusal or a
/// missing collection is the cluster's answer.
fn node_unreachable(e: &QdrantError) -> bool {
    match e {
        QdrantError::ResponseError { status } => matches!(
            status.code() as i32,
            // The client reports a refused or broken connection as INTERNAL ("Failed to connect").
            code::UNAVAILABLE | code::DEADLINE_EXCEEDED | code::CANCELLED | code::UNKNOWN | code::INTERNAL
        ),
        QdrantError::Io(_) => true,
        _ => false,
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
        self.call(|c| async move { c.health_check().await })
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
        if self.exists(&name).await? {
            return self.check_existing(&name, spec).await;
        }
        let create = self.create_request(&name, spec);
        let created = self
            .call(|c| {
                let create = create.clone();
                async move { c.create_collection(create).await }
            })
            .await;
        if let Err(e) = created {
            // Another replica may have created it in the meantime (or a node created it and then
            // failed to answer): then it only has to match.
            let created_elsewhere = self.exists(&name).await.unwrap_or(false);
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
            return if self.exists(&name).await? {
                Ok(())
            } else {
                Err(Error::MissingCollection(collection.to_owned()))
            };
        }
        let mut points = points.into_iter().map(to_point).collect::<Result<Vec<_>>>()?;
        while !points.is_empty() {
            let rest = points.split_off(points.len().min(UPSERT_BATCH));
            let batch = std::mem::replace(&mut points, rest);
            let request = UpsertPointsBuilder::new(&name, batch)
                .wait(true)
                .ordering(Self::ordering());
            self.call(|c| {
                let request = request.clone();
                async move { c.upsert_points(request).await }
            })
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
        if let Some(params) = self.dense_params(search.hnsw_ef) {
            query = query.params(params);
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
        if let Some(params) = self.dense_params(search.hnsw_ef) {
            dense = dense.params(params);
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
        let points = self.points(request).await?;
        Ok(rules::in_request_order(ids, points.into_iter().filter_map(record)))
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
        let points = self.points(request).await?;
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
            .wait(true)
            .ordering(Self::ordering());
        or_empty(
            self.call(|c| {
                let request = request.clone();
                async move { c.delete_points(request).await }
            })
            .await
            .map(|_| ())
            .map_err(client_error),
            (),
        )
    }

    async fn move_points(&self, collection: &str, ids: &[Uuid], to: PointHome) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let payload = Payload::from(to.to_json());
        let request = SetPayloadPointsBuilder::new(self.name(collection), payload)
            .points_selector(PointsIdsList { ids: point_ids(ids) })
            .wait(true)
            .ordering(Self::ordering());
        or_empty(
            self.call(|c| {
                let request = request.clone();
                async move { c.set_payload(request).await }
            })
            .await
            .map(|_| ())
            .map_err(client_error),
            (),
        )
    }

    async fn delete_by_filter(&self, collection: &str, filter: PointFilter) -> Result<()> {
        let request = DeletePointsBuilder::new(self.name(collection))
            .points(to_filter(filter))
            .wait(true)
            .ordering(Self::ordering());
        or_empty(
            self.call(|c| {
                let request = request.clone();
                async move { c.delete_points(request).await }
            })
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
            .call(|c| {
                let request = request.clone();
                async move { c.count(request).await }
            })
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
            .call(|c| {
                let request = request.clone();
                async move { c.scroll(request).await }
            })
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

    async fn drift(&self, collection: &str) -> Result<Vec<SettingDrift>> {
        Ok(self
            .observed(collection)
            .await?
            .map(|observed| drift(&self.layout.collection, &observed))
            .unwrap_or_default())
    }

    async fn apply_settings(&self, collection: &str) -> Result<Vec<SettingDrift>> {
        let found = self.drift(collection).await?;
        let changeable = |setting: &str| found.iter().any(|d| d.in_place && d.setting.ends_with(setting));
        let layout = &self.layout.collection;
        let mut update = UpdateCollectionBuilder::new(self.name(collection));
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
            self.call(|c| {
                let request = request.clone();
                async move { c.update_collection(request).await }
            })
            .await
            .map_err(client_error)?;
            tracing::info!(collection, "applied [vectors.collection] settings in place");
        }
        self.drift(collection).await
    }

    async fn nodes(&self) -> Vec<NodeState> {
        let preferred = self.preferred.load(AtomicOrdering::Relaxed) % self.nodes.len();
        let checks = self.nodes.iter().map(|node| async move {
            let answer = tokio::time::timeout(NODE_CHECK_TIMEOUT, node.client.health_check()).await;
            match answer {
                Ok(Ok(_)) => true,
                Ok(Err(e)) => {
                    tracing::warn!(node = %node.url, error = %e, "readiness: Qdrant node check failed");
                    false
                }
                Err(_) => {
                    tracing::warn!(node = %node.url, "readiness: Qdrant node did not answer in time");
                    false
                }
            }
        });
        futures_util::future::join_all(checks)
            .await
            .into_iter()
            .enumerate()
            .map(|(index, ok)| NodeState {
                index,
                ok,
                preferred: index == preferred,
            })
            .collect()
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
