//! The provider key scheduler: hands out API keys so that many keys are used evenly, rate
//! limits are respected instead of provoked, and retrieval never waits behind ingestion.
//!
//! **Pools.** One pool per provider, built from configuration keys (mirrored into the store so
//! their state persists) and keys added through the API (secrets sealed with the master key).
//! The local model has no keys: its pool is one synthetic slot whose in-flight limit is the
//! model's concurrency.
//!
//! **Selection.** A key is eligible when it is enabled, not retired, neither it nor its quota
//! group is cooling down, it has room under its in-flight limit (ingestion only), and its
//! client-side budget (requests and tokens per minute, shared by a quota group) can pay for the
//! request. A budget is a sliding window that lets a second's worth through in any 1.02 s
//! (`budget.rs`), so a told quota is paced evenly from the first request rather than spent in a
//! burst; after a rate limit nothing goes until the cooldown ends. On PostgreSQL the windows
//! are the deployment's, kept in the store and shared by every replica: the head of the queue
//! draws a request's cost from the store's ledger before taking the key. Among eligible keys:
//! fewest in flight, then least recently used.
//!
//! **Who goes first.** Callers wait in one queue per provider. Queries for `/retrieve` (the
//! priority lane) are served before any waiting ingestion work, may use one slot above the
//! in-flight limit and may borrow a tenth of a minute's worth of budget from the spans ahead,
//! which ingestion (on every replica, with shared budgets) then waits out — so a query is never
//! queued behind ingestion. Ingestion waiters are
//! served round-robin by world (the world served least recently goes first), so one large
//! upload cannot starve another world. Only the head of the queue may take a key; everyone
//! else waits to be woken.
//!
//! **Outcomes.** A rate limit cools the key down — or its whole quota group, since keys of one
//! Google project share one quota — for the provider's hint, else an exponential backoff with
//! jitter (capped), or until the daily reset for per-day quotas. A rejected key (invalid,
//! leaked, blocked, no quota) is retired until re-enabled. Both are written to the store, and
//! [`KeyScheduler::refresh`] (run periodically) merges what other replicas wrote, so a restart
//! or another quarry process on the same database respects them. Rate limits never count as a
//! chunk attempt: that is the caller's rule, and [`Outcome`] makes it visible.
//!
//! The code is split by concern: `sync.rs` keeps the pools in step with the store, `acquire.rs`
//! picks and hands out keys, `lease.rs` finishes a lease and records its outcome, `batch.rs` sizes
//! the workers' batches.
//!
//! Waiting uses `tokio::time`, so tests drive cooldowns with `tokio::time::pause()`.

mod acquire;
mod batch;
mod lease;
mod sync;

pub use batch::BatchSizer;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use secrecy::SecretString;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::budget::{Budget, BudgetCheck, BudgetId, Dimension, Quotas, Shortfalls, until_daily_reset};
use super::{ApiKey, ProviderError, RateLimitScope};
use crate::config::SchedulingSettings;
use crate::crypto::{self, Sealed, SecretCipher};
use crate::domain::{KeyId, KeyOrigin, NewKey, ProviderKind, StoredKey, WorldId};
use crate::store::{self, Store};
/// First cooldown after a rate limit without a hint; doubles per consecutive rate limit.
const BACKOFF_BASE: Duration = Duration::from_secs(2);
/// Longest cooldown from backoff alone (hints and daily quotas may be longer).
const BACKOFF_CAP: Duration = Duration::from_secs(300);
/// Queries may overdraw a budget by this share of a minute's worth (ingestion never does), so
/// a query is not held back by ingestion's pacing; ingestion then waits until the debt is
/// repaid, so the long-run rate stays within the budget.
const QUERY_OVERDRAFT: f64 = 0.1;
/// The synthetic key id of the local model's slot.
const LOCAL_SLOT: KeyId = KeyId(uuid::Uuid::nil());

/// Which lane a request travels in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// A `/retrieve` query: served first.
    Query,
    /// Ingestion work for a world: shared fairly between worlds.
    Ingest(WorldId),
}

/// Why no key was handed out.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AcquireError {
    /// Keys exist but none became usable within the wait; try again after `retry_after`.
    /// `daily`: the soonest key back is out of its daily quota (it comes back at the reset).
    #[error("every eligible key is busy or cooling down (retry after {retry_after:?})")]
    RateLimited { retry_after: Duration, daily: bool },
    /// No enabled, unretired key exists for the provider.
    #[error("no eligible {0} key")]
    NoEligibleKey(ProviderKind),
}

