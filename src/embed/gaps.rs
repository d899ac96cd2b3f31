//! Gaps in a cluster's availability: the time during which no replica takes proposals.
//! The drivers report each change of their replica's "takes proposals" (a count of the
//! replicas that do is kept) and look at the gap at every turn; once it lasts longer than
//! the log's failure timeout a `WARN` event says so, and when a replica takes proposals
//! again an `INFO` event gives the gap's length. A normal failover lasts about a failure
//! timeout (the time to suspect the crashed leader) plus an election, so each one is
//! reported; a replica that stops deciding without crashing — a state machine's long
//! `apply` or `snapshot`, a descheduled thread — still shows that it leads, and is not.
//!
//! Only a [`Cluster`](super::Cluster) watches gaps: it sees every replica. A
//! [`Node`](super::Node) sees its own only, and a follower never takes proposals.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Whose clock measures a gap: the one every replica of the cluster shares.
#[derive(Debug)]
pub(crate) enum Clock {
    /// The wall clock, from this instant (the in-process backend: each replica's thread
    /// has a clock of its own, started when the thread started).
    Wall(Instant),
    /// The backend's, as the drivers read it (the emulator's virtual time).
    Backend,
}

/// The gap watch of one cluster.
#[derive(Debug)]
pub(crate) struct Gaps {
    clock: Clock,
    timeout_ns: u64,
    /// No replica takes proposals (read at every turn; the rest is behind the lock).
    open: AtomicBool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Replicas that take proposals.
    leading: u32,
    /// When the open gap began (ns); `None` until a driver read the time.
    since: Option<u64>,
    /// The open gap was reported as longer than the timeout.
    warned: bool,
}

impl Gaps {
    /// A watch of a cluster that starts with no replica taking proposals, warning after
    /// `timeout_ns` (the log's failure timeout) without one.
    pub(crate) fn new(clock: Clock, timeout_ns: u64) -> Gaps {
        Gaps {
            clock,
            timeout_ns,
            open: AtomicBool::new(true),
            state: Mutex::new(State {
                leading: 0,
                since: Some(0),
                warned: false,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nobody panics holding it; a poisoned lock still holds a consistent state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The time on the cluster's clock: the driver's reading `now` (ns), if it has one.
    fn time(&self, now: Option<u64>) -> Option<u64> {
        match &self.clock {
            Clock::Wall(epoch) => {
                Some(u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
            }
            Clock::Backend => now,
        }
    }

    /// Replica `replica` now takes proposals (`leading`) or no longer does, at `now` (the
    /// backend's clock; `None` when the caller has none: the handle crashing a replica).
    pub(crate) fn leading_changed(&self, replica: u16, leading: bool, now: Option<u64>) {
        let t = self.time(now);
        let mut state = self.lock();
        if leading {
            state.leading += 1;
            if state.leading == 1 {
                self.open.store(false, Ordering::SeqCst);
                let since = state.since.take();
                if std::mem::take(&mut state.warned) {
                    let gap = t.zip(since).map_or(0, |(t, s)| t.saturating_sub(s));
                    tracing::info!(
                        replica,
                        gap_ms = ms(gap),
                        "proposals resume: a replica takes them again"
                    );
                }
            }
        } else {
            assert!(state.leading > 0, "a replica that took proposals stops");
            state.leading -= 1;
            if state.leading == 0 {
                state.since = t;
                state.warned = false;
                self.open.store(true, Ordering::SeqCst);
            }
        }
    }

    /// A driver's turn at `now`: warns once an open gap is longer than the timeout.
    pub(crate) fn check(&self, now: u64) {
        if !self.open.load(Ordering::SeqCst) {
            return;
        }
        let Some(t) = self.time(Some(now)) else {
            return;
        };
        let mut state = self.lock();
        if state.leading > 0 || state.warned {
            return;
        }
        let since = *state.since.get_or_insert(t);
        let gap = t.saturating_sub(since);
        if gap > self.timeout_ns {
            state.warned = true;
            tracing::warn!(
                for_ms = ms(gap),
                failure_timeout_ms = ms(self.timeout_ns),
                "no replica has taken proposals for longer than the failure timeout"
            );
        }
    }
}

/// `ns` in milliseconds, to the microsecond.
fn ms(ns: u64) -> f64 {
    Duration::from_nanos(ns).as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the watch says, as `(warned, open)`.
    fn seen(g: &Gaps) -> (bool, bool) {
        (g.lock().warned, g.open.load(Ordering::SeqCst))
    }

    #[test]
    fn a_gap_longer_than_the_timeout_is_told_once_and_closed_by_a_leader() {
        let g = Gaps::new(Clock::Backend, 100);
        g.check(50);
        assert_eq!(
            seen(&g),
            (false, true),
            "from the start, within the timeout"
        );
        g.leading_changed(0, true, Some(60));
        g.check(500);
        assert_eq!(seen(&g), (false, false), "a replica takes proposals");
        // Crashed by the handle, which has no clock: the next turn starts the gap.
        g.leading_changed(0, false, None);
        g.check(1_000);
        g.check(1_100);
        assert_eq!(
            seen(&g),
            (false, true),
            "100 ns: not longer than the timeout"
        );
        g.check(1_101);
        assert_eq!(seen(&g), (true, true));
        g.check(5_000);
        assert_eq!(g.lock().since, Some(1_000), "told once, the start kept");
        // Two replicas lead for a moment (a deposed one not stepped down yet).
        g.leading_changed(1, true, Some(6_000));
        g.leading_changed(2, true, Some(6_001));
        g.leading_changed(1, false, Some(6_002));
        assert_eq!(seen(&g), (false, false), "one still takes proposals");
        assert_eq!(g.lock().leading, 1);
    }
}
