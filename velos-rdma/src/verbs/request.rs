//! A remote operation as a work request: what the NIC does, and how its completion status
//! reads as an [`RdmaError`].

use super::host::has_node;
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId};
use crate::layout::Layout;
use crate::op::{Op, Rmw};
use sideway::ibverbs::completion::WorkCompletionStatus;

/// What the NIC does for a remote operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verb {
    /// RDMA WRITE of the local word.
    Write {
        /// The source word, read by the NIC when it executes the request.
        local: Loc,
    },
    /// RDMA WRITE of a value copied into the request at post (inline).
    WriteInline {
        /// The value.
        value: u64,
    },
    /// RDMA READ into the local word.
    Read {
        /// The destination word.
        local: Loc,
    },
    /// Remote atomic; the old value lands in the local word.
    Atomic {
        /// Where the old value lands.
        local: Loc,
        /// CAS or FAA.
        rmw: Rmw,
    },
}

/// A remote operation of a thread, towards the node of `remote`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Request {
    /// The target word; its node is the target of the queue pair.
    pub(super) remote: Loc,
    /// What to do.
    pub(super) verb: Verb,
}

impl Request {
    /// The request of the remote operation `op`, posted by a thread of `source`.
    ///
    /// `Err` is the failure to reply at post, as the in-process backend replies it: the
    /// target is not a node of the layout (no queue pair), or the local operand is on
    /// another node.
    pub(super) fn of(op: &Op, source: NodeId, layout: &Layout) -> Result<Request, RdmaError> {
        let (remote, verb) = match *op {
            Op::Put { remote, local, .. } => (remote, Verb::Write { local }),
            Op::PutInline { remote, value, .. } => (remote, Verb::WriteInline { value }),
            Op::Get { local, remote, .. } => (remote, Verb::Read { local }),
            Op::Atomic {
                local, remote, rmw, ..
            } => (remote, Verb::Atomic { local, rmw }),
            _ => panic!("not a remote operation: {op:?}"),
        };
        if !has_node(layout, remote.node) {
            return Err(RdmaError::UnknownNode { node: remote.node });
        }
        let request = Request { remote, verb };
        if let Some(local) = request.local().filter(|local| local.node != source) {
            return Err(RdmaError::NotLocal {
                loc: local,
                node: source,
            });
        }
        assert!(request.local().is_none_or(|local| local.node == source));
        Ok(request)
    }

    /// The target node.
    pub(super) fn target(&self) -> NodeId {
        self.remote.node
    }

    /// The local operand, if the verb has one.
    pub(super) fn local(&self) -> Option<Loc> {
        match self.verb {
            Verb::Write { local } | Verb::Read { local } | Verb::Atomic { local, .. } => {
                Some(local)
            }
            Verb::WriteInline { .. } => None,
        }
    }

    /// Checks the addresses as the in-process backend does (local operand first, then the
    /// remote word). A bad address is the request's failure, reported at its completion;
    /// it is never handed to the NIC, whose error would also break the queue pair.
    pub(super) fn check(&self, layout: &Layout) -> Result<(), RdmaError> {
        if let Some(local) = self.local() {
            layout.check(local)?;
        }
        layout.check(self.remote)?;
        Ok(())
    }

    /// The failure a work completion with the (unsuccessful) `status` reports.
    pub(super) fn failure(&self, status: u32) -> RdmaError {
        assert_ne!(
            status,
            WorkCompletionStatus::Success as u32,
            "not a failure"
        );
        let node = self.target();
        let remote_access = RdmaError::RemoteAccess { loc: self.remote };
        let error = if status == WorkCompletionStatus::RemoteAccessError as u32 {
            remote_access
        } else if status == WorkCompletionStatus::RemoteInvalidRequestError as u32 {
            match self.remote.word_index() {
                None => RdmaError::MisalignedAtomic { loc: self.remote },
                Some(_) => remote_access,
            }
        } else if status == WorkCompletionStatus::LocalProtectionError as u32
            || status == WorkCompletionStatus::LocalAccessError as u32
            || status == WorkCompletionStatus::LocalLengthError as u32
        {
            // The model has no local-access failure: the address checks at post rule it
            // out, so this means a broken registration. Report the word involved.
            RdmaError::RemoteAccess {
                loc: self.local().unwrap_or(self.remote),
            }
        } else if status == WorkCompletionStatus::RetryCounterExceededError as u32
            || status == WorkCompletionStatus::ResponderNotReadyRetryCounterExceededError as u32
            || status == WorkCompletionStatus::ResponseTimeoutError as u32
        {
            // The target stopped answering.
            RdmaError::RemoteCrashed { node }
        } else {
            // Flushed because an earlier request broke the queue pair, or a fatal error.
            RdmaError::QueuePairError { node }
        };
        assert!(!matches!(error, RdmaError::WorkFailed { .. }));
        error
    }
}
