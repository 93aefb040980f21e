//! The synchronous half of the local provider: loading the model folder, tokenizing, and one
//! BERT forward pass with mean pooling. Everything here blocks (file reads, CPU-bound tensor
//! work) and is only ever called from the blocking thread pool by [`super::LocalProvider`].

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::Tokenizer;

use super::{DIMENSIONS, MAX_BATCH_SIZE};
use crate::chunking::TokenCounter;
use crate::providers::{ProviderError, l2_normalize};

const CONFIG_FILE: &str = "config.json";
const TOKENIZER_FILE: &str = "tokenizer.json";
const WEIGHTS_FILE: &str = "model.safetensors";
/// The script that puts verified copies of the three files in place; every load error names it.
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

/// all-MiniLM-L6-v2 ready to run: its tokenizer (truncation and padding switched off) and the
/// BERT encoder on the CPU.
pub(super) struct Model {
    tokenizer: Tokenizer,
    bert: BertModel,
    device: Device,
    pad_id: u32,
}

impl Model {
    /// Reads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`. Any problem
    /// (missing or unreadable file, a model that is not this one) is `Unavailable` with a
    /// message naming the folder and the fetch script.
    pub(super) fn load(dir: &Path) -> Result<Self, ProviderError> {
        let started = Instant::now();
        let missing: Vec<&str> = [CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE]
            .into_iter()
            .filter(|file| !dir.join(file).is_file())
            .collect();
        if !missing.is_empty() {
            return Err(ProviderError::Unavailable {
                message: format!(
                    "local model files missing in {} ({}); run {FETCH_SCRIPT} to fetch all-MiniLM-L6-v2 there, \
                     or point providers.local.model_dir at a folder that has them",
                    dir.display(),
                    missing.join(", ")
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
        let pad_id = u32::try_from(config.pad_token_id).map_err(|err| unusable(dir, CONFIG_FILE, &err))?;

        let tokenizer = load_tokenizer(dir)?;

        // Read into memory rather than memory-map: mapping needs `unsafe` and would break if
        // the file were rewritten in place under a running server. The buffer is dropped once
        // the tensors are built.
        let device = Device::Cpu;
        let weights = std::fs::read(dir.join(WEIGHTS_FILE)).map_err(|err| unusable(dir, WEIGHTS_FILE, &err))?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|err| unusable(dir, WEIGHTS_FILE, &err))?;
        let bert = BertModel::load(vb, &config).map_err(|err| unusable(dir, WEIGHTS_FILE, &err))?;

        tracing::info!(
            dir = %dir.display(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "local embedding model loaded"
        );
        Ok(Self {
            tokenizer,
            bert,
            device,
            pad_id,
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

    /// One unit vector per text, in input order. Texts are grouped by length into forward
    /// passes of at most [`MAX_BATCH_SIZE`] so that little compute goes to padding; each pass
    /// adds one to `passes`. The caller has checked the per-text limit.
    pub(super) fn embed(&self, ids: &[Vec<u32>], passes: &AtomicU64) -> candle_core::Result<Vec<Vec<f32>>> {
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); ids.len()];
        for group in order.chunks(MAX_BATCH_SIZE) {
            let batch: Vec<&[u32]> = group.iter().map(|&i| ids[i].as_slice()).collect();
            passes.fetch_add(1, Ordering::Relaxed);
            for (&i, vector) in group.iter().zip(self.forward(&batch)?) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }

    /// BERT over one padded batch, then mean pooling over the attention mask and L2
    /// normalisation (the sentence-transformers recipe for this model).
    fn forward(&self, batch: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let rows = batch.len();
        let seq = batch.iter().map(|ids| ids.len()).max().unwrap_or(0);
        if rows == 0 || seq == 0 {
            return Ok(vec![Vec::new(); rows]);
        }
        let mut input_ids = vec![self.pad_id; rows * seq];
        let mut mask = vec![0u32; rows * seq];
        for (row, ids) in batch.iter().enumerate() {
            input_ids[row * seq..row * seq + ids.len()].copy_from_slice(ids);
            mask[row * seq..row * seq + ids.len()].fill(1);
        }
        let input_ids = Tensor::from_vec(input_ids, (rows, seq), &self.device)?;
        let mask = Tensor::from_vec(mask, (rows, seq), &self.device)?;
        let token_type_ids = input_ids.zeros_like()?;

        let hidden = self.bert.forward(&input_ids, &token_type_ids, Some(&mask))?; // (rows, seq, 384)
        let weights = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (rows, seq, 1)
        let summed = hidden.broadcast_mul(&weights)?.sum(1)?; // (rows, 384)
        let counts = weights.sum(1)?; // (rows, 1): every text has at least [CLS] and [SEP]
        let mut vectors = summed.broadcast_div(&counts)?.to_vec2::<f32>()?;
        vectors.iter_mut().for_each(|v| l2_normalize(v));
        Ok(vectors)
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
