//! What an evaluation run's scores add up to ([`report`]), and how two runs differ
//! ([`compare`]). Both are computed from the per-item records whenever they are read: the
//! records are what is stored, so a report never disagrees with them.

use std::collections::HashMap;

use super::score::{FULLY, ItemScore, Summary, summarize};
use crate::domain::{EvalRun, EvalRunId, ItemRecord};

/// Hits are counted within this rank for an item to be "found" by a setting.
pub const FOUND_WITHIN: u32 = 5;

/// One setting's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct SettingReport {
    pub hits: Summary,
    /// Per budget, in the run's order: the answer figures (`hits` repeated is not).
    pub budgets: Vec<(u32, Summary)>,
    /// Percentiles of the retrievals' time in the service, over every item and budget.
    pub latency_p50_ms: Option<f64>,
    pub latency_p95_ms: Option<f64>,
}

/// One item's outcome under every setting.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemReport {
    pub index: usize,
    pub query: String,
    pub record: ItemRecord,
    /// The settings (by index) that found it: a hit within [`FOUND_WITHIN`], or the answer
    /// fully in the context at some budget.
    pub found_by: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// Items scored so far (all of them once the run completed).
    pub scored: usize,
    pub settings: Vec<SettingReport>,
    pub items: Vec<ItemReport>,
}

/// The item scores of setting `s` at budget `b`.
fn scores_at(records: &[ItemRecord], s: usize, b: usize) -> Vec<ItemScore> {
    records
        .iter()
        .map(|r| ItemScore {
            hit: r
                .hit_judged
                .then(|| r.first_hit.get(s).copied().flatten().map(|h| h as usize)),
            answer_share: if r.answer_judged {
                r.answer_share
                    .get(s)
                    .and_then(|shares| shares.get(b))
                    .copied()
                    .flatten()
            } else {
                None
            },
        })
        .collect()
}

/// The value at `q` (0 to 1) of sorted `values`, by nearest rank.
fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

/// The settings that found item `record`.
fn found_by(record: &ItemRecord) -> Vec<usize> {
    (0..record.first_hit.len())
        .filter(|&s| {
            let hit = record.hit_judged && record.first_hit[s].is_some_and(|h| h <= FOUND_WITHIN);
            let fully = record.answer_judged
                && (record.answer_share.get(s).into_iter().flatten()).any(|share| share.is_some_and(|v| v >= FULLY));
            hit || fully
        })
        .collect()
}

/// What `run`'s scores so far add up to.
pub fn report(run: &EvalRun) -> RunReport {
    let records = &run.scores;
    let settings = (0..run.settings.len())
        .map(|s| {
            let mut ms: Vec<f64> = (records.iter())
                .filter_map(|r| r.ms.get(s))
                .flatten()
                .copied()
                .collect();
            ms.sort_by(f64::total_cmp);
            SettingReport {
                hits: summarize(&scores_at(records, s, 0)),
                budgets: (run.budgets.iter().enumerate())
                    .map(|(b, &budget)| (budget, summarize(&scores_at(records, s, b))))
                    .collect(),
                latency_p50_ms: percentile(&ms, 0.5),
                latency_p95_ms: percentile(&ms, 0.95),
            }
        })
        .collect();
    let items = (records.iter().enumerate())
        .map(|(index, record)| ItemReport {
            index,
            query: run.items.get(index).map(|i| i.query.clone()).unwrap_or_default(),
            record: record.clone(),
            found_by: found_by(record),
        })
        .collect();
    RunReport {
        scored: records.len(),
        settings,
        items,
    }
}

/// How one figure moved from run `a` to run `b` (`b − a`; `None` where either has none).
fn delta(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(b? - a?)
}

/// One setting's figures, `b − a`, for the setting at the same place in both runs.
#[derive(Clone, Debug, PartialEq)]
pub struct SettingDelta {
    pub setting: usize,
    pub hit_at_1: Option<f64>,
    pub hit_at_5: Option<f64>,
    pub mrr_at_10: Option<f64>,
    pub latency_p50_ms: Option<f64>,
    /// Per budget both runs measured: `(budget, answer share delta, fully delta)`.
    pub budgets: Vec<(u32, Option<f64>, Option<f64>)>,
}

/// An item's outcome under one setting in one run: its first hit's rank and its answer's
/// shares at the budgets both runs measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub first_hit: Option<u32>,
    pub answer_share: Vec<Option<f64>>,
}

