//! How the splitter counts tokens: [`TokenCounter`], and [`Cl100k`], the `cl100k_base` BPE
//! (its vocabulary is compiled in), the counter of every world whose model has no tokenizer of
//! its own here.

use tiktoken_rs::CoreBPE;

/// A tokenizer as the splitter sees it. Counts decide what fits; the other two only guide the
/// search (a wrong guess costs a few more counts, never a chunk over the limit).
pub trait TokenCounter: Send + Sync {
    /// Exact number of tokens in `text`, without any special tokens a model adds around an input.
    fn count(&self, text: &str) -> usize;
    /// Byte offset (into `text`) where each token of `text` ends, in order. An end may fall
    /// inside a multi-byte character: callers round down to a char boundary.
    fn token_ends(&self, text: &str) -> Vec<usize>;
    /// Bytes in the longest token worth planning for: a text longer than `n` times this is
    /// taken to have more than `n` tokens and is never counted whole (which bounds the work on
    /// huge inputs). A counter whose tokens can be longer only makes some chunks smaller.
    fn max_token_bytes(&self) -> usize;
    /// The most tokens a chunk may have whatever its profile says (the model's limit, for a
    /// counter tied to one model): a world stored with a larger `max_tokens` by an older
    /// version still gets chunks its model takes. `None`: no limit of its own.
    fn max_chunk_tokens(&self) -> Option<usize> {
        None
    }
}

/// Bytes in the longest `cl100k_base` token (a run of 128 spaces).
const CL100K_MAX_TOKEN_BYTES: usize = 128;

/// The `cl100k_base` tokenizer, loaded once per process.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cl100k;

fn bpe() -> &'static CoreBPE {
    tiktoken_rs::cl100k_base_singleton()
}

impl TokenCounter for Cl100k {
    fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        bpe().encode_ordinary(text).len()
    }

    fn token_ends(&self, text: &str) -> Vec<usize> {
        let bpe = bpe();
        let mut end = 0;
        bpe.encode_ordinary(text)
            .into_iter()
            .map(|token| {
                // Every rank produced by `encode_ordinary` decodes; 1 byte keeps offsets moving if not.
                end += bpe.decode_bytes(&[token]).map_or(1, |bytes| bytes.len());
                end.min(text.len())
            })
            .collect()
    }

    fn max_token_bytes(&self) -> usize {
        CL100K_MAX_TOKEN_BYTES
    }
}
