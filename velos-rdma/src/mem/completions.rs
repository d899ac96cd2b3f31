//! Completion bookkeeping of one endpoint: what has completed, and what failed.

use crate::error::RdmaError;
use crate::ids::{NodeId, WorkId};
#[cfg(loom)]
use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::{Condvar, Mutex, MutexGuard};

/// Identifies one posted remote operation of an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ticket {
    /// Position among every remote operation of the endpoint, from 1 (posting order).
    pub(crate) seq: u64,
    /// The target node of the queue pair.
    pub(crate) target: NodeId,
    /// Position on the queue pair, from 1 (posting order there).
    pub(crate) qp_seq: u64,
    /// The operation's work id.
    pub(crate) work_id: WorkId,
}

/// What completed so far. Operations complete in posting order on each queue pair, so a
/// counter per queue pair says which ones are done.
#[derive(Debug)]
pub(crate) struct Completions {
    /// Per target node: how many operations on the queue pair have completed.
    completed: Vec<u64>,
    /// Completed operations that failed and whose failure nobody has reported yet.
    failures: Vec<(Ticket, RdmaError)>,
}

impl Completions {
    /// No completions, for a fabric of `nodes` nodes.
    pub(crate) fn new(nodes: usize) -> Completions {
        Completions {
            completed: vec![0; nodes],
            failures: Vec::new(),
        }
    }

    /// Records the completion of the operation `ticket` with `result`.
    pub(crate) fn complete(&mut self, ticket: Ticket, result: Result<(), RdmaError>) {
        let completed = &mut self.completed[ticket.target.index()];
        // Queue pairs are FIFO: the backend's ordering guarantee depends on it.
        assert_eq!(*completed + 1, ticket.qp_seq, "out-of-order completion");
        *completed = ticket.qp_seq;
        if let Err(error) = result {
            self.failures.push((ticket, error));
        }
    }

    /// How many operations on the queue pair towards `target` have completed.
    pub(crate) fn completed(&self, target: NodeId) -> u64 {
        self.completed[target.index()]
    }

    /// Whether, on every queue pair, the first `qp_seqs[target]` operations have completed.
    pub(crate) fn covers(&self, qp_seqs: &[u64]) -> bool {
        self.completed
            .iter()
            .zip(qp_seqs)
            .all(|(completed, qp_seq)| completed >= qp_seq)
    }

    /// Removes every recorded failure that `covered` selects and returns the one of the
    /// earliest posted operation among them.
    pub(crate) fn take_failure(&mut self, covered: impl Fn(&Ticket) -> bool) -> Option<RdmaError> {
        if self.failures.is_empty() {
            return None;
        }
        let (taken, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.failures)
            .into_iter()
            .partition(|(ticket, _)| covered(ticket));
        self.failures = kept;
        taken
            .into_iter()
            .min_by_key(|(ticket, _)| ticket.seq)
            .map(|(_, error)| error)
    }
}

/// [`Completions`] shared between an endpoint and its node's NIC worker.
#[derive(Debug)]
pub(crate) struct SharedCompletions {
    state: Mutex<Completions>,
    changed: Condvar,
}

impl SharedCompletions {
    /// No completions, for a fabric of `nodes` nodes.
    pub(crate) fn new(nodes: usize) -> SharedCompletions {
        SharedCompletions {
            state: Mutex::new(Completions::new(nodes)),
            changed: Condvar::new(),
        }
    }

    /// Records a completion and wakes the endpoint if it waits.
    pub(crate) fn complete(&self, ticket: Ticket, result: Result<(), RdmaError>) {
        self.lock().complete(ticket, result);
        self.changed.notify_one();
    }

    /// Blocks (parked, not spinning) until `ready` holds, then runs `then` on the state.
    pub(crate) fn settle<R>(
        &self,
        ready: impl Fn(&Completions) -> bool,
        then: impl FnOnce(&mut Completions) -> R,
    ) -> R {
        // A plain loop rather than `wait_while`, so that loom's `Condvar` can stand in.
        let mut state = self.lock();
        while !ready(&state) {
            state = self.changed.wait(state).expect("completion lock poisoned");
        }
        then(&mut state)
    }

