//! The built-in local embedding provider: sentence-transformers all-MiniLM-L6-v2 (384
//! dimensions, 256 tokens per text) run in-process on the CPU with ONNX Runtime (loaded from
//! the model folder, where `scripts/fetch-model` puts the pinned library beside the graph), so
//! quarry works with no API key and no network. Same trait and scheduler path as the remote providers; a
//! concurrency limit takes the place of keys.
//!
//! Two models, one per [`LocalModel`]: `all-MiniLM-L6-v2` (the fp32 graph, `model.onnx`) and
//! `all-MiniLM-L6-v2-int8` (the same graph with int8 weights, `model-int8.onnx`, which
//! `scripts/fetch-model` makes with ONNX Runtime's quantization tool). Their vectors differ, so
//! they are different models to the registry: a world is on one or the other, never both. They
//! share the tokenizer, the permits and the folder; each graph loads on its first use.
//!
//! The recipe matches sentence-transformers: the model's own WordPiece tokenizer with `[CLS]`
//! and `[SEP]`, the BERT encoder, mean pooling over the attention mask, L2 normalisation.
//! Token counts are exact, and a text over 256 tokens is refused with
//! [`ProviderError::InputTooLarge`] before the model runs: the tokenizer's own truncation is
//! switched off, so nothing is ever silently cut.
//!
//! Choices:
//! - **Laziness.** [`LocalProvider::new`] never fails and does no I/O. The model folder
//!   (`config.json`, `tokenizer.json`, the model's graph and ONNX Runtime's library, put there
//!   by `scripts/fetch-model`) is loaded on a model's first call, on the blocking pool. Only success is cached: while files
//!   are missing or broken every call returns [`ProviderError::Unavailable`] naming the folder
//!   and the script, and fetching the model later works without a restart.
//! - **Threads.** Tokenizing and inference are CPU-bound, so both run under
//!   [`tokio::task::spawn_blocking`], never on the async runtime. A semaphore with
//!   `max_concurrency` permits bounds how many requests run the model at once; the permit
//!   moves into the blocking task, so a caller that gives up cannot free it while the model
//!   is still running. One forward pass runs at a time, spread over every core by ONNX
//!   Runtime's own threads.
//! - **Queries first.** A query ([`EmbedMode::Query`]) does not queue behind ingestion batches:
//!   queries have a permit of their own, and a query's forward pass goes before every
//!   ingestion pass still waiting, so it waits at most for the one pass in flight (at most
//!   eight texts).
//! - **Tokenized once.** The workers count a batch's tokens before they send it, then send the
//!   same texts: the token ids of the last few counted batches are kept (by their exact texts),
//!   and `embed` reuses them instead of tokenizing again.
//! - **Batching.** A request's texts (at most [`MAX_BATCH_SIZE`]) are sorted by token length
//!   and cut into forward passes of at most eight, each padded only to its own longest text;
//!   results come back in input order. Padding is masked out, so a text's vector does not depend on what
//!   it was batched with (up to float rounding). The int8 model runs one text per pass
//!   ([`INT8_PASS_SIZE`]): its quantization would otherwise depend on the batch.
//! - **Mode.** The model is symmetric: documents and queries are embedded the same way, and
//!   [`EmbedRequest::mode`] is ignored. There are no keys either; `key` is ignored.

mod model;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use tokio::sync::{OnceCell, Semaphore};

use self::model::Model;
pub use self::model::WordPieceCounter;
use super::{ApiKey, EmbedMode, EmbedRequest, EmbeddingProvider, ModelSpec, ProviderError, ProviderLimits};
use crate::chunking::TokenCounter;
use crate::domain::ProviderKind;

