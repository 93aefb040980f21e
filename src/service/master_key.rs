//! The master key against the store: a process whose key does not open the store's secrets is
//! refused at startup, and `quarry keys rotate-master` re-seals every secret under a new key in
//! one transaction, then checks the result.

use crate::crypto::{CryptoError, Sealed, SecretCipher};
use crate::store::{self, SealedRow, Store};

/// What the check value is sealed over, and bound to.
const CHECK_AAD: &[u8] = b"quarry master key check";
const CHECK_TEXT: &[u8] = b"quarry";

#[derive(Debug, thiserror::Error)]
pub enum MasterKeyError {
    #[error(
        "the master key does not open this store's secrets (it was rotated, or belongs to another deployment): \
         set security.master_key or security.master_key_file to the store's key"
    )]
    WrongKey,
    #[error("the new master key is the one in use")]
    SameKey,
    #[error(
        "secrets changed while they were re-sealed (a key or webhook was added or removed); nothing was changed, run it again"
    )]
    Changed,
    #[error("after re-sealing, {0}")]
    Verify(&'static str),
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    #[error("the store failed")]
    Store(#[from] store::Error),
}

/// What a rotation re-sealed.
#[derive(Debug, PartialEq, Eq)]
pub struct Rotated {
    pub provider_keys: usize,
    pub webhooks: usize,
}

fn opens(cipher: &SecretCipher, check: &Sealed) -> bool {
    cipher.open_bytes(CHECK_AAD, check).is_ok_and(|text| text == CHECK_TEXT)
}

fn open_row(cipher: &SecretCipher, row: &SealedRow) -> Result<Vec<u8>, CryptoError> {
    cipher.open_bytes(row.id.as_bytes(), &row.sealed)
}

/// Refuses `cipher` unless it is the store's key: the one its check value was sealed with, or,
/// in a store without one yet, the one its secrets open with (the check is then stored).
pub async fn verify(store: &dyn Store, cipher: &SecretCipher) -> Result<(), MasterKeyError> {
    if let Some(check) = store.master_key_check().await? {
        return if opens(cipher, &check) {
            Ok(())
        } else {
            Err(MasterKeyError::WrongKey)
        };
    }
    for row in store.sealed_secrets().await? {
        open_row(cipher, &row).map_err(|_| MasterKeyError::WrongKey)?;
    }
    let check = cipher.seal_bytes(CHECK_AAD, CHECK_TEXT)?;
    if !store.set_master_key_check(&check).await? {
        // Another process stored one first: it must be this key's too.
        let stored = store.master_key_check().await?;
        if !stored.is_some_and(|stored| opens(cipher, &stored)) {
            return Err(MasterKeyError::WrongKey);
        }
    }
    Ok(())
}

/// Re-seals every secret (provider keys, webhook signing secrets) and the check value under
/// `new`, in one transaction, then reads them back: each opens with `new`, and the check no
/// longer opens with `old`.
pub async fn rotate(store: &dyn Store, old: &SecretCipher, new: &SecretCipher) -> Result<Rotated, MasterKeyError> {
    verify(store, old).await?;
    if store.master_key_check().await?.is_some_and(|check| opens(new, &check)) {
        return Err(MasterKeyError::SameKey);
    }
    let rows = store.sealed_secrets().await?;
    let mut resealed = Vec::with_capacity(rows.len());
    for row in &rows {
        let plain = open_row(old, row).map_err(|_| MasterKeyError::WrongKey)?;
        resealed.push(SealedRow {
            kind: row.kind,
            id: row.id,
            sealed: new.seal_bytes(row.id.as_bytes(), &plain)?,
        });
    }
    let check = new.seal_bytes(CHECK_AAD, CHECK_TEXT)?;
    if !store.reseal(&rows, &resealed, &check).await? {
        return Err(MasterKeyError::Changed);
    }
    let after = store.sealed_secrets().await?;
    if after.len() != rows.len() || after.iter().any(|row| open_row(new, row).is_err()) {
        return Err(MasterKeyError::Verify("a secret does not open with the new key"));
    }
    match store.master_key_check().await? {
        Some(check) if opens(new, &check) && !opens(old, &check) => {}
        _ => return Err(MasterKeyError::Verify("the check value does not hold the new key")),
    }
    let count = |kind| rows.iter().filter(|r| r.kind == kind).count();
    Ok(Rotated {
        provider_keys: count(store::SecretKind::ProviderKey),
        webhooks: count(store::SecretKind::Webhook),
    })
}
