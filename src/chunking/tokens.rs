//! The `cl100k_base` tokenizer, loaded once per process (its vocabulary is compiled in).

use tiktoken_rs::CoreBPE;

/// Bytes in the longest `cl100k_base` token (a run of 128 spaces). A text longer than
/// `n * MAX_TOKEN_BYTES` bytes surely has more than `n` tokens, so such text is never counted.
pub(super) const MAX_TOKEN_BYTES: usize = 128;

fn bpe() -> &'static CoreBPE {
    tiktoken_rs::cl100k_base_singleton()
}

/// Exact token count of `text`.
pub(super) fn count(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    bpe().encode_ordinary(text).len()
}

/// Byte offset (into `text`) where each token of `text` ends, in order; the last is `text.len()`.
///
/// A token may end inside a multi-byte character: callers round down to a char boundary.
pub(super) fn token_ends(text: &str) -> Vec<usize> {
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
