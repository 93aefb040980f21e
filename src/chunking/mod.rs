//! Sentence-aware, token-limited chunking. Being written.
