//! Finishing a lease: its outcome applied to the key (cooldowns, retirement) and persisted.

use super::*;

impl KeyLease {
    /// Records one provider call's time with its outcome (`quarry_provider_request_duration_seconds`).
    pub(in crate::providers) fn record_call(&self, model: &str, outcome: &Outcome, elapsed: Duration) {
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
