//! One batch: the provider's breaker, a key from the scheduler, the exact token count, the
//! embedding call, the write and the report; and what a provider's failure means for the batch.

use std::time::{Duration, Instant};

use chrono::Utc;

use crate::domain::{
    ChunkId, EmbeddedVector, EmbeddingProfile, JobEventData, JobId, JobStatus, ProviderKind, WaitReason, WarningCode,
    WorkItem, now,
};
use crate::jobs::Notice;
use crate::providers::breaker::{Gate, Verdict};
use crate::providers::scheduler::{AcquireError, BatchSizer, KeyLease, Lane, Outcome};
use crate::providers::{CountFailure, EmbedMode, EmbedRequest, ProviderError, ProviderLimits};
use crate::vector::Point;
use crate::workers::inflight::Leads;

use super::write::{embedded, point_of};
use super::{BatchOutcome, EmbeddingWorkers, NO_KEY_RETRY, Target, chunk_ids, eta, to_chrono};

impl EmbeddingWorkers {
    /// One batch: key → exact token count → embedding → write → report. `rest` is how many
    /// items of the claim wait behind it (for the warnings' counts).
    pub(super) async fn embed_batch(
        &self,
        owner: &str,
        target: &Target,
        batch: Vec<WorkItem>,
        rest: usize,
        leads: Option<&Leads>,
    ) -> crate::store::Result<BatchOutcome> {
        let engine = &self.shared.engine;
        let (job, profile) = (batch[0].job_id, batch[0].profile.clone());
        let (provider, limits) = (&target.provider, target.limits);
        // A provider in an outage is not called: the work waits for its breaker, spending nothing.
        if let Gate::Wait { until } = self
            .shared
            .breakers
            .gate(profile.provider, &profile.model, Instant::now())
        {
            let wait = until.saturating_duration_since(Instant::now());
            self.provider_down(job, &profile, batch.len() + rest, wait, None)
                .await?;
            return Ok(BatchOutcome::Stop {
                embedded: 0,
                batch: chunk_ids(&batch),
                not_before: Some(now() + to_chrono(wait)),
            });
        }
        let lease = match self.take_key(&profile, limits, &batch, rest).await? {
            Ok(lease) => lease,
            Err(retry) => {
                return Ok(BatchOutcome::Stop {
                    embedded: 0,
                    batch: chunk_ids(&batch),
                    not_before: Some(now() + to_chrono(retry)),
                });
            }
        };
        // Taking a key may have waited out a rate limit: a job paused or cancelled meanwhile
        // sends nothing more (its entries go back; a paused job's wait for its resume).
        if self.shared.store.job_status(job).await? != Some(JobStatus::Running) {
            self.shared.breakers.inconclusive(profile.provider, &profile.model);
            lease.finish(Outcome::Unused).await;
            return Ok(BatchOutcome::Stop {
                embedded: 0,
                batch: chunk_ids(&batch),
                not_before: None,
            });
        }
        let texts: Vec<String> = batch.iter().map(|i| i.chunk_text.clone()).collect();

        // Exact token check before dispatch.
        let (lease, counts) = match lease.count_tokens(provider.as_ref(), &profile.model, &texts).await {
            Ok(counted) => counted,
            Err(CountFailure::WrongLength) => {
                let message = "the provider returned the wrong number of counts";
                for item in &batch {
                    self.fail(owner, item, "token_count_failed", message, false).await?;
                }
                return Ok(BatchOutcome::Done { embedded: 0 });
            }
            Err(CountFailure::Provider(err)) => {
                self.handle_batch_error(owner, job, &batch, err, &target.sizer).await?;
                return Ok(BatchOutcome::Done { embedded: 0 });
            }
        };
        let mut sendable = Vec::with_capacity(batch.len());
        let mut sendable_counts = Vec::with_capacity(batch.len());
        for (item, count) in batch.into_iter().zip(counts) {
            if count > limits.max_input_tokens {
                let message = format!(
                    "chunk has {count} tokens, over the model's limit of {}; it was not sent",
                    limits.max_input_tokens
                );
                self.fail(owner, &item, "input_too_large", &message, true).await?;
            } else {
                sendable.push(item);
                sendable_counts.push(count);
            }
        }
        if sendable.is_empty() {
            lease.finish(Outcome::Unused).await;
            return Ok(BatchOutcome::Done { embedded: 0 });
        }
        let texts: Vec<String> = sendable.iter().map(|i| i.chunk_text.clone()).collect();
        let request = EmbedRequest {
            model: &profile.model,
            dimensions: profile.dimensions,
            mode: EmbedMode::Document,
            texts: &texts,
            token_counts: Some(&sendable_counts),
        };
        let vectors = match lease.embed(provider.as_ref(), request).await {
            Ok(vectors)
                if vectors.len() == sendable.len()
                    && vectors.iter().all(|v| v.len() == profile.dimensions as usize) =>
            {
                vectors
            }
            Ok(_) => {
                let message = "the provider returned vectors of the wrong shape";
                for item in &sendable {
                    self.fail(owner, item, "provider_error", message, false).await?;
                }
                return Ok(BatchOutcome::Done { embedded: 0 });
            }
            Err(ProviderError::Permanent { message }) if sendable.len() > 1 => {
                tracing::info!(%job, %message, items = sendable.len(), "batch refused; sending its items one by one");
                return Ok(BatchOutcome::SendAlone(sendable));
            }
            Err(err) => {
                self.handle_batch_error(owner, job, &sendable, err, &target.sizer)
                    .await?;
                return Ok(BatchOutcome::Done { embedded: 0 });
            }
        };
        target.sizer.grow();
        self.shared.breakers.success(profile.provider, &profile.model);
        engine.clear_notice(job, Notice::ProviderUnavailable);
        // The vectors are reported with the marks too (the store keeps them): the points get copies.
        let (done, points): (Vec<EmbeddedVector>, Vec<Point>) = sendable
            .iter()
            .zip(vectors)
            .map(|(item, dense)| (embedded(item, dense.clone()), point_of(item, dense)))
            .unzip();
        if let Some(outcome) = self.write_vectors(owner, job, &sendable, points, rest).await? {
            return Ok(outcome);
        }
        // Confirmed by the vector store: now, and only now, the entries are embedded.
        let marked = engine.report_embedded(owner, job, sendable[0].run_id, &done, 0).await?;
        self.count("quarry_chunks_embedded_total", &profile, marked);
        if marked < done.len() as u64 {
            self.drop_dead_points(&sendable).await?;
            // The job was paused or cancelled meanwhile: stop and give the rest back.
            return Ok(BatchOutcome::Stop {
                embedded: marked,
                batch: Vec::new(),
                not_before: None,
            });
        }
        if let Some(leads) = leads {
            for (item, vector) in sendable.iter().zip(&done) {
                leads.publish(item, &vector.dense);
            }
        }
        Ok(BatchOutcome::Done { embedded: marked })
    }
    /// Takes a key for `batch` from the scheduler (ingestion lane, fair between worlds). Without
    /// one, the job shows what it waits for and is told once, and `Err` holds how long the batch
    /// waits before it is tried again.
    async fn take_key(
        &self,
        profile: &EmbeddingProfile,
        limits: ProviderLimits,
        batch: &[WorkItem],
        rest: usize,
    ) -> crate::store::Result<Result<KeyLease, Duration>> {
        let engine = &self.shared.engine;
        let job = batch[0].job_id;
        let tokens: u32 = batch.iter().map(|i| i.token_count).sum();
        let acquired = self
            .shared
            .scheduler
            .acquire_for(
                profile.provider,
                Lane::Ingest(batch[0].world_id),
                if limits.requests_per_text {
                    batch.len() as u32
                } else {
                    1
                },
                tokens,
            )
            .await;
        let err = match acquired {
            Ok(lease) => {
                engine.clear_notice(job, Notice::NoKey);
                engine.clear_notice(job, Notice::Waiting(WaitReason::RateLimited));
                engine.clear_notice(job, Notice::Waiting(WaitReason::DailyQuota));
                return Ok(Ok(lease));
            }
            Err(err) => err,
        };
        self.shared.breakers.inconclusive(profile.provider, &profile.model);
        let retry = match err {
            AcquireError::RateLimited { retry_after, daily } => {
                // The job shows what it waits for, and says so once.
                let until = now() + to_chrono(retry_after);
                let (reason, code, why) = if daily {
                    (
                        WaitReason::DailyQuota,
                        WarningCode::DailyQuota,
                        "has spent its daily quota",
                    )
                } else {
                    (WaitReason::RateLimited, WarningCode::RateLimited, "is rate limited")
                };
                engine.waiting(job, reason, Some(until)).await?;
                let event = JobEventData::Warning {
                    code,
                    chunks: batch.len() + rest,
                    message: format!(
                        "every {} key {why}; the chunks wait (no attempt spent) until {} (in {})",
                        profile.provider,
                        until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                        eta(retry_after)
                    ),
                };
                engine.notify_once(job, Notice::Waiting(reason), event).await?;
                retry_after
            }
            AcquireError::NoEligibleKey(provider) => {
                engine.waiting(job, WaitReason::NoEligibleKey, None).await?;
                // Said once per job (until a key serves it again): the job waits for a
                // key to be added or enabled.
                let event = JobEventData::Warning {
                    code: WarningCode::NoEligibleKey,
                    chunks: batch.len() + rest,
                    message: format!(
                        "no enabled {provider} key is left; the chunks wait until one is added \
                         (POST /v1/provider-keys) or enabled"
                    ),
                };
                engine.notify_once(job, Notice::NoKey, event).await?;
                NO_KEY_RETRY
            }
        };
        tracing::info!(%job, error = %err, "no provider key available; entries given back");
        Ok(Err(retry))
    }

