//! Counting work requests and doorbells, by one rule for every backend.
//!
//! A *doorbell* is one hand-over of a list of work requests to a queue pair's send queue
//! (on verbs, one `ibv_wr_start` … `ibv_wr_complete`, the extended form of one
//! `ibv_post_send` of a linked list: one MMIO write to the NIC, however many requests).
//!
//! # The rule
//! Consecutive remote posts of a thread (`Put`, `PutInline`, `PutWords`, `Get`, `Atomic`)
//! are *kept*, per queue pair, in posting order. The kept lists are rung — each non-empty
//! list handed to its queue pair with one doorbell — when the thread issues any other
//! operation ([`rings`]), and a list alone as soon as it holds [`DOORBELL_BOUND`]
//! requests. A run of consecutive posts touching k queue pairs (none reaching the bound)
//! thus rings k doorbells. `Rfence` neither rings nor is kept: its fence flag goes on the
//! next request of its queue pair, which sits in that list exactly where it would have
//! been posted, so keeping it changes nothing the NIC sees.
//!
//! # Why this keeps the model's semantics
//! In the rdma-rmw model a posted operation first sits in the thread's store buffer and
//! enters its queue pair's pipe later, at a time the model leaves open: any delay is one
//! of the model's executions. A kept request is exactly such an operation, one that has
//! not yet left the store buffer; the lists keep each queue pair's posting order, so the
//! pipes receive what they would have received anyway. And since every operation that is
//! not a remote post rings first, no operation can wait for, poll, fence, test or observe
//! (through a CPU load of a word a get or atomic writes) a request that is still kept:
//! whatever a process learns, it learns after its requests were handed to the NIC. A
//! post that fails at once (unknown node, local operand on another node) keeps nothing.
//! The bound only rings earlier, which the model allows as well.
//!
//! The verbs endpoint batches by this rule and counts what it really hands to the NIC
//! (flushes and hand-overs after back-pressure included); the in-process endpoint does
//! not batch but counts by the same rule, so that both report
//! comparable figures.

use crate::op::Op;
use std::ops::AddAssign;

/// At most this many requests are kept for one queue pair: the list is rung when it
/// reaches this length.
pub const DOORBELL_BOUND: u32 = 16;

/// How many work requests an endpoint handed to its queue pairs, how many of them were
/// signaled, and in how many doorbells (see the [module documentation](self)).
///
/// On verbs, every count is what went to the NIC: remote operations refused before it
/// (bad addresses, a queue pair in error) are not counted, flushes are. The in-process
/// backend counts every remote operation posted as one work request, signals nothing and
/// needs no flush (`signaled` and `flushes` stay 0), and counts doorbells by the rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WorkRequests {
    /// Work requests posted: one per remote operation that reached the NIC, plus the
    /// flushes.
    pub posted: u64,
    /// Of those, the signaled ones, flushes included: each produces a work completion.
    pub signaled: u64,
    /// Of those, the flushes: signaled zero-length RDMA WRITEs posted only so that the
    /// requests before them would be reported complete.
    pub flushes: u64,
    /// Doorbells rung: hand-overs of a non-empty list of work requests to one queue pair.
    pub doorbells: u64,
}

impl AddAssign for WorkRequests {
    fn add_assign(&mut self, other: WorkRequests) {
        self.posted += other.posted;
        self.signaled += other.signaled;
        self.flushes += other.flushes;
        self.doorbells += other.doorbells;
    }
}

/// Whether `op`, issued by a thread, rings the thread's kept lists first: every operation
/// but the remote posts and `Rfence`.
pub fn rings(op: &Op) -> bool {
    !matches!(
        op,
        Op::Put { .. }
            | Op::PutInline { .. }
            | Op::PutWords { .. }
            | Op::Get { .. }
            | Op::GetWords { .. }
            | Op::Atomic { .. }
            | Op::Rfence { .. }
    )
}

/// The rule's state for one thread: per queue pair, how many requests are kept; and the
/// counts of work requests and doorbells rung so far (kept by the real backends).
#[cfg(any(feature = "mem", feature = "verbs", test))]
#[derive(Clone, Debug)]
pub(crate) struct Doorbells {
    /// Per queue pair (target node): requests kept since its list was last rung.
    kept: Vec<u32>,
    /// The sum of `kept`: a thread's many non-posting operations ring nothing at a glance.
    kept_in_all: u64,
    /// Work requests and doorbells counted so far.
    requests: u64,
    doorbells: u64,
}

#[cfg(any(feature = "mem", feature = "verbs", test))]
impl Doorbells {
    /// Nothing kept, nothing counted, for `queue_pairs` queue pairs.
    pub(crate) fn new(queue_pairs: usize) -> Doorbells {
        Doorbells {
            kept: vec![0; queue_pairs],
            kept_in_all: 0,
            requests: 0,
            doorbells: 0,
        }
    }

    /// Keeps one more request for queue pair `qp`; whether its list reached
    /// [`DOORBELL_BOUND`] (the caller rings it now).
    pub(crate) fn keep(&mut self, qp: usize) -> bool {
        let kept = &mut self.kept[qp];
        *kept += 1;
        assert!(*kept <= DOORBELL_BOUND, "a full list is rung at once");
        self.kept_in_all += 1;
        *kept == DOORBELL_BOUND
    }

