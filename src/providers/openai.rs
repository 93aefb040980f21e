//! OpenAI and OpenAI-compatible embeddings (`POST {base_url}/embeddings`; Ollama, TEI, vLLM
//! and the like through a configured base URL and extra models). Tokens are counted locally and
//! exactly with tiktoken's cl100k_base; results are put back in input order by `data[].index`.
//!
//! Decisions:
//! - Inputs are checked before anything is sent: empty strings are refused (`Permanent`, the API
//!   rejects them) and a text over the model's limit is `InputTooLarge`. `embed` then splits
//!   its input greedily, in order, into sub-requests of at most `max_batch_size` texts and
//!   `max_tokens_per_request` tokens, sent one after the other; if one fails nothing is
//!   returned.
//! - `dimensions` is sent only when the registry says the model can shorten its output
//!   (text-embedding-3-*, extra models with `dimensions_adjustable`) and fewer than the native
//!   size are asked for; servers that reject the field never see it.
//! - The key is optional: `None` sends no `Authorization` header (local servers without auth).
//! - Vectors are returned as the server sends them (OpenAI normalises, shortened ones too).
//! - Vectors are asked for as base64 (`encoding_format`, configurable): little-endian f32,
//!   about half the bytes of decimal JSON and decoded without parsing numbers; OpenAI's own
//!   Python client asks the same way. Answers are read in either form, so a compatible server
//!   that ignores the field and sends numbers still works; one that refuses it needs
//!   `providers.openai.encoding_format = "float"`.
//! - A single text too short in bytes to be over the limit ([`super::fits_uncounted`]), such
//!   as a query, is sent without being counted again.
//! - Extra models may use another tokenizer; cl100k_base is then an estimate, and their
//!   server's own limit check (TEI 413, OpenAI 400) is classified `Permanent`.

use std::collections::HashMap;
use std::ops::Range;

use async_trait::async_trait;
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use super::http::{self, BuildError, HttpOptions};
use super::{
    ApiKey, EmbedRequest, EmbeddingProvider, ModelRegistry, ModelSpec, ProviderError, ProviderLimits, classify,
};
use crate::config::{EncodingFormat, OpenAiSettings};
use crate::domain::ProviderKind;

/// Request limits of one OpenAI-compatible server, plus the client's timeouts; configured as
/// `providers.openai.{max_batch_size, max_tokens_per_request, connect_timeout_s, request_timeout_s}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenAiOptions {
    pub http: HttpOptions,
    /// Most texts in one request (OpenAI: 2048; TEI's default client batch is 32).
    pub max_batch_size: usize,
    /// Most tokens summed over one request (OpenAI: 300,000).
    pub max_tokens_per_request: u64,
    /// How vectors are asked for.
    pub encoding_format: EncodingFormat,
}

/// The configured defaults: OpenAI's own limits, 5 s to connect, 60 s per request.
impl Default for OpenAiOptions {
    fn default() -> Self {
        Self::from(&OpenAiSettings::default())
    }
}

/// `providers.openai.{connect_timeout_s, request_timeout_s, max_batch_size, max_tokens_per_request,
/// encoding_format}`.
impl From<&OpenAiSettings> for OpenAiOptions {
    fn from(settings: &OpenAiSettings) -> Self {
        Self {
            http: HttpOptions::from(settings),
            max_batch_size: settings.max_batch_size,
            max_tokens_per_request: settings.max_tokens_per_request,
            encoding_format: settings.encoding_format,
        }
    }
}

/// The OpenAI-compatible adapter. Cheap to share behind an `Arc`; holds no keys.
pub struct OpenAiProvider {
    client: reqwest::Client,
    /// Including the version, without a trailing slash: `https://api.openai.com/v1`.
    base_url: String,
    /// The OpenAI models of the registry (built-in and configured), by name.
    models: HashMap<String, ModelSpec>,
    max_batch_size: usize,
    max_tokens_per_request: u64,
    encoding_format: EncodingFormat,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("base_url", &self.base_url)
            .field("models", &self.models.keys().collect::<Vec<_>>())
            .field("max_batch_size", &self.max_batch_size)
            .field("max_tokens_per_request", &self.max_tokens_per_request)
            .field("encoding_format", &self.encoding_format)
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// Builds the adapter and its HTTP client. `settings.keys` are not used here (they belong
    /// to the key scheduler); `registry` (built from `settings.models` too) supplies each model's
    /// native size, whether it takes `dimensions`, and its per-text limit.
    pub fn new(
        settings: &OpenAiSettings,
        registry: &ModelRegistry,
        options: OpenAiOptions,
    ) -> Result<Self, BuildError> {
        let provider = ProviderKind::OpenAi;
        let base_url = http::parse_base_url(provider, &settings.base_url)?;
        if options.max_batch_size == 0 {
            return Err(BuildError::Zero {
                provider,
                setting: "max_batch_size",
            });
        }
        if options.max_tokens_per_request == 0 {
            return Err(BuildError::Zero {
                provider,
                setting: "max_tokens_per_request",
            });
        }
        let client = http::build_client(provider, options.http)?;
        let models = registry
            .all()
            .iter()
            .filter(|m| m.provider == provider)
            .map(|m| (m.model.clone(), m.clone()))
            .collect();
        Ok(Self {
            client,
            base_url,
            models,
            max_batch_size: options.max_batch_size,
            max_tokens_per_request: options.max_tokens_per_request,
            encoding_format: options.encoding_format,
        })
    }

