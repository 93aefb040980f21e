//! A minimal fake OpenAI embeddings server for the benchmark: `POST /v1/embeddings` on
//! `127.0.0.1:0`, bearer keys, an optional per-key quota of `R` requests per fixed window `W`
//! (over it: 429 `rate_limit_exceeded` with `retry-after-ms` = time left in the window), a fixed
//! latency per request, and counters; vectors come as numbers or, asked `encoding_format:
//! base64`, as base64 little-endian f32. Vectors are deterministic and cheap: a sum of per-word
//! pseudo-random vectors, normalised, so texts sharing words are close ([`text_vector`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;
use tokio::sync::oneshot;

/// text-embedding-3-small's native size, used when the request names no `dimensions`.
const NATIVE_DIMENSIONS: usize = 1536;

/// What the fake enforces.
#[derive(Clone, Debug)]
pub struct FakeConfig {
    pub keys: Vec<String>,
    /// `(R, W)`: each key may make `R` successful requests per fixed window of `W`.
    pub quota: Option<(u32, Duration)>,
    /// Added to every answer (successful or 429).
    pub latency: Duration,
    /// `(P, L)`: for `L` from the first request on, `P` % of requests (evenly spread) answer
    /// 503 "The model is overloaded", as a provider in an outage does.
    pub outage: Option<(u32, Duration)>,
}

/// Counters, read while or after a run.
#[derive(Debug, Default)]
pub struct Counters {
    pub requests: AtomicU64,
    pub ok: AtomicU64,
    pub rate_limited: AtomicU64,
    pub rejected: AtomicU64,
    /// Texts embedded in successful requests.
    pub items: AtomicU64,
    /// Requests answered 503 by the outage.
    pub overloaded: AtomicU64,
}

/// The quota windows requests arrived in: the first, the last, and how many requests the last
/// one admitted (over all keys).
#[derive(Clone, Copy, Debug)]
struct Span {
    first: u64,
    last: u64,
    last_admitted: u64,
}

/// A snapshot of [`Counters`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub requests: u64,
    pub ok: u64,
    pub rate_limited: u64,
    pub rejected: u64,
    pub items: u64,
    /// Requests the outage answered 503 (read by the chaos example).
    #[allow(dead_code)]
    pub overloaded: u64,
    /// Quota windows from the first request's to the last one's, inclusive (0 without a quota).
    pub windows: u64,
    /// Requests admitted in the last of those windows.
    pub last_window_ok: u64,
}

impl Stats {
    pub fn mean_batch(&self) -> f64 {
        if self.ok == 0 {
            0.0
        } else {
            self.items as f64 / self.ok as f64
        }
    }
}

struct Shared {
    config: FakeConfig,
    started: Instant,
    /// When the first request came (the outage starts then).
    first: Mutex<Option<Instant>>,
    /// Per key: (window number, successful requests in it).
    windows: Mutex<Vec<(u64, u32)>>,
    span: Mutex<Option<Span>>,
    counters: Counters,
}

pub struct Fake {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
}

impl Fake {
    pub async fn start(config: FakeConfig) -> std::io::Result<Fake> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            windows: Mutex::new(vec![(0, 0); config.keys.len()]),
            config,
            started: Instant::now(),
            first: Mutex::new(None),
            span: Mutex::new(None),
            counters: Counters::default(),
        });
        let router = Router::new()
            .route("/v1/embeddings", post(embeddings))
            .with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Fake {
            addr,
            shared,
            stop: Some(stop),
        })
    }

    /// The base URL quarry is configured with (`…/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn stats(&self) -> Stats {
        let c = &self.shared.counters;
        let span = *self
            .shared
            .span
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Stats {
            requests: c.requests.load(Ordering::Relaxed),
            ok: c.ok.load(Ordering::Relaxed),
            rate_limited: c.rate_limited.load(Ordering::Relaxed),
            rejected: c.rejected.load(Ordering::Relaxed),
            items: c.items.load(Ordering::Relaxed),
            overloaded: c.overloaded.load(Ordering::Relaxed),
            windows: span.map_or(0, |s| s.last - s.first + 1),
            last_window_ok: span.map_or(0, |s| s.last_admitted),
        }
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

#[derive(Deserialize)]
struct EmbeddingsRequest {
    input: Vec<String>,
    model: String,
    #[serde(default)]
    dimensions: Option<usize>,
    /// `float` (the default) or `base64`, as OpenAI takes it.
    #[serde(default)]
    encoding_format: Option<String>,
}

enum Verdict {
    Ok,
    RateLimited(Duration),
}

impl Shared {
    /// Takes one unit of `key`'s quota in the current window, or says how long until it resets.
    fn admit(&self, key: usize) -> Verdict {
        let Some((limit, window)) = self.config.quota else {
            return Verdict::Ok;
        };
        let elapsed = self.started.elapsed();
        let window_ns = window.as_nanos().max(1);
        let number = (elapsed.as_nanos() / window_ns) as u64;
        let mut windows = self.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = &mut windows[key];
        if slot.0 != number {
            *slot = (number, 0);
        }
        let admitted = slot.1 < limit;
        let mut span = self.span.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let s = span.get_or_insert(Span {
            first: number,
            last: number,
            last_admitted: 0,
        });
        if number > s.last {
            (s.last, s.last_admitted) = (number, 0);
        }
        if admitted && number == s.last {
            s.last_admitted += 1;
        }
        if admitted {
            slot.1 += 1;
            Verdict::Ok
        } else {
            let next = Duration::from_nanos(((u128::from(number) + 1) * window_ns) as u64);
            Verdict::RateLimited(next.saturating_sub(elapsed))
        }
    }
}

