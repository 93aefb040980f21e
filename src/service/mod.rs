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

/// Refuses work for `provider` (409 `no_eligible_provider_key`) unless it needs no key or has
/// one that could be used: enabled, not retired, its secret readable. Cooldowns do not matter.
pub(crate) async fn require_key(
    scheduler: &crate::providers::scheduler::KeyScheduler,
    provider: crate::domain::ProviderKind,
) -> ServiceResult<()> {
    if !provider.needs_key() || scheduler.has_eligible_key(provider) {
        return Ok(());
    }
    // Another replica may have added a key since the last periodic refresh.
    scheduler.refresh().await?;
    if scheduler.has_eligible_key(provider) {
        return Ok(());
    }
    Err(ServiceError::conflict(
        Conflict::NoEligibleProviderKey,
        format!(
            "no enabled {provider} API key: add one with POST /v1/provider-keys or providers.{provider}.keys, \
             then try again"
        ),
    ))
}
