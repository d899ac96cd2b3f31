//! Which work requests are signaled, and when a queue pair needs a flush.
//!
//! A signaled work request produces a work completion when it completes; an unsignaled
//! one produces none when it succeeds. On an RC queue pair requests complete in posting
//! order, so the completion of a signaled request reports every earlier request of its
//! send queue as complete too (and a get's or atomic's local word as written). An error
//! always produces a completion, signaled or not, carrying the failed request's work
//! request id; it moves the queue pair to the error state, and the NIC then completes
//! every later request with a flush error, one completion each (the IBA rule that
//! completions in error are always generated; soft-RoCE's completer does so). So the
//! work request id of every request keeps naming its target and position
//! ([`Ticket`](super::completions::Ticket)), and failures map to their work ids exactly
//! as when everything was signaled.
//!
//! # The policy
//! A request is signaled when
//! * it is a get or an atomic: the caller almost always waits for it next (its local
//!   word is its result), so leaving it unsignaled would only trade its completion for a
//!   flush; and it keeps every flush behind a put (below);
//! * it is the [`interval`](Signaling::interval)-th request in a row on its queue pair
//!   that would otherwise go unsignaled: the send-queue slots of unsignaled requests are
//!   given back only when a later signaled completion is polled, so a bounded run keeps
//!   the send queue from filling with slots nobody can reclaim. The default interval is a
//!   quarter of the send-queue depth ([`default_interval`]): a burst of puts produces
//!   one completion per 16 requests at depth 64, while a full send queue always holds
//!   about four signaled requests, so posting resumes as soon as the oldest quarter
//!   completes instead of after a drain;
//! * no signaled request of its queue pair is outstanding (the queue pair is idle, or
//!   holds only unsignaled requests): a lone put followed by its wait costs one work
//!   request, as before, and a later wait never needs a flush for what came before it.
//!
//! Every other request (a put in a burst) goes unsignaled.
//!
//! # Flushes
//! A `Wait`, `Test`, `WaitAny`, `Poll`, `GlobalFence` or a full send queue may need a
//! request that no signaled request covers yet (an unsignaled put with nothing signaled
//! posted after it on its queue pair): it would never be reported complete. Then the
//! endpoint posts a *flush*, a signaled zero-length RDMA WRITE after everything on that
//! queue pair, whose completion reports them. It targets the remote word of the newest
//! put, the newest request of the queue pair (gets and atomics are signaled, so an
//! uncovered request is a put): with the key that put was posted with, which grants
//! remote write on that word. A zero-length WRITE touches no memory; whether the
//! responder checks its key or not (IBA C9-88 says it need not), it passes. A
//! zero-length READ, or a WRITE with some other key, could be refused under a region
//! plan (a read-only or atomic-only range) and break the queue pair. If the put itself
//! fails, its own error completion comes first and the flush completes flushed.
//!
//! A flush has a work request id of its own (the flush bit, and the position of the
//! newest request before it); it has no work id and is never reported to a process. At
//! most one flush per queue pair is outstanding: the send queue has one slot more than
//! the depth for it. A blocking wait that needs another waits for the first to complete
//! first; `Test` never blocks: it posts a flush when the slot is free and otherwise
//! leaves it to a later `Test`, so a test loop still sees every successful request
//! complete. A flush is posted only on a queue pair that is not broken: on a broken one
//! the NIC's flush-error completions (or the completion timeout) complete everything.
//!
//! Before [`VerbsEndpoint::set_queue_pair_error`](super::VerbsEndpoint::set_queue_pair_error)
//! moves a queue pair to the error state, its uncovered requests get a flush: the NIC
//! reports no completion for an unsignaled request that succeeded before the state
//! change, so without one they would only complete through the timeout.

use super::memory::WordAddress;
use super::request::Verb;
use crate::doorbell::WorkRequests;

/// The signal interval for a send queue of `depth` slots: a quarter of it, at least 1
/// (why: see the module documentation).
pub(super) fn default_interval(depth: u32) -> u32 {
    (depth / 4).max(1)
}

/// The signaling state of one queue pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct QueuePairSignals {
    /// The newest position a signaled work request covers: its completion reports every
    /// request up to it (a signaled request covers its own position, a flush the newest
    /// request before it). 0: none.
    covered: u64,
    /// The position of the newest request handed to the NIC (0: none).
    newest: u64,
    /// Requests handed to the NIC unsignaled since the newest signaled one.
    run: u32,
    /// The remote word of the newest request when it went unsignaled (a put): what a
    /// flush targets.
    put_target: Option<WordAddress>,
}