    fn lock(&self) -> MutexGuard<'_, Completions> {
        self.state.lock().expect("completion lock poisoned")
    }
}

#[cfg(test)]
mod tests {
    use super::{Completions, Ticket};
    use crate::error::RdmaError;
    use crate::ids::{Loc, NodeId, WorkId};

    /// Operation `seq` of an endpoint, number `qp_seq` towards `target` (shared with the
    /// loom tests).
    pub(super) fn ticket(seq: u64, target: u16, qp_seq: u64) -> Ticket {
        Ticket {
            seq,
            target: NodeId(target),
            qp_seq,
            work_id: WorkId(1),
        }
    }

    fn crashed(node: u16) -> RdmaError {
        RdmaError::RemoteCrashed { node: NodeId(node) }
    }

    #[test]
    fn failures_are_reported_once_earliest_posted_first() {
        let mut completions = Completions::new(3);
        // Posted: seq 1 towards node 1, seq 2 towards node 2; node 2 completes first.
        completions.complete(ticket(2, 2, 1), Err(crashed(2)));
        completions.complete(ticket(1, 1, 1), Err(crashed(1)));
        assert!(completions.covers(&[0, 1, 1]));
        assert!(!completions.covers(&[0, 2, 1]));
        assert_eq!(completions.take_failure(|_| true), Some(crashed(1)));
        assert_eq!(completions.take_failure(|_| true), None);
    }

    #[test]
    fn taking_leaves_uncovered_failures() {
        let mut completions = Completions::new(2);
        let oob = RdmaError::OutOfBounds {
            loc: Loc::word(NodeId(1), 9),
        };
        completions.complete(ticket(1, 1, 1), Ok(()));
        completions.complete(ticket(2, 1, 2), Err(oob.clone()));
        assert_eq!(completions.completed(NodeId(1)), 2);
        assert_eq!(completions.take_failure(|t| t.qp_seq == 1), None);
        assert_eq!(completions.take_failure(|t| t.qp_seq == 2), Some(oob));
    }

    #[test]
    #[should_panic(expected = "out-of-order completion")]
    fn completions_of_a_queue_pair_come_in_order() {
        let mut completions = Completions::new(2);
        completions.complete(ticket(2, 1, 2), Ok(()));
    }
}

/// Model-checked with loom: every interleaving of a NIC worker completing operations and an
/// endpoint waiting for them. Run: `RUSTFLAGS="--cfg loom" cargo test -p velos-rdma --release --lib loom`.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::SharedCompletions;
    use super::tests::ticket;
    use crate::error::RdmaError;
    use crate::ids::NodeId;
    use loom::sync::Arc;
    use loom::thread;

    #[test]
    fn loom_a_waiter_wakes_for_the_last_completion() {
        loom::model(|| {
            let shared = Arc::new(SharedCompletions::new(2));
            let worker = {
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    shared.complete(ticket(1, 1, 1), Ok(()));
                    shared.complete(ticket(2, 1, 2), Ok(()));
                })
            };
            // The endpoint waits for both operations on the queue pair towards node 1.
            let seen = shared.settle(|c| c.completed(NodeId(1)) >= 2, |c| c.completed(NodeId(1)));
            assert_eq!(seen, 2);
            worker.join().expect("worker");
        });
    }

    #[test]
    fn loom_a_failure_is_reported_exactly_once() {
        loom::model(|| {
            let shared = Arc::new(SharedCompletions::new(2));
            let crashed = RdmaError::RemoteCrashed { node: NodeId(1) };
            let worker = {
                let shared = Arc::clone(&shared);
                let crashed = crashed.clone();
                thread::spawn(move || shared.complete(ticket(1, 1, 1), Err(crashed)))
            };
            let first = shared.settle(
                |c| c.completed(NodeId(1)) >= 1,
                |c| c.take_failure(|_| true),
            );
            worker.join().expect("worker");
            let second = shared.settle(|_| true, |c| c.take_failure(|_| true));
            assert_eq!(first, Some(crashed));
            assert_eq!(second, None);
        });
    }
}
