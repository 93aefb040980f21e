//! API tokens: made, listed, rotated and revoked through the API, and the check every request
//! bearing one goes through.
//!
//! # Decisions
//! - **The secret** is `qk_` + the token's id (32 hex digits, for the look-up) + `_` + 32 random
//!   bytes in unpadded base64url (256 bits): recognisable in a leak scan, found by id in one
//!   indexed read, and never stored — the store keeps the SHA-256 digest of the whole text,
//!   compared in constant time.
//! - **A short cache**: a verified secret is remembered for [`CACHE_TTL`] (by its digest), so a
//!   busy client costs one store read every few seconds, and a revocation or expiry reaches
//!   every replica within that time. Refusals are not remembered: a client sending made-up
//!   `qk_` secrets costs one indexed read each and cannot push real secrets out of the cache.
//! - **Last use** is written at most once a minute per token (the store's update is
//!   conditional on it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use chrono::{DateTime, Utc};
use sha2::{Digest as _, Sha256};

use super::{Invalid, Missing, ServiceError, ServiceResult};
use crate::domain::{ApiToken, Scope, TokenId, Window, WorldId};
use crate::store::Store;

/// How long a verified secret is remembered: the most a revocation takes to reach every replica.
pub const CACHE_TTL: Duration = Duration::from_secs(5);

/// The prefix every managed token's secret starts with.
pub const SECRET_PREFIX: &str = "qk_";

/// Longest token name, in chars.
pub const MAX_NAME_CHARS: usize = 200;

/// Entries the verification cache holds before it is cleared.
const CACHE_MAX: usize = 10_000;

/// Who a request is: a bootstrap token from `auth.tokens` (every scope, every world), or a
/// managed token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    Bootstrap,
    Token(ApiToken),
}

impl Principal {
    pub fn grants(&self, needed: Scope) -> bool {
        match self {
            Principal::Bootstrap => true,
            Principal::Token(token) => token.grants(needed),
        }
    }

    /// Whether the principal may touch `world`.
    pub fn sees(&self, world: WorldId) -> bool {
        match self {
            Principal::Bootstrap => true,
            Principal::Token(token) => token.sees(world),
        }
    }

    /// Whether the principal may touch every world (what global resources ask).
    pub fn sees_every_world(&self) -> bool {
        match self {
            Principal::Bootstrap => true,
            Principal::Token(token) => token.worlds.is_none(),
        }
    }

    /// The managed token's id, if it is one.
    pub fn token_id(&self) -> Option<TokenId> {
        match self {
            Principal::Bootstrap => None,
            Principal::Token(token) => Some(token.id),
        }
    }
}

/// What creating a token asks.
#[derive(Clone, Debug)]
pub struct NewToken {
    pub name: String,
    pub scopes: Vec<Scope>,
    pub worlds: Option<Vec<WorldId>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub rate_per_minute: Option<u32>,
}

/// Highest `rate_per_minute`.
pub const MAX_RATE_PER_MINUTE: u32 = 1_000_000;

/// A token's request budget on this replica: `rate_per_minute` refilled evenly, holding at
/// most ten seconds' worth (at least one request), so a client cannot save a minute's requests
/// for one burst.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn capacity(rate_per_minute: u32) -> f64 {
        (f64::from(rate_per_minute) / 6.0).max(1.0)
    }

    /// Takes one request at `now`, or says how long until one is there.
    fn take(&mut self, rate_per_minute: u32, now: Instant) -> Result<(), Duration> {
        let per_second = f64::from(rate_per_minute) / 60.0;
        let refilled = now.duration_since(self.at).as_secs_f64() * per_second;
        self.tokens = (self.tokens + refilled).min(Self::capacity(rate_per_minute));
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / per_second))
        }
    }
}

/// Verified secrets by digest: the token (`None` once revoked here) and when it was read.
type Verified = HashMap<[u8; 32], (Option<ApiToken>, Instant)>;

pub struct TokenService {
    store: Arc<dyn Store>,
    cache: Mutex<Verified>,
    buckets: Mutex<HashMap<TokenId, Bucket>>,
}

