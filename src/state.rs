//! Shared application state handed to every handler.

use std::sync::Arc;

use crate::providers::ModelRegistry;
use crate::service::worlds::WorldService;
use crate::store::Store;
use crate::vector::VectorRepo;

/// Cheap to clone: everything inside is shared.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub vectors: Arc<dyn VectorRepo>,
    pub registry: Arc<ModelRegistry>,
    pub worlds: Arc<WorldService>,
}
