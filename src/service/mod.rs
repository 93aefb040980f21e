//! The service layer: the operations the API exposes, written against the store and vector
//! traits. Handlers call exactly one service method; services never see HTTP types.

pub mod error;
pub mod jobs;
pub mod keys;
pub mod repair;
pub mod retrieval;
pub mod sources;
pub mod worlds;

pub use error::{Conflict, Invalid, Missing, ServiceError, ServiceResult, Unprocessable};
