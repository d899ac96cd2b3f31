//! A loopback RC connection from a thread towards one node: a requester queue pair (the
//! thread's side) connected over the device's GID to a responder queue pair (the target
//! node's side), and posting work requests on it.

use super::device::Device;
use super::error::VerbsError;
use super::memory::Memory;
use super::request::{Request, Verb};
use crate::ids::NodeId;
use crate::op::Rmw;
use sideway::ibverbs::AccessFlags;
use sideway::ibverbs::address::AddressHandleAttribute;
use sideway::ibverbs::completion::{ExtendedCompletionQueue, GenericCompletionQueue};
use sideway::ibverbs::queue_pair::{
    ExtendedQueuePair, PostSendGuard, QueuePair, QueuePairAttribute, QueuePairState,
    SendOperationFlags, SetInlineData, SetScatterGatherEntry, WorkRequestFlags,
};
use std::sync::Arc;

/// Bytes of inline data a requester queue pair accepts (one word is needed).
const MAX_INLINE: u32 = 64;
/// The first packet sequence number of both directions.
const FIRST_PSN: u32 = 0;

/// A connected pair of RC queue pairs from a thread towards `target`. In this
/// single-process fabric both ends live in the endpoint; in a multi-process fabric the
/// responder would live in the target node's process.
#[derive(Debug)]
pub(super) struct Connection {
    target: NodeId,
    /// Posts the thread's requests; its completions go to the endpoint's CQ.
    requester: ExtendedQueuePair,
    /// Executes them against the target node's region. It posts nothing itself.
    responder: ExtendedQueuePair,
    /// Whether a request failed on the NIC: the requester is then in the error state and
    /// everything later on it fails (flushed).
    broken: bool,
}

impl Connection {
    /// Creates the two queue pairs, with completions on `cq`, and connects them.
    pub(super) fn connect(
        device: &Device,
        cq: &Arc<ExtendedCompletionQueue>,
        target: NodeId,
        depth: u32,
    ) -> Result<Connection, VerbsError> {
        assert!(depth >= 1);
        let build = |send_wr: u32, inline: u32| {
            device
                .pd
                .create_qp_builder()
                .setup_send_cq(GenericCompletionQueue::from(Arc::clone(cq)))
                .setup_recv_cq(GenericCompletionQueue::from(Arc::clone(cq)))
                .setup_max_send_wr(send_wr)
                .setup_max_recv_wr(1)
                .setup_max_inline_data(inline)
                .setup_send_ops_flags(
                    SendOperationFlags::Write
                        | SendOperationFlags::Read
                        | SendOperationFlags::AtomicCompareAndSwap
                        | SendOperationFlags::AtomicFetchAndAdd,
                )
                .build_ex()
                .map_err(|e| VerbsError::verbs("ibv_create_qp_ex", e))
        };
        let mut connection = Connection {
            target,
            requester: build(depth, MAX_INLINE)?,
            responder: build(1, 0)?,
            broken: false,
        };
        let (requester, responder) = (
            connection.requester.qp_number(),
            connection.responder.qp_number(),
        );
        bring_up(&mut connection.requester, device, responder)?;
        bring_up(&mut connection.responder, device, requester)?;
        assert_eq!(connection.requester.state(), QueuePairState::ReadyToSend);
        Ok(connection)
    }

    /// Whether a request failed on the NIC, which left the requester in the error state.
    pub(super) fn broken(&self) -> bool {
        self.broken
    }

    /// Notes that the requester is in the error state (a completion said so).
    pub(super) fn mark_broken(&mut self) {
        self.broken = true;
    }

    /// Moves the requester into the error state (fault injection): the NIC flushes its
    /// outstanding requests with an error, and later ones are refused.
    pub(super) fn force_error(&mut self) -> Result<(), VerbsError> {
        let mut error = QueuePairAttribute::new();
        error.setup_state(QueuePairState::Error);
        self.requester
            .modify(&error)
            .map_err(|e| VerbsError::verbs("ibv_modify_qp(ERR)", e))?;
        self.broken = true;
        assert_eq!(self.requester.state(), QueuePairState::Error);
        Ok(())
    }

