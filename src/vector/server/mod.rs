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

mod collections;
mod convert;
mod errors;
mod layout;
mod nodes;
mod query;
mod writes;

use std::fmt;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use async_trait::async_trait;
use qdrant_client::Qdrant;
use uuid::Uuid;

use super::settings::{Layout, SettingDrift, drift};
use super::{
    CollectionSpec, DenseSearch, Error, HybridSearch, NodeState, Point, PointFilter, PointHome, PointRecord, Result,
    ScoredPoint, ScrollPage, SparseSearch, VectorRepo,
};
use errors::client_error;

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
    /// The server-side name of `collection`.
    fn name(&self, collection: &str) -> String {
        format!("{}{collection}", self.prefix)
    }
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
        collections::ensure(self, spec).await
    }

    async fn upsert(&self, collection: &str, points: Vec<Point>) -> Result<()> {
        writes::upsert(self, collection, points).await
    }

    async fn search(&self, collection: &str, search: DenseSearch) -> Result<Vec<ScoredPoint>> {
        query::search(self, collection, search).await
    }

    async fn sparse_search(&self, collection: &str, search: SparseSearch) -> Result<Vec<ScoredPoint>> {
        query::sparse_search(self, collection, search).await
    }

    async fn hybrid_search(&self, collection: &str, search: HybridSearch) -> Result<Vec<ScoredPoint>> {
        query::hybrid_search(self, collection, search).await
    }

    async fn retrieve(&self, collection: &str, ids: &[Uuid]) -> Result<Vec<PointRecord>> {
        query::retrieve(self, collection, ids).await
    }

    async fn dense_vectors(&self, collection: &str, ids: &[Uuid]) -> Result<Vec<(Uuid, Vec<f32>)>> {
        query::dense_vectors(self, collection, ids).await
    }

    async fn delete_points(&self, collection: &str, ids: &[Uuid]) -> Result<()> {
        writes::delete_points(self, collection, ids).await
    }

    async fn move_points(&self, collection: &str, ids: &[Uuid], to: PointHome) -> Result<()> {
        writes::move_points(self, collection, ids, to).await
    }

    async fn delete_by_filter(&self, collection: &str, filter: PointFilter) -> Result<()> {
        writes::delete_by_filter(self, collection, filter).await
    }

    async fn count(&self, collection: &str, filter: PointFilter) -> Result<u64> {
        query::count(self, collection, filter).await
    }

    async fn scroll(
        &self,
        collection: &str,
        filter: PointFilter,
        offset: Option<Uuid>,
        limit: usize,
    ) -> Result<ScrollPage> {
        query::scroll(self, collection, filter, offset, limit).await
    }

    async fn drift(&self, collection: &str) -> Result<Vec<SettingDrift>> {
        Ok(self
            .observed(collection)
            .await?
            .map(|observed| drift(&self.layout.collection, &observed))
            .unwrap_or_default())
    }
    async fn apply_settings(&self, collection: &str) -> Result<Vec<SettingDrift>> {
        layout::apply_settings(self, collection).await
    }

    async fn nodes(&self) -> Vec<NodeState> {
        nodes::node_states(self).await
    }

    async fn close(&self) -> Result<()> {
        Ok(())
    }
}
