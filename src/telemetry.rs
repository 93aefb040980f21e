//! Logging: `tracing` to stdout, filtered by `RUST_LOG` (default `info`), as human-readable
//! lines or JSON objects; and, with `telemetry.otlp_endpoint`, the same spans as OpenTelemetry
//! traces over OTLP.

use std::time::Duration;

use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
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

/// Installs the global subscriber, without traces. Safe to call more than once (later calls
/// are ignored).
pub fn init(format: LogFormat) {
    install(format, None);
}

/// What must happen before the process exits: the spans still buffered are sent.
#[derive(Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Sends the spans still buffered and stops the exporter.
    pub fn shutdown(&self) {
        if let Some(provider) = &self.provider
            && let Err(err) = provider.shutdown()
        {
            tracing::warn!(error = %err, "the last spans could not be sent");
        }
    }
}

/// Installs the global subscriber: the logs, and with `telemetry.otlp_endpoint` set, every
/// span exported over OTLP (HTTP, protobuf) in batches, with W3C trace context read from
/// requests (`traceparent`). Later calls are ignored.
pub fn init_with(format: LogFormat, settings: &crate::config::TelemetrySettings) -> Result<Telemetry, String> {
    let provider = match &settings.otlp_endpoint {
        None => None,
        Some(endpoint) => {
            // The exporter's HTTP client is a reqwest client too.
            crate::outbound::install_tls_provider();
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(endpoint.clone())
                .build()
                .map_err(|err| format!("telemetry.otlp_endpoint: {err}"))?;
            let batches = opentelemetry_sdk::trace::BatchSpanProcessor::builder(exporter)
                .with_batch_config(
                    opentelemetry_sdk::trace::BatchConfigBuilder::default()
                        .with_scheduled_delay(Duration::from_millis(settings.export_interval_ms))
                        .build(),
                )
                .build();
            let resource = opentelemetry_sdk::Resource::builder()
                .with_service_name(settings.service_name.clone())
                .build();
            Some(
                SdkTracerProvider::builder()
                    .with_span_processor(batches)
                    .with_resource(resource)
                    .build(),
            )
        }
    };
    if provider.is_some() {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    }
    install(format, provider.as_ref());
    Ok(Telemetry { provider })
}

fn install(format: LogFormat, provider: Option<&SdkTracerProvider>) {
    use opentelemetry::trace::TracerProvider as _;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let traces = provider.map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("quarry")));
    let registry = tracing_subscriber::registry().with(filter).with(traces);
    let _ = match format {
        LogFormat::Pretty => registry.with(fmt::layer().with_target(false)).try_init(),
        LogFormat::Json => registry
            .with(fmt::layer().json().flatten_event(true).with_current_span(true))
            .try_init(),
    };
}

/// Makes `span` a child of the W3C trace context `headers` carry (`traceparent`), when traces
/// are exported; otherwise nothing.
pub fn continue_trace(span: &tracing::Span, headers: &axum::http::HeaderMap) {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&opentelemetry_http::HeaderExtractor(headers))
    });
    let _ = span.set_parent(parent);
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
