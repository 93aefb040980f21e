//! [`SecretStore`]: every secret sealed with the master key, read and re-sealed together, and
//! the check value that tells a process whether its master key is the store's.

use async_trait::async_trait;
use uuid::Uuid;

use super::backend::{Backend, SqlStore};
use super::{Result, SealedRow, SecretKind, SecretStore};
use crate::crypto::Sealed;

#[async_trait]
impl<DB: Backend> SecretStore for SqlStore<DB> {
    async fn master_key_check(&self) -> Result<Option<Sealed>> {
        let row: Option<(Vec<u8>, Vec<u8>)> =
            sqlx::query_as("SELECT ciphertext, nonce FROM master_key_check WHERE id = 1")
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|(ciphertext, nonce)| Sealed { ciphertext, nonce }))
    }

    async fn set_master_key_check(&self, check: &Sealed) -> Result<bool> {
        let done = sqlx::query(
            "INSERT INTO master_key_check (id, ciphertext, nonce) VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING",
        )
        .bind(check.ciphertext.clone())
        .bind(check.nonce.clone())
        .execute(&self.pool)
        .await?;
        Ok(super::backend::RowsAffected::rows_affected(&done) > 0)
    }

    async fn sealed_secrets(&self) -> Result<Vec<SealedRow>> {
        let keys: Vec<(Uuid, Vec<u8>, Vec<u8>)> = sqlx::query_as(
            "SELECT id, secret_ciphertext, secret_nonce FROM provider_keys \
             WHERE secret_ciphertext IS NOT NULL AND secret_nonce IS NOT NULL ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        let hooks: Vec<(Uuid, Vec<u8>, Vec<u8>)> =
            sqlx::query_as("SELECT id, secret_ciphertext, secret_nonce FROM webhooks ORDER BY id")
                .fetch_all(&self.pool)
                .await?;
        let row = |kind| {
            move |(id, ciphertext, nonce): (Uuid, Vec<u8>, Vec<u8>)| SealedRow {
                kind,
                id,
                sealed: Sealed { ciphertext, nonce },
            }
        };
        Ok(keys
            .into_iter()
            .map(row(SecretKind::ProviderKey))
            .chain(hooks.into_iter().map(row(SecretKind::Webhook)))
            .collect())
    }

    async fn reseal(&self, expected: &[SealedRow], resealed: &[SealedRow], check: &Sealed) -> Result<bool> {
        let mut tx = self.begin().await?;
        for (old, new) in expected.iter().zip(resealed) {
            // Only a row still holding what was read is changed: a secret written meanwhile
            // (under the old key) fails the whole rotation rather than being lost to it.
            let sql = match new.kind {
                SecretKind::ProviderKey => {
                    "UPDATE provider_keys SET secret_ciphertext = $1, secret_nonce = $2 \
                     WHERE id = $3 AND secret_ciphertext = $4 AND secret_nonce = $5"
                }
                SecretKind::Webhook => {
                    "UPDATE webhooks SET secret_ciphertext = $1, secret_nonce = $2 \
                     WHERE id = $3 AND secret_ciphertext = $4 AND secret_nonce = $5"
                }
            };
            let done = sqlx::query(sql)
                .bind(new.sealed.ciphertext.clone())
                .bind(new.sealed.nonce.clone())
                .bind(new.id)
                .bind(old.sealed.ciphertext.clone())
                .bind(old.sealed.nonce.clone())
                .execute(&mut *tx)
                .await?;
            if super::backend::RowsAffected::rows_affected(&done) != 1 {
                return Ok(false);
            }
        }
        // Secrets added since they were read would stay under the old key: none may be.
        let (keys, hooks): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM provider_keys WHERE secret_ciphertext IS NOT NULL), \
             (SELECT COUNT(*) FROM webhooks)",
        )
        .fetch_one(&mut *tx)
        .await?;
        let read = |kind| expected.iter().filter(|r| r.kind == kind).count() as i64;
        if keys != read(SecretKind::ProviderKey) || hooks != read(SecretKind::Webhook) {
            return Ok(false);
        }
        sqlx::query("DELETE FROM master_key_check").execute(&mut *tx).await?;
        sqlx::query("INSERT INTO master_key_check (id, ciphertext, nonce) VALUES (1, $1, $2)")
            .bind(check.ciphertext.clone())
            .bind(check.nonce.clone())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }
}
