//! Reranking the verified candidates with the configured reranker, on the key scheduler's
//! query lane. A rerank never fails the retrieval: when it cannot be had (no key free, the
//! server failing or slow) the answer keeps the search's order with a `rerank_unavailable`
//! warning.

use super::*;
use crate::domain::ProviderKind;

impl RetrievalService {
    /// Reorders `answer.results` by the reranker's relevance to `query`, keeping the `keep`
    /// best; on failure leaves them as they are and says why in a warning.
    pub(super) async fn rerank(&self, query: &str, keep: usize, answer: &mut Retrieval) {
        let Some(reranker) = self.providers.reranker().cloned() else {
            return;
        };
        if answer.results.is_empty() {
            return;
        }
        let phase = Instant::now();
        let documents: Vec<String> = answer
            .results
            .iter()
            .map(|h| h.chunk.chunk.chunk_text.clone())
            .collect();
        // For the scheduler's token budgets only.
        let estimate = documents.iter().map(|d| d.len() / 4 + query.len() / 4).sum::<usize>();
        let estimate = u32::try_from(estimate).unwrap_or(u32::MAX).max(1);
        let call = async {
            let lease = match self
                .scheduler
                .acquire(ProviderKind::Rerank, Lane::Query, estimate)
                .await
            {
                Ok(lease) => Some(lease),
                // No keys: a server that needs none (a local TEI, say).
                Err(AcquireError::NoEligibleKey(_)) => None,
                Err(AcquireError::RateLimited { retry_after, .. }) => {
                    return Err(format!(
                        "every rerank key is cooling down (for {:.1} s)",
                        retry_after.as_secs_f64()
                    ));
                }
            };
            let result = reranker
                .rerank(lease.as_ref().and_then(|l| l.key()), query, &documents, keep)
                .await;
            if let Some(lease) = lease {
                lease.finish(Outcome::of(&result)).await;
            }
            result.map_err(|err| err.to_string())
        };
        let outcome = match tokio::time::timeout(self.limits.query_budget, call).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!(
                "the reranker did not answer within {:.1} s",
                self.limits.query_budget.as_secs_f64()
            )),
        };
        match outcome {
            Ok(scored) => {
                let results = std::mem::take(&mut answer.results);
                answer.results = scored
                    .into_iter()
                    .map(|(index, score)| Hit {
                        rerank_score: Some(score),
                        ..results[index].clone()
                    })
                    .collect();
            }
            Err(reason) => {
                tracing::warn!(%reason, "the rerank failed; answering in the search's order");
                answer.warnings.push(Warning {
                    code: WarningCode::RerankUnavailable,
                    message: format!("the results are not reranked: {reason}"),
                });
            }
        }
        answer.timing.rerank_ms = ms(phase.elapsed());
    }
}