/// The fp32 model, as named in the model registry.
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// The same model with int8 weights, as named in the model registry.
pub const INT8_MODEL_NAME: &str = "all-MiniLM-L6-v2-int8";
/// The output size of both; no other is offered.
pub const DIMENSIONS: u32 = 384;
/// Its per-text limit in its own tokens, `[CLS]` and `[SEP]` included (the length it was
/// trained at; sentence-transformers truncates there).
pub const MAX_INPUT_TOKENS: u32 = 256;
/// Most tokens of a chunk, counted without `[CLS]` and `[SEP]` as the splitter counts them
/// ([`WordPieceCounter`]): with the two, it is exactly [`MAX_INPUT_TOKENS`].
pub const MAX_CHUNK_TOKENS: u32 = MAX_INPUT_TOKENS - 2;
/// Most texts in one forward pass (and in one request, as reported by `limits`).
pub const MAX_BATCH_SIZE: usize = 32;
/// Most texts in one forward pass of the fp32 model: as fast per text as larger passes on ONNX
/// Runtime, and short enough that a query waits little for the pass in flight.
pub const PASS_SIZE: usize = 8;
/// Texts in one forward pass of the int8 model: one. Its activations are quantized with one
/// scale per tensor, computed over the whole pass, padding included, so a text batched with
/// others came out different (cosine 0.990 to the same text alone, as far from it as fp32
/// is); alone, its vector is the same whatever it is sent with.
pub const INT8_PASS_SIZE: usize = 1;
/// Counted batches whose token ids are kept for the `embed` that follows.
const KEPT_COUNTS: usize = 8;

/// The models the local provider serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LocalModel {
    /// all-MiniLM-L6-v2 as written from its weights (`model.onnx`).
    Fp32,
    /// The same graph with its dense layers' weights in int8 (`model-int8.onnx`): faster,
    /// and its vectors a little off fp32's (BENCHMARKS.md).
    Int8,
}

impl LocalModel {
    pub const ALL: [LocalModel; 2] = [LocalModel::Fp32, LocalModel::Int8];

    /// Its id in the model registry and in world profiles.
    pub fn name(self) -> &'static str {
        match self {
            LocalModel::Fp32 => MODEL_NAME,
            LocalModel::Int8 => INT8_MODEL_NAME,
        }
    }

    /// The model of a registry id, if the local provider serves it.
    pub fn from_name(name: &str) -> Option<LocalModel> {
        Self::ALL.into_iter().find(|model| model.name() == name)
    }

    /// Most texts in one of its forward passes.
    pub fn pass_size(self) -> usize {
        match self {
            LocalModel::Fp32 => PASS_SIZE,
            LocalModel::Int8 => INT8_PASS_SIZE,
        }
    }

    fn index(self) -> usize {
        match self {
            LocalModel::Fp32 => 0,
            LocalModel::Int8 => 1,
        }
    }
}

/// Token ids of recently counted batches, by their exact texts.
type Counted = std::sync::Mutex<std::collections::VecDeque<(Vec<String>, Vec<Vec<u32>>)>>;

/// all-MiniLM-L6-v2 (fp32 and int8) on the CPU. Cheap to construct; see the module docs for
/// loading, threads and batching.
pub struct LocalProvider {
    model_dir: PathBuf,
    /// Each [`LocalModel`]'s, by [`LocalModel::index`], set once it has loaded; failed loads
    /// are not cached (see module docs).
    models: [OnceCell<Arc<Model>>; 2],
    /// The tokenizer alone, for chunking (loaded apart from the weights, and likewise).
    counter: OnceCell<Arc<WordPieceCounter>>,
    /// Bounds concurrent forward passes; permits are held by the blocking task.
    permits: Arc<Semaphore>,
    /// Queries' own permit, so that a query never waits behind ingestion batches.
    query_permits: Arc<Semaphore>,
    /// Token ids of the last batches `count_tokens` saw (see module docs).
    counted: Counted,
    /// Forward passes run so far (observability, and tests that check the model was not run).
    forward_passes: Arc<AtomicU64>,
    reused_counts: AtomicU64,
}

