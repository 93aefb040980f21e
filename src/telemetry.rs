//! Logging: `tracing` to stdout, filtered by `RUST_LOG` (default `info`), as human-readable
//! lines or JSON objects.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt;
use tracing_subscriber::prelude::*;

/// Output format of the logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Pretty,
    Json,
}

/// The filter without `RUST_LOG`: `info`, except two warnings the embedded Qdrant engine
/// repeats on every segment it opens (hundreds per run) about process-wide settings that only
/// the Qdrant server binary initialises; they say nothing an operator can act on.
const DEFAULT_FILTER: &str = "info,qdrant_edge::common::flags=error,qdrant_edge::common::mmap::ops=error";

/// Installs the global subscriber. Safe to call more than once (later calls are ignored).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let registry = tracing_subscriber::registry().with(filter);
    let _ = match format {
        LogFormat::Pretty => registry.with(fmt::layer().with_target(false)).try_init(),
        LogFormat::Json => registry
            .with(fmt::layer().json().flatten_event(true).with_current_span(true))
            .try_init(),
    };
}

/// `err` and its sources, joined with `: ` — the one way quarry writes an error's cause chain
/// (log lines, the command line's last words).
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
