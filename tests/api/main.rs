//! All integration tests live in this one binary (one link of the heavy dependency tree).
//! Each test starts the real app on an ephemeral port with its own files or database.

mod helpers;

mod binary;
mod chunking;
mod cli;
mod cluster;
mod collection_layout;
mod console;
mod context_prefix;
mod contract;
mod dify;
mod documents;
mod errors;
mod eval_runs;
mod evals;
mod fake_providers;
mod fake_rerank;
mod hardening;
mod ingestion;
mod job_engine;
mod kept_vectors;
mod keys;
mod living_sources;
mod local_model;
mod log_secrets;
mod mcp;
mod metrics;
mod operations;
mod outages;
mod pdf;
mod qdrant_cluster;
mod readme;
mod reingest;
mod remote_providers;
mod repair;
mod replace_at_scale;
mod retrieval;
mod scheduler;
mod sources;
mod store_conformance;
mod takeover;
mod tokens;
mod vector_conformance;
mod webhooks;
mod worlds;
