//! Building and running the application: connect the stores, assemble the services, bind the
//! listener (port 0 in tests; [`App::port`] reports the real one), then serve until a
//! shutdown signal and stop everything within a bounded time.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use secrecy::ExposeSecret;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::api::jobs::EventStreams;
use crate::api::{self, AppState, Auth, Limits};
use crate::cluster::{Cluster, ClusterConfig};
use crate::config::{ConfigError, Settings, VectorKind};
use crate::crypto::SecretCipher;
use crate::deps::Deps;
use crate::domain::ProviderKind;
use crate::jobs::JobEngine;
use crate::providers::breaker::Breakers;
use crate::providers::google::GoogleProvider;
use crate::providers::http::HttpOptions;
use crate::providers::local::LocalProvider;
use crate::providers::openai::{OpenAiOptions, OpenAiProvider};
use crate::providers::scheduler::{ConfigKey, KeyScheduler, PoolConfig};
use crate::providers::{ModelRegistry, ModelSpec, Providers};
use crate::serve::ConnectionLimits;
use crate::service::audit::AuditLog;
use crate::service::jobs::JobService;
use crate::service::keys::KeyService;
use crate::service::layout::DriftWatch;
use crate::service::repair::RepairService;
use crate::service::retrieval::{RetrievalLimits, RetrievalService};
use crate::service::sources::{SourceService, Uploads};
use crate::service::tokens::TokenService;
use crate::service::webhooks::WebhookService;
use crate::service::worlds::WorldService;
use crate::store::{self, Store};
use crate::vector::{self, VectorRepo, edge::EdgeRepo, server::ServerRepo};
use crate::workers::embedding::{EmbeddingWorkers, WorkerConfig};
use crate::workers::webhooks::WebhookDispatcher;

