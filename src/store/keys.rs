//! [`KeyStore`]: provider keys and the cooldowns the key scheduler persists.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::rows::{GroupCooldownRow, KeyRow, narrow, wide};
use super::{KeyStore, Result};
use crate::domain::Window;
use crate::domain::{GroupCooldown, KeyId, NewKey, ProviderKind, StoredKey};

/// Columns of a [`KeyRow`].
macro_rules! key_columns {
    () => {
        "id, provider, label, origin, quota_group, secret_ciphertext, secret_nonce, fingerprint, enabled, retired, \
         retired_reason, cooldown_until, consecutive_failures, created_at, updated_at"
    };
}

/// Inserts a key: `$1`…`$9` as [`SqlStore::write_key`] binds them.
macro_rules! insert_key {
    () => {
        "INSERT INTO provider_keys (id, provider, label, origin, quota_group, secret_ciphertext, secret_nonce, \
         fingerprint, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) "
    };
}

#[async_trait]
impl<DB: Backend> KeyStore for SqlStore<DB> {
    async fn count_eligible_keys(&self, provider: ProviderKind) -> Result<u64> {
        let n: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM provider_keys WHERE provider = $1 AND enabled AND NOT retired")
                .bind(provider.as_str())
                .fetch_one(&self.pool)
                .await?;
        narrow("provider_keys", n)
    }

    async fn insert_key(&self, key: NewKey) -> Result<StoredKey> {
        self.write_key(concat!(insert_key!(), "RETURNING ", key_columns!()), key)
            .await
    }

    async fn upsert_config_key(&self, key: NewKey) -> Result<StoredKey> {
        // Matched by provider and fingerprint; the persisted state stays.
        const UPSERT: &str = concat!(
            insert_key!(),
            "ON CONFLICT (provider, fingerprint) DO UPDATE SET label = excluded.label, \
             quota_group = excluded.quota_group, origin = excluded.origin, updated_at = excluded.updated_at \
             RETURNING ",
            key_columns!()
        );
        self.write_key(UPSERT, key).await
    }

    async fn get_key(&self, id: KeyId) -> Result<Option<StoredKey>> {
        const SELECT_KEY: &str = concat!("SELECT ", key_columns!(), " FROM provider_keys WHERE id = $1");
        let row: Option<KeyRow> = sqlx::query_as(SELECT_KEY).bind(id.0).fetch_optional(&self.pool).await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn list_keys(&self, window: Window) -> Result<Vec<StoredKey>> {
        const LIST_KEYS: &str = concat!(
            "SELECT ",
            key_columns!(),
            " FROM provider_keys ORDER BY created_at, id LIMIT $1 OFFSET $2"
        );
        let rows: Vec<KeyRow> = sqlx::query_as(LIST_KEYS)
            .bind(wide(window.limit))
            .bind(wide(window.offset))
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }

    async fn set_key_enabled(&self, id: KeyId, enabled: bool, now: DateTime<Utc>) -> Result<Option<StoredKey>> {
        // Enabling a key also lifts its retirement and cooldown: re-enabling is how an operator
        // says "try this key again".
        const SET_KEY_ENABLED: &str = concat!(
            "UPDATE provider_keys SET enabled = $2, \
             retired = CASE WHEN $2 THEN FALSE ELSE retired END, \
             retired_reason = CASE WHEN $2 THEN NULL ELSE retired_reason END, \
             cooldown_until = CASE WHEN $2 THEN NULL ELSE cooldown_until END, \
             consecutive_failures = CASE WHEN $2 THEN 0 ELSE consecutive_failures END, \
             updated_at = $3 WHERE id = $1 RETURNING ",
            key_columns!()
        );
        let row: Option<KeyRow> = sqlx::query_as(SET_KEY_ENABLED)
            .bind(id.0)
            .bind(enabled)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn delete_key(&self, id: KeyId) -> Result<bool> {
        let done = sqlx::query("DELETE FROM provider_keys WHERE id = $1")
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn set_key_cooldown(
        &self,
        id: KeyId,
        until: Option<DateTime<Utc>>,
        consecutive_failures: u32,
        now: DateTime<Utc>,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE provider_keys SET cooldown_until = $2, consecutive_failures = $3, updated_at = $4 WHERE id = $1",
        )
        .bind(id.0)
        .bind(until)
        .bind(i64::from(consecutive_failures))
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn retire_key(&self, id: KeyId, reason: &str, now: DateTime<Utc>) -> Result<()> {
        sqlx::query("UPDATE provider_keys SET retired = TRUE, retired_reason = $2, updated_at = $3 WHERE id = $1")
            .bind(id.0)
            .bind(reason)
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn extend_group_cooldown(&self, provider: ProviderKind, group: &str, until: DateTime<Utc>) -> Result<()> {
        sqlx::query(
            "INSERT INTO quota_group_cooldowns (provider, quota_group, cooldown_until) VALUES ($1, $2, $3) \
             ON CONFLICT (provider, quota_group) DO UPDATE SET cooldown_until = \
             CASE WHEN excluded.cooldown_until > quota_group_cooldowns.cooldown_until \
             THEN excluded.cooldown_until ELSE quota_group_cooldowns.cooldown_until END",
        )
        .bind(provider.as_str())
        .bind(group)
        .bind(until)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn list_group_cooldowns(&self) -> Result<Vec<GroupCooldown>> {
        let rows: Vec<GroupCooldownRow> = sqlx::query_as(
            "SELECT provider, quota_group, cooldown_until FROM quota_group_cooldowns ORDER BY provider, quota_group",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(TryInto::try_into).collect()
    }
}

impl<DB: Backend> SqlStore<DB> {
    /// Runs `sql`, [`insert_key!`] with a `RETURNING` clause, for `key`.
    async fn write_key(&self, sql: &'static str, key: NewKey) -> Result<StoredKey> {
        let (ciphertext, nonce) = match key.sealed {
            Some(s) => (Some(s.ciphertext), Some(s.nonce)),
            None => (None, None),
        };
        let row: KeyRow = sqlx::query_as(sql)
            .bind(key.id.0)
            .bind(key.provider.as_str())
            .bind(&key.label)
            .bind(key.origin.as_str())
            .bind(&key.quota_group)
            .bind(ciphertext)
            .bind(nonce)
            .bind(&key.fingerprint)
            .bind(key.now)
            .fetch_one(&self.pool)
            .await?;
        row.try_into()
    }
}