/// The signaling state of one queue pair and the counts, saved before a list of requests
/// goes to the NIC ([`Signaling::checkpoint`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Checkpoint {
    t: usize,
    queue_pair: QueuePairSignals,
    counts: WorkRequests,
}

/// Which requests of an endpoint are signaled, per target node (queue pair).
#[derive(Debug)]
pub(super) struct Signaling {
    /// At most `interval - 1` requests in a row go unsignaled on a queue pair.
    interval: u32,
    queue_pairs: Vec<QueuePairSignals>,
    counts: WorkRequests,
}

impl Signaling {
    /// Nothing posted yet, towards `nodes` nodes, with the signal interval `interval`.
    pub(super) fn new(nodes: usize, interval: u32) -> Signaling {
        assert!(interval >= 1, "a signal interval of at least 1");
        Signaling {
            interval,
            queue_pairs: vec![QueuePairSignals::default(); nodes],
            counts: WorkRequests::default(),
        }
    }

    /// The signal interval.
    pub(super) fn interval(&self) -> u32 {
        self.interval
    }

    /// Changes the signal interval (1: every request is signaled).
    pub(super) fn set_interval(&mut self, interval: u32) {
        assert!(interval >= 1, "a signal interval of at least 1");
        self.interval = interval;
    }

    /// What has been posted so far.
    pub(super) fn counts(&self) -> WorkRequests {
        self.counts
    }

    /// Whether the next request on the queue pair towards target `t` is signaled, given
    /// its verb and that the first `completed` requests there have completed.
    pub(super) fn decide(&self, t: usize, verb: &Verb, completed: u64) -> bool {
        let qp = &self.queue_pairs[t];
        let put = matches!(
            verb,
            Verb::Write { .. } | Verb::WriteInline { .. } | Verb::WriteWords { .. }
        );
        let idle = qp.covered <= completed;
        !put || idle || qp.run + 1 >= self.interval
    }

    /// Records request `qp_seq`, towards `remote`, handed to the NIC on the queue pair
    /// towards `t`.
    pub(super) fn posted(&mut self, t: usize, qp_seq: u64, signaled: bool, remote: WordAddress) {
        let qp = &mut self.queue_pairs[t];
        assert!(qp_seq > qp.newest, "positions grow");
        qp.newest = qp_seq;
        if signaled {
            qp.covered = qp_seq;
            qp.run = 0;
            qp.put_target = None;
            self.counts.signaled += 1;
        } else {
            qp.run += 1;
            qp.put_target = Some(remote);
        }
        self.counts.posted += 1;
        assert!(signaled || qp.run < self.interval);
    }

    /// The state of the queue pair towards `t` and the counts, before a list of requests
    /// is recorded: what [`Signaling::restore`] goes back to if the NIC refuses the list.
    pub(super) fn checkpoint(&self, t: usize) -> Checkpoint {
        Checkpoint {
            t,
            queue_pair: self.queue_pairs[t],
            counts: self.counts,
        }
    }

    /// Forgets every request recorded since `checkpoint` (none of them was posted).
    pub(super) fn restore(&mut self, checkpoint: Checkpoint) {
        self.queue_pairs[checkpoint.t] = checkpoint.queue_pair;
        self.counts = checkpoint.counts;
        assert_eq!(self.checkpoint(checkpoint.t), checkpoint);
    }

    /// The remote word a flush on the queue pair towards `t` targets, if requests up to
    /// position `upto` there need one: some of them are on the NIC, not complete (the
    /// first `completed` are) and covered by no signaled request.
    pub(super) fn flush_target(&self, t: usize, upto: u64, completed: u64) -> Option<WordAddress> {
        let qp = &self.queue_pairs[t];
        let needed = upto.min(qp.newest);
        if completed >= needed || qp.covered >= needed {
            return None;
        }
        // Only puts go unsignaled, and the newest request is not covered: it is a put.
        let target = qp
            .put_target
            .expect("an uncovered request is an unsignaled put");
        assert!(qp.run >= 1);
        Some(target)
    }

    /// The position a flush posted now on the queue pair towards `t` covers: the newest
    /// request there.
    pub(super) fn flush_position(&self, t: usize) -> u64 {
        self.queue_pairs[t].newest
    }

    /// Records a flush handed to the NIC on the queue pair towards `t`.
    pub(super) fn flushed(&mut self, t: usize) {
        let qp = &mut self.queue_pairs[t];
        qp.covered = qp.newest;
        qp.run = 0;
        qp.put_target = None;
        self.counts.posted += 1;
        self.counts.signaled += 1;
        self.counts.flushes += 1;
        assert!(self.counts.flushes <= self.counts.signaled);
    }
}