/// Why the application could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot open the store")]
    Store(#[from] store::Error),
    #[error(transparent)]
    MasterKey(#[from] crate::service::master_key::MasterKeyError),
    #[error("cannot open the vector store")]
    Vector(#[from] vector::Error),
    #[error("cannot set up an embedding provider")]
    Provider(#[from] crate::providers::http::BuildError),
    #[error("cannot build the webhook client")]
    Webhooks(#[source] reqwest::Error),
    #[error("cannot listen on {addr}")]
    Bind { addr: SocketAddr, source: std::io::Error },
}

/// A built application, bound to its port but not yet serving.
pub struct App {
    listener: TcpListener,
    router: axum::Router,
    /// What the handlers share.
    state: AppState,
    /// What the services and workers were built from (its tracker holds every background
    /// task, its token cancels them).
    deps: Deps,
    /// This process's embedding workers.
    workers: EmbeddingWorkers,
    /// Whether this app opened `vectors` (and closes them when it stops) or shares them.
    owns_vectors: bool,
    shutdown_timeout: Duration,
    connections: ConnectionLimits,
}

impl App {
    /// Connects to the store (applying migrations) and the vector store, builds the router and
    /// binds `server.addr`.
    pub async fn build(settings: Settings) -> Result<App, StartupError> {
        Self::build_on(settings, None).await
    }

    /// [`App::build`] on a vector store that is already open and that other apps in this
    /// process share (replicas of one deployment in one process, as tests and benchmarks run
    /// them): the app neither closes it when it stops nor takes the store's claims for its own
    /// at startup.
    pub async fn build_sharing(settings: Settings, vectors: Arc<dyn VectorRepo>) -> Result<App, StartupError> {
        Self::build_on(settings, Some(vectors)).await
    }

    async fn build_on(settings: Settings, shared_vectors: Option<Arc<dyn VectorRepo>>) -> Result<App, StartupError> {
        settings.validate()?;
        settings.check_auth()?;
        crate::outbound::install_tls_provider();
        if settings.auth.disabled {
            tracing::warn!(
                "authentication is DISABLED (auth.disabled = true): anyone who can reach the port can use /v1"
            );
            if !settings.auth.tokens.is_empty() {
                tracing::warn!(
                    tokens = settings.auth.tokens.len(),
                    "auth.tokens are set but IGNORED because auth.disabled = true; remove auth.disabled to require them"
                );
            }
        }
        let store = store::connect(settings.store.url.expose_secret()).await?;
        let owns_vectors = shared_vectors.is_none();
        let vectors = match shared_vectors {
            Some(vectors) => vectors,
            None => open_vectors(&settings)?,
        };
        let cipher = settings.master_key()?.map(SecretCipher::new);
        if let Some(cipher) = &cipher {
            crate::service::master_key::verify(store.as_ref(), cipher).await?;
        }
        let deps = dependencies(&settings, store, vectors, cipher).await?;
        let workers = EmbeddingWorkers::new(&deps, worker_config(&settings.embedding));
        let dispatcher = WebhookDispatcher::new(&deps, (&settings.webhooks).into(), destinations(&settings))
            .map_err(StartupError::Webhooks)?;
        let addr = settings.server.addr;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| StartupError::Bind { addr, source })?;
        let cluster = Arc::new(Cluster::new(
            &deps,
            cluster_config(&settings, &listener, deps.store.kind()),
        ));
        let state = handler_state(&settings, &deps, cluster.clone());
        let router = api::router(state.clone(), auth(&settings, &state), limits(&settings.server));

        // Joins the registry before any work starts (and finds replicas that died meanwhile).
        let released = cluster.beat().await?;
        if released > 0 {
            tracing::info!(
                entries = released,
                "gave back the claims of replicas that stopped heartbeating"
            );
        }
        if settings.vectors.kind == VectorKind::Embedded && owns_vectors {
            // Embedded vectors are one process's (their folder is locked), so no other process
            // works on this store: the leases still held are this process's previous life's,
            // and its work resumes now instead of after they run out.
            let released = deps.store.release_all_leases(crate::domain::now()).await?;
            if released > 0 {
                tracing::info!(entries = released, "gave back the leases a previous process held");
            }
        }
        tracing::info!(
            addr = %listener.local_addr().unwrap_or(addr),
            store = deps.store.kind(),
            vectors = deps.vectors.kind(),
            "quarry is listening"
        );

        // Nothing below can fail: background work starts only now, so a process that cannot
        // start (the port taken, the store unreachable) has touched no job, key or vector.
        start_background(&settings, &deps, &state, &cluster, &dispatcher, workers.clone());
        Ok(App {
            listener,
            router,
            state,
            deps,
            workers,
            owns_vectors,
            shutdown_timeout: Duration::from_secs(settings.server.shutdown_timeout_s),
            connections: connection_limits(&settings.server),
        })
    }

    /// The services the handlers call, e.g. for tests and tools that use one directly.
    pub fn state(&self) -> AppState {
        self.state.clone()
    }

    /// The components everything was built from (store, vectors, job engine, …), e.g. for
    /// tests that seed or inspect data through the real stores.
    pub fn deps(&self) -> Deps {
        self.deps.clone()
    }

    /// This process's embedding workers (tests with `embedding.workers = 0` drive them step by
    /// step).
    pub fn workers(&self) -> EmbeddingWorkers {
        self.workers.clone()
    }

    /// The port actually bound (useful with port 0).
    pub fn port(&self) -> u16 {
        self.local_addr().port()
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// Serves until `shutdown` completes, then stops accepting, lets in-flight requests finish,
    /// cancels background tasks and waits for them — each step bounded by
    /// `server.shutdown_timeout_s` — and finally persists and closes the stores.
    pub async fn run_until(self, shutdown: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        let App {
            listener,
            router,
            state: _,
            deps,
            workers: _,
            owns_vectors,
            shutdown_timeout,
            connections,
        } = self;
        let Deps {
            store,
            vectors,
            tasks: tracker,
            cancel,
            ..
        } = deps;
        let signal = cancel.clone();
        let serve = crate::serve::serve(listener, router, connections, async move {
            shutdown.await;
            tracing::info!("shutdown requested: no new connections, finishing in-flight requests");
            signal.cancel();
        });
        let drain_deadline = async {
            cancel.cancelled().await;
            tokio::time::sleep(shutdown_timeout).await;
        };
        let served = tokio::select! {
            result = serve => result,
            () = drain_deadline => {
                tracing::warn!(timeout_s = shutdown_timeout.as_secs(), "in-flight requests did not finish in time; dropping them");
                Ok(())
            }
        };
        cancel.cancel();
        tracker.close();
        if tokio::time::timeout(shutdown_timeout, tracker.wait()).await.is_err() {
            tracing::warn!("background tasks did not stop in time");
        }
        if owns_vectors && let Err(err) = vectors.close().await {
            tracing::error!(error = %err, "closing the vector store failed");
        }
        store.close().await;
        tracing::info!("quarry stopped");
        served
    }
}

/// The dependency bundle: everything but the store and the vectors is built here.
async fn dependencies(
    settings: &Settings,
    store: Arc<dyn Store>,
    vectors: Arc<dyn VectorRepo>,
    cipher: Option<SecretCipher>,
) -> Result<Deps, StartupError> {
    let registry = Arc::new(ModelRegistry::new((settings.providers.openai.models.iter()).map(|m| {
        ModelSpec::openai_compatible(&m.name, m.dimensions, m.max_input_tokens, m.dimensions_adjustable)
    })));
    let shared_budgets = settings.cluster.shares_budgets(store.kind());
    let scheduler = build_scheduler(settings, store.clone(), cipher.clone(), shared_budgets).await?;
    let meters = crate::meters::Metrics::new();
    scheduler.set_meters(meters.clone());
    let providers = build_providers(settings, &registry)?;
    let (tasks, cancel) = (TaskTracker::new(), CancellationToken::new());
    let engine = JobEngine::new(
        store.clone(),
        vectors.clone(),
        providers.clone(),
        tasks.clone(),
        cancel.clone(),
    );
    Ok(Deps {
        store,
        vectors,
        registry,
        providers,
        scheduler,
        engine,
        breakers: Arc::new(Breakers::new((&settings.embedding.breaker).into())),
        cipher,
        meters,
        tasks,
        cancel,
    })
}

/// The services and settings the handlers share.
fn handler_state(settings: &Settings, deps: &Deps, cluster: Arc<Cluster>) -> AppState {
    let server = &settings.server;
    let limits = RetrievalLimits::for_request_timeout(
        settings.retrieval.max_context_tokens,
        Duration::from_secs(server.request_timeout_s),
    )
    .with_full_context_threshold(settings.retrieval.full_context_threshold)
    .with_hnsw_ef_range(settings.vectors.search.min_hnsw_ef, settings.vectors.search.max_hnsw_ef);
    let retrieval = Arc::new(RetrievalService::new(deps, limits));
    AppState {
        worlds: Arc::new(WorldService::new(deps, settings.retrieval.max_context_tokens)),
        sources: Arc::new(SourceService::new(deps, server.max_body_bytes, settings.sources.html)),
        jobs: Arc::new(JobService::new(deps)),
        retrieval: retrieval.clone(),
        evals: Arc::new(crate::service::evals::EvalService::new(
            deps,
            retrieval,
            crate::api::retrieve::request::eval_setting,
            settings.retrieval.max_context_tokens,
        )),
        repair: RepairService::new(deps),
        keys: Arc::new(KeyService::new(deps)),
        webhooks: Arc::new(WebhookService::new(deps, destinations(settings))),
        tokens: Arc::new(TokenService::new(deps)),
        audit: Arc::new(AuditLog::new(deps, settings.audit.keep_days)),
        cluster,
        registry: deps.registry.clone(),
        breakers: deps.breakers.clone(),
        store: deps.store.clone(),
        vectors: deps.vectors.clone(),
        drift: Arc::new(DriftWatch::default()),
        meters: deps.meters.clone(),
        metrics_token: (settings.auth.metrics_token.as_ref()).map(|t| Arc::new(crate::api::token_digest(t))),
        shutdown: deps.cancel.clone(),
        max_body_bytes: server.max_body_bytes,
        event_streams: Arc::new(EventStreams::new(
            server.max_event_streams,
            server.max_event_streams_per_client,
        )),
        uploads: Arc::new(Uploads::new(server.max_concurrent_uploads)),
        upload_wait: Duration::from_secs(server.upload_wait_s),
        sse_keep_alive: Duration::from_secs(15).min(Duration::from_secs(server.idle_timeout_s) / 3),
    }
}

/// Where webhook deliveries may go (`webhooks.allowed_networks`).
fn destinations(settings: &Settings) -> crate::outbound::Destinations {
    crate::outbound::Destinations::new(settings.webhooks.allowed_networks.clone())
}

fn worker_config(embedding: &crate::config::EmbeddingSettings) -> WorkerConfig {
    WorkerConfig {
        workers: embedding.workers,
        max_attempts: embedding.max_attempts,
        reuse: embedding.reuse,
        lease: Duration::from_secs(embedding.lease_s.max(1)),
    }
}

fn cluster_config(settings: &Settings, listener: &TcpListener, store_kind: &str) -> ClusterConfig {
    let addr = settings.server.addr;
    ClusterConfig {
        address: (settings.cluster.address.clone())
            .unwrap_or_else(|| listener.local_addr().unwrap_or(addr).to_string()),
        workers: u32::try_from(settings.embedding.workers).unwrap_or(u32::MAX),
        heartbeat: Duration::from_secs(settings.cluster.heartbeat_s),
        dead_after: Duration::from_secs(settings.cluster.dead_after_s),
        shared_budgets: settings.cluster.shares_budgets(store_kind),
    }
}

fn connection_limits(server: &crate::config::ServerSettings) -> ConnectionLimits {
    ConnectionLimits {
        max_connections: server.max_connections,
        max_connections_per_client: server.max_connections_per_client,
        header_read_timeout: Duration::from_secs(server.header_read_timeout_s),
        idle_timeout: Duration::from_secs(server.idle_timeout_s),
    }
}

/// Every background task, in order: the key refresh, the replica heartbeat, the drift watch,
/// webhook deliveries, the audit log's forgetting, the parents pass, the repairs and audits of
/// vectors, and the embedding workers (after the startup repair, when it runs).
fn start_background(
    settings: &Settings,
    deps: &Deps,
    state: &AppState,
    cluster: &Arc<Cluster>,
    dispatcher: &WebhookDispatcher,
    workers: EmbeddingWorkers,
) {
    let (tracker, cancel) = (&deps.tasks, &deps.cancel);
    tracker.spawn(refresh_keys(deps.scheduler.clone(), cancel.clone()));
    cluster.spawn(tracker, cancel);
    tracker.spawn((state.drift.clone()).run(deps.store.clone(), deps.vectors.clone(), cancel.clone()));
    dispatcher.spawn(format!("{}-webhooks", cluster.id()), tracker, cancel);
    state.audit.spawn_forgetting(tracker, cancel);
    (state.evals).spawn_runner(format!("{}-evals", cluster.id()), tracker, cancel);
    {
        // Parents for sources chunked before they existed (small-to-large retrieval).
        let (store, cancel) = (deps.store.clone(), cancel.clone());
        tracker.spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                result = crate::jobs::parents::backfill(store.as_ref()) => {
                    if let Err(err) = result {
                        tracing::warn!(error = %crate::telemetry::error_chain(&err), "the parents pass failed");
                    }
                }
            }
        });
    }
    let start_workers = {
        let (tracker, cancel) = (tracker.clone(), cancel.clone());
        let replica = cluster.id().to_owned();
        let run = settings.embedding.workers > 0;
        move || {
            if run {
                workers.spawn(&replica, &tracker, &cancel);
            }
        }
    };
    if settings.embedding.audit_interval_s > 0 {
        state
            .repair
            .spawn_audits(Duration::from_secs(settings.embedding.audit_interval_s));
    }
    if settings.embedding.repair_on_startup {
        state.repair.spawn_startup(start_workers);
    } else {
        start_workers();
    }
}

fn limits(server: &crate::config::ServerSettings) -> Limits {
    Limits {
        max_body_bytes: server.max_body_bytes,
        request_timeout: Duration::from_secs(server.request_timeout_s),
    }
}

fn auth(settings: &Settings, state: &AppState) -> Auth {
    Auth::new(
        &settings.auth.tokens,
        settings.auth.disabled,
        state.tokens.clone(),
        state.store.clone(),
        state.audit.clone(),
    )
}

fn build_providers(settings: &Settings, registry: &ModelRegistry) -> Result<Providers, StartupError> {
    let p = &settings.providers;
    let google = GoogleProvider::new(&p.google, registry, HttpOptions::from(&p.google))?;
    let openai = OpenAiProvider::new(&p.openai, registry, OpenAiOptions::from(&p.openai))?;
    let local = LocalProvider::new(&p.local.model_dir, p.local.max_concurrency);
    Ok(Providers::default()
        .with(Arc::new(google))
        .with(Arc::new(openai))
        .with(Arc::new(local))
        .with_reranker(crate::providers::rerank::Reranker::new(&p.rerank)?))
}

/// How often the scheduler merges key state written by other replicas.
const KEY_REFRESH_INTERVAL: Duration = Duration::from_secs(5);

async fn build_scheduler(
    settings: &Settings,
    store: Arc<dyn Store>,
    cipher: Option<SecretCipher>,
    shared_budgets: bool,
) -> Result<KeyScheduler, StartupError> {
    let p = &settings.providers;
    let mut config_keys = Vec::new();
    for (provider, keys, group) in [
        (ProviderKind::Google, &p.google.keys, &p.google.quota_group),
        (ProviderKind::OpenAi, &p.openai.keys, &p.openai.quota_group),
        (ProviderKind::Rerank, &p.rerank.keys, &p.rerank.quota_group),
    ] {
        for secret in keys {
            config_keys.push(ConfigKey {
                provider,
                secret: secret.clone(),
                quota_group: group.clone(),
            });
        }
    }
    let pools = [
        (ProviderKind::Google, PoolConfig::from(&p.google.scheduling)),
        (ProviderKind::OpenAi, PoolConfig::from(&p.openai.scheduling)),
        (ProviderKind::Rerank, PoolConfig::from(&p.rerank.scheduling)),
    ]
    .into_iter()
    .map(|(provider, pool)| (provider, PoolConfig { shared_budgets, ..pool }))
    .collect();
    Ok(KeyScheduler::new(store, cipher, config_keys, pools, p.local.max_concurrency).await?)
}

/// Keeps the scheduler in step with keys and cooldowns written by other replicas.
async fn refresh_keys(scheduler: KeyScheduler, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(KEY_REFRESH_INTERVAL) => {}
        }
        if let Err(err) = scheduler.refresh().await {
            tracing::warn!(error = %err, "refreshing provider keys from the store failed");
        }
    }
}

