//! Chunker properties (being written).
