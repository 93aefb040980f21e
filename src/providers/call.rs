//! One provider call under a key lease: what the workers and retrieval both do with a key the
//! scheduler gave them — count a batch's tokens exactly, then embed it — with the lease finished
//! exactly once, with the outcome the call had, whichever way the call ends.

use super::scheduler::{KeyLease, Outcome};
use super::{EmbedRequest, EmbeddingProvider, ProviderError};

/// Why a batch's tokens could not be counted. The lease is finished either way.
#[derive(Debug)]
pub enum CountFailure {
    /// The provider answered with another number of counts than texts (finished as failed).
    WrongLength,
    /// The provider failed (finished with the failure's outcome: a rate limit cools the key).
    Provider(ProviderError),
}

impl KeyLease {
    /// Counts `texts` in `model`'s own tokens with this key, one count per text. On failure
    /// the lease is finished and gone; on success it comes back for the embedding.
    pub async fn count_tokens(
        self,
        provider: &dyn EmbeddingProvider,
        model: &str,
        texts: &[String],
    ) -> Result<(KeyLease, Vec<u32>), CountFailure> {
        match provider.count_tokens(self.key(), model, texts).await {
            Ok(counts) if counts.len() == texts.len() => Ok((self, counts)),
            Ok(_) => {
                self.finish(Outcome::Failed).await;
                Err(CountFailure::WrongLength)
            }
            Err(err) => {
                self.finish(Outcome::of::<()>(&Err(err.clone()))).await;
                Err(CountFailure::Provider(err))
            }
        }
    }

    /// Embeds `request` with this key and finishes the lease with the call's outcome.
    pub async fn embed(
        self,
        provider: &dyn EmbeddingProvider,
        request: EmbedRequest<'_>,
    ) -> Result<Vec<Vec<f32>>, ProviderError> {
        let model = request.model.to_owned();
        let started = std::time::Instant::now();
        // The provider and model, never the key.
        let span = tracing::info_span!("provider.embed", provider = provider.kind().as_str(), model = %model);
        let result = tracing::Instrument::instrument(provider.embed(self.key(), request), span).await;
        let outcome = Outcome::of(&result);
        self.record_call(&model, &outcome, started.elapsed());
        self.finish(outcome).await;
        result
    }
}