impl std::fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProvider")
            .field("model_dir", &self.model_dir)
            .field("fp32_loaded", &self.models[LocalModel::Fp32.index()].initialized())
            .field("int8_loaded", &self.models[LocalModel::Int8.index()].initialized())
            .field("available_permits", &self.permits.available_permits())
            .field("forward_passes", &self.forward_passes())
            .finish()
    }
}

impl LocalProvider {
    /// A provider for the model folder `model_dir`, running at most `max_concurrency` forward
    /// passes at once (0 is taken as 1). Never fails and touches no file: the model loads on
    /// first use, and a missing folder shows up then as [`ProviderError::Unavailable`].
    pub fn new(model_dir: &Path, max_concurrency: usize) -> LocalProvider {
        LocalProvider {
            model_dir: model_dir.to_path_buf(),
            models: [OnceCell::new(), OnceCell::new()],
            counter: OnceCell::new(),
            permits: Arc::new(Semaphore::new(max_concurrency.max(1))),
            query_permits: Arc::new(Semaphore::new(1)),
            counted: Counted::default(),
            forward_passes: Arc::new(AtomicU64::new(0)),
            reused_counts: AtomicU64::new(0),
        }
    }

    /// The folder the model is (to be) loaded from.
    pub fn model_dir(&self) -> &Path {
        &self.model_dir
    }

    /// Loads `model` now if it is not loaded yet, e.g. to warm up or to report a missing
    /// model at startup. The same error every embedding call would return.
    pub async fn ready(&self, model: LocalModel) -> Result<(), ProviderError> {
        self.model(model).await.map(|_| ())
    }

    /// How many forward passes (batches through BERT) this provider has run.
    pub fn forward_passes(&self) -> u64 {
        self.forward_passes.load(Ordering::Relaxed)
    }

    /// The model's tokenizer as the splitter's counter, loaded on first use (only success is
    /// cached, as for the model).
    pub async fn word_pieces(&self) -> Result<Arc<WordPieceCounter>, ProviderError> {
        self.counter
            .get_or_try_init(|| {
                let dir = self.model_dir.clone();
                async move {
                    blocking(move || model::load_tokenizer(&dir))
                        .await?
                        .map(|tokenizer| Arc::new(WordPieceCounter::new(tokenizer)))
                }
            })
            .await
            .cloned()
    }

    async fn model(&self, model: LocalModel) -> Result<Arc<Model>, ProviderError> {
        self.models[model.index()]
            .get_or_try_init(|| {
                let dir = self.model_dir.clone();
                async move { blocking(move || Model::load(&dir, model)).await?.map(Arc::new) }
            })
            .await
            .cloned()
    }

    async fn token_ids(&self, model: Arc<Model>, texts: &[String]) -> Result<Vec<Vec<u32>>, ProviderError> {
        let texts = texts.to_vec();
        blocking(move || model.token_ids(&texts)).await?
    }

    /// The token ids a recent count kept for exactly `texts` (taken out), if any.
    fn take_counted(&self, texts: &[String]) -> Option<Vec<Vec<u32>>> {
        let mut counted = self.counted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = counted.iter().position(|(counted, _)| counted.as_slice() == texts)?;
        self.reused_counts.fetch_add(1, Ordering::Relaxed);
        counted.remove(at).map(|(_, ids)| ids)
    }

    /// How many `embed` calls reused the token ids of a count (observability and tests).
    pub fn reused_counts(&self) -> u64 {
        self.reused_counts.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl EmbeddingProvider for LocalProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Local
    }

    async fn chunk_counter(&self) -> Result<Option<Arc<dyn TokenCounter>>, ProviderError> {
        let counter: Arc<dyn TokenCounter> = self.word_pieces().await?;
        Ok(Some(counter))
    }