    fn spec(&self, model: &str) -> Result<&ModelSpec, ProviderError> {
        self.models.get(model).ok_or_else(|| ProviderError::Permanent {
            message: format!("`{model}` is not a known OpenAI model"),
        })
    }

    async fn post(
        &self,
        key: Option<&ApiKey>,
        body: &EmbeddingsRequest<'_>,
        dimensions: u32,
    ) -> Result<Vec<Vec<f32>>, ProviderError> {
        let secret = key.map(|k| k.secret.expose_secret());
        let mut request = self.client.post(format!("{}/embeddings", self.base_url)).json(body);
        if let Some(secret) = secret {
            request = request.header(
                reqwest::header::AUTHORIZATION,
                http::secret_header(&format!("Bearer {secret}"))?,
            );
        }
        let bytes = http::send(request, secret).await?;
        let answer: EmbeddingsResponse = serde_json::from_slice(&bytes)
            .map_err(|e| classify::malformed(&format!("embeddings answer: {e}"), secret))?;
        let expected = body.input.len();
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
        for item in answer.data {
            let slot = slots.get_mut(item.index).ok_or_else(|| {
                classify::malformed(&format!("index {} out of range 0..{expected}", item.index), None)
            })?;
            if slot.replace(item.embedding.0).is_some() {
                return Err(classify::malformed(
                    &format!("index {} answered twice", item.index),
                    None,
                ));
            }
        }
        let vectors: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
        classify::check_vectors(&vectors, expected, dimensions)?;
        Ok(vectors)
    }
}

/// Exact cl100k_base token count (the tokenizer of the text-embedding-3 models).
pub fn cl100k_tokens(text: &str) -> u32 {
    if text.is_empty() {
        return 0;
    }
    let tokens = tiktoken_rs::cl100k_base_singleton().encode_ordinary(text).len();
    u32::try_from(tokens).unwrap_or(u32::MAX)
}

/// Splits texts with these token counts into consecutive ranges of at most `max_batch` texts
/// and `max_tokens` tokens each (a single text over `max_tokens` must be refused beforehand).
pub fn plan_requests(counts: &[u32], max_batch: usize, max_tokens: u64) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let (mut start, mut tokens) = (0, 0u64);
    for (i, &count) in counts.iter().enumerate() {
        let count = u64::from(count);
        if i > start && (i - start >= max_batch || tokens + count > max_tokens) {
            ranges.push(start..i);
            (start, tokens) = (i, 0);
        }
        tokens += count;
    }
    if start < counts.len() {
        ranges.push(start..counts.len());
    }
    ranges
}

#[async_trait]
impl EmbeddingProvider for OpenAiProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::OpenAi
    }

    fn limits(&self, model: &ModelSpec) -> ProviderLimits {
        ProviderLimits {
            max_input_tokens: model.max_input_tokens,
            max_batch_size: self.max_batch_size,
            max_tokens_per_request: Some(self.max_tokens_per_request),
            requests_per_text: false,
        }
    }

    /// Local and free: `key` is not needed.
    async fn count_tokens(
        &self,
        _key: Option<&ApiKey>,
        _model: &str,
        texts: &[String],
    ) -> Result<Vec<u32>, ProviderError> {
        Ok(texts.iter().map(|t| cl100k_tokens(t)).collect())
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
        if let Some(i) = request.texts.iter().position(String::is_empty) {
            return Err(ProviderError::Permanent {
                message: format!("input {i} is empty; the API refuses empty strings"),
            });
        }
        let request_limit = u32::try_from(self.max_tokens_per_request).unwrap_or(u32::MAX);
        let limit = spec.max_input_tokens.min(request_limit);
        // Counts the caller made already (the workers' exact check) are not made again. One
        // short text (a query) fits whatever its count, and there is nothing to plan.
        let counts: Vec<u32> = match (request.texts, request.token_counts) {
            (texts, Some(counts)) if counts.len() == texts.len() => counts.to_vec(),
            ([text], _) if super::fits_uncounted(text, limit) => vec![u32::try_from(text.len()).unwrap_or(u32::MAX)],
            (texts, _) => texts.iter().map(|t| cl100k_tokens(t)).collect(),
        };
        if let Some(&tokens) = counts.iter().find(|&&c| c > limit) {
            return Err(ProviderError::InputTooLarge { tokens, limit });
        }
        let adjustable = spec.min_dimensions < spec.max_dimensions;
        let dimensions = (adjustable && request.dimensions < spec.max_dimensions).then_some(request.dimensions);

        let mut vectors = Vec::with_capacity(request.texts.len());
        for range in plan_requests(&counts, self.max_batch_size, self.max_tokens_per_request) {
            let body = EmbeddingsRequest {
                input: &request.texts[range],
                model: &spec.model,
                encoding_format: self.encoding_format.as_str(),
                dimensions,
            };
            vectors.extend(self.post(key, &body, request.dimensions).await?);
        }
        Ok(vectors)
    }
}

