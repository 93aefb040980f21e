//! What both fakes share: counting requests, checking keys and quotas, corrupting or encoding
//! vectors, and rendering a scripted failure in either dialect.

use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::time::Instant;

use super::google::{google_error, google_status_name, quota_failure, retry_info};
use super::openai::{openai_error, openai_rate_limited};
use super::{Dialect, Failure, Shared};

impl Shared {
    /// Counts a request and returns the latency to apply.
    pub(super) fn record(&self, endpoint: &'static str, key: Option<&str>) -> Duration {
        let mut inner = self.lock();
        inner.stats.requests += 1;
        *inner.stats.per_key.entry(key.unwrap_or("").to_owned()).or_default() += 1;
        *inner.stats.per_endpoint.entry(endpoint).or_default() += 1;
        inner.latency
    }

    /// The rejection of `key`, if it is not accepted.
    pub(super) fn check_key(&self, key: Option<&str>) -> Option<Response> {
        let inner = self.lock();
        match (self.dialect, key) {
            (Dialect::OpenAi, _) if inner.keyless => None,
            (_, Some(key)) if inner.keys.contains_key(key) => None,
            (Dialect::Google, None) => Some(google_error(
                403,
                "PERMISSION_DENIED",
                "Method doesn't allow unregistered callers (callers without established identity). \
                 Please use API Key or other form of API consumer identity to call this API.",
                json!([]),
                None,
            )),
            (Dialect::Google, Some(key)) => Some(render(Dialect::Google, &Failure::KeyInvalid, Some(key))),
            (Dialect::OpenAi, key) => Some(render(Dialect::OpenAi, &Failure::KeyInvalid, key)),
        }
    }

    /// Takes `units` from the key's quota group; over quota, the 429 to answer (hinting at the
    /// time left in the window).
    pub(super) fn take_quota(&self, key: Option<&str>, units: u32) -> Option<Response> {
        let mut inner = self.lock();
        let key_name = key.unwrap_or("");
        let group = inner.keys.get(key_name).cloned().unwrap_or_else(|| key_name.to_owned());
        let bucket = inner.buckets.get_mut(&group)?;
        let now = Instant::now();
        let started = match bucket.started {
            Some(started) if now < started + bucket.window => started,
            _ => {
                bucket.started = Some(now);
                bucket.used = 0;
                now
            }
        };
        if bucket.used + units <= bucket.limit {
            bucket.used += units;
            return None;
        }
        let retry = (started + bucket.window).saturating_duration_since(now);
        inner.stats.quota_rejections += 1;
        drop(inner);
        Some(match self.dialect {
            Dialect::Google => render(Dialect::Google, &Failure::RateLimited(retry), key),
            Dialect::OpenAi => openai_rate_limited(retry, key),
        })
    }
}

/// Applies a data-shaped failure; returns whether values must be written out of `f32` range.
pub(super) fn corrupt_vectors(vectors: &mut Vec<Vec<f32>>, failure: Option<&Failure>) -> bool {
    match failure {
        Some(Failure::WrongLength) => {
            vectors.iter_mut().for_each(|v| {
                v.pop();
            });
            false
        }
        Some(Failure::WrongCount) => {
            vectors.pop();
            false
        }
        Some(Failure::NonFinite) => true,
        _ => false,
    }
}

/// A JSON array of `v`; with `non_finite`, the first value is replaced by 1e39 (> f32::MAX).
pub(super) fn vector_json(v: &[f32], non_finite: bool) -> String {
    let mut values: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    if non_finite && let Some(first) = values.first_mut() {
        *first = "1e39".into();
    }
    format!("[{}]", values.join(","))
}

