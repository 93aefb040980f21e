//! Liveness and readiness probes (no authentication).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ErrorDetail;
use crate::api::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: String,
}

/// The state of one dependency.
#[derive(Debug, Serialize, ToSchema)]
pub struct Check {
    /// Backend kind, e.g. `sqlite`, `postgres`, `embedded`, `qdrant`.
    pub kind: String,
    pub ok: bool,
    /// Why it is not ready (no secrets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Vector store with several nodes (`vectors.urls`): each node's state. Ready while any
    /// node answers; a node down is a degraded state worth an alert.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<crate::vector::NodeState>,
    /// Vector store: collections whose layout differs from `[vectors.collection]` (reported,
    /// never changed silently; `quarry vectors apply-settings` changes what can change in
    /// place). Does not affect readiness.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<crate::service::layout::CollectionDrift>,
}

/// Readiness, per dependency. When not ready, `error` carries the same structured error as
/// every other non-2xx answer: `store_unavailable` when the database is down (whatever the
/// vector store), else `vector_store_unavailable`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    /// `ready` or `unavailable`.
    pub status: String,
    pub store: Check,
    pub vectors: Check,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, body = Health)))]
pub async fn healthz() -> axum::Json<Health> {
    axum::Json(Health { status: "ok".into() })
}

/// The store and the vector store are reachable (503 otherwise).
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, body = Readiness), (status = 503, body = Readiness)))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, axum::Json<Readiness>) {
    let (store, vectors, nodes) = tokio::join!(state.store.ping(), state.vectors.health(), state.vectors.nodes());
    let store = Check {
        kind: state.store.kind().into(),
        ok: store.is_ok(),
        // The cause (which can name paths and hosts) goes to the log, not to this
        // unauthenticated answer.
        error: store.err().map(|e| {
            tracing::warn!(error = %e, "readiness: store check failed");
            "the store cannot be reached (the server log says why)".to_owned()
        }),
        nodes: Vec::new(),
        drift: Vec::new(),
    };
    let vectors = Check {
        kind: state.vectors.kind().into(),
        ok: vectors.is_ok(),
        error: vectors.err().map(|e| {
            tracing::warn!(error = %e, "readiness: vector store check failed");
            "the vector store cannot be reached (the server log says why)".to_owned()
        }),
        nodes,
        drift: state.drift.current(),
    };
    let ready = store.ok && vectors.ok;
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let label = if ready { "ready" } else { "unavailable" };
    let error = match (store.ok, vectors.ok) {
        (true, true) => None,
        (false, _) => Some(ErrorDetail {
            code: "store_unavailable".into(),
            message: "not ready: the database is unavailable".into(),
            details: None,
        }),
        (true, false) => Some(ErrorDetail {
            code: "vector_store_unavailable".into(),
            message: "not ready: the vector store is unavailable".into(),
            details: None,
        }),
    };
    (
        status,
        axum::Json(Readiness {
            status: label.into(),
            store,
            vectors,
            error,
        }),
    )
}
