//! Client-side budgets: where a told quota (requests and tokens per minute, requests per day)
//! is kept and spent.
//!
//! A budget belongs to a quota group (keys of one Google project share one quota) or to a key
//! without one. Each of its dimensions is an [`Account`]:
//!
//! A per-minute quota is kept as a sliding window ([`WindowRule`]): at most a second's worth
//! in any 1.02 s, so the told rate is paced evenly from the first request, never spent in a
//! burst, and no provider window of a second or more sees more than its share even when it is a
//! fixed window that starts anywhere (a token bucket would put its burst and the next second's
//! refill into one). Each of a budget's dimensions is an [`Account`]:
//!
//! - **Local**: the window in this process's memory ([`Window`]), for a process that works
//!   alone on its store (the embedded default).
//! - **Shared**: credit drawn from the store's ledger ([`crate::store::ClusterStore`]), for
//!   replicas sharing one store: the ledger holds the one window of the deployment, and a
//!   replica draws from it what a request costs before sending it, so N replicas together spend
//!   the told quota, not N times it. Queries may overdraw it (a tenth of a minute's worth) and
//!   ingestion on every replica then waits until the window has room again, so a query on one
//!   replica goes before ingestion on any. A replica that dies holds no share: its draws leave
//!   the window with time alone.
//!
//! A per-day budget is always shared (kept in the store), so that a restart does not forget
//! what the day has spent; it counts requests per provider day (reset at 08:00 UTC).

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::domain::{BudgetDraw, BudgetLimit, Drawn, KeyId, ProviderKind, WindowRule};

/// A sliding window in this process's memory (see [`WindowRule`]): the draws still in it, as
/// seconds since `epoch` (some ahead of now: what queries borrowed).
#[derive(Clone, Debug)]
pub(super) struct Window {
    pub(super) rule: WindowRule,
    epoch: Instant,
    draws: Vec<(f64, f64)>,
    /// After a rate limit: nothing goes before then.
    held_until: Option<Instant>,
}

impl Window {
    pub(super) fn new(rule: WindowRule, now: Instant) -> Self {
        Self {
            rule,
            epoch: now,
            draws: Vec::new(),
            held_until: None,
        }
    }

    fn seconds(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.epoch).as_secs_f64()
    }

    /// Drops the draws that have left the window.
    fn prune(&mut self, now: Instant) {
        let now_s = self.seconds(now);
        let span = self.rule.span_s;
        self.draws.retain(|(at, _)| at + span > now_s);
    }

    /// Whether `amount` can go now (`Ok`, with the pieces to record) or when it can.
    fn decide(&mut self, amount: f64, overdraft: f64, now: Instant) -> Result<Vec<(f64, f64)>, Instant> {
        if let Some(until) = self.held_until.filter(|u| *u > now) {
            return Err(until);
        }
        self.prune(now);
        let mut draws = self.draws.clone();
        draws.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.rule
            .draw(&draws, self.seconds(now), amount, overdraft)
            .map_err(|wait| now + Duration::from_secs_f64(wait))
    }

    /// Records `amount` as drawn now (see [`WindowRule::pieces`]).
    fn pay(&mut self, amount: f64, now: Instant) {
        self.prune(now);
        let pieces = self.rule.pieces(&self.draws, self.seconds(now), amount);
        self.draws.extend(pieces);
    }

    /// After a rate limit that pauses the budget for `pause`: nothing goes until it ends.
    fn hold_for(&mut self, now: Instant, pause: Duration) {
        let until = now + pause;
        self.held_until = Some(self.held_until.map_or(until, |u| u.max(until)));
    }
}

/// Which key or quota group a budget belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum BudgetId {
    Key(KeyId),
    Group(ProviderKind, String),
}

impl BudgetId {
    /// The ledger's name for one dimension of this budget.
    fn ledger_name(&self, dimension: Dimension) -> String {
        let dim = dimension.as_str();
        match self {
            BudgetId::Key(id) => format!("key/{id}/{dim}"),
            BudgetId::Group(provider, group) => format!("group/{provider}/{group}/{dim}"),
        }
    }
}

/// The dimensions a budget may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dimension {
    RequestsPerMinute,
    TokensPerMinute,
    RequestsPerDay,
}

impl Dimension {
    fn as_str(self) -> &'static str {
        match self {
            Dimension::RequestsPerMinute => "rpm",
            Dimension::TokensPerMinute => "tpm",
            Dimension::RequestsPerDay => "rpd",
        }
    }
}

/// Credit drawn from the store's ledger and not spent yet.
#[derive(Clone, Debug)]
pub(super) struct Credit {
    name: String,
    /// Per minute (a shared window) or per day.
    per_minute: Option<WindowRule>,
    per_day: Option<f64>,
    level: f64,
    /// The ledger refused a draw: nothing to draw before then.
    blocked_until: Option<Instant>,
}

