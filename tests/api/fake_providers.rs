//! Fake Google AI Studio and OpenAI embedding servers: real axum servers on `127.0.0.1:0`
//! speaking the wire formats of `reference/providers.md`, for adapter, scheduler and ingestion
//! tests. Dropping a fake stops it.
//!
//! ```ignore
//! let google = FakeGoogle::start(&["key-a", "key-b"]).await;   // valid keys, own quota groups
//! google.add_key("key-c", Some("project-1"));                 // keys of one group share a bucket
//! google.set_quota("project-1", 10, Duration::from_secs(60)); // 10 requests per 60 s window
//! google.fail_next(Failure::RateLimited(Duration::from_millis(1500)));
//! // point a provider at google.base_url() ("http://127.0.0.1:PORT/v1beta"), then:
//! assert_eq!(google.stats().endpoint("batchEmbedContents"), 1);
//! ```
//!
//! Behaviour, in the order a request meets it:
//! 1. Counted ([`Stats`]: total, per key, per endpoint), then delayed by the configured latency.
//! 2. The body is parsed (unparsable → 400) and embed requests are recorded ([`EmbedCall`]:
//!    key, model, texts, task types, dimensions).
//! 3. A scripted [`Failure`], if one is queued for that kind of endpoint (embed or count), is
//!    answered instead (data-shaped failures — wrong length / count, non-finite — corrupt the
//!    successful answer instead).
//! 4. Keys: Google reads `x-goog-api-key` (missing → 403, unknown → 400 API_KEY_INVALID); OpenAI
//!    reads `Authorization: Bearer` (missing / unknown → 401) unless started `keyless()`.
//!    Every error message the fakes write ends with the presented key, as some real servers
//!    echo keys, so tests can check that quarry redacts it.
//! 5. Quota: each key belongs to a group (its own name unless given); a group with a quota
//!    allows R units per fixed window of W starting at its first request. Google counts one
//!    unit per text (every batch item counts), OpenAI one per request; countTokens is free.
//!    Over quota → Google 429 with QuotaFailure + RetryInfo, OpenAI 429 with `retry-after-ms`,
//!    the hint being the time left in the window. Windows run on `tokio::time::Instant`: real
//!    time, or virtual time when the test pauses the clock (the fake runs on the test's runtime).
//! 6. Vectors are [`fake_vector`]: a hashed bag of words, so texts sharing words get similar
//!    vectors. Google normalises only its native 3072 size (reduced sizes come back with a norm
//!    well above 1, so the client must normalise); OpenAI always normalises and lists `data` in
//!    reverse order, so the client must sort by `index`. OpenAI answers with numbers, or with
//!    base64 little-endian f32 when asked `encoding_format: base64` (other formats: 400).
//! 7. Token counts (Google `countTokens`, OpenAI `usage`) are whitespace-separated words.

#![allow(dead_code)] // a shared toolkit: not every test module uses every helper

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use quarry::domain::KeyId;
use quarry::providers::ApiKey;
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Google's native output size (the only one it normalises).
pub const GOOGLE_NATIVE_DIMENSIONS: usize = 3072;

