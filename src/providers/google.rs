//! Google AI Studio (Gemini API) embeddings: `embedContent` for one text, `batchEmbedContents`
//! for several (at most [`MAX_BATCH`] per request; larger inputs become several requests, in
//! order), `countTokens` for exact counts. The key travels in the `x-goog-api-key` header.
//!
//! Decisions:
//! - Every `embed` counts every text first (one `countTokens` request per text, at most
//!   [`COUNT_CONCURRENCY`] at a time) — except texts too short in bytes to be over the limit
//!   ([`super::fits_uncounted`]), such as queries — and refuses locally with `InputTooLarge` if
//!   one is over the model's limit, so the embed endpoint is never called with something it would
//!   truncate or refuse. Counts are cached by sha256 of (model, text) in a bounded FIFO cache
//!   ([`TOKEN_CACHE_CAPACITY`] entries), so the chunker's count and the dispatch check cost one
//!   request together. Counting fails closed (nothing that might be over is sent uncounted): rate
//!   limits, rejected or quota-less keys and transient faults pass through as themselves (cool
//!   down, retire, retry), and any other failure becomes `TokenCountFailed`.
//! - Model facts (per-text limit, dimension range, task-type names) come from the
//!   [`ModelRegistry`] given to the constructor; a model it does not list is refused locally.
//! - Google unit-normalises only the full-size output, so vectors with fewer dimensions than the
//!   model's maximum are L2-normalised here. Any wrong count, wrong length, non-finite value or
//!   unparsable body is `Malformed` and nothing partial is returned.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use futures_util::{StreamExt, TryStreamExt, stream};
use reqwest::header::HeaderValue;
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::http::{self, BuildError, HttpOptions};
use super::{
    ApiKey, EmbedMode, EmbedRequest, EmbeddingProvider, ModelRegistry, ModelSpec, ProviderError, ProviderLimits,
    classify, l2_normalize,
};
use crate::config::RemoteProviderSettings;
use crate::domain::ProviderKind;

/// Most texts in one `batchEmbedContents` request (the API refuses more).
pub const MAX_BATCH: usize = 100;
/// `countTokens` requests in flight at once for one `embed` / `count_tokens` call.
pub const COUNT_CONCURRENCY: usize = 8;
/// Token counts remembered; the oldest entry is evicted first.
pub const TOKEN_CACHE_CAPACITY: usize = 100_000;

const KEY_HEADER: &str = "x-goog-api-key";

/// The Google AI Studio adapter. Cheap to share behind an `Arc`; holds no keys.
pub struct GoogleProvider {
    client: reqwest::Client,
    /// Including the version, without a trailing slash: `https://…/v1beta`.
    base_url: String,
    /// The Google models of the registry, by name.
    models: HashMap<String, ModelSpec>,
    tokens: TokenCache,
}

