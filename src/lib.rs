//! # quarry
//!
//! A retrieval-augmented generation service. A *world* is an isolated corpus locked to one
//! embedding profile; sources added to it are split into sentence-aware chunks, embedded by a
//! remote provider or the built-in local model, and indexed in Qdrant; `/retrieve` answers
//! with chunk text that was checked against the relational store.
//!
//! ## Layout
//! - [`api`]: axum routers per resource, the middleware stack, JSON errors, OpenAPI. Handlers
//!   extract, call one service method, convert to DTOs.
//! - [`service`]: the operations (worlds, sources, jobs, keys, retrieval, repair and re-ingest),
//!   written against the two storage traits below. No HTTP types.
//! - [`store`]: the relational store, the authority for text, manifests, jobs and keys.
//!   Trait [`store::Store`], implemented for SQLite (default) and PostgreSQL via sqlx.
//! - [`vector`]: the vector index. Trait [`vector::VectorRepo`], implemented over qdrant-edge
//!   in-process (default) and a Qdrant server via gRPC. Points never hold chunk text.
//! - [`providers`]: the model registry, the embedding adapters (Google, OpenAI-compatible, the
//!   local model), failure classification and the key scheduler.
//! - [`workers`]: the embedding workers draining the queue of pending chunks.
//! - [`domain`]: ids and domain types shared by every layer.
//! - [`config`], [`telemetry`], [`app`]: configuration, logging, assembly and lifecycle.
//!
//! ## Data flow
//! HTTP request → `api` handler → `service` → `store` (rows, in transactions) and `vector`
//! (points, after the rows they index). Writes to Qdrant are confirmed before the store marks
//! anything as embedded; reads take text from the store only.
//!
//! ## Who owns what
//! - The tokio runtime's request tasks run handlers; they own nothing long-lived.
//! - [`app::App`] owns the listener, the cancellation token and the task tracker that
//!   background work (embedding workers, the key refresh, repair passes) runs on; shutdown cancels the token and waits for
//!   the tracker, bounded by `server.shutdown_timeout_s`.
//! - The embedded vector store owns its folder (an exclusive lock file) and one maintenance
//!   task that flushes and optimizes after writes; `VectorRepo::close` stops it and flushes.

pub mod api;
pub mod app;
pub mod chunking;
pub mod config;
pub mod crypto;
pub mod domain;
pub mod jobs;
pub mod providers;
pub mod service;
pub mod sparse;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod vector;
pub mod workers;
