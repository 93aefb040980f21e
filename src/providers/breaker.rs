//! # Circuit breakers: a provider outage does not burn attempts
//!
//! One breaker per provider and model, in each process. A transient failure (5xx, "model is
//! overloaded", a timeout, a reset connection) says nothing about the chunks that were sent, so
//! it costs them no attempt: they go back to the queue after a short, jittered backoff. A run of
//! such failures *opens* the breaker: while it is open no worker of this process calls the
//! provider for that model, claimed work goes back until it closes, and the lane waits out a
//! pause that doubles with every opening in a row (jittered, capped). When the pause ends one
//! batch goes through as a probe (*half open*); its success closes the breaker, its failure opens
//! it again for longer.
//!
//! Only failures tied to the input spend attempts, plus, as a last resort, transient failures
//! after the provider has failed without a single success for `failure_budget` (default 30 min):
//! an outage that long is reported as failed chunks, which a client can retry.
//!
//! Breakers are per process: replicas learn about an outage each from its own calls (a few
//! failed calls each, no attempt spent). `GET /v1/providers` shows this process's breakers.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::config::BreakerSettings;
use crate::domain::ProviderKind;

/// When breakers open and how long they stay open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Transient failures in a row that open the breaker.
    pub failures_to_open: u32,
    /// The first pause; each opening in a row doubles it.
    pub open_for: Duration,
    /// The longest pause.
    pub max_open_for: Duration,
    /// How long a provider may fail without a success before transient failures spend attempts.
    pub failure_budget: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self::from(&BreakerSettings::default())
    }
}

impl From<&BreakerSettings> for BreakerConfig {
    fn from(settings: &BreakerSettings) -> Self {
        let secs = |s: f64| Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX);
        Self {
            failures_to_open: settings.failures_to_open,
            open_for: secs(settings.open_s),
            max_open_for: secs(settings.max_open_s),
            failure_budget: secs(settings.failure_budget_s),
        }
    }
}

/// What a worker may do with a batch for a provider and model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Call the provider (a closed breaker, or this batch is the half-open probe).
    Call,
    /// Do not call it before this time; the work goes back until then.
    Wait { until: Instant },
}

/// What a transient failure costs the chunks that met it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No attempt: back to the queue, due after this backoff.
    GiveBack { after: Duration, opened: bool },
    /// The provider has failed for longer than the budget: spend an attempt as before.
    SpendAttempt,
}

/// Where a breaker stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go through (it may have failed since its last success).
    Closed,
    /// No call before `open_until`.
    Open,
    /// The pause is over: one probe call decides.
    HalfOpen,
}

/// A breaker's state as `GET /v1/providers` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct BreakerView {
    pub provider: ProviderKind,
    pub model: String,
    pub state: BreakerState,
    pub failures_in_row: u32,
    /// When an open breaker lets a probe through.
    pub open_until: Option<DateTime<Utc>>,
    /// Since when the provider has failed without a success.
    pub failing_since: Option<DateTime<Utc>>,
}

#[derive(Debug, Default)]
struct Breaker {
    failures_in_row: u32,
    /// The first failure after the last success.
    failing_since: Option<(Instant, DateTime<Utc>)>,
    /// Openings in a row (the pause doubles with each).
    openings: u32,
    open_until: Option<Instant>,
    /// A probe is out (since then): others wait for its outcome, or until it is
    /// [`PROBE_LOST`] old (a probe whose worker died tells nothing).
    probing: Option<Instant>,
}

/// How long a probe's outcome is waited for before another may go.
const PROBE_LOST: Duration = Duration::from_secs(60);

/// The breakers of one process, by provider and model.
#[derive(Debug)]
pub struct Breakers {
    config: BreakerConfig,
    state: Mutex<HashMap<(ProviderKind, String), Breaker>>,
}

