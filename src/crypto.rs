//! Encryption of secrets at rest (provider keys, webhook signing secrets): AES-256-GCM under `security.master_key`, a
//! fresh random 96-bit nonce per secret, the key id as associated data (a ciphertext copied
//! onto another row does not decrypt).

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

use crate::domain::KeyId;

/// Encrypts and decrypts secrets with the master key.
#[derive(Clone)]
pub struct SecretCipher {
    cipher: Aes256Gcm,
}

impl std::fmt::Debug for SecretCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretCipher([REDACTED])")
    }
}

/// A secret as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sealed {
    pub ciphertext: Vec<u8>,
    pub nonce: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    #[error("encrypting the secret failed")]
    Encrypt,
    /// Wrong master key, or a tampered or misplaced ciphertext.
    #[error("the stored secret cannot be decrypted with the configured master key")]
    Decrypt,
}

impl SecretCipher {
    pub fn new(master_key: [u8; 32]) -> Self {
        let key = Key::<Aes256Gcm>::from(master_key);
        Self {
            cipher: Aes256Gcm::new(&key),
        }
    }

    pub fn seal(&self, id: KeyId, secret: &SecretString) -> Result<Sealed, CryptoError> {
        self.seal_bytes(id.0.as_bytes(), secret.expose_secret().as_bytes())
    }

    pub fn open(&self, id: KeyId, sealed: &Sealed) -> Result<SecretString, CryptoError> {
        let plain = self.open_bytes(id.0.as_bytes(), sealed)?;
        let text = String::from_utf8(plain).map_err(|_| CryptoError::Decrypt)?;
        Ok(SecretString::from(text))
    }

    /// Seals `plain`, bound to `aad` (the id of the row it is stored on): a ciphertext copied
    /// onto another row does not open.
    pub fn seal_bytes(&self, aad: &[u8], plain: &[u8]) -> Result<Sealed, CryptoError> {
        let nonce_bytes: [u8; 12] = rand::random();
        let nonce = Nonce::from(nonce_bytes);
        let ciphertext = self
            .cipher
            .encrypt(&nonce, Payload { msg: plain, aad })
            .map_err(|_| CryptoError::Encrypt)?;
        Ok(Sealed {
            ciphertext,
            nonce: nonce_bytes.to_vec(),
        })
    }

    pub fn open_bytes(&self, aad: &[u8], sealed: &Sealed) -> Result<Vec<u8>, CryptoError> {
        let nonce_bytes: [u8; 12] = sealed.nonce.as_slice().try_into().map_err(|_| CryptoError::Decrypt)?;
        self.cipher
            .decrypt(
                &Nonce::from(nonce_bytes),
                Payload {
                    msg: &sealed.ciphertext,
                    aad,
                },
            )
            .map_err(|_| CryptoError::Decrypt)
    }
}

/// What quarry shows instead of a secret: the last four characters and a sha256 prefix,
/// e.g. `…a1b2:0f3c9a1e`. Enough to recognise a key, useless to use it.
pub fn fingerprint(secret: &SecretString) -> String {
    let s = secret.expose_secret();
    let tail: String = {
        let chars: Vec<char> = s.chars().collect();
        let start = chars.len().saturating_sub(4);
        // Very short secrets would be revealed whole: show only the hash then.
        if chars.len() >= 12 {
            chars[start..].iter().collect()
        } else {
            String::new()
        }
    };
    let digest = hex::encode(Sha256::digest(s.as_bytes()));
    format!("…{tail}:{}", &digest[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_secrets_round_trip_only_for_their_key_id_and_master_key() {
        let cipher = SecretCipher::new([7u8; 32]);
        let id = KeyId::new();
        let secret = SecretString::from("AIzaSyExampleSecretValue1234");
        let sealed = cipher.seal(id, &secret).unwrap();
        assert!(
            !sealed.ciphertext.windows(8).any(|w| w == b"AIzaSyEx"),
            "ciphertext leaks plaintext"
        );
        assert_eq!(
            cipher.open(id, &sealed).unwrap().expose_secret(),
            secret.expose_secret()
        );
        assert!(cipher.open(KeyId::new(), &sealed).is_err(), "bound to its key id");
        assert!(
            SecretCipher::new([8u8; 32]).open(id, &sealed).is_err(),
            "bound to the master key"
        );
        let again = cipher.seal(id, &secret).unwrap();
        assert_ne!(again.nonce, sealed.nonce, "fresh nonce per seal");
    }

    #[test]
    fn fingerprints_show_a_tail_and_a_hash_prefix_only() {
        let fp = fingerprint(&SecretString::from("sk-proj-abcdefghijklmnop1234"));
        assert!(fp.starts_with("…1234:"), "{fp}");
        assert_eq!(fp.chars().count(), 1 + 4 + 1 + 8);
        let short = fingerprint(&SecretString::from("k1"));
        assert!(short.starts_with("…:"), "{short}");
    }
}