    fn limits(&self, _model: &ModelSpec) -> ProviderLimits {
        ProviderLimits {
            max_input_tokens: MAX_INPUT_TOKENS,
            max_batch_size: MAX_BATCH_SIZE,
            max_tokens_per_request: None,
            requests_per_text: false,
        }
    }

    async fn count_tokens(
        &self,
        _key: Option<&ApiKey>,
        model: &str,
        texts: &[String],
    ) -> Result<Vec<u32>, ProviderError> {
        let loaded = self.model(check_model(model)?).await?;
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let ids = self.token_ids(loaded, texts).await?;
        let counts = ids.iter().map(|ids| token_count(ids)).collect();
        let mut counted = self.counted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if counted.len() == KEPT_COUNTS {
            counted.pop_front();
        }
        counted.push_back((texts.to_vec(), ids));
        Ok(counts)
    }

    async fn embed(&self, _key: Option<&ApiKey>, request: EmbedRequest<'_>) -> Result<Vec<Vec<f32>>, ProviderError> {
        let model = check_model(request.model)?;
        if request.dimensions != DIMENSIONS {
            return Err(ProviderError::Permanent {
                message: format!(
                    "{} only produces {DIMENSIONS} dimensions, not {}",
                    model.name(),
                    request.dimensions
                ),
            });
        }
        let loaded = self.model(model).await?;
        if request.texts.is_empty() {
            return Ok(Vec::new());
        }

        // The ids a count kept, else tokenized in the same blocking task as the forward pass
        // (one hop to the blocking pool per request).
        let kept = self.take_counted(request.texts);
        let texts = kept.is_none().then(|| request.texts.to_vec());
        let permits = match request.mode {
            EmbedMode::Query => &self.query_permits,
            EmbedMode::Document => &self.permits,
        };
        let permit = permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ProviderError::Unavailable {
                message: "local model is shutting down".into(),
            })?;
        let passes = self.forward_passes.clone();
        let query = request.mode == EmbedMode::Query;
        let vectors = blocking(move || {
            let _permit = permit;
            let ids = match (kept, texts) {
                (Some(ids), _) => ids,
                (None, texts) => loaded.token_ids(&texts.unwrap_or_default())?,
            };
            if let Some(tokens) = ids.iter().map(|ids| token_count(ids)).find(|&n| n > MAX_INPUT_TOKENS) {
                return Err(ProviderError::InputTooLarge {
                    tokens,
                    limit: MAX_INPUT_TOKENS,
                });
            }
            loaded.embed(&ids, query, &passes).map_err(|err| {
                tracing::error!(error = %err, "local model forward pass failed");
                ProviderError::Permanent {
                    message: format!("local model failed: {err}"),
                }
            })
        })
        .await??;

        if vectors.len() != request.texts.len() || vectors.iter().any(|v| v.len() != DIMENSIONS as usize) {
            return Err(ProviderError::Malformed {
                message: format!(
                    "local model returned {} vectors for {} texts, or a vector not {DIMENSIONS} long",
                    vectors.len(),
                    request.texts.len()
                ),
            });
        }
        Ok(vectors)
    }
}

fn check_model(model: &str) -> Result<LocalModel, ProviderError> {
    LocalModel::from_name(model).ok_or_else(|| ProviderError::Permanent {
        message: format!("the local provider only serves {MODEL_NAME} and {INT8_MODEL_NAME}, not {model:?}"),
    })
}

fn token_count(ids: &[u32]) -> u32 {
    u32::try_from(ids.len()).unwrap_or(u32::MAX)
}

/// Runs CPU-bound or blocking work on tokio's blocking pool.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ProviderError> {
    tokio::task::spawn_blocking(work).await.map_err(|err| {
        if err.is_panic() {
            tracing::error!(error = %err, "local model task panicked");
            ProviderError::Permanent {
                message: "local model task panicked".into(),
            }
        } else {
            ProviderError::Unavailable {
                message: "local model task was cancelled (shutting down)".into(),
            }
        }
    })
}
