//! `/metrics`: the Prometheus exposition, behind `auth.metrics_token` (or a `metrics` token)
//! when one is set.

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use chrono::Utc;

use super::error::ErrorBody;
use crate::api::AppState;
use crate::providers::breaker::BreakerState;
use crate::providers::scheduler::KeyStatus;

/// The route, which the caller puts behind its own token check.
pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

/// A key series: name and how to read it off a key.
type KeySeries = (&'static str, fn(&KeyStatus) -> f64);

/// Prometheus text exposition of every series (docs/metrics.md lists them). The
/// snapshot series — jobs, queue depth, breakers, keys, memory — are read when scraped; a store
/// that cannot be read leaves them out of this scrape rather than failing it.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain"),
        (status = 401, description = "unauthorized (`auth.metrics_token` is set and the request does not bear it)", body = ErrorBody)))]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let m = &state.meters;
    let key_series: [KeySeries; 5] = [
        ("quarry_provider_key_requests_total", |k| k.requests as f64),
        ("quarry_provider_key_rate_limited_total", |k| k.rate_limited as f64),
        ("quarry_provider_key_failures_total", |k| k.failures as f64),
        ("quarry_provider_key_in_flight", |k| k.in_flight as f64),
        ("quarry_provider_key_usable", |k| {
            f64::from(u8::from(k.enabled && !k.retired && k.cooling_down_until.is_none()))
        }),
    ];
    for k in state.keys.status() {
        let (provider, key_id) = (k.provider.as_str(), k.key_id.to_string());
        let labels = [
            ("provider", provider),
            ("key_id", key_id.as_str()),
            ("source", k.origin.as_str()),
        ];
        for (name, value) in key_series {
            if name.ends_with("_total") {
                m.counter(name, &labels).absolute(value(&k) as u64);
            } else {
                m.gauge(name, &labels).set(value(&k));
            }
        }
    }
    let breakers = (state.breakers.views(std::time::Instant::now(), Utc::now()).into_iter())
        .map(|b| {
            let value = match b.state {
                BreakerState::Closed => 0.0,
                BreakerState::HalfOpen => 1.0,
                BreakerState::Open => 2.0,
            };
            (
                vec![("provider", b.provider.as_str().to_owned()), ("model", b.model)],
                value,
            )
        })
        .collect();
    m.snapshot("quarry_provider_breaker_state", breakers);
    let head_starts = state.retrieval.head_starts();
    m.counter("quarry_retrieval_head_starts_total", &[("outcome", "used")])
        .absolute(head_starts.used);
    m.counter("quarry_retrieval_head_starts_total", &[("outcome", "discarded")])
        .absolute(head_starts.discarded);
    match state.jobs.counts().await {
        Ok(counts) => m.snapshot(
            "quarry_jobs",
            (counts.into_iter())
                .map(|(kind, status, n)| (vec![("kind", kind), ("status", status)], n as f64))
                .collect(),
        ),
        Err(err) => tracing::warn!(error = %err, "/metrics: counting jobs failed"),
    }
    match state.jobs.queue_depth().await {
        Ok(depths) => {
            let now = Utc::now();
            let labels =
                |d: &crate::store::QueueDepth| vec![("world", d.world.to_string()), ("provider", d.provider.clone())];
            let age = |d: &crate::store::QueueDepth| {
                d.oldest
                    .map_or(0.0, |t| (now - t).num_milliseconds().max(0) as f64 / 1000.0)
            };
            m.snapshot(
                "quarry_pending_chunks",
                depths.iter().map(|d| (labels(d), d.pending as f64)).collect(),
            );
            m.snapshot(
                "quarry_pending_oldest_age_seconds",
                depths.iter().map(|d| (labels(d), age(d))).collect(),
            );
        }
        Err(err) => tracing::warn!(error = %err, "/metrics: reading the queue's depth failed"),
    }
    m.gauge("quarry_uploads_in_progress", &[])
        .set(state.uploads.in_progress() as f64);
    m.counter("quarry_uploads_abandoned_total", &[])
        .absolute(state.uploads.abandoned());
    if let Some(bytes) = crate::meters::resident_memory_bytes() {
        m.gauge("quarry_process_resident_memory_bytes", &[]).set(bytes as f64);
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        m.render(),
    )
}