/// A scripted answer, rendered in the fake's dialect.
#[derive(Clone, Debug)]
pub enum Failure {
    /// 429 with a hint. Google: RESOURCE_EXHAUSTED with a per-minute QuotaFailure and
    /// `RetryInfo.retryDelay`; OpenAI: `rate_limit_exceeded` with `retry-after-ms` / `retry-after`.
    RateLimited(Duration),
    /// 429 without a hint. Google: no details at all; OpenAI-compatible: no code, no headers.
    BareRateLimited,
    /// 429 for a per-day quota. Google: QuotaFailure with a `…PerDay…` quotaId and no RetryInfo;
    /// OpenAI: `rate_limit_exceeded` mentioning requests per day, no headers.
    DailyQuota,
    /// 429 `insufficient_quota` (an OpenAI notion; Google gets the same body).
    InsufficientQuota,
    /// Google: 400 INVALID_ARGUMENT with ErrorInfo API_KEY_INVALID; OpenAI: 401 `invalid_api_key`.
    KeyInvalid,
    /// Google: 403 PERMISSION_DENIED (leaked key); OpenAI: 403.
    PermissionDenied,
    /// An error body in the dialect with this status: 500 INTERNAL, 503 UNAVAILABLE, 400, 404…
    Status(u16),
    /// Exactly this answer.
    Raw {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// 200 with a body that is not JSON.
    MalformedBody,
    /// 200 with every vector one value short.
    WrongLength,
    /// 200 with one vector fewer than texts.
    WrongCount,
    /// 200 with a value beyond `f32::MAX` (decodes to infinity).
    NonFinite,
    /// 200 headers, then the connection is cut before the body completes.
    Disconnect,
}

impl Failure {
    /// Failures that corrupt an otherwise successful answer.
    fn corrupts_data(&self) -> bool {
        matches!(self, Failure::WrongLength | Failure::WrongCount | Failure::NonFinite)
    }
}

/// One embed request as received.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbedCall {
    /// `embedContent`, `batchEmbedContents` or `embeddings`.
    pub endpoint: &'static str,
    /// The key presented, if any.
    pub key: Option<String>,
    /// The model from the path (Google) or the body (OpenAI).
    pub model: String,
    pub texts: Vec<String>,
    /// Per text: Google `taskType` (always `None` for OpenAI).
    pub task_types: Vec<Option<String>>,
    /// Per text: Google `outputDimensionality`, OpenAI `dimensions`, as sent.
    pub dimensions: Vec<Option<u32>>,
    /// The raw JSON body.
    pub body: Value,
}

/// What a fake has seen. A snapshot: [`Fake::stats`] clones it.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Every HTTP request.
    pub requests: u64,
    /// Requests per presented key (`""`: no key).
    pub per_key: HashMap<String, u64>,
    /// Requests per endpoint: `embedContent`, `batchEmbedContents`, `countTokens`, `embeddings`.
    pub per_endpoint: HashMap<&'static str, u64>,
    /// Texts answered with vectors.
    pub items_embedded: u64,
    /// 429s produced by the quota buckets (not scripted ones).
    pub quota_rejections: u64,
    /// Every parsed embed request, in arrival order.
    pub embed_calls: Vec<EmbedCall>,
    /// Every text given to countTokens, in arrival order.
    pub counted: Vec<String>,
}

impl Stats {
    pub fn endpoint(&self, name: &str) -> u64 {
        self.per_endpoint.get(name).copied().unwrap_or(0)
    }

    pub fn key(&self, key: &str) -> u64 {
        self.per_key.get(key).copied().unwrap_or(0)
    }

    /// Requests to the embedding endpoints (everything but countTokens).
    pub fn embed_requests(&self) -> u64 {
        ["embedContent", "batchEmbedContents", "embeddings"]
            .iter()
            .map(|e| self.endpoint(e))
            .sum()
    }
}

/// The deterministic, unnormalised vector of `text`: every lowercase alphanumeric word adds
/// ±3 at a hashed position; a text without words gets 3 at position 0. Its norm is at least 3.
/// Like real dense models with rare codes, the fake has no vocabulary for words containing a
/// digit (`ZX81`, `1066`): they add nothing, which is what BM25 in hybrid mode makes up for.
pub fn fake_vector(text: &str, dimensions: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; dimensions.max(1)];
    let mut any = false;
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && !w.chars().any(|c| c.is_ascii_digit()))
    {
        let hash = fnv1a(&word.to_lowercase());
        let sign = if hash >> 63 == 0 { 3.0 } else { -3.0 };
        let slot = (hash % v.len() as u64) as usize;
        v[slot] += sign;
        any = true;
    }
    if !any {
        v[0] = 3.0;
    }
    v.truncate(dimensions);
    v
}

/// `v` scaled to unit length.
pub fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// The fakes' token count: whitespace-separated words.
pub fn words(text: &str) -> u32 {
    text.split_whitespace().count() as u32
}

/// An [`ApiKey`] with a fresh id.
pub fn api_key(secret: &str) -> ApiKey {
    ApiKey {
        id: KeyId::new(),
        secret: SecretString::from(secret.to_owned()),
    }
}

fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dialect {
    Google,
    OpenAi,
}

