//! Background workers. `embedding` drains the embedding queue; `webhooks` sends webhook
//! deliveries.

pub mod embedding;
mod inflight;
pub mod webhooks;
