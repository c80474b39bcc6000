//! When a failed pass is retried. A pass fails when a write is refused (an output, a policy's status,
//! a target's `toolgate.dev/XAccessPolicyAffected` condition) or the API server does not answer; the
//! next pass retries every write still wanting. A change in the cluster runs a pass at once, as
//! always; without one, the retry waits an exponential delay with jitter: the first in [1s, 2s), each
//! next about twice the last, never reaching `CAP` (30s), so a write that keeps failing (a missing
//! RBAC rule, a CRD taken away, an API server down) is neither hammered every second nor left for
//! long, and replicas do not retry in step. A successful pass starts the schedule over.
//!
//! The delays are backon's exponential backoff (kube-runtime's own dependency, for its watchers):
//! its jitter adds up to the delay itself, so the delay before jitter stops at `CAP / 2`.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio::time::Instant;

/// The delay before the first retry, before jitter (with jitter: `[FIRST, 2 × FIRST)`).
pub const FIRST: Duration = Duration::from_secs(1);
/// No retry waits this long or longer.
pub const CAP: Duration = Duration::from_secs(30);

/// The retry schedule of the reconcile loop: `failed` after each failed pass, `succeeded` after a
/// successful one (or when not leading: no pass to retry), and `due` to wait for the retry.
pub struct Retry {
    builder: ExponentialBuilder,
    delays: <ExponentialBuilder as BackoffBuilder>::Backoff,
    due: Option<Instant>,
}

impl Retry {
    pub fn new() -> Self {
        Self::of(ExponentialBuilder::default())
    }

    /// The same schedule with a fixed jitter sequence (tests).
    #[cfg(test)]
    fn seeded(seed: u64) -> Self {
        Self::of(ExponentialBuilder::default().with_jitter_seed(seed))
    }

    fn of(builder: ExponentialBuilder) -> Self {
        let builder = builder
            .with_min_delay(FIRST)
            .with_factor(2.0)
            .with_max_delay(CAP / 2)
            .with_jitter()
            .without_max_times();
        Self {
            builder,
            delays: builder.build(),
            due: None,
        }
    }

    /// A pass failed: its retry is due after the returned delay.
    pub fn failed(&mut self) -> Duration {
        let delay = self.next_delay();
        self.due = Some(Instant::now() + delay);
        delay
    }

    /// Nothing to retry: the next failure waits `FIRST` again.
    pub fn succeeded(&mut self) {
        self.due = None;
        self.delays = self.builder.build();
    }

    /// Completes when the retry is due; never when none is.
    pub async fn due(&self) {
        match self.due {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }

    fn next_delay(&mut self) -> Duration {
        // Without a limit on the attempts the schedule never ends; below the cap whatever it yields.
        self.delays
            .next()
            .unwrap_or(CAP / 2)
            .min(CAP - Duration::from_millis(1))
    }
}

impl Default for Retry {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each delay is its step's base (1s, 2s, 4s, 8s, then 15s: `CAP / 2`) plus a jitter below the base.
    fn in_step(delay: Duration, step: u32) -> bool {
        let base = (FIRST * 2u32.pow(step.min(4))).min(CAP / 2);
        base <= delay && delay < base * 2
    }

    #[test]
    fn delays_grow_exponentially_and_stop_below_the_cap() {
        for seed in 0..200 {
            let mut b = Retry::seeded(seed);
            let delays: Vec<Duration> = (0..12).map(|_| b.next_delay()).collect();
            for (step, d) in delays.iter().enumerate() {
                assert!(
                    in_step(*d, step as u32),
                    "seed {seed}: delay {step} is {d:?}: {delays:?}"
                );
                assert!(*d < CAP, "seed {seed}: {delays:?}");
            }
            // Below the cap every delay is longer than the one before (the ranges [1,2), [2,4), [4,8),
            // [8,16) do not overlap); from then on each is between CAP / 2 and CAP.
            assert!(
                delays[..4].windows(2).all(|w| w[0] < w[1]),
                "seed {seed}: {delays:?}"
            );
            assert!(
                delays[4..].iter().all(|d| *d >= CAP / 2),
                "seed {seed}: {delays:?}"
            );
            // A failure that lasts: the waits add up to about a retry every CAP / 2 to CAP, not every second.
            let total: Duration = delays.iter().sum();
            assert!(
                total >= Duration::from_secs(1 + 2 + 4 + 8 + 15 * 8),
                "seed {seed}: {total:?}"
            );
        }
    }

    #[test]
    fn jitter_spreads_replicas_and_a_success_starts_over() {
        // Two replicas failing together do not retry in step: at the cap, the seeds give different delays.
        let at_cap: std::collections::BTreeSet<Duration> = (0..50)
            .map(|seed| {
                let mut b = Retry::seeded(seed);
                (0..7).map(|_| b.next_delay()).last().unwrap_or_default()
            })
            .collect();
        assert!(at_cap.len() > 40, "{at_cap:?}");

        let mut b = Retry::seeded(7);
        let delays: Vec<Duration> = (0..7).map(|_| b.failed()).collect();
        assert!(
            delays
                .iter()
                .enumerate()
                .all(|(step, d)| in_step(*d, step as u32)),
            "{delays:?}"
        );
        assert!(b.due.is_some());
        b.succeeded();
        assert!(b.due.is_none(), "nothing to retry after a success");
        let again: Vec<Duration> = (0..2).map(|_| b.failed()).collect();
        assert!(
            in_step(again[0], 0) && in_step(again[1], 1),
            "after a success the schedule starts over: {again:?}"
        );
    }
}
