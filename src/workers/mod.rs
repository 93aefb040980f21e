//! Background workers. `embedding` drains the embedding queue; `webhooks` sends webhook
//! deliveries. `docs/DESIGN.md`, "How a request flows", follows an upload's chunks and one
//! webhook delivery through them.

pub mod embedding;
mod inflight;
pub mod webhooks;