impl std::fmt::Debug for GoogleProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoogleProvider")
            .field("base_url", &self.base_url)
            .field("models", &self.models.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl GoogleProvider {
    /// Builds the adapter and its HTTP client. `settings.keys` are not used here (they belong
    /// to the key scheduler); `registry` supplies each model's limits.
    pub fn new(
        settings: &RemoteProviderSettings,
        registry: &ModelRegistry,
        options: HttpOptions,
    ) -> Result<Self, BuildError> {
        let base_url = http::parse_base_url(ProviderKind::Google, &settings.base_url)?;
        let client = http::build_client(ProviderKind::Google, options)?;
        let models = registry
            .all()
            .iter()
            .filter(|m| m.provider == ProviderKind::Google)
            .map(|m| (m.model.clone(), m.clone()))
            .collect();
        Ok(Self {
            client,
            base_url,
            models,
            tokens: TokenCache::new(TOKEN_CACHE_CAPACITY),
        })
    }

    fn spec(&self, model: &str) -> Result<&ModelSpec, ProviderError> {
        self.models.get(model).ok_or_else(|| ProviderError::Permanent {
            message: format!("`{model}` is not a known Google model"),
        })
    }

    fn url(&self, model: &str, method: &str) -> String {
        format!("{}/models/{model}:{method}", self.base_url)
    }

    /// Counts through the cache; only texts not seen before cost a request (each distinct text
    /// once, even if it repeats within `texts`).
    async fn counts(&self, key: &ApiKey, model: &str, texts: &[String]) -> Result<Vec<u32>, ProviderError> {
        let secret = key.secret.expose_secret();
        let header = http::secret_header(secret)?;
        let hashes: Vec<[u8; 32]> = texts.iter().map(|t| cache_key(model, t)).collect();
        let mut known: HashMap<[u8; 32], u32> = HashMap::new();
        let mut pending: HashSet<[u8; 32]> = HashSet::new();
        let mut missing = Vec::new();
        for (i, hash) in hashes.iter().enumerate() {
            if known.contains_key(hash) || pending.contains(hash) {
                continue;
            }
            match self.tokens.get(hash) {
                Some(count) => {
                    known.insert(*hash, count);
                }
                None => {
                    pending.insert(*hash);
                    missing.push(i);
                }
            }
        }
        // Futures collected first: a closure inside the stream trips async_trait's `Send` check.
        let requests: Vec<_> = missing
            .iter()
            .map(|&i| self.count_one(&header, secret, model, &texts[i]))
            .collect();
        let counted: Vec<u32> = stream::iter(requests)
            .buffered(COUNT_CONCURRENCY)
            .try_collect()
            .await
            .map_err(count_failure)?;
        for (&i, count) in missing.iter().zip(counted) {
            self.tokens.insert(hashes[i], count);
            known.insert(hashes[i], count);
        }
        hashes
            .iter()
            .map(|h| {
                known.get(h).copied().ok_or_else(|| ProviderError::TokenCountFailed {
                    message: "a text was left uncounted".into(),
                })
            })
            .collect()
    }

    async fn count_one(
        &self,
        header: &HeaderValue,
        secret: &str,
        model: &str,
        text: &str,
    ) -> Result<u32, ProviderError> {
        let body = CountTokensRequest {
            contents: [Content { parts: [Part { text }] }],
        };
        let request = self
            .client
            .post(self.url(model, "countTokens"))
            .header(KEY_HEADER, header.clone())
            .json(&body);
        let bytes = http::send(request, Some(secret)).await?;
        let answer: CountTokensResponse = serde_json::from_slice(&bytes)
            .map_err(|e| classify::malformed(&format!("countTokens answer: {e}"), Some(secret)))?;
        Ok(answer.total_tokens)
    }

    async fn embed_one(
        &self,
        header: &HeaderValue,
        secret: &str,
        item: EmbedContentRequest<'_>,
        model: &str,
    ) -> Result<Vec<Vec<f32>>, ProviderError> {
        let request = self
            .client
            .post(self.url(model, "embedContent"))
            .header(KEY_HEADER, header.clone())
            .json(&item);
        let bytes = http::send(request, Some(secret)).await?;
        let answer: EmbedContentResponse = serde_json::from_slice(&bytes)
            .map_err(|e| classify::malformed(&format!("embedContent answer: {e}"), Some(secret)))?;
        Ok(vec![answer.embedding.values])
    }

    async fn embed_batch(
        &self,
        header: &HeaderValue,
        secret: &str,
        requests: Vec<EmbedContentRequest<'_>>,
        model: &str,
    ) -> Result<Vec<Vec<f32>>, ProviderError> {
        let body = BatchEmbedRequest { requests };
        let request = self
            .client
            .post(self.url(model, "batchEmbedContents"))
            .header(KEY_HEADER, header.clone())
            .json(&body);
        let bytes = http::send(request, Some(secret)).await?;
        let answer: BatchEmbedResponse = serde_json::from_slice(&bytes)
            .map_err(|e| classify::malformed(&format!("batchEmbedContents answer: {e}"), Some(secret)))?;
        Ok(answer.embeddings.into_iter().map(|e| e.values).collect())
    }
}

#[async_trait]
impl EmbeddingProvider for GoogleProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Google
    }

    fn limits(&self, model: &ModelSpec) -> ProviderLimits {
        ProviderLimits {
            max_input_tokens: model.max_input_tokens,
            max_batch_size: MAX_BATCH,
            max_tokens_per_request: None,
            requests_per_text: true,
        }
    }

    async fn count_tokens(
        &self,
        key: Option<&ApiKey>,
        model: &str,
        texts: &[String],
    ) -> Result<Vec<u32>, ProviderError> {
        let key = key.ok_or_else(|| ProviderError::TokenCountFailed {
            message: "Google AI Studio counts tokens through its API and needs a key".into(),
        })?;
        self.counts(key, model, texts).await
    }

    async fn embed(&self, key: Option<&ApiKey>, request: EmbedRequest<'_>) -> Result<Vec<Vec<f32>>, ProviderError> {
        let spec = self.spec(request.model)?;
        if !spec.allows_dimensions(request.dimensions) {
            return Err(ProviderError::Permanent {
                message: format!(
                    "`{}` produces {}..={} dimensions, not {}",
                    spec.model, spec.min_dimensions, spec.max_dimensions, request.dimensions
                ),
            });
        }
        if request.texts.is_empty() {
            return Ok(Vec::new());
        }
        let key = key.ok_or_else(|| ProviderError::Unavailable {
            message: "Google AI Studio needs an API key".into(),
        })?;
        let secret = key.secret.expose_secret();
        let header = http::secret_header(secret)?;

        // Only texts that might be over the limit are counted (see `fits_uncounted`).
        let unsure: Vec<String> = request
            .texts
            .iter()
            .filter(|t| !super::fits_uncounted(t, spec.max_input_tokens))
            .cloned()
            .collect();
        let counts = match unsure.is_empty() {
            true => Vec::new(),
            false => self.counts(key, request.model, &unsure).await?,
        };
        if let Some(&tokens) = counts.iter().find(|&&c| c > spec.max_input_tokens) {
            return Err(ProviderError::InputTooLarge {
                tokens,
                limit: spec.max_input_tokens,
            });
        }

        let model_path = format!("models/{}", spec.model);
        let task_type = match request.mode {
            EmbedMode::Document => spec.document_mode,
            EmbedMode::Query => spec.query_mode,
        };
        let item = |text| EmbedContentRequest::new(&model_path, text, task_type, request.dimensions);

        let mut vectors = Vec::with_capacity(request.texts.len());
        if let [text] = request.texts {
            vectors.extend(self.embed_one(&header, secret, item(text), request.model).await?);
        } else {
            for chunk in request.texts.chunks(MAX_BATCH) {
                let answer = self
                    .embed_batch(&header, secret, chunk.iter().map(|t| item(t)).collect(), request.model)
                    .await?;
                classify::check_vectors(&answer, chunk.len(), request.dimensions)?;
                vectors.extend(answer);
            }
        }
        classify::check_vectors(&vectors, request.texts.len(), request.dimensions)?;
        if request.dimensions < spec.max_dimensions {
            vectors.iter_mut().for_each(|v| l2_normalize(v));
        }
        Ok(vectors)
    }
}