/// `v` as OpenAI's `encoding_format: base64` sends it: the base64 of its little-endian f32
/// values, as a JSON string; with `non_finite`, the first value is infinite.
pub(super) fn vector_base64(v: &[f32], non_finite: bool) -> String {
    use base64::Engine as _;
    let bytes: Vec<u8> = v
        .iter()
        .enumerate()
        .flat_map(|(i, x)| match non_finite && i == 0 {
            true => f32::INFINITY.to_le_bytes(),
            false => x.to_le_bytes(),
        })
        .collect();
    format!("\"{}\"", base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Appends the presented key to an error message, as careless servers do.
pub(super) fn echo(message: &str, key: Option<&str>) -> String {
    match key {
        Some(key) => format!("{message} (key: {key})"),
        None => message.to_owned(),
    }
}

/// A scripted failure in `dialect`.
pub(super) fn render(dialect: Dialect, failure: &Failure, key: Option<&str>) -> Response {
    match (dialect, failure) {
        (Dialect::Google, Failure::RateLimited(delay)) => google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
            json!([
                quota_failure("EmbedContentRequestsPerMinutePerProjectPerModel-FreeTier"),
                retry_info(*delay)
            ]),
            key,
        ),
        (Dialect::OpenAi, Failure::RateLimited(delay)) => openai_rate_limited(*delay, key),
        (Dialect::Google, Failure::BareRateLimited) => google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "Resource has been exhausted (e.g. check quota).",
            json!([]),
            key,
        ),
        (Dialect::OpenAi, Failure::BareRateLimited) => {
            let body = json!({"error": echo("Too many requests", key)});
            (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response()
        }
        (Dialect::Google, Failure::DailyQuota) => google_error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
            json!([quota_failure("EmbedContentRequestsPerDayPerProjectPerModel-FreeTier")]),
            key,
        ),
        (Dialect::OpenAi, Failure::DailyQuota) => openai_error(
            429,
            "Rate limit reached for text-embedding-3-small on requests per day (RPD): Limit 200, Used 200, Requested 1.",
            "requests",
            Some("rate_limit_exceeded"),
            key,
        ),
        (_, Failure::InsufficientQuota) => openai_error(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            Some("insufficient_quota"),
            key,
        ),
        (Dialect::Google, Failure::KeyInvalid) => google_error(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}]),
            key,
        ),
        (Dialect::OpenAi, Failure::KeyInvalid) => openai_error(
            401,
            "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            Some("invalid_api_key"),
            key,
        ),
        (Dialect::Google, Failure::PermissionDenied) => google_error(
            403,
            "PERMISSION_DENIED",
            "Your API key was reported as leaked. Please use another API key.",
            json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_SERVICE_BLOCKED",
                "domain": "googleapis.com"}]),
            key,
        ),
        (Dialect::OpenAi, Failure::PermissionDenied) => openai_error(
            403,
            "Project does not have access to model text-embedding-3-small",
            "invalid_request_error",
            Some("model_not_found"),
            key,
        ),
        (Dialect::Google, Failure::Status(status)) => google_error(
            *status,
            google_status_name(*status),
            &format!("scripted {status} from the fake Google"),
            json!([]),
            key,
        ),
        (Dialect::OpenAi, Failure::Status(status)) => openai_error(
            *status,
            &format!("scripted {status} from the fake OpenAI"),
            if *status >= 500 {
                "server_error"
            } else {
                "invalid_request_error"
            },
            None,
            key,
        ),
        (_, Failure::Raw { status, headers, body }) => {
            let mut response = (
                StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                body.clone(),
            )
                .into_response();
            for (name, value) in headers {
                if let Ok(value) = value.parse() {
                    response.headers_mut().insert(*name, value);
                }
            }
            response
        }
        (_, Failure::MalformedBody) => (
            StatusCode::OK,
            [("content-type", "application/json")],
            "{\"embedding\": [1, 2,",
        )
            .into_response(),
        (_, Failure::Disconnect) => {
            let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
                Ok(Bytes::from_static(b"{\"embeddings\": [")),
                Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "scripted disconnect",
                )),
            ];
            (StatusCode::OK, Body::from_stream(futures_util::stream::iter(chunks))).into_response()
        }
        // Data-shaped failures are applied to a successful answer by the handlers.
        (_, Failure::WrongLength | Failure::WrongCount | Failure::NonFinite) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "data failure rendered out of place").into_response()
        }
    }
}
