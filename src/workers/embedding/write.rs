//! Writing vectors: the points of embedded items, the write with its retries and outage pause,
//! what a failed write means for the batch, and removing points a refused report left without
//! a slot.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::domain::{EmbeddedVector, JobId, RunStatus, WaitReason, WarningCode, WorkItem, now};
use crate::vector::{Error as VectorError, Point, PointPayload};

use super::{BatchOutcome, EmbeddingWorkers, INFRA_RETRY, INFRA_RETRY_MAX, WRITE_RETRIES, chunk_ids, to_chrono};

impl EmbeddingWorkers {
    /// Writes the points of `sendable`'s new vectors. `None` once the vector store confirmed
    /// them; otherwise what became of the batch: after an outage it goes back without spending
    /// an attempt (`rest` more items of the claim follow it), after a refusal each chunk spends one.
    pub(super) async fn write_vectors(
        &self,
        owner: &str,
        job: JobId,
        sendable: &[WorkItem],
        points: Vec<Point>,
        rest: usize,
    ) -> crate::store::Result<Option<BatchOutcome>> {
        let engine = &self.shared.engine;
        match self.write(&sendable[0].collection, points).await {
            Ok(()) => Ok(None),
            Err(err @ (VectorError::Unavailable(_) | VectorError::Io(_))) => {
                // An outage: nothing the chunks did. They go back without spending an attempt,
                // for a pause that doubles while the outage lasts, so that an outage does not
                // pay for the same embeddings every few seconds.
                let pause = self.infra_pause();
                tracing::warn!(%job, error = %err, retry_in_s = pause.as_secs(),
                    "vector store write failed; entries given back");
                let message = format!(
                    "writing vectors failed; the chunks will be embedded again in {} s: {err}",
                    pause.as_secs()
                );
                self.warn(job, WarningCode::VectorStoreUnavailable, sendable.len() + rest, message)
                    .await?;
                self.count_retried("vector_store_unavailable", sendable.len());
                let until = now() + to_chrono(pause);
                engine
                    .waiting(job, WaitReason::VectorStoreUnavailable, Some(until))
                    .await?;
                Ok(Some(BatchOutcome::Stop {
                    embedded: 0,
                    batch: chunk_ids(sendable),
                    not_before: Some(now() + to_chrono(pause)),
                }))
            }
            Err(err) => {
                // Refused (a lost collection, vectors that do not fit it): each chunk spends an
                // attempt, so a refusal that lasts fails them instead of looping.
                let message = err.to_string();
                tracing::warn!(%job, error = %message, "vector store refused a write");
                let warning = format!("the vector store refused the chunks' vectors; each spent an attempt: {message}");
                self.warn(job, WarningCode::VectorStoreRejected, sendable.len(), warning)
                    .await?;
                for item in sendable {
                    self.fail(owner, item, "vector_store_rejected", &message, false).await?;
                }
                Ok(Some(BatchOutcome::Done { embedded: 0 }))
            }
        }
    }

    /// Writes `points` to `collection` and waits for the confirmation. A write that meets an
    /// outage is tried again with the same vectors after [`WRITE_RETRIES`] pauses, so a short
    /// blip costs no new embedding. A confirmed write ends the outage pause ([`Self::infra_pause`]).
    async fn write(&self, collection: &str, points: Vec<Point>) -> crate::vector::Result<()> {
        let mut pauses = WRITE_RETRIES.iter();
        loop {
            match self.shared.vectors.upsert(collection, points.clone()).await {
                Ok(()) => {
                    self.shared.outages.store(0, Ordering::Relaxed);
                    return Ok(());
                }
                Err(err @ (VectorError::Unavailable(_) | VectorError::Io(_))) => match pauses.next() {
                    Some(pause) => tokio::time::sleep(*pause).await,
                    None => return Err(err),
                },
                Err(err) => return Err(err),
            }
        }
    }
    /// How long entries given back after a failed write wait: [`INFRA_RETRY`], doubling with
    /// every such failure in a row (up to [`INFRA_RETRY_MAX`]) until a write gets through.
    fn infra_pause(&self) -> Duration {
        let failures = self.shared.outages.fetch_add(1, Ordering::Relaxed);
        outage_pause(failures)
    }
    /// After a refused completion (job paused or cancelled, source or run deleted meanwhile):
    /// deletes the points just written for slots that no longer exist or whose run is no longer
    /// live, so a late answer never leaves a point behind that nothing accounts for. Slots that
    /// still exist keep their point (a paused job, or repair, picks them up).
    pub(super) async fn drop_dead_points(&self, items: &[WorkItem]) -> crate::store::Result<()> {
        let (world, run) = (items[0].world_id, items[0].run_id);
        let live = self
            .shared
            .store
            .world_runs(world)
            .await?
            .iter()
            .any(|r| r.id == run && r.status != RunStatus::Retired);
        let ids: Vec<uuid::Uuid> = items.iter().map(|i| i.point_id).collect();
        let alive: HashSet<uuid::Uuid> = if live {
            self.shared
                .store
                .chunks_by_points(world, run, &ids)
                .await?
                .into_iter()
                .map(|c| c.point_id)
                .collect()
        } else {
            HashSet::new()
        };
        let dead: Vec<uuid::Uuid> = ids.into_iter().filter(|id| !alive.contains(id)).collect();
        if !dead.is_empty()
            && let Err(err) = self.shared.vectors.delete_points(&items[0].collection, &dead).await
        {
            tracing::warn!(%world, %run, error = %err, "deleting points of vanished slots failed; repair will retry");
        }
        Ok(())
    }
}

/// The point of a work item's slot with its vector (and BM25 terms for hybrid worlds).
pub(super) fn point_of(item: &WorkItem, dense: Vec<f32>) -> Point {
    Point {
        id: item.point_id,
        dense,
        sparse: item.hybrid.then(|| crate::sparse::document(&item.chunk_text)),
        payload: PointPayload {
            world_id: item.world_id,
            // A staged version's points stay out of every search until its switch.
            run_id: if item.staged {
                crate::domain::staged_run(item.run_id)
            } else {
                item.run_id
            },
            source_id: item.source_id,
            book_number: item.book_number,
            chunk_number: item.chunk_number,
            text_sha256: item.text_sha256.clone(),
            token_count: item.token_count,
        },
    }
}

/// What a worker reports for `item` once `dense` is written to its point.
pub(super) fn embedded(item: &WorkItem, dense: Vec<f32>) -> EmbeddedVector {
    EmbeddedVector {
        chunk_id: item.chunk_id,
        text_sha256: item.text_sha256.clone(),
        dense,
    }
}

/// The pause after `failures` earlier failed writes in a row: 5 s, 10 s, 20 s … 5 min.
fn outage_pause(failures: u32) -> Duration {
    INFRA_RETRY.saturating_mul(1 << failures.min(6)).min(INFRA_RETRY_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outage_pauses_double_up_to_five_minutes() {
        let pauses: Vec<u64> = (0..9).map(|n| outage_pause(n).as_secs()).collect();
        assert_eq!(pauses, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(outage_pause(u32::MAX), INFRA_RETRY_MAX);
    }
}
