//! The fake OpenAI's route, `/v1/embeddings`, and OpenAI's error shapes.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::machinery::{corrupt_vectors, echo, render, vector_base64, vector_json};
use super::{Dialect, EmbedCall, Shared, fake_vector, unit, words};

#[derive(Deserialize)]
#[serde(untagged)]
enum OpenAiInput {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct OpenAiRequest {
    input: OpenAiInput,
    model: String,
    #[serde(default)]
    dimensions: Option<u32>,
    #[serde(default)]
    encoding_format: Option<String>,
}

pub(super) async fn openai(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let key = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let k = key.as_deref();
    let latency = shared.record("embeddings", k);
    tokio::time::sleep(latency).await;
    let Ok(json) = serde_json::from_slice::<Value>(&body) else {
        return openai_error(
            400,
            "We could not parse the JSON body of your request.",
            "invalid_request_error",
            None,
            k,
        );
    };
    let request = match serde_json::from_value::<OpenAiRequest>(json.clone()) {
        Ok(r) => r,
        Err(e) => return openai_error(400, &e.to_string(), "invalid_request_error", None, k),
    };
    let texts = match request.input {
        OpenAiInput::One(text) => vec![text],
        OpenAiInput::Many(texts) => texts,
    };
    shared.lock().stats.embed_calls.push(EmbedCall {
        endpoint: "embeddings",
        key: key.clone(),
        model: request.model.clone(),
        texts: texts.clone(),
        task_types: vec![None; texts.len()],
        dimensions: vec![request.dimensions; texts.len()],
        body: json,
    });

    let outage = shared.lock().outage_failure();
    if let Some(failure) = outage {
        return render(Dialect::OpenAi, &failure, k);
    }
    let corrupt = match shared.lock().embed_failures.pop_front() {
        Some(failure) if failure.corrupts_data() => Some(failure),
        Some(failure) => return render(Dialect::OpenAi, &failure, k),
        None => None,
    };
    if let Some(response) = shared.check_key(k) {
        return response;
    }
    let Some((native, adjustable)) = shared.lock().models.get(&request.model).copied() else {
        let message = format!(
            "The model `{}` does not exist or you do not have access to it.",
            request.model
        );
        return openai_error(404, &message, "invalid_request_error", Some("model_not_found"), k);
    };
    if texts.is_empty() || texts.len() > 2048 || texts.iter().any(String::is_empty) {
        let message =
            "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.";
        return openai_error(400, message, "invalid_request_error", None, k);
    }
    let base64 = match request.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            let message = format!("Invalid value for 'encoding_format': {other:?}");
            return openai_error(400, &message, "invalid_request_error", None, k);
        }
    };
    let dimensions = match request.dimensions {
        Some(_) if !adjustable => {
            let message = "This model does not support specifying dimensions.";
            return openai_error(400, message, "invalid_request_error", None, k);
        }
        Some(d) if d == 0 || d as usize > native => {
            return openai_error(400, "Invalid value for 'dimensions'", "invalid_request_error", None, k);
        }
        Some(d) => d as usize,
        None => native,
    };
    if let Some(response) = shared.take_quota(k, 1) {
        return response;
    }

    let mut vectors: Vec<Vec<f32>> = texts.iter().map(|t| unit(fake_vector(t, dimensions))).collect();
    shared.lock().stats.items_embedded += vectors.len() as u64;
    let non_finite = corrupt_vectors(&mut vectors, corrupt.as_ref());
    let tokens: u32 = texts.iter().map(|t| words(t)).sum();
    // Reverse order on purpose: clients must place results by `index`.
    let data: Vec<String> = vectors
        .iter()
        .enumerate()
        .rev()
        .map(|(i, v)| {
            format!(
                r#"{{"object":"embedding","index":{i},"embedding":{}}}"#,
                match base64 {
                    true => vector_base64(v, non_finite),
                    false => vector_json(v, non_finite),
                }
            )
        })
        .collect();
    let body = format!(
        r#"{{"object":"list","data":[{}],"model":"{}","usage":{{"prompt_tokens":{tokens},"total_tokens":{tokens}}}}}"#,
        data.join(","),
        request.model
    );
    (StatusCode::OK, [("content-type", "application/json")], body).into_response()
}

pub(super) fn openai_error(status: u16, message: &str, kind: &str, code: Option<&str>, key: Option<&str>) -> Response {
    let body = json!({"error": {"message": echo(message, key), "type": kind, "param": null, "code": code}});
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(body),
    )
        .into_response()
}

pub(super) fn openai_rate_limited(retry_after: Duration, key: Option<&str>) -> Response {
    let message = format!(
        "Rate limit reached for text-embedding-3-small on requests per min (RPM): Limit 3000, Used 3000, Requested 1. \
         Please try again in {}ms.",
        retry_after.as_millis()
    );
    let mut response = openai_error(429, &message, "requests", Some("rate_limit_exceeded"), key);
    let headers = response.headers_mut();
    let ms = retry_after.as_millis().to_string();
    let secs = retry_after.as_secs_f64().ceil().to_string();
    for (name, value) in [
        ("retry-after-ms", ms.as_str()),
        ("retry-after", secs.as_str()),
        ("x-ratelimit-limit-requests", "3000"),
        ("x-ratelimit-remaining-requests", "0"),
    ] {
        if let Ok(value) = value.parse() {
            headers.insert(name, value);
        }
    }
    response
}
