//! Completion bookkeeping of one endpoint: which requests are outstanding on each queue
//! pair, which completed, and which failures nobody has reported yet.
//!
//! Requests of a queue pair complete in posting order (RC send queues complete in order),
//! so a completion of request `n` on a queue pair completes every earlier request there
//! too: that is how unsignaled requests complete (see [`super::signaling`]), and how
//! requests refused before reaching the NIC (bad addresses, broken queue pair) complete
//! in their turn. A flush's completion completes every request up to the position it
//! was posted after.

use super::request::Request;
use crate::error::RdmaError;
use crate::ids::{NodeId, WorkId};
use sideway::ibverbs::completion::WorkCompletionStatus;
use std::collections::VecDeque;

/// Bits of a work request id that hold the position on the queue pair; the bits above
/// hold the target node.
const QP_SEQ_BITS: u32 = 48;
/// The bit of a work request id that marks a flush; the position bits then hold the
/// newest request before it.
const FLUSH_BIT: u64 = 1 << (QP_SEQ_BITS - 1);

/// Identifies one posted remote operation of an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ticket {
    /// Position among every remote operation of the endpoint, from 1 (posting order).
    pub(super) seq: u64,
    /// The target node of the queue pair.
    pub(super) target: NodeId,
    /// Position on the queue pair, from 1 (posting order there).
    pub(super) qp_seq: u64,
    /// The operation's work id.
    pub(super) work_id: WorkId,
}

impl Ticket {
    /// The work request id of the ticket's request: target node and queue-pair position.
    pub(super) fn wr_id(&self) -> u64 {
        wr_id(self.target, self.qp_seq)
    }

    /// The work request id of a flush towards `target` posted after request `qp_seq`.
    pub(super) fn flush_wr_id(target: NodeId, qp_seq: u64) -> u64 {
        wr_id(target, qp_seq) | FLUSH_BIT
    }

    /// The target node and queue-pair position a work request id names, and whether it is
    /// a flush's.
    pub(super) fn decode(wr_id: u64) -> (NodeId, u64, bool) {
        let target = u16::try_from(wr_id >> QP_SEQ_BITS).expect("a work request id of ours");
        let flush = wr_id & FLUSH_BIT != 0;
        (NodeId(target), wr_id & (FLUSH_BIT - 1), flush)
    }
}

fn wr_id(target: NodeId, qp_seq: u64) -> u64 {
    assert!(qp_seq < FLUSH_BIT, "queue-pair position overflow");
    (u64::from(target.0) << QP_SEQ_BITS) | qp_seq
}

/// A request not completed yet.
#[derive(Clone, Debug)]
struct Outstanding {
    ticket: Ticket,
    /// The request, if it went to the NIC; otherwise the failure it completes with.
    fate: Result<Request, RdmaError>,
}

/// What completed so far, per queue pair, and the failures not yet reported.
#[derive(Debug)]
pub(super) struct Completions {
    /// Per target node: the requests not completed yet, oldest first.
    outstanding: Vec<VecDeque<Outstanding>>,
    /// Per target node: how many requests on the queue pair have completed.
    completed: Vec<u64>,
    /// Completed requests that failed and whose failure nobody has reported yet.
    failures: Vec<(Ticket, RdmaError)>,
    /// Per target node: the flush on the NIC, by the position of the newest request
    /// before it (at most one per queue pair).
    flushes: Vec<Option<u64>>,
}

impl Completions {
    /// No requests, for a fabric of `nodes` nodes.
    pub(super) fn new(nodes: usize) -> Completions {
        Completions {
            outstanding: vec![VecDeque::new(); nodes],
            completed: vec![0; nodes],
            failures: Vec::new(),
            flushes: vec![None; nodes],
        }
    }

    /// Records a request handed to the NIC.
    pub(super) fn posted(&mut self, ticket: Ticket, request: Request) {
        self.push(ticket, Ok(request));
    }

    /// Records a request that fails without reaching the NIC: it completes with `error`
    /// once every earlier request on its queue pair has.
    pub(super) fn refused(&mut self, ticket: Ticket, error: RdmaError) {
        self.push(ticket, Err(error));
        self.complete_refused(ticket.target);
    }

    /// How many requests on the queue pair towards `target` the NIC holds or that wait
    /// for earlier ones.
    pub(super) fn outstanding(&self, target: NodeId) -> usize {
        self.outstanding[target.index()].len()
    }

    /// How many work requests on the queue pair towards `target` went to the NIC and have
    /// not completed (the flush included).
    pub(super) fn in_flight(&self, target: NodeId) -> usize {
        let flush = usize::from(self.flushes[target.index()].is_some());
        self.outstanding[target.index()]
            .iter()
            .filter(|o| o.fate.is_ok())
            .count()
            + flush
    }

    /// Records a flush handed to the NIC on the queue pair towards `target` after request
    /// `qp_seq`.
    pub(super) fn flushing(&mut self, target: NodeId, qp_seq: u64) {
        let flush = &mut self.flushes[target.index()];
        assert!(flush.is_none(), "one flush per queue pair at a time");
        *flush = Some(qp_seq);
    }