/// Counting must fail closed (nothing is sent uncounted), but what went wrong still matters:
/// rate limits cool the key down, rejected or quota-less keys are retired, and a transient fault
/// (5xx, timeout, cut connection) is retried like any other; only an answer that cannot be a
/// count (a refusal, a malformed body) means the text is "uncountable".
fn count_failure(err: ProviderError) -> ProviderError {
    match err {
        ProviderError::RateLimited { .. }
        | ProviderError::KeyRejected { .. }
        | ProviderError::QuotaExhausted { .. }
        | ProviderError::Transient { .. } => err,
        ProviderError::Permanent { .. }
        | ProviderError::InputTooLarge { .. }
        | ProviderError::TokenCountFailed { .. }
        | ProviderError::Malformed { .. }
        | ProviderError::Unavailable { .. } => ProviderError::TokenCountFailed {
            message: err.to_string(),
        },
    }
}

/// sha256 over the length-prefixed model name and the text.
fn cache_key(model: &str, text: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update((model.len() as u64).to_le_bytes());
    hasher.update(model.as_bytes());
    hasher.update(text.as_bytes());
    hasher.finalize().into()
}

/// Exact token counts by text hash, bounded, oldest evicted first. A plain mutex: it is never
/// held across an await.
struct TokenCache {
    capacity: usize,
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    counts: HashMap<[u8; 32], u32>,
    order: VecDeque<[u8; 32]>,
}

