//! Embedding providers: the model registry now; the provider trait, the Google / OpenAI /
//! local adapters, failure classification and the key scheduler slot in here.

pub mod registry;

pub use registry::{ModelRegistry, ModelSpec};
