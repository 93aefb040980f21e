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
        // A hit stands only if its payload names its chunk's source, so the sources its
        // payloads name are read alongside the chunks, each once, rather than after them.
        let mut sources: Vec<SourceId> = hits
            .iter()
            .filter_map(|h| Some(h.payload.as_ref()?.source_id))
            .collect();
        sources.sort_by_key(|s| s.0);
        sources.dedup();
        let (chunks, details) = tokio::join!(
            self.store.chunks_by_points(world.id, world.active_run, &ids),
            self.store.source_details(world.id, &sources)
        );
        let mut chunks: HashMap<Uuid, ChunkView> = chunks?.into_iter().map(|c| (c.point_id, c)).collect();
        let details: HashMap<SourceId, Arc<SourceDetails>> =
            details?.into_iter().map(|(id, d)| (id, Arc::new(d))).collect();
        let mut orphans = Vec::new();
        let mut stale: Vec<(Uuid, ChunkId)> = Vec::new();
        for hit in hits {
            let Some(chunk) = chunks.remove(&hit.id) else {
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
                // A source deleted between the two reads leaves its hit without details; the
                // next query will not find it at all.
                let source = details.get(&chunk.chunk.source_id).cloned().unwrap_or_default();
                answer.results.push(Hit {
                    chunk,
                    source,
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
