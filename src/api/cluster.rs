//! `GET /v1/cluster`: the replicas working on this store, as the registry knows them.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody};
use crate::api::AppState;
use crate::service::error::ServiceError;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/cluster", get(cluster))
}

/// The replicas that heartbeat into this store, and how they share provider budgets.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Cluster)]
pub struct ClusterDto {
    /// The id of the replica that answered.
    pub this: String,
    /// `shared`: provider budgets are one per quota group for every replica (kept in the
    /// store); `local`: each process keeps its own (one process per store).
    #[schema(example = "shared")]
    pub budgets: String,
    /// Seconds between heartbeats, and the silence after which a replica counts as dead.
    pub heartbeat_s: u64,
    pub dead_after_s: u64,
    /// Live replicas, oldest first.
    pub replicas: Vec<ReplicaDto>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Replica)]
pub struct ReplicaDto {
    pub id: String,
    /// Where it is reached (`cluster.address`, else the address it listens on).
    pub address: String,
    pub version: String,
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat (by the store's clock, as seen now).
    pub last_heartbeat: DateTime<Utc>,
    /// Embedding workers it runs.
    pub workers: u32,
    /// Provider requests it had in flight at its last heartbeat.
    pub in_flight: u32,
}

/// The replicas working on this store (each heartbeats every `cluster.heartbeat_s`; one
/// silent for `cluster.dead_after_s` is removed and its claimed work given back).
#[utoipa::path(get, path = "/v1/cluster", tag = "operations",
    responses((status = 200, body = ClusterDto), (status = 401, body = ErrorBody),
        (status = 503, description = "store_unavailable", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn cluster(State(state): State<AppState>) -> Result<axum::Json<ClusterDto>, ApiError> {
    let cluster = &state.cluster;
    let replicas = cluster.replicas().await.map_err(ServiceError::from)?;
    let now = Utc::now();
    let config = cluster.config();
    Ok(axum::Json(ClusterDto {
        this: cluster.id().to_owned(),
        budgets: if config.shared_budgets { "shared" } else { "local" }.to_owned(),
        heartbeat_s: config.heartbeat.as_secs(),
        dead_after_s: config.dead_after.as_secs(),
        replicas: replicas
            .into_iter()
            .map(|r| ReplicaDto {
                last_heartbeat: now - chrono::Duration::milliseconds((r.heartbeat_age_s * 1000.0).round() as i64),
                id: r.beat.id,
                address: r.beat.address,
                version: r.beat.version,
                started_at: r.beat.started_at,
                workers: r.beat.workers,
                in_flight: r.beat.in_flight,
            })
            .collect(),
    }))
}
