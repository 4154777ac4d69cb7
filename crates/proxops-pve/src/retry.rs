//! [`RetryPolicy`]: bounded retries with jittered exponential backoff, applied only to errors
//! classified retryable. Jitter comes from a seeded `fastrand` generator ([`Jitter`]): reproducible
//! when a seed is given, and free of a `rand` dependency.

use std::sync::Mutex;
use std::time::Duration;

/// How often and how patiently a retryable failure is tried again.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts in total, the first included (1 = no retries).
    pub max_attempts: u32,
    /// The backoff before the first retry (before jitter).
    pub base_delay: Duration,
    /// The largest backoff (before jitter).
    pub max_delay: Duration,
    /// Seed of the jitter; `None` seeds from the clock.
    pub seed: Option<u64>,
}

impl RetryPolicy {
    /// Sets [`RetryPolicy::max_attempts`].
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }
    /// Sets [`RetryPolicy::base_delay`].
    pub fn with_base_delay(mut self, base_delay: Duration) -> Self {
        self.base_delay = base_delay;
        self
    }
    /// Sets [`RetryPolicy::max_delay`].
    pub fn with_max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay;
        self
    }
    /// Sets [`RetryPolicy::seed`].
    pub fn with_seed(mut self, seed: Option<u64>) -> Self {
        self.seed = seed;
        self
    }
}

impl Default for RetryPolicy {
    /// 5 attempts, 250 ms doubling up to 8 s: about 4-8 s of waiting in total, enough for a
    /// short-lived lock (a backup snapshot, a config write) to clear.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(8),
            seed: None,
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The backoff before retry number `retry` (0 for the first retry): "equal jitter", half the
    /// exponential step plus a random part of the other half, so waits never collapse to zero
    /// and concurrent clients spread out.
    pub fn delay(&self, retry: u32, jitter: &Jitter) -> Duration {
        let factor = 1u32.checked_shl(retry.min(20)).unwrap_or(u32::MAX);
        let step = self
            .base_delay
            .saturating_mul(factor)
            .min(self.max_delay)
            .as_secs_f64();
        Duration::from_secs_f64(step / 2.0 + step / 2.0 * jitter.next_f64())
    }
}

/// A shared stream of jitter draws: seeded (reproducible) or from fastrand's own seed.
#[derive(Debug)]
pub struct Jitter(Mutex<fastrand::Rng>);

impl Jitter {
    /// A stream from a seed (or, without one, seeded by fastrand from the process's state).
    pub fn new(seed: Option<u64>) -> Jitter {
        Jitter(Mutex::new(match seed {
            Some(seed) => fastrand::Rng::with_seed(seed),
            None => fastrand::Rng::new(),
        }))
    }

    /// The next draw in `[0, 1)`.
    pub fn next_f64(&self) -> f64 {
        // A poisoned lock only means another draw panicked; the generator is still fine.
        self.0.lock().unwrap_or_else(|e| e.into_inner()).f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_bounded_and_jittered() {
        let p = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            seed: Some(1),
        };
        let j = Jitter::new(Some(1));
        let ds: Vec<Duration> = (0..8).map(|r| p.delay(r, &j)).collect();
        for (r, d) in ds.iter().enumerate() {
            let step = (100u64 << r).min(1000);
            assert!(
                d.as_millis() as u64 >= step / 2 && d.as_millis() as u64 <= step,
                "{r} {d:?}"
            );
        }
        // Same seed, same waits.
        let j2 = Jitter::new(Some(1));
        assert_eq!(ds, (0..8).map(|r| p.delay(r, &j2)).collect::<Vec<_>>());
        assert!(p.delay(u32::MAX, &j) <= Duration::from_secs(1));
    }
}
