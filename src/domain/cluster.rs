//! The replicas of one deployment and the budgets they share.

use chrono::{DateTime, Utc};

/// What a replica writes about itself at each heartbeat.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplicaBeat {
    /// Random at each start; the prefix of its workers' lease owners (`{id}-{n}`).
    pub id: String,
    /// Where it can be reached (`cluster.address`, else the address it listens on).
    pub address: String,
    pub version: String,
    pub started_at: DateTime<Utc>,
    /// Embedding workers it runs.
    pub workers: u32,
    /// Provider requests it has in flight.
    pub in_flight: u32,
}

/// A replica as the store knows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Replica {
    pub beat: ReplicaBeat,
    /// Seconds since its last heartbeat, by the store's clock.
    pub heartbeat_age_s: f64,
}

/// How a shared budget refills.
#[derive(Clone, Debug, PartialEq)]
pub enum BudgetLimit {
    /// At most so much in any span of time (see [`WindowRule`]).
    Window(WindowRule),
    /// A per-day allowance: at most `limit` units on provider day `day`.
    Day { day: String, limit: f64 },
}

/// A draw of `amount` units from the shared budget named `budget`.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetDraw {
    pub budget: String,
    pub amount: f64,
    pub limit: BudgetLimit,
    /// How far over its capacity a window may go for this draw (queries may overdraw;
    /// ingestion 0).
    pub overdraft: f64,
}

/// What a draw got.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Drawn {
    Granted,
    /// Not enough left: a window has room after `wait_s` seconds (`None`: a day's allowance is
    /// spent, until the provider's reset).
    Refused {
        wait_s: Option<f64>,
    },
}

/// A sliding-window budget: at most `capacity` units drawn in any `span_s` seconds.
///
/// Providers enforce per-minute quotas over shorter windows too, some of them fixed windows
/// that start wherever they start: a token bucket paced at exactly the quota still puts its
/// burst and the next second's refill into one such window. A sliding window never does: no
/// span of `span_s` holds more than `capacity`, so no fixed window of that length can either.
/// A draw larger than the capacity is recorded as pieces of at most the capacity, one span
/// apart (the later ones in the future), so the long-run rate still holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowRule {
    pub capacity: f64,
    pub span_s: f64,
}

impl WindowRule {
    /// How much of a window a per-minute quota allows: a second's worth (at least one unit,
    /// over a span stretched to keep the rate), with the span 2 % longer than the quota's so
    /// that the network's jitter cannot put two spans' worth into a provider's window.
    pub fn per_minute(per_minute: u32) -> Self {
        let per_minute = f64::from(per_minute.max(1));
        let capacity = (per_minute / 60.0).floor().max(1.0);
        Self {
            capacity,
            span_s: capacity * 60.0 / per_minute * 1.02,
        }
    }

    /// Units per second this window lets through in the long run.
    pub fn rate(&self) -> f64 {
        self.capacity / self.span_s
    }

    /// Whether `amount` can be drawn at `now_s` given the draws still in the window
    /// (`(at_s, amount)`, at_s > now_s - span_s, oldest first), with `overdraft` units allowed
    /// above the capacity: the pieces to record, or the seconds until there is room.
    ///
    /// Without an overdraft (ingestion) the window must have room for the amount (for all of
    /// the capacity, when the amount is larger). With one (queries) the draw may take what is
    /// left and borrow the rest from the spans to come, up to the overdraft in all: the part
    /// borrowed is recorded in those future spans, so later draws wait until it is repaid and
    /// the long-run rate never exceeds the window's.
    pub fn draw(&self, draws: &[(f64, f64)], now_s: f64, amount: f64, overdraft: f64) -> Result<Vec<(f64, f64)>, f64> {
        let used: f64 = draws.iter().map(|d| d.1).sum();
        let needed = if overdraft > 0.0 {
            amount
        } else {
            amount.min(self.capacity)
        };
        let excess = used + needed - (self.capacity + overdraft);
        if excess <= 1e-9 {
            return Ok(self.pieces(draws, now_s, amount));
        }
        let mut freed = 0.0;
        for (at, amount) in draws {
            freed += amount;
            if freed >= excess - 1e-9 {
                return Err((at + self.span_s - now_s).max(0.001));
            }
        }
        Err(self.span_s)
    }

