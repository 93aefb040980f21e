//! Sources: adding (validate, convert HTML to text, split into chunks, and store the source,
//! its chunks, one pending manifest entry per chunk and the ingest job in one transaction;
//! then wake the embedding workers), reading back the text and the chunks, and deleting a
//! source with its rows and its points.

mod document;

use std::sync::Arc;

use sha2::Digest as _;

use super::{Conflict, Invalid, Missing, ServiceError, ServiceResult, Unprocessable};
use crate::chunking;
use crate::domain::{
    ChunkPage, Job, JobId, Metadata, NewChunk, NewParent, NewSource, Source, SourceCounts, SourceDetails, SourceFormat,
    SourceId, SourceKey, SourceTitle, SourceUrl, World, WorldId, media_essence, now,
};
use crate::jobs::JobEngine;
use crate::providers::Providers;
use crate::providers::scheduler::KeyScheduler;
pub use crate::store::Idempotent;
use crate::store::{StageVersion, Staging, Store};
use crate::vector::{PointFilter, VectorRepo};
use document::{clean_filename, content_type_of, nul_refused, page_title_of, pdf_refused, text_refused};
use tokio_util::sync::CancellationToken;

/// What an upload carries.
pub enum Document {
    /// Text (plain, Markdown or HTML), decoded.
    Text(String),
    /// A PDF's bytes (uploads only); its text is extracted page by page.
    Pdf(Vec<u8>),
}

/// A source upload as received; its title, URL and metadata already parsed at the edge.
pub struct AddSource {
    /// The upload's slot, kept by the blocking work that reads and splits it.
    pub slot: UploadSlot,
    pub filename: String,
    pub content_type: Option<String>,
    pub document: Document,
    pub title: Option<SourceTitle>,
    pub url: Option<SourceUrl>,
    pub metadata: Metadata,
    /// The caller's key: an existing source with it is replaced.
    pub key: Option<SourceKey>,
    /// The source to replace, by id (`PUT /v1/worlds/{world_id}/sources/{source_id}`).
    pub target: Option<SourceId>,
    pub precondition: Precondition,
}

impl AddSource {
    /// A digest of everything the write asks (target, key, condition, document and details), for
    /// `Idempotency-Key`: a retry of the same request has the same fingerprint whatever its
    /// encoding (JSON or multipart, any boundary). Each field is length-prefixed, so no two
    /// requests run together into the same bytes.
    pub fn fingerprint(&self) -> String {
        let mut digest = sha2::Sha256::new();
        let mut field = |bytes: &[u8]| {
            digest.update((bytes.len() as u64).to_le_bytes());
            digest.update(bytes);
        };
        let (kind, body): (&[u8], &[u8]) = match &self.document {
            Document::Text(text) => (b"text", text.as_bytes()),
            Document::Pdf(bytes) => (b"pdf", bytes),
        };
        let precondition = format!("{:?}/{}", self.precondition.if_match, self.precondition.if_none_match);
        for part in [
            self.target.map(|t| t.0.to_string()).unwrap_or_default().as_bytes(),
            self.key.as_ref().map_or(b"".as_slice(), |k| k.as_str().as_bytes()),
            precondition.as_bytes(),
            self.filename.as_bytes(),
            self.content_type.as_deref().unwrap_or_default().as_bytes(),
            self.title.as_ref().map_or(b"".as_slice(), |t| t.as_str().as_bytes()),
            self.url.as_ref().map_or(b"".as_slice(), |u| u.as_str().as_bytes()),
            self.metadata.to_json().as_bytes(),
            kind,
            body,
        ] {
            field(part);
        }
        hex::encode(digest.finalize())
    }
}

/// How long the answer to an `Idempotency-Key` is kept.
pub const IDEMPOTENCY_KEEP: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
/// A reservation whose request never answered (the process died) is dropped after this.
pub const IDEMPOTENCY_ABANDONED: std::time::Duration = std::time::Duration::from_secs(600);
/// The most keys a world keeps; past it the oldest are forgotten.
pub const IDEMPOTENCY_MAX_PER_WORLD: u32 = 10_000;