impl Breakers {
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            config,
            state: Mutex::new(HashMap::new()),
        }
    }

    fn with<T>(&self, provider: ProviderKind, model: &str, f: impl FnOnce(&mut Breaker) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let breaker = state.entry((provider, model.to_owned())).or_default();
        f(breaker)
    }

    /// May a batch for `provider` and `model` be sent now?
    pub fn gate(&self, provider: ProviderKind, model: &str, now: Instant) -> Gate {
        self.with(provider, model, |b| match b.open_until {
            None => Gate::Call,
            Some(until) if now < until => Gate::Wait { until },
            // The pause is over: one probe goes through, the others wait a little for it.
            Some(_) if b.probing.is_some_and(|since| now.duration_since(since) < PROBE_LOST) => Gate::Wait {
                until: now + self.config.open_for.min(Duration::from_secs(5)),
            },
            Some(_) => {
                b.probing = Some(now);
                Gate::Call
            }
        })
    }

    /// A call went through: the breaker closes and the failure run ends.
    pub fn success(&self, provider: ProviderKind, model: &str) {
        self.with(provider, model, |b| *b = Breaker::default());
    }

    /// A call ended without telling anything about the provider's health (a rate limit, a key
    /// refused, an input refused): a probe that ended so lets the next one through.
    pub fn inconclusive(&self, provider: ProviderKind, model: &str) {
        self.with(provider, model, |b| b.probing = None);
    }

    /// A call failed transiently. Returns what that costs the chunks.
    pub fn failure(&self, provider: ProviderKind, model: &str, now: Instant, wall: DateTime<Utc>) -> Verdict {
        let config = self.config;
        self.with(provider, model, |b| {
            let since = b.failing_since.get_or_insert((now, wall)).0;
            b.failures_in_row = b.failures_in_row.saturating_add(1);
            let probe_failed = b.probing.take().is_some();
            let mut opened = false;
            if probe_failed || (b.open_until.is_none() && b.failures_in_row >= config.failures_to_open) {
                let pause = jittered(doubled(config.open_for, b.openings).min(config.max_open_for));
                b.open_until = Some(now + pause);
                b.openings = b.openings.saturating_add(1);
                opened = true;
            }
            if now.duration_since(since) >= config.failure_budget {
                return Verdict::SpendAttempt;
            }
            let after = match b.open_until {
                Some(until) if until > now => until - now,
                // Closed: a short backoff that grows with the run, jittered.
                _ => jittered(doubled(Duration::from_millis(500), b.failures_in_row - 1).min(config.open_for)),
            };
            Verdict::GiveBack { after, opened }
        })
    }

    /// Every breaker that has seen a failure since its last success.
    pub fn views(&self, now: Instant, wall: DateTime<Utc>) -> Vec<BreakerView> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut views: Vec<BreakerView> = state
            .iter()
            .filter(|(_, b)| b.failing_since.is_some() || b.open_until.is_some())
            .map(|((provider, model), b)| {
                let (state, open_until) = match b.open_until {
                    Some(until) if until > now => (BreakerState::Open, Some(until)),
                    Some(_) => (BreakerState::HalfOpen, None),
                    None => (BreakerState::Closed, None),
                };
                let at = |t: Instant| wall + chrono::Duration::from_std(t - now).unwrap_or_default();
                BreakerView {
                    provider: *provider,
                    model: model.clone(),
                    state,
                    failures_in_row: b.failures_in_row,
                    open_until: open_until.map(at),
                    failing_since: b.failing_since.map(|(_, since)| since),
                }
            })
            .collect();
        views.sort_by(|a, b| (a.provider.as_str(), &a.model).cmp(&(b.provider.as_str(), &b.model)));
        views
    }
}

fn doubled(base: Duration, times: u32) -> Duration {
    base.saturating_mul(2u32.saturating_pow(times.min(20)))
}