/// One dimension of a budget.
#[derive(Clone, Debug)]
pub(super) enum Account {
    Local(Window),
    Shared(Credit),
}

/// What an account says about spending an amount now.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Check {
    Pay,
    NotBefore(Instant),
    /// Draw this much from the ledger first.
    Draw(f64),
}

impl Account {
    fn shared(name: String, per_minute: Option<WindowRule>, per_day: Option<f64>) -> Self {
        Account::Shared(Credit {
            name,
            per_minute,
            per_day,
            level: 0.0,
            blocked_until: None,
        })
    }

    /// Whether `amount` can be spent now; queries may overdraw by `overdraft` (a share of a
    /// minute's budget).
    pub(super) fn check(&mut self, amount: f64, overdraft: f64, now: Instant) -> Check {
        match self {
            Account::Local(w) => {
                let overdraft = overdraft * w.rule.rate() * 60.0;
                match w.decide(amount, overdraft, now) {
                    Ok(_) => Check::Pay,
                    Err(at) => Check::NotBefore(at),
                }
            }
            Account::Shared(c) => {
                if c.level >= amount - 1e-9 {
                    Check::Pay
                } else if let Some(until) = c.blocked_until.filter(|u| *u > now) {
                    Check::NotBefore(until)
                } else {
                    Check::Draw(amount - c.level)
                }
            }
        }
    }

    pub(super) fn pay(&mut self, amount: f64, now: Instant) {
        match self {
            Account::Local(w) => w.pay(amount, now),
            Account::Shared(c) => c.level -= amount,
        }
    }

    /// After a rate limit that pauses the budget for `pause`: nothing goes until it ends.
    pub(super) fn hold_for(&mut self, now: Instant, pause: Duration) {
        match self {
            Account::Local(w) => w.hold_for(now, pause),
            Account::Shared(c) => {
                if c.per_minute.is_some() {
                    c.blocked_until = Some(c.blocked_until.map_or(now + pause, |u| u.max(now + pause)));
                }
            }
        }
    }

    /// The ledger draw of `amount` (a shared account's shortfall).
    pub(super) fn draw(&self, amount: f64, overdraft: f64, now: DateTime<Utc>) -> Option<BudgetDraw> {
        let Account::Shared(c) = self else {
            return None;
        };
        let (limit, overdraft) = match (&c.per_minute, c.per_day) {
            (Some(rule), _) => (BudgetLimit::Window(*rule), overdraft * rule.rate() * 60.0),
            (None, Some(limit)) => (
                BudgetLimit::Day {
                    day: provider_day(now),
                    limit,
                },
                0.0,
            ),
            (None, None) => return None,
        };
        Some(BudgetDraw {
            budget: c.name.clone(),
            amount,
            limit,
            overdraft,
        })
    }

    /// Records what a draw of `amount` got.
    pub(super) fn drawn(&mut self, amount: f64, drawn: Drawn, now: Instant, now_wall: DateTime<Utc>) {
        let Account::Shared(c) = self else {
            return;
        };
        match drawn {
            Drawn::Granted => {
                c.level += amount;
                c.blocked_until = None;
            }
            Drawn::Refused { wait_s: Some(wait) } => {
                c.blocked_until = Some(now + Duration::from_secs_f64(wait.clamp(0.001, 86_400.0)));
            }
            Drawn::Refused { wait_s: None } => {
                c.blocked_until = Some(now + until_daily_reset(now_wall));
            }
        }
    }

    /// A per-day account whose day is spent: when it comes back.
    pub(super) fn day_spent_until(&self, now: Instant) -> Option<Instant> {
        match self {
            Account::Shared(c) if c.per_day.is_some() => c.blocked_until.filter(|u| *u > now),
            _ => None,
        }
    }
}

/// The budgets of one key or quota group.
#[derive(Clone, Debug)]
pub(super) struct Budget {
    pub(super) requests: Option<Account>,
    pub(super) tokens: Option<Account>,
    pub(super) daily: Option<Account>,
}

/// Told quotas, as a budget is made from them.
#[derive(Clone, Copy, Debug)]
pub(super) struct Quotas {
    pub(super) requests_per_minute: Option<u32>,
    pub(super) tokens_per_minute: Option<u32>,
    pub(super) requests_per_day: Option<u32>,
    /// Per-minute budgets live in the store's ledger (replicas share it) rather than here.
    pub(super) shared: bool,
}

