//! Adding sources: validate, convert (HTML to text), split into chunks, and store the source,
//! its chunks, one pending manifest entry per chunk and the ingest job in one transaction;
//! then wake the embedding workers.

use std::sync::Arc;

use super::{Invalid, Missing, ServiceError, ServiceResult};
use crate::chunking::{self, ChunkError};
use crate::domain::{Job, JobId, NewSource, Source, SourceCounts, SourceId, WorldId};
use crate::store::Store;
use crate::workers::embedding::EmbeddingWorkers;

/// A source upload as received.
pub struct AddSource {
    pub filename: String,
    pub content_type: Option<String>,
    pub text: String,
}

/// A source with its chunk state counts.
pub struct SourceView {
    pub source: Source,
    pub counts: SourceCounts,
}

pub struct SourceService {
    store: Arc<dyn Store>,
    workers: EmbeddingWorkers,
}

impl SourceService {
    pub fn new(store: Arc<dyn Store>, workers: EmbeddingWorkers) -> Self {
        Self { store, workers }
    }

    pub async fn add(&self, world_id: WorldId, req: AddSource) -> ServiceResult<(SourceView, Job)> {
        let world = self
            .store
            .get_world(world_id)
            .await?
            .ok_or(ServiceError::NotFound(Missing::World))?;
        let filename = clean_filename(&req.filename)?;
        let content_type = match req.content_type.as_deref().map(str::trim) {
            Some(ct) if !ct.is_empty() => ct.to_ascii_lowercase(),
            _ => guess_content_type(&filename).to_owned(),
        };
        let text = chunking::prepare_text(&content_type, &req.text).map_err(|err| match err {
            ChunkError::UnsupportedContentType(ct) => ServiceError::invalid(
                Invalid::Request,
                "content_type",
                format!("unsupported content type `{ct}` (use text/plain, text/markdown or text/html)"),
            ),
            ChunkError::Empty => ServiceError::invalid(Invalid::Request, "text", "the source has no text"),
        })?;
        let chunks = chunking::split(&text, world.chunking);
        if chunks.is_empty() {
            return Err(ServiceError::invalid(
                Invalid::Request,
                "text",
                "the source has no text",
            ));
        }
        let (source, job) = self
            .store
            .add_source(
                NewSource {
                    id: SourceId::new(),
                    world_id,
                    filename,
                    content_type: content_type.split(';').next().unwrap_or_default().trim().to_owned(),
                    text,
                    now: super::worlds::now(),
                },
                chunks,
                JobId::new(),
            )
            .await?;
        self.workers.wake();
        let counts = self.store.source_counts(world_id, source.id).await?;
        Ok((SourceView { source, counts }, job))
    }

    pub async fn get(&self, world_id: WorldId, id: SourceId) -> ServiceResult<SourceView> {
        if self.store.get_world(world_id).await?.is_none() {
            return Err(ServiceError::NotFound(Missing::World));
        }
        let source = self
            .store
            .get_source(world_id, id)
            .await?
            .ok_or(ServiceError::NotFound(Missing::Source))?;
        let counts = self.store.source_counts(world_id, id).await?;
        Ok(SourceView { source, counts })
    }

    pub async fn list(&self, world_id: WorldId) -> ServiceResult<Vec<SourceView>> {
        if self.store.get_world(world_id).await?.is_none() {
            return Err(ServiceError::NotFound(Missing::World));
        }
        let mut views = Vec::new();
        for source in self.store.list_sources(world_id).await? {
            let counts = self.store.source_counts(world_id, source.id).await?;
            views.push(SourceView { source, counts });
        }
        Ok(views)
    }
}

/// The last path component, trimmed; 1..=255 chars.
fn clean_filename(raw: &str) -> ServiceResult<String> {
    let name = raw.rsplit(['/', '\\']).next().unwrap_or(raw).trim();
    if name.is_empty() {
        return Err(ServiceError::invalid(
            Invalid::Request,
            "filename",
            "filename must not be blank",
        ));
    }
    if name.chars().count() > 255 || name.chars().any(char::is_control) {
        return Err(ServiceError::invalid(
            Invalid::Request,
            "filename",
            "filename must be at most 255 characters without control characters",
        ));
    }
    Ok(name.to_owned())
}

fn guess_content_type(filename: &str) -> &'static str {
    let lower = filename.to_ascii_lowercase();
    if lower.ends_with(".md") || lower.ends_with(".markdown") {
        "text/markdown"
    } else if lower.ends_with(".html") || lower.ends_with(".htm") {
        "text/html"
    } else {
        "text/plain"
    }
}
