//! The reranker: a server speaking the common `/rerank` wire format (Cohere, Jina, Voyage and
//! Hugging Face TEI serve variants of it). quarry posts `{"model", "query", "documents",
//! "top_n"}` with a bearer key and reads relevance scores by document index from `results` (Cohere,
//! Jina), `data` (Voyage) or a bare array (TEI), each item's score in `relevance_score` or
//! `score`. TEI reads its documents from `texts`: quarry sends the documents under both names.
//!
//! Keys come through the key scheduler like the embedding providers' (provider `rerank`, its
//! query lane); a server without keys configured is called without one.

use secrecy::ExposeSecret as _;
use serde::{Deserialize, Serialize};

use super::http::{self, BuildError, HttpOptions};
use super::{ApiKey, ProviderError, classify};
use crate::config::RerankSettings;
use crate::domain::ProviderKind;

/// A configured reranker.
pub struct Reranker {
    client: reqwest::Client,
    base_url: String,
    model: String,
}

impl std::fmt::Debug for Reranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reranker")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct RerankRequest<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    model: &'a str,
    query: &'a str,
    documents: &'a [String],
    texts: &'a [String],
    top_n: usize,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RerankAnswer {
    Results { results: Vec<Scored> },
    Data { data: Vec<Scored> },
    Bare(Vec<Scored>),
}

#[derive(Deserialize)]
struct Scored {
    index: usize,
    #[serde(alias = "score")]
    relevance_score: f32,
}

impl Reranker {
    /// The reranker `settings` describe; `None` when `base_url` is empty (none configured).
    ///
    /// # Errors
    /// A base URL that is not an absolute http(s) URL, or zero timeouts.
    pub fn new(settings: &RerankSettings) -> Result<Option<Self>, BuildError> {
        if settings.base_url.trim().is_empty() {
            return Ok(None);
        }
        let provider = ProviderKind::Rerank;
        let options = HttpOptions::from_secs(settings.connect_timeout_s, settings.request_timeout_s);
        Ok(Some(Self {
            client: http::build_client(provider, options)?,
            base_url: http::parse_base_url(provider, &settings.base_url)?,
            model: settings.model.trim().to_owned(),
        }))
    }

    /// The relevance of each of `documents` to `query`, as `(index, score)` best first, at
    /// most `top_n` of them.
    ///
    /// # Errors
    /// The provider's failure, classified as the embedding providers' are; an answer naming a
    /// document that was not sent, or none, is `Malformed`.
    pub async fn rerank(
        &self,
        key: Option<&ApiKey>,
        query: &str,
        documents: &[String],
        top_n: usize,
    ) -> Result<Vec<(usize, f32)>, ProviderError> {
        let secret = key.map(|k| k.secret.expose_secret());
        let body = RerankRequest {
            model: &self.model,
            query,
            documents,
            texts: documents,
            top_n,
        };
        let mut request = self.client.post(format!("{}/rerank", self.base_url)).json(&body);
        if let Some(secret) = secret {
            request = request.header(
                reqwest::header::AUTHORIZATION,
                http::secret_header(&format!("Bearer {secret}"))?,
            );
        }
        let bytes = http::send(request, secret).await?;
        let answer: RerankAnswer =
            serde_json::from_slice(&bytes).map_err(|e| classify::malformed(&format!("rerank answer: {e}"), secret))?;
        let (RerankAnswer::Results { results: items } | RerankAnswer::Data { data: items } | RerankAnswer::Bare(items)) =
            answer;
        let mut scored = Vec::with_capacity(items.len());
        for item in items {
            if item.index >= documents.len() {
                return Err(classify::malformed(
                    &format!(
                        "rerank answer: index {} out of range 0..{}",
                        item.index,
                        documents.len()
                    ),
                    None,
                ));
            }
            if !item.relevance_score.is_finite() {
                return Err(classify::malformed("rerank answer: a score is not a number", None));
            }
            scored.push((item.index, item.relevance_score));
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut seen = std::collections::HashSet::new();
        scored.retain(|s| seen.insert(s.0));
        scored.truncate(top_n);
        if scored.is_empty() && !documents.is_empty() {
            return Err(classify::malformed("rerank answer: no scores", None));
        }
        Ok(scored)
    }
}
