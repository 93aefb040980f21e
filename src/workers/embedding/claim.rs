//! Working a claim: the provider and model it is embedded with, texts other claims are sending
//! already or that have a vector already, and the rest sent batch by batch.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::config::ReuseScope;
use crate::domain::{ChunkId, ProviderKind, WorkItem};
use crate::providers::scheduler::BatchSizer;
use crate::workers::inflight::Leads;

use super::{BatchOutcome, EmbeddingWorkers, Target};

impl EmbeddingWorkers {
    fn sizer(&self, provider: ProviderKind, max: usize) -> Arc<BatchSizer> {
        let mut sizers = self
            .shared
            .sizers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        sizers
            .entry(provider)
            .or_insert_with(|| Arc::new(BatchSizer::new(max)))
            .clone()
    }
    /// The provider and limits a claim of `items` (one job, one profile) is embedded with;
    /// `None` when this process cannot run them (the items were given back to wait).
    async fn target(&self, owner: &str, items: &[WorkItem]) -> crate::store::Result<Option<Target>> {
        let (job, profile) = (items[0].job_id, &items[0].profile);
        let Some(provider) = self.shared.providers.get(profile.provider) else {
            let message = format!("no adapter for {} is configured in this process", profile.provider);
            self.wait_for_provider(owner, job, items, &message).await?;
            return Ok(None);
        };
        let Some(spec) = self.shared.registry.find(profile.provider, &profile.model) else {
            let message = format!(
                "the world's model {} {} is not in this process's configuration",
                profile.provider, profile.model
            );
            self.wait_for_provider(owner, job, items, &message).await?;
            return Ok(None);
        };
        let limits = provider.limits(spec);
        let sizer = self.sizer(profile.provider, limits.max_batch_size);
        Ok(Some(Target {
            provider,
            limits,
            sizer,
        }))
    }
    /// Embeds a claim: texts another claim of this process is sending already are waited for
    /// instead of sent (see [`super::inflight`]), texts with a vector already are reused, and
    /// the rest goes batch by batch. Returns how many entries were marked embedded.
    pub(super) async fn process(&self, owner: &str, items: Vec<WorkItem>) -> crate::store::Result<u64> {
        let job = items[0].job_id;
        let Some(target) = self.target(owner, &items).await? else {
            return Ok(0);
        };
        let (items, following, leads) = match self.shared.config.reuse {
            ReuseScope::Off => (items, Vec::new(), None),
            scope => {
                let (sending, following, leads) = self.shared.inflight.split(items, scope == ReuseScope::World);
                (sending, following, Some(leads))
            }
        };
        let (items, mut embedded) = self.reuse(owner, items).await?;
        let (n, stopped) = self.send(owner, &target, items, leads.as_ref()).await?;
        embedded += n;
        // Every lead is let go before any wait: a claim never waits while holding a text.
        drop(leads);
        if stopped {
            let ids: Vec<ChunkId> = following.iter().map(|f| f.item.chunk_id).collect();
            if !ids.is_empty() {
                self.shared.engine.give_back(owner, job, &ids, None, false).await?;
            }
            return Ok(embedded);
        }
        if following.is_empty() {
            return Ok(embedded);
        }
        let patience = self.shared.config.lease / 2;
        let waited = futures_util::future::join_all(following.into_iter().map(|f| f.vector(patience))).await;
        let mut shared = Vec::new();
        let mut rest = Vec::new();
        for (item, vector) in waited {
            match vector {
                Some(vector) => shared.push((item, vector)),
                None => rest.push(item),
            }
        }
        let (rest, n) = self.adopt(owner, shared, rest).await?;
        embedded += n;
        // What a leader let go without a vector: the store may have it by now; else it is sent.
        let (rest, n) = self.reuse(owner, rest).await?;
        embedded += n;
        let (n, _) = self.send(owner, &target, rest, None).await?;
        Ok(embedded + n)
    }
    /// Sends `items` batch by batch, publishing each vector to the claims following it
    /// (`leads`). Returns how many entries were marked embedded, and whether the claim stopped
    /// (what was left of it is given back).
    async fn send(
        &self,
        owner: &str,
        target: &Target,
        items: Vec<WorkItem>,
        leads: Option<&Leads>,
    ) -> crate::store::Result<(u64, bool)> {
        let Some(first) = items.first() else {
            return Ok((0, false));
        };
        let (job, kind) = (first.job_id, first.profile.provider);
        let mut embedded = 0;
        let mut queue: VecDeque<WorkItem> = items.into();
        // Items of a batch the provider refused as a whole, at the front of the queue: each is
        // sent alone, so that only the one at fault fails and the others are sent once more.
        let mut singles = 0usize;
        while !queue.is_empty() {
            let take = if singles > 0 {
                singles -= 1;
                1
            } else {
                let mut max = target.limits.max_batch_size;
                if target.limits.requests_per_text
                    && let Some(cap) = self.shared.scheduler.max_texts_per_request(kind)
                {
                    max = max.min(cap);
                }
                target.sizer.size().min(max).max(1).min(queue.len())
            };
            let batch: Vec<WorkItem> = queue.drain(..take).collect();
            let rest = queue.len();
            match self.embed_batch(owner, target, batch, rest, leads).await? {
                BatchOutcome::Done { embedded: n } => embedded += n,
                BatchOutcome::SendAlone(items) => {
                    singles += items.len();
                    for item in items.into_iter().rev() {
                        queue.push_front(item);
                    }
                }
                BatchOutcome::Stop {
                    embedded: n,
                    mut batch,
                    not_before,
                } => {
                    batch.extend(queue.iter().map(|i| i.chunk_id));
                    self.shared
                        .engine
                        .give_back(owner, job, &batch, not_before, false)
                        .await?;
                    return Ok((embedded + n, true));
                }
            }
        }
        Ok((embedded, false))
    }
}
