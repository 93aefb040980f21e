//! The cluster's nodes: building their clients, sending each request to the node that answers
//! (moving on from one that cannot be reached), and checking every node for readiness.

use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

use qdrant_client::{Qdrant, QdrantError};

use crate::vector::settings::Layout;
use crate::vector::{Error, NodeState, Result};

use super::errors::{client_error, code};
use super::{CONNECT_TIMEOUT, NODE_CHECK_TIMEOUT, Node, REQUEST_TIMEOUT, ServerRepo};

impl ServerRepo {
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
    pub(super) async fn call<T, F, Fut>(&self, op: F) -> Result<T, QdrantError>
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

/// The readiness of every node, and which one requests go to first.
pub(super) async fn node_states(repo: &ServerRepo) -> Vec<NodeState> {
    let preferred = repo.preferred.load(AtomicOrdering::Relaxed) % repo.nodes.len();
    let checks = repo.nodes.iter().map(|node| async move {
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
