//! The embedding providers this process can run, by kind: what workers embed with, what
//! retrieval embeds queries with and what sources are chunked with; and the reranker, when one
//! is configured.

use std::collections::HashMap;
use std::sync::Arc;

use super::rerank::Reranker;
use super::{EmbeddingProvider, ProviderError};
use crate::chunking::{Cl100k, TokenCounter};
use crate::domain::ProviderKind;

/// The embedding providers by kind, and the reranker (cheap to clone).
#[derive(Clone, Default)]
pub struct Providers {
    map: HashMap<ProviderKind, Arc<dyn EmbeddingProvider>>,
    reranker: Option<Arc<Reranker>>,
}

impl Providers {
    #[must_use]
    pub fn with_reranker(mut self, reranker: Option<Reranker>) -> Self {
        self.reranker = reranker.map(Arc::new);
        self
    }

    pub fn reranker(&self) -> Option<&Arc<Reranker>> {
        self.reranker.as_ref()
    }

    pub fn with(mut self, provider: Arc<dyn EmbeddingProvider>) -> Self {
        self.map.insert(provider.kind(), provider);
        self
    }

    pub fn get(&self, kind: ProviderKind) -> Option<Arc<dyn EmbeddingProvider>> {
        self.map.get(&kind).cloned()
    }

    /// The tokenizer sources of `kind`'s worlds are chunked with: the model's own where quarry
    /// has it (the local model's WordPiece), else `cl100k_base`.
    pub async fn chunk_counter(&self, kind: ProviderKind) -> Result<Arc<dyn TokenCounter>, ProviderError> {
        let own = match self.get(kind) {
            Some(provider) => provider.chunk_counter().await?,
            None => None,
        };
        Ok(own.unwrap_or_else(|| Arc::new(Cl100k)))
    }
}