#[cfg(test)]
mod tests {
    use super::{Signaling, default_interval};
    use crate::doorbell::WorkRequests;
    use crate::ids::{Loc, NodeId};
    use crate::op::Rmw;
    use crate::verbs::memory::WordAddress;
    use crate::verbs::request::Verb;

    const PUT: Verb = Verb::WriteInline { value: 1 };
    const WORD: WordAddress = WordAddress { addr: 64, key: 7 };

    /// Posts a put at the next position of queue pair 0; whether it was signaled.
    fn put(s: &mut Signaling, qp_seq: u64, completed: u64) -> bool {
        let signaled = s.decide(0, &PUT, completed);
        s.posted(0, qp_seq, signaled, WORD);
        signaled
    }

    #[test]
    fn the_interval_is_a_quarter_of_the_depth() {
        assert_eq!(default_interval(64), 16);
        assert_eq!(default_interval(3), 1);
        assert_eq!(default_interval(0), 1);
    }

    #[test]
    fn a_burst_of_puts_signals_the_first_and_every_interval_th() {
        let mut s = Signaling::new(2, 4);
        let signaled: Vec<u64> = (1..=12).filter(|&n| put(&mut s, n, 0)).collect();
        // The first: nothing signaled is outstanding; then every fourth.
        assert_eq!(signaled, [1, 5, 9]);
        assert_eq!(
            s.counts(),
            WorkRequests {
                posted: 12,
                signaled: 3,
                flushes: 0,
                doorbells: 0
            }
        );
        // 10..12 are covered by nothing: a wait for 11 needs a flush, at the newest put.
        assert_eq!(s.flush_target(0, 11, 0), Some(WORD));
        assert_eq!(s.flush_target(0, 9, 0), None);
        assert_eq!(s.flush_target(0, 12, 12), None, "already complete");
        assert_eq!(s.flush_position(0), 12);
        s.flushed(0);
        assert_eq!(s.flush_target(0, 12, 0), None);
        assert_eq!(s.counts().flushes, 1);
        assert_eq!(s.counts().signaled, 4);
    }

    #[test]
    fn gets_and_atomics_are_signaled_and_cover_the_puts_before_them() {
        let mut s = Signaling::new(1, 16);
        assert!(put(&mut s, 1, 0));
        assert!(!put(&mut s, 2, 0));
        let local = Loc::word(NodeId(0), 0);
        let atomic = Verb::Atomic {
            local,
            rmw: Rmw::Faa { add: 1 },
        };
        for (qp_seq, verb) in [(3, Verb::Read { local, words: 1 }), (4, atomic)] {
            assert!(s.decide(0, &verb, 0));
            s.posted(0, qp_seq, true, WORD);
        }
        assert_eq!(s.flush_target(0, 4, 0), None);
        // With the first put complete but the atomic not, the next put goes unsignaled.
        assert!(!put(&mut s, 5, 1));
    }

    #[test]
    fn a_put_on_an_idle_queue_pair_is_signaled() {
        let mut s = Signaling::new(1, 16);
        assert!(put(&mut s, 1, 0));
        assert!(!put(&mut s, 2, 0));
        // Request 1 (the only signaled one) has completed, 2 has not: nothing signaled is
        // outstanding, so 3 is signaled and covers 2 as well.
        assert!(put(&mut s, 3, 1));
        assert_eq!(s.flush_target(0, 3, 1), None);
    }

    #[test]
    fn a_refused_list_is_forgotten() {
        let mut s = Signaling::new(1, 4);
        assert!(put(&mut s, 1, 0));
        let before = s.checkpoint(0);
        assert!(!put(&mut s, 2, 0));
        assert!(!put(&mut s, 3, 0));
        s.restore(before);
        assert_eq!(s.counts().posted, 1);
        // Position 2 again, as if 2 and 3 had never been recorded.
        assert!(!put(&mut s, 2, 0));
        assert_eq!(s.flush_target(0, 2, 0), Some(WORD));
    }

    #[test]
    fn an_interval_of_one_signals_everything() {
        let mut s = Signaling::new(1, 4);
        s.set_interval(1);
        assert_eq!(s.interval(), 1);
        assert!((1..=10).all(|n| put(&mut s, n, 0)));
        assert_eq!(s.flush_target(0, 10, 0), None);
    }
}