    /// Whether a flush is on the NIC on the queue pair towards `target`.
    pub(super) fn flush_in_flight(&self, target: NodeId) -> bool {
        self.flushes[target.index()].is_some()
    }

    /// Whether no flush is on the NIC on any queue pair.
    pub(super) fn no_flush_in_flight(&self) -> bool {
        self.flushes.iter().all(Option::is_none)
    }

    /// Completes every request on the queue pair towards `target`, in order: those on the
    /// NIC with `error` (their completions are lost or will be ignored), refused ones with
    /// their own error. A flush on the NIC is forgotten (its completion will be ignored).
    pub(super) fn expire(&mut self, target: NodeId, error: &RdmaError) {
        self.flushes[target.index()] = None;
        let queue = std::mem::take(&mut self.outstanding[target.index()]);
        for front in queue {
            let result = match front.fate {
                Err(own) => Err(own),
                Ok(_) => Err(error.clone()),
            };
            Self::record(
                &mut self.completed,
                &mut self.failures,
                front.ticket,
                result,
            );
        }
        assert!(self.outstanding[target.index()].is_empty());
    }

    /// Records the work completion of the request `wr_id` with `status`.
    /// It completes every earlier request on its queue pair as well. Returns the target
    /// node and whether the completion was an error (the queue pair is then in the error
    /// state). A completion for no outstanding request (none is expected) is ignored.
    ///
    /// The completion of a flush completes every request up to the one it was posted
    /// after, successfully: a request of those that failed had an error completion of
    /// its own, which came first (completions are in order, and one in error is always
    /// generated). If the flush itself failed, the queue pair is in the error state.
    pub(super) fn work_completion(&mut self, wr_id: u64, status: u32) -> Option<(NodeId, bool)> {
        let (target, qp_seq, flush) = Ticket::decode(wr_id);
        let t = target.index();
        let queue = self.outstanding.get_mut(t)?;
        if flush {
            if self.flushes[t] != Some(qp_seq) {
                return None;
            }
            self.flushes[t] = None;
        } else if !queue.iter().any(|o| o.ticket.qp_seq == qp_seq) {
            return None;
        }
        let failed = status != WorkCompletionStatus::Success as u32;
        while queue.front().is_some_and(|o| o.ticket.qp_seq <= qp_seq) {
            let front = queue.pop_front().expect("checked");
            let done = front.ticket.qp_seq == qp_seq && !flush;
            let result = match front.fate {
                Err(error) => Err(error),
                Ok(request) if done && failed => Err(request.failure(status)),
                Ok(_) => Ok(()),
            };
            Self::record(
                &mut self.completed,
                &mut self.failures,
                front.ticket,
                result,
            );
        }
        self.complete_refused(target);
        assert!(self.completed[t] >= qp_seq);
        Some((target, failed))
    }

    /// How many requests on the queue pair towards `target` have completed.
    pub(super) fn completed(&self, target: NodeId) -> u64 {
        self.completed[target.index()]
    }

    /// Whether, on every queue pair, the first `qp_seqs[target]` requests have completed.
    pub(super) fn covers(&self, qp_seqs: &[u64]) -> bool {
        self.completed
            .iter()
            .zip(qp_seqs)
            .all(|(completed, qp_seq)| completed >= qp_seq)
    }

    /// Removes every recorded failure that `covered` selects and returns the one of the
    /// earliest posted request among them.
    pub(super) fn take_failure(&mut self, covered: impl Fn(&Ticket) -> bool) -> Option<RdmaError> {
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

    fn push(&mut self, ticket: Ticket, fate: Result<Request, RdmaError>) {
        let target = ticket.target.index();
        let newest = self.outstanding[target]
            .back()
            .map_or(self.completed[target], |o| o.ticket.qp_seq);
        assert_eq!(
            newest + 1,
            ticket.qp_seq,
            "queue-pair positions are consecutive"
        );
        self.outstanding[target].push_back(Outstanding { ticket, fate });
    }

    /// Completes the refused requests at the head of the queue pair towards `target`.
    fn complete_refused(&mut self, target: NodeId) {
        let queue = &mut self.outstanding[target.index()];
        while queue.front().is_some_and(|o| o.fate.is_err()) {
            let front = queue.pop_front().expect("checked");
            let error = front.fate.expect_err("checked");
            Self::record(
                &mut self.completed,
                &mut self.failures,
                front.ticket,
                Err(error),
            );
        }
        assert!(queue.front().is_none_or(|o| o.fate.is_ok()));
    }

    fn record(
        completed: &mut [u64],
        failures: &mut Vec<(Ticket, RdmaError)>,
        ticket: Ticket,
        result: Result<(), RdmaError>,
    ) {
        let completed = &mut completed[ticket.target.index()];
        // Queue pairs complete in order: the backend's ordering guarantee depends on it.
        assert_eq!(*completed + 1, ticket.qp_seq, "out-of-order completion");
        *completed = ticket.qp_seq;
        if let Err(error) = result {
            failures.push((ticket, error));
        }
    }
}

#[cfg(test)]
mod tests;