impl TokenCache {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new(CacheInner::default()),
        }
    }

    fn get(&self, key: &[u8; 32]) -> Option<u32> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .counts
            .get(key)
            .copied()
    }

    fn insert(&self, key: [u8; 32], count: u32) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.counts.insert(key, count).is_none() {
            inner.order.push_back(key);
        }
        while inner.order.len() > self.capacity {
            if let Some(oldest) = inner.order.pop_front() {
                inner.counts.remove(&oldest);
            }
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EmbedContentRequest<'a> {
    model: String,
    content: Content<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    task_type: Option<&'static str>,
    output_dimensionality: u32,
}

impl<'a> EmbedContentRequest<'a> {
    fn new(model_path: &str, text: &'a str, task_type: Option<&'static str>, dimensions: u32) -> Self {
        Self {
            model: model_path.to_owned(),
            content: Content { parts: [Part { text }] },
            task_type,
            output_dimensionality: dimensions,
        }
    }
}

#[derive(Serialize)]
struct Content<'a> {
    parts: [Part<'a>; 1],
}

#[derive(Serialize)]
struct Part<'a> {
    text: &'a str,
}

#[derive(Serialize)]
struct BatchEmbedRequest<'a> {
    requests: Vec<EmbedContentRequest<'a>>,
}

#[derive(Serialize)]
struct CountTokensRequest<'a> {
    contents: [Content<'a>; 1],
}

#[derive(Deserialize)]
struct Values {
    /// proto3 JSON omits empty repeated fields.
    #[serde(default)]
    values: Vec<f32>,
}

#[derive(Deserialize)]
struct EmbedContentResponse {
    embedding: Values,
}

#[derive(Deserialize)]
struct BatchEmbedResponse {
    #[serde(default)]
    embeddings: Vec<Values>,
}

#[derive(Deserialize)]
struct CountTokensResponse {
    /// proto3 JSON omits zero values, so an absent count is 0.
    #[serde(default, rename = "totalTokens")]
    total_tokens: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_keys_separate_models_and_texts() {
        assert_eq!(cache_key("m", "text"), cache_key("m", "text"));
        assert_ne!(cache_key("m", "text"), cache_key("n", "text"));
        assert_ne!(cache_key("ab", "c"), cache_key("a", "bc"));
    }

    #[test]
    fn the_token_cache_evicts_the_oldest_entry() {
        let cache = TokenCache::new(2);
        let (a, b, c) = ([1; 32], [2; 32], [3; 32]);
        cache.insert(a, 1);
        cache.insert(b, 2);
        cache.insert(a, 1);
        cache.insert(c, 3);
        assert_eq!((cache.get(&a), cache.get(&b), cache.get(&c)), (None, Some(2), Some(3)));
    }

    #[test]
    fn counting_failures_keep_what_the_scheduler_acts_on_and_otherwise_fail_closed() {
        let limited = ProviderError::RateLimited {
            retry_after: None,
            scope: super::super::RateLimitScope::Short,
            message: "slow".into(),
        };
        for err in [
            limited,
            ProviderError::KeyRejected { message: "bad".into() },
            ProviderError::QuotaExhausted { message: "none".into() },
            ProviderError::Transient { message: "503".into() },
        ] {
            assert_eq!(count_failure(err.clone()), err);
        }
        for err in [
            ProviderError::Permanent { message: "400".into() },
            ProviderError::Malformed { message: "{".into() },
        ] {
            assert!(matches!(count_failure(err), ProviderError::TokenCountFailed { .. }));
        }
    }

    #[test]
    fn request_bodies_match_the_wire_format() {
        let item = EmbedContentRequest {
            model: "models/gemini-embedding-001".into(),
            content: Content {
                parts: [Part { text: "hello" }],
            },
            task_type: Some("RETRIEVAL_QUERY"),
            output_dimensionality: 768,
        };
        assert_eq!(
            serde_json::to_value(&item).unwrap(),
            serde_json::json!({"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "hello"}]},
                "taskType": "RETRIEVAL_QUERY", "outputDimensionality": 768})
        );
        let count = CountTokensRequest {
            contents: [Content {
                parts: [Part { text: "a b" }],
            }],
        };
        assert_eq!(
            serde_json::to_value(&count).unwrap(),
            serde_json::json!({"contents": [{"parts": [{"text": "a b"}]}]})
        );
    }
}
