//! The synchronous half of the local provider: loading the model folder, tokenizing, and one
//! forward pass of the ONNX graph (BERT with mean pooling) on ONNX Runtime. Everything here
//! blocks (file reads, CPU-bound inference) and is only ever called from the blocking thread
//! pool by [`super::LocalProvider`].

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use ort::session::Session;
use ort::value::Tensor;
use tokenizers::Tokenizer;

use super::{DIMENSIONS, LocalModel};
use crate::chunking::TokenCounter;
use crate::providers::ProviderError;

const CONFIG_FILE: &str = "config.json";
const TOKENIZER_FILE: &str = "tokenizer.json";
/// The graph `scripts/build-onnx.py` writes from the model's weights.
const ONNX_FILE: &str = "model.onnx";
/// That graph with int8 weights, as `scripts/quantize-onnx.py` writes it.
const INT8_ONNX_FILE: &str = "model-int8.onnx";
/// The ONNX Runtime library `scripts/fetch-model` takes from the `onnxruntime` wheel.
pub(super) const RUNTIME_FILE: &str = "libonnxruntime.so.1.31.1";
/// The graph's output: mean-pooled, L2-normalised sentence vectors.
const OUTPUT: &str = "sentence_embedding";
/// The script that puts verified copies of the files in place; every load error names it.
const FETCH_SCRIPT: &str = "scripts/fetch-model";

/// The model's WordPiece tokenizer from `dir`, exact: the shipped tokenizer.json truncates at
/// 128 tokens and pads every text to 128. Both off: counts must be exact (a long text is
/// refused, never cut), and padding is done per batch, to the longest text in it.
pub(super) fn load_tokenizer(dir: &Path) -> Result<Tokenizer, ProviderError> {
    let path = dir.join(TOKENIZER_FILE);
    if !path.is_file() {
        return Err(ProviderError::Unavailable {
            message: format!(
                "local model file missing in {} ({TOKENIZER_FILE}); run {FETCH_SCRIPT} to fetch all-MiniLM-L6-v2 \
                 there, or point providers.local.model_dir at a folder that has it",
                dir.display()
            ),
        });
    }
    let mut tokenizer = Tokenizer::from_file(&path).map_err(|err| unusable(dir, TOKENIZER_FILE, &*err))?;
    tokenizer
        .with_truncation(None)
        .map_err(|err| unusable(dir, TOKENIZER_FILE, &*err))?;
    tokenizer.with_padding(None);
    Ok(tokenizer)
}

/// The local model's tokens as the splitter counts them: WordPiece pieces of the text, without
/// the `[CLS]` and `[SEP]` the model adds (see [`super::MAX_CHUNK_TOKENS`]).
pub struct WordPieceCounter {
    tokenizer: Tokenizer,
}

/// Longest run of text planned as one token: WordPiece turns a word of more than 100 chars into
/// a single `[UNK]`, 100 chars are at most 400 bytes, and anything longer is only planned in
/// smaller pieces (see [`TokenCounter::max_token_bytes`]).
const WORDPIECE_MAX_TOKEN_BYTES: usize = 400;

impl WordPieceCounter {
    pub(super) fn new(tokenizer: Tokenizer) -> Self {
        Self { tokenizer }
    }

    /// The counter of the model folder `dir` (blocking: reads `tokenizer.json`). Errors as for
    /// loading the model.
    pub fn from_dir(dir: &Path) -> Result<Self, ProviderError> {
        load_tokenizer(dir).map(Self::new)
    }
}