    /// How `amount` drawn at `now_s` is recorded among `draws` (as for [`WindowRule::draw`]):
    /// what room the window has now, unless earlier borrowing is still to be repaid; the rest
    /// after the last borrowed piece, filling its span up to the capacity, then in pieces of at
    /// most the capacity one span apart.
    pub fn pieces(&self, draws: &[(f64, f64)], now_s: f64, amount: f64) -> Vec<(f64, f64)> {
        let mut left = amount.max(0.0);
        let mut pieces = Vec::new();
        let last_future = draws
            .iter()
            .map(|d| d.0)
            .filter(|at| *at > now_s)
            .max_by(f64::total_cmp);
        let mut at = match last_future {
            Some(last) => {
                let load: f64 = draws.iter().filter(|d| d.0 == last).map(|d| d.1).sum();
                let fill = left.min((self.capacity - load).max(0.0));
                if fill > 1e-9 {
                    pieces.push((last, fill));
                    left -= fill;
                }
                last + self.span_s
            }
            None => {
                let used: f64 = draws.iter().map(|d| d.1).sum();
                let present = left.min((self.capacity - used).max(0.0));
                if present > 1e-9 {
                    pieces.push((now_s, present));
                    left -= present;
                }
                now_s + self.span_s
            }
        };
        while left > 1e-9 {
            let piece = left.min(self.capacity);
            pieces.push((at, piece));
            left -= piece;
            at += self.span_s;
        }
        pieces
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_holds_its_capacity_in_any_span() {
        let w = WindowRule {
            capacity: 10.0,
            span_s: 1.0,
        };
        assert_eq!(w.draw(&[], 0.0, 8.0, 0.0), Ok(vec![(0.0, 8.0)]));
        // 8 in the window: 3 more wait until those 8 leave it, at 1.0.
        assert_eq!(w.draw(&[(0.0, 8.0)], 0.4, 3.0, 0.0), Err(0.6));
        assert_eq!(w.draw(&[(0.0, 8.0)], 0.4, 2.0, 0.0), Ok(vec![(0.4, 2.0)]));
        // Queries may go over by their overdraft; what they borrow is recorded a span ahead.
        assert_eq!(w.draw(&[(0.0, 8.0), (0.4, 2.0)], 0.5, 1.0, 6.0), Ok(vec![(1.5, 1.0)]));
        assert_eq!(w.draw(&[(0.0, 8.0)], 0.5, 5.0, 6.0), Ok(vec![(0.5, 2.0), (1.5, 3.0)]));
        assert!(
            w.draw(&[(0.0, 10.0), (1.5, 6.0)], 0.5, 1.0, 6.0).is_err(),
            "borrowed up to the overdraft"
        );
        // Borrowing goes on after what was borrowed before, a span's worth at a time.
        assert_eq!(
            w.draw(&[(0.0, 4.0), (1.5, 8.0)], 0.5, 4.0, 6.0),
            Ok(vec![(1.5, 2.0), (2.5, 2.0)])
        );
        // Of several draws, the wait is until enough of the oldest have left.
        let Err(wait) = w.draw(&[(0.1, 4.0), (0.3, 4.0), (0.5, 2.0)], 0.6, 6.0, 0.0) else {
            panic!("a full window")
        };
        assert!((wait - 0.7).abs() < 1e-9, "{wait}");
        // More than the capacity: pieces one span apart, and nothing else until they are past.
        assert_eq!(
            w.draw(&[], 2.0, 25.0, 0.0),
            Ok(vec![(2.0, 10.0), (3.0, 10.0), (4.0, 5.0)])
        );
        assert_eq!(w.draw(&[(2.0, 10.0), (3.0, 10.0), (4.0, 5.0)], 2.5, 1.0, 0.0), Err(1.5));
    }

    #[test]
    fn per_minute_windows_keep_the_rate_with_a_margin() {
        let w = WindowRule::per_minute(2400);
        assert_eq!(w.capacity, 40.0);
        assert!((w.span_s - 1.02).abs() < 1e-9);
        // Under one a second: one at a time, further apart.
        let w = WindowRule::per_minute(5);
        assert_eq!(w.capacity, 1.0);
        assert!((w.rate() * 60.0 - 5.0 / 1.02).abs() < 1e-9);
        let w = WindowRule::per_minute(150);
        assert!((w.rate() * 60.0 - 150.0 / 1.02).abs() < 1e-9);
    }
}
