//! Completion bookkeeping of one endpoint: which requests are outstanding on each queue
//! pair, which completed, and which failures nobody has reported yet.
//!
//! Requests of a queue pair complete in posting order (RC send queues complete in order),
//! so a completion of request `n` on a queue pair completes every earlier request there
//! too: that is how unsignaled requests would be completed, and how requests refused
//! before reaching the NIC (bad addresses, broken queue pair) complete in their turn.

use super::request::Request;
use crate::error::RdmaError;
use crate::ids::{NodeId, WorkId};
use sideway::ibverbs::completion::WorkCompletionStatus;
use std::collections::VecDeque;

/// Bits of a work request id that hold the position on the queue pair; the bits above
/// hold the target node.
const QP_SEQ_BITS: u32 = 48;

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
        assert!(
            self.qp_seq < 1 << QP_SEQ_BITS,
            "queue-pair position overflow"
        );
        (u64::from(self.target.0) << QP_SEQ_BITS) | self.qp_seq
    }

    /// The target node and queue-pair position a work request id names.
    pub(super) fn decode(wr_id: u64) -> (NodeId, u64) {
        let target = u16::try_from(wr_id >> QP_SEQ_BITS).expect("a work request id of ours");
        (NodeId(target), wr_id & ((1 << QP_SEQ_BITS) - 1))
    }
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
}

impl Completions {
    /// No requests, for a fabric of `nodes` nodes.
    pub(super) fn new(nodes: usize) -> Completions {
        Completions {
            outstanding: vec![VecDeque::new(); nodes],
            completed: vec![0; nodes],
            failures: Vec::new(),
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

    /// How many requests on the queue pair towards `target` went to the NIC and have not
    /// completed.
    pub(super) fn in_flight(&self, target: NodeId) -> usize {
        self.outstanding[target.index()]
            .iter()
            .filter(|o| o.fate.is_ok())
            .count()
    }

    /// Completes every request on the queue pair towards `target`, in order: those on the
    /// NIC with `error` (their completions are lost or will be ignored), refused ones with
    /// their own error.
    pub(super) fn expire(&mut self, target: NodeId, error: &RdmaError) {
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
    pub(super) fn work_completion(&mut self, wr_id: u64, status: u32) -> Option<(NodeId, bool)> {
        let (target, qp_seq) = Ticket::decode(wr_id);
        let queue = self.outstanding.get_mut(target.index())?;
        if !queue.iter().any(|o| o.ticket.qp_seq == qp_seq) {
            return None;
        }
        let failed = status != WorkCompletionStatus::Success as u32;
        while let Some(front) = queue.pop_front() {
            let done = front.ticket.qp_seq == qp_seq;
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
            if done {
                break;
            }
        }
        self.complete_refused(target);
        assert!(self.completed[target.index()] >= qp_seq);
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
mod tests {
    use super::{Completions, Ticket};
    use crate::error::RdmaError;
    use crate::ids::{Loc, NodeId, WorkId};
    use crate::verbs::request::{Request, Verb};
    use sideway::ibverbs::completion::WorkCompletionStatus;

    fn ticket(seq: u64, target: u16, qp_seq: u64) -> Ticket {
        Ticket {
            seq,
            target: NodeId(target),
            qp_seq,
            work_id: WorkId(1),
        }
    }

    fn inline_put(target: u16) -> Request {
        Request {
            remote: Loc::word(NodeId(target), 0),
            verb: Verb::WriteInline { value: 7 },
        }
    }

    #[test]
    fn work_request_ids_name_the_queue_pair_and_position() {
        let t = ticket(9, 3, 5);
        assert_eq!(Ticket::decode(t.wr_id()), (NodeId(3), 5));
    }

    #[test]
    fn a_completion_completes_the_earlier_requests_of_its_queue_pair() {
        let mut c = Completions::new(2);
        c.posted(ticket(1, 1, 1), inline_put(1));
        c.posted(ticket(2, 1, 2), inline_put(1));
        assert_eq!(c.outstanding(NodeId(1)), 2);
        assert_eq!(
            c.work_completion(ticket(2, 1, 2).wr_id(), 0),
            Some((NodeId(1), false))
        );
        assert_eq!(c.completed(NodeId(1)), 2);
        assert!(c.covers(&[0, 2]));
        assert_eq!(c.take_failure(|_| true), None);
        // Nothing outstanding any more: a stray completion is ignored.
        assert_eq!(c.work_completion(ticket(2, 1, 2).wr_id(), 0), None);
    }

    #[test]
    fn refused_requests_complete_in_their_turn_with_their_error() {
        let mut c = Completions::new(2);
        let oob = RdmaError::OutOfBounds {
            loc: Loc::word(NodeId(1), 99),
        };
        c.posted(ticket(1, 1, 1), inline_put(1));
        c.refused(ticket(2, 1, 2), oob.clone());
        assert_eq!(c.completed(NodeId(1)), 0);
        c.work_completion(ticket(1, 1, 1).wr_id(), 0);
        assert_eq!(c.completed(NodeId(1)), 2);
        assert_eq!(c.take_failure(|t| t.qp_seq == 2), Some(oob));
    }

    #[test]
    fn a_failed_completion_reports_its_cause_and_the_flushed_ones_the_queue_pair() {
        let mut c = Completions::new(2);
        c.posted(ticket(1, 1, 1), inline_put(1));
        c.posted(ticket(2, 1, 2), inline_put(1));
        let access = WorkCompletionStatus::RemoteAccessError as u32;
        let flushed = WorkCompletionStatus::WorkRequestFlushedError as u32;
        assert_eq!(
            c.work_completion(ticket(1, 1, 1).wr_id(), access),
            Some((NodeId(1), true))
        );
        c.work_completion(ticket(2, 1, 2).wr_id(), flushed);
        assert_eq!(
            c.take_failure(|t| t.seq == 2),
            Some(RdmaError::QueuePairError { node: NodeId(1) })
        );
        assert_eq!(
            c.take_failure(|_| true),
            Some(RdmaError::RemoteAccess {
                loc: Loc::word(NodeId(1), 0)
            })
        );
    }

    #[test]
    fn expiring_fails_the_requests_on_the_nic_and_keeps_the_refused_ones_errors() {
        let mut c = Completions::new(2);
        let oob = RdmaError::OutOfBounds {
            loc: Loc::word(NodeId(1), 99),
        };
        let crashed = RdmaError::RemoteCrashed { node: NodeId(1) };
        c.posted(ticket(1, 1, 1), inline_put(1));
        c.refused(ticket(2, 1, 2), oob.clone());
        c.posted(ticket(3, 1, 3), inline_put(1));
        assert_eq!(c.in_flight(NodeId(1)), 2);
        c.expire(NodeId(1), &crashed);
        assert_eq!(c.in_flight(NodeId(1)), 0);
        assert_eq!(c.completed(NodeId(1)), 3);
        // A late completion of an expired request is ignored.
        assert_eq!(c.work_completion(ticket(1, 1, 1).wr_id(), 0), None);
        assert_eq!(c.take_failure(|t| t.seq == 2), Some(oob));
        assert_eq!(c.take_failure(|t| t.seq == 3), Some(crashed.clone()));
        assert_eq!(c.take_failure(|_| true), Some(crashed));
    }
}
