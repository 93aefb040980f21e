//! Reusing vectors of identical text: from the store's points, or from another claim of this
//! process that sent the same text, written onto the items' own points.

use std::collections::HashMap;

use crate::config::ReuseScope;
use crate::domain::{ChunkId, EmbeddedVector, WorkItem};
use crate::vector::Point;

use super::EmbeddingWorkers;
use super::write::{embedded, point_of};

impl EmbeddingWorkers {
    /// Embeds nothing for items whose exact text already has a vector of the same profile (in
    /// the same world, or anywhere with `embedding.reuse = "global"`): that vector is written to
    /// the item's own point and the entry marked embedded, counted as reused. Returns the items
    /// still to embed and how many were marked. A failure here only means no reuse.
    pub(super) async fn reuse(&self, owner: &str, items: Vec<WorkItem>) -> crate::store::Result<(Vec<WorkItem>, u64)> {
        let world = match self.shared.config.reuse {
            _ if items.is_empty() => return Ok((items, 0)),
            ReuseScope::Off => return Ok((items, 0)),
            ReuseScope::World => Some(items[0].world_id),
            ReuseScope::Global => None,
        };
        let job = items[0].job_id;
        let collection = items[0].collection.clone();
        let dimensions = items[0].profile.dimensions as usize;
        let mut hashes: Vec<String> = items.iter().map(|i| i.text_sha256.clone()).collect();
        hashes.sort_unstable();
        hashes.dedup();
        let found = match self.shared.store.find_reusable(&collection, world, &hashes).await {
            Ok(found) if !found.is_empty() => found,
            Ok(_) => return Ok((items, 0)),
            Err(err) => {
                tracing::warn!(%job, error = %err, "looking up reusable vectors failed; embedding instead");
                return Ok((items, 0));
            }
        };
        let points: Vec<uuid::Uuid> = found.iter().map(|(_, p)| *p).collect();
        let vectors = match self.shared.vectors.dense_vectors(&collection, &points).await {
            Ok(vectors) => vectors,
            Err(err) => {
                tracing::warn!(%job, error = %err, "reading reusable vectors failed; embedding instead");
                return Ok((items, 0));
            }
        };
        let by_point: HashMap<uuid::Uuid, Vec<f32>> = vectors
            .into_iter()
            .filter(|(_, v)| v.len() == dimensions && v.iter().all(|x| x.is_finite()))
            .collect();
        let by_hash: HashMap<&str, &Vec<f32>> = found
            .iter()
            .filter_map(|(hash, point)| Some((hash.as_str(), by_point.get(point)?)))
            .collect();
        let mut reusable = Vec::new();
        let mut rest = Vec::new();
        for item in items {
            match by_hash.get(item.text_sha256.as_str()) {
                Some(vector) => reusable.push((item, (*vector).clone())),
                None => rest.push(item),
            }
        }
        self.adopt(owner, reusable, rest).await
    }
    /// Writes vectors made for the same texts onto `pairs`' own points and marks those entries
    /// embedded, counted as reused. Returns the items still to embed (`rest`; none when the job
    /// was paused or cancelled meanwhile, and the rest went back) and how many were marked. A
    /// failed write only means they are embedded instead.
    pub(super) async fn adopt(
        &self,
        owner: &str,
        pairs: Vec<(WorkItem, Vec<f32>)>,
        rest: Vec<WorkItem>,
    ) -> crate::store::Result<(Vec<WorkItem>, u64)> {
        let Some((first, _)) = pairs.first() else {
            return Ok((rest, 0));
        };
        let (job, run, collection) = (first.job_id, first.run_id, first.collection.clone());
        let (done, new_points): (Vec<EmbeddedVector>, Vec<Point>) = pairs
            .iter()
            .map(|(item, dense)| (embedded(item, dense.clone()), point_of(item, dense.clone())))
            .unzip();
        let reusable: Vec<WorkItem> = pairs.into_iter().map(|(item, _)| item).collect();
        if let Err(err) = self.shared.vectors.upsert(&collection, new_points).await {
            tracing::warn!(%job, error = %err, "writing reused vectors failed; embedding instead");
            return Ok((reusable.into_iter().chain(rest).collect(), 0));
        }
        let marked = self
            .shared
            .engine
            .report_embedded(owner, job, run, &done, done.len() as u64)
            .await?;
        if marked < done.len() as u64 {
            // The job was paused or cancelled meanwhile (or slots deleted): as after an
            // embedding, no point is left behind for a slot that is gone, and the rest of the
            // claim goes back without a provider call.
            self.drop_dead_points(&reusable).await?;
            let ids: Vec<ChunkId> = rest.iter().map(|i| i.chunk_id).collect();
            self.shared.engine.give_back(owner, job, &ids, None, false).await?;
            return Ok((Vec::new(), marked));
        }
        tracing::debug!(%job, reused = marked, "vectors reused for identical text");
        if let Some(item) = reusable.first() {
            self.count("quarry_chunks_reused_total", &item.profile, marked);
        }
        Ok((rest, marked))
    }
}
