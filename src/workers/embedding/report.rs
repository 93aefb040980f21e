//! Telling the job engine and the metrics what became of chunks that were not embedded: waits
//! for a provider, warnings, spent attempts, and the chunk counters.

use std::time::Duration;

use crate::domain::{ChunkId, JobEventData, JobId, WaitReason, WarningCode, WorkItem, now};
use crate::jobs::Notice;

use super::{EmbeddingWorkers, UNAVAILABLE_RETRY, eta, to_chrono};

impl EmbeddingWorkers {
    /// Gives `items` back for [`UNAVAILABLE_RETRY`] without spending an attempt, because this
    /// process cannot run their provider or model at all (`why`); the job is told once, with a
    /// `provider_unavailable` warning, until one of its batches is embedded again.
    pub(super) async fn wait_for_provider(
        &self,
        owner: &str,
        job: JobId,
        items: &[WorkItem],
        why: &str,
    ) -> crate::store::Result<()> {
        let engine = &self.shared.engine;
        let event = JobEventData::Warning {
            code: WarningCode::ProviderUnavailable,
            chunks: items.len(),
            message: format!(
                "{why}; the chunks wait (no attempt spent) and are tried again every {} s",
                UNAVAILABLE_RETRY.as_secs()
            ),
        };
        if engine.notify_once(job, Notice::ProviderUnavailable, event).await? {
            tracing::warn!(%job, reason = %why, "provider unavailable in this process; entries given back");
        } else {
            tracing::debug!(%job, reason = %why, "provider still unavailable; entries given back");
        }
        let ids: Vec<ChunkId> = items.iter().map(|i| i.chunk_id).collect();
        let not_before = now() + to_chrono(UNAVAILABLE_RETRY);
        engine
            .waiting(job, WaitReason::ProviderUnavailable, Some(not_before))
            .await?;
        engine.give_back(owner, job, &ids, Some(not_before), false).await
    }
    /// The job waits for the provider's breaker to let calls through again (`wait` from now):
    /// shown on the job, and said once with a `provider_unavailable` warning.
    pub(super) async fn provider_down(
        &self,
        job: JobId,
        profile: &crate::domain::EmbeddingProfile,
        chunks: usize,
        wait: Duration,
        cause: Option<&str>,
    ) -> crate::store::Result<()> {
        let engine = &self.shared.engine;
        let until = now() + to_chrono(wait);
        engine
            .waiting(job, WaitReason::ProviderUnavailable, Some(until))
            .await?;
        let message = format!(
            "{} {} keeps failing; it is not called until {} (in {}) and the chunks wait, no attempt spent{}",
            profile.provider,
            profile.model,
            until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            eta(wait),
            cause.map(|c| format!(": {c}")).unwrap_or_default()
        );
        let event = JobEventData::Warning {
            code: WarningCode::ProviderUnavailable,
            chunks,
            message,
        };
        if engine.notify_once(job, Notice::ProviderUnavailable, event).await? {
            tracing::warn!(%job, provider = %profile.provider, model = %profile.model, wait_s = wait.as_secs(),
                "provider breaker open; the job's chunks wait");
        }
        Ok(())
    }
    /// Records a `warning` event on `job`: trouble the job recovers from by itself.
    pub(super) async fn warn(
        &self,
        job: JobId,
        code: WarningCode,
        chunks: usize,
        message: String,
    ) -> crate::store::Result<()> {
        let event = JobEventData::Warning { code, chunks, message };
        self.shared.engine.record(job, event).await
    }
    /// Spends an attempt of `item` (all of them when `permanent`); the job engine records the
    /// chunk's failure once it has none left.
    pub(super) async fn fail(
        &self,
        owner: &str,
        item: &WorkItem,
        code: &'static str,
        message: &str,
        permanent: bool,
    ) -> crate::store::Result<()> {
        let retry_at = now() + to_chrono(retry_backoff(item.attempts + 1));
        let max_attempts = self.shared.config.max_attempts;
        let failed = (self.shared.engine)
            .report_failure(owner, item, code, message, permanent, max_attempts, retry_at)
            .await?;
        if failed {
            self.count("quarry_chunks_failed_total", &item.profile, 1);
        }
        Ok(())
    }
    /// Adds `n` to chunk counter `name` for `profile`'s provider and model.
    pub(super) fn count(&self, name: &'static str, profile: &crate::domain::EmbeddingProfile, n: u64) {
        let labels = [
            ("provider", profile.provider.as_str()),
            ("model", profile.model.as_str()),
        ];
        self.shared.meters.counter(name, &labels).increment(n);
    }
    /// Counts `n` chunks given back to the queue without spending an attempt, for `reason`.
    pub(super) fn count_retried(&self, reason: &str, n: usize) {
        (self.shared.meters)
            .counter("quarry_chunks_retried_total", &[("reason", reason)])
            .increment(n as u64);
    }
}

/// 2 s, 4 s, 8 s … (capped at 5 min) before a failed entry is tried again.
fn retry_backoff(attempt: u32) -> Duration {
    Duration::from_secs(2u64.saturating_pow(attempt.min(8))).min(Duration::from_secs(300))
}