/// An item that did better or worse under one setting.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemChange {
    pub query: String,
    pub setting: usize,
    pub before: Outcome,
    pub after: Outcome,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub a: EvalRunId,
    pub b: EvalRunId,
    /// Settings compared: as many as the run with fewer has.
    pub settings: Vec<SettingDelta>,
    /// Items in both runs (by their query).
    pub items_compared: usize,
    /// Items that moved one way only: a better rank (within 10) or a larger answer share, and
    /// nothing worse; and the reverse.
    pub better: Vec<ItemChange>,
    pub worse: Vec<ItemChange>,
    /// Items that got better on one figure and worse on another.
    pub mixed: usize,
}

/// The reciprocal rank within 10 (0 past it or without a hit).
fn rr(hit: Option<u32>) -> f64 {
    match hit {
        Some(h) if h <= 10 => 1.0 / f64::from(h),
        _ => 0.0,
    }
}

/// How `b` differs from `a`: metric deltas per setting (by place), and the items that got
/// better or worse (matched by query; budgets matched by value).
pub fn compare(a: &EvalRun, b: &EvalRun) -> Comparison {
    let (ra, rb) = (report(a), report(b));
    let common: Vec<(usize, usize, u32)> = (a.budgets.iter().enumerate())
        .filter_map(|(ia, budget)| Some((ia, b.budgets.iter().position(|x| x == budget)?, *budget)))
        .collect();
    let n = a.settings.len().min(b.settings.len());
    let settings = (0..n)
        .map(|s| {
            let (sa, sb) = (&ra.settings[s], &rb.settings[s]);
            SettingDelta {
                setting: s,
                hit_at_1: delta(sa.hits.hit_at_1, sb.hits.hit_at_1),
                hit_at_5: delta(sa.hits.hit_at_5, sb.hits.hit_at_5),
                mrr_at_10: delta(sa.hits.mrr_at_10, sb.hits.mrr_at_10),
                latency_p50_ms: delta(sa.latency_p50_ms, sb.latency_p50_ms),
                budgets: (common.iter())
                    .map(|&(ia, ib, budget)| {
                        let (x, y) = (&sa.budgets[ia].1, &sb.budgets[ib].1);
                        (budget, delta(x.answer_share, y.answer_share), delta(x.fully, y.fully))
                    })
                    .collect(),
            }
        })
        .collect();
    let mut in_a: HashMap<&str, &ItemRecord> = HashMap::new();
    for (item, record) in a.items.iter().zip(&a.scores) {
        in_a.entry(item.query.as_str()).or_insert(record);
    }
    let mut comparison = Comparison {
        a: a.id,
        b: b.id,
        settings,
        items_compared: 0,
        better: Vec::new(),
        worse: Vec::new(),
        mixed: 0,
    };
    let mut seen = std::collections::HashSet::new();
    for (item, after) in b.items.iter().zip(&b.scores) {
        let Some(before) = in_a.get(item.query.as_str()) else {
            continue;
        };
        if !seen.insert(item.query.as_str()) {
            continue;
        }
        comparison.items_compared += 1;
        for s in 0..n {
            let outcome = |r: &ItemRecord, pick: fn(&(usize, usize, u32)) -> usize| Outcome {
                first_hit: r.first_hit.get(s).copied().flatten(),
                answer_share: (common.iter())
                    .map(|c| r.answer_share.get(s).and_then(|v| v.get(pick(c))).copied().flatten())
                    .collect(),
            };
            let (was, now) = (outcome(before, |c| c.0), outcome(after, |c| c.1));
            let mut up = false;
            let mut down = false;
            if before.hit_judged && after.hit_judged {
                let (x, y) = (rr(was.first_hit), rr(now.first_hit));
                up |= y > x;
                down |= y < x;
            }
            for (x, y) in was.answer_share.iter().zip(&now.answer_share) {
                if let (Some(x), Some(y)) = (x, y) {
                    up |= y > x;
                    down |= y < x;
                }
            }
            let change = ItemChange {
                query: item.query.clone(),
                setting: s,
                before: was,
                after: now,
            };
            match (up, down) {
                (true, false) => comparison.better.push(change),
                (false, true) => comparison.worse.push(change),
                (true, true) => comparison.mixed += 1,
                (false, false) => {}
            }
        }
    }
    comparison
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_by_nearest_rank() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(10.0));
        assert_eq!(percentile(&v, 0.95), Some(19.0));
        assert_eq!(percentile(&[7.0], 0.95), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
