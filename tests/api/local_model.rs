//! Local model correctness (being written).
