//! Keeping the pools in step with the store: configuration keys mirrored into it, keys and
//! cooldowns other replicas wrote merged back, secrets unsealed.

use super::*;

impl KeyScheduler {
    pub(super) async fn mirror_config_keys(&self) -> store::Result<()> {
        let now = Utc::now();
        for (i, key) in self.shared.config_keys.iter().enumerate() {
            let fingerprint = crypto::fingerprint(&key.secret);
            self.shared
                .store
                .upsert_config_key(NewKey {
                    id: KeyId::new(),
                    provider: key.provider,
                    label: format!("config #{}", i + 1),
                    origin: KeyOrigin::Config,
                    quota_group: key.quota_group.clone(),
                    sealed: None,
                    fingerprint,
                    // Distinct times keep the configured order when keys are listed.
                    now: now + chrono::Duration::microseconds(i as i64),
                })
                .await?;
        }
        Ok(())
    }

    /// Merges the store's view of every key into memory: new and deleted keys, enable flags,
    /// retirements and cooldowns written by this or another process (cooldowns only ever get
    /// longer by merging).
    pub async fn refresh(&self) -> store::Result<()> {
        let rows = self.shared.store.list_keys(crate::domain::Window::ALL).await?;
        let groups = self.shared.store.list_group_cooldowns().await?;
        let now_wall = Utc::now();
        let now = Instant::now();
        let to_instant = |until: DateTime<Utc>| -> Option<Instant> {
            let left = (until - now_wall).to_std().ok()?;
            Some(now + left)
        };
        let mut inner = self.shared.lock();
        inner
            .slots
            .retain(|s| s.id == LOCAL_SLOT || rows.iter().any(|r| r.id == s.id) || s.in_flight > 0);
        for row in &rows {
            let persisted_cooldown = row.cooldown_until.and_then(to_instant);
            if let Some(slot) = inner.slots.iter_mut().find(|s| s.id == row.id) {
                slot.enabled = row.enabled;
                slot.retired = row.retired;
                slot.retired_reason = row.retired_reason.clone();
                slot.label = row.label.clone();
                slot.quota_group = row.quota_group.clone();
                slot.cooldown_until = max_instant(slot.cooldown_until, persisted_cooldown);
                continue;
            }
            let (secret, decrypt_failed) = self.secret_for(row);
            inner.slots.push(Slot {
                id: row.id,
                provider: row.provider,
                label: row.label.clone(),
                origin: row.origin,
                quota_group: row.quota_group.clone(),
                fingerprint: row.fingerprint.clone(),
                secret,
                decrypt_failed,
                enabled: row.enabled,
                retired: row.retired,
                retired_reason: row.retired_reason.clone(),
                cooldown_until: persisted_cooldown,
                rate_limit_streak: row.consecutive_failures,
                in_flight: 0,
                last_used: None,
                requests: 0,
                rate_limited: 0,
                failures: 0,
            });
        }
        for group in groups {
            if let Some(until) = to_instant(group.until) {
                let entry = inner
                    .group_cooldowns
                    .entry((group.provider, group.quota_group))
                    .or_insert(until);
                *entry = (*entry).max(until);
            }
        }
        drop(inner);
        self.shared.changed.notify_waiters();
        Ok(())
    }

    /// The secret of a stored key: configuration keys by fingerprint, API keys decrypted.
    fn secret_for(&self, row: &StoredKey) -> (Option<SecretString>, bool) {
        match row.origin {
            KeyOrigin::Config => {
                let secret = self
                    .shared
                    .config_keys
                    .iter()
                    .find(|k| k.provider == row.provider && crypto::fingerprint(&k.secret) == row.fingerprint)
                    .map(|k| k.secret.clone());
                // A mirror whose key left the configuration stays listed but is never used.
                (secret, false)
            }
            KeyOrigin::Api => {
                let (Some(cipher), Some(sealed)) = (&self.shared.cipher, &row.sealed) else {
                    return (None, true);
                };
                let sealed = Sealed {
                    ciphertext: sealed.ciphertext.clone(),
                    nonce: sealed.nonce.clone(),
                };
                match cipher.open(row.id, &sealed) {
                    Ok(secret) => (Some(secret), false),
                    Err(err) => {
                        tracing::error!(key_id = %row.id, error = %err, "provider key cannot be decrypted; it will not be used");
                        (None, true)
                    }
                }
            }
        }
    }
}
