//! Handing out keys: the queue per provider, the lanes, budgets drawn before a key is taken,
//! and the pick among eligible keys.

use super::*;

impl KeyScheduler {
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
