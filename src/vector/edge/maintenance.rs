//! The background maintenance task: debounced flushes and optimizes of the open shards.

use std::sync::{Arc, PoisonError, Weak};
use std::time::Instant;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::vector::Result;

use super::engine::{blocking, engine_error};
use super::{
    FLUSH_DEBOUNCE, FLUSH_MAX_DELAY, Inner, MAINTENANCE_TICK, OPTIMIZE_AFTER_POINTS, OPTIMIZE_IDLE_INTERVAL,
    OPTIMIZE_MAX_DELAY, OPTIMIZE_SETTLE, Shard, WriteState,
};

/// Flushes a shard on the blocking pool. The dirty mark is cleared before the flush, so writes
/// that land during it mark the shard dirty again; a failed flush restores the mark.
pub(super) async fn flush(shard: Arc<Shard>) -> Result<()> {
    let since = shard.state().dirty_since.take();
    let name = shard.name.clone();
    let result = blocking({
        let shard = Arc::clone(&shard);
        move || shard.engine.flush().map_err(engine_error)
    })
    .await;
    if let Err(e) = &result {
        tracing::warn!(collection = %name, error = %e, "flushing embedded collection failed");
        if let Some(since) = since {
            let mut state = shard.state();
            let dirty_since = state.dirty_since.get_or_insert(since);
            *dirty_since = (*dirty_since).min(since);
        }
    }
    result
}

fn optimize_due(state: &WriteState, now: Instant) -> bool {
    if state.unoptimized == 0 {
        return false;
    }
    let settled = now.duration_since(state.last_write) >= OPTIMIZE_SETTLE;
    let since_optimize = now.duration_since(state.last_optimize);
    if state.unoptimized >= OPTIMIZE_AFTER_POINTS {
        settled || since_optimize >= OPTIMIZE_MAX_DELAY
    } else {
        settled && since_optimize >= OPTIMIZE_IDLE_INTERVAL
    }
}

fn flush_due(state: &WriteState, now: Instant) -> bool {
    state.dirty_since.is_some_and(|since| {
        now.duration_since(state.last_write) >= FLUSH_DEBOUNCE || now.duration_since(since) >= FLUSH_MAX_DELAY
    })
}

/// The maintenance loop: see the module docs for the policy. It holds the repo only weakly, so
/// dropping the [`EdgeRepo`] drops (and flushes) the shards right there and ends the loop.
pub(super) async fn maintain(inner: Weak<Inner>, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(MAINTENANCE_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut optimizing: Option<JoinHandle<()>> = None;
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let Some(shards) = inner.upgrade().map(|inner| inner.all_shards()) else {
            break;
        };
        if optimizing.as_ref().is_some_and(JoinHandle::is_finished) {
            optimizing = None;
        }
        let now = Instant::now();
        for shard in shards {
            let (flush_now, optimize_now) = {
                let state = shard.state();
                (
                    flush_due(&state, now),
                    optimizing.is_none() && optimize_due(&state, now),
                )
            };
            if flush_now {
                // Errors are logged inside; the shard stays dirty and is retried next tick.
                let _ = flush(Arc::clone(&shard)).await;
            }
            if optimize_now {
                optimizing = Some(spawn_optimize(shard));
            }
        }
    }
    // An optimize in flight is not awaited: it can take minutes and cannot be interrupted. Its
    // shard keeps the directory locked until it finishes (or the process exits; the engine
    // recovers an interrupted optimize on load).
}