impl TokenService {
    pub fn new(deps: &crate::deps::Deps) -> Self {
        Self {
            store: deps.store.clone(),
            cache: Mutex::new(HashMap::new()),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Admits one request of `token` under its `rate_per_minute` on this replica, or says how
    /// long to wait.
    pub fn admit(&self, token: &ApiToken) -> Result<(), Duration> {
        let Some(rate) = token.rate_per_minute else {
            return Ok(());
        };
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() >= CACHE_MAX {
            buckets.retain(|_, b| now.duration_since(b.at) < Duration::from_secs(60));
        }
        let bucket = buckets.entry(token.id).or_insert(Bucket {
            tokens: Bucket::capacity(rate),
            at: now,
        });
        bucket.take(rate, now)
    }

    /// Makes a token; returns it with its secret, which is never shown again. A token made by
    /// a world-limited `creator` can reach no world the creator cannot.
    pub async fn create(&self, creator: &Principal, new: NewToken) -> ServiceResult<(ApiToken, String)> {
        let name = new.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
            return Err(ServiceError::invalid(
                Invalid::Request,
                "name",
                format!("name must be 1 to {MAX_NAME_CHARS} characters, without control characters"),
            ));
        }
        if new.rate_per_minute.is_some_and(|r| r == 0 || r > MAX_RATE_PER_MINUTE) {
            return Err(ServiceError::invalid(
                Invalid::Request,
                "rate_per_minute",
                format!("rate_per_minute must be 1 to {MAX_RATE_PER_MINUTE}"),
            ));
        }
        if new.scopes.is_empty() {
            return Err(ServiceError::invalid(
                Invalid::Request,
                "scopes",
                "scopes must name at least one scope",
            ));
        }
        if new.expires_at.is_some_and(|at| at <= Utc::now()) {
            return Err(ServiceError::Unprocessable {
                kind: super::Unprocessable::ExpiryInPast,
                message: "expires_at must be in the future".into(),
            });
        }
        let worlds = match (new.worlds, creator) {
            (Some(worlds), _) => {
                if worlds.iter().any(|w| !creator.sees(*w)) {
                    return Err(ServiceError::NotFound(Missing::World));
                }
                Some(worlds)
            }
            (None, Principal::Token(token)) => token.worlds.clone(),
            (None, Principal::Bootstrap) => None,
        };
        let mut scopes = new.scopes;
        scopes.sort_unstable();
        scopes.dedup();
        let token = ApiToken {
            id: TokenId::new(),
            name: name.to_owned(),
            scopes,
            worlds,
            created_at: Utc::now(),
            expires_at: new.expires_at,
            last_used_at: None,
            rate_per_minute: new.rate_per_minute,
        };
        let secret = secret_for(token.id);
        self.store.insert_token(&token, &digest(&secret)).await?;
        Ok((token, secret))
    }

    pub async fn list(&self, window: Window) -> ServiceResult<Vec<ApiToken>> {
        Ok(self.store.list_tokens(window).await?)
    }

    pub async fn get(&self, id: TokenId) -> ServiceResult<ApiToken> {
        self.store
            .token_credentials(id)
            .await?
            .map(|c| c.token)
            .ok_or(ServiceError::NotFound(Missing::Token))
    }

    /// Revokes a token: refused by every replica within [`CACHE_TTL`].
    pub async fn revoke(&self, id: TokenId) -> ServiceResult<()> {
        if !self.store.delete_token(id).await? {
            return Err(ServiceError::NotFound(Missing::Token));
        }
        self.forget(id);
        Ok(())
    }

    /// A new secret for a token; the current one stays accepted for `grace`.
    pub async fn rotate(&self, id: TokenId, grace: Duration) -> ServiceResult<(ApiToken, String)> {
        let token = self.get(id).await?;
        let secret = secret_for(id);
        let until = Utc::now() + chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::zero());
        if !self.store.rotate_token(id, &digest(&secret), until).await? {
            return Err(ServiceError::NotFound(Missing::Token));
        }
        self.forget(id);
        Ok((token, secret))
    }

    /// Adds a world a token created to its grant (a token limited to some worlds).
    pub async fn grant_world(&self, principal: &Principal, world: WorldId) -> ServiceResult<()> {
        if let Principal::Token(token) = principal
            && token.worlds.is_some()
        {
            self.store.grant_world(token.id, world).await?;
            self.forget(token.id);
        }
        Ok(())
    }

