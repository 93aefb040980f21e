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
//! Waiting uses `tokio::time`, so tests drive cooldowns with `tokio::time::pause()`.

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

    async fn mirror_config_keys(&self) -> store::Result<()> {
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

    /// Whether the provider has at least one key that could ever be used (enabled, not retired,
    /// secret available). Cooldowns do not matter here.
    pub fn has_eligible_key(&self, provider: ProviderKind) -> bool {
        let inner = self.shared.lock();
        inner
            .slots
            .iter()
            .any(|s| s.provider == provider && s.enabled && !s.retired && s.usable_secret())
    }

    /// Waits for a key of `provider` in `lane`, for a request of about `tokens` tokens, up to
    /// the lane's bound (`acquire_timeout` for ingestion, `query_wait` for queries).
    pub async fn acquire(&self, provider: ProviderKind, lane: Lane, tokens: u32) -> Result<KeyLease, AcquireError> {
        self.acquire_for(provider, lane, 1, tokens).await
    }

    /// [`KeyScheduler::acquire`] for a call that a provider's request budget counts as
    /// `requests` requests: Google counts each text of a batch against its per-minute requests,
    /// so a batch of 100 pays 100.
    pub async fn acquire_for(
        &self,
        provider: ProviderKind,
        lane: Lane,
        requests: u32,
        tokens: u32,
    ) -> Result<KeyLease, AcquireError> {
        let pool = self.shared.pool(provider);
        let wait = match lane {
            Lane::Query => pool.query_wait,
            Lane::Ingest(_) => pool.acquire_timeout,
        };
        self.acquire_costing(provider, lane, Cost { requests, tokens }, wait)
            .await
    }

    /// [`KeyScheduler::acquire`] with an explicit bound on the wait.
    pub async fn acquire_within(
        &self,
        provider: ProviderKind,
        lane: Lane,
        tokens: u32,
        wait: Duration,
    ) -> Result<KeyLease, AcquireError> {
        self.acquire_costing(provider, lane, Cost { requests: 1, tokens }, wait)
            .await
    }

    async fn acquire_costing(
        &self,
        provider: ProviderKind,
        lane: Lane,
        cost: Cost,
        wait: Duration,
    ) -> Result<KeyLease, AcquireError> {
        let started = Instant::now();
        let result = self.acquire_waiting(provider, lane, cost, wait).await;
        if let Some(meters) = self.shared.meters.get() {
            let outcome = match &result {
                Ok(_) => "acquired",
                Err(AcquireError::RateLimited { .. }) => "rate_limited",
                Err(AcquireError::NoEligibleKey(_)) => "no_key",
            };
            let lane = match lane {
                Lane::Query => "query",
                Lane::Ingest(_) => "ingest",
            };
            meters.observe(
                "quarry_scheduler_wait_seconds",
                &[("provider", provider.as_str()), ("lane", lane), ("outcome", outcome)],
                started.elapsed(),
            );
        }
        result
    }

    async fn acquire_waiting(
        &self,
        provider: ProviderKind,
        lane: Lane,
        cost: Cost,
        wait: Duration,
    ) -> Result<KeyLease, AcquireError> {
        let deadline = Instant::now() + wait;
        let ticket = {
            let mut inner = self.shared.lock();
            let ticket = inner.next_ticket;
            inner.next_ticket += 1;
            inner.waiters.insert(ticket, Waiter { provider, lane });
            ticket
        };
        let _guard = WaiterGuard {
            shared: &self.shared,
            ticket,
        };
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // What to do without the lock: wait (for a change, or until an instant), or draw
            // from the shared ledger first.
            let (next_change, draw) = {
                let mut inner = self.shared.lock();
                let now = Instant::now();
                if !inner
                    .slots
                    .iter()
                    .any(|s| s.provider == provider && s.enabled && !s.retired && s.usable_secret())
                {
                    return Err(AcquireError::NoEligibleKey(provider));
                }
                if is_head(&inner, ticket) {
                    let pool = self.shared.pool(provider);
                    match pick(&mut inner, &pool, provider, lane, cost, now) {
                        Pick::Key(index) => {
                            let lease = self.take(&mut inner, index, lane, cost, now);
                            drop(inner);
                            // The next waiter may now be the head.
                            self.shared.changed.notify_waiters();
                            return Ok(lease);
                        }
                        Pick::NotBefore(at) => (Some(at), None),
                        Pick::WhenReleased => (None, None),
                        Pick::Draw { budget, draws } => {
                            let overdraft = lane_overdraft(lane);
                            let draws: Vec<_> = draws
                                .into_iter()
                                .filter_map(|(dimension, amount)| {
                                    let account = inner.budgets.get_mut(&budget)?.account(dimension)?;
                                    Some((dimension, amount, account.draw(amount, overdraft, Utc::now())?))
                                })
                                .collect();
                            (None, Some((budget, draws)))
                        }
                    }
                } else {
                    (None, None)
                }
            };
            if let Some((budget, draws)) = draw {
                self.draw(&budget, draws).await;
                // Pick again with what the ledger granted (or said).
                continue;
            }
            let now = Instant::now();
            // Nothing can come back before the deadline (a spent day, a long cooldown): say so
            // now rather than wait for nothing.
            if now >= deadline || next_change.is_some_and(|at| at > deadline) {
                let retry_after = self.retry_after(provider, now);
                // Daily cooldowns end at the reset: a wait that ends there is one.
                let daily = retry_after.abs_diff(until_daily_reset(Utc::now())) <= Duration::from_secs(60);
                return Err(AcquireError::RateLimited { retry_after, daily });
            }
            let wake = next_change.map_or(deadline, |at| at.min(deadline));
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Draws from the store's ledger what a shared budget lacks, and credits what it granted
    /// (or notes until when it refused).
    async fn draw(&self, budget: &BudgetId, draws: Vec<(Dimension, f64, crate::domain::BudgetDraw)>) {
        let mut results = Vec::with_capacity(draws.len());
        for (dimension, amount, draw) in draws {
            let drawn = match self.shared.store.draw_budget(&draw).await {
                Ok(drawn) => drawn,
                Err(err) => {
                    tracing::warn!(budget = %draw.budget, error = %err, "drawing from the shared budget failed; trying again in a second");
                    crate::domain::Drawn::Refused { wait_s: Some(1.0) }
                }
            };
            results.push((dimension, amount, drawn));
        }
        let (now, now_wall) = (Instant::now(), Utc::now());
        let mut inner = self.shared.lock();
        if let Some(budget) = inner.budgets.get_mut(budget) {
            for (dimension, amount, drawn) in results {
                if let Some(account) = budget.account(dimension) {
                    account.drawn(amount, drawn, now, now_wall);
                }
            }
        }
        drop(inner);
        self.shared.changed.notify_waiters();
    }

    /// How long until some key of `provider` may be usable, for `retry_after` hints.
    fn retry_after(&self, provider: ProviderKind, now: Instant) -> Duration {
        let inner = self.shared.lock();
        let soonest = inner
            .slots
            .iter()
            .filter(|s| s.provider == provider && s.enabled && !s.retired && s.usable_secret())
            .map(|s| {
                let group = s
                    .quota_group
                    .as_ref()
                    .and_then(|g| inner.group_cooldowns.get(&(s.provider, g.clone())).copied());
                let day = inner.budgets.get(&s.budget_id()).and_then(|b| b.day_spent_until(now));
                max_instant(max_instant(s.cooldown_until, group), day).unwrap_or(now)
            })
            .min()
            .unwrap_or(now);
        soonest.saturating_duration_since(now).max(Duration::from_secs(1))
    }

    fn take(&self, inner: &mut Inner, index: usize, lane: Lane, cost: Cost, now: Instant) -> KeyLease {
        let budget_id = inner.slots[index].budget_id();
        if let Some(budget) = inner.budgets.get_mut(&budget_id) {
            budget.pay(f64::from(cost.requests.max(1)), f64::from(cost.tokens), now);
        }
        let slot = &mut inner.slots[index];
        slot.in_flight += 1;
        slot.requests += 1;
        slot.last_used = Some(now);
        let key = slot.secret.clone().map(|secret| ApiKey { id: slot.id, secret });
        let (id, provider) = (slot.id, slot.provider);
        if let Lane::Ingest(world) = lane {
            inner.serve_seq += 1;
            let seq = inner.serve_seq;
            inner.world_served.insert(world, seq);
        }
        KeyLease {
            shared: self.shared.clone(),
            slot: id,
            provider,
            key,
            done: false,
        }
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

/// Removes a waiter when its `acquire` returns or is dropped, and wakes the others.
struct WaiterGuard<'a> {
    shared: &'a Shared,
    ticket: u64,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.shared.lock().waiters.remove(&self.ticket);
        self.shared.changed.notify_waiters();
    }
}

enum Pick {
    Key(usize),
    /// Nothing now; something may become usable at this instant (cooldown end, budget refill).
    NotBefore(Instant),
    /// Nothing until a lease is released.
    WhenReleased,
    /// The best key's budget is shared and lacks credit: draw these from the store's ledger.
    Draw {
        budget: BudgetId,
        draws: Shortfalls,
    },
}

/// How far a lane may overdraw a budget, as a share of a minute's worth.
fn lane_overdraft(lane: Lane) -> f64 {
    match lane {
        Lane::Query => QUERY_OVERDRAFT,
        Lane::Ingest(_) => 0.0,
    }
}

/// Whether `ticket` is first in its provider's queue: queries by arrival, then ingestion by
/// the world served least recently, then arrival.
fn is_head(inner: &Inner, ticket: u64) -> bool {
    let Some(me) = inner.waiters.get(&ticket) else {
        return false;
    };
    let rank = |t: u64, w: &Waiter| -> (u8, u64, u64) {
        match w.lane {
            Lane::Query => (0, 0, t),
            Lane::Ingest(world) => (1, inner.world_served.get(&world).copied().unwrap_or(0), t),
        }
    };
    let mine = rank(ticket, me);
    inner
        .waiters
        .iter()
        .filter(|(_, w)| w.provider == me.provider)
        .all(|(t, w)| rank(*t, w) >= mine)
}

/// What a call costs the budgets: requests as the provider counts them, and tokens.
#[derive(Clone, Copy, Debug)]
struct Cost {
    requests: u32,
    tokens: u32,
}

fn pick(inner: &mut Inner, pool: &PoolConfig, provider: ProviderKind, lane: Lane, cost: Cost, now: Instant) -> Pick {
    let (requests, tokens) = (f64::from(cost.requests.max(1)), cost.tokens);
    let in_flight_limit = match lane {
        Lane::Query => pool.max_in_flight_per_key + 1,
        Lane::Ingest(_) => pool.max_in_flight_per_key,
    };
    let overdraft = lane_overdraft(lane);
    let quotas = Quotas {
        requests_per_minute: pool.requests_per_minute,
        tokens_per_minute: pool.tokens_per_minute,
        requests_per_day: pool.requests_per_day,
        shared: pool.shared_budgets,
    };
    // Keys are ranked by fewest in flight, then least recently used (never used first).
    type Rank = (usize, Option<Instant>);
    let mut best: Option<(usize, Rank)> = None;
    // The best key whose shared budget must draw from the ledger first.
    let mut best_draw: Option<(usize, Rank, Shortfalls)> = None;
    let mut soonest: Option<Instant> = None;
    for index in 0..inner.slots.len() {
        let slot = &inner.slots[index];
        if slot.provider != provider || !slot.enabled || slot.retired || !slot.usable_secret() {
            continue;
        }
        let group_cooldown = slot
            .quota_group
            .as_ref()
            .and_then(|g| inner.group_cooldowns.get(&(provider, g.clone())).copied());
        if let Some(until) = max_instant(slot.cooldown_until, group_cooldown)
            && until > now
        {
            soonest = Some(soonest.map_or(until, |s| s.min(until)));
            continue;
        }
        if slot.in_flight >= in_flight_limit {
            continue;
        }
        let budget_id = slot.budget_id();
        let budget = inner
            .budgets
            .entry(budget_id)
            .or_insert_with_key(|id| Budget::new(id, quotas, now));
        let draws = match budget.check(requests, f64::from(tokens), overdraft, now) {
            BudgetCheck::Pay => None,
            BudgetCheck::NotBefore(at) => {
                soonest = Some(soonest.map_or(at, |s| s.min(at)));
                continue;
            }
            BudgetCheck::Draw(draws) => Some(draws),
        };
        let slot = &inner.slots[index];
        let rank: Rank = (slot.in_flight, slot.last_used);
        match draws {
            None => {
                if best.is_none_or(|(_, best)| rank < best) {
                    best = Some((index, rank));
                }
            }
            Some(draws) => {
                if best_draw.as_ref().is_none_or(|(_, best, _)| rank < *best) {
                    best_draw = Some((index, rank, draws));
                }
            }
        }
    }
    match (best, best_draw, soonest) {
        (Some((index, _)), _, _) => Pick::Key(index),
        (None, Some((index, _, draws)), _) => Pick::Draw {
            budget: inner.slots[index].budget_id(),
            draws,
        },
        (None, None, Some(at)) => Pick::NotBefore(at),
        (None, None, None) => Pick::WhenReleased,
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

impl KeyLease {
    /// Records one provider call's time with its outcome (`quarry_provider_request_duration_seconds`).
    pub(super) fn record_call(&self, model: &str, outcome: &Outcome, elapsed: Duration) {
        let Some(meters) = self.shared.meters.get() else {
            return;
        };
        let outcome = match outcome {
            Outcome::Success => "ok",
            Outcome::RateLimited { .. } => "rate_limited",
            Outcome::Retire { .. } => "key_rejected",
            Outcome::Failed => "failed",
            Outcome::Unused => "unused",
        };
        meters.observe(
            "quarry_provider_request_duration_seconds",
            &[
                ("provider", self.provider.as_str()),
                ("model", model),
                ("outcome", outcome),
            ],
            elapsed,
        );
    }

    /// The key to send (`None` for the local model).
    pub fn key(&self) -> Option<&ApiKey> {
        self.key.as_ref()
    }

    pub fn key_id(&self) -> KeyId {
        self.slot
    }

    /// Reports how the request went: updates the key's counters, cools it (or its quota
    /// group) down after a rate limit, retires it after a rejection, and persists both.
    pub async fn finish(mut self, outcome: Outcome) {
        self.done = true;
        let shared = self.shared.clone();
        let now = Instant::now();
        let mut persist: Option<Persist> = None;
        {
            let mut inner = shared.lock();
            let mut group_cooldown: Option<(ProviderKind, String, Instant)> = None;
            let mut paused_budget: Option<(BudgetId, Duration)> = None;
            if let Some(slot) = inner.slots.iter_mut().find(|s| s.id == self.slot) {
                slot.in_flight = slot.in_flight.saturating_sub(1);
                match &outcome {
                    Outcome::Success => {
                        slot.rate_limit_streak = 0;
                    }
                    Outcome::Unused => {
                        slot.requests = slot.requests.saturating_sub(1);
                    }
                    Outcome::Failed => {
                        slot.failures += 1;
                    }
                    Outcome::RateLimited { retry_after, scope } => {
                        slot.rate_limited += 1;
                        slot.rate_limit_streak += 1;
                        let length = match scope {
                            RateLimitScope::Daily => until_daily_reset(Utc::now()),
                            RateLimitScope::Short => retry_after.unwrap_or_else(|| backoff(slot.rate_limit_streak)),
                        };
                        let until = now + length;
                        paused_budget = Some((slot.budget_id(), length));
                        let wall = Utc::now() + chrono::Duration::from_std(length).unwrap_or(chrono::Duration::zero());
                        match slot.quota_group.clone() {
                            Some(group) => {
                                group_cooldown = Some((slot.provider, group.clone(), until));
                                persist = Some(Persist::Group {
                                    provider: slot.provider,
                                    group,
                                    until: wall,
                                });
                            }
                            None => {
                                slot.cooldown_until = max_instant(slot.cooldown_until, Some(until));
                                persist = Some(Persist::Key {
                                    id: slot.id,
                                    until: Some(wall),
                                    streak: slot.rate_limit_streak,
                                });
                            }
                        }
                        tracing::warn!(
                            key_id = %slot.id, provider = %slot.provider, group = slot.quota_group.as_deref().unwrap_or("-"),
                            cooldown_s = length.as_secs_f64(), "provider key rate limited; cooling down"
                        );
                    }
                    Outcome::Retire { reason } => {
                        slot.failures += 1;
                        slot.retired = true;
                        slot.retired_reason = Some(reason.clone());
                        persist = Some(Persist::Retire {
                            id: slot.id,
                            reason: reason.clone(),
                        });
                        tracing::error!(key_id = %slot.id, provider = %slot.provider, %reason, "provider key retired");
                    }
                }
            }
            if let Some((provider, group, until)) = group_cooldown {
                let entry = inner.group_cooldowns.entry((provider, group)).or_insert(until);
                *entry = (*entry).max(until);
            }
            if let Some((id, pause)) = paused_budget
                && let Some(b) = inner.budgets.get_mut(&id).and_then(|b| b.requests.as_mut())
            {
                b.hold_for(now, pause);
            }
        }
        shared.changed.notify_waiters();
        if self.slot == LOCAL_SLOT {
            return;
        }
        let store = &shared.store;
        let result = match persist {
            None => Ok(()),
            Some(Persist::Key { id, until, streak }) => store.set_key_cooldown(id, until, streak, Utc::now()).await,
            Some(Persist::Group { provider, group, until }) => {
                store.extend_group_cooldown(provider, &group, until).await
            }
            Some(Persist::Retire { id, reason }) => store.retire_key(id, &reason, Utc::now()).await,
        };
        if let Err(err) = result {
            tracing::error!(error = %err, "persisting a provider key's state failed; it holds in this process only");
        }
    }
}

enum Persist {
    Key {
        id: KeyId,
        until: Option<DateTime<Utc>>,
        streak: u32,
    },
    Group {
        provider: ProviderKind,
        group: String,
        until: DateTime<Utc>,
    },
    Retire {
        id: KeyId,
        reason: String,
    },
}

impl Drop for KeyLease {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        {
            let mut inner = self.shared.lock();
            if let Some(slot) = inner.slots.iter_mut().find(|s| s.id == self.slot) {
                slot.in_flight = slot.in_flight.saturating_sub(1);
            }
        }
        self.shared.changed.notify_waiters();
    }
}

/// Adapts how many items go into one batch request. Google counts every item of a batch
/// against the per-minute quota, so a batch that hits a rate limit (or is refused as too
/// large) is halved — down to single items — instead of being retried unchanged; after
/// successes the size grows back gradually.
#[derive(Debug)]
pub struct BatchSizer {
    max: usize,
    current: Mutex<usize>,
}

impl BatchSizer {
    pub fn new(max: usize) -> Self {
        let max = max.max(1);
        Self {
            max,
            current: Mutex::new(max),
        }
    }

    /// How many items the next batch may carry.
    pub fn size(&self) -> usize {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A batch of `len` items was rate limited or refused as too large: halve.
    pub fn shrink(&self, len: usize) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        *current = (len.min(*current) / 2).max(1);
    }

    /// A batch went through: grow by a quarter (at least one), up to the maximum.
    pub fn grow(&self) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        *current = (*current + (*current / 4).max(1)).min(self.max);
    }
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
    fn batch_sizes_halve_on_limits_and_recover_gradually() {
        let s = BatchSizer::new(100);
        assert_eq!(s.size(), 100);
        s.shrink(100);
        assert_eq!(s.size(), 50);
        s.shrink(50);
        s.shrink(25);
        assert_eq!(s.size(), 12);
        for _ in 0..3 {
            s.shrink(1);
        }
        assert_eq!(s.size(), 1);
        s.grow();
        assert_eq!(s.size(), 2);
        for _ in 0..40 {
            s.grow();
        }
        assert_eq!(s.size(), 100);
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
