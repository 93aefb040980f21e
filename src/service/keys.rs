//! Provider keys through the API: add (sealed with the master key), list, enable/disable,
//! delete; and the live per-key view of the scheduler. Configuration keys are listed too but
//! are read-only here, except that they can be disabled and re-enabled (re-enabling is how an
//! operator lifts a retirement).

use std::sync::Arc;

use chrono::Utc;
use secrecy::{ExposeSecret, SecretString};

use super::{Conflict, Invalid, Missing, ServiceError, ServiceResult, optional_text};
use crate::crypto::{self, SecretCipher};
use crate::domain::{KeyId, KeyOrigin, NewKey, ProviderKind, SealedSecret, StoredKey};
use crate::providers::scheduler::{KeyScheduler, KeyStatus};
use crate::store::{self, Store};

/// Longest secret accepted through the API.
pub const MAX_SECRET_BYTES: usize = 1024;

/// A key creation request, its provider parsed at the edge.
pub struct CreateKey {
    pub provider: ProviderKind,
    pub secret: SecretString,
    pub label: Option<String>,
    pub quota_group: Option<String>,
}

pub struct KeyService {
    store: Arc<dyn Store>,
    scheduler: KeyScheduler,
    cipher: Option<SecretCipher>,
}

impl KeyService {
    pub fn new(deps: &crate::deps::Deps) -> Self {
        Self {
            store: deps.store.clone(),
            scheduler: deps.scheduler.clone(),
            cipher: deps.cipher.clone(),
        }
    }

    pub async fn create(&self, req: CreateKey) -> ServiceResult<StoredKey> {
        let provider = req.provider;
        if !provider.needs_key() {
            return Err(ServiceError::invalid(
                Invalid::Request,
                "provider",
                "the local provider uses no keys",
            ));
        }
        // Checked as sent, not trimmed: what the OpenAPI document's `pattern` says. A provider
        // key travels in an HTTP header, which takes visible ASCII only.
        let secret = req.secret.expose_secret();
        if secret.is_empty() || !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ServiceError::invalid(
                Invalid::Request,
                "secret",
                "secret must be non-empty visible ASCII (`!` to `~`): no whitespace or other characters",
            ));
        }
        // Provider keys are tens of characters; anything this long is not one (and would be
        // sent in a header with every request).
        if secret.len() > MAX_SECRET_BYTES {
            return Err(ServiceError::invalid(
                Invalid::Request,
                "secret",
                format!("secret must be at most {MAX_SECRET_BYTES} characters"),
            ));
        }
        let secret = SecretString::from(secret.to_owned());
        let label = optional_text("label", req.label.as_deref())?;
        let quota_group = optional_text("quota_group", req.quota_group.as_deref())?;
        let Some(cipher) = &self.cipher else {
            return Err(ServiceError::conflict(
                Conflict::MasterKeyMissing,
                "security.master_key is not configured, so secrets cannot be stored encrypted; \
                 set it (32 bytes, base64) or configure keys through providers.<name>.keys",
            ));
        };
        let id = KeyId::new();
        let fingerprint = crypto::fingerprint(&secret);
        let sealed = cipher
            .seal(id, &secret)
            .map_err(|err| ServiceError::Internal { source: err.into() })?;
        let label = label.unwrap_or_else(|| format!("{provider} key {fingerprint}"));
        let stored = self
            .store
            .insert_key(NewKey {
                id,
                provider,
                label,
                origin: KeyOrigin::Api,
                quota_group,
                sealed: Some(SealedSecret {
                    ciphertext: sealed.ciphertext,
                    nonce: sealed.nonce,
                }),
                fingerprint,
                now: Utc::now(),
            })
            .await
            .map_err(|err| match err {
                store::Error::Duplicate(_) => ServiceError::conflict(
                    Conflict::KeyExists,
                    format!("this {provider} key is already registered"),
                ),
                other => other.into(),
            })?;
        self.scheduler.refresh().await?;
        Ok(stored)
    }

    pub async fn list(&self, window: crate::domain::Window) -> ServiceResult<Vec<StoredKey>> {
        Ok(self.store.list_keys(window).await?)
    }

    /// Why keys that look enabled cannot be used (see [`KeyScheduler::secret_problems`]).
    pub fn problems(&self) -> std::collections::HashMap<KeyId, &'static str> {
        self.scheduler.secret_problems()
    }

    pub async fn set_enabled(&self, id: KeyId, enabled: bool) -> ServiceResult<StoredKey> {
        let key = self
            .store
            .set_key_enabled(id, enabled, Utc::now())
            .await?
            .ok_or(ServiceError::NotFound(Missing::Key))?;
        self.scheduler.refresh().await?;
        Ok(key)
    }

    pub async fn delete(&self, id: KeyId) -> ServiceResult<()> {
        let key = self
            .store
            .get_key(id)
            .await?
            .ok_or(ServiceError::NotFound(Missing::Key))?;
        if key.origin == KeyOrigin::Config {
            return Err(ServiceError::conflict(
                Conflict::KeyReadOnly,
                "configuration keys are removed from the configuration, not through the API (they can be disabled)",
            ));
        }
        if !self.store.delete_key(id).await? {
            return Err(ServiceError::NotFound(Missing::Key));
        }
        self.scheduler.refresh().await?;
        Ok(())
    }

    /// The scheduler's live view of every key.
    pub fn status(&self) -> Vec<KeyStatus> {
        self.scheduler.status()
    }
}
