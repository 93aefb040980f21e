//! Verification: every hit checked against the store; orphan and stale points deleted and the
//! stale slots requeued.

use super::*;

impl RetrievalService {
    /// Keeps the hits the store confirms; deletes orphan and stale points and requeues the
    /// slots of stale ones.
    pub(super) async fn verify(
        &self,
        world: &World,
        hits: Vec<ScoredPoint>,
        answer: &mut Retrieval,
    ) -> ServiceResult<()> {
        let ids: Vec<Uuid> = hits.iter().map(|h| h.id).collect();
        // Each chunk with its source's details, in one read.
        let mut chunks: HashMap<Uuid, (ChunkView, SourceDetails)> = self
            .store
            .hits_by_points(world.id, world.active_run, &ids)
            .await?
            .into_iter()
            .map(|(c, details)| (c.point_id, (c, details)))
            .collect();
        let mut orphans = Vec::new();
        let mut stale: Vec<(Uuid, ChunkId)> = Vec::new();
        for hit in hits {
            let Some((chunk, details)) = chunks.remove(&hit.id) else {
                orphans.push(hit.id);
                continue;
            };
            if chunk.staged_for.is_some() {
                // A staged version's point filed under its source a moment before the switch
                // commits: not served yet, and not damage either.
                continue;
            }
            let current = hit.payload.as_ref().is_some_and(|p| {
                p.text_sha256 == chunk.chunk.sha256
                    && p.run_id == chunk.chunk.run_id
                    && p.source_id == chunk.chunk.source_id
                    && p.chunk_number == chunk.chunk.chunk_number
            });
            if current {
                answer.results.push(Hit {
                    chunk,
                    source: Arc::new(details),
                    score: hit.score,
                    rerank_score: None,
                    duplicates: Vec::new(),
                });
            } else {
                stale.push((hit.id, chunk.chunk.id));
            }
        }
        if !orphans.is_empty() {
            answer.warnings.push(Warning {
                code: WarningCode::ChunkMissing,
                message: format!(
                    "{} hit(s) pointed at chunks that no longer exist; they were skipped",
                    orphans.len()
                ),
            });
            match self.vectors.delete_points(&world.collection, &orphans).await {
                Ok(()) => answer.repairs.extend(orphans.iter().map(|&point_id| Repair {
                    point_id,
                    kind: RepairKind::OrphanPointDeleted,
                })),
                Err(err) => tracing::warn!(world = %world.id, error = %err, "deleting orphan points failed"),
            }
        }
        if !stale.is_empty() {
            answer.warnings.push(Warning {
                code: WarningCode::StalePoint,
                message: format!(
                    "{} hit(s) were made from text that has since changed; they were skipped and queued for embedding again",
                    stale.len()
                ),
            });
            let points: Vec<Uuid> = stale.iter().map(|(p, _)| *p).collect();
            match self.vectors.delete_points(&world.collection, &points).await {
                Ok(()) => {
                    answer.repairs.extend(points.iter().map(|&point_id| Repair {
                        point_id,
                        kind: RepairKind::StalePointDeleted,
                    }));
                    // The answer stands whatever happens here: an entry left `embedded` without
                    // its point is found by the next repair (startup or on demand).
                    let chunk_ids: Vec<ChunkId> = stale.iter().map(|(_, c)| *c).collect();
                    match self
                        .store
                        .requeue_entries(
                            world.id,
                            world.active_run,
                            &chunk_ids,
                            "stale_point",
                            None,
                            crate::domain::now(),
                        )
                        .await
                    {
                        Ok(Some(_)) => self.engine.wake(),
                        Ok(None) => {}
                        Err(err) => {
                            tracing::warn!(world = %world.id, error = %err, "requeueing stale chunks failed; a repair will");
                        }
                    }
                }
                Err(err) => tracing::warn!(world = %world.id, error = %err, "deleting stale points failed"),
            }
        }
        Ok(())
    }
}