/// ±20 %, so that workers and replicas do not all come back at once.
fn jittered(d: Duration) -> Duration {
    d.mul_f64(rand::random_range(0.8..1.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: ProviderKind = ProviderKind::Google;

    fn breakers(failures_to_open: u32, budget_s: u64) -> Breakers {
        Breakers::new(BreakerConfig {
            failures_to_open,
            open_for: Duration::from_secs(10),
            max_open_for: Duration::from_secs(40),
            failure_budget: Duration::from_secs(budget_s),
        })
    }

    #[test]
    fn a_run_of_failures_opens_the_breaker_and_a_probe_closes_it() {
        let b = breakers(3, 3600);
        let (t0, wall) = (Instant::now(), Utc::now());
        assert_eq!(b.gate(P, "m", t0), Gate::Call);
        for _ in 0..2 {
            assert!(matches!(
                b.failure(P, "m", t0, wall),
                Verdict::GiveBack { opened: false, .. }
            ));
        }
        assert_eq!(b.gate(P, "m", t0), Gate::Call, "two failures do not open it");
        let Verdict::GiveBack { after, opened: true } = b.failure(P, "m", t0, wall) else {
            panic!("the third opens it");
        };
        assert!(
            (Duration::from_secs(8)..=Duration::from_secs(12)).contains(&after),
            "{after:?}"
        );
        assert!(matches!(b.gate(P, "m", t0), Gate::Wait { .. }));
        assert_eq!(b.gate(P, "other", t0), Gate::Call, "per model");
        assert_eq!(b.views(t0, wall)[0].state, BreakerState::Open);

        // After the pause one probe goes; the others wait for it.
        let later = t0 + Duration::from_secs(13);
        assert_eq!(b.gate(P, "m", later), Gate::Call);
        assert!(matches!(b.gate(P, "m", later), Gate::Wait { .. }));
        // It fails: open again, twice as long.
        let Verdict::GiveBack { after, opened: true } = b.failure(P, "m", later, wall) else {
            panic!("a failed probe opens it again");
        };
        assert!(
            (Duration::from_secs(16)..=Duration::from_secs(24)).contains(&after),
            "{after:?}"
        );
        // The next probe succeeds: closed, and the views forget it.
        let much_later = later + Duration::from_secs(30);
        assert_eq!(b.gate(P, "m", much_later), Gate::Call);
        b.success(P, "m");
        assert_eq!(b.gate(P, "m", much_later), Gate::Call);
        assert!(b.views(much_later, wall).is_empty());
    }

    #[test]
    fn pauses_are_capped() {
        let b = breakers(1, 3600);
        let (mut t, wall) = (Instant::now(), Utc::now());
        let mut last = Duration::ZERO;
        for _ in 0..10 {
            if let Verdict::GiveBack { after, .. } = b.failure(P, "m", t, wall) {
                last = after;
            }
            t += Duration::from_secs(100);
            assert_eq!(b.gate(P, "m", t), Gate::Call);
        }
        assert!(last <= Duration::from_secs(48), "{last:?}");
    }

    #[test]
    fn attempts_are_spent_only_past_the_failure_budget() {
        let b = breakers(100, 60);
        let (t0, wall) = (Instant::now(), Utc::now());
        assert!(matches!(b.failure(P, "m", t0, wall), Verdict::GiveBack { .. }));
        let t1 = t0 + Duration::from_secs(59);
        assert!(matches!(b.failure(P, "m", t1, wall), Verdict::GiveBack { .. }));
        let t2 = t0 + Duration::from_secs(61);
        assert_eq!(b.failure(P, "m", t2, wall), Verdict::SpendAttempt);
        // A success starts the budget over.
        b.success(P, "m");
        assert!(matches!(b.failure(P, "m", t2, wall), Verdict::GiveBack { .. }));
    }

    #[test]
    fn an_inconclusive_probe_lets_the_next_one_through() {
        let b = breakers(1, 3600);
        let (t0, wall) = (Instant::now(), Utc::now());
        b.failure(P, "m", t0, wall);
        let later = t0 + Duration::from_secs(13);
        assert_eq!(b.gate(P, "m", later), Gate::Call);
        b.inconclusive(P, "m");
        assert_eq!(b.gate(P, "m", later), Gate::Call);
    }
}