impl TokenCounter for WordPieceCounter {
    fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        // Encoding plain text cannot fail with this tokenizer; were it to, "too many" makes the
        // splitter cut smaller, never send something over the limit.
        self.tokenizer
            .encode_fast(text, false)
            .map_or(usize::MAX, |encoding| encoding.len())
    }

    fn token_ends(&self, text: &str) -> Vec<usize> {
        self.tokenizer
            .encode(text, false)
            .map(|encoding| {
                encoding
                    .get_offsets()
                    .iter()
                    .map(|&(_, end)| end.min(text.len()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn max_token_bytes(&self) -> usize {
        WORDPIECE_MAX_TOKEN_BYTES
    }

    fn max_chunk_tokens(&self) -> Option<usize> {
        Some(super::MAX_CHUNK_TOKENS as usize)
    }
}

/// The parts of `config.json` quarry checks.
#[derive(serde::Deserialize)]
struct Config {
    hidden_size: usize,
    pad_token_id: i64,
}

/// ONNX Runtime, loaded once per process (the first model folder to load brings the library;
/// it is the same pinned file in every folder). Only success is kept.
fn runtime(dir: &Path) -> Result<ort::environment::Environment, ProviderError> {
    static RUNTIME: Mutex<Option<ort::environment::Environment>> = Mutex::new(None);
    let mut slot = RUNTIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(environment) = &*slot {
        return Ok(environment.clone());
    }
    let library = dir.join(RUNTIME_FILE);
    let environment = ort::init_from(&library)
        .map_err(|err| unusable(dir, RUNTIME_FILE, &err))?
        .with_name("quarry")
        .build()
        .map_err(|err| unusable(dir, RUNTIME_FILE, &err))?;
    *slot = Some(environment.clone());
    Ok(environment)
}

impl LocalModel {
    /// Its graph's file in the model folder.
    fn graph_file(self) -> &'static str {
        match self {
            LocalModel::Fp32 => ONNX_FILE,
            LocalModel::Int8 => INT8_ONNX_FILE,
        }
    }

    /// ONNX Runtime graph optimisations left out when loading it. On the int8 graph, fusing
    /// each residual `Add` into the `LayerNormalization` after it (`SkipLayerNormFusion`) made
    /// the pass slower, not faster: ONNX Runtime's `SkipLayerNormalization` kernel took several
    /// times the unfused pair's time (BENCHMARKS.md, "An int8 local model").
    fn disabled_optimizers(self) -> Option<&'static str> {
        match self {
            LocalModel::Fp32 => None,
            LocalModel::Int8 => Some("SkipLayerNormFusion"),
        }
    }
}

/// all-MiniLM-L6-v2 ready to run: its tokenizer (truncation and padding switched off) and one
/// of its ONNX graphs (BERT, mean pooling and L2 normalisation) in an ONNX Runtime session.
pub(super) struct Model {
    tokenizer: Tokenizer,
    /// One session; a forward pass holds it (ONNX Runtime spreads the pass over every core).
    session: Mutex<Session>,
    /// Queries waiting for the session: ingestion passes let them go first.
    queries_waiting: AtomicUsize,
    pad_id: i64,
    /// Most texts in one forward pass ([`LocalModel::pass_size`]).
    pass_size: usize,
}

impl Model {
    /// Reads `config.json`, `tokenizer.json`, `model`'s graph and the ONNX Runtime library
    /// from `dir`. Any problem (missing or unreadable file, a model that is not this one) is
    /// `Unavailable` with a message naming the folder and the fetch script.
    pub(super) fn load(dir: &Path, model: LocalModel) -> Result<Self, ProviderError> {
        let started = Instant::now();
        let graph = model.graph_file();
        let missing: Vec<&str> = [CONFIG_FILE, TOKENIZER_FILE, graph, RUNTIME_FILE]
            .into_iter()
            .filter(|file| !dir.join(file).is_file())
            .collect();
        if !missing.is_empty() {
            return Err(ProviderError::Unavailable {
                message: format!(
                    "local model files missing in {} ({}); run {FETCH_SCRIPT} to fetch {} and ONNX \
                     Runtime there, or point providers.local.model_dir at a folder that has them",
                    dir.display(),
                    missing.join(", "),
                    model.name()
                ),
            });
        }

        let config_text =
            std::fs::read_to_string(dir.join(CONFIG_FILE)).map_err(|err| unusable(dir, CONFIG_FILE, &err))?;
        let config: Config = serde_json::from_str(&config_text).map_err(|err| unusable(dir, CONFIG_FILE, &err))?;
        if config.hidden_size != DIMENSIONS as usize {
            return Err(unusable(
                dir,
                CONFIG_FILE,
                &format!(
                    "hidden size {} is not all-MiniLM-L6-v2's {DIMENSIONS}",
                    config.hidden_size
                ),
            ));
        }
        let tokenizer = load_tokenizer(dir)?;
        let environment = runtime(dir)?;
        let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let session = Session::builder(&environment)
            .and_then(|b| b.with_intra_threads(threads).map_err(Into::into))
            .and_then(|b| b.with_inter_threads(1).map_err(Into::into))
            .and_then(|b| match model.disabled_optimizers() {
                Some(optimizers) => b.with_disabled_optimizers(optimizers).map_err(Into::into),
                None => Ok(b),
            })
            .and_then(|mut b| b.commit_from_file(dir.join(graph)))
            .map_err(|err| unusable(dir, graph, &err))?;
        let outputs: Vec<String> = session.outputs().iter().map(|o| o.name().to_owned()).collect();
        if !outputs.iter().any(|o| o == OUTPUT) {
            return Err(unusable(
                dir,
                graph,
                &format!("no `{OUTPUT}` output (it has {outputs:?})"),
            ));
        }
        tracing::info!(
            dir = %dir.display(),
            model = model.name(),
            threads,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "local embedding model loaded (ONNX Runtime)"
        );
        Ok(Self {
            tokenizer,
            session: Mutex::new(session),
            queries_waiting: AtomicUsize::new(0),
            pad_id: config.pad_token_id,
            pass_size: model.pass_size(),
        })
    }

    /// Token ids of each text as the model sees them, `[CLS]` and `[SEP]` included.
    pub(super) fn token_ids(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ProviderError> {
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings =
            self.tokenizer
                .encode_batch_fast(inputs, true)
                .map_err(|err| ProviderError::TokenCountFailed {
                    message: format!("local tokenizer: {err}"),
                })?;
        Ok(encodings.into_iter().map(|e| e.get_ids().to_vec()).collect())
    }

    /// One unit vector per text, in input order. Texts are sorted by length and cut into
    /// forward passes of at most [`LocalModel::pass_size`] texts, each padded only to its own longest text, so
    /// little compute goes to padding; each pass adds one to `passes`. A query's pass goes
    /// before any ingestion pass still waiting. The caller has checked the per-text limit.
    pub(super) fn embed(&self, ids: &[Vec<u32>], query: bool, passes: &AtomicU64) -> Result<Vec<Vec<f32>>, String> {
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); ids.len()];
        for group in order.chunks(self.pass_size) {
            let batch: Vec<&[u32]> = group.iter().map(|&i| ids[i].as_slice()).collect();
            passes.fetch_add(1, Ordering::Relaxed);
            for (&i, vector) in group.iter().zip(self.forward(&batch, query)?) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }

    /// The graph over one padded batch: BERT, then mean pooling over the attention mask and L2
    /// normalisation (the sentence-transformers recipe for this model, inside the graph).
    fn forward(&self, batch: &[&[u32]], query: bool) -> Result<Vec<Vec<f32>>, String> {
        let rows = batch.len();
        let seq = batch.iter().map(|ids| ids.len()).max().unwrap_or(0);
        if rows == 0 || seq == 0 {
            return Ok(vec![Vec::new(); rows]);
        }
        let mut input_ids = vec![self.pad_id; rows * seq];
        let mut mask = vec![0i64; rows * seq];
        for (row, ids) in batch.iter().enumerate() {
            for (slot, &id) in input_ids[row * seq..].iter_mut().zip(ids.iter()) {
                *slot = i64::from(id);
            }
            mask[row * seq..row * seq + ids.len()].fill(1);
        }
        let shape = [rows, seq];
        let inputs = ort::inputs![
            "input_ids" => Tensor::from_array((shape, input_ids)).map_err(|e| e.to_string())?,
            "attention_mask" => Tensor::from_array((shape, mask)).map_err(|e| e.to_string())?,
            "token_type_ids" => Tensor::from_array((shape, vec![0i64; rows * seq])).map_err(|e| e.to_string())?,
        ];
        let mut session = self.lock(query);
        let outputs = session.run(inputs).map_err(|e| e.to_string())?;
        let (out_shape, data) = outputs[OUTPUT].try_extract_tensor::<f32>().map_err(|e| e.to_string())?;
        let width = DIMENSIONS as usize;
        if out_shape.len() != 2 || data.len() != rows * width {
            return Err(format!("the model answered shape {out_shape:?} for {rows} texts"));
        }
        Ok(data.chunks_exact(width).map(<[f32]>::to_vec).collect())
    }

    /// The session, for one pass. An ingestion pass waits while queries wait, so a query never
    /// queues behind more than the pass in flight.
    fn lock(&self, query: bool) -> std::sync::MutexGuard<'_, Session> {
        if query {
            self.queries_waiting.fetch_add(1, Ordering::SeqCst);
            let guard = self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            self.queries_waiting.fetch_sub(1, Ordering::SeqCst);
            return guard;
        }
        loop {
            while self.queries_waiting.load(Ordering::SeqCst) > 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let guard = self.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if self.queries_waiting.load(Ordering::SeqCst) == 0 {
                return guard;
            }
            drop(guard);
        }
    }
}

/// A model file that exists but cannot be used.
fn unusable(dir: &Path, file: &str, err: &dyn std::fmt::Display) -> ProviderError {
    ProviderError::Unavailable {
        message: format!(
            "local model in {} is unusable ({file}: {err}); run {FETCH_SCRIPT} to replace it with a verified copy",
            dir.display()
        ),
    }
}