/// `quarry vectors check` (`apply = false`) and `quarry vectors apply-settings` (`apply = true`):
/// compares every collection in use with `[vectors.collection]` and, when applying, changes what
/// can change in place. Answers what still differs. The embedded store is locked by a running
/// service: stop it first.
pub async fn vector_settings(
    settings: &Settings,
    apply: bool,
) -> Result<Vec<crate::service::layout::CollectionDrift>, StartupError> {
    let store = store::connect(settings.store.url.expose_secret()).await?;
    let vectors = open_vectors(settings)?;
    let result = if apply {
        crate::service::layout::apply_settings(store.as_ref(), vectors.as_ref()).await
    } else {
        crate::service::layout::drift_report(store.as_ref(), vectors.as_ref()).await
    };
    let closed = vectors.close().await;
    store.close().await;
    closed?;
    result.map_err(|message| StartupError::Vector(vector::Error::Unavailable(message)))
}

/// Opens the configured vector store (`[vectors]`, with its collection and search settings).
pub fn open_vectors(settings: &Settings) -> Result<Arc<dyn VectorRepo>, StartupError> {
    let layout = crate::vector::settings::Layout {
        collection: settings.vectors.collection.clone(),
        search: settings.vectors.search.clone(),
    };
    Ok(match settings.vectors.kind {
        VectorKind::Embedded => Arc::new(EdgeRepo::open_with(&settings.vectors.path, layout)?),
        VectorKind::Qdrant => {
            let api_key = settings.vectors.api_key.as_ref().map(|k| k.expose_secret().to_owned());
            Arc::new(ServerRepo::connect_nodes(
                &settings.vectors.node_urls(),
                api_key,
                String::new(),
                layout,
            )?)
        }
    })
}

/// Completes on ctrl-c or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sig) => {
                sig.recv().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