/// How a request ended, as far as its key is concerned.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Success,
    RateLimited {
        retry_after: Option<Duration>,
        scope: RateLimitScope,
    },
    /// Retire the key until an operator re-enables it.
    Retire {
        reason: String,
    },
    /// The request failed for a reason that says something about the provider, not the key.
    Failed,
    /// Nothing was learned (e.g. the caller gave up before sending).
    Unused,
}

impl Outcome {
    /// The key-relevant part of a provider result.
    pub fn of<T>(result: &Result<T, ProviderError>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(err) => match err {
                ProviderError::RateLimited { retry_after, scope, .. } => Outcome::RateLimited {
                    retry_after: *retry_after,
                    scope: *scope,
                },
                ProviderError::KeyRejected { message } => Outcome::Retire {
                    reason: format!("key rejected: {message}"),
                },
                ProviderError::QuotaExhausted { message } => Outcome::Retire {
                    reason: format!("quota exhausted: {message}"),
                },
                ProviderError::Transient { .. }
                | ProviderError::Malformed { .. }
                | ProviderError::Unavailable { .. } => Outcome::Failed,
                ProviderError::Permanent { .. }
                | ProviderError::InputTooLarge { .. }
                | ProviderError::TokenCountFailed { .. } => Outcome::Success,
            },
        }
    }
}

/// Scheduling limits of one provider.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    pub max_in_flight_per_key: usize,
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
    pub requests_per_day: Option<u32>,
    pub acquire_timeout: Duration,
    pub query_wait: Duration,
    /// Per-minute budgets live in the store's ledger, shared by every replica on the store
    /// (see `budget.rs`), instead of in this process.
    pub shared_budgets: bool,
}

impl From<&SchedulingSettings> for PoolConfig {
    fn from(s: &SchedulingSettings) -> Self {
        Self {
            max_in_flight_per_key: s.max_in_flight_per_key,
            requests_per_minute: s.requests_per_minute,
            tokens_per_minute: s.tokens_per_minute,
            requests_per_day: s.requests_per_day,
            acquire_timeout: Duration::from_secs(s.acquire_timeout_s),
            query_wait: Duration::from_secs(s.query_wait_s),
            shared_budgets: false,
        }
    }
}

/// A configuration key handed to the scheduler at startup.
#[derive(Clone)]
pub struct ConfigKey {
    pub provider: ProviderKind,
    pub secret: SecretString,
    pub quota_group: Option<String>,
}

/// A snapshot of one key for `GET /v1/providers` and `/metrics`. No secret.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyStatus {
    pub key_id: KeyId,
    pub provider: ProviderKind,
    pub label: String,
    pub fingerprint: String,
    pub origin: KeyOrigin,
    pub enabled: bool,
    pub retired: bool,
    pub retired_reason: Option<String>,
    pub quota_group: Option<String>,
    pub cooling_down_until: Option<DateTime<Utc>>,
    pub in_flight: usize,
    pub requests: u64,
    pub rate_limited: u64,
    pub failures: u64,
}

struct Slot {
    id: KeyId,
    provider: ProviderKind,
    label: String,
    origin: KeyOrigin,
    quota_group: Option<String>,
    fingerprint: String,
    /// `None` for the local slot, and for API keys whose secret cannot be decrypted (then the
    /// slot is never eligible).
    secret: Option<SecretString>,
    decrypt_failed: bool,
    enabled: bool,
    retired: bool,
    retired_reason: Option<String>,
    cooldown_until: Option<Instant>,
    /// Consecutive rate limits: drives the backoff when no hint is given.
    rate_limit_streak: u32,
    in_flight: usize,
    last_used: Option<Instant>,
    requests: u64,
    rate_limited: u64,
    failures: u64,
}

impl Slot {
    fn budget_id(&self) -> BudgetId {
        match &self.quota_group {
            Some(group) => BudgetId::Group(self.provider, group.clone()),
            None => BudgetId::Key(self.id),
        }
    }

    fn usable_secret(&self) -> bool {
        self.secret.is_some() || self.id == LOCAL_SLOT
    }
}

struct Waiter {
    provider: ProviderKind,
    lane: Lane,
}

