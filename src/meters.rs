//! Prometheus metrics: one recorder per application (`metrics` with
//! `metrics-exporter-prometheus`), so several apps in one process — replicas in tests and
//! benchmarks — keep their series apart. Event series (requests, phases, provider calls,
//! chunks) are recorded where the events happen; snapshot series (jobs, queue depth, breakers,
//! keys, memory) are set from the store and the scheduler when `/metrics` is scraped.
//! docs/metrics.md lists every series in a table; a test checks the two agree.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Key, Label, Metadata, Recorder};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};

/// Latency buckets, in seconds: from a millisecond to a minute.
const SECONDS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0,
];

/// Every series quarry serves: name, type, help. The README table is checked against it.
pub const SERIES: &[(&str, &str, &str)] = &[
    (
        "quarry_http_requests_total",
        "counter",
        "HTTP requests answered, by method, route template and status",
    ),
    (
        "quarry_http_request_duration_seconds",
        "histogram",
        "Time to answer an HTTP request, by method and route template",
    ),
    (
        "quarry_retrieval_phase_duration_seconds",
        "histogram",
        "Time a retrieval spent per phase (embed, search, verify, rerank, total)",
    ),
    ("quarry_jobs", "gauge", "Jobs by kind and status"),
    (
        "quarry_audit_write_failures_total",
        "counter",
        "Audit log entries that could not be written (the action itself succeeded)",
    ),
    (
        "quarry_webhook_deliveries_total",
        "counter",
        "Webhook delivery attempts, by event and outcome (delivered, retried, failed)",
    ),
    (
        "quarry_pending_chunks",
        "gauge",
        "Chunks waiting to be embedded, by world and provider (the queue's depth)",
    ),
    (
        "quarry_pending_oldest_age_seconds",
        "gauge",
        "Age of the oldest chunk waiting to be embedded, by world and provider",
    ),
    (
        "quarry_chunks_embedded_total",
        "counter",
        "Chunks embedded by this process's workers, by provider and model",
    ),
    (
        "quarry_chunks_reused_total",
        "counter",
        "Chunks whose vector was reused from identical text, by provider and model",
    ),
    (
        "quarry_chunks_failed_total",
        "counter",
        "Chunks that failed for good, by provider and model",
    ),
    (
        "quarry_chunks_retried_total",
        "counter",
        "Chunks given back to the queue without spending an attempt, by reason",
    ),
    (
        "quarry_provider_request_duration_seconds",
        "histogram",
        "Time of one embedding call to a provider, by provider, model and outcome",
    ),
    (
        "quarry_provider_key_requests_total",
        "counter",
        "Requests sent with the key",
    ),
    (
        "quarry_provider_key_rate_limited_total",
        "counter",
        "Rate-limited (429) answers to the key",
    ),
    (
        "quarry_provider_key_failures_total",
        "counter",
        "Failed requests with the key",
    ),
    (
        "quarry_provider_key_in_flight",
        "gauge",
        "Requests in flight with the key",
    ),
    (
        "quarry_provider_key_usable",
        "gauge",
        "1 when the key is enabled, not retired and not cooling down",
    ),
    (
        "quarry_provider_breaker_state",
        "gauge",
        "A provider model's circuit breaker: 0 closed, 1 half open, 2 open",
    ),
    (
        "quarry_scheduler_wait_seconds",
        "histogram",
        "Time a caller waited for a provider key, by provider, lane and outcome",
    ),
    (
        "quarry_drift_points",
        "gauge",
        "Points out of step with the store at a world's last audit or repair, by kind (orphan, missing, stale)",
    ),
    (
        "quarry_retrieval_head_starts_total",
        "counter",
        "Retrievals embedded and searched while the store was still being read, by outcome",
    ),
    (
        "quarry_uploads_in_progress",
        "gauge",
        "Uploads being read, converted or split now, abandoned ones still stopping included",
    ),
    (
        "quarry_uploads_abandoned_total",
        "counter",
        "Uploads whose preparation stopped because their request was gone (timed out or disconnected)",
    ),
    (
        "quarry_process_resident_memory_bytes",
        "gauge",
        "Resident memory of the process",
    ),
];

