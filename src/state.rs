//! Shared application state handed to every handler.

use std::sync::Arc;

use crate::jobs::JobEngine;
use crate::providers::ModelRegistry;
use crate::providers::scheduler::KeyScheduler;
use crate::service::jobs::JobService;
use crate::service::keys::KeyService;
use crate::service::repair::RepairService;
use crate::service::retrieval::RetrievalService;
use crate::service::sources::SourceService;
use crate::service::worlds::WorldService;
use crate::store::Store;
use crate::vector::VectorRepo;
use crate::workers::embedding::EmbeddingWorkers;

/// Cheap to clone: everything inside is shared.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub vectors: Arc<dyn VectorRepo>,
    pub registry: Arc<ModelRegistry>,
    pub worlds: Arc<WorldService>,
    pub keys: Arc<KeyService>,
    pub webhooks: Arc<crate::service::webhooks::WebhookService>,
    /// API tokens managed through `/v1/tokens` (the router's auth checks them too).
    pub tokens: Arc<crate::service::tokens::TokenService>,
    /// The audit log of administrative actions (`/v1/audit`; the router's auth writes it).
    pub audit: Arc<crate::service::audit::AuditLog>,
    pub sources: Arc<SourceService>,
    pub jobs: Arc<JobService>,
    pub retrieval: Arc<RetrievalService>,
    pub repair: RepairService,
    /// The job lifecycle (for handlers: nothing yet; for tests and tools: waiting for
    /// re-ingest preparations).
    pub engine: JobEngine,
    /// This process's embedding workers (tests drive them step by step).
    pub workers: EmbeddingWorkers,
    pub scheduler: KeyScheduler,
    /// This app's Prometheus series (`/metrics`).
    pub meters: crate::meters::Metrics,
    /// Who may scrape `/metrics` (`None`: anyone).
    pub metrics_token: Option<Arc<[u8; 32]>>,
    /// How the collections in use differ from `[vectors.collection]` (for `/readyz`).
    pub drift: Arc<crate::service::layout::DriftWatch>,
    /// This replica's membership in the registry of replicas sharing the store.
    pub cluster: Arc<crate::cluster::Cluster>,
    /// This process's circuit breakers, per provider and model.
    pub breakers: Arc<crate::providers::breaker::Breakers>,
    /// Fires when the server is told to stop: long-lived answers (event streams) end on it, so
    /// a graceful shutdown does not wait out its timeout for them.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// `server.max_body_bytes`, for the 413s handlers give themselves (multipart uploads).
    pub max_body_bytes: usize,
    /// Job event streams open now, and how many may be (`server.max_event_streams`, and
    /// `server.max_event_streams_per_client` per client address).
    pub event_streams: Arc<crate::api::jobs::EventStreams>,
    /// Uploads being read and chunked now (`server.max_concurrent_uploads` slots, held by the
    /// blocking work), and how long an upload waits for a slot.
    pub uploads: Arc<crate::service::sources::Uploads>,
    /// How often an event stream sends a keep-alive comment: 15 s, or a third of
    /// `server.idle_timeout_s` when that is shorter, so a quiet stream is never idle.
    pub sse_keep_alive: std::time::Duration,
    pub upload_wait: std::time::Duration,
}