#[derive(Default)]
struct Inner {
    slots: Vec<Slot>,
    group_cooldowns: HashMap<(ProviderKind, String), Instant>,
    budgets: HashMap<BudgetId, Budget>,
    waiters: std::collections::BTreeMap<u64, Waiter>,
    next_ticket: u64,
    /// World → sequence number of the last time one of its waiters was served.
    world_served: HashMap<WorldId, u64>,
    serve_seq: u64,
}

/// Shared state behind [`KeyScheduler`] and its leases.
struct Shared {
    inner: Mutex<Inner>,
    changed: Notify,
    pools: HashMap<ProviderKind, PoolConfig>,
    store: Arc<dyn Store>,
    cipher: Option<SecretCipher>,
    config_keys: Vec<ConfigKey>,
    /// Where waits and provider call times are recorded (set once by the app).
    meters: std::sync::OnceLock<crate::meters::Metrics>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn pool(&self, provider: ProviderKind) -> PoolConfig {
        self.pools.get(&provider).cloned().unwrap_or(PoolConfig {
            max_in_flight_per_key: 1,
            requests_per_minute: None,
            tokens_per_minute: None,
            requests_per_day: None,
            acquire_timeout: Duration::from_secs(30),
            query_wait: Duration::from_secs(5),
            shared_budgets: false,
        })
    }
}

/// See the module docs.
#[derive(Clone)]
pub struct KeyScheduler {
    shared: Arc<Shared>,
}

/// A key on loan. Report how the request went with [`KeyLease::finish`]; dropping the lease
/// without finishing releases the slot and records nothing.
pub struct KeyLease {
    shared: Arc<Shared>,
    slot: KeyId,
    provider: ProviderKind,
    key: Option<ApiKey>,
    done: bool,
}

impl std::fmt::Debug for KeyLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyLease")
            .field("slot", &self.slot)
            .field("provider", &self.provider)
            .finish()
    }
}