async fn embeddings(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let counters = &shared.counters;
    let n = counters.requests.fetch_add(1, Ordering::Relaxed);
    let key = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .and_then(|k| shared.config.keys.iter().position(|known| known == k));
    let Some(key) = key else {
        counters.rejected.fetch_add(1, Ordering::Relaxed);
        return openai_error(
            StatusCode::UNAUTHORIZED,
            "Incorrect API key provided.",
            "invalid_api_key",
        );
    };
    let request: EmbeddingsRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(err) => {
            counters.rejected.fetch_add(1, Ordering::Relaxed);
            return openai_error(StatusCode::BAD_REQUEST, &err.to_string(), "invalid_request_error");
        }
    };
    if let Some((percent, length)) = shared.config.outage {
        let first = *shared
            .first
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_or_insert_with(Instant::now);
        if first.elapsed() < length && (n * u64::from(percent)) % 100 < u64::from(percent) {
            counters.overloaded.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(shared.config.latency).await;
            return openai_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "The model is overloaded. Please try again later.",
                "server_error",
            );
        }
    }
    let verdict = shared.admit(key);
    if !shared.config.latency.is_zero() {
        tokio::time::sleep(shared.config.latency).await;
    }
    match verdict {
        Verdict::RateLimited(left) => {
            counters.rate_limited.fetch_add(1, Ordering::Relaxed);
            let mut response = openai_error(
                StatusCode::TOO_MANY_REQUESTS,
                &format!(
                    "Rate limit reached for requests. Please try again in {}ms.",
                    left.as_millis()
                ),
                "rate_limit_exceeded",
            );
            let ms = left.as_millis().max(1).to_string();
            let secs = left.as_secs_f64().ceil().max(1.0).to_string();
            let h = response.headers_mut();
            if let (Ok(ms), Ok(secs)) = (HeaderValue::from_str(&ms), HeaderValue::from_str(&secs)) {
                h.insert("retry-after-ms", ms);
                h.insert("retry-after", secs);
            }
            response
        }
        Verdict::Ok => {
            let dimensions = request.dimensions.unwrap_or(NATIVE_DIMENSIONS).max(1);
            counters.ok.fetch_add(1, Ordering::Relaxed);
            counters.items.fetch_add(request.input.len() as u64, Ordering::Relaxed);
            let base64 = match request.encoding_format.as_deref() {
                None | Some("float") => false,
                Some("base64") => true,
                Some(other) => {
                    let message = format!("Invalid value for 'encoding_format': {other:?}");
                    return openai_error(StatusCode::BAD_REQUEST, &message, "invalid_request_error");
                }
            };
            let body = answer(&request.input, &request.model, dimensions, base64);
            ([(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
    }
}

/// The successful answer, written by hand (a `serde_json::Value` per float is wasteful here):
/// each vector as numbers, or with `base64` as the base64 of its little-endian f32 values.
fn answer(inputs: &[String], model: &str, dimensions: usize, base64: bool) -> String {
    use base64::Engine as _;
    use std::fmt::Write as _;
    let mut out = String::with_capacity(64 + inputs.len() * (dimensions * 9 + 48));
    out.push_str(r#"{"object":"list","data":["#);
    let mut tokens = 0usize;
    for (i, text) in inputs.iter().enumerate() {
        tokens += text.split_whitespace().count();
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, r#"{{"object":"embedding","index":{i},"embedding":"#);
        let vector = text_vector(text, dimensions);
        if base64 {
            let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
            out.push('"');
            base64::engine::general_purpose::STANDARD.encode_string(&bytes, &mut out);
            out.push_str("\"}");
        } else {
            out.push('[');
            for (j, x) in vector.iter().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{x:.5}");
            }
            out.push_str("]}");
        }
    }
    let model = serde_json::to_string(model).unwrap_or_else(|_| "\"model\"".into());
    let _ = write!(
        out,
        r#"],"model":{model},"usage":{{"prompt_tokens":{tokens},"total_tokens":{tokens}}}}}"#
    );
    out
}

fn openai_error(status: StatusCode, message: &str, code: &str) -> Response {
    let kind = if status == StatusCode::TOO_MANY_REQUESTS {
        "requests"
    } else {
        "invalid_request_error"
    };
    let body = serde_json::json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
    (status, axum::Json(body)).into_response()
}

/// SplitMix64: a tiny deterministic generator (vectors here, text in `text.rs`).
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a of a word, the seed of its pseudo-random vector.
fn word_seed(word: &str) -> u64 {
    word.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The vector of `text`: the sum of one pseudo-random vector (entries in [-1, 1)) per lower-cased
/// alphanumeric word, normalised to length 1. Texts without words get a fixed unit vector.
pub fn text_vector(text: &str, dimensions: usize) -> Vec<f32> {
    let mut v = vec![0f32; dimensions];
    let mut words = 0;
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        words += 1;
        let mut state = word_seed(&word.to_lowercase());
        for x in v.iter_mut() {
            let r = splitmix(&mut state);
            *x += (r >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
        }
    }
    if words == 0 {
        v[0] = 1.0;
        return v;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}