fn spawn_optimize(shard: Arc<Shard>) -> JoinHandle<()> {
    {
        let mut state = shard.state();
        state.unoptimized = 0;
        state.last_optimize = Instant::now();
    }
    tokio::task::spawn_blocking(move || {
        let _one = shard.optimizing.lock().unwrap_or_else(PoisonError::into_inner);
        let started = Instant::now();
        let result = shard.engine.optimize();
        let elapsed_ms = started.elapsed().as_millis() as u64;
        match result {
            Ok(changed) => {
                tracing::info!(collection = %shard.name, changed, elapsed_ms, "optimized embedded collection");
                if changed {
                    // New segments were written: persist and truncate the WAL soon.
                    let now = Instant::now();
                    shard.state().dirty_since.get_or_insert(now);
                }
            }
            Err(e) => {
                tracing::warn!(collection = %shard.name, error = %e, elapsed_ms, "optimizing embedded collection failed");
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::domain::{RunId, SourceId, WorldId};
    use crate::vector::edge::testing::{open_with_chunks, point};
    use crate::vector::{Point, PointFilter, VectorRepo};

    fn state(now: Instant, dirty_for: Option<Duration>, idle_for: Duration, unoptimized: u64) -> WriteState {
        WriteState {
            dirty_since: dirty_for.map(|d| now - d),
            last_write: now - idle_for,
            unoptimized,
            last_optimize: now - Duration::from_secs(1),
        }
    }

    #[test]
    fn flush_waits_for_writes_to_settle_but_not_forever() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        assert!(
            !flush_due(&state(now, None, ms(10_000), 0), now),
            "clean shards are left alone"
        );
        assert!(
            !flush_due(&state(now, Some(ms(300)), ms(100), 1), now),
            "writes still arriving"
        );
        assert!(
            flush_due(&state(now, Some(ms(700)), ms(600), 1), now),
            "settled for the debounce"
        );
        assert!(
            flush_due(&state(now, Some(ms(6_000)), ms(50), 1), now),
            "continuous writes: flush anyway"
        );
    }

    #[test]
    fn optimize_after_many_points_once_settled_or_overdue() {
        let now = Instant::now();
        let s = Duration::from_secs;
        assert!(!optimize_due(&state(now, None, s(100), 0), now), "nothing written");
        assert!(
            !optimize_due(&state(now, None, s(1), OPTIMIZE_AFTER_POINTS), now),
            "writes not settled"
        );
        assert!(
            optimize_due(&state(now, None, s(3), OPTIMIZE_AFTER_POINTS), now),
            "settled after a bulk load"
        );
        assert!(
            !optimize_due(&state(now, None, s(3), 10), now),
            "a trickle waits for the idle interval"
        );
        let mut overdue = state(now, None, Duration::ZERO, OPTIMIZE_AFTER_POINTS);
        overdue.last_optimize = now - OPTIMIZE_MAX_DELAY;
        assert!(
            optimize_due(&overdue, now),
            "writes that never settle still get optimized"
        );
        let mut trickle = state(now, None, s(3), 10);
        trickle.last_optimize = now - OPTIMIZE_IDLE_INTERVAL;
        assert!(optimize_due(&trickle, now));
    }

    async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn maintenance_flushes_and_optimizes_in_the_background() {
        let dir = tempfile::tempdir().unwrap();
        let repo = open_with_chunks(dir.path()).await;
        let (world, run, source) = (WorldId::new(), RunId::new(), SourceId::new());
        let points: Vec<Point> = (0..OPTIMIZE_AFTER_POINTS as u32)
            .map(|i| point(world, run, source, i, vec![1.0, (i % 13) as f32, (i % 7) as f32, 0.5]))
            .collect();
        let written = Instant::now();
        repo.upsert("chunks", points).await.unwrap();
        let shard = repo.inner.cached("chunks").unwrap();
        assert!(shard.state().dirty_since.is_some(), "a write marks the shard dirty");
        assert_eq!(shard.state().unoptimized, OPTIMIZE_AFTER_POINTS);

        wait_for("the debounced flush", || shard.state().dirty_since.is_none()).await;
        wait_for("the background optimize", || {
            let state = shard.state();
            state.unoptimized == 0 && state.last_optimize > written
        })
        .await;
        assert!(
            written.elapsed() >= OPTIMIZE_SETTLE,
            "optimize waited for the writes to settle"
        );
        assert_eq!(
            repo.count("chunks", PointFilter::world(world)).await.unwrap(),
            OPTIMIZE_AFTER_POINTS
        );
        repo.close().await.unwrap();
        assert!(shard.state().dirty_since.is_none(), "close leaves every shard flushed");
    }
}