/// One application's metrics. Cheap to share.
#[derive(Clone)]
pub struct Metrics {
    recorder: Arc<PrometheusRecorder>,
    /// Per snapshot gauge, the label sets set at the last scrape (see [`Metrics::snapshot`]).
    snapshots: Arc<Mutex<HashMap<&'static str, HashSet<Labels>>>>,
}

/// A series' labels, owned.
type Labels = Vec<(&'static str, String)>;

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut builder = PrometheusBuilder::new()
            // Snapshot gauges are set at every scrape; one not set for a while (a deleted
            // world's queue depth) is dropped instead of shown forever.
            .idle_timeout(metrics_util::MetricKindMask::GAUGE, Some(Duration::from_secs(600)));
        for (name, kind, _) in SERIES {
            if *kind == "histogram" {
                builder = builder
                    .set_buckets_for_metric(Matcher::Full((*name).to_owned()), &SECONDS)
                    .expect("the buckets are not empty");
            }
        }
        let recorder = builder.build_recorder();
        for (name, kind, help) in SERIES {
            let name = metrics::KeyName::from(*name);
            match *kind {
                "counter" => recorder.describe_counter(name, None, (*help).into()),
                "gauge" => recorder.describe_gauge(name, None, (*help).into()),
                _ => recorder.describe_histogram(name, None, (*help).into()),
            }
        }
        Self {
            recorder: Arc::new(recorder),
            snapshots: Arc::default(),
        }
    }

    /// Sets snapshot gauge `name` to `values`, and to 0 every label set it had at the last
    /// snapshot and no longer has (a drained queue, a job status no job has any more, a breaker
    /// that closed), so a scrape never shows a stale figure.
    pub fn snapshot(&self, name: &'static str, values: Vec<(Labels, f64)>) {
        let mut snapshots = self.snapshots.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = snapshots.entry(name).or_default();
        let now: HashSet<Labels> = values.iter().map(|(labels, _)| labels.clone()).collect();
        for gone in seen.difference(&now) {
            let labels: Vec<(&'static str, &str)> = gone.iter().map(|(k, v)| (*k, v.as_str())).collect();
            self.gauge(name, &labels).set(0.0);
        }
        for (labels, value) in &values {
            let labels: Vec<(&'static str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            self.gauge(name, &labels).set(*value);
        }
        seen.extend(now);
    }

    fn key(name: &'static str, labels: &[(&'static str, &str)]) -> Key {
        let labels: Vec<Label> = labels.iter().map(|(k, v)| Label::new(*k, (*v).to_owned())).collect();
        Key::from_parts(name, labels)
    }

    fn metadata() -> Metadata<'static> {
        Metadata::new(module_path!(), metrics::Level::INFO, None)
    }

    pub fn counter(&self, name: &'static str, labels: &[(&'static str, &str)]) -> Counter {
        self.recorder
            .register_counter(&Self::key(name, labels), &Self::metadata())
    }

    pub fn gauge(&self, name: &'static str, labels: &[(&'static str, &str)]) -> Gauge {
        self.recorder
            .register_gauge(&Self::key(name, labels), &Self::metadata())
    }

    pub fn histogram(&self, name: &'static str, labels: &[(&'static str, &str)]) -> Histogram {
        self.recorder
            .register_histogram(&Self::key(name, labels), &Self::metadata())
    }

    /// Records `elapsed` in histogram `name`.
    pub fn observe(&self, name: &'static str, labels: &[(&'static str, &str)], elapsed: Duration) {
        self.histogram(name, labels).record(elapsed.as_secs_f64());
    }

    /// The Prometheus text exposition of every series.
    pub fn render(&self) -> String {
        let handle = self.recorder.handle();
        handle.run_upkeep();
        handle.render()
    }
}

/// The resident memory of this process, from `/proc/self/statm` (Linux; `None` elsewhere).
pub fn resident_memory_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // The page size is 4 KiB on every Linux target quarry is built for (x86-64, aarch64 with
    // 4 KiB pages); a larger one would only make the figure low.
    Some(pages * 4096)
}