impl Budget {
    pub(super) fn new(id: &BudgetId, quotas: Quotas, now: Instant) -> Self {
        let minute = |per_minute: Option<u32>, dimension: Dimension| {
            per_minute.map(|n| {
                let rule = WindowRule::per_minute(n);
                if quotas.shared {
                    Account::shared(id.ledger_name(dimension), Some(rule), None)
                } else {
                    Account::Local(Window::new(rule, now))
                }
            })
        };
        Self {
            requests: minute(quotas.requests_per_minute, Dimension::RequestsPerMinute),
            tokens: minute(quotas.tokens_per_minute, Dimension::TokensPerMinute),
            daily: quotas
                .requests_per_day
                .map(|n| Account::shared(id.ledger_name(Dimension::RequestsPerDay), None, Some(f64::from(n)))),
        }
    }

    /// The accounts with the amount each is asked for.
    pub(super) fn accounts(
        &mut self,
        requests: f64,
        tokens: f64,
    ) -> impl Iterator<Item = (Dimension, &mut Account, f64)> {
        [
            (Dimension::RequestsPerMinute, self.requests.as_mut(), requests),
            (Dimension::TokensPerMinute, self.tokens.as_mut(), tokens),
            (Dimension::RequestsPerDay, self.daily.as_mut(), requests),
        ]
        .into_iter()
        .filter_map(|(d, a, amount)| a.map(|a| (d, a, amount)))
    }

    pub(super) fn account(&mut self, dimension: Dimension) -> Option<&mut Account> {
        match dimension {
            Dimension::RequestsPerMinute => self.requests.as_mut(),
            Dimension::TokensPerMinute => self.tokens.as_mut(),
            Dimension::RequestsPerDay => self.daily.as_mut(),
        }
    }

    /// Whether the budget pays `requests` and `tokens` now: every account pays; or the latest
    /// time one of them can; or the draws to make first.
    pub(super) fn check(&mut self, requests: f64, tokens: f64, overdraft: f64, now: Instant) -> BudgetCheck {
        let mut not_before: Option<Instant> = None;
        let mut draws = Vec::new();
        for (dimension, account, amount) in self.accounts(requests, tokens) {
            // Per-day budgets have no overdraft: the provider refuses past them.
            let overdraft = if dimension == Dimension::RequestsPerDay {
                0.0
            } else {
                overdraft
            };
            match account.check(amount, overdraft, now) {
                Check::Pay => {}
                Check::NotBefore(at) => not_before = Some(not_before.map_or(at, |n| n.max(at))),
                Check::Draw(shortfall) => draws.push((dimension, shortfall)),
            }
        }
        match (not_before, draws.is_empty()) {
            (Some(at), _) => BudgetCheck::NotBefore(at),
            (None, true) => BudgetCheck::Pay,
            (None, false) => BudgetCheck::Draw(draws),
        }
    }

    pub(super) fn pay(&mut self, requests: f64, tokens: f64, now: Instant) {
        for (_, account, amount) in self.accounts(requests, tokens) {
            account.pay(amount, now);
        }
    }

    pub(super) fn day_spent_until(&self, now: Instant) -> Option<Instant> {
        self.daily.as_ref().and_then(|a| a.day_spent_until(now))
    }
}

/// What a budget lacks, per dimension: the draws to make from the ledger.
pub(super) type Shortfalls = Vec<(Dimension, f64)>;

/// What [`Budget::check`] found.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum BudgetCheck {
    Pay,
    NotBefore(Instant),
    Draw(Shortfalls),
}

/// The provider day `now` falls in: days start at the daily reset (08:00 UTC).
pub(crate) fn provider_day(now: DateTime<Utc>) -> String {
    (now - chrono::Duration::hours(8)).date_naive().to_string()
}

