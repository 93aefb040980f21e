//! Embedding providers.
//!
//! [`EmbeddingProvider`] is the one interface ingestion and retrieval use: embed a batch of
//! texts in a mode (document or query) at the profile's dimensions, count tokens exactly in
//! the provider's own tokenizer, and report limits. Adapters: Google AI Studio, OpenAI and
//! OpenAI-compatible servers, and the in-process local model. Every failure comes back
//! classified ([`ProviderError`]) so the key scheduler can tell a rate limit (cool the key
//! down, do not spend the chunk's retry budget) from a dead key, a transient fault or a
//! permanent refusal.

pub mod breaker;
pub(crate) mod budget;
mod call;
pub mod classify;
pub mod google;
pub mod http;
pub mod local;
mod map;
pub mod openai;
pub mod registry;
pub mod rerank;
pub mod scheduler;

use std::time::Duration;

use async_trait::async_trait;
use secrecy::SecretString;

pub use call::CountFailure;
pub use map::Providers;
pub use registry::{ModelRegistry, ModelSpec};

use crate::domain::{KeyId, ProviderKind};

/// Whether a text is a document being indexed or a query being searched with. Providers with
/// asymmetric models embed the two differently (Google: `RETRIEVAL_DOCUMENT` / `RETRIEVAL_QUERY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EmbedMode {
    Document,
    Query,
}

/// What a provider accepts in one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProviderLimits {
    /// Exact per-text limit in the provider's tokens.
    pub max_input_tokens: u32,
    /// Most texts in one request.
    pub max_batch_size: usize,
    /// Most tokens summed over one request, when the provider has such a limit.
    pub max_tokens_per_request: Option<u64>,
    /// The provider's request quota counts each text of a batch as a request (Google), so a
    /// batch pays the request budget once per text.
    pub requests_per_text: bool,
}

/// An API key as handed out by the scheduler. The secret never leaves this struct except into
/// a request header.
#[derive(Clone)]
pub struct ApiKey {
    pub id: KeyId,
    pub secret: SecretString,
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKey")
            .field("id", &self.id)
            .field("secret", &"[REDACTED]")
            .finish()
    }
}

/// One embedding call.
#[derive(Clone, Copy, Debug)]
pub struct EmbedRequest<'a> {
    pub model: &'a str,
    pub dimensions: u32,
    pub mode: EmbedMode,
    pub texts: &'a [String],
    /// The exact token counts of `texts` when the caller has them already (the workers count
    /// every chunk before sending it): a provider that needs them to plan its requests uses
    /// these instead of counting again. Ignored unless there is one per text.
    pub token_counts: Option<&'a [u32]>,
}

/// How long a rate limit lasts, as far as the provider said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateLimitScope {
    /// Per-minute style limits: retry after the hint (or a backoff).
    Short,
    /// A per-day quota: nothing helps before the daily reset.
    Daily,
}

/// A classified provider failure. Every adapter maps every failure into exactly one of these.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// 429-style: cool the key (or its quota group) down; the work goes back without spending
    /// an attempt.
    #[error("rate limited{}", retry_after.map(|d| format!(" (retry after {:.1}s)", d.as_secs_f64())).unwrap_or_default())]
    RateLimited {
        retry_after: Option<Duration>,
        scope: RateLimitScope,
        message: String,
    },
    /// The account has no quota left (OpenAI `insufficient_quota`): not retryable on this key.
    #[error("quota exhausted: {message}")]
    QuotaExhausted { message: String },
    /// The key is invalid, leaked or blocked: retire it until re-enabled.
    #[error("key rejected: {message}")]
    KeyRejected { message: String },
    /// 5xx, timeouts, connection resets: retry with backoff (spends an attempt).
    #[error("transient provider failure: {message}")]
    Transient { message: String },
    /// Any other refusal: the item fails with the provider's message.
    #[error("provider refused the request: {message}")]
    Permanent { message: String },
    /// A text is over the model's exact token limit; the provider was not called.
    #[error("input of {tokens} tokens exceeds the limit of {limit}")]
    InputTooLarge { tokens: u32, limit: u32 },
    /// Tokens could not be counted exactly, so the text is not sent (fail closed).
    #[error("token count failed: {message}")]
    TokenCountFailed { message: String },
    /// The provider answered, but not with what was asked (wrong vector length, malformed
    /// body, wrong count): nothing is stored.
    #[error("malformed provider response: {message}")]
    Malformed { message: String },
    /// The provider cannot work at all in this process (e.g. local model files missing).
    #[error("provider unavailable: {message}")]
    Unavailable { message: String },
}

/// An embedding backend.
#[async_trait]
pub trait EmbeddingProvider: Send + Sync + 'static {
    fn kind(&self) -> ProviderKind;

    /// Limits for `model` (the registry entry carries the per-text limit).
    fn limits(&self, model: &ModelSpec) -> ProviderLimits;

    /// Exact token counts, one per text, in the provider's own tokenizer. Remote providers
    /// that count through an API use `key`.
    async fn count_tokens(
        &self,
        key: Option<&ApiKey>,
        model: &str,
        texts: &[String],
    ) -> Result<Vec<u32>, ProviderError>;

    /// One vector per text, in input order, each exactly `dimensions` long (L2-normalised
    /// where the provider does not normalise reduced outputs itself).
    async fn embed(&self, key: Option<&ApiKey>, request: EmbedRequest<'_>) -> Result<Vec<Vec<f32>>, ProviderError>;

    /// The tokenizer sources are chunked with when quarry has the model's own (the local model's
    /// WordPiece); `None`: chunk in `cl100k_base` tokens.
    async fn chunk_counter(&self) -> Result<Option<std::sync::Arc<dyn crate::chunking::TokenCounter>>, ProviderError> {
        Ok(None)
    }
}

/// Room for the special tokens a model adds to every text (`[CLS]`/`[SEP]`, BOS/EOS) when a
/// text is judged by its length alone; see [`fits_uncounted`].
pub const SPECIAL_TOKENS: usize = 8;

/// Whether `text` is certainly within `max_input_tokens` without counting it: every tokenizer
/// quarry's providers use (cl100k BPE, SentencePiece with byte fallback, WordPiece) makes each
/// token out of at least one byte of text, so a text has at most as many tokens as UTF-8 bytes,
/// plus the model's special tokens. Such a text need not be counted to be sent safely; for
/// Google that spares a `countTokens` round trip (a query would otherwise pay one every time).
pub fn fits_uncounted(text: &str, max_input_tokens: u32) -> bool {
    text.len().saturating_add(SPECIAL_TOKENS) <= max_input_tokens as usize
}

/// Scales `v` to unit length (no-op for the zero vector).
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}
