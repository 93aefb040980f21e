//! What handlers share: the services they call and the few settings they apply themselves.
//! Built once by the composition root ([`crate::app`]); nothing here is for tests.

use std::sync::Arc;
use std::time::Duration;

use crate::providers::ModelRegistry;
use crate::providers::breaker::Breakers;
use crate::service::audit::AuditLog;
use crate::service::jobs::JobService;
use crate::service::keys::KeyService;
use crate::service::layout::DriftWatch;
use crate::service::repair::RepairService;
use crate::service::retrieval::RetrievalService;
use crate::service::sources::{SourceService, Uploads};
use crate::service::tokens::TokenService;
use crate::service::webhooks::WebhookService;
use crate::service::worlds::WorldService;
use crate::store::Store;
use crate::vector::VectorRepo;

/// Cheap to clone: everything inside is shared.
#[derive(Clone)]
pub struct AppState {
    pub worlds: Arc<WorldService>,
    pub sources: Arc<SourceService>,
    pub jobs: Arc<JobService>,
    pub retrieval: Arc<RetrievalService>,
    /// Evaluation test sets.
    pub evals: Arc<crate::service::evals::EvalService>,
    pub repair: RepairService,
    pub keys: Arc<KeyService>,
    pub webhooks: Arc<WebhookService>,
    /// API tokens managed through `/v1/tokens` (the router's auth checks them too).
    pub tokens: Arc<TokenService>,
    /// The audit log of administrative actions (`/v1/audit`; the router's auth writes it).
    pub audit: Arc<AuditLog>,
    /// This replica's membership in the registry of replicas sharing the store.
    pub cluster: Arc<crate::cluster::Cluster>,
    /// The models `/v1/models` lists.
    pub registry: Arc<ModelRegistry>,
    /// This process's circuit breakers (`/v1/keys/breakers`, `/metrics`).
    pub breakers: Arc<Breakers>,
    /// The stores `/readyz` pings.
    pub store: Arc<dyn Store>,
    pub vectors: Arc<dyn VectorRepo>,
    /// How the collections in use differ from `[vectors.collection]` (for `/readyz`).
    pub drift: Arc<DriftWatch>,
    /// This app's Prometheus series (`/metrics`).
    pub meters: crate::meters::Metrics,
    /// Who may scrape `/metrics` (`None`: anyone).
    pub metrics_token: Option<Arc<[u8; 32]>>,
    /// Fires when the server is told to stop: long-lived answers (event streams) end on it, so
    /// a graceful shutdown does not wait out its timeout for them.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// `server.max_body_bytes`, for the 413s handlers give themselves (multipart uploads).
    pub max_body_bytes: usize,
    /// Job event streams open now, and how many may be (`server.max_event_streams`, and
    /// `server.max_event_streams_per_client` per client address).
    pub event_streams: Arc<super::jobs::EventStreams>,
    /// Uploads being read and chunked now (`server.max_concurrent_uploads` slots, held by the
    /// blocking work), and how long an upload waits for a slot.
    pub uploads: Arc<Uploads>,
    pub upload_wait: Duration,
    /// How often an event stream sends a keep-alive comment: 15 s, or a third of
    /// `server.idle_timeout_s` when that is shorter, so a quiet stream is never idle.
    pub sse_keep_alive: Duration,
}
