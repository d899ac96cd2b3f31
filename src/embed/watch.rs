//! Who leads, watched without polling: every replica's driver bumps a version when what it
//! shows of leadership changes (the leader it trusts, whether it leads, whether it is up);
//! a blocked caller waits on a condition variable, a future registers its waker. A
//! cluster's watch also keeps its [`Gaps`]: how long no replica has taken proposals.

use super::gaps::Gaps;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::time::{Duration, Instant};

/// The version of the cluster's leadership view, and who waits for it to move.
#[derive(Debug, Default)]
pub(crate) struct LeaderWatch {
    state: Mutex<WatchState>,
    moved: Condvar,
    /// The gaps without a replica that takes proposals, if this watch sees every replica.
    gaps: Option<Gaps>,
}

#[derive(Debug, Default)]
struct WatchState {
    version: u64,
    wakers: Vec<Waker>,
}

impl LeaderWatch {
    /// A watch that also reports the gaps without a replica that takes proposals.
    pub(crate) fn with_gaps(gaps: Gaps) -> LeaderWatch {
        LeaderWatch {
            gaps: Some(gaps),
            ..LeaderWatch::default()
        }
    }

    /// Replica `replica` started or stopped taking proposals, at `now` if known.
    pub(crate) fn leading_changed(&self, replica: u16, leading: bool, now: Option<u64>) {
        if let Some(gaps) = &self.gaps {
            gaps.leading_changed(replica, leading, now);
        }
    }

    /// A driver's turn at `now`: an open gap is told once it is longer than the timeout.
    pub(crate) fn check_gap(&self, now: u64) {
        if let Some(gaps) = &self.gaps {
            gaps.check(now);
        }
    }

    fn lock(&self) -> MutexGuard<'_, WatchState> {
        // Nobody panics holding it; a poisoned lock still holds a consistent state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current version.
    pub(crate) fn version(&self) -> u64 {
        self.lock().version
    }

    /// Leadership as some replica shows it changed: wake every waiter.
    pub(crate) fn bump(&self) {
        let wakers = {
            let mut state = self.lock();
            state.version += 1;
            std::mem::take(&mut state.wakers)
        };
        self.moved.notify_all();
        for w in wakers {
            w.wake();
        }
    }

    /// Blocks until the version passes `seen`, at most `timeout`; whether it did.
    pub(crate) fn wait_past(&self, seen: u64, timeout: Duration) -> bool {
        let start = Instant::now();
        let mut state = self.lock();
        while state.version == seen {
            let Some(left) = timeout.checked_sub(start.elapsed()) else {
                return false;
            };
            state = self
                .moved
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// Keeps `waker` to wake at the next bump, unless the version already passed `seen`
    /// (then `false`: look again now).
    pub(crate) fn register(&self, seen: u64, waker: &Waker) -> bool {
        let mut state = self.lock();
        if state.version != seen {
            return false;
        }
        if !state.wakers.iter().any(|w| w.will_wake(waker)) {
            state.wakers.push(waker.clone());
        }
        true
    }
}