struct Bucket {
    limit: u32,
    window: Duration,
    started: Option<Instant>,
    used: u32,
}

#[derive(Default)]
struct Inner {
    /// Valid key → quota group.
    keys: HashMap<String, String>,
    /// OpenAI `keyless()`: no Authorization needed.
    keyless: bool,
    buckets: HashMap<String, Bucket>,
    latency: Duration,
    embed_failures: VecDeque<Failure>,
    count_failures: VecDeque<Failure>,
    /// OpenAI models: name → (native dimensions, accepts `dimensions`).
    models: HashMap<String, (usize, bool)>,
    stats: Stats,
}

struct Shared {
    dialect: Dialect,
    inner: Mutex<Inner>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The controls both fakes share (reached through `Deref` on [`FakeGoogle`] / [`FakeOpenAi`]).
pub struct Fake {
    addr: SocketAddr,
    version: &'static str,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Fake {
    async fn start(dialect: Dialect, keys: &[&str], router: Router<Arc<Shared>>) -> Self {
        let mut inner = Inner::default();
        for key in keys {
            inner.keys.insert((*key).to_owned(), (*key).to_owned());
        }
        let shared = Arc::new(Shared {
            dialect,
            inner: Mutex::new(inner),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake provider");
        let addr = listener.local_addr().expect("fake provider address");
        let app = router.with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let version = match dialect {
            Dialect::Google => "v1beta",
            Dialect::OpenAi => "v1",
        };
        Self {
            addr,
            version,
            shared,
            task,
        }
    }

    /// The API base including the version: `http://127.0.0.1:PORT/v1beta` or `…/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/{}", self.addr, self.version)
    }

    /// Makes `key` valid, in quota group `group` (default: a group of its own named after it).
    pub fn add_key(&self, key: &str, group: Option<&str>) {
        self.shared
            .lock()
            .keys
            .insert(key.to_owned(), group.unwrap_or(key).to_owned());
    }

    /// Makes `key` invalid again.
    pub fn remove_key(&self, key: &str) {
        self.shared.lock().keys.remove(key);
    }

    /// Limits `group` (or a lone key, by its name) to `requests` units per `window`.
    pub fn set_quota(&self, group: &str, requests: u32, window: Duration) {
        let bucket = Bucket {
            limit: requests,
            window,
            started: None,
            used: 0,
        };
        self.shared.lock().buckets.insert(group.to_owned(), bucket);
    }

    /// Delay before every answer.
    pub fn set_latency(&self, latency: Duration) {
        self.shared.lock().latency = latency;
    }

    /// Queues `failure` for the next embed request (embedContent, batchEmbedContents, embeddings).
    pub fn fail_next(&self, failure: Failure) {
        self.shared.lock().embed_failures.push_back(failure);
    }

    /// Queues `failure` for the next countTokens request.
    pub fn fail_next_count(&self, failure: Failure) {
        self.shared.lock().count_failures.push_back(failure);
    }

    pub fn stats(&self) -> Stats {
        self.shared.lock().stats.clone()
    }

    pub fn reset_stats(&self) {
        self.shared.lock().stats = Stats::default();
    }
}

/// A fake Google AI Studio (`/v1beta/models/{model}:embedContent|batchEmbedContents|countTokens`).
/// Knows one model, `gemini-embedding-001` (3072 dimensions, 1..=3072 allowed).
pub struct FakeGoogle(Fake);

impl FakeGoogle {
    /// Starts a fake accepting `keys`, each in a quota group of its own, without quotas.
    pub async fn start(keys: &[&str]) -> Self {
        let router = Router::new().route("/v1beta/models/{*call}", post(google));
        Self(Fake::start(Dialect::Google, keys, router).await)
    }
}

impl Deref for FakeGoogle {
    type Target = Fake;

