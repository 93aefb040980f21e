//! The service layer: the operations the API exposes, written against the store and vector
//! traits. Handlers call exactly one service method; services never see HTTP types. Each
//! service is built from the dependency bundle ([`crate::deps::Deps`]); `docs/DESIGN.md`, "How a
//! request flows", shows where each is called.

pub mod audit;
pub mod error;
pub mod evals;
pub mod jobs;
pub mod keys;
pub mod layout;
pub mod master_key;
pub mod repair;
pub mod retrieval;
pub mod sources;
pub mod tokens;
pub mod webhooks;
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

/// Longest `label`, `quota_group` or `description`.
pub const MAX_TEXT_CHARS: usize = 200;

/// A short text field (a key's `label`, a webhook's `description`) as sent: at most 200 characters, no control characters; kept
/// trimmed, and absent when blank.
pub(crate) fn optional_text(field: &str, raw: Option<&str>) -> ServiceResult<Option<String>> {
    let Some(raw) = raw else { return Ok(None) };
    if raw.chars().count() > MAX_TEXT_CHARS {
        return Err(ServiceError::invalid(
            Invalid::Request,
            field,
            format!("{field} must be at most {MAX_TEXT_CHARS} characters"),
        ));
    }
    if raw.chars().any(char::is_control) {
        return Err(ServiceError::invalid(
            Invalid::Request,
            field,
            format!("{field} must not contain control characters"),
        ));
    }
    Ok(Some(raw.trim()).filter(|t| !t.is_empty()).map(str::to_owned))
}
