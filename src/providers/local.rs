//! The local embedding model (all-MiniLM-L6-v2 on CPU with candle). Being written.
