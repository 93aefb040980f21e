//! # quarry
//!
//! A retrieval-augmented generation service. A *world* is an isolated corpus locked to one
//! embedding profile; sources added to it are split into sentence-aware chunks, embedded by a
//! remote provider or the built-in local model, and indexed in Qdrant; `/retrieve` answers
//! with chunk text that was checked against the relational store.
//!
//! ## Layout
//! ```text
//!   app ──► api ──► service ──► jobs ◄── workers
//!                          │          │         │
//!                          ▼          ▼         ▼
//!      deps · store · vector · providers · config · chunking · domain
//! ```
//! No two modules import each other (the unit test in `import_graph.rs` walks every path).
//! - [`api`]: axum routers per resource, the middleware stack, the table of error codes,
//!   OpenAPI. Handlers parse their input into typed values (ids, settings, paging, profiles),
//!   call one service method and convert the answer to DTOs.
//! - [`service`]: the operations clients ask for (worlds, sources, jobs, keys, retrieval,
//!   repair and re-ingest requests). No HTTP types; store and vector errors become
//!   [`service::ServiceError`]s here.
//! - [`jobs`]: the job engine, the one home of a job's life: transitions, reports from the
//!   workers, typed job events, finishing, a re-ingest's preparation and switch, waking the
//!   workers. Services and workers both call it; neither calls the other.
//! - [`workers`]: the embedding workers: claim → embed → write → report.
//! - [`store`]: the relational store, the authority for text, manifests, jobs and keys: one
//!   generic implementation over SQLite (default) and PostgreSQL, split by aggregate.
//! - [`vector`]: the vector index. Trait [`vector::VectorRepo`], implemented over qdrant-edge
//!   in-process (default) and a Qdrant server via gRPC. Points never hold chunk text.
//! - [`providers`]: the provider map, the model registry, the embedding adapters (Google,
//!   OpenAI-compatible, the local model), failure classification and the key scheduler.
//! - [`chunking`]: upload text preparation and the sentence-aware token splitter.
//! - [`domain`]: ids and domain types shared by every layer.
//! - [`app`]: the composition root: builds the dependency bundle ([`deps::Deps`]) once, the
//!   services from it, the handlers' [`api::AppState`], then starts background work.
//! - [`config`], [`telemetry`], [`meters`]: configuration by section, logging and traces,
//!   Prometheus metrics; [`cluster`]: the registry of replicas sharing a store.
//!
//! `docs/DESIGN.md`, section "How a request flows", follows one upload, one retrieval (plain
//! and through MCP) and one webhook delivery through these modules hop by hop; the rest of it
//! draws the job, run and manifest-entry state machines and gives the reasons behind the less
//! obvious choices.
//!
//! ## Data flow
//! HTTP request → `api` handler → `service` → `store` (rows, in transactions) and `vector`
//! (points, after the rows they index); work for the embedding workers goes through `jobs`.
//! Writes to Qdrant are confirmed before the store marks anything as embedded; reads take text
//! from the store only.
//!
//! ## Who owns what
//! - The tokio runtime's request tasks run handlers; they own nothing long-lived.
//! - [`app::App`] owns the listener and the dependency bundle, whose cancellation token and
//!   task tracker background work runs on (embedding workers, the key refresh, heartbeats,
//!   webhook deliveries, repair passes, re-ingest preparations), all started after the last
//!   step of startup that can fail; shutdown cancels the token and waits for the tracker,
//!   bounded by `server.shutdown_timeout_s`.
//! - The embedded vector store owns its folder (an exclusive lock file) and one maintenance
//!   task that flushes and optimizes after writes; `VectorRepo::close` stops it and flushes.

pub mod api;
pub mod app;
pub mod chunking;
pub mod cluster;
pub mod config;
pub mod crypto;
pub mod deps;
pub mod domain;
#[cfg(test)]
mod import_graph;
pub mod jobs;
pub mod meters;
pub mod outbound;
pub mod providers;
pub mod serve;
pub mod service;
pub mod sparse;
pub mod store;
pub mod telemetry;
pub mod vector;
pub mod workers;
