//! The completion bookkeeping without a device: work request ids, in-order completion,
//! flushes, failures and expiry.

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
    assert_eq!(Ticket::decode(t.wr_id()), (NodeId(3), 5, false));
    assert_eq!(
        Ticket::decode(Ticket::flush_wr_id(NodeId(3), 5)),
        (NodeId(3), 5, true)
    );
}

#[test]
fn a_flush_completes_the_requests_before_it() {
    let mut c = Completions::new(2);
    c.posted(ticket(1, 1, 1), inline_put(1));
    c.posted(ticket(2, 1, 2), inline_put(1));
    c.flushing(NodeId(1), 2);
    c.posted(ticket(3, 1, 3), inline_put(1));
    assert!(c.flush_in_flight(NodeId(1)));
    assert!(!c.no_flush_in_flight());
    assert_eq!(c.in_flight(NodeId(1)), 4);
    // A flush completion that is not the one on the NIC is ignored.
    assert_eq!(
        c.work_completion(Ticket::flush_wr_id(NodeId(1), 1), 0),
        None
    );
    assert_eq!(
        c.work_completion(Ticket::flush_wr_id(NodeId(1), 2), 0),
        Some((NodeId(1), false))
    );
    assert_eq!(c.completed(NodeId(1)), 2);
    assert!(c.no_flush_in_flight());
    assert_eq!(c.in_flight(NodeId(1)), 1);
    assert_eq!(c.take_failure(|_| true), None);
}

#[test]
fn a_failed_put_before_a_flush_keeps_its_own_failure() {
    let mut c = Completions::new(2);
    c.posted(ticket(1, 1, 1), inline_put(1));
    c.posted(ticket(2, 1, 2), inline_put(1));
    c.posted(ticket(3, 1, 3), inline_put(1));
    c.flushing(NodeId(1), 3);
    // Unsignaled put 2 fails: its error completion carries its own id; put 3 and the
    // flush are flushed after it.
    let access = WorkCompletionStatus::RemoteAccessError as u32;
    let flushed = WorkCompletionStatus::WorkRequestFlushedError as u32;
    assert_eq!(
        c.work_completion(ticket(2, 1, 2).wr_id(), access),
        Some((NodeId(1), true))
    );
    c.work_completion(ticket(3, 1, 3).wr_id(), flushed);
    assert_eq!(
        c.work_completion(Ticket::flush_wr_id(NodeId(1), 3), flushed),
        Some((NodeId(1), true))
    );
    assert_eq!(c.completed(NodeId(1)), 3);
    assert_eq!(c.take_failure(|t| t.qp_seq == 1), None);
    assert_eq!(
        c.take_failure(|t| t.qp_seq == 2),
        Some(RdmaError::RemoteAccess {
            loc: Loc::word(NodeId(1), 0)
        })
    );
    assert_eq!(
        c.take_failure(|_| true),
        Some(RdmaError::QueuePairError { node: NodeId(1) })
    );
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
    c.flushing(NodeId(1), 3);
    assert_eq!(c.in_flight(NodeId(1)), 3);
    c.expire(NodeId(1), &crashed);
    assert_eq!(c.in_flight(NodeId(1)), 0);
    assert_eq!(
        c.work_completion(Ticket::flush_wr_id(NodeId(1), 3), 0),
        None
    );
    assert_eq!(c.completed(NodeId(1)), 3);
    // A late completion of an expired request is ignored.
    assert_eq!(c.work_completion(ticket(1, 1, 1).wr_id(), 0), None);
    assert_eq!(c.take_failure(|t| t.seq == 2), Some(oob));
    assert_eq!(c.take_failure(|t| t.seq == 3), Some(crashed.clone()));
    assert_eq!(c.take_failure(|_| true), Some(crashed));
}