    /// Posts `request` (its addresses checked) as work request `wr_id`, signaled, fenced
    /// behind every earlier read and atomic if `fence`. `Err` if the post is refused (the
    /// queue pair is then treated as broken).
    ///
    /// Every request is signaled for now. Unsignaled requests would go here: signal one
    /// in N, and let its completion complete the unsignaled ones before it (the
    /// endpoint's completion bookkeeping already completes everything up to a completed
    /// request on a queue pair).
    pub(super) fn post(
        &mut self,
        wr_id: u64,
        fence: bool,
        request: &Request,
        memory: &Memory,
    ) -> Result<(), String> {
        assert_eq!(
            request.target(),
            self.target,
            "request on the wrong queue pair"
        );
        assert!(!self.broken, "posting on a broken queue pair");
        let mut flags = WorkRequestFlags::Signaled;
        if fence {
            flags |= WorkRequestFlags::Fence;
        }
        if matches!(request.verb, Verb::WriteInline { .. }) {
            // Some providers (soft-RoCE's) tell an inline request by this flag, not by
            // `ibv_wr_set_inline_data` alone.
            flags |= WorkRequestFlags::Inline;
        }
        let remote = memory.remote(request.remote);
        let local = request.local().map(|local| memory.local(local));
        let mut guard = self.requester.start_post_send();
        let wr = guard.construct_wr(wr_id, flags);
        let sge = match request.verb {
            Verb::Write { .. } => Some(wr.setup_write(remote.key, remote.addr)),
            Verb::WriteInline { value } => {
                // Copied into the work request now: later changes of `value`'s word do not
                // matter (there is none: it is a constant of the operation).
                wr.setup_write(remote.key, remote.addr)
                    .setup_inline_data(&value.to_ne_bytes());
                None
            }
            Verb::Read { .. } => Some(wr.setup_read(remote.key, remote.addr)),
            Verb::Atomic {
                rmw: Rmw::Cas { expected, new },
                ..
            } => Some(wr.setup_atomic_compare_swap(remote.key, remote.addr, expected, new)),
            Verb::Atomic {
                rmw: Rmw::Faa { add },
                ..
            } => Some(wr.setup_atomic_fetch_add(remote.key, remote.addr, add)),
        };
        if let Some(sge) = sge {
            let local = local.expect("a verb with a local operand");
            // SAFETY: the scatter/gather entry is one word of a node's registered region,
            // checked against the layout and keyed with that region's lkey; the region
            // outlives the endpoint (the endpoint borrows the fabric) and the endpoint
            // waits for all its requests before it goes away.
            unsafe { sge.setup_sge(local.key, local.addr, 8) };
        }
        let posted = guard.post().map_err(|error| {
            let message = VerbsError::verbs("ibv_wr_complete", error).to_string();
            self.broken = true;
            message
        });
        assert!(posted.is_err() || !self.broken);
        posted
    }
}

/// Moves `qp` through INIT, RTR and RTS, connected to queue pair `remote_qpn` of the same
/// device port (loopback over the port's GID).
fn bring_up(
    qp: &mut ExtendedQueuePair,
    device: &Device,
    remote_qpn: u32,
) -> Result<(), VerbsError> {
    let access = AccessFlags::LocalWrite
        | AccessFlags::RemoteWrite
        | AccessFlags::RemoteRead
        | AccessFlags::RemoteAtomic;
    let mut init = QueuePairAttribute::new();
    init.setup_state(QueuePairState::Init)
        .setup_pkey_index(0)
        .setup_port(device.port)
        .setup_access_flags(access);
    qp.modify(&init)
        .map_err(|e| VerbsError::verbs("ibv_modify_qp(INIT)", e))?;
    let mut address = AddressHandleAttribute::new();
    address
        .setup_dest_lid(0)
        .setup_port(device.port)
        .setup_grh_src_gid_index(device.gid_index)
        .setup_grh_dest_gid(&device.gid)
        .setup_grh_hop_limit(1);
    let mut rtr = QueuePairAttribute::new();
    rtr.setup_state(QueuePairState::ReadyToReceive)
        .setup_path_mtu(device.mtu)
        .setup_dest_qp_num(remote_qpn)
        .setup_rq_psn(FIRST_PSN)
        .setup_max_dest_read_atomic(device.max_rd_atomic)
        .setup_min_rnr_timer(12)
        .setup_address_vector(&address);
    qp.modify(&rtr)
        .map_err(|e| VerbsError::verbs("ibv_modify_qp(RTR)", e))?;
    let mut rts = QueuePairAttribute::new();
    rts.setup_state(QueuePairState::ReadyToSend)
        .setup_sq_psn(FIRST_PSN)
        .setup_timeout(14)
        .setup_retry_cnt(7)
        .setup_rnr_retry(7)
        .setup_max_read_atomic(device.max_rd_atomic);
    qp.modify(&rts)
        .map_err(|e| VerbsError::verbs("ibv_modify_qp(RTS)", e))?;
    assert_eq!(qp.state(), QueuePairState::ReadyToSend);
    Ok(())
}