/// Admission of uploads: at most `server.max_concurrent_uploads` are read, converted and
/// split at once. A slot is held by the blocking work it pays for, not by the request: when a
/// request is abandoned (timed out, or the client left) its work stops at its next look at the
/// cancellation flag, and only then is the slot free again — so the bound holds for CPU, not
/// only for requests.
#[derive(Debug)]
pub struct Uploads {
    permits: Arc<tokio::sync::Semaphore>,
    max: usize,
    /// Uploads whose preparation stopped because their request was gone.
    abandoned: Arc<std::sync::atomic::AtomicU64>,
}

/// One upload's slot (see [`Uploads`]); cloned into each blocking stage.
#[derive(Clone, Debug)]
pub struct UploadSlot {
    _permit: Arc<tokio::sync::OwnedSemaphorePermit>,
    abandoned: Arc<std::sync::atomic::AtomicU64>,
}

impl UploadSlot {
    /// Counts an upload whose work stopped because its request was gone.
    fn abandoned(&self) {
        self.abandoned.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Uploads {
    pub fn new(max: usize) -> Self {
        Self {
            permits: Arc::new(tokio::sync::Semaphore::new(max)),
            max,
            abandoned: Arc::default(),
        }
    }

    /// A slot, waiting at most `wait` for one; `None` when none came free.
    pub async fn acquire(&self, wait: std::time::Duration) -> Option<UploadSlot> {
        let permit = tokio::time::timeout(wait, self.permits.clone().acquire_owned())
            .await
            .ok()?
            .ok()?;
        Some(UploadSlot {
            _permit: Arc::new(permit),
            abandoned: self.abandoned.clone(),
        })
    }

    /// The most uploads prepared at once.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Uploads whose work is running now, abandoned ones still stopping included.
    pub fn in_progress(&self) -> usize {
        self.max - self.permits.available_permits()
    }

    /// Uploads whose work stopped because their request was gone, since the start.
    pub fn abandoned(&self) -> u64 {
        self.abandoned.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// An upload's text and what names it, ready to be split.
struct Prepared {
    filename: String,
    content_type: String,
    text: String,
    details: SourceDetails,
    /// What the text was uploaded as: its sections, and a PDF's pages.
    format: SourceFormat,
}

/// Why [`SourceService::create`] did not create.
enum Retry {
    /// Another upload created a source with the key meanwhile: replace it instead.
    KeyTaken(Box<Prepared>),
    Failed(ServiceError),
}

impl From<ServiceError> for Retry {
    fn from(err: ServiceError) -> Self {
        Retry::Failed(err)
    }
}

/// What an upload did to the world.
pub enum Written {
    /// A new source, and its ingest job.
    Created { view: SourceView, job: Job },
    /// A new version of a source, staged (the source keeps serving its current version until
    /// the job has embedded every chunk of it), and its replace job.
    Replaced { view: SourceView, job: Job },
    /// The upload is the version the source serves: nothing to do.
    Unchanged { view: SourceView },
}

/// A conditional write's preconditions (`If-Match`, `If-None-Match`), on the source's version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Precondition {
    /// `If-Match`: `Some(None)` for `*` (any existing version), `Some(Some(v))` for version `v`.
    pub if_match: Option<Option<u32>>,
    /// `If-None-Match: *`: only when no such source exists.
    pub if_none_match: bool,
}

impl Precondition {
    /// The version a write must find, if one was named.
    pub fn version(&self) -> Option<u32> {
        self.if_match.flatten()
    }

    /// Checks the preconditions against `existing`.
    pub fn check(&self, existing: Option<&Source>) -> ServiceResult<()> {
        let current = existing.map(|s| s.version);
        let failed = |message: String| ServiceError::PreconditionFailed { current, message };
        if self.if_none_match && existing.is_some() {
            return Err(failed("the source exists (If-None-Match: *)".into()));
        }
        match (self.if_match, current) {
            (Some(_), None) => Err(failed("no such source (If-Match)".into())),
            (Some(Some(wanted)), Some(current)) if wanted != current => Err(failed(format!(
                "the source is at version {current}, not {wanted} (If-Match)"
            ))),
            _ => Ok(()),
        }
    }
}

/// A source with its chunk state counts.
pub struct SourceView {
    pub source: Source,
    pub counts: SourceCounts,
}

/// A validated page of the chunk listing (parsed from the query at the edge, `api::sources`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Paging {
    pub offset: u64,
    pub limit: u32,
}

impl Paging {
    pub const DEFAULT_LIMIT: u32 = 100;
    pub const MAX_LIMIT: u32 = 1000;
}

pub struct SourceService {
    store: Arc<dyn Store>,
    vectors: Arc<dyn VectorRepo>,
    engine: JobEngine,
    scheduler: KeyScheduler,
    providers: Providers,
    /// The longest text an upload may become (`server.max_body_bytes`): HTML conversion stops past it.
    max_text_bytes: usize,
    /// What an HTML page keeps (`sources.html`).
    html: chunking::HtmlContent,
}

impl SourceService {
    pub fn new(deps: &crate::deps::Deps, max_text_bytes: usize, html: chunking::HtmlContent) -> Self {
        Self {
            store: deps.store.clone(),
            vectors: deps.vectors.clone(),
            engine: deps.engine.clone(),
            scheduler: deps.scheduler.clone(),
            providers: deps.providers.clone(),
            max_text_bytes,
            html,
        }
    }

    pub async fn add(&self, world_id: WorldId, req: AddSource) -> ServiceResult<Written> {
        let world = self.require_world(world_id).await?;
        let filename = clean_filename(&req.filename)?;
        let content_type = content_type_of(&req.document, req.content_type.as_deref(), &filename)?;
        let format = SourceFormat::of(&content_type).unwrap_or(SourceFormat::Plain);
        // Converting a large HTML page or PDF takes seconds of CPU: off the async workers, and
        // stopped when this request is dropped (the client went away or the request timed out).
        let abandoned = CancellationToken::new();
        let _abandon_on_drop = abandoned.clone().drop_guard();
        let chunking::Prepared {
            text,
            title: page_title,
        } = self.prepare(req.document, &content_type, &abandoned, &req.slot).await?;
        // Checked again on the text to store (the conversion of a page must not bring one in).
        if text.contains('\0') {
            return Err(nul_refused());
        }
        let content_type = media_essence(&content_type);
        let details = SourceDetails {
            title: req
                .title
                .clone()
                .or(page_title_of(page_title))
                .map(SourceTitle::into_inner),
            url: req.url.clone().map(SourceUrl::into_inner),
            metadata: req.metadata.clone(),
        };
        let existing = self.existing(world_id, req.target, req.key.as_ref()).await?;
        req.precondition.check(existing.as_ref())?;
        let upload = Prepared {
            filename,
            content_type,
            text,
            details,
            format,
        };
        match existing {
            Some(source) => {
                self.replace(world, source, upload, &req.precondition, &abandoned, &req.slot)
                    .await
            }
            None => {
                self.create_or_take_over(world, upload, req.key, &req.precondition, &abandoned, &req.slot)
                    .await
            }
        }
    }

    /// Turns an upload's document into the text to store (HTML converted, a PDF's text layer
    /// read) on the blocking pool, stopping early once `abandoned` fires; the title a page or
    /// PDF gives itself comes along.
    async fn prepare(
        &self,
        document: Document,
        content_type: &str,
        abandoned: &CancellationToken,
        slot: &UploadSlot,
    ) -> ServiceResult<chunking::Prepared> {
        let (limit, ct, html) = (self.max_text_bytes, content_type.to_owned(), self.html);
        let stop = abandoned.clone();
        let slot = slot.clone();
        tokio::task::spawn_blocking(move || {
            let prepared = match document {
                Document::Text(raw) => {
                    chunking::prepare_source(&ct, raw, limit, html, &|| stop.is_cancelled()).map_err(text_refused)
                }
                Document::Pdf(bytes) => chunking::pdf::to_text(&bytes, limit, &|| stop.is_cancelled())
                    .map(|pdf| chunking::Prepared {
                        text: pdf.text,
                        title: pdf.title,
                    })
                    .map_err(pdf_refused),
            };
            if stop.is_cancelled() {
                slot.abandoned();
            }
            prepared
        })
        .await
        .map_err(|e| ServiceError::internal(format!("preparing the text failed: {e}")))?
    }

    /// The source an upload writes to: the one named by id (a `PUT`), or the one that carries
    /// its key; none for a new source. A body's key must be the key of the source named by id.
    async fn existing(
        &self,
        world_id: WorldId,
        target: Option<SourceId>,
        key: Option<&SourceKey>,
    ) -> ServiceResult<Option<Source>> {
        match (target, key) {
            (Some(id), key) => {
                let source = self
                    .store
                    .get_source(world_id, id)
                    .await?
                    .ok_or(ServiceError::NotFound(Missing::Source))?;
                if key.is_some_and(|k| source.key.as_deref() != Some(k.as_str())) {
                    return Err(ServiceError::Unprocessable {
                        kind: Unprocessable::KeyMismatch,
                        message: "the body's `key` is not the source's key (a key is set when a source is created; \
                                  leave it out to replace by id)"
                            .into(),
                    });
                }
                Ok(Some(source))
            }
            (None, Some(key)) => Ok(self.store.source_by_key(world_id, key).await?),
            (None, None) => Ok(None),
        }
    }

    /// Stores `upload` as a new source of `world`. Two uploads of one new key at once: the
    /// second replaces what the first made.
    async fn create_or_take_over(
        &self,
        world: World,
        upload: Prepared,
        key: Option<SourceKey>,
        precondition: &Precondition,
        abandoned: &CancellationToken,
        slot: &UploadSlot,
    ) -> ServiceResult<Written> {
        let world_id = world.id;
        match self.create(world, upload, key.clone(), abandoned, slot).await {
            Err(Retry::KeyTaken(upload)) => {
                let key = key
                    .as_ref()
                    .ok_or_else(|| ServiceError::internal("a key race without a key"))?;
                let source = self
                    .store
                    .source_by_key(world_id, key)
                    .await?
                    .ok_or_else(|| ServiceError::internal("a taken key has no source"))?;
                precondition.check(Some(&source))?;
                let world = self.require_world(world_id).await?;
                self.replace(world, source, *upload, precondition, abandoned, slot)
                    .await
            }
            Err(Retry::Failed(err)) => Err(err),
            Ok(written) => Ok(written),
        }
    }

    /// Stores `upload` as a new source of `world` (with `key`, if given).
    async fn create(
        &self,
        mut world: World,
        upload: Prepared,
        key: Option<SourceKey>,
        abandoned: &CancellationToken,
        slot: &UploadSlot,
    ) -> Result<Written, Retry> {
        let Prepared {
            filename,
            content_type,
            mut text,
            mut details,
            format,
        } = upload;
        let world_id = world.id;
        // Cut for the run the world serves. Should a re-ingest switch the world to another
        // profile while this one is being split, the write is refused and the text is cut
        // again for the new run (a switch is rare; two in a row during one upload rarer still).
        // The text is moved, not copied, between the splitter and the write (an upload may be
        // 16 MiB), and taken back for another cut.
        let mut attempt = 1;
        let (source, job, parents) = loop {
            let (chunks, parents);
            let title = crate::domain::context_title(&details, &filename).to_owned();
            (text, chunks, parents) = self.split(&world, text, format, &title, abandoned, slot).await?;
            let new = NewSource {
                id: SourceId::new(),
                world_id,
                run: world.active_run,
                filename: filename.clone(),
                content_type: content_type.clone(),
                text,
                details,
                now: now(),
                key: key.clone(),
            };
            match self.store.add_source(&new, chunks, JobId::new()).await {
                Err(crate::store::Error::RunChanged) if attempt < 3 => {
                    attempt += 1;
                    text = new.text;
                    details = new.details;
                    world = self.require_world(world_id).await?;
                }
                Err(crate::store::Error::Duplicate(_)) if key.is_some() => {
                    return Err(Retry::KeyTaken(Box::new(Prepared {
                        filename,
                        content_type,
                        text: new.text,
                        details: new.details,
                        format,
                    })));
                }
                other => {
                    let (source, job) = other.map_err(ServiceError::from)?;
                    break (source, job, parents);
                }
            }
        };
        self.engine.wake();
        self.keep_parents(world_id, world.active_run, source.id, &parents).await;
        let counts = self
            .store
            .source_counts(world_id, source.id)
            .await
            .map_err(ServiceError::from)?;
        Ok(Written::Created {
            view: SourceView { source, counts },
            job,
        })
    }

    /// Makes `upload` the next version of `source`: nothing when it is the version served now
    /// (a staged one is withdrawn: the caller went back to what is served), otherwise a staged
    /// version and its `replace` job (see [`crate::store::SourceStore::stage_version`]).
    async fn replace(
        &self,
        mut world: World,
        source: Source,
        upload: Prepared,
        precondition: &Precondition,
        abandoned: &CancellationToken,
        slot: &UploadSlot,
    ) -> ServiceResult<Written> {
        let world_id = world.id;
        let sha256 = hex::encode(sha2::Sha256::digest(upload.text.as_bytes()));
        if sha256 == source.sha256
            && upload.filename == source.filename
            && upload.content_type == source.content_type
            && upload.details == source.details
        {
            if let Some(pending) = &source.pending {
                self.engine.cancel(pending.job_id).await?;
            }
            let source = self
                .store
                .get_source(world_id, source.id)
                .await?
                .ok_or(ServiceError::NotFound(Missing::Source))?;
            let counts = self.store.source_counts(world_id, source.id).await?;
            return Ok(Written::Unchanged {
                view: SourceView { source, counts },
            });
        }
        let Prepared {
            filename,
            content_type,
            mut text,
            details,
            format,
        } = upload;
        let mut attempt = 1;
        let (staged, job, parents, superseded) = loop {
            let (chunks, parents);
            let title = crate::domain::context_title(&details, &filename).to_owned();
            (text, chunks, parents) = self.split(&world, text, format, &title, abandoned, slot).await?;
            let stage = StageVersion {
                source: source.id,
                expect: precondition.version(),
                new: NewSource {
                    id: SourceId::new(),
                    world_id,
                    run: world.active_run,
                    filename: filename.clone(),
                    content_type: content_type.clone(),
                    text,
                    details: details.clone(),
                    now: now(),
                    key: None,
                },
            };
            match self.store.stage_version(&stage, chunks, JobId::new()).await {
                Err(crate::store::Error::RunChanged) if attempt < 3 => {
                    attempt += 1;
                    text = stage.new.text;
                    world = self.require_world(world_id).await?;
                }
                Err(err) => return Err(err.into()),
                Ok(Staging::Missing) => return Err(ServiceError::NotFound(Missing::Source)),
                Ok(Staging::VersionMismatch { current }) => {
                    return Err(ServiceError::PreconditionFailed {
                        current: Some(current),
                        message: format!("the source is at version {current}, not the one If-Match names"),
                    });
                }
                Ok(Staging::Reingesting) => {
                    return Err(ServiceError::conflict(
                        Conflict::JobState,
                        "a re-ingest of the world is under way; replace the source once it has switched",
                    ));
                }
                Ok(Staging::Staged {
                    source,
                    job,
                    superseded,
                }) => break (*source, *job, parents, superseded),
            }
        };
        self.engine.wake();
        if let Some(older) = superseded {
            // Never served: its points go now (a worker's write still in flight is refused by
            // the store, or found by repair).
            if let Err(err) = self
                .vectors
                .delete_by_filter(&world.collection, PointFilter::world(world_id).source(older))
                .await
            {
                tracing::warn!(world = %world_id, error = %err, "deleting a superseded version's points failed; repair will");
            }
        }
        if let Some(pending) = &staged.pending {
            self.keep_parents(world_id, world.active_run, pending.staged_id, &parents)
                .await;
        }
        let counts = self.store.source_counts(world_id, staged.id).await?;
        Ok(Written::Replaced {
            view: SourceView { source: staged, counts },
            job,
        })
    }

    /// Stores a source's parents beside its chunks; should this write fail, retrieval builds
    /// them from the stored chunks when it first needs them.
    async fn keep_parents(&self, world: WorldId, run: crate::domain::RunId, source: SourceId, parents: &[NewParent]) {
        if let Err(err) = self.store.add_parents(world, run, source, parents).await {
            tracing::warn!(
                source = %source, error = %crate::telemetry::error_chain(&err),
                "storing a source's parents failed; they will be built when retrieval needs them"
            );
        }
    }

    /// Splits `text` with `world`'s chunking profile and its provider's token counter, after
    /// checking that the provider has a usable key; a PDF's chunks are told their page, and the
    /// parents follow the sections `format` marks. Returns the text with its chunks and their parents.
    async fn split(
        &self,
        world: &World,
        text: String,
        format: SourceFormat,
        title: &str,
        abandoned: &CancellationToken,
        slot: &UploadSlot,
    ) -> ServiceResult<(String, Vec<NewChunk>, Vec<NewParent>)> {
        // Chunks nobody could embed would wait forever: refused before anything is written.
        super::require_key(&self.scheduler, world.embedding.provider).await?;
        // Counted in the model's own tokens where quarry has its tokenizer.
        let counter = self
            .providers
            .chunk_counter(world.embedding.provider)
            .await
            .map_err(|err| ServiceError::Provider {
                message: format!("the world's tokenizer is not available: {err}"),
            })?;
        // Splitting a large upload takes seconds of CPU: keep it off the async workers.
        let profile = world.chunking;
        let stop = abandoned.clone();
        let slot = slot.clone();
        let title = title.to_owned();
        let (text, chunks, parents) = tokio::task::spawn_blocking(move || {
            let Some(mut chunks) =
                chunking::split_until(&text, format, profile, counter.as_ref(), &|| stop.is_cancelled())
            else {
                slot.abandoned();
                return None;
            };
            if format == SourceFormat::Pdf {
                chunking::pdf::number_pages(&text, &mut chunks);
            }
            if profile.context_prefix {
                chunking::add_context_prefixes(&text, format, &title, &mut chunks, counter.as_ref());
            }
            let parents = chunking::parents_of(&text, format, &chunks, profile.parent_max_tokens);
            Some((text, chunks, parents))
        })
        .await
        .map_err(|e| ServiceError::internal(format!("chunking failed: {e}")))?
        .ok_or_else(|| ServiceError::internal("the upload was abandoned"))?;
        if chunks.is_empty() {
            return Err(ServiceError::invalid(
                Invalid::Request,
                "text",
                "the source has no text",
            ));
        }
        Ok((text, chunks, parents))
    }

    pub async fn get(&self, world_id: WorldId, id: SourceId) -> ServiceResult<SourceView> {
        self.require_world(world_id).await?;
        let source = self
            .store
            .get_source(world_id, id)
            .await?
            .ok_or(ServiceError::NotFound(Missing::Source))?;
        let counts = self.store.source_counts(world_id, id).await?;
        Ok(SourceView { source, counts })
    }

    /// The source of the world that carries `key`.
    pub async fn get_by_key(&self, world_id: WorldId, key: &SourceKey) -> ServiceResult<SourceView> {
        self.require_world(world_id).await?;
        let source = self
            .store
            .source_by_key(world_id, key)
            .await?
            .ok_or(ServiceError::NotFound(Missing::Source))?;
        let counts = self.store.source_counts(world_id, source.id).await?;
        Ok(SourceView { source, counts })
    }

    /// Reserves the `Idempotency-Key` `key` in the world for a write with `fingerprint`, or
    /// says what holds it (see [`IDEMPOTENCY_KEEP`] and the bounds beside it).
    pub async fn reserve_idempotency(
        &self,
        world_id: WorldId,
        key: &str,
        fingerprint: &str,
    ) -> ServiceResult<Idempotent> {
        self.require_world(world_id).await?;
        Ok(self
            .store
            .reserve_idempotency(
                world_id,
                key,
                fingerprint,
                IDEMPOTENCY_KEEP.as_secs_f64(),
                IDEMPOTENCY_ABANDONED.as_secs_f64(),
                IDEMPOTENCY_MAX_PER_WORLD,
            )
            .await?)
    }

    /// Keeps the answer of the write that reserved `key`.
    pub async fn record_idempotency(
        &self,
        world_id: WorldId,
        key: &str,
        status: u16,
        response: &str,
    ) -> ServiceResult<()> {
        Ok(self.store.record_idempotency(world_id, key, status, response).await?)
    }

    /// Lets go of `key` after its write failed, so that a retry runs again.
    pub async fn release_idempotency(&self, world_id: WorldId, key: &str) -> ServiceResult<()> {
        Ok(self.store.release_idempotency(world_id, key).await?)
    }

    /// The stored text (after HTML conversion): what chunk offsets refer to.
    pub async fn text(&self, world_id: WorldId, id: SourceId) -> ServiceResult<String> {
        self.require_world(world_id).await?;
        self.store
            .source_text(world_id, id)
            .await?
            .ok_or(ServiceError::NotFound(Missing::Source))
    }

    /// One page of the source's chunks in the world's active run, by chunk number.
    pub async fn chunks(&self, world_id: WorldId, id: SourceId, paging: Paging) -> ServiceResult<ChunkPage> {
        self.require_world(world_id).await?;
        if self.store.get_source(world_id, id).await?.is_none() {
            return Err(ServiceError::NotFound(Missing::Source));
        }
        Ok(self
            .store
            .list_chunks(world_id, id, paging.offset, paging.limit)
            .await?)
    }

    /// Deletes a source: its points first, in every collection the world's runs use (the
    /// vector store down: the error, and nothing deleted), then its rows in one transaction,
    /// then its points once more, catching a worker's upsert that was in flight meanwhile.
    ///
    /// A failure of that last pass is logged, not returned: the source is gone by then, and a
    /// point without a chunk is never served (retrieval checks every hit against the store,
    /// skips it and deletes it). The same holds for a worker whose upsert lands even later.
    ///
    /// With `precondition`, only a source at the version it names (`412` otherwise, checked
    /// again in the deleting transaction); a staged version goes with its source.
    pub async fn delete(&self, world_id: WorldId, id: SourceId, precondition: &Precondition) -> ServiceResult<()> {
        self.require_world(world_id).await?;
        let source = self.store.get_source(world_id, id).await?;
        precondition.check(source.as_ref())?;
        if source.is_none() {
            return Err(ServiceError::NotFound(Missing::Source));
        }
        let filter = PointFilter::world(world_id).source(id);
        let collections = self.store.world_collections(world_id).await?;
        for collection in &collections {
            self.vectors.delete_by_filter(collection, filter).await?;
        }
        let deletion = self
            .store
            .delete_source(world_id, id, precondition.version(), now())
            .await?
            .ok_or(ServiceError::NotFound(Missing::Source))?;
        let staged = deletion
            .staged
            .map(|staged| PointFilter::world(world_id).source(staged));
        for collection in &collections {
            for filter in std::iter::once(filter).chain(staged) {
                if let Err(err) = self.vectors.delete_by_filter(collection, filter).await {
                    tracing::warn!(world = %world_id, source = %id, %collection, error = %err,
                        "deleting the points of a deleted source failed; retrieval skips and removes any left");
                }
            }
        }
        tracing::info!(world = %world_id, source = %id, chunks = deletion.chunks,
            jobs_finished = deletion.finished_jobs.len(), "source deleted");
        // A re-ingest whose remaining work went with the source ends through its own completion
        // step (the switch), which the deletion leaves to it.
        self.engine.after_source_deleted(world_id).await?;
        Ok(())
    }

    /// The world, read now (`world_not_found` when it is gone).
    async fn require_world(&self, world_id: WorldId) -> ServiceResult<World> {
        self.store
            .get_world(world_id)
            .await?
            .ok_or(ServiceError::NotFound(Missing::World))
    }

    /// Sources of the world by book number, in `window`.
    pub async fn list(&self, world_id: WorldId, window: crate::domain::Window) -> ServiceResult<Vec<SourceView>> {
        self.require_world(world_id).await?;
        let mut views = Vec::new();
        for source in self.store.list_sources(world_id, window).await? {
            let counts = self.store.source_counts(world_id, source.id).await?;
            views.push(SourceView { source, counts });
        }
        Ok(views)
    }
}
