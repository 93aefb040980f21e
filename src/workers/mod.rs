//! Background workers. `embedding` drains the embedding queue.

pub mod embedding;
