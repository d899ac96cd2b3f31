//! Write permission on the single-process fabric (`Op::SetWriteAccess`), Mu's permission
//! switch, the way Mu makes it on a NIC: the *responder* queue pair that a peer's
//! requester is connected to loses or regains `IBV_ACCESS_REMOTE_WRITE`
//! (`ibv_modify_qp` with only `IBV_QP_ACCESS_FLAGS`, allowed in RTS), so the NIC refuses
//! that peer's RDMA WRITEs and nobody else's; reads and atomics keep their access.
//!
//! Why the queue pair's flags and not the memory region's (`ibv_rereg_mr` with
//! `IBV_REREG_MR_CHANGE_ACCESS`): a region's access holds for every requester, so a
//! per-peer switch by regions needs one region per peer over the same words and a peer
//! keyed by its own rkey; the queue pair is per peer already. Both routes are timed on
//! the device by `access::tests` (the figures are in `paper-notes/results.md`).
//!
//! A write the NIC refuses breaks both ends of its connection (the requester completes
//! it with a remote error, the responder goes to the error state: IB's class C errors).
//! As in the model, a later grant reconnects the refused peer: its requester, the next
//! time it posts towards this node, finds itself granted again ([`WriteAccess::regrant`])
//! and cycles both queue pairs of its connection through RESET back to RTS, the
//! responder with the access the node grants now (Mu cycles a queue pair through reset
//! too). Lock order: a node's [`Grants`], then a responder.

use super::connection::{Connection, Lane, SharedQp, responder_access};
use super::device::Device;
use super::error::VerbsError;
use crate::error::RdmaError;
use crate::ids::NodeId;
use crate::op::{check_writers, may_write};
use sideway::ibverbs::queue_pair::{
    ExtendedQueuePair, QueuePair, QueuePairAttribute, QueuePairAttributeMask, QueuePairState,
};
use std::sync::{Mutex, MutexGuard, PoisonError, Weak};

#[cfg(test)]
mod tests;

/// Per node of the fabric: who may write into it, and the responders that serve the
/// requesters towards it.
#[derive(Debug)]
pub(super) struct WriteAccess {
    nodes: Vec<Mutex<Grants>>,
}

/// One node's write permission and its responders.
#[derive(Debug)]
struct Grants {
    /// Bit i: node i may write (`Op::SetWriteAccess`; initially every node).
    writers: u64,
    /// The responders serving requesters towards this node, with each requester's node;
    /// gone when their endpoint went.
    responders: Vec<(NodeId, Weak<Mutex<ExtendedQueuePair>>)>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl WriteAccess {
    /// Every node of `nodes` lets every node write.
    pub(super) fn new(nodes: u16) -> WriteAccess {
        WriteAccess {
            nodes: (0..nodes)
                .map(|_| {
                    Mutex::new(Grants {
                        writers: u64::MAX,
                        responders: Vec::new(),
                    })
                })
                .collect(),
        }
    }

    /// Records the responders of `lane`, an endpoint of node `from` (each made with full
    /// access), and gives each the access its node grants `from` now.
    pub(super) fn register(&self, from: NodeId, lane: &Lane) -> Result<(), VerbsError> {
        assert_eq!(lane.connections.len(), self.nodes.len());
        for (grants, connection) in self.nodes.iter().zip(&lane.connections) {
            let responder = connection
                .responder()
                .expect("a loopback connection has its responder");
            let mut grants = lock(grants);
            if !may_write(grants.writers, from) {
                set_access(&mut lock(responder), false)?;
            }
            grants.responders.retain(|(_, r)| r.strong_count() > 0);
            grants
                .responders
                .push((from, SharedQp::downgrade(responder)));
        }
        Ok(())
    }

    /// `Op::SetWriteAccess` by a thread of `node`: from now on only `writers` may put into
    /// its words. Each responder whose access changes is modified before this returns; one
    /// in the error state (its peer's write was refused) is left for its requester to
    /// cycle with the access granted then.
    pub(super) fn set(&self, node: NodeId, writers: u64) -> Result<(), RdmaError> {
        check_writers(writers, self.nodes.len())?;
        let mut grants = lock(&self.nodes[node.index()]);
        let old = grants.writers;
        for (from, responder) in &grants.responders {
            let Some(responder) = responder.upgrade() else {
                continue;
            };
            let allow = may_write(writers, *from);
            if allow != may_write(old, *from) {
                set_access(&mut lock(&responder), allow).map_err(|error| {
                    eprintln!("velos-rdma verbs: SetWriteAccess of {node}: {error}");
                    RdmaError::Unsupported {
                        operation: "SetWriteAccess",
                        backend: "this device (it refused to change a queue pair's access)",
                    }
                })?;
            }
        }
        grants.writers = writers;
        assert_eq!(
            grants.writers, writers,
            "rule (permission): in effect on return"
        );
        Ok(())
    }

    /// Whether `from`, whose connection towards `target` broke on a refused write, is
    /// granted again: then the connection's two queue pairs are cycled through RESET to
    /// RTS (the responder with write access) and `true` returned. The caller saw every
    /// request of the connection complete.
    pub(super) fn regrant(
        &self,
        device: &Device,
        from: NodeId,
        target: NodeId,
        connection: &mut Connection,
    ) -> Result<bool, VerbsError> {
        assert!(
            connection.refused(),
            "only a refused connection is regranted"
        );
        let grants = lock(&self.nodes[target.index()]);
        if !may_write(grants.writers, from) {
            return Ok(false);
        }
        connection.cycle(device)?;
        drop(grants);
        assert!(!connection.broken(), "rule (grant reconnects)");
        Ok(true)
    }
}

/// Gives `responder` (in RTS) write access or takes it away, its read and atomic access
/// kept. A responder the NIC moved to the error state (a refused write) cannot be
/// modified: it is left as it is (its requester cycles it when granted again).
fn set_access(responder: &mut ExtendedQueuePair, write: bool) -> Result<(), VerbsError> {
    let mut attr = QueuePairAttribute::new();
    attr.setup_access_flags(responder_access(write));
    match responder.modify(&attr) {
        Ok(()) => Ok(()),
        Err(error) => {
            let (now, _) = responder
                .query(QueuePairAttributeMask::State)
                .map_err(|e| VerbsError::verbs("ibv_query_qp", e))?;
            if now.state() == QueuePairState::Error {
                Ok(())
            } else {
                Err(VerbsError::verbs("ibv_modify_qp(ACCESS_FLAGS)", error))
            }
        }
    }
}