/// Time until the next daily quota reset. Gemini's per-day quotas reset at midnight Pacific
/// time; 08:00 UTC is midnight PST, which is at or after midnight PDT, so waiting until then
/// never retries early. OpenAI publishes no reset time for its per-day limits (RPD, TPD; they
/// refill gradually), and the same reset is used for them: a key that hit one is spent for the
/// day in practice, and probing it every few seconds would only collect 429s.
pub(super) fn until_daily_reset(now: DateTime<Utc>) -> Duration {
    let today_reset = now.date_naive().and_hms_opt(8, 0, 0).map(|t| t.and_utc());
    let reset = match today_reset {
        Some(t) if t > now => t,
        Some(t) => t + chrono::Duration::days(1),
        None => now + chrono::Duration::days(1),
    };
    (reset - now).to_std().unwrap_or(Duration::from_secs(86_400))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_window_paces_a_quota_and_lets_queries_overdraw() {
        let t0 = Instant::now();
        // 600 a minute: 10 in any 1.02 s.
        let mut w = Account::Local(Window::new(WindowRule::per_minute(600), t0));
        for _ in 0..10 {
            assert_eq!(w.check(1.0, 0.0, t0), Check::Pay);
            w.pay(1.0, t0);
        }
        assert_eq!(
            w.check(1.0, 0.0, t0),
            Check::NotBefore(t0 + Duration::from_secs_f64(1.02))
        );
        // Queries may go over by a tenth of a minute's worth (60 here).
        assert_eq!(w.check(1.0, 0.1, t0), Check::Pay);
        let later = t0 + Duration::from_millis(1021);
        assert_eq!(w.check(10.0, 0.0, later), Check::Pay, "the window moved on");
    }

    #[test]
    fn a_request_larger_than_the_window_goes_alone_and_holds_it_for_longer() {
        let t0 = Instant::now();
        // 60,000 tokens a minute: 1,000 in any 1.02 s.
        let mut w = Account::Local(Window::new(WindowRule::per_minute(60_000), t0));
        assert_eq!(w.check(5_000.0, 0.0, t0), Check::Pay);
        w.pay(5_000.0, t0);
        // Recorded as five spans' worth: the next request waits until the last piece is past.
        let Check::NotBefore(at) = w.check(1.0, 0.0, t0) else {
            panic!("held")
        };
        let wait = at.duration_since(t0).as_secs_f64();
        assert!((wait - 5.0 * 1.02).abs() < 1e-6, "{wait}");
    }

    #[test]
    fn after_a_rate_limit_nothing_goes_until_the_pause_ends() {
        let t0 = Instant::now();
        let mut w = Account::Local(Window::new(WindowRule::per_minute(300), t0));
        w.hold_for(t0, Duration::from_millis(800));
        assert_eq!(w.check(1.0, 0.1, t0), Check::NotBefore(t0 + Duration::from_millis(800)));
        assert_eq!(w.check(1.0, 0.0, t0 + Duration::from_millis(800)), Check::Pay);
    }

    #[test]
    fn shared_accounts_draw_their_shortfall_and_wait_when_refused() {
        let t0 = Instant::now();
        let wall = Utc::now();
        let quotas = Quotas {
            requests_per_minute: Some(600),
            tokens_per_minute: None,
            requests_per_day: Some(1000),
            shared: true,
        };
        let mut budget = Budget::new(&BudgetId::Group(ProviderKind::Google, "p".into()), quotas, t0);
        let BudgetCheck::Draw(draws) = budget.check(4.0, 0.0, 0.0, t0) else {
            panic!("a new shared budget holds no credit")
        };
        assert_eq!(
            draws,
            [(Dimension::RequestsPerMinute, 4.0), (Dimension::RequestsPerDay, 4.0)]
        );
        let rpm = budget.account(Dimension::RequestsPerMinute).unwrap();
        let draw = rpm.draw(4.0, 0.1, wall).unwrap();
        assert_eq!(draw.budget, "group/google/p/rpm");
        assert!(
            (draw.overdraft - 60.0 / 1.02).abs() < 1e-9,
            "a tenth of a minute's 600 (paced at 98 %)"
        );
        rpm.drawn(4.0, Drawn::Granted, t0, wall);
        let rpd = budget.account(Dimension::RequestsPerDay).unwrap();
        assert!(matches!(
            rpd.draw(4.0, 0.1, wall).unwrap().limit,
            BudgetLimit::Day { .. }
        ));
        rpd.drawn(4.0, Drawn::Granted, t0, wall);
        assert_eq!(budget.check(4.0, 0.0, 0.0, t0), BudgetCheck::Pay);
        budget.pay(4.0, 0.0, t0);
        // Refused: nothing is drawn again before the ledger said.
        budget.account(Dimension::RequestsPerMinute).unwrap().drawn(
            1.0,
            Drawn::Refused { wait_s: Some(0.5) },
            t0,
            wall,
        );
        assert_eq!(
            budget.check(1.0, 0.0, 0.0, t0),
            BudgetCheck::NotBefore(t0 + Duration::from_millis(500))
        );
        // A spent day waits for the reset, and says so.
        budget
            .account(Dimension::RequestsPerDay)
            .unwrap()
            .drawn(1.0, Drawn::Refused { wait_s: None }, t0, wall);
        assert_eq!(budget.day_spent_until(t0), Some(t0 + until_daily_reset(wall)));
    }

    #[test]
    fn provider_days_start_at_the_reset() {
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert_eq!(provider_day(at("2026-11-22T07:59:00Z")), "2026-11-21");
        assert_eq!(provider_day(at("2026-11-22T08:00:00Z")), "2026-11-22");
    }

    #[test]
    fn daily_reset_is_the_next_0800_utc() {
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert_eq!(until_daily_reset(at("2026-11-22T07:00:00Z")), Duration::from_secs(3600));
        assert_eq!(
            until_daily_reset(at("2026-11-22T09:00:00Z")),
            Duration::from_secs(23 * 3600)
        );
    }
}