impl KeyScheduler {
    /// Builds the scheduler: mirrors configuration keys into the store and loads every key
    /// with its persisted state. `local_concurrency` sizes the local model's slot.
    pub async fn new(
        store: Arc<dyn Store>,
        cipher: Option<SecretCipher>,
        config_keys: Vec<ConfigKey>,
        pools: HashMap<ProviderKind, PoolConfig>,
        local_concurrency: usize,
    ) -> store::Result<Self> {
        let mut pools = pools;
        pools.insert(
            ProviderKind::Local,
            PoolConfig {
                max_in_flight_per_key: local_concurrency.max(1),
                requests_per_minute: None,
                tokens_per_minute: None,
                requests_per_day: None,
                acquire_timeout: Duration::from_secs(600),
                query_wait: Duration::from_secs(60),
                shared_budgets: false,
            },
        );
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner::default()),
            changed: Notify::new(),
            pools,
            store,
            cipher,
            config_keys,
            meters: std::sync::OnceLock::new(),
        });
        let scheduler = Self { shared };
        {
            let mut inner = scheduler.shared.lock();
            inner.slots.push(Slot {
                id: LOCAL_SLOT,
                provider: ProviderKind::Local,
                label: "local model".into(),
                origin: KeyOrigin::Config,
                quota_group: None,
                fingerprint: String::new(),
                secret: None,
                decrypt_failed: false,
                enabled: true,
                retired: false,
                retired_reason: None,
                cooldown_until: None,
                rate_limit_streak: 0,
                in_flight: 0,
                last_used: None,
                requests: 0,
                rate_limited: 0,
                failures: 0,
            });
        }
        scheduler.mirror_config_keys().await?;
        scheduler.refresh().await?;
        Ok(scheduler)
    }

    /// Keys that cannot be used whatever their stored state says, with the reason: an API key
    /// whose secret does not decrypt with the configured master key (changed or lost), a
    /// configuration key that left the configuration.
    pub fn secret_problems(&self) -> HashMap<KeyId, &'static str> {
        let inner = self.shared.lock();
        inner
            .slots
            .iter()
            .filter(|s| s.id != LOCAL_SLOT && s.secret.is_none())
            .map(|s| {
                let reason = match s.origin {
                    _ if s.decrypt_failed => {
                        "the secret cannot be decrypted with the configured security.master_key (was it changed?); \
                         add the key again or restore the old master key"
                    }
                    KeyOrigin::Config => "the key is no longer in the configuration",
                    KeyOrigin::Api => "the secret is not available",
                };
                (s.id, reason)
            })
            .collect()
    }

    /// Records waits and provider call times into `meters` from now on.
    pub fn set_meters(&self, meters: crate::meters::Metrics) {
        let _ = self.shared.meters.set(meters);
    }

    /// Provider requests in flight in this process, over every key.
    pub fn in_flight(&self) -> usize {
        self.shared.lock().slots.iter().map(|s| s.in_flight).sum()
    }

    /// The most texts one request to `provider` should carry when its request budget counts
    /// each text (Google): what a per-minute budget's window holds (a second's worth), and no
    /// more than the day allows. `None` without a request budget.
    pub fn max_texts_per_request(&self, provider: ProviderKind) -> Option<usize> {
        let pool = self.shared.pool(provider);
        let minute = (pool.requests_per_minute).map(|n| crate::domain::WindowRule::per_minute(n).capacity as usize);
        let day = pool.requests_per_day.map(|n| n as usize);
        [minute, day].into_iter().flatten().min().map(|n| n.max(1))
    }

    /// Every key with its live state (the local slot excluded).
    pub fn status(&self) -> Vec<KeyStatus> {
        let inner = self.shared.lock();
        let now = Instant::now();
        let now_wall = Utc::now();
        let wall = |at: Option<Instant>| -> Option<DateTime<Utc>> {
            let at = at?;
            let left = at.checked_duration_since(now)?;
            chrono::Duration::from_std(left).ok().map(|d| now_wall + d)
        };
        inner
            .slots
            .iter()
            .filter(|s| s.id != LOCAL_SLOT)
            .map(|s| {
                let group = s
                    .quota_group
                    .as_ref()
                    .and_then(|g| inner.group_cooldowns.get(&(s.provider, g.clone())).copied());
                KeyStatus {
                    key_id: s.id,
                    provider: s.provider,
                    label: s.label.clone(),
                    fingerprint: s.fingerprint.clone(),
                    origin: s.origin,
                    enabled: s.enabled,
                    retired: s.retired,
                    retired_reason: if s.decrypt_failed {
                        Some("secret cannot be decrypted with the configured master key".into())
                    } else {
                        s.retired_reason.clone()
                    },
                    quota_group: s.quota_group.clone(),
                    cooling_down_until: wall(max_instant(s.cooldown_until, group)),
                    in_flight: s.in_flight,
                    requests: s.requests,
                    rate_limited: s.rate_limited,
                    failures: s.failures,
                }
            })
            .collect()
    }
}

fn max_instant(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Backoff for the `streak`-th consecutive rate limit without a hint: 2 s, 4 s, 8 s … capped
/// at 5 min, with ±20 % jitter so keys cooled together do not all return at once.
fn backoff(streak: u32) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(1u32 << streak.saturating_sub(1).min(16));
    let capped = exp.min(BACKOFF_CAP);
    let jitter: f64 = rand::random_range(0.8..1.2);
    capped.mul_f64(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        for _ in 0..20 {
            let first = backoff(1);
            assert!(first >= Duration::from_millis(1600) && first <= Duration::from_millis(2400));
            let third = backoff(3);
            assert!(third >= Duration::from_millis(6400) && third <= Duration::from_millis(9600));
            assert!(backoff(30) <= BACKOFF_CAP.mul_f64(1.2));
        }
    }

    #[test]
    fn outcomes_never_blame_the_key_for_the_input() {
        let of = |e: ProviderError| Outcome::of::<()>(&Err(e));
        assert_eq!(
            of(ProviderError::InputTooLarge {
                tokens: 3000,
                limit: 2048
            }),
            Outcome::Success
        );
        assert!(matches!(
            of(ProviderError::KeyRejected { message: "x".into() }),
            Outcome::Retire { .. }
        ));
        assert!(matches!(
            of(ProviderError::QuotaExhausted { message: "x".into() }),
            Outcome::Retire { .. }
        ));
        assert_eq!(of(ProviderError::Transient { message: "x".into() }), Outcome::Failed);
        assert!(matches!(
            of(ProviderError::RateLimited {
                retry_after: None,
                scope: RateLimitScope::Short,
                message: String::new()
            }),
            Outcome::RateLimited { .. }
        ));
    }
}