    /// The token a presented managed secret belongs to, if it is valid now: known, not expired,
    /// and its current secret (or the previous one, within a rotation's grace).
    pub async fn verify(&self, presented: &str) -> ServiceResult<Option<ApiToken>> {
        let Some(id) = id_of(presented) else {
            return Ok(None);
        };
        let presented_digest = digest(presented);
        let now = Instant::now();
        if let Some((token, at)) = self.lock().get(&presented_digest)
            && now.duration_since(*at) < CACHE_TTL
        {
            return Ok(token.clone().filter(|t| t.expires_at.is_none_or(|at| at > Utc::now())));
        }
        let found = self.store.token_credentials(id).await?.and_then(|c| {
            let current = same(&c.secret_sha256, &presented_digest);
            let previous = c
                .previous
                .is_some_and(|(hash, until)| until > Utc::now() && same(&hash, &presented_digest));
            let live = c.token.expires_at.is_none_or(|at| at > Utc::now());
            ((current || previous) && live).then_some(c.token)
        });
        // Only accepted secrets are remembered: refusals (made-up secrets, any number of them)
        // would otherwise fill the cache and push the real ones out.
        if let Some(token) = &found {
            self.store.touch_token(token.id, Utc::now()).await?;
            let mut cache = self.lock();
            if cache.len() >= CACHE_MAX {
                cache.clear();
            }
            cache.insert(presented_digest, (Some(token.clone()), now));
        }
        Ok(found)
    }

    fn forget(&self, id: TokenId) {
        self.lock()
            .retain(|_, (token, _)| token.as_ref().is_none_or(|t| t.id != id));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Verified> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A fresh secret for token `id`.
fn secret_for(id: TokenId) -> String {
    let random: [u8; 32] = rand::random();
    format!(
        "{SECRET_PREFIX}{}_{}",
        id.0.simple(),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random)
    )
}

/// The token id a presented secret names, if it has the managed shape.
fn id_of(presented: &str) -> Option<TokenId> {
    let rest = presented.strip_prefix(SECRET_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    if id.len() != 32 || secret.len() != 43 {
        return None;
    }
    uuid::Uuid::try_parse(id).ok().map(TokenId)
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// Constant-time equality of two digests.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{Bucket, SECRET_PREFIX, id_of, secret_for};
    use crate::domain::TokenId;

    #[test]
    fn a_bucket_holds_ten_seconds_of_requests_and_refills_evenly() {
        let start = Instant::now();
        let mut bucket = Bucket {
            tokens: Bucket::capacity(60),
            at: start,
        };
        // 60 a minute: a burst of 10, then one a second.
        for _ in 0..10 {
            assert!(bucket.take(60, start).is_ok());
        }
        let wait = bucket.take(60, start).unwrap_err();
        assert!((wait.as_secs_f64() - 1.0).abs() < 1e-6, "{wait:?}");
        assert!(bucket.take(60, start + Duration::from_millis(1000)).is_ok());
        assert!(bucket.take(60, start + Duration::from_millis(1500)).is_err());
        // A slow rate still lets one request through.
        let mut slow = Bucket {
            tokens: Bucket::capacity(1),
            at: start,
        };
        assert!(slow.take(1, start).is_ok());
        assert!(slow.take(1, start + Duration::from_secs(30)).is_err());
        assert!(slow.take(1, start + Duration::from_secs(61)).is_ok());
    }

    #[test]
    fn a_secret_names_its_token_and_holds_256_random_bits() {
        let id = TokenId::new();
        let secret = secret_for(id);
        assert!(secret.starts_with(SECRET_PREFIX));
        assert_eq!(id_of(&secret), Some(id));
        assert_ne!(secret, secret_for(id));
        assert_eq!(secret.len(), 3 + 32 + 1 + 43);
        for bad in [
            "",
            "qk_",
            "dev-token",
            &secret[..secret.len() - 1],
            &secret.replace("qk_", "qx_"),
        ] {
            assert_eq!(id_of(bad), None, "{bad}");
        }
    }
}