    async fn handle_batch_error(
        &self,
        owner: &str,
        job: JobId,
        batch: &[WorkItem],
        err: ProviderError,
        sizer: &BatchSizer,
    ) -> crate::store::Result<()> {
        let engine = &self.shared.engine;
        let ids: Vec<ChunkId> = batch.iter().map(|i| i.chunk_id).collect();
        let profile = &batch[0].profile;
        let verdict = match &err {
            ProviderError::Transient { .. } => {
                self.shared
                    .breakers
                    .failure(profile.provider, &profile.model, Instant::now(), Utc::now())
            }
            _ => {
                self.shared.breakers.inconclusive(profile.provider, &profile.model);
                Verdict::SpendAttempt
            }
        };
        match err {
            ProviderError::Transient { message } if verdict != Verdict::SpendAttempt => {
                // Not the chunks' fault: back to the queue after a backoff, no attempt spent.
                let Verdict::GiveBack { after, opened } = verdict else {
                    unreachable!("matched above")
                };
                if opened {
                    self.provider_down(job, profile, batch.len(), after, Some(&message))
                        .await?;
                } else {
                    let warning = format!(
                        "an embedding call failed; its {} chunk(s) are sent again in {} (no attempt spent): {message}",
                        batch.len(),
                        eta(after)
                    );
                    self.warn(job, WarningCode::ProviderError, batch.len(), warning).await?;
                }
                // The chunks say why they wait (their listing's `last_error`), with no attempt spent.
                self.shared
                    .store
                    .note_error(&ids, "provider_error", &message, now())
                    .await?;
                self.count_retried("provider_error", ids.len());
                engine
                    .give_back(owner, job, &ids, Some(now() + to_chrono(after)), false)
                    .await
            }
            ProviderError::RateLimited { .. } => {
                // Not the chunks' fault: no attempt spent. Google counts every text of a batch
                // against its quota, so smaller batches fit where a large one did not; request
                // quotas (OpenAI-style) count a request whatever its size, so a smaller batch
                // would only carry less per granted request.
                if batch[0].profile.provider == ProviderKind::Google {
                    sizer.shrink(batch.len());
                }
                self.count_retried("rate_limited", ids.len());
                engine.give_back(owner, job, &ids, None, true).await
            }
            ProviderError::KeyRejected { message } | ProviderError::QuotaExhausted { message } => {
                // The key is retired by the scheduler; another key takes the work.
                let warning = format!(
                    "a {} key was refused and is retired; its chunks go to the other keys: {message}",
                    batch[0].profile.provider
                );
                self.warn(job, WarningCode::KeyRetired, batch.len(), warning).await?;
                engine.give_back(owner, job, &ids, None, false).await
            }
            ProviderError::Permanent { message } if batch.len() > 1 => {
                // One item may be the cause: retry one by one to find it.
                sizer.shrink(2);
                tracing::info!(%job, %message, "batch refused; retrying its items one by one");
                engine.give_back(owner, job, &ids, None, false).await
            }
            ProviderError::Permanent { message } => self.fail(owner, &batch[0], "provider_error", &message, true).await,
            ProviderError::InputTooLarge { tokens, limit } => {
                let message = format!("input of {tokens} tokens exceeds the limit of {limit}");
                for item in batch {
                    self.fail(owner, item, "input_too_large", &message, true).await?;
                }
                Ok(())
            }
            ProviderError::TokenCountFailed { message } => {
                for item in batch {
                    self.fail(owner, item, "token_count_failed", &message, true).await?;
                }
                Ok(())
            }
            ProviderError::Unavailable { message } => self.wait_for_provider(owner, job, batch, &message).await,
            ProviderError::Transient { message } | ProviderError::Malformed { message } => {
                // Chunks on their last attempt fail now, each with an `error` event: the warning
                // speaks only of those that will be tried again.
                let max = self.shared.config.max_attempts;
                let retried = batch.iter().filter(|i| i.attempts.saturating_add(1) < max).count();
                if retried > 0 {
                    let warning = format!(
                        "an embedding call failed and {retried} of its {} chunk(s) will be retried after a \
                         backoff (each spent an attempt): {message}",
                        batch.len()
                    );
                    self.warn(job, WarningCode::ProviderError, retried, warning).await?;
                }
                for item in batch {
                    self.fail(owner, item, "provider_error", &message, false).await?;
                }
                Ok(())
            }
        }
    }
}
