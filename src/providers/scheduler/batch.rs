//! The workers' batch sizes: halved when a provider refuses a batch as too large, grown back
//! gradually.

use std::sync::{Mutex, PoisonError};

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
}