#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    input: &'a [String],
    model: &'a str,
    encoding_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<u32>,
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    index: usize,
    embedding: Embedding,
}

/// One vector as the server sent it: an array of numbers, or (`encoding_format` base64) the
/// base64 of its little-endian f32 values.
struct Embedding(Vec<f32>);

impl<'de> Deserialize<'de> for Embedding {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = Vec<f32>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of numbers or a base64 string of little-endian f32 values")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<f32>, A::Error> {
                let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(x) = seq.next_element::<f32>()? {
                    values.push(x);
                }
                Ok(values)
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Vec<f32>, E> {
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_err(|e| E::custom(format!("embedding is not valid base64: {e}")))?;
                if bytes.len() % 4 != 0 {
                    return Err(E::custom(format!(
                        "base64 embedding has {} bytes, not a whole number of f32 values",
                        bytes.len()
                    )));
                }
                Ok(bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect())
            }
        }
        deserializer.deserialize_any(Either).map(Embedding)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_respect_batch_size_and_token_budget_in_order() {
        assert_eq!(plan_requests(&[], 2, 10), Vec::<Range<usize>>::new());
        assert_eq!(plan_requests(&[1, 1, 1, 1, 1], 2, 100), vec![0..2, 2..4, 4..5]);
        assert_eq!(plan_requests(&[4, 4, 4, 1, 9], 10, 9), vec![0..2, 2..4, 4..5]);
        assert_eq!(plan_requests(&[10, 10], 10, 10), vec![0..1, 1..2]);
    }

    #[test]
    fn options_come_from_the_settings() {
        let defaults = OpenAiOptions::default();
        assert_eq!(
            (
                defaults.max_batch_size,
                defaults.max_tokens_per_request,
                defaults.encoding_format
            ),
            (2048, 300_000, EncodingFormat::Base64)
        );
        assert_eq!(defaults.http, HttpOptions::default());
        let settings = OpenAiSettings {
            max_batch_size: 32,
            max_tokens_per_request: 8192,
            request_timeout_s: 3,
            ..OpenAiSettings::default()
        };
        let options = OpenAiOptions::from(&settings);
        assert_eq!((options.max_batch_size, options.max_tokens_per_request), (32, 8192));
        assert_eq!(options.http.request_timeout, std::time::Duration::from_secs(3));
    }

    #[test]
    fn vectors_are_read_as_numbers_or_as_base64_little_endian_f32() {
        let values = [0.5f32, -1.25, 3.0e-7];
        let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
        use base64::Engine as _;
        let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let read = |embedding: serde_json::Value| {
            serde_json::from_value::<EmbeddingItem>(serde_json::json!({"index": 0, "embedding": embedding}))
                .map(|item| item.embedding.0)
        };
        assert_eq!(read(serde_json::json!(encoded)).unwrap(), values);
        assert_eq!(read(serde_json::json!([0.5, -1.25, 3.0e-7])).unwrap(), values);
        let error = read(serde_json::json!("not base64!")).unwrap_err().to_string();
        assert!(error.contains("not valid base64"), "{error}");
        let error = read(serde_json::json!(
            base64::engine::general_purpose::STANDARD.encode([1u8, 2, 3])
        ))
        .unwrap_err()
        .to_string();
        assert!(error.contains("3 bytes"), "{error}");
        assert!(read(serde_json::json!({"a": 1})).is_err());
    }

    #[test]
    fn counting_uses_cl100k_base() {
        assert_eq!(cl100k_tokens(""), 0);
        assert_eq!(cl100k_tokens("hello world"), 2);
    }

    #[test]
    fn the_dimensions_field_is_omitted_unless_set() {
        let input = vec!["a".to_owned()];
        let body = EmbeddingsRequest {
            input: &input,
            model: "m",
            encoding_format: "float",
            dimensions: None,
        };
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            serde_json::json!({"input": ["a"], "model": "m", "encoding_format": "float"})
        );
    }
}
