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
//!
//! This file holds the fakes' public controls and state; the routes of each fake and what both
//! share are in the submodules.

#![allow(dead_code)] // a shared toolkit: not every test module uses every helper

mod google;
mod machinery;
mod openai;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use quarry::domain::KeyId;
use quarry::providers::ApiKey;
use secrecy::SecretString;
use serde_json::Value;
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

    /// Every text the embed requests carried, in the order they were received.
    pub fn sent_texts(&self) -> Vec<String> {
        self.embed_calls.iter().flat_map(|c| c.texts.clone()).collect()
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
    /// A share of embed requests failing until a time (see [`Fake::fail_share`]).
    outage: Option<Outage>,
    /// OpenAI models: name → (native dimensions, accepts `dimensions`).
    models: HashMap<String, (usize, bool)>,
    stats: Stats,
}

struct Outage {
    percent: u32,
    until: Instant,
    failure: Failure,
    seen: u32,
}

impl Inner {
    /// The failure an embed request meets from the outage under way, if any: `percent` of
    /// them, spread evenly.
    fn outage_failure(&mut self) -> Option<Failure> {
        let outage = self.outage.as_mut()?;
        if Instant::now() >= outage.until {
            self.outage = None;
            return None;
        }
        let n = outage.seen;
        outage.seen += 1;
        ((n * outage.percent) % 100 < outage.percent).then(|| outage.failure.clone())
    }
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

    /// An outage: `percent` of embed requests (evenly spread) answer `failure` for `length`,
    /// then every request succeeds again.
    pub fn fail_share(&self, percent: u32, length: Duration, failure: Failure) {
        self.shared.lock().outage = Some(Outage {
            percent,
            until: Instant::now() + length,
            failure,
            seen: 0,
        });
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
        let router = Router::new().route("/v1beta/models/{*call}", post(google::google));
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
        let router = Router::new().route("/v1/embeddings", post(openai::openai));
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