    /// Forgets the requests kept for `qp` (its list went to the NIC); how many there were.
    pub(crate) fn clear(&mut self, qp: usize) -> u32 {
        let kept = std::mem::take(&mut self.kept[qp]);
        self.kept_in_all -= u64::from(kept);
        kept
    }

    /// Counts one doorbell of `requests` work requests (at least one).
    pub(crate) fn count(&mut self, requests: u64) {
        assert!(requests >= 1, "a doorbell hands over at least one request");
        self.requests += requests;
        self.doorbells += 1;
    }

    /// Rings the list of `qp` by the rule: one doorbell if it holds anything.
    #[cfg(any(feature = "mem", test))]
    pub(crate) fn ring(&mut self, qp: usize) {
        let kept = self.clear(qp);
        if kept > 0 {
            self.count(u64::from(kept));
        }
        assert_eq!(self.kept[qp], 0);
    }

    /// Rings every list by the rule.
    #[cfg(any(feature = "mem", test))]
    pub(crate) fn ring_all(&mut self) {
        debug_assert_eq!(
            self.kept_in_all,
            self.kept.iter().map(|&k| u64::from(k)).sum::<u64>(),
            "the sum is the lists'"
        );
        if self.kept_in_all == 0 {
            return; // no list holds a request
        }
        for qp in 0..self.kept.len() {
            self.ring(qp);
        }
        assert_eq!(self.kept_in_all, 0, "every list rung");
    }

    /// Work requests counted so far.
    pub(crate) fn requests(&self) -> u64 {
        self.requests
    }

    /// Doorbells counted so far.
    pub(crate) fn doorbells(&self) -> u64 {
        self.doorbells
    }
}

#[cfg(test)]
mod tests {
    use super::{DOORBELL_BOUND, Doorbells, WorkRequests, rings};
    use crate::ids::{Loc, NodeId, WorkId};
    use crate::op::Op;

    fn put(node: u16) -> Op {
        Op::PutInline {
            remote: Loc::word(NodeId(node), 0),
            value: 1,
            work_id: WorkId(1),
        }
    }

    /// Runs `ops` through the rule as an endpoint that does not batch would.
    fn counted(ops: &[Op]) -> Doorbells {
        let mut d = Doorbells::new(4);
        for op in ops {
            if rings(op) {
                d.ring_all();
            }
            if let Some(node) = op.target().filter(|_| op.work_id().is_some())
                && d.keep(node.index())
            {
                d.ring(node.index());
            }
        }
        d.ring_all();
        d
    }

    #[test]
    fn a_run_touching_k_queue_pairs_rings_k_doorbells() {
        let wait = Op::Wait { work_id: WorkId(1) };
        let d = counted(&[put(1), put(2), put(1), put(3), wait.clone(), put(1), wait]);
        assert_eq!(d.requests(), 5);
        assert_eq!(d.doorbells(), 4, "3 for the first run, 1 for the second");
    }

    #[test]
    fn rfence_keeps_the_run_and_other_operations_end_it() {
        let fence = Op::Rfence { node: NodeId(1) };
        let d = counted(&[put(1), fence, put(1)]);
        assert_eq!((d.requests(), d.doorbells()), (2, 1));
        let d = counted(&[put(1), Op::Now, put(1)]);
        assert_eq!((d.requests(), d.doorbells()), (2, 2));
        for op in [
            Op::Mfence,
            Op::Load {
                loc: Loc::word(NodeId(0), 0),
            },
            Op::Pause { ns: 1 },
            Op::Test { work_id: WorkId(1) },
            Op::GlobalFence { node: NodeId(1) },
        ] {
            assert!(rings(&op), "{op:?}");
        }
        assert!(!rings(&put(1)));
    }

    #[test]
    fn a_list_at_the_bound_is_rung_alone() {
        let mut ops: Vec<Op> = (0..DOORBELL_BOUND + 3).map(|_| put(1)).collect();
        ops.insert(1, put(2));
        let d = counted(&ops);
        // Queue pair 1: one full list, then 3; queue pair 2: one.
        assert_eq!(d.requests(), u64::from(DOORBELL_BOUND) + 4);
        assert_eq!(d.doorbells(), 3);
    }

    #[test]
    fn nothing_kept_rings_nothing() {
        let mut d = Doorbells::new(2);
        d.ring_all();
        assert_eq!((d.requests(), d.doorbells()), (0, 0));
        assert!(!d.keep(0));
        assert_eq!(d.clear(0), 1);
        d.ring_all();
        assert_eq!(d.doorbells(), 0, "a cleared list was handed over elsewhere");
        d.count(3);
        assert_eq!((d.requests(), d.doorbells()), (3, 1));
    }

    #[test]
    fn work_requests_add_up() {
        let mut a = WorkRequests {
            posted: 3,
            signaled: 1,
            flushes: 0,
            doorbells: 2,
        };
        a += WorkRequests {
            posted: 2,
            signaled: 2,
            flushes: 1,
            doorbells: 1,
        };
        assert_eq!(
            a,
            WorkRequests {
                posted: 5,
                signaled: 3,
                flushes: 1,
                doorbells: 3
            }
        );
    }
}