    fn deref(&self) -> &Fake {
        &self.0
    }
}

/// A fake OpenAI (`/v1/embeddings`). Knows text-embedding-3-small (1536) and -3-large (3072),
/// which take `dimensions`, and text-embedding-ada-002 (1536), which refuses it; more with
/// [`FakeOpenAi::add_model`]. Refuses empty strings and more than 2048 inputs like OpenAI.
pub struct FakeOpenAi(Fake);

impl FakeOpenAi {
    /// Starts a fake accepting `keys` as bearer tokens, each in a quota group of its own.
    pub async fn start(keys: &[&str]) -> Self {
        let router = Router::new().route("/v1/embeddings", post(openai));
        let fake = Self(Fake::start(Dialect::OpenAi, keys, router).await);
        {
            let mut inner = fake.shared.lock();
            inner.models.insert("text-embedding-3-small".into(), (1536, true));
            inner.models.insert("text-embedding-3-large".into(), (3072, true));
            inner.models.insert("text-embedding-ada-002".into(), (1536, false));
        }
        fake
    }

    /// A compatible server without authentication (any or no `Authorization` is accepted).
    pub async fn keyless() -> Self {
        let fake = Self::start(&[]).await;
        fake.shared.lock().keyless = true;
        fake
    }

    /// Serves `name` with `dimensions` native outputs; `adjustable`: accepts `dimensions`.
    pub fn add_model(&self, name: &str, dimensions: usize, adjustable: bool) {
        self.shared
            .lock()
            .models
            .insert(name.to_owned(), (dimensions, adjustable));
    }
}

impl Deref for FakeOpenAi {
    type Target = Fake;

    fn deref(&self) -> &Fake {
        &self.0
    }
}

// ---------------------------------------------------------------------------------------------
// Google

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

async fn google(
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

fn google_status_name(status: u16) -> &'static str {
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

fn google_error(status: u16, name: &str, message: &str, details: Value, key: Option<&str>) -> Response {
    let message = echo(message, key);
    let body = json!({"error": {"code": status, "message": message, "status": name, "details": details}});
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(body),
    )
        .into_response()
}

fn quota_failure(quota_id: &str) -> Value {
    json!({"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
        "quotaMetric": "generativelanguage.googleapis.com/embed_content_free_tier_requests",
        "quotaId": quota_id,
        "quotaDimensions": {"location": "global", "model": "gemini-embedding-001"},
        "quotaValue": "100"}]})
}

fn retry_info(delay: Duration) -> Value {
    json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{:.3}s", delay.as_secs_f64())})
}

// ---------------------------------------------------------------------------------------------
// OpenAI

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

async fn openai(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
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

fn openai_error(status: u16, message: &str, kind: &str, code: Option<&str>, key: Option<&str>) -> Response {
    let body = json!({"error": {"message": echo(message, key), "type": kind, "param": null, "code": code}});
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(body),
    )
        .into_response()
}

fn openai_rate_limited(retry_after: Duration, key: Option<&str>) -> Response {
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

// ---------------------------------------------------------------------------------------------
// Shared machinery

impl Shared {
    /// Counts a request and returns the latency to apply.
    fn record(&self, endpoint: &'static str, key: Option<&str>) -> Duration {
        let mut inner = self.lock();
        inner.stats.requests += 1;
        *inner.stats.per_key.entry(key.unwrap_or("").to_owned()).or_default() += 1;
        *inner.stats.per_endpoint.entry(endpoint).or_default() += 1;
        inner.latency
    }

    /// The rejection of `key`, if it is not accepted.
    fn check_key(&self, key: Option<&str>) -> Option<Response> {
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
    fn take_quota(&self, key: Option<&str>, units: u32) -> Option<Response> {
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
fn corrupt_vectors(vectors: &mut Vec<Vec<f32>>, failure: Option<&Failure>) -> bool {
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
fn vector_json(v: &[f32], non_finite: bool) -> String {
    let mut values: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    if non_finite && let Some(first) = values.first_mut() {
        *first = "1e39".into();
    }
    format!("[{}]", values.join(","))
}

/// `v` as OpenAI's `encoding_format: base64` sends it: the base64 of its little-endian f32
/// values, as a JSON string; with `non_finite`, the first value is infinite.
fn vector_base64(v: &[f32], non_finite: bool) -> String {
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
fn echo(message: &str, key: Option<&str>) -> String {
    match key {
        Some(key) => format!("{message} (key: {key})"),
        None => message.to_owned(),
    }
}

/// A scripted failure in `dialect`.
fn render(dialect: Dialect, failure: &Failure, key: Option<&str>) -> Response {
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
