//! The fake Google AI Studio's routes: `embedContent`, `batchEmbedContents` and `countTokens`,
//! and Google's error shapes.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::machinery::{corrupt_vectors, echo, render, vector_json};
use super::{Dialect, EmbedCall, Failure, GOOGLE_NATIVE_DIMENSIONS, Shared, fake_vector, unit, words};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GoogleEmbed {
    #[serde(default)]
    model: Option<String>,
    content: GoogleContent,
    #[serde(default)]
    task_type: Option<String>,
    #[serde(default)]
    output_dimensionality: Option<u32>,
}

#[derive(Deserialize)]
struct GoogleContent {
    parts: Vec<GooglePart>,
}

#[derive(Deserialize)]
struct GooglePart {
    text: String,
}

impl GoogleContent {
    fn text(&self) -> String {
        self.parts.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join(" ")
    }
}

#[derive(Deserialize)]
struct GoogleBatch {
    requests: Vec<GoogleEmbed>,
}

#[derive(Deserialize)]
struct GoogleCount {
    contents: Vec<GoogleContent>,
}

pub(super) async fn google(
    State(shared): State<Arc<Shared>>,
    Path(call): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let key = headers
        .get("x-goog-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let Some((model, method)) = call.split_once(':') else {
        return google_error(404, "NOT_FOUND", "unknown method", json!([]), key.as_deref());
    };
    let endpoint: &'static str = match method {
        "embedContent" => "embedContent",
        "batchEmbedContents" => "batchEmbedContents",
        "countTokens" => "countTokens",
        _ => return google_error(404, "NOT_FOUND", "unknown method", json!([]), key.as_deref()),
    };
    let latency = shared.record(endpoint, key.as_deref());
    tokio::time::sleep(latency).await;
    let k = key.as_deref();
    let Ok(json) = serde_json::from_slice::<Value>(&body) else {
        return google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.", json!([]), k);
    };

    if endpoint == "countTokens" {
        let Ok(request) = serde_json::from_value::<GoogleCount>(json) else {
            return google_error(400, "INVALID_ARGUMENT", "Invalid countTokens request.", json!([]), k);
        };
        let texts: Vec<String> = request.contents.iter().map(GoogleContent::text).collect();
        let scripted = {
            let mut inner = shared.lock();
            inner.stats.counted.extend(texts.iter().cloned());
            inner.count_failures.pop_front()
        };
        if let Some(failure) = scripted {
            return match failure {
                Failure::WrongLength | Failure::WrongCount | Failure::NonFinite => (
                    StatusCode::OK,
                    [("content-type", "application/json")],
                    r#"{"totalTokens":"many"}"#,
                )
                    .into_response(),
                other => render(Dialect::Google, &other, k),
            };
        }
        if let Some(response) = shared.check_key(k) {
            return response;
        }
        if model != "gemini-embedding-001" {
            return google_error(404, "NOT_FOUND", &format!("models/{model} is not found"), json!([]), k);
        }
        return Json(json!({"totalTokens": texts.iter().map(|t| words(t)).sum::<u32>()})).into_response();
    }

    let items: Vec<GoogleEmbed> = if endpoint == "embedContent" {
        match serde_json::from_value::<GoogleEmbed>(json.clone()) {
            Ok(item) => vec![item],
            Err(e) => return google_error(400, "INVALID_ARGUMENT", &e.to_string(), json!([]), k),
        }
    } else {
        match serde_json::from_value::<GoogleBatch>(json.clone()) {
            Ok(batch) => batch.requests,
            Err(e) => return google_error(400, "INVALID_ARGUMENT", &e.to_string(), json!([]), k),
        }
    };
    let texts: Vec<String> = items.iter().map(|i| i.content.text()).collect();
    shared.lock().stats.embed_calls.push(EmbedCall {
        endpoint,
        key: key.clone(),
        model: model.to_owned(),
        texts: texts.clone(),
        task_types: items.iter().map(|i| i.task_type.clone()).collect(),
        dimensions: items.iter().map(|i| i.output_dimensionality).collect(),
        body: json,
    });

    let outage = shared.lock().outage_failure();
    if let Some(failure) = outage {
        return render(Dialect::Google, &failure, k);
    }
    let corrupt = match shared.lock().embed_failures.pop_front() {
        Some(failure) if failure.corrupts_data() => Some(failure),
        Some(failure) => return render(Dialect::Google, &failure, k),
        None => None,
    };
    if let Some(response) = shared.check_key(k) {
        return response;
    }
    if model != "gemini-embedding-001" {
        return google_error(404, "NOT_FOUND", &format!("models/{model} is not found"), json!([]), k);
    }
    if items.len() > 100 {
        let message = "* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch";
        return google_error(400, "INVALID_ARGUMENT", message, json!([]), k);
    }
    let mut dimensions = Vec::with_capacity(items.len());
    for item in &items {
        if item.model.as_deref().is_some_and(|m| m != format!("models/{model}")) {
            let message = "* BatchEmbedContentsRequest.model: the model of each request must match the batch";
            return google_error(400, "INVALID_ARGUMENT", message, json!([]), k);
        }
        let d = item
            .output_dimensionality
            .map_or(GOOGLE_NATIVE_DIMENSIONS, |d| d as usize);
        if !(1..=GOOGLE_NATIVE_DIMENSIONS).contains(&d) {
            return google_error(
                400,
                "INVALID_ARGUMENT",
                "outputDimensionality out of range",
                json!([]),
                k,
            );
        }
        dimensions.push(d);
    }
    if let Some(response) = shared.take_quota(k, items.len() as u32) {
        return response;
    }

    let mut vectors: Vec<Vec<f32>> = texts
        .iter()
        .zip(&dimensions)
        .map(|(text, &d)| {
            let v = fake_vector(text, d);
            if d == GOOGLE_NATIVE_DIMENSIONS { unit(v) } else { v }
        })
        .collect();
    shared.lock().stats.items_embedded += vectors.len() as u64;
    let non_finite = corrupt_vectors(&mut vectors, corrupt.as_ref());
    let values = |v: &Vec<f32>| vector_json(v, non_finite);
    let body = if endpoint == "embedContent" {
        match vectors.first() {
            Some(v) => format!(r#"{{"embedding":{{"values":{}}}}}"#, values(v)),
            None => "{}".to_owned(),
        }
    } else {
        let list: Vec<String> = vectors
            .iter()
            .map(|v| format!(r#"{{"values":{}}}"#, values(v)))
            .collect();
        format!(r#"{{"embeddings":[{}]}}"#, list.join(","))
    };
    (StatusCode::OK, [("content-type", "application/json")], body).into_response()
}

pub(super) fn google_status_name(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        500 => "INTERNAL",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}

pub(super) fn google_error(status: u16, name: &str, message: &str, details: Value, key: Option<&str>) -> Response {
    let message = echo(message, key);
    let body = json!({"error": {"code": status, "message": message, "status": name, "details": details}});
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(body),
    )
        .into_response()
}

pub(super) fn quota_failure(quota_id: &str) -> Value {
    json!({"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
        "quotaMetric": "generativelanguage.googleapis.com/embed_content_free_tier_requests",
        "quotaId": quota_id,
        "quotaDimensions": {"location": "global", "model": "gemini-embedding-001"},
        "quotaValue": "100"}]})
}

pub(super) fn retry_info(delay: Duration) -> Value {
    json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{:.3}s", delay.as_secs_f64())})
}
